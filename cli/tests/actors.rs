//! Actors, one body run in each mode: `examples/actors` on the in-process runtime, on a local
//! cluster, and against a head with two node agents as separate processes. The payload checks
//! and prints `name=ok` per check; a mode passes when every check did (in-process, all but those
//! that need a second driver process).

mod harness;

use harness::{run_example_alone, Cluster};

const CHECKS: [&str; 8] = [
    "order_and_state",
    "handle_in_a_task",
    "named",
    "kill",
    "failing_constructor",
    "restart",
    "listed",
    "async_actor",
];

/// Checks that need other processes to join the runtime: not in-process.
const CLUSTER_CHECKS: [&str; 1] = ["second_driver_and_detached"];

fn all_ok(mode: &str, out: &str, err: &str) {
    let cluster = (mode != "in-process").then_some(CLUSTER_CHECKS.iter());
    for check in CHECKS.iter().chain(cluster.into_iter().flatten()) {
        assert!(
            out.lines().any(|l| l == format!("{check}=ok")),
            "{mode}: {check} did not pass\nstdout:\n{out}\nstderr:\n{err}"
        );
    }
}

#[test]
fn in_process() {
    let (out, err) = run_example_alone("actors", &["--in-process"]);
    all_ok("in-process", &out, &err);
}

#[test]
fn local_cluster() {
    let (out, err) = run_example_alone("actors", &[]);
    all_ok("local cluster", &out, &err);
}

#[test]
fn head_and_agents_as_processes() {
    let c = Cluster::start("actors", 2);
    let (status, _, stdout) = c.run_status("actors", &[]);
    c.check(
        status.success(),
        &format!("actors exited with {status}:\n{stdout}"),
    );
    all_ok("cluster", &stdout, "");
}
