//! Recursive tree reduction with nested tasks: `sum_range(lo, hi)` splits its range in two,
//! submits a task for each half and waits for both. Waiting inside a task lends its CPU back,
//! so this works even with a single executor thread.

use std::time::Instant;

use anyhow::Context;

#[starling::remote]
fn sum_range(lo: u64, hi: u64) -> Result<u64, starling::Error> {
    if hi - lo <= 64 {
        return Ok((lo..hi).sum());
    }
    let mid = lo + (hi - lo) / 2;
    let left = sum_range::remote(lo, mid);
    let right = sum_range::remote(mid, hi);
    Ok(starling::get(&left)? + starling::get(&right)?)
}

fn main() -> anyhow::Result<()> {
    let n: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1 << 16);
    let threads: usize = std::env::args()
        .nth(2)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(2);
    let t0 = Instant::now();
    starling::init_with(starling::Config::default().threads(threads))
        .context("start the runtime")?;
    let total = starling::get(&sum_range::remote(0, n)).context("get the sum")?;
    let dt = t0.elapsed();
    assert_eq!(total, n * (n - 1) / 2);
    let tasks = 2 * n.div_ceil(64) - 1;
    println!("sum of 0..{n} = {total} via ~{tasks} nested tasks on {threads} CPU(s)");
    println!("took {:.1} ms", dt.as_secs_f64() * 1e3);
    Ok(())
}
