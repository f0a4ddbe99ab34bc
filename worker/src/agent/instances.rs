//! The multi-node job instances this node runs: instance 0's entrypoint process, and the
//! forwarding of every job process's output to the head (which keeps one log per instance).
//!
//! The entrypoint runs in its own process group, so cancelling a job kills whatever it started
//! too. Its output is tagged like a worker's (`[-] out|...`), written to
//! `entrypoint-J<job>.log` here and forwarded to the head.
//!
//! # Invariants
//! - On `StopJob`, the entrypoint's exit and all output of the job's processes are queued to
//!   the head before `JobStopped` (one ordered stream), so a job that has ended has complete
//!   logs.
//! - A directory payload is unpacked under the agent's work root only: paths with `..` or a
//!   leading `/` are refused.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use starling_proto::pb::{self, node_op};
use starling_proto::JobId;
use tokio::process::Command;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::binary::BinaryCache;
use super::logs::{pump, AgentLog, Tee};
use super::procs::exit_code;

/// The environment of a job's entrypoint (on top of the job's own `env_vars`).
pub mod env {
    /// The head, for `starling::init()` in the entrypoint.
    pub const HEAD: &str = "STARLING_HEAD";
    /// The job id, in decimal.
    pub const JOB_ID: &str = "STARLING_JOB_ID";
    /// This instance's index (0 for the entrypoint).
    pub const INSTANCE_ID: &str = "STARLING_INSTANCE_ID";
    /// How many instances the job has.
    pub const NUM_INSTANCES: &str = "STARLING_NUM_INSTANCES";
    /// A file holding the input of a `#[starling::job]` function.
    pub const JOB_INPUT: &str = "STARLING_JOB_INPUT";
}

/// How long output may still drain after a process exited.
const DRAIN: Duration = Duration::from_secs(5);

struct Entry {
    kill: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

/// This node's instances of multi-node jobs.
pub(crate) struct Instances {
    head: String,
    /// The cluster token (and TLS trust) for the entrypoint's `starling::init()`.
    credentials: Vec<(&'static str, String)>,
    work_root: PathBuf,
    log_dir: PathBuf,
    cache: Option<Arc<BinaryCache>>,
    outbound: mpsc::UnboundedSender<pb::NodeBatch>,
    log: Arc<AgentLog>,
    jobs: HashMap<JobId, Option<Entry>>,
}

fn batch(kind: node_op::Kind) -> pb::NodeBatch {
    pb::NodeBatch {
        ops: vec![pb::NodeOp { kind: Some(kind) }],
    }
}

impl Instances {
    pub(crate) fn new(
        head: String,
        credentials: Vec<(&'static str, String)>,
        work_root: PathBuf,
        log_dir: PathBuf,
        cache: Option<Arc<BinaryCache>>,
        outbound: mpsc::UnboundedSender<pb::NodeBatch>,
        log: Arc<AgentLog>,
    ) -> Self {
        Instances {
            head,
            credentials,
            work_root,
            log_dir,
            cache,
            outbound,
            log,
            jobs: HashMap::new(),
        }
    }

    /// Where a job's processes' output goes besides their log files, if the job has an
    /// instance here.
    pub(crate) fn tee(&self, job: JobId) -> Option<Tee> {
        self.jobs.contains_key(&job).then(|| Tee {
            job,
            tx: self.outbound.clone(),
        })
    }

    /// `JobInstance`: this node is instance `ji.instance` of a job; instance 0 starts the
    /// entrypoint.
    pub(crate) fn on_instance(&mut self, ji: pb::JobInstance) {
        let job = JobId(ji.job);
        self.log.line(format_args!(
            "{job}: instance {} of {}",
            ji.instance, ji.num_instances
        ));
        let entry = ji.entrypoint.clone().map(|ep| {
            let (kill, killed) = oneshot::channel();
            let ctx = EntryCtx {
                job,
                num_instances: ji.num_instances,
                head: self.head.clone(),
                credentials: self.credentials.clone(),
                work_dir: self.work_root.join(job.0.to_string()),
                log_path: self.log_dir.join(format!("entrypoint-{job}.log")),
                cache: self.cache.clone(),
                outbound: self.outbound.clone(),
                log: self.log.clone(),
            };
            Entry {
                kill: Some(kill),
                task: tokio::spawn(run_entrypoint(ctx, ep, killed)),
            }
        });
        self.jobs.insert(job, entry);
    }

    /// `StopJob` for a job with an instance here: kill the entrypoint (and its process group)
    /// and wait until its exit and output are queued. Returns whether the job had an instance
    /// here (the caller then reports `JobStopped` once the workers are gone too).
    pub(crate) async fn stop(&mut self, job: JobId) -> bool {
        let Some(entry) = self.jobs.remove(&job) else {
            return false;
        };
        if let Some(mut e) = entry {
            if let Some(kill) = e.kill.take() {
                let _ = kill.send(());
            }
            let _ = tokio::time::timeout(DRAIN * 2, e.task).await;
        }
        let dir = self.work_root.join(job.0.to_string());
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir)).await;
        true
    }

    /// Shutdown: stop every instance.
    pub(crate) async fn stop_all(&mut self) {
        let jobs: Vec<JobId> = self.jobs.keys().copied().collect();
        for job in jobs {
            self.stop(job).await;
        }
    }
}

struct EntryCtx {
    job: JobId,
    num_instances: u32,
    head: String,
    credentials: Vec<(&'static str, String)>,
    work_dir: PathBuf,
    log_path: PathBuf,
    cache: Option<Arc<BinaryCache>>,
    outbound: mpsc::UnboundedSender<pb::NodeBatch>,
    log: Arc<AgentLog>,
}

impl EntryCtx {
    fn exited(&self, code: i32, error: String) {
        let _ = self
            .outbound
            .send(batch(node_op::Kind::EntrypointExit(pb::EntrypointExit {
                job: self.job.0,
                code,
                error,
            })));
    }

    /// Also puts `text` in the instance's log at the head, so a payload that cannot start
    /// says why where the user looks.
    fn say(&self, text: &str) {
        let _ = self.outbound.send(batch(node_op::Kind::JobLog(pb::JobLog {
            job: self.job.0,
            data: format!("[-] err|starling: {text}\n").into_bytes(),
        })));
    }
}

/// Fetches the payload, starts the entrypoint, forwards its output and reports its exit.
async fn run_entrypoint(ctx: EntryCtx, ep: pb::Entrypoint, mut killed: oneshot::Receiver<()>) {
    let prepared = tokio::select! {
        r = prepare(&ctx, &ep) => r,
        _ = &mut killed => {
            ctx.exited(-libc::SIGKILL, String::new());
            return;
        }
    };
    let (program, cwd) = match prepared {
        Ok(p) => p,
        Err(e) => {
            ctx.log.line(format_args!(
                "{}: cannot start the entrypoint: {e}",
                ctx.job
            ));
            ctx.say(&format!("cannot start the entrypoint: {e}"));
            ctx.exited(-1, e);
            return;
        }
    };
    let mut cmd = Command::new(&program);
    cmd.args(&ep.args)
        .current_dir(&cwd)
        .env_remove("STARLING_WORKER_HEAD")
        .envs(&ep.env)
        .env(env::HEAD, &ctx.head)
        .envs(ctx.credentials.iter().map(|(k, v)| (k, v)))
        .env(env::JOB_ID, ctx.job.0.to_string())
        .env(env::INSTANCE_ID, "0")
        .env(env::NUM_INSTANCES, ctx.num_instances.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    if !ep.input.is_empty() {
        let path = cwd.join(".starling-job-input");
        if let Err(e) = tokio::fs::write(&path, &ep.input).await {
            let e = format!("cannot write the job's input: {e}");
            ctx.say(&e);
            ctx.exited(-1, e);
            return;
        }
        cmd.env(env::JOB_INPUT, &path);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let e = format!("cannot run {}: {e}", program.display());
            ctx.say(&e);
            ctx.exited(-1, e);
            return;
        }
    };
    let pid = child.id().unwrap_or(0);
    ctx.log.line(format_args!(
        "{}: started the entrypoint pid {pid} ({})",
        ctx.job,
        program.display()
    ));
    let file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&ctx.log_path)
        .await
        .ok();
    let tee = Tee {
        job: ctx.job,
        tx: ctx.outbound.clone(),
    };
    let pumping = match (child.stdout.take(), child.stderr.take()) {
        (Some(out), Some(err)) => Some(tokio::spawn(pump(out, err, file, Some(tee)))),
        _ => None,
    };
    let status = tokio::select! {
        s = child.wait() => s,
        _ = &mut killed => {
            kill_group(pid);
            child.wait().await
        }
    };
    // Whatever it started dies with it.
    kill_group(pid);
    if let Some(p) = pumping {
        let _ = tokio::time::timeout(DRAIN, p).await;
    }
    let code = exit_code(status);
    ctx.log.line(format_args!(
        "{}: the entrypoint exited with code {code}",
        ctx.job
    ));
    ctx.exited(code, String::new());
}

fn kill_group(pid: u32) {
    if pid > 1 {
        // SAFETY: kill(2) with a negative pid signals a process group; it touches no memory.
        unsafe {
            libc::kill(-(pid as i32), libc::SIGKILL);
        }
    }
}

/// Fetches and lays out the payload: returns the program to run and its working directory.
async fn prepare(ctx: &EntryCtx, ep: &pb::Entrypoint) -> Result<(PathBuf, PathBuf), String> {
    let payload = ep.payload.clone().unwrap_or_default();
    let cache = ctx
        .cache
        .clone()
        .ok_or("this node runs a fixed binary and cannot fetch payloads")?;
    tokio::fs::create_dir_all(&ctx.work_dir)
        .await
        .map_err(|e| format!("cannot create {}: {e}", ctx.work_dir.display()))?;
    match payload.kind {
        Some(pb::payload::Kind::Binary(build)) => {
            let path = cache.get(&build).await.map_err(|e| e.to_string())?;
            Ok((path, ctx.work_dir.clone()))
        }
        Some(pb::payload::Kind::Directory(id)) => {
            let archive = cache.get(&id).await.map_err(|e| e.to_string())?;
            let dir = ctx.work_dir.clone();
            let entry = payload.entrypoint.trim_start_matches("./").to_string();
            tokio::task::spawn_blocking(move || unpack(&archive, &dir).map(|()| dir))
                .await
                .map_err(|e| e.to_string())?
                .map(|dir| (dir.join(entry), ctx.work_dir.clone()))
        }
        None => Err("the job has no payload".into()),
    }
}

/// Writes the files of a `DirArchive` under `dir`.
pub(crate) fn unpack(archive: &Path, dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let bytes = std::fs::read(archive).map_err(|e| format!("cannot read the payload: {e}"))?;
    let files = pb::DirArchive::decode(bytes.as_slice())
        .map_err(|_| "the payload is not a directory archive".to_string())?;
    for f in files.files {
        let rel = Path::new(&f.path);
        if !rel
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(format!("refusing payload path `{}`", f.path));
        }
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&path, &f.data).map_err(|e| format!("{}: {e}", path.display()))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(f.mode & 0o7777))
            .map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}
