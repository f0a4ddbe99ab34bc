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
//! let y = add::remote(&x, 10); // runs once x is ready
//! assert_eq!(starling::get(&y)?, 13);
//! # Ok(()) }
//! ```
//!
//! # Three ways to run, one engine
//! | mode | how | for |
//! |---|---|---|
//! | local cluster (the default) | [`init()`]: a head and a node agent in this process, one worker process per core re-executed from this binary | `cargo run` with nothing to start by hand |
//! | cluster | `starling head`, `starling worker --head ADDR` on each host; [`init_with`]`(`[`Config::connect`]`(addr))` | many machines |
//! | in-process | [`Runtime::in_process`]`(threads)`: scheduler and executors on threads of this process | tests, embedding, the fastest path |
//!
//! The same binary is the driver and the worker: a worker process runs your program in worker
//! mode (entered before `main`), so every `#[remote]` function it may be asked to run is
//! compiled into it. That holds for examples and `cargo test` harnesses too.
//!
//! ```no_run
//! #[starling::remote]
//! fn square(x: u64) -> u64 {
//!     x * x
//! }
//!
//! fn main() -> Result<(), starling::Error> {
//!     starling::init()?; // a local cluster; `init_with(Config::connect("host:7000"))` joins one
//!     let refs: Vec<_> = (0..100).map(square::remote).collect();
//!     let total: u64 = starling::get_all(&refs)?.into_iter().sum();
//!     println!("{total}");
//!     Ok(())
//! }
//! ```
//!
//! # Tasks and their options
//! Each `#[remote]` function gets `options()`: resources (CPUs, GPUs, custom), retries, and
//! placement. A task runs where its resources are free; one no node can ever hold waits, and
//! [`pending_reason`] says why.
//!
//! ```
//! #[starling::remote]
//! fn train(epochs: u32) -> Result<f64, String> {
//!     if epochs == 0 {
//!         return Err("no epochs".into()); // an `Err` is a task error, like a panic
//!     }
//!     Ok(1.0 / f64::from(epochs))
//! }
//!
//! # fn main() -> Result<(), starling::Error> {
//! # let rt = starling::Runtime::in_process(2)?;
//! # let _guard = rt.enter();
//! let loss = train::options().num_cpus(2.0).max_retries(0).remote(4);
//! assert_eq!(starling::get(&loss)?, 0.25);
//!
//! let failed = train::remote(0);
//! match starling::get(&failed) {
//!     Err(starling::Error::TaskFailed { cause, .. }) => assert!(cause.message.contains("no epochs")),
//!     other => panic!("expected a task error, got {other:?}"),
//! }
//! # Ok(()) }
//! ```
//!
//! # Objects
//! [`put`] stores a value once and hands out a ref that any number of tasks can take; [`wait`]
//! returns which refs are ready, in input order; [`cancel`] stops a task that has not finished.
//! Refs are counted: an object is freed when its last `ObjectRef` drops and no pending task
//! needs it. Values over 100 KiB stay in the object store of the node that made them and are
//! mapped, not copied, by readers on that host; use [`Bytes`] for large binary values.
//!
//! ```
//! # #[starling::remote]
//! # fn add(a: i64, b: i64) -> i64 { a + b }
//! # fn main() -> Result<(), starling::Error> {
//! # let rt = starling::Runtime::in_process(2)?;
//! # let _guard = rt.enter();
//! let base = starling::put(100_i64)?;
//! let refs: Vec<_> = (0..4).map(|i| add::remote(&base, i)).collect();
//! let (ready, _rest) = starling::wait(&refs, refs.len(), Some(std::time::Duration::from_secs(10)))?;
//! assert_eq!(ready.len(), 4);
//! assert_eq!(starling::get_all(&refs)?, vec![100, 101, 102, 103]);
//! # Ok(()) }
//! ```
//!
//! # Nested tasks
//! A task may submit tasks and `get` their results: a task blocked in `get` lends its CPUs back,
//! so nested graphs never deadlock, whatever their depth. That holds for threads the task
//! spawns too (`std::thread::spawn`, `std::thread::scope`): in a worker process any thread's
//! wait lends the task's CPUs; in-process, any thread that did not start or enter the runtime
//! lends a running task's CPUs while it waits (a driver's own spawned threads cannot be told
//! apart there, so they lend too).
//!
//! ```
//! #[starling::remote]
//! fn fib(n: u64) -> u64 {
//!     if n < 2 {
//!         return n;
//!     }
//!     let (a, b) = (fib::remote(n - 1), fib::remote(n - 2));
//!     starling::get(&a).unwrap() + starling::get(&b).unwrap()
//! }
//!
//! # fn main() -> Result<(), starling::Error> {
//! # let rt = starling::Runtime::in_process(1)?;
//! # let _guard = rt.enter();
//! assert_eq!(starling::get(&fib::remote(10))?, 55);
//! # Ok(()) }
//! ```
//!
//! # Errors
//! Every failure is a typed [`Error`]: a panic or `Err` in a task is [`Error::TaskFailed`]
//! (type, message, backtrace, task, attempt), and tasks that took its result fail with
//! [`Error::UpstreamFailed`], whose chain leads back to it; lost objects, lost heads, timeouts,
//! cancellation and refused credentials have variants of their own. No call waits forever.
//!
//! # Multi-node jobs
//! [`jobs`] submits a payload (a binary, a directory with an entrypoint, or one
//! `#[starling::job]` function) to a compute pool, where it runs across `target_instances` nodes
//! as one job with a status, logs per instance, a result and cancel; the `starling job` command
//! does the same from a shell.
//!
//! This crate is the API boundary: nothing public here names a protobuf or gRPC type.

mod actor;
mod api;
mod bytes;
mod cluster;
mod codec;
mod error;
mod job_fn;
pub mod jobs;
mod object_ref;
mod options;
pub mod progress;
mod registry;
mod runtime;
pub mod state;
mod stream;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

pub use actor::{actors, get_actor, kill, Actor, ActorHandle, ActorInfo, ActorOptions};
pub use api::{
    cancel, get, get_all, get_all_timeout, get_timeout, nodes, pending_reason, put, put_with, wait,
};
pub use bytes::Bytes;
pub use error::{Error, RemoteError, Result};
pub use object_ref::{IntoArg, ObjectRef};
pub use options::TaskOptions;
pub use runtime::exec::{gpu_ids, is_cancelled};
pub use runtime::{current, init, init_with, Config, EnterGuard, NodeInfo, Runtime, RuntimeStats};
pub use starling_macros::{actor, job, remote};
/// Private per-user directories: where Starling keeps its files on a host (0700, this user's
/// alone), and helpers for a payload that wants its own files kept the same way.
pub use starling_proto::dirs;
pub use starling_proto::{
    JobId, NodeId, ObjectId, ResourceSet, SchedulingStrategy, TaskId, WorkerId,
};
pub use stream::{Generator, ObjectRefGenerator};
