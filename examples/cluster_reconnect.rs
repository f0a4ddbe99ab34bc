//! A driver whose head restarts: the payload of a multi-process test.
//!
//! The driver runs a task, then starts one that sleeps for a minute and prints `first=3`; it
//! waits for the file named by `--go` (the test restarts the head meanwhile, on the same
//! address), then asks for the sleeping task's result, which must fail at once with `HeadLost`
//! (the head that knew the task is gone), and runs a new task, which must work over a new
//! session once a node has rejoined. Prints `key=value` lines:
//!
//! ```text
//! first=3
//! in_flight=HeadLost
//! second=5
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

#[starling::remote]
fn add(a: u64, b: u64) -> u64 {
    a + b
}

#[starling::remote]
fn sleep_ms(ms: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(ms));
    ms
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let go = args
        .iter()
        .position(|a| a == "--go")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .context("usage: cluster_reconnect --go FILE")?;
    let _rt = starling_examples::connect()?;
    let first = starling::get_timeout(&add::remote(1, 2), Duration::from_secs(60))?;
    let long = sleep_ms::remote(60_000);
    println!("first={first}");

    starling_examples::wait_for_file(&go, Duration::from_secs(120))?;
    let t = Instant::now();
    match starling::get_timeout(&long, Duration::from_secs(30)) {
        Err(starling::Error::HeadLost { .. }) => println!("in_flight=HeadLost"),
        other => bail!("the task in flight should fail with HeadLost, got {other:?}"),
    }
    println!("in_flight_ms={}", t.elapsed().as_millis());

    // The next calls open a new session; a node may still be rejoining, so the task may wait.
    let second = starling::get_timeout(&add::remote(2, 3), Duration::from_secs(60))
        .context("a task after the restart")?;
    println!("second={second}");
    Ok(())
}
