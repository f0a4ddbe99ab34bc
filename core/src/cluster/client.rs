//! The client side of a head session: submit, put, release, wait — and, in worker processes,
//! receive tasks.
//!
//! Outgoing operations go through an unbounded channel to one writer that sends everything
//! queued as one batch; incoming batches are handled by one reader task. Values pushed by the
//! head land in the local store, where waits find them.
//!
//! # Invariants
//! - The head subscribes the submitter of a task to its result, so every `ObjectRef` this
//!   client made settles in the local store without a request.
//! - Once the session ends, every current and future wait fails with `HeadLost` (or
//!   `ShutDown` after [`Client::shutdown`]); nothing waits forever.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use starling_proto::pb::{self, client_op, head_op, object_value};
use starling_proto::{FailureKind, JobId, NodeId, ObjectId, TaskFailure, TaskId, WorkerId};
use starling_worker::store::{Blob, Lookup, ObjectStore};
use tokio::sync::mpsc;
use tokio_stream::Stream;

use super::objects::{self, LocalStore};
use crate::__private::ArgsBuilder;
use crate::error::{Error, Result};
use crate::options::TaskOptions;
use crate::registry::{build_id, Registry};
use crate::runtime::wait::{self, WaitHooks};
use crate::runtime::{exec, prepare_call, Config, NodeInfo, RuntimeStats};
use starling_scheduler::head::{ClientTx, HeadService};

/// Values up to this size are sent inline; larger `put`s go to the local node store if there is
/// one.
pub(crate) const INLINE_LIMIT: usize = 100 * 1024;

/// How many times a value whose node was lost is asked for again before `get` gives up with
/// `ObjectLost` (spread over about [`REFETCH_TRIES`] × [`REFETCH_MAX_PAUSE`] at most, longer than
/// a head takes to declare a silent node dead).
const REFETCH_TRIES: u32 = 12;
const REFETCH_MAX_PAUSE: Duration = Duration::from_secs(1);

/// Largest message this client sends or accepts.
pub(crate) const MAX_MESSAGE_BYTES: usize = 256 * 1024 * 1024;

/// Largest value a driver outside the cluster's nodes can `put` (it travels to the head in one
/// message); a driver on a node writes large values to the node's store instead, without limit.
const MAX_PUT_BYTES: usize = MAX_MESSAGE_BYTES - (1 << 20);

/// A batch stops growing past this many encoded bytes, so large values do not add up to an
/// oversized message.
const MAX_BATCH_BYTES: usize = 8 << 20;

/// Something that keeps a cluster's pieces alive while its client is in use (the local cluster's
/// head and node agent), and stops them.
pub(crate) trait Owned: Send + Sync {
    fn stop(&self);
}

pub(crate) struct Client {
    addr: String,
    sink: Sink,
    store: ObjectStore,
    id_base: u64,
    next: AtomicU64,
    job: JobId,
    pub worker: Option<WorkerId>,
    local: Option<LocalStore>,
    closed: OnceLock<Error>,
    shut_down: AtomicBool,
    registry: &'static Registry,
    rt: tokio::runtime::Handle,
    cancelled: Mutex<std::collections::HashSet<u64>>,
    /// Tasks submitted whose result has not arrived yet.
    in_flight: AtomicU64,
    /// Objects whose located value could not be fetched, with the times asked again.
    refetches: Mutex<HashMap<ObjectId, u32>>,
    owned: Mutex<Option<Box<dyn Owned>>>,
    /// The tokio runtime this client created, if it created one (dropped last, off-thread).
    own_runtime: Mutex<Option<tokio::runtime::Runtime>>,
}

/// Where this client's operations go.
enum Sink {
    /// A gRPC session: a channel drained by the request stream, one batch per drain.
    Grpc(RwLock<Option<mpsc::UnboundedSender<pb::ClientOp>>>),
    /// A head in this process: applied by direct calls, no socket (the local cluster's driver).
    Local {
        head: HeadService,
        client: u64,
        open: AtomicBool,
    },
}

type Incoming =
    Pin<Box<dyn Stream<Item = std::result::Result<pb::HeadBatch, tonic::Status>> + Send>>;

/// Batches everything queued on the channel into one message.
struct Batcher(mpsc::UnboundedReceiver<pb::ClientOp>);

impl Stream for Batcher {
    type Item = pb::ClientBatch;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<pb::ClientBatch>> {
        match self.0.poll_recv(cx) {
            Poll::Ready(Some(op)) => {
                use prost::Message;
                let mut bytes = op.encoded_len();
                let mut ops = vec![op];
                while ops.len() < 8192 && bytes < MAX_BATCH_BYTES {
                    match self.0.try_recv() {
                        Ok(op) => {
                            bytes += op.encoded_len();
                            ops.push(op);
                        }
                        Err(_) => break,
                    }
                }
                Poll::Ready(Some(pb::ClientBatch { ops }))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// What a new session is for.
pub(crate) struct SessionKind {
    pub hello: pb::Hello,
    pub local: Option<LocalStore>,
    /// Worker processes: where `RunTask`s go.
    pub runs: Option<crossbeam::channel::Sender<pb::RunTask>>,
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
        let rt = runtime()?;
        let build = rt.block_on(upload_binary(addr, config.connect_timeout))?;
        let hello = driver_hello(build);
        let kind = SessionKind {
            hello,
            local: None,
            runs: None,
        };
        let client = Client::connect(addr, kind, rt.handle().clone(), config.connect_timeout)?;
        *client.own_runtime.lock() = Some(rt);
        Ok(client)
    }

    /// Opens a session with the head at `addr` on the runtime `rt`.
    pub fn connect(
        addr: &str,
        kind: SessionKind,
        rt: tokio::runtime::Handle,
        timeout: Duration,
    ) -> Result<Arc<Client>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(pb::ClientOp {
            kind: Some(client_op::Kind::Hello(kind.hello)),
        });
        let uri = super::head_uri(addr);
        let addr_s = addr.to_string();
        let (welcome, incoming) = rt.block_on(async move {
            let channel = connect_channel(&uri, &addr_s, timeout).await?;
            let mut head = pb::head_client::HeadClient::new(channel)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES);
            let refused = |s: tonic::Status| Error::Refused {
                addr: addr_s.clone(),
                message: s.message().to_string(),
            };
            let mut incoming = head
                .session(Batcher(rx))
                .await
                .map_err(refused)?
                .into_inner();
            let first = incoming.message().await.map_err(refused)?;
            let mut ops = first.map(|b| b.ops).unwrap_or_default().into_iter();
            let welcome = ops
                .next()
                .and_then(|op| match op.kind {
                    Some(head_op::Kind::Welcome(w)) => Some(w),
                    _ => None,
                })
                .ok_or_else(|| Error::Refused {
                    addr: addr_s.clone(),
                    message: "the head did not welcome the session".into(),
                })?;
            // The welcome may share its batch with the first tasks for a worker.
            let rest: Vec<pb::HeadOp> = ops.collect();
            Ok::<_, Error>((welcome, (rest, Box::pin(incoming) as Incoming)))
        })?;
        Ok(Client::start(
            addr,
            Sink::Grpc(RwLock::new(Some(tx))),
            welcome,
            incoming,
            kind.local,
            kind.runs,
            rt,
        ))
    }

    /// Opens a session with a head running in this process: operations are applied by direct
    /// calls, replies come through a channel, no socket on either way.
    pub fn connect_local(
        addr: &str,
        head: HeadService,
        hello: pb::Hello,
        local: Option<LocalStore>,
        rt: tokio::runtime::Handle,
    ) -> Result<Arc<Client>> {
        // The head hands this client its batches by calling `deliver` on its own thread (after
        // releasing its lock): values land in the store without a hop through a reader task.
        let inbox = Arc::new(LocalInbox::default());
        let deliver = inbox.clone();
        let tx = ClientTx::Direct(Arc::new(move |batch: pb::HeadBatch| deliver.deliver(batch)));
        let refused = |s: tonic::Status| Error::Refused {
            addr: addr.to_string(),
            message: s.message().to_string(),
        };
        let id = head.open_local_session(&hello, tx).map_err(refused)?;
        let mut early = inbox.early.lock();
        let welcome = match early.first().and_then(|op| op.kind.clone()) {
            Some(head_op::Kind::Welcome(w)) => w,
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
        // No stream: a local session ends only when this client shuts down.
        let none: Incoming = Box::pin(tokio_stream::pending());
        let client = Client::start(addr, sink, welcome, (Vec::new(), none), local, None, rt);
        let _ = inbox.client.set(Arc::downgrade(&client));
        for op in early.drain(..) {
            client.handle_op(op, None);
        }
        drop(early);
        Ok(client)
    }

    fn start(
        addr: &str,
        sink: Sink,
        welcome: pb::Welcome,
        incoming: (Vec<pb::HeadOp>, Incoming),
        local: Option<LocalStore>,
        runs: Option<crossbeam::channel::Sender<pb::RunTask>>,
        rt: tokio::runtime::Handle,
    ) -> Arc<Client> {
        let client = Arc::new(Client {
            addr: addr.to_string(),
            sink,
            store: ObjectStore::new(),
            id_base: welcome.id_base,
            next: AtomicU64::new(1),
            job: JobId(welcome.job),
            worker: (welcome.worker != 0).then_some(WorkerId(welcome.worker)),
            local,
            closed: OnceLock::new(),
            shut_down: AtomicBool::new(false),
            registry: Registry::get(),
            rt: rt.clone(),
            cancelled: Mutex::new(Default::default()),
            in_flight: AtomicU64::new(0),
            refetches: Mutex::new(HashMap::new()),
            owned: Mutex::new(None),
            own_runtime: Mutex::new(None),
        });
        let weak = Arc::downgrade(&client);
        rt.spawn(read_loop(weak, incoming, runs));
        client
    }

    pub fn addr(&self) -> &str {
        &self.addr
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

    pub fn send(&self, kind: client_op::Kind) {
        self.send_many(vec![pb::ClientOp { kind: Some(kind) }]);
    }

    /// Sends `ops` in order, as one batch where the transport allows: the session's I/O thread
    /// is woken once for all of them.
    pub fn send_many(&self, ops: Vec<pb::ClientOp>) {
        if ops.is_empty() {
            return;
        }
        match &self.sink {
            Sink::Grpc(out) => {
                if let Some(out) = &*out.read() {
                    for op in ops {
                        let _ = out.send(op);
                    }
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
    pub(crate) fn knows(&self, id: ObjectId) -> bool {
        const LOW: u64 = (1 << 40) - 1;
        if id.0 & !LOW == self.id_base {
            return id.0 & LOW != 0 && id.0 & LOW < self.next.load(Ordering::Relaxed);
        }
        self.send(client_op::Kind::Subscribe(id.0));
        true
    }

    fn next_id(&self) -> u64 {
        self.id_base | self.next.fetch_add(1, Ordering::Relaxed)
    }

    fn close(&self, e: Error) {
        let _ = self.closed.set(e);
    }

    fn closed_error(&self) -> Option<Error> {
        if self.shut_down.load(Ordering::SeqCst) {
            return Some(Error::ShutDown);
        }
        self.closed.get().cloned()
    }

    pub fn submit(&self, function: &'static str, args: ArgsBuilder, o: TaskOptions) -> ObjectId {
        let id = TaskId(self.next_id());
        let object = ObjectId::from(id);
        let owner = self as *const Client as usize;
        match prepare_call(self.registry, owner, id, function, args, o, self.job) {
            Ok((spec, keep)) => {
                self.in_flight.fetch_add(1, Ordering::Relaxed);
                self.send(client_op::Kind::Submit((&spec).into()));
                drop(keep);
            }
            Err(failure) => self.store.fail(object, Arc::new(failure)),
        }
        object
    }

    pub fn put(&self, bytes: Vec<u8>) -> Result<ObjectId> {
        if self.local.is_none() && bytes.len() > MAX_PUT_BYTES {
            return Err(Error::ObjectTooLarge {
                size: bytes.len() as u64,
                limit: MAX_PUT_BYTES as u64,
            });
        }
        let id = ObjectId(self.next_id());
        let blob = Blob::new(bytes);
        let stored = match &self.local {
            Some(local) if blob.len() > INLINE_LIMIT => local.write(id, &blob).ok(),
            _ => None,
        };
        match stored {
            Some(location) => {
                let v = pb::ObjectValue {
                    object: id.0,
                    kind: Some(object_value::Kind::Location(location)),
                };
                self.send(client_op::Kind::PutStored(v));
            }
            None => {
                let v = pb::ObjectValue {
                    object: id.0,
                    kind: Some(object_value::Kind::Inline(blob.to_vec())),
                };
                self.send(client_op::Kind::Put(v));
            }
        }
        self.store.put(id, blob);
        Ok(id)
    }

    pub fn release(&self, id: ObjectId) {
        self.store.remove(id);
        if !self.shut_down.load(Ordering::Relaxed) {
            self.send(client_op::Kind::Release(id.0));
        }
    }

    pub fn poll_object(&self, id: ObjectId, waker: &Waker) -> Poll<Result<Blob>> {
        match self.store.lookup(id, Some(waker)) {
            Lookup::Ready(b) => Poll::Ready(Ok(b)),
            Lookup::Failed(f) => Poll::Ready(Err(Error::from(&*f))),
            Lookup::Pending => match self.closed_error() {
                Some(e) => Poll::Ready(Err(e)),
                None if !self.knows(id) => Poll::Ready(Err(Error::ObjectLost(id))),
                None => Poll::Pending,
            },
        }
    }

    pub fn wait_object(&self, id: ObjectId, deadline: Option<Instant>) -> Result<Blob> {
        wait::wait_one(&self.store, id, deadline, &Hooks::new(self))
    }

    pub fn wait_many(
        &self,
        ids: &[ObjectId],
        num_returns: usize,
        timeout: Option<Duration>,
    ) -> Vec<bool> {
        wait::wait_many(&self.store, ids, num_returns, timeout, &Hooks::new(self))
    }

    pub fn cancel(&self, id: ObjectId, force: bool) -> Result<()> {
        if let Some(e) = self.closed_error() {
            return Err(e);
        }
        let t = id.task().0;
        self.send(if force {
            client_op::Kind::CancelForce(t)
        } else {
            client_op::Kind::Cancel(t)
        });
        Ok(())
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
            live_tasks: s.queued + s.running,
            queued_tasks: s.queued,
            running_tasks: s.running,
            objects: s.objects,
            objects_freed: 0,
            store_bytes: self.store.bytes_used(),
        }
    }

    /// The head's status report.
    pub fn status(&self) -> Result<pb::StatusReply> {
        let job = self.job.0;
        let uri = super::head_uri(&self.addr);
        let addr = self.addr.clone();
        let fut = async move {
            let channel = connect_channel(&uri, &addr, Duration::from_secs(5)).await?;
            pb::head_client::HeadClient::new(channel)
                .status(pb::StatusRequest { job })
                .await
                .map(|r| r.into_inner())
                .map_err(|s| Error::Refused {
                    addr,
                    message: s.message().to_string(),
                })
        };
        // Status can be asked from inside the I/O runtime's threads (never in practice) or from
        // user threads; block on a fresh thread to be safe in both.
        let handle = self.rt.clone();
        std::thread::scope(|s| s.spawn(|| handle.block_on(fut)).join())
            .unwrap_or_else(|_| Err(Error::Startup("status thread panicked".into())))
    }

    pub fn nodes(&self) -> Vec<NodeInfo> {
        self.status()
            .map(|s| {
                s.nodes
                    .into_iter()
                    .map(|n| NodeInfo {
                        id: NodeId(n.id),
                        address: n.address,
                        resources: n.total.map(Into::into).unwrap_or_default(),
                        available: n.available.map(Into::into).unwrap_or_default(),
                        alive: n.alive,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn shutdown(&self) {
        if self.shut_down.swap(true, Ordering::SeqCst) {
            return;
        }
        // Ending the session makes the head stop this job's workers.
        match &self.sink {
            Sink::Grpc(out) => drop(out.write().take()),
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

/// The client's part in a wait: a task blocked in `get` tells the head, which lends its CPUs
/// out; a closed session ends waits.
struct Hooks<'a> {
    client: &'a Client,
    blocking_task: bool,
}

impl<'a> Hooks<'a> {
    fn new(client: &'a Client) -> Self {
        let owner = client as *const Client as usize;
        Hooks {
            client,
            blocking_task: exec::current_worker(owner).is_some(),
        }
    }
}

impl WaitHooks for Hooks<'_> {
    fn blocked(&self, blocked: bool) {
        if self.blocking_task {
            super::worker::task_blocked(blocked);
            let op = if blocked {
                client_op::Kind::Blocked(true)
            } else {
                client_op::Kind::Unblocked(true)
            };
            self.client.send(op);
        }
    }

    fn closed(&self) -> Option<Error> {
        self.client.closed_error()
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

/// Connects to the head, retrying until `timeout`.
pub(crate) async fn connect_channel(
    uri: &str,
    addr: &str,
    timeout: Duration,
) -> Result<tonic::transport::Channel> {
    let unreachable = |why: String| Error::HeadUnreachable {
        addr: addr.to_string(),
        why,
    };
    let endpoint = tonic::transport::Endpoint::from_shared(uri.to_string())
        .map_err(|e| unreachable(format!("bad address: {e}")))?
        .tcp_nodelay(true)
        .connect_timeout(timeout.min(Duration::from_secs(2)));
    let deadline = Instant::now() + timeout;
    loop {
        match endpoint.connect().await {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() >= deadline => {
                let why = format!("no answer within {timeout:?} ({e})");
                return Err(unreachable(why));
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

fn driver_hello(build: String) -> pb::Hello {
    pb::Hello {
        version: starling_proto::PROTOCOL_VERSION,
        build,
        node: 0,
        // A multi-node job's entrypoint joins its job.
        job: std::env::var(super::env::JOB)
            .ok()
            .and_then(|j| j.parse().ok())
            .unwrap_or(0),
        is_worker: false,
        pid: std::process::id(),
    }
}

/// A driver's hello for a local cluster, whose node agent runs this very executable.
pub(crate) fn local_driver_hello() -> pb::Hello {
    driver_hello(build_id().to_string())
}

/// Uploads this executable to the head (content-addressed: the head keeps one copy per build)
/// and returns its build id.
async fn upload_binary(addr: &str, timeout: Duration) -> Result<String> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Startup(format!("cannot find this executable: {e}")))?;
    let data = tokio::fs::read(&exe)
        .await
        .map_err(|e| Error::Startup(format!("cannot read {}: {e}", exe.display())))?;
    let uri = super::head_uri(addr);
    let channel = connect_channel(&uri, addr, timeout).await?;
    let mut head =
        pb::head_client::HeadClient::new(channel).max_encoding_message_size(MAX_MESSAGE_BYTES);
    let reply = head
        .put_binary(tokio_stream::iter(upload_chunks(&data)))
        .await
        .map_err(|s| Error::Refused {
            addr: addr.to_string(),
            message: s.message().to_string(),
        })?;
    Ok(reply.into_inner().build)
}

/// `data` as the chunks of a `PutBinary` upload: 1 MiB each, the total size in the first (one
/// empty chunk for empty data).
pub(crate) fn upload_chunks(data: &[u8]) -> Vec<pb::Chunk> {
    if data.is_empty() {
        return vec![pb::Chunk::default()];
    }
    data.chunks(1 << 20)
        .enumerate()
        .map(|(i, c)| pb::Chunk {
            data: c.to_vec(),
            total: if i == 0 { data.len() as u64 } else { 0 },
        })
        .collect()
}

/// Handles what the head pushes until the session ends.
async fn read_loop(
    client: std::sync::Weak<Client>,
    (first, mut incoming): (Vec<pb::HeadOp>, Incoming),
    runs: Option<crossbeam::channel::Sender<pb::RunTask>>,
) {
    let mut pending = Some(first);
    let end = loop {
        let next = match pending.take() {
            Some(ops) => Ok(Some(pb::HeadBatch { ops })),
            None => {
                use tokio_stream::StreamExt;
                incoming.next().await.transpose()
            }
        };
        match next {
            Ok(Some(batch)) => {
                let Some(c) = client.upgrade() else { return };
                for op in batch.ops {
                    c.handle_op(op, runs.as_ref());
                }
            }
            Ok(None) => break "the head closed the session".to_string(),
            Err(s) => break s.message().to_string(),
        }
    };
    if let Some(c) = client.upgrade() {
        let addr = c.addr.clone();
        c.close(Error::HeadLost { addr, why: end });
    }
    // Dropping `runs` ends a worker process's task loop.
}

/// Batches a head in this process hands over before the client exists (the welcome), then
/// straight to the client.
#[derive(Default)]
struct LocalInbox {
    client: OnceLock<std::sync::Weak<Client>>,
    early: Mutex<Vec<pb::HeadOp>>,
}

impl LocalInbox {
    fn deliver(&self, batch: pb::HeadBatch) {
        // The lock orders deliveries with `connect_local` draining the early ones.
        let mut early = self.early.lock();
        match self.client.get().and_then(std::sync::Weak::upgrade) {
            Some(c) => {
                drop(early);
                for op in batch.ops {
                    c.handle_op(op, None);
                }
            }
            None => early.extend(batch.ops),
        }
    }
}

impl Client {
    fn handle_op(
        self: &Arc<Self>,
        op: pb::HeadOp,
        runs: Option<&crossbeam::channel::Sender<pb::RunTask>>,
    ) {
        match op.kind {
            Some(head_op::Kind::Value(v)) => self.receive_value(v),
            Some(head_op::Kind::Run(run)) => {
                if let Some(r) = runs {
                    let _ = r.send(run);
                }
            }
            Some(head_op::Kind::Cancel(t)) => {
                self.cancelled.lock().insert(t);
            }
            Some(head_op::Kind::Welcome(_)) | None => {}
        }
    }

    /// Whether to ask the head again for an object whose value could not be fetched.
    fn ask_again(&self, object: ObjectId) -> bool {
        if self.closed_error().is_some() {
            return false;
        }
        let mut r = self.refetches.lock();
        let tries = r.entry(object).or_insert(0);
        *tries += 1;
        if *tries > REFETCH_TRIES {
            r.remove(&object);
            return false;
        }
        true
    }

    fn receive_value(self: &Arc<Self>, v: pb::ObjectValue) {
        let object = ObjectId(v.object);
        let _ = self
            .in_flight
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        match v.kind {
            Some(object_value::Kind::Inline(bytes)) => {
                self.store.put(object, Blob::new(bytes));
            }
            Some(object_value::Kind::Failure(f)) => {
                let failure = TaskFailure::try_from(f).unwrap_or(TaskFailure {
                    task: object.task(),
                    attempt: 0,
                    kind: FailureKind::ObjectLost(object),
                });
                self.store.fail(object, Arc::new(failure));
            }
            Some(object_value::Kind::Location(location)) => {
                let me = self.clone();
                self.rt.spawn(async move {
                    let spill = me.local.as_ref().map(|l| l.spill_dir.clone());
                    match objects::fetch(object, &location, &me.addr, spill.as_deref()).await {
                        Ok(blob) => {
                            me.refetches.lock().remove(&object);
                            me.store.put(object, blob);
                        }
                        // Its node may be gone: the head makes lost objects again from their
                        // lineage, so ask it where the value is now (a few times, backing off).
                        Err(_) if me.ask_again(object) => {
                            let tries = me.refetches.lock().get(&object).copied().unwrap_or(1);
                            let pause = Duration::from_millis(250 * u64::from(tries))
                                .min(REFETCH_MAX_PAUSE);
                            tokio::time::sleep(pause).await;
                            me.in_flight.fetch_add(1, Ordering::Relaxed);
                            me.send(client_op::Kind::Subscribe(object.0));
                        }
                        Err(_) => me.store.fail(
                            object,
                            Arc::new(TaskFailure {
                                task: object.task(),
                                attempt: 0,
                                kind: FailureKind::ObjectLost(object),
                            }),
                        ),
                    }
                });
            }
            None => {}
        }
    }
}
