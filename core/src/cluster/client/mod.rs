//! The client side of a head session: submit, put, release, wait — and, in worker processes,
//! receive tasks.
//!
//! Outgoing operations go through a channel to one writer that sends everything queued as one
//! batch (a submitter waits while more than [`MAX_UNSENT`] are queued: the head is holding the
//! session back); incoming batches are handled by one reader task. Values pushed by the
//! head land in the local store, where waits find them.
//!
//! # Invariants
//! - The head subscribes the submitter of a task to its result, so every `ObjectRef` this
//!   client made settles in the local store without a request.
//! - Once the session ends, every current wait fails with `HeadLost` (or `ShutDown` after
//!   [`Client::shutdown`]); nothing waits forever. A worker process's session is its life; a
//!   driver's next call opens a new session (after a head restart), and objects of the lost
//!   session that never settled keep failing with the `HeadLost` that ended it.
//! - Ids are never reused across sessions: the id counter runs on, so an id of a lost session
//!   can always be told from the current session's (`is_stale`).
//! - Every call carries the cluster token ([`Credentials`]).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use starling_proto::rpc::head_client::HeadClient;
use starling_proto::security::{AuthChannel, Credentials, SILENCE_LIMIT};
use starling_proto::session::{
    ClientBatch, ClientOp, HeadBatch, HeadOp, Hello, ObjectValue, RunTask, Value, Welcome,
};
use starling_proto::state::{StateList, TaskList, TaskQuery};
use starling_proto::status::{ActorNameRequest, PendingRequest, StatusReply, StatusRequest};
use starling_proto::{
    FailureKind, JobId, NodeId, ObjectId, TaskArg, TaskFailure, TaskId, WorkerId, COUNTER_MASK,
};
use starling_worker::store::{Blob, Lookup, ObjectStore};
use tokio::sync::mpsc;
use tokio_stream::Stream;

use super::objects::{self, LocalStore, StoreFile};
use crate::__private::ArgsBuilder;
use crate::error::{Error, Result};
use crate::options::TaskOptions;
use crate::registry::{build_id, Registry};
use crate::runtime::wait::{self, WaitHooks};
use crate::runtime::{exec, prepare_call, Config, NodeInfo, RuntimeStats};
use starling_head::{ClientTx, HeadService};

mod connect;
mod direct;
mod incoming;
mod link;
mod outbound;
mod streams;

#[allow(unused_imports)]
use connect::*;
pub(crate) use connect::{connect_channel, local_driver_hello, upload_chunks};
pub(crate) use incoming::node_info;
#[allow(unused_imports)]
use incoming::*;
use outbound::*;

/// Values up to this size are sent inline; larger `put`s go to the local node store if there is
/// one. Largest message this client sends or accepts. A batch stops growing past
/// `MAX_BATCH_BYTES` encoded bytes, so large values do not add up to an oversized message.
pub(crate) use starling_proto::limits::{INLINE_LIMIT, MAX_BATCH_BYTES, MAX_MESSAGE_BYTES};

/// How many times a value whose node was lost is asked for again before `get` gives up with
/// `ObjectLost` (spread over about [`REFETCH_TRIES`] × [`REFETCH_MAX_PAUSE`] at most, longer than
/// a head takes to declare a silent node dead).
const REFETCH_TRIES: u32 = 12;
const REFETCH_MAX_PAUSE: Duration = Duration::from_secs(1);

/// Largest value a driver outside the cluster's nodes can `put` (it travels to the head in one
/// message); a driver on a node writes large values to the node's store instead, without limit.
const MAX_PUT_BYTES: usize = MAX_MESSAGE_BYTES - (1 << 20);

/// Something that keeps a cluster's pieces alive while its client is in use (the local cluster's
/// head and node agent), and stops them.
pub(crate) trait Owned: Send + Sync {
    fn stop(&self);
}

pub(crate) struct Client {
    addr: String,
    creds: Credentials,
    sink: Sink,
    store: ObjectStore,
    /// The current session's id base (the head's `Welcome`).
    id_base: AtomicU64,
    /// The head incarnation of the current session (`Welcome::epoch`): store files this
    /// client writes carry it, and it reads only files that do.
    head_epoch: AtomicU64,
    next: AtomicU64,
    job: AtomicU64,
    /// Drivers: how to open a new session after the head was lost (`None`: never again).
    redial: Mutex<Option<Redial>>,
    /// Set while a driver has no session; `lost` says why.
    lost_flag: AtomicBool,
    lost: Mutex<Option<Error>>,
    /// Why the last lost session ended (the error of its unsettled objects).
    last_loss: Mutex<Option<Error>>,
    /// Counter values below this belong to lost sessions (0: no session was ever lost).
    epoch_start: AtomicU64,
    /// The id bases of every session this client had.
    bases: Mutex<Vec<u64>>,
    /// One reconnection at a time.
    reconnecting: Mutex<()>,
    /// This client, for the reader task of a new session.
    me: OnceLock<std::sync::Weak<Client>>,
    pub worker: Option<WorkerId>,
    local: Option<LocalStore>,
    closed: OnceLock<Error>,
    shut_down: AtomicBool,
    registry: &'static Registry,
    rt: tokio::runtime::Handle,
    cancelled: Mutex<std::collections::HashSet<u64>>,
    /// The streams of streaming tasks this client submitted, by task.
    pub(crate) streams: crate::stream::Streams,
    /// Streaming tasks this worker process runs: items their submitters took (`StreamAck`).
    producing: Mutex<HashMap<TaskId, u64>>,
    /// Producers waiting for room wait here.
    room: parking_lot::Condvar,
    /// Tasks submitted whose result has not arrived yet.
    in_flight: AtomicU64,
    /// Objects whose located value could not be fetched, with the times asked again.
    refetches: Mutex<HashMap<ObjectId, u32>>,
    /// Ref groups of this client's own ids that were made by decoding a ref, per id (see
    /// [`Client::knows`]), and how many ids are listed.
    adopted: Mutex<HashMap<ObjectId, u32>>,
    adopted_ids: AtomicU64,
    owned: Mutex<Option<Box<dyn Owned>>>,
    /// The tokio runtime this client created, if it created one (dropped last, off-thread).
    own_runtime: Mutex<Option<tokio::runtime::Runtime>>,
    /// A driver with its head in this process and a node store: actor calls that also go
    /// straight to the actor's worker ([`direct`]).
    direct: Option<direct::Direct>,
}

/// Where this client's operations go.
enum Sink {
    /// A gRPC session: a channel drained by the request stream, one batch per drain.
    Grpc(RwLock<Option<Outbound>>),
    /// The head's session link on this host (worker processes): written by the sending thread.
    Link(link::LinkOut),
    /// A head in this process: applied by direct calls, no socket (the local cluster's driver).
    Local {
        head: HeadService,
        client: u64,
        open: AtomicBool,
    },
}

type Incoming = Pin<Box<dyn Stream<Item = std::result::Result<HeadBatch, tonic::Status>> + Send>>;

/// What a driver needs to open a new session: the connect timeout.
#[derive(Clone)]
struct Redial {
    timeout: Duration,
}

/// What a new session is for.
#[derive(Clone)]
pub(crate) struct SessionKind {
    pub hello: Hello,
    pub local: Option<LocalStore>,
    /// Worker processes: where `RunTask`s go.
    pub runs: Option<crossbeam::channel::Sender<RunTask>>,
}

pub(crate) fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("starling-io")
        .enable_all()
        .build()
        .map_err(|e| Error::Startup(format!("cannot start the I/O runtime: {e}")))
}

impl Client {
    /// Joins the cluster at `addr` as a driver: uploads this binary, then opens a session.
    pub fn connect_driver(addr: &str, config: &Config) -> Result<Arc<Client>> {
        let creds = config.credentials()?;
        let rt = runtime()?;
        let build = rt.block_on(upload_binary(addr, &creds, config.connect_timeout))?;
        let hello = driver_hello(build);
        let kind = SessionKind {
            hello,
            local: None,
            runs: None,
        };
        let client = Client::connect(
            addr,
            creds,
            kind,
            rt.handle().clone(),
            config.connect_timeout,
        )?;
        *client.own_runtime.lock() = Some(rt);
        *client.redial.lock() = Some(Redial {
            timeout: config.connect_timeout,
        });
        Ok(client)
    }

    /// Opens a session with the head at `addr` on the runtime `rt`.
    pub fn connect(
        addr: &str,
        creds: Credentials,
        kind: SessionKind,
        rt: tokio::runtime::Handle,
        timeout: Duration,
    ) -> Result<Arc<Client>> {
        let (tx, welcome, incoming) =
            rt.block_on(open_stream(addr, &creds, kind.hello, timeout))?;
        Ok(Client::start(
            addr,
            creds,
            Sink::Grpc(RwLock::new(Some(tx))),
            welcome,
            Some(incoming),
            kind.local,
            kind.runs,
            rt,
        ))
    }

    /// Opens a session with a head running in this process: operations are applied by direct
    /// calls, replies come through a channel, no socket on either way.
    pub fn connect_local(
        addr: &str,
        creds: Credentials,
        head: HeadService,
        hello: Hello,
        local: Option<LocalStore>,
        rt: tokio::runtime::Handle,
    ) -> Result<Arc<Client>> {
        // The head hands this client its batches by calling `deliver` on its own thread (after
        // releasing its lock): values land in the store without a hop through a reader task.
        let inbox = Arc::new(LocalInbox::default());
        let deliver = inbox.clone();
        let tx = ClientTx::Direct(Arc::new(move |batch: HeadBatch| deliver.deliver(batch)));
        let id = head
            .open_local_session(&hello, tx)
            .map_err(|s| Error::from_status(addr, &s))?;
        let mut early = inbox.early.lock();
        let welcome = match early.first() {
            Some(HeadOp::Welcome(w)) => w.clone(),
            _ => {
                return Err(Error::Refused {
                    addr: addr.to_string(),
                    message: "the head did not welcome the session".into(),
                })
            }
        };
        early.remove(0);
        let sink = Sink::Local {
            head,
            client: id,
            open: AtomicBool::new(true),
        };
        let client = Client::start(
            addr, creds, sink, welcome,
            // No stream, so no reader task: a local session ends only when this client shuts
            // down, however quiet it is.
            None, local, None, rt,
        );
        let _ = inbox.client.set(Arc::downgrade(&client));
        for op in early.drain(..) {
            client.handle_op(op, None);
        }
        drop(early);
        Ok(client)
    }

    #[allow(clippy::too_many_arguments)]
    fn start(
        addr: &str,
        creds: Credentials,
        sink: Sink,
        welcome: Welcome,
        incoming: Option<(Vec<HeadOp>, Incoming)>,
        local: Option<LocalStore>,
        runs: Option<crossbeam::channel::Sender<RunTask>>,
        rt: tokio::runtime::Handle,
    ) -> Arc<Client> {
        let direct =
            (matches!(sink, Sink::Local { .. }) && local.is_some()).then(direct::Direct::default);
        let client = Arc::new(Client {
            direct,
            addr: addr.to_string(),
            creds,
            sink,
            store: ObjectStore::new(),
            id_base: AtomicU64::new(welcome.id_base),
            head_epoch: AtomicU64::new(welcome.epoch),
            next: AtomicU64::new(1),
            job: AtomicU64::new(welcome.job.0),
            redial: Mutex::new(None),
            lost_flag: AtomicBool::new(false),
            lost: Mutex::new(None),
            last_loss: Mutex::new(None),
            epoch_start: AtomicU64::new(0),
            bases: Mutex::new(vec![welcome.id_base]),
            reconnecting: Mutex::new(()),
            me: OnceLock::new(),
            worker: (welcome.worker != 0).then_some(WorkerId(welcome.worker)),
            local,
            closed: OnceLock::new(),
            shut_down: AtomicBool::new(false),
            registry: Registry::get(),
            rt: rt.clone(),
            cancelled: Mutex::new(Default::default()),
            streams: Default::default(),
            producing: Mutex::new(HashMap::new()),
            room: parking_lot::Condvar::new(),
            in_flight: AtomicU64::new(0),
            refetches: Mutex::new(HashMap::new()),
            adopted: Mutex::new(HashMap::new()),
            adopted_ids: AtomicU64::new(0),
            owned: Mutex::new(None),
            own_runtime: Mutex::new(None),
        });
        let weak = Arc::downgrade(&client);
        let _ = client.me.set(weak.clone());
        if let Some(incoming) = incoming {
            rt.spawn(read_loop(weak, incoming, runs));
        }
        client
    }

    /// The job of the current session.
    pub fn job(&self) -> u64 {
        self.job.load(Ordering::Acquire)
    }

    /// The head incarnation of the current session (see [`starling_proto::store_file`]).
    pub fn head_epoch(&self) -> u64 {
        self.head_epoch.load(Ordering::Acquire)
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn credentials(&self) -> &Credentials {
        &self.creds
    }

    pub fn local_store(&self) -> Option<&LocalStore> {
        self.local.as_ref()
    }

    pub fn handle(&self) -> &tokio::runtime::Handle {
        &self.rt
    }

    pub fn registry(&self) -> &'static Registry {
        self.registry
    }

    pub fn set_owned(&self, owned: Box<dyn Owned>) {
        *self.owned.lock() = Some(owned);
    }

    pub fn set_own_runtime(&self, rt: tokio::runtime::Runtime) {
        *self.own_runtime.lock() = Some(rt);
    }

    pub fn send(&self, op: ClientOp) {
        self.send_many(vec![op]);
    }

    /// Sends `ops` in order, as one batch where the transport allows: the session's I/O thread
    /// is woken once for all of them.
    pub fn send_many(&self, ops: Vec<ClientOp>) {
        if ops.is_empty() {
            return;
        }
        match &self.sink {
            Sink::Grpc(out) => {
                let submits = ops.iter().any(|op| matches!(op, ClientOp::Submit(_)));
                let unsent = out.read().as_ref().map(|out| {
                    for op in ops {
                        out.send(op);
                    }
                    out.unsent.clone()
                });
                // A submitter waits while the head is not taking this session's batches; other
                // ops (releases from drops, gets) never wait, and neither do I/O threads.
                if let Some(unsent) = unsent {
                    if submits && tokio::runtime::Handle::try_current().is_err() {
                        unsent.wait_for_room();
                    }
                }
            }
            Sink::Link(out) => {
                for batch in link::batches(ops) {
                    out.send(batch);
                }
            }
            Sink::Local { head, client, open } => {
                if open.load(Ordering::Acquire) {
                    if let Err(s) = head.local_batch(*client, ops) {
                        let why = format!("refused: {}", s.message());
                        self.close(Error::HeadLost {
                            addr: self.addr.clone(),
                            why,
                        });
                    }
                }
            }
        }
    }

    /// Whether waiting for `id` can end. The head pushes this client the results of its own
    /// tasks, so an id of its range is known exactly when it was issued; for any other id,
    /// ask the head, which sends the value or an `ObjectLost` failure (`Subscribe`).
    ///
    /// The head pushes an own result once, to the group `submit` made. A group made later by
    /// decoding a ref to it (an adopted id) may outlive the first one, whose release took the
    /// value out of the local store: for those, ask the head too.
    pub(crate) fn knows(&self, id: ObjectId) -> bool {
        if self.is_own(id) {
            let n = id.0 & COUNTER_MASK;
            let adopted = self.adopted_ids.load(Ordering::Acquire) > 0
                && self.adopted.lock().contains_key(&id);
            if !adopted {
                return n != 0 && n < self.next.load(Ordering::Relaxed);
            }
        }
        self.send(ClientOp::Subscribe(id));
        true
    }

    /// Whether `id` is of the current session's range.
    fn is_own(&self, id: ObjectId) -> bool {
        id.0 & !COUNTER_MASK == self.id_base.load(Ordering::Acquire)
    }

    fn next_id(&self) -> u64 {
        self.next_ids(1)
    }

    /// The first of `n` consecutive new ids.
    fn next_ids(&self, n: u64) -> u64 {
        self.id_base.load(Ordering::Acquire) | self.next.fetch_add(n, Ordering::Relaxed)
    }

    fn close(&self, e: Error) {
        let _ = self.closed.set(e);
    }

    fn closed_error(&self) -> Option<Error> {
        if self.shut_down.load(Ordering::SeqCst) {
            return Some(Error::ShutDown);
        }
        if let Some(e) = self.closed.get() {
            return Some(e.clone());
        }
        if self.lost_flag.load(Ordering::Acquire) {
            return self.lost.lock().clone();
        }
        None
    }

    /// Whether `id` was made in a session that was lost (it will never settle).
    fn is_stale(&self, id: ObjectId) -> bool {
        let epoch = self.epoch_start.load(Ordering::Acquire);
        epoch != 0
            && (id.0 & COUNTER_MASK) < epoch
            && self.bases.lock().contains(&(id.0 & !COUNTER_MASK))
    }

    /// The error of a wait for `id`: the client's, or that of the lost session `id` was made in.
    fn wait_error(&self, id: ObjectId) -> Option<Error> {
        self.closed_error().or_else(|| {
            (self.is_stale(id) && !self.store.is_settled(id)).then(|| {
                self.last_loss.lock().clone().unwrap_or(Error::HeadLost {
                    addr: self.addr.clone(),
                    why: "the session that made this object was lost".into(),
                })
            })
        })
    }

    /// The session ended: fail current waits; a driver's next call opens a new one.
    fn session_lost(&self, e: Error) {
        if self.redial.lock().is_none() {
            self.close(e);
            return;
        }
        if let Sink::Grpc(out) = &self.sink {
            drop(out.write().take());
        }
        *self.lost.lock() = Some(e);
        self.in_flight.store(0, Ordering::Relaxed);
        self.lost_flag.store(true, Ordering::Release);
    }

    /// A driver without a session opens a new one (the head restarted). Errors are those of
    /// connecting; they also stay the error of waits until a later call connects.
    fn ensure_session(&self) -> Result<()> {
        if !self.lost_flag.load(Ordering::Acquire) {
            return Ok(());
        }
        let _one = self.reconnecting.lock();
        if !self.lost_flag.load(Ordering::Acquire) {
            return Ok(());
        }
        if self.shut_down.load(Ordering::SeqCst) {
            return Err(Error::ShutDown);
        }
        let Some(redial) = self.redial.lock().clone() else {
            return Err(self.closed_error().unwrap_or(Error::ShutDown));
        };
        let (addr, creds) = (self.addr.clone(), self.creds.clone());
        let fut = async move {
            let build = upload_binary(&addr, &creds, redial.timeout).await?;
            open_stream(&addr, &creds, driver_hello(build), redial.timeout).await
        };
        // Called from user threads; block on a fresh thread in case it is an I/O thread.
        let handle = self.rt.clone();
        let opened = std::thread::scope(|s| s.spawn(|| handle.block_on(fut)).join())
            .unwrap_or_else(|_| Err(Error::Startup("reconnect thread panicked".into())));
        let (tx, welcome, incoming) = match opened {
            Ok(o) => o,
            Err(e) => {
                *self.lost.lock() = Some(e.clone());
                return Err(e);
            }
        };
        // Everything made so far belongs to lost sessions.
        self.epoch_start
            .store(self.next.load(Ordering::Acquire), Ordering::Release);
        self.bases.lock().push(welcome.id_base);
        self.id_base.store(welcome.id_base, Ordering::Release);
        self.head_epoch.store(welcome.epoch, Ordering::Release);
        self.job.store(welcome.job.0, Ordering::Release);
        if let Sink::Grpc(out) = &self.sink {
            *out.write() = Some(tx);
        }
        *self.last_loss.lock() = self.lost.lock().take();
        self.lost_flag.store(false, Ordering::Release);
        if let Some(me) = self.me.get() {
            self.rt.spawn(read_loop(me.clone(), incoming, None));
        }
        Ok(())
    }

    pub fn submit(&self, function: &'static str, args: ArgsBuilder, o: TaskOptions) -> ObjectId {
        // A failed reconnect leaves the error to the wait for this task's result.
        let _ = self.ensure_session();
        // A task with several returns takes consecutive ids, one per return.
        let returns = u64::from(o.returns.max(1));
        let id = TaskId(self.next_ids(returns));
        let object = ObjectId::from(id);
        let owner = self as *const Client as usize;
        let job = JobId(self.job.load(Ordering::Acquire));
        let fail_all = |failure: TaskFailure| {
            let failure = Arc::new(failure);
            for k in 0..returns {
                self.store.fail(ObjectId(id.0 + k), failure.clone());
            }
        };
        if o.streaming {
            self.streams.open(id, o.backpressure);
        }
        match prepare_call(self.registry, owner, id, function, args, o, job) {
            Ok((spec, _)) if spec.args.iter().any(|a| self.arg_is_stale(a)) => {
                let lost = spec.args.iter().find_map(|a| match a {
                    TaskArg::Object(o) if self.is_stale(*o) => Some(*o),
                    _ => None,
                });
                fail_all(TaskFailure {
                    task: id,
                    attempt: 0,
                    kind: FailureKind::ObjectLost(lost.unwrap_or(object)),
                });
            }
            Ok((spec, keep)) => {
                self.in_flight.fetch_add(returns, Ordering::Relaxed);
                if matches!(spec.extras.actor, starling_proto::ActorRole::Call(_)) {
                    self.submit_call(spec);
                } else {
                    self.send(ClientOp::Submit(spec));
                }
                drop(keep);
            }
            Err(failure) => fail_all(failure),
        }
        object
    }

    /// An argument made in a lost session: the new head never heard of it.
    fn arg_is_stale(&self, arg: &TaskArg) -> bool {
        matches!(arg, TaskArg::Object(o) if self.is_stale(*o))
    }

    /// Stores `bytes`, a value that holds refs to `nested`.
    pub fn put(&self, bytes: Vec<u8>, nested: Vec<ObjectId>) -> Result<ObjectId> {
        self.ensure_session()?;
        if self.local.is_none() && bytes.len() > MAX_PUT_BYTES {
            return Err(Error::ObjectTooLarge {
                size: bytes.len() as u64,
                limit: MAX_PUT_BYTES as u64,
            });
        }
        let id = ObjectId(self.next_id());
        let blob = Blob::new(bytes);
        let stored = match &self.local {
            Some(local) if blob.len() > INLINE_LIMIT => {
                local.write(id, self.head_epoch(), self.job(), &blob).ok()
            }
            _ => None,
        };
        let put = match stored {
            Some(location) => ClientOp::PutStored(ObjectValue {
                object: id,
                value: Value::Location(location),
            }),
            None => ClientOp::Put(ObjectValue {
                object: id,
                value: Value::Inline(blob.to_vec()),
            }),
        };
        self.announce_put(id, put, blob, nested);
        Ok(id)
    }

    /// A file in this node's store for a `put` of `size` bytes to be encoded into, if this
    /// process runs on a node and the value is too large to travel inline (`None`: put it
    /// with [`put`](Self::put)). Written in place, a large value is copied once, from the
    /// caller's memory into the store, with no buffer of the whole encoding in between.
    pub fn open_put(&self, size: usize) -> Option<StoreFile> {
        let local = self.local.as_ref()?;
        if size <= INLINE_LIMIT || self.ensure_session().is_err() {
            return None;
        }
        let id = ObjectId(self.next_id());
        local.create(id, self.head_epoch(), self.job(), size).ok()
    }

    /// Stores the value written into `file` (from [`open_put`](Self::open_put)), which holds
    /// refs to `nested`. An error (the file could not be completed) stores nothing.
    pub fn put_file(&self, file: StoreFile, nested: Vec<ObjectId>) -> std::io::Result<ObjectId> {
        let id = file.object();
        let (location, blob) = file.commit()?;
        let put = ClientOp::PutStored(ObjectValue {
            object: id,
            value: Value::Location(location),
        });
        self.announce_put(id, put, blob, nested);
        Ok(id)
    }

    /// Tells the head of the put `id` (and of the refs its value holds) and keeps its value.
    fn announce_put(&self, id: ObjectId, put: ClientOp, blob: Blob, nested: Vec<ObjectId>) {
        if nested.is_empty() {
            self.send(put);
        } else {
            let refs = nested;
            self.send_many(vec![
                put,
                ClientOp::Nested {
                    container: id,
                    refs,
                },
            ]);
        }
        self.store.put(id, blob);
    }

    /// A ref group for `id` was dropped; `adopted`: one made by decoding a ref.
    pub fn release(&self, id: ObjectId, adopted: bool) {
        if adopted && self.adopted_ids.load(Ordering::Acquire) > 0 {
            let mut adopted = self.adopted.lock();
            if let Some(n) = adopted.get_mut(&id) {
                *n -= 1;
                if *n == 0 {
                    adopted.remove(&id);
                    self.adopted_ids.fetch_sub(1, Ordering::AcqRel);
                }
            }
        }
        let settled = self.store.remove(id);
        self.forget_direct(id, settled);
        if !settled && !adopted && self.is_own(id) {
            // A result released before it came: the head sends it no more.
            self.no_longer_in_flight();
        }
        if !self.shut_down.load(Ordering::Relaxed) {
            self.send(ClientOp::Release(id));
        }
    }

    /// One result counted in `in_flight` came (or will not).
    fn no_longer_in_flight(&self) {
        let _ = self
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// This process made a ref group for `id` by decoding a ref: the head counts it as one more
    /// holder.
    pub fn add_ref(&self, id: ObjectId) {
        if self.is_own(id) {
            let mut adopted = self.adopted.lock();
            let n = adopted.entry(id).or_default();
            if *n == 0 {
                self.adopted_ids.fetch_add(1, Ordering::AcqRel);
            }
            *n += 1;
        }
        if !self.shut_down.load(Ordering::Relaxed) {
            self.send(ClientOp::AddRef(id));
        }
    }

    pub fn poll_object(&self, id: ObjectId, waker: &Waker) -> Poll<Result<Blob>> {
        match self.store.lookup(id, Some(waker)) {
            Lookup::Ready(b) => Poll::Ready(Ok(b)),
            Lookup::Failed(f) => Poll::Ready(Err(Error::from(&*f))),
            Lookup::Pending => match self.wait_error(id) {
                Some(e) => Poll::Ready(Err(e)),
                None if !self.knows(id) => Poll::Ready(Err(Error::ObjectLost(id))),
                None => Poll::Pending,
            },
        }
    }

    pub fn wait_object(&self, id: ObjectId, deadline: Option<Instant>) -> Result<Blob> {
        let ids = [id];
        let hooks = Hooks::new(self, &ids);
        if self.direct.is_some() && !self.store.is_settled(id) {
            self.wait_direct(id, hooks.spin());
        }
        wait::wait_one(&self.store, id, deadline, &hooks)
    }

    pub fn wait_many(
        &self,
        ids: &[ObjectId],
        num_returns: usize,
        timeout: Option<Duration>,
    ) -> Vec<bool> {
        wait::wait_many(
            &self.store,
            ids,
            num_returns,
            timeout,
            &Hooks::new(self, ids),
        )
    }

    pub fn cancel(&self, id: ObjectId, force: bool) -> Result<()> {
        if let Some(e) = self.wait_error(id) {
            return Err(e);
        }
        let t = id.task();
        self.send(if force {
            ClientOp::CancelForce(t)
        } else {
            ClientOp::Cancel(t)
        });
        Ok(())
    }

    /// Kills an actor (in order with this session's calls: every call sent before the kill
    /// reached the head first).
    pub fn kill_actor(&self, actor: TaskId, no_restart: bool) -> Result<()> {
        if let Some(e) = self.wait_error(ObjectId::from(actor)) {
            return Err(e);
        }
        self.send(ClientOp::KillActor { actor, no_restart });
        Ok(())
    }

    /// The live actor named `name`, as the head knows it.
    pub fn actor_named(&self, name: &str) -> Result<Option<TaskId>> {
        let name = name.to_string();
        self.unary(move |mut head| async move { head.get_actor(ActorNameRequest { name }).await })
            .map(|r| r.actor)
    }

    pub fn is_cancelled(&self, task: TaskId) -> bool {
        self.cancelled.lock().contains(&task.0)
    }

    pub fn stats(&self) -> RuntimeStats {
        let s = self.status().unwrap_or_default();
        RuntimeStats {
            submitted: s.submitted,
            succeeded: s.succeeded,
            failed: s.failed,
            retried: 0,
            live_tasks: s.live,
            peak_live_tasks: s.peak_live,
            queued_tasks: s.queued,
            running_tasks: s.running,
            objects: s.objects,
            objects_freed: 0,
            store_bytes: self.store.bytes_used(),
            direct_calls: self.direct.as_ref().map_or(0, |d| d.sent()),
        }
    }

    /// The head's status report.
    pub fn status(&self) -> Result<StatusReply> {
        let job = JobId(self.job.load(Ordering::Acquire));
        self.unary(move |mut head| async move { head.status(StatusRequest { job }).await })
    }

    /// Why the task making `id` has not started, as the head sees it (`None`: it runs, ended,
    /// or the head cannot say).
    pub fn pending_reason(&self, id: ObjectId) -> Option<String> {
        let task = id.task();
        self.unary(
            move |mut head| async move { head.pending_reason(PendingRequest { task }).await },
        )
        .ok()
        .and_then(|r| r.reason)
    }

    /// The head's task records that `q` asks for.
    pub fn list_tasks(&self, q: TaskQuery) -> Result<TaskList> {
        self.unary(move |mut head| async move { head.list_tasks(q).await })
    }

    /// The head's objects or (`workers`) workers that `q` selects.
    pub fn list_state(&self, q: TaskQuery, workers: bool) -> Result<StateList> {
        self.unary(move |mut head| async move {
            if workers {
                head.list_workers(q).await
            } else {
                head.list_objects(q).await
            }
        })
    }

    /// One unary call to the head on a channel of its own, waited for here.
    fn unary<T, F>(&self, call: impl FnOnce(HeadClient<AuthChannel>) -> F + Send) -> Result<T>
    where
        T: Send,
        F: std::future::Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>
            + Send,
    {
        let addr = self.addr.clone();
        let creds = self.creds.clone();
        self.block(async move {
            let channel = connect_channel(&creds, &addr, Duration::from_secs(5)).await?;
            call(HeadClient::new(channel))
                .await
                .map(tonic::Response::into_inner)
                .map_err(|s| Error::from_status(&addr, &s))
        })
    }

    /// The head's multi-node jobs, oldest first.
    pub fn list_jobs(&self) -> Result<Vec<starling_proto::jobs::JobInfo>> {
        self.unary(|mut head| async move { head.list_jobs(starling_proto::rpc::Empty).await })
    }

    /// One read of a log file of the node whose object service is at `address`.
    pub fn read_log(
        &self,
        address: &str,
        request: starling_proto::jobs::LogFileRequest,
    ) -> Result<starling_proto::jobs::LogChunk> {
        use starling_proto::rpc::object_service_client::ObjectServiceClient;
        // Node object services speak plain HTTP/2 unless their address says otherwise.
        let address = if address.contains("://") {
            address.to_string()
        } else {
            format!("http://{address}")
        };
        let creds = self.creds.clone();
        self.block(async move {
            let channel = connect_channel(&creds, &address, Duration::from_secs(5)).await?;
            ObjectServiceClient::new(channel)
                .read_log(request)
                .await
                .map(tonic::Response::into_inner)
                .map_err(|s| Error::from_status(&address, &s))
        })
    }

    /// Waits here for `fut`, run on the I/O runtime.
    fn block<T: Send>(
        &self,
        fut: impl std::future::Future<Output = Result<T>> + Send,
    ) -> Result<T> {
        // It can be asked from inside the I/O runtime's threads (never in practice) or from
        // user threads; block on a fresh thread to be safe in both.
        let handle = self.rt.clone();
        std::thread::scope(|s| s.spawn(|| handle.block_on(fut)).join())
            .unwrap_or_else(|_| Err(Error::Startup("a call to the head panicked".into())))
    }

    pub fn nodes(&self) -> Vec<NodeInfo> {
        self.status()
            .map(|s| s.nodes.into_iter().map(node_info).collect())
            .unwrap_or_default()
    }

    pub fn shutdown(&self) {
        if self.shut_down.swap(true, Ordering::SeqCst) {
            return;
        }
        // Ending the session makes the head stop this job's workers.
        match &self.sink {
            Sink::Grpc(out) => drop(out.write().take()),
            Sink::Link(out) => out.close(),
            Sink::Local { head, client, open } => {
                if open.swap(false, Ordering::AcqRel) {
                    head.close_local_session(*client, "driver shut down");
                }
            }
        }
        if let Some(owned) = self.owned.lock().take() {
            owned.stop();
        }
        if let Some(rt) = self.own_runtime.lock().take() {
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

/// Tells the user, once per reason in this process, that a task waits for a node that can hold
/// it (as Ray warns of infeasible tasks); `pending_reason` says it for any one task.
pub(crate) fn warn_infeasible(task: TaskId, reason: &str) {
    static SAID: Mutex<Option<std::collections::HashSet<String>>> = Mutex::new(None);
    let first = SAID
        .lock()
        .get_or_insert_with(Default::default)
        .insert(reason.to_string());
    if first {
        eprintln!(
            "starling: task {task} cannot run on any node now ({reason}); it waits until a node \
             that can hold it joins"
        );
    }
}

/// The client's part in a wait: a task blocked in `get` tells the head, which lends its CPUs
/// out; so does any other thread of a worker process (one a task spawned), which also lets one
/// more task run in the process while it waits; a closed session ends waits.
struct Hooks<'a> {
    client: &'a Client,
    /// In a worker process, what this thread's wait tells it: `task_blocked` for the thread
    /// running a task, `thread_blocked` for any other; `None` in a driver.
    lends: Option<fn(bool)>,
    /// What is waited for.
    ids: &'a [ObjectId],
}

impl<'a> Hooks<'a> {
    fn new(client: &'a Client, ids: &'a [ObjectId]) -> Self {
        let owner = client as *const Client as usize;
        let lends: Option<fn(bool)> = if exec::current_worker(owner).is_some() {
            Some(super::worker::task_blocked)
        } else if client.worker.is_some() {
            Some(super::worker::thread_blocked)
        } else {
            None
        };
        Hooks { client, lends, ids }
    }
}

impl WaitHooks for Hooks<'_> {
    fn blocked(&self, blocked: bool) {
        if let Some(lend) = self.lends {
            lend(blocked);
            let op = if blocked {
                ClientOp::Blocked
            } else {
                ClientOp::Unblocked
            };
            self.client.send(op);
        }
    }

    fn closed(&self) -> Option<Error> {
        self.client
            .closed_error()
            .or_else(|| self.ids.iter().find_map(|id| self.client.wait_error(*id)))
    }

    fn known(&self, id: ObjectId) -> bool {
        self.client.knows(id)
    }

    /// Waiting for the one task in flight (a synchronous call), spin about a round trip through
    /// a worker process rather than sleep and pay a wake-up on the result; with many tasks in
    /// flight, spin briefly so the waiter does not take a core from the workers.
    fn spin(&self) -> Duration {
        if self.client.in_flight.load(Ordering::Relaxed) <= 1 {
            SYNC_WAIT_SPIN
        } else {
            exec::WAIT_SPIN
        }
    }
}

/// How long a synchronous wait spins for its one result.
const SYNC_WAIT_SPIN: Duration = Duration::from_micros(300);
