//! Runtimes: where tasks run. A [`Runtime`] is either in-process (the scheduler and an executor
//! thread pool inside this process) or a client of a cluster (a local one started by this
//! process, or a remote head).
//!
//! A thread finds its runtime in this order: the runtime of the task it is executing (or one
//! entered with [`Runtime::enter`]), then the process-wide default set by [`init`]. The first
//! `remote` call with neither starts the default runtime, as `ray.init()` does implicitly.

mod engine;
pub(crate) mod exec;
pub(crate) mod lane;
pub(crate) mod threads;
pub(crate) mod wait;

use std::cell::RefCell;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use starling_proto::{
    FailureKind, JobId, NodeId, ObjectId, RemoteError, ResourceSet, TaskArg, TaskFailure, TaskId,
    TaskSpec,
};
use starling_worker::store::Blob;

use crate::__private::ArgsBuilder;
use crate::cluster::client::Client;
use crate::error::Result;
use crate::object_ref::{ArgValue, RefHandle};
use crate::options::TaskOptions;
use crate::registry::Registry;
use crate::stream::Stream;

pub(crate) use engine::Engine;

/// How to start a runtime.
///
/// `Config::default()` starts a local cluster (a head and a node agent in this process, one
/// worker process per core re-executed from this binary); [`Config::connect`] joins a running
/// cluster; [`Config::in_process`] runs everything on threads of this process.
#[derive(Clone, Debug)]
pub struct Config {
    pub(crate) threads: usize,
    pub(crate) resources: ResourceSet,
    pub(crate) mode: Mode,
    pub(crate) connect_timeout: Duration,
    pub(crate) token: Option<String>,
    pub(crate) tls_ca: Option<std::path::PathBuf>,
    pub(crate) max_live_tasks: usize,
    pub(crate) task_events_bytes: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Mode {
    InProcess,
    Local,
    Connect(String),
}

impl Default for Config {
    /// A local cluster with one worker per core; the node offers that many CPUs. When
    /// `STARLING_HEAD` is set (a multi-node job's entrypoint has it), the cluster at that
    /// address instead.
    fn default() -> Self {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let mode = match std::env::var(crate::jobs::HEAD_ENV) {
            Ok(addr) if !addr.is_empty() => Mode::Connect(addr),
            _ => Mode::Local,
        };
        Config {
            threads,
            resources: ResourceSet::cpus(threads as f64),
            mode,
            connect_timeout: Duration::from_secs(10),
            token: None,
            tls_ca: None,
            max_live_tasks: starling_head::DEFAULT_MAX_LIVE_TASKS,
            task_events_bytes: starling_scheduler::events::TaskEvents::DEFAULT_CAP,
        }
    }
}

impl Config {
    /// Joins the cluster whose head listens at `addr` (`host:port`). The binary is uploaded to
    /// the head once so that node agents can start its workers. The cluster token comes from
    /// `STARLING_TOKEN` unless [`Config::token`] sets it, and TLS is used when a CA is given
    /// ([`Config::tls_ca`] or `STARLING_TLS_CA`).
    pub fn connect(addr: impl Into<String>) -> Self {
        Config {
            mode: Mode::Connect(addr.into()),
            ..Config::default()
        }
    }

    /// Runs the scheduler and executor threads in this process (no sockets, no processes).
    pub fn in_process() -> Self {
        Config {
            mode: Mode::InProcess,
            ..Config::default()
        }
    }

    /// Executor threads in-process, or worker processes of a local cluster (and the CPUs the
    /// node offers), at least one.
    pub fn threads(mut self, n: usize) -> Self {
        let n = n.max(1);
        self.threads = n;
        self.resources
            .set_units("CPU", ResourceSet::cpus(n as f64).cpu_units());
        self
    }

    /// Offers `amount` of resource `name` (`"CPU"`, `"GPU"` or a custom name) on the node.
    pub fn resource(mut self, name: &str, amount: f64) -> Self {
        self.resources = self.resources.with(name, amount);
        self
    }

    /// The cluster token to present (the head keeps it in `DATA_DIR/token`); without it,
    /// `STARLING_TOKEN` is used. A local cluster makes its own and needs none.
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Connects with TLS, trusting the CA certificates in this PEM file (without it,
    /// `STARLING_TLS_CA` is used if set); `host:port` addresses become `https://`.
    pub fn tls_ca(mut self, pem: impl Into<std::path::PathBuf>) -> Self {
        self.tls_ca = Some(pem.into());
        self
    }

    /// The credentials to present: those set here, then the environment's.
    pub(crate) fn credentials(&self) -> Result<starling_proto::security::Credentials> {
        use starling_proto::security::{Credentials, TlsCa, Token};
        let bad = |e: starling_proto::security::SecurityError| {
            crate::Error::Startup(format!("cluster credentials: {e}"))
        };
        let mut creds = Credentials::default();
        if let Some(t) = &self.token {
            creds.token = Some(Token::parse(t).map_err(bad)?);
        }
        if let Some(p) = &self.tls_ca {
            creds.tls_ca = Some(TlsCa::read(p).map_err(bad)?);
        }
        creds.or_env().map_err(bad)
    }

    /// Tasks a local cluster's head holds at once (queued, waiting for arguments or running)
    /// before a driver thread that submits more waits for room (default 2,000,000; tasks
    /// submitted by tasks never wait). A remote head has its own (`starling head
    /// --max-live-tasks`).
    pub fn max_live_tasks(mut self, n: usize) -> Self {
        self.max_live_tasks = n.max(1);
        self
    }

    /// Memory for task events (one record per task attempt, read by [`crate::state`]) in the
    /// in-process runtime or a local cluster's head (default 16 MiB, about 170,000 attempts;
    /// past it the oldest are dropped; 0 keeps none). A remote head has its own (`starling
    /// head --task-events`).
    pub fn task_events(mut self, bytes: usize) -> Self {
        self.task_events_bytes = bytes;
        self
    }

    /// How long to wait for the head before failing with `HeadUnreachable` (default 10 s).
    pub fn connect_timeout(mut self, t: Duration) -> Self {
        self.connect_timeout = t;
        self
    }
}

/// A running Starling runtime. Cheap to clone; all clones are the same runtime.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) backend: Backend,
}

/// Where a runtime's tasks run.
#[derive(Clone)]
pub(crate) enum Backend {
    /// Scheduler and executor threads in this process.
    InProcess(Arc<Engine>),
    /// A head reached over gRPC (a local cluster started by this process, or a remote one).
    Cluster(Arc<Client>),
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.backend {
            Backend::InProcess(_) => write!(f, "Runtime(in-process)"),
            Backend::Cluster(c) => write!(f, "Runtime(cluster at {})", c.addr()),
        }
    }
}

impl PartialEq for Runtime {
    fn eq(&self, other: &Self) -> bool {
        self.owner() == other.owner()
    }
}

static DEFAULT: RwLock<Option<Runtime>> = RwLock::new(None);

thread_local! {
    static CURRENT: RefCell<Option<Runtime>> = const { RefCell::new(None) };
    /// This thread started or entered a runtime: it is a driver's, never a task's.
    static DRIVER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread as a driver's (it started or entered a runtime).
fn mark_driver_thread() {
    DRIVER.with(|d| d.set(true));
}

/// Whether this thread started or entered a runtime. A thread that did neither and runs no
/// task may be one a task spawned; in-process, its waits lend a running task's CPUs.
pub(crate) fn is_driver_thread() -> bool {
    DRIVER.with(|d| d.get())
}

impl Runtime {
    /// Starts an in-process runtime with `threads` executor threads. It becomes the process
    /// default if there is none yet; otherwise use it through [`Runtime::enter`].
    pub fn in_process(threads: usize) -> Result<Runtime> {
        Self::with_config(Config::default().threads(threads))
    }

    /// Starts an in-process runtime from `config` (see [`Runtime::in_process`]); the config's
    /// cluster settings are ignored.
    pub fn with_config(config: Config) -> Result<Runtime> {
        mark_driver_thread();
        let rt = Runtime::from_engine(Engine::start(config)?);
        let mut d = DEFAULT.write();
        if d.is_none() {
            *d = Some(rt.clone());
        }
        Ok(rt)
    }

    /// Starts a runtime as `config` says (in-process, local cluster or a connection to a cluster),
    /// whether or not another one runs. It becomes the process default if there is none yet;
    /// otherwise use it through [`Runtime::enter`].
    pub fn start(config: Config) -> Result<Runtime> {
        let rt = start(config)?;
        let mut d = DEFAULT.write();
        if d.is_none() {
            *d = Some(rt.clone());
        }
        Ok(rt)
    }

    pub(crate) fn from_engine(engine: Arc<Engine>) -> Runtime {
        Runtime {
            backend: Backend::InProcess(engine),
        }
    }

    pub(crate) fn from_client(client: Arc<Client>) -> Runtime {
        Runtime {
            backend: Backend::Cluster(client),
        }
    }

    /// Identifies the backend (the address of its state), for "same runtime" checks.
    pub(crate) fn owner(&self) -> usize {
        match &self.backend {
            Backend::InProcess(e) => Arc::as_ptr(e) as usize,
            Backend::Cluster(c) => Arc::as_ptr(c) as usize,
        }
    }

    /// Makes this runtime the current one on this thread until the guard drops.
    pub fn enter(&self) -> EnterGuard {
        mark_driver_thread();
        let prev = CURRENT.with(|c| c.replace(Some(self.clone())));
        EnterGuard { prev }
    }

    /// Stops the runtime: in-process, the executor threads stop after their current tasks; a
    /// local cluster stops its worker processes, node agent and head; a connection to a remote
    /// cluster closes. Pending tasks never run, and calls on this runtime return
    /// [`Error::ShutDown`](crate::Error::ShutDown). Idempotent.
    pub fn shutdown(&self) {
        let mut d = DEFAULT.write();
        if d.as_ref() == Some(self) {
            *d = None;
        }
        drop(d);
        match &self.backend {
            Backend::InProcess(e) => e.shutdown(),
            Backend::Cluster(c) => c.shutdown(),
        }
    }

    /// The environment a process needs to join this runtime's cluster as another driver: the
    /// head's address (`STARLING_HEAD`, which [`Config::default`] connects to), the cluster
    /// token and the CA to trust. A program started with it (e.g. by
    /// `std::process::Command::envs`) sees this cluster's named and detached actors and its
    /// nodes. Empty in-process, where no other process can join.
    pub fn driver_env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        match &self.backend {
            Backend::InProcess(_) => Vec::new(),
            Backend::Cluster(c) => {
                let mut env = vec![(crate::jobs::HEAD_ENV, c.addr().into())];
                env.extend(c.credentials().env());
                env
            }
        }
    }

    /// Counters and queue lengths of this runtime's scheduler and store (in-process runtimes;
    /// a cluster reports through `starling status`).
    pub fn stats(&self) -> RuntimeStats {
        match &self.backend {
            Backend::InProcess(e) => e.stats(),
            Backend::Cluster(c) => c.stats(),
        }
    }

    /// The nodes of this runtime.
    pub fn nodes(&self) -> Vec<NodeInfo> {
        match &self.backend {
            Backend::InProcess(e) => e.nodes(),
            Backend::Cluster(c) => c.nodes(),
        }
    }

    pub(crate) fn submit(&self, f: &'static str, args: ArgsBuilder, o: TaskOptions) -> ObjectId {
        #[cfg(target_os = "linux")]
        std::hint::black_box(&crate::cluster::worker::WORKER_MODE_HOOK);
        match &self.backend {
            Backend::InProcess(e) => e.submit(f, args, o),
            Backend::Cluster(c) => c.submit(f, args, o),
        }
    }

    /// Kills an actor (see [`crate::ActorHandle::kill`]).
    pub(crate) fn kill_actor(&self, actor: TaskId, no_restart: bool) -> Result<()> {
        match &self.backend {
            Backend::InProcess(e) => e.kill_actor(actor, no_restart),
            Backend::Cluster(c) => c.kill_actor(actor, no_restart),
        }
    }

    /// The objects or (`workers`) workers `q` selects (see [`crate::state`]).
    pub(crate) fn list_state(
        &self,
        q: starling_proto::state::TaskQuery,
        workers: bool,
    ) -> Result<starling_proto::state::StateList> {
        use starling_proto::state::StateList;
        // Unknown fields are refused here, whichever backend would list.
        StateList::select(Vec::new(), Vec::new(), &q, workers)
            .map_err(crate::Error::InvalidArgument)?;
        match &self.backend {
            Backend::InProcess(e) => {
                let (objects, all_workers) = e.state_records(workers);
                StateList::select(objects, all_workers, &q, workers)
                    .map_err(crate::Error::InvalidArgument)
            }
            Backend::Cluster(c) => c.list_state(q, workers),
        }
    }

    /// Every actor (see [`crate::actors`]).
    pub(crate) fn actors(&self) -> Result<Vec<crate::ActorInfo>> {
        Ok(self.actor_statuses()?.into_iter().map(Into::into).collect())
    }

    /// Every actor, as the status report lists them.
    pub(crate) fn actor_statuses(&self) -> Result<Vec<starling_proto::status::ActorStatus>> {
        Ok(match &self.backend {
            Backend::InProcess(e) => e.actors(),
            Backend::Cluster(c) => c.status()?.actors,
        })
    }

    /// The cluster's multi-node jobs, oldest first (none in-process).
    pub(crate) fn list_jobs(&self) -> Result<Vec<crate::jobs::JobInfo>> {
        match &self.backend {
            Backend::InProcess(_) => Ok(Vec::new()),
            Backend::Cluster(c) => Ok(c.list_jobs()?.iter().map(Into::into).collect()),
        }
    }

    /// One read of a log file of the node whose object service is at `address` (see
    /// [`crate::state::log`]).
    pub(crate) fn read_log(
        &self,
        address: &str,
        request: starling_proto::jobs::LogFileRequest,
    ) -> Result<starling_proto::jobs::LogChunk> {
        match &self.backend {
            Backend::InProcess(_) => Err(crate::Error::NoLog(
                "an in-process runtime writes no log files: its tasks print to the program's \
                 own output"
                    .into(),
            )),
            Backend::Cluster(c) => c.read_log(address, request),
        }
    }

    /// The task records `q` asks for (see [`crate::state`]).
    pub(crate) fn list_tasks(
        &self,
        q: starling_proto::state::TaskQuery,
    ) -> Result<starling_proto::state::TaskList> {
        match &self.backend {
            Backend::InProcess(e) => Ok(e.list_tasks(&q)),
            Backend::Cluster(c) => c.list_tasks(q),
        }
    }

    /// The live actor named `name`, if any.
    pub(crate) fn actor_named(&self, name: &str) -> Result<Option<TaskId>> {
        match &self.backend {
            Backend::InProcess(e) => Ok(e.actor_named(name)),
            Backend::Cluster(c) => c.actor_named(name),
        }
    }

    /// Stores `bytes`, a value holding refs to `nested` (told to the scheduler with the value).
    pub(crate) fn put_bytes(&self, bytes: Vec<u8>, nested: Vec<ObjectId>) -> Result<ObjectId> {
        match &self.backend {
            Backend::InProcess(e) => Ok(e.put(bytes, nested)),
            Backend::Cluster(c) => c.put(bytes, nested),
        }
    }

    /// A node store file to encode a `put` of `size` bytes into, where this runtime has one
    /// and the value is large (see [`Client::open_put`](crate::cluster::client::Client::open_put)).
    pub(crate) fn open_put(&self, size: usize) -> Option<crate::cluster::objects::StoreFile> {
        match &self.backend {
            Backend::InProcess(_) => None,
            Backend::Cluster(c) => c.open_put(size),
        }
    }

    /// Stores the value encoded into `file`, which holds refs to `nested`.
    pub(crate) fn put_file(
        &self,
        file: crate::cluster::objects::StoreFile,
        nested: Vec<ObjectId>,
    ) -> std::io::Result<ObjectId> {
        match &self.backend {
            Backend::InProcess(_) => unreachable!("an in-process runtime opens no store file"),
            Backend::Cluster(c) => c.put_file(file, nested),
        }
    }

    /// This process made one more ref group for `id` (it decoded a ref).
    pub(crate) fn add_ref(&self, id: ObjectId) {
        match &self.backend {
            Backend::InProcess(e) => e.add_ref(id),
            Backend::Cluster(c) => c.add_ref(id),
        }
    }

    /// A ref group for `id` was dropped; `adopted`: one made by decoding a ref.
    pub(crate) fn release(&self, id: ObjectId, adopted: bool) {
        match &self.backend {
            Backend::InProcess(e) => e.release(id),
            Backend::Cluster(c) => c.release(id, adopted),
        }
    }

    pub(crate) fn poll_object(&self, id: ObjectId, waker: &Waker) -> Poll<Result<Blob>> {
        match &self.backend {
            Backend::InProcess(e) => e.poll_object(id, waker),
            Backend::Cluster(c) => c.poll_object(id, waker),
        }
    }

    pub(crate) fn wait_object(&self, id: ObjectId, deadline: Option<Instant>) -> Result<Blob> {
        match &self.backend {
            Backend::InProcess(e) => e.wait_object(id, deadline),
            Backend::Cluster(c) => c.wait_object(id, deadline),
        }
    }

    pub(crate) fn wait_many(
        &self,
        ids: &[ObjectId],
        num_returns: usize,
        timeout: Option<Duration>,
    ) -> Vec<bool> {
        match &self.backend {
            Backend::InProcess(e) => e.wait_many(ids, num_returns, timeout),
            Backend::Cluster(c) => c.wait_many(ids, num_returns, timeout),
        }
    }

    pub(crate) fn pending_reason(&self, id: ObjectId) -> Option<String> {
        match &self.backend {
            Backend::InProcess(e) => e.pending_reason(id),
            Backend::Cluster(c) => c.pending_reason(id),
        }
    }

    pub(crate) fn cancel(&self, id: ObjectId, force: bool) -> Result<()> {
        match &self.backend {
            Backend::InProcess(e) => e.cancel(id, force),
            Backend::Cluster(c) => c.cancel(id, force),
        }
    }

    pub(crate) fn is_cancelled(&self, task: TaskId) -> bool {
        match &self.backend {
            Backend::InProcess(e) => e.is_cancelled(task),
            Backend::Cluster(c) => c.is_cancelled(task),
        }
    }

    /// Gives back one count the scheduler holds for this process on `id` (a streamed item this
    /// process already had a group for).
    pub(crate) fn uncount(&self, id: ObjectId) {
        match &self.backend {
            Backend::InProcess(e) => e.release(id),
            Backend::Cluster(c) => c.uncount(id),
        }
    }

    /// The caller's stream of the streaming task `task` (opened at submit).
    pub(crate) fn stream(&self, task: TaskId) -> Option<Arc<Stream>> {
        match &self.backend {
            Backend::InProcess(e) => e.streams.get(task),
            Backend::Cluster(c) => c.streams.get(task),
        }
    }

    /// Waits for the next item of `stream`, or for `end` to settle with none left.
    pub(crate) fn wait_stream(
        &self,
        stream: &Stream,
        end: ObjectId,
        deadline: Option<Instant>,
    ) -> Result<Option<Arc<RefHandle>>> {
        match &self.backend {
            Backend::InProcess(e) => e.wait_stream(stream, end, deadline),
            Backend::Cluster(c) => c.wait_stream(stream, end, deadline),
        }
    }

    /// The caller took `taken` items of the streaming task `task` (its producer may wait).
    pub(crate) fn stream_taken(&self, task: TaskId, taken: u64) {
        match &self.backend {
            // The producer waits on the stream itself.
            Backend::InProcess(_) => {}
            Backend::Cluster(c) => c.stream_taken(task, taken),
        }
    }

    /// The caller dropped the generator of `task`; `paused`: its producer may wait for room.
    pub(crate) fn stream_closed(&self, task: TaskId, paused: bool) {
        match &self.backend {
            Backend::InProcess(e) => e.streams.remove(task),
            Backend::Cluster(c) => {
                c.streams.remove(task);
                if paused {
                    c.stream_taken(task, u64::MAX);
                }
            }
        }
    }

    /// The streaming task `task`, running on this thread, yielded item `index` (`item`, a
    /// group of this process's put); returns once it may go on (see [`crate::stream`]).
    pub(crate) fn stream_yield(&self, task: TaskId, index: u64, item: Arc<RefHandle>, window: u32) {
        match &self.backend {
            Backend::InProcess(e) => e.stream_yield(task, index, item),
            Backend::Cluster(c) => c.stream_yield(task, index, item, window),
        }
    }

    /// The streaming task `task` yields no more in this process.
    pub(crate) fn stream_done(&self, task: TaskId) {
        if let Backend::Cluster(c) = &self.backend {
            c.stream_done(task);
        }
    }
}

/// Turns a call into a task spec: encoded values inline (with the refs nested in them listed
/// in `contained`), `ObjectRef`s as dependencies (all refs must belong to the runtime `owner`).
/// Returns the refs to keep alive until the task is registered, or the failure of a call that
/// cannot be made.
pub(crate) fn prepare_call(
    registry: &Registry,
    owner: usize,
    id: TaskId,
    function: &'static str,
    args: ArgsBuilder,
    o: TaskOptions,
    job: JobId,
) -> std::result::Result<(TaskSpec, Vec<Arc<RefHandle>>), TaskFailure> {
    let mut task_args = Vec::with_capacity(args.args.len());
    let mut keep = Vec::new();
    let mut bad = None;
    let mut contained = Vec::new();
    for (i, a) in args.args.into_iter().enumerate() {
        match a {
            ArgValue::Value(Ok(encoded)) => {
                for h in encoded.refs {
                    if h.rt.owner() != owner {
                        bad.get_or_insert(RemoteError::new(
                            "starling::ForeignObject",
                            format!("argument {i}: {}", crate::Error::ForeignObject(h.id)),
                        ));
                    }
                    contained.push(h.id);
                    keep.push(h);
                }
                task_args.push(TaskArg::Inline(encoded.bytes))
            }
            ArgValue::Value(Err(e)) => {
                bad.get_or_insert(RemoteError::new(
                    "starling::Codec",
                    format!("argument {i}: {e}"),
                ));
            }
            ArgValue::Ref(h) => {
                if h.rt.owner() != owner {
                    bad.get_or_insert(RemoteError::new(
                        "starling::ForeignObject",
                        format!("argument {i}: {}", crate::Error::ForeignObject(h.id)),
                    ));
                }
                task_args.push(TaskArg::Object(h.id));
                keep.push(h);
            }
        }
    }
    if let Some(cause) = bad {
        return Err(TaskFailure {
            task: id,
            attempt: 0,
            kind: FailureKind::BadArgument(cause),
        });
    }
    let spec = TaskSpec {
        id,
        // A registered name lives as long as the program: no shared count to bump per call.
        function: starling_proto::FunctionName::from_static(function),
        args: task_args,
        resources: o.resources,
        max_retries: o.max_retries,
        attempt: 0,
        job,
        // The task running on this thread, if any (in a worker process, a thread a task
        // spawned belongs to the one task running there): cancelling it cancels this one too.
        parent: exec::current_task().or_else(crate::cluster::worker::sole_running_task),
        extras: starling_proto::TaskExtras {
            retry_exceptions: o.retry_exceptions,
            retry_on: o.retry_on,
            strategy: o.strategy,
            contained,
            returns: o.returns,
            streaming: o.streaming,
            backpressure: if o.streaming { o.backpressure } else { 0 },
            // Only tasks of async functions interleave, and calls of an actor that runs several
            // at once (async, or threaded: `call_concurrent`). A streaming task's producer may
            // pause for its caller, which would hold up the tasks interleaved with it: streams run
            // alone.
            max_concurrency: if o.max_concurrency > 1
                && !o.streaming
                && (registry.async_entry(function).is_some()
                    || matches!(o.actor, starling_proto::ActorRole::Call(_)))
            {
                o.max_concurrency
            } else {
                0
            },
            env: o.env,
            actor: o.actor,
            // Set by a cluster client that also sends the call straight to its actor.
            direct: None,
        }
        .into(),
    };
    Ok((spec, keep))
}

/// Restores the previous current runtime when dropped.
#[must_use = "the runtime is current only while the guard lives"]
pub struct EnterGuard {
    prev: Option<Runtime>,
}

impl std::fmt::Debug for EnterGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EnterGuard")
    }
}

impl Drop for EnterGuard {
    fn drop(&mut self) {
        let prev = self.prev.take();
        CURRENT.with(|c| *c.borrow_mut() = prev);
    }
}

/// Counters of a runtime, as [`Runtime::stats`] reports them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RuntimeStats {
    /// Tasks ever submitted.
    pub submitted: u64,
    /// Tasks that finished with a value.
    pub succeeded: u64,
    /// Tasks that finished with an error (including cancelled and upstream failures).
    pub failed: u64,
    /// Task runs retried.
    pub retried: u64,
    /// Tasks not finished yet (queued, waiting for arguments or running).
    pub live_tasks: u64,
    /// The most tasks not finished at once: a local or remote head holds at most its limit
    /// ([`Config::max_live_tasks`]) plus one batch of a driver.
    pub peak_live_tasks: u64,
    /// Tasks ready and waiting for a worker.
    pub queued_tasks: u64,
    /// Tasks running.
    pub running_tasks: u64,
    /// Objects in the directory (pending or stored).
    pub objects: u64,
    /// Objects freed so far.
    pub objects_freed: u64,
    /// Bytes of values in the object store.
    pub store_bytes: u64,
    /// Actor calls this process also sent straight to their actor's worker (a local
    /// cluster's driver does, from its second call of an actor on).
    pub direct_calls: u64,
}

/// One node of a runtime, as [`nodes`](crate::nodes) reports it (like `ray.nodes()`).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeInfo {
    /// The node.
    pub id: NodeId,
    /// Where it is (`"in-process"` for the in-process runtime).
    pub address: String,
    /// Everything it offers.
    pub resources: ResourceSet,
    /// What is free now.
    pub available: ResourceSet,
    /// Whether it is alive.
    pub alive: bool,
}

/// Starts the default runtime (a local cluster: see [`Config`]) or returns the one already
/// running.
pub fn init() -> Result<Runtime> {
    init_with(Config::default())
}

/// Starts the default runtime from `config`, or returns the one already running (whose config
/// then stays as it was; use [`Runtime::start`] for a runtime of its own).
pub fn init_with(config: Config) -> Result<Runtime> {
    if let Some(rt) = DEFAULT.read().clone() {
        return Ok(rt);
    }
    let mut d = DEFAULT.write();
    if let Some(rt) = d.clone() {
        return Ok(rt);
    }
    let rt = start(config)?;
    *d = Some(rt.clone());
    Ok(rt)
}

fn start(config: Config) -> Result<Runtime> {
    mark_driver_thread();
    match &config.mode {
        Mode::InProcess => Ok(Runtime::from_engine(Engine::start(config)?)),
        Mode::Local => Ok(Runtime::from_client(crate::cluster::local::start(&config)?)),
        Mode::Connect(addr) => {
            let addr = addr.clone();
            Ok(Runtime::from_client(
                crate::cluster::client::Client::connect_driver(&addr, &config)?,
            ))
        }
    }
}

/// The current runtime, if any.
pub fn current() -> Option<Runtime> {
    CURRENT
        .with(|c| c.borrow().clone())
        .or_else(|| DEFAULT.read().clone())
}

pub(crate) fn current_or_init() -> Runtime {
    if let Some(rt) = current() {
        return rt;
    }
    init().unwrap_or_else(|e| panic!("starling: no runtime and the default one failed: {e}"))
}

/// Makes `rt` the process default (worker processes: their session with the head).
pub(crate) fn set_default(rt: Runtime) {
    *DEFAULT.write() = Some(rt);
}

pub(crate) fn set_thread_runtime(rt: Option<Runtime>) {
    CURRENT.with(|c| *c.borrow_mut() = rt);
}
