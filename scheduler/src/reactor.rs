//! The scheduler's event handlers: every change to [`Core`] goes through one of these.
//!
//! Each handler is a plain function of `(&mut Core, &mut impl Transport, event)`. Handlers record
//! what became ready; [`schedule`] then places ready tasks on nodes in one pass, so a burst of
//! ten thousand submissions costs one scheduling pass, not ten thousand.

use std::sync::Arc;

use starling_proto::{
    ActorRole, FailureKind, JobId, NodeId, ObjectId, RemoteError, ResourceSet, SchedulingStrategy,
    TaskFailure, TaskId, TaskSpec, WorkerId,
};

use crate::actors;

use crate::core::{Core, NodeState, NodeUse, Pool, TaskEntry, TaskState, WorkerState};
use crate::gpus::GpuSlots;
use crate::objects::{ObjectEntry, ObjectState};
use crate::placement::{place, Placement};
use crate::transport::{TaskOutcome, Transport};

/// A node joined with `total` resources, its GPUs numbered `0..n`. Tasks that were infeasible
/// get another look.
pub fn on_node_added(core: &mut Core, id: NodeId, total: ResourceSet) {
    on_node_added_with_gpus(core, id, total, &[])
}

/// A node joined with `total` resources; `gpu_ids` names its GPUs (the ids a task holding them
/// is told, as `CUDA_VISIBLE_DEVICES`), numbered on from the last given one if fewer than its
/// GPU count. Tasks that were infeasible get another look.
pub fn on_node_added_with_gpus(
    core: &mut Core,
    id: NodeId,
    total: ResourceSet,
    gpu_ids: &[String],
) {
    let gpu_units = total.units("GPU");
    if let Some(&i) = core.node_index.get(&id) {
        // A node that registers again keeps its running tasks: what they hold stays taken.
        let mut available = total.clone();
        for w in core.workers.values().filter(|w| w.node == i) {
            available.subtract(&w.held);
        }
        let held = core
            .workers
            .values()
            .filter(|w| w.node == i)
            .map(|w| &w.gpus);
        let gpus = GpuSlots::renew(gpu_units, gpu_ids, held);
        let n = &mut core.nodes[i];
        n.alive = true;
        n.total = total;
        n.available = available;
        n.gpus = gpus;
    } else {
        core.node_index.insert(id, core.nodes.len());
        core.nodes.push(NodeState {
            id,
            available: total.clone(),
            total,
            alive: true,
            idle: Vec::new(),
            workers: 0,
            requested_workers: Default::default(),
            usage: NodeUse::Shared,
            gpus: GpuSlots::new(gpu_units, gpu_ids),
        });
    }
    requeue_infeasible(core);
}

/// The cluster changed: tasks found infeasible get another look.
fn requeue_infeasible(core: &mut Core) {
    for task in std::mem::take(&mut core.infeasible) {
        if let Some(e) = core.tasks.get_mut(&task) {
            e.state = TaskState::Queued;
            core.classes[e.class as usize].queue.push_back(task);
        }
    }
}

/// A worker of `node` is ready for tasks of the default job (`JobId(0)`).
pub fn on_worker_added(core: &mut Core, node: NodeId, worker: WorkerId) {
    on_job_worker_added(core, node, JobId(0), worker)
}

/// A worker of `node` that runs `job`'s binary is ready for its tasks. Unknown nodes are ignored
/// (the worker's node must be added first).
pub fn on_job_worker_added(core: &mut Core, node: NodeId, job: JobId, worker: WorkerId) {
    on_pool_worker_added(core, node, Pool::plain(job), worker)
}

/// A worker of `node` that runs its job's binary, started with the environment of `pool`, is
/// ready for the tasks of that pool. Unknown nodes are ignored (the worker's node must be added
/// first).
pub fn on_pool_worker_added(core: &mut Core, node: NodeId, pool: Pool, worker: WorkerId) {
    let Some(&i) = core.node_index.get(&node) else {
        return;
    };
    let n = &mut core.nodes[i];
    n.workers += 1;
    if let Some(r) = n.requested_workers.get_mut(&pool) {
        *r = r.saturating_sub(1);
        if *r == 0 {
            n.requested_workers.remove(&pool);
        }
    }
    n.idle.push((pool, worker));
    core.workers.insert(
        worker,
        WorkerState {
            node: i,
            job: pool.job,
            env: pool.env,
            tasks: std::collections::VecDeque::new(),
            class: 0,
            held: ResourceSet::new(),
            gpus: Vec::new(),
            blocked: false,
            draining: false,
            blocked_tasks: 0,
            lent: ResourceSet::new(),
            warm: None,
            concurrency: 1,
            actor: None,
        },
    );
}

/// `n` workers were asked of `node` outside the scheduler (started ahead for a new job): while
/// they start, the scheduler does not ask for more.
/// Sets whose tasks `node` runs (see [`NodeUse`]). Tasks that waited for such a node are
/// placed by the next [`schedule`].
pub fn on_node_use(core: &mut Core, node: NodeId, usage: NodeUse) {
    if let Some(&i) = core.node_index.get(&node) {
        core.nodes[i].usage = usage;
        requeue_infeasible(core);
    }
}

/// `job` is a multi-node job: from now on its tasks run only on nodes given to it with
/// [`on_node_use`]; `false` lifts that when the job ends.
pub fn on_job_restricted(core: &mut Core, job: JobId, restricted: bool) {
    if restricted {
        core.restricted_jobs.insert(job);
    } else {
        core.restricted_jobs.remove(&job);
    }
}

/// `n` more workers of `pool` were asked of `node` (outside [`schedule`], which asks for its
/// own): until they are added, a starved class of the pool asks for no more there.
pub fn on_workers_requested(core: &mut Core, node: NodeId, pool: Pool, n: usize) {
    if let Some(&i) = core.node_index.get(&node) {
        *core.nodes[i].requested_workers.entry(pool).or_default() += n;
    }
}

/// A driver or task submitted `spec`. Its return object starts with one handle (the caller's
/// `ObjectRef`).
pub fn on_submit(core: &mut Core, t: &mut impl Transport, spec: TaskSpec) {
    on_submit_arc(core, t, Arc::new(spec))
}

/// [`on_submit`] for a spec that is already shared.
pub fn on_submit_arc(core: &mut Core, t: &mut impl Transport, mut spec: Arc<TaskSpec>) {
    core.stats.submitted += 1;
    // A nested ref to an object that does not exist now (gone already, or an id not made yet)
    // holds nothing: it is dropped from the spec, so what the task gives back when it ends (its
    // task and lineage references) is exactly what it took here, even if the id comes to life
    // later.
    if spec
        .extras
        .contained
        .iter()
        .any(|o| !core.objects.contains_key(o))
    {
        Arc::make_mut(&mut spec)
            .extras
            .make_mut()
            .contained
            .retain(|o| core.objects.contains_key(o));
    }
    let id = spec.id;
    let returns = spec.return_count();
    for ret in spec.return_objects() {
        core.objects.insert(ret, ObjectEntry::pending(1));
        if ret != spec.return_object() {
            core.producers.insert(ret, id);
        }
    }

    // A task whose environment no worker could be started with can never run.
    let mut upstream = (!spec.extras.env.is_empty())
        .then(|| {
            core.envs_refused
                .map(|why| why.to_string())
                .or_else(|| spec.extras.env.check().err())
        })
        .flatten()
        .map(FailureKind::Unschedulable);
    // Check every dependency before touching any, so a failure leaves no counts behind.
    for dep in spec.dependencies().take_while(|_| upstream.is_none()) {
        match core.objects.get(&dep).map(|o| &o.state) {
            None => {
                upstream = Some(FailureKind::ObjectLost(dep));
                break;
            }
            Some(ObjectState::Failed(f)) => {
                upstream = Some(FailureKind::Upstream(f.clone()));
                break;
            }
            Some(_) => {}
        }
    }
    // An actor's creation registers it (a name taken fails it); a call joins its actor's
    // queue (a dead or unknown actor fails it).
    if upstream.is_none() {
        upstream = match &spec.extras.actor {
            ActorRole::None => None,
            ActorRole::Create(_) => actors::on_create(core, &spec).err(),
            ActorRole::Call(_) => actors::on_call(core, &spec).err(),
        };
    }
    if let Some(kind) = upstream {
        core.stats.failed += 1;
        let failure = Arc::new(TaskFailure {
            task: id,
            attempt: spec.attempt,
            kind,
        });
        core.events.failed_at_submit(&spec, &failure);
        for ret in spec.return_objects() {
            settle_failure(core, t, ret, failure.clone());
        }
        return;
    }
    actors::hold_if_detached(core, &spec);

    // The lineage holds its arguments' entries (counted in `lineage_refs`, once per return
    // object holding it).
    if core.lineage {
        for ret in spec.return_objects() {
            core.objects.get_mut(&ret).expect("inserted above").lineage = Some(spec.clone());
        }
    }
    let mut missing = 0;
    for dep in spec.dependencies() {
        let o = core.objects.get_mut(&dep).expect("checked above");
        o.task_refs += 1;
        if core.lineage {
            o.lineage_refs += returns;
        }
        if o.state == ObjectState::Pending {
            o.dependents.push(id);
            missing += 1;
        }
    }
    // Refs nested in the arguments keep their objects alive, but the task does not wait for
    // them; one already gone stays gone (ids are never reused), and `get` of it says so.
    for nested in spec.extras.contained.iter() {
        if let Some(o) = core.objects.get_mut(nested) {
            o.task_refs += 1;
            if core.lineage {
                o.lineage_refs += returns;
            }
        }
    }
    // A released argument (its value dropped, its entry kept for lineage) is made again.
    if core.lineage {
        let released: Vec<ObjectId> = spec
            .dependencies()
            .filter(|d| core.objects[d].state == ObjectState::Released)
            .collect();
        for dep in released {
            let o = core.objects.get_mut(&dep).expect("checked above");
            o.dependents.push(id);
            missing += 1;
            rebuild(core, t, dep);
        }
    }
    let class = core.class_of(&spec);
    let state = if missing == 0 {
        core.classes[class as usize].queue.push_back(id);
        TaskState::Queued
    } else {
        TaskState::WaitingForDependencies(missing)
    };
    if let Some(parent) = spec.parent.filter(|p| core.tasks.contains_key(p)) {
        core.children.entry(parent).or_default().push(id);
    }
    let event = core.events.open(&spec, missing == 0);
    let started = core.events.opened(event, missing == 0);
    core.tasks.insert(
        id,
        TaskEntry {
            spec,
            state,
            class,
            event,
            started,
        },
    );
    core.stats.peak_live = core.stats.peak_live.max(core.tasks.len() as u64);
    if missing > 0 && pipeline_behind_producer(core, t, id) {
        pipeline_dependents(core, t, id);
    }
}

/// After `task` was handed to a worker, hands it the tasks waiting only for `task` (and so on
/// down the chain), as far as the pipeline allows.
fn pipeline_dependents(core: &mut Core, t: &mut impl Transport, task: TaskId) {
    if core.pipeline_depth <= 1
        || core
            .objects
            .get(&ObjectId::from(task))
            .is_none_or(|o| o.dependents.is_empty())
    {
        return;
    }
    let mut frontier = vec![task];
    while let Some(x) = frontier.pop() {
        let Some(o) = core.objects.get(&ObjectId::from(x)) else {
            continue;
        };
        let waiting: Vec<TaskId> = o
            .dependents
            .iter()
            .copied()
            .filter(|d| {
                matches!(
                    core.tasks.get(d).map(|e| &e.state),
                    Some(TaskState::WaitingForDependencies(_))
                )
            })
            .collect();
        for d in waiting {
            if pipeline_behind_producer(core, t, d) {
                frontier.push(d);
            }
        }
    }
}

/// A task whose missing arguments are all being made by tasks already handed to one worker is
/// handed to that worker too, right behind them (if its class is short and the pipeline has
/// room): the worker runs it as soon as its input exists, from its own memory, with no round trip
/// to the head in between. This is what makes a chain of dependent tasks run at the speed of the
/// worker. If a producer fails, the task fails upstream as usual and the worker's late report of
/// it is ignored.
fn pipeline_behind_producer(core: &mut Core, t: &mut impl Transport, task: TaskId) -> bool {
    let entry = &core.tasks[&task];
    let class = entry.class as usize;
    let depth = class_depth(core, class);
    if depth <= 1 || concurrency_of(&entry.spec) > 1 || entry.spec.extras.actor != ActorRole::None {
        return false;
    }
    let mut worker = None;
    for dep in entry.spec.dependencies() {
        let pending = core
            .objects
            .get(&dep)
            .is_some_and(|o| o.state == ObjectState::Pending);
        if !pending {
            continue;
        }
        // A worker keeps the value of its last tasks for what it runs behind them, one per task:
        // not a task with several returns, nor a streaming task (its value is a count, and it
        // may pause until its items are taken).
        let Some(TaskState::Running { worker: w, .. }) = core
            .tasks
            .get(&dep.task())
            .filter(|e| e.spec.return_count() == 1 && !e.spec.extras.streaming)
            .map(|e| &e.state)
        else {
            return false;
        };
        if worker.is_some_and(|x| x != *w) {
            return false;
        }
        worker = Some(*w);
    }
    let Some(worker) = worker else {
        return false;
    };
    let pool = Pool::of(&entry.spec);
    let Some(w) = core.workers.get_mut(&worker) else {
        return false;
    };
    if w.draining
        || w.concurrency > 1
        || w.actor.is_some()
        || w.pool() != pool
        || w.class as usize != class
        || w.tasks.len() >= depth
    {
        return false;
    }
    hand_to_busy_worker(core, t, worker, task);
    true
}

/// Appends `task` to the pipeline of `worker`, which already holds the resources for its class,
/// marks it running there and dispatches it.
fn hand_to_busy_worker(core: &mut Core, t: &mut impl Transport, worker: WorkerId, task: TaskId) {
    let w = core.workers.get_mut(&worker).expect("a registered worker");
    w.tasks.push_back(task);
    let node = &core.nodes[w.node];
    // Same class, same GPUs: the worker runs it on what its running task holds.
    let gpu_ids = node.gpus.ids(&w.gpus);
    let node = node.id;
    let entry = core.tasks.get_mut(&task).expect("live");
    entry.state = TaskState::Running { node, worker };
    // It runs once the tasks before it on the worker ended (see `started_next`).
    core.events
        .assigned(entry.spec.job, entry.event, node, worker);
    t.dispatch(node, worker, &entry.spec, &gpu_ids);
}

/// Puts a task that lost its worker (or an argument) back: waiting for its arguments if some are
/// pending again, else in its ready queue. It is listed once per argument among the dependents
/// of each pending one, as [`on_submit`] lists it.
fn requeue(core: &mut Core, t: &mut impl Transport, task: TaskId) {
    let Some(entry) = core.tasks.get(&task) else {
        return;
    };
    let spec = entry.spec.clone();
    // An argument that failed meanwhile (a lost `put`) fails the task, as at submit.
    let failed = spec
        .dependencies()
        .find_map(|d| match core.objects.get(&d).map(|o| &o.state) {
            Some(ObjectState::Failed(f)) => Some(FailureKind::Upstream(f.clone())),
            None => Some(FailureKind::ObjectLost(d)),
            _ => None,
        });
    if let Some(kind) = failed {
        fail_task(core, t, task, kind);
        return;
    }
    for dep in spec.dependencies() {
        if let Some(o) = core.objects.get_mut(&dep) {
            o.dependents.retain(|d| *d != task);
        }
    }
    let mut missing = 0;
    for dep in spec.dependencies() {
        if let Some(o) = core.objects.get_mut(&dep) {
            if o.state == ObjectState::Pending {
                o.dependents.push(task);
                missing += 1;
            }
        }
    }
    let class = core.tasks[&task].class as usize;
    let entry = core.tasks.get_mut(&task).expect("checked above");
    if missing > 0 {
        entry.state = TaskState::WaitingForDependencies(missing);
        core.events.waiting(entry.spec.job, entry.event);
    } else {
        entry.state = TaskState::Queued;
        entry.started = core.events.ready(entry.spec.job, entry.event);
        core.classes[class].queue.push_back(task);
    }
}

/// A value was stored directly (`put`) on `node`. It starts with one handle.
pub fn on_put(core: &mut Core, object: ObjectId, node: NodeId, size: u64) {
    core.objects.insert(object, ObjectEntry::ready(node, size));
}

/// An object that failed before it reached the scheduler (its arguments could not be encoded).
/// It starts with one handle, like a `put`.
pub fn on_failed_put(
    core: &mut Core,
    t: &mut impl Transport,
    object: ObjectId,
    failure: Arc<TaskFailure>,
) {
    core.stats.failed += 1;
    core.objects.insert(object, ObjectEntry::pending(1));
    settle_failure(core, t, object, failure);
}

/// Another `ObjectRef` group for `object` came to life (a ref was deserialized elsewhere).
/// Returns `false` if the object no longer exists.
pub fn on_add_ref(core: &mut Core, t: &mut impl Transport, object: ObjectId) -> bool {
    match core.objects.get_mut(&object) {
        Some(o) => {
            o.handles += 1;
            if o.state == ObjectState::Released {
                rebuild(core, t, object);
            }
            true
        }
        None => false,
    }
}

/// The stored value of `container` (a `put`, or a task's result just reported) holds refs to
/// `refs`: each stays alive while that value is stored, and loses the container's hold when it
/// goes (freed, released for lineage, or lost with its node). Refs to objects already gone are
/// ignored (`get` of them says `ObjectLost`). Returns `false`, changing nothing, if `container`
/// has no stored value now (its task was cancelled, or it was freed at once) or was already
/// given its refs.
pub fn on_nested(core: &mut Core, container: ObjectId, mut refs: Vec<ObjectId>) -> bool {
    let stored = core
        .objects
        .get(&container)
        .is_some_and(|o| matches!(o.state, ObjectState::Ready { .. }));
    if !stored || core.nested.contains_key(&container) {
        return false;
    }
    refs.sort_unstable();
    refs.dedup();
    refs.retain(|r| *r != container);
    refs.retain(|r| match core.objects.get_mut(r) {
        Some(o) => {
            o.nested_in += 1;
            true
        }
        None => false,
    });
    if !refs.is_empty() {
        core.nested.insert(container, refs.into_boxed_slice());
    }
    true
}

/// An `ObjectRef` group for `object` was dropped.
pub fn on_release(core: &mut Core, t: &mut impl Transport, object: ObjectId) {
    let Some(o) = core.objects.get_mut(&object) else {
        return;
    };
    o.handles = o.handles.saturating_sub(1);
    if o.is_garbage() {
        free(core, t, object);
    }
}

/// `worker` finished its oldest task with `outcome`. Results of cancelled tasks are dropped.
pub fn on_task_finished(
    core: &mut Core,
    t: &mut impl Transport,
    worker: WorkerId,
    outcome: TaskOutcome,
) {
    let Some(task) = core
        .workers
        .get(&worker)
        .and_then(|w| w.tasks.front().copied())
    else {
        return;
    };
    on_task_done(core, t, worker, task, outcome)
}

/// `worker` finished `task` (one of the tasks assigned to it) with `outcome`. Results of
/// cancelled tasks are dropped. The worker's resources go back to the node when it has no task
/// left.
pub fn on_task_done(
    core: &mut Core,
    t: &mut impl Transport,
    worker: WorkerId,
    task: TaskId,
    outcome: TaskOutcome,
) {
    task_done(core, t, worker, task, outcome);
    started_next(core, worker);
}

/// The task a worker that runs its tasks one at a time holds first now runs (the one before it
/// ended): its record says so. Called after the ended task's outcome was handled, so a task
/// that failed with it (its argument) is not counted as run.
fn started_next(core: &mut Core, worker: WorkerId) {
    let Some(w) = core.workers.get(&worker) else {
        return;
    };
    let Some(next) = w.tasks.front() else {
        return;
    };
    let node = core.nodes[w.node].id;
    if let Some(e) = core.tasks.get_mut(next) {
        if let Some(at) = core
            .events
            .started(e.spec.job, e.event, node, worker, e.started)
        {
            e.started = at;
        }
    }
}

fn task_done(
    core: &mut Core,
    t: &mut impl Transport,
    worker: WorkerId,
    task: TaskId,
    outcome: TaskOutcome,
) {
    let Some(w) = core.workers.get_mut(&worker) else {
        return;
    };
    if let Some(actor) = w.actor {
        on_actor_task_done(core, t, worker, actor, task, outcome);
        return;
    }
    let Some(pos) = w.tasks.iter().position(|x| *x == task) else {
        return;
    };
    w.tasks.remove(pos);
    let last = w.tasks.back().copied();
    let node = &mut core.nodes[w.node];
    let node_id = node.id;
    if w.concurrency > 1 && !w.tasks.is_empty() {
        // One of several tasks run together: what it held goes back, the others keep theirs.
        // Its CPUs were lent (they are in `available` already) if the worker is blocked.
        if let Some(e) = core.tasks.get(&task) {
            let mut back = e.spec.resources.clone();
            if w.blocked {
                let cpus = back.cpu_units();
                back.set_units("CPU", 0);
                let lent = w.lent.cpu_units();
                w.lent.set_units("CPU", lent.saturating_sub(cpus));
            }
            w.held.subtract(&back);
            node.available.add(&back);
        }
        let tasks = &core.tasks;
        w.concurrency = w
            .tasks
            .iter()
            .filter_map(|x| tasks.get(x))
            .map(|e| e.spec.extras.max_concurrency)
            .min()
            .unwrap_or(1)
            .max(1);
    } else if w.tasks.is_empty() {
        w.concurrency = 1;
        let held = std::mem::take(&mut w.held);
        w.blocked = false;
        w.blocked_tasks = 0;
        w.lent = ResourceSet::new();
        node.available.add(&held);
        node.gpus.give(&std::mem::take(&mut w.gpus));
        if !w.draining {
            node.idle.push((w.pool(), worker));
        }
        relend_thread_waits(core, worker);
    }

    let Some(entry) = core.tasks.get(&task) else {
        // Cancelled while running: its object already settled as cancelled.
        return;
    };
    let spec = entry.spec.clone();
    match outcome {
        TaskOutcome::Stored { size } => finish(core, t, task, &spec, last, node_id, &[size]),
        TaskOutcome::Returns(sizes) => finish(core, t, task, &spec, last, node_id, &sizes),
        TaskOutcome::Failed(err) if spec.retries_error(&err) && spec.attempt < spec.max_retries => {
            let class = next_attempt(core, task, &spec, FailureKind::Application(err));
            core.classes[class].queue.push_back(task);
        }
        TaskOutcome::Failed(err) => fail_task(core, t, task, FailureKind::Application(err)),
        // An argument's value could not be fetched: its node was lost. If lineage is making it
        // again (or can), the task waits for it and runs again.
        TaskOutcome::BadArgument(err)
            if err.type_name == LOST_ARGUMENT && spec.attempt < spec.max_retries =>
        {
            core.stats.retried += 1;
            let mut next = (*spec).clone();
            next.attempt += 1;
            retried(core, task, next, FailureKind::BadArgument(err));
            for dep in spec.dependencies() {
                if core.objects.get(&dep).map(|o| &o.state) == Some(&ObjectState::Released) {
                    rebuild(core, t, dep);
                }
            }
            requeue(core, t, task);
        }
        TaskOutcome::BadArgument(err) => fail_task(core, t, task, FailureKind::BadArgument(err)),
        TaskOutcome::FunctionNotFound { build } => {
            let name = spec.function.to_string();
            fail_task(core, t, task, FailureKind::FunctionNotFound { name, build })
        }
    }
}

/// `worker` belongs to `actor` and finished `task` (its creation task or one of its calls) with
/// `outcome`. The worker keeps what it holds either way.
fn on_actor_task_done(
    core: &mut Core,
    t: &mut impl Transport,
    worker: WorkerId,
    actor: TaskId,
    task: TaskId,
    outcome: TaskOutcome,
) {
    let Some(w) = core.workers.get_mut(&worker) else {
        return;
    };
    let Some(pos) = w.tasks.iter().position(|x| *x == task) else {
        return;
    };
    w.tasks.remove(pos);
    let node = core.nodes[w.node].id;
    let Some(spec) = core.tasks.get(&task).map(|e| e.spec.clone()) else {
        // Failed meanwhile (cancelled, or its actor was killed): the report is late.
        if task != actor {
            actors::on_call_done(core, t, actor, false);
        }
        return;
    };
    let sizes = match outcome {
        TaskOutcome::Stored { size } => Ok(vec![size]),
        TaskOutcome::Returns(sizes) => Ok(sizes),
        TaskOutcome::Failed(err) => Err(FailureKind::Application(err)),
        TaskOutcome::BadArgument(err) => Err(FailureKind::BadArgument(err)),
        TaskOutcome::FunctionNotFound { build } => Err(FailureKind::FunctionNotFound {
            name: spec.function.to_string(),
            build,
        }),
    };
    if task == actor {
        match sizes {
            Ok(sizes) if sizes.len() == spec.return_count() as usize => {
                // The actor holds its creation task's arguments for its restarts: they are let
                // go when it dies, not now.
                if let Some(entry) = core.tasks.remove(&task) {
                    core.events.finished(&spec, entry.event, entry.started);
                }
                core.children.remove(&task);
                core.stats.succeeded += 1;
                for (ret, size) in spec.return_objects().zip(&sizes) {
                    settle_value(core, t, ret, node, *size);
                }
                actors::on_created(core, t, actor, node, worker);
                maybe_free(core, t, spec.return_object());
            }
            other => {
                let cause = match other {
                    Err(kind) => {
                        let failure = TaskFailure {
                            task,
                            attempt: spec.attempt,
                            kind,
                        };
                        format!("its constructor failed: {failure}")
                    }
                    Ok(_) => "its constructor returned the wrong number of values".to_string(),
                };
                actors::kill(core, t, actor, true, &cause);
            }
        }
        return;
    }
    match sizes {
        Ok(sizes) => {
            finish(core, t, task, &spec, None, node, &sizes);
            actors::on_call_done(core, t, actor, true);
        }
        Err(FailureKind::Application(err))
            if spec.retries_error(&err) && spec.attempt < spec.max_retries =>
        {
            next_attempt(core, task, &spec, FailureKind::Application(err));
            actors::retry_call(core, actor, task);
        }
        Err(kind) => {
            fail_task(core, t, task, kind);
            actors::on_call_done(core, t, actor, false);
        }
    }
}

/// `task` (of `spec`, live) failed with `kind`, an error it retries: its next attempt is ready
/// to go. Returns its class.
fn next_attempt(core: &mut Core, task: TaskId, spec: &TaskSpec, kind: FailureKind) -> usize {
    core.stats.retried += 1;
    let mut next = spec.clone();
    next.attempt += 1;
    retried(core, task, next, kind);
    let e = core.tasks.get_mut(&task).expect("present");
    e.state = TaskState::Queued;
    e.started = core.events.ready(e.spec.job, e.event);
    e.class as usize
}

/// The attempt of live `task` now running failed with `kind` and `next` is its next attempt:
/// the failed attempt's record says why, and the next gets a record of its own (pending its
/// arguments until it is queued).
pub(crate) fn retried(core: &mut Core, task: TaskId, next: TaskSpec, kind: FailureKind) {
    let e = core.tasks.get_mut(&task).expect("present");
    let failure = Arc::new(TaskFailure {
        task,
        attempt: e.spec.attempt,
        kind,
    });
    core.events.failed(&e.spec, e.event, &failure, e.started);
    e.event = core.events.open(&next, false);
    e.started = 0;
    e.spec = Arc::new(next);
}

/// An actor's creation task runs again (a restart): queued (or waiting for its arguments)
/// like any task, with the spec of this attempt. The actor still holds its arguments.
pub(crate) fn rerun_creation(core: &mut Core, t: &mut impl Transport, spec: Arc<TaskSpec>) {
    let id = spec.id;
    let class = core.class_of(&spec);
    let event = core.events.open(&spec, false);
    core.tasks.insert(
        id,
        TaskEntry {
            spec,
            state: TaskState::Queued,
            class,
            event,
            started: 0,
        },
    );
    requeue(core, t, id);
}

/// `task`, of `spec`, finished on `node` with values of these sizes (one per return); `last` is
/// the task its worker holds last, if any.
#[inline]
fn finish(
    core: &mut Core,
    t: &mut impl Transport,
    task: TaskId,
    spec: &TaskSpec,
    last: Option<TaskId>,
    node: NodeId,
    sizes: &[u64],
) {
    if sizes.len() != spec.return_count() as usize {
        let e = RemoteError::new(
            "starling::WrongReturnCount",
            format!(
                "the task returned {} value(s), its caller expects {}",
                sizes.len(),
                spec.return_count()
            ),
        );
        fail_task(core, t, task, FailureKind::Application(e));
        return;
    }
    if let Some(entry) = core.tasks.remove(&task) {
        core.events.finished(spec, entry.event, entry.started);
    }
    core.children.remove(&task);
    core.stats.succeeded += 1;
    for (ret, size) in spec.return_objects().zip(sizes) {
        settle_value(core, t, ret, node, *size);
    }
    release_arguments(core, t, spec);
    // The worker's pipeline has room again: hand it what waits on its last task.
    if let Some(last) = last {
        pipeline_dependents(core, t, last);
    }
    for ret in spec.return_objects() {
        maybe_free(core, t, ret);
    }
}

/// `object`, made by a task that just finished, has its value on `node`: its dependents that
/// wait for nothing else are queued. A return made again for lineage while another return of
/// the same task is still stored keeps the stored one (only a pending or released object takes
/// the new value).
fn settle_value(
    core: &mut Core,
    t: &mut impl Transport,
    object: ObjectId,
    node: NodeId,
    size: u64,
) {
    let dependents = match core.objects.get_mut(&object) {
        Some(o) if matches!(o.state, ObjectState::Pending | ObjectState::Released) => {
            o.state = ObjectState::Ready { node, size };
            std::mem::take(&mut o.dependents)
        }
        _ => return,
    };
    t.object_ready(object, node);
    for d in dependents {
        if let Some(e) = core.tasks.get_mut(&d) {
            if let TaskState::WaitingForDependencies(n) = &mut e.state {
                *n -= 1;
                if *n == 0 {
                    e.state = TaskState::Queued;
                    e.started = core.events.ready(e.spec.job, e.event);
                    core.classes[e.class as usize].queue.push_back(d);
                }
            }
        }
    }
}

/// `worker` is gone (its process exited or its connection dropped). Its running task is retried
/// (a lost worker is always retried, up to `max_retries`) or fails with `WorkerDied`; what the
/// task held goes back to the node.
pub fn on_worker_removed(core: &mut Core, t: &mut impl Transport, worker: WorkerId, exit: &str) {
    let Some(w) = core.workers.remove(&worker) else {
        return;
    };
    let node = &mut core.nodes[w.node];
    node.workers = node.workers.saturating_sub(1);
    node.idle.retain(|(_, id)| *id != worker);
    node.available.add(&w.held);
    node.gpus.give(&w.gpus);
    relend_thread_waits(core, worker);
    if let Some(actor) = w.actor {
        actors::on_worker_lost(core, t, actor, w.tasks, exit);
        return;
    }
    for task in w.tasks {
        let Some(entry) = core.tasks.get_mut(&task) else {
            continue;
        };
        if entry.spec.attempt < entry.spec.max_retries {
            core.stats.retried += 1;
            let mut next = (*entry.spec).clone();
            next.attempt += 1;
            let exit = exit.to_string();
            retried(core, task, next, FailureKind::WorkerDied { exit });
            requeue(core, t, task);
        } else {
            let exit = exit.to_string();
            fail_task(core, t, task, FailureKind::WorkerDied { exit });
        }
    }
}

/// `worker`'s connection is gone but it is not removed yet (the head waits for its node to say
/// how it exited, to name that in its tasks' failures): nothing more is handed to it, so no
/// task is sent where nobody reads it. Its tasks are retried when it is removed.
pub fn on_worker_draining(core: &mut Core, worker: WorkerId) {
    if let Some(w) = core.workers.get_mut(&worker) {
        w.draining = true;
        core.nodes[w.node].idle.retain(|(_, id)| *id != worker);
    }
}

/// `node` is gone (its agent disconnected or missed its heartbeats): it takes no more tasks, and
/// its workers' running tasks are retried elsewhere or fail with `WorkerDied`.
pub fn on_node_lost(core: &mut Core, t: &mut impl Transport, node: NodeId, why: &str) {
    let Some(&i) = core.node_index.get(&node) else {
        return;
    };
    core.nodes[i].alive = false;
    let workers: Vec<WorkerId> = core
        .workers
        .iter()
        .filter(|(_, w)| w.node == i)
        .map(|(id, _)| *id)
        .collect();
    for w in workers {
        on_worker_removed(core, t, w, why);
    }
}

/// `worker`'s task blocked in `get`: its CPUs go back to the node so other tasks can run (and a
/// graph of nested tasks cannot deadlock a node with one worker). GPUs and custom resources stay
/// held, as in Ray.
pub fn on_worker_blocked(core: &mut Core, worker: WorkerId) {
    let Some(w) = core.workers.get_mut(&worker) else {
        return;
    };
    // An actor holds its resources for its whole life, waiting or not.
    if w.tasks.is_empty() || w.actor.is_some() {
        return;
    }
    // Each blocked task reports itself; the CPUs are lent once, by the first.
    w.blocked_tasks += 1;
    if w.blocked {
        return;
    }
    w.blocked = true;
    let cpus = w.held.cpu_units();
    w.held.set_units("CPU", 0);
    w.lent.set_units("CPU", cpus);
    let lent = w.lent.clone();
    core.nodes[w.node].available.add(&lent);
}

/// A thread that is not running a task of its own waits in `get` while tasks run (wait `wait`,
/// an id its caller chose): in-process, it may be a thread a task spawned (nothing tells it from
/// a driver's thread there), and that task may be waiting for it to finish. It lends the CPUs
/// of one running task, the one that has not lent them yet with the smallest id, as if that
/// task were blocked, so the tasks it waits for can run. If that task ends first, the wait
/// lends another's (`relend_thread_waits`): a wait lends for as long as it lasts and tasks
/// run, or a task whose threads wait would get its CPUs back while they still need them lent.
/// Returns whether a task lent (`false` if none runs: nothing holds a CPU that could be lent).
/// [`on_thread_unblocked`] ends the wait.
pub fn on_thread_blocked(core: &mut Core, wait: u64) -> bool {
    if core.thread_waits.contains_key(&wait) {
        return true;
    }
    let Some(pick) = thread_lender(core) else {
        return false;
    };
    on_worker_blocked(core, pick);
    core.thread_waits.insert(wait, pick);
    true
}

/// The running task a thread's wait borrows CPUs from (see [`on_thread_blocked`]).
fn thread_lender(core: &Core) -> Option<WorkerId> {
    core.workers
        .iter()
        .filter(|(_, w)| !w.tasks.is_empty() && !w.draining && w.actor.is_none())
        .min_by_key(|(id, w)| (w.blocked, **id))
        .map(|(id, _)| *id)
}

/// Wait `wait` of [`on_thread_blocked`] ended: the task that lends for it takes its CPUs back
/// (once nothing else of it waits).
pub fn on_thread_unblocked(core: &mut Core, wait: u64) {
    if let Some(worker) = core.thread_waits.remove(&wait) {
        on_worker_unblocked(core, worker);
    }
}

/// `worker` stopped running tasks (they ended, or it is gone): the thread waits it lent for
/// move to another running task, which lends in its place.
fn relend_thread_waits(core: &mut Core, worker: WorkerId) {
    if core.thread_waits.is_empty() {
        return;
    }
    let waits: Vec<u64> = core
        .thread_waits
        .iter()
        .filter(|(_, w)| **w == worker)
        .map(|(wait, _)| *wait)
        .collect();
    for wait in waits {
        core.thread_waits.remove(&wait);
        on_thread_blocked(core, wait);
    }
}

/// `worker`'s task is running again. It takes its CPUs back if they are free; otherwise it runs
/// on without them (the node is briefly oversubscribed) rather than waiting.
pub fn on_worker_unblocked(core: &mut Core, worker: WorkerId) {
    let Some(w) = core.workers.get_mut(&worker) else {
        return;
    };
    if !w.blocked {
        return;
    }
    // The CPUs come back when the last blocked task of the worker resumes.
    w.blocked_tasks = w.blocked_tasks.saturating_sub(1);
    if w.blocked_tasks > 0 {
        return;
    }
    w.blocked = false;
    let lent = std::mem::take(&mut w.lent);
    let node = &mut core.nodes[w.node];
    if node.available.contains(&lent) {
        node.available.subtract(&lent);
        w.held.add(&lent);
    }
}

/// Cancels `task`. A queued or waiting task never runs; a running one is told to stop (`force`
/// kills it). Its object settles as cancelled and every task that depends on it fails.
/// Returns `false` if the task had already finished.
pub fn on_cancel(core: &mut Core, t: &mut impl Transport, task: TaskId, force: bool) -> bool {
    let Some(entry) = core.tasks.get(&task) else {
        return false;
    };
    if matches!(entry.spec.extras.actor, ActorRole::Create(_)) {
        // Cancelling an actor's creation ends the actor.
        return actors::kill(core, t, task, true, "its creation was cancelled");
    }
    let mut killed = None;
    // A call of an actor is never forced (as in Ray): killing its worker would end the actor.
    let force = force && entry.spec.extras.actor == ActorRole::None;
    match entry.state {
        TaskState::Running { worker, .. } => {
            t.cancel_running(worker, task, force);
            if force {
                killed = Some(worker);
            }
        }
        TaskState::Infeasible(_) => core.infeasible.retain(|x| *x != task),
        // Queue entries of removed tasks are skipped by `schedule`.
        TaskState::Queued | TaskState::WaitingForDependencies(_) => {}
    }
    fail_task(core, t, task, FailureKind::Cancelled);
    // Force: the worker is killed (a thread in one process: let go), so what it held is free
    // now, and whatever else it was handed goes elsewhere as after any lost worker.
    if let Some(worker) = killed {
        on_worker_removed(core, t, worker, "its task was force-cancelled");
    }
    true
}

/// Kills `actor` (Ray's `ray.kill`): its worker is stopped at once; with `no_restart` it dies
/// and every call of it not finished fails with `ActorDied`, otherwise it is started again if
/// it has restarts left. Returns whether it was alive or starting.
pub fn on_kill_actor(
    core: &mut Core,
    t: &mut impl Transport,
    actor: TaskId,
    no_restart: bool,
) -> bool {
    actors::kill(core, t, actor, no_restart, "killed by starling::kill")
}

/// Cancels `task` and, recursively, every unfinished task it submitted (Ray's
/// `ray.cancel(recursive=True)`): what a user's `cancel` does. Returns whether `task` was live.
pub fn on_cancel_tree(core: &mut Core, t: &mut impl Transport, task: TaskId, force: bool) -> bool {
    let mut tree = vec![task];
    let mut i = 0;
    while i < tree.len() {
        if let Some(children) = core.children.get(&tree[i]) {
            tree.extend(children.iter().copied());
        }
        i += 1;
    }
    let live = on_cancel(core, t, task, force);
    for child in &tree[1..] {
        on_cancel(core, t, *child, force);
    }
    live
}

/// `job` has ended (a multi-node job whose entrypoint exited, failed or was cancelled, or a
/// driver whose session closed): every task of it that has not finished is cancelled, so none
/// runs again when its worker process is stopped, what the running ones held goes back to
/// their nodes as their workers leave, and its pending worker requests are dropped. Returns
/// how many tasks were cancelled.
pub fn on_job_ended(core: &mut Core, t: &mut impl Transport, job: JobId) -> usize {
    let mut tasks: Vec<TaskId> = core
        .tasks
        .iter()
        .filter(|(_, e)| e.spec.job == job)
        .map(|(id, _)| id)
        .collect();
    // Oldest first, so dependents fail as `Cancelled` upstream chains of their own roots.
    tasks.sort_unstable();
    let mut n = 0;
    for task in tasks {
        n += usize::from(on_cancel(core, t, task, true));
    }
    for node in &mut core.nodes {
        node.requested_workers.retain(|p, _| p.job != job);
    }
    // Its actors end with it, but detached ones, which live until killed.
    let ended: Vec<TaskId> = core
        .actors
        .iter()
        .filter(|(_, a)| a.spec.job == job && !a.options.detached)
        .map(|(id, _)| *id)
        .collect();
    for actor in ended {
        actors::kill(core, t, actor, true, "its job ended");
    }
    // Every task of the job is gone: its classes go too, so `schedule` never walks them again.
    if !core.tasks.values().any(|e| e.spec.job == job) {
        core.free_classes_of(job);
    }
    n
}

/// Places every placeable ready task. Call once after a batch of events.
pub fn schedule(core: &mut Core, t: &mut impl Transport) {
    schedule_pass(core, t);
    // Changes after this pass belong to the next batch, of another time.
    core.events.batch_ended();
}

fn schedule_pass(core: &mut Core, t: &mut impl Transport) {
    for c in 0..core.classes.len() {
        loop {
            let class = &core.classes[c];
            let Some(&task) = class.queue.front() else {
                break;
            };
            let (live, together, call) = match core.tasks.get(&task) {
                Some(e) => (
                    e.state == TaskState::Queued,
                    e.spec.extras.max_concurrency > 1,
                    matches!(e.spec.extras.actor, ActorRole::Call(_)),
                ),
                None => (false, false, false),
            };
            if !live {
                core.classes[c].queue.pop_front();
                continue;
            }
            if call {
                // Ready: it goes to its actor's worker, in its actor's order.
                core.classes[c].queue.pop_front();
                actors::call_ready(core, task);
                continue;
            }
            if together && join_concurrent(core, t, c, task) {
                core.classes[c].queue.pop_front();
                continue;
            }
            let class = &core.classes[c];
            let restricted = core.restricted_jobs.contains(&class.job);
            match place(
                &core.nodes,
                &class.resources,
                class.strategy,
                class.pool(),
                restricted,
                &mut core.spread_cursor,
            ) {
                Placement::Node(i) => {
                    core.classes[c].queue.pop_front();
                    start(core, t, task, i);
                    pipeline_dependents(core, t, task);
                }
                Placement::Wait => {
                    if core.pipeline_depth > 1 && pipeline(core, t, c, task) {
                        core.classes[c].queue.pop_front();
                        pipeline_dependents(core, t, task);
                        continue;
                    }
                    request_worker_if_starved(core, t, c);
                    break;
                }
                Placement::Unschedulable(reason) => {
                    core.classes[c].queue.pop_front();
                    fail_task(core, t, task, FailureKind::Unschedulable(reason));
                }
                Placement::Infeasible(reason) => {
                    core.classes[c].queue.pop_front();
                    if let Some(e) = core.tasks.get(&task) {
                        t.task_infeasible(&e.spec, &reason);
                    }
                    core.tasks.get_mut(&task).expect("live").state = TaskState::Infeasible(reason);
                    core.infeasible.push(task);
                }
            }
        }
    }
    actors::dispatch(core, t);
}

fn start(core: &mut Core, t: &mut impl Transport, task: TaskId, node_index: usize) {
    let node = &mut core.nodes[node_index];
    let entry = core.tasks.get_mut(&task).expect("live");
    let pool = Pool::of(&entry.spec);
    // The most recently idle worker of the job, unless one last ran a task reading the same
    // first object (a shard of data a series of tasks works on): that one has it warm.
    let first = entry.spec.dependencies().next();
    let workers = &core.workers;
    let warm = first.and_then(|o| {
        node.idle
            .iter()
            .rposition(|(p, w)| *p == pool && workers.get(w).and_then(|s| s.warm) == Some(o))
    });
    let pos = warm.or_else(|| node.idle.iter().rposition(|(p, _)| *p == pool));
    let (_, worker) = node
        .idle
        .remove(pos.expect("placement only picks nodes with an idle worker of the job"));
    node.available.subtract(&entry.spec.resources);
    let gpus = node
        .gpus
        .take(entry.spec.resources.gpu_units())
        .expect("placement only picks nodes whose GPUs fit");
    entry.state = TaskState::Running {
        node: node.id,
        worker,
    };
    entry.started =
        core.events
            .running(entry.spec.job, entry.event, node.id, worker, entry.started);
    let w = core
        .workers
        .get_mut(&worker)
        .expect("idle workers are registered");
    w.tasks.push_back(task);
    w.class = entry.class;
    w.held = entry.spec.resources.clone();
    w.warm = first;
    w.concurrency = concurrency_of(&entry.spec);
    if matches!(entry.spec.extras.actor, ActorRole::Create(_)) {
        w.actor = Some(task);
    }
    let gpu_ids = node.gpus.ids(&gpus);
    w.gpus = gpus;
    t.dispatch(node.id, worker, &entry.spec, &gpu_ids);
}

/// How many tasks a worker that starts `spec` may run together with it: its `max_concurrency`,
/// or 1 for a task holding GPUs (its worker is shown the GPU ids of one grant).
fn concurrency_of(spec: &TaskSpec) -> u32 {
    // An actor's calls run on its own worker, however many the actor runs at once.
    if spec.resources.gpu_units() > 0 || spec.extras.actor != ActorRole::None {
        1
    } else {
        spec.extras.max_concurrency.max(1)
    }
}

/// Starts `task` on a worker that runs tasks together (`concurrency > 1`) and has room for it,
/// on a node where its resources are free and its strategy allows; the fullest such worker, so
/// such tasks gather in as few processes as they can. Returns whether it did.
fn join_concurrent(core: &mut Core, t: &mut impl Transport, class: usize, task: TaskId) -> bool {
    let Some(entry) = core.tasks.get(&task) else {
        return false;
    };
    let want = concurrency_of(&entry.spec);
    if want <= 1 {
        return false;
    }
    let class = &core.classes[class];
    let restricted = core.restricted_jobs.contains(&class.job);
    let pool = class.pool();
    let pinned = match class.strategy {
        SchedulingStrategy::NodeAffinity { node, soft: false } => Some(node),
        _ => None,
    };
    let best = core
        .workers
        .iter()
        .filter(|(_, w)| {
            let node = &core.nodes[w.node];
            w.pool() == pool
                && w.concurrency > 1
                && w.actor.is_none()
                && !w.draining
                && !w.blocked
                && !w.tasks.is_empty()
                && (w.tasks.len() as u32) < w.concurrency.min(want)
                && node.alive
                && node.serves(class.job, restricted)
                && pinned.is_none_or(|n| n == node.id)
                && node.available.contains(&class.resources)
        })
        .max_by_key(|(id, w)| (w.tasks.len(), std::cmp::Reverse(**id)))
        .map(|(id, _)| *id);
    let Some(worker) = best else {
        return false;
    };
    let resources = class.resources.clone();
    let w = core.workers.get_mut(&worker).expect("listed");
    let node = &mut core.nodes[w.node];
    node.available.subtract(&resources);
    w.held.add(&resources);
    w.tasks.push_back(task);
    w.concurrency = w.concurrency.min(want);
    let entry = core.tasks.get_mut(&task).expect("live");
    entry.state = TaskState::Running {
        node: node.id,
        worker,
    };
    entry.started =
        core.events
            .running(entry.spec.job, entry.event, node.id, worker, entry.started);
    t.dispatch(node.id, worker, &entry.spec, &[]);
    true
}

/// A worker reports that `task` ran for `micros` microseconds. Pipelines are sized from it: a
/// class of short tasks is pipelined deeply, a class of long ones not at all, so long tasks never
/// queue behind each other on one worker while another is free.
pub fn on_task_runtime(core: &mut Core, task: TaskId, micros: u64) {
    let Some(entry) = core.tasks.get(&task) else {
        return;
    };
    let moving = |avg: f64| {
        if avg == 0.0 {
            micros as f64
        } else {
            0.8 * avg + 0.2 * micros as f64
        }
    };
    let class = &mut core.classes[entry.class as usize];
    class.avg_runtime_us = moving(class.avg_runtime_us);
    let f = match core.fn_runtime_us.get_mut(&entry.spec.function) {
        Some(f) => f,
        None => core
            .fn_runtime_us
            .entry(entry.spec.function.clone())
            .or_insert(0.0),
    };
    *f = moving(*f);
}

/// Whether tasks of `task`'s function are known to run within [`PIPELINE_WINDOW_US`]: only
/// those are queued behind a running task, and only behind one of them. A function that never
/// reported (or runs long) may hold its worker for any time, and a task queued behind it would
/// wait that long while other workers free up. A streaming task is never short: it may pause
/// until its items are taken, maybe by a task that would be queued behind it.
fn known_short(core: &Core, task: TaskId) -> bool {
    core.tasks
        .get(&task)
        .filter(|e| !e.spec.extras.streaming)
        .and_then(|e| core.fn_runtime_us.get(&e.spec.function))
        .is_some_and(|us| *us > 0.0 && *us <= PIPELINE_WINDOW_US)
}

/// How many tasks of `class` a worker may hold: enough to cover [`PIPELINE_WINDOW_US`] of work.
fn class_depth(core: &Core, class: usize) -> usize {
    let avg = core.classes[class].avg_runtime_us;
    let depth = if avg <= 0.0 {
        2
    } else {
        (PIPELINE_WINDOW_US / avg.max(1.0)) as usize
    };
    depth.clamp(1, core.pipeline_depth)
}

/// The live tasks `task` descends from (its parent, the parent's parent, ...), nearest first;
/// empty for a task a driver submitted, so drivers' tasks pay nothing for it.
fn ancestors(core: &Core, task: TaskId) -> Vec<TaskId> {
    let mut out = Vec::new();
    let mut at = core.tasks.get(&task).and_then(|e| e.spec.parent);
    while let Some(p) = at {
        // Ids are fresh per task, so a chain never loops; the bound is for a corrupt spec.
        if out.len() >= 4096 {
            break;
        }
        let Some(entry) = core.tasks.get(&p) else {
            break;
        };
        out.push(p);
        at = entry.spec.parent;
    }
    out
}

/// The work a pipeline should hold: a few network round trips between a worker and the head.
pub const PIPELINE_WINDOW_US: f64 = 2_000.0;

/// Hands `task` (of class `class`) to the least loaded busy worker that runs that class and has
/// room in its pipeline. Returns whether it did. A worker blocked in `get` qualifies: it runs
/// what it is handed on a spare thread, so the children of a task that waits for them run in its
/// own process instead of a new one per level of nesting.
fn pipeline(core: &mut Core, t: &mut impl Transport, class: usize, task: TaskId) -> bool {
    if concurrency_of(&core.tasks[&task].spec) > 1
        || core.tasks[&task].spec.extras.actor != ActorRole::None
    {
        // Run together with others of its kind, or on a worker of its own; never behind one.
        return false;
    }
    let depth = class_depth(core, class);
    // A worker blocked in `get` runs what it is handed at once, on a spare thread, so it takes a
    // full pipeline whatever the class's runtime.
    let limit = |w: &crate::core::WorkerState| {
        if w.blocked {
            core.pipeline_depth
        } else {
            depth
        }
    };
    let pool = core.classes[class].pool();
    // A task of a function that may run long is not queued behind anything, and nothing is
    // queued behind a task that may run long, except on a worker blocked in `get` (it runs
    // what it is handed at once, beside the blocked task).
    let short = known_short(core, task);
    // Nor is a task queued behind one of its ancestors on a worker that is not blocked: the
    // ancestor may wait for it in ways the worker cannot see (a thread it joins, a channel).
    let ancestors = ancestors(core, task);
    let best = core
        .workers
        .iter()
        .filter(|(_, w)| {
            w.pool() == pool
                && !w.draining
                && w.concurrency <= 1
                && w.actor.is_none()
                && !w.tasks.is_empty()
                && w.class as usize == class
                && w.tasks.len() < limit(w)
                && core.nodes[w.node].alive
                && (w.blocked
                    || (short
                        && w.tasks.front().is_some_and(|&f| known_short(core, f))
                        && !w.tasks.iter().any(|x| ancestors.contains(x))))
        })
        .min_by_key(|(id, w)| (w.tasks.len(), **id))
        .map(|(id, _)| *id);
    let Some(worker) = best else {
        return false;
    };
    hand_to_busy_worker(core, t, worker, task);
    true
}

/// How many worker processes may be starting at once on one node for actors waiting to be
/// created (each needs a process of its own, so they are asked for together).
pub const PARALLEL_ACTOR_STARTS: usize = 8;

/// A class waits although some node has the resources: that node has no idle worker (all are
/// busy or blocked in `get`). Ask for one more, one request at a time per node; for actors
/// waiting to be created at the front of the class, one per actor, up to
/// [`PARALLEL_ACTOR_STARTS`] at a time per node.
fn request_worker_if_starved(core: &mut Core, t: &mut impl Transport, class: usize) {
    let need = &core.classes[class].resources;
    let job = core.classes[class].job;
    let pool = core.classes[class].pool();
    let creations = core.classes[class]
        .queue
        .iter()
        .take(PARALLEL_ACTOR_STARTS)
        .take_while(|task| {
            core.tasks.get(task).is_some_and(|e| {
                e.state == TaskState::Queued && matches!(e.spec.extras.actor, ActorRole::Create(_))
            })
        })
        .count();
    let want = creations.max(1);
    let restricted = core.restricted_jobs.contains(&job);
    // A task pinned to a node (hard affinity) is helped only by a worker on that node.
    let only = match core.classes[class].strategy {
        SchedulingStrategy::NodeAffinity { node, soft: false } => Some(node),
        _ => None,
    };
    for n in &mut core.nodes {
        if only.is_some_and(|id| id != n.id) {
            continue;
        }
        let idle_in_pool = n.idle.iter().any(|(p, _)| *p == pool);
        let asked = n.requested_workers.get(&pool).copied().unwrap_or(0);
        if n.alive
            && n.serves(job, restricted)
            && !idle_in_pool
            && asked < want
            && n.available.contains(need)
        {
            *n.requested_workers.entry(pool).or_default() = want;
            for _ in asked..want {
                t.request_worker(n.id, job, &core.classes[class].env);
            }
            return;
        }
    }
}

/// Ends `task` with a failure and fails everything downstream of it.
pub(crate) fn fail_task(core: &mut Core, t: &mut impl Transport, task: TaskId, kind: FailureKind) {
    let Some(entry) = core.tasks.remove(&task) else {
        return;
    };
    core.children.remove(&task);
    core.stats.failed += 1;
    let failure = Arc::new(TaskFailure {
        task,
        attempt: entry.spec.attempt,
        kind,
    });
    core.events
        .failed(&entry.spec, entry.event, &failure, entry.started);
    if !matches!(failure.kind, FailureKind::Cancelled) {
        t.task_failed(entry.spec.job, &failure);
    }
    release_arguments(core, t, &entry.spec);
    for ret in entry.spec.return_objects() {
        settle_failure(core, t, ret, failure.clone());
    }
}

/// Marks `object` failed, tells the transport, and fails its dependents (iteratively, so a
/// chain of a million tasks does not overflow the stack).
fn settle_failure(
    core: &mut Core,
    t: &mut impl Transport,
    object: ObjectId,
    failure: Arc<TaskFailure>,
) {
    let mut work = vec![(object, failure)];
    while let Some((object, failure)) = work.pop() {
        let (dependents, lineage) = match core.objects.get_mut(&object) {
            Some(o) => {
                o.state = ObjectState::Failed(failure.clone());
                (std::mem::take(&mut o.dependents), o.lineage.take())
            }
            None => (Vec::new(), None),
        };
        t.object_failed(object, &failure);
        // A failed object is never made again: its arguments' lineage is not needed for it.
        if let Some(spec) = lineage {
            drop_lineage(core, t, &spec);
        }
        for d in dependents {
            if let Some(entry) = core.tasks.remove(&d) {
                core.children.remove(&d);
                core.stats.failed += 1;
                let f = Arc::new(TaskFailure {
                    task: d,
                    attempt: entry.spec.attempt,
                    kind: FailureKind::Upstream(failure.clone()),
                });
                core.events
                    .failed(&entry.spec, entry.event, &f, entry.started);
                release_arguments(core, t, &entry.spec);
                for ret in entry.spec.return_objects() {
                    work.push((ret, f.clone()));
                }
            }
        }
        maybe_free(core, t, object);
    }
}

pub(crate) fn release_arguments(core: &mut Core, t: &mut impl Transport, spec: &TaskSpec) {
    for dep in spec.references() {
        if let Some(o) = core.objects.get_mut(&dep) {
            o.task_refs = o.task_refs.saturating_sub(1);
            if o.is_garbage() {
                free(core, t, dep);
            }
        }
    }
}

fn maybe_free(core: &mut Core, t: &mut impl Transport, object: ObjectId) {
    if core
        .objects
        .get(&object)
        .is_some_and(ObjectEntry::is_garbage)
    {
        free(core, t, object);
    }
}

/// Frees what nobody needs any more: the value of `object`, and its entry unless lineage of a
/// live object still takes it as an argument; removing an entry drops its own lineage, which may
/// free its arguments in turn (iteratively: a chain of a million tasks is no deep recursion).
pub(crate) fn free(core: &mut Core, t: &mut impl Transport, object: ObjectId) {
    // Most frees free one object: the work list allocates only when one frees others.
    let mut work = Vec::new();
    let mut next = Some(object);
    while let Some(object) = next.take().or_else(|| work.pop()) {
        let Some(o) = core.objects.get_mut(&object) else {
            continue;
        };
        if !o.is_garbage() {
            continue;
        }
        if o.lineage_refs > 0 {
            if let ObjectState::Ready { node, .. } = o.state {
                o.state = ObjectState::Released;
                core.stats.objects_freed += 1;
                t.free_object(object, Some(node));
                unref_nested(core, object, &mut work);
            }
            continue;
        }
        let o = core.objects.remove(&object).expect("present");
        core.producers.remove(&object);
        if o.state != ObjectState::Released {
            core.stats.objects_freed += 1;
            t.free_object(object, o.location());
            unref_nested(core, object, &mut work);
        }
        if let Some(spec) = o.lineage {
            unref_lineage(core, &spec, &mut work);
        }
        actors::on_object_freed(core, t, object);
    }
}

/// The value of `container` is gone: the objects it held refs to lose one `nested_in` each.
fn unref_nested(core: &mut Core, container: ObjectId, garbage: &mut Vec<ObjectId>) {
    let Some(refs) = core.nested.remove(&container) else {
        return;
    };
    for r in refs.iter() {
        if let Some(o) = core.objects.get_mut(r) {
            o.nested_in = o.nested_in.saturating_sub(1);
            if o.is_garbage() {
                garbage.push(*r);
            }
        }
    }
}

/// `spec` is no longer anyone's lineage: its arguments lose one lineage reference each.
fn drop_lineage(core: &mut Core, t: &mut impl Transport, spec: &TaskSpec) {
    let mut work = Vec::new();
    unref_lineage(core, spec, &mut work);
    for object in work {
        free(core, t, object);
    }
}

fn unref_lineage(core: &mut Core, spec: &TaskSpec, garbage: &mut Vec<ObjectId>) {
    for dep in spec.references() {
        if let Some(d) = core.objects.get_mut(&dep) {
            debug_assert!(d.lineage_refs > 0, "{dep}: lineage references miscounted");
            d.lineage_refs = d.lineage_refs.saturating_sub(1);
            if d.lineage_refs == 0 && d.is_garbage() {
                garbage.push(dep);
            }
        }
    }
}

/// The error type a worker reports when it cannot fetch an argument's value.
pub const LOST_ARGUMENT: &str = "starling::ObjectLost";

/// The values of `lost` are gone with their node. Each one still needed is made again from its
/// lineage (its task runs again, after whatever of its own arguments is gone too); one that has
/// no lineage (a `put`) fails with `ObjectLost`, and so does everything waiting for it. Tasks
/// not yet running that take a lost object wait for it again.
pub fn on_objects_lost(core: &mut Core, t: &mut impl Transport, lost: &[ObjectId]) {
    let mut gone = Vec::new();
    for &object in lost {
        if let Some(o) = core.objects.get_mut(&object) {
            if matches!(o.state, ObjectState::Ready { .. }) {
                o.state = ObjectState::Released;
                gone.push(object);
            }
        }
    }
    if gone.is_empty() {
        return;
    }
    // The lost values' nested refs go with them (a value made again holds refs of its own).
    let mut garbage = Vec::new();
    for &object in &gone {
        unref_nested(core, object, &mut garbage);
    }
    for object in garbage {
        free(core, t, object);
    }
    let gone_set: std::collections::HashSet<ObjectId> = gone.iter().copied().collect();
    // Tasks that have not started and take a lost object wait for it again.
    let waiting: Vec<TaskId> = core
        .tasks
        .iter()
        .filter(|(_, e)| !matches!(e.state, TaskState::Running { .. }))
        .filter(|(_, e)| e.spec.dependencies().any(|d| gone_set.contains(&d)))
        .map(|(id, _)| id)
        .collect();
    for object in gone {
        let needed = core.objects[&object].is_needed();
        if needed {
            rebuild(core, t, object);
        }
    }
    for task in waiting {
        // `requeue` counts pending arguments afresh; a task that was queued leaves a stale
        // queue entry, which `schedule` skips.
        if let Some(e) = core.tasks.get(&task) {
            if matches!(e.state, TaskState::Infeasible(_)) {
                core.infeasible.retain(|x| *x != task);
            }
        }
        requeue(core, t, task);
    }
}

/// Makes a released `object` again: its task runs again, after its released arguments are made
/// again in turn. An object without lineage fails with `ObjectLost`.
fn rebuild(core: &mut Core, t: &mut impl Transport, object: ObjectId) {
    let mut stack = vec![object];
    while let Some(object) = stack.pop() {
        let Some(o) = core.objects.get_mut(&object) else {
            continue;
        };
        if o.state != ObjectState::Released {
            continue;
        }
        let Some(spec) = o.lineage.clone() else {
            let failure = Arc::new(TaskFailure {
                task: object.task(),
                attempt: 0,
                kind: FailureKind::ObjectLost(object),
            });
            settle_failure(core, t, object, failure);
            continue;
        };
        o.state = ObjectState::Pending;
        let task = spec.id;
        // Another return of the same task is being made again already: that run makes this
        // one too.
        if core.tasks.contains_key(&task) {
            continue;
        }
        core.stats.reconstructed += 1;
        // An argument that failed or vanished fails the run at once, as at submit.
        let mut upstream = None;
        for dep in spec.dependencies() {
            match core.objects.get(&dep).map(|o| &o.state) {
                None => upstream = Some(FailureKind::ObjectLost(dep)),
                Some(ObjectState::Failed(f)) => upstream = Some(FailureKind::Upstream(f.clone())),
                Some(_) => continue,
            }
            break;
        }
        if let Some(kind) = upstream {
            core.stats.failed += 1;
            let failure = Arc::new(TaskFailure {
                task,
                attempt: spec.attempt,
                kind,
            });
            core.events.failed_at_submit(&spec, &failure);
            settle_failure(core, t, object, failure);
            continue;
        }
        let mut missing = 0;
        for dep in spec.dependencies() {
            let d = core.objects.get_mut(&dep).expect("checked above");
            d.task_refs += 1;
            match d.state {
                ObjectState::Pending => {
                    d.dependents.push(task);
                    missing += 1;
                }
                ObjectState::Released => {
                    d.dependents.push(task);
                    missing += 1;
                    stack.push(dep);
                }
                _ => {}
            }
        }
        for nested in spec.extras.contained.iter() {
            if let Some(d) = core.objects.get_mut(nested) {
                d.task_refs += 1;
            }
        }
        let class = core.class_of(&spec);
        let state = if missing == 0 {
            core.classes[class as usize].queue.push_back(task);
            TaskState::Queued
        } else {
            TaskState::WaitingForDependencies(missing)
        };
        let event = core.events.open(&spec, missing == 0);
        let started = core.events.opened(event, missing == 0);
        core.tasks.insert(
            task,
            TaskEntry {
                spec,
                state,
                class,
                event,
                started,
            },
        );
        core.stats.peak_live = core.stats.peak_live.max(core.tasks.len() as u64);
    }
}
