//! Starling's wire vocabulary: ids, resource sets, task specs and failures.
//!
//! This is the only crate that knows protobuf. The generated code lives in the private [`pb`]
//! module; every other crate works with the hand-written domain types below, which convert to
//! and from their protobuf form through `From` impls (see [`wire`]). The head and node agents
//! move task arguments and results as opaque bytes: nothing here knows a user type.

mod ids;
mod resources;
mod task;
pub mod wire;

pub use ids::{JobId, NodeId, ObjectId, TaskId, WorkerId};
pub use resources::{ResourceSet, RESOURCE_SCALE};
pub use task::{
    FailureKind, FunctionName, RemoteError, SchedulingStrategy, TaskArg, TaskFailure, TaskSpec,
};

/// Generated protobuf messages and gRPC stubs. Private: other crates reach them through [`pb`].
#[allow(clippy::all, missing_docs, rust_2018_idioms, unreachable_pub)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/starling.v1.rs"));
}

/// The cluster protocol's messages and gRPC stubs, for the crates that implement the head, the
/// node agent and the client. Never re-exported by the `starling` API crate.
pub mod pb {
    pub use crate::generated::*;
}

/// The protocol version spoken by this build; peers with another version are refused.
pub const PROTOCOL_VERSION: u32 = 1;
