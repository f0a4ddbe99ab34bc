//! The state API's protobuf forms (task records, their queries and summaries).

use super::wire;
use crate::pb;
use crate::state::{
    Filter, ObjectRecord, StateList, TaskCount, TaskEvent, TaskKind, TaskList, TaskQuery,
    TaskStatus, WorkerRecord,
};
use crate::wire::DecodeError;
use crate::{JobId, NodeId, ObjectId, TaskId, WorkerId};

wire!(TaskQuery => pb::TaskQuery);
wire!(try TaskList => pb::TaskList);
wire!(StateList => pb::StateList);

fn status_code(s: TaskStatus) -> u32 {
    TaskStatus::ALL.iter().position(|x| *x == s).unwrap_or(0) as u32
}

fn status_of(code: u32) -> Result<TaskStatus, DecodeError> {
    TaskStatus::ALL
        .get(code as usize)
        .copied()
        .ok_or_else(|| DecodeError(format!("unknown task state {code}")))
}

fn kind_code(k: TaskKind) -> u32 {
    match k {
        TaskKind::Normal => 0,
        TaskKind::ActorCreation => 1,
        TaskKind::ActorCall => 2,
    }
}

fn kind_of(code: u32) -> Result<TaskKind, DecodeError> {
    match code {
        0 => Ok(TaskKind::Normal),
        1 => Ok(TaskKind::ActorCreation),
        2 => Ok(TaskKind::ActorCall),
        _ => Err(DecodeError(format!("unknown task kind {code}"))),
    }
}

fn id(v: u64) -> Option<u64> {
    (v != 0).then_some(v)
}

impl From<TaskQuery> for pb::TaskQuery {
    fn from(q: TaskQuery) -> Self {
        pb::TaskQuery {
            job: q.job.map_or(0, |j| j.0),
            filters: q
                .filters
                .into_iter()
                .map(|f| pb::TaskFilter {
                    key: f.key,
                    equal: f.equal,
                    value: f.value,
                })
                .collect(),
            limit: q.limit,
            summary: q.summary,
        }
    }
}

impl From<pb::TaskQuery> for TaskQuery {
    fn from(q: pb::TaskQuery) -> Self {
        TaskQuery {
            job: id(q.job).map(JobId),
            filters: q
                .filters
                .into_iter()
                .map(|f| Filter {
                    key: f.key,
                    equal: f.equal,
                    value: f.value,
                })
                .collect(),
            limit: q.limit,
            summary: q.summary,
        }
    }
}

impl From<TaskEvent> for pb::TaskEvent {
    fn from(e: TaskEvent) -> Self {
        pb::TaskEvent {
            task: e.task.0,
            attempt: e.attempt,
            job: e.job.0,
            name: e.name,
            kind: kind_code(e.kind),
            state: status_code(e.state),
            parent: e.parent.map_or(0, |t| t.0),
            actor: e.actor.map_or(0, |t| t.0),
            node: e.node.map_or(0, |n| n.0),
            worker: e.worker.map_or(0, |w| w.0),
            submitted_us: e.submitted_us,
            ready_us: e.ready_us,
            started_us: e.started_us,
            ended_us: e.ended_us,
            error_type: e.error_type,
            error: e.error,
            backtrace: e.backtrace,
            pid: e.pid,
        }
    }
}

impl TryFrom<pb::TaskEvent> for TaskEvent {
    type Error = DecodeError;

    fn try_from(e: pb::TaskEvent) -> Result<Self, DecodeError> {
        Ok(TaskEvent {
            task: TaskId(e.task),
            attempt: e.attempt,
            job: JobId(e.job),
            name: e.name,
            kind: kind_of(e.kind)?,
            state: status_of(e.state)?,
            parent: id(e.parent).map(TaskId),
            actor: id(e.actor).map(TaskId),
            node: id(e.node).map(NodeId),
            worker: id(e.worker).map(WorkerId),
            submitted_us: e.submitted_us,
            ready_us: e.ready_us,
            started_us: e.started_us,
            ended_us: e.ended_us,
            error_type: e.error_type,
            error: e.error,
            backtrace: e.backtrace,
            pid: e.pid,
        })
    }
}

impl From<TaskList> for pb::TaskList {
    fn from(l: TaskList) -> Self {
        pb::TaskList {
            tasks: l.tasks.into_iter().map(Into::into).collect(),
            total: l.total,
            dropped: l.dropped,
            summary: l
                .summary
                .into_iter()
                .map(|c| pb::TaskCount {
                    name: c.name,
                    state: status_code(c.state),
                    count: c.count,
                })
                .collect(),
        }
    }
}

impl TryFrom<pb::TaskList> for TaskList {
    type Error = DecodeError;

    fn try_from(l: pb::TaskList) -> Result<Self, DecodeError> {
        Ok(TaskList {
            tasks: super::try_all(l.tasks)?,
            total: l.total,
            dropped: l.dropped,
            summary: l
                .summary
                .into_iter()
                .map(|c| {
                    Ok(TaskCount {
                        name: c.name,
                        state: status_of(c.state)?,
                        count: c.count,
                    })
                })
                .collect::<Result<_, DecodeError>>()?,
        })
    }
}

impl From<StateList> for pb::StateList {
    fn from(l: StateList) -> Self {
        pb::StateList {
            objects: l
                .objects
                .into_iter()
                .map(|o| pb::ObjectRecord {
                    object: o.object.0,
                    state: o.state,
                    node: o.node.map_or(0, |n| n.0),
                    size: o.size,
                    handles: o.handles,
                    task_refs: o.task_refs,
                    nested_in: o.nested_in,
                })
                .collect(),
            workers: l
                .workers
                .into_iter()
                .map(|w| pb::WorkerRecord {
                    worker: w.worker.0,
                    node: w.node.0,
                    job: w.job.0,
                    state: w.state,
                    tasks: w.tasks,
                    actor: w.actor.map_or(0, |a| a.0),
                    pid: w.pid,
                })
                .collect(),
            total: l.total,
        }
    }
}

impl From<pb::StateList> for StateList {
    fn from(l: pb::StateList) -> Self {
        StateList {
            objects: l
                .objects
                .into_iter()
                .map(|o| ObjectRecord {
                    object: ObjectId(o.object),
                    state: o.state,
                    node: id(o.node).map(NodeId),
                    size: o.size,
                    handles: o.handles,
                    task_refs: o.task_refs,
                    nested_in: o.nested_in,
                })
                .collect(),
            workers: l
                .workers
                .into_iter()
                .map(|w| WorkerRecord {
                    worker: WorkerId(w.worker),
                    node: NodeId(w.node),
                    job: JobId(w.job),
                    state: w.state,
                    tasks: w.tasks,
                    actor: id(w.actor).map(TaskId),
                    pid: w.pid,
                })
                .collect(),
            total: l.total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::Wire;

    #[test]
    fn a_task_list_survives_the_wire() {
        let list = TaskList {
            tasks: vec![TaskEvent {
                task: TaskId(7),
                attempt: 1,
                job: JobId(2),
                name: "app::f#01".into(),
                kind: TaskKind::ActorCall,
                state: TaskStatus::Failed,
                actor: Some(TaskId(3)),
                node: Some(NodeId(1)),
                worker: Some(WorkerId(4)),
                pid: 4242,
                submitted_us: 10,
                ended_us: 20,
                error_type: "panic".into(),
                error: "boom".into(),
                ..Default::default()
            }],
            total: 1,
            dropped: 5,
            summary: vec![TaskCount {
                name: "app::f".into(),
                state: TaskStatus::Running,
                count: 3,
            }],
        };
        assert_eq!(
            TaskList::from_bytes(&list.clone().to_bytes()).unwrap(),
            list
        );
        let q = TaskQuery {
            job: Some(JobId(3)),
            filters: vec![Filter::parse("state!=FAILED").unwrap()],
            limit: 10,
            summary: true,
        };
        assert_eq!(TaskQuery::from_bytes(&q.clone().to_bytes()).unwrap(), q);
        let objects = StateList {
            objects: vec![ObjectRecord {
                object: ObjectId(9),
                state: "READY".into(),
                node: Some(NodeId(2)),
                size: 100,
                handles: 1,
                task_refs: 2,
                nested_in: 0,
            }],
            workers: vec![WorkerRecord {
                worker: WorkerId(3),
                node: NodeId(1),
                job: JobId(4),
                state: "BUSY".into(),
                tasks: 2,
                actor: Some(TaskId(5)),
                pid: 77,
            }],
            total: 2,
        };
        assert_eq!(
            StateList::from_bytes(&objects.clone().to_bytes()).unwrap(),
            objects
        );
        let mut bad = pb::TaskList::from(list);
        bad.tasks[0].state = 99;
        assert!(TaskList::from_pb(bad).is_err());
    }
}
