//! The worker-process pool of one node: start processes for jobs, watch them, replace the ones
//! that die, kill them on `StopJob` and shutdown.
//!
//! Each process is owned by a watcher task that waits for it and reports its exit as a
//! [`ProcEvent::Exited`]; the supervisor keeps, per job, a kill switch per live process. Only
//! the agent's loop touches the supervisor, so its table needs no lock.
//!
//! # Invariants
//! - A process is in its job's table from spawn until its exit is handled or its job is
//!   stopped; a process absent from the table is never restarted.
//! - A process that exits while its job is still in the table is replaced, at most
//!   [`MAX_RESTARTS`] times per [`RESTART_WINDOW`] per job; a replacement the limit holds back
//!   is retried on a later [`Supervisor::tick`], not forgotten.
//! - A process is started, and replaced, with the environment it was asked for (a task's
//!   `env_vars`, set under the agent's own variables): a job's processes of different
//!   environments are its worker pools, which the head never mixes.
//! - No process outlives the supervisor: dropping a kill switch kills the process, and every
//!   command is spawned with `kill_on_drop`, so even an aborted watcher kills its child.
//! - After [`Supervisor::kill_all`] nothing is started again, and after
//!   [`Supervisor::stop_job`] nothing of that job: a job that ended stays ended (a
//!   `StartWorkers` for it that crossed the stop on the wire is ignored).
//! - Except the processes kept for detached actors ([`Supervisor::keep_worker`]): `StopJob`
//!   leaves them running, and their job open so that the head may start a process for the
//!   actor's restart; they are never replaced by the supervisor itself (the head asks when an
//!   actor needs one).

use std::collections::{HashMap, HashSet, VecDeque};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use starling_proto::{JobId, NodeId, TaskEnv};
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::binary::BinaryCache;
use super::error::AgentError;
use super::logs::{spawn_pump, AgentLog, Tee, Writing};
use super::{env, AgentConfig};

/// Replacements allowed per job within [`RESTART_WINDOW`].
pub const MAX_RESTARTS: usize = 5;
/// The window of [`MAX_RESTARTS`].
pub const RESTART_WINDOW: Duration = Duration::from_secs(60);
/// How long a killed process may take to be reaped before we stop waiting for it.
const REAP_TIMEOUT: Duration = Duration::from_secs(5);
/// Linux `ETXTBSY`: the executable is still open for writing somewhere (typically a just-written
/// file inherited for an instant by a concurrently forked child). Retrying shortly fixes it.
const ETXTBSY: i32 = 26;

/// What the watchers and downloads tell the agent's loop.
#[derive(Debug)]
pub(crate) enum ProcEvent {
    /// A worker process exited; `code` is its exit code, or minus the signal that killed it.
    Exited { job: JobId, pid: u32, code: i32 },
    /// A job's binary download finished.
    Binary {
        job: JobId,
        result: Result<PathBuf, AgentError>,
    },
}

/// What every worker process is started with.
#[derive(Debug)]
pub(crate) struct SpawnConfig {
    /// `(name, value)` pairs set on top of the agent's own environment (job id added per job).
    pub env: Vec<(&'static str, String)>,
    pub log_dir: PathBuf,
    /// `AgentConfig::worker_binary`.
    pub fixed_binary: Option<PathBuf>,
    /// The processes whose logs are written, for readers (`ReadLog`).
    pub writing: Writing,
}

impl SpawnConfig {
    pub(crate) fn new(
        config: &AgentConfig,
        node: NodeId,
        store_dir: &Path,
        spill_dir: &Path,
        object_address: &str,
        log_dir: PathBuf,
        writing: Writing,
    ) -> Self {
        let mut env = vec![
            (env::WORKER_HEAD, config.head.clone()),
            (env::NODE_ID, node.0.to_string()),
            (env::STORE_DIR, store_dir.display().to_string()),
            (env::SPILL_DIR, spill_dir.display().to_string()),
            (env::OBJECT_ADDR, object_address.to_string()),
        ];
        if let Some(link) = &config.worker_link {
            env.push((env::WORKER_LINK, link.display().to_string()));
        }
        SpawnConfig {
            env,
            log_dir,
            fixed_binary: config.worker_binary.clone(),
            writing,
        }
    }
}

/// A live process: the switch that kills it, the watcher that reaps it, and the environment it
/// was started with (its replacement gets the same).
struct Proc {
    kill: Option<oneshot::Sender<()>>,
    watcher: JoinHandle<()>,
    env: TaskEnv,
}

enum Binary {
    /// Not on this node (never asked for, or the last download failed).
    Missing,
    Fetching,
    Ready(PathBuf),
}

struct Job {
    build: String,
    binary: Binary,
    /// Processes asked for while the binary downloads, by environment.
    pending: Vec<TaskEnv>,
    procs: HashMap<u32, Proc>,
    /// Processes that died and still need a replacement: their environments.
    debt: Vec<TaskEnv>,
    /// When replacements were started, within the window.
    restarts: VecDeque<Instant>,
    limit_logged: bool,
    /// Processes hosting detached actors, which outlive the job's end.
    kept: HashSet<u32>,
}

/// The worker processes of this node, by job.
pub(crate) struct Supervisor {
    spawn: SpawnConfig,
    cache: Option<Arc<BinaryCache>>,
    jobs: HashMap<JobId, Job>,
    events: mpsc::UnboundedSender<ProcEvent>,
    log: Arc<AgentLog>,
    stopping: bool,
    /// Jobs whose processes' output also goes to the head (multi-node job instances).
    tees: HashMap<JobId, Tee>,
    /// Jobs stopped on this node (job ids are never reused within a registration).
    ended: HashSet<JobId>,
}

impl Supervisor {
    pub(crate) fn new(
        spawn: SpawnConfig,
        cache: Option<Arc<BinaryCache>>,
        events: mpsc::UnboundedSender<ProcEvent>,
        log: Arc<AgentLog>,
    ) -> Self {
        Supervisor {
            spawn,
            cache,
            jobs: HashMap::new(),
            events,
            log,
            stopping: false,
            tees: HashMap::new(),
            ended: HashSet::new(),
        }
    }

    /// The pids of every live process (for tests and status).
    #[cfg(test)]
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.jobs
            .values()
            .flat_map(|j| j.procs.keys().copied())
            .collect()
    }

    /// `StartWorkers`: start `count` more processes for `job` with the environment `env`,
    /// fetching its binary first if needed.
    pub(crate) async fn start_workers(
        &mut self,
        job: JobId,
        build: &str,
        count: u32,
        env: &TaskEnv,
    ) {
        if self.stopping || count == 0 {
            return;
        }
        if self.ended.contains(&job) {
            self.log.line(format_args!(
                "{job}: not starting {count} worker(s): the job was stopped"
            ));
            return;
        }
        let fixed = self.spawn.fixed_binary.clone();
        let entry = self.jobs.entry(job).or_insert_with(|| Job {
            build: build.to_string(),
            binary: fixed.map_or(Binary::Missing, Binary::Ready),
            pending: Vec::new(),
            procs: HashMap::new(),
            debt: Vec::new(),
            restarts: VecDeque::new(),
            limit_logged: false,
            kept: HashSet::new(),
        });
        if entry.build != build {
            self.log.line(format_args!(
                "{job}: asked for build {build} but the job runs build {}; keeping {}",
                entry.build, entry.build
            ));
        }
        match &entry.binary {
            Binary::Ready(path) => {
                let path = path.clone();
                for _ in 0..count {
                    if self.spawn_one(job, &path, env).await.is_err() {
                        // Counted as a death so the restart limit paces the retries.
                        if let Some(j) = self.jobs.get_mut(&job) {
                            j.debt.push(env.clone());
                        }
                    }
                }
            }
            Binary::Fetching => entry.pending.extend((0..count).map(|_| env.clone())),
            Binary::Missing => {
                entry.pending.extend((0..count).map(|_| env.clone()));
                entry.binary = Binary::Fetching;
                let build = entry.build.clone();
                self.fetch(job, build);
            }
        }
    }

    fn fetch(&self, job: JobId, build: String) {
        let events = self.events.clone();
        let Some(cache) = self.cache.clone() else {
            // Unreachable by construction (no cache only with a fixed binary), but report
            // it as a failed download rather than leaving the job waiting.
            let result = Err(AgentError::Binary {
                build,
                message: "no binary cache on this node".to_string(),
            });
            let _ = events.send(ProcEvent::Binary { job, result });
            return;
        };
        self.log
            .line(format_args!("{job}: fetching build {build} from the head"));
        tokio::spawn(async move {
            let result = cache.get(&build).await;
            let _ = events.send(ProcEvent::Binary { job, result });
        });
    }

    /// A download finished: start the processes that waited for it.
    pub(crate) async fn on_binary(&mut self, job: JobId, result: Result<PathBuf, AgentError>) {
        let Some(entry) = self.jobs.get_mut(&job) else {
            return; // Stopped meanwhile.
        };
        let pending = std::mem::take(&mut entry.pending);
        match result {
            Ok(path) => {
                entry.binary = Binary::Ready(path.clone());
                if self.stopping {
                    return;
                }
                for env in pending {
                    if self.spawn_one(job, &path, &env).await.is_err() {
                        if let Some(j) = self.jobs.get_mut(&job) {
                            j.debt.push(env);
                        }
                    }
                }
            }
            Err(e) => {
                entry.binary = Binary::Missing;
                self.log.line(format_args!(
                    "{job}: cannot start {} worker(s): {e}; a later StartWorkers retries",
                    pending.len()
                ));
            }
        }
    }

    /// A process exited: forget it and, if its job still runs, replace it.
    pub(crate) async fn on_exit(&mut self, job: JobId, pid: u32, code: i32) {
        let ours = self.jobs.get_mut(&job).and_then(|j| {
            let kept = j.kept.remove(&pid);
            // A detached actor's process is replaced only when the head asks.
            j.procs.remove(&pid).filter(|_| !kept).map(|p| p.env)
        });
        self.log.line(format_args!(
            "{job}: worker pid {pid} exited with code {code}"
        ));
        if let Some(env) = ours.filter(|_| !self.stopping) {
            if let Some(j) = self.jobs.get_mut(&job) {
                j.debt.push(env);
            }
            self.refill(job).await;
        }
    }

    /// Every heartbeat: live jobs' binaries are marked used, and replacements that the restart
    /// limit held back get another chance.
    pub(crate) async fn tick(&mut self) {
        // The binaries of live jobs are in use (a dead worker restarts from its job's): marked
        // so, the binary cache keeps them.
        for j in self.jobs.values() {
            if let Binary::Ready(path) = &j.binary {
                super::binary::touch(path);
            }
        }
        let owed: Vec<JobId> = self
            .jobs
            .iter()
            .filter(|(_, j)| !j.debt.is_empty())
            .map(|(id, _)| *id)
            .collect();
        for job in owed {
            self.refill(job).await;
        }
    }

    async fn refill(&mut self, job: JobId) {
        loop {
            let Some(j) = self.jobs.get_mut(&job) else {
                return;
            };
            if j.debt.is_empty() || self.stopping {
                return;
            }
            let Binary::Ready(path) = &j.binary else {
                return;
            };
            let path = path.clone();
            let now = Instant::now();
            while j
                .restarts
                .front()
                .is_some_and(|t| now.duration_since(*t) >= RESTART_WINDOW)
            {
                j.restarts.pop_front();
            }
            if j.restarts.len() >= MAX_RESTARTS {
                if !j.limit_logged {
                    j.limit_logged = true;
                    self.log.line(format_args!(
                        "{job}: restart limit reached ({MAX_RESTARTS} per {}s); {} worker(s) \
                         will be restarted when the limit allows",
                        RESTART_WINDOW.as_secs(),
                        j.debt.len()
                    ));
                }
                return;
            }
            j.limit_logged = false;
            j.restarts.push_back(now);
            let env = j.debt.pop().expect("debt checked above");
            if self.spawn_one(job, &path, &env).await.is_err() {
                // Keep the debt; the restart just recorded paces the next attempt.
                if let Some(j) = self.jobs.get_mut(&job) {
                    j.debt.push(env);
                }
                return;
            }
        }
    }

    /// Starts one process of `job` with `env` and records it. Errors are logged here.
    async fn spawn_one(
        &mut self,
        job: JobId,
        binary: &Path,
        env: &TaskEnv,
    ) -> Result<u32, AgentError> {
        let tee = self.tees.get(&job).cloned();
        match spawn_worker(&self.spawn, binary, job, env, &self.events, tee).await {
            Ok((pid, proc)) => {
                let named = if env.is_empty() {
                    String::new()
                } else {
                    format!(", environment {}", env.id())
                };
                self.log.line(format_args!(
                    "{job}: started worker pid {pid} ({}{named})",
                    binary.display()
                ));
                match self.jobs.get_mut(&job) {
                    Some(j) => {
                        j.procs.insert(pid, proc);
                    }
                    // Cannot happen (callers hold the job), but never leave a process unowned.
                    None => kill_and_reap(vec![proc]).await,
                }
                Ok(pid)
            }
            Err(e) => {
                self.log.line(format_args!("{job}: {e}"));
                Err(e)
            }
        }
    }

    /// From now on, the output of `job`'s processes also goes to `tee`.
    pub(crate) fn tee(&mut self, tee: Tee) {
        self.tees.insert(tee.job, tee);
    }

    /// `StopJob`: kill the job's processes and wait until they are gone. Their exits are still
    /// reported (as killed by `SIGKILL`).
    pub(crate) async fn stop_job(&mut self, job: JobId) {
        self.tees.remove(&job);
        let Some(mut j) = self.jobs.remove(&job) else {
            self.ended.insert(job);
            return;
        };
        let (kept, stopped): (HashMap<u32, Proc>, HashMap<u32, Proc>) =
            j.procs.drain().partition(|(pid, _)| j.kept.contains(pid));
        self.log.line(format_args!(
            "{job}: stopping {} worker(s){}",
            stopped.len(),
            if kept.is_empty() {
                String::new()
            } else {
                format!(", keeping {} that host detached actors", kept.len())
            }
        ));
        if kept.is_empty() {
            self.ended.insert(job);
        } else {
            j.procs = kept;
            j.pending.clear();
            j.debt.clear();
            self.jobs.insert(job, j);
        }
        kill_and_reap(stopped.into_values().collect()).await;
    }

    /// `KeepWorker`: process `pid` of `job` hosts a detached actor, so a `StopJob` of the job
    /// leaves it running. Returns whether there was such a process.
    pub(crate) fn keep_worker(&mut self, job: JobId, pid: u32) -> bool {
        match self.jobs.get_mut(&job) {
            Some(j) if j.procs.contains_key(&pid) => {
                j.kept.insert(pid);
                self.log.line(format_args!(
                    "{job}: worker pid {pid} hosts a detached actor: it outlives the job"
                ));
                true
            }
            _ => false,
        }
    }

    /// `KillWorker`: kill one worker process of `job` (its task was force-cancelled). Only a
    /// process this supervisor started is touched; its exit is reported and it is replaced like
    /// any that dies. Returns whether there was such a process.
    pub(crate) fn kill_worker(&mut self, job: JobId, pid: u32) -> bool {
        let Some(p) = self.jobs.get_mut(&job).and_then(|j| j.procs.get_mut(&pid)) else {
            self.log.line(format_args!(
                "{job}: asked to kill worker pid {pid}, which is not one of its workers here"
            ));
            return false;
        };
        if let Some(kill) = p.kill.take() {
            let _ = kill.send(());
        }
        self.log.line(format_args!(
            "{job}: killing worker pid {pid} (its task was force-cancelled)"
        ));
        true
    }

    /// Shutdown: kill every process, wait until they are gone, start nothing afterwards.
    pub(crate) async fn kill_all(&mut self) {
        self.stopping = true;
        let procs: Vec<Proc> = self
            .jobs
            .drain()
            .flat_map(|(_, j)| j.procs.into_values())
            .collect();
        if !procs.is_empty() {
            self.log
                .line(format_args!("killing {} worker(s)", procs.len()));
        }
        kill_and_reap(procs).await;
    }
}

async fn kill_and_reap(mut procs: Vec<Proc>) {
    for p in &mut procs {
        if let Some(kill) = p.kill.take() {
            let _ = kill.send(());
        }
    }
    for p in procs {
        let _ = tokio::time::timeout(REAP_TIMEOUT, p.watcher).await;
    }
}

/// Makes the process `cmd` starts die (SIGKILL) when this agent dies, however it dies: a node
/// whose agent is gone is lost, and its processes must not run on unseen. (Linux delivers the
/// signal when the thread that started the child exits; the agent starts children from its
/// runtime's worker threads, which live as long as the agent.)
pub(crate) fn die_with_agent(cmd: &mut Command) {
    let agent = std::process::id();
    // SAFETY: the closure runs in the child between fork and exec and only makes async-signal-
    // safe calls (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The agent died before the call above: the signal will never come.
            if libc::getppid() as u32 != agent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// Spawns one worker process with its environment, its log pump and its watcher. The task
/// environment `task_env` goes under the agent's own variables, which it cannot override.
async fn spawn_worker(
    config: &SpawnConfig,
    binary: &Path,
    job: JobId,
    task_env: &TaskEnv,
    events: &mpsc::UnboundedSender<ProcEvent>,
    tee: Option<Tee>,
) -> Result<(u32, Proc), AgentError> {
    let mut cmd = Command::new(binary);
    // The worker process ties its life to this agent itself (see `env::AGENT_PID`): with
    // nothing to run between fork and exec, the spawn copies none of the agent's page tables,
    // which for a local cluster's agent are the whole driver's (actor_creation, local cluster:
    // fork and exec's unmapping were 17 % of all CPU time).
    cmd.env(env::AGENT_PID, std::process::id().to_string());
    cmd.envs(task_env.vars().iter().map(|(k, v)| (k, v)))
        .envs(
            config
                .env
                .iter()
                .map(|(k, v)| (*k, super::for_job(k, v, job))),
        )
        .env(env::JOB_ID, job.0.to_string())
        .env(env::WORKER_ENV, task_env.id().0.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut attempt = 0;
    let mut child = loop {
        match cmd.spawn() {
            Ok(child) => break child,
            Err(e) if e.raw_os_error() == Some(ETXTBSY) && attempt < 10 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(10 * attempt)).await;
            }
            Err(source) => {
                return Err(AgentError::Spawn {
                    binary: binary.to_path_buf(),
                    source,
                })
            }
        }
    };
    let pid = child.id().unwrap_or(0);
    let log_path = config.log_dir.join(super::logs::worker_log_name(job, pid));
    config.writing.started(job, pid);
    let file = starling_proto::dirs::append_file(&log_path).ok();
    let pumping = match (child.stdout.take(), child.stderr.take()) {
        (Some(out), Some(err)) => spawn_pump(out, err, file, tee).ok(),
        _ => None,
    };
    let (kill, killed) = oneshot::channel();
    let watcher = tokio::spawn(watch(
        child,
        killed,
        (job, pid),
        events.clone(),
        pumping,
        config.writing.clone(),
    ));
    Ok((
        pid,
        Proc {
            kill: Some(kill),
            watcher,
            env: task_env.clone(),
        },
    ))
}

/// Waits for `child` to exit, or kills it when `killed` fires or its sender is dropped.
async fn watch(
    mut child: Child,
    killed: oneshot::Receiver<()>,
    (job, pid): (JobId, u32),
    events: mpsc::UnboundedSender<ProcEvent>,
    pumping: Option<oneshot::Receiver<()>>,
    writing: Writing,
) {
    let status = tokio::select! {
        status = child.wait() => status,
        _ = killed => {
            let _ = child.start_kill();
            child.wait().await
        }
    };
    // The exit is reported after the output is drained, so a stopped job's logs are complete.
    if let Some(p) = pumping {
        let _ = tokio::time::timeout(REAP_TIMEOUT, p).await;
    }
    writing.ended(job, pid);
    let _ = events.send(ProcEvent::Exited {
        job,
        pid,
        code: exit_code(status),
    });
}

/// A process's exit code, or minus the signal that killed it (`i32::MIN` if waiting failed).
pub(crate) fn exit_code(status: std::io::Result<std::process::ExitStatus>) -> i32 {
    match status {
        Ok(s) => s.code().unwrap_or_else(|| -s.signal().unwrap_or(0)),
        Err(_) => i32::MIN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn supervisor(
        binary: PathBuf,
        log_dir: PathBuf,
    ) -> (Supervisor, mpsc::UnboundedReceiver<ProcEvent>) {
        let (tx, rx) = mpsc::unbounded_channel();
        let spawn = SpawnConfig {
            env: vec![],
            log_dir,
            fixed_binary: Some(binary),
            writing: Writing::default(),
        };
        (
            Supervisor::new(spawn, None, tx, Arc::new(AgentLog::discard())),
            rx,
        )
    }

    /// A worker that dies at once is replaced exactly `MAX_RESTARTS` times within the window.
    #[tokio::test]
    async fn restarts_are_limited() {
        let dir = std::env::temp_dir().join(format!("starling-procs-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (mut sup, mut events) = supervisor("/bin/false".into(), dir.clone());
        sup.start_workers(JobId(1), "b", 1, &TaskEnv::default())
            .await;
        let mut exits = 0;
        while let Ok(Some(ev)) =
            tokio::time::timeout(Duration::from_millis(1500), events.recv()).await
        {
            if let ProcEvent::Exited { job, pid, code } = ev {
                assert_eq!(code, 1);
                exits += 1;
                sup.on_exit(job, pid, code).await;
            }
        }
        assert_eq!(exits, 1 + MAX_RESTARTS);
        assert_eq!(sup.jobs[&JobId(1)].debt.len(), 1);
        sup.tick().await;
        assert!(sup.pids().is_empty());
        sup.kill_all().await;
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A process is started with its task environment under the agent's own variables, and
    /// replaced with the same environment when it dies.
    #[tokio::test]
    async fn a_replacement_gets_the_environment_of_the_process_it_replaces() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("starling-procs-env-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("seen");
        let script = dir.join("worker.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$MODE $STARLING_JOB_ID $STARLING_WORKER_ENV\" >> {}\nexit 3\n",
                out.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700)).unwrap();
        let (mut sup, mut events) = supervisor(script, dir.clone());
        let task_env = TaskEnv::new([
            ("MODE".to_string(), "fast".to_string()),
            // Not the agent's to give away: its own value wins.
            (env::JOB_ID.to_string(), "99".to_string()),
        ]);
        sup.start_workers(JobId(7), "b", 1, &task_env).await;
        let mut exits = 0;
        while exits < 2 {
            let ev = tokio::time::timeout(Duration::from_secs(10), events.recv())
                .await
                .expect("an exit within 10 s")
                .expect("events open");
            if let ProcEvent::Exited { job, pid, code } = ev {
                assert_eq!(code, 3);
                exits += 1;
                sup.on_exit(job, pid, code).await;
            }
        }
        sup.kill_all().await;
        let seen = std::fs::read_to_string(&out).unwrap();
        let want = format!("fast 7 {}", task_env.id().0);
        let lines: Vec<&str> = seen.lines().collect();
        assert!(lines.len() >= 2, "{seen}");
        assert!(lines.iter().all(|l| *l == want), "{seen}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `StopJob` stops the job's processes but the one kept for a detached actor, which runs
    /// on; when it dies it is not replaced, and the job still takes new processes (for the
    /// actor's restart).
    #[tokio::test]
    async fn a_kept_process_outlives_its_job_and_is_not_replaced() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("starling-procs-keep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("worker.sh");
        std::fs::write(&script, "#!/bin/sh\nexec sleep 60\n").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o700)).unwrap();
        let (mut sup, mut events) = supervisor(script, dir.clone());
        let job = JobId(3);
        sup.start_workers(job, "b", 2, &TaskEnv::default()).await;
        let pids = sup.pids();
        assert_eq!(pids.len(), 2);
        assert!(sup.keep_worker(job, pids[0]));
        assert!(!sup.keep_worker(job, 999_999_999));
        sup.stop_job(job).await;
        assert_eq!(sup.pids(), vec![pids[0]]);
        async fn next(events: &mut mpsc::UnboundedReceiver<ProcEvent>) -> (JobId, u32, i32) {
            match tokio::time::timeout(Duration::from_secs(10), events.recv()).await {
                Ok(Some(ProcEvent::Exited { job, pid, code })) => (job, pid, code),
                other => panic!("no exit within 10 s: {:?}", other.is_ok()),
            }
        }
        let (j, pid, code) = next(&mut events).await;
        assert_eq!((j, pid), (job, pids[1]), "the stopped one exits");
        sup.on_exit(j, pid, code).await;
        assert!(sup.kill_worker(job, pids[0]));
        let (j, pid, code) = next(&mut events).await;
        assert_eq!((j, pid), (job, pids[0]));
        sup.on_exit(j, pid, code).await;
        assert!(sup.pids().is_empty(), "a kept process is not replaced");
        sup.start_workers(job, "b", 1, &TaskEnv::default()).await;
        assert_eq!(sup.pids().len(), 1, "the job still takes processes");
        sup.kill_all().await;
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
