//! The state API (Ray's `ray.util.state`): what the scheduler knows of tasks, actors, objects,
//! workers, nodes and jobs, asked from a program, and what tasks, actors and nodes logged
//! ([`log`]). `starling list`, `starling summary`, `starling get`, `starling timeline` and
//! `starling logs` show the same from the command line.
//!
//! Every attempt of a task has a record ([`TaskEvent`]): its function, state
//! ([`TaskStatus`]: pending its arguments, pending a node, running, finished, failed), where it
//! ran, when it reached each state, and why it failed. A retried task has one record per
//! attempt. The scheduler keeps the latest records within a bound in bytes (the head's
//! `--task-events`, 16 MiB by default: about 170,000 attempts); older ones are dropped
//! and counted.
//!
//! Listings are consistent with what the caller has read: a task whose value it got is
//! listed as ended. What a cluster driver only sent (a `put`, a submit) reaches the head on
//! its session stream while a listing is a call of its own, so it may show up a moment later
//! (as in Ray, whose state API is eventually consistent).
//!
//! ```no_run
//! use starling::state::{self, ListOptions};
//! # fn main() -> anyhow::Result<()> {
//! let failed = state::list_tasks(&ListOptions::new().filter("state=FAILED")?.limit(100))?;
//! for t in &failed {
//!     println!("{} {} {}: {}", t.task, t.short_name(), t.error_type, t.error);
//! }
//! for c in state::summarize_tasks(&ListOptions::new())? {
//!     println!("{:40} {:24} {}", c.name, c.state, c.count);
//! }
//! # Ok(())
//! # }
//! ```

pub use starling_proto::state::{
    chrome_trace, Filter, LogSource, ObjectRecord, TaskCount, TaskEvent, TaskKind, TaskQuery,
    TaskStatus, WorkerRecord,
};

use starling_proto::jobs::LogFileRequest;

use crate::error::{Error, Result};
use crate::jobs::JobInfo;
use crate::runtime::{current_or_init, Runtime};
use crate::{ActorInfo, JobId, NodeId, NodeInfo, TaskId};

/// Which records to list: filters (all must pass), a limit, a job.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    query: TaskQuery,
}

impl ListOptions {
    /// Every record, of every job the caller may see.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a filter, `key=value` or `key!=value` (Ray's `("state", "=", "FAILED")`). Task
    /// fields: `task_id`, `attempt`, `job_id`, `name`, `type`, `state`, `parent_task_id`,
    /// `actor_id`, `node_id`, `worker_id`, `worker_pid`, `error_type` (objects' and workers'
    /// fields: see [`list_objects`], [`list_workers`]). An unknown field is an error when the
    /// list is asked for.
    pub fn filter(mut self, filter: &str) -> Result<Self> {
        let f = Filter::parse(filter).map_err(Error::InvalidArgument)?;
        self.query.filters.push(f);
        Ok(self)
    }

    /// At most `n` records: the newest (0: all).
    pub fn limit(mut self, n: u32) -> Self {
        self.query.limit = n;
        self
    }

    /// Only the records of `job`.
    pub fn job(mut self, job: JobId) -> Self {
        self.query.job = Some(job);
        self
    }
}

fn query(mut q: TaskQuery) -> Result<starling_proto::state::TaskList> {
    q.check().map_err(Error::InvalidArgument)?;
    let rt = current_or_init();
    if q.summary {
        q.limit = 0;
    }
    rt.list_tasks(q)
}

/// The task records that pass `options`, oldest first (Ray's `list_tasks`).
pub fn list_tasks(options: &ListOptions) -> Result<Vec<TaskEvent>> {
    Ok(query(options.query.clone())?.tasks)
}

/// How many task attempts of each function are in each state (Ray's `summarize_tasks`), of the
/// records that pass `options`.
pub fn summarize_tasks(options: &ListOptions) -> Result<Vec<TaskCount>> {
    let mut q = options.query.clone();
    q.summary = true;
    Ok(query(q)?.summary)
}

/// Every recorded attempt of `task`, first attempt first (empty: none is recorded; it was
/// never submitted, or its records were dropped).
pub fn get_task(task: TaskId) -> Result<Vec<TaskEvent>> {
    list_tasks(&ListOptions::new().filter(&format!("task_id={}", task.0))?)
}

/// The attempts that ran, as Chrome trace JSON (one process per node, one thread per worker,
/// one slice per attempt): load it in chrome://tracing or Perfetto. `job`: only its tasks.
pub fn timeline(job: Option<JobId>) -> Result<String> {
    let mut options = ListOptions::new();
    if let Some(job) = job {
        options = options.job(job);
    }
    let events = list_tasks(&options)?;
    Ok(chrome_trace(&events, starling_proto::state::now_us()))
}

/// The actors that pass `filters` (`key=value` / `key!=value` on `actor_id`, `class_name`,
/// `name`, `state`, `node_id`, `job_id`), oldest first (Ray's `list_actors`).
pub fn list_actors(filters: &[&str]) -> Result<Vec<ActorInfo>> {
    let filters = filters
        .iter()
        .map(|f| Filter::parse(f).map_err(Error::InvalidArgument))
        .collect::<Result<Vec<_>>>()?;
    let all = current_or_init().actor_statuses()?;
    let kept = starling_proto::status::ActorStatus::filter(all, &filters)
        .map_err(Error::InvalidArgument)?;
    Ok(kept.into_iter().map(Into::into).collect())
}

/// The objects the scheduler tracks that pass `options` (filters on `object_id`, `state`:
/// `PENDING`, `READY`, `FAILED`, `RELEASED`, and `node_id`), in id order, the newest `limit`
/// (Ray's `list_objects`).
pub fn list_objects(options: &ListOptions) -> Result<Vec<ObjectRecord>> {
    Ok(current_or_init()
        .list_state(options.query.clone(), false)?
        .objects)
}

/// The workers that pass `options` (filters on `worker_id`, `node_id`, `job_id`, `state`:
/// `IDLE`, `BUSY`, `BLOCKED`, `DRAINING`, `actor_id`, `pid`), in id order (Ray's
/// `list_workers`). In-process, a worker is an executor thread.
pub fn list_workers(options: &ListOptions) -> Result<Vec<WorkerRecord>> {
    Ok(current_or_init()
        .list_state(options.query.clone(), true)?
        .workers)
}

/// The nodes (Ray's `list_nodes`): as [`crate::nodes`].
pub fn list_nodes() -> Result<Vec<NodeInfo>> {
    crate::nodes()
}

/// The multi-node jobs of the cluster, oldest first (Ray's `list_jobs`; as
/// [`crate::jobs::JobClient::list_jobs`]). In-process there are none.
pub fn list_jobs() -> Result<Vec<JobInfo>> {
    current_or_init().list_jobs()
}

/// A log being read ([`log`]): each [`Log::read`] returns what was written since the one
/// before.
///
/// ```no_run
/// use starling::state::{self, LogSource};
/// # fn main() -> anyhow::Result<()> {
/// # let task = starling::TaskId(1);
/// let mut log = state::log(LogSource::Task(task))?;
/// // What the task printed so far; loop while `!log.ended()` to follow it.
/// print!("{}", String::from_utf8_lossy(&log.read()?));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Log {
    runtime: Runtime,
    address: String,
    node: NodeId,
    request: LogFileRequest,
    ended: bool,
}

impl Log {
    /// Everything written since the last read, up to the end of what is written now (empty:
    /// nothing new). Lines are tagged with the task and stream that printed them
    /// (`[T42] out|text`, `[-] err|text` outside tasks), as in `starling logs`.
    pub fn read(&mut self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        while !self.ended {
            let chunk = self.runtime.read_log(&self.address, self.request)?;
            let moved = chunk.offset != self.request.offset;
            self.request.offset = chunk.offset;
            self.ended = chunk.ended;
            out.extend_from_slice(&chunk.data);
            // Caught up with the writer, or enough for one answer.
            if !moved || out.len() >= starling_proto::limits::CHUNK {
                break;
            }
        }
        Ok(out)
    }

    /// Whether the writer is done (the process exited) and everything was read. A node
    /// agent's log never ends while the node is up.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The node whose file this is.
    pub fn node(&self) -> NodeId {
        self.node
    }

    /// The worker process's id (0: the node agent's own log).
    pub fn pid(&self) -> u32 {
        self.request.pid
    }
}

/// Opens what `source` logged (Ray's `get_log`): a task's lines of its worker process's log,
/// an actor's process's whole log, or a node agent's own, read from the node's object service
/// wherever the node runs. In-process there are no log files ([`Error::NoLog`]): tasks print to
/// the program's own output.
pub fn log(source: LogSource) -> Result<Log> {
    let runtime = current_or_init();
    let (node, request) = source.locate(get_task, Error::NoLog)?;
    let address = crate::nodes()?
        .into_iter()
        .find(|n| n.id == node)
        .map(|n| n.address)
        .ok_or_else(|| Error::NoLog(format!("node {node} is not in the cluster (any more)")))?;
    Ok(Log {
        runtime,
        address,
        node,
        request,
        ended: false,
    })
}
