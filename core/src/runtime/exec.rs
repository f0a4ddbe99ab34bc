//! Executor threads: where task bodies run, never on an I/O runtime's threads.
//!
//! An executor pops tasks from its mailbox, resolves their arguments from the store (sharing the
//! bytes, not copying them), runs the function under `catch_unwind`, stores the value, and
//! reports the outcome. Idle executors spin briefly, then yield, then park: a burst of short
//! tasks never pays for a futex wake, and an idle runtime costs no CPU.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Once};
use std::task::{Wake, Waker};
use std::time::{Duration, Instant};

use crossbeam::sync::Parker;
use starling_proto::{ObjectId, RemoteError, TaskArg, TaskId, TaskSpec, WorkerId};
use starling_scheduler::TaskOutcome;
use starling_worker::store::{Blob, Lookup};

use super::engine::{Engine, Event, Slot};
use super::Runtime;
use crate::__private::InvokeError;
use crate::codec;
use crate::object_ref::RefHandle;
use crate::registry::{build_id, Registry};

/// How long a thread that waits for a result spins before it parks.
pub(crate) const WAIT_SPIN: Duration = Duration::from_micros(30);
/// How long an idle executor spins for its next task before it parks.
pub(crate) const IDLE_SPIN: Duration = Duration::from_micros(50);

/// Spins until `done()` or `max` has passed; returns whether `done()` held. Short tasks finish
/// within microseconds, so a brief spin saves a futex sleep and wake on each side. The spin is
/// bounded in time, and at most two threads spin at once (one waiter, one idle executor), so
/// it yields only rarely: each `sched_yield` costs a few microseconds on a VM (measured: sync
/// round trip median 11 us when yielding every 256 rounds, 2.8 us every 8192).
#[inline]
pub(crate) fn spin_until(max: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    let mut i = 0u32;
    loop {
        if done() {
            return true;
        }
        i += 1;
        if i.is_multiple_of(32) {
            let spent = start.elapsed();
            if spent >= max {
                return false;
            }
            if i.is_multiple_of(8192) {
                std::thread::yield_now();
            }
        }
        std::hint::spin_loop();
    }
}

struct ExecContext {
    /// Identifies the backend (its address) whose worker runs the task.
    owner: usize,
    worker: WorkerId,
    task: TaskId,
    /// The ids of the GPUs the task holds.
    gpu_ids: Vec<Arc<str>>,
    /// For a streaming task, its backpressure window (0: none).
    stream: Option<u32>,
    /// The actor the task creates or calls, if any.
    actor: Option<TaskId>,
}

thread_local! {
    static CONTEXT: Cell<Option<ExecContext>> = const { Cell::new(None) };
    static PANIC: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
    static WAKER: Waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    static TOKIO: RefCell<Option<tokio::runtime::Runtime>> = const { RefCell::new(None) };
}

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// A waker that unparks this thread.
pub(crate) fn thread_waker() -> Waker {
    WAKER.with(Waker::clone)
}

/// The worker id of this thread if it executes a task for the backend at address `owner`.
pub(crate) fn current_worker(owner: usize) -> Option<WorkerId> {
    with_context(|ctx| ctx.filter(|x| x.owner == owner).map(|x| x.worker))
}

/// Reads this thread's task context (`None` outside a task).
fn with_context<R>(f: impl FnOnce(Option<&ExecContext>) -> R) -> R {
    CONTEXT.with(|c| {
        let ctx = c.take();
        let r = f(ctx.as_ref());
        c.set(ctx);
        r
    })
}

/// The task this thread is executing, if any.
pub(crate) fn current_task() -> Option<TaskId> {
    with_context(|ctx| ctx.map(|x| x.task))
}

/// The actor whose creation task or call this thread is executing, with its worker and the
/// backend's address, if any.
pub(crate) fn current_actor() -> Option<(usize, WorkerId, TaskId)> {
    with_context(|ctx| ctx.and_then(|x| Some((x.owner, x.worker, x.actor?))))
}

/// The streaming task this thread is executing, if any, with its backpressure window.
pub(crate) fn current_stream() -> Option<(TaskId, u32)> {
    with_context(|ctx| ctx.and_then(|x| Some((x.task, x.stream?))))
}

/// Installs (once) a panic hook that, on executor threads, records the message and a backtrace
/// for the task's error instead of printing them; other threads keep the previous hook.
pub(crate) fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_task = with_context(|ctx| ctx.is_some());
            if !in_task {
                return prev(info);
            }
            let msg = panic_message(info.payload());
            let location = info
                .location()
                .map(|l| format!(" at {l}"))
                .unwrap_or_default();
            let bt = std::backtrace::Backtrace::force_capture().to_string();
            PANIC.with(|p| *p.borrow_mut() = Some((format!("{msg}{location}"), bt)));
        }));
    });
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// Runs a future to completion on this thread's current-thread tokio runtime, with every
/// driver tokio was built with (timers, and I/O: `tokio::net`, `tokio::process`, ..) enabled.
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    TOKIO.with(|t| {
        let mut t = t.borrow_mut();
        let rt = t.get_or_insert_with(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread tokio runtime")
        });
        rt.block_on(f)
    })
}

pub(crate) fn executor_main(engine: Arc<Engine>, slot: Arc<Slot>, parker: Parker) {
    super::set_thread_runtime(Some(Runtime::from_engine(engine.clone())));
    // Async tasks run together here (`max_concurrency`); dropped with the thread's loop, so a
    // retired executor's async tasks stop.
    let lane = super::lane::Lane::new(slot.signal.clone());
    loop {
        if engine.shut_down.load(Ordering::SeqCst) {
            break;
        }
        if let Some((task, gpu_ids)) = slot.tasks.pop() {
            // A task of an async function that may run beside others starts in the lane (if
            // its function is not async in this build, it runs alone, as any task).
            let entry = (task.extras.max_concurrency > 1)
                .then(|| engine.registry().async_entry(&task.function))
                .flatten();
            if let Some(entry) = entry {
                match start(&engine, &slot, &task, entry) {
                    Ok(future) => {
                        let (engine, slot) = (engine.clone(), slot.clone());
                        lane.spawn(async move {
                            let invoked = future.await;
                            let (outcome, nested) = settle(&engine, &slot, &task, invoked);
                            report(&engine, &slot, &task, outcome, nested);
                        });
                    }
                    Err((outcome, nested)) => report(&engine, &slot, &task, outcome, nested),
                }
                continue;
            }
            if task.extras.max_concurrency > 1 {
                // A call of a threaded actor: on a thread of its own, beside the actor's
                // other calls in flight (the scheduler lets in up to its `max_concurrency`).
                let (engine, slot) = (engine.clone(), slot.clone());
                super::threads::run(move || {
                    super::set_thread_runtime(Some(Runtime::from_engine(engine.clone())));
                    let (outcome, nested) = run(&engine, &slot, &task, Vec::new());
                    report(&engine, &slot, &task, outcome, nested);
                    super::set_thread_runtime(None);
                });
                continue;
            }
            let (outcome, nested) = run(&engine, &slot, &task, gpu_ids);
            report(&engine, &slot, &task, outcome, nested);
            if slot.retired.load(Ordering::SeqCst) {
                while slot.tasks.pop().is_some() {}
                break;
            }
            continue;
        }
        if lane.in_flight() > 0 {
            lane.drive(|| {
                !slot.tasks.is_empty()
                    || slot.retired.load(Ordering::SeqCst)
                    || engine.shut_down.load(Ordering::SeqCst)
            });
            if slot.retired.load(Ordering::SeqCst) {
                while slot.tasks.pop().is_some() {}
                break;
            }
            continue;
        }
        // One idle executor spins at a time, the most recently idle one: the scheduler hands the
        // next task to it first (its idle list is a stack). An older spinner sees it was
        // replaced and parks instead of taking a core.
        let me = slot.id.0;
        engine.spinner.store(me, Ordering::SeqCst);
        let spun = spin_until(IDLE_SPIN, || {
            !slot.tasks.is_empty() || engine.spinner.load(Ordering::Relaxed) != me
        }) && !slot.tasks.is_empty();
        let _ = engine
            .spinner
            .compare_exchange(me, 0, Ordering::SeqCst, Ordering::Relaxed);
        if !spun && slot.tasks.is_empty() && !engine.shut_down.load(Ordering::SeqCst) {
            parker.park_timeout(Duration::from_millis(500));
        }
    }
    super::set_thread_runtime(None);
}

/// The ref groups nested in each of a task's results.
type Nested = Vec<Vec<Arc<RefHandle>>>;

/// How a task ended, and the refs nested in its result (dropped only once the scheduler was
/// told the result holds them).
type Settled = (TaskOutcome, Nested);

/// Tells the scheduler how `task` ended, and which refs its results hold.
fn report(engine: &Engine, slot: &Slot, task: &TaskSpec, outcome: TaskOutcome, nested: Nested) {
    engine.post(match outcome {
        TaskOutcome::Stored { size } => Event::Stored(slot.id, task.id, size),
        other => Event::Finished(slot.id, task.id, Box::new(other)),
    });
    // Counted up in `settle`, which every report follows.
    slot.settling.fetch_sub(1, Ordering::SeqCst);
    for (object, refs) in task.return_objects().zip(&nested) {
        if !refs.is_empty() {
            let ids = refs.iter().map(|h| h.id).collect();
            engine.post(Event::Nested(object, ids));
        }
    }
    // The results' refs are let go only after the scheduler knows the results hold them.
    drop(nested);
}

/// `task`'s arguments from the store: the stored objects it reads, in order.
fn arguments(engine: &Engine, task: &TaskSpec) -> Result<Vec<Blob>, TaskOutcome> {
    let mut blobs: Vec<Blob> = Vec::new();
    for a in &task.args {
        if let TaskArg::Object(o) = a {
            match engine.store.lookup(*o, None) {
                Lookup::Ready(b) => blobs.push(b),
                _ => return Err(lost_argument(*o)),
            }
        }
    }
    Ok(blobs)
}

/// The encoded arguments of `task`: inline bytes borrowed, objects from `blobs`.
fn encoded<'a>(task: &'a TaskSpec, blobs: &'a [Blob]) -> Vec<&'a [u8]> {
    let mut next_blob = blobs.iter();
    task.args
        .iter()
        .map(|a| match a {
            TaskArg::Inline(b) => b.as_slice(),
            TaskArg::Object(_) => next_blob.next().map(|b| &**b).unwrap_or(&[]),
        })
        .collect()
}

/// Starts `task`, of an async function whose entry point is `entry`, to run beside others on
/// this thread: its future, or how it ended at once.
fn start(
    engine: &Engine,
    slot: &Slot,
    task: &TaskSpec,
    entry: crate::__private::InvokeAsyncFn,
) -> Result<std::pin::Pin<Box<dyn Future<Output = Invoked>>>, Settled> {
    let blobs = arguments(engine, task).map_err(|outcome| {
        // Not settled, but reported: counted as `settle` counts.
        slot.settling.fetch_add(1, Ordering::SeqCst);
        (outcome, Vec::new())
    })?;
    let args = encoded(task, &blobs);
    let owner = engine as *const Engine as usize;
    // Tasks run together hold no GPUs (the scheduler runs those alone).
    match start_async(entry, owner, slot.id, task, Vec::new(), &args, &blobs) {
        Started::Running(future) => Ok(future),
        Started::Ended(invoked) => Err(settle(engine, slot, task, invoked)),
    }
}

/// Runs `task`; returns how it ended and the refs nested in its result.
fn run(engine: &Engine, slot: &Slot, task: &TaskSpec, gpu_ids: Vec<Arc<str>>) -> Settled {
    // Resolve arguments: inline bytes are borrowed, objects are shared `Blob`s from the store.
    let blobs = match arguments(engine, task) {
        Ok(b) => b,
        Err(outcome) => {
            // Not settled, but reported: counted as `settle` counts.
            slot.settling.fetch_add(1, Ordering::SeqCst);
            return (outcome, Vec::new());
        }
    };
    let args = encoded(task, &blobs);
    let invoked = invoke(
        engine.registry(),
        engine as *const Engine as usize,
        slot.id,
        task,
        gpu_ids,
        &args,
        &blobs,
    );
    settle(engine, slot, task, invoked)
}

/// Stores what `task` returned (unless it was cancelled meanwhile): how it ended, for the
/// scheduler, and the refs nested in its results.
fn settle(engine: &Engine, slot: &Slot, task: &TaskSpec, invoked: Invoked) -> Settled {
    // Until `report` posts the end, the state API waits for it (see `Slot::settling`).
    slot.settling.fetch_add(1, Ordering::SeqCst);
    let cancelled = slot.is_cancelled(task.id.0);
    slot.forget_cancel(task.id.0);
    match invoked {
        Invoked::Value(bytes, nested) if task.return_count() == 1 => {
            let size = bytes.len() as u64;
            if !cancelled {
                engine.store.put(ObjectId::from(task.id), Blob::new(bytes));
            }
            (TaskOutcome::Stored { size }, nested)
        }
        Invoked::Value(bytes, nested) => {
            let parts = match codec::split_returns(&bytes, task.return_count() as usize) {
                Ok(parts) => parts,
                Err(why) => {
                    let e = RemoteError::new("starling::WrongReturnCount", why);
                    return (TaskOutcome::Failed(e), Vec::new());
                }
            };
            let sizes = parts.iter().map(|p| p.len() as u64).collect();
            if !cancelled {
                for (object, part) in task.return_objects().zip(parts) {
                    engine.store.put(object, Blob::new(part));
                }
            }
            (TaskOutcome::Returns(sizes), nested)
        }
        // Only a worker process on a node offers its tasks a store file.
        Invoked::Stored(..) => {
            let e = RemoteError::new(
                "starling::Internal",
                "an in-process task's value was written to a node's store",
            );
            (TaskOutcome::Failed(e), Vec::new())
        }
        Invoked::Failed(e) => (TaskOutcome::Failed(e), Vec::new()),
        Invoked::BadArgument(e) => (TaskOutcome::BadArgument(e), Vec::new()),
        Invoked::NotFound => (
            TaskOutcome::FunctionNotFound {
                build: build_id().to_string(),
            },
            Vec::new(),
        ),
    }
}

/// How one invocation of a remote function ended.
pub(crate) enum Invoked {
    /// The encoded return value (a task with several returns: all of them, framed by
    /// `codec::frame_returns`), and the ref groups nested in each returned value (to drop only
    /// once the scheduler was told the value holds them).
    Value(Vec<u8>, Vec<Vec<Arc<RefHandle>>>),
    /// The one return value, of this many bytes, written straight into the node's store (in a
    /// worker process, see `cluster::worker::return_file`), and the ref groups nested in it.
    Stored(u64, Vec<Vec<Arc<RefHandle>>>),
    /// A panic or an `Err`.
    Failed(RemoteError),
    /// An argument did not decode.
    BadArgument(RemoteError),
    /// This binary has no such function.
    NotFound,
}

/// Runs `task`'s function on this thread with its encoded `args`, catching panics. `owner` and
/// `worker` identify, for nested calls, which backend's worker is running (see
/// [`current_worker`]); `gpu_ids` are the GPUs it holds (see [`gpu_ids`]).
pub(crate) fn invoke(
    registry: &Registry,
    owner: usize,
    worker: WorkerId,
    task: &TaskSpec,
    gpu_ids: Vec<Arc<str>>,
    args: &[&[u8]],
    sources: &[Blob],
) -> Invoked {
    let Some(entry) = registry.lookup(&task.function) else {
        return Invoked::NotFound;
    };
    let mut ctx = Some(ExecContext {
        owner,
        worker,
        task: task.id,
        gpu_ids,
        stream: task.extras.streaming.then_some(task.extras.backpressure),
        actor: task.extras.actor.actor(task.id),
    });
    // `Bytes` arguments share the stored objects' buffers instead of copying them.
    codec::take_returned();
    let result = in_context(&mut ctx, || {
        crate::bytes::with_sources(sources, || {
            catch_unwind(AssertUnwindSafe(|| (entry.invoke)(args)))
        })
    });
    let nested = codec::take_returned();
    match result {
        Ok(Ok(bytes)) => Invoked::Value(bytes, nested),
        Ok(Err(e)) => invoked_error(e),
        Err(payload) => panicked(payload),
    }
}

/// A task of an async function started to run beside others ([`super::lane`]).
pub(crate) enum Started {
    /// It ended before its first `.await` could yield: its arguments did not decode, or it
    /// panicked while starting.
    Ended(Invoked),
    /// Its future, which ends with how the task ended.
    Running(std::pin::Pin<Box<dyn Future<Output = Invoked>>>),
}

/// Starts `task` as one of several on this thread through `start`, its function's async entry
/// point ([`Registry::async_entry`]). Arguments as for [`invoke`]; they are decoded now.
pub(crate) fn start_async(
    start: crate::__private::InvokeAsyncFn,
    owner: usize,
    worker: WorkerId,
    task: &TaskSpec,
    gpu_ids: Vec<Arc<str>>,
    args: &[&[u8]],
    sources: &[Blob],
) -> Started {
    let ctx = ExecContext {
        owner,
        worker,
        task: task.id,
        gpu_ids,
        stream: None,
        actor: task.extras.actor.actor(task.id),
    };
    let mut slot = Some(ctx);
    let started = in_context(&mut slot, || {
        crate::bytes::with_sources(sources, || catch_unwind(AssertUnwindSafe(|| start(args))))
    });
    match started {
        Ok(Ok(future)) => Started::Running(Box::pin(InTask {
            ctx: slot,
            future,
            done: false,
        })),
        Ok(Err(e)) => Started::Ended(invoked_error(e)),
        Err(payload) => Started::Ended(panicked(payload)),
    }
}

/// Runs `f` with `ctx` as this thread's task context, and takes it back after.
fn in_context<R>(ctx: &mut Option<ExecContext>, f: impl FnOnce() -> R) -> R {
    CONTEXT.with(|c| c.set(ctx.take()));
    let r = f();
    *ctx = CONTEXT.with(Cell::take);
    r
}

/// A running async task: each poll runs with its task context (so nested calls name it as
/// their parent, `is_cancelled` and `gpu_ids` answer for it, and a panic is recorded for it).
struct InTask {
    ctx: Option<ExecContext>,
    future: crate::__private::TaskFuture,
    done: bool,
}

impl Future for InTask {
    type Output = Invoked;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Invoked> {
        use std::task::Poll;
        if self.done {
            return Poll::Pending;
        }
        let this = &mut *self;
        codec::take_returned();
        let polled = in_context(&mut this.ctx, || {
            catch_unwind(AssertUnwindSafe(|| this.future.as_mut().poll(cx)))
        });
        let invoked = match polled {
            Ok(Poll::Pending) => return Poll::Pending,
            Ok(Poll::Ready(Ok(bytes))) => Invoked::Value(bytes, codec::take_returned()),
            Ok(Poll::Ready(Err(e))) => invoked_error(e),
            Err(payload) => panicked(payload),
        };
        this.done = true;
        Poll::Ready(invoked)
    }
}

fn invoked_error(e: InvokeError) -> Invoked {
    match e {
        InvokeError::Application(e) => Invoked::Failed(e),
        InvokeError::BadArgument(e) => Invoked::BadArgument(e),
    }
}

/// The failure of a task that panicked: the message and backtrace the panic hook recorded.
fn panicked(payload: Box<dyn std::any::Any + Send>) -> Invoked {
    let (message, backtrace) = PANIC
        .with(|p| p.borrow_mut().take())
        .unwrap_or_else(|| (panic_message(&*payload), String::new()));
    Invoked::Failed(RemoteError {
        type_name: "panic".into(),
        message,
        backtrace,
    })
}

fn lost_argument(o: ObjectId) -> TaskOutcome {
    TaskOutcome::BadArgument(RemoteError::new(
        "starling::ObjectLost",
        format!("argument object {o} no longer exists"),
    ))
}

/// The ids of the GPUs the task running on this thread holds (empty outside a task, or for a
/// task that asked for no GPUs), as Ray's `get_gpu_ids`: a task with `num_gpus = 2` gets two
/// ids, and tasks with fractions of a GPU that share one get the same id. The ids are the
/// node's: `--gpu-ids`, else what `nvidia-smi -L` lists, else `0..n` for `--num-gpus n`. In a
/// worker process `CUDA_VISIBLE_DEVICES` (and `STARLING_GPU_IDS`) hold the same ids, joined
/// with commas, while the task runs; in-process tasks share one process, so there only this
/// call says which GPUs a task may use.
pub fn gpu_ids() -> Vec<String> {
    with_context(|ctx| {
        ctx.map(|x| x.gpu_ids.iter().map(|id| id.to_string()).collect())
            .unwrap_or_default()
    })
}

/// Whether the task running on this thread was cancelled (cooperative cancellation: a long task
/// can poll this and return early).
pub fn is_cancelled() -> bool {
    let Some(task) = current_task() else {
        return false;
    };
    let Some(rt) = super::current() else {
        return false;
    };
    rt.is_cancelled(task)
}
