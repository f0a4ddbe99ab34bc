//! A driver that floods a cluster: `cluster_flood N MS [LIMIT]` submits N tasks that each sleep
//! MS milliseconds, prints `submitted=N`, waits for them all, and prints `done=N` and
//! `peak_live=P`, the most tasks the head held at once. The multi-process tests stop it with
//! Ctrl-C while they are queued, to check that its work goes with it, and let it outrun the
//! head's limit of live tasks (LIMIT sets that limit on a local cluster), to check that it
//! waits for room.

use std::time::Duration;

use anyhow::Context;

/// Sleeps `ms` milliseconds.
#[starling::remote]
fn nap(ms: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(ms));
    ms
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().unwrap_or_else(|| "10000".into()).parse()?;
    let ms: u64 = args.next().unwrap_or_else(|| "1000".into()).parse()?;
    let limit: Option<usize> = args.next().map(|l| l.parse()).transpose()?;
    let rt = match (limit, std::env::var_os("STARLING_HEAD")) {
        (Some(limit), None) => {
            starling::init_with(starling::Config::default().max_live_tasks(limit))
                .context("start a local cluster")?
        }
        _ => starling_examples::connect()?,
    };
    let refs: Vec<_> = (0..n).map(|_| nap::remote(ms)).collect();
    println!("submitted={n}");
    let done = starling::get_all(&refs).context("the naps failed")?;
    println!("done={}", done.len());
    println!("peak_live={}", rt.stats().peak_live_tasks);
    Ok(())
}
