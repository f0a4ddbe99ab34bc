//! How to run a node agent: [`AgentConfig`] and its defaults.

use super::*;

/// How to run a node agent.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// The head: `http://host:port` or `host:port`.
    pub head: String,
    /// The resources this node offers (CPU, GPU, custom).
    pub resources: ResourceSet,
    /// The ids of its GPUs, one per GPU in `resources` (fewer: the rest are numbered on;
    /// see [`gpus::detect`]).
    pub gpu_ids: Vec<String>,
    /// The compute pool to join; `""` is the default pool.
    pub pool: String,
    /// Where objects live in memory (a tmpfs such as `/dev/shm/...`). Created if missing, and
    /// then removed with its contents when the agent stops.
    pub store_dir: PathBuf,
    /// Where objects go when the store is over its cap (disk). Created if missing, and then
    /// removed with its contents when the agent stops.
    pub spill_dir: PathBuf,
    /// The memory cap of `store_dir`, in bytes.
    pub store_cap_bytes: u64,
    /// One log file per worker process (`worker-J<job>-<pid>.log`) and the agent's own
    /// (`agent-N<node>.log`); created if missing.
    pub log_dir: PathBuf,
    /// `Some(path)`: run this binary for every job (the local cluster runs the driver's own
    /// executable). `None`: download each job's binary from the head by build id.
    pub worker_binary: Option<PathBuf>,
    /// The head's session link on this host (`starling_proto::link`), handed to worker
    /// processes: their sessions go through it instead of gRPC. `None`: gRPC.
    pub worker_link: Option<PathBuf>,
    /// Where downloaded binaries are kept (`<cache_dir>/<build>`).
    pub cache_dir: PathBuf,
    /// Where the object service listens (port 0: any free port). `None`: the address this host
    /// reaches the head from, any port, so it listens on one interface, not all of them.
    pub object_bind: Option<SocketAddr>,
    /// The object service's TLS certificate and key. Required when the head is reached over
    /// TLS (`credentials` has a CA), so the cluster token never crosses the network in clear;
    /// the node then advertises `https://` and fetchers verify it against the same CA.
    pub object_tls: Option<starling_proto::security::ServerTls>,
    /// How often to send a heartbeat (and measure the store).
    pub heartbeat: Duration,
    /// How long to keep trying to reach and register with the head.
    pub connect_timeout: Duration,
    /// After losing the head, how long to keep trying to register again (a restarted head on
    /// the same address) before the agent stops with [`AgentError::HeadLost`].
    pub reconnect_timeout: Duration,
    /// The cluster token (and TLS trust) presented to the head; the token is also required
    /// by this node's object service and passed on to worker processes and job entrypoints.
    pub credentials: Credentials,
    /// Also write the agent's log lines to stderr (a foreground `starling worker`).
    pub log_to_stderr: bool,
}

impl AgentConfig {
    /// A configuration with defaults for everything but the head and the resources: a fresh
    /// store under this user's `/dev/shm/starling-<uid>` (see [`starling_proto::dirs`]), spill,
    /// logs and binary cache under this user's runtime directory, a cap of 30% of physical
    /// memory, the object service on any port of all interfaces, a 1 s heartbeat, a 10 s
    /// connect timeout, a 60 s reconnect timeout, and no credentials.
    pub fn new(head: impl Into<String>, resources: ResourceSet) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let unique = format!(
            "{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let tmp = starling_proto::dirs::runtime_root();
        let store_root = starling_proto::dirs::shm_root();
        AgentConfig {
            head: head.into(),
            resources,
            gpu_ids: Vec::new(),
            pool: String::new(),
            store_dir: store_root.join(format!("store-{unique}")),
            spill_dir: tmp.join(format!("spill-{unique}")),
            store_cap_bytes: default_store_cap(),
            log_dir: tmp.join("logs"),
            worker_binary: None,
            worker_link: None,
            cache_dir: tmp.join("bin-cache"),
            object_bind: None,
            object_tls: None,
            heartbeat: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(10),
            reconnect_timeout: Duration::from_secs(60),
            credentials: Credentials::default(),
            log_to_stderr: false,
        }
    }
}

/// 30% of `MemTotal`, or 2 GiB where `/proc/meminfo` cannot be read.
pub(super) fn default_store_cap() -> u64 {
    let total_kib = std::fs::read_to_string("/proc/meminfo").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
    });
    total_kib.map_or(2 << 30, |kib| kib * 1024 / 10 * 3)
}
