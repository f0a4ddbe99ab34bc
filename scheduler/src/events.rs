//! Task events: what the state API, `starling list tasks` and the timeline read.
//!
//! Every attempt of a task gets one record when it is submitted (or retried, rebuilt,
//! restarted); the reactor stamps it as the attempt becomes ready, is handed to a worker, and
//! finishes or fails. A live task's entry holds the sequence number of its current record, so
//! a change finds its record in O(1), without a map.
//!
//! Records live in one ring per job, in the order made; each job numbers its own records, so a
//! record's place in its ring is its number minus the ring's first. The store is bounded in
//! bytes ([`TaskEvents::DEFAULT_CAP`] unless set): past the bound the oldest records of the
//! largest ring are dropped, an eighth of it at a time, and counted, so one job's flood of
//! tasks does not wipe out the history of the others. A record dropped while its task is live
//! is simply no longer updated.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use starling_proto::state::{TaskCount, TaskEvent, TaskKind, TaskList, TaskQuery, TaskStatus};
use starling_proto::{
    ActorRole, FailureKind, FunctionName, JobId, NodeId, TaskFailure, TaskId, TaskSpec, WorkerId,
};

/// Set in what a task entry keeps for an attempt that waits for a node (see
/// [`TaskEvents::waiting_since`]); clear once it runs. Times are microseconds since the Unix
/// epoch, far below this bit.
pub(crate) const WAITING: u64 = 1 << 63;

/// No record (a task entry whose record was never made: the store is off).
pub(crate) const NO_RECORD: u64 = u64::MAX;

/// One attempt of a task, compact: what [`TaskEvent`] says, with ids unset as 0.
#[derive(Clone, Debug)]
pub(crate) struct Record {
    task: TaskId,
    /// The function's place in [`TaskEvents::names`] (a record holds no reference count of
    /// its own: bumping the name's, shared with every spec of the function across threads,
    /// cost more than the rest of the record).
    name: u32,
    parent: TaskId,
    actor: TaskId,
    node: NodeId,
    worker: WorkerId,
    /// Submitted, ready, started, ended: microseconds since the Unix epoch (0: not yet).
    times: [u64; 4],
    attempt: u32,
    state: TaskStatus,
    kind: TaskKind,
    failure: Option<Arc<TaskFailure>>,
}

#[derive(Debug, Default)]
struct Ring {
    job: JobId,
    /// The number of `records[0]`.
    first: u64,
    records: VecDeque<Record>,
    /// Records dropped from the front.
    dropped: u64,
}

/// Bucket bounds of the duration histograms, in seconds.
pub const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0,
];

/// A histogram of durations in seconds: a count per bucket of [`SECONDS_BUCKETS`] (not
/// cumulative) and one more for the rest.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    /// `counts[i]`: observations in `(SECONDS_BUCKETS[i-1], SECONDS_BUCKETS[i]]`; the last:
    /// above the largest bound.
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; SECONDS_BUCKETS.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }
}

/// [`SECONDS_BUCKETS`] in microseconds, the unit observations come in.
const MICROS_BUCKETS: [u64; 13] = [
    100,
    500,
    1_000,
    5_000,
    10_000,
    50_000,
    100_000,
    500_000,
    1_000_000,
    5_000_000,
    10_000_000,
    60_000_000,
    300_000_000,
];

impl Histogram {
    /// One observation of `micros` microseconds. Two per task, on the scheduler's path: bounds
    /// compared as integers from the smallest (most observations fall in the first buckets),
    /// no division (a binary search over floats cost about 3 % of the in-process engine's
    /// no-op task rate).
    #[inline]
    fn observe_micros(&mut self, micros: u64) {
        let at = MICROS_BUCKETS
            .iter()
            .position(|b| *b >= micros)
            .unwrap_or(MICROS_BUCKETS.len());
        self.counts[at] += 1;
        self.sum += micros as f64 * 1e-6;
        self.count += 1;
    }
}

/// Figures the metrics endpoint reads: attempts ended per function, and how long attempts ran
/// and waited to be placed. Kept whether or not records are (they do not depend on them, but
/// the histograms are fed from records' times, so they are empty when no record is kept).
#[derive(Clone, Debug, Default)]
pub struct TaskFigures {
    /// Per function: attempts finished and failed (a retried attempt counts as failed).
    pub ended: Vec<(FunctionName, [u64; 2])>,
    /// How long attempts ran (handed to their worker until they ended).
    pub run_time: Histogram,
    /// How long ready attempts waited for a node and worker.
    pub scheduling: Histogram,
}

/// The task event store of one scheduler.
#[derive(Debug)]
pub struct TaskEvents {
    /// The bound, in bytes (0: no records are kept).
    cap: usize,
    /// One ring per job that ever had a record (an emptied ring stays: it is a few words).
    rings: Vec<Ring>,
    /// Each job's place in `rings`.
    ring_of: HashMap<JobId, usize>,
    /// The job of the last record made or changed, and its ring (most changes in a row are of
    /// one job's tasks: no map lookup for them).
    last: Option<(JobId, usize)>,
    /// The function of the last attempt that ended and its counters' place in `figures`.
    last_ended: Option<(FunctionName, usize)>,
    /// The functions records name, each once ([`Record::name`] is a place here); emptied and
    /// made again from the records held when it reaches [`TaskEvents::MAX_NAMES`].
    names: Vec<FunctionName>,
    /// Each name's place in `names`.
    name_at: HashMap<FunctionName, u32>,
    /// The name last looked up and its place (most records in a row are of one function).
    last_name: Option<(FunctionName, u32)>,
    /// The size of `names` that makes it be made again: [`TaskEvents::MAX_NAMES`], or twice
    /// what the records held named when it last was.
    names_bound: usize,
    /// Records held, in all rings.
    held: usize,
    /// Records ever dropped.
    dropped: u64,
    clock: Clock,
    /// The time of the batch being handled: read from the clock once, at the first change
    /// after the last scheduling pass (0: not read yet). Changes of one batch share it.
    now: u64,
    figures: TaskFigures,
    /// Each worker's process id, as its embedder told it ([`TaskEvents::set_pid`]): a record
    /// names its worker, a listing its process too. Kept past the worker's end (its log file
    /// outlives it), for the latest [`TaskEvents::MAX_PIDS`] workers.
    pids: HashMap<WorkerId, u32>,
}

impl Default for TaskEvents {
    fn default() -> Self {
        TaskEvents::with_cap(Self::DEFAULT_CAP)
    }
}

/// A clock: now, in microseconds since the Unix epoch. The state machine reads no clock of its
/// own; its embedder gives it one ([`Core::set_clock`](crate::Core::set_clock)).
pub type Clock = fn() -> u64;

/// The clock of a scheduler nobody gave one: times stay unset.
fn no_clock() -> u64 {
    0
}

/// The type of a failure, as a record names it.
pub fn error_type(kind: &FailureKind) -> &str {
    match kind {
        FailureKind::Application(e) => &e.type_name,
        FailureKind::Upstream(_) => "UpstreamFailed",
        FailureKind::Cancelled => "Cancelled",
        FailureKind::FunctionNotFound { .. } => "FunctionNotFound",
        FailureKind::BadArgument(_) => "BadArgument",
        FailureKind::ObjectLost(_) => "ObjectLost",
        FailureKind::WorkerDied { .. } => "WorkerDied",
        FailureKind::Unschedulable(_) => "Unschedulable",
        FailureKind::ActorDied { .. } => "ActorDied",
    }
}

impl TaskEvents {
    /// The default bound: 16 MiB, about 170,000 records (Ray's GCS keeps 100,000 tasks by
    /// default). A run of a million tasks keeps its latest 170,000 attempts, and the bound is
    /// most of what the records cost it (16 bytes a task of its peak memory, not 67).
    pub const DEFAULT_CAP: usize = 16 << 20;

    /// A store of at most `cap` bytes (0: keeps nothing).
    pub fn with_cap(cap: usize) -> Self {
        TaskEvents {
            cap,
            rings: Vec::new(),
            ring_of: HashMap::new(),
            last: None,
            last_ended: None,
            names: Vec::new(),
            name_at: HashMap::new(),
            last_name: None,
            names_bound: Self::MAX_NAMES,
            held: 0,
            dropped: 0,
            clock: no_clock,
            now: 0,
            figures: TaskFigures::default(),
            pids: HashMap::new(),
        }
    }

    /// Workers whose process ids are kept (12 bytes each, and the map's slack).
    pub const MAX_PIDS: usize = 1 << 18;

    /// `worker` runs in process `pid`. Past [`Self::MAX_PIDS`] workers, the older half (worker
    /// ids only grow) is forgotten: their records list no process.
    pub fn set_pid(&mut self, worker: WorkerId, pid: u32) {
        if self.pids.len() >= Self::MAX_PIDS {
            let mut ids: Vec<u64> = self.pids.keys().map(|w| w.0).collect();
            let (_, median, _) = ids.select_nth_unstable(Self::MAX_PIDS / 2);
            let median = *median;
            self.pids.retain(|w, _| w.0 >= median);
        }
        self.pids.insert(worker, pid);
    }

    /// The process id of `worker`, if it was told.
    pub fn pid(&self, worker: WorkerId) -> Option<u32> {
        self.pids.get(&worker).copied()
    }

    /// The process ids told so far, for a store made again with another bound.
    pub(crate) fn take_pids(&mut self) -> HashMap<WorkerId, u32> {
        std::mem::take(&mut self.pids)
    }

    /// Stamps records with `clock`'s times.
    pub(crate) fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
        self.now = 0;
    }

    /// The batch's time (one clock reading per batch: a reading costs tens of nanoseconds,
    /// a task makes four changes, and a batch may hold thousands).
    fn now(&mut self) -> u64 {
        if self.now == 0 {
            self.now = (self.clock)();
        }
        self.now
    }

    /// A batch ended (a scheduling pass ran): the next change reads the clock again.
    pub(crate) fn batch_ended(&mut self) {
        self.now = 0;
    }

    /// The bound, in bytes.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// What one record costs.
    const RECORD_BYTES: usize = std::mem::size_of::<Record>();

    /// Records held now.
    pub fn len(&self) -> usize {
        self.held
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.held == 0
    }

    /// Records ever dropped to stay within the bound.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Attempts ended per function, run times and scheduling waits.
    pub fn figures(&self) -> &TaskFigures {
        &self.figures
    }

    /// A new record for an attempt of `spec`, pending its arguments or (`ready`) a node.
    /// Returns its number in its job's ring ([`NO_RECORD`] if the store keeps nothing).
    pub(crate) fn open(&mut self, spec: &TaskSpec, ready: bool) -> u64 {
        if self.cap == 0 {
            return NO_RECORD;
        }
        let now = self.now();
        let (kind, actor) = match &spec.extras.actor {
            ActorRole::None => (TaskKind::Normal, TaskId(0)),
            ActorRole::Create(_) => (TaskKind::ActorCreation, spec.id),
            ActorRole::Call(a) => (TaskKind::ActorCall, *a),
        };
        let name = self.name_of(&spec.function);
        let record = Record {
            task: spec.id,
            name,
            parent: spec.parent.unwrap_or_default(),
            actor,
            node: NodeId(0),
            worker: WorkerId(0),
            times: [now, if ready { now } else { 0 }, 0, 0],
            attempt: spec.attempt,
            state: if ready {
                TaskStatus::PendingNodeAssignment
            } else {
                TaskStatus::PendingArgsAvail
            },
            kind,
            failure: None,
        };
        let most = (self.cap / Self::RECORD_BYTES).max(1);
        let ring = self.ring(spec.job);
        if ring.records.len() == ring.records.capacity() {
            // Grown by doubling while small, then by `GROW_STEP` records at a time, never past
            // the bound (a ring of the bound's size takes the bound, not the next power of two
            // above it).
            let len = ring.records.len();
            let want = (len + len.clamp(64, Self::GROW_STEP)).min(most.max(len + 1));
            ring.records.reserve_exact(want - len);
            // The new room is written once now, so its pages are faulted in here, together,
            // instead of one page fault every few dozen tasks (a fault costs about as much as
            // the rest of a task's scheduling).
            let room = ring.records.capacity() - len;
            ring.records
                .extend(std::iter::repeat_n(record.clone(), room));
            ring.records.truncate(len);
        }
        ring.records.push_back(record);
        let seq = ring.first + ring.records.len() as u64 - 1;
        self.held += 1;
        if self.held * Self::RECORD_BYTES > self.cap {
            self.shrink();
        }
        seq
    }

    /// Records a ring grows by at a time once past this size (96 KiB of records: the room
    /// faulted in ahead of need stays small).
    const GROW_STEP: usize = 1024;

    /// Names kept before the table is made again from the records held (so names of tasks
    /// whose records are gone do not pile up).
    pub const MAX_NAMES: usize = 1 << 16;

    /// The place of `function` in `names`, added if new.
    fn name_of(&mut self, function: &FunctionName) -> u32 {
        if let Some((last, at)) = &self.last_name {
            // The same allocation (in process, every spec of a function shares it), or an
            // equal name (decoded from a worker's message): no reference count touched.
            if last.same(function) || last == function {
                return *at;
            }
        }
        let at = match self.name_at.get(function) {
            Some(&at) => at,
            None => {
                if self.names.len() >= self.names_bound {
                    self.compact_names();
                }
                let at = self.names.len() as u32;
                self.names.push(function.clone());
                self.name_at.insert(function.clone(), at);
                at
            }
        };
        self.last_name = Some((function.clone(), at));
        at
    }

    /// Makes `names` again from the names of the records held.
    fn compact_names(&mut self) {
        let old = std::mem::take(&mut self.names);
        self.name_at.clear();
        self.last_name = None;
        let mut remap: Vec<u32> = vec![u32::MAX; old.len()];
        for ring in &mut self.rings {
            for r in &mut ring.records {
                let new = &mut remap[r.name as usize];
                if *new == u32::MAX {
                    *new = self.names.len() as u32;
                    let name = old[r.name as usize].clone();
                    self.name_at.insert(name.clone(), *new);
                    self.names.push(name);
                }
                r.name = *new;
            }
        }
        self.names_bound = Self::MAX_NAMES.max(2 * self.names.len());
    }

    /// A record for an attempt of `spec` that failed before it could wait for anything (its
    /// argument had failed, its actor was dead, ..).
    pub(crate) fn failed_at_submit(&mut self, spec: &TaskSpec, failure: &Arc<TaskFailure>) {
        let seq = self.open(spec, false);
        self.failed(spec, seq, failure, 0);
    }

    fn get(&mut self, job: JobId, seq: u64) -> Option<&mut Record> {
        if seq == NO_RECORD {
            return None;
        }
        let at = self.ring_index(job)?;
        let ring = &mut self.rings[at];
        let at = seq.checked_sub(ring.first)?;
        ring.records.get_mut(at as usize)
    }

    /// The place of `job`'s ring, if it has one.
    fn ring_index(&mut self, job: JobId) -> Option<usize> {
        match self.last {
            Some((j, at)) if j == job => Some(at),
            _ => {
                let at = *self.ring_of.get(&job)?;
                self.last = Some((job, at));
                Some(at)
            }
        }
    }

    /// The ring of `job` (made if it has none).
    fn ring(&mut self, job: JobId) -> &mut Ring {
        let at = match self.ring_index(job) {
            Some(at) => at,
            None => {
                self.rings.push(Ring {
                    job,
                    ..Ring::default()
                });
                let at = self.rings.len() - 1;
                self.ring_of.insert(job, at);
                self.last = Some((job, at));
                at
            }
        };
        &mut self.rings[at]
    }

    /// The attempt's arguments are ready: it waits for a node. Returns what its task entry keeps
    /// until it runs ([`TaskEvents::waiting_since`] of the time; 0: no record kept).
    pub(crate) fn ready(&mut self, job: JobId, seq: u64) -> u64 {
        if seq == NO_RECORD {
            return 0;
        }
        let now = self.now();
        if let Some(r) = self.get(job, seq) {
            if r.state == TaskStatus::PendingArgsAvail {
                r.state = TaskStatus::PendingNodeAssignment;
                r.times[1] = now;
            }
        }
        Self::waiting_since(now)
    }

    /// What a task entry keeps for an attempt that became ready at `at` and has not run yet:
    /// the time with [`WAITING`] set. [`TaskEvents::running`] takes it, so marking the record
    /// running does not read it (a record made at submission is cold by then), and the ends
    /// ([`TaskEvents::finished`], [`TaskEvents::failed`]) take it as "never ran".
    pub(crate) fn waiting_since(at: u64) -> u64 {
        if at == 0 {
            0
        } else {
            at | WAITING
        }
    }

    /// What the task entry of an attempt just opened (`seq` from [`TaskEvents::open`], with the
    /// same `ready`) keeps: [`TaskEvents::waiting_since`] of the batch's time if it is ready,
    /// else 0 (as when no record is kept).
    pub(crate) fn opened(&mut self, seq: u64, ready: bool) -> u64 {
        if seq == NO_RECORD || !ready {
            return 0;
        }
        let now = self.now();
        Self::waiting_since(now)
    }

    /// The attempt's arguments are pending again (one was lost): it waits for them.
    pub(crate) fn waiting(&mut self, job: JobId, seq: u64) {
        if let Some(r) = self.get(job, seq) {
            r.state = TaskStatus::PendingArgsAvail;
        }
    }

    /// The attempt was handed to `worker` of `node`; `kept` is what its task entry kept while it
    /// waited (see [`TaskEvents::waiting_since`]; 0: nothing). Returns the time it started (0:
    /// none kept), which its task entry keeps for [`TaskEvents::finished`]: the record is then
    /// written at the end without being read, by a thread on which it is usually cold.
    pub(crate) fn running(
        &mut self,
        job: JobId,
        seq: u64,
        node: NodeId,
        worker: WorkerId,
        kept: u64,
    ) -> u64 {
        if seq == NO_RECORD {
            return 0;
        }
        let now = self.now();
        if kept & WAITING != 0 {
            // Ready since a time the task entry kept: the record is written, not read.
            let ready = kept & !WAITING;
            if let Some(r) = self.get(job, seq) {
                r.state = TaskStatus::Running;
                r.node = node;
                r.worker = worker;
                r.times[1] = ready;
                r.times[2] = now;
                self.figures
                    .scheduling
                    .observe_micros(now.saturating_sub(ready));
                return now;
            }
            return 0;
        }
        if let Some(r) = self.get(job, seq) {
            if r.times[1] == 0 {
                r.times[1] = now;
            }
            let waited = now.saturating_sub(r.times[1]);
            r.state = TaskStatus::Running;
            r.node = node;
            r.worker = worker;
            r.times[2] = now;
            self.figures.scheduling.observe_micros(waited);
            return now;
        }
        0
    }

    /// The attempt was handed to `worker` of `node` behind another task it runs first (a
    /// pipelined task, a call queued on its actor): it is not running yet.
    pub(crate) fn assigned(&mut self, job: JobId, seq: u64, node: NodeId, worker: WorkerId) {
        if let Some(r) = self.get(job, seq) {
            r.node = node;
            r.worker = worker;
        }
    }

    /// The attempt handed to `worker` of `node` earlier now runs (the task before it ended),
    /// unless it was marked running already. Returns its start time, as [`TaskEvents::running`]
    /// does, or `None` if it had started before.
    pub(crate) fn started(
        &mut self,
        job: JobId,
        seq: u64,
        node: NodeId,
        worker: WorkerId,
        kept: u64,
    ) -> Option<u64> {
        let running = match kept {
            // Still waiting, as its entry says.
            k if k & WAITING != 0 => false,
            // A start time.
            k if k != 0 => true,
            _ => self
                .get(job, seq)
                .is_some_and(|r| r.state == TaskStatus::Running),
        };
        (!running).then(|| self.running(job, seq, node, worker, kept))
    }

    /// The attempt of `spec` finished with its values; `started` is what
    /// [`TaskEvents::running`] returned for it (0 if it never ran).
    pub(crate) fn finished(&mut self, spec: &TaskSpec, seq: u64, started: u64) {
        self.ended(spec, seq, None, started);
    }

    /// The attempt of `spec` failed (retried or not); `started` as for [`TaskEvents::finished`].
    pub(crate) fn failed(
        &mut self,
        spec: &TaskSpec,
        seq: u64,
        failure: &Arc<TaskFailure>,
        started: u64,
    ) {
        self.ended(spec, seq, Some(failure), started);
    }

    fn ended(
        &mut self,
        spec: &TaskSpec,
        seq: u64,
        failure: Option<&Arc<TaskFailure>>,
        started: u64,
    ) {
        let at = match &self.last_ended {
            Some((f, at)) if f.same(&spec.function) => *at,
            _ => {
                let at = match self
                    .figures
                    .ended
                    .iter()
                    .position(|(f, _)| *f == spec.function)
                {
                    Some(at) => at,
                    None => {
                        self.figures.ended.push((spec.function.clone(), [0; 2]));
                        self.figures.ended.len() - 1
                    }
                };
                self.last_ended = Some((spec.function.clone(), at));
                at
            }
        };
        self.figures.ended[at].1[failure.is_some() as usize] += 1;
        if seq == NO_RECORD {
            return;
        }
        let now = self.now();
        // Written, not read: an attempt's record has no failure before it ends, and its start
        // time comes from its task entry.
        if let Some(r) = self.get(spec.job, seq) {
            r.state = match failure {
                Some(_) => TaskStatus::Failed,
                None => TaskStatus::Finished,
            };
            r.times[3] = now;
            if let Some(f) = failure {
                r.failure = Some(f.clone());
            }
            // A task that never ran kept no start time (or a wait's, flagged).
            if started > 0 && started & WAITING == 0 {
                let ran = now.saturating_sub(started);
                self.figures.run_time.observe_micros(ran);
            }
        }
    }

    /// Drops the oldest eighth of the largest ring (at least one record), until the store is
    /// within its bound.
    fn shrink(&mut self) {
        while self.held * Self::RECORD_BYTES > self.cap {
            let Some(ring) = self.rings.iter_mut().max_by_key(|r| r.records.len()) else {
                return;
            };
            let n = (ring.records.len() / 8).max(1);
            ring.records.drain(..n);
            ring.first += n as u64;
            ring.dropped += n as u64;
            self.held -= n;
            self.dropped += n as u64;
        }
    }

    /// The records (or, for a summary, the counts) `q` asks for.
    pub fn query(&self, q: &TaskQuery) -> TaskList {
        let mut list = TaskList::default();
        let mut counts: HashMap<(String, TaskStatus), u64> = HashMap::new();
        let mut matched: Vec<TaskEvent> = Vec::new();
        let mut rings: Vec<&Ring> = self
            .rings
            .iter()
            .filter(|r| q.job.is_none_or(|j| j == r.job))
            .collect();
        rings.sort_by_key(|r| r.job);
        for ring in rings {
            list.dropped += ring.dropped;
            for r in &ring.records {
                let mut event = r.event(ring.job, &self.names);
                event.pid = self.pids.get(&r.worker).copied().unwrap_or(0);
                if !q.accepts(&event) {
                    continue;
                }
                list.total += 1;
                if q.summary {
                    *counts
                        .entry((event.short_name().to_string(), event.state))
                        .or_default() += 1;
                } else {
                    matched.push(event);
                }
            }
        }
        if q.summary {
            let mut summary: Vec<TaskCount> = counts
                .into_iter()
                .map(|((name, state), count)| TaskCount { name, state, count })
                .collect();
            summary.sort_by(|a, b| (&a.name, a.state).cmp(&(&b.name, b.state)));
            list.summary = summary;
        } else {
            // Oldest first across jobs; the newest `limit` kept.
            matched.sort_by_key(|e| (e.submitted_us, e.task, e.attempt));
            if q.limit > 0 && matched.len() > q.limit as usize {
                matched.drain(..matched.len() - q.limit as usize);
            }
            list.tasks = matched;
        }
        list
    }
}

impl Record {
    fn event(&self, job: JobId, names: &[FunctionName]) -> TaskEvent {
        let id = |v: u64| (v != 0).then_some(v);
        let (error_type, error, backtrace) = match &self.failure {
            Some(f) => (
                error_type(&f.kind).to_string(),
                f.to_string(),
                match &f.kind {
                    FailureKind::Application(e) => e.backtrace.clone(),
                    _ => String::new(),
                },
            ),
            None => Default::default(),
        };
        TaskEvent {
            task: self.task,
            attempt: self.attempt,
            job,
            name: names[self.name as usize].to_string(),
            kind: self.kind,
            state: self.state,
            parent: id(self.parent.0).map(TaskId),
            actor: id(self.actor.0).map(TaskId),
            node: id(self.node.0).map(NodeId),
            worker: id(self.worker.0).map(WorkerId),
            submitted_us: self.times[0],
            ready_us: self.times[1],
            started_us: self.times[2],
            ended_us: self.times[3],
            error_type,
            error,
            backtrace,
            pid: 0,
        }
    }
}

#[cfg(test)]
mod histogram_tests {
    use super::*;

    #[test]
    fn microsecond_bounds_are_the_second_bounds() {
        for (us, s) in MICROS_BUCKETS.iter().zip(SECONDS_BUCKETS) {
            assert_eq!(*us, (*s * 1e6).round() as u64);
        }
        let mut h = Histogram::default();
        for micros in [0, 100, 101, 500, 300_000_000, 300_000_001] {
            h.observe_micros(micros);
        }
        let mut want = vec![0; SECONDS_BUCKETS.len() + 1];
        want[0] = 2; // 0 and 100: (.., 0.0001]
        want[1] = 2; // 101 and 500
        want[12] = 1; // 300 s exactly
        want[13] = 1; // above the largest bound
        assert_eq!(h.counts, want);
        assert_eq!(h.count, 6);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(id: u64, job: u64) -> TaskSpec {
        let mut s = crate::testing::task(id, Vec::new());
        s.job = JobId(job);
        s.function = "app::f#00".into();
        s
    }

    /// A clock that ticks one microsecond per reading.
    fn ticks() -> u64 {
        static T: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        T.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }

    #[test]
    fn a_record_follows_its_attempt() {
        let mut ev = TaskEvents::default();
        ev.set_clock(ticks);
        let s = spec(1, 1);
        let seq = ev.open(&s, false);
        ev.batch_ended();
        ev.ready(s.job, seq);
        ev.batch_ended();
        let started = ev.running(s.job, seq, NodeId(3), WorkerId(4), 0);
        assert!(started > 0);
        ev.batch_ended();
        ev.finished(&s, seq, started);
        // Its run time and its wait for a node were observed.
        assert_eq!(ev.figures().run_time.count, 1);
        assert_eq!(ev.figures().scheduling.count, 1);
        let list = ev.query(&TaskQuery::default());
        assert_eq!(list.tasks.len(), 1);
        let e = &list.tasks[0];
        assert_eq!(e.state, TaskStatus::Finished);
        assert_eq!((e.node, e.worker), (Some(NodeId(3)), Some(WorkerId(4))));
        assert!(e.submitted_us > 0);
        assert!(e.submitted_us < e.ready_us && e.ready_us < e.started_us);
        assert!(e.started_us < e.ended_us);
        assert_eq!(e.short_name(), "app::f");
        // Told the worker's process, a listing names it (and filters on it).
        assert_eq!(e.pid, 0);
        ev.set_pid(WorkerId(4), 4321);
        let by_pid = ev.query(&TaskQuery {
            filters: vec![starling_proto::state::Filter::parse("pid=4321").unwrap()],
            ..Default::default()
        });
        assert_eq!(by_pid.tasks.len(), 1);
        assert_eq!(by_pid.tasks[0].pid, 4321);
    }

    /// Records name their function by its place in one table: the names of dropped records
    /// go when the table is made again, the held ones keep theirs.
    #[test]
    fn names_of_dropped_records_do_not_pile_up() {
        let per = TaskEvents::RECORD_BYTES;
        let mut ev = TaskEvents::with_cap(10 * per);
        let n = TaskEvents::MAX_NAMES as u64 + 100;
        for i in 0..n {
            let mut s = spec(i + 1, 1);
            s.function = format!("app::f{i}#00").into();
            ev.open(&s, true);
        }
        assert!(ev.names.len() < 1000, "{} names kept", ev.names.len());
        let list = ev.query(&TaskQuery::default());
        assert!(!list.tasks.is_empty() && list.tasks.len() <= 10);
        for e in &list.tasks {
            assert_eq!(e.name, format!("app::f{}#00", e.task.0 - 1), "{e:?}");
        }
    }

    #[test]
    fn process_ids_are_kept_for_the_latest_workers() {
        let mut ev = TaskEvents::default();
        for w in 0..TaskEvents::MAX_PIDS as u64 + 1 {
            ev.set_pid(WorkerId(w), w as u32);
        }
        assert!(ev.pids.len() <= TaskEvents::MAX_PIDS / 2 + 1);
        assert_eq!(ev.pid(WorkerId(TaskEvents::MAX_PIDS as u64)), Some(1 << 18));
        assert_eq!(ev.pid(WorkerId(3)), None);
    }

    #[test]
    fn the_largest_ring_loses_its_oldest_records_past_the_bound() {
        let per = TaskEvents::RECORD_BYTES;
        let mut ev = TaskEvents::with_cap(100 * per);
        // Job 2: ten records, made first; job 1: a flood of a thousand.
        for i in 0..10 {
            ev.open(&spec(10_000 + i, 2), true);
        }
        let mut last = 0;
        for i in 0..1000 {
            last = ev.open(&spec(i, 1), true);
        }
        assert!(ev.len() <= 100);
        assert_eq!(ev.dropped() as usize + ev.len(), 1010);
        // The small job kept all its records; the flood kept its newest.
        let only = |job| TaskQuery {
            job: Some(JobId(job)),
            ..Default::default()
        };
        assert_eq!(ev.query(&only(2)).tasks.len(), 10);
        let flood = ev.query(&only(1));
        assert_eq!(flood.dropped + flood.tasks.len() as u64, 1000);
        assert_eq!(flood.tasks.last().map(|e| e.task), Some(TaskId(999)));
        // A record still held is updated in place; a dropped one is ignored.
        ev.finished(&spec(999, 1), last, 0);
        ev.finished(&spec(0, 1), 0, 0);
        let done = ev.query(&TaskQuery {
            filters: vec![starling_proto::state::Filter::parse("state=FINISHED").unwrap()],
            ..Default::default()
        });
        assert_eq!(done.tasks.len(), 1);
        assert_eq!(done.tasks[0].task, TaskId(999));
    }

    #[test]
    fn a_summary_counts_by_function_and_state() {
        let mut ev = TaskEvents::default();
        for i in 0..5 {
            let s = spec(i, 1);
            let seq = ev.open(&s, true);
            if i < 3 {
                ev.finished(&s, seq, 0);
            }
        }
        let list = ev.query(&TaskQuery {
            summary: true,
            ..Default::default()
        });
        assert_eq!(list.total, 5);
        let count = |state| {
            list.summary
                .iter()
                .find(|c| c.state == state)
                .map(|c| (c.name.as_str(), c.count))
        };
        assert_eq!(count(TaskStatus::Finished), Some(("app::f", 3)));
        assert_eq!(
            count(TaskStatus::PendingNodeAssignment),
            Some(("app::f", 2))
        );
    }

    #[test]
    fn a_store_of_no_bytes_keeps_nothing() {
        let mut ev = TaskEvents::with_cap(0);
        assert_eq!(ev.open(&spec(1, 1), true), NO_RECORD);
        assert!(ev.is_empty());
    }
}
