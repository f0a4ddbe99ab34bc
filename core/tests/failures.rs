//! Worker processes that die while they run a task, on a local cluster (a head, a node agent
//! and worker processes re-executed from this test binary).
//!
//! A task whose worker dies (abort, SIGKILL) is retried on another worker up to its
//! `max_retries`; when none are left, `get` returns `WorkerDied` with the attempts made and how
//! the last worker ended. The runtime and its processes are shared by the steps of one test, so
//! they run in order.

use std::path::{Path, PathBuf};
use std::time::Duration;

use starling::{Config, Error, Runtime};

const WAIT: Duration = Duration::from_secs(60);

/// Dies (abort: what `panic = "abort"` does) the first time; later runs find `marker` and
/// return 7.
#[starling::remote]
fn abort_once(marker: String) -> u32 {
    if !Path::new(&marker).exists() {
        std::fs::write(&marker, b"died").expect("write the marker");
        std::process::abort();
    }
    7
}

/// Kills its own process with SIGKILL (as the out-of-memory killer would) until it has died
/// `times` times; counts its runs in `marker`.
#[starling::remote]
fn sigkill_times(marker: String, times: u32) -> u32 {
    let runs = std::fs::read_to_string(&marker)
        .map(|s| s.len() as u32)
        .unwrap_or(0);
    std::fs::write(&marker, "x".repeat(runs as usize + 1)).expect("write the marker");
    if runs < times {
        let _ = std::process::Command::new("kill")
            .args(["-9", &std::process::id().to_string()])
            .status();
        std::thread::sleep(Duration::from_secs(30));
    }
    runs
}

#[starling::remote]
fn add(a: u64, b: u64) -> u64 {
    a + b
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("starling-failures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

#[test]
fn dead_workers_are_retried_until_retries_run_out() {
    let rt = Runtime::start(Config::default().threads(2)).expect("a local cluster starts");
    let _g = rt.enter();

    // Abort on the first run; the retry succeeds.
    let marker = scratch("abort-once");
    let r = abort_once::remote(marker.display().to_string());
    assert_eq!(
        starling::get_timeout(&r, WAIT).expect("retried after the abort"),
        7
    );

    // SIGKILL twice, max_retries = 2: the third run (attempt 2) succeeds, and saw 2 runs before.
    let marker = scratch("kill-twice");
    let r = sigkill_times::options()
        .max_retries(2)
        .remote(marker.display().to_string(), 2);
    assert_eq!(starling::get_timeout(&r, WAIT).expect("third attempt"), 2);

    // SIGKILL on every run, max_retries = 1: two attempts, then WorkerDied.
    let marker = scratch("kill-always");
    let r = sigkill_times::options()
        .max_retries(1)
        .remote(marker.display().to_string(), u32::MAX);
    match starling::get_timeout(&r, WAIT) {
        Err(Error::WorkerDied {
            task,
            attempts,
            last_exit,
        }) => {
            assert_eq!(task, r.id().task());
            assert_eq!(attempts, 2, "max_retries = 1 allows two attempts");
            assert!(
                last_exit.contains("killed by signal 9"),
                "how the worker ended is reported: {last_exit}"
            );
            let runs = std::fs::read_to_string(&marker).unwrap_or_default().len();
            assert_eq!(runs, 2, "the task ran exactly twice");
        }
        other => panic!("expected WorkerDied, got {other:?}"),
    }

    // max_retries = 0: one attempt.
    let marker = scratch("kill-no-retry");
    let r = sigkill_times::options()
        .max_retries(0)
        .remote(marker.display().to_string(), u32::MAX);
    let e = starling::get_timeout(&r, WAIT).expect_err("no retry left");
    assert!(
        matches!(e, Error::WorkerDied { attempts: 1, .. }),
        "unexpected error: {e}"
    );
    assert!(e.to_string().contains("1 attempt(s)"), "{e}");
    assert!(
        e.to_string().contains("killed by signal 9"),
        "the node's report of the exit is in the error: {e}"
    );

    // The cluster still works.
    let s = add::remote(40, 2);
    assert_eq!(starling::get_timeout(&s, WAIT).unwrap(), 42);
    rt.shutdown();
}
