#[starling::remote(num_cpu = 2)]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

fn main() {}
