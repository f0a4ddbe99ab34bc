//! The node agent: one per host (or several per host in the local cluster). It registers the
//! node with the head, runs the worker processes the head asks for, keeps their logs, serves the
//! node's objects to other nodes, and keeps the node's object store under its memory cap.
//!
//! ```text
//!             Attach (NodeBatch ⇄ HeadToNodeBatch)
//!   head ◀──────────────────────────────────────────▶ agent loop ──▶ Supervisor ──▶ worker processes
//!     ▲  GetBinary (job binaries, cached per node)        │  heartbeat, usage          │ stdout/stderr
//!     └───────────────────────────────────────────────────┤                            ▼
//!                        other nodes ── Fetch ──▶ ObjectService ◀── store_dir / spill_dir ◀── logs
//! ```
//!
//! [`start`] connects (retrying until `connect_timeout`), sends `NodeHello`, and returns once
//! the head has assigned the node id. From then on one task, the agent loop, owns all state: it
//! handles the head's ops (`StartWorkers`, `StopJob`, `FreeObject`), worker exits, and the
//! heartbeat tick. Slow work (binary downloads, spilling, file deletion) runs on other tasks
//! and reports back, so heartbeats stay on time.
//!
//! When the head is lost (its stream ends or fails), the agent stops the node's worker
//! processes and job entrypoints, empties the store (a new head knows none of its objects),
//! and registers again with backoff, one log line per attempt, asking for its old node id,
//! until `reconnect_timeout`; then it stops with [`AgentError::HeadLost`]. Every call to the
//! head carries the cluster token, and the object service refuses calls without it.
//!
//! # Invariants
//! - No worker process outlives the agent, nor the registration it was started for: the loop
//!   kills and reaps them all when it ends (shutdown, [`AgentHandle`] dropped, head lost), and
//!   every process is spawned with `kill_on_drop` for the case where the runtime itself goes
//!   away.
//! - The heartbeat never waits for disk work: store usage is measured on the blocking pool and
//!   reported when ready.
//! - Worker processes see the node through environment variables only ([`env`](mod@env)).
//! - The store and spill directories are removed when the agent stops if, and only if, the
//!   agent created them.

mod binary;
mod config;
mod disk;
mod error;
pub mod gpus;
pub mod instances;
pub mod logs;
mod objects;
mod procs;
mod session;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use starling_proto::node::{
    HeadToNodeBatch, HeadToNodeOp, NodeBatch, NodeHello, NodeOp, StoreUsage, WorkerExit,
};
use starling_proto::rpc::object_service_server::ObjectServiceServer;
use starling_proto::security::{AuthChannel, Credentials, RequireToken, UNAUTHENTICATED_HINT};
use starling_proto::{JobId, NodeId, ObjectId, ResourceSet};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::{Channel, Endpoint, Server};
use tonic::Streaming;

use self::binary::BinaryCache;
use self::disk::Disk;
use self::instances::Instances;
use self::logs::{AgentLog, Writing};
use self::objects::ObjectServer;
use self::procs::{ProcEvent, SpawnConfig, Supervisor};

pub use self::config::AgentConfig;
#[allow(unused_imports)]
use self::config::*;
pub use self::error::AgentError;
pub use self::objects::CHUNK as FETCH_CHUNK;
pub use self::procs::{MAX_RESTARTS, RESTART_WINDOW};
use self::session::*;

/// The largest gRPC message the agent sends or accepts, on clients and servers alike.
pub use starling_proto::limits::MAX_MESSAGE_BYTES;

/// The environment a worker process is started with (on top of the agent's own), and a job
/// entrypoint's. The binary enters worker mode when it sees
/// [`WORKER_HEAD`](env::WORKER_HEAD).
pub use starling_proto::env;

/// The value of environment variable `name` for a process of `job`: the cluster token becomes
/// the job's own credential (`Token::for_job`), so a task or an entrypoint can act on its job
/// and nothing else (see `starling_proto::security::Scope`); other variables pass unchanged.
pub(crate) fn for_job(name: &str, value: &str, job: JobId) -> String {
    if name != starling_proto::security::TOKEN_ENV {
        return value.to_string();
    }
    match starling_proto::security::Token::parse(value) {
        Ok(token) if token.job().is_none() => token.for_job(job).expose().to_string(),
        _ => value.to_string(),
    }
}

/// A running node agent. Dropping it stops the agent (workers killed, no orphans).
#[derive(Debug)]
pub struct AgentHandle {
    /// The node id: it changes only if a restarted head cannot give the old one back.
    node: Arc<AtomicU64>,
    object_address: SocketAddr,
    head: String,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<Result<(), AgentError>>>,
    /// Set once the loop has ended: `None` for a clean stop, else why the head was lost.
    ended: Option<Option<String>>,
}

impl AgentHandle {
    /// The id the head assigned to this node (the latest one, after a head restart).
    pub fn node_id(&self) -> NodeId {
        NodeId(self.node.load(Ordering::Relaxed))
    }

    /// The object service's address, as announced to the head.
    pub fn object_address(&self) -> SocketAddr {
        self.object_address
    }

    /// Stops the agent: kills every worker process, waits until they are gone, closes the
    /// node stream (the head sees the node leave) and the object service.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        let _ = self.wait().await;
    }

    /// Waits until the agent stops: `Ok` after [`shutdown`](Self::shutdown) (or a stop from
    /// elsewhere), [`AgentError::HeadLost`] when the head's stream ended or failed and no head
    /// took the node back within `reconnect_timeout`, [`AgentError::Unauthenticated`] when a
    /// restarted head refused the token. Calling it again returns the same outcome at once.
    pub async fn wait(&mut self) -> Result<(), AgentError> {
        if let Some(task) = self.task.as_mut() {
            let outcome = match task.await {
                Ok(Ok(())) => None,
                Ok(Err(AgentError::HeadLost { reason, .. })) => Some(reason),
                Ok(Err(AgentError::Unauthenticated { message, .. })) => Some(message),
                Ok(Err(other)) => Some(other.to_string()),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(_) => None, // The runtime is shutting down; its processes die with it.
            };
            self.task = None;
            self.ended = Some(outcome);
        }
        match self.ended.clone().flatten() {
            None => Ok(()),
            Some(reason) => Err(AgentError::HeadLost {
                addr: self.head.clone(),
                reason,
            }),
        }
    }
}

impl Drop for AgentHandle {
    fn drop(&mut self) {
        // The loop sees this (or the sender's drop) and kills every worker process.
        let _ = self.stop.send(true);
    }
}

/// Starts a node agent and returns once the head has registered it (the node id is known).
pub async fn start(config: AgentConfig) -> Result<AgentHandle, AgentError> {
    let endpoint = config
        .credentials
        .endpoint(&config.head)
        .map_err(|e| AgentError::InvalidHeadAddress {
            addr: config.head.clone(),
            message: e.to_string(),
        })?
        // Keepalives (set by the endpoint) notice a head that vanished without closing.
        .tcp_nodelay(true);
    let uri = config.credentials.uri(&config.head);
    let fresh_store = !config.store_dir.exists();
    let fresh_spill = !config.spill_dir.exists();
    for dir in [
        &config.store_dir,
        &config.spill_dir,
        &config.log_dir,
        &config.cache_dir,
    ] {
        // 0700, this user's, and refused if another user could read or plant files in it.
        starling_proto::dirs::ensure_dir(dir)?;
    }
    // Absolute paths: worker processes and same-host readers may run in other directories.
    let absolute = |p: &Path| std::fs::canonicalize(p).map_err(|e| AgentError::io(p, e));
    let store_dir = absolute(&config.store_dir)?;
    let spill_dir = absolute(&config.spill_dir)?;
    let log_dir = absolute(&config.log_dir)?;
    let cache_dir = absolute(&config.cache_dir)?;
    let mut owned = OwnedDirs(Vec::new());
    for (fresh, dir) in [(fresh_store, &store_dir), (fresh_spill, &spill_dir)] {
        if fresh {
            owned.0.push(dir.clone());
        }
    }

    if config.credentials.tls_ca.is_some() && config.object_tls.is_none() {
        return Err(AgentError::ObjectTlsMissing);
    }
    let bind = match config.object_bind {
        Some(addr) => addr,
        None => SocketAddr::new(route_to(&uri).await, 0),
    };
    let listener = TcpListener::bind(bind)
        .await
        .map_err(|source| AgentError::Bind { addr: bind, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| AgentError::Bind { addr: bind, source })?;

    let deadline = Instant::now() + config.connect_timeout;
    let channel = connect(&config.head, &endpoint, deadline).await?;
    let object_socket = if bound.ip().is_unspecified() {
        SocketAddr::new(route_to(&uri).await, bound.port())
    } else {
        bound
    };
    // Fetchers dial what a node advertises: `https://` when it serves TLS.
    let object_address = match config.object_tls {
        Some(_) => format!("https://{object_socket}"),
        None => object_socket.to_string(),
    };
    let head = HeadClient::new(config.credentials.intercept(channel))
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);

    let hello = NodeHello {
        version: starling_proto::PROTOCOL_VERSION,
        resources: config.resources.clone(),
        object_address: object_address.clone(),
        pool: config.pool.clone(),
        store_dir: store_dir.display().to_string(),
        previous_id: None,
        pid: std::process::id(),
        gpu_ids: config.gpu_ids.clone(),
    };
    let session = register(&config.head, head.clone(), hello.clone(), deadline).await?;
    let node = session.node;

    let log = Arc::new(AgentLog::open(
        &log_dir.join(format!("agent-{node}.log")),
        config.log_to_stderr,
    ));
    log.line(format_args!(
        "registered as {node} with {} (resources {}, pool {:?}, objects at {object_address})",
        config.head, config.resources, config.pool
    ));

    let disk = Arc::new(Disk::new(
        store_dir.clone(),
        spill_dir.clone(),
        config.store_cap_bytes,
    ));
    if !(fresh_store && fresh_spill) {
        // Objects a store directory already holds belong to no head this node knows.
        let removed = disk.clear().map_err(|e| AgentError::io(&store_dir, e))?;
        if removed > 0 {
            log.line(format_args!(
                "removed {removed} object file(s) left in {} or {} by an earlier agent",
                store_dir.display(),
                spill_dir.display()
            ));
        }
    }
    let (object_stop, object_stopped) = oneshot::channel::<()>();
    let writing = Writing::default();
    let service = ObjectServiceServer::new(ObjectServer {
        disk: disk.clone(),
        log_dir: log_dir.clone(),
        agent_log: log_dir.join(format!("agent-{node}.log")),
        writing: writing.clone(),
    })
    .max_decoding_message_size(MAX_MESSAGE_BYTES)
    .max_encoding_message_size(MAX_MESSAGE_BYTES);
    // Other nodes and drivers fetch objects with the cluster token, as they call the head.
    let check = config.credentials.token.as_ref().map(|t| {
        RequireToken::new(
            t,
            format!(
                "this node serves objects to holders of its head's token ({UNAUTHENTICATED_HINT})"
            ),
        )
    });
    let service = InterceptedService::new(service, OptionalToken(check));
    let server_log = log.clone();
    let mut server = Server::builder();
    if let Some(tls) = &config.object_tls {
        server = server
            .tls_config(tls.config())
            .map_err(|e| AgentError::ObjectTls(e.to_string()))?;
    }
    tokio::spawn(async move {
        let served = server
            .tcp_nodelay(true)
            .http2_keepalive_interval(Some(starling_proto::security::KEEPALIVE_INTERVAL))
            .http2_keepalive_timeout(Some(starling_proto::security::KEEPALIVE_TIMEOUT))
            .initial_stream_window_size(starling_proto::security::STREAM_WINDOW)
            .initial_connection_window_size(starling_proto::security::CONNECTION_WINDOW)
            .add_service(service)
            .serve_with_incoming_shutdown(
                starling_proto::security::nodelay_incoming(listener),
                async {
                    let _ = object_stopped.await;
                },
            )
            .await;
        if let Err(e) = served {
            server_log.line(format_args!("object service stopped: {e}"));
        }
    });

    let cache = match config.worker_binary {
        Some(_) => None,
        None => Some(Arc::new(BinaryCache::new(
            cache_dir.clone(),
            head.clone(),
            log.clone(),
        ))),
    };
    let (stop, stop_rx) = watch::channel(false);
    let node_cell = Arc::new(AtomicU64::new(node.0));
    let head_addr = config.head.clone();
    let agent = Agent {
        config,
        hello,
        endpoint,
        store_dir,
        spill_dir,
        log_dir,
        cache_dir,
        object_address: object_address.clone(),
        cache,
        disk,
        log,
        stop: stop_rx,
        object_stop: Some(object_stop),
        owned,
        node: node_cell.clone(),
        writing,
    };
    let task = tokio::spawn(agent.run(session));
    Ok(AgentHandle {
        node: node_cell,
        object_address: object_socket,
        head: head_addr,
        stop,
        task: Some(task),
        ended: None,
    })
}

/// The object service's check: the cluster token when the agent has one. (An agent without a
/// token can only have joined a head that checks none, so it has nothing to protect either.)
#[derive(Clone)]
struct OptionalToken(Option<RequireToken>);

impl Interceptor for OptionalToken {
    fn call(&mut self, req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        match &mut self.0 {
            Some(check) => check.call(req),
            None => Ok(req),
        }
    }
}

/// What outlives one registration with a head: the node's directories, store, object service,
/// binary cache and log. [`Agent::run`] runs one [`Loop`] per registration and registers again
/// when the head is lost.
struct Agent {
    config: AgentConfig,
    hello: NodeHello,
    endpoint: Endpoint,
    store_dir: PathBuf,
    spill_dir: PathBuf,
    log_dir: PathBuf,
    cache_dir: PathBuf,
    object_address: String,
    cache: Option<Arc<BinaryCache>>,
    disk: Arc<Disk>,
    log: Arc<AgentLog>,
    stop: watch::Receiver<bool>,
    object_stop: Option<oneshot::Sender<()>>,
    owned: OwnedDirs,
    node: Arc<AtomicU64>,
    /// Which worker processes' logs are still written (shared with the object service).
    writing: Writing,
}

impl Agent {
    async fn run(mut self, mut session: Session) -> Result<(), AgentError> {
        let outcome = loop {
            self.node.store(session.node.0, Ordering::Relaxed);
            match self.session_loop(session).await {
                Ok(()) => break Ok(()),
                Err(reason) => {
                    self.log.line(format_args!(
                        "lost the head: {reason}; stopped this node's processes, trying to \
                         register again for up to {:.0}s",
                        self.config.reconnect_timeout.as_secs_f64()
                    ));
                    // A new head knows none of the stored objects and may reuse their ids.
                    let disk = self.disk.clone();
                    let _ = tokio::task::spawn_blocking(move || disk.clear()).await;
                    match self.reconnect(&reason).await {
                        Ok(Some(next)) => session = next,
                        Ok(None) => break Ok(()),
                        Err(e) => break Err(e),
                    }
                }
            }
        };
        match &outcome {
            Ok(()) => self.log.line(format_args!("shutting down")),
            Err(e) => self.log.line(format_args!("stopping: {e}")),
        }
        if let Some(stop) = self.object_stop.take() {
            let _ = stop.send(());
        }
        // Nobody can reach this node's objects any more; give the memory back.
        let dirs = std::mem::take(&mut self.owned.0);
        let _ = tokio::task::spawn_blocking(move || drop(OwnedDirs(dirs))).await;
        outcome
    }

    /// Runs the agent loop for one registration; `Err` says how the head was lost.
    async fn session_loop(&mut self, session: Session) -> Result<(), String> {
        let node = session.node;
        let (events_tx, events) = mpsc::unbounded_channel();
        let mut spawn = SpawnConfig::new(
            &self.config,
            node,
            &self.store_dir,
            &self.spill_dir,
            &self.object_address,
            self.log_dir.clone(),
            self.writing.clone(),
        );
        let creds: Vec<(&'static str, String)> = self
            .config
            .credentials
            .env()
            .into_iter()
            .map(|(k, v)| (k, v.to_string_lossy().into_owned()))
            .collect();
        spawn.env.extend(creds.iter().cloned());
        if self.config.resources.units("GPU") > 0 {
            // A task sees the GPUs it holds (its worker sets them per task), and none before.
            spawn.env.push((env::CUDA_VISIBLE_DEVICES, String::new()));
            spawn.env.push((env::GPU_IDS, String::new()));
        }
        let instances = Instances::new(
            self.config.head.clone(),
            creds,
            // Per agent process: agents of other clusters on this host share the cache
            // directory and number their nodes and jobs from 1 too.
            self.cache_dir
                .join("jobs")
                .join(format!("{node}-p{}", std::process::id())),
            self.log_dir.clone(),
            self.cache.clone(),
            session.outbound.clone(),
            self.log.clone(),
        );
        let agent = Loop {
            instances,
            outbound: session.outbound,
            inbound: session.inbound,
            supervisor: Supervisor::new(spawn, self.cache.clone(), events_tx, self.log.clone()),
            events,
            disk: self.disk.clone(),
            log: self.log.clone(),
            stop: self.stop.clone(),
            maintenance: None,
        };
        agent.run(self.config.heartbeat, session.early).await
    }

    /// Registers with the head again, retrying with backoff until `reconnect_timeout`.
    /// `Ok(None)`: a stop was requested meanwhile.
    async fn reconnect(&mut self, reason: &str) -> Result<Option<Session>, AgentError> {
        let timeout = self.config.reconnect_timeout;
        let started = Instant::now();
        let deadline = started + timeout;
        let mut backoff = Duration::from_millis(100);
        // Ask for the old id back: a restarted head gives it unless another node has it.
        let mut hello = self.hello.clone();
        hello.previous_id = Some(NodeId(self.node.load(Ordering::Relaxed)));
        for attempt in 1.. {
            if *self.stop.borrow() {
                return Ok(None);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(AgentError::HeadLost {
                    addr: self.config.head.clone(),
                    reason: format!(
                        "{reason}; no head took the node back within {:.0}s ({} attempts)",
                        timeout.as_secs_f64(),
                        attempt - 1
                    ),
                });
            }
            let try_until = Instant::now() + left.min(Duration::from_secs(5));
            let tried = match connect_once(&self.endpoint, try_until).await {
                Ok(channel) => {
                    let head = HeadClient::new(self.config.credentials.intercept(channel))
                        .max_decoding_message_size(MAX_MESSAGE_BYTES)
                        .max_encoding_message_size(MAX_MESSAGE_BYTES);
                    register(&self.config.head, head, hello.clone(), try_until).await
                }
                Err(e) => Err(e),
            };
            match tried {
                Ok(session) => {
                    self.log.line(format_args!(
                        "registered again as {} with {} after {:.1}s ({attempt} attempt(s))",
                        session.node,
                        self.config.head,
                        started.elapsed().as_secs_f64()
                    ));
                    return Ok(Some(session));
                }
                // The head is there but will not have us: retrying cannot help.
                Err(e @ AgentError::Unauthenticated { .. }) => return Err(e),
                Err(e) => self.log.line(format_args!(
                    "reconnect attempt {attempt} to {} failed: {e}; next in {:.1}s",
                    self.config.head,
                    backoff.min(left).as_secs_f64()
                )),
            }
            tokio::select! {
                () = stopped(&mut self.stop) => return Ok(None),
                () = tokio::time::sleep(backoff.min(left)) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
        unreachable!("the attempts loop only ends by returning")
    }
}

/// What one store maintenance pass returns: the usage and the objects it spilled.
type Maintained = std::io::Result<(StoreUsage, Vec<ObjectId>)>;

/// The agent loop's state for one registration; see the module docs.
struct Loop {
    instances: Instances,
    outbound: mpsc::UnboundedSender<NodeBatch>,
    inbound: Streaming<HeadToNodeBatch>,
    supervisor: Supervisor,
    events: mpsc::UnboundedReceiver<ProcEvent>,
    disk: Arc<Disk>,
    log: Arc<AgentLog>,
    stop: watch::Receiver<bool>,
    /// The store measurement in flight, if any.
    maintenance: Option<JoinHandle<Maintained>>,
}

/// The store and spill directories this agent created; they are removed with their contents
/// when the agent stops (or fails to start). A directory that existed before is never removed:
/// it belongs to whoever made it.
struct OwnedDirs(Vec<PathBuf>);

impl Drop for OwnedDirs {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Loop {
    async fn run(mut self, heartbeat: Duration, early: Vec<HeadToNodeOp>) -> Result<(), String> {
        for op in early {
            self.on_head_op(op).await;
        }
        // `interval` panics on zero; a 10 ms floor also keeps a typo from flooding the head.
        let mut tick = tokio::time::interval(heartbeat.max(Duration::from_millis(10)));
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let outcome = loop {
            tokio::select! {
                // Stop requests win over everything else.
                biased;
                () = stopped(&mut self.stop) => break Ok(()),
                msg = self.inbound.message() => match msg {
                    Ok(Some(b)) => {
                        for op in b.ops {
                            self.on_head_op(op).await;
                        }
                    }
                    Ok(None) => break Err("the head closed the node stream".to_string()),
                    Err(status) => break Err(format!("node stream failed: {}", status.message())),
                },
                Some(event) = self.events.recv() => self.on_event(event).await,
                result = wait_maintenance(&mut self.maintenance) => self.on_maintenance(result),
                _ = tick.tick() => self.on_tick().await,
            }
        };
        // Worker processes and job entrypoints end with the registration: a new head knows
        // none of them.
        self.instances.stop_all().await;
        self.supervisor.kill_all().await;
        outcome
    }

    fn send(&self, ops: Vec<NodeOp>) {
        // A closed stream shows up on the inbound side; nothing to do here.
        let _ = self.outbound.send(batch(ops));
    }

    async fn on_head_op(&mut self, op: HeadToNodeOp) {
        match op {
            HeadToNodeOp::NodeId(id) => {
                self.log
                    .line(format_args!("ignoring a second node id {id}"));
            }
            HeadToNodeOp::StartWorkers(s) => {
                self.supervisor
                    .start_workers(s.job, &s.build, s.count, &s.env)
                    .await;
            }
            HeadToNodeOp::StopJob(job) => {
                let instance = self.instances.stop(job).await;
                self.supervisor.stop_job(job).await;
                if instance {
                    // After the entrypoint's exit and every line of output (one ordered stream).
                    self.send(vec![NodeOp::JobStopped(job)]);
                }
            }
            HeadToNodeOp::JobInstance(ji) => {
                let job = JobId(ji.job);
                self.instances.on_instance(ji);
                if let Some(tee) = self.instances.tee(job) {
                    self.supervisor.tee(tee);
                }
            }
            HeadToNodeOp::KillWorker { job, pid } => {
                self.supervisor.kill_worker(job, pid);
            }
            HeadToNodeOp::KeepWorker { job, pid } => {
                self.supervisor.keep_worker(job, pid);
            }
            HeadToNodeOp::FreeObject(object) => {
                let (disk, log) = (self.disk.clone(), self.log.clone());
                // Off the loop: a delete on a slow disk must not delay heartbeats.
                tokio::task::spawn_blocking(move || {
                    if let Err(e) = disk.free(object) {
                        log.line(format_args!("cannot free {object}: {e}"));
                    }
                });
            }
        }
    }

    async fn on_event(&mut self, event: ProcEvent) {
        match event {
            ProcEvent::Exited { job, pid, code } => {
                self.send(vec![NodeOp::WorkerExit(WorkerExit { job, pid, code })]);
                self.supervisor.on_exit(job, pid, code).await;
            }
            ProcEvent::Binary { job, result } => self.supervisor.on_binary(job, result).await,
        }
    }

    async fn on_tick(&mut self) {
        self.send(vec![NodeOp::Heartbeat]);
        if self.maintenance.is_none() {
            let disk = self.disk.clone();
            self.maintenance = Some(tokio::task::spawn_blocking(move || disk.maintain()));
        }
        self.supervisor.tick().await;
    }

    fn on_maintenance(&mut self, result: Result<Maintained, tokio::task::JoinError>) {
        self.maintenance = None;
        match result {
            Ok(Ok((usage, spilled))) => {
                if !spilled.is_empty() {
                    self.log.line(format_args!(
                        "store over its cap: spilled {} object(s), {} B left in memory",
                        spilled.len(),
                        usage.memory_bytes
                    ));
                }
                self.send(vec![NodeOp::Usage(usage)]);
            }
            Ok(Err(e)) => self
                .log
                .line(format_args!("cannot measure or spill the store: {e}")),
            Err(e) => self.log.line(format_args!("store maintenance failed: {e}")),
        }
    }
}

/// Resolves once a stop is requested or the handle is gone.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Resolves when the maintenance in flight finishes; never while none is.
async fn wait_maintenance(
    maintenance: &mut Option<JoinHandle<Maintained>>,
) -> Result<Maintained, tokio::task::JoinError> {
    match maintenance {
        Some(handle) => handle.await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_route_to_the_head_gives_this_host_s_address() {
        let ip = route_to("http://127.0.0.1:7000").await;
        assert_eq!(ip, IpAddr::V4(Ipv4Addr::LOCALHOST));
        // A head whose name does not resolve: loopback, never all interfaces.
        let ip = route_to("http://no-such-host.invalid:1").await;
        assert_eq!(ip, IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
}
