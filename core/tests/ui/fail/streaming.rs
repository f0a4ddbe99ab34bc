#[starling::remote(num_returns = 2)]
fn pairs(n: u64) -> impl Iterator<Item = (u64, u64)> {
    (0..n).map(|i| (i, i))
}

#[starling::remote]
fn unnamed(n: u64) -> impl Iterator<Item = std::rc::Rc<u64>> {
    (0..n).map(std::rc::Rc::new)
}

#[starling::job(pool = "p")]
fn job_stream(n: u64) -> impl Iterator<Item = u64> {
    0..n
}

fn main() {}
