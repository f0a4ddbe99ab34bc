//! Actors (Ray's actors): a worker that keeps state across calls.
//!
//! An actor is made by a task (`ActorRole::Create`) whose id is the actor's. That task is
//! placed like any other, on an idle worker of its pool; from then on the worker belongs to the
//! actor (`WorkerState::actor`): it keeps what the task holds for the actor's whole life, is
//! never idle, and is handed nothing but the actor's calls. A call (`ActorRole::Call`) holds no
//! resources; it waits for its arguments like any task, then in the actor's queue
//! (`Actor::calls`, in the order calls were submitted), and goes to the actor's worker once
//! every call submitted before it went there. The worker runs them in that order.
//!
//! The task's object is the actor's handle object: the actor lives while it does (its handles
//! are refs to it, counted across processes like any ref). When it is freed, the actor is
//! killed once its submitted calls are done; a detached actor holds its own object until it is
//! killed.
//!
//! When the actor's worker dies, the actor is started again (the creation task runs again, on
//! any feasible node) while it has restarts left and was not killed for good; its calls that
//! were on the worker are run again while they have retries left (`max_task_retries`), the
//! others fail with `ActorDied`. A dead actor fails every call at once.
//!
//! A call its caller also sent straight to the actor's worker (`TaskExtras::direct`, see
//! `starling::cluster::client::direct`) waits in `Actor::direct` instead of `calls` and is
//! counted running on that worker as soon as the actor lives there, never handed over (the
//! worker has it); sent to a worker the actor no longer has, it joins `calls` ahead of its
//! caller's later calls. A queued call of a caller waits while that caller's calls sent
//! straight have not run, so one caller's calls run in its order either way.
//!
//! # Invariants
//! - A worker whose `actor` is set runs only that actor's creation task and calls; it is never
//!   in an idle list, never pipelined to, never lends its CPUs.
//! - An actor is `Alive` exactly while its creation task has finished and its worker is
//!   registered; its calls are dispatched only then, in `calls` order; one caller's calls
//!   (one session's ids) run in submission order, whichever way each reached the worker.
//! - A call's task entry lives until it finishes or fails, like any task's; `calls` may hold
//!   ids of calls already gone (cancelled), which the dispatcher skips.

use std::collections::VecDeque;
use std::sync::Arc;

use starling_proto::{ActorOptions, ActorRole, FailureKind, NodeId, ObjectId, TaskId, WorkerId};

use crate::core::{Core, TaskState};
use crate::Transport;

/// Where an actor is in its life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActorState {
    /// Its creation task has not finished yet (the first time).
    PendingCreation,
    /// Its constructor ran; this worker of this node holds it.
    Alive {
        /// The node.
        node: NodeId,
        /// The worker.
        worker: WorkerId,
    },
    /// Its process died and it is being started again.
    Restarting,
    /// It will never run again: why.
    Dead(String),
}

impl ActorState {
    /// The name Ray's state API gives the state.
    pub fn name(&self) -> &'static str {
        match self {
            ActorState::PendingCreation => "PENDING_CREATION",
            ActorState::Alive { .. } => "ALIVE",
            ActorState::Restarting => "RESTARTING",
            ActorState::Dead(_) => "DEAD",
        }
    }
}

/// One actor, as [`Core::actors`] lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActorInfo {
    /// The actor (its creation task's id).
    pub id: TaskId,
    /// Its class.
    pub class_name: String,
    /// Its name (empty: none).
    pub name: String,
    /// Its state (the cause, once dead).
    pub state: ActorState,
    /// How many times it was started again.
    pub restarts: u32,
    /// How many of its calls finished.
    pub calls_served: u64,
    /// The job that created it.
    pub job: starling_proto::JobId,
}

impl From<ActorInfo> for starling_proto::status::ActorStatus {
    /// The actor as the head's status (and the in-process runtime's listing) shows it.
    fn from(a: ActorInfo) -> Self {
        let (node, cause) = match &a.state {
            ActorState::Alive { node, .. } => (Some(*node), String::new()),
            ActorState::Dead(cause) => (None, cause.clone()),
            _ => (None, String::new()),
        };
        starling_proto::status::ActorStatus {
            id: a.id,
            class_name: a.class_name,
            name: a.name,
            state: a.state.name().to_string(),
            cause,
            node,
            restarts: a.restarts,
            calls_served: a.calls_served,
            job: a.job,
        }
    }
}

#[derive(Debug)]
pub(crate) struct Actor {
    /// The creation task, run again on a restart.
    pub spec: Arc<starling_proto::TaskSpec>,
    pub options: Arc<ActorOptions>,
    pub state: ActorState,
    pub restarts: u32,
    /// Calls not yet handed to the worker, in the order they were submitted.
    pub calls: VecDeque<TaskId>,
    /// Calls their caller also sent straight to a worker of the actor (`TaskExtras::direct`),
    /// not yet counted as running there, in the order they were submitted.
    pub direct: VecDeque<TaskId>,
    /// Whether any call was sent straight to it: only then may a queued call have to wait for
    /// its caller's calls sent straight.
    pub straight: bool,
    /// Calls handed to the worker and not finished.
    pub running: usize,
    pub served: u64,
    /// Killed for good: when its worker goes, it dies.
    pub no_restart: bool,
    /// Its handle object was freed: it is killed once no call of it is left.
    pub orphaned: bool,
}

impl Core {
    /// Every actor the scheduler knows (dead ones too), by id.
    pub fn actors(&self) -> Vec<ActorInfo> {
        let mut all: Vec<ActorInfo> = self
            .actors
            .iter()
            .map(|(id, a)| ActorInfo {
                id: *id,
                class_name: a.options.class_name.clone(),
                name: a.options.name.clone(),
                state: a.state.clone(),
                restarts: a.restarts,
                calls_served: a.served,
                job: a.spec.job,
            })
            .collect();
        all.sort_by_key(|a| a.id);
        all
    }

    /// Whether `job` made a detached actor that is not dead: it outlives the job, which must
    /// stay known (its binary, its environment) for the actor's restarts.
    pub fn has_live_detached_actors(&self, job: starling_proto::JobId) -> bool {
        self.actors.values().any(|a| {
            a.spec.job == job && a.options.detached && !matches!(a.state, ActorState::Dead(_))
        })
    }

    /// Whether `id` is an actor this scheduler knows (alive or not).
    pub fn is_actor(&self, id: TaskId) -> bool {
        self.actors.contains_key(&id)
    }

    /// The live actor named `name`, if any.
    pub fn actor_named(&self, name: &str) -> Option<TaskId> {
        self.actor_names.get(name).copied()
    }
}

/// The task `spec` creates an actor: it is registered, pending creation. Fails (saying why) if
/// its name is taken by a live actor.
pub(crate) fn on_create(
    core: &mut Core,
    spec: &Arc<starling_proto::TaskSpec>,
) -> Result<(), FailureKind> {
    let ActorRole::Create(options) = &spec.extras.actor else {
        return Ok(());
    };
    let id = spec.id;
    if !options.name.is_empty() {
        if let Some(other) = core.actor_names.get(&options.name) {
            return Err(FailureKind::ActorDied {
                actor: id,
                cause: format!(
                    "the name `{}` is taken by actor {other}, which is alive",
                    options.name
                ),
            });
        }
        core.actor_names.insert(options.name.clone(), id);
    }
    core.actors.insert(
        id,
        Actor {
            spec: spec.clone(),
            options: options.clone(),
            state: ActorState::PendingCreation,
            restarts: 0,
            calls: VecDeque::new(),
            direct: VecDeque::new(),
            straight: false,
            running: 0,
            served: 0,
            no_restart: false,
            orphaned: false,
        },
    );
    Ok(())
}

/// The task `spec` calls an actor: it joins the actor's queue, or fails at once if the actor
/// is dead or unknown.
pub(crate) fn on_call(core: &mut Core, spec: &starling_proto::TaskSpec) -> Result<(), FailureKind> {
    let ActorRole::Call(actor) = spec.extras.actor else {
        return Ok(());
    };
    match core.actors.get_mut(&actor) {
        None => Err(FailureKind::ActorDied {
            actor,
            cause: "no such actor (never made here, or dead and forgotten)".into(),
        }),
        Some(a) => match &a.state {
            ActorState::Dead(cause) => Err(FailureKind::ActorDied {
                actor,
                cause: cause.clone(),
            }),
            _ if spec.extras.direct.is_some() => {
                a.straight = true;
                a.direct.push_back(spec.id);
                Ok(())
            }
            _ => {
                a.calls.push_back(spec.id);
                Ok(())
            }
        },
    }
}

/// A call is ready (its arguments exist): its actor gets a look in the next [`dispatch`].
pub(crate) fn call_ready(core: &mut Core, task: TaskId) {
    if let Some(ActorRole::Call(actor)) = core.tasks.get(&task).map(|e| &e.spec.extras.actor) {
        core.actors_to_dispatch.push(*actor);
    }
}

/// Hands every actor that may have calls to run its ready calls, in order: from the front of
/// its queue while the front call is ready (a call not ready yet holds back the ones behind
/// it, as calls run in submission order).
pub(crate) fn dispatch(core: &mut Core, t: &mut impl Transport) {
    let mut actors = std::mem::take(&mut core.actors_to_dispatch);
    actors.sort_unstable();
    actors.dedup();
    for actor in actors {
        dispatch_one(core, t, actor);
    }
}

fn dispatch_one(core: &mut Core, t: &mut impl Transport, actor: TaskId) {
    let Some(a) = core.actors.get_mut(&actor) else {
        return;
    };
    let ActorState::Alive { node, worker } = a.state else {
        return;
    };
    if core.workers.get(&worker).is_none_or(|w| w.draining) {
        return;
    }
    // Calls their caller sent straight to this worker run there already, in their caller's
    // order, whatever waits ahead of them (calls of other callers may pass each other, as in
    // Ray). Ones sent to an earlier worker of the actor (gone) take the queue's way.
    while let Some(call) = a.direct.pop_front() {
        let Some(entry) = core.tasks.get_mut(&call) else {
            continue;
        };
        if entry.state != TaskState::Queued {
            continue;
        }
        if entry.spec.extras.direct != Some(worker) {
            // Ahead of its caller's later calls queued meanwhile.
            let session = starling_proto::session_of(call.0);
            let at = a
                .calls
                .iter()
                .position(|c| starling_proto::session_of(c.0) == session && *c > call)
                .unwrap_or(a.calls.len());
            a.calls.insert(at, call);
            continue;
        }
        entry.started =
            core.events
                .running(entry.spec.job, entry.event, node, worker, entry.started);
        a.running += 1;
        on_worker(&mut core.workers, entry, call, node, worker);
    }
    // An async actor has at most `max_concurrency` calls in flight; a sync one takes all its
    // ready calls at once (it runs them one by one, in order).
    let cap = match a.options.max_concurrency {
        0 => usize::MAX,
        n => n as usize,
    };
    while let Some(&call) = a.calls.front() {
        if a.running >= cap {
            return;
        }
        let Some(entry) = core.tasks.get_mut(&call) else {
            // Cancelled meanwhile.
            a.calls.pop_front();
            continue;
        };
        if entry.state != TaskState::Queued {
            return;
        }
        // Not before its caller's calls sent straight to the worker are done (the worker runs
        // those as they come, and this one as it comes).
        let session = starling_proto::session_of(call.0);
        let sent_straight = |t: &TaskId| {
            starling_proto::session_of(t.0) == session
                && core
                    .tasks
                    .get(t)
                    .is_some_and(|e| e.spec.extras.direct == Some(worker))
        };
        if a.straight
            && (a
                .direct
                .iter()
                .any(|t| starling_proto::session_of(t.0) == session)
                || core
                    .workers
                    .get(&worker)
                    .is_some_and(|w| w.tasks.iter().any(sent_straight)))
        {
            return;
        }
        let Some(entry) = core.tasks.get_mut(&call) else {
            return;
        };
        a.calls.pop_front();
        // A sync actor runs its calls one at a time: a call behind another runs once that
        // one ends (see `reactor::started_next`).
        if a.running == 0 || a.options.max_concurrency > 0 {
            entry.started =
                core.events
                    .running(entry.spec.job, entry.event, node, worker, entry.started);
        } else {
            core.events
                .assigned(entry.spec.job, entry.event, node, worker);
        }
        a.running += 1;
        on_worker(&mut core.workers, entry, call, node, worker);
        t.dispatch(node, worker, &entry.spec, &[]);
    }
}

/// `call` (its `entry`) runs on `worker` (known) of `node` now, after what that worker has.
fn on_worker(
    workers: &mut starling_proto::hash::IdMap<WorkerId, crate::core::WorkerState>,
    entry: &mut crate::core::TaskEntry,
    call: TaskId,
    node: NodeId,
    worker: WorkerId,
) {
    entry.state = TaskState::Running { node, worker };
    workers
        .get_mut(&worker)
        .expect("a known worker")
        .tasks
        .push_back(call);
}

/// Whether a call of `actor` sent straight to `worker` can run there: the actor lives on that
/// worker, or that worker runs its creation task now (it is being made or restarted there).
/// Otherwise (dead, or on another worker: its caller has not seen it go yet) the call must take
/// the queue's way only.
pub fn takes_direct(core: &Core, actor: TaskId, worker: WorkerId) -> bool {
    match core.actors.get(&actor).map(|a| &a.state) {
        Some(ActorState::Alive { worker: w, .. }) => *w == worker,
        Some(ActorState::PendingCreation | ActorState::Restarting) => matches!(
            core.task_state(actor),
            Some(TaskState::Running { worker: w, .. }) if *w == worker
        ),
        _ => false,
    }
}

/// `worker` reports `task`, a call its caller sent it directly, before the scheduler counted
/// the call as running there (the report overtook the actor's creation, as the scheduler saw
/// it, or the dispatch that would have counted it): it is counted now, so the report is
/// taken. Does nothing for any other task.
pub fn direct_report(core: &mut Core, worker: WorkerId, task: TaskId) {
    let Some(entry) = core.tasks.get_mut(&task) else {
        return;
    };
    let (ActorRole::Call(actor), Some(to)) = (&entry.spec.extras.actor, entry.spec.extras.direct)
    else {
        return;
    };
    if to != worker || entry.state != TaskState::Queued {
        return;
    }
    let Some(a) = core.actors.get_mut(actor) else {
        return;
    };
    let Some(pos) = a.direct.iter().position(|c| *c == task) else {
        return;
    };
    let Some(w) = core.workers.get_mut(&worker) else {
        return;
    };
    if w.actor != Some(*actor) {
        return;
    }
    a.direct.remove(pos);
    let node = core.nodes[w.node].id;
    entry.started = core
        .events
        .running(entry.spec.job, entry.event, node, worker, entry.started);
    a.running += 1;
    entry.state = TaskState::Running { node, worker };
    w.tasks.push_back(task);
}

/// The creation task of `actor` finished on `worker` of `node` with a value: the actor is
/// alive, and its calls can go. A detached actor's process is kept past its job's end.
pub(crate) fn on_created(
    core: &mut Core,
    t: &mut impl Transport,
    actor: TaskId,
    node: NodeId,
    worker: WorkerId,
) {
    if let Some(a) = core.actors.get_mut(&actor) {
        if matches!(a.state, ActorState::Dead(_)) {
            return;
        }
        if a.options.detached {
            t.keep_worker(worker);
        }
        a.state = ActorState::Alive { node, worker };
        core.actors_to_dispatch.push(actor);
    }
}

/// A call of `actor` failed on its worker with an error it retries: it goes back to the front
/// of the queue (it was the oldest on the worker) and runs again there.
pub(crate) fn retry_call(core: &mut Core, actor: TaskId, task: TaskId) {
    if let Some(a) = core.actors.get_mut(&actor) {
        a.running = a.running.saturating_sub(1);
        a.calls.push_front(task);
        core.actors_to_dispatch.push(actor);
    }
}

/// A call of `actor` finished (either way).
pub(crate) fn on_call_done(core: &mut Core, t: &mut impl Transport, actor: TaskId, ok: bool) {
    let Some(a) = core.actors.get_mut(&actor) else {
        return;
    };
    a.running = a.running.saturating_sub(1);
    if ok {
        a.served += 1;
    }
    if !a.calls.is_empty() {
        // A place in flight opened, or a call waited for its caller's calls sent straight.
        core.actors_to_dispatch.push(actor);
    }
    if a.orphaned && a.running == 0 && a.calls.is_empty() && a.direct.is_empty() {
        kill(core, t, actor, true, "its handles were all dropped");
    }
}

/// Kills `actor` (Ray's `ray.kill`): its worker is stopped at once. With `no_restart` it dies
/// (`cause` says why): every call queued or on the worker fails with `ActorDied`, and so does
/// its creation task if it had not finished. Without, it is restarted like after any lost
/// worker (if it may). Returns whether the actor was alive or starting.
pub fn kill(
    core: &mut Core,
    t: &mut impl Transport,
    actor: TaskId,
    no_restart: bool,
    cause: &str,
) -> bool {
    let Some(a) = core.actors.get_mut(&actor) else {
        return false;
    };
    if matches!(a.state, ActorState::Dead(_)) {
        return false;
    }
    if no_restart {
        a.no_restart = true;
    }
    // The worker that holds it, or runs its creation task now.
    let worker = match a.state {
        ActorState::Alive { worker, .. } => Some(worker),
        _ => match core.task_state(actor) {
            Some(TaskState::Running { worker, .. }) => Some(*worker),
            _ => None,
        },
    };
    if no_restart {
        die(core, t, actor, cause.to_string());
    }
    if let Some(worker) = worker {
        t.kill_worker(worker);
        crate::reactor::on_worker_removed(core, t, worker, cause);
    }
    true
}

/// `actor` is dead for `cause`: its queued calls and its creation task (if not finished) fail
/// with `ActorDied`, its calls on its worker too, its name is free again, and a detached actor
/// lets go of its own object.
fn die(core: &mut Core, t: &mut impl Transport, actor: TaskId, cause: String) {
    let Some(a) = core.actors.get_mut(&actor) else {
        return;
    };
    if !matches!(a.state, ActorState::Dead(_)) {
        core.dead_actors.push_back(actor);
    }
    a.state = ActorState::Dead(cause.clone());
    let mut doomed: Vec<TaskId> = a.direct.drain(..).chain(a.calls.drain(..)).collect();
    a.running = 0;
    if core.actor_names.get(&a.options.name) == Some(&actor) {
        core.actor_names.remove(&a.options.name);
    }
    let detached = a.options.detached;
    let creation = a.spec.clone();
    // The actor held its creation task's arguments once that task finished (for restarts);
    // an unfinished creation task still holds them, and lets them go as it fails below.
    if !core.tasks.contains_key(&actor) {
        crate::reactor::release_arguments(core, t, &creation);
    }
    // Calls on the worker: they fail now, and the worker's late reports of them are ignored.
    for w in core.workers.values_mut() {
        if w.actor == Some(actor) {
            doomed.extend(w.tasks.drain(..));
        }
    }
    doomed.push(actor);
    for task in doomed {
        if core.tasks.contains_key(&task) {
            let kind = FailureKind::ActorDied {
                actor,
                cause: cause.clone(),
            };
            crate::reactor::fail_task(core, t, task, kind);
        }
    }
    if detached {
        release_own_hold(core, t, actor);
    }
    // The oldest dead actors are forgotten: a call of one then fails as a call of no actor.
    while core.dead_actors.len() > MAX_DEAD_ACTORS {
        if let Some(old) = core.dead_actors.pop_front() {
            core.actors.remove(&old);
        }
    }
}

/// How many dead actors the scheduler keeps listing (Ray keeps a bounded number too).
pub const MAX_DEAD_ACTORS: usize = 10_000;

/// A detached actor's own hold on its object (taken at creation) goes.
fn release_own_hold(core: &mut Core, t: &mut impl Transport, actor: TaskId) {
    let object = ObjectId::from(actor);
    if let Some(o) = core.objects.get_mut(&object) {
        o.handles = o.handles.saturating_sub(1);
        if o.is_garbage() {
            crate::reactor::free(core, t, object);
        }
    }
}

/// A detached actor holds its own object from creation on, so it outlives its handles.
pub(crate) fn hold_if_detached(core: &mut Core, spec: &starling_proto::TaskSpec) {
    if let ActorRole::Create(o) = &spec.extras.actor {
        if o.detached {
            if let Some(obj) = core.objects.get_mut(&spec.return_object()) {
                obj.handles += 1;
            }
        }
    }
}

/// `object` is being freed: if it is an actor's, the actor is killed once its calls are done.
pub(crate) fn on_object_freed(core: &mut Core, t: &mut impl Transport, object: ObjectId) {
    let actor = object.task();
    if ObjectId::from(actor) != object {
        return;
    }
    let Some(a) = core.actors.get_mut(&actor) else {
        return;
    };
    if matches!(a.state, ActorState::Dead(_)) {
        // Nothing left to end (a dead actor stays listed).
        return;
    }
    a.orphaned = true;
    if a.running == 0 && a.calls.is_empty() && a.direct.is_empty() {
        kill(core, t, actor, true, "its handles were all dropped");
    }
}

/// The worker of `actor` is gone (`exit` says how), with these tasks on it (the creation task
/// or calls, oldest first). The actor starts again if it may; its calls on the worker run again
/// if they may, ahead of the ones still queued; everything else fails with `ActorDied`.
pub(crate) fn on_worker_lost(
    core: &mut Core,
    t: &mut impl Transport,
    actor: TaskId,
    tasks: VecDeque<TaskId>,
    exit: &str,
) {
    let Some(a) = core.actors.get_mut(&actor) else {
        return;
    };
    if matches!(a.state, ActorState::Dead(_)) {
        return;
    }
    let restart = !a.no_restart && !a.orphaned && a.restarts < a.options.max_restarts;
    if !restart {
        let cause = if a.no_restart {
            "killed".to_string()
        } else {
            format!("its worker process died ({exit}) and it has no restarts left")
        };
        // The calls on the worker are the actor's too: `die` fails them with the rest.
        for task in tasks {
            if task != actor {
                a.calls.push_front(task);
            }
        }
        die(core, t, actor, cause);
        return;
    }
    a.restarts += 1;
    a.state = ActorState::Restarting;
    a.running = 0;
    let retries = a.options.max_task_retries;
    let mut again = Vec::new();
    let mut failed = Vec::new();
    for task in tasks.iter().rev() {
        if *task == actor {
            continue;
        }
        match core.tasks.get_mut(task) {
            Some(e) if e.spec.attempt < retries => {
                let mut next = (*e.spec).clone();
                next.attempt += 1;
                let exit = format!("the actor's worker process died ({exit}) during the call");
                crate::reactor::retried(core, *task, next, FailureKind::WorkerDied { exit });
                let e = core.tasks.get_mut(task).expect("present");
                e.state = TaskState::Queued;
                e.started = core.events.ready(e.spec.job, e.event);
                again.push(*task);
            }
            Some(_) => failed.push(*task),
            None => {}
        }
    }
    let a = core.actors.get_mut(&actor).expect("checked above");
    for task in again {
        a.calls.push_front(task);
    }
    let mut spec = (*a.spec).clone();
    spec.attempt = a.restarts;
    let spec = Arc::new(spec);
    for task in failed {
        let kind = FailureKind::ActorDied {
            actor,
            cause: format!("its worker process died ({exit}) during the call, no retries left"),
        };
        crate::reactor::fail_task(core, t, task, kind);
    }
    crate::reactor::rerun_creation(core, t, spec);
}
