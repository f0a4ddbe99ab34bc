//! The scheduler's state. Only the handlers in [`crate::reactor`] change it.
//!
//! # Invariants
//! - For every node, `available + Σ held(workers on it) == total` per resource, except while a
//!   worker that lent its CPUs back (blocked in `get`) is running again without them: then the
//!   node is oversubscribed by exactly what that worker lent, never under-accounted.
//! - A task is in exactly one place: waiting for `missing > 0` dependencies, in one ready queue,
//!   in the infeasible set, or running on one worker. Finished tasks leave the table.
//! - A worker is idle (listed in its node's `idle` stack) if and only if it runs no task.
//! - A worker with `concurrency > 1` holds the sum of its tasks' resources, runs fewer than
//!   `concurrency` of them, none pipelined, none with GPUs; any other worker holds one task's.
//! - A worker runs only tasks of its [`Pool`]: its job's, with the environment it was started
//!   with (`TaskSpec::env`).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use starling_proto::{
    EnvId, JobId, NodeId, ObjectId, ResourceSet, SchedulingStrategy, TaskEnv, TaskId, TaskSpec,
    WorkerId,
};

use crate::gpus::{GpuGrant, GpuSlots};
use crate::objects::{ObjectEntry, ObjectState};
use starling_proto::hash::IdMap;
use starling_proto::id_table::IdTable;

/// Where a task is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskState {
    /// Waiting for this many argument objects.
    WaitingForDependencies(u32),
    /// Ready, waiting for a node with free resources and an idle worker.
    Queued,
    /// No node can ever run it as things stand; the reason says why.
    Infeasible(String),
    /// Running on this worker of this node.
    Running {
        /// The node.
        node: NodeId,
        /// The worker.
        worker: WorkerId,
    },
}

#[derive(Debug)]
pub(crate) struct TaskEntry {
    pub spec: Arc<TaskSpec>,
    pub state: TaskState,
    pub class: u32,
    /// The number of its current attempt's record in its job's ring of task events
    /// ([`crate::events`]).
    pub event: u64,
    /// When its current attempt started running (microseconds since the Unix epoch), as its
    /// record says: the end's run time is taken from here. Before it runs: when it became
    /// ready, flagged ([`crate::events::TaskEvents::waiting_since`]), so marking it running
    /// need not read its record; 0: neither known, or no record kept.
    pub started: u64,
}

/// Public information about a node.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeInfo {
    /// The node.
    pub id: NodeId,
    /// Everything it has.
    pub total: ResourceSet,
    /// What is free now.
    pub available: ResourceSet,
    /// Whether it is alive.
    pub alive: bool,
    /// Worker count.
    pub workers: usize,
}

/// The worker processes a task can run on: those of its job (which run its binary) started
/// with its environment (`TaskSpec::env`; most tasks have none).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pool {
    /// The job whose binary the workers run.
    pub job: JobId,
    /// The environment they were started with.
    pub env: EnvId,
}

impl Pool {
    /// The pool of `spec`'s workers.
    #[inline]
    pub fn of(spec: &TaskSpec) -> Self {
        Pool {
            job: spec.job,
            env: spec.extras.env.id(),
        }
    }

    /// The plain workers of `job`, with no environment of their own.
    #[inline]
    pub fn plain(job: JobId) -> Self {
        Pool {
            job,
            env: EnvId::NONE,
        }
    }
}

#[derive(Debug)]
pub(crate) struct NodeState {
    pub id: NodeId,
    pub total: ResourceSet,
    pub available: ResourceSet,
    pub alive: bool,
    /// Idle workers with the pool they serve, most recently idle last (reusing a warm worker
    /// first).
    pub idle: Vec<(Pool, WorkerId)>,
    pub workers: usize,
    /// Workers asked of the transport and not yet added, per pool (a job that ends takes its
    /// requests with it, so they never hold back another job's).
    pub requested_workers: HashMap<Pool, usize>,
    /// Whose tasks the node runs.
    pub usage: NodeUse,
    /// Its GPUs by id, with what is free of each.
    pub gpus: GpuSlots,
}

/// Whose tasks a node runs. Nodes of the default pool are shared by every driver; nodes of a
/// named compute pool run nothing until a multi-node job is given them, then only that job.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NodeUse {
    /// Tasks of any job that is not a multi-node job.
    #[default]
    Shared,
    /// Nothing (a pool node between jobs).
    Reserved,
    /// Only this multi-node job's tasks.
    Job(JobId),
}

impl NodeState {
    /// Whether the node runs tasks of `job`; `restricted`: the job is a multi-node job, which
    /// runs on its own nodes only.
    pub(crate) fn serves(&self, job: JobId, restricted: bool) -> bool {
        match self.usage {
            NodeUse::Shared => !restricted,
            NodeUse::Reserved => false,
            NodeUse::Job(j) => j == job,
        }
    }
}

#[derive(Debug)]
pub(crate) struct WorkerState {
    pub node: usize,
    pub job: JobId,
    /// The environment it was started with: it runs only tasks of that environment.
    pub env: EnvId,
    /// Tasks assigned to this worker, oldest first. The worker runs them one after another;
    /// more than one only when the scheduler pipelines (see [`Core::set_pipeline_depth`]).
    pub tasks: VecDeque<TaskId>,
    /// The class of the assigned tasks (pipelined tasks share the first one's class).
    pub class: u32,
    /// What the running task holds on the node.
    pub held: ResourceSet,
    /// Which of the node's GPUs the running task holds (part of `held`).
    pub gpus: GpuGrant,
    /// Whether the worker is blocked in `get` with its CPUs lent back: some of its tasks wait
    /// and none runs (a worker process may have several tasks waiting on spare threads).
    pub blocked: bool,
    /// How many of its tasks are blocked in `get` now.
    pub blocked_tasks: u32,
    /// The CPUs it lent while blocked and has not taken back.
    pub lent: ResourceSet,
    /// The first object argument of the last task it was given: a task reading the same
    /// object prefers this worker, whose pages and caches hold it (see `reactor::start`).
    pub warm: Option<ObjectId>,
    /// Its connection is gone and it waits to be removed (its exit is being reported): it
    /// is handed nothing more, not even behind its own tasks.
    pub draining: bool,
    /// How many tasks it may run at once (1: one, the others pipelined behind it). Above 1
    /// its tasks are async tasks run together (`TaskSpec::max_concurrency`), each holding its
    /// own resources, and it takes such tasks while it has fewer than this many: the smallest
    /// `max_concurrency` of the tasks it runs.
    pub concurrency: u32,
    /// The actor it belongs to, from the moment it takes the actor's creation task (see
    /// [`crate::actors`]): it runs nothing else, keeps what that task holds, and is never idle.
    pub actor: Option<TaskId>,
}

impl WorkerState {
    /// The pool it belongs to.
    #[inline]
    pub fn pool(&self) -> Pool {
        Pool {
            job: self.job,
            env: self.env,
        }
    }
}

/// A scheduling class: tasks with the same resource shape and strategy queue together, so a
/// class that does not fit stops after one look instead of one look per task.
#[derive(Debug)]
pub(crate) struct Class {
    pub resources: ResourceSet,
    pub strategy: SchedulingStrategy,
    pub job: JobId,
    /// The environment of its tasks' workers (part of the class: a worker of one environment
    /// never helps a class of another).
    pub env: TaskEnv,
    pub queue: VecDeque<TaskId>,
    /// Moving average of how long one task of the class runs, in microseconds (0: unknown).
    pub avg_runtime_us: f64,
    /// Whether the slot holds a class (a freed one waits in `Core::free_classes` for reuse).
    pub live: bool,
}

impl Class {
    /// The pool of its tasks' workers.
    #[inline]
    pub fn pool(&self) -> Pool {
        Pool {
            job: self.job,
            env: self.env.id(),
        }
    }
}

/// Counters for `status` and the benches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreStats {
    /// Tasks ever submitted.
    pub submitted: u64,
    /// Tasks that finished with a value.
    pub succeeded: u64,
    /// Tasks that finished with a failure (including cancelled).
    pub failed: u64,
    /// Runs retried after a failure.
    pub retried: u64,
    /// Objects freed.
    pub objects_freed: u64,
    /// Tasks run again to remake an object whose value was lost with its node.
    pub reconstructed: u64,
    /// The most tasks held at once (queued, waiting or running): what backpressure bounds.
    pub peak_live: u64,
}

/// All scheduler state.
#[derive(Debug, Default)]
pub struct Core {
    /// Live tasks. Paged by runs of ids, not hashed: a million queued tasks cost their
    /// entries' size, not about twice it (see [`IdTable`]).
    pub(crate) tasks: IdTable<TaskId, TaskEntry>,
    /// Live objects, paged as `tasks`.
    pub(crate) objects: IdTable<ObjectId, ObjectEntry>,
    pub(crate) nodes: Vec<NodeState>,
    pub(crate) node_index: IdMap<NodeId, usize>,
    pub(crate) workers: IdMap<WorkerId, WorkerState>,
    pub(crate) classes: Vec<Class>,
    pub(crate) class_index: HashMap<(ResourceSet, SchedulingStrategy, JobId, EnvId), u32>,
    /// Slots of classes freed with their job, reused before `classes` grows, so `schedule`
    /// walks the classes of live jobs only.
    pub(crate) free_classes: Vec<u32>,
    /// The class last looked up (most programs submit runs of one shape).
    pub(crate) last_class: Option<u32>,
    /// Classes with queued tasks, scanned by `schedule`.
    pub(crate) infeasible: Vec<TaskId>,
    pub(crate) spread_cursor: usize,
    /// Tasks a worker may hold at once (1 = no pipelining).
    pub(crate) pipeline_depth: usize,
    /// Multi-node jobs: their tasks run only on nodes given to them.
    pub(crate) restricted_jobs: std::collections::HashSet<JobId>,
    /// Whether objects keep the spec of the task that made them (see [`Core::set_lineage`]).
    pub(crate) lineage: bool,
    /// Moving average of each function's run time, in microseconds, from reported runs: a
    /// task is pipelined behind another only when both functions are known to be short (a
    /// class mixes the functions of one resource shape, so its average cannot say).
    pub(crate) fn_runtime_us: HashMap<starling_proto::FunctionName, f64>,
    /// The live tasks each live task submitted (only tasks with a parent are listed, and a
    /// parent's entry goes when it ends): what a cancel reaches recursively.
    pub(crate) children: IdMap<TaskId, Vec<TaskId>>,
    /// Waits in `get` of threads that run no task of their own, with the worker that lends its
    /// CPUs for each (counted in its `blocked_tasks`): see
    /// [`reactor::on_thread_blocked`](crate::reactor::on_thread_blocked).
    pub(crate) thread_waits: IdMap<u64, WorkerId>,
    /// Stored values that hold refs, with the objects they refer to (each counted once in that
    /// object's `nested_in`): see [`reactor::on_nested`](crate::reactor::on_nested).
    pub(crate) nested: IdMap<ObjectId, Box<[ObjectId]>>,
    /// The task making each object of a task with several returns, but its first (whose id is
    /// the task's): an entry lives as long as its object's.
    pub(crate) producers: IdMap<ObjectId, TaskId>,
    /// Why tasks with an environment of their own cannot run here (`None`: they can): see
    /// [`Core::refuse_task_envs`].
    pub(crate) envs_refused: Option<&'static str>,
    /// Actors by id (their creation task's), dead ones too (the latest
    /// [`MAX_DEAD_ACTORS`](crate::actors::MAX_DEAD_ACTORS) of them).
    pub(crate) actors: IdMap<TaskId, crate::actors::Actor>,
    /// The dead actors still in `actors`, oldest first.
    pub(crate) dead_actors: std::collections::VecDeque<TaskId>,
    /// Live actors by name.
    pub(crate) actor_names: HashMap<String, TaskId>,
    /// Actors that may have calls to hand their worker (see [`crate::actors::dispatch`]).
    pub(crate) actors_to_dispatch: Vec<TaskId>,
    pub(crate) stats: CoreStats,
    /// The latest attempts of tasks, for the state API (see [`crate::events`]).
    pub(crate) events: crate::events::TaskEvents,
    clock: Option<crate::events::Clock>,
}

impl Core {
    /// An empty scheduler: no nodes, no tasks, no pipelining.
    pub fn new() -> Self {
        Core {
            pipeline_depth: 1,
            ..Self::default()
        }
    }

    /// The worker lending its CPUs for the thread wait `wait` (see
    /// [`reactor::on_thread_blocked`](crate::reactor::on_thread_blocked)), if one does.
    pub fn thread_lender_of(&self, wait: u64) -> Option<WorkerId> {
        self.thread_waits.get(&wait).copied()
    }

    /// Lets a busy worker be handed up to `depth` tasks of the class it is running when no idle
    /// worker can take them, so a worker in another process never waits a network round trip
    /// between two short tasks. The worker runs them in order (and runs the queued ones on a
    /// spare thread while a task is blocked in `get`, so nesting cannot deadlock).
    pub fn set_pipeline_depth(&mut self, depth: usize) {
        self.pipeline_depth = depth.max(1);
    }

    /// Keeps lineage: every object remembers the task that made it (and, through
    /// `lineage_refs`, that task's arguments stay known), so that when a node is lost
    /// ([`reactor::on_objects_lost`](crate::reactor::on_objects_lost)) the objects whose only
    /// copy was there are made again by running their tasks again, recursively. A cluster head
    /// turns it on; in one process nothing can be lost, so it stays off.
    pub fn set_lineage(&mut self, on: bool) {
        self.lineage = on;
    }

    /// Fails every task that asks for environment variables of its own (`TaskSpec::env`) as
    /// unschedulable, for `why`: where tasks run on threads of one process, which share one
    /// environment, no worker could ever be started with them.
    pub fn refuse_task_envs(&mut self, why: &'static str) {
        self.envs_refused = Some(why);
    }

    /// Bounds the task event store to `bytes` (0: keeps none); records beyond it are dropped,
    /// oldest first. Set before any task is submitted.
    pub fn set_task_events_cap(&mut self, bytes: usize) {
        let pids = self.events.take_pids();
        self.events = crate::events::TaskEvents::with_cap(bytes);
        for (worker, pid) in pids {
            self.events.set_pid(worker, pid);
        }
        if let Some(clock) = self.clock {
            self.events.set_clock(clock);
        }
    }

    /// The clock task events are stamped with (microseconds since the Unix epoch): the state
    /// machine reads none of its own. Without one, times stay unset.
    pub fn set_clock(&mut self, clock: crate::events::Clock) {
        self.clock = Some(clock);
        self.events.set_clock(clock);
    }

    /// The task event store: every attempt of the latest tasks.
    pub fn task_events(&self) -> &crate::events::TaskEvents {
        &self.events
    }

    /// `worker` runs in process `pid` (of its node): task records and worker listings name
    /// it, so that its output can be found (`starling logs`).
    pub fn set_worker_pid(&mut self, worker: WorkerId, pid: u32) {
        self.events.set_pid(worker, pid);
    }

    /// Live tasks (waiting, queued or running) by function and state, for metrics: one walk
    /// of the task table. Functions are named without their signature hash.
    pub fn live_tasks_by_state(&self) -> Vec<(String, starling_proto::state::TaskStatus, u64)> {
        use starling_proto::state::TaskStatus;
        let mut counts: HashMap<(&str, TaskStatus), u64> = HashMap::new();
        for e in self.tasks.values() {
            let state = match e.state {
                TaskState::WaitingForDependencies(_) => TaskStatus::PendingArgsAvail,
                TaskState::Queued | TaskState::Infeasible(_) => TaskStatus::PendingNodeAssignment,
                TaskState::Running { .. } => TaskStatus::Running,
            };
            *counts.entry((&e.spec.function, state)).or_default() += 1;
        }
        let mut merged: HashMap<(String, TaskStatus), u64> = HashMap::new();
        for ((name, state), n) in counts {
            let short = starling_proto::state::short_name(name).to_string();
            *merged.entry((short, state)).or_default() += n;
        }
        let mut out: Vec<_> = merged.into_iter().map(|((n, s), c)| (n, s, c)).collect();
        out.sort();
        out
    }

    /// Every object tracked, in id order (Ray's `list objects`).
    pub fn object_records(&self) -> Vec<starling_proto::state::ObjectRecord> {
        let mut out: Vec<_> = self
            .objects
            .iter()
            .map(|(id, o)| {
                let (state, node, size) = match &o.state {
                    crate::ObjectState::Pending => ("PENDING", None, 0),
                    crate::ObjectState::Ready { node, size } => ("READY", Some(*node), *size),
                    crate::ObjectState::Failed(_) => ("FAILED", None, 0),
                    crate::ObjectState::Released => ("RELEASED", None, 0),
                };
                starling_proto::state::ObjectRecord {
                    object: id,
                    state: state.to_string(),
                    node,
                    size,
                    handles: o.handles,
                    task_refs: o.task_refs,
                    nested_in: o.nested_in,
                }
            })
            .collect();
        out.sort_by_key(|o| o.object);
        out
    }

    /// Every worker, in id order (process ids unknown here: 0).
    pub fn worker_records(&self) -> Vec<starling_proto::state::WorkerRecord> {
        let mut out: Vec<_> = self
            .workers
            .iter()
            .map(|(id, w)| {
                let state = if w.draining {
                    "DRAINING"
                } else if w.blocked {
                    "BLOCKED"
                } else if w.tasks.is_empty() {
                    "IDLE"
                } else {
                    "BUSY"
                };
                starling_proto::state::WorkerRecord {
                    worker: *id,
                    node: self.nodes[w.node].id,
                    job: w.job,
                    state: state.to_string(),
                    tasks: w.tasks.len() as u32,
                    actor: w.actor,
                    pid: self.events.pid(*id).unwrap_or(0),
                }
            })
            .collect();
        out.sort_by_key(|w| w.worker);
        out
    }

    /// Counters.
    pub fn stats(&self) -> CoreStats {
        self.stats
    }

    /// Where `task` is, or `None` once it has finished (or was never submitted).
    pub fn task_state(&self, task: TaskId) -> Option<&TaskState> {
        self.tasks.get(&task).map(|t| &t.state)
    }

    /// The spec of a live task.
    pub fn task_spec(&self, task: TaskId) -> Option<&Arc<TaskSpec>> {
        self.tasks.get(&task).map(|t| &t.spec)
    }

    /// Why `task` has not started, in words a user can act on, or `None` if it is running or
    /// gone.
    pub fn pending_reason(&self, task: TaskId) -> Option<String> {
        match &self.tasks.get(&task)?.state {
            TaskState::WaitingForDependencies(n) => Some(format!("waiting for {n} argument(s)")),
            TaskState::Queued => Some("waiting for free resources or an idle worker".into()),
            TaskState::Infeasible(r) => Some(format!("infeasible: {r}")),
            TaskState::Running { .. } => None,
        }
    }

    /// The tasks no node can hold now, oldest first, with why (at most `limit` of them), and
    /// how many there are in all.
    pub fn infeasible_tasks(&self, limit: usize) -> (Vec<(TaskId, String)>, usize) {
        let list = self
            .infeasible
            .iter()
            .filter_map(|t| match &self.tasks.get(t)?.state {
                TaskState::Infeasible(r) => Some((*t, r.clone())),
                _ => None,
            })
            .take(limit)
            .collect();
        (list, self.infeasible.len())
    }

    /// The task that makes `object`: the task of the same number, or for a later return of a
    /// task with several, that task.
    pub fn task_of(&self, object: ObjectId) -> TaskId {
        self.producers
            .get(&object)
            .copied()
            .unwrap_or_else(|| object.task())
    }

    /// The state of `object`, or `None` if it was freed (or never existed).
    pub fn object_state(&self, object: ObjectId) -> Option<&ObjectState> {
        self.objects.get(&object).map(|o| &o.state)
    }

    /// `(handles, task_refs)` of `object`: live `ObjectRef` groups and unfinished tasks using it.
    pub fn object_refs(&self, object: ObjectId) -> Option<(u32, u32)> {
        self.objects.get(&object).map(|o| (o.handles, o.task_refs))
    }

    /// How many stored values of other objects hold a ref to `object`.
    pub fn object_nested_in(&self, object: ObjectId) -> Option<u32> {
        self.objects.get(&object).map(|o| o.nested_in)
    }

    /// Number of live entries in the object directory.
    pub fn object_count(&self) -> usize {
        self.objects.len()
    }

    /// Tasks not yet finished.
    pub fn live_tasks(&self) -> usize {
        self.tasks.len()
    }

    /// Tasks that are ready and waiting for resources.
    pub fn queued_tasks(&self) -> usize {
        self.classes.iter().map(|c| c.queue.len()).sum()
    }

    /// Tasks that are running.
    pub fn running_tasks(&self) -> usize {
        self.workers.values().map(|w| w.tasks.len()).sum()
    }

    /// Every node.
    pub fn nodes(&self) -> Vec<NodeInfo> {
        self.nodes
            .iter()
            .map(|n| NodeInfo {
                id: n.id,
                total: n.total.clone(),
                available: n.available.clone(),
                alive: n.alive,
                workers: n.workers,
            })
            .collect()
    }

    /// Tasks assigned to `worker` (running or pipelined behind the running one).
    pub fn worker_tasks(&self, worker: WorkerId) -> usize {
        self.workers.get(&worker).map_or(0, |w| w.tasks.len())
    }

    /// What `worker`'s running task holds, or `None` if the worker is unknown.
    pub fn worker_held(&self, worker: WorkerId) -> Option<&ResourceSet> {
        self.workers.get(&worker).map(|w| &w.held)
    }

    /// The ids of the GPUs `worker`'s running task holds (empty if none, or unknown).
    pub fn worker_gpu_ids(&self, worker: WorkerId) -> Vec<Arc<str>> {
        self.workers
            .get(&worker)
            .map(|w| self.nodes[w.node].gpus.ids(&w.gpus))
            .unwrap_or_default()
    }

    /// Scheduling classes in use (those of live jobs).
    pub fn class_count(&self) -> usize {
        self.class_index.len()
    }

    /// Slots of the class table, live or free: what `schedule` walks.
    pub fn class_slots(&self) -> usize {
        self.classes.len()
    }

    pub(crate) fn class_of(&mut self, spec: &TaskSpec) -> u32 {
        // Most programs use a handful of shapes; checking the last one first skips the hash.
        if let Some(id) = self.last_class {
            let last = &self.classes[id as usize];
            if last.live
                && last.resources == spec.resources
                && last.strategy == spec.extras.strategy
                && last.job == spec.job
                && last.env == spec.extras.env
            {
                return id;
            }
        }
        let key = (
            spec.resources.clone(),
            spec.extras.strategy,
            spec.job,
            spec.extras.env.id(),
        );
        if let Some(c) = self.class_index.get(&key) {
            self.last_class = Some(*c);
            return *c;
        }
        let class = Class {
            resources: spec.resources.clone(),
            strategy: spec.extras.strategy,
            job: spec.job,
            env: spec.extras.env.clone(),
            queue: VecDeque::new(),
            avg_runtime_us: 0.0,
            live: true,
        };
        let id = match self.free_classes.pop() {
            Some(id) => {
                self.classes[id as usize] = class;
                id
            }
            None => {
                self.classes.push(class);
                self.classes.len() as u32 - 1
            }
        };
        self.class_index.insert(key, id);
        self.last_class = Some(id);
        id
    }

    /// Frees the classes of `job`, which has ended and has no task left.
    pub(crate) fn free_classes_of(&mut self, job: JobId) {
        for (id, class) in self.classes.iter_mut().enumerate() {
            if class.live && class.job == job {
                class.live = false;
                class.queue = VecDeque::new();
                self.class_index.remove(&(
                    class.resources.clone(),
                    class.strategy,
                    class.job,
                    class.env.id(),
                ));
                self.free_classes.push(id as u32);
            }
        }
        if self
            .last_class
            .is_some_and(|c| !self.classes[c as usize].live)
        {
            self.last_class = None;
        }
    }
}
