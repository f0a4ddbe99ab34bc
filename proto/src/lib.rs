//! Starling's wire vocabulary: ids, resource sets, task specs and failures, and the protocols
//! of the cluster ([`session`], [`node`], [`status`], [`chunks`], [`jobs`]), and the state API's
//! records ([`state`]).
//!
//! This is the only crate that knows protobuf. The generated messages live in a private module;
//! every other crate works with the hand-written domain types of this crate, and the gRPC stubs
//! of [`rpc`] carry them, converting to and from protobuf as messages are encoded and decoded.
//! The head and node agents move task arguments and results as opaque bytes: nothing here
//! knows a user type.

pub mod chunks;
pub mod dirs;
pub mod env;
#[doc(hidden)]
pub mod fuzz;
pub mod hash;
pub mod id_table;
mod ids;
pub mod jobs;
pub mod limits;
pub mod link;
pub mod node;
mod resources;
pub mod rpc;
pub mod security;
pub mod session;
pub mod state;
pub mod status;
pub mod store_file;
mod task;
pub mod wire;

pub use ids::{
    session_of, JobId, NodeId, ObjectId, TaskId, WorkerId, COUNTER_MASK, SESSION_END, SESSION_SHIFT,
};
pub use resources::{check_gpu_ids, is_gpu_id, ResourceSet, RESOURCE_SCALE};
pub use task::{
    ActorOptions, ActorRole, EnvId, Extras, FailureKind, FunctionName, RemoteError,
    SchedulingStrategy, TaskArg, TaskEnv, TaskExtras, TaskFailure, TaskSpec, RESERVED_ENV_PREFIX,
};

/// The generated protobuf messages (committed: see `tests/generated.rs`). Private: every other
/// crate speaks in the domain types, which [`rpc::WireCodec`] converts at the edge.
#[allow(
    clippy::all,
    missing_docs,
    rust_2018_idioms,
    unreachable_pub,
    dead_code
)]
mod pb {
    include!("generated/starling.v1.rs");
}

/// The protocol version spoken by this build; peers with another version are refused.
pub const PROTOCOL_VERSION: u32 = 9;

/// The content id of a binary: the SHA-256 of its bytes, in lowercase hex (64 characters).
pub fn build_id_of(data: &[u8]) -> String {
    let mut h = BuildHasher::new();
    h.update(data);
    h.finish()
}

/// A build id computed a piece at a time, as an upload or a download streams in.
pub struct BuildHasher(ring::digest::Context);

impl std::fmt::Debug for BuildHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BuildHasher")
    }
}

impl Default for BuildHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl BuildHasher {
    /// A hasher of nothing yet.
    pub fn new() -> Self {
        BuildHasher(ring::digest::Context::new(&ring::digest::SHA256))
    }

    /// Adds the next bytes.
    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The build id of everything added.
    pub fn finish(self) -> String {
        self.0
            .finish()
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// Whether `build` has the form of a build id (64 lowercase hex digits), so it is also a safe
/// file name.
pub fn is_build_id(build: &str) -> bool {
    build.len() == 64
        && build
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The build id of the file at `path`, read in 1 MiB pieces.
pub fn build_id_of_file(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut h = BuildHasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            return Ok(h.finish());
        }
        h.update(&buf[..n]);
    }
}
