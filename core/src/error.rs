//! The one error type of the public API.

use std::time::Duration;

use starling_proto::{FailureKind, ObjectId, TaskFailure, TaskId};

pub use starling_proto::RemoteError;

/// Everything that can go wrong in a Starling call.
///
/// A failure inside user code is data ([`RemoteError`]: type name, message, backtrace) carried
/// by [`Error::TaskFailed`]; a task that could not run because an argument's task failed reports
/// [`Error::UpstreamFailed`], whose `upstream` chain ends at the task where it started.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The task panicked or returned `Err`.
    #[error("task {task} failed (attempt {attempt}): {cause}")]
    TaskFailed {
        /// The task.
        task: TaskId,
        /// Its last attempt, 0-based.
        attempt: u32,
        /// What the user code raised.
        cause: RemoteError,
    },
    /// An argument of the task failed, so the task never ran.
    #[error("task {task} did not run because an argument failed: {upstream}")]
    UpstreamFailed {
        /// The task that did not run.
        task: TaskId,
        /// Why its argument failed.
        upstream: Box<Error>,
    },
    /// The task was cancelled.
    #[error("task {task} was cancelled")]
    Cancelled {
        /// The task.
        task: TaskId,
    },
    /// The task must run on one node (hard node affinity) and that node is unknown, dead, or
    /// too small for it ever (Ray's `TaskUnschedulableError`).
    #[error("task {task} can never be scheduled: {reason}")]
    Unschedulable {
        /// The task.
        task: TaskId,
        /// Why.
        reason: String,
    },
    /// The actor the call was made to is dead, or died during the call with no retries left
    /// (Ray's `ActorDiedError`).
    #[error("actor {actor} died: {cause}")]
    ActorDied {
        /// The actor.
        actor: TaskId,
        /// Why: its process's exit, its constructor's error, or `kill`.
        cause: String,
    },
    /// The wait ended before the value arrived.
    #[error("timed out after {waited:?}")]
    Timeout {
        /// How long the call waited.
        waited: Duration,
    },
    /// The worker's binary has no function registered under this name.
    #[error(
        "function `{name}` is not registered in build {build}: the worker runs a different \
         binary, or the function's signature changed"
    )]
    FunctionNotFound {
        /// The function asked for.
        name: String,
        /// The worker's build id.
        build: String,
    },
    /// An argument did not decode as the type the function takes.
    #[error("task {task}: argument could not be decoded: {cause}")]
    BadArgument {
        /// The task.
        task: TaskId,
        /// The decoder's complaint.
        cause: RemoteError,
    },
    /// The worker process running the task died (or its node was lost) on every attempt the
    /// task's `max_retries` allowed.
    #[error(
        "task {task}: its worker died on each of {attempts} attempt(s); the last one: {last_exit}"
    )]
    WorkerDied {
        /// The task.
        task: TaskId,
        /// Runs attempted (`max_retries + 1`).
        attempts: u32,
        /// How the worker of the last attempt ended (exit code, signal, or lost node).
        last_exit: String,
    },
    /// The object no longer exists (freed, or its only copy was lost).
    #[error("object {0} no longer exists")]
    ObjectLost(ObjectId),
    /// A value could not be encoded or decoded.
    #[error("cannot {op} a value of type `{type_name}`: {message}")]
    Codec {
        /// `"encode"` or `"decode"`.
        op: &'static str,
        /// The Rust type.
        type_name: &'static str,
        /// The codec's complaint.
        message: String,
    },
    /// A large object could not be fetched from the node that holds it.
    #[error("cannot fetch object {object}: {why}")]
    ObjectFetch {
        /// The object.
        object: ObjectId,
        /// What went wrong.
        why: String,
    },
    /// The head did not answer within the connect timeout.
    #[error("head at {addr} is unreachable: {why}")]
    HeadUnreachable {
        /// The address tried.
        addr: String,
        /// What the connection attempt said.
        why: String,
    },
    /// The head refused this client (version mismatch, malformed message, bad token).
    #[error("head at {addr} refused the connection: {message}")]
    Refused {
        /// The head's address.
        addr: String,
        /// The head's reason.
        message: String,
    },
    /// The head (or a node) refused this client's cluster token: none was given, or the wrong
    /// one. Pass the token with `Config::token`, or set `STARLING_TOKEN` (the head keeps it in
    /// `DATA_DIR/token`).
    #[error("head at {addr} refused the connection: {why}")]
    Unauthenticated {
        /// The head's address.
        addr: String,
        /// The head's reason.
        why: String,
    },
    /// The connection to the head was lost.
    #[error("connection to the head at {addr} was lost: {why}")]
    HeadLost {
        /// The head's address.
        addr: String,
        /// What happened.
        why: String,
    },
    /// A value is too large to send where it has to go.
    #[error("a value of {size} bytes is over the {limit}-byte limit for values put from outside the cluster's nodes")]
    ObjectTooLarge {
        /// Its encoded size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// [`wait`](crate::wait) was given the same object twice (as `ray.wait` refuses).
    #[error("wait was given object {0} more than once: it needs distinct refs")]
    DuplicateRef(ObjectId),
    /// [`wait`](crate::wait) was asked for no ref, or for more refs than it was given (as
    /// `ray.wait` refuses).
    #[error("wait cannot return {num_returns} of {refs} refs: num_returns must be 1..={refs}")]
    WaitCount {
        /// What was asked for.
        num_returns: usize,
        /// How many refs were given.
        refs: usize,
    },
    /// An `ObjectRef` was used with a runtime other than the one that made it.
    #[error("object {0} belongs to another Starling runtime")]
    ForeignObject(ObjectId),
    /// A request the API cannot make sense of (a malformed filter, an unknown field).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// The runtime was shut down.
    #[error("the Starling runtime is shut down")]
    ShutDown,
    /// This node's object store could not take a value written in place
    /// ([`put_with`](crate::put_with)): its file could not be completed.
    #[error("the object store could not store the value: {0}")]
    Store(String),
    /// There is no log to read for what was asked ([`crate::state::log`]): the task has not
    /// run yet, ran in-process, or its records were dropped.
    #[error("no log: {0}")]
    NoLog(String),
    /// The runtime could not start.
    #[error("cannot start the Starling runtime: {0}")]
    Startup(String),
    /// A job request was refused, or named something that does not exist.
    #[error("{0}")]
    JobRequest(String),
    /// A multi-node job did not produce a value: it failed, was cancelled, or has not ended.
    #[error("job {job} is {status}: {message}")]
    JobFailed {
        /// The job.
        job: u64,
        /// Its state (`FAILED`, `CANCELLED`, ... ).
        status: String,
        /// Why.
        message: String,
        /// The error of a `#[starling::job]` function, with its type and backtrace.
        cause: Option<Box<RemoteError>>,
    },
}

impl Error {
    /// The error for a call that `addr` answered with `status`: [`Error::Unauthenticated`]
    /// for a refused token, [`Error::Refused`] otherwise.
    pub(crate) fn from_status(addr: &str, status: &tonic::Status) -> Error {
        match status.code() {
            tonic::Code::Unauthenticated => Error::Unauthenticated {
                addr: addr.to_string(),
                why: status.message().to_string(),
            },
            _ => Error::Refused {
                addr: addr.to_string(),
                message: status.message().to_string(),
            },
        }
    }

    /// The error at the end of an [`Error::UpstreamFailed`] chain.
    pub fn root_cause(&self) -> &Error {
        match self {
            Error::UpstreamFailed { upstream, .. } => upstream.root_cause(),
            e => e,
        }
    }

    /// The user code's error, if this (or its root cause) is a task failure or a failed
    /// `#[starling::job]` function.
    pub fn remote_error(&self) -> Option<&RemoteError> {
        match self.root_cause() {
            Error::TaskFailed { cause, .. } => Some(cause),
            Error::JobFailed {
                cause: Some(cause), ..
            } => Some(cause),
            _ => None,
        }
    }
}

impl From<&TaskFailure> for Error {
    fn from(f: &TaskFailure) -> Self {
        let task = f.task;
        match &f.kind {
            FailureKind::Application(cause) => Error::TaskFailed {
                task,
                attempt: f.attempt,
                cause: cause.clone(),
            },
            FailureKind::Upstream(up) => Error::UpstreamFailed {
                task,
                upstream: Box::new(Error::from(&**up)),
            },
            FailureKind::Cancelled => Error::Cancelled { task },
            FailureKind::FunctionNotFound { name, build } => Error::FunctionNotFound {
                name: name.clone(),
                build: build.clone(),
            },
            FailureKind::BadArgument(cause) => Error::BadArgument {
                task,
                cause: cause.clone(),
            },
            FailureKind::ObjectLost(o) => Error::ObjectLost(*o),
            FailureKind::WorkerDied { exit } => Error::WorkerDied {
                task,
                attempts: f.attempt + 1,
                last_exit: exit.clone(),
            },
            FailureKind::Unschedulable(reason) => Error::Unschedulable {
                task,
                reason: reason.clone(),
            },
            FailureKind::ActorDied { actor, cause } => Error::ActorDied {
                actor: *actor,
                cause: cause.clone(),
            },
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
