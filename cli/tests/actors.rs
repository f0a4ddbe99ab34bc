//! Actors, one body run in each mode: `examples/actors` on the in-process runtime, on a local
//! cluster, and against a head with two node agents as separate processes. The payload checks
//! and prints `name=ok` per check; a mode passes when every check did (in-process, all but those
//! that need a second driver process).

mod harness;

use harness::{run_example_alone, Cluster};

const CHECKS: [&str; 10] = [
    "order_and_state",
    "handle_in_a_task",
    "named",
    "kill",
    "failing_constructor",
    "restart",
    "listed",
    "async_actor",
    "threaded_actor",
    "straight_and_queued",
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

/// A node agent is SIGKILLed under two actors: the one with a restart left comes back on the
/// other node with its constructor's state, the one without fails its calls with `ActorDied`.
/// (Only with separate processes: the other modes have one node, which is the driver's.)
#[test]
fn an_actor_on_a_killed_node() {
    let mut c = Cluster::start("actors-node", 2);
    let go = c.dir.join("go");
    let out = c.spawn_payload("actors", &["--node-loss", go.to_str().expect("utf-8 path")]);
    let node = c.wait_line(&out, "actor_node=", "the payload never placed its actors");
    c.kill_node(&node);
    c.wait_alive(1);
    std::fs::write(&go, b"").expect("write the go file");
    let p = c.wait_payload("actors", &out, harness::PAYLOAD);
    c.check(
        p.get(&c, "node_loss") == "ok" && p.get(&c, "restarted_on") != node,
        &format!("after losing {node}: {:?}", p.values),
    );
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
