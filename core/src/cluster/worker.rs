//! Worker mode: the same binary, started by a node agent, runs tasks instead of `main`.
//!
//! A node agent starts worker processes by executing the job's binary with
//! `STARLING_WORKER_HEAD` (and the node, job and store) in the environment. A hook in
//! `.init_array` sees it before `main` — so it works for examples, services and `cargo test`
//! harnesses alike — connects to the head as a worker, runs the tasks it is given on this
//! thread, and exits when the head ends the session. The function registry is a linker section
//! (`linkme`), complete before any constructor runs.
//!
//! Each task's output is framed on stdout and stderr by marker lines
//! (`\x1e[starling task T<id>]` ... `\x1e[starling task -]`) that the node agent turns into
//! per-line task tags in the worker's log file.

use std::cell::Cell;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use starling_proto::session::{ClientOp, Hello, Outcome, ResolvedArg, Returned, RunTask, TaskDone};
use starling_proto::{ObjectId, TaskId, TaskSpec};
use starling_worker::store::Blob;

use super::client::{Client, SessionKind, INLINE_LIMIT};
use super::env;
use super::objects::{self, LocalStore};
use crate::object_ref::RefHandle;
use crate::registry::build_id;
use crate::runtime::exec::{self, Invoked, Started};
use crate::runtime::lane::{Lane, Signal};
use crate::runtime::Runtime;

pub(crate) mod direct;

/// Runs before `main` (Linux: an `.init_array` entry). Does nothing unless this process was
/// started as a worker, or as a `#[starling::job]` payload (see [`crate::job_fn`]).
#[cfg(target_os = "linux")]
#[used]
#[link_section = ".init_array"]
pub(crate) static WORKER_MODE_HOOK: extern "C" fn() = worker_mode_hook;

#[cfg(target_os = "linux")]
extern "C" fn worker_mode_hook() {
    if let Some(head) = std::env::var_os(env::WORKER_HEAD) {
        // Programs that tasks start (a `starling` CLI call, another Starling program) must not
        // become workers too. This runs before `main`, on the only thread.
        std::env::remove_var(env::WORKER_HEAD);
        die_with_agent();
        let head = head.to_string_lossy().into_owned();
        let code = match std::panic::catch_unwind(|| run_worker(head)) {
            Ok(Ok(())) => 0,
            Ok(Err(e)) => {
                eprintln!("starling worker: {e}");
                1
            }
            Err(_) => 101,
        };
        std::process::exit(code);
    }
    if let Some(function) = std::env::var_os(starling_proto::env::JOB_FUNCTION) {
        // A `#[starling::job]` payload on instance 0: run that function instead of `main`.
        // Programs it starts must not do the same.
        std::env::remove_var(starling_proto::env::JOB_FUNCTION);
        std::process::exit(crate::job_fn::run(&function.to_string_lossy()));
    }
}

/// Makes this worker process die (SIGKILL) when the node agent that started it dies, however it
/// dies (the agent starts it without code between fork and exec, see `env::AGENT_PID`; Linux
/// delivers the signal when the agent's thread that started it exits, and those live as long
/// as the agent). An agent already gone by now never signals: exit.
fn die_with_agent() {
    let Some(agent) = std::env::var(env::AGENT_PID)
        .ok()
        .and_then(|p| p.parse::<i32>().ok())
    else {
        return;
    };
    std::env::remove_var(env::AGENT_PID);
    // SAFETY: plain system calls on this process.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 || libc::getppid() != agent {
            libc::_exit(1);
        }
    }
}

/// A worker process allocates and frees buffers for task values (often megabytes) on every
/// task. By default glibc gives such buffers back to the kernel as soon as they are freed
/// (chunks over its mmap threshold are unmapped, the heap top is trimmed), so every task paid
/// a page fault per page of its values again, plus TLB shootdowns on the unmaps. Worker
/// processes keep freed memory for reuse instead: chunks up to 32 MiB come from the heap, and
/// up to 256 MiB of free heap top is kept.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it runs before any task does.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 20);
    }
}

fn var(name: &str) -> Result<String, crate::Error> {
    std::env::var(name)
        .map_err(|_| crate::Error::Startup(format!("worker mode needs {name} in the environment")))
}

fn run_worker(head: String) -> Result<(), crate::Error> {
    exec::install_panic_hook();
    keep_freed_memory();
    let node: u64 = var(env::NODE_ID)?
        .parse()
        .map_err(|_| crate::Error::Startup("bad node id".into()))?;
    let job: u64 = var(env::JOB_ID)?
        .parse()
        .map_err(|_| crate::Error::Startup("bad job id".into()))?;
    // The task environment the agent started this process with (unset: none).
    let task_env: u64 = match std::env::var(env::WORKER_ENV) {
        Ok(v) => v
            .parse()
            .map_err(|_| crate::Error::Startup("bad worker environment id".into()))?,
        Err(_) => 0,
    };
    let local = std::env::var(env::STORE_DIR).ok().map(|dir| LocalStore {
        node,
        dir: PathBuf::from(dir),
        spill_dir: PathBuf::from(std::env::var(env::SPILL_DIR).unwrap_or_default()),
    });
    let rt = super::client::runtime()?;
    let (runs_tx, runs) = crossbeam::channel::unbounded::<RunTask>();
    let hello = Hello {
        version: starling_proto::PROTOCOL_VERSION,
        build: build_id().to_string(),
        node: starling_proto::NodeId(node),
        job: starling_proto::JobId(job),
        is_worker: true,
        pid: std::process::id(),
        env: starling_proto::EnvId(task_env),
    };
    let kind = SessionKind {
        hello,
        local,
        runs: Some(runs_tx),
    };
    // The node agent passes the cluster token (and TLS trust) on in the environment.
    let creds = starling_proto::security::Credentials::from_env()
        .map_err(|e| crate::Error::Startup(format!("cluster credentials: {e}")))?;
    // On the head's host, the session goes through its link (`starling_proto::link`).
    let link = std::env::var_os(env::WORKER_LINK);
    std::env::remove_var(env::WORKER_LINK);
    let linked = link.and_then(|path| {
        let path = PathBuf::from(path);
        Client::connect_link(
            &path,
            &head,
            creds.clone(),
            kind.clone(),
            rt.handle().clone(),
            Duration::from_secs(30),
        )
        .map_err(|e| eprintln!("starling worker: the session link is not usable, using TCP: {e}"))
        .ok()
    });
    let client = match linked {
        Some(client) => client,
        None => Client::connect(
            &head,
            creds,
            kind,
            rt.handle().clone(),
            Duration::from_secs(30),
        )?,
    };
    client.set_own_runtime(rt);
    // Nested `remote` calls in tasks go to the same head, as this job.
    crate::runtime::set_default(Runtime::from_client(client.clone()));
    let pool = Arc::new(Pool {
        client: client.clone(),
        runs,
        gate: Mutex::new(Gate::default()),
        freed: Condvar::new(),
        idle: AtomicUsize::new(0),
        results: Mutex::new(LocalResults::default()),
        settled: Condvar::new(),
        times: Mutex::default(),
        fetched: Mutex::default(),
        gpus_shown: Mutex::default(),
        signal: Arc::default(),
    });
    let _ = POOL.set(pool.clone());
    // Kept mappings of objects freed while this process is idle go within a second.
    let weak = Arc::downgrade(&pool);
    client.handle().spawn(async move {
        loop {
            tokio::time::sleep(MAPPED_PRUNE_EVERY).await;
            let Some(pool) = weak.upgrade() else { return };
            let mut gone = Vec::new();
            pool.fetched
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .prune(&mut gone);
            drop(gone);
        }
    });
    pool.executor();
    Ok(())
}

/// The executor threads of a worker process. The head treats the process as one worker that runs
/// its tasks one at a time; the [`Gate`] enforces that. A task blocked in `get` steps out of it
/// and makes sure a spare thread exists, so tasks the head pipelined behind it still run (one of
/// them may be what it waits for); when it resumes, it steps back in at once (the task on the
/// spare thread runs on beside it; the next one waits for both). Any other thread
/// of the process waiting in `get` (one a task spawned: a worker process runs no driver code)
/// widens the gate by one while it waits, so the task that spawned it, which may be waiting for
/// it, does not hold up what it waits for.
struct Pool {
    client: Arc<Client>,
    runs: crossbeam::channel::Receiver<RunTask>,
    gate: Mutex<Gate>,
    freed: Condvar,
    /// Threads waiting for a task.
    idle: AtomicUsize,
    /// Results of this process's recent tasks, for tasks pipelined behind them.
    results: Mutex<LocalResults>,
    settled: Condvar,
    /// How long tasks of each function took here (a moving average).
    times: Mutex<std::collections::HashMap<starling_proto::FunctionName, Duration>>,
    /// Values this process fetched from other hosts or the head, for the next tasks that read
    /// them (objects never change, so a copy stays right while it is kept).
    fetched: Mutex<FetchCache>,
    /// What `CUDA_VISIBLE_DEVICES` was last set to here (`None`: never, as started).
    gpus_shown: Mutex<Option<String>>,
    /// Wakes the threads driving async tasks run together when a task arrives.
    signal: Arc<Signal>,
}

/// Fetched values, oldest dropped first beyond [`FETCH_CACHE_BYTES`]; and the mapped store
/// files recent tasks read, least recently read dropped first beyond [`MAPPED_KEEP`] or
/// [`MAPPED_KEEP_BYTES`], and dropped once their file has left the store (the object was
/// freed or spilled: checked every [`MAPPED_PRUNE_EVERY`]), so the memory they hold is not
/// kept past its object by more than that.
#[derive(Default)]
struct FetchCache {
    blobs: std::collections::HashMap<ObjectId, Blob>,
    order: std::collections::VecDeque<ObjectId>,
    bytes: usize,
    /// Least recently read first. A task that reads the same object as one before it (a
    /// shard read every round) finds its pages already mapped, and nobody unmaps them
    /// between the two.
    mapped: std::collections::VecDeque<(ObjectId, std::path::PathBuf, Blob)>,
}

/// What a worker process keeps of fetched values.
const FETCH_CACHE_BYTES: usize = 256 << 20;

/// How many mapped store files, and how many bytes of them, a worker process keeps mapped
/// after its tasks end.
const MAPPED_KEEP: usize = 4;
const MAPPED_KEEP_BYTES: usize = 256 << 20;

/// How often a worker process drops the kept mappings whose files left the store.
const MAPPED_PRUNE_EVERY: Duration = Duration::from_secs(1);

impl FetchCache {
    fn get(&mut self, object: ObjectId) -> Option<Blob> {
        if let Some(b) = self.blobs.get(&object) {
            return Some(b.clone());
        }
        let at = self.mapped.iter().position(|(o, _, _)| *o == object)?;
        let entry = self.mapped.remove(at)?;
        let blob = entry.2.clone();
        self.mapped.push_back(entry);
        Some(blob)
    }

    /// Drops the mappings of files no longer in the store, into `out`.
    fn prune(&mut self, out: &mut Vec<Blob>) {
        let mut i = 0;
        while i < self.mapped.len() {
            if self.mapped[i].1.exists() {
                i += 1;
            } else if let Some((_, _, b)) = self.mapped.remove(i) {
                out.push(b);
            }
        }
    }

    /// Keeps a mapped store file at `path`; `out` gets the mappings pushed out.
    fn put_mapped(
        &mut self,
        object: ObjectId,
        path: &std::path::Path,
        blob: Blob,
        out: &mut Vec<Blob>,
    ) {
        if blob.len() > MAPPED_KEEP_BYTES / 2 || self.mapped.iter().any(|(o, _, _)| *o == object) {
            return;
        }
        self.mapped.push_back((object, path.to_path_buf(), blob));
        let mut bytes: usize = self.mapped.iter().map(|(_, _, b)| b.len()).sum();
        while self.mapped.len() > MAPPED_KEEP || bytes > MAPPED_KEEP_BYTES {
            let Some((_, _, b)) = self.mapped.pop_front() else {
                break;
            };
            bytes -= b.len();
            out.push(b);
        }
    }

    fn put(&mut self, object: ObjectId, blob: Blob) {
        if blob.len() > FETCH_CACHE_BYTES / 2 || self.blobs.contains_key(&object) {
            return;
        }
        self.bytes += blob.len();
        self.blobs.insert(object, blob);
        self.order.push_back(object);
        while self.bytes > FETCH_CACHE_BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(b) = self.blobs.remove(&old) {
                self.bytes -= b.len();
            }
        }
    }
}

/// What tasks pipelined behind others on this worker need: the values of the tasks before them.
#[derive(Default)]
struct LocalResults {
    /// Finished tasks: their value, or `None` if they failed.
    done: std::collections::HashMap<u64, Option<LocalValue>>,
    order: std::collections::VecDeque<u64>,
    running: std::collections::HashSet<u64>,
}

/// A finished task's value, kept for the tasks pipelined behind it.
enum LocalValue {
    /// Its bytes.
    Inline(Blob),
    /// Stored in this node's store file, mapped when a dependent asks: a mapping held here
    /// (for thousands of tasks) would keep the files of freed objects from being released or
    /// reused.
    Stored,
}

/// Results kept for pipelined dependents; older ones are dropped (the head never pipelines a
/// task that far behind its producer).
const LOCAL_RESULTS: usize = 4096;

impl Pool {
    fn started(&self, task: u64) {
        self.results
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .running
            .insert(task);
    }

    fn finished(&self, task: u64, value: Option<LocalValue>) {
        let mut r = self.results.lock().unwrap_or_else(|e| e.into_inner());
        r.running.remove(&task);
        r.done.insert(task, value);
        r.order.push_back(task);
        while r.order.len() > LOCAL_RESULTS {
            if let Some(old) = r.order.pop_front() {
                r.done.remove(&old);
            }
        }
        drop(r);
        self.settled.notify_all();
    }

    /// The value of a task that ran (or runs) on this worker before the current one.
    fn local_result(&self, object: ObjectId) -> Option<Blob> {
        let task = object.task().0;
        let mut r = self.results.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match r.done.get(&task) {
                Some(Some(LocalValue::Inline(b))) => return Some(b.clone()),
                Some(Some(LocalValue::Stored)) => {
                    drop(r);
                    let path = self.client.local_store()?.path(object);
                    return Blob::map_object(&path, object.0, self.client.head_epoch()).ok();
                }
                Some(None) => return None,
                None => {}
            }
            // Tasks run in the order they were handed over, so the producer has started; it may
            // still run on another thread while its first task is blocked in `get`.
            if !r.running.contains(&task) {
                return None;
            }
            r = self.settled.wait(r).unwrap_or_else(|e| e.into_inner());
        }
    }
}

static POOL: OnceLock<Arc<Pool>> = OnceLock::new();

/// The object a task running on this thread may write its one return value into, in place.
#[derive(Clone, Copy)]
struct ReturnFile {
    task: TaskId,
    object: ObjectId,
    /// The value's size, once it was written.
    stored: Option<u64>,
}

thread_local! {
    /// Set by `run_spec` for the task it runs (and put back after it).
    static RETURN_FILE: Cell<Option<ReturnFile>> = const { Cell::new(None) };
}

/// A store file for the return value, of `size` bytes, of the task running on this thread: when
/// this is a worker process on a node, the task has one return and the value is too large to
/// travel inline. Encoded straight into the file, a large result is copied once.
pub(crate) fn return_file(size: usize) -> Option<objects::StoreFile> {
    if size <= INLINE_LIMIT {
        return None;
    }
    let offer = RETURN_FILE.get().filter(|f| f.stored.is_none())?;
    if exec::current_task() != Some(offer.task) {
        return None;
    }
    let client = &POOL.get()?.client;
    let local = client.local_store()?;
    local
        .create(offer.object, client.head_epoch(), client.job(), size)
        .ok()
}

/// The return value written into `file` (from [`return_file`]) is complete: it is stored, and
/// the task reports it as stored. An error stores nothing.
pub(crate) fn returned_in_file(file: objects::StoreFile) -> std::io::Result<()> {
    let size = file.finish()?.size;
    if let Some(mut offer) = RETURN_FILE.get() {
        offer.stored = Some(size);
        RETURN_FILE.set(Some(offer));
    }
    Ok(())
}

/// Who may start tasks in a worker process: one executor thread at a time, plus one more per
/// thread that runs no task and waits in `get` (a task resuming from `get` steps in at once).
#[derive(Default)]
struct Gate {
    /// Executor threads running a task and not blocked in `get`.
    running: usize,
    /// Other threads blocked in `get`.
    waiting: usize,
}

impl Pool {
    /// Steps into the gate before a task runs: waits while another runs.
    fn acquire(&self) {
        let mut g = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        while g.running > g.waiting {
            g = self.freed.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        g.running += 1;
    }

    /// Steps back into the gate as a task blocked in `get` resumes: at once, beside whatever
    /// runs on a spare thread meanwhile (the process briefly runs two, as the head lets a
    /// resumed task run without its CPUs rather than wait). Waiting here would hold a task
    /// whose child was cancelled, say, until a task run meanwhile ends, for any time.
    fn resume(&self) {
        let mut g = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        g.running += 1;
    }

    /// Steps out of the gate (a task ended, or blocked in `get`).
    fn release(&self) {
        let mut g = self.gate.lock().unwrap_or_else(|e| e.into_inner());
        g.running = g.running.saturating_sub(1);
        drop(g);
        self.freed.notify_all();
    }

    /// Makes sure a thread is waiting for the next task handed to this process.
    fn spare_thread(self: &Arc<Self>) {
        if self.idle.load(Ordering::SeqCst) == 0 {
            let p = self.clone();
            let _ = std::thread::Builder::new()
                .name("starling-exec".into())
                .spawn(move || p.executor());
        }
    }

    /// Runs tasks until the session ends.
    fn executor(self: &Arc<Self>) {
        let worker = self.client.worker.unwrap_or_default();
        let owner = Arc::as_ptr(&self.client) as usize;
        // Async tasks this thread runs together (`max_concurrency`), driven whenever no task
        // waits to be started. They stay out of the gate: the head hands such tasks only to a
        // worker running no other kind, so they never compete with a task run alone. (Another
        // thread may run a lane too, after a spare thread took one of them.)
        let lane = Lane::new(self.signal.clone());
        loop {
            let run = if lane.in_flight() > 0 {
                match self.runs.try_recv() {
                    Ok(run) => Ok(run),
                    Err(crossbeam::channel::TryRecvError::Empty) => {
                        self.report();
                        IN_LANE.with(|l| l.set(true));
                        lane.drive(|| !self.runs.is_empty());
                        IN_LANE.with(|l| l.set(false));
                        continue;
                    }
                    Err(crossbeam::channel::TryRecvError::Disconnected) => Err(()),
                }
            } else {
                self.idle.fetch_add(1, Ordering::SeqCst);
                // No idle spin here, unlike the in-process executors: a worker process's next
                // task comes from the head, which needs the core a spinning worker would hold
                // (on two cores, local cluster, noop_tasks_async: 97.5k tasks/s without the
                // spin, 90.8k with a 50 us spin; the sync round trip is no slower).
                if self.runs.is_empty() {
                    self.report();
                }
                let run = self.runs.recv();
                self.idle.fetch_sub(1, Ordering::SeqCst);
                run.map_err(|_| ())
            };
            let Ok(run) = run else {
                self.report();
                return;
            };
            // A task of an async function that may run beside others starts in the lane (if
            // its function is not async in this build, it runs alone, as any task).
            let entry = (run.spec.extras.max_concurrency > 1)
                .then(|| self.client.registry().async_entry(&run.spec.function))
                .flatten();
            if let Some(entry) = entry {
                self.start_concurrent(owner, worker, run, entry, &lane);
                continue;
            }
            if run.spec.extras.max_concurrency > 1 {
                self.start_threaded(owner, worker, run);
                continue;
            }
            let short = self.is_short(&run);
            if !short || UNREPORTED.with(|u| u.borrow().due()) {
                self.report();
            }
            let mut args = TaskHolds::default();
            let done = self.run_in_gate(owner, worker, run, &mut args);
            let nested = std::mem::take(&mut args.nested);
            UNREPORTED.with(|u| u.borrow_mut().push(done, nested));
            // Mapped arguments are unmapped only once the result is on its way: tearing down
            // the page tables of every page a task touched takes a while, and nobody waits on it.
            if !args.blobs.is_empty() && self.runs.is_empty() {
                self.report();
            }
            drop(args);
        }
    }

    /// Sends this thread's unreported results to the head, as one batch.
    fn report(&self) {
        let (ops, nested) = UNREPORTED.with(|u| u.borrow_mut().take());
        self.client.send_many(ops);
        drop(nested);
    }

    /// Shows the task about to run the GPUs it holds: `CUDA_VISIBLE_DEVICES` and
    /// `STARLING_GPU_IDS` become its ids joined with commas (the agent starts workers of a GPU
    /// node with both empty, so a task that asked for none sees none). Set only when they
    /// change, inside the gate (one task runs at a time, and tasks pipelined behind a
    /// blocked one are of its class, so they hold the same GPUs).
    fn use_gpus(&self, ids: Vec<String>) -> Vec<std::sync::Arc<str>> {
        let mut shown = self.gpus_shown.lock().unwrap_or_else(|e| e.into_inner());
        let joined = ids.join(",");
        if shown.as_deref() != Some(joined.as_str()) && (!ids.is_empty() || shown.is_some()) {
            std::env::set_var(super::env::CUDA_VISIBLE_DEVICES, &joined);
            std::env::set_var(super::env::GPU_IDS, &joined);
            *shown = Some(joined);
        }
        ids.into_iter().map(std::sync::Arc::from).collect()
    }

    /// Whether tasks of `run`'s function have so far taken under [`SHORT_TASK`] here: only
    /// behind those may finished tasks wait to be reported together.
    fn is_short(&self, run: &RunTask) -> bool {
        let times = self.times.lock().unwrap_or_else(|e| e.into_inner());
        times
            .get(&*run.spec.function)
            .is_some_and(|t| *t < SHORT_TASK)
    }

    /// Records how long a task of `function` took (a moving average).
    fn ran(&self, function: starling_proto::FunctionName, took: Duration) {
        let mut times = self.times.lock().unwrap_or_else(|e| e.into_inner());
        match times.get_mut(&*function) {
            Some(t) => *t = (*t * 3 + took) / 4,
            None => {
                times.insert(function, took);
            }
        }
    }
}

/// Finished tasks of short functions are reported in batches: one message (and one wake of the
/// I/O thread and of the head) per batch instead of per task. A batch goes out when the worker
/// runs out of queued tasks, before a task that may be long or may block, and at the latest
/// after [`REPORT_MAX`] tasks or [`REPORT_AGE`].
const SHORT_TASK: Duration = Duration::from_micros(50);
const REPORT_MAX: usize = 64;
const REPORT_AGE: Duration = Duration::from_micros(200);

/// What a task run leaves to keep for a while: its mapped arguments (unmapped once its result
/// is on its way) and the ref groups nested in its result (dropped once the head was told).
#[derive(Default)]
struct TaskHolds {
    blobs: Vec<Blob>,
    /// One list per returned object.
    nested: Vec<Vec<Arc<RefHandle>>>,
}

#[derive(Default)]
struct Unreported {
    ops: Vec<ClientOp>,
    /// The ref groups nested in the unreported results: let go only after the report is sent,
    /// so the head hears that a result holds them before it hears they were dropped.
    nested: Vec<Arc<RefHandle>>,
    oldest: Option<Instant>,
}

impl Unreported {
    /// Queues a task's report, then the refs each of its returned values holds (one list per
    /// returned object, in order).
    fn push(&mut self, done: TaskDone, nested: Vec<Vec<Arc<RefHandle>>>) {
        self.oldest.get_or_insert_with(Instant::now);
        let first = done.task.0;
        let stored = matches!(
            done.outcome,
            Outcome::Inline(_) | Outcome::Stored(_) | Outcome::Returns(_)
        );
        self.ops.push(ClientOp::Done(done));
        if !stored {
            return;
        }
        for (k, refs) in nested.into_iter().enumerate() {
            if !refs.is_empty() {
                let container = ObjectId(first + k as u64);
                let ids = refs.iter().map(|h| h.id).collect();
                self.ops.push(ClientOp::Nested {
                    container,
                    refs: ids,
                });
                self.nested.extend(refs);
            }
        }
    }

    fn due(&self) -> bool {
        self.ops.len() >= REPORT_MAX || self.oldest.is_some_and(|t| t.elapsed() >= REPORT_AGE)
    }

    fn take(&mut self) -> (Vec<ClientOp>, Vec<Arc<RefHandle>>) {
        self.oldest = None;
        (
            std::mem::take(&mut self.ops),
            std::mem::take(&mut self.nested),
        )
    }
}

thread_local! {
    /// This executor thread's finished tasks not yet reported to the head.
    static UNREPORTED: std::cell::RefCell<Unreported> = std::cell::RefCell::default();
}

thread_local! {
    /// When the task on this thread blocked in `get`, and how long it has been blocked in all:
    /// the runtime reported to the head excludes waiting, so a task that mostly waits for its
    /// children still counts as short (and its children are pipelined to it).
    static BLOCKED: std::cell::Cell<(Option<std::time::Instant>, Duration)> =
        const { std::cell::Cell::new((None, Duration::ZERO)) };
}

/// The constructor of `actor` ran in this worker process (the backend at `owner`): its callers
/// on this host may now send it calls straight (see [`direct`]; they send only calls that run
/// one at a time: an async or threaded actor's run in the executor's lane, the head's way).
pub(crate) fn actor_made(owner: usize, actor: TaskId) {
    let Some(pool) = POOL.get() else { return };
    if Arc::as_ptr(&pool.client) as usize == owner {
        direct::listen(pool, actor);
    }
}

/// The session handed this process a task: threads driving async tasks look at it.
pub(crate) fn run_arrived() {
    if let Some(pool) = POOL.get() {
        pool.signal.notify();
    }
}

thread_local! {
    /// Whether this thread runs tasks outside the gate: it drives async tasks run together, or
    /// runs a call of a threaded actor.
    static IN_LANE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A task of this worker process blocked (`true`) in `get`, or resumed (`false`).
pub(crate) fn task_blocked(blocked: bool) {
    BLOCKED.with(|b| {
        let (since, total) = b.get();
        b.set(match (blocked, since) {
            (true, _) => (Some(std::time::Instant::now()), total),
            (false, Some(t)) => (None, total + t.elapsed()),
            (false, None) => (None, total),
        });
    });
    let Some(pool) = POOL.get() else { return };
    if IN_LANE.with(|l| l.get()) {
        // An async task run beside others waits in a blocking `get` (it should `.await`): the
        // lane's thread is outside the gate; make sure another thread takes new tasks.
        if blocked {
            pool.report();
            pool.spare_thread();
        }
        return;
    }
    if blocked {
        // What this thread finished before may be what the wait is for.
        pool.report();
        pool.release();
        pool.spare_thread();
    } else {
        pool.resume();
    }
}

/// A thread of this worker process that runs no task (one a task spawned) blocked (`true`) in
/// `get`, or resumed (`false`): while it waits, one more task may run here.
pub(crate) fn thread_blocked(blocked: bool) {
    let Some(pool) = POOL.get() else { return };
    let mut g = pool.gate.lock().unwrap_or_else(|e| e.into_inner());
    if blocked {
        g.waiting += 1;
        drop(g);
        pool.freed.notify_all();
        pool.spare_thread();
    } else {
        g.waiting = g.waiting.saturating_sub(1);
    }
}

/// The task running in this worker process if exactly one does: the task a thread that runs no
/// task of its own belongs to. `None` outside worker processes, or with several (a blocked task
/// and the ones run beside it), where nothing tells which one spawned the thread.
pub(crate) fn sole_running_task() -> Option<starling_proto::TaskId> {
    let pool = POOL.get()?;
    let r = pool.results.lock().unwrap_or_else(|e| e.into_inner());
    let mut running = r.running.iter();
    match (running.next(), running.next()) {
        (Some(t), None) => Some(starling_proto::TaskId(*t)),
        _ => None,
    }
}

impl Pool {
    /// Runs `run` alone in the gate (see [`Gate`]) and records how long its function took.
    fn run_in_gate(
        &self,
        owner: usize,
        worker: starling_proto::WorkerId,
        run: RunTask,
        holds: &mut TaskHolds,
    ) -> TaskDone {
        self.acquire();
        let started = Instant::now();
        let (function, done) = self.run_task(owner, worker, run, holds);
        self.release();
        if let Some(function) = function {
            self.ran(function, started.elapsed());
        }
        done
    }

    fn run_task(
        &self,
        owner: usize,
        worker: starling_proto::WorkerId,
        run: RunTask,
        holds: &mut TaskHolds,
    ) -> (Option<starling_proto::FunctionName>, TaskDone) {
        let spec = run.spec;
        let task = spec.id.0;
        self.started(task);
        let gpu_ids = self.use_gpus(run.gpu_ids);
        let done = self.run_spec(owner, worker, &spec, gpu_ids, &run.args, holds);
        let value = self.local_value(&done.outcome);
        self.finished(task, value);
        (Some(spec.function), done)
    }

    /// The values of a task with several returns, each inline or, if large, in the node's
    /// store under its own object id.
    fn store_returns(&self, spec: &TaskSpec, bytes: Vec<u8>) -> Outcome {
        let client = &self.client;
        let parts = match crate::codec::split_returns(&bytes, spec.return_count() as usize) {
            Ok(parts) => parts,
            Err(why) => {
                let e = starling_proto::RemoteError::new("starling::WrongReturnCount", why);
                return Outcome::Failed(e);
            }
        };
        drop(bytes);
        let values = spec
            .return_objects()
            .zip(parts)
            .map(|(object, part)| match client.local_store() {
                Some(local) if part.len() > INLINE_LIMIT => {
                    match local.write(object, client.head_epoch(), client.job(), &part) {
                        Ok(_) => Returned::Stored(part.len() as u64),
                        Err(_) => Returned::Inline(part),
                    }
                }
                _ => Returned::Inline(part),
            })
            .collect();
        Outcome::Returns(values)
    }

    /// `spec`'s arguments: inline bytes as they came (`None` here), located objects from this
    /// host's store, fetched from their node, or made by a task before it on this worker. The
    /// task's report instead if it cannot run (cancelled, or an argument is lost).
    fn arguments(
        &self,
        spec: &TaskSpec,
        resolved: &[ResolvedArg],
        holds: &mut TaskHolds,
    ) -> Result<Vec<Option<Blob>>, TaskDone> {
        let client = &self.client;
        let failed = |outcome| TaskDone {
            task: spec.id,
            outcome,
            runtime_us: 0,
        };
        if client.is_cancelled(spec.id) {
            let e =
                starling_proto::RemoteError::new("starling::Cancelled", "cancelled before it ran");
            return Err(failed(Outcome::Failed(e)));
        }
        let mut blobs: Vec<Option<Blob>> = Vec::with_capacity(resolved.len());
        for a in resolved {
            match a {
                ResolvedArg::Local(o) => match self.local_result(*o) {
                    Some(b) => blobs.push(Some(b)),
                    None => {
                        let why = format!("argument object {o} was not made on this worker");
                        let e = starling_proto::RemoteError::new("starling::ObjectLost", why);
                        return Err(failed(Outcome::BadArgument(e)));
                    }
                },
                ResolvedArg::Location(l) => {
                    let object = l.object;
                    let cached = self
                        .fetched
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get(object);
                    let spill = client.local_store().map(|s| s.spill_dir.clone());
                    let was_cached = cached.is_some();
                    let got = match cached {
                        Some(b) => Ok(b),
                        None => client.handle().block_on(objects::fetch(
                            object,
                            l,
                            client.addr(),
                            client.credentials(),
                            spill.as_deref(),
                            client.head_epoch(),
                        )),
                    };
                    match got {
                        Ok(b) => {
                            if !was_cached {
                                // What this pushes out is unmapped with the arguments, after
                                // the result is reported.
                                let mut cache =
                                    self.fetched.lock().unwrap_or_else(|e| e.into_inner());
                                if b.is_mapped() {
                                    let path = std::path::Path::new(&l.path);
                                    cache.put_mapped(object, path, b.clone(), &mut holds.blobs);
                                } else {
                                    cache.put(object, b.clone());
                                }
                            }
                            blobs.push(Some(b))
                        }
                        Err(e) => {
                            let e = starling_proto::RemoteError::new(
                                "starling::ObjectLost",
                                e.to_string(),
                            );
                            return Err(failed(Outcome::BadArgument(e)));
                        }
                    }
                }
                ResolvedArg::Inline(_) => blobs.push(None),
            }
        }
        Ok(blobs)
    }

    fn run_spec(
        &self,
        owner: usize,
        worker: starling_proto::WorkerId,
        spec: &TaskSpec,
        gpu_ids: Vec<std::sync::Arc<str>>,
        resolved: &[ResolvedArg],
        holds: &mut TaskHolds,
    ) -> TaskDone {
        let blobs = match self.arguments(spec, resolved, holds) {
            Ok(blobs) => blobs,
            Err(done) => return done,
        };
        let args = encoded_args(resolved, &blobs);
        mark(Some(spec.id));
        let started = std::time::Instant::now();
        BLOCKED.with(|b| b.set((None, Duration::ZERO)));
        let sources: Vec<Blob> = blobs.iter().flatten().cloned().collect();
        let offer = (spec.return_count() == 1 && self.client.local_store().is_some()).then_some(
            ReturnFile {
                task: spec.id,
                object: spec.return_object(),
                stored: None,
            },
        );
        let outer = RETURN_FILE.replace(offer);
        let invoked = exec::invoke(
            self.client.registry(),
            owner,
            worker,
            spec,
            gpu_ids,
            &args,
            &sources,
        );
        let stored = RETURN_FILE.replace(outer).and_then(|f| f.stored);
        let invoked = match (invoked, stored) {
            (Invoked::Value(_, refs), Some(size)) => Invoked::Stored(size, refs),
            (invoked, _) => invoked,
        };
        let waited = BLOCKED.with(|b| b.get().1);
        let runtime_us = started.elapsed().saturating_sub(waited).as_micros() as u64;
        // The next task's marker ends this one's output; mark the end only when going idle, so a
        // stream of short tasks costs one marker write per stream per task.
        if POOL.get().is_none_or(|p| p.runs.is_empty()) {
            mark(None);
        }
        let done = self.done_of(spec, invoked, holds, runtime_us);
        holds.blobs.extend(blobs.into_iter().flatten());
        done
    }

    /// The report of `spec`'s run that ended as `invoked`: its values stored (large ones in
    /// this node's store), the refs they hold kept in `holds` until the report is sent.
    fn done_of(
        &self,
        spec: &TaskSpec,
        invoked: Invoked,
        holds: &mut TaskHolds,
        runtime_us: u64,
    ) -> TaskDone {
        let client = &self.client;
        let outcome = match invoked {
            Invoked::Value(bytes, refs) if spec.return_count() > 1 => {
                holds.nested = refs;
                self.store_returns(spec, bytes)
            }
            Invoked::Value(bytes, refs) => {
                holds.nested = refs;
                match client.local_store() {
                    Some(local) if bytes.len() > INLINE_LIMIT => {
                        match local.write(
                            spec.return_object(),
                            client.head_epoch(),
                            client.job(),
                            &bytes,
                        ) {
                            Ok(_) => Outcome::Stored(bytes.len() as u64),
                            Err(_) => Outcome::Inline(bytes),
                        }
                    }
                    _ => Outcome::Inline(bytes),
                }
            }
            Invoked::Stored(size, refs) => {
                holds.nested = refs;
                Outcome::Stored(size)
            }
            Invoked::Failed(e) => Outcome::Failed(e),
            Invoked::BadArgument(e) => Outcome::BadArgument(e),
            Invoked::NotFound => Outcome::FunctionNotFound(build_id().to_string()),
        };
        TaskDone {
            task: spec.id,
            outcome,
            runtime_us,
        }
    }

    /// Starts `run`, a task of an async function (whose entry point is `entry`) that may run
    /// beside others, in this thread's `lane`; it reports itself when it ends.
    fn start_concurrent(
        self: &Arc<Self>,
        owner: usize,
        worker: starling_proto::WorkerId,
        run: RunTask,
        entry: crate::__private::InvokeAsyncFn,
        lane: &Lane,
    ) {
        let spec = run.spec;
        self.started(spec.id.0);
        let began = Instant::now();
        let mut holds = TaskHolds::default();
        let blobs = match self.arguments(&spec, &run.args, &mut holds) {
            Ok(blobs) => blobs,
            Err(done) => {
                self.ended(&spec, done, holds);
                return;
            }
        };
        let args = encoded_args(&run.args, &blobs);
        let sources: Vec<Blob> = blobs.iter().flatten().cloned().collect();
        // Tasks run together hold no GPUs (the scheduler runs those alone).
        let started = exec::start_async(entry, owner, worker, &spec, Vec::new(), &args, &sources);
        drop(args);
        holds.blobs.extend(blobs.into_iter().flatten());
        match started {
            Started::Running(future) => {
                let pool = self.clone();
                lane.spawn(async move {
                    let invoked = future.await;
                    let runtime_us = began.elapsed().as_micros() as u64;
                    let done = pool.done_of(&spec, invoked, &mut holds, runtime_us);
                    pool.ended(&spec, done, holds);
                });
            }
            Started::Ended(invoked) => {
                let done = self.done_of(&spec, invoked, &mut holds, 0);
                self.ended(&spec, done, holds);
            }
        }
    }

    /// Starts `run`, a call of a threaded actor (a sync method that may run beside the actor's
    /// other calls in flight), on a thread of its own outside the gate; it reports itself when
    /// it ends.
    fn start_threaded(
        self: &Arc<Self>,
        owner: usize,
        worker: starling_proto::WorkerId,
        run: RunTask,
    ) {
        let pool = self.clone();
        crate::runtime::threads::run(move || {
            IN_LANE.with(|l| l.set(true));
            let spec = run.spec;
            pool.started(spec.id.0);
            let mut holds = TaskHolds::default();
            // Calls run together hold no GPUs (the scheduler runs those alone).
            let done = pool.run_spec(owner, worker, &spec, Vec::new(), &run.args, &mut holds);
            pool.ended(&spec, done, holds);
            IN_LANE.with(|l| l.set(false));
        });
    }

    /// A task run beside others ended: its report goes out at once (such tasks wait on I/O,
    /// so nothing batches behind them), then what it held is let go.
    fn ended(&self, spec: &TaskSpec, done: TaskDone, mut holds: TaskHolds) {
        let value = self.local_value(&done.outcome);
        self.finished(spec.id.0, value);
        let nested = std::mem::take(&mut holds.nested);
        UNREPORTED.with(|u| u.borrow_mut().push(done, nested));
        self.report();
        drop(holds);
    }

    /// What a task pipelined behind the one that ended as `outcome` reads as its value.
    fn local_value(&self, outcome: &Outcome) -> Option<LocalValue> {
        match outcome {
            Outcome::Inline(bytes) => Some(LocalValue::Inline(Blob::new(bytes.clone()))),
            Outcome::Stored(_) => Some(LocalValue::Stored),
            _ => None,
        }
    }
}

/// The encoded arguments of a task: inline bytes as they came, the others from `blobs`.
fn encoded_args<'a>(resolved: &'a [ResolvedArg], blobs: &'a [Option<Blob>]) -> Vec<&'a [u8]> {
    resolved
        .iter()
        .zip(blobs)
        .map(|(a, b)| match (a, b) {
            (ResolvedArg::Inline(bytes), _) => bytes.as_slice(),
            (_, Some(b)) => &**b,
            _ => &[],
        })
        .collect()
}

/// Frames a task's output for the node agent's log tagging.
fn mark(task: Option<starling_proto::TaskId>) {
    let line = match task {
        Some(t) => format!("\x1e[starling task {t}]\n"),
        None => "\x1e[starling task -]\n".to_string(),
    };
    let _ = std::io::stdout().lock().write_all(line.as_bytes());
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mapped store file of `len` bytes in `dir`, as object `id`.
    fn mapped(dir: &std::path::Path, id: u64, len: usize) -> (ObjectId, std::path::PathBuf, Blob) {
        let path = dir.join(id.to_string());
        std::fs::write(&path, vec![id as u8; len]).expect("write");
        let blob = Blob::map_file(&path).expect("map");
        assert!(blob.is_mapped());
        (ObjectId(id), path, blob)
    }

    #[test]
    fn kept_mappings_go_least_recently_read_first_and_when_their_file_leaves() {
        let dir = std::env::temp_dir().join(format!("starling-fetch-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let mut cache = FetchCache::default();
        let mut out = Vec::new();
        let files: Vec<_> = (1..=5).map(|i| mapped(&dir, i, 4096)).collect();
        for (id, path, blob) in files.iter().take(MAPPED_KEEP) {
            cache.put_mapped(*id, path, blob.clone(), &mut out);
        }
        assert!(out.is_empty());
        // Reading object 1 makes object 2 the least recently read.
        let one = cache.get(ObjectId(1)).expect("kept");
        assert_eq!(one[0], 1);
        let (id, path, blob) = &files[4];
        cache.put_mapped(*id, path, blob.clone(), &mut out);
        assert_eq!(out.len(), 1, "one pushed out");
        assert_eq!(out[0][0], 2, "the least recently read");
        assert!(cache.get(ObjectId(2)).is_none());
        // Object 3's file leaves the store (freed or spilled): its mapping goes.
        std::fs::remove_file(&files[2].1).expect("remove");
        out.clear();
        cache.prune(&mut out);
        assert!(cache.get(ObjectId(3)).is_none());
        assert_eq!(out.len(), 1);
        assert_eq!(out[0][0], 3);
        assert!(cache.get(ObjectId(4)).is_some());
        assert_eq!(out.len(), 1, "nothing else went");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
