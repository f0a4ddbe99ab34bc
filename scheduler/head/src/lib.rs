//! The head node: the scheduler behind gRPC.
//!
//! Drivers and worker processes each open one `Session` stream; node agents open one `Attach`
//! stream. Every incoming batch is applied to the scheduler under one lock (the handlers of
//! [`starling_scheduler::reactor`]), followed by one scheduling pass; what the scheduler asked for is then
//! sent as one outgoing batch per peer. The service methods only translate and forward: all
//! decisions are the reactor's.
//!
//! Small values (task results under [`INLINE_LIMIT`], driver `put`s) live in the head's memory
//! up to [`HeadConfig::value_budget`] and travel inline; past the budget they go to the head's
//! disk (`values`) and are fetched from it. Large task results stay in the store of the node
//! that made them, and the head hands out their location.

// `tonic::Status` is the error type of every service method; boxing it would only move the
// allocation into each call site.
#![allow(clippy::result_large_err)]

mod dashboard;
mod files;
mod http;
pub mod jobs;
mod link;
mod metrics;
mod numbers;
mod room;
mod service;
pub(crate) mod state;
mod streams;
mod values;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use starling_proto::security::{
    RequireToken, SecurityError, ServerTls, Token, UNAUTHENTICATED_HINT,
};

pub use jobs::Launcher;
pub use room::DEFAULT_MAX_LIVE_TASKS;
pub use service::HeadService;
pub use state::ClientTx;

/// Values up to this size travel inline in messages; larger task results stay on their node.
/// Largest gRPC message accepted or sent (a larger one is refused with a clear status).
pub use starling_proto::limits::{INLINE_LIMIT, MAX_MESSAGE_BYTES};

/// Tasks a busy worker process may be handed ahead by default: enough to cover a network round
/// trip of short tasks, few enough that long tasks do not pile up behind each other.
pub const DEFAULT_PIPELINE_DEPTH: usize = 64;

/// How long [`HeadHandle::shutdown`] waits for connections to close after the head ended its
/// streams; then it stops serving them anyway.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// How to run a head.
#[derive(Clone, Debug)]
pub struct HeadConfig {
    /// Where to listen (port 0: any free port).
    pub bind: SocketAddr,
    /// Where the head keeps uploaded binaries.
    pub data_dir: PathBuf,
    /// A node whose agent is silent this long is declared dead.
    pub heartbeat_timeout: Duration,
    /// Tasks a busy worker process may be handed ahead (see `Core::set_pipeline_depth`).
    pub pipeline_depth: usize,
    /// How long a job that has `min_instances` free nodes, but not `target_instances`, waits
    /// for more before it starts with what it has.
    pub start_grace: Duration,
    /// Starts nodes for pools whose nodes the head starts itself (`None`: such pools cannot be
    /// created).
    pub launcher: Option<Arc<dyn Launcher>>,
    /// The cluster token every call must carry (`None`: a fresh random one, see
    /// [`HeadHandle::token`]).
    pub token: Option<Token>,
    /// What a client without the right token is told to do, after `missing or wrong cluster
    /// token: `.
    pub token_hint: String,
    /// Serve TLS with this identity (`None`: plain HTTP/2).
    pub tls: Option<ServerTls>,
    /// Bytes of values (small task results, remote drivers' `put`s) the head keeps in memory;
    /// past it they go to `data_dir/values` and are served from there.
    pub value_budget: u64,
    /// Live tasks (queued or running) the head holds before drivers that submit more wait
    /// for room (see `head::room`; worker processes' nested submissions never wait).
    pub max_live_tasks: usize,
    /// Bytes of task events (one record per task attempt, for the state API and the timeline)
    /// the head keeps; past it the oldest are dropped (0: none kept).
    pub task_events_bytes: usize,
    /// Where to serve the dashboard and `/metrics` over HTTP (TLS when `tls` is set), behind
    /// the cluster token (`None`: not served). Its address is written to `data_dir/dashboard`.
    pub dashboard: Option<SocketAddr>,
    /// Serve the session link (`DATA_DIR/link.sock`, see `starling_proto::link`): worker
    /// processes on this host started with its path open their sessions on it instead of
    /// gRPC. Not served where the path is too long for a Unix socket.
    pub link: bool,
    /// Keep lineage (see `Core::set_lineage`): each live object remembers the task that made
    /// it, so objects lost with a node are made again. On by default; a head whose only node
    /// lives and dies with it (the local cluster's) can lose no object without losing every
    /// holder of its refs, so it turns it off and frees a task's spec when the task ends.
    pub lineage: bool,
}

/// The default dashboard port, as Ray's.
pub const DEFAULT_DASHBOARD_PORT: u16 = 8265;

/// The default [`HeadConfig::value_budget`]: 2 GiB.
pub const DEFAULT_VALUE_BUDGET: u64 = 2 << 30;

impl std::fmt::Debug for dyn Launcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Launcher")
    }
}

impl HeadConfig {
    /// Listens on `bind`, keeps data under `data_dir`, 5 s heartbeat timeout.
    pub fn new(bind: SocketAddr, data_dir: PathBuf) -> Self {
        HeadConfig {
            bind,
            data_dir,
            heartbeat_timeout: Duration::from_secs(5),
            pipeline_depth: DEFAULT_PIPELINE_DEPTH,
            start_grace: starling_scheduler::jobs::START_GRACE,
            launcher: None,
            token: None,
            token_hint: UNAUTHENTICATED_HINT.to_string(),
            tls: None,
            value_budget: DEFAULT_VALUE_BUDGET,
            max_live_tasks: DEFAULT_MAX_LIVE_TASKS,
            task_events_bytes: starling_scheduler::events::TaskEvents::DEFAULT_CAP,
            dashboard: None,
            link: false,
            lineage: true,
        }
    }
}

/// Why a head could not start.
#[derive(Debug, thiserror::Error)]
pub enum HeadError {
    /// The address could not be bound.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The cluster token could not be made or read, or the TLS identity is unusable.
    #[error("cluster security")]
    Security(#[from] SecurityError),
    /// The data directory could not be created.
    #[error("cannot use data directory {}", path.display())]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The data directory, or one inside it, is not private to this user.
    #[error(transparent)]
    UnsafeDataDir(#[from] starling_proto::dirs::DirError),
}

/// A running head. Dropping it stops the server.
pub struct HeadHandle {
    addr: SocketAddr,
    token: Token,
    shutdown: Option<oneshot::Sender<()>>,
    join: Option<JoinHandle<()>>,
    service: HeadService,
    /// The dashboard's address and its server.
    dashboard: Option<(SocketAddr, JoinHandle<()>)>,
    link: Option<link::LinkListener>,
}

impl std::fmt::Debug for HeadHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HeadHandle({})", self.addr)
    }
}

impl HeadHandle {
    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The cluster token this head requires.
    pub fn token(&self) -> &Token {
        &self.token
    }

    /// Where the dashboard and `/metrics` are served, if they are.
    pub fn dashboard_addr(&self) -> Option<SocketAddr> {
        self.dashboard.as_ref().map(|(a, _)| *a)
    }

    /// The session link's socket, if it is served.
    pub fn link_path(&self) -> Option<&std::path::Path> {
        self.link.as_ref().map(|l| l.path())
    }

    /// The service, for in-process inspection (status).
    pub fn service(&self) -> &HeadService {
        &self.service
    }

    /// Stops accepting and closes every stream.
    pub async fn shutdown(mut self) {
        self.stop();
        if let Some(mut j) = self.join.take() {
            // Connections close once their clients see the head's streams end; a client that
            // neither reads nor closes (stopped, wedged) is not waited for past the grace.
            if tokio::time::timeout(SHUTDOWN_GRACE, &mut j).await.is_err() {
                j.abort();
                let _ = j.await;
            }
        }
        // The job table's last changes are on disk before the head is gone.
        let files = self.service.files();
        let _ = tokio::task::spawn_blocking(move || files.map(|f| f.flush())).await;
    }

    /// Runs until the server stops.
    pub async fn wait(&mut self) {
        if let Some(j) = self.join.take() {
            let _ = j.await;
        }
    }

    fn stop(&mut self) {
        if let Some((_, server)) = &self.dashboard {
            server.abort();
        }
        if let Some(l) = &self.link {
            l.stop();
        }
        self.service.close();
        if let Some(s) = self.shutdown.take() {
            let _ = s.send(());
        }
    }
}

impl Drop for HeadHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Starts a head on the current tokio runtime and returns once it listens.
pub async fn serve(config: HeadConfig) -> Result<HeadHandle, HeadError> {
    // The data dir holds the token, job environments and results: this user's alone (0700,
    // refused if another user could read or plant files in it).
    starling_proto::dirs::ensure_dir(&config.data_dir)?;
    let bin_dir = starling_proto::dirs::ensure_dir(&config.data_dir.join("binaries"))?;
    let listener = TcpListener::bind(config.bind)
        .await
        .map_err(|source| HeadError::Bind {
            addr: config.bind,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| HeadError::Bind {
        addr: config.bind,
        source,
    })?;
    let table = jobs::JobFiles::load(&config.data_dir).map_err(|source| HeadError::DataDir {
        path: config.data_dir.clone(),
        source,
    })?;
    let mut head = state::Head::new(
        bin_dir,
        Some(table),
        config.heartbeat_timeout,
        config.pipeline_depth,
        config.launcher.clone(),
    );
    // Session numbers (the top bits of every id) continue past those of earlier starts.
    head.sessions =
        numbers::SessionNumbers::load(&config.data_dir).map_err(|source| HeadError::DataDir {
            path: config.data_dir.clone(),
            source,
        })?;
    head.room.set_limit(config.max_live_tasks);
    {
        let mut g = head.state.lock();
        g.core.set_task_events_cap(config.task_events_bytes);
        g.core.set_lineage(config.lineage);
        g.jobs.head_addr = addr.to_string();
        g.jobs.start_grace = config.start_grace;
    }
    // Values past the memory budget go here; any left by an earlier start are stale (their ids
    // repeat).
    let values_dir = config.data_dir.join("values");
    let _ = std::fs::remove_dir_all(&values_dir);
    let values_dir = starling_proto::dirs::ensure_dir(&values_dir)?;
    head.set_value_budget(config.value_budget, values_dir);
    let head = Arc::new(head);
    let service = HeadService::new(head.clone());
    service.spawn_heartbeat_monitor();
    let token = match config.token.clone() {
        Some(t) => t,
        None => Token::generate().map_err(|source| HeadError::DataDir {
            path: "/dev/urandom".into(),
            source,
        })?,
    };
    let dashboard = match config.dashboard {
        Some(bind) => Some(start_dashboard(bind, &config, head.clone(), &token).await?),
        None => None,
    };
    // One token check for every way in: gRPC calls and the session link.
    let auth = RequireToken::new(&token, config.token_hint.clone());
    let link_path = config.data_dir.join("link.sock");
    let link = if config.link && link_path.as_os_str().len() <= starling_proto::link::MAX_PATH {
        Some(
            link::LinkListener::start(link_path.clone(), head.clone(), auth.clone()).map_err(
                |source| HeadError::DataDir {
                    path: link_path,
                    source,
                },
            )?,
        )
    } else {
        None
    };
    let (tx, rx) = oneshot::channel::<()>();
    let server = starling_proto::rpc::head_server::HeadServer::new(service.clone())
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    // Every method of the service, streams included, is behind the token check.
    let server = tonic::service::interceptor::InterceptedService::new(server, auth);
    let mut builder = tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .initial_stream_window_size(starling_proto::security::STREAM_WINDOW)
        .initial_connection_window_size(starling_proto::security::CONNECTION_WINDOW)
        // A client that vanished without closing (its host stopped or cut off) is noticed:
        // its session ends and what it held is released.
        .http2_keepalive_interval(Some(starling_proto::security::KEEPALIVE_INTERVAL))
        .http2_keepalive_timeout(Some(starling_proto::security::KEEPALIVE_TIMEOUT));
    if let Some(tls) = &config.tls {
        builder = builder
            .tls_config(tls.config())
            .map_err(|e| SecurityError::Tls(e.to_string()))?;
    }
    let join = tokio::spawn(async move {
        let _ = builder
            .add_service(server)
            .serve_with_incoming_shutdown(
                starling_proto::security::nodelay_incoming(listener),
                async {
                    let _ = rx.await;
                },
            )
            .await;
    });
    Ok(HeadHandle {
        addr,
        token,
        shutdown: Some(tx),
        join: Some(join),
        service,
        dashboard,
        link,
    })
}

/// Binds the dashboard's port, writes its address to `data_dir/dashboard` and serves it.
async fn start_dashboard(
    bind: SocketAddr,
    config: &HeadConfig,
    head: Arc<state::Head>,
    token: &Token,
) -> Result<(SocketAddr, JoinHandle<()>), HeadError> {
    let listener = match TcpListener::bind(bind).await {
        Ok(l) => l,
        // The default port is taken (another head on this host): any free one, as written to
        // the address file and logged.
        Err(e)
            if e.kind() == std::io::ErrorKind::AddrInUse
                && bind.port() == DEFAULT_DASHBOARD_PORT =>
        {
            let any = SocketAddr::new(bind.ip(), 0);
            TcpListener::bind(any)
                .await
                .map_err(|source| HeadError::Bind { addr: any, source })?
        }
        Err(source) => return Err(HeadError::Bind { addr: bind, source }),
    };
    let addr = listener
        .local_addr()
        .map_err(|source| HeadError::Bind { addr: bind, source })?;
    let tls = match &config.tls {
        Some(tls) => Some(http_tls(tls)?),
        None => None,
    };
    let path = config.data_dir.join("dashboard");
    let scheme = if tls.is_some() { "https" } else { "http" };
    starling_proto::dirs::write_file(&path, format!("{scheme}://{addr}\n").as_bytes())
        .map_err(|source| HeadError::DataDir { path, source })?;
    let site = Arc::new(http::Site {
        head,
        auth: RequireToken::new(token, String::new()),
    });
    Ok((addr, tokio::spawn(http::serve(listener, site, tls))))
}

/// The TLS acceptor of the HTTP port: the head's own certificate and key.
fn http_tls(tls: &ServerTls) -> Result<tokio_rustls::TlsAcceptor, HeadError> {
    use tokio_rustls::rustls;
    let bad = |why: String| HeadError::Security(SecurityError::Tls(why));
    let (cert, key) = tls.pem();
    let certs = rustls_pemfile::certs(&mut &cert[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("cannot read the certificate: {e}")))?;
    let key = rustls_pemfile::private_key(&mut &key[..])
        .map_err(|e| bad(format!("cannot read the private key: {e}")))?
        .ok_or_else(|| bad("no private key in the key file".into()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| bad(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| bad(e.to_string()))?;
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}
