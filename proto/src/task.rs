//! Task specs and task failures: what the scheduler queues and what a failed task leaves behind.

use std::fmt;
use std::sync::Arc;

use crate::{JobId, NodeId, ObjectId, ResourceSet, TaskId, WorkerId};

/// The registered name of a remote function: `module::path::name#signature-hash`.
///
/// Every call of a function carries it, so it is cheap to clone: a name from this build's
/// registry is a `&'static str` (cloned without touching memory other threads write: a shared
/// reference count, bumped by every thread that submits or drops a spec, cost more than the
/// rest of an in-process task's record); a name decoded from a message is shared. Compared,
/// hashed and ordered by its text.
#[derive(Clone)]
pub struct FunctionName(NameRepr);

#[derive(Clone)]
enum NameRepr {
    Static(&'static str),
    Shared(Arc<str>),
}

impl FunctionName {
    /// A name that lives as long as the program (a registered function's).
    pub const fn from_static(name: &'static str) -> Self {
        FunctionName(NameRepr::Static(name))
    }

    /// The name's text.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            NameRepr::Static(s) => s,
            NameRepr::Shared(s) => s,
        }
    }

    /// Whether both are the same text in the same memory (a cheaper test than equality, which
    /// it implies).
    pub fn same(&self, other: &FunctionName) -> bool {
        let (a, b) = (self.as_str(), other.as_str());
        std::ptr::eq(a.as_ptr(), b.as_ptr()) && a.len() == b.len()
    }
}

impl std::ops::Deref for FunctionName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for FunctionName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for FunctionName {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for FunctionName {
    fn from(s: &str) -> Self {
        FunctionName(NameRepr::Shared(Arc::from(s)))
    }
}

impl From<String> for FunctionName {
    fn from(s: String) -> Self {
        FunctionName(NameRepr::Shared(Arc::from(s)))
    }
}

impl From<Arc<str>> for FunctionName {
    fn from(s: Arc<str>) -> Self {
        FunctionName(NameRepr::Shared(s))
    }
}

impl PartialEq for FunctionName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for FunctionName {}

impl PartialEq<str> for FunctionName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialOrd for FunctionName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for FunctionName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for FunctionName {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.as_str().hash(h)
    }
}

impl fmt::Debug for FunctionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for FunctionName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

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

/// Names one task environment ([`TaskEnv`]): the first 8 bytes of a SHA-256 of its variables;
/// `EnvId::NONE` (0) is no variables, the job's plain workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EnvId(pub u64);

impl EnvId {
    /// No variables: the job's plain worker processes.
    pub const NONE: EnvId = EnvId(0);
}

impl fmt::Display for EnvId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "E{:016x}", self.0)
    }
}

/// The environment variables of the worker process that runs a task (Ray's `runtime_env`
/// `env_vars`). Tasks of different environments never share a worker process: each
/// environment of a job is a worker pool of its own, which node agents start with these
/// variables set on top of their own environment. Empty (the default) is the job's plain
/// workers, and costs nothing.
///
/// Variables are kept sorted by name, so the same set always has the same [`EnvId`]; two
/// environments are equal when their ids are.
#[derive(Clone, Default)]
pub struct TaskEnv(Option<Arc<EnvVars>>);

struct EnvVars {
    id: EnvId,
    vars: Box<[(String, String)]>,
}

/// The prefix of the variables Starling sets in its own processes: a task may not set them.
pub const RESERVED_ENV_PREFIX: &str = "STARLING_";

impl TaskEnv {
    /// An environment of `vars`; a name given twice keeps its last value. No variables: the
    /// default environment.
    pub fn new(vars: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut map = std::collections::BTreeMap::new();
        for (k, v) in vars {
            map.insert(k, v);
        }
        if map.is_empty() {
            return TaskEnv(None);
        }
        let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
        for (k, v) in &map {
            // Length-prefixed, so no two sets of pairs hash the same bytes.
            for part in [k, v] {
                digest.update(&(part.len() as u64).to_le_bytes());
                digest.update(part.as_bytes());
            }
        }
        let hash = digest.finish();
        let mut first = [0u8; 8];
        first.copy_from_slice(&hash.as_ref()[..8]);
        // 0 names the default environment.
        let id = EnvId(u64::from_le_bytes(first).max(1));
        TaskEnv(Some(Arc::new(EnvVars {
            id,
            vars: map.into_iter().collect(),
        })))
    }

    /// Its id ([`EnvId::NONE`] for the default environment).
    #[inline]
    pub fn id(&self) -> EnvId {
        self.0.as_ref().map_or(EnvId::NONE, |e| e.id)
    }

    /// Whether it sets no variable.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }

    /// Its variables, sorted by name.
    pub fn vars(&self) -> &[(String, String)] {
        self.0.as_deref().map_or(&[], |e| &e.vars)
    }

    /// Why no process could be started with it, if so: a name that is empty or holds `=` or a
    /// NUL byte, a value with a NUL byte (execve(2) cannot carry them), or a name Starling sets
    /// itself ([`RESERVED_ENV_PREFIX`]).
    pub fn check(&self) -> Result<(), String> {
        for (k, v) in self.vars() {
            if k.is_empty() || k.contains(['=', '\0']) || v.contains('\0') {
                return Err(format!(
                    "environment variable `{}` is not NAME=VALUE (a name without `=`, no NUL \
                     bytes)",
                    k.escape_debug()
                ));
            }
            if k.starts_with(RESERVED_ENV_PREFIX) {
                return Err(format!(
                    "environment variable `{k}` is Starling's own (names starting with \
                     `{RESERVED_ENV_PREFIX}` are set by the node agent)"
                ));
            }
        }
        Ok(())
    }
}

impl PartialEq for TaskEnv {
    fn eq(&self, other: &Self) -> bool {
        self.id() == other.id()
    }
}

impl Eq for TaskEnv {}

impl fmt::Debug for TaskEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("TaskEnv(default)"),
            Some(e) => f
                .debug_map()
                .entries(e.vars.iter().map(|(k, v)| (k, v)))
                .finish(),
        }
    }
}

/// How an actor lives (Ray's actor options), carried by the task that creates it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActorOptions {
    /// The actor's class (its type's name), for status and errors.
    pub class_name: String,
    /// How many times it is started again after its process dies ([`u32::MAX`]: always).
    pub max_restarts: u32,
    /// How many times a call lost with the actor's process is retried on the restarted actor.
    pub max_task_retries: u32,
    /// Its name (empty: none), by which any driver of the cluster finds it.
    pub name: String,
    /// Whether it outlives its handles (Ray's `lifetime="detached"`): it lives until killed.
    pub detached: bool,
    /// For an async actor, how many of its calls may be in flight at once (they interleave at
    /// their `.await`s on the actor's worker); 0 for a sync actor, which runs one call at a
    /// time.
    pub max_concurrency: u32,
}

/// A task's part in an actor's life (Ray's actors: a worker that keeps state across calls).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ActorRole {
    /// A plain task.
    #[default]
    None,
    /// Creates an actor, whose id is this task's: the task runs the constructor, and its worker
    /// then belongs to the actor for the actor's life, holding the task's resources. The
    /// task's object is the actor's: the actor lives while it does (or, detached, until
    /// killed).
    Create(Arc<ActorOptions>),
    /// Calls a method of this actor (its creation task's id), on the actor's worker, after the
    /// calls submitted to it before. It holds no resources of its own (the actor holds them).
    Call(TaskId),
}

impl ActorRole {
    /// The actor this task creates or calls, if any.
    pub fn actor(&self, task: TaskId) -> Option<TaskId> {
        match self {
            ActorRole::None => None,
            ActorRole::Create(_) => Some(task),
            ActorRole::Call(a) => Some(*a),
        }
    }
}

/// Everything the scheduler needs to know about a task. Arguments are opaque bytes.
///
/// What every task sets is inline; the options a plain task leaves at their defaults are in
/// [`TaskSpec::extras`], one pointer that is absent when all of them are (a queued task's spec
/// is then about half the size: a million queued tasks hold a million specs).
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
    /// Which run this is: 0 for the first, 1 for the first retry, ...
    pub attempt: u32,
    /// The job (driver program) the task belongs to: only that job's workers, which run its
    /// binary, can run it. `JobId(0)` in-process.
    pub job: JobId,
    /// The task whose code submitted this one (`None`: a driver, or a thread the task did not
    /// run on). Cancelling a task cancels the tasks it submitted that have not finished.
    pub parent: Option<TaskId>,
    /// Everything else: read through it as a [`TaskExtras`], change it with
    /// [`Extras::make_mut`].
    pub extras: Extras,
}

/// The options of a task that a plain task leaves at their defaults (see [`Extras`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskExtras {
    /// Whether an application error (panic or `Err`) is retried, not only a lost worker.
    pub retry_exceptions: bool,
    /// With `retry_exceptions`, the error types retried ([`RemoteError::type_name`]s, as
    /// `std::any::type_name` writes them, or `"panic"`); empty: every error (Ray's
    /// `retry_exceptions=[..]` filter).
    pub retry_on: Vec<Arc<str>>,
    /// Placement policy.
    pub strategy: SchedulingStrategy,
    /// Objects whose `ObjectRef`s are nested inside the inline arguments (a `Vec<ObjectRef<T>>`
    /// argument, a struct holding refs): they stay alive while the task (or its lineage) does,
    /// but the task does not wait for them, as in Ray.
    pub contained: Vec<ObjectId>,
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
    /// The environment variables of the worker process that runs it: only workers of its job
    /// started with exactly this environment run it (the default: the job's plain workers).
    pub env: TaskEnv,
    /// Whether it creates or calls an actor.
    pub actor: ActorRole,
    /// For an actor call: the worker its caller also sent it to directly (its actor's worker
    /// then, as the caller saw it). The head hands it to no worker itself while the actor
    /// lives on that worker; the worker reports it as any call.
    pub direct: Option<WorkerId>,
}

/// What [`Extras`] reads as when it holds nothing.
static DEFAULT_EXTRAS: TaskExtras = TaskExtras {
    retry_exceptions: false,
    retry_on: Vec::new(),
    strategy: SchedulingStrategy::Default,
    contained: Vec::new(),
    returns: 0,
    streaming: false,
    backpressure: 0,
    max_concurrency: 0,
    env: TaskEnv(None),
    actor: ActorRole::None,
    direct: None,
};

impl TaskExtras {
    /// Whether every option is at its default (a count of 1 is the same as 0 for `returns` and
    /// `max_concurrency`).
    pub fn is_default(&self) -> bool {
        // Every field named, so a new one cannot be left out (and dropped by `Extras::new`).
        let TaskExtras {
            retry_exceptions,
            retry_on,
            strategy,
            contained,
            returns,
            streaming,
            backpressure,
            max_concurrency,
            env,
            actor,
            direct,
        } = self;
        !retry_exceptions
            && retry_on.is_empty()
            && *strategy == SchedulingStrategy::Default
            && contained.is_empty()
            && *returns <= 1
            && !streaming
            && *backpressure == 0
            && *max_concurrency <= 1
            && env.is_empty()
            && *actor == ActorRole::None
            && direct.is_none()
    }
}

/// A task's [`TaskExtras`] behind one pointer, which is absent while every option is at its
/// default. It reads as a `TaskExtras` (`spec.extras.streaming`); [`Extras::make_mut`] changes
/// it.
#[derive(Clone, Default)]
pub struct Extras(Option<Box<TaskExtras>>);

impl Extras {
    /// These options; nothing is allocated when all are at their defaults.
    pub fn new(extras: TaskExtras) -> Self {
        if extras.is_default() {
            Extras(None)
        } else {
            Extras(Some(Box::new(extras)))
        }
    }

    /// The options, to change (allocated if the task had none).
    pub fn make_mut(&mut self) -> &mut TaskExtras {
        self.0.get_or_insert_with(Box::default)
    }
}

impl From<TaskExtras> for Extras {
    fn from(extras: TaskExtras) -> Self {
        Extras::new(extras)
    }
}

impl std::ops::Deref for Extras {
    type Target = TaskExtras;

    #[inline]
    fn deref(&self) -> &TaskExtras {
        self.0.as_deref().unwrap_or(&DEFAULT_EXTRAS)
    }
}

impl PartialEq for Extras {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl fmt::Debug for Extras {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
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
        self.extras.returns.max(1)
    }

    /// Every object this task returns, in order: the task's own id, then the ids after it.
    pub fn return_objects(&self) -> impl Iterator<Item = ObjectId> {
        let first = self.id.0;
        (0..u64::from(self.return_count())).map(move |k| ObjectId(first.wrapping_add(k)))
    }

    /// Whether a run that failed with `error` may run again (if it has retries left): only
    /// with `retry_exceptions`, and then only for the types in `retry_on` if it names any.
    pub fn retries_error(&self, error: &RemoteError) -> bool {
        let x = &*self.extras;
        x.retry_exceptions
            && (x.retry_on.is_empty() || x.retry_on.iter().any(|t| **t == *error.type_name))
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
        self.dependencies()
            .chain(self.extras.contained.iter().copied())
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
    /// It calls (or creates) an actor that is dead, or died while it ran with no retries left.
    ActorDied {
        /// The actor.
        actor: TaskId,
        /// Why it died: its process's exit, its constructor's error, or `kill`.
        cause: String,
    },
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
            FailureKind::ActorDied { actor, cause } => {
                write!(f, "task {}: actor {actor} died: {cause}", self.task)
            }
        }
    }
}

#[cfg(test)]
mod env_tests {
    use super::*;

    fn env(vars: &[(&str, &str)]) -> TaskEnv {
        TaskEnv::new(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn the_same_variables_in_any_order_are_one_environment() {
        let a = env(&[("A", "1"), ("B", "2")]);
        let b = env(&[("B", "2"), ("A", "1")]);
        assert_eq!(a, b);
        assert_eq!(a.id(), b.id());
        assert_ne!(a.id(), EnvId::NONE);
        assert_eq!(a.vars()[0], ("A".to_string(), "1".to_string()));
        // A name given twice keeps its last value.
        assert_eq!(env(&[("A", "0"), ("A", "1"), ("B", "2")]), a);
    }

    #[test]
    fn different_variables_are_different_environments() {
        let a = env(&[("A", "1")]);
        assert_ne!(a, env(&[("A", "2")]));
        assert_ne!(a, env(&[("A", "1"), ("B", "")]));
        // Length-prefixed: moving a byte from a name to its value changes the id.
        assert_ne!(env(&[("AB", "C")]), env(&[("A", "BC")]));
        assert_ne!(a, TaskEnv::default());
    }

    #[test]
    fn no_variables_is_the_default_environment() {
        let e = env(&[]);
        assert!(e.is_empty());
        assert_eq!(e.id(), EnvId::NONE);
        assert_eq!(e, TaskEnv::default());
        assert!(e.check().is_ok());
    }

    #[test]
    fn names_no_process_could_be_started_with_are_refused() {
        assert!(env(&[("GOOD_NAME", "any value = ok")]).check().is_ok());
        for bad in [
            env(&[("", "v")]),
            env(&[("A=B", "v")]),
            env(&[("A\0", "v")]),
            env(&[("A", "v\0")]),
        ] {
            assert!(bad.check().unwrap_err().contains("NAME=VALUE"), "{bad:?}");
        }
        let own = env(&[("STARLING_JOB_ID", "7")]).check().unwrap_err();
        assert!(own.contains("Starling's own"), "{own}");
    }

    #[test]
    fn default_options_take_no_allocation_and_read_as_defaults() {
        let plain = Extras::new(TaskExtras {
            // One return and one call at a time are the defaults, spelled out.
            returns: 1,
            max_concurrency: 1,
            ..TaskExtras::default()
        });
        assert!(plain.0.is_none());
        assert_eq!(*plain, TaskExtras::default());
        assert_eq!(plain, Extras::default());
        let streaming = Extras::new(TaskExtras {
            streaming: true,
            ..TaskExtras::default()
        });
        assert!(streaming.streaming);
        assert_ne!(streaming, plain);
        let mut changed = Extras::default();
        changed.make_mut().actor = ActorRole::Call(TaskId(3));
        assert_eq!(changed.actor.actor(TaskId(9)), Some(TaskId(3)));
        // The spec of a plain task: the options it leaves alone cost one pointer.
        assert!(
            std::mem::size_of::<TaskSpec>() <= 136,
            "{}",
            std::mem::size_of::<TaskSpec>()
        );
    }
}
