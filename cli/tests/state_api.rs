//! The state API, one body run in each mode: `examples/state_api` submits tasks that finish,
//! fail, are retried and fail upstream, plus an actor's calls, and checks the records, filters,
//! summary and timeline against them, printing `name=ok` per check. With a head and agents as
//! separate processes the command line is checked too: `starling list tasks`, `summary tasks`,
//! `get task`, `timeline`, and that the head refuses them without its token.

mod harness;

use harness::{run_example_alone, Cluster};

const CHECKS: [&str; 5] = [
    "records",
    "objects_workers",
    "filters",
    "summary",
    "timeline",
];

fn all_ok(mode: &str, out: &str, err: &str) {
    for check in CHECKS {
        assert!(
            out.lines().any(|l| l == format!("{check}=ok")),
            "{mode}: {check} did not pass\nstdout:\n{out}\nstderr:\n{err}"
        );
    }
}

#[test]
fn in_process() {
    let (out, err) = run_example_alone("state_api", &["--in-process"]);
    all_ok("in-process", &out, &err);
}

#[test]
fn local_cluster() {
    let (out, err) = run_example_alone("state_api", &[]);
    all_ok("local cluster", &out, &err);
}

#[test]
fn head_and_agents_as_processes() {
    let c = Cluster::start("state-api", 2);
    let (status, p, stdout) = c.run_status("state_api", &[]);
    c.check(
        status.success(),
        &format!("state_api exited with {status}:\n{stdout}"),
    );
    all_ok("cluster", &stdout, "");

    // `list tasks` as JSON: the 20 finished squares, with where they ran.
    let out = c.cli_ok(&[
        "list",
        "tasks",
        "--filter",
        "name=state_api::sq",
        "--format",
        "json",
        "--limit",
        "0",
    ]);
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).expect("a JSON array");
    c.check(rows.len() == 20, &format!("20 rows of sq: {out}"));
    c.check(
        rows.iter()
            .all(|r| r["state"] == "FINISHED" && r["node_id"].is_string()),
        &format!("finished, with a node: {out}"),
    );
    c.check(
        rows.iter().any(|r| r["task_id"] == p.get(&c, "sq_task")),
        &format!("the payload's first square is listed: {out}"),
    );

    // The table view with a limit; failures with their error type.
    let out = c.cli_ok(&["list", "tasks", "--filter", "state=FAILED", "--limit", "3"]);
    let rows = out
        .lines()
        .filter(|l| l.starts_with('T') && !l.starts_with("TASK"))
        .count();
    c.check(
        rows == 3
            && out
                .lines()
                .skip(1)
                .all(|l| !l.starts_with('T') || l.contains("FAILED")),
        &format!("3 failed attempts: {out}"),
    );
    c.check(
        out.contains("matching attempts shown"),
        &format!("a note of the rows left out: {out}"),
    );

    // The summary: a row per function with counts per state.
    let out = c.cli_ok(&["summary", "tasks"]);
    let row = |f: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(f))
            .map(|l| l.split_whitespace().map(String::from).collect::<Vec<_>>())
    };
    // FUNCTION PENDING_ARGS_AVAIL PENDING_NODE_ASSIGNMENT RUNNING FINISHED FAILED TOTAL
    c.check(
        row("state_api::sq").is_some_and(|r| r[4] == "20" && r[6] == "20"),
        &format!("sq: 20 finished: {out}"),
    );
    c.check(
        row("state_api::flaky").is_some_and(|r| r[4] == "2" && r[5] == "2"),
        &format!("flaky: 2 finished, 2 failed: {out}"),
    );

    // One task in detail: the panic's message and where it happened.
    let boom = p.get(&c, "boom_task").to_string();
    let out = c.cli_ok(&["get", "task", &boom]);
    c.check(
        out.contains("FAILED") && out.contains("panic") && out.contains("boom 1"),
        &format!("get task {boom}: {out}"),
    );
    let flaky = p.get(&c, "flaky_task").to_string();
    let out = c.cli_ok(&["get", "task", &flaky]);
    c.check(
        out.contains("attempt 0") && out.contains("attempt 1"),
        &format!("get task {flaky}: both attempts: {out}"),
    );

    // The timeline: Chrome trace JSON, one slice per attempt that ran.
    let trace = c.dir.join("trace.json");
    c.cli_ok(&["timeline", "-o", trace.to_str().expect("utf-8 path")]);
    let text = std::fs::read_to_string(&trace).expect("the trace file");
    let json: serde_json::Value = serde_json::from_str(&text).expect("trace JSON");
    let slices = json["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|e| {
            e["ph"] == "X"
                && e["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("state_api::"))
        })
        .count();
    c.check(
        slices.to_string() == p.get(&c, "trace_slices"),
        &format!(
            "{slices} slices, the payload saw {}",
            p.get(&c, "trace_slices")
        ),
    );

    // Actors and nodes come from the same head.
    let out = c.cli_ok(&["list", "actors", "--filter", "class_name=state_api::Tally"]);
    c.check(out.lines().count() == 2, &format!("one Tally actor: {out}"));
    let out = c.cli_ok(&["list", "nodes", "--format", "json"]);
    let nodes: Vec<serde_json::Value> = serde_json::from_str(&out).expect("a JSON array");
    c.check(nodes.len() == 2, &format!("two nodes: {out}"));

    // Objects and workers through the head: listed, counted, and an unknown field refused.
    let out = c.cli_ok(&["summary", "objects"]);
    c.check(out.starts_with("STATE"), &format!("summary objects: {out}"));
    let (status, _, stderr) = c.cli(&["list", "objects", "--filter", "colour=red"]);
    c.check(
        !status.success() && stderr.contains("unknown object field `colour`"),
        &format!("an unknown object field: {stderr}"),
    );
    let (status, _, stderr) = c.cli(&["list", "workers", "--filter", "colour=red"]);
    c.check(
        !status.success() && stderr.contains("unknown worker field `colour`"),
        &format!("an unknown worker field: {stderr}"),
    );

    // Without the token the head answers nothing.
    let (status, _, stderr) = harness::output_within(
        std::process::Command::new(harness::STARLING)
            .args(["list", "tasks", "--head", &c.head])
            .env_remove("STARLING_TOKEN"),
        harness::PAYLOAD,
    )
    .expect("run starling");
    c.check(
        !status.success() && stderr.contains("token"),
        &format!("refused without the token: {stderr}"),
    );
}
