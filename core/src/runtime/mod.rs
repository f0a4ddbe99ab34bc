//! Runtimes: where tasks run. Today: the in-process runtime, with the scheduler and an
//! executor thread pool inside this process.
//!
//! A thread finds its runtime in this order: the runtime of the task it is executing (or one
//! entered with [`Runtime::enter`]), then the process-wide default set by [`init`]. The first
//! `remote` call with neither starts the default runtime, as `ray.init()` does implicitly.

mod engine;
pub(crate) mod exec;
mod wait;

use std::cell::RefCell;
use std::sync::Arc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use starling_proto::{NodeId, ObjectId, ResourceSet};
use starling_worker::store::Blob;

use crate::__private::ArgsBuilder;
use crate::error::Result;
use crate::options::TaskOptions;

pub(crate) use engine::Engine;

/// How to start a runtime.
#[derive(Clone, Debug)]
pub struct Config {
    threads: usize,
    resources: ResourceSet,
}

impl Default for Config {
    /// One executor thread per core; the node offers that many CPUs.
    fn default() -> Self {
        let threads = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        Config {
            threads,
            resources: ResourceSet::cpus(threads as f64),
        }
    }
}

impl Config {
    /// Executor threads (and CPUs offered), at least one.
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
}

/// A running Starling runtime. Cheap to clone; all clones are the same runtime.
#[derive(Clone)]
pub struct Runtime {
    pub(crate) engine: Arc<Engine>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Runtime(in-process)")
    }
}

impl PartialEq for Runtime {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.engine, &other.engine)
    }
}

static DEFAULT: RwLock<Option<Runtime>> = RwLock::new(None);

thread_local! {
    static CURRENT: RefCell<Option<Runtime>> = const { RefCell::new(None) };
}

impl Runtime {
    /// Starts an in-process runtime with `threads` executor threads. It becomes the process
    /// default if there is none yet; otherwise use it through [`Runtime::enter`].
    pub fn in_process(threads: usize) -> Result<Runtime> {
        Self::with_config(Config::default().threads(threads))
    }

    /// Starts an in-process runtime from `config` (see [`Runtime::in_process`]).
    pub fn with_config(config: Config) -> Result<Runtime> {
        let rt = Runtime {
            engine: Engine::start(config)?,
        };
        let mut d = DEFAULT.write();
        if d.is_none() {
            *d = Some(rt.clone());
        }
        Ok(rt)
    }

    /// Makes this runtime the current one on this thread until the guard drops.
    pub fn enter(&self) -> EnterGuard {
        let prev = CURRENT.with(|c| c.replace(Some(self.clone())));
        EnterGuard { prev }
    }

    /// Stops the executor threads after their current tasks. Pending tasks never run, and calls
    /// on this runtime return [`Error::ShutDown`]. Idempotent.
    pub fn shutdown(&self) {
        let mut d = DEFAULT.write();
        if d.as_ref() == Some(self) {
            *d = None;
        }
        drop(d);
        self.engine.shutdown();
    }

    /// Counters and queue lengths of this runtime's scheduler and store.
    pub fn stats(&self) -> RuntimeStats {
        self.engine.stats()
    }

    /// The nodes of this runtime (in-process: one).
    pub fn nodes(&self) -> Vec<NodeInfo> {
        self.engine.nodes()
    }

    pub(crate) fn submit(&self, f: &'static str, args: ArgsBuilder, o: TaskOptions) -> ObjectId {
        self.engine.submit(f, args, o)
    }

    pub(crate) fn put_bytes(&self, bytes: Vec<u8>) -> ObjectId {
        self.engine.put(bytes)
    }

    pub(crate) fn release(&self, id: ObjectId) {
        self.engine.release(id)
    }

    pub(crate) fn poll_object(&self, id: ObjectId, waker: &Waker) -> Poll<Result<Blob>> {
        self.engine.poll_object(id, waker)
    }

    pub(crate) fn wait_object(&self, id: ObjectId, deadline: Option<Instant>) -> Result<Blob> {
        self.engine.wait_object(id, deadline)
    }

    pub(crate) fn wait_many(
        &self,
        ids: &[ObjectId],
        num_returns: usize,
        timeout: Option<Duration>,
    ) -> Vec<bool> {
        self.engine.wait_many(ids, num_returns, timeout)
    }

    pub(crate) fn pending_reason(&self, id: ObjectId) -> Option<String> {
        self.engine.pending_reason(id)
    }

    pub(crate) fn cancel(&self, id: ObjectId, force: bool) -> Result<()> {
        self.engine.cancel(id, force)
    }
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
    /// Tasks not finished yet.
    pub live_tasks: u64,
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

/// Starts the default runtime (in-process, one executor thread per core) or returns the one
/// already running.
pub fn init() -> Result<Runtime> {
    init_with(Config::default())
}

/// Starts the default runtime from `config`, or returns the one already running (whose config
/// then stays as it was).
pub fn init_with(config: Config) -> Result<Runtime> {
    if let Some(rt) = DEFAULT.read().clone() {
        return Ok(rt);
    }
    let mut d = DEFAULT.write();
    if let Some(rt) = d.clone() {
        return Ok(rt);
    }
    let rt = Runtime {
        engine: Engine::start(config)?,
    };
    *d = Some(rt.clone());
    Ok(rt)
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

pub(crate) fn set_thread_runtime(rt: Option<Runtime>) {
    CURRENT.with(|c| *c.borrow_mut() = rt);
}
