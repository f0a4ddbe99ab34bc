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
pub(crate) mod worker;

/// Environment variables set by a node agent for the worker processes it starts.
pub(crate) mod env {
    pub const HEAD: &str = "STARLING_WORKER_HEAD";
    pub const NODE: &str = "STARLING_NODE_ID";
    pub const JOB: &str = "STARLING_JOB_ID";
    pub const STORE_DIR: &str = "STARLING_STORE_DIR";
    pub const SPILL_DIR: &str = "STARLING_SPILL_DIR";
    pub const GPU_IDS: &str = "STARLING_GPU_IDS";
    pub const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";
}
