//! Starling's wire vocabulary: ids, resource sets, task specs and failures.
//!
//! This is the only crate that knows protobuf. The generated code lives in the private [`pb`]
//! module; every other crate works with the hand-written domain types below, which convert to
//! and from their protobuf form through `From` impls (see [`wire`]). The head and node agents
//! move task arguments and results as opaque bytes: nothing here knows a user type.

#[doc(hidden)]
pub mod fuzz;
mod ids;
mod resources;
pub mod security;
mod task;
pub mod wire;

pub use ids::{JobId, NodeId, ObjectId, TaskId, WorkerId};
pub use resources::{ResourceSet, RESOURCE_SCALE};
pub use task::{
    FailureKind, FunctionName, RemoteError, SchedulingStrategy, TaskArg, TaskFailure, TaskSpec,
};

/// Generated protobuf messages and gRPC stubs (committed: see `tests/generated.rs`). Private:
/// other crates reach them through [`pb`].
#[allow(clippy::all, missing_docs, rust_2018_idioms, unreachable_pub)]
mod generated {
    include!("generated/starling.v1.rs");
}

/// The cluster protocol's messages and gRPC stubs, for the crates that implement the head, the
/// node agent and the client. Never re-exported by the `starling` API crate.
pub mod pb {
    pub use crate::generated::*;
}

/// The protocol version spoken by this build; peers with another version are refused.
pub const PROTOCOL_VERSION: u32 = 2;

/// The content id of a binary: 128 bits of two independent 64-bit FNV-1a hashes, in hex.
pub fn build_id_of(data: &[u8]) -> String {
    let mut a: u64 = 0xcbf2_9ce4_8422_2325;
    let mut b: u64 = 0x6c62_272e_07bb_0142;
    for &x in data {
        a = (a ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3);
        b = (b ^ u64::from(x))
            .wrapping_mul(0x0000_0100_0000_01b3)
            .rotate_left(7);
    }
    format!("{a:016x}{b:016x}")
}
