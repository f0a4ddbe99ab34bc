//! Actors (Ray's actors): a worker that keeps state across calls.
//!
//! `#[starling::actor]` on an `impl` block makes its type an actor: `Counter::remote(..)` runs
//! the constructor in a worker of its own and returns a typed handle, whose methods submit
//! calls that run, one at a time and in the order submitted, on that worker, against the state
//! the constructor made. The scheduler's part (placement, routing, ordering, restarts) is in
//! `starling_scheduler::actors`; this module is the process's part.
//!
//! **Where state lives:** the constructor's task stores the value in this process's table of
//! actor states, under the runtime and the actor's id (its creation task's id); each call finds
//! it there through its task context ([`crate::runtime::exec`] knows which actor a running
//! task belongs to) and runs the method under the state's lock. In a cluster the table lives
//! in the actor's worker process and goes with it; in-process, the state of an actor that
//! ends is dropped when its executor is retired ([`drop_states_of`]).

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;
use starling_proto::{ActorRole, ObjectId, TaskId, WorkerId};

use crate::__private::{ArgsBuilder, InvokeError, RemoteValue};
use crate::error::{RemoteError, Result};
use crate::object_ref::{ObjectRef, RefHandle};
use crate::options::TaskOptions;

/// A handle to an actor, untyped: the typed handle `#[starling::actor]` makes for a type
/// wraps one ([`Actor::Handle`], whose `AsRef` gives it). Clone it and pass it to tasks and
/// other actors (it is `Serialize + Deserialize`): the actor lives while any handle does, in
/// any process (or, detached, until killed).
#[derive(Clone)]
pub struct ActorHandle {
    object: ObjectRef<()>,
}

impl ActorHandle {
    /// The actor's id (its creation task's).
    pub fn id(&self) -> TaskId {
        self.object.id().task()
    }

    /// Resolves once the actor's constructor has run: to `()`, or to
    /// [`Error::ActorDied`](crate::Error::ActorDied) (with the constructor's error) if it could not be created.
    pub fn ready(&self) -> &ObjectRef<()> {
        &self.object
    }

    /// Kills the actor (Ray's `ray.kill`): its worker is stopped at once. With `no_restart`
    /// it is dead for good and every call of it not finished fails with
    /// [`Error::ActorDied`](crate::Error::ActorDied); otherwise it is started again if it has restarts left.
    pub fn kill(&self, no_restart: bool) -> Result<()> {
        self.object.runtime().kill_actor(self.id(), no_restart)
    }

    pub(crate) fn from_object(object: ObjectRef<()>) -> Self {
        ActorHandle { object }
    }
}

impl AsRef<ActorHandle> for ActorHandle {
    fn as_ref(&self) -> &ActorHandle {
        self
    }
}

impl fmt::Debug for ActorHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ActorHandle({})", self.id())
    }
}

impl serde::Serialize for ActorHandle {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.object.serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for ActorHandle {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(ActorHandle {
            object: ObjectRef::deserialize(d)?,
        })
    }
}

/// A type that `#[starling::actor]` made an actor.
pub trait Actor: 'static {
    /// Its typed handle.
    type Handle: From<ActorHandle> + AsRef<ActorHandle>;
    /// Its class name (module path and type), as status lists it.
    const CLASS: &'static str;
}

/// One actor, as [`actors`] lists it (Ray's `ray.util.state.list_actors`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ActorInfo {
    /// The actor's id (its creation task's).
    pub id: TaskId,
    /// Its class: the module path and type name.
    pub class_name: String,
    /// Its name (empty: none).
    pub name: String,
    /// `PENDING_CREATION`, `ALIVE`, `RESTARTING` or `DEAD`.
    pub state: String,
    /// Why it died, once dead: its constructor's error, its process's exit, or `kill`.
    pub cause: Option<String>,
    /// The node it runs on, while alive.
    pub node: Option<starling_proto::NodeId>,
    /// How many times it was started again.
    pub restarts: u32,
    /// How many of its calls finished.
    pub calls_served: u64,
}

impl From<starling_proto::status::ActorStatus> for ActorInfo {
    fn from(a: starling_proto::status::ActorStatus) -> Self {
        ActorInfo {
            id: a.id,
            class_name: a.class_name,
            name: a.name,
            state: a.state,
            cause: (!a.cause.is_empty()).then_some(a.cause),
            node: a.node,
            restarts: a.restarts,
            calls_served: a.calls_served,
        }
    }
}

/// Every actor of this driver's job (in-process: of the runtime), dead ones too, oldest first.
/// `starling status` lists every actor of a cluster.
pub fn actors() -> Result<Vec<ActorInfo>> {
    crate::runtime::current_or_init().actors()
}

/// Kills the actor behind `handle` (see [`ActorHandle::kill`]).
pub fn kill(handle: &impl AsRef<ActorHandle>, no_restart: bool) -> Result<()> {
    handle.as_ref().kill(no_restart)
}

/// The live actor of type `A` named `name` (see [`ActorOptions::name`]), from any driver of the
/// cluster; `None` if no live actor has that name.
pub fn get_actor<A: Actor>(name: &str) -> Result<Option<A::Handle>> {
    let rt = crate::runtime::current_or_init();
    Ok(find(&rt, name)?.map(A::Handle::from))
}

fn find(rt: &crate::runtime::Runtime, name: &str) -> Result<Option<ActorHandle>> {
    let Some(actor) = rt.actor_named(name)? else {
        return Ok(None);
    };
    let handle = RefHandle::adopt(ObjectId::from(actor), rt.clone());
    Ok(Some(ActorHandle::from_object(ObjectRef::from_handle(
        handle,
    ))))
}

/// How an actor is made and lives: the options of `Counter::options()`. Defaults: it holds no
/// CPU (as Ray's actors, which need a CPU to be placed but hold none while they run; set
/// `num_cpus` to hold some), is never restarted, its calls are never retried, it has no name,
/// and it lives while a handle does.
#[derive(Clone, Debug)]
pub struct ActorOptions {
    task: TaskOptions,
    actor: starling_proto::ActorOptions,
    get_if_exists: bool,
}

impl ActorOptions {
    /// The defaults for the actor class `class`.
    pub fn new(class: &str) -> Self {
        ActorOptions {
            task: TaskOptions::default().num_cpus(0.0).max_retries(0),
            actor: starling_proto::ActorOptions {
                class_name: class.to_string(),
                ..Default::default()
            },
            get_if_exists: false,
        }
    }

    /// CPUs the actor holds for its whole life (fractions allowed).
    pub fn num_cpus(mut self, n: f64) -> Self {
        self.task = self.task.num_cpus(n);
        self
    }

    /// GPUs the actor holds for its whole life.
    pub fn num_gpus(mut self, n: f64) -> Self {
        self.task = self.task.num_gpus(n);
        self
    }

    /// An amount of a custom resource the actor holds for its whole life.
    pub fn resources(mut self, name: &str, amount: f64) -> Self {
        self.task = self.task.resources(name, amount);
        self
    }

    /// Its name, by which [`get_actor`] finds it from any driver of the cluster while it
    /// lives. Creating a second live actor of the same name fails it with
    /// [`Error::ActorDied`](crate::Error::ActorDied), unless [`get_if_exists`](Self::get_if_exists).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.actor.name = name.into();
        self
    }

    /// With a name: if a live actor has it, return a handle to that one instead of creating
    /// another.
    pub fn get_if_exists(mut self, yes: bool) -> Self {
        self.get_if_exists = yes;
        self
    }

    /// The actor outlives its handles and its job (Ray's `lifetime="detached"`): it lives until
    /// killed.
    pub fn lifetime_detached(mut self) -> Self {
        self.actor.detached = true;
        self
    }

    /// Starts the actor again (constructor rerun, state reset) up to `n` times after its
    /// process dies; `u32::MAX`: always.
    pub fn max_restarts(mut self, n: u32) -> Self {
        self.actor.max_restarts = n;
        self
    }

    /// Runs a call that was on the actor's worker when it died again on the restarted actor,
    /// up to `n` times.
    pub fn max_task_retries(mut self, n: u32) -> Self {
        self.actor.max_task_retries = n;
        self
    }

    /// For an async actor (one with `async` methods): how many of its calls may be in flight at
    /// once, interleaved at their `.await`s on its worker (Ray's default for async actors,
    /// 1,000, is what `#[starling::actor]` sets for them); for a threaded one
    /// (`#[starling::actor(max_concurrency = N)]`), how many run at once, each on a thread of
    /// its own. The typed options offer it on those actors only: a plain sync actor runs one
    /// call at a time.
    #[doc(hidden)]
    pub fn max_concurrency(mut self, n: u32) -> Self {
        self.actor.max_concurrency = n.max(1);
        self
    }

    /// Where the actor may run.
    pub fn scheduling_strategy(mut self, s: crate::SchedulingStrategy) -> Self {
        self.task = self.task.scheduling_strategy(s);
        self
    }

    /// Sets an environment variable of the actor's worker process (see
    /// [`TaskOptions::env_var`]).
    pub fn env_var(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.task = self.task.env_var(name, value);
        self
    }
}

/// Creates an actor: submits its constructor `ctor` with `args` (or finds the live one of the
/// options' name, with `get_if_exists`).
#[doc(hidden)]
pub fn create(ctor: &'static str, args: ArgsBuilder, options: ActorOptions) -> ActorHandle {
    let rt = crate::runtime::current_or_init();
    if options.get_if_exists && !options.actor.name.is_empty() {
        if let Ok(Some(found)) = find(&rt, &options.actor.name) {
            return found;
        }
    }
    let mut task = options.task;
    task.actor = ActorRole::Create(Arc::new(options.actor));
    let id = rt.submit(ctor, args, task);
    ActorHandle::from_object(ObjectRef::from_raw(id, rt))
}

/// Calls `method` of the actor behind `handle` with `args`.
#[doc(hidden)]
pub fn call<R: RemoteValue>(
    handle: &ActorHandle,
    method: &'static str,
    args: ArgsBuilder,
) -> ObjectRef<R> {
    submit_call(handle, method, args, TaskOptions::default())
}

/// Calls async `method` of the actor behind `handle` with `args`: the call may run beside the
/// actor's other calls in flight (the scheduler lets in as many as the actor's
/// `max_concurrency`).
#[doc(hidden)]
pub fn call_concurrent<R: RemoteValue>(
    handle: &ActorHandle,
    method: &'static str,
    args: ArgsBuilder,
) -> ObjectRef<R> {
    submit_call(
        handle,
        method,
        args,
        TaskOptions::default().max_concurrency(u32::MAX),
    )
}

fn submit_call<R: RemoteValue>(
    handle: &ActorHandle,
    method: &'static str,
    args: ArgsBuilder,
    task: TaskOptions,
) -> ObjectRef<R> {
    let rt = handle.object.runtime().clone();
    let mut task = task.num_cpus(0.0).max_retries(0);
    task.actor = ActorRole::Call(handle.id());
    let id = rt.submit(method, args, task);
    ObjectRef::from_raw(id, rt)
}

type State = Arc<Mutex<Box<dyn Any + Send>>>;

/// Actor states by runtime ([`crate::runtime::Runtime::owner`]) and actor, with the worker that
/// made each.
type States = HashMap<(usize, TaskId), (WorkerId, State)>;

/// The actor states of this process.
static STATES: Mutex<Option<States>> = Mutex::new(None);

fn not_an_actor_task() -> InvokeError {
    InvokeError::Application(RemoteError::new(
        "starling::NotAnActor",
        "an actor's constructor or method ran as a task that belongs to no actor",
    ))
}

/// Keeps `state`, which the running creation task's constructor made, as its actor's state
/// (replacing the state of an earlier run: a restart).
#[doc(hidden)]
pub fn store_state<A: Send + 'static>(state: A) -> std::result::Result<(), InvokeError> {
    let (owner, worker, actor) =
        crate::runtime::exec::current_actor().ok_or_else(not_an_actor_task)?;
    let state: State = Arc::new(Mutex::new(Box::new(state)));
    STATES
        .lock()
        .get_or_insert_with(HashMap::new)
        .insert((owner, actor), (worker, state));
    crate::cluster::worker::actor_made(owner, actor);
    Ok(())
}

/// Runs `f` on the state of the actor the running call belongs to, under its lock.
#[doc(hidden)]
pub fn with_state<A: 'static, R>(
    f: impl FnOnce(&mut A) -> R,
) -> std::result::Result<R, InvokeError> {
    let (owner, _, actor) = crate::runtime::exec::current_actor().ok_or_else(not_an_actor_task)?;
    let state = STATES
        .lock()
        .as_ref()
        .and_then(|m| m.get(&(owner, actor)))
        .map(|(_, s)| s.clone())
        .ok_or_else(|| {
            InvokeError::Application(RemoteError::new(
                "starling::NoActorState",
                format!("actor {actor} has no state in this process"),
            ))
        })?;
    let mut guard = state.lock();
    let this = guard.downcast_mut::<A>().ok_or_else(|| {
        InvokeError::Application(RemoteError::new(
            "starling::ActorType",
            format!(
                "actor {actor} holds another type than `{}`",
                std::any::type_name::<A>()
            ),
        ))
    })?;
    Ok(f(this))
}

/// The state of the async actor the running call belongs to: shared by its calls in flight,
/// which interleave on one thread (an async actor keeps its state as an `Arc`).
#[doc(hidden)]
pub fn shared_state<A: Send + Sync + 'static>() -> std::result::Result<Arc<A>, InvokeError> {
    with_state::<Arc<A>, _>(|a| a.clone())
}

/// Drops the states of the actors `worker` of the backend at `owner` held: its executor was
/// retired (the actor was killed or ended).
pub(crate) fn drop_states_of(owner: usize, worker: WorkerId) {
    let dropped: Vec<State> = {
        let mut states = STATES.lock();
        let Some(map) = states.as_mut() else {
            return;
        };
        let ids: Vec<(usize, TaskId)> = map
            .iter()
            .filter(|(k, (w, _))| k.0 == owner && *w == worker)
            .map(|(k, _)| *k)
            .collect();
        ids.iter()
            .filter_map(|k| map.remove(k))
            .map(|(_, s)| s)
            .collect()
    };
    // Dropped outside the table's lock: a state's `Drop` may do anything.
    drop(dropped);
}
