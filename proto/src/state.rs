//! The state API's vocabulary (Ray's `ray list tasks` / `ray summary tasks`): one record per
//! attempt of a task as the scheduler saw it, the queries that select them, and the counts a
//! summary gives.
//!
//! A record is made when a task is submitted (and again for every retry, reconstruction or
//! restart: one record per attempt) and changes as the task moves through
//! [`TaskStatus`]'s states, each change stamped with the time it happened. The scheduler keeps
//! the latest records of each job in a ring bounded in bytes; older ones are dropped first and
//! counted ([`TaskList::dropped`]).

use std::fmt;

use crate::{JobId, NodeId, TaskId, WorkerId};

/// Now, in microseconds since the Unix epoch: the clock task events are stamped with (the
/// scheduler reads none of its own; the head and the in-process engine give it this one).
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Where a task attempt is (Ray's task states).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskStatus {
    /// Waiting for its arguments to be made.
    #[default]
    PendingArgsAvail,
    /// Ready: waiting for a node with room and a worker.
    PendingNodeAssignment,
    /// Handed to a worker, running (or about to).
    Running,
    /// Ended with its values stored.
    Finished,
    /// Ended without values: an error, a lost worker, cancelled, or its argument failed. A
    /// failed attempt that is retried is followed by a record of the next attempt.
    Failed,
}

impl TaskStatus {
    /// Every state, in order.
    pub const ALL: [TaskStatus; 5] = [
        TaskStatus::PendingArgsAvail,
        TaskStatus::PendingNodeAssignment,
        TaskStatus::Running,
        TaskStatus::Finished,
        TaskStatus::Failed,
    ];

    /// Its name as Ray spells it (`PENDING_ARGS_AVAIL`, `RUNNING`, `FINISHED`, ..).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::PendingArgsAvail => "PENDING_ARGS_AVAIL",
            TaskStatus::PendingNodeAssignment => "PENDING_NODE_ASSIGNMENT",
            TaskStatus::Running => "RUNNING",
            TaskStatus::Finished => "FINISHED",
            TaskStatus::Failed => "FAILED",
        }
    }

    /// The state named `s` (as [`as_str`](Self::as_str) spells it, any case).
    pub fn parse(s: &str) -> Option<TaskStatus> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(s))
    }

    /// Whether the attempt has ended.
    pub fn is_done(self) -> bool {
        matches!(self, TaskStatus::Finished | TaskStatus::Failed)
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a task is (Ray's task types).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum TaskKind {
    /// A call of a remote function.
    #[default]
    Normal,
    /// An actor's constructor.
    ActorCreation,
    /// A call of an actor's method.
    ActorCall,
}

impl TaskKind {
    /// Its name as Ray spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskKind::Normal => "NORMAL_TASK",
            TaskKind::ActorCreation => "ACTOR_CREATION_TASK",
            TaskKind::ActorCall => "ACTOR_TASK",
        }
    }
}

/// One attempt of a task, as the scheduler saw it. Times are microseconds since the Unix
/// epoch; 0: not reached.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskEvent {
    pub task: TaskId,
    /// 0 for the first run; each retry, reconstruction or actor restart is another attempt.
    pub attempt: u32,
    pub job: JobId,
    /// The function (`module::name`, or `module::Type::method` for an actor's).
    pub name: String,
    pub kind: TaskKind,
    pub state: TaskStatus,
    /// The task that submitted it, if one did.
    pub parent: Option<TaskId>,
    /// Its actor (for an actor's constructor or call).
    pub actor: Option<TaskId>,
    /// Where it ran (once handed to a worker).
    pub node: Option<NodeId>,
    pub worker: Option<WorkerId>,
    pub submitted_us: u64,
    /// When its arguments were ready (it waited for a node from then on).
    pub ready_us: u64,
    /// When it was handed to a worker.
    pub started_us: u64,
    /// When it finished or failed.
    pub ended_us: u64,
    /// For a failed attempt: the error's type (the Rust type of an application error,
    /// `panic`, or Starling's kind: `WorkerDied`, `Cancelled`, `ActorDied`, ..).
    pub error_type: String,
    /// Its message.
    pub error: String,
    /// Where an application error happened, if a backtrace was captured.
    pub backtrace: String,
    /// Its worker's process id (0: not handed to a worker yet, or an executor thread of an
    /// in-process runtime): with `node` and `job`, where its output is (`starling logs`).
    pub pid: u32,
}

impl TaskEvent {
    /// The function's name without its signature hash (`module::name`).
    pub fn short_name(&self) -> &str {
        short_name(&self.name)
    }

    /// How long it ran (handed to a worker until it ended), if it ended after it started.
    pub fn run_us(&self) -> Option<u64> {
        (self.started_us > 0 && self.ended_us >= self.started_us)
            .then(|| self.ended_us - self.started_us)
    }

    /// The value of field `key` as text, for filters (`None`: no such field). Ids are their
    /// numbers; an unset id or time is empty.
    pub fn field(&self, key: &str) -> Option<String> {
        let id = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
        Some(match key {
            "task_id" | "task" | "id" => self.task.0.to_string(),
            "attempt" | "attempt_number" => self.attempt.to_string(),
            "job_id" | "job" => self.job.0.to_string(),
            "name" | "func_name" | "function" => self.short_name().to_string(),
            "type" | "kind" => self.kind.as_str().to_string(),
            "state" => self.state.as_str().to_string(),
            "parent_task_id" | "parent" => id(self.parent.map(|t| t.0)),
            "actor_id" | "actor" => id(self.actor.map(|t| t.0)),
            "node_id" | "node" => id(self.node.map(|n| n.0)),
            "worker_id" | "worker" => id(self.worker.map(|w| w.0)),
            "worker_pid" | "pid" => id((self.pid != 0).then_some(u64::from(self.pid))),
            "error_type" => self.error_type.clone(),
            _ => return None,
        })
    }
}

impl TaskEvent {
    /// The record as one JSON object (Ray's field names: `task_id`, `attempt_number`, `state`,
    /// `name`, `type`, `job_id`, `node_id`, `worker_id`, `worker_pid`, `actor_id`,
    /// `parent_task_id`, times in microseconds since the Unix epoch, `error_type`,
    /// `error_message`, `backtrace`).
    pub fn to_json(&self) -> String {
        let id = |prefix: &str, v: Option<u64>| match v {
            Some(v) => json_string(&format!("{prefix}{v}")),
            None => "null".to_string(),
        };
        format!(
            "{{\"task_id\":{},\"attempt_number\":{},\"name\":{},\"func_name\":{},\"type\":{},\
             \"state\":{},\"job_id\":{},\"node_id\":{},\"worker_id\":{},\"worker_pid\":{},\
             \"actor_id\":{},\"parent_task_id\":{},\"submitted_us\":{},\"ready_us\":{},\"started_us\":{},\
             \"ended_us\":{},\"error_type\":{},\"error_message\":{},\"backtrace\":{}}}",
            json_string(&self.task.to_string()),
            self.attempt,
            json_string(self.short_name()),
            json_string(&self.name),
            json_string(self.kind.as_str()),
            json_string(self.state.as_str()),
            json_string(&self.job.to_string()),
            id("N", self.node.map(|n| n.0)),
            id("W", self.worker.map(|w| w.0)),
            self.pid,
            id("T", self.actor.map(|a| a.0)),
            id("T", self.parent.map(|p| p.0)),
            self.submitted_us,
            self.ready_us,
            self.started_us,
            self.ended_us,
            json_string(&self.error_type),
            json_string(&self.error),
            json_string(&self.backtrace),
        )
    }
}

/// JSON values (each already encoded) as one JSON array.
pub fn json_array(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    format!("[{}]", items.join(","))
}

/// `s` as a JSON string literal.
pub fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The attempts that ran, as Chrome trace events (the JSON chrome://tracing and Perfetto
/// load): one process per node, one thread per worker process, one complete slice per attempt
/// from when it was handed to its worker until it ended (or `now_us`, if it still runs), named
/// by its function, with its id, attempt and state as arguments.
pub fn chrome_trace(events: &[TaskEvent], now_us: u64) -> String {
    let mut out = String::from("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
    let mut first = true;
    let mut push = |out: &mut String, item: String| {
        if !first {
            out.push(',');
        }
        first = false;
        out.push('\n');
        out.push_str(&item);
    };
    let mut named: std::collections::BTreeSet<(u64, u64)> = Default::default();
    for e in events {
        let (Some(node), Some(worker)) = (e.node, e.worker) else {
            continue;
        };
        if e.started_us == 0 {
            continue;
        }
        let end = if e.ended_us >= e.started_us {
            e.ended_us
        } else if e.state == TaskStatus::Running {
            now_us.max(e.started_us)
        } else {
            continue;
        };
        if named.insert((node.0, 0)) {
            let name = json_string(&format!("node {node}"));
            push(
                &mut out,
                format!(
                    "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"name\":{name}}}}}",
                    node.0
                ),
            );
        }
        if named.insert((node.0, worker.0)) {
            let name = match e.pid {
                0 => json_string(&format!("worker {worker}")),
                pid => json_string(&format!("worker {worker} (pid {pid})")),
            };
            push(
                &mut out,
                format!(
                    "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{\"name\":{name}}}}}",
                    node.0, worker.0
                ),
            );
        }
        push(
            &mut out,
            format!(
                "{{\"name\":{},\"cat\":{},\"ph\":\"X\",\"ts\":{},\"dur\":{},\"pid\":{},\"tid\":{},\
                 \"args\":{{\"task_id\":{},\"attempt\":{},\"state\":{},\"error_type\":{}}}}}",
                json_string(e.short_name()),
                json_string(e.kind.as_str()),
                e.started_us,
                end - e.started_us,
                node.0,
                worker.0,
                json_string(&e.task.to_string()),
                e.attempt,
                json_string(e.state.as_str()),
                json_string(&e.error_type),
            ),
        );
    }
    out.push_str("\n]}\n");
    out
}

/// The function's name without its signature hash (`module::name#0123..` → `module::name`).
pub fn short_name(name: &str) -> &str {
    name.split_once('#').map_or(name, |(n, _)| n)
}

/// The fields a task filter may name.
pub const TASK_FILTER_KEYS: &[&str] = &[
    "task_id",
    "attempt",
    "job_id",
    "name",
    "type",
    "state",
    "parent_task_id",
    "actor_id",
    "node_id",
    "worker_id",
    "error_type",
];

/// One condition of a listing: `key=value` or `key!=value` (Ray's `--filter`). Values compare
/// as text, case-insensitively for states and types; an id is its number, with or without its
/// letter (`T42` or `42`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    pub key: String,
    /// `=` (true) or `!=` (false).
    pub equal: bool,
    pub value: String,
}

impl Filter {
    /// Parses `key=value` or `key!=value`.
    pub fn parse(s: &str) -> Result<Filter, String> {
        let (key, equal, value) = if let Some((k, v)) = s.split_once("!=") {
            (k, false, v)
        } else if let Some((k, v)) = s.split_once('=') {
            (k, true, v)
        } else {
            return Err(format!(
                "a filter is `key=value` or `key!=value`, not `{s}`"
            ));
        };
        let key = key.trim();
        if key.is_empty() {
            return Err(format!("a filter needs a key: `{s}`"));
        }
        Ok(Filter {
            key: key.to_string(),
            equal,
            value: value.trim().to_string(),
        })
    }

    /// Whether `actual` (a field's text) passes.
    pub fn accepts(&self, actual: &str) -> bool {
        let want = self.value.as_str();
        // An id may be written with its letter.
        let want = if self.key.ends_with("_id") || self.key == "task" || self.key == "id" {
            want.trim_start_matches(|c: char| c.is_ascii_alphabetic())
        } else {
            want
        };
        let same = actual.eq_ignore_ascii_case(want);
        same == self.equal
    }
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = if self.equal { "=" } else { "!=" };
        write!(f, "{}{op}{}", self.key, self.value)
    }
}

/// Which task records to list.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskQuery {
    /// Only this job's (a job's own credential can ask for no other).
    pub job: Option<JobId>,
    /// All must pass.
    pub filters: Vec<Filter>,
    /// At most this many records, the newest (0: no limit).
    pub limit: u32,
    /// Counts by function and state instead of records.
    pub summary: bool,
}

impl TaskQuery {
    /// Checks the filters' keys: an unknown one is an error naming the known ones.
    pub fn check(&self) -> Result<(), String> {
        for f in &self.filters {
            if TaskEvent::default().field(&f.key).is_none() {
                return Err(format!(
                    "unknown task field `{}` in filter `{f}`; known: {}",
                    f.key,
                    TASK_FILTER_KEYS.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// Whether `event` passes every filter.
    pub fn accepts(&self, event: &TaskEvent) -> bool {
        self.job.is_none_or(|j| j == event.job)
            && self
                .filters
                .iter()
                .all(|f| event.field(&f.key).is_some_and(|actual| f.accepts(&actual)))
    }
}

/// How many task attempts of one function are in one state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskCount {
    /// The function (without its signature hash).
    pub name: String,
    pub state: TaskStatus,
    pub count: u64,
}

/// The answer to a [`TaskQuery`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskList {
    /// The matching records, oldest first (the newest `limit` of them).
    pub tasks: Vec<TaskEvent>,
    /// How many records matched (more than `tasks` holds when the limit cut).
    pub total: u64,
    /// Records dropped to keep the store within its bound (of the jobs asked about).
    pub dropped: u64,
    /// For a summary: counts by function and state, by function then state.
    pub summary: Vec<TaskCount>,
}

/// One object the scheduler tracks (Ray's `ray list objects`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectRecord {
    pub object: crate::ObjectId,
    /// `PENDING` (its task has not finished), `READY`, `FAILED` or `RELEASED` (its value is
    /// gone; its task can make it again).
    pub state: String,
    /// Where its value is (READY only).
    pub node: Option<NodeId>,
    /// Its encoded size in bytes (READY only).
    pub size: u64,
    /// Handles held by drivers and workers, tasks that take it as an argument, and stored
    /// values that hold a ref to it: while any is above zero it stays.
    pub handles: u32,
    pub task_refs: u32,
    pub nested_in: u32,
}

impl ObjectRecord {
    /// The value of field `key` as text, for filters.
    pub fn field(&self, key: &str) -> Option<String> {
        Some(match key {
            "object_id" | "id" => self.object.0.to_string(),
            "state" => self.state.clone(),
            "node_id" | "node" => self.node.map(|n| n.0.to_string()).unwrap_or_default(),
            _ => return None,
        })
    }

    /// As one JSON object.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"object_id\":{},\"state\":{},\"node_id\":{},\"size_bytes\":{},\
             \"handles\":{},\"task_refs\":{},\"nested_in\":{}}}",
            json_string(&self.object.to_string()),
            json_string(&self.state),
            self.node
                .map_or("null".into(), |n| json_string(&n.to_string())),
            self.size,
            self.handles,
            self.task_refs,
            self.nested_in
        )
    }
}

/// One worker (a worker process of a node; in-process, an executor thread).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerRecord {
    pub worker: WorkerId,
    pub node: NodeId,
    /// The job whose tasks it runs.
    pub job: JobId,
    /// `IDLE`, `BUSY`, `BLOCKED` (its tasks wait in `get`, its CPUs lent) or `DRAINING` (its
    /// connection is gone; it is being removed).
    pub state: String,
    /// Tasks handed to it and not finished.
    pub tasks: u32,
    /// The actor it belongs to, if any.
    pub actor: Option<TaskId>,
    /// Its process id (0: unknown, or a thread).
    pub pid: u32,
}

impl WorkerRecord {
    /// The value of field `key` as text, for filters.
    pub fn field(&self, key: &str) -> Option<String> {
        Some(match key {
            "worker_id" | "id" => self.worker.0.to_string(),
            "node_id" | "node" => self.node.0.to_string(),
            "job_id" | "job" => self.job.0.to_string(),
            "state" => self.state.clone(),
            "actor_id" | "actor" => self.actor.map(|a| a.0.to_string()).unwrap_or_default(),
            "pid" => self.pid.to_string(),
            _ => return None,
        })
    }

    /// As one JSON object.
    pub fn to_json(&self) -> String {
        format!(
            "{{\"worker_id\":{},\"node_id\":{},\"job_id\":{},\"state\":{},\"tasks\":{},\
             \"actor_id\":{},\"pid\":{}}}",
            json_string(&self.worker.to_string()),
            json_string(&self.node.to_string()),
            json_string(&self.job.to_string()),
            json_string(&self.state),
            self.tasks,
            self.actor
                .map_or("null".into(), |a| json_string(&a.to_string())),
            self.pid
        )
    }
}

/// Keeps the rows that pass every filter (by `field`), the newest `limit` of them (0: all);
/// an unknown field is an error naming `what`. Returns them and how many passed.
pub fn select<T>(
    rows: Vec<T>,
    filters: &[Filter],
    limit: u32,
    what: &str,
    field: impl Fn(&T, &str) -> Option<String>,
    blank: &T,
) -> Result<(Vec<T>, u64), String> {
    if let Some(f) = filters.iter().find(|f| field(blank, &f.key).is_none()) {
        return Err(format!("unknown {what} field `{}` in filter `{f}`", f.key));
    }
    let mut kept: Vec<T> = rows
        .into_iter()
        .filter(|r| {
            filters
                .iter()
                .all(|f| field(r, &f.key).is_some_and(|v| f.accepts(&v)))
        })
        .collect();
    let total = kept.len() as u64;
    if limit > 0 && kept.len() > limit as usize {
        kept.drain(..kept.len() - limit as usize);
    }
    Ok((kept, total))
}

/// The answer to a listing of objects or workers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StateList {
    pub objects: Vec<ObjectRecord>,
    pub workers: Vec<WorkerRecord>,
    /// How many passed the filters (more than listed when the limit cut).
    pub total: u64,
}

impl StateList {
    /// The `objects` (or, `of_workers`, the `workers`) that pass `q`'s filters, the newest
    /// `q.limit`; an unknown field is an error naming the kind. With no rows, it checks the
    /// filters alone.
    pub fn select(
        objects: Vec<ObjectRecord>,
        workers: Vec<WorkerRecord>,
        q: &TaskQuery,
        of_workers: bool,
    ) -> Result<StateList, String> {
        if of_workers {
            let blank = WorkerRecord::default();
            let (workers, total) = select(
                workers,
                &q.filters,
                q.limit,
                "worker",
                WorkerRecord::field,
                &blank,
            )?;
            Ok(StateList {
                workers,
                total,
                ..Default::default()
            })
        } else {
            let blank = ObjectRecord::default();
            let (objects, total) = select(
                objects,
                &q.filters,
                q.limit,
                "object",
                ObjectRecord::field,
                &blank,
            )?;
            Ok(StateList {
                objects,
                total,
                ..Default::default()
            })
        }
    }
}

/// Whose output to read (Ray's `get_log(task_id= | actor_id= | node_id=)`, `starling logs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogSource {
    /// What a task printed while it ran: its latest attempt that reached a worker process.
    Task(TaskId),
    /// Everything an actor's process printed: its latest incarnation (an actor's id is its
    /// creation task's).
    Actor(TaskId),
    /// The node agent's own log: worker processes started and ended, limits reached, errors.
    Node(NodeId),
}

impl LogSource {
    /// The task whose records say where the output is (`None`: a node's log needs none).
    pub fn task(self) -> Option<TaskId> {
        match self {
            LogSource::Task(t) | LogSource::Actor(t) => Some(t),
            LogSource::Node(_) => None,
        }
    }

    /// Where the output is ([`LogSource::place`]), asking `records` for every record of a task
    /// (as a `task_id=` listing gives them): the source's, and for an actor's call its actor's.
    /// `no_log` makes the caller's error of why there is no log to read.
    pub fn locate<E>(
        self,
        mut records: impl FnMut(TaskId) -> Result<Vec<TaskEvent>, E>,
        no_log: impl FnOnce(String) -> E,
    ) -> Result<(NodeId, crate::jobs::LogFileRequest), E> {
        let (recs, actor_job) = match self.task() {
            Some(t) => {
                let recs = records(t)?;
                let actor_job = match recs.last().and_then(|r| r.actor) {
                    Some(a) if a != t => records(a)?.first().map(|r| r.job),
                    _ => None,
                };
                (recs, actor_job)
            }
            None => (Vec::new(), None),
        };
        self.place(&recs, actor_job).map_err(no_log)
    }

    /// Where the output is: which node's file, and the read that asks for it. `records` are
    /// every record of [`LogSource::task`], oldest first; for an actor's call, `actor_job` is
    /// the job of the actor's own records (the job its process runs: a call may come from
    /// another job's driver).
    pub fn place(
        self,
        records: &[TaskEvent],
        actor_job: Option<JobId>,
    ) -> Result<(NodeId, crate::jobs::LogFileRequest), String> {
        let task = match self {
            LogSource::Node(node) => {
                return Ok((node, crate::jobs::LogFileRequest::default()));
            }
            LogSource::Task(t) | LogSource::Actor(t) => t,
        };
        let what = match self {
            LogSource::Actor(_) => format!("actor {task}"),
            _ => format!("task {task}"),
        };
        if records.is_empty() {
            return Err(format!(
                "no record of {what}: it was never submitted, or its records were dropped"
            ));
        }
        if let LogSource::Actor(_) = self {
            if records.iter().all(|r| r.kind != TaskKind::ActorCreation) {
                return Err(format!(
                    "{task} is a task, not an actor: ask for the task's log"
                ));
            }
        }
        let Some(ran) = records.iter().rev().find(|r| r.pid != 0) else {
            return Err(if records.iter().any(|r| r.node.is_some()) {
                format!(
                    "{what} ran in-process (or on a head that did not record its process): what it \
                     printed went to the program's own output"
                )
            } else {
                format!("{what} has not started on a worker process yet")
            });
        };
        let node = ran
            .node
            .ok_or_else(|| format!("{what} names a process but no node"))?;
        let job = match ran.kind {
            TaskKind::ActorCall => actor_job.unwrap_or(ran.job),
            _ => ran.job,
        };
        // A task's own lines of its process's file; an actor's whole file.
        let filter = match self {
            LogSource::Task(t) => t.0,
            _ => 0,
        };
        Ok((
            node,
            crate::jobs::LogFileRequest {
                job: job.0,
                pid: ran.pid,
                offset: 0,
                task: filter,
            },
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> TaskEvent {
        TaskEvent {
            task: TaskId(42),
            name: "app::square#00ff".into(),
            state: TaskStatus::Failed,
            node: Some(NodeId(2)),
            error_type: "panic".into(),
            ..Default::default()
        }
    }

    #[test]
    fn filters_match_fields_as_text() {
        let q = |f: &[&str]| TaskQuery {
            filters: f.iter().map(|f| Filter::parse(f).unwrap()).collect(),
            ..Default::default()
        };
        let e = event();
        assert!(q(&["state=failed", "name=app::square"]).accepts(&e));
        assert!(q(&["task_id=T42", "node_id=2"]).accepts(&e));
        assert!(q(&["state!=FINISHED", "worker_id="]).accepts(&e));
        assert!(!q(&["state=RUNNING"]).accepts(&e));
        assert!(!q(&["error_type!=panic"]).accepts(&e));
        assert!(q(&["colour=red"]).check().is_err());
        assert!(Filter::parse("state").is_err());
        assert!(Filter::parse("=x").is_err());
    }

    #[test]
    fn states_round_trip_their_names() {
        for s in TaskStatus::ALL {
            assert_eq!(TaskStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(TaskStatus::parse("running"), Some(TaskStatus::Running));
        assert_eq!(TaskStatus::parse("DONE"), None);
    }

    #[test]
    fn a_log_is_found_from_the_records() {
        let ran = |attempt, node: Option<u64>, pid| TaskEvent {
            task: TaskId(9),
            attempt,
            job: JobId(2),
            node: node.map(NodeId),
            pid,
            ..Default::default()
        };
        // The latest attempt that reached a process; the task's own lines of its file.
        let (node, r) = LogSource::Task(TaskId(9))
            .place(
                &[ran(0, Some(1), 100), ran(1, Some(3), 300), ran(2, None, 0)],
                None,
            )
            .unwrap();
        assert_eq!(
            (node, r.job, r.pid, r.task, r.offset),
            (NodeId(3), 2, 300, 9, 0)
        );
        let err = |s: LogSource, recs: &[TaskEvent]| s.place(recs, None).unwrap_err();
        assert!(err(LogSource::Task(TaskId(9)), &[]).contains("no record"));
        assert!(err(LogSource::Task(TaskId(9)), &[ran(0, None, 0)]).contains("not started"));
        assert!(err(LogSource::Task(TaskId(9)), &[ran(0, Some(1), 0)]).contains("in-process"));
        assert!(err(LogSource::Actor(TaskId(9)), &[ran(0, Some(1), 5)]).contains("not an actor"));

        // An actor: its whole file; a call of it: the file of the actor's job.
        let mut create = ran(0, Some(1), 77);
        create.kind = TaskKind::ActorCreation;
        let (_, r) = LogSource::Actor(TaskId(9)).place(&[create], None).unwrap();
        assert_eq!((r.pid, r.task), (77, 0));
        let mut call = ran(0, Some(1), 77);
        call.kind = TaskKind::ActorCall;
        call.job = JobId(5);
        let (_, r) = LogSource::Task(TaskId(9))
            .place(&[call], Some(JobId(2)))
            .unwrap();
        assert_eq!((r.job, r.pid, r.task), (2, 77, 9));
        let (node, r) = LogSource::Node(NodeId(4)).place(&[], None).unwrap();
        assert_eq!((node, r.pid), (NodeId(4), 0));
    }
}
