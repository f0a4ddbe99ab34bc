//! Backpressure: a driver that submits faster than its tasks finish waits once the head holds
//! its limit of live tasks (`starling head --max-live-tasks`, `Config::max_live_tasks`), instead
//! of growing the head without bound; it goes on when room opens and loses nothing, and a driver
//! stopped while it waits still takes its work with it. Run with a local cluster and with a
//! head and a node agent as separate processes. (An in-process runtime has no head: its queue
//! is the program's own memory, and it is not bounded.)

mod harness;

use std::process::Command;

use harness::{examples_dir, output_within, Cluster, PAYLOAD};

const LIMIT: u64 = 1000;
/// A remote driver's batch holds up to this many ops: one batch may land past the limit before
/// the head stops reading the driver.
const BATCH: u64 = 8192;

/// `X` of `head holds X of at most Y tasks` in `starling status`.
fn held(status: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix("head holds "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no `head holds` line in:\n{status}"))
}

/// The value of `key=` in `out`.
fn value(out: &str, key: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {key}= line in:\n{out}"))
}

#[test]
fn a_local_cluster_driver_waits_at_the_limit_and_every_task_finishes() {
    let bin = examples_dir().join("cluster_flood");
    let (status, out, err) = output_within(
        Command::new(&bin)
            .args(["20000", "0", &LIMIT.to_string()])
            .env_remove("STARLING_HEAD"),
        PAYLOAD,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "cluster_flood: {status}\n{out}\n{err}");
    assert_eq!(value(&out, "done"), 20000, "{out}");
    // A local driver's submissions reach the head one at a time: it stops at the limit.
    let peak = value(&out, "peak_live");
    assert!(
        peak <= LIMIT,
        "the head held {peak} tasks at once, past its limit of {LIMIT}:\n{out}"
    );
}

#[test]
fn a_remote_driver_waits_at_the_limit_goes_on_with_room_and_can_still_be_stopped() {
    // No node yet: nothing the driver submits can run, so only backpressure stops it.
    let mut c = Cluster::start_with_head("room", 0, &["--max-live-tasks", &LIMIT.to_string()]);
    let out = c.spawn_payload("cluster_flood", &["100000", "0"]);
    c.wait_status("the flooding driver never waited for room", |s| {
        s.contains(", 1 driver(s) waiting for room")
    });
    let (_, status, _) = c.status();
    let holds = held(&status);
    c.check(
        (LIMIT..=LIMIT + BATCH).contains(&holds),
        &format!("the head holds {holds} tasks (limit {LIMIT}):\n{status}"),
    );
    let printed = std::fs::read_to_string(&out).unwrap_or_default();
    c.check(
        !printed.contains("submitted="),
        "the driver went on submitting past the head's limit",
    );

    // Stopped while it waits, the driver takes its tasks with it: the head notices it left
    // even though it reads nothing from it.
    c.interrupt("cluster_flood");
    c.wait_status("the stopped driver's tasks stayed at the head", |s| {
        held(s) == 0 && !s.contains("waiting for room")
    });

    // Again, then a node joins: tasks run, room opens, the driver goes on, nothing is lost.
    let out = c.spawn_payload("cluster_flood", &["100000", "0"]);
    c.wait_status("the second driver never waited for room", |s| {
        s.contains(", 1 driver(s) waiting for room")
    });
    c.start_agent("n1");
    let done = c.wait_line(&out, "done=", "the flood never finished");
    c.check(done == "100000", &format!("done={done}"));
    let peak: u64 = c
        .wait_line(&out, "peak_live=", "no peak reported")
        .parse()
        .unwrap_or_else(|e| c.fail(&format!("peak_live: {e}")));
    c.check(
        peak <= LIMIT + BATCH,
        &format!("the head held {peak} tasks at once (limit {LIMIT}, one batch {BATCH})"),
    );
    c.assert_running();
}
