//! The local cluster: a head and a node agent inside this process, and worker processes
//! re-executed from this binary. `starling::init()` starts one; nothing to start by hand.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use starling_head::{self as head, HeadConfig, HeadHandle};
use starling_proto::security::Credentials;
use starling_worker::agent::{self, AgentConfig, AgentHandle};

use super::client::{self, Client, Owned};
use super::objects::LocalStore;
use crate::error::{Error, Result};
use crate::runtime::Config;

struct LocalCluster {
    head: Mutex<Option<HeadHandle>>,
    agent: Mutex<Option<AgentHandle>>,
    handle: tokio::runtime::Handle,
    dirs: Vec<PathBuf>,
}

impl Owned for LocalCluster {
    fn stop(&self) {
        let agent = self.agent.lock().take();
        let head = self.head.lock().take();
        let handle = self.handle.clone();
        // Block on a helper thread: `stop` may be called from any thread.
        let _ = std::thread::spawn(move || {
            handle.block_on(async {
                if let Some(a) = agent {
                    a.shutdown().await;
                }
                if let Some(h) = head {
                    h.shutdown().await;
                }
            })
        })
        .join();
        for d in &self.dirs {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

/// Starts a local cluster with `config.threads` worker processes and connects to it.
pub(crate) fn start(config: &Config) -> Result<Arc<Client>> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let unique = format!(
        "{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    // This user's private runtime directory (0700; refused if another user could get in).
    let root = starling_proto::dirs::ensure_dir(&starling_proto::dirs::runtime_root())
        .map_err(|e| Error::Startup(e.to_string()))?;
    sweep_stale(&root);
    let data = root.join(format!("local-{unique}"));
    let exe = std::env::current_exe()
        .map_err(|e| Error::Startup(format!("cannot find this executable: {e}")))?;
    let rt = client::runtime()?;
    let loopback = |port| SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
    let head = rt
        .block_on(head::serve(HeadConfig {
            max_live_tasks: config.max_live_tasks,
            task_events_bytes: config.task_events_bytes,
            // Worker processes here open their sessions on the link, not gRPC.
            link: true,
            // One node, in this process: an object cannot be lost while anything that refers to
            // it lives, so nothing would ever be made again from lineage.
            lineage: false,
            ..HeadConfig::new(loopback(0), data.join("head"))
        }))
        .map_err(|e| Error::Startup(chain(&e)))?;
    let addr = head.addr().to_string();
    // The embedded head made its own token; the agent, its worker processes and this driver
    // present it, so nothing is asked of the user.
    let creds = Credentials {
        token: Some(head.token().clone()),
        tls_ca: None,
    };
    // The host's GPUs, unless the program declared its own (then they are numbered 0..n where
    // the host shows fewer).
    let mut resources = config.resources.clone();
    let mut gpu_ids = agent::gpus::detect();
    if resources.units("GPU") == 0 {
        resources.set_units("GPU", gpu_ids.len() as u64 * starling_proto::RESOURCE_SCALE);
    }
    gpu_ids.truncate(
        resources
            .units("GPU")
            .div_ceil(starling_proto::RESOURCE_SCALE) as usize,
    );
    let mut ac = AgentConfig::new(addr.clone(), resources);
    ac.gpu_ids = gpu_ids;
    ac.credentials = creds.clone();
    // The head lives and dies with this process: nothing to wait for once it is gone.
    ac.reconnect_timeout = std::time::Duration::ZERO;
    ac.worker_binary = Some(exe);
    ac.worker_link = head.link_path().map(Path::to_path_buf);
    ac.object_bind = Some(loopback(0));
    ac.log_dir = data.join("logs");
    ac.spill_dir = data.join("spill");
    ac.cache_dir = data.join("bin-cache");
    let store_dir = ac.store_dir.clone();
    let spill_dir = ac.spill_dir.clone();
    let agent = rt
        .block_on(agent::start(ac))
        .map_err(|e| Error::Startup(chain(&e)))?;
    let local = LocalStore {
        node: agent.node_id().0,
        dir: store_dir.clone(),
        spill_dir,
    };
    // The driver talks to its in-process head by direct calls; workers use gRPC.
    let client = Client::connect_local(
        &addr,
        creds,
        head.service().clone(),
        client::local_driver_hello(),
        Some(local),
        rt.handle().clone(),
    )?;
    client.set_owned(Box::new(LocalCluster {
        head: Mutex::new(Some(head)),
        agent: Mutex::new(Some(agent)),
        handle: rt.handle().clone(),
        dirs: vec![data, store_dir],
    }));
    client.set_own_runtime(rt);
    Ok(client)
}

/// Removes the directories of local clusters whose process is gone (a driver that exited without
/// `shutdown` leaves its store behind; the next one cleans up).
fn sweep_stale(root: &Path) {
    let dirs = [root.to_path_buf(), starling_proto::dirs::shm_root()];
    for dir in dirs {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix("local-")
                .or_else(|| name.strip_prefix("store-"))
                .and_then(|rest| rest.split('-').next())
                .and_then(|p| p.parse::<u32>().ok());
            if let Some(pid) = pid {
                if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
    }
}

/// An error and its causes, as one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}
