//! Starling: a distributed task-execution engine for Rust, in the style of Ray.
//!
//! Mark a function `#[starling::remote]`; calling `f::remote(args)` turns the call into a task
//! that the scheduler queues and runs on an executor, and gives back an [`ObjectRef`] that
//! resolves through [`get`] (or `.await`). Arguments may be values or `ObjectRef`s of earlier
//! tasks: the task runs when they are ready.
//!
//! ```
//! #[starling::remote]
//! fn add(a: i64, b: i64) -> i64 {
//!     a + b
//! }
//!
//! # fn main() -> Result<(), starling::Error> {
//! let rt = starling::Runtime::in_process(2)?;
//! let _guard = rt.enter();
//! let x = add::remote(1, 2);
//! let y = add::remote(&x, 10);
//! assert_eq!(starling::get(&y)?, 13);
//! # Ok(()) }
//! ```
//!
//! This crate is the API boundary: nothing public here names a protobuf or gRPC type.

mod api;
mod bytes;
mod cluster;
mod codec;
mod error;
mod job_fn;
pub mod jobs;
mod object_ref;
mod options;
mod registry;
mod runtime;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use api::{
    cancel, get, get_all, get_all_timeout, get_timeout, nodes, pending_reason, put, wait,
};
pub use bytes::Bytes;
pub use error::{Error, RemoteError, Result};
pub use object_ref::{IntoArg, ObjectRef};
pub use options::TaskOptions;
pub use runtime::exec::{gpu_ids, is_cancelled};
pub use runtime::{current, init, init_with, Config, EnterGuard, NodeInfo, Runtime, RuntimeStats};
pub use starling_macros::{job, remote};
/// Private per-user directories: where Starling keeps its files on a host (0700, this user's
/// alone), and helpers for a payload that wants its own files kept the same way.
pub use starling_proto::dirs;
pub use starling_proto::{
    JobId, NodeId, ObjectId, ResourceSet, SchedulingStrategy, TaskId, WorkerId,
};
