//! Which GPUs tasks are given: two one-GPU tasks held at once, one two-GPU task, two tasks of
//! half a GPU held at once, and a task that asked for none. Each reports what
//! `starling::gpu_ids()`, `CUDA_VISIBLE_DEVICES` and `STARLING_GPU_IDS` showed it, as
//! `ids|cuda|starling` (`-` for a variable that is unset). Prints `key=value` lines:
//!
//! ```text
//! one_a=0|0|0
//! one_b=1|1|1
//! two=0,1|0,1|0,1
//! half_a=0|0|0
//! half_b=0|0|0
//! none=||
//! ```
//!
//! `--in-process` runs it on threads of this process (a node declaring 2 GPUs), where only
//! `gpu_ids()` can say which GPUs a task holds; without it, the cluster at `STARLING_HEAD` (its
//! nodes declare GPUs with `--num-gpus` / `--gpu-ids`) or a local cluster declaring 2 GPUs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

/// How long a held task, or the driver, waits for the other side.
const WAIT: Duration = Duration::from_secs(60);

fn seen() -> String {
    let var = |name| std::env::var(name).unwrap_or_else(|_| "-".to_string());
    format!(
        "{}|{}|{}",
        starling::gpu_ids().join(","),
        var("CUDA_VISIBLE_DEVICES"),
        var("STARLING_GPU_IDS")
    )
}

/// Says it started (the file `<dir>/<name>`), then holds its GPUs until `<dir>/go` exists.
#[starling::remote]
fn hold(dir: PathBuf, name: String) -> String {
    let what = seen();
    std::fs::write(dir.join(&name), &what).expect("write the started file");
    starling_examples::wait_for_file(&dir.join("go"), WAIT).expect("the driver's go");
    what
}

#[starling::remote]
fn look() -> String {
    seen()
}

#[starling::remote]
fn pid() -> u32 {
    std::process::id()
}

/// Waits until tasks have run in two worker processes: both are up and idle, so two tasks
/// submitted together start side by side (a task submitted while a node's workers are still
/// starting may be queued behind a running one).
fn two_workers_up() -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + WAIT;
    let mut seen = std::collections::HashSet::new();
    while seen.len() < 2 {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "tasks ran in {} worker process(es) only",
            seen.len()
        );
        let pids = [pid::remote(), pid::remote()];
        for p in &pids {
            seen.insert(starling::get(p)?);
        }
    }
    Ok(())
}

/// Runs two `hold` tasks of `gpus` GPUs each and releases them once both have started (so
/// they held their GPUs at the same time).
fn hold_two(dir: &Path, gpus: f64, names: [&str; 2]) -> anyhow::Result<[String; 2]> {
    let round = dir.join(names[0]);
    std::fs::create_dir_all(&round)?;
    let refs = names.map(|n| {
        hold::options()
            .num_gpus(gpus)
            .remote(round.clone(), n.to_string())
    });
    for n in names {
        starling_examples::wait_for_file(&round.join(n), WAIT)
            .with_context(|| format!("tasks of {gpus} GPU never ran side by side"))?;
    }
    std::fs::write(round.join("go"), b"")?;
    let [a, b] = refs;
    Ok([starling::get(&a)?, starling::get(&b)?])
}

fn main() -> anyhow::Result<()> {
    let in_process = std::env::args().any(|a| a == "--in-process");
    let _rt = if in_process {
        let rt = starling::Runtime::with_config(
            starling::Config::in_process()
                .threads(4)
                .resource("GPU", 2.0),
        )?;
        let guard = rt.enter();
        Some((rt, guard))
    } else {
        None
    };
    let _cluster = match (in_process, std::env::var("STARLING_HEAD")) {
        (true, _) => None,
        (false, Ok(_)) => Some(starling_examples::connect()?),
        (false, Err(_)) => Some(
            starling::init_with(starling::Config::default().threads(2).resource("GPU", 2.0))
                .context("start a local cluster")?,
        ),
    };
    if !in_process {
        two_workers_up()?;
    }
    let dir = std::env::temp_dir().join(format!("starling-gpu-tasks-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let [a, b] = hold_two(&dir, 1.0, ["one_a", "one_b"])?;
    println!("one_a={a}");
    println!("one_b={b}");
    println!(
        "two={}",
        starling::get(&look::options().num_gpus(2.0).remote())?
    );
    let [a, b] = hold_two(&dir, 0.5, ["half_a", "half_b"])?;
    println!("half_a={a}");
    println!("half_b={b}");
    println!("none={}", starling::get(&look::remote())?);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
