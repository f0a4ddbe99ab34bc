//! The cluster backend: this process talks to a head over gRPC.
//!
//! A [`client::Client`] holds one `Session` stream to the head. Drivers submit tasks, put values
//! and wait for results through it; worker processes (started by a node agent from the job's own
//! binary, see [`worker`]) also receive tasks on it and report their results. Values arrive
//! pushed by the head (the submitter of a task is subscribed to its result) and land in a local
//! [`ObjectStore`](starling_worker::store::ObjectStore), where waits find them.
//!
//! [`local`] starts a whole cluster inside this process: a head, a node agent, and worker
//! processes re-executed from this binary; that is what `starling::init()` does.

pub(crate) mod client;
pub(crate) mod local;
pub(crate) mod objects;
pub(crate) mod slabs;
pub(crate) mod worker;

/// Environment variables set by a node agent for the worker processes it starts.
pub(crate) use starling_proto::env;
