//! `starling head`: runs the head (the scheduler behind gRPC) in the foreground.
//!
//! The head requires the cluster token on every call: it reuses `DATA_DIR/token` or writes a
//! fresh random one there (mode 0600) at start; nodes it launches get it in their environment.
//!
//! The first line of stdout is the address to connect to and nothing else, flushed at once, so
//! scripts and tests can start a head on port 0 and read where it listens; everything meant for
//! people goes to stderr. The head runs until SIGINT or SIGTERM (then it closes every stream, so
//! node agents and drivers see it leave) or until the process is killed.

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use starling_head::{self as head, HeadConfig};
use starling_proto::security::{ServerTls, Token, TLS_CA_ENV, TOKEN_ENV, TOKEN_FILE};

/// The port `starling head` listens on by default (and the one the README uses).
pub const DEFAULT_PORT: u16 = 6380;

#[derive(Args, Debug)]
pub struct HeadArgs {
    /// Port to listen on; 0 picks a free one (read it from the first line of stdout).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    port: u16,
    /// IP address to listen on; 0.0.0.0 accepts node agents and drivers from other hosts.
    #[arg(long, value_name = "ADDR", default_value_t = IpAddr::V4(Ipv4Addr::LOCALHOST))]
    bind: IpAddr,
    /// Where the head keeps uploaded binaries [default: <runtime dir>/head-<port>, the runtime
    /// dir being $XDG_RUNTIME_DIR/starling or $TMPDIR/starling-<uid>, 0700; with
    /// --port 0, a directory of this process that is removed when the head stops].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Seconds without a heartbeat (node agents send one a second) after which a node is
    /// declared lost: its running tasks are retried elsewhere and the objects only it held are
    /// made again from their lineage. A node whose connection drops is lost at once.
    #[arg(long, value_name = "SECS", value_parser = parse_heartbeat_timeout, default_value = "5")]
    heartbeat_timeout: Duration,
    /// Seconds a job that has --min-instances free nodes, but not --target-instances, waits
    /// for more before it starts with what it has.
    #[arg(long, value_name = "SECS", value_parser = crate::parse::seconds, default_value = "2")]
    start_grace: Duration,
    /// Serve TLS with this certificate chain (PEM); clients then need --tls-ca or
    /// STARLING_TLS_CA.
    #[arg(long, value_name = "PEM", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "PEM", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Memory the head keeps values in (small task results, remote drivers' puts); past it
    /// they go to DATA_DIR/values. Accepts K, M, G, T suffixes.
    #[arg(long, value_name = "BYTES", value_parser = crate::parse::bytes, default_value = "2G")]
    value_budget: u64,
    /// Tasks the head holds at once (queued, waiting for arguments or running) before a
    /// driver that submits more waits for room; worker processes' nested tasks never wait.
    #[arg(long, value_name = "N", default_value_t = starling_head::DEFAULT_MAX_LIVE_TASKS)]
    max_live_tasks: usize,
    /// Memory for task events (one record per task attempt, read by `starling list tasks`,
    /// `summary` and `timeline`); past it the oldest are dropped. 0 keeps none. Accepts K, M,
    /// G suffixes.
    #[arg(long, value_name = "BYTES", value_parser = crate::parse::bytes, default_value = "16M")]
    task_events: u64,
    /// Port of the web dashboard and Prometheus `/metrics` (on --bind, behind the cluster
    /// token; TLS with --tls-cert); 0 picks a free one. Its URL is logged and written to
    /// DATA_DIR/dashboard.
    #[arg(long, value_name = "PORT", default_value_t = starling_head::DEFAULT_DASHBOARD_PORT)]
    dashboard_port: u16,
    /// Serve no dashboard or metrics.
    #[arg(long, conflicts_with = "dashboard_port")]
    no_dashboard: bool,
}

fn parse_heartbeat_timeout(s: &str) -> Result<Duration, String> {
    let t = crate::parse::seconds(s)?;
    if t < Duration::from_secs(2) {
        return Err(format!(
            "{s} s is too short: node agents send a heartbeat every second (use 2 or more)"
        ));
    }
    Ok(t)
}

pub fn run(args: HeadArgs) -> Result<()> {
    let (data_dir, scratch) = match args.data_dir.clone() {
        Some(dir) => (dir, false),
        None => {
            let root = starling_proto::dirs::runtime_root();
            if args.port == 0 {
                // A fresh port every run: nothing worth keeping for the next head.
                let dir = root.join(format!("head-0-{}", std::process::id()));
                (dir, true)
            } else {
                (root.join(format!("head-{}", args.port)), false)
            }
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name("starling-head")
        .enable_all()
        .build()
        .context("cannot start the I/O runtime")?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            Some(ServerTls::read(cert, key).context("cannot read the TLS certificate or key")?)
        }
        _ => None,
    };
    // Nodes this head launches trust what its clients trust, or its own certificate (a
    // self-signed certificate is its own CA).
    let launch_ca = std::env::var_os(TLS_CA_ENV)
        .map(PathBuf::from)
        .or_else(|| args.tls_cert.clone());
    let outcome = rt.block_on(serve(
        &args,
        data_dir.clone(),
        tls.map(|t| {
            let cert = (
                args.tls_cert.clone().unwrap_or_default(),
                args.tls_key.clone().unwrap_or_default(),
            );
            (t, launch_ca, cert)
        }),
    ));
    if scratch {
        let _ = std::fs::remove_dir_all(&data_dir);
    }
    outcome
}

async fn serve(
    args: &HeadArgs,
    data_dir: PathBuf,
    tls: Option<(ServerTls, Option<PathBuf>, (PathBuf, PathBuf))>,
) -> Result<()> {
    let bind = SocketAddr::new(args.bind, args.port);
    let mut config = HeadConfig::new(bind, data_dir.clone());
    config.value_budget = args.value_budget;
    config.max_live_tasks = args.max_live_tasks;
    config.task_events_bytes = args.task_events as usize;
    // Worker processes of agents on this host may open their sessions on the link.
    config.link = true;
    config.dashboard =
        (!args.no_dashboard).then(|| SocketAddr::new(args.bind, args.dashboard_port));
    config.heartbeat_timeout = args.heartbeat_timeout;
    config.start_grace = args.start_grace;
    let token = Token::load_or_create(&data_dir).context("cannot set up the cluster token")?;
    let token_path = data_dir.join(TOKEN_FILE);
    config.token = Some(token.clone());
    config.token_hint = format!(
        "pass --token-file {} or set {TOKEN_ENV}",
        token_path.display()
    );
    let (tls, launch_ca, launch_cert) = match tls {
        Some((t, ca, cert)) => (Some(t), ca, Some(cert)),
        None => (None, None, None),
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    config.tls = tls;
    let launcher = std::sync::Arc::new(LocalLauncher::new(
        data_dir.join("launched"),
        token,
        launch_ca,
        launch_cert,
    )?);
    config.launcher = Some(launcher.clone());
    let mut handle = head::serve(config).await.context("cannot start the head")?;
    let addr = handle.addr();
    let connect = connect_address(addr);
    if let Some(link) = handle.link_path() {
        let _ = launcher.link.set(link.to_path_buf());
    }
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{connect}")
            .and_then(|()| out.flush())
            .context("cannot write the address to stdout")?;
    }
    eprintln!(
        "starling head listening on {addr} ({scheme}, data in {}); join with `starling worker \
         --head {connect} --token-file {}`, drive with STARLING_HEAD={connect} and \
         {TOKEN_ENV}=$(cat {}); stop with Ctrl-C",
        data_dir.display(),
        token_path.display(),
        token_path.display()
    );
    if let Some(link) = handle.link_path() {
        eprintln!(
            "agents on this host: add `--link {}` (worker sessions on a Unix socket, not TCP)",
            link.display()
        );
    }
    if let Some(d) = handle.dashboard_addr() {
        let web = if scheme == "https" { "https" } else { "http" };
        eprintln!(
            "dashboard at {web}://{d}/ and Prometheus metrics at {web}://{d}/metrics (sign in \
             with the cluster token: {})",
            token_path.display()
        );
    }
    let stopped_by = tokio::select! {
        signal = crate::shutdown_signal() => Some(signal?),
        () = handle.wait() => None,
    };
    match stopped_by {
        Some(signal) => {
            eprintln!("starling head: {signal}, shutting down");
            handle.shutdown().await;
            launcher.stop_all();
            Ok(())
        }
        None => anyhow::bail!("the head's server on {addr} stopped unexpectedly"),
    }
}

/// Starts the nodes of launched pools as `starling worker` processes on this machine (this very
/// executable), each with its own log file under `dir`. Every node it started is stopped when
/// the head stops (or when the launcher is dropped).
struct LocalLauncher {
    exe: PathBuf,
    dir: PathBuf,
    /// Passed to every node it starts.
    token: Token,
    tls_ca: Option<PathBuf>,
    /// The head's own certificate and key: nodes it starts on its host serve objects with it.
    tls_cert: Option<(PathBuf, PathBuf)>,
    children: Mutex<HashMap<u32, std::process::Child>>,
    next: std::sync::atomic::AtomicU64,
    /// The head's session link: the nodes it starts are on its host.
    link: std::sync::OnceLock<PathBuf>,
}

impl LocalLauncher {
    fn new(
        dir: PathBuf,
        token: Token,
        tls_ca: Option<PathBuf>,
        tls_cert: Option<(PathBuf, PathBuf)>,
    ) -> Result<Self> {
        let exe = std::env::current_exe().context("cannot find the starling executable")?;
        Ok(LocalLauncher {
            exe,
            dir,
            token,
            tls_ca,
            tls_cert,
            children: Mutex::new(HashMap::new()),
            next: std::sync::atomic::AtomicU64::new(0),
            link: std::sync::OnceLock::new(),
        })
    }

    fn stop_all(&self) {
        let children: Vec<_> = self
            .children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .collect();
        for (_, mut c) in children {
            terminate(&mut c);
        }
    }
}

/// SIGTERM (the agent stops its workers and leaves), then SIGKILL if it lingers.
fn terminate(c: &mut std::process::Child) {
    // SAFETY: kill(2) on our own child's pid; it touches no memory.
    unsafe {
        libc::kill(c.id() as i32, libc::SIGTERM);
    }
    for _ in 0..50 {
        if matches!(c.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = c.kill();
    let _ = c.wait();
}

impl head::Launcher for LocalLauncher {
    fn launch(&self, head: &str, pool: &starling_proto::jobs::PoolSpec) -> Result<u32, String> {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = self.dir.join(format!("{}-{n}", pool.name));
        starling_proto::dirs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let log = starling_proto::dirs::create_file(&dir.join("agent.out"))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let err = log.try_clone().map_err(|e| e.to_string())?;
        let mut cmd = std::process::Command::new(&self.exe);
        cmd.arg("worker")
            .arg("--head")
            .arg(head)
            .arg("--pool")
            .arg(&pool.name)
            .arg("--log-dir")
            .arg(dir.join("logs"))
            .env_remove(starling_proto::env::WORKER_HEAD)
            .env_remove(starling_proto::env::WORKER_LINK)
            // The environment, not the command line: other users can read `ps`.
            .env(TOKEN_ENV, self.token.expose())
            .stdin(std::process::Stdio::null())
            .stdout(log)
            .stderr(err);
        if let Some(link) = self.link.get() {
            cmd.arg("--link").arg(link);
        }
        if let Some(ca) = &self.tls_ca {
            cmd.env(TLS_CA_ENV, ca);
        }
        if let Some((cert, key)) = &self.tls_cert {
            cmd.env(starling_proto::env::TLS_CERT, cert)
                .env(starling_proto::env::TLS_KEY, key);
        }
        if pool.num_cpus_per_node > 0 {
            cmd.arg("--num-cpus")
                .arg(pool.num_cpus_per_node.to_string());
        }
        let child = cmd
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.exe.display()))?;
        let pid = child.id();
        eprintln!(
            "starling head: started node agent pid {pid} for pool {}",
            pool.name
        );
        self.children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pid, child);
        Ok(pid)
    }

    fn stop(&self, pid: u32) {
        let child = self
            .children
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&pid);
        if let Some(mut c) = child {
            eprintln!("starling head: stopping idle node agent pid {pid}");
            std::thread::spawn(move || terminate(&mut c));
        }
    }
}

impl Drop for LocalLauncher {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// The address clients on this host should dial: the bound one, with an unspecified IP
/// (`0.0.0.0`, `::`) replaced by loopback.
fn connect_address(bound: SocketAddr) -> SocketAddr {
    match bound.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => (Ipv4Addr::LOCALHOST, bound.port()).into(),
        IpAddr::V6(ip) if ip.is_unspecified() => (Ipv6Addr::LOCALHOST, bound.port()).into(),
        _ => bound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_binds_are_dialed_on_loopback() {
        let a: SocketAddr = "0.0.0.0:7".parse().unwrap();
        assert_eq!(connect_address(a), "127.0.0.1:7".parse().unwrap());
        let b: SocketAddr = "[::]:7".parse().unwrap();
        assert_eq!(connect_address(b), "[::1]:7".parse().unwrap());
        let c: SocketAddr = "10.1.2.3:7".parse().unwrap();
        assert_eq!(connect_address(c), c);
    }
}
