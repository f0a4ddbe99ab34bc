//! Ray's task API, checked where this runs: the payload of `cli/tests/task_api.rs`, which runs
//! it in each mode (in-process with `--in-process`, a local cluster, and the cluster at
//! `STARLING_HEAD`). Each check prints `name=ok`, or the payload fails saying what differed.
//!
//! ```text
//! wait_exact=ok
//! wait_timeout=ok
//! wait_refusals=ok
//! ```

use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context};

const LONG: Duration = Duration::from_secs(60);

#[starling::remote]
fn add(a: u64, b: u64) -> u64 {
    a + b
}

#[starling::remote]
fn sleep_ms(ms: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(ms));
    ms
}

/// `wait` returns at most `num_returns` refs as ready, the first settled ones in input order,
/// and every other ref as not ready, in input order (as `ray.wait`).
fn wait_exact() -> anyhow::Result<()> {
    let slow = sleep_ms::remote(3_000);
    let fast: Vec<_> = (0..3).map(|i| add::remote(i, 1)).collect();
    starling::get_all_timeout(&fast, LONG).context("the fast tasks")?;
    let all = vec![fast[0].clone(), slow.clone(), fast[1].clone(), fast[2].clone()];
    let (ready, rest) = starling::wait(&all, 2, Some(LONG))?;
    ensure!(
        ready == [fast[0].clone(), fast[1].clone()],
        "wait(2) gave {} ready, not the first two settled: {ready:?}",
        ready.len()
    );
    ensure!(
        rest == [slow.clone(), fast[2].clone()],
        "the rest, in input order: {rest:?}"
    );
    let (ready, rest) = starling::wait(&all, 1, None)?;
    ensure!(
        ready == [fast[0].clone()] && rest.len() == 3,
        "wait(1): {ready:?} / {rest:?}"
    );
    let _ = starling::cancel(&slow, true);
    Ok(())
}

/// With a timeout, `wait` returns what is ready by then, fewer than asked for.
fn wait_timeout() -> anyhow::Result<()> {
    let slow = sleep_ms::remote(3_000);
    let quick = add::remote(1, 1);
    starling::get_timeout(&quick, LONG)?;
    let refs = [slow.clone(), quick.clone()];
    let t = Instant::now();
    let (ready, rest) = starling::wait(&refs, 2, Some(Duration::from_millis(100)))?;
    ensure!(
        t.elapsed() < Duration::from_millis(2_500),
        "wait did not stop at its timeout"
    );
    ensure!(
        ready == [quick] && rest == [slow.clone()],
        "{ready:?} / {rest:?}"
    );
    let _ = starling::cancel(&slow, true);
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
    let checks: [(&str, fn() -> anyhow::Result<()>); 3] = [
        ("wait_exact", wait_exact),
        ("wait_timeout", wait_timeout),
        ("wait_refusals", wait_refusals),
    ];
    for (name, check) in checks {
        check().with_context(|| format!("check {name}"))?;
        println!("{name}=ok");
    }
    Ok(())
}
