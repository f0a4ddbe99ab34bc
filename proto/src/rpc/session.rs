//! The session protocol's protobuf forms.

use super::wire;
use crate::pb;
use crate::session::{
    ClientBatch, ClientOp, HeadBatch, HeadOp, Hello, ObjectLocation, ObjectValue, Outcome,
    ResolvedArg, Returned, RunTask, StreamAck, StreamItem, TaskDone, Value, Welcome,
};
use crate::wire::DecodeError;
use crate::{EnvId, JobId, NodeId, ObjectId, TaskId};

wire!(try ClientBatch => pb::ClientBatch, HeadBatch => pb::HeadBatch);

fn missing(what: &str) -> DecodeError {
    DecodeError(format!("{what} without a kind"))
}

impl From<Hello> for pb::Hello {
    fn from(h: Hello) -> Self {
        pb::Hello {
            version: h.version,
            build: h.build,
            node: h.node.0,
            job: h.job.0,
            is_worker: h.is_worker,
            pid: h.pid,
            env: h.env.0,
        }
    }
}

impl From<pb::Hello> for Hello {
    fn from(h: pb::Hello) -> Self {
        Hello {
            version: h.version,
            build: h.build,
            node: NodeId(h.node),
            job: JobId(h.job),
            is_worker: h.is_worker,
            pid: h.pid,
            env: EnvId(h.env),
        }
    }
}

impl From<Welcome> for pb::Welcome {
    fn from(w: Welcome) -> Self {
        pb::Welcome {
            client: w.client,
            job: w.job.0,
            id_base: w.id_base,
            worker: w.worker,
            epoch: w.epoch,
        }
    }
}

impl From<pb::Welcome> for Welcome {
    fn from(w: pb::Welcome) -> Self {
        Welcome {
            client: w.client,
            job: JobId(w.job),
            id_base: w.id_base,
            worker: w.worker,
            epoch: w.epoch,
        }
    }
}

impl From<ObjectLocation> for pb::ObjectLocation {
    fn from(l: ObjectLocation) -> Self {
        pb::ObjectLocation {
            node: l.node.0,
            address: l.address,
            path: l.path,
            size: l.size,
            object: l.object.0,
        }
    }
}

impl From<pb::ObjectLocation> for ObjectLocation {
    fn from(l: pb::ObjectLocation) -> Self {
        ObjectLocation {
            node: NodeId(l.node),
            address: l.address,
            path: l.path,
            size: l.size,
            object: ObjectId(l.object),
        }
    }
}

impl From<ObjectValue> for pb::ObjectValue {
    fn from(v: ObjectValue) -> Self {
        use pb::object_value::Kind;
        pb::ObjectValue {
            object: v.object.0,
            kind: Some(match v.value {
                Value::Inline(b) => Kind::Inline(b),
                Value::Location(l) => Kind::Location(l.into()),
                Value::Failure(f) => Kind::Failure((&f).into()),
            }),
        }
    }
}

impl TryFrom<pb::ObjectValue> for ObjectValue {
    type Error = DecodeError;

    fn try_from(v: pb::ObjectValue) -> Result<Self, DecodeError> {
        use pb::object_value::Kind;
        let value = match v.kind.ok_or_else(|| missing("an object value"))? {
            Kind::Inline(b) => Value::Inline(b),
            Kind::Location(l) => Value::Location(l.into()),
            Kind::Failure(f) => Value::Failure(f.try_into()?),
        };
        Ok(ObjectValue {
            object: ObjectId(v.object),
            value,
        })
    }
}

impl From<ResolvedArg> for pb::ResolvedArg {
    fn from(a: ResolvedArg) -> Self {
        use pb::resolved_arg::Kind;
        pb::ResolvedArg {
            kind: Some(match a {
                ResolvedArg::Inline(b) => Kind::Inline(b),
                ResolvedArg::Location(l) => Kind::Location(l.into()),
                ResolvedArg::Local(o) => Kind::Local(o.0),
            }),
        }
    }
}

impl TryFrom<pb::ResolvedArg> for ResolvedArg {
    type Error = DecodeError;

    fn try_from(a: pb::ResolvedArg) -> Result<Self, DecodeError> {
        use pb::resolved_arg::Kind;
        Ok(match a.kind.ok_or_else(|| missing("a task argument"))? {
            Kind::Inline(b) => ResolvedArg::Inline(b),
            Kind::Location(l) => ResolvedArg::Location(l.into()),
            Kind::Local(o) => ResolvedArg::Local(ObjectId(o)),
        })
    }
}

impl From<RunTask> for pb::RunTask {
    fn from(r: RunTask) -> Self {
        pb::RunTask {
            spec: Some(r.spec.into()),
            args: r.args.into_iter().map(Into::into).collect(),
            gpu_ids: r.gpu_ids,
        }
    }
}

impl TryFrom<pb::RunTask> for RunTask {
    type Error = DecodeError;

    fn try_from(r: pb::RunTask) -> Result<Self, DecodeError> {
        Ok(RunTask {
            spec: r
                .spec
                .ok_or_else(|| DecodeError("a task to run without its spec".into()))?
                .try_into()?,
            args: super::try_all(r.args)?,
            gpu_ids: r.gpu_ids,
        })
    }
}

impl From<TaskDone> for pb::TaskDone {
    fn from(d: TaskDone) -> Self {
        use pb::task_done::Kind;
        pb::TaskDone {
            task: d.task.0,
            kind: Some(match d.outcome {
                Outcome::Inline(b) => Kind::Inline(b),
                Outcome::Stored(size) => Kind::Stored(size),
                Outcome::Failed(e) => Kind::Failed((&e).into()),
                Outcome::BadArgument(e) => Kind::BadArgument((&e).into()),
                Outcome::FunctionNotFound(name) => Kind::FunctionNotFound(name),
                Outcome::Returns(values) => Kind::Returns(pb::Returns {
                    values: values
                        .into_iter()
                        .map(|v| pb::ReturnValue {
                            kind: Some(match v {
                                Returned::Inline(b) => pb::return_value::Kind::Inline(b),
                                Returned::Stored(n) => pb::return_value::Kind::Stored(n),
                            }),
                        })
                        .collect(),
                }),
            }),
            runtime_us: d.runtime_us,
        }
    }
}

impl TryFrom<pb::TaskDone> for TaskDone {
    type Error = DecodeError;

    fn try_from(d: pb::TaskDone) -> Result<Self, DecodeError> {
        use pb::task_done::Kind;
        let outcome = match d.kind.ok_or_else(|| missing("a task's end"))? {
            Kind::Inline(b) => Outcome::Inline(b),
            Kind::Stored(size) => Outcome::Stored(size),
            Kind::Failed(e) => Outcome::Failed(e.into()),
            Kind::BadArgument(e) => Outcome::BadArgument(e.into()),
            Kind::FunctionNotFound(name) => Outcome::FunctionNotFound(name),
            Kind::Returns(r) => Outcome::Returns(
                r.values
                    .into_iter()
                    .map(|v| match v.kind {
                        Some(pb::return_value::Kind::Inline(b)) => Ok(Returned::Inline(b)),
                        Some(pb::return_value::Kind::Stored(n)) => Ok(Returned::Stored(n)),
                        None => Err(missing("a returned value")),
                    })
                    .collect::<Result<_, _>>()?,
            ),
        };
        Ok(TaskDone {
            task: TaskId(d.task),
            outcome,
            runtime_us: d.runtime_us,
        })
    }
}

impl From<ClientOp> for pb::ClientOp {
    fn from(op: ClientOp) -> Self {
        use pb::client_op::Kind;
        pb::ClientOp {
            kind: Some(match op {
                ClientOp::Hello(h) => Kind::Hello(h.into()),
                ClientOp::Submit(t) => Kind::Submit(t.into()),
                ClientOp::Put(v) => Kind::Put(v.into()),
                ClientOp::PutStored(v) => Kind::PutStored(v.into()),
                ClientOp::Release(o) => Kind::Release(o.0),
                ClientOp::AddRef(o) => Kind::AddRef(o.0),
                ClientOp::Nested { container, refs } => Kind::Nested(pb::Nested {
                    container: container.0,
                    refs: refs.into_iter().map(|o| o.0).collect(),
                }),
                ClientOp::Subscribe(o) => Kind::Subscribe(o.0),
                ClientOp::Cancel(t) => Kind::Cancel(t.0),
                ClientOp::CancelForce(t) => Kind::CancelForce(t.0),
                ClientOp::KillActor {
                    actor,
                    no_restart: true,
                } => Kind::KillActor(actor.0),
                ClientOp::KillActor {
                    actor,
                    no_restart: false,
                } => Kind::KillActorRestart(actor.0),
                ClientOp::Blocked => Kind::Blocked(true),
                ClientOp::Unblocked => Kind::Unblocked(true),
                ClientOp::Done(d) => Kind::Done(d.into()),
                ClientOp::StreamItem(i) => Kind::StreamItem(i.into()),
                ClientOp::StreamAck(a) => Kind::StreamAck(a.into()),
            }),
        }
    }
}

impl TryFrom<pb::ClientOp> for ClientOp {
    type Error = DecodeError;

    fn try_from(op: pb::ClientOp) -> Result<Self, DecodeError> {
        use pb::client_op::Kind;
        Ok(match op.kind.ok_or_else(|| missing("a client op"))? {
            Kind::Hello(h) => ClientOp::Hello(h.into()),
            Kind::Submit(t) => ClientOp::Submit(t.try_into()?),
            Kind::Put(v) => ClientOp::Put(v.try_into()?),
            Kind::PutStored(v) => ClientOp::PutStored(v.try_into()?),
            Kind::Release(o) => ClientOp::Release(ObjectId(o)),
            Kind::AddRef(o) => ClientOp::AddRef(ObjectId(o)),
            Kind::Nested(n) => ClientOp::Nested {
                container: ObjectId(n.container),
                refs: n.refs.into_iter().map(ObjectId).collect(),
            },
            Kind::Subscribe(o) => ClientOp::Subscribe(ObjectId(o)),
            Kind::Cancel(t) => ClientOp::Cancel(TaskId(t)),
            Kind::CancelForce(t) => ClientOp::CancelForce(TaskId(t)),
            Kind::KillActor(a) => ClientOp::KillActor {
                actor: TaskId(a),
                no_restart: true,
            },
            Kind::KillActorRestart(a) => ClientOp::KillActor {
                actor: TaskId(a),
                no_restart: false,
            },
            Kind::Blocked(_) => ClientOp::Blocked,
            Kind::Unblocked(_) => ClientOp::Unblocked,
            Kind::Done(d) => ClientOp::Done(d.try_into()?),
            Kind::StreamItem(i) => ClientOp::StreamItem(i.into()),
            Kind::StreamAck(a) => ClientOp::StreamAck(a.into()),
        })
    }
}

impl From<HeadOp> for pb::HeadOp {
    fn from(op: HeadOp) -> Self {
        use pb::head_op::Kind;
        pb::HeadOp {
            kind: Some(match op {
                HeadOp::Welcome(w) => Kind::Welcome(w.into()),
                HeadOp::Value(v) => Kind::Value(v.into()),
                HeadOp::Run(r) => Kind::Run(r.into()),
                HeadOp::Cancel(t) => Kind::Cancel(t.0),
                HeadOp::Alive => Kind::Alive(true),
                HeadOp::Infeasible { task, reason } => Kind::Infeasible(pb::Infeasible {
                    task: task.0,
                    reason,
                }),
                HeadOp::StreamItem(i) => Kind::StreamItem(i.into()),
                HeadOp::StreamAck(a) => Kind::StreamAck(a.into()),
            }),
        }
    }
}

impl TryFrom<pb::HeadOp> for HeadOp {
    type Error = DecodeError;

    fn try_from(op: pb::HeadOp) -> Result<Self, DecodeError> {
        use pb::head_op::Kind;
        Ok(match op.kind.ok_or_else(|| missing("a head op"))? {
            Kind::Welcome(w) => HeadOp::Welcome(w.into()),
            Kind::Value(v) => HeadOp::Value(v.try_into()?),
            Kind::Run(r) => HeadOp::Run(r.try_into()?),
            Kind::Cancel(t) => HeadOp::Cancel(TaskId(t)),
            Kind::Alive(_) => HeadOp::Alive,
            Kind::Infeasible(i) => HeadOp::Infeasible {
                task: TaskId(i.task),
                reason: i.reason,
            },
            Kind::StreamItem(i) => HeadOp::StreamItem(i.into()),
            Kind::StreamAck(a) => HeadOp::StreamAck(a.into()),
        })
    }
}

impl From<StreamItem> for pb::StreamItem {
    fn from(i: StreamItem) -> Self {
        pb::StreamItem {
            task: i.task.0,
            index: i.index,
            object: i.object.0,
        }
    }
}

impl From<pb::StreamItem> for StreamItem {
    fn from(i: pb::StreamItem) -> Self {
        StreamItem {
            task: TaskId(i.task),
            index: i.index,
            object: ObjectId(i.object),
        }
    }
}

impl From<StreamAck> for pb::StreamAck {
    fn from(a: StreamAck) -> Self {
        pb::StreamAck {
            task: a.task.0,
            consumed: a.consumed,
        }
    }
}

impl From<pb::StreamAck> for StreamAck {
    fn from(a: pb::StreamAck) -> Self {
        StreamAck {
            task: TaskId(a.task),
            consumed: a.consumed,
        }
    }
}

impl From<ClientBatch> for pb::ClientBatch {
    fn from(b: ClientBatch) -> Self {
        pb::ClientBatch {
            ops: b.ops.into_iter().map(Into::into).collect(),
        }
    }
}

impl TryFrom<pb::ClientBatch> for ClientBatch {
    type Error = DecodeError;

    fn try_from(b: pb::ClientBatch) -> Result<Self, DecodeError> {
        Ok(ClientBatch {
            ops: super::try_all(b.ops)?,
        })
    }
}

impl From<HeadBatch> for pb::HeadBatch {
    fn from(b: HeadBatch) -> Self {
        pb::HeadBatch {
            ops: b.ops.into_iter().map(Into::into).collect(),
        }
    }
}

impl TryFrom<pb::HeadBatch> for HeadBatch {
    type Error = DecodeError;

    fn try_from(b: pb::HeadBatch) -> Result<Self, DecodeError> {
        Ok(HeadBatch {
            ops: super::try_all(b.ops)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::rpc::Wire;
    use crate::{FailureKind, RemoteError, ResourceSet, SchedulingStrategy, TaskArg, TaskFailure};
    use prost::Message;

    fn spec(args: Vec<TaskArg>) -> crate::TaskSpec {
        crate::TaskSpec {
            id: TaskId(u64::MAX),
            function: "a_rather_long::function_name#0123456789abcdef".into(),
            args,
            resources: ResourceSet::cpus(1.5).with("a_custom_resource_name", 2.0),
            max_retries: u32::MAX,
            attempt: u32::MAX,
            job: JobId(u64::MAX),
            parent: Some(TaskId(u64::MAX)),
            extras: crate::TaskExtras {
                retry_exceptions: true,
                strategy: SchedulingStrategy::NodeAffinity {
                    node: NodeId(u64::MAX),
                    soft: true,
                },
                retry_on: vec![Arc::from("panic")],
                contained: vec![ObjectId(3)],
                returns: 2,
                actor: crate::ActorRole::Call(TaskId(7)),
                ..Default::default()
            }
            .into(),
        }
    }

    fn location() -> ObjectLocation {
        ObjectLocation {
            node: NodeId(u64::MAX),
            address: "[::1]:65535".into(),
            path: "/tmp/starling-0/store/18446744073709551615".into(),
            size: u64::MAX,
            object: ObjectId(u64::MAX),
        }
    }

    fn head_ops() -> Vec<HeadOp> {
        let failure = TaskFailure {
            task: TaskId(u64::MAX),
            attempt: 3,
            kind: FailureKind::Upstream(Arc::new(TaskFailure {
                task: TaskId(1),
                attempt: 0,
                kind: FailureKind::Application(RemoteError::new("panic", "boom".repeat(50))),
            })),
        };
        vec![
            HeadOp::Welcome(Welcome {
                client: u64::MAX,
                job: JobId(u64::MAX),
                id_base: u64::MAX,
                worker: u64::MAX,
                epoch: u64::MAX,
            }),
            HeadOp::Cancel(TaskId(u64::MAX)),
            HeadOp::Alive,
            HeadOp::StreamItem(StreamItem {
                task: TaskId(u64::MAX),
                index: u64::MAX,
                object: ObjectId(u64::MAX),
            }),
            HeadOp::StreamAck(StreamAck {
                task: TaskId(u64::MAX),
                consumed: u64::MAX,
            }),
            HeadOp::Infeasible {
                task: TaskId(u64::MAX),
                reason: "needs gpu=1; no node has gpu".into(),
            },
            HeadOp::Value(ObjectValue {
                object: ObjectId(u64::MAX),
                value: Value::Inline(vec![7; 300]),
            }),
            HeadOp::Value(ObjectValue {
                object: ObjectId(u64::MAX),
                value: Value::Location(location()),
            }),
            HeadOp::Value(ObjectValue {
                object: ObjectId(u64::MAX),
                value: Value::Failure(failure),
            }),
            HeadOp::Run(RunTask {
                spec: spec(vec![
                    TaskArg::Inline(vec![1; 1000]),
                    TaskArg::Object(ObjectId(u64::MAX)),
                ]),
                args: vec![
                    ResolvedArg::Inline(vec![1; 1000]),
                    ResolvedArg::Location(location()),
                    ResolvedArg::Local(ObjectId(u64::MAX)),
                ],
                gpu_ids: vec!["GPU-0123".into(), "7".into()],
            }),
        ]
    }

    fn client_ops() -> Vec<ClientOp> {
        vec![
            ClientOp::Hello(Hello {
                version: u32::MAX,
                build: "f".repeat(64),
                node: NodeId(u64::MAX),
                job: JobId(u64::MAX),
                is_worker: true,
                pid: u32::MAX,
                env: crate::EnvId(u64::MAX),
            }),
            ClientOp::Submit(spec(vec![TaskArg::Inline(vec![2; 500])])),
            ClientOp::Put(ObjectValue {
                object: ObjectId(u64::MAX),
                value: Value::Inline(vec![3; 200]),
            }),
            ClientOp::PutStored(ObjectValue {
                object: ObjectId(u64::MAX),
                value: Value::Location(location()),
            }),
            ClientOp::Release(ObjectId(u64::MAX)),
            ClientOp::AddRef(ObjectId(u64::MAX)),
            ClientOp::StreamItem(StreamItem {
                task: TaskId(u64::MAX),
                index: 0,
                object: ObjectId(u64::MAX),
            }),
            ClientOp::StreamAck(StreamAck {
                task: TaskId(1),
                consumed: u64::MAX,
            }),
            ClientOp::Nested {
                container: ObjectId(u64::MAX),
                refs: vec![ObjectId(1), ObjectId(u64::MAX)],
            },
            ClientOp::Subscribe(ObjectId(u64::MAX)),
            ClientOp::Cancel(TaskId(u64::MAX)),
            ClientOp::CancelForce(TaskId(u64::MAX)),
            ClientOp::KillActor {
                actor: TaskId(u64::MAX),
                no_restart: true,
            },
            ClientOp::KillActor {
                actor: TaskId(3),
                no_restart: false,
            },
            ClientOp::Blocked,
            ClientOp::Unblocked,
            ClientOp::Done(TaskDone {
                task: TaskId(u64::MAX),
                outcome: Outcome::Failed(RemoteError::new("x", "y".repeat(100))),
                runtime_us: u64::MAX,
            }),
            ClientOp::Done(TaskDone {
                task: TaskId(7),
                outcome: Outcome::Returns(vec![
                    Returned::Inline(vec![1, 2]),
                    Returned::Stored(u64::MAX),
                ]),
                runtime_us: 1,
            }),
            ClientOp::Done(TaskDone {
                task: TaskId(u64::MAX),
                outcome: Outcome::Stored(u64::MAX),
                runtime_us: u64::MAX,
            }),
            ClientOp::Done(TaskDone {
                task: TaskId(u64::MAX),
                outcome: Outcome::FunctionNotFound("f".repeat(40)),
                runtime_us: 0,
            }),
        ]
    }

    #[test]
    fn every_op_round_trips() {
        let head = HeadBatch { ops: head_ops() };
        assert_eq!(
            HeadBatch::from_bytes(&head.clone().to_bytes()).unwrap(),
            head
        );
        let client = ClientBatch { ops: client_ops() };
        let back = ClientBatch::from_bytes(&client.clone().to_bytes()).unwrap();
        assert_eq!(back.ops.len(), client.ops.len());
        for (a, b) in back.ops.iter().zip(&client.ops) {
            assert_eq!(format!("{a:?}"), format!("{b:?}"));
        }
    }

    #[test]
    fn wire_size_is_never_less_than_the_encoding() {
        for op in head_ops() {
            let encoded = pb::HeadOp::from(op.clone()).encoded_len();
            assert!(
                op.wire_size() >= encoded,
                "{op:?}: {} < {encoded}",
                op.wire_size()
            );
        }
        for op in client_ops() {
            let encoded = pb::ClientOp::from(op.clone()).encoded_len();
            assert!(
                op.wire_size() >= encoded,
                "{op:?}: {} < {encoded}",
                op.wire_size()
            );
        }
    }

    #[test]
    fn an_op_without_a_kind_is_malformed() {
        let bytes = prost::Message::encode_to_vec(&pb::ClientBatch {
            ops: vec![pb::ClientOp { kind: None }],
        });
        let e = ClientBatch::from_bytes(&bytes).unwrap_err();
        assert!(e.0.contains("without a kind"), "{e}");
    }
}
