//! A driver that floods a cluster: `cluster_flood N MS` submits N tasks that each sleep MS
//! milliseconds, prints `submitted=N`, and waits for them all. The multi-process tests stop it
//! with Ctrl-C while they are queued, to check that its work goes with it.

use std::time::Duration;

use anyhow::Context;

/// Sleeps `ms` milliseconds.
#[starling::remote]
fn nap(ms: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(ms));
    ms
}

fn main() -> anyhow::Result<()> {
    let _rt = starling_examples::connect()?;
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().unwrap_or_else(|| "10000".into()).parse()?;
    let ms: u64 = args.next().unwrap_or_else(|| "1000".into()).parse()?;
    let refs: Vec<_> = (0..n).map(|_| nap::remote(ms)).collect();
    println!("submitted={n}");
    let done = starling::get_all(&refs).context("the naps failed")?;
    println!("done={}", done.len());
    Ok(())
}
