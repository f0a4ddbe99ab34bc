//! The node agent's error type: one `thiserror` enum with a typed variant per way the agent can
//! fail. Nothing in it names `tonic` or generated protobuf types, so callers (the CLI, the local
//! cluster) can match on it without knowing the wire.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why the node agent could not start, or why it stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// No connection to the head within `connect_timeout`.
    #[error("head unreachable at {addr}")]
    HeadUnreachable {
        /// The head address as configured.
        addr: String,
    },
    /// The configured head address is not a valid URI or `host:port`.
    #[error("`{addr}` is not a head address: {message}")]
    InvalidHeadAddress {
        /// The head address as configured.
        addr: String,
        /// What is wrong with it.
        message: String,
    },
    /// The head answered but would not register this node (wrong protocol version, no node id).
    #[error("the head refused this node: {message}")]
    Refused {
        /// The head's reason.
        message: String,
    },
    /// The head refused the cluster token (none given, or the wrong one).
    #[error("the head at {addr} refused this node: {message}")]
    Unauthenticated {
        /// The head address as configured.
        addr: String,
        /// The head's reason (how to get the token).
        message: String,
    },
    /// The head's node stream ended or failed after registration. The agent has stopped its
    /// worker processes.
    #[error("lost the head at {addr}: {reason}")]
    HeadLost {
        /// The head address as configured.
        addr: String,
        /// How the stream ended.
        reason: String,
    },
    /// A file or directory the agent needs could not be created, read or written.
    #[error("I/O error on {}", path.display())]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A directory the agent keeps private files in is not private to this user.
    #[error(transparent)]
    UnsafeDir(#[from] starling_proto::dirs::DirError),
    /// The object service could not listen on its address.
    #[error("cannot serve objects on {addr}")]
    Bind {
        /// The address from `AgentConfig::object_bind`.
        addr: SocketAddr,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The head is reached over TLS but the object service was given no certificate: it would
    /// take the cluster token in clear.
    #[error(
        "the head is reached over TLS, so this node's object service must serve TLS too: give \
         it a certificate the cluster's CA signed (starling worker --tls-cert PEM --tls-key PEM)"
    )]
    ObjectTlsMissing,
    /// The object service's certificate or key was refused.
    #[error("cannot serve objects over TLS: {0}")]
    ObjectTls(String),
    /// A worker process could not be started.
    #[error("cannot start worker binary {}", binary.display())]
    Spawn {
        /// The executable.
        binary: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A job's binary could not be obtained from the head.
    #[error("binary of build `{build}`: {message}")]
    Binary {
        /// The build id.
        build: String,
        /// What went wrong.
        message: String,
    },
}

impl AgentError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        AgentError::Io {
            path: path.into(),
            source,
        }
    }
}
