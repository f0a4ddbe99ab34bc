//! A job payload that ends in a way it is told to while its tasks still run, for the tests of
//! what a job that ends gives back.
//!
//! `job_ending DIR END`: one task per instance of the job, each pinned to its node, marks its
//! start with a file `DIR/started-<instance>-<pid>` and then sleeps for five minutes without
//! ever checking for cancellation (only stopping its process stops it). Once every task has
//! started, the entrypoint prints `holding=<n>` and ends as `END` says:
//!
//! - `exit0` / `exit1`: exits with that code at once;
//! - `panic`: panics;
//! - `wait`: waits for the tasks (until the job is cancelled or its node lost);
//! - `task-killed`: one more task kills its own worker process with SIGKILL (no retries), and
//!   the entrypoint, whose `get` fails, exits with code 1.
//!
//! Submit it to a pool: `starling job submit --pool p --target-instances 3
//! target/release/examples/job_ending -- /tmp/d exit1`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// Holds a worker process for five minutes; marks its start first.
#[starling::remote]
fn hold(dir: String, instance: u64) -> u64 {
    let mark = Path::new(&dir).join(format!("started-{instance}-{}", std::process::id()));
    std::fs::write(&mark, b"").expect("write the start mark");
    println!(
        "holding on node {} (instance {instance})",
        starling_examples::this_node()
    );
    std::thread::sleep(Duration::from_secs(300));
    instance
}

/// Kills the worker process it runs in, as the out-of-memory killer would.
#[starling::remote]
fn die() -> u64 {
    let pid = std::process::id().to_string();
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid])
        .status();
    std::thread::sleep(Duration::from_secs(60));
    0
}

fn started(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("started-"))
            .count()
    })
}

fn main() -> anyhow::Result<()> {
    let _rt = starling_examples::connect()?;
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(end)) = (args.next(), args.next()) else {
        bail!("usage: job_ending DIR exit0|exit1|panic|wait|task-killed");
    };
    let dir = PathBuf::from(dir);
    let nodes = starling::nodes()?;
    let held: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(k, n)| {
            hold::options()
                .node_affinity(n.id, false)
                .remote(dir.display().to_string(), k as u64)
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    while started(&dir) < held.len() {
        if Instant::now() > deadline {
            bail!("only {} of {} tasks started", started(&dir), held.len());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("holding={}", held.len());
    match end.as_str() {
        "exit0" => std::process::exit(0),
        "exit1" => std::process::exit(1),
        "panic" => panic!("the entrypoint gives up"),
        "wait" => {
            starling::get_all(&held).context("the held tasks failed")?;
            Ok(())
        }
        "task-killed" => {
            let r = die::options().max_retries(0).remote();
            starling::get(&r).context("a task died")?;
            Ok(())
        }
        other => bail!("unknown ending `{other}`"),
    }
}
