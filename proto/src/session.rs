//! The session protocol: what a driver or worker process and the head say to each other.
//!
//! A client opens one `Session` stream; both directions carry batches of ops, so one HTTP/2
//! frame moves many tasks. The first op a client sends is [`ClientOp::Hello`], the first the head
//! answers is [`HeadOp::Welcome`]. These types convert to and from their protobuf form at the
//! edge (see [`crate::rpc`]); a message that does not convert is refused there as malformed.

use crate::{EnvId, JobId, NodeId, ObjectId, RemoteError, TaskFailure, TaskId, TaskSpec};

/// A client's first op: who it is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hello {
    /// Protocol version; the head refuses others with a clear status.
    pub version: u32,
    /// The build id (content hash) of the client's executable.
    pub build: String,
    /// Set by worker processes: the node that started them.
    pub node: NodeId,
    /// The job a worker process or a job's entrypoint serves (0: a new driver, a job of its own).
    pub job: JobId,
    pub is_worker: bool,
    pub pid: u32,
    /// Set by worker processes: the environment they were started with (a task's `env_vars`).
    pub env: EnvId,
}

/// The head's answer to [`Hello`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Welcome {
    /// The session's id at the head.
    pub client: u64,
    pub job: JobId,
    /// Ids this client allocates start here (see [`crate::SESSION_SHIFT`]).
    pub id_base: u64,
    /// The worker process's id at the head (0 for drivers).
    pub worker: u64,
    /// This head incarnation (random per start): store files carry it, so a file left by an
    /// earlier start, whose ids repeat, is never read as an object of this one.
    pub epoch: u64,
}

/// Where a large object lives.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectLocation {
    pub node: NodeId,
    /// The node's object service (host:port), for consumers on other nodes.
    pub address: String,
    /// The object's file in the node's store, for consumers on the same host (mapped).
    pub path: String,
    pub size: u64,
    pub object: ObjectId,
}

/// A settled object as the head sends it, or a value a client puts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectValue {
    pub object: ObjectId,
    pub value: Value,
}

/// An object's value: its bytes, where they are, or why there are none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Inline(Vec<u8>),
    Location(ObjectLocation),
    Failure(TaskFailure),
}

/// A task argument as a worker receives it: the value inline, or where to find it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResolvedArg {
    Inline(Vec<u8>),
    Location(ObjectLocation),
    /// Made by a task handed to this worker earlier (pipelined behind it): take it from the
    /// worker's own results once that task has run.
    Local(ObjectId),
}

/// A task for a worker process to run.
#[derive(Clone, Debug, PartialEq)]
pub struct RunTask {
    pub spec: TaskSpec,
    pub args: Vec<ResolvedArg>,
    /// The ids of the node's GPUs the task holds (empty when it needs none).
    pub gpu_ids: Vec<String>,
}

/// How a task a worker process ran ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Its value, inline.
    Inline(Vec<u8>),
    /// Its value, stored in the node's store under the task's object id: this many bytes.
    Stored(u64),
    Failed(RemoteError),
    /// An argument did not deserialize as the function's parameter type.
    BadArgument(RemoteError),
    /// The worker's build has no function of this name.
    FunctionNotFound(String),
    /// The values of a task with several returns, in order.
    Returns(Vec<Returned>),
}

/// One value of a task with several returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Returned {
    /// Inline.
    Inline(Vec<u8>),
    /// Stored in the node's store under the return's object id: this many bytes.
    Stored(u64),
}

/// A worker process's report of a task it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskDone {
    pub task: TaskId,
    pub outcome: Outcome,
    /// How long the function ran, in microseconds (the head sizes pipelines with it).
    pub runtime_us: u64,
}

/// Item `index` (from 0) of the streaming task `task` is the object `object`: from the worker
/// process running the task to the head (the object is a put of that session), and from the
/// head to the task's submitter (which then holds one ref to it, counted by the head).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamItem {
    pub task: TaskId,
    pub index: u64,
    pub object: ObjectId,
}

/// The submitter of the streaming task `task` took `consumed` of its items: from the submitter
/// to the head, and from the head to the worker process running the task, whose producer
/// pauses while it is `TaskSpec::backpressure` items ahead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamAck {
    pub task: TaskId,
    pub consumed: u64,
}

/// What a client tells the head.
#[derive(Clone, Debug, PartialEq)]
pub enum ClientOp {
    Hello(Hello),
    Submit(TaskSpec),
    /// A small value put by the client, inline.
    Put(ObjectValue),
    /// A large value the client stored on its node (worker processes) or uploaded (drivers).
    PutStored(ObjectValue),
    Release(ObjectId),
    /// This process holds one more ref group for the object (it deserialized a ref).
    AddRef(ObjectId),
    /// The value of `container` (a `put`, or the result of a task this worker just reported)
    /// holds refs to `refs`: they stay alive while that value does.
    Nested {
        container: ObjectId,
        refs: Vec<ObjectId>,
    },
    /// Send me this object's value (or failure) when it settles.
    Subscribe(ObjectId),
    Cancel(TaskId),
    CancelForce(TaskId),
    /// Worker processes only: the running task waits on objects (lend its CPU), and is back.
    Blocked,
    Unblocked,
    Done(TaskDone),
    /// Worker processes only: the running streaming task yielded an item.
    StreamItem(StreamItem),
    /// The submitter of a streaming task took this many of its items.
    StreamAck(StreamAck),
    /// Kill this actor: for good (`no_restart`), or so that it restarts if it may.
    KillActor {
        actor: TaskId,
        no_restart: bool,
    },
}

/// What the head tells a client.
#[derive(Clone, Debug, PartialEq)]
pub enum HeadOp {
    Welcome(Welcome),
    Value(ObjectValue),
    Run(RunTask),
    Cancel(TaskId),
    /// The head is alive and serving this session: sent on a session that was sent nothing else
    /// for a while, so a client that hears nothing for [`crate::security::SILENCE_LIMIT`] knows
    /// the head is gone or wedged.
    Alive,
    /// A task this client submitted cannot run on any node now (`reason`); it waits for a
    /// node that can hold it. Said each time the head finds it so: warn once per reason.
    Infeasible {
        task: TaskId,
        reason: String,
    },
    /// An item of a streaming task this client submitted; the head counts one ref to it for
    /// this session.
    StreamItem(StreamItem),
    /// Worker processes only: the submitter of a streaming task this process runs took this
    /// many items.
    StreamAck(StreamAck),
}

/// One message of a client's session stream.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientBatch {
    pub ops: Vec<ClientOp>,
}

/// One message of the head's answer stream.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HeadBatch {
    pub ops: Vec<HeadOp>,
}

/// Bytes a message takes on the wire beyond its payloads, at most (ids, sizes, tags).
const OVERHEAD: usize = 64;

fn spec_size(t: &TaskSpec) -> usize {
    let args: usize = t
        .args
        .iter()
        .map(|a| match a {
            crate::TaskArg::Inline(b) => b.len() + 16,
            crate::TaskArg::Object(_) => 16,
        })
        .sum();
    OVERHEAD
        + t.function.len()
        + args
        + 10 * t.extras.contained.len()
        + t.resources
            .iter_units()
            .map(|(n, _)| n.len() + 16)
            .sum::<usize>()
}

fn location_size(l: &ObjectLocation) -> usize {
    OVERHEAD + l.address.len() + l.path.len()
}

fn value_size(v: &Value) -> usize {
    match v {
        Value::Inline(b) => b.len() + OVERHEAD,
        Value::Location(l) => location_size(l),
        Value::Failure(f) => OVERHEAD + failure_size(f),
    }
}

fn failure_size(f: &TaskFailure) -> usize {
    use crate::FailureKind;
    OVERHEAD
        + match &f.kind {
            FailureKind::Application(e) | FailureKind::BadArgument(e) => {
                e.type_name.len() + e.message.len() + e.backtrace.len()
            }
            FailureKind::Upstream(up) => failure_size(up),
            FailureKind::FunctionNotFound { name, build } => name.len() + build.len(),
            FailureKind::WorkerDied { exit } | FailureKind::Unschedulable(exit) => exit.len(),
            FailureKind::ActorDied { cause, .. } => cause.len(),
            FailureKind::Cancelled | FailureKind::ObjectLost(_) => 0,
        }
}

impl HeadOp {
    /// About how many bytes the op takes encoded, never less: what a batch is sized by.
    pub fn wire_size(&self) -> usize {
        match self {
            HeadOp::Welcome(_)
            | HeadOp::Cancel(_)
            | HeadOp::Alive
            | HeadOp::StreamItem(_)
            | HeadOp::StreamAck(_) => OVERHEAD,
            HeadOp::Infeasible { reason, .. } => OVERHEAD + reason.len(),
            HeadOp::Value(v) => value_size(&v.value),
            HeadOp::Run(r) => {
                let args: usize = r
                    .args
                    .iter()
                    .map(|a| match a {
                        ResolvedArg::Inline(b) => b.len() + OVERHEAD,
                        ResolvedArg::Location(l) => location_size(l),
                        ResolvedArg::Local(_) => OVERHEAD,
                    })
                    .sum();
                spec_size(&r.spec) + args + r.gpu_ids.iter().map(|g| g.len() + 8).sum::<usize>()
            }
        }
    }
}

impl ClientOp {
    /// About how many bytes the op takes encoded, never less: what a batch is sized by.
    pub fn wire_size(&self) -> usize {
        match self {
            ClientOp::Hello(h) => OVERHEAD + h.build.len(),
            ClientOp::Submit(t) => spec_size(t),
            ClientOp::Put(v) | ClientOp::PutStored(v) => value_size(&v.value),
            ClientOp::Done(d) => match &d.outcome {
                Outcome::Inline(b) => OVERHEAD + b.len(),
                Outcome::Stored(_) => OVERHEAD,
                Outcome::Failed(e) | Outcome::BadArgument(e) => {
                    OVERHEAD + e.type_name.len() + e.message.len() + e.backtrace.len()
                }
                Outcome::FunctionNotFound(n) => OVERHEAD + n.len(),
                Outcome::Returns(values) => {
                    OVERHEAD
                        + values
                            .iter()
                            .map(|v| match v {
                                Returned::Inline(b) => 16 + b.len(),
                                Returned::Stored(_) => 16,
                            })
                            .sum::<usize>()
                }
            },
            ClientOp::Nested { refs, .. } => OVERHEAD + 10 * refs.len(),
            _ => OVERHEAD,
        }
    }
}
