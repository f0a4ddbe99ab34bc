//! Every environment variable Starling reads or sets, named once.
//!
//! Node agents set the worker-process and entrypoint variables for the processes they start;
//! drivers, the CLI and worker processes read them. A name used by two crates is defined here
//! and nowhere else.

/// A driver's head address (`host:port`): `Config::default()` joins it instead of starting a
/// local cluster, and the CLI's `--head` defaults to it. Set for a job's entrypoint.
pub const HEAD: &str = "STARLING_HEAD";
/// The cluster token, or a job's credential in a job's processes.
pub const TOKEN: &str = "STARLING_TOKEN";
/// A PEM file of CA certificates to trust for TLS.
pub const TLS_CA: &str = "STARLING_TLS_CA";
/// A node agent's TLS certificate chain for its object service (PEM).
pub const TLS_CERT: &str = "STARLING_TLS_CERT";
/// The private key of [`TLS_CERT`] (PEM).
pub const TLS_KEY: &str = "STARLING_TLS_KEY";

/// The head address a worker process serves, exactly as its agent was configured with it;
/// a binary enters worker mode when it sees it.
pub const WORKER_HEAD: &str = "STARLING_WORKER_HEAD";
/// The head's session link (a Unix socket path, see `starling_proto::link`), set for worker
/// processes on the head's own host: their session goes through it instead of gRPC.
pub const WORKER_LINK: &str = "STARLING_WORKER_LINK";
/// The pid of the node agent that started a worker process, in decimal: the worker makes
/// itself die with it (`PR_SET_PDEATHSIG`) as it starts, so the agent can start it without
/// running code between fork and exec, which lets the process be spawned without copying the
/// agent's page tables (`posix_spawn`).
pub const AGENT_PID: &str = "STARLING_AGENT_PID";
/// The node id, in decimal (`3`, not `N3`).
pub const NODE_ID: &str = "STARLING_NODE_ID";
/// The job id, in decimal.
pub const JOB_ID: &str = "STARLING_JOB_ID";
/// The id of the task environment (`env_vars`) a worker process was started with, in decimal
/// (`0`: none); it tells the head which of the job's worker pools the process serves.
pub const WORKER_ENV: &str = "STARLING_WORKER_ENV";
/// The node's object store directory (absolute); an object is the file `<dir>/<id>`.
pub const STORE_DIR: &str = "STARLING_STORE_DIR";
/// Where objects over the store's cap are moved (absolute); same file names.
pub const SPILL_DIR: &str = "STARLING_SPILL_DIR";
/// The node's object service, `host:port`.
pub const OBJECT_ADDR: &str = "STARLING_OBJECT_ADDR";
/// The ids of the GPUs the running task holds, joined with commas (set per task by the
/// worker process; empty at start on a node with GPUs).
pub const GPU_IDS: &str = "STARLING_GPU_IDS";
/// What CUDA reads to know which GPUs it may use: the same ids as [`GPU_IDS`].
pub const CUDA_VISIBLE_DEVICES: &str = "CUDA_VISIBLE_DEVICES";

/// A multi-node job instance's index (0 for the entrypoint).
pub const INSTANCE_ID: &str = "STARLING_INSTANCE_ID";
/// How many instances the job has.
pub const NUM_INSTANCES: &str = "STARLING_NUM_INSTANCES";
/// Names the `#[starling::job]` function a payload runs instead of `main`.
pub const JOB_FUNCTION: &str = "STARLING_JOB_FUNCTION";
/// A file holding the encoded input of a `#[starling::job]` function.
pub const JOB_INPUT: &str = "STARLING_JOB_INPUT";
