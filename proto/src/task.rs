//! Task specs and task failures: what the scheduler queues and what a failed task leaves behind.

use std::fmt;
use std::sync::Arc;

use crate::{JobId, NodeId, ObjectId, ResourceSet, TaskId};

/// The registered name of a remote function: `module::path::name#signature-hash`.
/// Shared, because every call of a function carries it.
pub type FunctionName = Arc<str>;

/// One argument of a task: an encoded value carried inline, or a dependency on an object.
#[derive(Clone, PartialEq, Eq)]
pub enum TaskArg {
    /// The encoded value itself.
    Inline(Vec<u8>),
    /// The value of this object, once it exists. The task waits for it.
    Object(ObjectId),
}

impl fmt::Debug for TaskArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TaskArg::Inline(b) => write!(f, "Inline({} B)", b.len()),
            TaskArg::Object(o) => write!(f, "Object({o})"),
        }
    }
}

/// Where a task may run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SchedulingStrategy {
    /// Pack onto the first nodes until they are half used, then spread (Ray's hybrid policy).
    #[default]
    Default,
    /// Spread tasks over all nodes that can take them.
    Spread,
    /// Run on this node; if `soft`, fall back to the default policy when it cannot.
    NodeAffinity {
        /// The node.
        node: NodeId,
        /// Whether another node may be used when this one is dead or lacks resources.
        soft: bool,
    },
}

/// Everything the scheduler needs to know about a task. Arguments are opaque bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSpec {
    /// The task; its return object has the same number.
    pub id: TaskId,
    /// The registered function to call.
    pub function: FunctionName,
    /// Arguments in call order.
    pub args: Vec<TaskArg>,
    /// What one run of the task holds while it runs.
    pub resources: ResourceSet,
    /// How many times a failed run may be retried.
    pub max_retries: u32,
    /// Whether an application error (panic or `Err`) is retried, not only a lost worker.
    pub retry_exceptions: bool,
    /// With `retry_exceptions`, the error types retried ([`RemoteError::type_name`]s, as
    /// `std::any::type_name` writes them, or `"panic"`); empty: every error (Ray's
    /// `retry_exceptions=[..]` filter).
    pub retry_on: Vec<Arc<str>>,
    /// Placement policy.
    pub strategy: SchedulingStrategy,
    /// Which run this is: 0 for the first, 1 for the first retry, ...
    pub attempt: u32,
    /// The job (driver program) the task belongs to: only that job's workers, which run its
    /// binary, can run it. `JobId(0)` in-process.
    pub job: JobId,
    /// The task whose code submitted this one (`None`: a driver, or a thread the task did not
    /// run on). Cancelling a task cancels the tasks it submitted that have not finished.
    pub parent: Option<TaskId>,
    /// Objects whose `ObjectRef`s are nested inside the inline arguments (a `Vec<ObjectRef<T>>`
    /// argument, a struct holding refs): they stay alive while the task (or its lineage) does,
    /// but the task does not wait for them, as in Ray.
    pub contained: Box<[ObjectId]>,
    /// How many objects the task returns (0 or 1: one, the task's own id; `n`: the ids
    /// `id .. id + n`, each its own object), as Ray's `num_returns`.
    pub returns: u32,
    /// A streaming task (Ray's streaming generator): its function yields items, each an object
    /// of its own told to the submitter as it comes; the task's own object is, once it ends, the
    /// number of items (`u64`).
    pub streaming: bool,
    /// For a streaming task: how many items it may yield ahead of what the submitter took
    /// (0: no limit, as Ray's default). The producer pauses while it is that far ahead.
    pub backpressure: u32,
    /// For a task of an `async` function: how many such tasks one worker may run at once,
    /// interleaved on its executor thread, each holding its own resources (0 or 1: one at a
    /// time, the default). A worker runs several only while every one of them allows that many.
    pub max_concurrency: u32,
}

impl TaskSpec {
    /// The (first) object this task returns.
    #[inline]
    pub fn return_object(&self) -> ObjectId {
        ObjectId::from(self.id)
    }

    /// How many objects the task returns (at least one).
    #[inline]
    pub fn return_count(&self) -> u32 {
        self.returns.max(1)
    }

    /// Every object this task returns, in order: the task's own id, then the ids after it.
    pub fn return_objects(&self) -> impl Iterator<Item = ObjectId> {
        let first = self.id.0;
        (0..u64::from(self.return_count())).map(move |k| ObjectId(first.wrapping_add(k)))
    }

    /// Whether a run that failed with `error` may run again (if it has retries left): only
    /// with `retry_exceptions`, and then only for the types in `retry_on` if it names any.
    pub fn retries_error(&self, error: &RemoteError) -> bool {
        self.retry_exceptions
            && (self.retry_on.is_empty() || self.retry_on.iter().any(|t| **t == *error.type_name))
    }

    /// The objects this task waits for, in argument order (may repeat).
    pub fn dependencies(&self) -> impl Iterator<Item = ObjectId> + '_ {
        self.args.iter().filter_map(|a| match a {
            TaskArg::Object(o) => Some(*o),
            TaskArg::Inline(_) => None,
        })
    }

    /// Every object the task refers to: its dependencies, then the objects nested in its inline
    /// arguments. Each is counted once per occurrence while the task lives.
    pub fn references(&self) -> impl Iterator<Item = ObjectId> + '_ {
        self.dependencies().chain(self.contained.iter().copied())
    }
}

/// An error raised by user code: a panic or an `Err` return, as data.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RemoteError {
    /// The Rust type of the error (`"core::num::ParseIntError"`), or `"panic"`.
    pub type_name: String,
    /// Its `Display` text, or the panic message.
    pub message: String,
    /// Where it happened, if a backtrace was captured (empty otherwise).
    pub backtrace: String,
}

impl RemoteError {
    /// A new error without a backtrace.
    pub fn new(type_name: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            type_name: type_name.into(),
            message: message.into(),
            backtrace: String::new(),
        }
    }
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.type_name, self.message)
    }
}

impl fmt::Debug for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")?;
        if !self.backtrace.is_empty() {
            write!(f, "\n{}", self.backtrace)?;
        }
        Ok(())
    }
}

/// Why a task produced no value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// The function panicked or returned `Err`.
    Application(RemoteError),
    /// An argument's task failed; this is that failure.
    Upstream(Arc<TaskFailure>),
    /// The task was cancelled before it produced a value.
    Cancelled,
    /// No worker has this function in its registry.
    FunctionNotFound {
        /// The function asked for.
        name: String,
        /// The build the worker runs.
        build: String,
    },
    /// The argument could not be decoded as the type the function takes.
    BadArgument(RemoteError),
    /// An argument object no longer exists (freed, or its only copy was lost).
    ObjectLost(ObjectId),
    /// The worker process died while running the task, and no retries were left.
    WorkerDied {
        /// How it ended (`"exit code 101"`, `"killed by signal 9"`, `"connection lost"`).
        exit: String,
    },
    /// It must run on one node (hard node affinity) and that node is unknown, dead, or too
    /// small for it ever: why.
    Unschedulable(String),
}

/// A task's failure, as the scheduler records it and every `get` downstream sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskFailure {
    /// The task that failed.
    pub task: TaskId,
    /// Its last attempt (0-based).
    pub attempt: u32,
    /// Why.
    pub kind: FailureKind,
}

impl TaskFailure {
    /// The failure at the end of an `Upstream` chain: the task where it started.
    pub fn root(&self) -> &TaskFailure {
        match &self.kind {
            FailureKind::Upstream(up) => up.root(),
            _ => self,
        }
    }
}

impl fmt::Display for TaskFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            FailureKind::Application(e) => {
                write!(
                    f,
                    "task {} failed (attempt {}): {e}",
                    self.task, self.attempt
                )
            }
            FailureKind::Upstream(up) => {
                write!(f, "task {} not run: its argument failed <- {up}", self.task)
            }
            FailureKind::Cancelled => write!(f, "task {} was cancelled", self.task),
            FailureKind::FunctionNotFound { name, build } => {
                write!(
                    f,
                    "task {}: function `{name}` not found in build {build}",
                    self.task
                )
            }
            FailureKind::BadArgument(e) => {
                write!(
                    f,
                    "task {}: an argument could not be decoded: {e}",
                    self.task
                )
            }
            FailureKind::WorkerDied { exit } => write!(
                f,
                "task {}: its worker died ({exit}) on attempt {}, no retries left",
                self.task, self.attempt
            ),
            FailureKind::ObjectLost(o) => {
                write!(
                    f,
                    "task {}: its argument object {o} no longer exists",
                    self.task
                )
            }
            FailureKind::Unschedulable(why) => {
                write!(f, "task {} can never be scheduled: {why}", self.task)
            }
        }
    }
}
