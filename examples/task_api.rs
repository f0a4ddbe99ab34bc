//! Ray's task API, checked where this runs: the payload of `cli/tests/task_api.rs`, which runs
//! it in each mode (in-process with `--in-process`, a local cluster, and the cluster at
//! `STARLING_HEAD`). Each check prints `name=ok`, or the payload fails saying what differed.
//!
//! ```text
//! wait_exact=ok
//! wait_timeout=ok
//! wait_refusals=ok
//! quiet_session=ok
//! ```

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};

const LONG: Duration = Duration::from_secs(60);

/// One check of the API: `Ok` when Starling behaved as Ray does.
type Check = fn() -> anyhow::Result<()>;

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

fn main() -> anyhow::Result<()> {
    let in_process = std::env::args().any(|a| a == "--in-process");
    let _rt = if in_process {
        let rt = starling::Runtime::in_process(2)?;
        let guard = rt.enter();
        (None, Some((rt, guard)))
    } else {
        (Some(starling_examples::connect()?), None)
    };
    let checks: [(&str, Check); 4] = [
        ("wait_exact", wait_exact),
        ("wait_timeout", wait_timeout),
        ("wait_refusals", wait_refusals),
        ("quiet_session", quiet_session),
    ];
    for (name, check) in checks {
        check().with_context(|| format!("check {name}"))?;
        println!("{name}=ok");
    }
    Ok(())
}
