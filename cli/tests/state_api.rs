//! The state API, one body run in each mode: `examples/state_api` submits tasks that finish,
//! fail, are retried and fail upstream, plus an actor's calls, and checks the records, filters,
//! summary and timeline against them, printing `name=ok` per check. With a head and agents as
//! separate processes the command line is checked too: `starling list tasks`, `summary tasks`,
//! `get task`, `get object`, `timeline`, `logs --task|--actor|--node`, and that the head
//! refuses them without its token.

mod harness;

use harness::{run_example_alone, Cluster};

const CHECKS: [&str; 6] = [
    "records",
    "objects_workers",
    "filters",
    "summary",
    "timeline",
    "logs",
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
    let mut c = Cluster::start("state-api", 2);
    // The payload runs its checks, then holds a value until told to go.
    let go = c.dir.join("go");
    let stdout = c.spawn_payload("state_api", &["--hold", go.to_str().expect("utf-8 path")]);
    let held = c.wait_line(&stdout, "held_task=", "the payload holds a value");
    let text = std::fs::read_to_string(&stdout).unwrap_or_default();
    all_ok("cluster", &text, "");
    let p = harness::Payload::of("state_api", &text);

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

    // The timeline: Chrome trace JSON, one slice per attempt that ran (the held task's came
    // after the payload drew its own).
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
                    .is_some_and(|n| n.starts_with("state_api::") && n != "state_api::held")
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

    // Logs, from the node where each ran: a task's own lines (tagged, or --raw without the
    // tags), an actor's process, a node agent's.
    let shout = p.get(&c, "shout_task").to_string();
    let out = c.cli_ok(&["logs", "--task", &shout]);
    c.check(
        out.contains(&format!("[{shout}] out|shout 1"))
            && out.contains(&format!("[{shout}] err|warn 1"))
            && !out.contains("shout 2"),
        &format!("logs --task {shout}: its two lines only:\n{out}"),
    );
    let out = c.cli_ok(&["logs", "--task", &shout, "--raw"]);
    c.check(
        out.lines().any(|l| l == "shout 1") && out.lines().any(|l| l == "warn 1"),
        &format!("logs --raw: untagged lines:\n{out}"),
    );
    let tally = p.get(&c, "tally_actor").to_string();
    let out = c.cli_ok(&["logs", "--actor", &tally]);
    c.check(
        out.contains("out|tally 1\n") && out.contains("out|tally 15"),
        &format!("logs --actor {tally}: every call's line:\n{out}"),
    );
    let out = c.cli_ok(&["logs", "--node", "N1"]);
    c.check(
        out.contains("registered as N1"),
        &format!("logs --node N1: the agent's log:\n{out}"),
    );
    let (status, _, stderr) = c.cli(&["logs", "--task", "T999999999"]);
    c.check(
        !status.success() && stderr.contains("no record of task"),
        &format!("logs of a task never submitted: {stderr}"),
    );

    // One object: the value the payload holds, made by its task; a freed one is not there.
    let out = c.cli_ok(&["get", "object", &held]);
    c.check(
        out.contains("READY") && out.contains(&format!("made by task {held} (state_api::held")),
        &format!("get object {held}: {out}"),
    );
    let sq = p.get(&c, "sq_task").to_string();
    let (status, _, stderr) = c.cli(&["get", "object", &sq]);
    c.check(
        !status.success() && stderr.contains("no object"),
        &format!("get object {sq}, freed with its last ref: {stderr}"),
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

    std::fs::write(&go, b"go").expect("tell the payload to go");
    c.wait_payload("state_api", &stdout, harness::PAYLOAD);

    // Following a log ends once its process has exited (with the driver) and all was read.
    let followed = c.cli_ok(&["logs", "--task", &shout, "--follow"]);
    c.check(
        followed.contains(&format!("[{shout}] out|shout 1")) && !followed.contains("shout 2"),
        &format!("logs --follow, its process gone:\n{followed}"),
    );
}
