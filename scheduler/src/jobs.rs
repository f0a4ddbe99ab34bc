//! Multi-node jobs and compute pools: the job table's state machine, which the head drives.
//!
//! A compute pool is a named set of nodes (`starling worker --pool NAME`, or started by the
//! head's launcher when [`Jobs::tick`] asks for nodes). A job submitted to a pool waits (PENDING) until enough of the pool's
//! nodes are free, is given whole nodes (gang allocation: all at once, never one by one), and
//! runs its entrypoint on instance 0; its tasks run only on its nodes. When the entrypoint
//! exits, every instance is told to stop the job's processes and the job ends once each has
//! reported back, so no instance outlives its job. The nodes then return to the pool.
//!
//! ```text
//! PENDING --(nodes given)--> RUNNING --(entrypoint exits, all instances stopped)--> DONE | FAILED
//!    |                          |
//!    +--(cancel)--> CANCELLED   +--(cancel)--> CANCELLING --(all stopped)--> CANCELLED
//!    +--(instance_timeout)--> FAILED "Timed out after Ns waiting for M instances, only K available"
//! ```
//!
//! A job *ends* in one step whatever ends it (the entrypoint's exit, a cancel, the loss of
//! instance 0, too many lost instances): `Jobs::end` records the state it will end in, cancels
//! every task of the job at the scheduler (so none is retried when its worker is killed) and
//! tells every instance to stop the job's processes. The job becomes final, and its nodes go
//! back to the pool, once each instance reported its processes gone (`JobStopped`), its node
//! was lost, or [`STOP_TIMEOUT`] passed.
//!
//! Losing a node that runs instance `k > 0` does not end the job: the instance is recorded as
//! lost (when and why), the scheduler retries its tasks on the other instances, and a free node
//! of the pool (a launched pool starts one) joins the job as a new instance. The job fails
//! instead once fewer than `min_instances` instances are up, or more than
//! `max_instance_failures` were lost.
//!
//! # Invariants
//! - A node is given to at most one job at a time (`node_job`), and the scheduler knows it
//!   (`NodeUse::Job`), so no other job's task runs there.
//! - A job is final only after it ended: none of its tasks is left at the scheduler, and none
//!   of its processes runs on a node that still serves it.
//! - Every change of a job is handed to [`JobTransport::persist_job`] before it is visible to
//!   clients (the head writes it to `data_dir/jobs/<id>/job.pb`); a head that restarts gives
//!   the table back to [`Jobs::restore`], which marks jobs found unfinished FAILED with the
//!   message [`HEAD_RESTARTED`].
//! - No I/O and no clock: handlers take the time ([`Now`]) as an argument and act only
//!   through the [`JobTransport`] (node ops, the job table's writes) and their return values
//!   (nodes to launch or stop), so the head performs every effect, after its lock, and tests
//!   drive jobs through whole lives with a recording transport and a made-up clock.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

pub use starling_proto::jobs::{
    instance_state, status, Entrypoint, InstanceState, JobInfo, JobInstance, JobSpec, PoolInfo,
    PoolSpec,
};
use starling_proto::{JobId, NodeId, RemoteError};

use crate::core::NodeUse;
use crate::transport::Transport;
use crate::{reactor, Core};

/// How long a job that has `min_instances` (but not `target_instances`) free nodes waits for
/// more before it starts with what it has, unless the head is told otherwise
/// (`HeadConfig::start_grace`).
pub const START_GRACE: Duration = Duration::from_secs(2);

/// Default `instance_timeout`.
pub const DEFAULT_INSTANCE_TIMEOUT: Duration = Duration::from_secs(720);

/// How long an ending job waits for its instances to report their processes gone before it
/// ends without them (an agent that hangs must not keep a job, and its nodes, forever).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(30);

/// Lines of instance 0's standard error a failed job's message ends with: the last ones, or
/// the first ones of the last panic report (its message, not the end of its backtrace).
const STDERR_TAIL_LINES: usize = 8;

/// The most words a payload's command may have.
const MAX_COMMAND_WORDS: usize = 64;

/// The longest job name accepted.
pub const MAX_NAME_BYTES: usize = 256;

/// How long a launched node may take to join before it no longer counts as starting.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(60);

/// The time, as handlers see it: a monotonic instant for waits and timeouts, and the wall
/// clock (Unix milliseconds) for the times clients are shown. The caller reads both.
#[derive(Clone, Copy, Debug)]
pub struct Now {
    /// For durations (grace waits, timeouts).
    pub at: Instant,
    /// For the record (`created_ms`, `lost_ms`, messages).
    pub unix_ms: u64,
}

/// What the job table asks of the head, beside the scheduler's [`Transport`].
pub trait JobTransport: Transport {
    /// Sends `op` to the agent of `node`.
    fn to_node(&mut self, node: NodeId, op: JobNodeOp);
    /// Keeps `info` durably (the head's job table on disk), in the order of calls.
    fn persist_job(&mut self, info: &JobInfo);
    /// Keeps `spec` durably.
    fn persist_pool(&mut self, spec: &PoolSpec);
    /// Forgets pool `name` durably.
    fn remove_pool(&mut self, name: &str);
    /// Forgets job `id` durably, with its logs and result.
    fn remove_job(&mut self, id: u64);
    /// Keeps the value of job `id`'s `#[starling::job]` function.
    fn job_result(&mut self, id: u64, value: Vec<u8>);
    /// Whether `job` has a driver (its entrypoint) connected, whose binary worker processes
    /// of the job run.
    fn has_driver(&self, job: JobId) -> bool;
    /// The environment `job`'s tasks run in by default (its workers are started with it).
    fn task_env(&self, _job: JobId) -> starling_proto::EnvId {
        starling_proto::EnvId::NONE
    }
    /// The last task failure of `job`, in words, if one was reported.
    fn last_task_failure(&self, job: JobId) -> Option<String>;
    /// `job` ended: what the head kept for its driver can go.
    fn job_finished(&mut self, job: JobId);
}

/// What a node's agent is told about a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobNodeOp {
    /// The node is an instance of a job (instance 0 with the entrypoint to run).
    Instance(Box<JobInstance>),
    /// Start `count` worker processes of `job` (from its driver's binary).
    StartWorkers { job: JobId, count: u32 },
    /// Stop every process of job `id` and report `JobStopped`.
    Stop(u64),
}

/// Why the job table refused a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JobError {
    /// The request can never succeed as it is (a bad spec, a bad pool size).
    Invalid(String),
    /// It names a job or pool that does not exist.
    NotFound(String),
    /// Not now: the job or pool is busy, or the head cannot do it.
    Conflict(String),
}

impl JobError {
    /// The message.
    pub fn message(&self) -> &str {
        match self {
            JobError::Invalid(m) | JobError::NotFound(m) | JobError::Conflict(m) => m,
        }
    }
}

impl std::fmt::Display for JobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message())
    }
}

impl std::error::Error for JobError {}

/// What the caller does after the lock is released.
#[derive(Debug, Default)]
#[must_use = "launches and stops are lost unless performed"]
pub struct PoolActions {
    /// Start one node for each of these pools.
    pub launch: Vec<PoolSpec>,
    /// Stop these launched node agents.
    pub stop: Vec<u32>,
}

struct JobRec {
    info: JobInfo,
    queued_at: Instant,
    /// When the job first had `min_instances` free nodes (the grace wait starts).
    min_since: Option<Instant>,
    entry_exited: bool,
    /// Instances that reported every process of the job gone.
    stopped: HashSet<NodeId>,
    /// Set when the job ends: the state it is final in once every instance stopped, and when
    /// the instances were told to stop.
    ending: Option<(&'static str, Instant)>,
    /// The last lines instance 0's processes wrote to standard error (see
    /// [`STDERR_TAIL_LINES`]), and whether they are the head of a panic report, kept whole.
    stderr_tail: VecDeque<String>,
    stderr_panic: bool,
    /// Since when fewer than `min_instances` instances are up (lost ones not replaced yet).
    short_since: Option<Instant>,
    /// How many instances it started with: lost ones are replaced up to this many.
    size: usize,
}

impl JobRec {
    fn new(info: JobInfo, ended: bool, now: Now) -> Self {
        JobRec {
            info,
            queued_at: now.at,
            min_since: None,
            entry_exited: ended,
            stopped: HashSet::new(),
            ending: None,
            stderr_tail: VecDeque::new(),
            stderr_panic: false,
            short_since: None,
            size: 0,
        }
    }

    fn instance_mut(&mut self, node: NodeId) -> Option<&mut InstanceState> {
        self.info.instances.iter_mut().find(|i| i.node == node.0)
    }

    /// Instances whose nodes serve the job now.
    fn up(&self) -> usize {
        self.info
            .instances
            .iter()
            .filter(|i| i.state == instance_state::UP)
            .count()
    }
}

struct PoolRec {
    spec: PoolSpec,
    /// Launched agents that have not joined yet: pid and when they were started.
    starting: Vec<(u32, Instant)>,
    /// Launched agents that joined: node -> pid.
    launched: HashMap<NodeId, u32>,
    idle_since: HashMap<NodeId, Instant>,
}

/// The job table and the pools.
pub struct Jobs {
    jobs: BTreeMap<u64, JobRec>,
    pools: BTreeMap<String, PoolRec>,
    /// Which job each allocated node serves.
    node_job: HashMap<NodeId, u64>,
    /// The pool of every attached node (`""`: the default pool, for drivers' tasks).
    node_pool: HashMap<NodeId, String>,
    /// The head's address, given to entrypoints.
    pub head_addr: String,
    /// See [`START_GRACE`].
    pub start_grace: Duration,
}

/// The message of a job that was unfinished when the head restarted (it is FAILED).
pub const HEAD_RESTARTED: &str = "head restarted";

impl Default for Jobs {
    fn default() -> Self {
        Jobs::new()
    }
}

impl Jobs {
    /// An empty table.
    pub fn new() -> Jobs {
        Jobs {
            jobs: BTreeMap::new(),
            pools: BTreeMap::new(),
            node_job: HashMap::new(),
            node_pool: HashMap::new(),
            head_addr: String::new(),
            start_grace: START_GRACE,
        }
    }

    /// The table a restarted head kept: `jobs` and `pools` as they were last persisted. Jobs
    /// that had not ended are marked FAILED with the message [`HEAD_RESTARTED`] (their
    /// processes did not survive the head) and persisted again. Returns the largest job id.
    pub fn restore(
        &mut self,
        t: &mut impl JobTransport,
        jobs: Vec<JobInfo>,
        pools: Vec<PoolSpec>,
        now: Now,
    ) -> u64 {
        let mut max_id = 0;
        for mut info in jobs {
            max_id = max_id.max(info.id);
            let unfinished = !status::is_final(&info.status);
            if unfinished {
                // The exact words are part of the contract: clients match on them.
                info.message = HEAD_RESTARTED.to_string();
                info.status = status::FAILED.to_string();
                info.completed_ms = now.unix_ms;
                t.persist_job(&info);
            }
            self.jobs.insert(info.id, JobRec::new(info, true, now));
        }
        for spec in pools {
            self.pools.insert(spec.name.clone(), PoolRec::new(spec));
        }
        max_id
    }

    fn persist(&self, t: &mut impl JobTransport, id: u64) {
        if let Some(rec) = self.jobs.get(&id) {
            t.persist_job(&rec.info);
        }
    }

    fn persist_pool(&self, t: &mut impl JobTransport, name: &str) {
        if let Some(p) = self.pools.get(name) {
            t.persist_pool(&p.spec);
        }
    }

    /// A node joined (its agent's process id `pid` matches it to a node the launcher started);
    /// a node of a named pool waits for a job.
    pub fn on_node_added(&mut self, core: &mut Core, node: NodeId, pool: &str, pid: u32, now: Now) {
        self.node_pool.insert(node, pool.to_string());
        if pool.is_empty() {
            return;
        }
        reactor::on_node_use(core, node, NodeUse::Reserved);
        let p = self
            .pools
            .entry(pool.to_string())
            .or_insert_with(|| PoolRec::new(external_pool(pool)));
        if let Some(i) = p.starting.iter().position(|(p, _)| *p == pid) {
            p.starting.remove(i);
            p.launched.insert(node, pid);
        }
        p.idle_since.insert(node, now.at);
    }

    /// A node left (or was declared dead) for reason `why`. Losing instance 0 ends its job;
    /// losing another instance is recorded and the job goes on, unless too few remain.
    pub fn on_node_lost(
        &mut self,
        t: &mut impl JobTransport,
        core: &mut Core,
        node: NodeId,
        why: &str,
        now: Now,
    ) {
        self.node_pool.remove(&node);
        for p in self.pools.values_mut() {
            p.launched.remove(&node);
            p.idle_since.remove(&node);
        }
        // The node serves no job any more: if its agent registers again it is a new, free node.
        let Some(id) = self.node_job.remove(&node) else {
            return;
        };
        let Some(rec) = self.jobs.get_mut(&id) else {
            return;
        };
        rec.stopped.insert(node);
        let Some(k) = rec.info.nodes.iter().position(|n| *n == node.0) else {
            return;
        };
        let lost = format!(
            "instance {k} (node {node}) lost at {}: {why}",
            clock(now.unix_ms)
        );
        if let Some(i) = rec.instance_mut(node) {
            i.state = instance_state::LOST.to_string();
            i.lost_ms = now.unix_ms;
            i.reason = why.to_string();
        }
        if rec.ending.is_some() {
            self.persist(t, id);
            self.maybe_finish(t, core, id, now);
            return;
        }
        let spec = rec.info.spec.clone();
        let failures = rec
            .info
            .instances
            .iter()
            .filter(|i| i.state == instance_state::LOST)
            .count() as u32;
        let up = rec.up() as u32;
        let replaceable = self.could_replace(&spec.pool);
        let rec = self.jobs.get_mut(&id).expect("present");
        let fail = if k == 0 {
            rec.entry_exited = true;
            Some(lost.clone())
        } else if spec.max_instance_failures.is_some_and(|m| failures > m) {
            Some(format!(
                "{lost}; {failures} instance(s) lost, more than max_instance_failures ({})",
                spec.max_instance_failures.unwrap_or(0)
            ))
        } else if up < spec.min_instances && !replaceable {
            Some(format!(
                "{lost}; {up} instance(s) left, fewer than min_instances ({})",
                spec.min_instances
            ))
        } else {
            if up < spec.min_instances {
                // Nodes may still join the pool: wait for them, as long as for the first ones.
                rec.short_since.get_or_insert(now.at);
            }
            None
        };
        match fail {
            Some(message) => self.end(t, core, id, status::FAILED, message, now),
            None => {
                let rec = self.jobs.get_mut(&id).expect("present");
                if !rec.info.message.is_empty() {
                    rec.info.message.push_str("; ");
                }
                rec.info.message.push_str(&lost);
                self.persist(t, id);
            }
        }
    }

    /// Whether a lost instance of a job on `pool` can be replaced: a node of the pool is free,
    /// or may still join.
    fn could_replace(&self, pool: &str) -> bool {
        !self.free_nodes(pool).is_empty()
            || self.pools.get(pool).is_some_and(|p| p.could_grow(self))
    }

    /// Validates and queues a job.
    pub fn submit(
        &mut self,
        t: &mut impl JobTransport,
        id: u64,
        mut spec: JobSpec,
        now: Now,
    ) -> Result<JobInfo, JobError> {
        let refuse = |m: String| Err(JobError::Invalid(m));
        if spec.target_instances < 1 {
            return refuse("target_instances must be at least 1".into());
        }
        if spec.min_instances == 0 {
            spec.min_instances = spec.target_instances;
        }
        if spec.min_instances > spec.target_instances {
            return refuse(format!(
                "min_instances must be in 1..={} (target_instances), not {}",
                spec.target_instances, spec.min_instances
            ));
        }
        if spec.pool.is_empty() {
            return refuse("a job needs a pool (the default pool is for drivers)".into());
        }
        if spec.name.len() > MAX_NAME_BYTES || spec.name.contains(char::is_control) {
            return refuse(format!(
                "a job name has at most {MAX_NAME_BYTES} bytes and no control characters"
            ));
        }
        // The entrypoint's environment and arguments reach execve(2), which cannot carry a NUL
        // byte, and a variable's name cannot hold `=`: refuse them here, not on a node later.
        for (k, v) in &spec.env {
            if k.is_empty() || k.contains(['=', '\0']) || v.contains('\0') {
                return refuse(format!(
                    "environment variable `{}` is not NAME=VALUE (a name without `=`, no NUL \
                     bytes)",
                    k.escape_debug()
                ));
            }
        }
        if let Some(a) = spec.args.iter().find(|a| a.contains('\0')) {
            return refuse(format!(
                "argument `{}` contains a NUL byte",
                a.escape_debug()
            ));
        }
        let Some(pool) = self.pools.get(&spec.pool) else {
            let known: Vec<&str> = self.pools.keys().map(String::as_str).collect();
            return Err(JobError::NotFound(format!(
                "unknown pool `{}` (pools: {})",
                spec.pool,
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )));
        };
        if pool.spec.max_nodes > 0 && spec.min_instances > pool.spec.max_nodes {
            return refuse(format!(
                "min_instances {} exceeds the {} nodes pool `{}` can have (max_nodes)",
                spec.min_instances, pool.spec.max_nodes, spec.pool
            ));
        }
        let payload = spec.payload.clone();
        if payload.kind.is_none() {
            return refuse("a job needs a payload".into());
        }
        if payload.command.len() > MAX_COMMAND_WORDS
            || payload
                .command
                .iter()
                .any(|w| w.is_empty() || w.contains('\0'))
        {
            return refuse(format!(
                "a payload's command has at most {MAX_COMMAND_WORDS} words, none empty or with \
                 a NUL byte"
            ));
        }
        if spec.instance_timeout_ms == 0 {
            spec.instance_timeout_ms = DEFAULT_INSTANCE_TIMEOUT.as_millis() as u64;
        }
        if spec.name.is_empty() {
            spec.name = format!("job-{id}");
        }
        let free = self.free_nodes(&spec.pool).len();
        let info = JobInfo {
            id,
            message: waiting(spec.target_instances, free),
            spec,
            status: status::PENDING.to_string(),
            created_ms: now.unix_ms,
            ..Default::default()
        };
        self.jobs.insert(id, JobRec::new(info.clone(), false, now));
        self.persist(t, id);
        Ok(info)
    }

    /// Alive, unallocated nodes of `pool`, in id order.
    fn free_nodes(&self, pool: &str) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = self
            .node_pool
            .iter()
            .filter(|(id, p)| *p == pool && !self.node_job.contains_key(id))
            .map(|(id, _)| *id)
            .collect();
        v.sort();
        v
    }

    /// Periodic work: give nodes to pending jobs, time out the ones that waited too long, and
    /// size launched pools.
    pub fn tick(&mut self, t: &mut impl JobTransport, core: &mut Core, now: Now) -> PoolActions {
        let pending: Vec<u64> = self
            .jobs
            .iter()
            .filter(|(_, r)| r.info.status == status::PENDING)
            .map(|(id, _)| *id)
            .collect();
        for id in pending {
            self.try_start(t, core, id, now);
        }
        let running: Vec<u64> = self
            .jobs
            .iter()
            .filter(|(_, r)| r.info.status == status::RUNNING && r.ending.is_none())
            .filter(|(_, r)| r.up() < r.size)
            .map(|(id, _)| *id)
            .collect();
        for id in running {
            self.replace_lost(t, core, id, now);
            self.check_short(t, core, id, now);
        }
        let ending: Vec<u64> = self
            .jobs
            .iter()
            .filter(|(_, r)| r.ending.is_some() && !status::is_final(&r.info.status))
            .map(|(id, _)| *id)
            .collect();
        for id in ending {
            self.maybe_finish(t, core, id, now);
        }
        self.size_pools(now)
    }

    /// Fails a job that has had fewer than `min_instances` instances up for longer than its
    /// `instance_timeout`.
    fn check_short(&mut self, t: &mut impl JobTransport, core: &mut Core, id: u64, now: Now) {
        let rec = self.jobs.get_mut(&id).expect("running job");
        let spec = rec.info.spec.clone();
        let up = rec.up() as u32;
        if up >= spec.min_instances {
            rec.short_since = None;
            return;
        }
        let timeout = Duration::from_millis(spec.instance_timeout_ms);
        if rec
            .short_since
            .is_some_and(|since| now.at >= since + timeout)
        {
            let message = format!(
                "{}; only {up} instance(s) up, fewer than min_instances ({}), and no node \
                 replaced the lost ones within {}s",
                rec.info.message,
                spec.min_instances,
                fmt_secs(timeout)
            );
            self.end(t, core, id, status::FAILED, message, now);
        }
    }

    /// A running job that lost instances takes free nodes of its pool as new instances, up to
    /// the number it started with. Each gets the next instance index; its worker processes start
    /// (the job's driver, its entrypoint, is already connected) and its tasks run there.
    fn replace_lost(&mut self, t: &mut impl JobTransport, core: &mut Core, id: u64, now: Now) {
        let rec = &self.jobs[&id];
        let spec = rec.info.spec.clone();
        let want = rec.size.saturating_sub(rec.up());
        let free = self.free_nodes(&spec.pool);
        let job = JobId(id);
        for node in free.into_iter().take(want) {
            self.node_job.insert(node, id);
            reactor::on_node_use(core, node, NodeUse::Job(job));
            if let Some(p) = self.pools.get_mut(&spec.pool) {
                p.idle_since.remove(&node);
            }
            let rec = self.jobs.get_mut(&id).expect("running job");
            let k = rec.info.nodes.len() as u32;
            rec.info.nodes.push(node.0);
            rec.info.instances.push(up_instance(k, node));
            let op = JobInstance {
                job: id,
                instance: k,
                num_instances: rec.info.nodes.len() as u32,
                entrypoint: None,
            };
            t.to_node(node, JobNodeOp::Instance(Box::new(op)));
            let cpus = core
                .nodes()
                .iter()
                .find(|n| n.id == node)
                .map(|n| n.total.get("CPU"));
            if let (true, Some(cpus)) = (t.has_driver(job), cpus) {
                let count = (cpus.ceil() as u32).max(1);
                let pool = crate::Pool {
                    job,
                    env: t.task_env(job),
                };
                reactor::on_workers_requested(core, node, pool, count as usize);
                t.to_node(node, JobNodeOp::StartWorkers { job, count });
            }
            let rec = self.jobs.get_mut(&id).expect("running job");
            rec.info.message.push_str(&format!(
                "; node {node} joined as instance {k} at {}",
                clock(now.unix_ms)
            ));
            self.persist(t, id);
        }
    }

    fn try_start(&mut self, t: &mut impl JobTransport, core: &mut Core, id: u64, now: Now) {
        let spec = self.jobs[&id].info.spec.clone();
        let free = self.free_nodes(&spec.pool);
        let (target, min) = (spec.target_instances as usize, spec.min_instances as usize);
        let more_coming = self
            .pools
            .get(&spec.pool)
            .is_some_and(|p| p.could_grow(self));
        let rec = self.jobs.get_mut(&id).expect("pending job");
        let take = if free.len() >= target {
            Some(target)
        } else if free.len() >= min {
            // Start with fewer than the target once nothing more can come (the pool is at its
            // size limit) or the grace wait is over.
            let since = *rec.min_since.get_or_insert(now.at);
            (!more_coming || now.at >= since + self.start_grace).then_some(free.len())
        } else {
            rec.min_since = None;
            None
        };
        if let Some(n) = take {
            let nodes: Vec<NodeId> = free.into_iter().take(n).collect();
            self.start(t, core, id, nodes, now);
            return;
        }
        let timeout = Duration::from_millis(spec.instance_timeout_ms);
        if now.at >= rec.queued_at + timeout {
            rec.info.status = status::FAILED.to_string();
            rec.info.message = format!(
                "Timed out after {}s waiting for {min} instances, only {} available",
                fmt_secs(timeout),
                free.len()
            );
            rec.info.completed_ms = now.unix_ms;
            self.persist(t, id);
        } else {
            let message = waiting(spec.target_instances, free.len());
            if rec.info.message != message {
                rec.info.message = message;
                self.persist(t, id);
            }
        }
    }

    fn start(
        &mut self,
        t: &mut impl JobTransport,
        core: &mut Core,
        id: u64,
        nodes: Vec<NodeId>,
        now: Now,
    ) {
        let job = JobId(id);
        reactor::on_job_restricted(core, job, true);
        for n in &nodes {
            self.node_job.insert(*n, id);
            reactor::on_node_use(core, *n, NodeUse::Job(job));
            if let Some(p) = self
                .node_pool
                .get(n)
                .and_then(|pool| self.pools.get_mut(pool))
            {
                p.idle_since.remove(n);
            }
        }
        let head = self.head_addr.clone();
        let rec = self.jobs.get_mut(&id).expect("job");
        let spec = rec.info.spec.clone();
        rec.info.status = status::RUNNING.to_string();
        rec.info.message = String::new();
        rec.info.started_ms = now.unix_ms;
        rec.info.nodes = nodes.iter().map(|n| n.0).collect();
        rec.size = nodes.len();
        rec.info.instances = nodes
            .iter()
            .enumerate()
            .map(|(k, n)| up_instance(k as u32, *n))
            .collect();
        let num = nodes.len() as u32;
        for (k, node) in nodes.iter().enumerate() {
            let entrypoint = (k == 0).then(|| Entrypoint {
                payload: spec.payload.clone(),
                args: spec.args.clone(),
                env: spec.env.clone(),
                head: head.clone(),
                input: spec.input.clone(),
            });
            let op = JobInstance {
                job: id,
                instance: k as u32,
                num_instances: num,
                entrypoint,
            };
            t.to_node(*node, JobNodeOp::Instance(Box::new(op)));
        }
        self.persist(t, id);
    }

    /// The job `id` (a multi-node job) if `job` is one: the nodes it runs on.
    pub fn nodes_of(&self, job: JobId) -> Option<Vec<NodeId>> {
        let rec = self.jobs.get(&job.0)?;
        Some(rec.info.nodes.iter().map(|n| NodeId(*n)).collect())
    }

    /// Whether `job` is a multi-node job that is running (its entrypoint may connect).
    pub fn is_running(&self, job: JobId) -> bool {
        self.jobs
            .get(&job.0)
            .is_some_and(|r| r.info.status == status::RUNNING)
    }

    /// The instance index of `node` in job `id`.
    pub fn instance_of(&self, id: u64, node: NodeId) -> Option<u32> {
        let rec = self.jobs.get(&id)?;
        rec.info
            .nodes
            .iter()
            .position(|n| *n == node.0)
            .map(|i| i as u32)
    }

    /// The entrypoint of job `id` exited with `code` (or could not start: `error`): the job
    /// ends, DONE on code 0, FAILED with the cause otherwise.
    pub fn on_entrypoint_exit(
        &mut self,
        t: &mut impl JobTransport,
        core: &mut Core,
        id: u64,
        code: i32,
        error: &str,
        now: Now,
    ) {
        let Some(rec) = self.jobs.get_mut(&id) else {
            return;
        };
        if rec.entry_exited {
            return;
        }
        rec.entry_exited = true;
        rec.info.exit_code = Some(code);
        if rec.ending.is_some() || rec.info.status != status::RUNNING {
            // Ending already (cancelled, or failed for another reason): that reason stands.
            self.persist(t, id);
            self.maybe_finish(t, core, id, now);
            return;
        }
        let (state, message) = if !error.is_empty() {
            (
                status::FAILED,
                format!("the entrypoint could not start: {error}"),
            )
        } else if code == 0 {
            (status::DONE, rec.info.message.clone())
        } else {
            let last = t.last_task_failure(JobId(id));
            (status::FAILED, failure_message(rec, code, last))
        };
        self.end(t, core, id, state, message, now);
    }

    /// Ends job `id`: it will be final in `state` with `message` once every instance stopped.
    /// Its tasks are cancelled now and its instances told to stop its processes.
    fn end(
        &mut self,
        t: &mut impl JobTransport,
        core: &mut Core,
        id: u64,
        state: &'static str,
        message: String,
        now: Now,
    ) {
        let Some(rec) = self.jobs.get_mut(&id) else {
            return;
        };
        if rec.ending.is_some() || status::is_final(&rec.info.status) {
            return;
        }
        rec.ending = Some((state, now.at));
        rec.info.message = message;
        reactor::on_job_ended(core, t, JobId(id));
        for n in &rec.info.nodes {
            if !rec.stopped.contains(&NodeId(*n)) {
                t.to_node(NodeId(*n), JobNodeOp::Stop(id));
            }
        }
        self.persist(t, id);
        self.maybe_finish(t, core, id, now);
    }

    /// An instance reports every process of job `id` gone.
    pub fn on_job_stopped(
        &mut self,
        t: &mut impl JobTransport,
        core: &mut Core,
        id: u64,
        node: NodeId,
        now: Now,
    ) {
        if let Some(rec) = self.jobs.get_mut(&id) {
            rec.stopped.insert(node);
        }
        self.maybe_finish(t, core, id, now);
    }

    /// Makes an ending job final once every instance has stopped (or its node is gone, or
    /// [`STOP_TIMEOUT`] passed); its nodes go back to the pool.
    fn maybe_finish(&mut self, t: &mut impl JobTransport, core: &mut Core, id: u64, now: Now) {
        let Some(rec) = self.jobs.get_mut(&id) else {
            return;
        };
        let Some((state, since)) = rec.ending else {
            return;
        };
        if status::is_final(&rec.info.status) {
            return;
        }
        let waiting: Vec<NodeId> = rec
            .info
            .nodes
            .iter()
            .map(|n| NodeId(*n))
            .filter(|n| !rec.stopped.contains(n) && self.node_pool.contains_key(n))
            .collect();
        if !waiting.is_empty() {
            if now.at < since + STOP_TIMEOUT {
                return;
            }
            let list: Vec<String> = waiting.iter().map(|n| n.to_string()).collect();
            rec.info.message.push_str(&format!(
                "; node(s) {} did not report the job's processes stopped within {}s",
                list.join(", "),
                STOP_TIMEOUT.as_secs()
            ));
        }
        rec.info.status = state.to_string();
        rec.info.completed_ms = now.unix_ms;
        for i in &mut rec.info.instances {
            if i.state == instance_state::UP {
                i.state = instance_state::STOPPED.to_string();
            }
        }
        let nodes: Vec<NodeId> = rec.info.nodes.iter().map(|n| NodeId(*n)).collect();
        let job = JobId(id);
        reactor::on_job_restricted(core, job, false);
        t.job_finished(job);
        for n in nodes {
            if self.node_job.get(&n) == Some(&id) {
                self.node_job.remove(&n);
                if let Some(pool) = self.node_pool.get(&n) {
                    reactor::on_node_use(core, n, NodeUse::Reserved);
                    if let Some(p) = self.pools.get_mut(pool) {
                        p.idle_since.insert(n, now.at);
                    }
                }
            }
        }
        self.persist(t, id);
    }

    /// Cancels job `id`: a pending one at once, a running one once its instances stopped.
    pub fn cancel(
        &mut self,
        t: &mut impl JobTransport,
        core: &mut Core,
        id: u64,
        now: Now,
    ) -> Result<JobInfo, JobError> {
        let rec = self.jobs.get_mut(&id).ok_or_else(|| unknown_job(id))?;
        match rec.info.status.as_str() {
            status::PENDING => {
                rec.info.status = status::CANCELLED.to_string();
                rec.info.message = "cancelled before it started".into();
                rec.info.completed_ms = now.unix_ms;
                self.persist(t, id);
            }
            // A job already ending (its entrypoint exited) ends as it was going to.
            status::RUNNING if rec.ending.is_none() => {
                rec.info.status = status::CANCELLING.to_string();
                self.end(t, core, id, status::CANCELLED, "cancelled".into(), now);
            }
            _ => {}
        }
        Ok(self.info(id).expect("exists"))
    }

    /// Removes a job that has ended, with its logs.
    pub fn delete(&mut self, t: &mut impl JobTransport, id: u64) -> Result<(), JobError> {
        let rec = self.jobs.get(&id).ok_or_else(|| unknown_job(id))?;
        if !status::is_final(&rec.info.status) {
            return Err(JobError::Conflict(format!(
                "job {id} is {}; cancel it first",
                rec.info.status
            )));
        }
        self.jobs.remove(&id);
        t.remove_job(id);
        Ok(())
    }

    /// The value or error of job `id`'s `#[starling::job]` function.
    pub fn set_result(
        &mut self,
        t: &mut impl JobTransport,
        id: u64,
        result: Result<Vec<u8>, RemoteError>,
    ) -> Result<(), JobError> {
        let rec = self.jobs.get_mut(&id).ok_or_else(|| unknown_job(id))?;
        match result {
            Ok(v) => t.job_result(id, v),
            Err(e) => {
                rec.info.message = format!("{}: {}", e.type_name, e.message);
                rec.info.error = Some(e);
            }
        }
        self.persist(t, id);
        Ok(())
    }

    /// One job as clients see it.
    pub fn info(&self, id: u64) -> Option<JobInfo> {
        self.jobs.get(&id).map(|r| r.info.clone())
    }

    /// Every job, oldest first.
    pub fn list(&self) -> Vec<JobInfo> {
        self.jobs.values().map(|r| r.info.clone()).collect()
    }

    // ---------------------------------------------------------------------------------------
    // Pools

    /// Creates a pool (or updates its sizes).
    pub fn create_pool(
        &mut self,
        t: &mut impl JobTransport,
        mut spec: PoolSpec,
        can_launch: bool,
    ) -> Result<PoolInfo, JobError> {
        let name = spec.name.trim().to_string();
        if name.is_empty() || name.len() > 64 || name.contains(['/', '\0']) {
            return Err(JobError::Invalid(format!(
                "`{name}` is not a pool name (1-64 characters, no `/`)"
            )));
        }
        if spec.max_nodes > 0 && spec.min_nodes > spec.max_nodes {
            return Err(JobError::Invalid(format!(
                "min_nodes {} exceeds max_nodes {}",
                spec.min_nodes, spec.max_nodes
            )));
        }
        if spec.launched && !can_launch {
            return Err(JobError::Conflict(
                "this head cannot start nodes (no launcher); start it with `starling head`, or \
                 let nodes join with `starling worker --pool NAME`"
                    .into(),
            ));
        }
        if spec.launched && spec.max_nodes == 0 {
            return Err(JobError::Invalid(
                "a pool whose nodes the head starts needs max_nodes".into(),
            ));
        }
        spec.name = name.clone();
        if spec.idle_timeout_ms == 0 {
            spec.idle_timeout_ms = 60_000;
        }
        match self.pools.get_mut(&name) {
            Some(p) => p.spec = spec,
            None => {
                self.pools.insert(name.clone(), PoolRec::new(spec));
            }
        }
        self.persist_pool(t, &name);
        Ok(self.pool_info(&name).expect("just created"))
    }

    /// Deletes a pool whose nodes run no job; its launched nodes are stopped.
    pub fn delete_pool(
        &mut self,
        t: &mut impl JobTransport,
        name: &str,
    ) -> Result<Vec<u32>, JobError> {
        let busy = self
            .jobs
            .values()
            .any(|r| !status::is_final(&r.info.status) && r.info.spec.pool == name);
        if busy {
            return Err(JobError::Conflict(format!(
                "pool `{name}` has jobs that have not ended"
            )));
        }
        let p = self
            .pools
            .remove(name)
            .ok_or_else(|| JobError::NotFound(format!("unknown pool `{name}`")))?;
        t.remove_pool(name);
        Ok(p.launched
            .values()
            .copied()
            .chain(p.starting.iter().map(|(pid, _)| *pid))
            .collect())
    }

    pub fn pool_info(&self, name: &str) -> Option<PoolInfo> {
        let p = self.pools.get(name)?;
        let mut nodes: Vec<u64> = self
            .node_pool
            .iter()
            .filter(|(_, pool)| *pool == name)
            .map(|(id, _)| id.0)
            .collect();
        nodes.sort();
        let busy = nodes
            .iter()
            .filter(|n| self.node_job.contains_key(&NodeId(**n)))
            .count() as u32;
        Some(PoolInfo {
            spec: p.spec.clone(),
            nodes,
            busy,
            starting: p.starting.len() as u32,
        })
    }

    pub fn pools(&self) -> Vec<PoolInfo> {
        self.pools
            .keys()
            .filter_map(|n| self.pool_info(n))
            .collect()
    }

    /// Launched pools: start nodes that pending jobs (or `min_nodes`) need, stop idle ones above
    /// `min_nodes`.
    fn size_pools(&mut self, now: Now) -> PoolActions {
        let mut actions = PoolActions::default();
        let mut demand: HashMap<&str, usize> = HashMap::new();
        for r in self.jobs.values() {
            let spec = &r.info.spec;
            let n = match r.info.status.as_str() {
                status::PENDING => spec.target_instances as usize,
                // A running job keeps its size (a lost instance wants a replacement); an
                // ending one needs only the nodes it still has.
                status::RUNNING if r.ending.is_none() => r.size,
                status::RUNNING | status::CANCELLING => r.up(),
                _ => 0,
            };
            *demand.entry(spec.pool.as_str()).or_default() += n;
        }
        for (name, p) in &mut self.pools {
            if !p.spec.launched {
                continue;
            }
            p.starting
                .retain(|(_, since)| now.at < *since + LAUNCH_TIMEOUT);
            let have = joined(&self.node_pool, name) + p.starting.len();
            let max = p.spec.max_nodes as usize;
            let want = demand
                .get(name.as_str())
                .copied()
                .unwrap_or(0)
                .max(p.spec.min_nodes as usize)
                .min(max);
            for _ in have..want {
                actions.launch.push(p.spec.clone());
            }
            if have > want {
                let idle_timeout = Duration::from_millis(p.spec.idle_timeout_ms);
                let mut extra = have - want;
                let mut idle: Vec<(NodeId, Instant)> = p
                    .idle_since
                    .iter()
                    .filter(|(n, since)| {
                        p.launched.contains_key(n)
                            && !self.node_job.contains_key(n)
                            && now.at >= **since + idle_timeout
                    })
                    .map(|(n, t)| (*n, *t))
                    .collect();
                idle.sort_by_key(|(_, t)| *t);
                for (n, _) in idle {
                    if extra == 0 {
                        break;
                    }
                    if let Some(pid) = p.launched.remove(&n) {
                        p.idle_since.remove(&n);
                        actions.stop.push(pid);
                        extra -= 1;
                    }
                }
            }
        }
        actions
    }

    /// The launcher started `pid` for `pool`.
    pub fn on_launched(&mut self, pool: &str, pid: u32, now: Now) {
        if let Some(p) = self.pools.get_mut(pool) {
            // It may have joined already (its hello can beat this call).
            if !p.launched.values().any(|x| *x == pid) {
                p.starting.push((pid, now.at));
            }
        }
    }

    /// Output of `node`'s instance of job `id`: the instance it belongs to (the head appends
    /// it to that instance's log, after its lock). Instance 0's standard error lines are also
    /// kept, the last few, for the job's message.
    pub fn on_log(&mut self, id: u64, node: NodeId, data: &[u8]) -> Option<u32> {
        let k = self.instance_of(id, node)?;
        if k == 0 {
            let rec = self.jobs.get_mut(&id)?;
            for line in String::from_utf8_lossy(data).lines() {
                let Some((_, text)) = line.split_once("err|") else {
                    continue;
                };
                if text.contains(" panicked at ") {
                    rec.stderr_tail.clear();
                    rec.stderr_panic = true;
                } else if rec.stderr_tail.len() == STDERR_TAIL_LINES {
                    if rec.stderr_panic {
                        continue;
                    }
                    rec.stderr_tail.pop_front();
                }
                rec.stderr_tail.push_back(text.chars().take(500).collect());
            }
        }
        Some(k)
    }

    /// Whether job `id` has ended (its logs are complete).
    pub fn has_ended(&self, id: u64) -> Option<bool> {
        self.jobs.get(&id).map(|r| status::is_final(&r.info.status))
    }
}

impl PoolRec {
    fn new(spec: PoolSpec) -> Self {
        PoolRec {
            spec,
            starting: Vec::new(),
            launched: HashMap::new(),
            idle_since: HashMap::new(),
        }
    }
}

impl PoolRec {
    /// Whether more nodes may still join: pools below `max_nodes` (every pool of self-joining
    /// nodes without one, whose size nobody knows) or with launched nodes still starting.
    fn could_grow(&self, jobs: &Jobs) -> bool {
        self.spec.max_nodes == 0
            || joined(&jobs.node_pool, &self.spec.name) < self.spec.max_nodes as usize
            || !self.starting.is_empty()
    }
}

/// How many nodes of pool `name` are attached now.
fn joined(node_pool: &HashMap<NodeId, String>, name: &str) -> usize {
    node_pool.values().filter(|p| *p == name).count()
}

/// A pool nobody created: nodes joined it by name. It has no size limit.
fn external_pool(name: &str) -> PoolSpec {
    PoolSpec {
        name: name.to_string(),
        idle_timeout_ms: 60_000,
        ..Default::default()
    }
}

fn waiting(target: u32, free: usize) -> String {
    format!("waiting for {target} instances, {free} available")
}

fn fmt_secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}", s as u64)
    } else {
        format!("{s:.1}")
    }
}

fn unknown_job(id: u64) -> JobError {
    JobError::NotFound(format!("unknown job {id}"))
}

fn up_instance(index: u32, node: NodeId) -> InstanceState {
    InstanceState {
        index,
        node: node.0,
        state: instance_state::UP.to_string(),
        ..Default::default()
    }
}

/// `HH:MM:SS UTC` of a Unix time in milliseconds.
fn clock(ms: u64) -> String {
    let s = ms / 1000 % 86_400;
    format!("{:02}:{:02}:{:02} UTC", s / 3600, s / 60 % 60, s % 60)
}

/// `code` as a node agent reports it: an exit code, or minus the signal that killed the process.
pub fn describe_exit(code: i32) -> String {
    match code {
        c if c >= 0 => format!("exited with code {c}"),
        c => {
            let name = match -c {
                6 => " (SIGABRT: abort, e.g. a panic with panic = \"abort\")",
                9 => " (SIGKILL: killed, e.g. by the out-of-memory killer)",
                11 => " (SIGSEGV: invalid memory access)",
                15 => " (SIGTERM)",
                _ => "",
            };
            format!("was killed by signal {}{name}", -c)
        }
    }
}

/// Why a job whose entrypoint exited with `code` failed: the `#[starling::job]` function's
/// error if it reported one; else the exit, the last task failure of the job (`last`, which
/// is often what made the entrypoint give up), and the last lines of instance 0's stderr.
fn failure_message(rec: &JobRec, code: i32, last: Option<String>) -> String {
    if let Some(e) = &rec.info.error {
        return format!("{}: {}", e.type_name, e.message);
    }
    let mut m = format!("the entrypoint {}", describe_exit(code));
    if let Some(f) = last {
        m += &format!("; the job's last task failure: {f}");
    }
    if !rec.stderr_tail.is_empty() {
        m += "\nlast lines of stderr:";
        for l in &rec.stderr_tail {
            m += "\n  ";
            m += l;
        }
    }
    m
}
