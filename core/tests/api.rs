//! API tests on the in-process runtime: every error kind reaches `get` downstream, `wait`
//! keeps order and honours its timeout, nested tasks run on one thread, refs are freed, and a
//! hundred thousand tasks come back right. Every wait is bounded.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use starling::{Error, ObjectRef, Runtime, TaskOptions};

const LONG: Duration = Duration::from_secs(30);

fn runtime(threads: usize) -> (Runtime, starling::EnterGuard) {
    let rt = Runtime::in_process(threads).expect("runtime starts");
    let g = rt.enter();
    (rt, g)
}

#[starling::remote]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

#[starling::remote]
fn boom(msg: String) -> i64 {
    panic!("boom: {msg}")
}

#[starling::remote]
fn parse(s: String) -> Result<i64, std::num::ParseIntError> {
    s.parse()
}

#[starling::remote]
fn sleep_ms(ms: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(ms));
    ms
}

#[starling::remote]
async fn async_double(x: u64) -> u64 {
    tokio::time::sleep(Duration::from_millis(5)).await;
    x * 2
}

#[starling::remote]
fn sum_range(lo: u64, hi: u64) -> Result<u64, Error> {
    if hi - lo <= 8 {
        return Ok((lo..hi).sum());
    }
    let mid = lo + (hi - lo) / 2;
    let (l, r) = (sum_range::remote(lo, mid), sum_range::remote(mid, hi));
    Ok(starling::get_timeout(&l, LONG)? + starling::get_timeout(&r, LONG)?)
}

#[test]
fn values_and_dependencies() {
    let (_rt, _g) = runtime(2);
    let a = add::remote(1, 2);
    let b = add::remote(&a, 10);
    let c = add::remote(a.clone(), b.clone());
    assert_eq!(starling::get_timeout(&c, LONG).unwrap(), 16);
    let p = starling::put(100i64).unwrap();
    assert_eq!(
        starling::get_timeout(&add::remote(p, 1), LONG).unwrap(),
        101
    );
    let opts = add::options().num_cpus(0.5).max_retries(0).remote(2, 2);
    assert_eq!(starling::get_timeout(&opts, LONG).unwrap(), 4);
}

#[test]
fn panic_reaches_get_with_type_message_backtrace_task_and_attempt() {
    let (_rt, _g) = runtime(1);
    let r = boom::remote("x".to_string());
    match starling::get_timeout(&r, LONG).unwrap_err() {
        Error::TaskFailed {
            task,
            attempt,
            cause,
        } => {
            assert_eq!(task, r.id().task());
            assert_eq!(attempt, 0);
            assert_eq!(cause.type_name, "panic");
            assert!(cause.message.contains("boom: x"), "{}", cause.message);
            assert!(
                cause.message.contains("api.rs"),
                "location in {}",
                cause.message
            );
            assert!(
                cause.backtrace.contains("boom"),
                "backtrace names the function"
            );
        }
        e => panic!("expected TaskFailed, got {e:?}"),
    }
}

#[test]
fn err_return_reaches_get_with_its_type_name() {
    let (_rt, _g) = runtime(1);
    assert_eq!(
        starling::get_timeout(&parse::remote("42"), LONG).unwrap(),
        42
    );
    let e = starling::get_timeout(&parse::remote("x"), LONG).unwrap_err();
    let cause = e.remote_error().expect("a remote error");
    assert_eq!(cause.type_name, "core::num::error::ParseIntError");
    assert_eq!(cause.message, "invalid digit found in string");
}

#[test]
fn upstream_failure_chain_is_visible_downstream() {
    let (_rt, _g) = runtime(2);
    let bad = parse::remote("nope".to_string());
    let mid = add::remote(&bad, 1);
    let end = add::remote(&mid, 1);
    let e = starling::get_timeout(&end, LONG).unwrap_err();
    let Error::UpstreamFailed { task, upstream } = &e else {
        panic!("got {e:?}")
    };
    assert_eq!(*task, end.id().task());
    let Error::UpstreamFailed { task: t2, .. } = &**upstream else {
        panic!("got {upstream:?}")
    };
    assert_eq!(*t2, mid.id().task());
    let Error::TaskFailed { task: root, .. } = e.root_cause() else {
        panic!()
    };
    assert_eq!(*root, bad.id().task());
    assert!(
        e.to_string().contains("invalid digit"),
        "the message shows the root: {e}"
    );
}

#[test]
fn cancelled_task_and_its_dependents_fail_as_cancelled() {
    let (_rt, _g) = runtime(1);
    let blocker = sleep_ms::remote(300);
    let queued = add::remote(1, 2);
    let dependent = add::remote(&queued, 1);
    starling::cancel(&queued, false).unwrap();
    assert_eq!(
        starling::get_timeout(&queued, LONG).unwrap_err(),
        Error::Cancelled {
            task: queued.id().task()
        }
    );
    let e = starling::get_timeout(&dependent, LONG).unwrap_err();
    assert_eq!(
        e.root_cause(),
        &Error::Cancelled {
            task: queued.id().task()
        }
    );
    assert_eq!(
        starling::get_timeout(&blocker, LONG).unwrap(),
        300,
        "others are unaffected"
    );
    starling::cancel(&blocker, true).expect("cancelling a finished task is a no-op");
    assert_eq!(starling::get_timeout(&blocker, LONG).unwrap(), 300);
}

#[test]
fn get_timeout_times_out_and_the_value_still_arrives() {
    let (_rt, _g) = runtime(1);
    let r = sleep_ms::remote(200);
    let t0 = Instant::now();
    let e = starling::get_timeout(&r, Duration::from_millis(20)).unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "got {e:?}");
    assert!(
        t0.elapsed() < Duration::from_millis(190),
        "returned at the timeout"
    );
    assert_eq!(starling::get_timeout(&r, LONG).unwrap(), 200);
}

#[test]
fn unknown_function_and_bad_argument_are_typed_errors() {
    let (_rt, _g) = runtime(1);
    use starling::__private::{submit, ArgsBuilder};
    let missing: ObjectRef<i64> = submit(
        "nowhere::missing#0",
        ArgsBuilder::with_capacity(0),
        TaskOptions::default(),
    );
    match starling::get_timeout(&missing, LONG).unwrap_err() {
        Error::FunctionNotFound { name, build } => {
            assert_eq!(name, "nowhere::missing#0");
            assert!(!build.is_empty());
        }
        e => panic!("expected FunctionNotFound, got {e:?}"),
    }
    // `add` takes two i64s; send a string and nothing else.
    let mut args = ArgsBuilder::with_capacity(1);
    args.push::<String, _>("not a number".to_string());
    let bad: ObjectRef<i64> = submit(add::NAME, args, TaskOptions::default());
    assert!(matches!(
        starling::get_timeout(&bad, LONG).unwrap_err(),
        Error::BadArgument { .. }
    ));
}

#[test]
fn wait_keeps_input_order_and_honours_timeout() {
    let (_rt, _g) = runtime(2);
    let refs = vec![
        sleep_ms::remote(400),
        sleep_ms::remote(1),
        sleep_ms::remote(2),
    ];
    let t0 = Instant::now();
    let (ready, rest) = starling::wait(&refs, 2, Some(LONG)).unwrap();
    assert!(
        t0.elapsed() < Duration::from_millis(350),
        "did not wait for the slow one"
    );
    assert_eq!(ready, vec![refs[1].clone(), refs[2].clone()]);
    assert_eq!(rest, vec![refs[0].clone()]);
    let (ready, rest) = starling::wait(&refs, 3, Some(Duration::from_millis(10))).unwrap();
    assert_eq!(
        (ready.len(), rest.len()),
        (2, 1),
        "timeout returns what is ready"
    );
    let (ready, _) = starling::wait(&refs, 3, Some(LONG)).unwrap();
    assert_eq!(ready, refs);
}

#[test]
fn nested_tasks_on_one_thread_do_not_deadlock() {
    let (_rt, _g) = runtime(1);
    let r = sum_range::remote(0, 1024);
    assert_eq!(starling::get_timeout(&r, LONG).unwrap(), 1023 * 1024 / 2);
}

#[test]
fn async_functions_run_with_tokio_timers() {
    let (_rt, _g) = runtime(2);
    let refs: Vec<_> = (0..10).map(async_double::remote).collect();
    let out = starling::get_all_timeout(&refs, LONG).unwrap();
    assert_eq!(out, (0..10).map(|x| x * 2).collect::<Vec<_>>());
}

#[test]
fn object_ref_is_a_future() {
    let (_rt, _g) = runtime(1);
    let r = add::remote(20, 22);
    let s = add::remote(&r, 1);
    let v = starling::__private::block_on(async { Ok::<_, Error>(r.await? + s.await?) });
    assert_eq!(v.unwrap(), 85);
}

static FLAKY_CALLS: AtomicU32 = AtomicU32::new(0);

#[starling::remote(retry_exceptions = true, max_retries = 2)]
fn flaky(fail_times: u32) -> u32 {
    let n = FLAKY_CALLS.fetch_add(1, Ordering::SeqCst);
    if n < fail_times {
        panic!("attempt {n} fails");
    }
    n
}

#[test]
fn application_errors_are_retried_only_with_retry_exceptions() {
    let (_rt, _g) = runtime(1);
    FLAKY_CALLS.store(0, Ordering::SeqCst);
    assert_eq!(
        starling::get_timeout(&flaky::remote(2), LONG).unwrap(),
        2,
        "third attempt wins"
    );
    FLAKY_CALLS.store(0, Ordering::SeqCst);
    match starling::get_timeout(&flaky::remote(5), LONG).unwrap_err() {
        Error::TaskFailed { attempt, .. } => assert_eq!(attempt, 2, "attempts 0, 1, 2"),
        e => panic!("got {e:?}"),
    }
    FLAKY_CALLS.store(0, Ordering::SeqCst);
    let once = flaky::options().retry_exceptions(false).remote(1);
    assert!(starling::get_timeout(&once, LONG).is_err());
    assert_eq!(
        FLAKY_CALLS.load(Ordering::SeqCst),
        1,
        "no retry without retry_exceptions"
    );
}

#[test]
fn infeasible_task_says_why_and_runs_where_resources_exist() {
    let (_rt, _g) = runtime(1);
    let r = add::options().num_gpus(1.0).remote(1, 1);
    assert!(matches!(
        starling::get_timeout(&r, Duration::from_millis(50)),
        Err(Error::Timeout { .. })
    ));
    assert_eq!(
        starling::pending_reason(&r).as_deref(),
        Some("infeasible: needs gpu=1; no node has gpu")
    );
    let gpu_rt =
        Runtime::with_config(starling::Config::default().threads(1).resource("GPU", 1.0)).unwrap();
    let _g2 = gpu_rt.enter();
    let r = add::options().num_gpus(0.5).remote(1, 1);
    assert_eq!(starling::get_timeout(&r, LONG).unwrap(), 2);
    gpu_rt.shutdown();
}

#[test]
fn fractional_cpus_run_side_by_side() {
    // One CPU, tasks of 0.25 CPU: four run at once (the runtime adds executors for them).
    let (_rt, _g) = runtime(1);
    let t0 = Instant::now();
    let refs: Vec<_> = (0..4)
        .map(|_| sleep_ms::options().num_cpus(0.25).remote(200))
        .collect();
    starling::get_all_timeout(&refs, LONG).unwrap();
    assert!(
        t0.elapsed() < Duration::from_millis(700),
        "ran concurrently: {:?}",
        t0.elapsed()
    );
}

#[test]
fn dropped_refs_free_their_objects() {
    let (rt, _g) = runtime(2);
    let refs: Vec<_> = (0..1000).map(|i| add::remote(i, 1)).collect();
    let chained = add::remote(&refs[0], 1);
    let big = starling::put(starling::Bytes::new(vec![1u8; 1 << 20])).unwrap();
    starling::get_all_timeout(&refs, LONG).unwrap();
    starling::get_timeout(&chained, LONG).unwrap();
    assert!(rt.stats().objects >= 1002);
    assert!(rt.stats().store_bytes >= 1 << 20);
    drop((refs, chained, big));
    // The scheduler frees an object's entry under its lock and the store's bytes right after
    // it (an effect applied outside the lock): wait for both.
    let deadline = Instant::now() + LONG;
    while {
        let s = rt.stats();
        s.objects > 0 || s.store_bytes > 0
    } && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let s = rt.stats();
    assert_eq!(
        (s.objects, s.store_bytes),
        (0, 0),
        "everything freed: {s:?}"
    );
}

#[test]
fn a_hundred_thousand_tasks_complete_correctly() {
    let (rt, _g) = runtime(2);
    let refs: Vec<_> = (0..100_000i64).map(|i| add::remote(i, i)).collect();
    let out = starling::get_all_timeout(&refs, Duration::from_secs(120)).unwrap();
    assert!(out.iter().enumerate().all(|(i, v)| *v == 2 * i as i64));
    // The last completions may still be in flight to the scheduler when `get` returns.
    let deadline = Instant::now() + LONG;
    while rt.stats().succeeded < 100_000 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let s = rt.stats();
    assert_eq!((s.succeeded, s.failed, s.live_tasks), (100_000, 0, 0));
}

#[test]
fn shutdown_is_an_error_not_a_hang() {
    let (rt, _g) = runtime(1);
    let slow = sleep_ms::remote(50);
    let queued = add::remote(1, 1);
    rt.shutdown();
    assert_eq!(
        starling::get_timeout(&queued, LONG).unwrap_err(),
        Error::ShutDown
    );
    let _ = starling::get_timeout(&slow, LONG);
}

#[test]
fn nodes_lists_the_in_process_node() {
    let (rt, _g) = runtime(2);
    let nodes = rt.nodes();
    assert_eq!(nodes.len(), 1);
    assert!(nodes[0].alive);
    assert_eq!(nodes[0].resources.get("CPU"), 2.0);
    assert_eq!(nodes[0].address, "in-process");
}

#[test]
fn an_unreachable_head_is_a_typed_error_within_the_timeout() {
    let t0 = Instant::now();
    let config =
        starling::Config::connect("127.0.0.1:1").connect_timeout(Duration::from_millis(500));
    match Runtime::start(config) {
        Err(Error::HeadUnreachable { addr, .. }) => assert_eq!(addr, "127.0.0.1:1"),
        other => panic!("expected HeadUnreachable, got {other:?}"),
    }
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "bounded: {:?}",
        t0.elapsed()
    );
}
