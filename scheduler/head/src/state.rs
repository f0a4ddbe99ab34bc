//! The head's state: the scheduler core plus who is connected, and the transport that turns the
//! scheduler's requests into outgoing batches.
//!
//! # Invariants
//! - Every handle a client holds is counted in its `handles`, so when the client disconnects
//!   exactly its handles are released.
//! - A value is in `values` (inline, at the head) or `locations` (on a node) only while the
//!   scheduler's directory has the object; `free_object` removes both.
//! - Outgoing ops are queued per peer while the lock is held and sent after one batch of incoming
//!   ops, so peers receive batches, never single messages.
//! - A peer receives its batches in the order they were queued: batches to streams (worker
//!   processes, remote drivers, node agents) are put on their channels under the lock (a
//!   non-blocking push), so two threads' batches never cross; only a local driver's, delivered by
//!   a call into its client, go after the lock is released.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use starling_proto::id_table::IdTable;
use starling_proto::link::LinkWriter;
use starling_proto::node::{
    HeadToNodeBatch, HeadToNodeOp, NodeHello, NodeOp, StartWorkers, StoreUsage,
};
use starling_proto::session::{
    ClientOp, HeadBatch, HeadOp, Hello, ObjectLocation, ObjectValue, Outcome, ResolvedArg,
    Returned, RunTask, Value, Welcome,
};
use starling_proto::status::{NodeStatus, StatusReply};
use starling_proto::{
    EnvId, FailureKind, JobId, NodeId, ObjectId, ResourceSet, TaskArg, TaskEnv, TaskFailure,
    TaskId, TaskSpec, WorkerId,
};
use tokio::sync::mpsc::UnboundedSender;
use tonic::Status;

use super::jobs::{self, JobFiles, Launcher};
use super::values::Held;
use starling_proto::jobs::{JobInfo, JobSpec, PoolSpec};
use starling_scheduler::jobs::{describe_exit, JobNodeOp, JobTransport, Jobs, Now, PoolActions};
use starling_scheduler::reactor;
use starling_scheduler::{Core, Pool, TaskOutcome, Transport};

/// How many of the tasks no node can hold the status lists by name.
const INFEASIBLE_SHOWN: usize = 5;

/// Objects `put` by drivers live at the head, which is not a scheduler node.
pub(crate) const HEAD_NODE: NodeId = NodeId(0);

/// Where a session's outgoing batches go: the channel of a gRPC stream, or, for a client in the
/// head's own process, a function that takes them on the spot (no thread hop). Called after the
/// head's lock is released.
#[derive(Clone)]
pub enum ClientTx {
    /// A gRPC session's outgoing stream.
    Stream(UnboundedSender<Result<HeadBatch, Status>>),
    /// A client in this process.
    Direct(Arc<dyn Fn(HeadBatch) + Send + Sync>),
    /// A worker process on this host, over the session link (`crate::link`): batches are
    /// queued under the lock and written once it is released.
    Link(Arc<LinkWriter<HeadBatch>>),
}

impl ClientTx {
    fn send(&self, batch: HeadBatch) {
        match self {
            ClientTx::Stream(tx) => {
                let _ = tx.send(Ok(batch));
            }
            ClientTx::Direct(f) => f(batch),
            ClientTx::Link(w) => w.send(batch),
        }
    }
}
pub(crate) type NodeTx = UnboundedSender<Result<HeadToNodeBatch, Status>>;

pub(crate) struct ClientConn {
    tx: ClientTx,
    out: Vec<HeadOp>,
    pub job: JobId,
    pub worker: Option<WorkerId>,
    pub node: NodeId,
    /// The process id it reported (0 for drivers that did not).
    pub pid: u32,
    handles: IdTable<ObjectId, u32>,
    /// Something was queued for it since the last [`Outbox::tell_quiet_sessions`].
    spoken: bool,
}

impl ClientConn {
    /// The session holds one more ref group for `object`.
    pub(crate) fn add_handle(&mut self, object: ObjectId) {
        *self.handles.get_or_insert_with(object, || 0) += 1;
    }
}

/// The sessions an object's value is sent to when it settles: nearly always one (its
/// submitter), kept inline, so a queued task costs no allocation for it.
pub(crate) enum Subscribers {
    One(u64),
    Many(Vec<u64>),
}

impl Default for Subscribers {
    fn default() -> Self {
        Subscribers::Many(Vec::new())
    }
}

impl Subscribers {
    pub(crate) fn push(&mut self, session: u64) {
        match self {
            Subscribers::Many(v) if v.is_empty() => *self = Subscribers::One(session),
            Subscribers::Many(v) => v.push(session),
            Subscribers::One(first) => *self = Subscribers::Many(vec![*first, session]),
        }
    }

    pub(crate) fn remove(&mut self, session: u64) {
        match self {
            Subscribers::One(s) if *s == session => *self = Subscribers::Many(Vec::new()),
            Subscribers::One(_) => {}
            Subscribers::Many(v) => v.retain(|s| *s != session),
        }
    }

    pub(crate) fn sessions(&self) -> &[u64] {
        match self {
            Subscribers::One(s) => std::slice::from_ref(s),
            Subscribers::Many(v) => v,
        }
    }
}

pub(crate) struct NodeConn {
    tx: NodeTx,
    out: Vec<HeadToNodeOp>,
    pub address: String,
    pub store_dir: String,
    pub pool: String,
    pub last_seen: Instant,
    pub usage: StoreUsage,
}

/// What the head keeps for a job whose driver is connected.
pub(crate) struct DriverJob {
    pub build: String,
    /// The environment its tasks run in unless they say otherwise: a multi-node job's
    /// `env_vars` (as Ray's job-level `runtime_env`), empty for any other driver.
    pub env: TaskEnv,
}

/// Everything the scheduler's requests touch outside the scheduler.
#[derive(Default)]
pub(crate) struct Outbox {
    pub clients: HashMap<u64, ClientConn>,
    pub worker_client: HashMap<WorkerId, u64>,
    pub nodes: HashMap<NodeId, NodeConn>,
    pub jobs: HashMap<JobId, DriverJob>,
    /// Small values and driver puts, held at the head (in memory up to a budget).
    pub values: super::values::HeadValues,
    /// Large task results: the node that stores each, and its size.
    pub locations: IdTable<ObjectId, (NodeId, u64)>,
    pub failures: HashMap<ObjectId, Arc<TaskFailure>>,
    /// The last task failure of each job with a driver (see [`Transport::task_failed`]).
    pub last_failure: HashMap<JobId, Arc<TaskFailure>>,
    pub subscribers: IdTable<ObjectId, Subscribers>,
    /// Where the job table's writes go (`None`: a table in memory only).
    pub job_files: Option<JobFiles>,
    dirty_clients: Vec<u64>,
    dirty_nodes: Vec<NodeId>,
}

impl Outbox {
    pub(crate) fn queue_client(&mut self, client: u64, op: HeadOp) {
        if let Some(c) = self.clients.get_mut(&client) {
            if c.out.is_empty() {
                self.dirty_clients.push(client);
            }
            c.out.push(op);
            c.spoken = true;
        }
    }

    /// Queues `alive` for every session that was sent nothing since the last call, so no live
    /// session is silent for more than twice the period of the calls
    /// ([`security::ALIVE_EVERY`](starling_proto::security::ALIVE_EVERY)).
    pub(crate) fn tell_quiet_sessions(&mut self) {
        let quiet: Vec<u64> = self
            .clients
            .iter_mut()
            .filter_map(|(id, c)| (!std::mem::take(&mut c.spoken)).then_some(*id))
            .collect();
        for id in quiet {
            self.queue_client(id, HeadOp::Alive);
        }
    }

    pub(crate) fn queue_node(&mut self, node: NodeId, op: HeadToNodeOp) {
        if let Some(n) = self.nodes.get_mut(&node) {
            if n.out.is_empty() {
                self.dirty_nodes.push(node);
            }
            n.out.push(op);
        }
    }

    fn location(&self, object: ObjectId) -> Option<ObjectLocation> {
        let (node, size) = *self.locations.get(&object)?;
        let n = self.nodes.get(&node)?;
        Some(ObjectLocation {
            node,
            address: n.address.clone(),
            path: format!("{}/{}", n.store_dir, object.0),
            size,
            object,
        })
    }

    /// The settled value of `object` as a message, if it has settled.
    fn value_of(&self, object: ObjectId) -> Option<ObjectValue> {
        let value = if let Some(held) = self.values.get(&object) {
            match held {
                Held::Memory(v) => Value::Inline(v.to_vec()),
                // On the head's disk: the driver fetches it from the head.
                Held::Spilled(size) => Value::Location(head_location(object, size)),
            }
        } else if let Some(f) = self.failures.get(&object) {
            Value::Failure((**f).clone())
        } else {
            Value::Location(self.location(object)?)
        };
        Some(ObjectValue { object, value })
    }

    /// The node, job and process id of `worker`'s process, while its session is open.
    pub(crate) fn process_of(&self, worker: WorkerId) -> Option<(NodeId, JobId, u32)> {
        let c = self.clients.get(self.worker_client.get(&worker)?)?;
        Some((c.node, c.job, c.pid))
    }

    fn notify(&mut self, object: ObjectId) {
        let Some(subs) = self.subscribers.remove(&object) else {
            return;
        };
        if let Some(v) = self.value_of(object) {
            for c in subs.sessions() {
                self.queue_client(*c, HeadOp::Value(v.clone()));
            }
        }
    }

    /// Sends every queued batch to a stream now (the lock is held: batches of two threads
    /// never cross on one peer's channel, so an actor's calls reach its worker in order), and
    /// takes those of local drivers, to be delivered once the lock is released.
    pub fn flush(&mut self) -> Outgoing {
        let mut out = Outgoing::default();
        for id in std::mem::take(&mut self.dirty_clients) {
            if let Some(c) = self.clients.get_mut(&id) {
                let ops = std::mem::take(&mut c.out);
                if ops.is_empty() {
                    continue;
                }
                match &c.tx {
                    ClientTx::Stream(_) => {
                        for ops in split_by_size(ops) {
                            c.tx.send(HeadBatch { ops });
                        }
                    }
                    ClientTx::Direct(_) => out.clients.push((c.tx.clone(), split_by_size(ops))),
                    // Queued in order under the lock, written after it by the first thread
                    // that finds the link idle.
                    ClientTx::Link(w) => {
                        let mut drain = false;
                        for ops in split_by_size(ops) {
                            drain |= w.queue(HeadBatch { ops });
                        }
                        if drain {
                            out.links.push(w.clone());
                        }
                    }
                }
            }
        }
        for id in std::mem::take(&mut self.dirty_nodes) {
            if let Some(n) = self.nodes.get_mut(&id) {
                let ops = std::mem::take(&mut n.out);
                if !ops.is_empty() {
                    let _ = n.tx.send(Ok(HeadToNodeBatch { ops }));
                }
            }
        }
        out
    }
}

/// Batches for local drivers, taken from the outbox under the lock and delivered after it is
/// released: delivering runs the driver's client, which must never run under the head's lock.
#[derive(Default)]
#[must_use = "queued batches are lost unless sent"]
pub(crate) struct Outgoing {
    clients: Vec<(ClientTx, Vec<Vec<HeadOp>>)>,
    /// Links with batches queued that this thread must write.
    links: Vec<Arc<LinkWriter<HeadBatch>>>,
}

impl Outgoing {
    pub fn send(self) {
        for w in self.links {
            w.drain();
        }
        for (tx, batches) in self.clients {
            for ops in batches {
                tx.send(HeadBatch { ops });
            }
        }
    }
}

/// Where a value the head holds is fetched from: the head itself (node 0, no address).
fn head_location(object: ObjectId, size: u64) -> ObjectLocation {
    ObjectLocation {
        node: HEAD_NODE,
        address: String::new(),
        path: String::new(),
        size,
        object,
    }
}

/// Splits ops into batches of at most `MAX_BATCH_BYTES` (a single larger op gets its own).
fn split_by_size(ops: Vec<HeadOp>) -> Vec<Vec<HeadOp>> {
    starling_proto::limits::split_by_size(ops, HeadOp::wire_size)
}

impl Transport for Outbox {
    fn dispatch(
        &mut self,
        _node: NodeId,
        worker: WorkerId,
        task: &Arc<TaskSpec>,
        gpu_ids: &[Arc<str>],
    ) {
        let Some(&client) = self.worker_client.get(&worker) else {
            return;
        };
        let args = task
            .args
            .iter()
            .map(|a| match a {
                TaskArg::Inline(b) => ResolvedArg::Inline(b.clone()),
                TaskArg::Object(o) => match self.values.get(o) {
                    // A large value the head holds (a remote driver's `put`) is fetched by
                    // the worker, once per process, instead of riding along every task;
                    // so is one on the head's disk.
                    Some(Held::Memory(v)) if v.len() > super::INLINE_LIMIT => {
                        ResolvedArg::Location(head_location(*o, v.len() as u64))
                    }
                    Some(Held::Spilled(size)) => ResolvedArg::Location(head_location(*o, size)),
                    Some(Held::Memory(v)) => ResolvedArg::Inline(v.to_vec()),
                    None => match self.location(*o) {
                        Some(l) => ResolvedArg::Location(l),
                        // Not settled yet: the scheduler pipelined this task behind the one
                        // that makes it, on this same worker (or its node vanished, which the
                        // worker reports as a lost object).
                        None => ResolvedArg::Local(*o),
                    },
                },
            })
            .collect();
        let run = RunTask {
            spec: (**task).clone(),
            args,
            gpu_ids: gpu_ids.iter().map(|id| id.to_string()).collect(),
        };
        self.queue_client(client, HeadOp::Run(run));
    }

    fn object_failed(&mut self, object: ObjectId, failure: &Arc<TaskFailure>) {
        self.failures.insert(object, failure.clone());
        self.notify(object);
    }

    fn object_ready(&mut self, object: ObjectId, _node: NodeId) {
        self.notify(object);
    }

    fn free_object(&mut self, object: ObjectId, node: Option<NodeId>) {
        self.values.remove(&object);
        self.failures.remove(&object);
        self.subscribers.remove(&object);
        if let Some((at, _)) = self.locations.remove(&object) {
            let _ = node;
            self.queue_node(at, HeadToNodeOp::FreeObject(object));
        }
    }

    fn request_worker(&mut self, node: NodeId, job: JobId, env: &TaskEnv) {
        let Some(build) = self.jobs.get(&job).map(|j| j.build.clone()) else {
            return;
        };
        let start = StartWorkers {
            job,
            build,
            count: 1,
            env: env.clone(),
        };
        self.queue_node(node, HeadToNodeOp::StartWorkers(start));
    }

    fn cancel_running(&mut self, worker: WorkerId, task: TaskId, force: bool) {
        let Some(&client) = self.worker_client.get(&worker) else {
            return;
        };
        self.queue_client(client, HeadOp::Cancel(task));
        if force {
            // Its node kills the process; the scheduler already let the worker go.
            if let Some((node, job, pid)) = self.process_of(worker) {
                self.queue_node(node, HeadToNodeOp::KillWorker { job, pid });
            }
        }
    }

    fn kill_worker(&mut self, worker: WorkerId) {
        if let Some((node, job, pid)) = self.process_of(worker) {
            self.queue_node(node, HeadToNodeOp::KillWorker { job, pid });
        }
    }

    fn keep_worker(&mut self, worker: WorkerId) {
        if let Some((node, job, pid)) = self.process_of(worker) {
            self.queue_node(node, HeadToNodeOp::KeepWorker { job, pid });
        }
    }

    fn task_infeasible(&mut self, task: &TaskSpec, reason: &str) {
        // The session that submitted it (its number is in the task's id) warns its user.
        let client = starling_proto::session_of(task.id.0);
        self.queue_client(
            client,
            HeadOp::Infeasible {
                task: task.id,
                reason: reason.to_string(),
            },
        );
    }

    fn task_failed(&mut self, job: JobId, failure: &Arc<TaskFailure>) {
        if self.jobs.contains_key(&job) {
            self.last_failure.insert(job, failure.clone());
        }
    }
}

impl Outbox {
    /// `job` has no driver any more: forget what was kept for it (its build, its last task
    /// failure). Not `JobTransport::remove_job`, which deletes a multi-node job's records.
    pub(crate) fn forget_driver(&mut self, job: JobId) {
        self.jobs.remove(&job);
        self.last_failure.remove(&job);
    }
}

/// The job table's effects: node ops are queued like the scheduler's; its writes go, in order,
/// to the file thread (never performed under the lock).
impl JobTransport for Outbox {
    fn to_node(&mut self, node: NodeId, op: JobNodeOp) {
        let kind = match op {
            JobNodeOp::Instance(i) => HeadToNodeOp::JobInstance(*i),
            JobNodeOp::StartWorkers { job, count } => {
                let Some(j) = self.jobs.get(&job) else {
                    return;
                };
                HeadToNodeOp::StartWorkers(StartWorkers {
                    job,
                    build: j.build.clone(),
                    count,
                    env: j.env.clone(),
                })
            }
            JobNodeOp::Stop(id) => HeadToNodeOp::StopJob(JobId(id)),
        };
        self.queue_node(node, kind);
    }

    fn persist_job(&mut self, info: &JobInfo) {
        if let Some(f) = &self.job_files {
            f.write_job(info);
        }
    }

    fn persist_pool(&mut self, spec: &PoolSpec) {
        if let Some(f) = &self.job_files {
            f.write_pool(spec);
        }
    }

    fn remove_pool(&mut self, name: &str) {
        if let Some(f) = &self.job_files {
            f.remove_pool(name);
        }
    }

    fn remove_job(&mut self, id: u64) {
        if let Some(f) = &self.job_files {
            f.remove_job(id);
        }
    }

    fn job_result(&mut self, id: u64, value: Vec<u8>) {
        if let Some(f) = &self.job_files {
            f.write_result(id, value);
        }
    }

    fn has_driver(&self, job: JobId) -> bool {
        self.jobs.contains_key(&job)
    }

    fn task_env(&self, job: JobId) -> EnvId {
        self.jobs.get(&job).map_or(EnvId::NONE, |j| j.env.id())
    }

    fn last_task_failure(&self, job: JobId) -> Option<String> {
        self.last_failure.get(&job).map(|f| f.root().to_string())
    }

    fn job_finished(&mut self, job: JobId) {
        self.forget_driver(job);
    }
}

/// The time as the job table's handlers take it.
pub(crate) fn now() -> Now {
    Now {
        at: Instant::now(),
        unix_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    }
}

pub(crate) struct State {
    pub core: Core,
    pub out: Outbox,
    pub jobs: Jobs,
    /// Worker processes whose session ended while they ran tasks, by node and pid: their tasks
    /// are retried (or failed) once the node reports how the process ended, or after
    /// [`EXIT_REPORT_WAIT`].
    dying: HashMap<(NodeId, u32), (WorkerId, Instant, String)>,
    /// Exits nodes reported before the worker's session was seen to end (the two race).
    exits: HashMap<(NodeId, u32), (i32, Instant)>,
    /// Set when the head starts shutting down: from then on it takes no session, node or batch
    /// and changes nothing, so the job table it leaves on disk is the one it had when asked to
    /// stop (its running jobs are "head restarted" at the next start, not failed by the
    /// shutdown's own disconnects).
    stopping: bool,
    /// The job of every session this head opened, by session number (the top bits of the ids
    /// it made): an id belongs to its session's job, and a session reaches only its own job's.
    session_jobs: HashMap<u64, JobId>,
    next_worker: u64,
    next_node: u64,
    next_job: u64,
    /// This start of the head (random, never 0): store files carry it and readers refuse files
    /// of another (`Welcome::epoch`), even where a data dir was lost and ids repeat.
    pub epoch: u64,
    /// When quiet sessions were last told the head is alive.
    last_alive: Instant,
    /// The items of running streaming tasks, on their way to their submitters.
    pub streams: super::streams::Streams,
}

impl State {
    /// The job of every session this head opened, by session number.
    pub(crate) fn session_jobs(&self) -> &HashMap<u64, JobId> {
        &self.session_jobs
    }
}

/// A random non-zero epoch for a head that starts now.
fn new_epoch() -> u64 {
    let mut epoch = starling_proto::security::random_bytes()
        .map(u64::from_le_bytes)
        .unwrap_or(0);
    if epoch == 0 {
        // No random source: the clock and the pid differ between starts all the same.
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        epoch = (now.as_nanos() as u64) ^ (u64::from(std::process::id()) << 48) | 1;
    }
    epoch
}

/// The head's shared state.
pub(crate) struct Head {
    pub state: Mutex<State>,
    pub bin_dir: PathBuf,
    pub heartbeat_timeout: Duration,
    pub launcher: Option<std::sync::Arc<dyn Launcher>>,
    /// Numbers for new sessions (outside the state lock: reserving them writes a file).
    pub sessions: super::numbers::SessionNumbers,
    /// Backpressure on drivers past the limit of live tasks.
    pub room: super::room::Room,
}

impl Head {
    /// A head whose job table is `table` (its files, and the jobs and pools they held; `None`:
    /// a table kept in memory only, for tests).
    pub fn new(
        bin_dir: PathBuf,
        table: Option<(JobFiles, Vec<JobInfo>, Vec<PoolSpec>)>,
        heartbeat_timeout: Duration,
        pipeline_depth: usize,
        launcher: Option<std::sync::Arc<dyn Launcher>>,
    ) -> Self {
        let mut core = Core::new();
        core.set_clock(starling_proto::state::now_us);
        core.set_pipeline_depth(pipeline_depth);
        // Objects on nodes can be lost with their node; lineage makes them again.
        core.set_lineage(true);
        let mut out = Outbox::default();
        let mut jobs = Jobs::new();
        let mut last_job = 0;
        if let Some((files, infos, pools)) = table {
            out.job_files = Some(files);
            last_job = jobs.restore(&mut out, infos, pools, now());
        }
        Head {
            state: Mutex::new(State {
                core,
                out,
                jobs,
                dying: HashMap::new(),
                exits: HashMap::new(),
                stopping: false,
                session_jobs: HashMap::new(),
                next_worker: 1,
                next_node: 1,
                next_job: last_job + 1,
                epoch: new_epoch(),
                last_alive: Instant::now(),
                streams: Default::default(),
            }),
            bin_dir,
            heartbeat_timeout,
            launcher,
            sessions: super::numbers::SessionNumbers::in_memory(),
            room: super::room::Room::new(super::room::DEFAULT_MAX_LIVE_TASKS),
        }
    }

    /// Takes every queued batch (to send after the lock), noting the live task count first so
    /// backpressure follows every change of state.
    fn take_outgoing(&self, st: &mut State) -> Outgoing {
        self.room.update(st.core.live_tasks());
        st.out.flush()
    }

    /// Periodic job and pool work; starts and stops launched nodes after the lock.
    pub fn jobs_tick(&self) {
        let mut g = self.state.lock();
        let st = &mut *g;
        if st.stopping {
            return;
        }
        let late: Vec<(NodeId, u32)> = st
            .dying
            .iter()
            .filter(|(_, (_, since, _))| since.elapsed() >= EXIT_REPORT_WAIT)
            .map(|(k, _)| *k)
            .collect();
        for k in late {
            if let Some((w, _, why)) = st.dying.remove(&k) {
                reactor::on_worker_removed(&mut st.core, &mut st.out, w, &why);
            }
        }
        st.exits
            .retain(|_, (_, at)| at.elapsed() < EXIT_REPORT_WAIT * 10);
        if st.last_alive.elapsed() >= starling_proto::security::ALIVE_EVERY {
            st.last_alive = Instant::now();
            st.out.tell_quiet_sessions();
            // Streams of tasks that ended without a report (cancelled, failed with their node).
            let core = &st.core;
            st.streams.prune(|t| core.task_state(t).is_some());
        }
        let actions = st.jobs.tick(&mut st.out, &mut st.core, now());
        reactor::schedule(&mut st.core, &mut st.out);
        let out = self.take_outgoing(st);
        let head = st.jobs.head_addr.clone();
        drop(g);
        out.send();
        self.perform(&head, actions);
    }

    pub fn perform(&self, head: &str, actions: PoolActions) {
        let Some(launcher) = &self.launcher else {
            return;
        };
        for pid in actions.stop {
            launcher.stop(pid);
        }
        for spec in actions.launch {
            match launcher.launch(head, &spec) {
                Ok(pid) => self.state.lock().jobs.on_launched(&spec.name, pid, now()),
                Err(e) => eprintln!(
                    "starling head: cannot start a node for pool {}: {e}",
                    spec.name
                ),
            }
        }
    }

    /// Submits a multi-node job.
    pub fn submit_job(&self, spec: JobSpec) -> Result<JobInfo, Status> {
        // Reads the payload's archive: before the lock.
        super::jobs::check_payload(&spec, &self.bin_dir)?;
        let info = {
            let mut g = self.state.lock();
            let st = &mut *g;
            if st.stopping {
                return Err(shutting_down());
            }
            let id = st.next_job;
            let info = st
                .jobs
                .submit(&mut st.out, id, spec, now())
                .map_err(jobs::status_of)?;
            st.next_job += 1;
            info
        };
        // Start it now if its nodes are free (no wait for the next tick).
        self.jobs_tick();
        Ok(self.state.lock().jobs.info(info.id).unwrap_or(info))
    }

    pub fn cancel_job(&self, id: u64) -> Result<JobInfo, Status> {
        let mut g = self.state.lock();
        let st = &mut *g;
        if st.stopping {
            return Err(shutting_down());
        }
        let info = st
            .jobs
            .cancel(&mut st.out, &mut st.core, id, now())
            .map_err(jobs::status_of)?;
        reactor::schedule(&mut st.core, &mut st.out);
        let out = self.take_outgoing(st);
        drop(g);
        out.send();
        Ok(info)
    }

    /// Keeps at most `budget` bytes of values in memory; the rest go to files in `dir`.
    pub fn set_value_budget(&self, budget: u64, dir: std::path::PathBuf) {
        let values =
            super::values::HeadValues::with_budget(budget, dir, super::files::Files::start());
        self.state.lock().out.values = values;
    }

    /// Registers a driver or worker process from its `Hello`.
    pub fn open_session(&self, hello: &Hello, tx: ClientTx) -> Result<u64, Status> {
        check_version(hello.version)?;
        let client = self.sessions.next()?;
        let mut g = self.state.lock();
        let st = &mut *g;
        if st.stopping {
            return Err(shutting_down());
        }
        let mut welcome = Welcome {
            client,
            job: JobId(0),
            id_base: client << starling_proto::SESSION_SHIFT,
            worker: 0,
            epoch: st.epoch,
        };
        let conn = |job, worker, node| ClientConn {
            tx,
            out: Vec::new(),
            job,
            worker,
            node,
            pid: hello.pid,
            handles: IdTable::new(),
            spoken: true,
        };
        if hello.is_worker {
            let (node, job) = (hello.node, hello.job);
            if !st.out.nodes.contains_key(&node) {
                return Err(Status::failed_precondition(format!(
                    "worker process {} names node {node}, which is not registered",
                    hello.pid
                )));
            }
            let worker = WorkerId(st.next_worker);
            st.next_worker += 1;
            st.out.clients.insert(client, conn(job, Some(worker), node));
            st.session_jobs.insert(client, job);
            st.out.worker_client.insert(worker, client);
            let pool = Pool {
                job,
                env: hello.env,
            };
            reactor::on_pool_worker_added(&mut st.core, node, pool, worker);
            st.core.set_worker_pid(worker, hello.pid);
            welcome.job = job;
            welcome.worker = worker.0;
        } else {
            // The entrypoint of a running multi-node job joins that job; any other driver is a
            // job of its own on the shared nodes.
            let pool_job = hello.job;
            let (job, only) = if pool_job.0 != 0 && st.jobs.is_running(pool_job) {
                (pool_job, st.jobs.nodes_of(pool_job))
            } else if pool_job.0 != 0 {
                return Err(Status::failed_precondition(format!(
                    "job {} is not running (a job's processes connect only while it runs)",
                    hello.job
                )));
            } else {
                let job = JobId(st.next_job);
                st.next_job += 1;
                (job, None)
            };
            let first_driver = !st.out.jobs.contains_key(&job);
            // A multi-node job's variables are its tasks' environment too, but for Starling's
            // own, which node agents set in every process they start.
            let env = st.jobs.info(job.0).map_or_else(TaskEnv::default, |j| {
                TaskEnv::new(
                    j.spec
                        .env
                        .into_iter()
                        .filter(|(k, _)| !k.starts_with(starling_proto::RESERVED_ENV_PREFIX)),
                )
            });
            st.out.jobs.insert(
                job,
                DriverJob {
                    build: hello.build.clone(),
                    env: env.clone(),
                },
            );
            st.out.clients.insert(client, conn(job, None, HEAD_NODE));
            st.session_jobs.insert(client, job);
            welcome.job = job;
            // Start one worker per CPU of every node the job may use, so its first tasks do not
            // wait for process start-up one by one.
            let starts: Vec<(NodeId, u32)> = st
                .core
                .nodes()
                .iter()
                .filter(|n| n.alive && first_driver)
                .filter(|n| match &only {
                    Some(nodes) => nodes.contains(&n.id),
                    None => st.out.nodes.get(&n.id).is_some_and(|c| c.pool.is_empty()),
                })
                .map(|n| (n.id, (n.total.get("CPU").ceil() as u32).max(1)))
                .collect();
            for (node, count) in starts {
                let pool = Pool { job, env: env.id() };
                reactor::on_workers_requested(&mut st.core, node, pool, count as usize);
                let start = StartWorkers {
                    job,
                    build: hello.build.clone(),
                    count,
                    env: env.clone(),
                };
                st.out.queue_node(node, HeadToNodeOp::StartWorkers(start));
            }
        }
        // The welcome goes out first, before any task the scheduling pass may hand this worker.
        st.out.queue_client(client, HeadOp::Welcome(welcome));
        reactor::schedule(&mut st.core, &mut st.out);
        let out = self.take_outgoing(st);
        drop(g);
        out.send();
        Ok(client)
    }

    /// Applies one batch from a client.
    ///
    /// `Ok(true)`: the client is a driver that submitted while the head is past its limit of
    /// live tasks; its next batch must wait for room (`Room`).
    pub fn client_batch(&self, client: u64, ops: Vec<ClientOp>) -> Result<bool, Status> {
        self.client_batch_then(client, ops, |_| ())
            .map(|(full, ())| full)
    }

    /// Applies `spec`, an actor call that `client` (a driver in this process) would also send
    /// straight to the worker `spec.extras.direct`; returns whether the driver is over its
    /// limit of live tasks and whether the head took the call as sent straight (`false`: it
    /// takes the queue's way, and the driver must not send it: the actor is dead, or no longer
    /// on that worker).
    pub fn submit_direct(&self, client: u64, spec: TaskSpec) -> Result<(bool, bool), Status> {
        let task = spec.id;
        self.client_batch_then(client, vec![ClientOp::Submit(spec)], |st| {
            st.core
                .task_spec(task)
                .is_some_and(|s| s.extras.direct.is_some())
        })
    }

    /// [`client_batch`](Self::client_batch), also returning what `then` reads of the state
    /// after the ops were applied (under the same lock).
    fn client_batch_then<R>(
        &self,
        client: u64,
        ops: Vec<ClientOp>,
        then: impl FnOnce(&State) -> R,
    ) -> Result<(bool, R), Status> {
        let submits = ops.iter().any(|op| matches!(op, ClientOp::Submit(_)));
        let mut g = self.state.lock();
        let st = &mut *g;
        if st.stopping {
            return Ok((false, then(st)));
        }
        let driver = st
            .out
            .clients
            .get(&client)
            .is_some_and(|c| c.worker.is_none());
        let mut result = Ok(());
        for op in ops {
            if let Err(e) = apply_client_op(st, client, op) {
                result = Err(e);
                break;
            }
        }
        reactor::schedule(&mut st.core, &mut st.out);
        let read = then(st);
        let out = self.take_outgoing(st);
        drop(g);
        out.send();
        result.map(|()| (submits && driver && self.room.is_full(), read))
    }

    /// A client's stream ended: release what it held; a worker's running task is lost.
    pub fn close_session(&self, client: u64, why: &str) {
        let mut g = self.state.lock();
        let st = &mut *g;
        if st.stopping {
            return;
        }
        let Some(conn) = st.out.clients.remove(&client) else {
            return;
        };
        if let Some(w) = conn.worker {
            st.out.worker_client.remove(&w);
            let why = format!(
                "worker process {} on node {} ended: {why}",
                conn.pid, conn.node
            );
            if let Some((code, _)) = st.exits.remove(&(conn.node, conn.pid)) {
                let why = format!(
                    "worker process {} on node {} {}",
                    conn.pid,
                    conn.node,
                    describe_exit(code)
                );
                reactor::on_worker_removed(&mut st.core, &mut st.out, w, &why);
            } else if st.core.worker_tasks(w) > 0 && st.out.nodes.contains_key(&conn.node) {
                // Its node tells how it ended (exit code, signal) in a moment; the tasks it ran
                // are retried or failed with that. Meanwhile it takes nothing more.
                reactor::on_worker_draining(&mut st.core, w);
                st.dying
                    .insert((conn.node, conn.pid), (w, Instant::now(), why));
            } else {
                reactor::on_worker_removed(&mut st.core, &mut st.out, w, &why);
            }
        } else if st.jobs.nodes_of(conn.job).is_none() {
            // A driver's job is its session: when it goes (Ctrl-C, a crash, a lost link), its
            // tasks go with it, queued or running, and so do its pending worker requests.
            reactor::on_job_ended(&mut st.core, &mut st.out, conn.job);
            // A detached actor of the job outlives it: its restarts need the job's binary.
            if !st.core.has_live_detached_actors(conn.job) {
                st.out.forget_driver(conn.job);
            }
            let nodes: Vec<NodeId> = st.out.nodes.keys().copied().collect();
            for n in nodes {
                st.out.queue_node(n, HeadToNodeOp::StopJob(conn.job));
            }
        }
        for (object, n) in conn.handles {
            for _ in 0..n {
                reactor::on_release(&mut st.core, &mut st.out, object);
            }
        }
        reactor::schedule(&mut st.core, &mut st.out);
        let out = self.take_outgoing(st);
        drop(g);
        out.send();
    }

    /// Registers a node agent from its `NodeHello`.
    pub fn open_node(&self, hello: &NodeHello, tx: NodeTx) -> Result<NodeId, Status> {
        check_version(hello.version)?;
        // They become `CUDA_VISIBLE_DEVICES` in the node's workers.
        starling_proto::check_gpu_ids(&hello.gpu_ids).map_err(Status::invalid_argument)?;
        let mut g = self.state.lock();
        let st = &mut *g;
        if st.stopping {
            return Err(shutting_down());
        }
        let node = match hello.previous_id {
            // A node rejoining (after a head restart) keeps its id while no one else has it;
            // later nodes are numbered past it so no two ever share one.
            Some(p) if p.0 != 0 && !st.out.nodes.contains_key(&p) => {
                st.next_node = st.next_node.max(p.0 + 1);
                p
            }
            _ => {
                let n = NodeId(st.next_node);
                st.next_node += 1;
                n
            }
        };
        let resources: ResourceSet = hello.resources.clone();
        st.out.nodes.insert(
            node,
            NodeConn {
                tx,
                out: Vec::new(),
                address: hello.object_address.clone(),
                store_dir: hello.store_dir.clone(),
                pool: hello.pool.clone(),
                last_seen: Instant::now(),
                usage: StoreUsage::default(),
            },
        );
        reactor::on_node_added_with_gpus(&mut st.core, node, resources.clone(), &hello.gpu_ids);
        st.jobs
            .on_node_added(&mut st.core, node, &hello.pool, hello.pid, now());
        st.out.queue_node(node, HeadToNodeOp::NodeId(node));
        // Running drivers get workers on a new shared node too (a pool's nodes wait for a job).
        let cpus = (resources.get("CPU").ceil() as u32).max(1);
        let jobs: Vec<(JobId, String, TaskEnv)> = if hello.pool.is_empty() {
            st.out
                .jobs
                .iter()
                .filter(|(j, _)| st.jobs.nodes_of(**j).is_none())
                .map(|(j, info)| (*j, info.build.clone(), info.env.clone()))
                .collect()
        } else {
            Vec::new()
        };
        for (job, build, env) in jobs {
            let pool = Pool { job, env: env.id() };
            reactor::on_workers_requested(&mut st.core, node, pool, cpus as usize);
            let start = StartWorkers {
                job,
                build,
                count: cpus,
                env,
            };
            st.out.queue_node(node, HeadToNodeOp::StartWorkers(start));
        }
        reactor::schedule(&mut st.core, &mut st.out);
        let out = self.take_outgoing(st);
        drop(g);
        out.send();
        Ok(node)
    }

    pub fn node_batch(&self, node: NodeId, ops: Vec<NodeOp>) {
        let mut g = self.state.lock();
        let st = &mut *g;
        if st.stopping {
            return;
        }
        let mut logs: Vec<(PathBuf, Vec<u8>)> = Vec::new();
        // Heartbeats, usage and logs change nothing the scheduler sees.
        let mut changed = false;
        for op in ops {
            let Some(conn) = st.out.nodes.get_mut(&node) else {
                break;
            };
            conn.last_seen = Instant::now();
            match op {
                NodeOp::Usage(u) => conn.usage = u,
                NodeOp::Heartbeat | NodeOp::Hello(_) => {}
                NodeOp::WorkerExit(e) => {
                    match st.dying.remove(&(node, e.pid)) {
                        Some((w, _, _)) => {
                            let why = format!(
                                "worker process {} on node {node} {}",
                                e.pid,
                                describe_exit(e.code)
                            );
                            reactor::on_worker_removed(&mut st.core, &mut st.out, w, &why);
                            changed = true;
                        }
                        // Its session has not ended yet here: keep the exit for when it does.
                        None => {
                            st.exits.insert((node, e.pid), (e.code, Instant::now()));
                        }
                    }
                }
                NodeOp::JobLog(l) => {
                    let path = st
                        .jobs
                        .on_log(l.job.0, node, &l.data)
                        .and_then(|k| Some(st.out.job_files.as_ref()?.log_path(l.job.0, k)));
                    if let Some(path) = path {
                        match logs.last_mut() {
                            Some((p, data)) if *p == path => data.extend_from_slice(&l.data),
                            _ => logs.push((path, l.data)),
                        }
                    }
                }
                // Only instance 0 runs the entrypoint.
                NodeOp::EntrypointExit(e) if st.jobs.instance_of(e.job.0, node) == Some(0) => {
                    changed = true;
                    st.jobs.on_entrypoint_exit(
                        &mut st.out,
                        &mut st.core,
                        e.job.0,
                        e.code,
                        &e.error,
                        now(),
                    );
                }
                NodeOp::EntrypointExit(_) => {}
                NodeOp::JobStopped(job) => {
                    changed = true;
                    st.jobs
                        .on_job_stopped(&mut st.out, &mut st.core, job.0, node, now());
                }
            }
        }
        if changed {
            reactor::schedule(&mut st.core, &mut st.out);
            let out = self.take_outgoing(st);
            drop(g);
            out.send();
        } else {
            drop(g);
        }
        // Log files are written after the lock; one node's batches arrive in order, and each
        // instance's log has one writer (its node's stream).
        for (path, data) in logs {
            jobs::append_log(&path, &data);
        }
    }

    pub fn close_node(&self, node: NodeId, why: &str) {
        let mut g = self.state.lock();
        let st = &mut *g;
        if st.stopping {
            return;
        }
        if st.out.nodes.remove(&node).is_none() {
            return;
        }
        // Its workers go with it (below), dying ones included.
        st.dying.retain(|(n, _), _| *n != node);
        st.exits.retain(|(n, _), _| *n != node);
        // Values stored only there are gone: lineage makes the needed ones again.
        let mut lost: Vec<ObjectId> = st
            .out
            .locations
            .iter()
            .filter(|(_, (at, _))| *at == node)
            .map(|(o, _)| o)
            .collect();
        lost.sort_unstable();
        for o in &lost {
            st.out.locations.remove(o);
        }
        reactor::on_objects_lost(&mut st.core, &mut st.out, &lost);
        reactor::on_node_lost(&mut st.core, &mut st.out, node, why);
        st.jobs
            .on_node_lost(&mut st.out, &mut st.core, node, why, now());
        reactor::schedule(&mut st.core, &mut st.out);
        let out = self.take_outgoing(st);
        drop(g);
        out.send();
    }

    /// Nodes silent for longer than the heartbeat timeout.
    pub fn silent_nodes(&self) -> Vec<NodeId> {
        let g = self.state.lock();
        g.out
            .nodes
            .iter()
            .filter(|(_, n)| n.last_seen.elapsed() > self.heartbeat_timeout)
            .map(|(id, _)| *id)
            .collect()
    }

    /// A value the head holds, to send once the lock is released.
    pub fn head_value(&self, object: ObjectId) -> Option<super::values::Owned> {
        self.state.lock().out.values.owned(&object)
    }

    /// Cluster status; for a multi-node job's processes (`job` set), only its instances.
    pub fn status(&self, job: JobId) -> StatusReply {
        let g = self.state.lock();
        let stats = g.core.stats();
        let only = if job.0 == 0 {
            None
        } else {
            g.jobs.nodes_of(job)
        };
        let (infeasible_tasks, infeasible_count) = g.core.infeasible_tasks(INFEASIBLE_SHOWN);
        let nodes = g
            .core
            .nodes()
            .into_iter()
            .filter(|n| only.as_ref().is_none_or(|o| o.contains(&n.id)))
            .map(|n| {
                let conn = g.out.nodes.get(&n.id);
                NodeStatus {
                    id: n.id,
                    address: conn.map(|c| c.address.clone()).unwrap_or_default(),
                    total: n.total.clone(),
                    available: n.available.clone(),
                    alive: n.alive,
                    workers: n.workers as u32,
                    store: conn.map(|c| c.usage).unwrap_or_default(),
                    pool: conn.map(|c| c.pool.clone()).unwrap_or_default(),
                }
            })
            .collect();
        StatusReply {
            nodes,
            submitted: stats.submitted,
            queued: g.core.queued_tasks() as u64,
            running: g.core.running_tasks() as u64,
            succeeded: stats.succeeded,
            failed: stats.failed,
            objects: g.core.object_count() as u64,
            retried: stats.retried,
            reconstructed: stats.reconstructed,
            head_store_bytes: g.out.values.memory_bytes(),
            head_spilled_bytes: g.out.values.spilled_bytes(),
            live: g.core.live_tasks() as u64,
            max_live: self.room.limit() as u64,
            drivers_waiting: self.room.waiting() as u32,
            peak_live: stats.peak_live,
            infeasible: infeasible_count as u64,
            infeasible_tasks,
            // A job's processes see its own actors; anyone else every actor.
            actors: g
                .core
                .actors()
                .into_iter()
                .filter(|a| job.0 == 0 || a.job == job)
                .map(Into::into)
                .collect(),
        }
    }

    /// The live actor named `name`, if any.
    pub fn actor_named(&self, name: &str) -> Option<TaskId> {
        self.state.lock().core.actor_named(name)
    }

    /// Why `task` has not started (`None`: it runs, ended, or is unknown).
    pub fn pending_reason(&self, task: TaskId) -> Option<String> {
        let g = self.state.lock();
        // Asked by object: a later return of a task with several is made by that task.
        let task = g.core.task_of(ObjectId(task.0));
        g.core.pending_reason(task)
    }

    /// The objects or (`workers`) the workers that `q` selects; a job's credential (`job`)
    /// sees its own job's only.
    pub fn list_state(
        &self,
        q: &starling_proto::state::TaskQuery,
        workers: bool,
    ) -> Result<starling_proto::state::StateList, String> {
        let g = self.state.lock();
        let job = q.job;
        let (mut objects, mut all_workers) = (Vec::new(), Vec::new());
        if workers {
            all_workers = g.core.worker_records();
            all_workers.retain(|w| job.is_none_or(|j| j == w.job));
        } else {
            objects = g.core.object_records();
            if let Some(job) = job {
                objects.retain(|o| {
                    g.session_jobs.get(&starling_proto::session_of(o.object.0)) == Some(&job)
                });
            }
        }
        starling_proto::state::StateList::select(objects, all_workers, q, workers)
    }

    /// The job that made object `id` (`None`: no session of this head made it).
    pub fn object_job(&self, id: ObjectId) -> Option<JobId> {
        let g = self.state.lock();
        g.session_jobs
            .get(&starling_proto::session_of(id.0))
            .copied()
    }

    /// Closes every stream (shutdown).
    pub fn close_all(&self) {
        let mut g = self.state.lock();
        g.stopping = true;
        for c in g.out.clients.values() {
            if let ClientTx::Link(w) = &c.tx {
                w.close();
            }
        }
        g.out.clients.clear();
        g.out.nodes.clear();
    }
}

/// What a call that reaches a head that is shutting down is told.
fn shutting_down() -> Status {
    Status::unavailable("the head is shutting down")
}

/// How long the head waits for a node to report how a worker process whose session ended exited.
const EXIT_REPORT_WAIT: Duration = Duration::from_secs(1);

fn check_version(version: u32) -> Result<(), Status> {
    if version != starling_proto::PROTOCOL_VERSION {
        return Err(Status::failed_precondition(format!(
            "protocol version {version} is not supported: this head speaks version {}; use \
             matching Starling builds",
            starling_proto::PROTOCOL_VERSION
        )));
    }
    Ok(())
}

pub(crate) fn bad(what: &str) -> Status {
    Status::invalid_argument(format!("malformed message: {what}"))
}

/// `Ok` if `id` is in the range of session `client` (a new task or `put` names its own id).
pub(crate) fn own_id(client: u64, id: u64, what: &str) -> Result<(), Status> {
    if starling_proto::session_of(id) == client {
        return Ok(());
    }
    Err(Status::permission_denied(format!(
        "session {client} cannot {what} {id}: the id is not in its range"
    )))
}

/// `Ok` unless `id` was made by a session of a job other than `job`: a session reaches only its
/// own job's objects and tasks (ids of sessions this head does not know fall through to the
/// usual answers, `ObjectLost` and the like).
pub(crate) fn same_job(
    session_jobs: &HashMap<u64, JobId>,
    job: JobId,
    id: u64,
    what: &str,
) -> Result<(), Status> {
    match session_jobs.get(&starling_proto::session_of(id)) {
        Some(owner) if *owner != job => Err(Status::permission_denied(format!(
            "job {job} cannot {what} {id} of job {owner}"
        ))),
        _ => Ok(()),
    }
}

/// [`same_job`], except that an actor's handle object (the actor's id) is any job's to hold,
/// pass and read: named actors are found and called across jobs, as in Ray.
fn same_job_or_actor(
    core: &Core,
    session_jobs: &HashMap<u64, JobId>,
    job: JobId,
    id: u64,
    what: &str,
) -> Result<(), Status> {
    if core.is_actor(TaskId(id)) {
        return Ok(());
    }
    same_job(session_jobs, job, id, what)
}

fn apply_client_op(st: &mut State, client: u64, op: ClientOp) -> Result<(), Status> {
    let conn = st
        .out
        .clients
        .get_mut(&client)
        .ok_or_else(|| bad("unknown session"))?;
    let (job, worker, node) = (conn.job, conn.worker, conn.node);
    match op {
        ClientOp::Hello(_) => return Err(bad("a session says hello once")),
        ClientOp::Submit(mut spec) => {
            spec.job = job;
            // A call sent straight to a worker: only a driver in this process sends them (to
            // workers of this host), and only to the worker its actor runs on now; otherwise
            // it takes the queue's way (and its caller, told so, does not send it).
            if let (Some(w), starling_proto::ActorRole::Call(actor)) =
                (spec.extras.direct, &spec.extras.actor)
            {
                if !matches!(conn.tx, ClientTx::Direct(_))
                    || !starling_scheduler::actors::takes_direct(&st.core, *actor, w)
                {
                    spec.extras.make_mut().direct = None;
                }
            }
            // The job's environment, under the task's own variables (which win).
            if let Some(d) = st.out.jobs.get(&job).filter(|d| !d.env.is_empty()) {
                let x = spec.extras.make_mut();
                let own = std::mem::take(&mut x.env);
                x.env = TaskEnv::new(d.env.vars().iter().chain(own.vars()).cloned());
            }
            own_id(client, spec.id.0, "submit task")?;
            for o in spec.references() {
                same_job_or_actor(&st.core, &st.session_jobs, job, o.0, "pass object")?;
            }
            if spec.extras.returns > starling_proto::limits::MAX_RETURNS {
                return Err(bad(&format!(
                    "task {} returns {} objects, more than {}",
                    spec.id,
                    spec.extras.returns,
                    starling_proto::limits::MAX_RETURNS
                )));
            }
            if spec.extras.streaming && spec.extras.returns > 1 {
                return Err(bad(&format!(
                    "streaming task {} returns {} objects: its items are its returns",
                    spec.id, spec.extras.returns
                )));
            }
            let last = spec.return_objects().last().unwrap_or(spec.return_object());
            own_id(client, last.0, "submit task")?;
            if spec
                .return_objects()
                .any(|o| st.core.object_state(o).is_some())
                || st.core.task_state(spec.id).is_some()
            {
                return Err(bad(&format!("task id {} is already in use", spec.id)));
            }
            // An actor call its caller also sent straight to the actor's worker is answered
            // from there, or the caller subscribes when told to ask here.
            let pushed = spec.extras.direct.is_none();
            for ret in spec.return_objects() {
                conn.add_handle(ret);
                // The submitter gets the result pushed when it settles (no request needed).
                if pushed {
                    st.out
                        .subscribers
                        .get_or_insert_with(ret, Subscribers::default)
                        .push(client);
                }
            }
            reactor::on_submit(&mut st.core, &mut st.out, spec);
        }
        ClientOp::Put(v) => {
            let object = v.object;
            let Value::Inline(bytes) = v.value else {
                return Err(bad("put without an inline value"));
            };
            own_id(client, object.0, "put object")?;
            if st.core.object_state(object).is_some() {
                return Err(bad(&format!("object id {object} is already in use")));
            }
            conn.add_handle(object);
            let size = bytes.len() as u64;
            st.out.values.insert(object, bytes);
            reactor::on_put(&mut st.core, object, HEAD_NODE, size);
        }
        ClientOp::PutStored(v) => {
            let object = v.object;
            let Value::Location(l) = v.value else {
                return Err(bad("stored put without a location"));
            };
            own_id(client, object.0, "put object")?;
            if st.core.object_state(object).is_some() {
                return Err(bad(&format!("object id {object} is already in use")));
            }
            conn.add_handle(object);
            let at = if l.node == HEAD_NODE { node } else { l.node };
            st.out.locations.insert(object, (at, l.size));
            reactor::on_put(&mut st.core, object, at, l.size);
        }
        ClientOp::Release(object) => {
            if let Some(n) = conn.handles.get_mut(&object) {
                *n -= 1;
                if *n == 0 {
                    conn.handles.remove(&object);
                    // It holds no ref to the object any more: its value is not sent there when
                    // it settles (a task that returned the ref of a child it submitted, say).
                    if let Some(subs) = st.out.subscribers.get_mut(&object) {
                        subs.remove(client);
                        if subs.sessions().is_empty() {
                            st.out.subscribers.remove(&object);
                        }
                    }
                }
                reactor::on_release(&mut st.core, &mut st.out, object);
            }
        }
        ClientOp::AddRef(object) => {
            same_job_or_actor(&st.core, &st.session_jobs, job, object.0, "hold object")?;
            // An object already gone stays gone: `get` of the ref says `ObjectLost`, and its
            // release finds no handle to drop.
            if reactor::on_add_ref(&mut st.core, &mut st.out, object) {
                if let Some(conn) = st.out.clients.get_mut(&client) {
                    conn.add_handle(object);
                }
            }
        }
        ClientOp::Nested { container, refs } => {
            same_job(&st.session_jobs, job, container.0, "fill object")?;
            for r in &refs {
                same_job_or_actor(&st.core, &st.session_jobs, job, r.0, "hold object")?;
            }
            reactor::on_nested(&mut st.core, container, refs);
        }
        ClientOp::Subscribe(object) => {
            same_job_or_actor(&st.core, &st.session_jobs, job, object.0, "read object")?;
            subscribe(st, client, object);
        }
        ClientOp::StreamItem(item) => super::streams::on_item(st, client, worker, item)?,
        ClientOp::StreamAck(ack) => super::streams::on_ack(st, client, job, ack)?,
        ClientOp::Cancel(t) | ClientOp::CancelForce(t) => {
            let force = matches!(op, ClientOp::CancelForce(_));
            same_job(&st.session_jobs, job, t.0, "cancel task")?;
            // Named by object: a later return of a task with several is made by that task.
            let t = st.core.task_of(ObjectId(t.0));
            reactor::on_cancel_tree(&mut st.core, &mut st.out, t, force);
        }
        ClientOp::KillActor { actor, no_restart } => {
            // Any driver may kill any actor: named actors are found across jobs, as in Ray.
            reactor::on_kill_actor(&mut st.core, &mut st.out, actor, no_restart);
        }
        ClientOp::Blocked => {
            if let Some(w) = worker {
                reactor::on_worker_blocked(&mut st.core, w);
            }
        }
        ClientOp::Unblocked => {
            if let Some(w) = worker {
                reactor::on_worker_unblocked(&mut st.core, w);
            }
        }
        ClientOp::Done(done) => {
            let Some(w) = worker else {
                return Err(bad("only worker processes finish tasks"));
            };
            let task = done.task;
            let object = ObjectId::from(task);
            // Keep the value only if the task still runs there (not cancelled meanwhile, nor
            // moved elsewhere after its node was declared lost).
            let running_here = |st: &State| {
                matches!(
                    st.core.task_state(task),
                    Some(starling_scheduler::TaskState::Running { worker, .. }) if *worker == w
                )
            };
            let mut live = running_here(st);
            if !live {
                // A call its caller sent here directly may report before it was counted.
                starling_scheduler::actors::direct_report(&mut st.core, w, task);
                live = running_here(st);
            }
            let outcome = match done.outcome {
                Outcome::Inline(bytes) => {
                    let size = bytes.len() as u64;
                    if live {
                        st.out.values.insert(object, bytes);
                    }
                    TaskOutcome::Stored { size }
                }
                Outcome::Stored(size) => {
                    if live {
                        st.out.locations.insert(object, (node, size));
                    }
                    TaskOutcome::Stored { size }
                }
                Outcome::Returns(values) => {
                    let objects: Vec<ObjectId> = st
                        .core
                        .task_spec(task)
                        .map(|s| s.return_objects().collect())
                        .unwrap_or_default();
                    let mut sizes = Vec::with_capacity(values.len());
                    for (k, value) in values.into_iter().enumerate() {
                        let object = objects.get(k).copied();
                        let size = match value {
                            Returned::Inline(bytes) => {
                                let size = bytes.len() as u64;
                                if let (true, Some(o)) = (live, object) {
                                    st.out.values.insert(o, bytes);
                                }
                                size
                            }
                            Returned::Stored(size) => {
                                if let (true, Some(o)) = (live, object) {
                                    st.out.locations.insert(o, (node, size));
                                }
                                size
                            }
                        };
                        sizes.push(size);
                    }
                    TaskOutcome::Returns(sizes)
                }
                Outcome::Failed(e) => TaskOutcome::Failed(e),
                Outcome::BadArgument(e) => TaskOutcome::BadArgument(e),
                Outcome::FunctionNotFound(build) => TaskOutcome::FunctionNotFound { build },
            };
            reactor::on_task_runtime(&mut st.core, task, done.runtime_us);
            reactor::on_task_done(&mut st.core, &mut st.out, w, task, outcome);
            if st.core.task_state(task).is_none() {
                st.streams.end(task);
            }
        }
    }
    Ok(())
}

/// Sends session `client` the value (or failure) of `object` now if the head has it, else when
/// it settles; an object the head does not know is lost.
pub(crate) fn subscribe(st: &mut State, client: u64, object: ObjectId) {
    match st.out.value_of(object) {
        Some(v) => st.out.queue_client(client, HeadOp::Value(v)),
        None if st.core.object_state(object).is_some() => st
            .out
            .subscribers
            .get_or_insert_with(object, Subscribers::default)
            .push(client),
        None => {
            let failure = TaskFailure {
                task: object.task(),
                attempt: 0,
                kind: FailureKind::ObjectLost(object),
            };
            let v = ObjectValue {
                object,
                value: Value::Failure(failure),
            };
            st.out.queue_client(client, HeadOp::Value(v));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A head that started shutting down takes no new session or node and changes nothing: the
    /// disconnects its own shutdown causes (a node whose stream it closed reattaching, reporting
    /// the entrypoint it then stopped) must not end the jobs it leaves on disk.
    /// A head with its job table in a fresh directory named after `tag`.
    pub(crate) fn test_head(tag: &str) -> (PathBuf, Head) {
        let dir = std::env::temp_dir().join(format!("starling-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        starling_proto::dirs::create_dir(&dir).unwrap();
        let table = JobFiles::load(&dir).unwrap();
        let head = Head::new(
            dir.join("bin"),
            Some(table),
            Duration::from_secs(5),
            64,
            None,
        );
        (dir, head)
    }

    #[test]
    fn a_stopping_head_takes_nothing_new_and_changes_nothing() {
        let (dir, head) = test_head("stopping");
        let node_hello = NodeHello {
            version: starling_proto::PROTOCOL_VERSION,
            resources: ResourceSet::cpus(1.0),
            ..Default::default()
        };
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let node = head
            .open_node(&node_hello, tx)
            .expect("a node joins a running head");
        head.close_all();

        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let again = head.open_node(&node_hello, tx).unwrap_err();
        assert_eq!(again.code(), tonic::Code::Unavailable, "{again:?}");
        let hello = Hello {
            version: starling_proto::PROTOCOL_VERSION,
            ..Default::default()
        };
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let session = head.open_session(&hello, ClientTx::Stream(tx)).unwrap_err();
        assert_eq!(session.code(), tonic::Code::Unavailable, "{session:?}");
        // The node's loss, after the head let go of it, changes nothing.
        head.close_node(node, "agent connection dropped");
        assert!(head
            .state
            .lock()
            .core
            .nodes()
            .iter()
            .any(|n| n.id == node && n.alive));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A session the head sent nothing for a while is told the head is alive, and only such a
    /// session: its client declares the head lost after `SILENCE_LIMIT` of silence.
    #[test]
    fn quiet_sessions_are_told_the_head_is_alive() {
        let (dir, head) = test_head("alive");
        let hello = Hello {
            version: starling_proto::PROTOCOL_VERSION,
            ..Default::default()
        };
        let (busy_tx, mut busy) = tokio::sync::mpsc::unbounded_channel();
        let (quiet_tx, mut quiet) = tokio::sync::mpsc::unbounded_channel();
        let b = head
            .open_session(&hello, ClientTx::Stream(busy_tx))
            .unwrap();
        let _q = head
            .open_session(&hello, ClientTx::Stream(quiet_tx))
            .unwrap();
        let ops = |rx: &mut tokio::sync::mpsc::UnboundedReceiver<_>| {
            let mut kinds = Vec::new();
            while let Ok(Ok::<HeadBatch, Status>(batch)) = rx.try_recv() {
                kinds.extend(batch.ops);
            }
            kinds
        };
        assert!(matches!(ops(&mut busy)[..], [HeadOp::Welcome(_)]));
        assert!(matches!(ops(&mut quiet)[..], [HeadOp::Welcome(_)]));
        let tell = |head: &Head, busy_session: Option<u64>| {
            let mut g = head.state.lock();
            if let Some(c) = busy_session {
                g.out.queue_client(c, HeadOp::Cancel(TaskId(7)));
            }
            g.out.tell_quiet_sessions();
            head.take_outgoing(&mut g).send();
        };
        // Both were just welcomed: nobody is quiet yet.
        tell(&head, None);
        assert!(ops(&mut busy).is_empty());
        assert!(ops(&mut quiet).is_empty());
        // One period later, only the session that got nothing is told.
        tell(&head, Some(b));
        assert!(matches!(ops(&mut busy)[..], [HeadOp::Cancel(TaskId(7))]));
        assert!(matches!(ops(&mut quiet)[..], [HeadOp::Alive]));
        tell(&head, None);
        assert!(matches!(ops(&mut busy)[..], [HeadOp::Alive]));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
