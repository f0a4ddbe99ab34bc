#[derive(Debug)]
struct Failure;

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("failure")
    }
}

#[starling::remote(num_returns = 2)]
fn split(v: Vec<u64>) -> (Vec<u64>, Vec<u64>) {
    let (a, b) = v.split_at(v.len() / 2);
    (a.to_vec(), b.to_vec())
}

#[starling::remote(num_returns = 3, num_cpus = 0.5)]
async fn three(a: u64) -> Result<(u64, String, bool), Failure> {
    Ok((a, a.to_string(), a > 1))
}

#[starling::remote(num_returns = 1)]
fn one(a: u64) -> (u64, u64) {
    (a, a)
}

#[allow(dead_code)]
fn calls() {
    let _: (starling::ObjectRef<Vec<u64>>, starling::ObjectRef<Vec<u64>>) =
        split::remote(vec![1, 2, 3]);
    let (_a, _b, _c): (
        starling::ObjectRef<u64>,
        starling::ObjectRef<String>,
        starling::ObjectRef<bool>,
    ) = three::options().num_cpus(1.0).remote(7u64);
    let _: starling::ObjectRef<(u64, u64)> = one::remote(1);
}

fn main() {}
