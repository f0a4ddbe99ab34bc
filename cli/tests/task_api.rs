//! Ray's task API semantics, one body run in each mode: `examples/task_api` on the in-process
//! runtime, on a local cluster, and against a head with two node agents as separate processes.
//! The payload checks and prints `name=ok` per check; a mode passes when every check did.

mod harness;

use harness::{run_example_alone, Cluster};

const CHECKS: [&str; 18] = [
    "refs_as_values",
    "nested_lifetime",
    "refs_through_processes",
    "streaming",
    "multiple_returns",
    "wait_exact",
    "wait_timeout",
    "wait_refusals",
    "quiet_session",
    "force_cancel",
    "recursive_cancel",
    "placement",
    "threads_get",
    "async_io",
    "async_concurrency",
    "retry_filter",
    "env_vars",
    "store_reuse",
];

fn all_ok(mode: &str, out: &str, err: &str) {
    // The payload's figures (how soon force-cancelled CPUs ran a new task), for the log.
    for line in err.lines().filter(|l| l.starts_with("force_cancel:")) {
        eprintln!("{mode}: {line}");
    }
    for check in CHECKS {
        assert!(
            out.lines().any(|l| l == format!("{check}=ok")),
            "{mode}: {check} did not pass\nstdout:\n{out}\nstderr:\n{err}"
        );
    }
    // `placement` left two tasks of one shape no node can hold: the driver warned once.
    let warnings: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("cannot run on any node now"))
        .collect();
    assert!(
        warnings.len() == 1 && warnings[0].contains("no_such_thing"),
        "{mode}: not warned exactly once of the infeasible tasks: {warnings:?}\n{err}"
    );
}

#[test]
fn in_process() {
    let (out, err) = run_example_alone("task_api", &["--in-process"]);
    all_ok("in-process", &out, &err);
}

#[test]
fn local_cluster() {
    let (out, err) = run_example_alone("task_api", &[]);
    all_ok("local cluster", &out, &err);
}

#[test]
fn head_and_agents_as_processes() {
    let c = Cluster::start("task-api", 2);
    let (status, _, stdout) = c.run_status("task_api", &[]);
    c.check(
        status.success(),
        &format!("task_api exited with {status}:\n{stdout}"),
    );
    // The payload's stderr, as `run_status` keeps it (`task_api-<run>.log`; one run here).
    let err: String = std::fs::read_dir(&c.dir)
        .expect("the cluster's directory")
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("task_api-") && name.ends_with(".log")
        })
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    all_ok("cluster", &stdout, &err);
}
