//! Nested tasks over a cluster: `sum_range(lo, hi)` splits its range, submits a task for each
//! half and waits for both (a worker blocked in `get` lends its CPU back, so the tree never
//! deadlocks however deep it is). Prints `key=value` lines:
//!
//! ```text
//! n=1024
//! sum=523776         # 0 + 1 + .. + (n - 1)
//! ```
//!
//! Connects to the head in `STARLING_HEAD`, or starts a local cluster when it is unset:
//! `STARLING_HEAD=127.0.0.1:6380 cargo run --example cluster_nested -- 1024`.

use anyhow::Context;

/// Ranges up to this length are summed in one task.
const LEAF: u64 = 128;

#[starling::remote]
fn sum_range(lo: u64, hi: u64) -> Result<u64, starling::Error> {
    if hi - lo <= LEAF {
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
        .transpose()
        .context("the argument is the length of the range to sum")?
        .unwrap_or(1024);
    starling_examples::connect()?;
    let sum = starling::get(&sum_range::remote(0, n)).context("get the sum")?;
    println!("n={n}");
    println!("sum={sum}");
    Ok(())
}
