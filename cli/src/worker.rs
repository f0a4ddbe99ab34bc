//! `starling worker`: runs a node agent in the foreground.
//!
//! The agent registers this host with the head, starts the worker processes the head asks for
//! (each job's own binary, downloaded from the head), serves this node's objects to other
//! nodes, and keeps the node store under its cap. It runs until SIGINT or SIGTERM (a clean
//! stop, exit code 0) or until the head is lost for longer than `--reconnect-timeout` (exit
//! code 1): a head restarting on the same address gets the node back (its worker processes are
//! stopped, and started again as the new head asks).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use starling_proto::ResourceSet;
use starling_worker::agent::{self, AgentConfig, AgentError};

use crate::parse;

#[derive(Args, Debug)]
pub struct WorkerArgs {
    /// The head to join (host:port).
    #[arg(long, value_name = "ADDR", env = starling_proto::env::HEAD)]
    head: String,
    /// CPUs this node offers [default: the number of cores].
    #[arg(long, value_name = "N", value_parser = parse::amount)]
    num_cpus: Option<f64>,
    /// GPUs this node offers [default: as many as it has ids for: `--gpu-ids`, else the
    /// agent's CUDA_VISIBLE_DEVICES, else what `nvidia-smi -L` lists].
    #[arg(long, value_name = "N", value_parser = parse::amount)]
    num_gpus: Option<f64>,
    /// The ids of this node's GPUs, comma-separated (indexes or GPU-/MIG- uuids): a task
    /// holding GPUs sees its ids in CUDA_VISIBLE_DEVICES [default: detected, as for
    /// --num-gpus; GPUs without one are numbered 0, 1, ..].
    #[arg(long, value_name = "ID,..", value_parser = gpu_id_list)]
    gpu_ids: Option<GpuIds>,
    /// Custom resources this node offers: `name=amount` pairs, comma-separated.
    #[arg(long, value_name = "K=V,..", value_parser = parse::resources)]
    resources: Option<parse::CustomResources>,
    /// The compute pool to join [default: the default pool].
    #[arg(
        long,
        value_name = "NAME",
        default_value = "",
        hide_default_value = true
    )]
    pool: String,
    /// Memory cap of the node's object store; larger contents spill to disk. Accepts K, M, G,
    /// T suffixes [default: 30% of physical memory].
    #[arg(long, value_name = "BYTES", value_parser = parse::bytes)]
    store_cap: Option<u64>,
    /// Where the agent's log and one log per worker process go [default: <runtime dir>/logs,
    /// the runtime dir being $XDG_RUNTIME_DIR/starling or $TMPDIR/starling-<uid>, 0700].
    #[arg(long, value_name = "DIR")]
    log_dir: Option<PathBuf>,
    /// Where job binaries downloaded from the head are cached, one file per build; the 8 most
    /// recently used and those used in the last 10 minutes are kept [default:
    /// <runtime dir>/bin-cache].
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Seconds to keep trying to reach the head before giving up.
    #[arg(long, value_name = "SECS", value_parser = parse::seconds, default_value = "10")]
    connect_timeout: Duration,
    /// Seconds to keep trying to register again after losing the head (a head restarting on
    /// the same address) before exiting with an error.
    #[arg(long, value_name = "SECS", value_parser = parse::seconds, default_value = "60")]
    reconnect_timeout: Duration,
    /// Where this node's object service listens (other nodes and drivers fetch objects from
    /// it) [default: this host's address on its route to the head, any free port; give
    /// 0.0.0.0:PORT to listen on every interface].
    #[arg(long, value_name = "ADDR")]
    object_bind: Option<std::net::SocketAddr>,
    /// Certificate chain (PEM) the object service serves TLS with; required when the head is
    /// reached over TLS (--tls-ca), so the cluster token never crosses the network in clear.
    /// It must be signed by the cluster's CA, for this host's address.
    #[arg(
        long,
        value_name = "PEM",
        env = starling_proto::env::TLS_CERT,
        requires = "tls_key"
    )]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(
        long,
        value_name = "PEM",
        env = starling_proto::env::TLS_KEY,
        requires = "tls_cert"
    )]
    tls_key: Option<PathBuf>,
    /// The session link of a head on this host (its `DATA_DIR/link.sock`, which `starling
    /// head` prints): this node's worker processes open their sessions on that Unix socket
    /// instead of over TCP, which about halves a short task's round trip. A worker process that
    /// cannot use it (another head's, say) says so in its log and uses TCP.
    #[arg(long, value_name = "PATH")]
    link: Option<PathBuf>,
    #[command(flatten)]
    auth: crate::auth::AuthArgs,
}

/// `--gpu-ids`, parsed.
#[derive(Clone, Debug)]
struct GpuIds(Vec<String>);

fn gpu_id_list(s: &str) -> Result<GpuIds, String> {
    agent::gpus::parse_list(s).map(GpuIds)
}

impl WorkerArgs {
    /// The node's resources and the ids of its GPUs.
    fn resources(&self) -> Result<(ResourceSet, Vec<String>)> {
        let cpus = self
            .num_cpus
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()) as f64);
        let (mut ids, given) = match &self.gpu_ids {
            Some(GpuIds(ids)) => (ids.clone(), true),
            None => (agent::gpus::detect(), false),
        };
        let gpus = self.num_gpus.unwrap_or(ids.len() as f64);
        let whole = gpus.ceil() as usize;
        if given && whole > ids.len() {
            anyhow::bail!(
                "--num-gpus {gpus} needs {whole} GPU ids but --gpu-ids gives {}",
                ids.len()
            );
        }
        ids.truncate(whole);
        let mut set = ResourceSet::cpus(cpus).with("GPU", gpus);
        for (name, amount) in self.resources.iter().flat_map(|r| &r.0) {
            set = set.with(name, *amount);
        }
        Ok((set, ids))
    }

    fn config(&self) -> Result<AgentConfig> {
        let (resources, gpu_ids) = self.resources()?;
        let mut config = AgentConfig::new(self.head.clone(), resources);
        config.gpu_ids = gpu_ids;
        config.credentials = self.auth.credentials()?;
        config.object_bind = self.object_bind;
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            config.object_tls = Some(
                starling_proto::security::ServerTls::read(cert, key)
                    .context("cannot read the object service's TLS certificate")?,
            );
        }
        config.reconnect_timeout = self.reconnect_timeout;
        config.log_to_stderr = true;
        config.pool.clone_from(&self.pool);
        if let Some(cap) = self.store_cap {
            config.store_cap_bytes = cap;
        }
        if let Some(dir) = &self.log_dir {
            config.log_dir.clone_from(dir);
        }
        if let Some(dir) = &self.cache_dir {
            config.cache_dir.clone_from(dir);
        }
        config.connect_timeout = self.connect_timeout;
        config.worker_link.clone_from(&self.link);
        Ok(config)
    }
}

pub fn run(args: WorkerArgs) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("starling-agent")
        .enable_all()
        .build()
        .context("cannot start the I/O runtime")?;
    rt.block_on(serve(args))
}

async fn serve(args: WorkerArgs) -> Result<()> {
    let config = args.config()?;
    let (log_dir, resources) = (config.log_dir.clone(), config.resources.clone());
    let gpu_ids = config.gpu_ids.join(",");
    let mut agent = agent::start(config).await.map_err(|e| match e {
        AgentError::HeadUnreachable { addr } => anyhow!(
            "head at {addr} is unreachable: no answer within {:.1}s (is `starling head` \
             running there?)",
            args.connect_timeout.as_secs_f64()
        ),
        AgentError::Unauthenticated { addr, message } => {
            anyhow!("head at {addr} refused this node: {message}")
        }
        other => anyhow::Error::new(other).context("cannot join the cluster"),
    })?;
    eprintln!(
        "node {} joined {}; objects at {}",
        agent.node_id(),
        args.head,
        agent.object_address()
    );
    eprintln!(
        "node {}: resources {resources}{}, pool {}, logs in {}",
        agent.node_id(),
        if gpu_ids.is_empty() {
            String::new()
        } else {
            format!(" (GPU ids {gpu_ids})")
        },
        if args.pool.is_empty() {
            "default"
        } else {
            &args.pool
        },
        log_dir.display()
    );
    let stopped_by = tokio::select! {
        signal = crate::shutdown_signal() => Some(signal?),
        lost = agent.wait() => {
            lost.with_context(|| format!("node {} stopped", agent.node_id()))?;
            None
        }
    };
    let node = agent.node_id();
    match stopped_by {
        Some(signal) => {
            eprintln!("node {node}: {signal}, stopping its worker processes");
            agent.shutdown().await;
        }
        None => eprintln!("node {node}: stopped"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        worker: WorkerArgs,
    }

    fn parse(args: &[&str]) -> Result<WorkerArgs, clap::Error> {
        let argv = ["worker", "--head", "127.0.0.1:1"].iter().chain(args);
        Cli::try_parse_from(argv).map(|c| c.worker)
    }

    #[test]
    fn builds_the_agent_config() {
        let w = parse(&[
            "--num-cpus",
            "2",
            "--num-gpus",
            "0.5",
            "--resources",
            "ssd=1,mem.gb=64",
            "--pool",
            "gpu",
            "--store-cap",
            "1G",
            "--connect-timeout",
            "2.5",
            "--log-dir",
            "/tmp/l",
            "--cache-dir",
            "/tmp/c",
        ])
        .unwrap();
        let c = w.config().unwrap();
        assert_eq!(c.head, "127.0.0.1:1");
        assert_eq!(c.resources.get("CPU"), 2.0);
        assert_eq!(c.resources.get("GPU"), 0.5);
        assert_eq!(c.resources.get("ssd"), 1.0);
        assert_eq!(c.resources.get("mem.gb"), 64.0);
        assert_eq!(c.pool, "gpu");
        assert_eq!(c.store_cap_bytes, 1 << 30);
        assert_eq!(c.connect_timeout, Duration::from_millis(2500));
        assert_eq!(c.log_dir, PathBuf::from("/tmp/l"));
        assert_eq!(c.cache_dir, PathBuf::from("/tmp/c"));
    }

    #[test]
    fn defaults_to_every_core() {
        let c = parse(&[]).unwrap().config().unwrap();
        let cores = std::thread::available_parallelism().unwrap().get() as f64;
        assert_eq!(c.resources.get("CPU"), cores);
        assert_eq!(c.resources.get("GPU"), 0.0);
        assert_eq!(c.pool, "");
    }

    #[test]
    fn refuses_bad_values() {
        for bad in [
            &["--resources", "ssd"][..],
            &["--resources", "ssd=-1"],
            &["--resources", "CPU=2"],
            &["--num-cpus", "-1"],
            &["--store-cap", "lots"],
            &["--connect-timeout", "0"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
