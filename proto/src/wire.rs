//! Conversions between the domain types and their protobuf form.
//!
//! Encoding goes through the private generated types, so callers only ever see bytes and domain
//! types. Decoding validates: an unknown enum, a missing field or malformed bytes is a
//! [`DecodeError`], never a panic.

use std::sync::Arc;

use prost::Message;

use crate::{
    pb, ActorOptions, ActorRole, Extras, FailureKind, JobId, NodeId, ObjectId, RemoteError,
    ResourceSet, SchedulingStrategy, TaskArg, TaskEnv, TaskExtras, TaskFailure, TaskId, TaskSpec,
    WorkerId,
};

/// Bytes that do not decode into the expected message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(pub String);

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed message: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

impl From<prost::DecodeError> for DecodeError {
    fn from(e: prost::DecodeError) -> Self {
        DecodeError(e.to_string())
    }
}

impl From<&ResourceSet> for pb::Resources {
    fn from(r: &ResourceSet) -> Self {
        pb::Resources {
            amounts: r
                .iter_units()
                .map(|(n, u)| pb::ResourceAmount {
                    name: n.to_string(),
                    milli4: u,
                })
                .collect(),
        }
    }
}

impl From<pb::Resources> for ResourceSet {
    fn from(r: pb::Resources) -> Self {
        let mut s = ResourceSet::new();
        for a in r.amounts {
            s.set_units(&a.name, a.milli4);
        }
        s
    }
}

impl From<&TaskSpec> for pb::TaskSpec {
    fn from(t: &TaskSpec) -> Self {
        t.clone().into()
    }
}

impl From<TaskSpec> for pb::TaskSpec {
    fn from(t: TaskSpec) -> Self {
        use pb::scheduling_strategy::Kind;
        let x = &*t.extras;
        let strategy = match x.strategy {
            SchedulingStrategy::Default => Kind::Default(true),
            SchedulingStrategy::Spread => Kind::Spread(true),
            SchedulingStrategy::NodeAffinity { node, soft } => {
                Kind::NodeAffinity(pb::NodeAffinity { node: node.0, soft })
            }
        };
        pb::TaskSpec {
            task_id: t.id.0,
            function: t.function.to_string(),
            args: t
                .args
                .into_iter()
                .map(|a| pb::TaskArg {
                    kind: Some(match a {
                        TaskArg::Inline(b) => pb::task_arg::Kind::Inline(b),
                        TaskArg::Object(o) => pb::task_arg::Kind::Object(o.0),
                    }),
                })
                .collect(),
            resources: Some((&t.resources).into()),
            max_retries: t.max_retries,
            retry_exceptions: x.retry_exceptions,
            strategy: Some(pb::SchedulingStrategy {
                kind: Some(strategy),
            }),
            attempt: t.attempt,
            job: t.job.0,
            parent: t.parent.map_or(0, |p| p.0),
            retry_on: x.retry_on.iter().map(|s| s.to_string()).collect(),
            contained: x.contained.iter().map(|o| o.0).collect(),
            returns: x.returns,
            streaming: x.streaming,
            backpressure: x.backpressure,
            max_concurrency: x.max_concurrency,
            env: env_to_wire(&x.env),
            actor_create: match &x.actor {
                ActorRole::Create(o) => Some(pb::ActorCreate {
                    class_name: o.class_name.clone(),
                    max_restarts: o.max_restarts,
                    max_task_retries: o.max_task_retries,
                    name: o.name.clone(),
                    detached: o.detached,
                    max_concurrency: o.max_concurrency,
                }),
                _ => None,
            },
            actor_call: match x.actor {
                ActorRole::Call(a) => a.0,
                _ => 0,
            },
            direct_worker: x.direct.map_or(0, |w| w.0),
        }
    }
}

/// A task environment's variables on the wire.
pub(crate) fn env_to_wire(env: &TaskEnv) -> Vec<pb::EnvVar> {
    env.vars()
        .iter()
        .map(|(name, value)| pb::EnvVar {
            name: name.clone(),
            value: value.clone(),
        })
        .collect()
}

/// A task environment from the wire (sorted and identified again: the sender is not trusted to
/// have done it).
pub(crate) fn env_from_wire(vars: Vec<pb::EnvVar>) -> TaskEnv {
    TaskEnv::new(vars.into_iter().map(|v| (v.name, v.value)))
}

impl TryFrom<pb::TaskSpec> for TaskSpec {
    type Error = DecodeError;

    fn try_from(t: pb::TaskSpec) -> Result<Self, DecodeError> {
        use pb::scheduling_strategy::Kind;
        let args = t
            .args
            .into_iter()
            .map(|a| match a.kind {
                Some(pb::task_arg::Kind::Inline(b)) => Ok(TaskArg::Inline(b)),
                Some(pb::task_arg::Kind::Object(o)) => Ok(TaskArg::Object(ObjectId(o))),
                None => Err(DecodeError("task argument without a value".into())),
            })
            .collect::<Result<_, _>>()?;
        let strategy = match t.strategy.and_then(|s| s.kind) {
            None | Some(Kind::Default(_)) => SchedulingStrategy::Default,
            Some(Kind::Spread(_)) => SchedulingStrategy::Spread,
            Some(Kind::NodeAffinity(a)) => SchedulingStrategy::NodeAffinity {
                node: NodeId(a.node),
                soft: a.soft,
            },
        };
        if t.function.is_empty() {
            return Err(DecodeError("task without a function name".into()));
        }
        Ok(TaskSpec {
            id: TaskId(t.task_id),
            function: crate::FunctionName::from(t.function),
            args,
            resources: t.resources.map(Into::into).unwrap_or_default(),
            max_retries: t.max_retries,
            attempt: t.attempt,
            job: JobId(t.job),
            parent: (t.parent != 0).then_some(TaskId(t.parent)),
            extras: Extras::new(TaskExtras {
                retry_exceptions: t.retry_exceptions,
                strategy,
                retry_on: t.retry_on.into_iter().map(Arc::from).collect(),
                contained: t.contained.into_iter().map(ObjectId).collect(),
                returns: t.returns,
                streaming: t.streaming,
                backpressure: t.backpressure,
                max_concurrency: t.max_concurrency,
                env: env_from_wire(t.env),
                actor: match (t.actor_create, t.actor_call) {
                    (None, 0) => ActorRole::None,
                    (Some(o), 0) => ActorRole::Create(Arc::new(ActorOptions {
                        class_name: o.class_name,
                        max_restarts: o.max_restarts,
                        max_task_retries: o.max_task_retries,
                        name: o.name,
                        detached: o.detached,
                        max_concurrency: o.max_concurrency,
                    })),
                    (None, a) => ActorRole::Call(TaskId(a)),
                    (Some(_), _) => {
                        return Err(DecodeError(
                            "a task that both creates and calls an actor".into(),
                        ))
                    }
                },
                direct: (t.direct_worker != 0).then_some(WorkerId(t.direct_worker)),
            }),
        })
    }
}

impl From<&RemoteError> for pb::RemoteError {
    fn from(e: &RemoteError) -> Self {
        pb::RemoteError {
            type_name: e.type_name.clone(),
            message: e.message.clone(),
            backtrace: e.backtrace.clone(),
        }
    }
}

impl From<pb::RemoteError> for RemoteError {
    fn from(e: pb::RemoteError) -> Self {
        RemoteError {
            type_name: e.type_name,
            message: e.message,
            backtrace: e.backtrace,
        }
    }
}

impl From<&TaskFailure> for pb::TaskFailure {
    fn from(f: &TaskFailure) -> Self {
        use pb::task_failure::Kind;
        let kind = match &f.kind {
            FailureKind::Application(e) => Kind::Application(e.into()),
            FailureKind::Upstream(up) => Kind::Upstream(Box::new((&**up).into())),
            FailureKind::Cancelled => Kind::Cancelled(true),
            FailureKind::FunctionNotFound { name, build } => {
                Kind::FunctionNotFound(format!("{name}\n{build}"))
            }
            FailureKind::BadArgument(e) => Kind::Application(pb::RemoteError {
                type_name: format!("bad-argument:{}", e.type_name),
                message: e.message.clone(),
                backtrace: e.backtrace.clone(),
            }),
            FailureKind::ObjectLost(o) => Kind::ObjectLost(o.0),
            FailureKind::WorkerDied { exit } => Kind::WorkerDied(exit.clone()),
            FailureKind::Unschedulable(why) => Kind::Unschedulable(why.clone()),
            FailureKind::ActorDied { actor, cause } => Kind::ActorDied(pb::ActorDied {
                actor: actor.0,
                cause: cause.clone(),
            }),
        };
        pb::TaskFailure {
            task_id: f.task.0,
            attempt: f.attempt,
            kind: Some(kind),
        }
    }
}

impl TryFrom<pb::TaskFailure> for TaskFailure {
    type Error = DecodeError;

    fn try_from(f: pb::TaskFailure) -> Result<Self, DecodeError> {
        use pb::task_failure::Kind;
        let kind = match f.kind {
            Some(Kind::Application(e)) => match e.type_name.strip_prefix("bad-argument:") {
                Some(t) => FailureKind::BadArgument(RemoteError {
                    type_name: t.to_string(),
                    message: e.message,
                    backtrace: e.backtrace,
                }),
                None => FailureKind::Application(e.into()),
            },
            Some(Kind::Upstream(up)) => FailureKind::Upstream(Arc::new((*up).try_into()?)),
            Some(Kind::Cancelled(_)) => FailureKind::Cancelled,
            Some(Kind::FunctionNotFound(s)) => {
                let (name, build) = s.split_once('\n').unwrap_or((&s, ""));
                FailureKind::FunctionNotFound {
                    name: name.into(),
                    build: build.into(),
                }
            }
            Some(Kind::ObjectLost(o)) => FailureKind::ObjectLost(ObjectId(o)),
            Some(Kind::WorkerDied(exit)) => FailureKind::WorkerDied { exit },
            Some(Kind::Unschedulable(why)) => FailureKind::Unschedulable(why),
            Some(Kind::ActorDied(d)) => FailureKind::ActorDied {
                actor: TaskId(d.actor),
                cause: d.cause,
            },
            None => return Err(DecodeError("task failure without a kind".into())),
        };
        Ok(TaskFailure {
            task: TaskId(f.task_id),
            attempt: f.attempt,
            kind,
        })
    }
}

/// Checks a path inside a directory payload (a `DirArchive` entry, or the entrypoint): it must
/// be relative and made of plain names (`.` allowed), so that joined to the directory it stays
/// inside. `..`, a leading `/`, an empty path and NUL bytes are refused.
pub fn check_archive_path(path: &str) -> Result<(), DecodeError> {
    use std::path::{Component, Path};
    let bad = |why: &str| Err(DecodeError(format!("payload path `{path}` {why}")));
    if path.contains('\0') {
        return bad("contains a NUL byte");
    }
    let mut names = 0;
    for c in Path::new(path).components() {
        match c {
            Component::Normal(_) => names += 1,
            Component::CurDir => {}
            Component::ParentDir => return bad("leaves the directory (`..`)"),
            Component::RootDir | Component::Prefix(_) => return bad("is absolute"),
        }
    }
    if names == 0 {
        return bad("names no file");
    }
    Ok(())
}

/// Encodes a task spec as protobuf bytes.
pub fn encode_task(t: &TaskSpec) -> Vec<u8> {
    pb::TaskSpec::from(t).encode_to_vec()
}

/// Decodes protobuf bytes into a task spec.
pub fn decode_task(bytes: &[u8]) -> Result<TaskSpec, DecodeError> {
    pb::TaskSpec::decode(bytes)?.try_into()
}

/// Encodes a task failure as protobuf bytes.
pub fn encode_failure(f: &TaskFailure) -> Vec<u8> {
    pb::TaskFailure::from(f).encode_to_vec()
}

/// Decodes protobuf bytes into a task failure.
pub fn decode_failure(bytes: &[u8]) -> Result<TaskFailure, DecodeError> {
    pb::TaskFailure::decode(bytes)?.try_into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> TaskSpec {
        TaskSpec {
            id: TaskId(7),
            function: "demo::add#1234".into(),
            args: vec![TaskArg::Inline(vec![1, 2, 3]), TaskArg::Object(ObjectId(3))],
            resources: ResourceSet::cpus(0.5).with("tpu", 1.0),
            max_retries: 3,
            attempt: 1,
            job: JobId(4),
            parent: Some(TaskId(3)),
            extras: Extras::new(TaskExtras {
                retry_exceptions: true,
                strategy: SchedulingStrategy::NodeAffinity {
                    node: NodeId(2),
                    soft: true,
                },
                retry_on: vec![Arc::from("panic"), Arc::from("my::Error")],
                contained: vec![ObjectId(12), ObjectId(u64::MAX)],
                returns: 3,
                streaming: true,
                backpressure: 8,
                max_concurrency: 4,
                env: TaskEnv::new([("PATH".into(), "/x".into())]),
                actor: ActorRole::Call(TaskId(3)),
                direct: Some(WorkerId(6)),
            }),
        }
    }

    #[test]
    fn task_spec_round_trips() {
        let t = spec();
        let back = decode_task(&encode_task(&t)).unwrap();
        assert_eq!(back.id, t.id);
        assert_eq!(back.function, t.function);
        assert_eq!(back.args, t.args);
        assert_eq!(back.resources, t.resources);
        assert_eq!(back.extras.strategy, t.extras.strategy);
        assert_eq!(back.job, JobId(4));
        assert_eq!(back.extras.retry_on, t.extras.retry_on);
        assert_eq!(back.extras.contained, t.extras.contained);
        assert_eq!(back.extras.returns, 3);
        assert_eq!(back.extras.direct, Some(WorkerId(6)));
        assert_eq!(
            (back.max_retries, back.extras.retry_exceptions, back.attempt),
            (3, true, 1)
        );
        assert_eq!(back, t);
    }

    #[test]
    fn failure_chain_round_trips() {
        let root = TaskFailure {
            task: TaskId(1),
            attempt: 2,
            kind: FailureKind::Application(RemoteError::new("panic", "boom")),
        };
        let f = TaskFailure {
            task: TaskId(2),
            attempt: 0,
            kind: FailureKind::Upstream(root.into()),
        };
        let back = decode_failure(&encode_failure(&f)).unwrap();
        assert_eq!(back, f);
        assert_eq!(back.root().task, TaskId(1));
    }

    #[test]
    fn archive_paths_stay_inside() {
        for ok in ["run.sh", "./bin/run", "a/b/c.txt", "a/./b", "a//b"] {
            assert!(check_archive_path(ok).is_ok(), "{ok}");
        }
        for (bad, says) in [
            ("../x", "`..`"),
            ("a/../../x", "`..`"),
            ("a/..", "`..`"),
            ("/etc/passwd", "absolute"),
            ("", "names no file"),
            (".", "names no file"),
            ("./", "names no file"),
            ("a\0b", "NUL"),
        ] {
            let e = check_archive_path(bad).unwrap_err();
            assert!(e.0.contains(says), "{bad:?}: {e}");
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bytes in [&b"\xff\xff\xff\xff"[..], b"\x0a\xff\xff\xff\xff\x0f", b""] {
            let _ = decode_task(bytes);
            let _ = decode_failure(bytes);
        }
        assert!(decode_task(b"").is_err(), "a task needs a function name");
        assert!(decode_failure(b"").is_err(), "a failure needs a kind");
    }
}
