//! The multi-process test harness shared by `cluster.rs` and `jobs.rs`: a head and node agents
//! as separate `starling` processes, the example payloads, and bounded waits.
//!
//! Every test starts its own cluster on a free port, under its own temporary directory. Every
//! wait is bounded; a failure message carries the tail of every log file (the head's, the
//! agents', each worker process's and each payload's). Dropping the cluster stops the agents,
//! then the head (SIGTERM, then SIGKILL for whatever is still there after a grace period).

// Each test crate uses its own part of the harness.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long a head or a set of agents may take to come up.
pub const STARTUP: Duration = Duration::from_secs(30);
/// How long a payload may run (debug builds; the big-object payload moves 100 MB).
pub const PAYLOAD: Duration = Duration::from_secs(180);
/// How long a process may take to exit after SIGTERM.
pub const GRACE: Duration = Duration::from_secs(10);

pub const STARLING: &str = env!("CARGO_BIN_EXE_starling");

/// How many processes have `mark` in their command line.
pub fn marked(mark: &str) -> usize {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(mark))
                && !is_zombie(
                    e.file_name()
                        .to_str()
                        .and_then(|p| p.parse().ok())
                        .unwrap_or(0),
                )
        })
        .count()
}

// ---------------------------------------------------------------------------------------------
// The harness

/// One process of the cluster.
pub struct Proc {
    pub name: String,
    pub child: Child,
    pub log: PathBuf,
}

/// A head and its node agents, each a `starling` process logging under `dir`.
pub struct Cluster {
    pub dir: PathBuf,
    /// The head's address, as its first line of stdout gave it.
    pub head: String,
    /// The head's token file (`head-data/token`), passed to every process with `--token-file`
    /// or, for payloads, as `STARLING_TOKEN`.
    pub token_file: PathBuf,
    /// With TLS: the CA every client trusts (`--tls-ca`, `STARLING_TLS_CA`).
    pub tls_ca: Option<PathBuf>,
    /// Extra flags of the agents.
    pub worker_args: Vec<String>,
    /// The head first, then the agents.
    pub procs: Vec<Proc>,
    /// For a cluster on default directories ([`start_private`](Self::start_private)): the
    /// `TMPDIR` of all its processes, so their runtime directory is the test's own.
    pub tmpdir: Option<PathBuf>,
    /// Extra flags of the head (a `--heartbeat-timeout` here replaces the harness's 30 s).
    pub head_args: Vec<String>,
}

/// A payload's `key=value` lines.
pub struct Payload {
    pub name: String,
    pub values: BTreeMap<String, String>,
}

impl Payload {
    /// The `key=value` lines of payload `name`'s stdout `text`.
    pub fn of(name: &str, text: &str) -> Payload {
        Payload {
            name: name.to_string(),
            values: text
                .lines()
                .filter_map(|l| l.split_once('='))
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .collect(),
        }
    }

    #[track_caller]
    pub fn get(&self, c: &Cluster, key: &str) -> &str {
        match self.values.get(key) {
            Some(v) => v,
            None => c.fail(&format!("{} printed no `{key}=` line", self.name)),
        }
    }
}

impl Cluster {
    /// Starts a head on a free port and `workers` agents with 2 CPUs each, and waits until the
    /// head reports them all alive.
    pub fn start(name: &str, workers: usize) -> Cluster {
        Cluster::start_with(name, workers, &[], false)
    }

    /// [`start`](Self::start) with extra agent flags, and with TLS if `tls` (the test
    /// certificates under `tests/certs`).
    pub fn start_with(name: &str, workers: usize, worker_args: &[&str], tls: bool) -> Cluster {
        Cluster::start_in(name, workers, worker_args, &[], tls, false)
    }

    /// [`start`](Self::start) with extra head flags.
    pub fn start_with_head(name: &str, workers: usize, head_args: &[&str]) -> Cluster {
        Cluster::start_in(name, workers, &[], head_args, false, false)
    }

    /// A cluster whose head and agents keep everything in their default directories: under
    /// the runtime directory of a `TMPDIR` of the test's own (the shared-memory store under
    /// this user's `/dev/shm/starling-<uid>`), with a head data directory of its process.
    pub fn start_private(name: &str, workers: usize, worker_args: &[&str]) -> Cluster {
        Cluster::start_in(name, workers, worker_args, &[], false, true)
    }

    /// The runtime directory of a [`start_private`](Self::start_private) cluster.
    pub fn runtime_dir(&self) -> PathBuf {
        let tmp = self
            .tmpdir
            .as_ref()
            .expect("a cluster on default directories");
        tmp.join(format!("starling-{}", starling_proto::dirs::euid()))
    }

    fn start_in(
        name: &str,
        workers: usize,
        worker_args: &[&str],
        head_args: &[&str],
        tls: bool,
        defaults: bool,
    ) -> Cluster {
        // Build the payloads first: a build failure is not a cluster failure.
        examples_dir();
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir()
            .join("starling-cli-tests")
            .join(format!(
                "{name}-{}-{}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::Relaxed)
            ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create the test directory");
        let data_dir = dir.join("head-data");
        let certs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/certs");
        let tmpdir = defaults.then(|| dir.join("tmp"));
        let mut c = Cluster {
            dir,
            head: String::new(),
            token_file: data_dir.join("token"),
            tls_ca: tls.then(|| certs.join("ca.pem")),
            worker_args: worker_args.iter().map(|a| a.to_string()).collect(),
            procs: Vec::new(),
            tmpdir,
            head_args: head_args.iter().map(|a| a.to_string()).collect(),
        };
        let head_out = c.dir.join("head.stdout");
        let mut cmd = c.head_command(&data_dir, 0);
        if let Some(tmp) = &c.tmpdir {
            std::fs::create_dir_all(tmp).expect("create the test's TMPDIR");
            // No --data-dir: the default, a directory of the head's process.
            cmd = Command::new(STARLING);
            cmd.args(["head", "--port", "0", "--heartbeat-timeout", "30"]);
        }
        c.spawn("head", &mut cmd, Some(&head_out));
        if c.tmpdir.is_some() {
            let pid = c.procs[0].child.id();
            c.token_file = c.runtime_dir().join(format!("head-0-{pid}")).join("token");
        }
        c.head = c.read_head_address(&head_out);
        for i in 1..=workers {
            c.start_agent(&format!("worker-{i}"));
        }
        c.wait_alive(workers);
        c
    }

    /// Starts a node agent with 2 CPUs, logging to `<dir>/<name>.log`; its logs and the
    /// binaries it downloads stay under `<dir>/<name>/`.
    pub fn start_agent(&mut self, name: &str) {
        let node_dir = self.dir.join(name);
        let mut cmd = self.command(&["worker", "--head", &self.head, "--num-cpus", "2"]);
        if self.tls_ca.is_some() {
            // Its object service serves TLS as the head does, with a certificate of the CA.
            serve_tls(&mut cmd);
        }
        if self.tmpdir.is_none() {
            cmd.arg("--log-dir")
                .arg(&node_dir)
                .arg("--cache-dir")
                .arg(node_dir.join("bin-cache"));
        }
        cmd.args(&self.worker_args);
        self.spawn(name, &mut cmd, None);
    }

    /// The index in `procs` of the agent that joined as `node` (`N2`).
    pub fn agent_of(&self, node: &str) -> usize {
        let joined = format!("node {node} joined");
        self.procs
            .iter()
            .position(|p| {
                p.name != "head"
                    && std::fs::read_to_string(&p.log).is_ok_and(|l| l.contains(&joined))
            })
            .unwrap_or_else(|| self.fail(&format!("no agent joined as {node}")))
    }

    /// SIGKILLs the agent that joined as `node` (`N2`) and forgets it (its log stays).
    pub fn kill_node(&mut self, node: &str) {
        let i = self.agent_of(node);
        let mut p = self.procs.remove(i);
        let _ = p.child.kill();
        let _ = p.child.wait();
    }

    /// The worker processes of the agents still running (their children).
    pub fn worker_processes(&self) -> Vec<u32> {
        let agents: Vec<u32> = self
            .procs
            .iter()
            .filter(|p| p.name != "head")
            .map(|p| p.child.id())
            .collect();
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|s| {
                        let (_, rest) = s.rsplit_once(')')?;
                        let mut fields = rest.split_whitespace();
                        let state = fields.next()?;
                        let ppid: u32 = fields.next()?.parse().ok()?;
                        Some(state != "Z" && agents.contains(&ppid))
                    })
                    .unwrap_or(false)
            })
            .collect()
    }

    /// Starts an example payload as a driver of this cluster without waiting for it; its stdout
    /// goes to the returned file, its stderr to a log next to it. It is killed if still running
    /// when the cluster drops.
    pub fn spawn_payload(&mut self, example: &str, args: &[&str]) -> PathBuf {
        let out_path = self.dir.join(format!("{example}.stdout"));
        let bin = examples_dir().join(example);
        let mut cmd = Command::new(&bin);
        cmd.args(args)
            .env("STARLING_HEAD", &self.head)
            .env("STARLING_TOKEN", self.token());
        if let Some(ca) = &self.tls_ca {
            cmd.env("STARLING_TLS_CA", ca);
        }
        self.spawn(example, &mut cmd, Some(&out_path));
        out_path
    }

    /// Sends SIGINT (Ctrl-C) to the process named `name`, waits until it has exited, and
    /// forgets it (its log stays).
    pub fn interrupt(&mut self, name: &str) {
        let Some(i) = self.procs.iter().position(|p| p.name == name) else {
            self.fail(&format!("no process {name}"))
        };
        signal(&self.procs[i].child, "INT");
        if wait_within(&mut self.procs[i].child, GRACE).is_none() {
            self.fail(&format!("{name} did not exit on SIGINT"));
        }
        // Gone on purpose: not one of the processes that must keep running.
        self.procs.remove(i);
    }

    /// Waits until the payload named `name` exits; fails unless it succeeds. Returns its
    /// `key=value` lines.
    /// The rest of the first line of a running payload's `stdout` that starts with `prefix`,
    /// waiting for it up to [`PAYLOAD`] (failing with `what` then).
    pub fn wait_line(&self, stdout: &Path, prefix: &str, what: &str) -> String {
        let deadline = Instant::now() + PAYLOAD;
        loop {
            let text = std::fs::read_to_string(stdout).unwrap_or_default();
            if let Some(v) = text.lines().find_map(|l| l.strip_prefix(prefix)) {
                return v.trim().to_string();
            }
            if Instant::now() > deadline {
                self.fail(what);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_payload(&mut self, name: &str, stdout: &Path, within: Duration) -> Payload {
        let Some(i) = self.procs.iter().position(|p| p.name == name) else {
            self.fail(&format!("no process {name}"))
        };
        let status = wait_within(&mut self.procs[i].child, within);
        let text = std::fs::read_to_string(stdout).unwrap_or_default();
        match status {
            Some(s) if s.success() => {}
            Some(s) => self.fail(&format!("{name} exited with {s}; stdout:\n{text}")),
            None => self.fail(&format!("{name} did not finish within {within:?}")),
        }
        self.procs.remove(i);
        Payload::of(name, &text)
    }

    /// `starling head` on `port` (0: any) with this cluster's data directory and TLS.
    pub fn head_command(&self, data_dir: &Path, port: u16) -> Command {
        let mut cmd = Command::new(STARLING);
        // Killed agents are noticed at once (their connection drops); a generous heartbeat
        // timeout keeps a loaded test machine from losing live nodes.
        cmd.args(["head", "--port", &port.to_string()]);
        if !self.head_args.iter().any(|a| a == "--heartbeat-timeout") {
            cmd.args(["--heartbeat-timeout", "30"]);
        }
        // Tests run side by side: each head's dashboard on a port of its own.
        if !self
            .head_args
            .iter()
            .any(|a| a.starts_with("--dashboard-port"))
        {
            cmd.args(["--dashboard-port", "0"]);
        }
        cmd.arg("--data-dir").arg(data_dir).args(&self.head_args);
        if self.tls_ca.is_some() {
            serve_tls(&mut cmd);
        }
        cmd
    }

    /// `starling <args..>` with this cluster's credentials: `--token-file` and, with TLS,
    /// `--tls-ca` (after `args[0]`, the subcommand).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(STARLING);
        cmd.args(&args[..1])
            .arg("--token-file")
            .arg(&self.token_file);
        if let Some(ca) = &self.tls_ca {
            cmd.arg("--tls-ca").arg(ca);
        }
        cmd.args(&args[1..]).env_remove("STARLING_TOKEN");
        if let Some(tmp) = &self.tmpdir {
            cmd.env("TMPDIR", tmp).env_remove("XDG_RUNTIME_DIR");
        }
        cmd
    }

    /// The cluster token, as the head wrote it.
    pub fn token(&self) -> String {
        std::fs::read_to_string(&self.token_file)
            .unwrap_or_else(|e| self.fail(&format!("cannot read the token file: {e}")))
            .trim()
            .to_string()
    }

    /// Starts `cmd` with stderr (and stdout, unless `stdout` names a file of its own) in
    /// `<dir>/<name>.log`.
    pub fn spawn(&mut self, name: &str, cmd: &mut Command, stdout: Option<&Path>) {
        let log = self.dir.join(format!("{name}.log"));
        let err = File::create(&log).expect("create a log file");
        let out = match stdout {
            Some(path) => File::create(path).expect("create a stdout file"),
            None => err.try_clone().expect("clone a log file"),
        };
        // The test's own environment must not leak in; a head the caller set is kept.
        if !cmd.get_envs().any(|(k, _)| k == "STARLING_HEAD") {
            cmd.env_remove("STARLING_HEAD");
        }
        if let Some(tmp) = &self.tmpdir {
            cmd.env("TMPDIR", tmp).env_remove("XDG_RUNTIME_DIR");
        }
        // Tests stop drivers "with Ctrl-C": a process must take SIGINT as it would from a
        // terminal, also where the test itself was started with SIGINT ignored (a background
        // job of a shell without job control passes that on to everything it starts).
        // SAFETY: signal(2) is async-signal-safe, and the closure touches nothing else.
        unsafe {
            cmd.pre_exec(|| {
                libc::signal(libc::SIGINT, libc::SIG_DFL);
                Ok(())
            });
        }
        let child = cmd
            .env_remove("STARLING_WORKER_HEAD")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| self.fail(&format!("cannot start {name}: {e}")));
        self.procs.push(Proc {
            name: name.to_string(),
            child,
            log,
        });
    }

    /// Waits for the first line of the head's stdout: the address to connect to.
    pub fn read_head_address(&mut self, stdout: &Path) -> String {
        let deadline = Instant::now() + STARTUP;
        loop {
            let text = std::fs::read_to_string(stdout).unwrap_or_default();
            if let Some((line, _)) = text.split_once('\n') {
                let addr = line.trim().to_string();
                self.check(
                    addr.parse::<std::net::SocketAddr>().is_ok(),
                    &format!("the head's first stdout line is not an address: {line:?}"),
                );
                return addr;
            }
            if let Ok(Some(status)) = self.procs[0].child.try_wait() {
                self.fail(&format!("the head exited with {status} before listening"));
            }
            if Instant::now() > deadline {
                self.fail("the head printed no address");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Polls `starling status` until it reports `n` alive nodes.
    pub fn wait_alive(&self, n: usize) {
        let want = format!("nodes: {n} alive");
        let deadline = Instant::now() + STARTUP;
        let mut last = String::new();
        while Instant::now() < deadline {
            let (status, stdout, stderr) = self.status();
            if status.success() && stdout.contains(&want) {
                return;
            }
            last = format!("{stdout}{stderr}");
            self.assert_running();
            std::thread::sleep(Duration::from_millis(200));
        }
        self.fail(&format!(
            "the head did not report {n} alive nodes within {STARTUP:?}; last status:\n{last}"
        ));
    }

    /// Polls `starling status` until `ok` holds for its output, for at most [`STARTUP`];
    /// fails saying `what` did not happen, with the last output.
    pub fn wait_status(&self, what: &str, ok: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + STARTUP;
        loop {
            let (_, status, _) = self.status();
            if ok(&status) {
                return;
            }
            self.check(
                Instant::now() < deadline,
                &format!("{what} within {STARTUP:?}; last status:\n{status}"),
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Runs `starling status` against this cluster's head.
    pub fn status(&self) -> (ExitStatus, String, String) {
        output_within(
            &mut self.command(&["status", "--head", &self.head, "--timeout", "5"]),
            Duration::from_secs(15),
        )
        .unwrap_or_else(|e| self.fail(&format!("starling status: {e}")))
    }

    /// Runs an example payload as a driver of this cluster and returns its `key=value` lines.
    pub fn run(&self, example: &str, args: &[&str]) -> Payload {
        let (status, payload, stdout) = self.run_status(example, args);
        self.check(
            status.success(),
            &format!("{example} exited with {status}; stdout:\n{stdout}"),
        );
        payload
    }

    /// Like [`run`](Self::run), whether it succeeds or not: its exit status, its `key=value`
    /// lines and its whole stdout.
    pub fn run_status(&self, example: &str, args: &[&str]) -> (ExitStatus, Payload, String) {
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let k = RUNS.fetch_add(1, Ordering::Relaxed);
        let out_path = self.dir.join(format!("{example}-{k}.stdout"));
        let err_path = self.dir.join(format!("{example}-{k}.log"));
        let bin = examples_dir().join(example);
        let mut cmd = Command::new(&bin);
        cmd.args(args)
            .env("STARLING_HEAD", &self.head)
            .env("STARLING_TOKEN", self.token());
        if let Some(ca) = &self.tls_ca {
            cmd.env("STARLING_TLS_CA", ca);
        }
        if let Some(tmp) = &self.tmpdir {
            cmd.env("TMPDIR", tmp).env_remove("XDG_RUNTIME_DIR");
        }
        let mut child = cmd
            .env_remove("STARLING_WORKER_HEAD")
            .stdin(Stdio::null())
            .stdout(File::create(&out_path).expect("create a stdout file"))
            .stderr(File::create(&err_path).expect("create a log file"))
            .spawn()
            .unwrap_or_else(|e| self.fail(&format!("cannot start {}: {e}", bin.display())));
        let status = match wait_within(&mut child, PAYLOAD) {
            Some(status) => status,
            None => self.fail(&format!("{example} did not finish within {PAYLOAD:?}")),
        };
        let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
        let payload = Payload::of(example, &stdout);
        (status, payload, stdout)
    }

    /// Runs `starling <args> --head <head>`: status, stdout, stderr.
    pub fn cli(&self, args: &[&str]) -> (ExitStatus, String, String) {
        // `--head` right after `job`/`pool`: anything after `--` belongs to the payload.
        let mut full = vec![args[0], "--head", &self.head];
        full.extend_from_slice(&args[1..]);
        output_within(&mut self.command(&full), PAYLOAD)
            .unwrap_or_else(|e| self.fail(&format!("starling {args:?}: {e}")))
    }

    /// Like [`cli`](Self::cli), failing unless it succeeds; returns stdout.
    #[track_caller]
    pub fn cli_ok(&self, args: &[&str]) -> String {
        let (status, stdout, stderr) = self.cli(args);
        if !status.success() {
            self.fail(&format!("starling {args:?} failed: {stdout}{stderr}"));
        }
        stdout
    }

    /// A directory payload whose `run.sh` runs `body` (sh); returns the directory.
    pub fn script_payload(&self, name: &str, body: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        let dir = self.dir.join(format!("payload-{name}"));
        std::fs::create_dir_all(&dir).expect("create a payload directory");
        let script = dir.join("run.sh");
        std::fs::write(&script, format!("#!/bin/sh\n{body}\n")).expect("write the script");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .expect("chmod the script");
        dir.to_string_lossy().into_owned()
    }

    /// Stops the head (SIGTERM) and starts a new one on the same data directory and port, so
    /// agents and drivers find it where the old one was.
    pub fn restart_head(&mut self) {
        signal(&self.procs[0].child, "TERM");
        if wait_within(&mut self.procs[0].child, GRACE).is_none() {
            self.fail("the head did not stop on SIGTERM");
        }
        let port: u16 = self
            .head
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| self.fail("the head address has no port"));
        static RESTARTS: AtomicU64 = AtomicU64::new(2);
        let name = format!("head{}", RESTARTS.fetch_add(1, Ordering::Relaxed));
        let old = self.procs.remove(0);
        let head_out = self.dir.join(format!("{name}.stdout"));
        let data_dir = self.dir.join("head-data");
        let mut cmd = self.head_command(&data_dir, port);
        self.spawn(&name, &mut cmd, Some(&head_out));
        // The new head goes first, as the harness expects.
        let new = self.procs.pop().expect("just spawned");
        self.procs.insert(0, new);
        drop(old);
        let addr = self.read_head_address(&head_out);
        self.check(
            addr == self.head,
            &format!("the restarted head listens on {addr}, not {}", self.head),
        );
    }

    /// Fails unless every process of the cluster is still running (nothing crashed).
    pub fn assert_running(&self) {
        for p in &self.procs {
            // `try_wait` needs `&mut`; a zero-signal `kill` asks the same without reaping.
            let alive = Command::new("kill")
                .args(["-0", &p.child.id().to_string()])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
                && !is_zombie(p.child.id());
            self.check(alive, &format!("{} is no longer running", p.name));
        }
    }

    /// Stops the agents, then the head, with SIGTERM, and checks that each exits with code 0.
    pub fn stop_cleanly(&mut self) {
        let mut order: Vec<usize> = (1..self.procs.len()).collect();
        order.push(0);
        for i in order {
            signal(&self.procs[i].child, "TERM");
            let name = self.procs[i].name.clone();
            match wait_within(&mut self.procs[i].child, GRACE) {
                Some(status) if status.success() => {}
                Some(status) => self.fail(&format!("{name} exited with {status} on SIGTERM")),
                None => self.fail(&format!("{name} did not stop within {GRACE:?} of SIGTERM")),
            }
        }
    }

    #[track_caller]
    pub fn check(&self, ok: bool, what: &str) {
        if !ok {
            self.fail(what);
        }
    }

    #[track_caller]
    pub fn fail(&self, what: &str) -> ! {
        panic!(
            "{what}\n\nhead: {}\nlogs under {}:\n{}",
            self.head,
            self.dir.display(),
            log_tails(&self.dir)
        )
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Agents first, so that they stop their worker processes and remove their stores
        // instead of reporting a lost head; then the head.
        let mut order: Vec<usize> = (1..self.procs.len()).collect();
        order.push(0);
        for i in order {
            let child = &mut self.procs[i].child;
            if matches!(child.try_wait(), Ok(None)) {
                signal(child, "TERM");
                if wait_within(child, GRACE).is_none() {
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
        }
        if std::thread::panicking() {
            eprintln!(
                "keeping the logs of the failed test in {}",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The last lines of every non-empty file under `dir`, each under its path.
/// Adds `--tls-cert`/`--tls-key` with the test certificate (for 127.0.0.1, signed by
/// `tests/certs/ca.pem`) to a `starling head` or `starling worker` command.
fn serve_tls(cmd: &mut Command) {
    let certs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/certs");
    cmd.arg("--tls-cert")
        .arg(certs.join("server.pem"))
        .arg("--tls-key")
        .arg(certs.join("server.key"));
}

pub fn log_tails(dir: &Path) -> String {
    const LINES: usize = 40;
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                // Binaries, not logs.
                if !p.ends_with("head-data") && !p.ends_with("bin-cache") {
                    stack.push(p);
                }
            } else {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = String::new();
    for f in files {
        let mut text = String::new();
        if File::open(&f)
            .and_then(|mut h| h.read_to_string(&mut text))
            .is_err()
            || text.trim().is_empty()
        {
            continue;
        }
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(LINES);
        let shown = f.strip_prefix(dir).unwrap_or(&f).display().to_string();
        out.push_str(&format!("---- {shown} ({} lines)\n", lines.len()));
        for l in &lines[from..] {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

/// Waits up to `timeout` for `child` to exit; `None` if it is still running.
pub fn wait_within(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            _ => return None,
        }
    }
}

/// Runs the example payload `name` with `args` on its own, with no head to join (so on the
/// in-process runtime or a local cluster, as its arguments say), within [`PAYLOAD`]; panics
/// unless it succeeds. Returns its stdout and stderr.
pub fn run_example_alone(name: &str, args: &[&str]) -> (String, String) {
    let bin = examples_dir().join(name);
    let (status, out, err) = output_within(
        Command::new(&bin).args(args).env_remove("STARLING_HEAD"),
        PAYLOAD,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "{name} {args:?}: {status}\n{out}\n{err}");
    (out, err)
}

/// Runs `cmd` to completion within `timeout` (killing it otherwise): status, stdout, stderr.
pub fn output_within(
    cmd: &mut Command,
    timeout: Duration,
) -> Result<(ExitStatus, String, String), String> {
    let mut child = cmd
        .env_remove("STARLING_WORKER_HEAD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = reader(Box::new(child.stdout.take().expect("piped stdout")));
    let err = reader(Box::new(child.stderr.take().expect("piped stderr")));
    let status = wait_within(&mut child, timeout);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    match status {
        Some(status) => Ok((status, out, err)),
        None => Err(format!(
            "{cmd:?} did not finish within {timeout:?}\nstdout:\n{out}\nstderr:\n{err}"
        )),
    }
}

pub fn signal(child: &Child, name: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .stderr(Stdio::null())
        .status();
}

/// Whether `pid` has exited but not been reaped yet.
pub fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .map(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// A loopback port that refuses connections for as long as this lives: the socket is bound,
/// so no other test can take the port, but never listens.
pub struct ClosedPort {
    pub addr: std::net::SocketAddr,
    pub _socket: tokio::net::TcpSocket,
}

impl ClosedPort {
    pub fn new() -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("a TCP socket");
        socket
            .bind("127.0.0.1:0".parse().expect("an address"))
            .expect("bind a loopback port");
        let addr = socket.local_addr().expect("local address");
        Self {
            addr,
            _socket: socket,
        }
    }
}

/// Where the example payloads are, building them first (once per test process).
///
/// They are built into the same target directory and profile as the `starling` binary under
/// test (`<target>/<profile>/starling` → `<target>/<profile>/examples/`).
pub fn examples_dir() -> &'static Path {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match BUILT.get_or_init(build_examples) {
        Ok(dir) => dir,
        Err(e) => panic!("{e}"),
    }
}

pub fn build_examples() -> Result<PathBuf, String> {
    let bin = Path::new(STARLING);
    let profile_dir = bin.parent().ok_or("the starling binary has no directory")?;
    let target_dir = profile_dir
        .parent()
        .ok_or("the starling binary is not in a target directory")?;
    let profile = profile_dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or("the profile directory has no name")?;
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("the cli package has no parent directory")?;
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(workspace)
        .args(["build", "-q", "-p", "starling-examples", "--examples"])
        .arg("--target-dir")
        .arg(target_dir);
    match profile {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    let (status, _, stderr) = output_within(&mut cmd, Duration::from_secs(900))?;
    if !status.success() {
        return Err(format!(
            "building the example payloads failed ({status}):\n{stderr}"
        ));
    }
    Ok(profile_dir.join("examples"))
}

/// A small PRNG for junk bytes (no dependency needed for noise).
pub struct XorShift(pub u64);

impl XorShift {
    pub fn seeded() -> Self {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        XorShift(t | 1)
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            *b = self.next() as u8;
        }
    }
}
