//! The state API (`starling::state`): task records listed, filtered, counted and drawn as a
//! timeline, checked against what this program submitted.
//!
//! `cargo run --example state_api` runs it on a local cluster; `-- --in-process` on the
//! in-process runtime; with `STARLING_HEAD` set, on that cluster. It submits 20 tasks that
//! finish, 3 that panic, 2 that fail once and succeed when retried, 1 whose argument failed,
//! and an actor with 5 calls, then checks, printing `name=ok` for each: the records of each
//! function (how many, their states, attempts, errors, where they ran and when), filters, a
//! summary, one task's attempts, the actor's records and listing, a value `put` among the
//! objects and the actor's worker among the workers, and the timeline (Chrome trace JSON with
//! one slice per attempt that ran), and what tasks, the actor and a node logged
//! (`state::log`: on clusters read from the node's log files; in-process there are none). It
//! prints `trace_slices=N` and the ids it made (`sq_task=T..`) for a test to compare with the
//! command line's view; with `--hold FILE` it then keeps a task's value (`held_task=T..`) and
//! runs on until FILE exists.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, ensure, Context};
use starling::state::{self, ListOptions, LogSource, TaskKind, TaskStatus};
use starling::ObjectRef;

const LONG: Duration = Duration::from_secs(60);

#[starling::remote]
fn sq(x: u64) -> u64 {
    x * x
}

/// The task whose value `--hold` keeps.
#[starling::remote]
fn held(x: u64) -> u64 {
    x
}

#[starling::remote]
fn boom(x: u64) -> u64 {
    panic!("boom {x}");
}

/// Fails its first run (marked by a file in `dir`), succeeds on the next.
#[starling::remote]
fn flaky(dir: PathBuf, name: String) -> Result<u64, std::io::Error> {
    let mark = dir.join(name);
    if !mark.exists() {
        std::fs::write(&mark, b"ran")?;
        return Err(std::io::Error::other("first run fails"));
    }
    Ok(1)
}

#[starling::remote]
fn after_boom(x: u64) -> u64 {
    x + 1
}

/// Prints a line on each of stdout and stderr.
#[starling::remote]
fn shout(x: u64) -> u64 {
    println!("shout {x}");
    eprintln!("warn {x}");
    x
}

pub struct Tally {
    n: u64,
}

#[starling::actor]
impl Tally {
    fn new() -> Self {
        Tally { n: 0 }
    }

    fn add(&mut self, by: u64) -> u64 {
        self.n += by;
        println!("tally {}", self.n);
        self.n
    }
}

fn scratch() -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let dir = std::env::temp_dir().join(format!("starling-state-api-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::DirBuilder::new().mode(0o700).create(&dir)?;
    Ok(dir)
}

/// The records of function `name` (of this example), with more filters.
fn of(name: &str, more: &[&str]) -> anyhow::Result<Vec<state::TaskEvent>> {
    let mut o = ListOptions::new().filter(&format!("name=state_api::{name}"))?;
    for f in more {
        o = o.filter(f)?;
    }
    Ok(state::list_tasks(&o)?)
}

fn run(dir: &Path) -> anyhow::Result<()> {
    // 20 that finish, 3 that panic, 2 that fail once, 1 downstream of a panic, an actor.
    let squares: Vec<ObjectRef<u64>> = (0..20).map(sq::remote).collect();
    let booms: Vec<ObjectRef<u64>> = (0..3).map(boom::remote).collect();
    let flakies: Vec<ObjectRef<u64>> = (0..2)
        .map(|i| {
            flaky::options()
                .max_retries(1)
                .retry_exceptions(true)
                .remote(dir.to_path_buf(), format!("flaky-{i}"))
        })
        .collect();
    let downstream = after_boom::remote(&booms[0]);
    let tally = Tally::remote();
    let adds: Vec<ObjectRef<u64>> = (1..=5).map(|i| tally.add(i)).collect();

    ensure!(
        starling::get_all_timeout(&squares, LONG)?
            .iter()
            .sum::<u64>()
            == 2470
    );
    for b in &booms {
        ensure!(starling::get_timeout(b, LONG).is_err(), "boom must fail");
    }
    ensure!(starling::get_all_timeout(&flakies, LONG)? == vec![1, 1]);
    ensure!(starling::get_timeout(&downstream, LONG).is_err());
    ensure!(starling::get_all_timeout(&adds, LONG)? == vec![1, 3, 6, 10, 15]);

    // Every attempt of each function, in its final state.
    let done = of("sq", &[])?;
    ensure!(done.len() == 20, "20 records of sq, got {}", done.len());
    for e in &done {
        ensure!(e.state == TaskStatus::Finished, "{e:?}");
        ensure!(e.attempt == 0 && e.kind == TaskKind::Normal, "{e:?}");
        ensure!(
            e.node.is_some() && e.worker.is_some(),
            "where it ran: {e:?}"
        );
        ensure!(
            e.submitted_us > 0
                && e.submitted_us <= e.ready_us
                && e.ready_us <= e.started_us
                && e.started_us <= e.ended_us,
            "times in order: {e:?}"
        );
    }
    let ids: std::collections::HashSet<_> = squares.iter().map(|r| r.id().task()).collect();
    ensure!(
        done.iter().all(|e| ids.contains(&e.task)),
        "the records are of the tasks submitted"
    );
    println!("sq_task={}", squares[0].id().task());

    let failed = of("boom", &[])?;
    ensure!(failed.len() == 3, "3 records of boom: {failed:?}");
    for e in &failed {
        ensure!(e.state == TaskStatus::Failed, "{e:?}");
        ensure!(e.error_type == "panic", "{e:?}");
        ensure!(e.error.contains("boom"), "the panic message: {e:?}");
    }
    println!("boom_task={}", booms[1].id().task());

    let retried = of("flaky", &[])?;
    ensure!(
        retried.len() == 4,
        "2 attempts each of 2 flaky tasks: {retried:?}"
    );
    let first = of("flaky", &["attempt=0"])?;
    let second = of("flaky", &["attempt=1"])?;
    ensure!(
        first.len() == 2 && first.iter().all(|e| e.state == TaskStatus::Failed),
        "first attempts failed: {first:?}"
    );
    ensure!(
        first.iter().all(|e| e.error.contains("first run fails")),
        "{first:?}"
    );
    ensure!(
        second.len() == 2 && second.iter().all(|e| e.state == TaskStatus::Finished),
        "second attempts finished: {second:?}"
    );
    let attempts = state::get_task(flakies[0].id().task())?;
    ensure!(
        attempts.iter().map(|e| e.attempt).collect::<Vec<_>>() == vec![0, 1],
        "get_task gives both attempts: {attempts:?}"
    );
    println!("flaky_task={}", flakies[0].id().task());

    let up = of("after_boom", &[])?;
    ensure!(
        up.len() == 1 && up[0].state == TaskStatus::Failed && up[0].error_type == "UpstreamFailed",
        "{up:?}"
    );
    ensure!(up[0].started_us == 0, "it never ran: {up:?}");

    let calls = state::list_tasks(
        &ListOptions::new().filter(&format!("actor_id={}", tally.actor().id()))?,
    )?;
    ensure!(
        calls.len() == 6
            && calls
                .iter()
                .filter(|e| e.kind == TaskKind::ActorCall)
                .count()
                == 5
            && calls
                .iter()
                .filter(|e| e.kind == TaskKind::ActorCreation)
                .count()
                == 1
            && calls.iter().all(|e| e.state == TaskStatus::Finished),
        "the actor's creation and 5 calls: {calls:?}"
    );
    let tallies = state::list_actors(&["class_name=state_api::Tally"])?;
    ensure!(
        tallies.len() == 1 && tallies[0].id == tally.actor().id() && tallies[0].calls_served == 5,
        "list_actors finds the actor: {tallies:?}"
    );
    ensure!(
        matches!(
            state::list_actors(&["colour=red"]),
            Err(starling::Error::InvalidArgument(_))
        ),
        "an unknown actor field is refused"
    );
    println!("records=ok");

    // Objects and workers: a value put here, and the actor's worker.
    // A cluster driver's `put` reaches the head on its session stream and a listing is a
    // call of its own, so the listing may run first (Ray's state API is eventually
    // consistent too): poll, boundedly, until the value is listed.
    let kept = starling::put(vec![7u8; 4096])?;
    let only_kept = ListOptions::new().filter(&format!("object_id={}", kept.id().as_u64()))?;
    let deadline = std::time::Instant::now() + LONG;
    let mut objects = state::list_objects(&only_kept)?;
    while objects.is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
        objects = state::list_objects(&only_kept)?;
    }
    ensure!(
        objects.len() == 1
            && objects[0].state == "READY"
            && objects[0].size >= 4096
            && objects[0].handles >= 1,
        "the put value is listed: {objects:?}"
    );
    let workers = state::list_workers(
        &ListOptions::new().filter(&format!("actor_id={}", tally.actor().id()))?,
    )?;
    ensure!(
        workers.len() == 1 && workers[0].pid > 0,
        "the actor's worker: {workers:?}"
    );
    ensure!(
        !state::list_workers(&ListOptions::new())?.is_empty(),
        "workers are listed"
    );
    match state::list_objects(&ListOptions::new().filter("colour=red")?) {
        Err(starling::Error::InvalidArgument(why)) if why.contains("colour") => {}
        got => bail!("an unknown object field must be refused: {got:?}"),
    }
    drop(kept);
    println!("objects_workers=ok");

    // Filters combine; a limit keeps the newest; an unknown field is an error.
    let not_done = state::list_tasks(
        &ListOptions::new()
            .filter("state!=FINISHED")?
            .filter("name!=state_api::boom")?,
    )?;
    let mine: Vec<_> = not_done
        .iter()
        .filter(|e| e.name.starts_with("state_api::"))
        .collect();
    ensure!(
        mine.len() == 3,
        "2 failed flaky attempts and after_boom: {mine:?}"
    );
    let newest = state::list_tasks(&ListOptions::new().filter("name=state_api::sq")?.limit(5))?;
    ensure!(newest.len() == 5, "limit 5: {}", newest.len());
    match state::list_tasks(&ListOptions::new().filter("colour=red")?) {
        Err(starling::Error::InvalidArgument(why)) if why.contains("colour") => {}
        got => bail!("an unknown field must be refused: {got:?}"),
    }
    ensure!(ListOptions::new().filter("no operator").is_err());
    println!("filters=ok");

    // Counts by function and state.
    let summary = state::summarize_tasks(&ListOptions::new())?;
    let count = |name: &str, s: TaskStatus| {
        summary
            .iter()
            .find(|c| c.name == format!("state_api::{name}") && c.state == s)
            .map_or(0, |c| c.count)
    };
    ensure!(
        count("sq", TaskStatus::Finished) == 20
            && count("boom", TaskStatus::Failed) == 3
            && count("flaky", TaskStatus::Failed) == 2
            && count("flaky", TaskStatus::Finished) == 2
            && count("after_boom", TaskStatus::Failed) == 1,
        "summary: {summary:?}"
    );
    println!("summary=ok");

    logs(&tally)?;
    println!("logs=ok");

    // The timeline: one slice per attempt that ran, on its node's and worker's row.
    let trace = state::timeline(None)?;
    let json: serde_json::Value = serde_json::from_str(&trace).context("the trace is JSON")?;
    let events = json["traceEvents"]
        .as_array()
        .context("traceEvents is an array")?;
    let slices: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .filter(|e| {
            e["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("state_api::"))
        })
        .collect();
    // sq 20, boom 3, flaky 4, shout 2, the actor's creation and 5 calls; after_boom never
    // ran.
    ensure!(slices.len() == 35, "35 slices, got {}", slices.len());
    for s in &slices {
        ensure!(
            s["dur"].as_u64().is_some()
                && s["pid"].as_u64().is_some()
                && s["tid"].as_u64().is_some(),
            "a complete slice on a row: {s}"
        );
    }
    let rows = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .count();
    ensure!(rows >= 1, "worker rows are named");
    println!("trace_slices={}", slices.len());
    println!("timeline=ok");
    Ok(())
}

/// Reads `source`'s log until it holds every one of `want` (a task's output reaches its log
/// file through its node's pump, maybe just after its value came back), within `LONG`.
fn log_with(source: LogSource, want: &[&str]) -> anyhow::Result<String> {
    let mut log = state::log(source)?;
    let mut text = String::new();
    let deadline = std::time::Instant::now() + LONG;
    loop {
        text.push_str(&String::from_utf8_lossy(&log.read()?));
        if want.iter().all(|w| text.contains(w)) {
            return Ok(text);
        }
        ensure!(
            !log.ended() && std::time::Instant::now() < deadline,
            "{source:?}: the log lacks one of {want:?}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn logs(tally: &TallyHandle) -> anyhow::Result<()> {
    let shouts: Vec<ObjectRef<u64>> = (1..=2).map(shout::remote).collect();
    ensure!(starling::get_all_timeout(&shouts, LONG)? == vec![1, 2]);
    let one = shouts[0].id().task();
    println!("shout_task={one}");
    println!("tally_actor={}", tally.actor().id());
    if starling::nodes()?.iter().any(|n| n.address == "in-process") {
        // One process: tasks print to this program's own output, and no file holds it.
        match state::log(LogSource::Task(one)) {
            Err(starling::Error::NoLog(why)) if why.contains("in-process") => return Ok(()),
            got => bail!("in-process there is no log to read: {got:?}"),
        }
    }
    // A task's own lines, both streams, tagged; nothing of the task beside it.
    let text = log_with(
        LogSource::Task(one),
        &[
            &format!("[{one}] out|shout 1"),
            &format!("[{one}] err|warn 1"),
        ],
    )?;
    ensure!(
        text.lines().all(|l| l.starts_with(&format!("[{one}] "))),
        "only task {one}'s lines:\n{text}"
    );
    // The actor's process: every call's line.
    let text = log_with(
        LogSource::Actor(tally.actor().id()),
        &["tally 1\n", "tally 15"],
    )?;
    ensure!(text.contains("out|tally 6"), "{text}");
    // A node agent's own log: the worker processes it started.
    let node = state::list_tasks(&ListOptions::new().filter(&format!("task_id={one}"))?)?
        .last()
        .and_then(|e| e.node)
        .context("the shout task's node")?;
    let mut agent = state::log(LogSource::Node(node))?;
    let text = String::from_utf8_lossy(&agent.read()?).into_owned();
    ensure!(
        text.contains(&format!("registered as {node}")),
        "node {node}'s agent log:\n{text}"
    );
    ensure!(!agent.ended(), "a node's log goes on while the node is up");
    match state::log(LogSource::Task(starling::TaskId(u64::MAX >> 1))) {
        Err(starling::Error::NoLog(why)) if why.contains("no record") => {}
        got => bail!("a task never submitted has no log: {got:?}"),
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let _rt = starling_examples::runtime_from_args()?;
    let dir = scratch()?;
    let outcome = run(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    outcome?;
    // `--hold FILE`: keep a task's value (and this driver) until FILE exists, so that a test
    // can look at a live object from outside.
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--hold") {
        let file = args.get(i + 1).context("--hold takes a file")?;
        let kept = held::remote(7);
        ensure!(starling::get_timeout(&kept, LONG)? == 7);
        println!("held_task={}", kept.id().task());
        starling_examples::wait_for_file(Path::new(file), Duration::from_secs(300))?;
        drop(kept);
    }
    Ok(())
}
