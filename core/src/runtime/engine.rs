//! The in-process engine: the scheduler state machine behind one lock, fed by a lock-free inbox,
//! and a pool of executor threads.
//!
//! Every thread that produces an event (a driver submitting, an executor finishing, a dropped
//! `ObjectRef`) pushes it to the inbox and then tries to take the scheduler lock. Whoever gets
//! it drains the whole inbox, runs one scheduling pass for the batch, releases the lock, and then
//! carries out the scheduler's requests (hand a task to an executor, wake waiters, free values).
//! Threads that miss the lock return at once: the holder re-checks the inbox after unlocking, so
//! no event is stranded, and under load events are naturally batched.
//!
//! # Invariants
//! - `pending` counts events pushed and not yet handled; it is incremented after the push and
//!   decremented after the pop, with sequentially consistent ordering, so a holder that sees
//!   zero after unlocking has handled every event whose pusher failed to take the lock.
//! - The scheduler lock is never held while user code runs, while waking threads, or while
//!   taking a store shard lock.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

use crossbeam::queue::SegQueue;
use crossbeam::sync::{Parker, Unparker};
use parking_lot::Mutex;
use starling_proto::{JobId, NodeId, ObjectId, TaskFailure, TaskId, TaskSpec, WorkerId};
use starling_scheduler::{reactor, Core, TaskOutcome, Transport};
use starling_worker::store::{Blob, Lookup, ObjectStore};

use super::{exec, wait};
use super::{Config, NodeInfo};
use crate::__private::ArgsBuilder;
use crate::error::{Error, Result};
use crate::options::TaskOptions;
use crate::registry::Registry;

/// The one node of an in-process runtime.
const NODE: NodeId = NodeId(1);

/// Extra executor threads started for workers blocked in `get`, at most.
const MAX_EXTRA_THREADS: usize = 4096;

/// What threads tell the scheduler. Kept small (32 bytes): the inbox's blocks are allocated
/// zeroed, a few dozen events each, so every byte here is paid per event; the rare outcomes
/// are boxed.
pub(crate) enum Event {
    Submit(Arc<TaskSpec>),
    /// The task's one value is stored; its encoded size.
    Stored(WorkerId, TaskId, u64),
    /// Any other outcome.
    Finished(WorkerId, TaskId, Box<TaskOutcome>),
    Release(ObjectId),
    /// One more ref group for the object (a ref was decoded).
    AddRef(ObjectId),
    /// The stored value of the first object holds refs to the others.
    Nested(ObjectId, Box<[ObjectId]>),
    Put(ObjectId, u64),
    FailedPut(ObjectId, Arc<TaskFailure>),
    Blocked(WorkerId),
    Unblocked(WorkerId),
    /// A thread that runs no task of its own (one a task spawned, or a driver's) blocked in
    /// `get`: the wait with this id (from [`Engine::next_id`]) lends a running task's CPUs.
    ThreadBlocked(u64),
    /// That wait ended.
    ThreadUnblocked(u64),
    WorkerAdded(WorkerId),
}

enum Effect {
    Failed(ObjectId, Arc<TaskFailure>),
    Free(ObjectId),
    SpawnWorker,
    /// Tell the task it is cancelled; with force, also retire its executor thread.
    Cancel(WorkerId, TaskId, bool),
    /// No CPU set of this process can hold the task now.
    Infeasible(TaskId, String),
    /// Retire an executor (an actor's, killed or ended): its thread ends once its task returns.
    Retire(WorkerId),
}

/// A task for an executor, with the ids of the GPUs it holds.
type Dispatch = (WorkerId, Arc<TaskSpec>, Vec<Arc<str>>);

/// What a batch asks for: dispatches, queued under the lock (their vector is reused batch after
/// batch), and the rest, applied after it.
#[derive(Default)]
struct Effects {
    dispatches: Vec<Dispatch>,
    rest: Vec<Effect>,
}

impl Transport for Effects {
    fn dispatch(
        &mut self,
        _node: NodeId,
        worker: WorkerId,
        task: &Arc<TaskSpec>,
        gpu_ids: &[Arc<str>],
    ) {
        self.dispatches
            .push((worker, task.clone(), gpu_ids.to_vec()));
    }
    fn object_failed(&mut self, object: ObjectId, failure: &Arc<TaskFailure>) {
        self.rest.push(Effect::Failed(object, failure.clone()));
    }
    fn free_object(&mut self, object: ObjectId, _node: Option<NodeId>) {
        self.rest.push(Effect::Free(object));
    }
    fn request_worker(
        &mut self,
        _node: NodeId,
        _job: starling_proto::JobId,
        _env: &starling_proto::TaskEnv,
    ) {
        self.rest.push(Effect::SpawnWorker);
    }
    fn cancel_running(&mut self, worker: WorkerId, task: TaskId, force: bool) {
        // A thread cannot be killed: the task is told through `starling::is_cancelled()`, and
        // its late result is dropped by the scheduler and the store. With force, the scheduler
        // let the worker go at once (its CPU is free for other tasks); its thread ends when the
        // task returns.
        self.rest.push(Effect::Cancel(worker, task, force));
    }
    fn task_infeasible(&mut self, task: &TaskSpec, reason: &str) {
        self.rest
            .push(Effect::Infeasible(task.id, reason.to_string()));
    }
    fn kill_worker(&mut self, worker: WorkerId) {
        self.rest.push(Effect::Retire(worker));
    }
}

/// A batch's effects once its dispatches are queued: the executors to wake and the rest.
struct Batch {
    rest: Vec<Effect>,
    wake: Wakes,
}

/// The executors a batch handed tasks to, each once; the first few inline (a batch rarely
/// dispatches to more), so a batch allocates nothing for them.
#[derive(Default)]
struct Wakes {
    few: [u64; 4],
    n: usize,
    more: Vec<u64>,
}

impl Wakes {
    fn add(&mut self, w: WorkerId) {
        if self.few[..self.n].contains(&w.0) || self.more.contains(&w.0) {
            return;
        }
        if self.n < self.few.len() {
            self.few[self.n] = w.0;
            self.n += 1;
        } else {
            self.more.push(w.0);
        }
    }

    fn is_empty(&self) -> bool {
        self.n == 0
    }

    fn each(&self, mut f: impl FnMut(WorkerId)) {
        for w in self.few[..self.n].iter().chain(&self.more) {
            f(WorkerId(*w));
        }
    }
}

struct Sched {
    core: Core,
    effects: Effects,
}

/// An executor thread's mailbox.
pub(crate) struct Slot {
    pub id: WorkerId,
    /// Tasks to run, each with the ids of the GPUs it holds.
    pub tasks: SegQueue<(Arc<TaskSpec>, Vec<Arc<str>>)>,
    pub unparker: Unparker,
    /// The task this executor was told to cancel (0 = none).
    pub cancelled: AtomicU64,
    /// Its task was force-cancelled: the scheduler no longer counts this executor, so its
    /// thread ends once the task returns, dropping anything else queued to it (the scheduler
    /// placed those again).
    pub retired: AtomicBool,
    /// Wakes the executor while it drives async tasks run together (`max_concurrency`).
    pub signal: Arc<super::lane::Signal>,
    /// Tasks cancelled before the one in `cancelled` that have not ended: async tasks run
    /// together on this executor may be cancelled one after another.
    pub earlier_cancels: Mutex<Vec<u64>>,
    /// Whether `earlier_cancels` holds any (so most checks never lock it).
    pub has_earlier_cancels: AtomicBool,
    /// Tasks of this executor whose values are stored but whose ends are not posted yet (the
    /// state API waits for them: see [`Engine::list_tasks`]). One counter per executor, so
    /// executors do not share a cache line per task.
    pub settling: AtomicUsize,
}

impl Slot {
    /// Notes that `task`, which runs here, was cancelled.
    pub fn cancel(&self, task: u64) {
        let prev = self.cancelled.swap(task, Ordering::SeqCst);
        if prev != 0 && prev != task {
            self.earlier_cancels.lock().push(prev);
            self.has_earlier_cancels.store(true, Ordering::SeqCst);
        }
    }

    /// Whether `task`, which runs (or ran) here, was cancelled.
    pub fn is_cancelled(&self, task: u64) -> bool {
        self.cancelled.load(Ordering::SeqCst) == task
            || (self.has_earlier_cancels.load(Ordering::SeqCst)
                && self.earlier_cancels.lock().contains(&task))
    }

    /// `task` ended: an earlier cancel of it need not be kept.
    pub fn forget_cancel(&self, task: u64) {
        if self.has_earlier_cancels.load(Ordering::SeqCst) {
            let mut earlier = self.earlier_cancels.lock();
            earlier.retain(|t| *t != task);
            self.has_earlier_cancels
                .store(!earlier.is_empty(), Ordering::SeqCst);
        }
    }
}

pub(crate) struct Engine {
    sched: Mutex<Sched>,
    /// The streams of streaming tasks submitted here, by task.
    pub(crate) streams: crate::stream::Streams,
    inbox: SegQueue<Event>,
    pending: AtomicUsize,
    pub(crate) store: ObjectStore,
    /// The executors' mailboxes, by worker number - 1: set once each, before its worker is
    /// added, and read without a lock (a shared read lock, taken twice per batch by whichever
    /// thread handles it, made every batch bounce one more cache line between cores).
    slots: Box<[OnceLock<Arc<Slot>>]>,
    /// Slots taken (set, or about to be).
    n_slots: AtomicUsize,
    next_object: AtomicU64,
    extra_threads: AtomicUsize,
    pub(crate) shut_down: AtomicBool,
    /// The idle executor allowed to spin for work (worker number, 0 = none): the most recently
    /// idle one, which is also the one the scheduler hands the next task to.
    pub(crate) spinner: AtomicU64,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    registry: &'static Registry,
    me: Weak<Engine>,
}

impl Engine {
    pub fn start(config: Config) -> Result<Arc<Engine>> {
        exec::install_panic_hook();
        let registry = Registry::get();
        if !registry.duplicates.is_empty() {
            return Err(Error::Startup(format!(
                "these #[starling::remote] functions are registered twice (same module, name \
                 and signature in different function bodies); rename one of each: {}",
                registry.duplicates.join(", ")
            )));
        }
        let mut core = Core::new();
        core.set_clock(starling_proto::state::now_us);
        core.set_task_events_cap(config.task_events_bytes);
        core.refuse_task_envs(
            "env_vars need a worker process of their own, and the in-process runtime runs every \
             task on threads of this one process, in its environment: use the local cluster \
             (`Config::default()`) or a cluster for tasks with env_vars",
        );
        reactor::on_node_added(&mut core, NODE, config.resources.clone());
        let engine = Arc::new_cyclic(|me| Engine {
            sched: Mutex::new(Sched {
                core,
                effects: Effects::default(),
            }),
            streams: Default::default(),
            inbox: SegQueue::new(),
            pending: AtomicUsize::new(0),
            store: ObjectStore::new(),
            slots: (0..config.threads + MAX_EXTRA_THREADS)
                .map(|_| OnceLock::new())
                .collect(),
            n_slots: AtomicUsize::new(0),
            next_object: AtomicU64::new(1),
            extra_threads: AtomicUsize::new(0),
            shut_down: AtomicBool::new(false),
            spinner: AtomicU64::new(0),
            threads: Mutex::new(Vec::new()),
            registry,
            me: me.clone(),
        });
        for _ in 0..config.threads {
            engine.spawn_executor()?;
        }
        Ok(engine)
    }

    fn spawn_executor(self: &Arc<Self>) -> Result<()> {
        let parker = Parker::new();
        let at = self.n_slots.fetch_add(1, Ordering::SeqCst);
        if at >= self.slots.len() {
            self.n_slots.fetch_sub(1, Ordering::SeqCst);
            return Err(Error::Startup(format!(
                "no more than {} executor threads",
                self.slots.len()
            )));
        }
        let id = WorkerId(at as u64 + 1);
        let slot = Arc::new(Slot {
            id,
            tasks: SegQueue::new(),
            unparker: parker.unparker().clone(),
            cancelled: AtomicU64::new(0),
            retired: AtomicBool::new(false),
            signal: Arc::default(),
            earlier_cancels: Mutex::new(Vec::new()),
            has_earlier_cancels: AtomicBool::new(false),
            settling: AtomicUsize::new(0),
        });
        let _ = self.slots[at].set(slot.clone());
        let engine = self.clone();
        let handle = std::thread::Builder::new()
            .name(format!("starling-exec-{}", id.0))
            .spawn(move || exec::executor_main(engine, slot, parker))
            .map_err(|e| Error::Startup(format!("cannot start an executor thread: {e}")))?;
        self.threads.lock().push(handle);
        self.post(Event::WorkerAdded(id));
        Ok(())
    }

    pub fn shutdown(&self) {
        if self.shut_down.swap(true, Ordering::SeqCst) {
            return;
        }
        for s in self.all_slots() {
            s.unparker.unpark();
        }
        let me = std::thread::current().id();
        let handles = std::mem::take(&mut *self.threads.lock());
        for h in handles {
            if h.thread().id() != me {
                let _ = h.join();
            }
        }
    }

    /// Queues an event and handles the inbox if no other thread is doing so.
    pub fn post(&self, ev: Event) {
        self.inbox.push(ev);
        self.pending.fetch_add(1, Ordering::SeqCst);
        self.pump();
    }

    fn pump(&self) {
        while self.pending.load(Ordering::SeqCst) > 0 {
            let Some(mut guard) = self.sched.try_lock() else {
                return;
            };
            let out = self.drain(&mut guard);
            drop(guard);
            self.apply(out);
        }
    }

    /// Handles every event in the inbox, runs one scheduling pass, and returns the effects to
    /// apply once the lock is released.
    fn drain(&self, sched: &mut Sched) -> Batch {
        let Sched { core, effects } = sched;
        let mut handled = 0;
        while let Some(ev) = self.inbox.pop() {
            handled += 1;
            handle(core, effects, ev);
        }
        self.pending.fetch_sub(handled, Ordering::SeqCst);
        reactor::schedule(core, effects);
        self.take_effects(effects)
    }

    /// Takes the effects of a batch, with the scheduler lock held. Dispatches go to their
    /// executors' queues now, under the lock: applied after unlocking, two batches applied by
    /// two threads could reach one executor out of the order the scheduler handed them out in
    /// (an actor's calls must run in that order). The rest is applied after unlocking.
    /// Waking the executors (a futex call for a parked one) waits until the lock is released.
    fn take_effects(&self, effects: &mut Effects) -> Batch {
        let mut wake = Wakes::default();
        for (w, task, gpu_ids) in effects.dispatches.drain(..) {
            self.slot(w).tasks.push((task, gpu_ids));
            wake.add(w);
        }
        Batch {
            // Most batches have nothing else: taking an empty vector allocates nothing.
            rest: std::mem::take(&mut effects.rest),
            wake,
        }
    }

    fn apply(&self, batch: Batch) {
        let Batch {
            rest: effects,
            wake,
        } = batch;
        if !wake.is_empty() {
            wake.each(|w| {
                let slot = self.slot(w);
                slot.unparker.unpark();
                slot.signal.notify();
            });
        }
        if effects.is_empty() {
            return;
        }
        let mut spawn = 0;
        {
            for e in effects {
                match e {
                    Effect::Failed(o, f) => self.store.fail(o, f),
                    Effect::Free(o) => {
                        self.store.remove(o);
                    }
                    Effect::SpawnWorker => spawn += 1,
                    Effect::Infeasible(t, reason) => {
                        crate::cluster::client::warn_infeasible(t, &reason)
                    }
                    Effect::Cancel(w, t, force) => {
                        let slot = self.slot(w);
                        slot.cancel(t.0);
                        if force {
                            slot.retired.store(true, Ordering::SeqCst);
                            slot.signal.notify();
                        }
                    }
                    Effect::Retire(w) => {
                        let slot = self.slot(w);
                        slot.retired.store(true, Ordering::SeqCst);
                        slot.signal.notify();
                        slot.unparker.unpark();
                        crate::actor::drop_states_of(self as *const Engine as usize, w);
                    }
                }
            }
        }
        for _ in 0..spawn {
            self.spawn_extra();
        }
    }

    /// Starts one more executor because the existing ones are blocked in `get`.
    fn spawn_extra(&self) {
        if self.shut_down.load(Ordering::SeqCst)
            || self.extra_threads.fetch_add(1, Ordering::SeqCst) >= MAX_EXTRA_THREADS
        {
            return;
        }
        if let Some(engine) = self.me.upgrade() {
            let _ = engine.spawn_executor();
        }
    }

    pub fn next_id(&self) -> u64 {
        self.next_object.fetch_add(1, Ordering::Relaxed)
    }

    pub fn submit(&self, function: &'static str, args: ArgsBuilder, o: TaskOptions) -> ObjectId {
        // A task with several returns takes consecutive ids, one per return.
        let returns = u64::from(o.returns.max(1));
        let id = TaskId(self.next_object.fetch_add(returns, Ordering::Relaxed));
        let object = ObjectId::from(id);
        let owner = self as *const Engine as usize;
        if o.streaming {
            self.streams.open(id, o.backpressure);
        }
        match super::prepare_call(self.registry, owner, id, function, args, o, JobId(0)) {
            Ok((spec, keep)) => {
                self.post(Event::Submit(Arc::new(spec)));
                // The argument refs may drop now: the scheduler counts the task's use of them.
                drop(keep);
            }
            Err(failure) => {
                let failure = Arc::new(failure);
                for k in 0..returns {
                    self.post(Event::FailedPut(ObjectId(id.0 + k), failure.clone()));
                }
            }
        }
        object
    }

    pub fn put(&self, bytes: Vec<u8>, nested: Vec<ObjectId>) -> ObjectId {
        let id = ObjectId(self.next_id());
        let size = bytes.len() as u64;
        self.store.put(id, Blob::new(bytes));
        self.post(Event::Put(id, size));
        if !nested.is_empty() {
            self.post(Event::Nested(id, nested.into_boxed_slice()));
        }
        id
    }

    pub fn add_ref(&self, id: ObjectId) {
        if !self.shut_down.load(Ordering::Relaxed) {
            self.post(Event::AddRef(id));
        }
    }

    pub fn release(&self, id: ObjectId) {
        if !self.shut_down.load(Ordering::Relaxed) {
            self.post(Event::Release(id));
        }
    }

    pub fn poll_object(&self, id: ObjectId, waker: &Waker) -> Poll<Result<Blob>> {
        match self.store.lookup(id, Some(waker)) {
            Lookup::Ready(b) => Poll::Ready(Ok(b)),
            Lookup::Failed(f) => Poll::Ready(Err(Error::from(&*f))),
            Lookup::Pending if self.shut_down.load(Ordering::SeqCst) => {
                Poll::Ready(Err(Error::ShutDown))
            }
            Lookup::Pending if !self.knows(id) => match self.store.lookup(id, None) {
                Lookup::Ready(b) => Poll::Ready(Ok(b)),
                Lookup::Failed(f) => Poll::Ready(Err(Error::from(&*f))),
                Lookup::Pending => Poll::Ready(Err(Error::ObjectLost(id))),
            },
            Lookup::Pending => Poll::Pending,
        }
    }

    /// Whether the scheduler has `id` (a live object, settled or not), after handling every
    /// queued event: the `Submit` or `Put` of a ref this thread can see was queued before the
    /// ref existed, so an id the scheduler does not know after that was never made or is
    /// freed. Effects are applied before answering, so a failure settled by those events is in
    /// the store when the caller looks again.
    fn knows(&self, id: ObjectId) -> bool {
        let (known, out) = {
            let mut guard = self.sched.lock();
            let out = self.drain(&mut guard);
            (guard.core.object_state(id).is_some(), out)
        };
        self.apply(out);
        // Events that arrived while we held the lock with `lock()` (not `try_lock`) still wait.
        self.pump();
        known
    }

    /// Blocks until `id` settles or `deadline` passes. An executor thread lends its CPUs back
    /// while it waits.
    pub fn wait_object(&self, id: ObjectId, deadline: Option<Instant>) -> Result<Blob> {
        wait::wait_one(&self.store, id, deadline, &Hooks::new(self))
    }

    /// Waits until `num_returns` of `ids` settled or `timeout` passes; returns which settled.
    pub fn wait_many(
        &self,
        ids: &[ObjectId],
        num_returns: usize,
        timeout: Option<Duration>,
    ) -> Vec<bool> {
        wait::wait_many(&self.store, ids, num_returns, timeout, &Hooks::new(self))
    }

    /// Waits for the next item of `stream` or the end of its task (see [`wait::wait_stream`]).
    pub fn wait_stream(
        &self,
        stream: &crate::stream::Stream,
        end: ObjectId,
        deadline: Option<Instant>,
    ) -> Result<Option<Arc<crate::object_ref::RefHandle>>> {
        wait::wait_stream(&self.store, stream, end, deadline, &Hooks::new(self))
    }

    /// Item `index` of the streaming task `task`, running on this thread: handed to the
    /// caller's stream, then waits for room if the caller is a window behind.
    pub fn stream_yield(&self, task: TaskId, index: u64, item: Arc<crate::object_ref::RefHandle>) {
        let Some(stream) = self.streams.get(task) else {
            // The caller dropped the generator: the item is let go.
            return;
        };
        stream.push(index, item);
        stream.wait_room(index + 1, || {
            self.is_cancelled(task) || self.shut_down.load(Ordering::Relaxed)
        });
    }

    pub fn cancel(&self, id: ObjectId, force: bool) -> Result<()> {
        if self.shut_down.load(Ordering::SeqCst) {
            return Err(Error::ShutDown);
        }
        let out = {
            let mut guard = self.sched.lock();
            let Sched { core, effects } = &mut *guard;
            let task = core.task_of(id);
            reactor::on_cancel_tree(core, effects, task, force);
            self.take_effects(effects)
        };
        self.apply(out);
        // Events that arrived while we held the lock with `lock()` (not `try_lock`) still wait.
        self.pump();
        Ok(())
    }

    /// Kills an actor (see `reactor::on_kill_actor`).
    pub fn kill_actor(&self, actor: TaskId, no_restart: bool) -> Result<()> {
        if self.shut_down.load(Ordering::SeqCst) {
            return Err(Error::ShutDown);
        }
        let out = {
            let mut guard = self.sched.lock();
            let Sched { core, effects } = &mut *guard;
            reactor::on_kill_actor(core, effects, actor, no_restart);
            self.take_effects(effects)
        };
        self.apply(out);
        self.pump();
        Ok(())
    }

    /// Every actor, as the head's status lists them.
    pub fn actors(&self) -> Vec<starling_proto::status::ActorStatus> {
        self.pump();
        let g = self.sched.lock();
        g.core.actors().into_iter().map(Into::into).collect()
    }

    /// The task records `q` asks for, after handling every queued event.
    pub fn list_tasks(
        &self,
        q: &starling_proto::state::TaskQuery,
    ) -> starling_proto::state::TaskList {
        // Ends already visible in the store are posted within microseconds (storing and
        // posting are back to back on the executor); wait for them, boundedly.
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(200);
        let settling = || {
            self.all_slots()
                .any(|s| s.settling.load(Ordering::SeqCst) > 0)
        };
        while settling() && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        self.pump();
        self.sched.lock().core.task_events().query(q)
    }

    /// Every object or (`workers`) every executor, after handling every queued event.
    pub fn state_records(
        &self,
        workers: bool,
    ) -> (
        Vec<starling_proto::state::ObjectRecord>,
        Vec<starling_proto::state::WorkerRecord>,
    ) {
        self.pump();
        let g = self.sched.lock();
        if workers {
            let pid = std::process::id();
            let mut w = g.core.worker_records();
            for r in &mut w {
                r.pid = pid;
            }
            (Vec::new(), w)
        } else {
            (g.core.object_records(), Vec::new())
        }
    }

    /// The live actor named `name`, after handling every queued event (a creation this thread
    /// submitted is known).
    pub fn actor_named(&self, name: &str) -> Option<TaskId> {
        let (found, out) = {
            let mut guard = self.sched.lock();
            let out = self.drain(&mut guard);
            (guard.core.actor_named(name), out)
        };
        self.apply(out);
        self.pump();
        found
    }

    pub fn pending_reason(&self, id: ObjectId) -> Option<String> {
        self.pump();
        let g = self.sched.lock();
        g.core.pending_reason(g.core.task_of(id))
    }

    pub fn nodes(&self) -> Vec<NodeInfo> {
        let core_nodes = self.sched.lock().core.nodes();
        core_nodes
            .into_iter()
            .map(|n| NodeInfo {
                id: n.id,
                address: "in-process".into(),
                resources: n.total,
                available: n.available,
                alive: n.alive && !self.shut_down.load(Ordering::SeqCst),
            })
            .collect()
    }

    /// Scheduler counters and queue lengths, after handling every queued event.
    pub fn stats(&self) -> super::RuntimeStats {
        self.pump();
        let g = self.sched.lock();
        let s = g.core.stats();
        super::RuntimeStats {
            submitted: s.submitted,
            succeeded: s.succeeded,
            failed: s.failed,
            retried: s.retried,
            live_tasks: g.core.live_tasks() as u64,
            peak_live_tasks: s.peak_live,
            queued_tasks: g.core.queued_tasks() as u64,
            running_tasks: g.core.running_tasks() as u64,
            objects: g.core.object_count() as u64,
            objects_freed: s.objects_freed,
            store_bytes: self.store.bytes_used(),
            direct_calls: 0,
        }
    }

    pub(crate) fn is_cancelled(&self, task: TaskId) -> bool {
        self.all_slots().any(|s| s.is_cancelled(task.0))
    }

    /// The mailbox of executor `w` (set before the scheduler knew of it).
    fn slot(&self, w: WorkerId) -> &Slot {
        self.slots[w.0 as usize - 1]
            .get()
            .expect("an executor's slot is set before its worker is added")
    }

    /// Every executor's mailbox set so far.
    fn all_slots(&self) -> impl Iterator<Item = &Arc<Slot>> {
        let n = self.n_slots.load(Ordering::SeqCst).min(self.slots.len());
        self.slots[..n].iter().filter_map(OnceLock::get)
    }

    pub(crate) fn registry(&self) -> &'static Registry {
        self.registry
    }
}

/// The engine's part in a wait: executors report themselves blocked; shutdown ends waits.
///
/// A thread that runs no task but may belong to one (any thread but an executor's and the
/// driver threads that started or entered a runtime: see [`super::is_driver_thread`]) lends
/// the CPUs of a running task while it waits ([`reactor::on_thread_blocked`]): a task that
/// waits for threads of its own that wait for its children would otherwise hold every CPU its
/// children need. Nothing tells such a thread from a thread a driver spawned, so a driver's
/// own threads lend too: at worst the runtime runs one task more than it has CPUs while they
/// wait.
struct Hooks<'a> {
    engine: &'a Engine,
    worker: Option<WorkerId>,
    /// For a thread that may belong to a task: the id of its wait, which lends a task's CPUs.
    lender: Option<u64>,
}

impl<'a> Hooks<'a> {
    fn new(engine: &'a Engine) -> Self {
        let worker = exec::current_worker(engine as *const Engine as usize);
        let lender = (worker.is_none() && !super::is_driver_thread()).then(|| engine.next_id());
        Hooks {
            engine,
            worker,
            lender,
        }
    }
}

impl wait::WaitHooks for Hooks<'_> {
    fn blocked(&self, blocked: bool) {
        if let Some(w) = self.worker {
            self.engine.post(if blocked {
                Event::Blocked(w)
            } else {
                Event::Unblocked(w)
            });
        } else if let Some(wait) = self.lender {
            self.engine.post(if blocked {
                Event::ThreadBlocked(wait)
            } else {
                Event::ThreadUnblocked(wait)
            });
        }
    }

    fn closed(&self) -> Option<Error> {
        self.engine
            .shut_down
            .load(Ordering::SeqCst)
            .then_some(Error::ShutDown)
    }

    fn known(&self, id: ObjectId) -> bool {
        self.engine.knows(id)
    }
}

// The rarer handlers stay out of line, so the hot ones inline into `drain` (a 10 % difference
// in no-op tasks per second in process).
#[inline(never)]
fn add_ref(core: &mut Core, effects: &mut Effects, object: ObjectId) {
    reactor::on_add_ref(core, effects, object);
}

#[inline(never)]
fn nested(core: &mut Core, container: ObjectId, refs: Vec<ObjectId>) {
    reactor::on_nested(core, container, refs);
}

fn handle(core: &mut Core, effects: &mut Effects, ev: Event) {
    match ev {
        Event::Submit(spec) => reactor::on_submit_arc(core, effects, spec),
        Event::Stored(w, task, size) => {
            reactor::on_task_done(core, effects, w, task, TaskOutcome::Stored { size })
        }
        Event::Finished(w, task, outcome) => {
            reactor::on_task_done(core, effects, w, task, *outcome)
        }
        Event::Release(o) => reactor::on_release(core, effects, o),
        Event::AddRef(o) => add_ref(core, effects, o),
        Event::Nested(o, refs) => nested(core, o, refs.into_vec()),
        Event::Put(o, size) => reactor::on_put(core, o, NODE, size),
        Event::FailedPut(o, f) => reactor::on_failed_put(core, effects, o, f),
        Event::Blocked(w) => reactor::on_worker_blocked(core, w),
        Event::Unblocked(w) => reactor::on_worker_unblocked(core, w),
        Event::ThreadBlocked(wait) => {
            reactor::on_thread_blocked(core, wait);
        }
        Event::ThreadUnblocked(wait) => reactor::on_thread_unblocked(core, wait),
        Event::WorkerAdded(w) => reactor::on_worker_added(core, NODE, w),
    }
}
#[cfg(test)]
mod tests {
    /// The inbox pays for every byte of an event (see [`super::Event`]).
    #[test]
    fn an_event_is_four_words() {
        assert!(std::mem::size_of::<super::Event>() <= 32);
    }
}
