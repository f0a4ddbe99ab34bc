//! The node protocol's protobuf forms, and the status reply's.

use super::wire;
use crate::node::{
    EntrypointExit, HeadToNodeBatch, HeadToNodeOp, JobLog, NodeBatch, NodeHello, NodeOp,
    StartWorkers, StoreUsage, WorkerExit,
};
use crate::pb;
use crate::status::{
    ActorNameReply, ActorNameRequest, ActorStatus, NodeStatus, PendingReply, PendingRequest,
    StatusReply, StatusRequest,
};
use crate::wire::DecodeError;
use crate::{JobId, NodeId, ObjectId, TaskId};

wire!(try NodeBatch => pb::NodeBatch, HeadToNodeBatch => pb::HeadToNodeBatch);
wire!(
    StatusRequest => pb::StatusRequest,
    StatusReply => pb::StatusReply,
    PendingRequest => pb::TaskRef,
    PendingReply => pb::PendingReply,
    ActorNameRequest => pb::ActorName,
    ActorNameReply => pb::ActorRef,
);

fn missing(what: &str) -> DecodeError {
    DecodeError(format!("{what} without a kind"))
}

impl From<NodeHello> for pb::NodeHello {
    fn from(h: NodeHello) -> Self {
        pb::NodeHello {
            version: h.version,
            resources: Some((&h.resources).into()),
            object_address: h.object_address,
            pool: h.pool,
            store_dir: h.store_dir,
            previous_id: h.previous_id.map_or(0, |n| n.0),
            pid: h.pid,
            gpu_ids: h.gpu_ids,
        }
    }
}

impl From<pb::NodeHello> for NodeHello {
    fn from(h: pb::NodeHello) -> Self {
        NodeHello {
            version: h.version,
            resources: h.resources.map(Into::into).unwrap_or_default(),
            object_address: h.object_address,
            pool: h.pool,
            store_dir: h.store_dir,
            previous_id: (h.previous_id != 0).then_some(NodeId(h.previous_id)),
            pid: h.pid,
            gpu_ids: h.gpu_ids,
        }
    }
}

impl From<StartWorkers> for pb::StartWorkers {
    fn from(s: StartWorkers) -> Self {
        pb::StartWorkers {
            job: s.job.0,
            build: s.build,
            count: s.count,
            env: crate::wire::env_to_wire(&s.env),
        }
    }
}

impl From<pb::StartWorkers> for StartWorkers {
    fn from(s: pb::StartWorkers) -> Self {
        StartWorkers {
            job: JobId(s.job),
            build: s.build,
            count: s.count,
            env: crate::wire::env_from_wire(s.env),
        }
    }
}

impl From<StoreUsage> for pb::StoreUsage {
    fn from(u: StoreUsage) -> Self {
        pb::StoreUsage {
            memory_bytes: u.memory_bytes,
            spilled_bytes: u.spilled_bytes,
            objects: u.objects,
        }
    }
}

impl From<pb::StoreUsage> for StoreUsage {
    fn from(u: pb::StoreUsage) -> Self {
        StoreUsage {
            memory_bytes: u.memory_bytes,
            spilled_bytes: u.spilled_bytes,
            objects: u.objects,
        }
    }
}

impl From<NodeOp> for pb::NodeOp {
    fn from(op: NodeOp) -> Self {
        use pb::node_op::Kind;
        pb::NodeOp {
            kind: Some(match op {
                NodeOp::Hello(h) => Kind::Hello(h.into()),
                NodeOp::Heartbeat => Kind::Heartbeat(true),
                NodeOp::WorkerExit(e) => Kind::WorkerExit(pb::WorkerExit {
                    job: e.job.0,
                    pid: e.pid,
                    code: e.code,
                }),
                NodeOp::Usage(u) => Kind::Usage(u.into()),
                NodeOp::JobLog(l) => Kind::JobLog(pb::JobLog {
                    job: l.job.0,
                    data: l.data,
                }),
                NodeOp::EntrypointExit(e) => Kind::EntrypointExit(pb::EntrypointExit {
                    job: e.job.0,
                    code: e.code,
                    error: e.error,
                }),
                NodeOp::JobStopped(j) => Kind::JobStopped(j.0),
            }),
        }
    }
}

impl TryFrom<pb::NodeOp> for NodeOp {
    type Error = DecodeError;

    fn try_from(op: pb::NodeOp) -> Result<Self, DecodeError> {
        use pb::node_op::Kind;
        Ok(match op.kind.ok_or_else(|| missing("a node op"))? {
            Kind::Hello(h) => NodeOp::Hello(h.into()),
            Kind::Heartbeat(_) => NodeOp::Heartbeat,
            Kind::WorkerExit(e) => NodeOp::WorkerExit(WorkerExit {
                job: JobId(e.job),
                pid: e.pid,
                code: e.code,
            }),
            Kind::Usage(u) => NodeOp::Usage(u.into()),
            Kind::JobLog(l) => NodeOp::JobLog(JobLog {
                job: JobId(l.job),
                data: l.data,
            }),
            Kind::EntrypointExit(e) => NodeOp::EntrypointExit(EntrypointExit {
                job: JobId(e.job),
                code: e.code,
                error: e.error,
            }),
            Kind::JobStopped(j) => NodeOp::JobStopped(JobId(j)),
        })
    }
}

impl From<HeadToNodeOp> for pb::HeadToNodeOp {
    fn from(op: HeadToNodeOp) -> Self {
        use pb::head_to_node_op::Kind;
        pb::HeadToNodeOp {
            kind: Some(match op {
                HeadToNodeOp::NodeId(n) => Kind::NodeId(n.0),
                HeadToNodeOp::StartWorkers(s) => Kind::StartWorkers(s.into()),
                HeadToNodeOp::StopJob(j) => Kind::StopJob(j.0),
                HeadToNodeOp::FreeObject(o) => Kind::FreeObject(o.0),
                HeadToNodeOp::JobInstance(i) => Kind::JobInstance(i.into()),
                HeadToNodeOp::KillWorker { job, pid } => {
                    Kind::KillWorker(pb::KillWorker { job: job.0, pid })
                }
                HeadToNodeOp::KeepWorker { job, pid } => {
                    Kind::KeepWorker(pb::KillWorker { job: job.0, pid })
                }
            }),
        }
    }
}

impl TryFrom<pb::HeadToNodeOp> for HeadToNodeOp {
    type Error = DecodeError;

    fn try_from(op: pb::HeadToNodeOp) -> Result<Self, DecodeError> {
        use pb::head_to_node_op::Kind;
        Ok(match op.kind.ok_or_else(|| missing("a head-to-node op"))? {
            Kind::NodeId(n) => HeadToNodeOp::NodeId(NodeId(n)),
            Kind::StartWorkers(s) => HeadToNodeOp::StartWorkers(s.into()),
            Kind::StopJob(j) => HeadToNodeOp::StopJob(JobId(j)),
            Kind::FreeObject(o) => HeadToNodeOp::FreeObject(ObjectId(o)),
            Kind::JobInstance(i) => HeadToNodeOp::JobInstance(i.into()),
            Kind::KillWorker(k) => HeadToNodeOp::KillWorker {
                job: JobId(k.job),
                pid: k.pid,
            },
            Kind::KeepWorker(k) => HeadToNodeOp::KeepWorker {
                job: JobId(k.job),
                pid: k.pid,
            },
        })
    }
}

impl From<NodeBatch> for pb::NodeBatch {
    fn from(b: NodeBatch) -> Self {
        pb::NodeBatch {
            ops: b.ops.into_iter().map(Into::into).collect(),
        }
    }
}

impl TryFrom<pb::NodeBatch> for NodeBatch {
    type Error = DecodeError;

    fn try_from(b: pb::NodeBatch) -> Result<Self, DecodeError> {
        Ok(NodeBatch {
            ops: super::try_all(b.ops)?,
        })
    }
}

impl From<HeadToNodeBatch> for pb::HeadToNodeBatch {
    fn from(b: HeadToNodeBatch) -> Self {
        pb::HeadToNodeBatch {
            ops: b.ops.into_iter().map(Into::into).collect(),
        }
    }
}

impl TryFrom<pb::HeadToNodeBatch> for HeadToNodeBatch {
    type Error = DecodeError;

    fn try_from(b: pb::HeadToNodeBatch) -> Result<Self, DecodeError> {
        Ok(HeadToNodeBatch {
            ops: super::try_all(b.ops)?,
        })
    }
}

impl From<StatusRequest> for pb::StatusRequest {
    fn from(r: StatusRequest) -> Self {
        pb::StatusRequest { job: r.job.0 }
    }
}

impl From<pb::StatusRequest> for StatusRequest {
    fn from(r: pb::StatusRequest) -> Self {
        StatusRequest { job: JobId(r.job) }
    }
}

impl From<NodeStatus> for pb::NodeStatus {
    fn from(n: NodeStatus) -> Self {
        pb::NodeStatus {
            id: n.id.0,
            address: n.address,
            total: Some((&n.total).into()),
            available: Some((&n.available).into()),
            alive: n.alive,
            workers: n.workers,
            store: Some(n.store.into()),
            pool: n.pool,
        }
    }
}

impl From<pb::NodeStatus> for NodeStatus {
    fn from(n: pb::NodeStatus) -> Self {
        NodeStatus {
            id: NodeId(n.id),
            address: n.address,
            total: n.total.map(Into::into).unwrap_or_default(),
            available: n.available.map(Into::into).unwrap_or_default(),
            alive: n.alive,
            workers: n.workers,
            store: n.store.map(Into::into).unwrap_or_default(),
            pool: n.pool,
        }
    }
}

impl From<StatusReply> for pb::StatusReply {
    fn from(r: StatusReply) -> Self {
        pb::StatusReply {
            nodes: r.nodes.into_iter().map(Into::into).collect(),
            submitted: r.submitted,
            queued: r.queued,
            running: r.running,
            succeeded: r.succeeded,
            failed: r.failed,
            objects: r.objects,
            head_store_bytes: r.head_store_bytes,
            retried: r.retried,
            reconstructed: r.reconstructed,
            head_spilled_bytes: r.head_spilled_bytes,
            live: r.live,
            max_live: r.max_live,
            drivers_waiting: r.drivers_waiting,
            peak_live: r.peak_live,
            infeasible: r.infeasible,
            infeasible_tasks: r
                .infeasible_tasks
                .into_iter()
                .map(|(task, reason)| pb::Infeasible {
                    task: task.0,
                    reason,
                })
                .collect(),
            actors: r
                .actors
                .into_iter()
                .map(|a| pb::ActorStatus {
                    id: a.id.0,
                    class_name: a.class_name,
                    name: a.name,
                    state: a.state,
                    cause: a.cause,
                    node: a.node.map_or(0, |n| n.0),
                    restarts: a.restarts,
                    calls_served: a.calls_served,
                    job: a.job.0,
                })
                .collect(),
        }
    }
}

impl From<pb::StatusReply> for StatusReply {
    fn from(r: pb::StatusReply) -> Self {
        StatusReply {
            nodes: r.nodes.into_iter().map(Into::into).collect(),
            submitted: r.submitted,
            queued: r.queued,
            running: r.running,
            succeeded: r.succeeded,
            failed: r.failed,
            objects: r.objects,
            head_store_bytes: r.head_store_bytes,
            retried: r.retried,
            reconstructed: r.reconstructed,
            head_spilled_bytes: r.head_spilled_bytes,
            live: r.live,
            max_live: r.max_live,
            drivers_waiting: r.drivers_waiting,
            peak_live: r.peak_live,
            infeasible: r.infeasible,
            infeasible_tasks: r
                .infeasible_tasks
                .into_iter()
                .map(|i| (TaskId(i.task), i.reason))
                .collect(),
            actors: r
                .actors
                .into_iter()
                .map(|a| ActorStatus {
                    id: TaskId(a.id),
                    class_name: a.class_name,
                    name: a.name,
                    state: a.state,
                    cause: a.cause,
                    node: (a.node != 0).then_some(NodeId(a.node)),
                    restarts: a.restarts,
                    calls_served: a.calls_served,
                    job: JobId(a.job),
                })
                .collect(),
        }
    }
}

impl From<ActorNameRequest> for pb::ActorName {
    fn from(r: ActorNameRequest) -> Self {
        pb::ActorName { name: r.name }
    }
}

impl From<pb::ActorName> for ActorNameRequest {
    fn from(r: pb::ActorName) -> Self {
        ActorNameRequest { name: r.name }
    }
}

impl From<ActorNameReply> for pb::ActorRef {
    fn from(r: ActorNameReply) -> Self {
        pb::ActorRef {
            actor: r.actor.map_or(0, |a| a.0),
        }
    }
}

impl From<pb::ActorRef> for ActorNameReply {
    fn from(r: pb::ActorRef) -> Self {
        ActorNameReply {
            actor: (r.actor != 0).then_some(TaskId(r.actor)),
        }
    }
}

impl From<PendingRequest> for pb::TaskRef {
    fn from(r: PendingRequest) -> Self {
        pb::TaskRef { task: r.task.0 }
    }
}

impl From<pb::TaskRef> for PendingRequest {
    fn from(r: pb::TaskRef) -> Self {
        PendingRequest {
            task: TaskId(r.task),
        }
    }
}

impl From<PendingReply> for pb::PendingReply {
    fn from(r: PendingReply) -> Self {
        pb::PendingReply {
            pending: r.reason.is_some(),
            reason: r.reason.unwrap_or_default(),
        }
    }
}

impl From<pb::PendingReply> for PendingReply {
    fn from(r: pb::PendingReply) -> Self {
        PendingReply {
            reason: r.pending.then_some(r.reason),
        }
    }
}
