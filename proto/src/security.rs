//! Cluster security: the shared cluster token every RPC must carry, and the TLS settings of
//! clients and servers.
//!
//! A head generates a random token when it first starts and keeps it in `DATA_DIR/token` (mode
//! 0600), so a restarted head keeps it. Node agents, drivers, worker processes and CLI calls
//! present it as gRPC metadata (`authorization: Bearer <token>`, added by [`AttachToken`] on
//! every call of a channel); the head, and each node agent's object service, check it with
//! [`RequireToken`] before any service method runs. Processes that a node agent starts (worker
//! processes, job entrypoints) receive it in [`TOKEN_ENV`].
//!
//! TLS is optional: a head started with a certificate and key serves `https`, and clients that
//! trust its CA ([`TLS_CA_ENV`], or set explicitly) dial `https://` URIs and verify it.
//!
//! # Invariants
//! - Tokens are compared in constant time (for a given length), and never printed: `Debug`
//!   shows `Token(..)`.
//! - A client without a token sends none (the head refuses it with [`UNAUTHENTICATED_HINT`]'s
//!   message); it never invents one.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Status};

/// The environment variable naming a PEM file of CA certificates to trust for TLS.
pub use crate::env::TLS_CA as TLS_CA_ENV;
/// The environment variable a token is read from (and passed on to child processes in).
pub use crate::env::TOKEN as TOKEN_ENV;
/// The token's file name under a head's data directory.
pub const TOKEN_FILE: &str = "token";
/// The metadata key the token travels in.
const AUTHORIZATION: &str = "authorization";
/// What a refused client is told, after `missing or wrong cluster token: `.
pub const UNAUTHENTICATED_HINT: &str = "pass --token-file DATA_DIR/token or set STARLING_TOKEN";

/// Why credentials could not be loaded or used.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// A token or certificate file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A token is empty or has characters that cannot travel in a header.
    #[error("invalid cluster token{}: {why}", from.as_ref().map(|p| format!(" in {}", p.display())).unwrap_or_default())]
    BadToken {
        /// The file it came from, if any.
        from: Option<PathBuf>,
        /// What is wrong with it.
        why: &'static str,
    },
    /// An address could not be turned into an endpoint.
    #[error("`{addr}` is not a head address: {why}")]
    BadAddress {
        /// The address.
        addr: String,
        /// What is wrong with it.
        why: String,
    },
    /// TLS settings were refused (bad PEM, bad key).
    #[error("TLS: {0}")]
    Tls(String),
}

/// The shared secret of a cluster. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(Arc<str>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// A fresh random token: 32 bytes from the OS's random source, in hex.
    pub fn generate() -> std::io::Result<Token> {
        let bytes: [u8; 32] = random_bytes()?;
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Token(hex.into()))
    }

    /// A token given as text (surrounding whitespace is ignored).
    pub fn parse(text: &str) -> Result<Token, SecurityError> {
        Self::parse_from(text, None)
    }

    fn parse_from(text: &str, from: Option<&Path>) -> Result<Token, SecurityError> {
        let bad = |why| SecurityError::BadToken {
            from: from.map(Path::to_path_buf),
            why,
        };
        let t = text.trim();
        if t.is_empty() {
            return Err(bad("it is empty"));
        }
        if !t.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad("only printable ASCII without spaces is allowed"));
        }
        Ok(Token(t.into()))
    }

    /// Reads a token file (such as a head's `DATA_DIR/token`).
    pub fn read_file(path: &Path) -> Result<Token, SecurityError> {
        let text = std::fs::read_to_string(path).map_err(|source| SecurityError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse_from(&text, Some(path))
    }

    /// The head's token: `dir/token` if it exists (a restarted head keeps its token), else a
    /// fresh one written there with mode 0600 (through a temporary file, so a reader never
    /// sees half a token).
    pub fn load_or_create(dir: &Path) -> Result<Token, SecurityError> {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        let path = dir.join(TOKEN_FILE);
        let io = |path: &Path, source| SecurityError::Io {
            path: path.to_path_buf(),
            source,
        };
        if path.exists() {
            // Tighten a file someone loosened: the token is as good as a password.
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| io(&path, e))?;
            return Self::read_file(&path);
        }
        crate::dirs::create_dir(dir).map_err(|e| io(dir, e))?;
        let token = Token::generate().map_err(|e| io(Path::new("/dev/urandom"), e))?;
        let tmp = dir.join(format!(".{TOKEN_FILE}.{}", std::process::id()));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|e| io(&tmp, e))?;
        writeln!(f, "{}", token.0)
            .and_then(|()| f.sync_all())
            .map_err(|e| io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
        Ok(token)
    }

    /// The token's text, to hand to a child process.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The credential of one job, derived from this cluster token: `job<id>.<hex>`, the hex
    /// being HMAC-SHA256 of the job id keyed with the cluster token. Whoever holds the cluster
    /// token (the head, node agents) can check it without a table; whoever holds only a job's
    /// credential cannot forge another job's, nor recover the cluster token. Worker processes
    /// and job entrypoints get this instead of the cluster token (see [`Scope`]).
    pub fn for_job(&self, job: crate::JobId) -> Token {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, self.0.as_bytes());
        Token(job_credential(&key, job.0).into())
    }

    /// The job a job credential belongs to (`None` for a cluster token).
    pub fn job(&self) -> Option<crate::JobId> {
        parse_job_credential(&self.0).map(|(job, _)| crate::JobId(job))
    }

    fn header(&self) -> MetadataValue<Ascii> {
        // `parse` and `generate` admit only visible ASCII, so this cannot fail.
        format!("Bearer {}", self.0)
            .parse()
            .unwrap_or_else(|_| MetadataValue::from_static(""))
    }
}

/// Compares two byte strings in time that depends only on their lengths.
/// `N` bytes from the OS's random source.
pub fn random_bytes<const N: usize>() -> std::io::Result<[u8; N]> {
    use std::io::Read;
    let mut bytes = [0u8; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

fn job_credential(key: &ring::hmac::Key, job: u64) -> String {
    let tag = ring::hmac::sign(key, format!("starling job credential {job}").as_bytes());
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("job{job}.{hex}")
}

fn parse_job_credential(s: &str) -> Option<(u64, &str)> {
    let (job, tag) = s.strip_prefix("job")?.split_once('.')?;
    Some((job.parse().ok()?, tag))
}

/// What a caller may do, as its credential says: set on each request by [`RequireToken`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The cluster token: everything.
    Cluster,
    /// A job's credential ([`Token::for_job`]): run tasks, read and write objects and the
    /// job's own status, logs and result; never register nodes, submit, cancel or delete other
    /// jobs, change pools or read other jobs' logs.
    Job(crate::JobId),
}

impl Scope {
    /// The scope [`RequireToken`] gave `request` (a server without a token: the cluster's).
    pub fn of<T>(request: &Request<T>) -> Scope {
        request
            .extensions()
            .get::<Scope>()
            .copied()
            .unwrap_or(Scope::Cluster)
    }

    /// `Ok` if this scope may act on `job`'s behalf (its status, logs, result, cancel).
    #[allow(clippy::result_large_err)]
    pub fn may_touch(&self, job: u64) -> Result<(), Status> {
        match self {
            Scope::Cluster => Ok(()),
            Scope::Job(own) if own.0 == job => Ok(()),
            Scope::Job(own) => Err(Status::permission_denied(format!(
                "a credential of job {} cannot act on job {job}",
                own.0
            ))),
        }
    }

    /// `Ok` only for the cluster token (registering nodes, submitting jobs, pools).
    #[allow(clippy::result_large_err)]
    pub fn require_cluster(&self, what: &str) -> Result<(), Status> {
        match self {
            Scope::Cluster => Ok(()),
            Scope::Job(own) => Err(Status::permission_denied(format!(
                "a credential of job {} cannot {what}: that needs the cluster token",
                own.0
            ))),
        }
    }
}

pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// A PEM file of CA certificates that clients trust for TLS.
#[derive(Clone, Debug)]
pub struct TlsCa {
    path: PathBuf,
    pem: Arc<[u8]>,
}

impl TlsCa {
    /// Reads `path` (PEM).
    pub fn read(path: &Path) -> Result<TlsCa, SecurityError> {
        let pem = std::fs::read(path).map_err(|source| SecurityError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
            return Err(SecurityError::Tls(format!(
                "{} holds no PEM certificate",
                path.display()
            )));
        }
        Ok(TlsCa {
            path: path.to_path_buf(),
            pem: pem.into(),
        })
    }

    /// Where it was read from (passed on to child processes).
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// HTTP/2 flow-control window per stream, for every client and server of the cluster. With
/// HTTP/2's default of 64 KiB, a message just over it (a task's 80 KiB result sent inline)
/// waits for the peer's window update; at 4 MiB no inline value ever does.
pub const STREAM_WINDOW: u32 = 4 << 20;

/// HTTP/2 flow-control window per connection (all streams together).
pub const CONNECTION_WINDOW: u32 = 16 << 20;

/// How often every client and server of the cluster pings an HTTP/2 connection.
pub const KEEPALIVE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// How long a ping may go unanswered before its connection is declared dead: generous, so a
/// loaded host does not lose live connections; a dead peer is gone within 15 s at most.
pub const KEEPALIVE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// How long a client may hear nothing on its session before it declares the head lost. The
/// head sends `HeadOp::alive` on a session it sent nothing else for [`ALIVE_EVERY`], so a live
/// head is never silent that long, while one that stopped (SIGSTOP, a partition) or whose
/// scheduler is wedged is: HTTP/2 keepalive pings are answered by the connection's I/O task
/// and cannot tell a hung head from a busy one.
pub const SILENCE_LIMIT: std::time::Duration =
    std::time::Duration::from_secs(KEEPALIVE_INTERVAL.as_secs() + KEEPALIVE_TIMEOUT.as_secs());

/// How often the head checks for sessions it sent nothing for a while (those get
/// `HeadOp::alive`): at most this twice between two messages, well within [`SILENCE_LIMIT`].
pub const ALIVE_EVERY: std::time::Duration = std::time::Duration::from_millis(2500);

/// A server's incoming connections from `listener`, with Nagle's algorithm off.
///
/// `Server::tcp_nodelay` only reaches the listeners a server opens itself; without this, a
/// reply that follows a small write waits for the peer's delayed ACK (some 40 ms), and every
/// value of 30-100 KiB sent inline paid it once per hop.
pub fn nodelay_incoming(
    listener: tokio::net::TcpListener,
) -> impl tokio_stream::Stream<Item = std::io::Result<tokio::net::TcpStream>> {
    use tokio_stream::StreamExt;
    tokio_stream::wrappers::TcpListenerStream::new(listener).map(|conn| {
        if let Ok(c) = &conn {
            let _ = c.set_nodelay(true);
        }
        conn
    })
}

/// What a client presents to a head or a node: the cluster token and, for TLS, the CA to trust.
#[derive(Clone, Debug, Default)]
pub struct Credentials {
    /// The cluster token (`None`: the client sends none and is refused by any head).
    pub token: Option<Token>,
    /// The CA to verify the head with; `Some` makes `host:port` addresses `https://`.
    pub tls_ca: Option<TlsCa>,
}

impl Credentials {
    /// From [`TOKEN_ENV`] and [`TLS_CA_ENV`] (either may be unset).
    pub fn from_env() -> Result<Credentials, SecurityError> {
        let token = match std::env::var(TOKEN_ENV) {
            Ok(t) if !t.trim().is_empty() => Some(Token::parse(&t)?),
            _ => None,
        };
        let tls_ca = match std::env::var_os(TLS_CA_ENV) {
            Some(p) if !p.is_empty() => Some(TlsCa::read(Path::new(&p))?),
            _ => None,
        };
        Ok(Credentials { token, tls_ca })
    }

    /// Fills what is not set here from the environment.
    pub fn or_env(mut self) -> Result<Credentials, SecurityError> {
        if self.token.is_none() || self.tls_ca.is_none() {
            let env = Credentials::from_env()?;
            self.token = self.token.or(env.token);
            self.tls_ca = self.tls_ca.or(env.tls_ca);
        }
        Ok(self)
    }

    /// `addr` as a URI: `host:port` becomes `https://host:port` with a CA, else `http://..`; a
    /// full URI is kept.
    pub fn uri(&self, addr: &str) -> String {
        if addr.contains("://") {
            addr.to_string()
        } else if self.tls_ca.is_some() {
            format!("https://{addr}")
        } else {
            format!("http://{addr}")
        }
    }

    /// An endpoint for `addr`, with TLS when there is a CA, HTTP/2 flow-control windows of
    /// [`STREAM_WINDOW`] and [`CONNECTION_WINDOW`], and keepalive pings every
    /// [`KEEPALIVE_INTERVAL`] that fail the connection when unanswered for
    /// [`KEEPALIVE_TIMEOUT`].
    pub fn endpoint(&self, addr: &str) -> Result<Endpoint, SecurityError> {
        let bad = |why: String| SecurityError::BadAddress {
            addr: addr.to_string(),
            why,
        };
        let uri = self.uri(addr);
        let endpoint = Endpoint::from_shared(uri.clone())
            .map_err(|e| bad(e.to_string()))?
            .initial_stream_window_size(STREAM_WINDOW)
            .initial_connection_window_size(CONNECTION_WINDOW)
            // A peer that vanished without closing the connection (stopped, partitioned) is
            // noticed: the connection fails and every call on it with it.
            .http2_keep_alive_interval(KEEPALIVE_INTERVAL)
            .keep_alive_timeout(KEEPALIVE_TIMEOUT)
            .keep_alive_while_idle(true);
        let parsed: tonic::transport::Uri = uri.parse().map_err(|e| bad(format!("{e}")))?;
        if parsed.host().is_none() {
            return Err(bad("no host".into()));
        }
        match (&self.tls_ca, parsed.scheme_str()) {
            (Some(ca), Some("https")) => {
                let tls = tonic::transport::ClientTlsConfig::new()
                    .ca_certificate(tonic::transport::Certificate::from_pem(&ca.pem));
                endpoint
                    .tls_config(tls)
                    .map_err(|e| SecurityError::Tls(e.to_string()))
            }
            (None, Some("https")) => Err(bad(format!(
                "an https address needs a CA to trust: pass --tls-ca PEM or set {TLS_CA_ENV}"
            ))),
            _ => Ok(endpoint),
        }
    }

    /// `channel` with the token attached to every call.
    pub fn intercept(&self, channel: Channel) -> AuthChannel {
        InterceptedService::new(channel, self.attach())
    }

    /// The interceptor that attaches the token.
    pub fn attach(&self) -> AttachToken {
        AttachToken(self.token.as_ref().map(Token::header))
    }

    /// The environment that passes these credentials on to a child process.
    pub fn env(&self) -> Vec<(&'static str, std::ffi::OsString)> {
        let mut env = Vec::new();
        if let Some(t) = &self.token {
            env.push((TOKEN_ENV, t.expose().into()));
        }
        if let Some(ca) = &self.tls_ca {
            env.push((TLS_CA_ENV, ca.path().as_os_str().to_owned()));
        }
        env
    }
}

/// A channel whose calls carry the cluster token.
pub type AuthChannel = InterceptedService<Channel, AttachToken>;

/// Adds `authorization: Bearer <token>` to every call (nothing without a token).
#[derive(Clone, Debug)]
pub struct AttachToken(Option<MetadataValue<Ascii>>);

impl tonic::service::Interceptor for AttachToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(v) = &self.0 {
            request.metadata_mut().insert(AUTHORIZATION, v.clone());
        }
        Ok(request)
    }
}

/// Calls refused for a missing or wrong token since this process started.
static UNAUTHENTICATED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many calls [`RequireToken`] refused in this process.
pub fn unauthenticated_calls() -> u64 {
    UNAUTHENTICATED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Refuses every call that does not carry the cluster token, with status `Unauthenticated`.
#[derive(Clone, Debug)]
pub struct RequireToken {
    expected: Arc<[u8]>,
    /// Job credentials are checked against HMACs keyed with the cluster token.
    key: Arc<ring::hmac::Key>,
    hint: Arc<str>,
}

impl RequireToken {
    /// Accepts `token` (scope [`Scope::Cluster`]) and the job credentials derived from it
    /// ([`Token::for_job`], scope [`Scope::Job`]); a refused client is told `hint` (how to get
    /// the token).
    pub fn new(token: &Token, hint: impl Into<String>) -> Self {
        RequireToken {
            expected: format!("Bearer {}", token.0).into_bytes().into(),
            key: Arc::new(ring::hmac::Key::new(
                ring::hmac::HMAC_SHA256,
                token.0.as_bytes(),
            )),
            hint: hint.into().into(),
        }
    }

    /// The scope of an `authorization` value (`Bearer <token or job credential>`), or `None`
    /// if it carries neither (the refusal is counted).
    pub fn check(&self, presented: &[u8]) -> Option<Scope> {
        let scope = self.scope(presented);
        if scope.is_none() {
            UNAUTHENTICATED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        scope
    }

    fn scope(&self, presented: &[u8]) -> Option<Scope> {
        if constant_time_eq(presented, &self.expected) {
            return Some(Scope::Cluster);
        }
        let presented = std::str::from_utf8(presented)
            .ok()?
            .strip_prefix("Bearer ")?;
        let (job, _) = parse_job_credential(presented)?;
        let expected = job_credential(&self.key, job);
        constant_time_eq(presented.as_bytes(), expected.as_bytes())
            .then_some(Scope::Job(crate::JobId(job)))
    }
}

impl tonic::service::Interceptor for RequireToken {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        let presented = request
            .metadata()
            .get(AUTHORIZATION)
            .map(|v| v.as_bytes())
            .unwrap_or_default();
        if let Some(scope) = self.check(presented) {
            request.extensions_mut().insert(scope);
            Ok(request)
        } else {
            Err(Status::unauthenticated(format!(
                "missing or wrong cluster token: {}",
                self.hint
            )))
        }
    }
}

/// A server's TLS identity: a certificate chain and its private key (PEM).
#[derive(Clone, Debug)]
pub struct ServerTls {
    cert: Vec<u8>,
    key: Vec<u8>,
}

impl ServerTls {
    /// Reads the certificate chain and key files.
    pub fn read(cert: &Path, key: &Path) -> Result<ServerTls, SecurityError> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| SecurityError::Io {
                path: p.to_path_buf(),
                source,
            })
        };
        Ok(ServerTls {
            cert: read(cert)?,
            key: read(key)?,
        })
    }

    /// The configuration for `tonic`'s server builder.
    /// The certificate chain and private key, PEM.
    pub fn pem(&self) -> (&[u8], &[u8]) {
        (&self.cert, &self.key)
    }

    pub fn config(&self) -> tonic::transport::ServerTlsConfig {
        tonic::transport::ServerTlsConfig::new()
            .identity(tonic::transport::Identity::from_pem(&self.cert, &self.key))
    }
}

/// The innermost cause of an error (tonic's outer message is only "transport error").
pub fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut e = e;
    while let Some(next) = e.source() {
        e = next;
    }
    e.to_string()
}

/// One attempt to dial `endpoint`, given up at `deadline`; why it failed otherwise.
pub async fn dial_once(
    endpoint: &Endpoint,
    deadline: std::time::Instant,
) -> Result<Channel, String> {
    let left = deadline.saturating_duration_since(std::time::Instant::now());
    if left.is_zero() {
        return Err("no time left".into());
    }
    let endpoint = endpoint.clone().connect_timeout(left);
    match tokio::time::timeout(left, endpoint.connect()).await {
        Ok(Ok(channel)) => Ok(channel),
        Ok(Err(e)) => Err(root_cause(&e)),
        Err(_) => Err("timed out".into()),
    }
}

/// Dials `endpoint` until it answers or `deadline` passes, waiting 50 ms, then twice as long
/// each time up to 1 s, between attempts; the last attempt's failure otherwise. The one
/// connect-and-retry loop of drivers, workers and node agents.
pub async fn dial(endpoint: &Endpoint, deadline: std::time::Instant) -> Result<Channel, String> {
    let mut backoff = std::time::Duration::from_millis(50);
    loop {
        let why = match dial_once(endpoint, deadline).await {
            Ok(channel) => return Ok(channel),
            Err(why) => why,
        };
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(why);
        }
        tokio::time::sleep(backoff.min(left)).await;
        backoff = (backoff * 2).min(std::time::Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_exactly() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"a"));
    }

    #[test]
    fn a_job_credential_is_its_job_s_alone() {
        use tonic::service::Interceptor;
        let cluster = Token::parse("cluster-secret").unwrap();
        let job7 = cluster.for_job(crate::JobId(7));
        assert_eq!(job7.job(), Some(crate::JobId(7)));
        assert_eq!(cluster.job(), None);
        assert_ne!(job7, cluster.for_job(crate::JobId(8)));
        assert!(!job7.expose().contains("cluster-secret"));
        let mut check = RequireToken::new(&cluster, "hint");
        let scope = |check: &mut RequireToken, t: &str| {
            let mut r = Request::new(());
            r.metadata_mut()
                .insert(AUTHORIZATION, format!("Bearer {t}").parse().unwrap());
            check.call(r).map(|r| Scope::of(&r)).map_err(|_| ())
        };
        assert_eq!(scope(&mut check, "cluster-secret").unwrap(), Scope::Cluster);
        assert_eq!(
            scope(&mut check, job7.expose()).unwrap(),
            Scope::Job(crate::JobId(7))
        );
        // Another job's id with job 7's tag, a made-up tag, another cluster's credential.
        let forged = job7.expose().replacen("job7.", "job8.", 1);
        assert!(scope(&mut check, &forged).is_err());
        assert!(scope(&mut check, "job7.00ff").is_err());
        let other = Token::parse("another-cluster")
            .unwrap()
            .for_job(crate::JobId(7));
        assert!(scope(&mut check, other.expose()).is_err());
        let s = Scope::Job(crate::JobId(7));
        assert!(s.may_touch(7).is_ok());
        assert_eq!(
            s.may_touch(8).unwrap_err().code(),
            tonic::Code::PermissionDenied
        );
        assert!(s.require_cluster("register a node").is_err());
        assert!(Scope::Cluster.may_touch(8).is_ok());
    }

    #[test]
    fn tokens_are_random_hex_and_never_printed() {
        let a = Token::generate().unwrap();
        let b = Token::generate().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.expose().len(), 64);
        assert!(a.expose().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(format!("{a:?}"), "Token(..)");
        assert!(Token::parse("  \n").is_err());
        assert!(Token::parse("a b").is_err());
        assert_eq!(Token::parse(" xyz\n").unwrap().expose(), "xyz");
    }

    #[test]
    fn the_token_file_is_private_and_kept() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("starling-token-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let a = Token::load_or_create(&dir).unwrap();
        let mode = std::fs::metadata(dir.join(TOKEN_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let b = Token::load_or_create(&dir).unwrap();
        assert_eq!(a, b, "a restarted head must keep its token");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_interceptors_agree() {
        use tonic::service::Interceptor;
        let t = Token::generate().unwrap();
        let creds = Credentials {
            token: Some(t.clone()),
            tls_ca: None,
        };
        let mut check = RequireToken::new(&t, "hint");
        let req = creds.attach().call(Request::new(())).unwrap();
        assert!(check.call(req).is_ok());
        let err = check.call(Request::new(())).unwrap_err();
        assert_eq!(err.code(), tonic::Code::Unauthenticated);
        assert_eq!(err.message(), "missing or wrong cluster token: hint");
        let other = Credentials {
            token: Some(Token::parse("nope").unwrap()),
            tls_ca: None,
        };
        let req = other.attach().call(Request::new(())).unwrap();
        assert!(check.call(req).is_err());
        assert_eq!(creds.uri("h:1"), "http://h:1");
    }
}
