//! Multi-node jobs: submit a payload to a compute pool, follow it, read its logs.
//!
//! ```no_run
//! use starling::jobs::{JobClient, JobOptions};
//! # fn main() -> Result<(), starling::Error> {
//! let client = JobClient::connect("127.0.0.1:7000")?;
//! let job = client.submit_file("target/release/examples/distributed_training", "train",
//!     JobOptions::new().target_instances(3))?;
//! let status = job.wait(None)?;
//! println!("{status}: {}", job.logs(0)?);
//! # Ok(()) }
//! ```
//!
//! The head runs the payload's entrypoint on instance 0 of the nodes it gives the job, with
//! `STARLING_HEAD`, `STARLING_JOB_ID`, `STARLING_INSTANCE_ID` and `STARLING_NUM_INSTANCES` set;
//! `starling::init()` there joins the job, whose tasks run only on its instances.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use starling_proto::jobs as wire;
use starling_proto::rpc::head_client::HeadClient;
use starling_proto::rpc::Empty;
use starling_proto::security::AuthChannel;
use starling_proto::NodeId;

use crate::error::{Error, Result};
use crate::runtime::{Config, Mode};

/// The environment variable that names the head for clients and job payloads.
pub use starling_proto::env::HEAD as HEAD_ENV;

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobStatus {
    /// Waiting for its instances.
    Pending,
    /// The entrypoint runs.
    Running,
    /// Ended: the entrypoint exited with code 0.
    Done,
    /// Ended: it failed (see [`JobInfo::message`]).
    Failed,
    /// Cancelled; its processes are being stopped.
    Cancelling,
    /// Ended: cancelled, and none of its processes is left.
    Cancelled,
}

impl JobStatus {
    fn parse(s: &str) -> JobStatus {
        match s {
            "PENDING" => JobStatus::Pending,
            "RUNNING" => JobStatus::Running,
            "DONE" => JobStatus::Done,
            "CANCELLING" => JobStatus::Cancelling,
            "CANCELLED" => JobStatus::Cancelled,
            _ => JobStatus::Failed,
        }
    }

    /// Whether the job has ended.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobStatus::Done | JobStatus::Failed | JobStatus::Cancelled
        )
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            JobStatus::Pending => "PENDING",
            JobStatus::Running => "RUNNING",
            JobStatus::Done => "DONE",
            JobStatus::Failed => "FAILED",
            JobStatus::Cancelling => "CANCELLING",
            JobStatus::Cancelled => "CANCELLED",
        })
    }
}

/// How to run a job.
#[derive(Clone, Debug)]
pub struct JobOptions {
    /// Arguments of the entrypoint.
    pub args: Vec<String>,
    /// Environment variables of the entrypoint.
    pub env_vars: BTreeMap<String, String>,
    /// Nodes the job wants (default 1).
    pub target_instances: u32,
    /// Nodes it can start with after a short wait (default: `target_instances`).
    pub min_instances: Option<u32>,
    /// How long it may wait for `min_instances` nodes (default 720 s).
    pub instance_timeout: Duration,
    /// A name to list it by (default `job-<id>`).
    pub name: Option<String>,
    /// How many instances may be lost before the job fails (default: any number, while at
    /// least `min_instances` remain). Losing instance 0, which runs the entrypoint, always
    /// fails the job.
    pub max_instance_failures: Option<u32>,
    /// The program that runs the payload file (`["python3"]`; default: a `.py` file runs with
    /// `python3`, anything else runs itself).
    pub interpreter: Option<Vec<String>>,
    pub(crate) input: Vec<u8>,
}

/// How long a job may wait for its instances unless told otherwise.
pub const DEFAULT_INSTANCE_TIMEOUT: Duration = Duration::from_secs(720);

impl Default for JobOptions {
    fn default() -> Self {
        JobOptions {
            args: Vec::new(),
            env_vars: BTreeMap::new(),
            target_instances: 1,
            min_instances: None,
            instance_timeout: DEFAULT_INSTANCE_TIMEOUT,
            name: None,
            max_instance_failures: None,
            interpreter: None,
            input: Vec::new(),
        }
    }
}

impl JobOptions {
    /// One instance, no arguments.
    pub fn new() -> Self {
        Self::default()
    }
    /// Sets the entrypoint's arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> Self {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }
    /// Adds an environment variable.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env_vars.insert(key.into(), value.into());
        self
    }
    /// Sets `target_instances`.
    pub fn target_instances(mut self, n: u32) -> Self {
        self.target_instances = n;
        self
    }
    /// Sets `min_instances`.
    pub fn min_instances(mut self, n: u32) -> Self {
        self.min_instances = Some(n);
        self
    }
    /// Sets `instance_timeout`.
    pub fn instance_timeout(mut self, t: Duration) -> Self {
        self.instance_timeout = t;
        self
    }
    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Sets `max_instance_failures`.
    pub fn max_instance_failures(mut self, n: u32) -> Self {
        self.max_instance_failures = Some(n);
        self
    }
    /// Runs the payload file with this program and its arguments (`["python3", "-u"]`).
    pub fn interpreter<I: IntoIterator<Item = S>, S: Into<String>>(mut self, command: I) -> Self {
        self.interpreter = Some(command.into_iter().map(Into::into).collect());
        self
    }

    /// The command that runs a payload file named `file`: the interpreter if one was given,
    /// `python3` for a `.py` file, else none (the file runs itself).
    fn command_for(&self, file: &str) -> Vec<String> {
        match &self.interpreter {
            Some(c) => c.clone(),
            None if file.ends_with(".py") => vec!["python3".to_string()],
            None => Vec::new(),
        }
    }

    /// Checks what can be checked before anything is uploaded.
    fn check(&self) -> Result<()> {
        if self.target_instances < 1 {
            return Err(Error::JobRequest(
                "target_instances must be at least 1".into(),
            ));
        }
        if let Some(m) = self.min_instances {
            if m < 1 || m > self.target_instances {
                return Err(Error::JobRequest(format!(
                    "min_instances must be in 1..={} (target_instances), not {m}",
                    self.target_instances
                )));
            }
        }
        if self.interpreter.as_ref().is_some_and(|c| c.is_empty()) {
            return Err(Error::JobRequest(
                "an interpreter needs a program (e.g. python3)".into(),
            ));
        }
        Ok(())
    }

    fn spec(&self, pool: &str, payload: wire::Payload) -> wire::JobSpec {
        wire::JobSpec {
            name: self.name.clone().unwrap_or_default(),
            pool: pool.to_string(),
            payload,
            args: self.args.clone(),
            env: self.env_vars.clone().into_iter().collect(),
            target_instances: self.target_instances,
            min_instances: self.min_instances.unwrap_or(0),
            instance_timeout_ms: self.instance_timeout.as_millis().max(1) as u64,
            input: self.input.clone(),
            max_instance_failures: self.max_instance_failures,
        }
    }
}

/// A job as the head reports it.
#[derive(Clone, Debug)]
pub struct JobInfo {
    /// Its id.
    pub id: u64,
    /// Its name.
    pub name: String,
    /// Where it is.
    pub status: JobStatus,
    /// Why it is pending, or why it failed.
    pub message: String,
    /// Its pool.
    pub pool: String,
    /// Nodes it wants.
    pub target_instances: u32,
    /// Nodes it can start with.
    pub min_instances: u32,
    /// The entrypoint's exit code, once it exited (minus the signal that killed it).
    pub exit_code: Option<i32>,
    /// When it was submitted.
    pub created: SystemTime,
    /// When its entrypoint started.
    pub started: Option<SystemTime>,
    /// When it ended.
    pub completed: Option<SystemTime>,
    /// The nodes of its instances: instance `k` ran on `nodes[k]`.
    pub nodes: Vec<NodeId>,
    /// Every instance it had, lost ones and their replacements included.
    pub instances: Vec<InstanceInfo>,
}

/// One instance of a job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceInfo {
    /// Its index (0 runs the entrypoint).
    pub index: u32,
    /// The node it ran on.
    pub node: NodeId,
    /// Where it is.
    pub state: InstanceState,
    /// When its node was lost, and why.
    pub lost: Option<(SystemTime, String)>,
}

/// Where one instance of a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceState {
    /// Its node serves the job.
    Up,
    /// Its node was lost while the job ran.
    Lost,
    /// The job ended and the instance's processes are gone.
    Stopped,
}

impl std::fmt::Display for InstanceState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            InstanceState::Up => "up",
            InstanceState::Lost => "lost",
            InstanceState::Stopped => "stopped",
        })
    }
}

fn time(ms: u64) -> Option<SystemTime> {
    (ms != 0).then(|| UNIX_EPOCH + Duration::from_millis(ms))
}

impl From<&wire::JobInfo> for JobInfo {
    fn from(i: &wire::JobInfo) -> Self {
        let spec = i.spec.clone();
        JobInfo {
            id: i.id,
            name: spec.name,
            status: JobStatus::parse(&i.status),
            message: i.message.clone(),
            pool: spec.pool,
            target_instances: spec.target_instances,
            min_instances: spec.min_instances,
            exit_code: i.exit_code,
            created: time(i.created_ms).unwrap_or(UNIX_EPOCH),
            started: time(i.started_ms),
            completed: time(i.completed_ms),
            nodes: i.nodes.iter().map(|n| NodeId(*n)).collect(),
            instances: i
                .instances
                .iter()
                .map(|k| InstanceInfo {
                    index: k.index,
                    node: NodeId(k.node),
                    state: match k.state.as_str() {
                        "LOST" => InstanceState::Lost,
                        "STOPPED" => InstanceState::Stopped,
                        _ => InstanceState::Up,
                    },
                    lost: time(k.lost_ms).map(|t| (t, k.reason.clone())),
                })
                .collect(),
        }
    }
}

/// A compute pool's definition.
#[derive(Clone, Debug, Default)]
pub struct PoolOptions {
    /// Its name.
    pub name: String,
    /// Nodes kept even when idle.
    pub min_nodes: u32,
    /// The most nodes it may have (0: no limit; nodes join by themselves).
    pub max_nodes: u32,
    /// CPUs of each node the head starts (0: the machine's).
    pub num_cpus_per_node: u32,
    /// Whether the head starts and stops its nodes (on the head's machine).
    pub launched: bool,
    /// How long a started node may stay idle before it is stopped (above `min_nodes`).
    pub idle_timeout: Duration,
}

/// A compute pool as the head reports it.
#[derive(Clone, Debug)]
pub struct PoolInfo {
    /// Its definition.
    pub options: PoolOptions,
    /// Its nodes now.
    pub nodes: Vec<NodeId>,
    /// How many of them run a job.
    pub busy: u32,
    /// Nodes started that have not joined yet.
    pub starting: u32,
}

impl From<wire::PoolInfo> for PoolInfo {
    fn from(p: wire::PoolInfo) -> Self {
        let s = p.spec;
        PoolInfo {
            options: PoolOptions {
                name: s.name,
                min_nodes: s.min_nodes,
                max_nodes: s.max_nodes,
                num_cpus_per_node: s.num_cpus_per_node,
                launched: s.launched,
                idle_timeout: Duration::from_millis(s.idle_timeout_ms),
            },
            nodes: p.nodes.into_iter().map(NodeId).collect(),
            busy: p.busy,
            starting: p.starting,
        }
    }
}

struct Inner {
    addr: String,
    rt: tokio::runtime::Runtime,
    head: HeadClient<AuthChannel>,
}

/// Uploads of at least this many bytes show their progress on a client that
/// [shows it](JobClient::show_progress).
pub const UPLOAD_PROGRESS_BYTES: u64 = 1 << 20;

/// A connection to a head for managing jobs and pools. Cheap to clone.
#[derive(Clone)]
pub struct JobClient {
    inner: Arc<Inner>,
    /// Whether uploads show their progress ([`JobClient::show_progress`]).
    progress: bool,
}

impl fmt::Debug for JobClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobClient({})", self.inner.addr)
    }
}

impl JobClient {
    /// Connects to the head at `addr` (`host:port`), with the cluster token from
    /// `STARLING_TOKEN` (and TLS when `STARLING_TLS_CA` names a CA).
    pub fn connect(addr: &str) -> Result<JobClient> {
        JobClient::with_config(&Config::connect(addr))
    }

    /// Connects as `config` says: its address ([`Config::connect`]), token and TLS CA
    /// ([`Config::token`], [`Config::tls_ca`], else the environment's) and connect timeout.
    pub fn with_config(config: &Config) -> Result<JobClient> {
        let Mode::Connect(addr) = &config.mode else {
            return Err(Error::JobRequest(
                "a job client needs a head address: use Config::connect(addr)".into(),
            ));
        };
        let creds = config.credentials()?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::Startup(format!("cannot start an I/O runtime: {e}")))?;
        let channel = rt.block_on(crate::cluster::client::connect_channel(
            &creds,
            addr,
            config.connect_timeout,
        ))?;
        let head = HeadClient::new(channel)
            .max_decoding_message_size(crate::cluster::client::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(crate::cluster::client::MAX_MESSAGE_BYTES);
        let client = JobClient {
            inner: Arc::new(Inner {
                addr: addr.to_string(),
                rt,
                head,
            }),
            progress: false,
        };
        // One cheap call, so a missing or wrong token is reported here, not on first use.
        client.call(|mut h| async move { h.list_pools(Empty).await })?;
        Ok(client)
    }

    /// The nodes of job `job` (its instances, lost ones too, like [`crate::nodes`] inside
    /// it), or every node of the cluster (`None`).
    pub fn nodes(&self, job: Option<u64>) -> Result<Vec<crate::NodeInfo>> {
        let request = starling_proto::status::StatusRequest {
            job: starling_proto::JobId(job.unwrap_or(0)),
        };
        let reply = self.call(|mut h| async move { h.status(request).await })?;
        Ok(reply
            .nodes
            .into_iter()
            .map(crate::cluster::client::node_info)
            .collect())
    }

    /// Connects to the head named by `STARLING_HEAD`.
    pub fn from_env() -> Result<JobClient> {
        let addr = std::env::var(HEAD_ENV).map_err(|_| {
            Error::JobRequest(format!("no head given: pass --head ADDR or set {HEAD_ENV}"))
        })?;
        JobClient::connect(&addr)
    }

    /// The head's address.
    pub fn addr(&self) -> &str {
        &self.inner.addr
    }

    fn call<T, F>(&self, f: impl FnOnce(HeadClient<AuthChannel>) -> F) -> Result<T>
    where
        F: std::future::Future<Output = std::result::Result<tonic::Response<T>, tonic::Status>>,
    {
        let head = self.inner.head.clone();
        self.inner
            .rt
            .block_on(f(head))
            .map(|r| r.into_inner())
            .map_err(|s| match s.code() {
                tonic::Code::Unavailable => Error::HeadUnreachable {
                    addr: self.inner.addr.clone(),
                    why: s.message().to_string(),
                },
                tonic::Code::Unauthenticated => Error::from_status(&self.inner.addr, &s),
                _ => Error::JobRequest(s.message().to_string()),
            })
    }

    /// This client with payload uploads of [`UPLOAD_PROGRESS_BYTES`] or more showing their
    /// progress on standard error ([`crate::progress`]: a bar on a terminal, a line per
    /// quarter otherwise), as `starling job submit` does.
    pub fn show_progress(mut self) -> Self {
        self.progress = true;
        self
    }

    /// Uploads `data` (content-addressed) and returns its id.
    fn upload(&self, data: Vec<u8>) -> Result<String> {
        use crate::progress::{Progress, Unit};
        use tokio_stream::StreamExt;
        let total = data.len() as u64;
        let chunks = crate::cluster::client::upload_chunks(&data);
        drop(data);
        let progress = (self.progress && total >= UPLOAD_PROGRESS_BYTES)
            .then(|| Arc::new(Progress::new("uploading the payload", total, Unit::Bytes)));
        let shown = progress.clone();
        let mut sent = 0u64;
        let stream = tokio_stream::iter(chunks).map(move |c| {
            // Counted as each chunk is handed to the connection, whose window bounds how far
            // that runs ahead of the head.
            sent += c.data.len() as u64;
            if let Some(p) = &shown {
                p.set(sent);
            }
            c
        });
        let id = self
            .call(|mut h| async move { h.put_binary(stream).await })
            .map(|r| r.build);
        if let Some(p) = progress {
            p.finish();
        }
        id
    }

    fn submit(&self, spec: wire::JobSpec) -> Result<Job> {
        let info = self.call(|mut h| async move { h.submit_job(spec).await })?;
        Ok(Job {
            id: info.id,
            client: self.clone(),
        })
    }

    /// Submits the file at `path`: it runs on instance 0 with `options.args`, by itself (an
    /// executable), with `python3` (a `.py` file) or with `options.interpreter`.
    pub fn submit_file(
        &self,
        path: impl AsRef<Path>,
        pool: &str,
        options: JobOptions,
    ) -> Result<Job> {
        use std::os::unix::fs::PermissionsExt;
        options.check()?;
        let path = path.as_ref();
        let meta = std::fs::metadata(path)
            .map_err(|e| Error::JobRequest(format!("cannot read {}: {e}", path.display())))?;
        let command = options.command_for(&path.to_string_lossy());
        if !meta.is_file() {
            return Err(Error::JobRequest(format!(
                "{} is not a file",
                path.display()
            )));
        }
        if command.is_empty() && meta.permissions().mode() & 0o111 == 0 {
            return Err(Error::JobRequest(format!(
                "{} is not executable (chmod +x it, or give an interpreter)",
                path.display()
            )));
        }
        let data = std::fs::read(path)
            .map_err(|e| Error::JobRequest(format!("cannot read {}: {e}", path.display())))?;
        let id = self.upload(data)?;
        let payload = wire::Payload {
            kind: Some(wire::PayloadKind::Binary(id)),
            entrypoint: String::new(),
            command,
        };
        self.submit(options.spec(pool, payload))
    }

    /// Submits the directory `dir`: it is copied to instance 0 and `entrypoint` runs from its
    /// root. The entrypoint is a command line split at spaces: a file of the directory with
    /// its first arguments (`run.sh`, `main.py --fast`; a `.py` file runs with `python3`), or
    /// a program of the nodes' with its arguments (`python3 -m pkg.main`).
    pub fn submit_directory(
        &self,
        dir: impl AsRef<Path>,
        pool: &str,
        entrypoint: &str,
        options: JobOptions,
    ) -> Result<Job> {
        let words: Vec<String> = entrypoint.split_whitespace().map(String::from).collect();
        self.submit_directory_argv(dir, pool, &words, options)
    }

    /// [`submit_directory`](Self::submit_directory) with the entrypoint's words given one by
    /// one (`["python3", "main.py"]`), so a word may hold spaces.
    pub fn submit_directory_argv(
        &self,
        dir: impl AsRef<Path>,
        pool: &str,
        entrypoint: &[String],
        mut options: JobOptions,
    ) -> Result<Job> {
        options.check()?;
        let dir = dir.as_ref();
        let mut files = Vec::new();
        collect_files(dir, dir, &mut files)?;
        let Some((first, rest)) = entrypoint.split_first() else {
            return Err(Error::JobRequest(
                "a directory payload needs an entrypoint".into(),
            ));
        };
        let file = first.trim_start_matches("./");
        let (want, command) = match files.iter().find(|f| f.path == file) {
            Some(f) => {
                let command = options.command_for(file);
                if command.is_empty() && f.mode & 0o111 == 0 {
                    return Err(Error::JobRequest(format!(
                        "entrypoint `{first}` is not executable (chmod +x it, or give an \
                         interpreter)"
                    )));
                }
                // Its first arguments come before the job's own.
                let args = rest.iter().cloned().chain(options.args.drain(..)).collect();
                options.args = args;
                (file.to_string(), command)
            }
            // A program of the nodes' (`python3 -m pkg.main`): it must at least exist here.
            None if !first.contains('/') && on_path(first) => {
                if options.interpreter.is_some() {
                    return Err(Error::JobRequest(format!(
                        "entrypoint `{first}` is a program, not a file to interpret: give the \
                         interpreter or the program, not both"
                    )));
                }
                (String::new(), entrypoint.to_vec())
            }
            None => {
                return Err(Error::JobRequest(format!(
                    "entrypoint `{first}` is not a file in {}, nor a program on PATH",
                    dir.display()
                )))
            }
        };
        let archive = starling_proto::jobs::encode_archive(files);
        let id = self.upload(archive)?;
        let payload = wire::Payload {
            kind: Some(wire::PayloadKind::Directory(id)),
            entrypoint: want,
            command,
        };
        self.submit(options.spec(pool, payload))
    }

    /// Submits this very executable, which runs the `#[starling::job]` function `function`
    /// with `input` (used by the macro).
    #[doc(hidden)]
    pub fn submit_function(
        &self,
        function: &str,
        input: Vec<u8>,
        pool: &str,
        mut options: JobOptions,
    ) -> Result<Job> {
        let exe = std::env::current_exe()
            .map_err(|e| Error::JobRequest(format!("cannot find this executable: {e}")))?;
        options.input = input;
        options = options.env(starling_proto::env::JOB_FUNCTION, function);
        if options.name.is_none() {
            let name = function.split('#').next().unwrap_or(function);
            options.name = Some(name.rsplit("::").next().unwrap_or(name).to_string());
        }
        self.submit_file(exe, pool, options)
    }

    /// Reports the value or error of a `#[starling::job]` function (job mode).
    pub(crate) fn set_result(&self, result: starling_proto::jobs::JobResult) -> Result<()> {
        self.call(|mut h| async move { h.set_job_result(result).await })
            .map(|_| ())
    }

    /// Every job, oldest first.
    pub fn list_jobs(&self) -> Result<Vec<JobInfo>> {
        self.call(|mut h| async move { h.list_jobs(Empty).await })
            .map(|l| l.iter().map(JobInfo::from).collect())
    }

    /// The job with this id.
    pub fn get_job(&self, id: u64) -> Result<Job> {
        self.call(|mut h| async move { h.get_job(wire::JobRef { id }).await })?;
        Ok(Job {
            id,
            client: self.clone(),
        })
    }

    /// Removes an ended job and its logs.
    pub fn delete_job(&self, id: u64) -> Result<()> {
        self.call(|mut h| async move { h.delete_job(wire::JobRef { id }).await })
            .map(|_| ())
    }

    /// Creates (or resizes) a pool.
    pub fn create_pool(&self, options: &PoolOptions) -> Result<PoolInfo> {
        let spec = wire::PoolSpec {
            name: options.name.clone(),
            min_nodes: options.min_nodes,
            max_nodes: options.max_nodes,
            num_cpus_per_node: options.num_cpus_per_node,
            launched: options.launched,
            idle_timeout_ms: options.idle_timeout.as_millis() as u64,
        };
        self.call(|mut h| async move { h.create_pool(spec).await })
            .map(PoolInfo::from)
    }

    /// Every pool.
    pub fn list_pools(&self) -> Result<Vec<PoolInfo>> {
        self.call(|mut h| async move { h.list_pools(Empty).await })
            .map(|l| l.into_iter().map(PoolInfo::from).collect())
    }

    /// One pool.
    pub fn describe_pool(&self, name: &str) -> Result<PoolInfo> {
        let name = name.to_string();
        self.call(|mut h| async move { h.describe_pool(wire::PoolRef { name }).await })
            .map(PoolInfo::from)
    }

    /// Deletes a pool that runs no job (its started nodes are stopped).
    pub fn delete_pool(&self, name: &str) -> Result<()> {
        let name = name.to_string();
        self.call(|mut h| async move { h.delete_pool(wire::PoolRef { name }).await })
            .map(|_| ())
    }
}

fn collect_files(
    root: &Path,
    dir: &Path,
    out: &mut Vec<starling_proto::jobs::DirFile>,
) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let io = |p: &Path, e: std::io::Error| Error::JobRequest(format!("{}: {e}", p.display()));
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| io(dir, e))?
        .flatten()
        .collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let path = e.path();
        let meta = std::fs::metadata(&path).map_err(|e| io(&path, e))?;
        if meta.is_dir() {
            collect_files(root, &path, out)?;
        } else if meta.is_file() {
            let rel = path
                .strip_prefix(root)
                .map_err(|_| Error::JobRequest(format!("{} is outside", path.display())))?;
            out.push(starling_proto::jobs::DirFile {
                path: rel.to_string_lossy().into_owned(),
                mode: meta.permissions().mode(),
                data: std::fs::read(&path).map_err(|e| io(&path, e))?,
            });
        }
    }
    Ok(())
}

/// A submitted job.
#[derive(Clone, Debug)]
pub struct Job {
    id: u64,
    client: JobClient,
}

impl Job {
    /// Its id.
    pub fn id(&self) -> u64 {
        self.id
    }

    fn raw(&self) -> Result<wire::JobInfo> {
        let id = self.id;
        self.client
            .call(|mut h| async move { h.get_job(wire::JobRef { id }).await })
    }

    /// Where it is now.
    pub fn info(&self) -> Result<JobInfo> {
        self.raw().map(|i| JobInfo::from(&i))
    }

    /// Its state now.
    pub fn status(&self) -> Result<JobStatus> {
        self.info().map(|i| i.status)
    }

    /// Waits until it ends (or `timeout` passes: [`Error::Timeout`]) and returns its final
    /// state; a FAILED job is not an error here.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<JobStatus> {
        self.wait_with(timeout, |_| {}).map(|i| i.status)
    }

    /// Like [`wait`](Self::wait), calling `progress` whenever the job's state or message
    /// changes (the CLI prints it).
    pub fn wait_with(
        &self,
        timeout: Option<Duration>,
        mut progress: impl FnMut(&JobInfo),
    ) -> Result<JobInfo> {
        let start = Instant::now();
        let mut last: Option<(JobStatus, String)> = None;
        loop {
            let info = self.info()?;
            let now = (info.status, info.message.clone());
            if last.as_ref() != Some(&now) {
                progress(&info);
                last = Some(now);
            }
            if info.status.is_final() {
                return Ok(info);
            }
            if let Some(t) = timeout {
                if start.elapsed() >= t {
                    return Err(Error::Timeout { waited: t });
                }
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The value of a `#[starling::job]` function: waits until the job ends; its error (type,
    /// message, backtrace) if it failed.
    pub fn result<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        match self.result_bytes()? {
            Some(bytes) => crate::codec::decode::<T>(&bytes),
            None => Err(Error::JobFailed {
                job: self.id,
                status: JobStatus::Done.to_string(),
                message: "it reported no value (is its entrypoint a #[starling::job] function?)"
                    .to_string(),
                cause: None,
            }),
        }
    }

    /// Waits until the job ends: the encoded value of its `#[starling::job]` function, or
    /// `None` for a job DONE without one (a file or directory payload); its error if it did
    /// not end DONE.
    pub fn result_bytes(&self) -> Result<Option<Vec<u8>>> {
        self.wait(None)?;
        let raw = self.raw()?;
        let info = JobInfo::from(&raw);
        if info.status == JobStatus::Done {
            return Ok((!raw.result.is_empty()).then_some(raw.result));
        }
        Err(Error::JobFailed {
            job: self.id,
            status: info.status.to_string(),
            message: info.message,
            cause: raw.error.map(Box::new),
        })
    }

    /// The log of `instance` (0: the entrypoint's), as far as it is written now.
    pub fn logs(&self, instance: u32) -> Result<String> {
        let mut all = Vec::new();
        let mut offset = 0;
        loop {
            let (data, next, _) = self.logs_from(instance, offset)?;
            if data.is_empty() {
                break;
            }
            all.extend_from_slice(&data);
            offset = next;
        }
        Ok(String::from_utf8_lossy(&all).into_owned())
    }

    /// Log bytes of `instance` from `offset` on: the bytes, the next offset, and whether the job
    /// has ended (nothing more will come once they are read).
    pub fn logs_from(&self, instance: u32, offset: u64) -> Result<(Vec<u8>, u64, bool)> {
        let job = self.id;
        let c = self.client.call(|mut h| async move {
            h.job_logs(wire::LogRequest {
                job,
                instance,
                offset,
            })
            .await
        })?;
        Ok((c.data, c.offset, c.ended))
    }

    /// Cancels it: every process of it on every instance is stopped.
    pub fn cancel(&self) -> Result<JobStatus> {
        let id = self.id;
        self.client
            .call(|mut h| async move { h.cancel_job(wire::JobRef { id }).await })
            .map(|i| JobStatus::parse(&i.status))
    }
}

/// Whether `program` is an executable file in a directory of `PATH`.
fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            std::fs::metadata(d.join(program))
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}
