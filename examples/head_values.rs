//! Many small results kept alive at once: 48 tasks each return 64 KiB (small enough to be
//! held by the head, not a node), all kept, then read back by the driver and passed to tasks.
//! With the head's `--value-budget` under 3 MiB, most of them are on the head's disk. Prints
//! `key=value` lines:
//!
//! ```text
//! made=48
//! driver_ok=true     # every value read back by the driver is what its task made
//! tasks_ok=true      # and so is every value a task was given as an argument
//! ```
//!
//! `--go FILE`: after `made=`, waits for FILE to exist (a test looks at the head meanwhile).

use anyhow::Context;

const N: u64 = 48;
const LEN: usize = 64 << 10;

fn pattern(i: u64) -> Vec<u8> {
    (0..LEN).map(|k| (k as u64 * 31 + i) as u8).collect()
}

#[starling::remote]
fn make(i: u64) -> Vec<u8> {
    pattern(i)
}

#[starling::remote]
fn check(i: u64, value: Vec<u8>) -> bool {
    value == pattern(i)
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let go = args
        .iter()
        .position(|a| a == "--go")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    starling_examples::connect()?;
    let refs: Vec<_> = (0..N).map(make::remote).collect();
    for r in &refs {
        starling::wait(std::slice::from_ref(r), 1, None).context("wait for a value")?;
    }
    println!("made={N}");
    if let Some(go) = go {
        starling_examples::wait_for_file(&go, std::time::Duration::from_secs(120))?;
    }
    let mut driver_ok = true;
    for (i, r) in refs.iter().enumerate() {
        driver_ok &= starling::get(r).context("get a value")? == pattern(i as u64);
    }
    println!("driver_ok={driver_ok}");
    let checks: Vec<_> = refs
        .iter()
        .enumerate()
        .map(|(i, r)| check::remote(i as u64, r))
        .collect();
    let tasks_ok = starling::get_all(&checks)?.into_iter().all(|ok| ok);
    println!("tasks_ok={tasks_ok}");
    Ok(())
}
