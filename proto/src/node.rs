//! The node protocol: what a node agent and the head say to each other over `Attach`.
//!
//! An agent's first op is [`NodeOp::Hello`]; the head answers with the node's id
//! ([`HeadToNodeOp::NodeId`]) and from then on asks it to start worker processes, run job
//! instances and free objects, while the agent reports heartbeats, exits, store usage and job
//! output. Converted to and from protobuf at the edge, like [`crate::session`].

use crate::jobs::JobInstance;
use crate::{JobId, NodeId, ObjectId, ResourceSet, TaskEnv};

/// An agent's first op: what the node offers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeHello {
    pub version: u32,
    pub resources: ResourceSet,
    /// The node's object service, host:port.
    pub object_address: String,
    /// The pool the node belongs to (empty: the shared pool).
    pub pool: String,
    /// The node's store directory (consumers on the same host read files from it).
    pub store_dir: String,
    /// Set when a node reconnects after a head restart or network cut.
    pub previous_id: Option<NodeId>,
    /// The agent's process id (a pool's launcher matches the nodes it started by it).
    pub pid: u32,
    /// The ids of the node's GPUs, one per GPU it offers.
    pub gpu_ids: Vec<String>,
}

/// Start `count` worker processes of `build` for `job`, with the environment `env`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StartWorkers {
    pub job: JobId,
    pub build: String,
    pub count: u32,
    pub env: TaskEnv,
}

/// A worker process of `job` exited (its task in flight is lost).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerExit {
    pub job: JobId,
    pub pid: u32,
    /// The exit code, or minus the signal that killed it.
    pub code: i32,
}

/// Bytes used by a node's store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreUsage {
    pub memory_bytes: u64,
    pub spilled_bytes: u64,
    pub objects: u64,
}

/// Output of a job's processes on a node, already tagged, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JobLog {
    pub job: JobId,
    pub data: Vec<u8>,
}

/// A job's entrypoint (instance 0) exited, or could not be started.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EntrypointExit {
    pub job: JobId,
    /// The exit code, or minus the signal that killed it.
    pub code: i32,
    /// Set when it could not be started at all.
    pub error: String,
}

/// What a node agent tells the head.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeOp {
    Hello(NodeHello),
    Heartbeat,
    WorkerExit(WorkerExit),
    Usage(StoreUsage),
    JobLog(JobLog),
    EntrypointExit(EntrypointExit),
    /// Every process of the job on this node is gone and its output was sent (after
    /// [`HeadToNodeOp::StopJob`]).
    JobStopped(JobId),
}

/// What the head tells a node agent.
#[derive(Clone, Debug, PartialEq)]
pub enum HeadToNodeOp {
    /// The id the head gave the node.
    NodeId(NodeId),
    StartWorkers(StartWorkers),
    /// Stop the job's processes on this node.
    StopJob(JobId),
    FreeObject(ObjectId),
    /// Run this instance of a multi-node job until `StopJob`.
    JobInstance(JobInstance),
    /// Kill the worker process `pid` of `job` now: its task was force-cancelled. Its exit is
    /// reported like any other, and the head asks for a fresh process when it needs one.
    KillWorker {
        job: JobId,
        pid: u32,
    },
    /// The worker process `pid` of `job` hosts a detached actor: a later `StopJob` of `job`
    /// leaves it running (a `KillWorker`, or the node's end, stops it).
    KeepWorker {
        job: JobId,
        pid: u32,
    },
}

/// One message of an agent's `Attach` stream.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeBatch {
    pub ops: Vec<NodeOp>,
}

/// One message of the head's answer to `Attach`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HeadToNodeBatch {
    pub ops: Vec<HeadToNodeOp>,
}
