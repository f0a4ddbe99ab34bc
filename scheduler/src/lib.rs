//! The Starling scheduler: one state machine, shared by every way of running the engine.
//!
//! [`Core`] owns all scheduling state: the task table with dependency tracking, per-node and
//! per-worker resource accounting, ready queues grouped by scheduling class, the infeasible set,
//! and the object directory with reference counts. Handlers in [`reactor`] (`on_submit`,
//! `on_task_finished`, ...) mutate it and talk to the outside only through the [`Transport`]
//! trait; they never do I/O, block or allocate threads. The in-process runtime drives them under
//! a lock with in-memory queues; the head node (the `starling-head` crate) drives them from gRPC
//! streams; tests drive them with [`testing::RecordingTransport`].
//!
//! This crate depends on `starling-proto` alone: no async runtime, RPC or protobuf crate, so
//! the absence of I/O here is a property of the crate graph, not a convention.
//!
//! Scheduling is per batch, not per event: handlers only enqueue work, and [`reactor::schedule`]
//! places everything placeable in one pass. A driver calls it once after each batch of events.

pub mod actors;
mod core;
pub mod events;
mod gpus;
pub mod jobs;
mod objects;
mod placement;
pub mod reactor;
pub mod testing;
mod transport;

pub use crate::core::{Core, CoreStats, NodeInfo, NodeUse, Pool, TaskState};
pub use crate::objects::ObjectState;
pub use crate::transport::{TaskOutcome, Transport};
pub use starling_proto as proto;
