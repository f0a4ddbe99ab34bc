//! `max_concurrency` is for async functions that are not streaming.

#[starling::remote(max_concurrency = 4)]
fn not_async(a: i64) -> i64 {
    a
}

#[starling::remote(max_concurrency = 4)]
async fn streaming(n: u64) -> impl Iterator<Item = u64> {
    0..n
}

#[starling::remote]
fn sync_fn(a: i64) -> i64 {
    a
}

fn main() {
    // A function that is not async has no such option.
    let _ = sync_fn::options().max_concurrency(2).remote(1);
}
