//! Multi-node jobs and compute pools, as the head runs them.
//!
//! A compute pool is a named set of nodes (`starling worker --pool NAME`, or started by the
//! head's [`Launcher`]). A job submitted to a pool waits (PENDING) until enough of the pool's
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
//! - Every change of a job is written to `data_dir/jobs/<id>/job.pb` before it is visible to
//!   clients; instance logs are appended to `instance-<k>.log` beside it. A head that restarts
//!   lists finished jobs with their logs; jobs it found unfinished are marked FAILED with the
//!   message "head restarted".
//! - Everything here runs under the head's lock and does no blocking I/O except small file
//!   writes of the job table; processes are started and stopped by the caller, after the lock.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use prost::Message;
use starling_proto::pb::{self, head_to_node_op, job_result};
use starling_proto::{JobId, NodeId};
use tonic::Status;

use super::state::Outbox;
use starling_scheduler::NodeUse;
use starling_scheduler::{reactor, Core};

/// Job states, as clients see them.
pub mod status {
    /// Waiting for nodes.
    pub const PENDING: &str = "PENDING";
    /// The entrypoint runs.
    pub const RUNNING: &str = "RUNNING";
    /// The entrypoint exited with code 0 and every instance stopped.
    pub const DONE: &str = "DONE";
    /// The entrypoint failed, could not start, or the job could not get its instances.
    pub const FAILED: &str = "FAILED";
    /// Cancelled; its instances are stopping.
    pub const CANCELLING: &str = "CANCELLING";
    /// Cancelled, and every process of it is gone.
    pub const CANCELLED: &str = "CANCELLED";

    /// Whether a job in state `s` has ended.
    pub fn is_final(s: &str) -> bool {
        matches!(s, DONE | FAILED | CANCELLED)
    }
}

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

/// Instance states, as clients see them.
pub mod instance_state {
    /// Its node serves the job.
    pub const UP: &str = "UP";
    /// Its node was lost while the job ran.
    pub const LOST: &str = "LOST";
    /// The job ended and the instance's processes are gone.
    pub const STOPPED: &str = "STOPPED";
}

/// The most words a payload's command may have.
const MAX_COMMAND_WORDS: usize = 64;

/// The longest job name accepted.
const MAX_NAME_BYTES: usize = 256;

/// How long a launched node may take to join before it no longer counts as starting.
const LAUNCH_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts and stops node agents for the pools the head launches itself. The first
/// implementation starts `starling worker` processes on the head's machine.
pub trait Launcher: Send + Sync {
    /// Starts one node agent that joins `pool` at the head `head`; returns its process id.
    fn launch(&self, head: &str, pool: &pb::PoolSpec) -> Result<u32, String>;
    /// Stops the node agent with process id `pid` (one this launcher started).
    fn stop(&self, pid: u32);
}

/// What the caller does after the lock is released.
#[derive(Debug, Default)]
#[must_use = "launches and stops are lost unless performed"]
pub(crate) struct PoolActions {
    /// Start one node for each of these pools.
    pub launch: Vec<pb::PoolSpec>,
    /// Stop these launched node agents.
    pub stop: Vec<u32>,
}

struct JobRec {
    info: pb::JobInfo,
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
    fn new(info: pb::JobInfo, ended: bool) -> Self {
        JobRec {
            info,
            queued_at: Instant::now(),
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

    fn instance_mut(&mut self, node: NodeId) -> Option<&mut pb::InstanceState> {
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
    spec: pb::PoolSpec,
    /// Launched agents that have not joined yet: pid and when they were started.
    starting: Vec<(u32, Instant)>,
    /// Launched agents that joined: node -> pid.
    launched: HashMap<NodeId, u32>,
    idle_since: HashMap<NodeId, Instant>,
}

/// The job table and the pools.
pub(crate) struct Jobs {
    dir: PathBuf,
    pool_dir: PathBuf,
    jobs: BTreeMap<u64, JobRec>,
    pools: BTreeMap<String, PoolRec>,
    /// Which job each allocated node serves.
    node_job: HashMap<NodeId, u64>,
    /// The pid of each node's agent (from its hello).
    node_pid: HashMap<NodeId, u32>,
    /// The head's address, given to entrypoints.
    pub head_addr: String,
    /// See [`START_GRACE`].
    pub start_grace: Duration,
    /// Where its file writes go: a thread of their own, never under the head's lock.
    files: super::files::Files,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The message of a job that was unfinished when the head restarted (it is FAILED).
pub const HEAD_RESTARTED: &str = "head restarted";

impl Jobs {
    /// Loads the job table and pools kept under `data_dir`. Jobs that had not ended are marked
    /// FAILED with the message [`HEAD_RESTARTED`]: their processes did not survive the head.
    pub fn load(data_dir: &Path) -> std::io::Result<(Jobs, u64)> {
        let dir = data_dir.join("jobs");
        let pool_dir = data_dir.join("pools");
        for d in [&dir, &pool_dir] {
            starling_proto::dirs::ensure_dir(d).map_err(std::io::Error::other)?;
        }
        let mut jobs = Jobs {
            dir,
            pool_dir,
            jobs: BTreeMap::new(),
            pools: BTreeMap::new(),
            node_job: HashMap::new(),
            node_pid: HashMap::new(),
            head_addr: String::new(),
            start_grace: START_GRACE,
            files: super::files::Files::start(),
        };
        let mut max_id = 0;
        for entry in std::fs::read_dir(&jobs.dir)?.flatten() {
            let Ok(bytes) = std::fs::read(entry.path().join("job.pb")) else {
                continue;
            };
            let Ok(mut info) = pb::JobInfo::decode(bytes.as_slice()) else {
                continue;
            };
            max_id = max_id.max(info.id);
            let mut changed = false;
            if !status::is_final(&info.status) {
                // The exact words are part of the contract: clients match on them.
                info.message = HEAD_RESTARTED.to_string();
                info.status = status::FAILED.to_string();
                info.completed_ms = now_ms();
                changed = true;
            }
            let rec = JobRec::new(info, true);
            let id = rec.info.id;
            jobs.jobs.insert(id, rec);
            if changed {
                jobs.persist(id);
            }
        }
        for entry in std::fs::read_dir(&jobs.pool_dir)?.flatten() {
            let Ok(bytes) = std::fs::read(entry.path()) else {
                continue;
            };
            if let Ok(spec) = pb::PoolSpec::decode(bytes.as_slice()) {
                jobs.pools.insert(spec.name.clone(), PoolRec::new(spec));
            }
        }
        Ok((jobs, max_id))
    }

    fn job_dir(&self, id: u64) -> PathBuf {
        self.dir.join(id.to_string())
    }

    /// Where instance `instance`'s log of job `id` is kept.
    pub fn log_path(&self, id: u64, instance: u32) -> PathBuf {
        self.job_dir(id).join(format!("instance-{instance}.log"))
    }

    fn persist(&self, id: u64) {
        let Some(rec) = self.jobs.get(&id) else {
            return;
        };
        // Queued, in order, for the file thread: the lock is never held over a write. A
        // failed write is retried on the job's next change.
        self.files
            .write(self.job_dir(id).join("job.pb"), rec.info.encode_to_vec());
    }

    fn persist_pool(&self, name: &str) {
        if let Some(p) = self.pools.get(name) {
            self.files.write(
                self.pool_dir.join(format!("{}.pb", hex(name))),
                p.spec.encode_to_vec(),
            );
        }
    }

    /// A handle on the table's file thread: [`Files::flush`](super::files::Files::flush) it,
    /// outside the lock, before reading a file the table writes.
    pub(crate) fn files(&self) -> super::files::Files {
        self.files.clone()
    }

    /// A node joined: remember its agent's pid; a node of a named pool waits for a job.
    pub fn on_node_added(&mut self, core: &mut Core, node: NodeId, pool: &str, pid: u32) {
        self.node_pid.insert(node, pid);
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
        p.idle_since.insert(node, Instant::now());
    }

    /// A node left (or was declared dead) for reason `why`. Losing instance 0 ends its job;
    /// losing another instance is recorded and the job goes on, unless too few remain.
    pub fn on_node_lost(&mut self, out: &mut Outbox, core: &mut Core, node: NodeId, why: &str) {
        self.node_pid.remove(&node);
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
            clock(now_ms())
        );
        if let Some(i) = rec.instance_mut(node) {
            i.state = instance_state::LOST.to_string();
            i.lost_ms = now_ms();
            i.reason = why.to_string();
        }
        if rec.ending.is_some() {
            self.persist(id);
            self.maybe_finish(out, core, id);
            return;
        }
        let spec = rec.info.spec.clone().unwrap_or_default();
        let failures = rec
            .info
            .instances
            .iter()
            .filter(|i| i.state == instance_state::LOST)
            .count() as u32;
        let up = rec.up() as u32;
        let replaceable = self.could_replace(out, &spec.pool);
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
                rec.short_since.get_or_insert_with(Instant::now);
            }
            None
        };
        match fail {
            Some(message) => self.end(out, core, id, status::FAILED, message),
            None => {
                let rec = self.jobs.get_mut(&id).expect("present");
                if !rec.info.message.is_empty() {
                    rec.info.message.push_str("; ");
                }
                rec.info.message.push_str(&lost);
                self.persist(id);
            }
        }
    }

    /// Whether a lost instance of a job on `pool` can be replaced: a node of the pool is free,
    /// or may still join.
    fn could_replace(&self, out: &Outbox, pool: &str) -> bool {
        !self.free_nodes(out, pool).is_empty()
            || self.pools.get(pool).is_some_and(|p| p.could_grow(out))
    }

    /// Validates and queues a job.
    pub fn submit(
        &mut self,
        out: &Outbox,
        id: u64,
        mut spec: pb::JobSpec,
    ) -> Result<pb::JobInfo, Status> {
        let refuse = |m: String| Err(Status::invalid_argument(m));
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
            return Err(Status::not_found(format!(
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
        let payload = spec.payload.clone().unwrap_or_default();
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
        let free = self.free_nodes(out, &spec.pool).len();
        let info = pb::JobInfo {
            id,
            message: waiting(spec.target_instances, free),
            spec: Some(spec),
            status: status::PENDING.to_string(),
            created_ms: now_ms(),
            ..Default::default()
        };
        self.jobs.insert(id, JobRec::new(info.clone(), false));
        self.persist(id);
        Ok(info)
    }

    /// Alive, unallocated nodes of `pool`, in id order.
    fn free_nodes(&self, out: &Outbox, pool: &str) -> Vec<NodeId> {
        let mut v: Vec<NodeId> = out
            .nodes
            .iter()
            .filter(|(id, n)| n.pool == pool && !self.node_job.contains_key(id))
            .map(|(id, _)| *id)
            .collect();
        v.sort();
        v
    }

    /// Periodic work: give nodes to pending jobs, time out the ones that waited too long, and
    /// size launched pools.
    pub fn tick(&mut self, out: &mut Outbox, core: &mut Core) -> PoolActions {
        let pending: Vec<u64> = self
            .jobs
            .iter()
            .filter(|(_, r)| r.info.status == status::PENDING)
            .map(|(id, _)| *id)
            .collect();
        for id in pending {
            self.try_start(out, core, id);
        }
        let running: Vec<u64> = self
            .jobs
            .iter()
            .filter(|(_, r)| r.info.status == status::RUNNING && r.ending.is_none())
            .filter(|(_, r)| r.up() < r.size)
            .map(|(id, _)| *id)
            .collect();
        for id in running {
            self.replace_lost(out, core, id);
            self.check_short(out, core, id);
        }
        let ending: Vec<u64> = self
            .jobs
            .iter()
            .filter(|(_, r)| r.ending.is_some() && !status::is_final(&r.info.status))
            .map(|(id, _)| *id)
            .collect();
        for id in ending {
            self.maybe_finish(out, core, id);
        }
        self.size_pools(out)
    }

    /// Fails a job that has had fewer than `min_instances` instances up for longer than its
    /// `instance_timeout`.
    fn check_short(&mut self, out: &mut Outbox, core: &mut Core, id: u64) {
        let rec = self.jobs.get_mut(&id).expect("running job");
        let spec = rec.info.spec.clone().unwrap_or_default();
        let up = rec.up() as u32;
        if up >= spec.min_instances {
            rec.short_since = None;
            return;
        }
        let timeout = Duration::from_millis(spec.instance_timeout_ms);
        if rec.short_since.is_some_and(|t| t.elapsed() >= timeout) {
            let message = format!(
                "{}; only {up} instance(s) up, fewer than min_instances ({}), and no node \
                 replaced the lost ones within {}s",
                rec.info.message,
                spec.min_instances,
                fmt_secs(timeout)
            );
            self.end(out, core, id, status::FAILED, message);
        }
    }

    /// A running job that lost instances takes free nodes of its pool as new instances, up to
    /// the number it started with. Each gets the next instance index; its worker processes start
    /// (the job's driver, its entrypoint, is already connected) and its tasks run there.
    fn replace_lost(&mut self, out: &mut Outbox, core: &mut Core, id: u64) {
        let rec = &self.jobs[&id];
        let spec = rec.info.spec.clone().unwrap_or_default();
        let want = rec.size.saturating_sub(rec.up());
        let free = self.free_nodes(out, &spec.pool);
        let job = JobId(id);
        for node in free.into_iter().take(want) {
            self.node_job.insert(node, id);
            reactor::on_node_use(core, node, NodeUse::Job(job));
            if let Some(p) = out
                .nodes
                .get(&node)
                .and_then(|c| self.pools.get_mut(&c.pool))
            {
                p.idle_since.remove(&node);
            }
            let rec = self.jobs.get_mut(&id).expect("running job");
            let k = rec.info.nodes.len() as u32;
            rec.info.nodes.push(node.0);
            rec.info.instances.push(up_instance(k, node));
            let op = pb::JobInstance {
                job: id,
                instance: k,
                num_instances: rec.info.nodes.len() as u32,
                entrypoint: None,
            };
            out.queue_node(node, head_to_node_op::Kind::JobInstance(op));
            let build = out.jobs.get(&job).map(|j| j.build.clone());
            if let (Some(build), Some(n)) = (build, core.nodes().iter().find(|n| n.id == node)) {
                let count = (n.total.get("CPU").ceil() as u32).max(1);
                reactor::on_workers_requested(core, node, job, count as usize);
                let start = pb::StartWorkers {
                    job: id,
                    build,
                    count,
                };
                out.queue_node(node, head_to_node_op::Kind::StartWorkers(start));
            }
            let rec = self.jobs.get_mut(&id).expect("running job");
            rec.info.message.push_str(&format!(
                "; node {node} joined as instance {k} at {}",
                clock(now_ms())
            ));
            self.persist(id);
        }
    }

    fn try_start(&mut self, out: &mut Outbox, core: &mut Core, id: u64) {
        let spec = self.jobs[&id].info.spec.clone().unwrap_or_default();
        let free = self.free_nodes(out, &spec.pool);
        let (target, min) = (spec.target_instances as usize, spec.min_instances as usize);
        let more_coming = self
            .pools
            .get(&spec.pool)
            .is_some_and(|p| p.could_grow(out));
        let rec = self.jobs.get_mut(&id).expect("pending job");
        let take = if free.len() >= target {
            Some(target)
        } else if free.len() >= min {
            // Start with fewer than the target once nothing more can come (the pool is at its
            // size limit) or the grace wait is over.
            let since = *rec.min_since.get_or_insert_with(Instant::now);
            (!more_coming || since.elapsed() >= self.start_grace).then_some(free.len())
        } else {
            rec.min_since = None;
            None
        };
        if let Some(n) = take {
            let nodes: Vec<NodeId> = free.into_iter().take(n).collect();
            self.start(out, core, id, nodes);
            return;
        }
        let timeout = Duration::from_millis(spec.instance_timeout_ms);
        if rec.queued_at.elapsed() >= timeout {
            rec.info.status = status::FAILED.to_string();
            rec.info.message = format!(
                "Timed out after {}s waiting for {min} instances, only {} available",
                fmt_secs(timeout),
                free.len()
            );
            rec.info.completed_ms = now_ms();
            self.persist(id);
        } else {
            let message = waiting(spec.target_instances, free.len());
            if rec.info.message != message {
                rec.info.message = message;
                self.persist(id);
            }
        }
    }

    fn start(&mut self, out: &mut Outbox, core: &mut Core, id: u64, nodes: Vec<NodeId>) {
        let job = JobId(id);
        reactor::on_job_restricted(core, job, true);
        for n in &nodes {
            self.node_job.insert(*n, id);
            reactor::on_node_use(core, *n, NodeUse::Job(job));
            if let Some(p) = out.nodes.get(n).and_then(|c| self.pools.get_mut(&c.pool)) {
                p.idle_since.remove(n);
            }
        }
        let head = self.head_addr.clone();
        let rec = self.jobs.get_mut(&id).expect("job");
        let spec = rec.info.spec.clone().unwrap_or_default();
        rec.info.status = status::RUNNING.to_string();
        rec.info.message = String::new();
        rec.info.started_ms = now_ms();
        rec.info.nodes = nodes.iter().map(|n| n.0).collect();
        rec.size = nodes.len();
        rec.info.instances = nodes
            .iter()
            .enumerate()
            .map(|(k, n)| up_instance(k as u32, *n))
            .collect();
        let num = nodes.len() as u32;
        for (k, node) in nodes.iter().enumerate() {
            let entrypoint = (k == 0).then(|| pb::Entrypoint {
                payload: spec.payload.clone(),
                args: spec.args.clone(),
                env: spec.env.clone(),
                head: head.clone(),
                input: spec.input.clone(),
            });
            let op = pb::JobInstance {
                job: id,
                instance: k as u32,
                num_instances: num,
                entrypoint,
            };
            out.queue_node(*node, head_to_node_op::Kind::JobInstance(op));
        }
        self.persist(id);
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
        out: &mut Outbox,
        core: &mut Core,
        id: u64,
        code: i32,
        error: &str,
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
            self.persist(id);
            self.maybe_finish(out, core, id);
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
            let last = out
                .last_failure
                .get(&JobId(id))
                .map(|f| f.root().to_string());
            (status::FAILED, failure_message(rec, code, last))
        };
        self.end(out, core, id, state, message);
    }

    /// Ends job `id`: it will be final in `state` with `message` once every instance stopped.
    /// Its tasks are cancelled now and its instances told to stop its processes.
    fn end(
        &mut self,
        out: &mut Outbox,
        core: &mut Core,
        id: u64,
        state: &'static str,
        message: String,
    ) {
        let Some(rec) = self.jobs.get_mut(&id) else {
            return;
        };
        if rec.ending.is_some() || status::is_final(&rec.info.status) {
            return;
        }
        rec.ending = Some((state, Instant::now()));
        rec.info.message = message;
        reactor::on_job_ended(core, out, JobId(id));
        for n in &rec.info.nodes {
            if !rec.stopped.contains(&NodeId(*n)) {
                out.queue_node(NodeId(*n), head_to_node_op::Kind::StopJob(id));
            }
        }
        self.persist(id);
        self.maybe_finish(out, core, id);
    }

    /// An instance reports every process of job `id` gone.
    pub fn on_job_stopped(&mut self, out: &mut Outbox, core: &mut Core, id: u64, node: NodeId) {
        if let Some(rec) = self.jobs.get_mut(&id) {
            rec.stopped.insert(node);
        }
        self.maybe_finish(out, core, id);
    }

    /// Makes an ending job final once every instance has stopped (or its node is gone, or
    /// [`STOP_TIMEOUT`] passed); its nodes go back to the pool.
    fn maybe_finish(&mut self, out: &mut Outbox, core: &mut Core, id: u64) {
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
            .filter(|n| !rec.stopped.contains(n) && out.nodes.contains_key(n))
            .collect();
        if !waiting.is_empty() {
            if since.elapsed() < STOP_TIMEOUT {
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
        rec.info.completed_ms = now_ms();
        for i in &mut rec.info.instances {
            if i.state == instance_state::UP {
                i.state = instance_state::STOPPED.to_string();
            }
        }
        let nodes: Vec<NodeId> = rec.info.nodes.iter().map(|n| NodeId(*n)).collect();
        let job = JobId(id);
        reactor::on_job_restricted(core, job, false);
        out.remove_job(job);
        for n in nodes {
            if self.node_job.get(&n) == Some(&id) {
                self.node_job.remove(&n);
                if let Some(conn) = out.nodes.get(&n) {
                    reactor::on_node_use(core, n, NodeUse::Reserved);
                    if let Some(p) = self.pools.get_mut(&conn.pool) {
                        p.idle_since.insert(n, Instant::now());
                    }
                }
            }
        }
        self.persist(id);
    }

    /// Cancels job `id`: a pending one at once, a running one once its instances stopped.
    pub fn cancel(
        &mut self,
        out: &mut Outbox,
        core: &mut Core,
        id: u64,
    ) -> Result<pb::JobInfo, Status> {
        let rec = self.jobs.get_mut(&id).ok_or_else(|| unknown_job(id))?;
        match rec.info.status.as_str() {
            status::PENDING => {
                rec.info.status = status::CANCELLED.to_string();
                rec.info.message = "cancelled before it started".into();
                rec.info.completed_ms = now_ms();
                self.persist(id);
            }
            // A job already ending (its entrypoint exited) ends as it was going to.
            status::RUNNING if rec.ending.is_none() => {
                rec.info.status = status::CANCELLING.to_string();
                self.end(out, core, id, status::CANCELLED, "cancelled".into());
            }
            _ => {}
        }
        Ok(self.info(id).expect("exists"))
    }

    /// Removes a job that has ended, with its logs.
    pub fn delete(&mut self, id: u64) -> Result<(), Status> {
        let rec = self.jobs.get(&id).ok_or_else(|| unknown_job(id))?;
        if !status::is_final(&rec.info.status) {
            return Err(Status::failed_precondition(format!(
                "job {id} is {}; cancel it first",
                rec.info.status
            )));
        }
        self.jobs.remove(&id);
        self.files.remove_dir(self.job_dir(id));
        Ok(())
    }

    /// A #[starling::job] function's value or error.
    pub fn set_result(&mut self, r: pb::JobResult) -> Result<(), Status> {
        let id = r.job;
        let rec = self.jobs.get_mut(&id).ok_or_else(|| unknown_job(id))?;
        match r.kind {
            Some(job_result::Kind::Value(v)) => {
                self.files
                    .write(self.dir.join(id.to_string()).join("result.bin"), v);
            }
            Some(job_result::Kind::Error(e)) => {
                rec.info.message = format!("{}: {}", e.type_name, e.message);
                rec.info.error = Some(e);
            }
            None => {
                return Err(Status::invalid_argument(
                    "a job result needs a value or error",
                ))
            }
        }
        self.persist(id);
        Ok(())
    }

    /// The stored value of a #[starling::job] function, if it reported one.
    pub fn result_path(&self, id: u64) -> PathBuf {
        self.job_dir(id).join("result.bin")
    }

    /// One job as clients see it.
    pub fn info(&self, id: u64) -> Option<pb::JobInfo> {
        self.jobs.get(&id).map(|r| r.info.clone())
    }

    /// Every job, oldest first.
    pub fn list(&self) -> Vec<pb::JobInfo> {
        self.jobs.values().map(|r| r.info.clone()).collect()
    }

    // ---------------------------------------------------------------------------------------
    // Pools

    /// Creates a pool (or updates its sizes).
    pub fn create_pool(
        &mut self,
        out: &Outbox,
        mut spec: pb::PoolSpec,
        can_launch: bool,
    ) -> Result<pb::PoolInfo, Status> {
        let name = spec.name.trim().to_string();
        if name.is_empty() || name.len() > 64 || name.contains(['/', '\0']) {
            return Err(Status::invalid_argument(format!(
                "`{name}` is not a pool name (1-64 characters, no `/`)"
            )));
        }
        if spec.max_nodes > 0 && spec.min_nodes > spec.max_nodes {
            return Err(Status::invalid_argument(format!(
                "min_nodes {} exceeds max_nodes {}",
                spec.min_nodes, spec.max_nodes
            )));
        }
        if spec.launched && !can_launch {
            return Err(Status::failed_precondition(
                "this head cannot start nodes (no launcher); start it with `starling head`, or \
                 let nodes join with `starling worker --pool NAME`",
            ));
        }
        if spec.launched && spec.max_nodes == 0 {
            return Err(Status::invalid_argument(
                "a pool whose nodes the head starts needs max_nodes",
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
        self.persist_pool(&name);
        Ok(self.pool_info(out, &name).expect("just created"))
    }

    /// Deletes a pool whose nodes run no job; its launched nodes are stopped.
    pub fn delete_pool(&mut self, name: &str) -> Result<Vec<u32>, Status> {
        let busy = self.jobs.values().any(|r| {
            !status::is_final(&r.info.status)
                && r.info.spec.as_ref().is_some_and(|s| s.pool == name)
        });
        if busy {
            return Err(Status::failed_precondition(format!(
                "pool `{name}` has jobs that have not ended"
            )));
        }
        let p = self
            .pools
            .remove(name)
            .ok_or_else(|| Status::not_found(format!("unknown pool `{name}`")))?;
        self.files
            .remove_file(self.pool_dir.join(format!("{}.pb", hex(name))));
        Ok(p.launched
            .values()
            .copied()
            .chain(p.starting.iter().map(|(pid, _)| *pid))
            .collect())
    }

    pub fn pool_info(&self, out: &Outbox, name: &str) -> Option<pb::PoolInfo> {
        let p = self.pools.get(name)?;
        let mut nodes: Vec<u64> = out
            .nodes
            .iter()
            .filter(|(_, n)| n.pool == name)
            .map(|(id, _)| id.0)
            .collect();
        nodes.sort();
        let busy = nodes
            .iter()
            .filter(|n| self.node_job.contains_key(&NodeId(**n)))
            .count() as u32;
        Some(pb::PoolInfo {
            spec: Some(p.spec.clone()),
            nodes,
            busy,
            starting: p.starting.len() as u32,
        })
    }

    pub fn pools(&self, out: &Outbox) -> Vec<pb::PoolInfo> {
        self.pools
            .keys()
            .filter_map(|n| self.pool_info(out, n))
            .collect()
    }

    /// Launched pools: start nodes that pending jobs (or `min_nodes`) need, stop idle ones above
    /// `min_nodes`.
    fn size_pools(&mut self, out: &Outbox) -> PoolActions {
        let mut actions = PoolActions::default();
        let mut demand: HashMap<&str, usize> = HashMap::new();
        for r in self.jobs.values() {
            let Some(spec) = &r.info.spec else { continue };
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
                .retain(|(_, since)| since.elapsed() < LAUNCH_TIMEOUT);
            let have = p.joined(out) + p.starting.len();
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
                            && since.elapsed() >= idle_timeout
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
    pub fn on_launched(&mut self, pool: &str, pid: u32) {
        if let Some(p) = self.pools.get_mut(pool) {
            // It may have joined already (its hello can beat this call).
            if !p.launched.values().any(|x| *x == pid) {
                p.starting.push((pid, Instant::now()));
            }
        }
    }

    /// Output of `node`'s instance of job `id`: the file it is appended to (after the lock).
    /// Instance 0's standard error lines are also kept, the last few, for the job's message.
    pub fn on_log(&mut self, id: u64, node: NodeId, data: &[u8]) -> Option<PathBuf> {
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
        Some(self.log_path(id, k))
    }

    /// Whether job `id` has ended (its logs are complete).
    pub fn has_ended(&self, id: u64) -> Option<bool> {
        self.jobs.get(&id).map(|r| status::is_final(&r.info.status))
    }
}

impl PoolRec {
    fn new(spec: pb::PoolSpec) -> Self {
        PoolRec {
            spec,
            starting: Vec::new(),
            launched: HashMap::new(),
            idle_since: HashMap::new(),
        }
    }
}

impl PoolRec {
    /// How many nodes of the pool are attached now.
    fn joined(&self, out: &Outbox) -> usize {
        out.nodes
            .values()
            .filter(|n| n.pool == self.spec.name)
            .count()
    }

    /// Whether more nodes may still join: pools below `max_nodes` (every pool of self-joining
    /// nodes without one, whose size nobody knows) or with launched nodes still starting.
    fn could_grow(&self, out: &Outbox) -> bool {
        self.spec.max_nodes == 0
            || self.joined(out) < self.spec.max_nodes as usize
            || !self.starting.is_empty()
    }
}

/// A pool nobody created: nodes joined it by name. It has no size limit.
fn external_pool(name: &str) -> pb::PoolSpec {
    pb::PoolSpec {
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

fn unknown_job(id: u64) -> Status {
    Status::not_found(format!("unknown job {id}"))
}

fn hex(s: &str) -> String {
    s.bytes().map(|b| format!("{b:02x}")).collect()
}

fn up_instance(index: u32, node: NodeId) -> pb::InstanceState {
    pb::InstanceState {
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
pub(crate) fn describe_exit(code: i32) -> String {
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

/// Checks that a job's payload was uploaded and, for a directory, that its entrypoint is in it
/// and can run. It reads the payload's archive, so the head calls it before taking its lock;
/// [`Jobs::submit`] checks the rest.
#[allow(clippy::result_large_err)]
pub(crate) fn check_payload(spec: &pb::JobSpec, bin_dir: &Path) -> Result<(), Status> {
    let refuse = |why: String| Err(Status::invalid_argument(why));
    let payload = spec.payload.clone().unwrap_or_default();
    match &payload.kind {
        Some(pb::payload::Kind::Binary(b)) => {
            if !starling_proto::is_build_id(b) || !bin_dir.join(b).is_file() {
                return refuse(format!("payload binary {b} was not uploaded"));
            }
        }
        Some(pb::payload::Kind::Directory(d)) => {
            if !starling_proto::is_build_id(d) || !bin_dir.join(d).is_file() {
                return refuse(format!("payload directory {d} was not uploaded"));
            }
            check_entrypoint(&bin_dir.join(d), &payload.entrypoint, &payload.command)
                .map_err(Status::invalid_argument)?;
        }
        None => return refuse("a job needs a payload".into()),
    }
    Ok(())
}

/// Refuses a directory payload whose entrypoint is missing, or not executable when no
/// command runs it.
fn check_entrypoint(archive: &Path, entrypoint: &str, command: &[String]) -> Result<(), String> {
    if entrypoint.is_empty() {
        if command.is_empty() {
            return Err("a directory payload needs an entrypoint or a command".into());
        }
        return Ok(());
    }
    let bytes = std::fs::read(archive).map_err(|e| format!("cannot read the payload: {e}"))?;
    let dir = pb::DirArchive::decode(bytes.as_slice())
        .map_err(|_| "the payload directory is not a valid archive".to_string())?;
    for f in &dir.files {
        starling_proto::wire::check_archive_path(&f.path).map_err(|e| e.0)?;
    }
    let want = entrypoint.trim_start_matches("./");
    starling_proto::wire::check_archive_path(want).map_err(|e| format!("entrypoint: {}", e.0))?;
    match dir.files.iter().find(|f| f.path == want) {
        None => Err(format!("entrypoint `{entrypoint}` is not in the directory")),
        Some(f) if f.mode & 0o111 == 0 && command.is_empty() => {
            Err(format!("entrypoint `{entrypoint}` is not executable"))
        }
        Some(_) => Ok(()),
    }
}

/// Appends log bytes; best effort (a full disk must not stop the head).
pub(crate) fn append_log(path: &Path, data: &[u8]) {
    if let Some(dir) = path.parent() {
        let _ = starling_proto::dirs::create_dir(dir);
    }
    if let Ok(mut f) = starling_proto::dirs::append_file(path) {
        let _ = f.write_all(data);
    }
}

#[cfg(test)]
mod tests {
    //! Submit validation against random and hostile job specs: every spec is either refused
    //! with a clear status or accepted as a job that can run.

    use super::*;
    use starling_proto::fuzz::{self, Rng};

    // Payload ids are build ids: the SHA-256 of the bytes, in lowercase hex.
    const BINARY: &str = "00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff";
    const DIRECTORY: &str = "0a0b0c0d0a0b0c0d0a0b0c0d0a0b0c0d0a0b0c0d0a0b0c0d0a0b0c0d0a0b0c0d";
    const BAD_DIRECTORY: &str = "0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e0e";

    fn setup(tag: &str) -> (PathBuf, Jobs, Outbox) {
        let root =
            std::env::temp_dir().join(format!("starling-jobs-unit-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let bin = root.join("binaries");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join(BINARY), b"\x7fELF").unwrap();
        let dir = |path: &str| pb::DirArchive {
            files: vec![pb::DirFile {
                path: path.into(),
                mode: 0o755,
                data: b"#!/bin/sh\n".to_vec(),
            }],
        };
        std::fs::write(bin.join(DIRECTORY), dir("run.sh").encode_to_vec()).unwrap();
        std::fs::write(bin.join(BAD_DIRECTORY), dir("../run.sh").encode_to_vec()).unwrap();
        let (mut jobs, _) = Jobs::load(&root).unwrap();
        let out = Outbox::default();
        jobs.create_pool(
            &out,
            pb::PoolSpec {
                name: "p".into(),
                max_nodes: 4,
                ..Default::default()
            },
            false,
        )
        .unwrap();
        (root, jobs, out)
    }

    #[test]
    fn the_table_changes_without_waiting_for_its_disk() {
        let (root, mut jobs, out) = setup("stalled");
        let files = jobs.files();
        // A disk that does not answer: the table goes on, nothing is written meanwhile.
        let hold = files.stall();
        let info = jobs.submit(&out, 7, valid()).expect("accepted");
        jobs.set_result(pb::JobResult {
            job: info.id,
            kind: Some(job_result::Kind::Value(b"42".to_vec())),
        })
        .expect("a result");
        let job_pb = root.join("jobs").join("7").join("job.pb");
        assert!(!job_pb.exists(), "a write happened while the disk stalled");
        // The disk answers: what was decided is written, in order.
        drop(hold);
        files.flush();
        let kept = pb::JobInfo::decode(std::fs::read(&job_pb).unwrap().as_slice()).unwrap();
        assert_eq!(kept.id, 7);
        assert_eq!(std::fs::read(jobs.result_path(7)).unwrap(), b"42");
        let (again, _) = Jobs::load(&root).unwrap();
        assert!(again.info(7).is_some(), "a restarted head finds the job");
        let _ = std::fs::remove_dir_all(root);
    }

    fn valid() -> pb::JobSpec {
        pb::JobSpec {
            pool: "p".into(),
            payload: Some(pb::Payload {
                kind: Some(pb::payload::Kind::Binary(BINARY.into())),
                entrypoint: String::new(),
                command: Vec::new(),
            }),
            target_instances: 2,
            ..Default::default()
        }
    }

    fn refusal(jobs: &mut Jobs, out: &Outbox, root: &Path, spec: pb::JobSpec) -> String {
        let s = check_payload(&spec, &root.join("binaries"))
            .and_then(|()| jobs.submit(out, 1, spec))
            .expect_err("refused");
        assert!(
            matches!(
                s.code(),
                tonic::Code::InvalidArgument | tonic::Code::NotFound
            ),
            "{s:?}"
        );
        s.message().to_string()
    }

    #[test]
    fn hostile_specs_are_refused_with_a_reason() {
        let (root, mut jobs, out) = setup("refuse");
        let cases: Vec<(pb::JobSpec, &str)> = vec![
            (
                pb::JobSpec {
                    env: [("A=B".to_string(), "v".to_string())].into(),
                    ..valid()
                },
                "NAME=VALUE",
            ),
            (
                pb::JobSpec {
                    env: [(String::new(), "v".to_string())].into(),
                    ..valid()
                },
                "NAME=VALUE",
            ),
            (
                pb::JobSpec {
                    env: [("K".to_string(), "a\0b".to_string())].into(),
                    ..valid()
                },
                "NAME=VALUE",
            ),
            (
                pb::JobSpec {
                    args: vec!["ok".into(), "a\0b".into()],
                    ..valid()
                },
                "NUL",
            ),
            (
                pb::JobSpec {
                    name: "x".repeat(10_000),
                    ..valid()
                },
                "job name",
            ),
            (
                pb::JobSpec {
                    name: "two\nlines".into(),
                    ..valid()
                },
                "job name",
            ),
            (
                pb::JobSpec {
                    payload: Some(pb::Payload {
                        kind: Some(pb::payload::Kind::Directory(BAD_DIRECTORY.into())),
                        entrypoint: "../run.sh".into(),
                        command: Vec::new(),
                    }),
                    ..valid()
                },
                "`..`",
            ),
            (
                pb::JobSpec {
                    payload: Some(pb::Payload {
                        kind: Some(pb::payload::Kind::Directory(DIRECTORY.into())),
                        entrypoint: "/bin/sh".into(),
                        command: Vec::new(),
                    }),
                    ..valid()
                },
                "absolute",
            ),
            (
                pb::JobSpec {
                    payload: Some(pb::Payload {
                        kind: Some(pb::payload::Kind::Binary("../../etc/passwd".into())),
                        entrypoint: String::new(),
                        command: Vec::new(),
                    }),
                    ..valid()
                },
                "was not uploaded",
            ),
            (
                pb::JobSpec {
                    payload: Some(pb::Payload {
                        kind: Some(pb::payload::Kind::Binary(String::new())),
                        entrypoint: String::new(),
                        command: Vec::new(),
                    }),
                    ..valid()
                },
                "was not uploaded",
            ),
            (
                pb::JobSpec {
                    target_instances: 0,
                    ..valid()
                },
                "target_instances",
            ),
            (
                pb::JobSpec {
                    min_instances: 3,
                    ..valid()
                },
                "min_instances",
            ),
            (
                pb::JobSpec {
                    target_instances: u32::MAX,
                    ..valid()
                },
                "max_nodes",
            ),
            (
                pb::JobSpec {
                    pool: "nope".into(),
                    ..valid()
                },
                "unknown pool",
            ),
        ];
        for (spec, says) in cases {
            let m = refusal(&mut jobs, &out, &root, spec);
            assert!(m.contains(says), "{m:?} should say {says:?}");
        }
        assert!(jobs.list().is_empty(), "nothing refused was queued");
        let _ = std::fs::remove_dir_all(root);
    }

    #[test]
    fn fuzz_submit_accepts_only_runnable_jobs() {
        let (root, mut jobs, out) = setup("fuzz");
        let bin = root.join("binaries");
        let mut next = 1;
        let mut accepted = 0u64;
        fuzz::run("job submit", 2.0, 200, |rng: &mut Rng| {
            let id = |rng: &mut Rng| match rng.below(5) {
                0 => BINARY.to_string(),
                1 => DIRECTORY.to_string(),
                2 => BAD_DIRECTORY.to_string(),
                3 => "f".repeat(rng.below(100)),
                _ => rng.string(),
            };
            let kind = match rng.below(3) {
                0 => Some(pb::payload::Kind::Binary(id(rng))),
                1 => Some(pb::payload::Kind::Directory(id(rng))),
                _ => None,
            };
            let small = |rng: &mut Rng| match rng.below(3) {
                0 => rng.edgy_u64() as u32,
                _ => rng.below(6) as u32,
            };
            let spec = pb::JobSpec {
                name: rng.string(),
                pool: rng.pick(&["p", "p", "", "nope", "p/../x"]).to_string(),
                payload: (!rng.one_in(8)).then(|| pb::Payload {
                    kind,
                    entrypoint: rng
                        .pick(&["run.sh", "./run.sh", "", "../run.sh", "/run.sh", "x"])
                        .to_string(),
                    command: match rng.below(4) {
                        0 => vec!["python3".into()],
                        1 => vec![rng.string()],
                        _ => Vec::new(),
                    },
                }),
                args: (0..rng.below(3)).map(|_| rng.string()).collect(),
                env: (0..rng.below(3))
                    .map(|_| (rng.string(), rng.string()))
                    .collect(),
                target_instances: small(rng),
                min_instances: small(rng),
                instance_timeout_ms: rng.edgy_u64(),
                input: Vec::new(),
                max_instance_failures: rng.one_in(2).then(|| rng.below(4) as u32),
            };
            let mut spec = spec;
            let n = rng.below(16);
            spec.input = rng.bytes(n);
            match check_payload(&spec, &bin).and_then(|()| jobs.submit(&out, next, spec.clone())) {
                Ok(info) => {
                    accepted += 1;
                    let s = info.spec.expect("a job keeps its spec");
                    assert!(1 <= s.min_instances && s.min_instances <= s.target_instances);
                    assert!(s.min_instances <= 4, "the pool has at most 4 nodes");
                    assert_eq!(s.pool, "p");
                    assert!(!s.name.is_empty() && s.name.len() <= MAX_NAME_BYTES);
                    assert!(s
                        .env
                        .keys()
                        .all(|k| !k.is_empty() && !k.contains(['=', '\0'])));
                    assert!(s.args.iter().all(|a| !a.contains('\0')));
                    assert!(s.instance_timeout_ms > 0);
                    // A pending job can always be cancelled.
                    let mut core = Core::new();
                    let mut out = Outbox::default();
                    jobs.cancel(&mut out, &mut core, next).unwrap();
                    jobs.delete(next).unwrap();
                    next += 1;
                }
                Err(s) => {
                    assert!(
                        matches!(
                            s.code(),
                            tonic::Code::InvalidArgument | tonic::Code::NotFound
                        ),
                        "{s:?}"
                    );
                    assert!(!s.message().is_empty());
                }
            }
        });
        assert!(
            accepted > 0,
            "some random specs are valid, so acceptance was checked"
        );
        let _ = std::fs::remove_dir_all(root);
    }
}
