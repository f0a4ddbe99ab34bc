//! Runnable Starling payloads, one per scenario: `cargo run --release --example <name>`.
//!
//! - `quickstart`: fan out squares, reduce them with a dependent task.
//! - `pi`: Monte Carlo estimate of π over N tasks.
//! - `tree_reduce`: a recursive sum where each task submits and awaits its two halves.
//! - `cluster_dag`, `cluster_big_object`, `cluster_nested`, `cluster_missing_fn`: payloads for a
//!   running cluster (`STARLING_HEAD=host:port`), used by the multi-process tests.
//! - `distributed_training`: a job payload (`starling job submit`): gradient averaging over one
//!   data shard per instance.
//! - `job_function`: a `#[starling::job]` function submitted from its own `main`.
//! - `cluster_flood`: a driver with N queued sleeping tasks (stopped with Ctrl-C by a test).
//! - `job_ending`: a job payload that ends (exit, panic, a killed task) while its tasks run.
//! - `gbdt`: gradient-boosted trees on CSV files with `starling-ml` (also a job payload).
//! - `task_api`: Ray's task API semantics (`wait`, ...), checked in whichever mode it runs.
//! - `state_api`: the state API's task records, summary and timeline, checked against what it
//!   submitted, in whichever mode it runs.

use anyhow::Context;

/// Joins the cluster at `STARLING_HEAD`, or starts a local one.
pub fn connect() -> anyhow::Result<starling::Runtime> {
    match std::env::var("STARLING_HEAD") {
        Ok(head) => starling::init_with(starling::Config::connect(&head))
            .with_context(|| format!("connect to the head at {head}")),
        Err(_) => starling::init().context("start a local cluster"),
    }
}

/// The runtime of a payload that checks the same behaviour in every mode: the in-process
/// runtime (2 executors, entered on this thread) when run with `--in-process`, otherwise
/// [`connect`]. It runs while this lives.
pub struct ChosenRuntime {
    /// Whether it is the in-process runtime.
    pub in_process: bool,
    _runtime: starling::Runtime,
    _entered: Option<starling::EnterGuard>,
}

/// Starts the runtime the arguments ask for (see [`ChosenRuntime`]).
pub fn runtime_from_args() -> anyhow::Result<ChosenRuntime> {
    if std::env::args().any(|a| a == "--in-process") {
        let runtime = starling::Runtime::in_process(2)?;
        let entered = runtime.enter();
        Ok(ChosenRuntime {
            in_process: true,
            _runtime: runtime,
            _entered: Some(entered),
        })
    } else {
        Ok(ChosenRuntime {
            in_process: false,
            _runtime: connect()?,
            _entered: None,
        })
    }
}

/// One check of a payload that checks behaviour in every mode.
pub type Check = fn() -> anyhow::Result<()>;

/// Runs the named checks in order, printing `name=ok` after each; the first that fails ends
/// the run, its error naming the check.
pub fn run_checks(checks: &[(&str, Check)]) -> anyhow::Result<()> {
    for (name, check) in checks {
        check().with_context(|| format!("check {name}"))?;
        println!("{name}=ok");
    }
    Ok(())
}

/// The node this worker process belongs to (0 outside a cluster).
pub fn this_node() -> u64 {
    std::env::var("STARLING_NODE_ID")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Waits until `path` exists (a test's signal to go on), for at most `within`.
pub fn wait_for_file(path: &std::path::Path, within: std::time::Duration) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + within;
    while !path.exists() {
        if std::time::Instant::now() > deadline {
            anyhow::bail!("{} never appeared", path.display());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(())
}
