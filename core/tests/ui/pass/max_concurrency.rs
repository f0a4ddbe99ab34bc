//! `max_concurrency` on an async function: as a default in the attribute, and per call.

#[starling::remote(max_concurrency = 8, num_cpus = 0.25)]
async fn fetch(url: String) -> usize {
    url.len()
}

#[starling::remote]
async fn plain(n: u64) -> Result<u64, std::io::Error> {
    Ok(n)
}

fn main() {
    let _ = || {
        let a: starling::ObjectRef<usize> = fetch::remote("a".to_string());
        let b: starling::ObjectRef<usize> = fetch::options().max_concurrency(2).remote("b");
        let c: starling::ObjectRef<u64> = plain::options().max_concurrency(4).remote(1u64);
        (a, b, c)
    };
}
