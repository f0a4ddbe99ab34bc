//! Actors (Ray's actors): a worker that keeps state across calls.
//!
//! `cargo run --example actors` runs it on a local cluster; `-- --in-process` on the in-process
//! runtime; with `STARLING_HEAD` set, on that cluster. It checks, printing `name=ok` for each:
//! state kept across calls and calls from one caller run in order (10,000 of them), a handle
//! passed to a task that calls the actor, a named actor found by name, `kill`, a constructor
//! that fails, a restart after the actor's process dies (in a cluster: `SIGKILL`ed; in
//! process, where nothing can be killed, through `kill` with restart), and `starling::actors()`
//! listing an actor alive, then dead with its cause, and an async actor running 100 calls at
//! once (and no more than its `max_concurrency`), and a threaded actor running 8 blocking calls
//! at once on threads of their own (and no more than its `max_concurrency`), and one caller's
//! calls keeping their order when some go straight to the actor's worker and some take the
//! head's way, and losing none when the actor's process dies under them. On a cluster also: a second driver process
//! (this program, started again with `--second-driver`) finds a named actor and calls it, and
//! the detached actor it makes outlives it while its other actor ends with it.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{bail, ensure, Context};
use starling_examples::Check;

const LONG: Duration = Duration::from_secs(60);

/// A counter that also says where it runs and how often it was built.
pub struct Counter {
    n: u64,
}

#[starling::actor]
impl Counter {
    fn new(start: u64) -> Self {
        Counter { n: start }
    }

    fn incr(&mut self, by: u64) -> u64 {
        self.n += by;
        self.n
    }

    fn get(&self) -> u64 {
        self.n
    }

    /// The process the actor runs in.
    fn pid(&self) -> u32 {
        std::process::id()
    }
}

/// An actor whose constructor may fail.
pub struct Picky;

#[starling::actor]
impl Picky {
    fn new(ok: bool) -> Result<Self, String> {
        if ok {
            Ok(Picky)
        } else {
            Err("refusing to start".to_string())
        }
    }

    fn hello(&self) -> String {
        "hello".to_string()
    }
}

/// An async actor (it has an `async` method): its calls run together, interleaved at their
/// `.await`s, up to its `max_concurrency`.
pub struct Gate {
    in_progress: AtomicUsize,
    peak: AtomicUsize,
}

#[starling::actor]
impl Gate {
    fn new() -> Self {
        Gate {
            in_progress: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// Counts itself in, waits (on tokio's timers) until `n` calls have been in progress at
    /// once or [`LONG`] passed, and counts itself out. Returns the most calls ever in progress
    /// at once.
    async fn meet(&self, n: usize) -> usize {
        let now = self.in_progress.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + LONG;
        while self.peak.load(Ordering::SeqCst) < n && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        self.in_progress.fetch_sub(1, Ordering::SeqCst);
        self.peak.load(Ordering::SeqCst)
    }

    /// The most calls ever in progress at once (a sync method of an async actor).
    fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

/// A threaded actor (`max_concurrency` on a sync actor): up to 8 of its calls run at once,
/// each on a thread of its own.
pub struct Crowd {
    in_progress: AtomicUsize,
    peak: AtomicUsize,
}

#[starling::actor(max_concurrency = 8)]
impl Crowd {
    fn new() -> Self {
        Crowd {
            in_progress: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
        }
    }

    /// Counts itself in, blocks its thread until `n` calls have been in progress at once or
    /// [`LONG`] passed, and counts itself out. Returns the most calls ever in progress at once.
    fn meet(&self, n: usize) -> usize {
        let now = self.in_progress.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let deadline = std::time::Instant::now() + LONG;
        while self.peak.load(Ordering::SeqCst) < n && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.in_progress.fetch_sub(1, Ordering::SeqCst);
        self.peak.load(Ordering::SeqCst)
    }
}

/// Adds `n` to the counter behind `c` from inside a task, one call at a time.
#[starling::remote]
fn add_from_task(c: CounterHandle, n: u64) -> u64 {
    let mut last = 0;
    for _ in 0..n {
        last = starling::get(&c.incr(1)).expect("a call from a task");
    }
    last
}

static IN_PROCESS: AtomicBool = AtomicBool::new(false);

fn order_and_state() -> anyhow::Result<()> {
    let c = Counter::remote(0);
    let calls: Vec<_> = (0..10_000).map(|_| c.incr(1)).collect();
    let got = starling::get_all_timeout(&calls, LONG)?;
    ensure!(
        got == (1..=10_000).collect::<Vec<u64>>(),
        "calls from one caller ran out of order or lost state"
    );
    ensure!(starling::get_timeout(&c.get(), LONG)? == 10_000);
    Ok(())
}

fn handle_in_a_task() -> anyhow::Result<()> {
    let c = Counter::remote(100);
    let from_task = add_from_task::remote(c.clone(), 5);
    ensure!(starling::get_timeout(&from_task, LONG)? == 105);
    ensure!(starling::get_timeout(&c.incr(1), LONG)? == 106);
    Ok(())
}

fn named() -> anyhow::Result<()> {
    let c = Counter::options().name("actors-example").remote(7);
    starling::get_timeout(c.actor().ready(), LONG)?;
    let found = starling::get_actor::<Counter>("actors-example")?.context("found by name")?;
    ensure!(starling::get_timeout(&found.incr(1), LONG)? == 8);
    ensure!(
        starling::get_timeout(&c.get(), LONG)? == 8,
        "the same actor"
    );
    ensure!(starling::get_actor::<Counter>("no-such-actor")?.is_none());
    // get_if_exists gives the live one instead of a second.
    let again = Counter::options()
        .name("actors-example")
        .get_if_exists(true)
        .remote(0);
    ensure!(starling::get_timeout(&again.get(), LONG)? == 8);
    Ok(())
}

fn kill() -> anyhow::Result<()> {
    let c = Counter::remote(1);
    ensure!(starling::get_timeout(&c.get(), LONG)? == 1);
    c.kill(true)?;
    match starling::get_timeout(&c.get(), LONG) {
        Err(starling::Error::ActorDied { cause, .. }) if cause.contains("killed") => {}
        other => bail!("a call after kill: {other:?}"),
    }
    Ok(())
}

fn failing_constructor() -> anyhow::Result<()> {
    let p = Picky::remote(false);
    match starling::get_timeout(&p.hello(), LONG) {
        Err(starling::Error::ActorDied { cause, .. }) if cause.contains("refusing to start") => {}
        other => bail!("a call of an actor whose constructor failed: {other:?}"),
    }
    let ok = Picky::remote(true);
    ensure!(starling::get_timeout(&ok.hello(), LONG)? == "hello");
    Ok(())
}

/// Ends the process of `c` (whose pid is `pid`) as a crash would: `SIGKILL`; in process,
/// where nothing can be killed, `kill` with restart.
fn kill_process(c: &CounterHandle, pid: u32) -> anyhow::Result<()> {
    if IN_PROCESS.load(Ordering::Relaxed) {
        c.kill(false)?;
    } else {
        let status = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()?;
        ensure!(status.success(), "kill -9 {pid}");
    }
    Ok(())
}

fn restart() -> anyhow::Result<()> {
    // A call sent while the process dies is run again on the restarted actor.
    let c = Counter::options()
        .max_restarts(1)
        .max_task_retries(1)
        .remote(10);
    ensure!(starling::get_timeout(&c.incr(5), LONG)? == 15);
    let pid = starling::get_timeout(&c.pid(), LONG)?;
    kill_process(&c, pid)?;
    // Restarted: the constructor ran again, so the state is the constructor's.
    ensure!(
        starling::get_timeout(&c.get(), LONG)? == 10,
        "a restarted actor's state is reset"
    );
    let pid2 = starling::get_timeout(&c.pid(), LONG)?;
    if !IN_PROCESS.load(Ordering::Relaxed) {
        ensure!(pid2 != pid, "restarted in a new process");
        let status = std::process::Command::new("kill")
            .args(["-9", &pid2.to_string()])
            .status()?;
        ensure!(status.success(), "kill -9 {pid2}");
    } else {
        c.kill(false)?;
    }
    // No restarts left: dead.
    match starling::get_timeout(&c.get(), LONG) {
        Err(starling::Error::ActorDied { .. }) => {}
        other => bail!("a call after the last restart: {other:?}"),
    }
    Ok(())
}

/// One caller's calls run in its order whichever way each goes: on a local cluster this driver
/// also sends plain calls straight to the actor's worker (from its second call on), while a call
/// with a ref argument takes the head's way, which holds it back until the calls sent straight
/// before it ran. Killing the actor's process with 2,000 calls in flight loses none: they run
/// on the restarted actor (a call whose value came back before the process died keeps it).
fn straight_and_queued() -> anyhow::Result<()> {
    let rt = starling::current().context("a runtime")?;
    let c = Counter::options()
        .max_restarts(1)
        .max_task_retries(5)
        .remote(0);
    // The first call takes the head's way; the next ones may go straight.
    ensure!(starling::get_timeout(&c.incr(0), LONG)? == 0);
    let sent = rt.stats().direct_calls;
    let mut n = 0;
    for _ in 0..4 {
        // Plain calls (straight), one with a ref argument (the head's way, held back until
        // they ran), plain calls again (the head's way while that one has not settled).
        let mut calls: Vec<_> = (0..200).map(|_| c.incr(1)).collect();
        calls.push(c.incr(starling::put(1u64)?));
        calls.extend((0..200).map(|_| c.incr(1)));
        let got = starling::get_all_timeout(&calls, LONG)?;
        ensure!(
            got == (n + 1..=n + 401).collect::<Vec<u64>>(),
            "calls sent straight and calls of the head's way ran out of order"
        );
        n += 401;
    }
    let straight = rt.stats().direct_calls - sent;
    let local_cluster =
        !IN_PROCESS.load(Ordering::Relaxed) && std::env::var_os("STARLING_HEAD").is_none();
    if local_cluster {
        ensure!(straight >= 800, "only {straight} calls went straight");
    }
    let pid = starling::get_timeout(&c.pid(), LONG)?;
    let calls: Vec<_> = (0..2_000).map(|_| c.incr(1)).collect();
    kill_process(&c, pid)?;
    let got = starling::get_all_timeout(&calls, LONG)?;
    if IN_PROCESS.load(Ordering::Relaxed) {
        // In process the killed actor's thread may finish calls beside the restarted actor
        // (each call's first value is kept): only that none was lost is checked.
        return Ok(());
    }
    // Consecutive, but for one step down where the restarted actor took over (the values the
    // old process answered with are a prefix: it ran its calls in order).
    let downs = got.windows(2).filter(|w| w[1] <= w[0]).count();
    let ups = got.windows(2).filter(|w| w[1] == w[0] + 1).count();
    ensure!(
        downs <= 1 && ups + downs == got.len() - 1,
        "calls in flight when the actor's process died were lost or ran out of order: {:?}",
        got.windows(2).find(|w| w[1] != w[0] + 1)
    );
    Ok(())
}

/// An async actor runs 100 calls at once (each waits until all 100 are in progress: checked
/// by its count, not by timing), and no more than its `max_concurrency` when that is set.
fn async_actor() -> anyhow::Result<()> {
    let g = Gate::remote();
    let calls: Vec<_> = (0..100).map(|_| g.meet(100)).collect();
    let peaks = starling::get_all_timeout(&calls, LONG)?;
    ensure!(
        peaks.iter().all(|p| *p == 100),
        "100 calls of an async actor were not all in progress at once: {peaks:?}"
    );
    let g4 = Gate::options().max_concurrency(4).remote();
    let calls: Vec<_> = (0..20).map(|_| g4.meet(4)).collect();
    let peaks = starling::get_all_timeout(&calls, LONG)?;
    ensure!(
        peaks.iter().all(|p| *p == 4) && starling::get_timeout(&g4.peak(), LONG)? == 4,
        "max_concurrency 4: calls saw {peaks:?} in progress at once"
    );
    Ok(())
}

/// A threaded actor runs 8 blocking calls at once (each waits until all 8 are in progress,
/// checked by its count), and with `max_concurrency(2)` never more than 2.
fn threaded_actor() -> anyhow::Result<()> {
    let c = Crowd::remote();
    let calls: Vec<_> = (0..24).map(|_| c.meet(8)).collect();
    let peaks = starling::get_all_timeout(&calls, LONG)?;
    ensure!(
        peaks.iter().all(|p| *p == 8),
        "calls of a threaded actor with max_concurrency 8 saw {peaks:?} in progress at once"
    );
    let c2 = Crowd::options().max_concurrency(2).remote();
    let calls: Vec<_> = (0..6).map(|_| c2.meet(2)).collect();
    let peaks = starling::get_all_timeout(&calls, LONG)?;
    ensure!(
        peaks.iter().all(|p| *p == 2),
        "max_concurrency 2: calls saw {peaks:?} in progress at once"
    );
    Ok(())
}

/// Waits (at most [`LONG`]) until the listing shows the actor `id` as `want` says.
fn listed_as(
    id: starling::TaskId,
    what: &str,
    want: impl Fn(&starling::ActorInfo) -> bool,
) -> anyhow::Result<starling::ActorInfo> {
    // The listing is the scheduler's, which hears of a call's end or a kill a moment after the
    // caller does.
    let mut last = None;
    eventually(&format!("actor {id} listed as {what}"), || {
        last = starling::actors()?.into_iter().find(|a| a.id == id);
        Ok(last.clone().filter(|a| want(a)))
    })
    .with_context(|| format!("last listed as {last:?}"))
}

/// Asks `look` every 10 ms until it finds something, for at most [`LONG`] (then fails saying
/// `what` never happened).
fn eventually<T>(
    what: &str,
    mut look: impl FnMut() -> anyhow::Result<Option<T>>,
) -> anyhow::Result<T> {
    let deadline = std::time::Instant::now() + LONG;
    loop {
        if let Some(found) = look()? {
            return Ok(found);
        }
        if std::time::Instant::now() > deadline {
            bail!("never: {what}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn listed() -> anyhow::Result<()> {
    let c = Counter::options().name("listed-actor").remote(0);
    ensure!(starling::get_timeout(&c.incr(1), LONG)? == 1);
    let id = c.actor().id();
    let a = listed_as(id, "alive with a call served", |a| {
        a.state == "ALIVE" && a.calls_served >= 1
    })?;
    ensure!(
        a.class_name.ends_with("::Counter") && a.name == "listed-actor" && a.cause.is_none(),
        "{a:?}"
    );
    c.kill(true)?;
    listed_as(id, "dead, killed", |a| {
        a.state == "DEAD" && a.cause.as_deref().is_some_and(|c| c.contains("killed"))
    })?;
    Ok(())
}

const SHARED: &str = "actors-example-shared";
const DETACHED: &str = "actors-example-detached";
const EPHEMERAL: &str = "actors-example-ephemeral";

/// `--second-driver`: another driver of the same cluster. It calls the named actor `SHARED`,
/// makes the detached actor `DETACHED` and the plain named actor `EPHEMERAL`, and exits.
fn second_driver() -> anyhow::Result<()> {
    let _rt = starling_examples::connect()?;
    let shared = starling::get_actor::<Counter>(SHARED)?.context("the shared actor by name")?;
    println!("seen={}", starling::get_timeout(&shared.incr(1), LONG)?);
    let detached = Counter::options()
        .name(DETACHED)
        .lifetime_detached()
        .remote(41);
    println!(
        "detached={}",
        starling::get_timeout(&detached.incr(1), LONG)?
    );
    let ephemeral = Counter::options().name(EPHEMERAL).remote(0);
    starling::get_timeout(ephemeral.actor().ready(), LONG)?;
    Ok(())
}

/// A named actor called from a second driver process; that driver's detached actor outlives
/// it, its other actor does not.
fn second_driver_and_detached() -> anyhow::Result<()> {
    let rt = starling::current().context("a runtime")?;
    let shared = Counter::options().name(SHARED).remote(5);
    starling::get_timeout(shared.actor().ready(), LONG)?;
    let mut child = std::process::Command::new(std::env::current_exe()?)
        .arg("--second-driver")
        .envs(rt.driver_env())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().context("its stdout")?, &mut out)?;
    let status = child.wait()?;
    ensure!(
        status.success(),
        "the second driver exited with {status}:\n{out}"
    );
    ensure!(
        out.lines().any(|l| l == "seen=6") && out.lines().any(|l| l == "detached=42"),
        "the second driver said:\n{out}"
    );
    ensure!(
        starling::get_timeout(&shared.get(), LONG)? == 6,
        "the second driver called this same actor"
    );
    // Its job ended: its plain actor dies with it (and its name is free again)...
    eventually("the second driver's plain actor gone with its job", || {
        Ok(starling::get_actor::<Counter>(EPHEMERAL)?
            .is_none()
            .then_some(()))
    })?;
    // ...and its detached one lives on, with its state.
    let detached = starling::get_actor::<Counter>(DETACHED)?.context("the detached actor")?;
    ensure!(
        starling::get_timeout(&detached.incr(1), LONG)? == 43,
        "the detached actor kept its state"
    );
    starling::kill(&detached, true)?;
    Ok(())
}

/// `--node-loss GO`: two actors on one node, one with a restart left and one without. Prints
/// `actor_node=N..` and waits for the file `GO` (the test kills that node first); then the first
/// answers from another node with its state reset, the second fails with `ActorDied`.
fn node_loss(go: &std::path::Path) -> anyhow::Result<()> {
    let _rt = starling_examples::connect()?;
    let survivor = Counter::options()
        .max_restarts(1)
        .max_task_retries(1)
        .remote(10);
    ensure!(starling::get_timeout(&survivor.incr(1), LONG)? == 11);
    let node_of = |h: &CounterHandle| -> anyhow::Result<starling::NodeId> {
        let id = h.actor().id();
        listed_as(id, "alive on a node", |a| a.node.is_some())?
            .node
            .context("a node")
    };
    let node = node_of(&survivor)?;
    let mortal = Counter::options()
        .scheduling_strategy(starling::SchedulingStrategy::NodeAffinity { node, soft: false })
        .remote(20);
    ensure!(starling::get_timeout(&mortal.incr(1), LONG)? == 21);
    println!("actor_node={node}");
    starling_examples::wait_for_file(go, LONG)?;
    ensure!(
        starling::get_timeout(&survivor.get(), LONG)? == 10,
        "the actor restarted after its node was lost has its constructor's state"
    );
    let moved = node_of(&survivor)?;
    ensure!(moved != node, "restarted on the lost node {node}");
    match starling::get_timeout(&mortal.get(), LONG) {
        Err(starling::Error::ActorDied { .. }) => {}
        other => bail!("a call of an actor lost with its node, no restarts left: {other:?}"),
    }
    println!("restarted_on={moved}");
    println!("node_loss=ok");
    Ok(())
}

fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == "--second-driver") {
        return second_driver();
    }
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--node-loss") {
        let go = args.get(i + 1).context("--node-loss GO_FILE")?;
        return node_loss(std::path::Path::new(go));
    }
    let rt = starling_examples::runtime_from_args()?;
    IN_PROCESS.store(rt.in_process, Ordering::Relaxed);
    let checks: [(&str, Check); 10] = [
        ("order_and_state", order_and_state),
        ("handle_in_a_task", handle_in_a_task),
        ("named", named),
        ("kill", kill),
        ("failing_constructor", failing_constructor),
        ("restart", restart),
        ("listed", listed),
        ("async_actor", async_actor),
        ("threaded_actor", threaded_actor),
        ("straight_and_queued", straight_and_queued),
    ];
    starling_examples::run_checks(&checks)?;
    if !rt.in_process {
        // No other process can join an in-process runtime.
        starling_examples::run_checks(&[(
            "second_driver_and_detached",
            second_driver_and_detached,
        )])?;
    }
    Ok(())
}
