//! Ray's task API, checked where this runs: the payload of `cli/tests/task_api.rs`, which runs
//! it in each mode (in-process with `--in-process`, a local cluster, and the cluster at
//! `STARLING_HEAD`). Each check prints `name=ok`, or the payload fails saying what differed.
//!
//! ```text
//! wait_exact=ok
//! wait_timeout=ok
//! wait_refusals=ok
//! quiet_session=ok
//! force_cancel=ok
//! recursive_cancel=ok
//! placement=ok
//! threads_get=ok
//! async_io=ok
//! retry_filter=ok
//! refs_as_values=ok
//! nested_lifetime=ok
//! refs_through_processes=ok
//! multiple_returns=ok
//! streaming=ok
//! store_reuse=ok
//! ```

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};
use starling::ObjectRef;
use starling_examples::Check;

const LONG: Duration = Duration::from_secs(60);

/// One check of the API: `Ok` when Starling behaved as Ray does.

#[starling::remote]
fn add(a: u64, b: u64) -> u64 {
    a + b
}

#[starling::remote]
fn sleep_ms(ms: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(ms));
    ms
}

/// Holds until the file `go` exists (the driver's signal), so the driver knows it has not
/// settled while it checks, whatever the timing; gives up after [`LONG`].
#[starling::remote]
fn hold(go: PathBuf) -> u64 {
    let deadline = Instant::now() + LONG;
    while !go.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    7
}

/// A fresh scratch directory for one check.
fn scratch(name: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("starling-task-api-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Waits (bounded by [`LONG`]) until `cond` holds.
fn until(what: &str, cond: impl Fn() -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + LONG;
    while !cond() {
        ensure!(Instant::now() < deadline, "gave up waiting: {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// Says it started (a line in `dir/started`), then keeps its CPU busy without ever asking
/// whether it was cancelled, until `dir/stop` exists or `dir` is gone (or [`LONG`] passes).
#[starling::remote]
fn spin(dir: PathBuf) -> u64 {
    use std::io::Write;
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("started"))
    {
        let _ = f.write_all(b"x\n");
    }
    let (stop, deadline) = (dir.join("stop"), Instant::now() + LONG);
    let mut x = 0u64;
    // The driver removes `dir` when it is done with the check: that stops it too.
    while !stop.exists() && dir.exists() && Instant::now() < deadline {
        for _ in 0..100_000 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
    }
    x
}

/// Notes that it started (`dir/child-started`), then holds like [`hold`].
#[starling::remote]
fn marked_hold(dir: PathBuf) -> u64 {
    let _ = std::fs::write(dir.join("child-started"), b"");
    let deadline = Instant::now() + LONG;
    // The driver removes `dir` when it is done with the check: that lets it go too.
    while !dir.join("go").exists() && dir.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    7
}

/// Submits a child that holds until `dir/go` exists, waits for it, and notes in `dir/child`
/// how that wait ended.
#[starling::remote]
fn parent(dir: PathBuf) -> u64 {
    let child = marked_hold::remote(dir.clone());
    let how = match starling::get(&child) {
        Ok(v) => format!("value {v}"),
        Err(starling::Error::Cancelled { .. }) => "cancelled".to_string(),
        Err(e) => format!("error {e}"),
    };
    let _ = std::fs::write(dir.join("child"), how);
    1
}

/// A child pinned to `node`; with `depth > 0` it waits for a grandchild of its own from a
/// scoped thread, so the wait of a task's thread is nested inside another.
#[starling::remote]
fn pinned_child(node: starling::NodeId, i: u64, depth: u32) -> u64 {
    if depth == 0 {
        return i + 1;
    }
    std::thread::scope(|s| {
        s.spawn(|| {
            let grandchild =
                pinned_child::options()
                    .node_affinity(node, false)
                    .remote(node, i, depth - 1);
            starling::get(&grandchild).expect("the grandchild")
        })
        .join()
        .expect("the scoped thread")
    })
}

/// Holds every CPU of `node` and waits for `n` children pinned to that node, each from a
/// thread of its own (spawned, then from a `std::thread::scope`), joining the threads: the
/// children can run only if the waits of those threads lend this task's CPUs.
#[starling::remote]
fn threads_parent(node: starling::NodeId, n: u64) -> u64 {
    let child = move |i: u64, depth: u32| {
        starling::get(
            &pinned_child::options()
                .node_affinity(node, false)
                .remote(node, i, depth),
        )
        .expect("a child")
    };
    let spawned: Vec<_> = (0..n)
        .map(|i| std::thread::spawn(move || child(i, 0)))
        .collect();
    let mut sum: u64 = spawned
        .into_iter()
        .map(|h| h.join().expect("a thread"))
        .sum();
    std::thread::scope(|s| {
        let scoped: Vec<_> = (0..n).map(|i| s.spawn(move || child(i, 1))).collect();
        sum += scoped
            .into_iter()
            .map(|h| h.join().expect("a scoped thread"))
            .sum::<u64>();
    });
    sum
}

/// A task that holds all its node's CPUs and waits for its children from threads it spawned
/// (and a thread scope, nested) finishes: any `get` inside a task lends its CPUs, whatever
/// thread calls it.
fn threads_get() -> anyhow::Result<()> {
    let node = starling::nodes()?
        .into_iter()
        .find(|n| n.alive && n.resources.get("CPU") >= 1.0)
        .context("a node with a CPU")?;
    let cpus = node.resources.get("CPU");
    let n = 3;
    let parent = threads_parent::options()
        .num_cpus(cpus)
        .node_affinity(node.id, false)
        .remote(node.id, n);
    let sum = starling::get_timeout(&parent, LONG).context("the parent")?;
    // Each child returns its index plus one, spawned and scoped: twice 1 + 2 + .. + n.
    ensure!(sum == n * (n + 1), "the children's sum: {sum}");
    Ok(())
}

/// An async task with network I/O and timers: it serves one connection on a loopback port
/// and echoes `msg` to itself through it.
#[starling::remote]
async fn echo_over_loopback(msg: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("its address");
    let server = async move {
        let (mut s, _) = listener.accept().await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        s.write_all(&buf).await?;
        s.shutdown().await?;
        std::io::Result::Ok(())
    };
    let client = async move {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let mut c = tokio::net::TcpStream::connect(addr).await?;
        c.write_all(msg.as_bytes()).await?;
        c.shutdown().await?;
        let mut back = String::new();
        c.read_to_string(&mut back).await?;
        std::io::Result::Ok(back)
    };
    let (served, echoed) = tokio::join!(server, client);
    served.expect("the server side");
    echoed.expect("the client side")
}

/// `async fn` tasks run on a runtime with I/O and timers enabled.
fn async_io() -> anyhow::Result<()> {
    let back = starling::get_timeout(&echo_over_loopback::remote("ping".to_string()), LONG)?;
    ensure!(back == "ping", "echoed {back:?}");
    Ok(())
}

/// Notes itself in `dir` (a file `started-i`), then waits, with tokio's timers, until `n` tasks
/// have; so it ends only if `n` of its tasks run at the same time (or after [`LONG`]). Echoes
/// over loopback on the way (tokio I/O in a task run beside others). Returns whether all `n`
/// met, its process and its thread.
#[starling::remote(max_concurrency = 4, num_cpus = 0.0)]
async fn gather(i: u64, n: usize, dir: PathBuf) -> (bool, u32, String) {
    let echoed = echo_over_loopback(format!("task {i}")).await;
    assert_eq!(echoed, format!("task {i}"));
    std::fs::write(dir.join(format!("started-{i}")), b"").expect("note the start");
    let deadline = Instant::now() + LONG;
    let met = loop {
        let started = std::fs::read_dir(&dir)
            .map(|d| d.filter(|e| e.is_ok()).count())
            .unwrap_or(0);
        if started >= n {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let thread = format!("{:?}", std::thread::current().id());
    (met, std::process::id(), thread)
}

/// Notes `dir/started-i`, then waits (asynchronously) until it is cancelled, and notes
/// `dir/saw-cancel-i` when it sees it (or gives up after [`LONG`]).
#[starling::remote(max_concurrency = 4, num_cpus = 0.0)]
async fn until_cancelled(i: u64, dir: PathBuf) -> u64 {
    std::fs::write(dir.join(format!("started-{i}")), b"").expect("note the start");
    let deadline = Instant::now() + LONG;
    while !starling::is_cancelled() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    if starling::is_cancelled() {
        std::fs::write(dir.join(format!("saw-cancel-{i}")), b"").expect("note the cancel");
    }
    i
}

/// `max_concurrency`: one worker runs several tasks of an async function at once.
fn async_concurrency() -> anyhow::Result<()> {
    let dir = scratch("async-concurrency")?;
    // Four tasks that can end only together: with `max_concurrency = 4`, one worker (a
    // process, or in-process an executor thread) runs all four. They hold no CPU, so tasks of
    // earlier checks still running cannot keep them apart (what each holds is the scheduler's
    // tests' business).
    let refs: Vec<_> = (0..4).map(|i| gather::remote(i, 4, dir.clone())).collect();
    let got = starling::get_all_timeout(&refs, LONG + LONG)?;
    ensure!(
        got.iter().all(|g| g.0),
        "the tasks did not all run at once: {got:?}"
    );
    // One worker: in-process an executor thread, in a cluster a worker process.
    let one_worker = |g: &(bool, u32, String)| {
        g.1 == got[0].1 && (!IN_PROCESS.load(Ordering::Relaxed) || g.2 == got[0].2)
    };
    ensure!(
        got.iter().all(one_worker),
        "not one worker ran them: {got:?}"
    );
    std::fs::remove_dir_all(&dir)?;
    // The limit set for one call: two tasks that allow two at once meet too.
    let dir = scratch("async-concurrency-2")?;
    let pair: Vec<_> = (0..2)
        .map(|i| {
            gather::options()
                .max_concurrency(2)
                .remote(i, 2, dir.clone())
        })
        .collect();
    let got = starling::get_all_timeout(&pair, LONG + LONG)?;
    ensure!(got.iter().all(|g| g.0), "a pair did not meet: {got:?}");
    std::fs::remove_dir_all(&dir)?;
    // Tasks running together are cancelled one by one: each sees its own cancel.
    let dir = scratch("async-concurrency-cancel")?;
    let both: Vec<_> = (0..2)
        .map(|i| until_cancelled::remote(i, dir.clone()))
        .collect();
    until("both tasks started", || {
        (0..2).all(|i| dir.join(format!("started-{i}")).exists())
    })?;
    for r in &both {
        starling::cancel(r, false)?;
    }
    until("each task saw its cancel", || {
        (0..2).all(|i| dir.join(format!("saw-cancel-{i}")).exists())
    })?;
    for r in &both {
        match starling::get_timeout(r, LONG) {
            Err(starling::Error::Cancelled { .. }) => {}
            other => bail!("a cancelled task run together with another: {other:?}"),
        }
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// Counts its runs in `dir/name`; the first two fail with a `ParseIntError`.
#[starling::remote]
fn parse_flaky(dir: PathBuf, name: String) -> Result<u64, std::num::ParseIntError> {
    if count_run(&dir.join(name)) <= 2 {
        return "not a number".parse::<u64>();
    }
    Ok(7)
}

/// Counts its runs in `dir/name`; the first two fail with an `io::Error`.
#[starling::remote]
fn io_flaky(dir: PathBuf, name: String) -> Result<u64, std::io::Error> {
    if count_run(&dir.join(name)) <= 2 {
        return Err(std::io::Error::other("not yet"));
    }
    Ok(7)
}

/// Counts its runs in `dir/name`; the first two panic.
#[starling::remote(max_retries = 3, retry_exceptions = [std::io::Error, panic])]
fn panic_flaky(dir: PathBuf, name: String) -> u64 {
    if count_run(&dir.join(name)) <= 2 {
        panic!("not yet");
    }
    7
}

/// Appends a line to `path`; returns how many it has now (this run's number).
fn count_run(path: &std::path::Path) -> usize {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .expect("the run log");
    f.write_all(b"x\n").expect("a run");
    lines(path)
}

/// `retry_exceptions` with a list of error types retries those types only, as Ray's
/// `retry_exceptions=[..]`: a listed error runs the task again, another fails it at once.
fn retry_filter() -> anyhow::Result<()> {
    let dir = scratch("retry")?;
    let listed = parse_flaky::options()
        .max_retries(3)
        .retry_on::<std::num::ParseIntError>()
        .remote(dir.clone(), "listed".to_string());
    ensure!(
        starling::get_timeout(&listed, LONG)? == 7,
        "the listed error"
    );
    ensure!(lines(&dir.join("listed")) == 3, "two retries, then a value");

    let other = io_flaky::options()
        .max_retries(3)
        .retry_on::<std::num::ParseIntError>()
        .remote(dir.clone(), "other".to_string());
    match starling::get_timeout(&other, LONG) {
        Err(starling::Error::TaskFailed { cause, .. }) if cause.type_name.contains("io::error") => {
        }
        got => bail!("an error of a type not listed: {got:?}"),
    }
    ensure!(lines(&dir.join("other")) == 1, "not retried");

    // The attribute's list: `[std::io::Error, panic]`.
    let panics = panic_flaky::remote(dir.clone(), "panics".to_string());
    ensure!(starling::get_timeout(&panics, LONG)? == 7, "a listed panic");
    ensure!(lines(&dir.join("panics")) == 3, "two retries, then a value");
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// The value of `TASK_API_COLOR` in the process that runs it (`None`: unset), and its pid.
#[starling::remote]
fn env_color() -> (Option<String>, u32) {
    (std::env::var("TASK_API_COLOR").ok(), std::process::id())
}

/// `env_vars` (Ray's `runtime_env` env_vars): a task runs in a worker process started with its
/// variables, which no task of another environment shares. In-process, where every task runs
/// in this one process, a task with variables fails as unschedulable, saying why.
fn env_vars() -> anyhow::Result<()> {
    ensure!(
        std::env::var_os("TASK_API_COLOR").is_none(),
        "the driver must not have TASK_API_COLOR set"
    );
    let blue = || env_color::options().env_var("TASK_API_COLOR", "blue");
    if IN_PROCESS.load(Ordering::Relaxed) {
        match starling::get_timeout(&blue().remote(), LONG) {
            Err(starling::Error::Unschedulable { reason, .. }) if reason.contains("in-process") => {
            }
            other => bail!("a task with env_vars in-process: {other:?}"),
        }
        ensure!(starling::get_timeout(&env_color::remote(), LONG)?
            .0
            .is_none());
        return Ok(());
    }
    let (seen, blue_pid) = starling::get_timeout(&blue().remote(), LONG)?;
    ensure!(seen.as_deref() == Some("blue"), "a blue task saw {seen:?}");
    let (seen, green_pid) = starling::get_timeout(
        &env_color::options()
            .env_vars([("TASK_API_COLOR", "green"), ("TASK_API_OTHER", "1")])
            .remote(),
        LONG,
    )?;
    ensure!(
        seen.as_deref() == Some("green"),
        "a green task saw {seen:?}"
    );
    ensure!(
        green_pid != blue_pid,
        "blue and green tasks shared a process"
    );
    // Plain tasks never run in those processes, however many run at once.
    let plain: Vec<_> = (0..8).map(|_| env_color::remote()).collect();
    for (seen, pid) in starling::get_all_timeout(&plain, LONG)? {
        ensure!(seen.is_none(), "a plain task saw TASK_API_COLOR={seen:?}");
        ensure!(
            pid != blue_pid && pid != green_pid,
            "a plain task ran in a blue or green worker"
        );
    }
    // The same variables again (in another order: one environment) run where blue ones run.
    let again: Vec<_> = (0..4).map(|_| blue().remote()).collect();
    for (seen, _) in starling::get_all_timeout(&again, LONG)? {
        ensure!(seen.as_deref() == Some("blue"), "a blue task saw {seen:?}");
    }
    // Variables no process could be started with are refused, saying why.
    for (name, why) in [("A=B", "NAME=VALUE"), ("STARLING_JOB_ID", "Starling's own")] {
        match starling::get_timeout(&env_color::options().env_var(name, "x").remote(), LONG) {
            Err(starling::Error::Unschedulable { reason, .. }) if reason.contains(why) => {}
            other => bail!("a task with the variable {name}: {other:?}"),
        }
    }
    Ok(())
}

fn lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |s| s.lines().count())
}

/// `cancel(force = true)` stops tasks that never ask whether they were cancelled: they fail
/// with `Cancelled` at once, are never retried (they had retries left), and their CPUs run
/// other tasks within a second.
fn force_cancel() -> anyhow::Result<()> {
    let dir = scratch("force")?;
    let cpus: f64 = starling::nodes()?
        .iter()
        .filter(|n| n.alive)
        .map(|n| n.resources.get("CPU"))
        .sum();
    let n = cpus.round().max(1.0) as usize;
    let spinning: Vec<_> = (0..n)
        .map(|_| spin::options().max_retries(3).remote(dir.clone()))
        .collect();
    until("every spinning task started", || {
        lines(&dir.join("started")) == n
    })?;
    let t = Instant::now();
    for r in &spinning {
        starling::cancel(r, true)?;
    }
    for r in &spinning {
        match starling::get_timeout(r, LONG) {
            Err(starling::Error::Cancelled { .. }) => {}
            other => bail!("a force-cancelled task: {other:?}"),
        }
    }
    // Every CPU was busy: this runs only on one they gave back.
    let v = starling::get_timeout(&add::remote(1, 2), LONG).context("a task after the cancel")?;
    let freed = t.elapsed();
    ensure!(v == 3, "it returned {v}");
    let more: Vec<_> = (0..2 * n as u64).map(|i| add::remote(i, 1)).collect();
    starling::get_all_timeout(&more, LONG).context("tasks on every freed CPU")?;
    ensure!(
        lines(&dir.join("started")) == n,
        "a force-cancelled task ran again: {} starts for {n} tasks",
        lines(&dir.join("started"))
    );
    eprintln!("force_cancel: {n} busy CPU(s) ran a new task {freed:?} after the cancel");
    ensure!(
        freed < Duration::from_secs(1),
        "the CPUs came back only after {freed:?}"
    );
    std::fs::write(dir.join("stop"), b"")?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Cancelling a task cancels the tasks it submitted: the parent's `get` on its held child
/// ends with `Cancelled` instead of holding until the child is let go.
fn recursive_cancel() -> anyhow::Result<()> {
    let dir = scratch("recursive")?;
    let p = parent::remote(dir.clone());
    until("the parent's child is running", || {
        dir.join("child-started").exists()
    })?;
    starling::cancel(&p, false)?;
    match starling::get_timeout(&p, LONG) {
        Err(starling::Error::Cancelled { .. }) => {}
        other => bail!("the cancelled parent: {other:?}"),
    }
    // `fs::write` creates the file before it writes: wait for what it says, not that it exists.
    until("the parent saw its child end", || {
        std::fs::read_to_string(dir.join("child")).is_ok_and(|s| !s.is_empty())
    })?;
    let how = std::fs::read_to_string(dir.join("child"))?;
    std::fs::write(dir.join("go"), b"")?;
    let _ = std::fs::remove_dir_all(&dir);
    ensure!(
        how == "cancelled",
        "the child of a cancelled task ended with {how}"
    );
    Ok(())
}

/// Hard affinity to a node that does not exist fails with `Unschedulable` (soft affinity runs
/// anywhere), and a task that waits says why, in every mode.
fn placement() -> anyhow::Result<()> {
    let nowhere = starling::NodeId(999_999);
    match starling::get_timeout(
        &add::options().node_affinity(nowhere, false).remote(1, 2),
        LONG,
    ) {
        Err(starling::Error::Unschedulable { reason, .. }) if reason.contains("unknown") => {}
        other => bail!("hard affinity to no node: {other:?}"),
    }
    let soft = add::options().node_affinity(nowhere, true).remote(1, 2);
    ensure!(starling::get_timeout(&soft, LONG)? == 3, "soft affinity");

    let held = Blocker::new("pending");
    let waiting = add::remote(&held.task, 1);
    until("a reason for the task waiting on its argument", || {
        starling::pending_reason(&waiting).is_some_and(|r| r.contains("waiting for 1 argument"))
    })?;
    // Two of one shape: the user is warned once (on stderr, checked by the test that runs this).
    let impossible: Vec<_> = (0..2)
        .map(|i| add::options().resources("no_such_thing", 1.0).remote(i, 1))
        .collect();
    for r in &impossible {
        until("a reason for the task no node can hold", || {
            starling::pending_reason(r)
                .is_some_and(|r| r.starts_with("infeasible") && r.contains("no_such_thing"))
        })?;
    }
    for r in &impossible {
        starling::cancel(r, false)?;
    }
    held.release()?;
    ensure!(
        starling::get_timeout(&waiting, LONG)? == 8,
        "the task after its argument"
    );
    ensure!(
        starling::pending_reason(&waiting).is_none(),
        "a finished task has no pending reason"
    );
    Ok(())
}

/// A task that does not settle until [`Blocker::release`].
struct Blocker {
    go: PathBuf,
    task: starling::ObjectRef<u64>,
}

impl Blocker {
    fn new(name: &str) -> Blocker {
        let go =
            std::env::temp_dir().join(format!("starling-task-api-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&go);
        let task = hold::remote(go.clone());
        Blocker { go, task }
    }

    /// Lets it finish, and checks that it did.
    fn release(self) -> anyhow::Result<()> {
        std::fs::write(&self.go, b"")?;
        let v = starling::get_timeout(&self.task, LONG).context("the held task")?;
        let _ = std::fs::remove_file(&self.go);
        ensure!(v == 7, "the held task returned {v}");
        Ok(())
    }
}

/// `wait` returns at most `num_returns` refs as ready, the first settled ones in input order,
/// and every other ref as not ready, in input order (as `ray.wait`).
fn wait_exact() -> anyhow::Result<()> {
    let held = Blocker::new("exact");
    let fast: Vec<_> = (0..3).map(|i| add::remote(i, 1)).collect();
    starling::get_all_timeout(&fast, LONG).context("the fast tasks")?;
    let all = vec![
        fast[0].clone(),
        held.task.clone(),
        fast[1].clone(),
        fast[2].clone(),
    ];
    let (ready, rest) = starling::wait(&all, 2, Some(LONG))?;
    ensure!(
        ready == [fast[0].clone(), fast[1].clone()],
        "wait(2) did not give the first two settled: {ready:?}"
    );
    ensure!(
        rest == [held.task.clone(), fast[2].clone()],
        "the rest, in input order: {rest:?}"
    );
    let (ready, rest) = starling::wait(&all, 1, None)?;
    ensure!(
        ready == [fast[0].clone()] && rest.len() == 3,
        "wait(1): {ready:?} / {rest:?}"
    );
    let (ready, rest) = starling::wait(&all, 3, Some(LONG))?;
    ensure!(
        ready == [fast[0].clone(), fast[1].clone(), fast[2].clone()] && rest == [held.task.clone()],
        "wait(3): {ready:?} / {rest:?}"
    );
    held.release()
}

/// With a timeout, `wait` returns what is ready by then, fewer than asked for.
fn wait_timeout() -> anyhow::Result<()> {
    let held = Blocker::new("timeout");
    let quick = add::remote(1, 1);
    starling::get_timeout(&quick, LONG)?;
    let refs = [held.task.clone(), quick.clone()];
    let t = Instant::now();
    let (ready, rest) = starling::wait(&refs, 2, Some(Duration::from_millis(100)))?;
    ensure!(
        t.elapsed() < Duration::from_secs(10),
        "wait did not stop at its timeout"
    );
    ensure!(
        ready == [quick] && rest == [held.task.clone()],
        "{ready:?} / {rest:?}"
    );
    held.release()
}

/// A session the head sends nothing but "alive" for longer than `SILENCE_LIMIT` (a driver and
/// a worker process both waiting on one long task) stays up: quiet is not lost.
fn quiet_session() -> anyhow::Result<()> {
    let ms = starling_proto::security::SILENCE_LIMIT.as_millis() as u64 + 2_000;
    let long = sleep_ms::remote(ms);
    let v = starling::get_timeout(&long, LONG).context("a task longer than the silence limit")?;
    ensure!(v == ms, "it returned {v}");
    let after = starling::get_timeout(&add::remote(2, 3), LONG).context("a task after it")?;
    ensure!(after == 5, "the next task returned {after}");
    Ok(())
}

/// What `ray.wait` refuses, refused with a typed error; nothing is waited for.
fn wait_refusals() -> anyhow::Result<()> {
    let a = add::remote(1, 2);
    let b = add::remote(3, 4);
    match starling::wait(&[a.clone(), b.clone(), a.clone()], 1, Some(LONG)) {
        Err(starling::Error::DuplicateRef(id)) if id == a.id() => {}
        other => bail!("duplicate refs: {other:?}"),
    }
    for n in [0, 3] {
        match starling::wait(&[a.clone(), b.clone()], n, Some(LONG)) {
            Err(starling::Error::WaitCount {
                num_returns,
                refs: 2,
            }) if num_returns == n => {}
            other => bail!("num_returns {n} of 2: {other:?}"),
        }
    }
    let (ready, rest) = starling::wait::<u64>(&[], 1, None)?;
    ensure!(ready.is_empty() && rest.is_empty(), "an empty wait");
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// ObjectRefs as values
// ---------------------------------------------------------------------------------------------

/// Sums the values behind refs that came inside its argument.
#[starling::remote]
fn sum_refs(refs: Vec<ObjectRef<u64>>) -> u64 {
    refs.iter()
        .map(|r| starling::get(r).expect("a nested ref"))
        .sum()
}

/// Counts the refs in its argument without reading any: it must not wait for them.
#[starling::remote]
fn count_refs(refs: Vec<ObjectRef<u64>>) -> usize {
    refs.len()
}

/// A value holding a ref, as user code writes one.
#[derive(serde::Serialize, serde::Deserialize)]
struct Labelled {
    label: String,
    value: ObjectRef<u64>,
}

/// Returns refs it made: `put`s for even `i`, submitted tasks for odd ones.
#[starling::remote]
fn make_refs(n: u64) -> Vec<Labelled> {
    (0..n)
        .map(|i| Labelled {
            label: format!("r{i}"),
            value: if i % 2 == 0 {
                starling::put(i).expect("put inside a task")
            } else {
                add::remote(i, 100)
            },
        })
        .collect()
}

fn refs_as_values() -> anyhow::Result<()> {
    // Refs inside an argument: the task reads them.
    let refs = vec![
        starling::put(1u64)?,
        add::remote(2, 3),
        starling::put(10u64)?,
    ];
    let sum = starling::get_timeout(&sum_refs::remote(refs.clone()), LONG)?;
    ensure!(sum == 16, "sum of nested refs: {sum}");
    // A nested ref is not a dependency: the task runs while it is pending.
    let dir = scratch("refs-as-values")?;
    let pending = hold::remote(dir.join("go"));
    let n = starling::get_timeout(&count_refs::remote(vec![pending.clone()]), LONG)?;
    ensure!(n == 1, "count_refs saw {n} refs");
    let (ready, _) = starling::wait(std::slice::from_ref(&pending), 1, Some(Duration::ZERO))?;
    ensure!(ready.is_empty(), "the nested ref's task was waited for");
    std::fs::write(dir.join("go"), b"")?;
    ensure!(starling::get_timeout(&pending, LONG)? == 7);
    // Refs a task made, returned inside its value; read after the value's own ref is gone.
    let made = starling::get_timeout(&make_refs::remote(4), LONG)?;
    for (i, l) in made.iter().enumerate() {
        let want = if i % 2 == 0 { i as u64 } else { i as u64 + 100 };
        let got = starling::get_timeout(&l.value, LONG).with_context(|| l.label.clone())?;
        ensure!(
            got == want && l.label == format!("r{i}"),
            "{}: {got}",
            l.label
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Objects in the directory now, as `starling status` counts them.
///
/// Status is answered apart from this driver's session, so releases this driver already sent
/// may not have reached the directory yet. A task submitted on the same session is a barrier:
/// the session is ordered, so once its result is back, every earlier release was applied. Its
/// own result is one of the objects counted, and is left out.
///
/// A result can be back before the scheduler hears that its task ended (in-process, the
/// executor stores the value first), and a result whose task has not ended still counts even
/// with no ref left: so the count is read once no task runs (these checks run nothing else
/// meanwhile), which also covers the probe of the previous call.
fn objects() -> anyhow::Result<u64> {
    let probe = add::remote(0, 0);
    ensure!(starling::get_timeout(&probe, LONG)? == 0, "the probe task");
    let rt = starling::current().context("a runtime")?;
    let n = std::cell::Cell::new(0);
    until("no task running", || {
        let s = rt.stats();
        n.set(s.objects);
        s.running_tasks == 0
    })?;
    let n = n.get();
    drop(probe);
    n.checked_sub(1)
        .context("the probe's result was not counted")
}

/// Waits until the directory holds exactly `n` objects.
fn objects_become(n: u64, what: &str) -> anyhow::Result<()> {
    until(&format!("{n} objects ({what})"), || {
        objects().is_ok_and(|o| o == n)
    })
    .with_context(|| format!("objects now: {:?}", objects().ok()))
}

/// Bytes of the large value in `nested_lifetime`: past the size values travel inline.
const LARGE: usize = 300_000;

/// The sum of the bytes of a large value and of the value its ref points to.
#[starling::remote]
fn large_sum(value: (Vec<u8>, Vec<ObjectRef<u64>>)) -> u64 {
    let inner = starling::get(&value.1[0]).expect("the ref inside the large value");
    value.0.iter().map(|&b| b as u64).sum::<u64>() + inner
}

/// A large value holding a ref to an object this task puts.
#[starling::remote]
fn make_large() -> (Vec<u8>, Vec<ObjectRef<u64>>) {
    let inner = starling::put(7u64).expect("put inside a task");
    (vec![3u8; LARGE], vec![inner])
}

fn nested_lifetime() -> anyhow::Result<()> {
    let base = objects()?;
    // An object referred to only from inside another one's value.
    let inner = starling::put(vec![5u8; 1000])?;
    let outer = starling::put(vec![inner.clone()])?;
    drop(inner);
    objects_become(base + 2, "the inner object lives in the outer one")?;
    let again: Vec<ObjectRef<Vec<u8>>> = starling::get_timeout(&outer, LONG)?;
    ensure!(starling::get_timeout(&again[0], LONG)? == vec![5u8; 1000]);
    drop(again);
    objects_become(base + 2, "both live while the outer one does")?;
    drop(outer);
    objects_become(base, "the outer one freed, the inner one with it")?;
    // The same for a value large enough to go into a node's store file (on a cluster it is
    // encoded straight into the file), read back here and by a task.
    let inner = starling::put(7u64)?;
    let large = starling::put((vec![3u8; LARGE], vec![inner.clone()]))?;
    drop(inner);
    objects_become(base + 2, "the inner object lives in the large one")?;
    let summed = starling::get_timeout(&large_sum::remote(&large), LONG)?;
    ensure!(
        summed == 3 * LARGE as u64 + 7,
        "a task read {summed} from the large value"
    );
    let (bytes, refs) = starling::get_timeout(&large, LONG)?;
    ensure!(
        bytes == vec![3u8; LARGE],
        "the large value came back changed"
    );
    ensure!(starling::get_timeout(&refs[0], LONG)? == 7);
    drop(refs);
    drop(large);
    objects_become(base, "the large one freed, the inner one with it")?;
    // A task's large result holding a ref (on a cluster, encoded straight into the store).
    let made = make_large::remote();
    let summed = starling::get_timeout(&large_sum::remote(&made), LONG)?;
    ensure!(
        summed == 3 * LARGE as u64 + 7,
        "a task read {summed} from a large result"
    );
    let (bytes, refs) = starling::get_timeout(&made, LONG)?;
    ensure!(
        bytes == vec![3u8; LARGE],
        "the large result came back changed"
    );
    ensure!(starling::get_timeout(&refs[0], LONG)? == 7);
    drop(refs);
    objects_become(base + 2, "a large result and the ref inside it")?;
    drop(made);
    objects_become(base, "the large result freed, its ref with it")?;
    // The same through a task's result: its refs live while the result does.
    let made = make_refs::remote(2);
    let got = starling::get_timeout(&made, LONG)?;
    drop(got);
    objects_become(base + 3, "a result and the two refs inside it")?;
    drop(made);
    objects_become(base, "the result freed, its refs with it")?;
    Ok(())
}

/// Passes its refs on to a task (in another worker process, where there are several), which
/// keeps them on a thread of its own after it returns.
#[starling::remote]
fn relay(refs: Vec<ObjectRef<u64>>, dir: PathBuf) -> u64 {
    starling::get(&keep_refs::remote(refs, dir)).expect("keep_refs")
}

/// Keeps `refs` on a detached thread until `dir` is removed (or [`LONG`] passes), and notes in
/// `dir/held` that it holds them.
#[starling::remote]
fn keep_refs(refs: Vec<ObjectRef<u64>>, dir: PathBuf) -> u64 {
    let n = refs.len() as u64;
    let held = dir.join("held");
    std::thread::spawn(move || {
        let _ = std::fs::write(&held, b"");
        let deadline = Instant::now() + LONG;
        while dir.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        drop(refs);
    });
    n
}

fn refs_through_processes() -> anyhow::Result<()> {
    let base = objects()?;
    let dir = scratch("refs-through-processes")?;
    let x = starling::put(42u64)?;
    let r = relay::remote(vec![x.clone()], dir.clone());
    ensure!(starling::get_timeout(&r, LONG)? == 1);
    until("keep_refs holds the ref", || dir.join("held").exists())?;
    drop(r);
    drop(x);
    // The driver, the relay and the result are done with it; a thread of keep_refs holds it.
    objects_become(base + 1, "only the ref held by keep_refs' thread")?;
    std::fs::remove_dir_all(&dir)?;
    objects_become(base, "the last holder dropped it")?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Multiple returns
// ---------------------------------------------------------------------------------------------

#[starling::remote(num_returns = 3)]
fn three_ways(n: u64) -> (u64, String, Vec<u64>) {
    (n * 2, format!("n={n}"), (0..n).collect())
}

#[starling::remote]
fn len_of(v: Vec<u64>) -> u64 {
    v.len() as u64
}

#[starling::remote(num_returns = 2)]
fn fail_two(fail: bool) -> Result<(u64, u64), String> {
    if fail {
        Err("asked to fail".into())
    } else {
        Ok((1, 2))
    }
}

/// Two returns, once `dir/go` exists or `dir` is gone.
#[starling::remote(num_returns = 2)]
fn hold_two(dir: PathBuf) -> (u64, u64) {
    (marked_hold(dir.clone()), marked_hold(dir))
}

fn multiple_returns() -> anyhow::Result<()> {
    let (a, b, c) = three_ways::remote(4);
    ensure!(starling::get_timeout(&a, LONG)? == 8);
    ensure!(starling::get_timeout(&b, LONG)? == "n=4");
    ensure!(starling::get_timeout(&c, LONG)? == vec![0, 1, 2, 3]);
    // Each return is an object of its own: a dependency, freed on its own.
    let base = objects()?;
    let (x, y, z) = three_ways::remote(5);
    ensure!(starling::get_timeout(&add::remote(&x, 1), LONG)? == 11);
    ensure!(starling::get_timeout(&len_of::remote(&z), LONG)? == 5);
    objects_become(base + 3, "three returns")?;
    drop(y);
    objects_become(base + 2, "one return dropped")?;
    drop((x, z));
    objects_become(base, "every return dropped")?;
    // A failure reaches every return.
    let (p, q) = fail_two::remote(true);
    for r in [&p, &q] {
        match starling::get_timeout(r, LONG) {
            Err(starling::Error::TaskFailed { cause, .. }) if cause.message == "asked to fail" => {}
            other => bail!("a return of a failed task: {other:?}"),
        }
    }
    let (p, q) = fail_two::remote(false);
    ensure!(starling::get_all_timeout(&[p, q], LONG)? == vec![1, 2]);
    // A later return names its task: cancelling it cancels the task, so both returns.
    let dir = scratch("multiple-returns")?;
    let (first, second) = hold_two::remote(dir.clone());
    starling::cancel(&second, false)?;
    for r in [&first, &second] {
        match starling::get_timeout(r, LONG) {
            Err(starling::Error::Cancelled { .. }) => {}
            other => bail!("a return of a cancelled task: {other:?}"),
        }
    }
    // The task runs on (a cancel without force only tells it): removing `dir` ends it. Its
    // second hold may note that it started while `dir` is being removed: remove it again then.
    until("the held task's directory is removed", || {
        std::fs::remove_dir_all(&dir).is_ok() || !dir.exists()
    })?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Streaming returns
// ---------------------------------------------------------------------------------------------

/// Yields `n` items; before item 1 it waits until `dir/go` exists (or `dir` is gone, or
/// [`LONG`] passed), so the caller can take item 0 while the task surely still runs.
#[starling::remote]
fn stream_held(n: u64, dir: PathBuf) -> impl Iterator<Item = String> {
    (0..n).map(move |i| {
        if i == 1 {
            let deadline = Instant::now() + LONG;
            while dir.exists() && !dir.join("go").exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        format!("item {i}")
    })
}

/// `0..n`, or an error before any item for more than 10,000.
#[starling::remote]
fn stream_numbers(n: u64) -> Result<impl Iterator<Item = u64>, String> {
    if n > 10_000 {
        return Err(format!("{n} is too many"));
    }
    Ok(0..n)
}

/// Yields `0..n`, then panics.
#[starling::remote]
fn stream_breaks(n: u64) -> starling::Generator<u64> {
    starling::Generator::new((0..).inspect(move |&i| {
        assert!(i < n, "the stream broke at item {i}");
    }))
}

/// Sums the items of a stream it submits itself (a task consuming a stream).
#[starling::remote]
fn sum_stream(n: u64) -> u64 {
    stream_numbers::options()
        .backpressure(4)
        .remote(n)
        .map(|item| starling::get(&item.expect("an item")).expect("its value"))
        .sum()
}

fn streaming() -> anyhow::Result<()> {
    let base = objects()?;
    // Each item is an object of its own, freed with its last ref.
    let mut five = stream_numbers::remote(5);
    let refs: Vec<ObjectRef<u64>> = five.by_ref().collect::<Result<_, _>>()?;
    let done = five.completed().clone();
    ensure!(starling::get_timeout(&done, LONG)? == 5);
    drop(five);
    objects_become(base + 6, "five items and the count")?;
    ensure!(starling::get_all_timeout(&refs[3..], LONG)? == vec![3, 4]);
    drop(refs);
    objects_become(base + 1, "the items dropped")?;
    drop(done);
    objects_become(base, "the count dropped")?;
    {
        // Items come as the task yields them: item 0 is taken while the task waits to yield item 1.
        let dir = scratch("streaming")?;
        let mut items = stream_held::remote(3, dir.clone());
        let first = items.next().context("item 0")??;
        ensure!(starling::get_timeout(&first, LONG)? == "item 0");
        let done = items.completed().clone();
        let (ready, _) = starling::wait(std::slice::from_ref(&done), 1, Some(Duration::ZERO))?;
        ensure!(ready.is_empty(), "the task ended before it was let go on");
        std::fs::write(dir.join("go"), b"")?;
        let rest: Vec<String> = items
            .by_ref()
            .map(|r| Ok(starling::get_timeout(&r?, LONG)?))
            .collect::<anyhow::Result<_>>()?;
        ensure!(rest == ["item 1", "item 2"], "{rest:?}");
        ensure!(items.next().is_none(), "an item after the end");
        ensure!(starling::get_timeout(&done, LONG)? == 3);
        std::fs::remove_dir_all(&dir)?;

        // In order, every one, at some scale.
        let got: Vec<u64> = stream_numbers::remote(2000)
            .map(|r| Ok(starling::get_timeout(&r?, LONG)?))
            .collect::<anyhow::Result<_>>()?;
        ensure!(
            got == (0..2000).collect::<Vec<_>>(),
            "items out of order or missing"
        );

        // A task that fails mid-stream: its items, then its error, then the end.
        let mut broken = stream_breaks::remote(3);
        for want in 0..3u64 {
            let item = broken.next().context("an item before the failure")??;
            ensure!(starling::get_timeout(&item, LONG)? == want);
        }
        match broken.next() {
            Some(Err(starling::Error::TaskFailed { cause, .. }))
                if cause.message.contains("the stream broke at item 3") => {}
            other => bail!("after the items of a failed stream: {other:?}"),
        }
        ensure!(broken.next().is_none(), "something after the failure");
        // An `Err` before any item.
        match stream_numbers::remote(20_000).next() {
            Some(Err(starling::Error::TaskFailed { cause, .. }))
                if cause.message.contains("too many") => {}
            other => bail!("a stream that failed at once: {other:?}"),
        }

        // Backpressure: with a window of 2 the task pauses until items are taken.
        let mut slow = stream_numbers::options().backpressure(2).remote(50);
        let first = slow.next().context("item 0")??;
        ensure!(starling::get_timeout(&first, LONG)? == 0);
        let done = slow.completed().clone();
        let (ready, _) = starling::wait(
            std::slice::from_ref(&done),
            1,
            Some(Duration::from_millis(300)),
        )?;
        ensure!(
            ready.is_empty(),
            "a task 2 items ahead of its caller did not pause"
        );
        ensure!(slow.count() == 49, "the rest of the items");
        ensure!(starling::get_timeout(&done, LONG)? == 50);
        // A dropped generator lets its paused task go on to its end.
        let mut dropped = stream_numbers::options().backpressure(1).remote(100);
        let _ = dropped.next();
        let done = dropped.completed().clone();
        drop(dropped);
        ensure!(starling::get_timeout(&done, LONG)? == 100);
        // A task consuming a stream it submitted.
        ensure!(starling::get_timeout(&sum_stream::remote(100), LONG)? == 4950);
    }
    // Nothing the streams made outlives its refs (the items of the dropped generator too).
    objects_become(base, "every item freed")?;
    Ok(())
}

/// Whether this run uses the in-process runtime (`--in-process`).
static IN_PROCESS: AtomicBool = AtomicBool::new(false);

/// Bytes of the values in `store_reuse`: past the size whose store files are reused.
const REUSED: usize = 2 << 20;

/// A large value: `REUSED` bytes, each `seed`.
#[starling::remote]
fn filled(seed: u8) -> starling::Bytes {
    starling::Bytes::new(vec![seed; REUSED])
}

/// Whether `v` is what `filled(seed)` makes.
#[starling::remote]
fn all_are(v: starling::Bytes, seed: u8) -> bool {
    v.len() == REUSED && v.iter().all(|&b| b == seed)
}

/// A large value this task writes in place, put from inside it.
#[starling::remote]
fn made_in_place(seed: u8) -> ObjectRef<starling::Bytes> {
    starling::put_with(REUSED, |b| b.fill(seed)).expect("put_with inside a task")
}

/// Large values come and go, and a node writes new ones into the memory of freed ones: what a
/// process still holds of a freed object never changes, and every new value reads back whole.
fn store_reuse() -> anyhow::Result<()> {
    let put = starling::put(starling::Bytes::new(vec![1u8; REUSED]))?;
    let kept = starling::get(&put)?;
    drop(put);
    let made = filled::remote(2);
    let kept_result = starling::get(&made)?;
    drop(made);
    for round in 0..20u8 {
        let seed = 10 + round;
        let put = starling::put(starling::Bytes::new(vec![seed; REUSED]))?;
        ensure!(
            starling::get_timeout(&all_are::remote(&put, seed), LONG)?,
            "round {round}: a task read a put value wrong"
        );
        let made = filled::remote(seed + 100);
        ensure!(
            starling::get_timeout(&all_are::remote(&made, seed + 100), LONG)?,
            "round {round}: a task read another's result wrong"
        );
        let got = starling::get_timeout(&made, LONG)?;
        ensure!(
            got.len() == REUSED && got.iter().all(|&b| b == seed + 100),
            "round {round}: the driver read a result wrong"
        );
        // Written in place, by the driver and by a task.
        let filled = starling::put_with(REUSED, |b| b.fill(seed + 50))?;
        ensure!(
            starling::get_timeout(&all_are::remote(&filled, seed + 50), LONG)?,
            "round {round}: a task read a value the driver wrote in place wrong"
        );
        let inner = starling::get_timeout(&made_in_place::remote(seed + 70), LONG)?;
        let got = starling::get_timeout(&inner, LONG)?;
        ensure!(
            got.len() == REUSED && got.iter().all(|&b| b == seed + 70),
            "round {round}: the driver read a value a task wrote in place wrong"
        );
    }
    ensure!(
        kept.iter().all(|&b| b == 1),
        "a put value the driver holds changed after its object was freed"
    );
    ensure!(
        kept_result.iter().all(|&b| b == 2),
        "a result the driver holds changed after its object was freed"
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let rt = starling_examples::runtime_from_args()?;
    IN_PROCESS.store(rt.in_process, Ordering::Relaxed);
    let checks: [(&str, Check); 18] = [
        // First: they count the objects in the directory, which later checks leave behind
        // (held by tasks still running) for a while.
        ("refs_as_values", refs_as_values),
        ("nested_lifetime", nested_lifetime),
        ("refs_through_processes", refs_through_processes),
        ("streaming", streaming),
        ("multiple_returns", multiple_returns),
        ("wait_exact", wait_exact),
        ("wait_timeout", wait_timeout),
        ("wait_refusals", wait_refusals),
        ("quiet_session", quiet_session),
        ("force_cancel", force_cancel),
        ("recursive_cancel", recursive_cancel),
        ("placement", placement),
        ("threads_get", threads_get),
        ("async_io", async_io),
        ("async_concurrency", async_concurrency),
        ("retry_filter", retry_filter),
        ("env_vars", env_vars),
        ("store_reuse", store_reuse),
    ];
    starling_examples::run_checks(&checks)
}
