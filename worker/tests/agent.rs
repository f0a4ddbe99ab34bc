//! Node agent tests against a fake head: registration, heartbeats and usage, worker processes
//! (logs, exits, replacements, `StopJob`, shutdown), binary download, `FreeObject`, spilling,
//! and the object service. Worker processes are small shell scripts. Every wait is bounded.

// The fake head's streams must yield `Result<_, tonic::Status>`: the generated trait says so.
#![allow(clippy::result_large_err)]

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use anyhow::{bail, Context, Result};
use parking_lot::Mutex;
use starling_proto::chunks::{BinaryRef, Chunk, FetchRequest};
use starling_proto::jobs::{
    JobInfo, JobRef, JobResult, JobSpec, LogChunk, LogRequest, PoolInfo, PoolRef, PoolSpec,
};
use starling_proto::node::{
    HeadToNodeBatch, HeadToNodeOp, NodeBatch, NodeOp, StartWorkers, WorkerExit,
};
use starling_proto::rpc::object_service_client::ObjectServiceClient;
use starling_proto::rpc::{head_server, Empty};
use starling_proto::session::{ClientBatch, HeadBatch};
use starling_proto::status::{PendingReply, PendingRequest, StatusReply, StatusRequest};
use starling_proto::{JobId, NodeId, ObjectId, ResourceSet};
use starling_worker::agent::{self, AgentConfig, AgentError, AgentHandle};
use tokio::sync::mpsc;
use tokio_stream::wrappers::{TcpListenerStream, UnboundedReceiverStream};
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

const WAIT: Duration = Duration::from_secs(10);
const NODE: u64 = 7;

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

/// The head side of the fake: what the test can see and do.
struct FakeHead {
    refuse: Option<String>,
    binaries: HashMap<String, Vec<u8>>,
    ops: mpsc::UnboundedSender<NodeOp>,
    to_node: Mutex<Option<mpsc::UnboundedReceiver<Option<HeadToNodeOp>>>>,
}

#[tonic::async_trait]
impl head_server::Head for FakeHead {
    // The fake head has no jobs or pools: the agent never calls these.
    async fn submit_job(&self, _: Request<JobSpec>) -> Result<Response<JobInfo>, Status> {
        Err(Status::unimplemented("fake head"))
    }
    async fn list_jobs(&self, _: Request<Empty>) -> Result<Response<Vec<JobInfo>>, Status> {
        Err(Status::unimplemented("fake head"))
    }
    async fn get_job(&self, _: Request<JobRef>) -> Result<Response<JobInfo>, Status> {
        Err(Status::unimplemented("fake head"))
    }
    async fn cancel_job(&self, _: Request<JobRef>) -> Result<Response<JobInfo>, Status> {
        Err(Status::unimplemented("fake head"))
    }
    async fn delete_job(&self, _: Request<JobRef>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("fake head"))
    }
    async fn job_logs(&self, _: Request<LogRequest>) -> Result<Response<LogChunk>, Status> {
        Err(Status::unimplemented("fake head"))
    }
    async fn set_job_result(&self, _: Request<JobResult>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("fake head"))
    }
    async fn create_pool(&self, _: Request<PoolSpec>) -> Result<Response<PoolInfo>, Status> {
        Err(Status::unimplemented("fake head"))
    }
    async fn list_pools(&self, _: Request<Empty>) -> Result<Response<Vec<PoolInfo>>, Status> {
        Err(Status::unimplemented("fake head"))
    }
    async fn describe_pool(&self, _: Request<PoolRef>) -> Result<Response<PoolInfo>, Status> {
        Err(Status::unimplemented("fake head"))
    }
    async fn delete_pool(&self, _: Request<PoolRef>) -> Result<Response<Empty>, Status> {
        Err(Status::unimplemented("fake head"))
    }
    async fn list_tasks(
        &self,
        _: Request<starling_proto::state::TaskQuery>,
    ) -> Result<Response<starling_proto::state::TaskList>, Status> {
        Err(Status::unimplemented("fake head"))
    }
    async fn list_objects(
        &self,
        _: Request<starling_proto::state::TaskQuery>,
    ) -> Result<Response<starling_proto::state::StateList>, Status> {
        Err(Status::unimplemented("fake head"))
    }
    async fn list_workers(
        &self,
        _: Request<starling_proto::state::TaskQuery>,
    ) -> Result<Response<starling_proto::state::StateList>, Status> {
        Err(Status::unimplemented("fake head"))
    }

    type SessionStream = BoxStream<HeadBatch>;
    type AttachStream = BoxStream<HeadToNodeBatch>;
    type GetBinaryStream = BoxStream<Chunk>;
    type FetchStream = BoxStream<Chunk>;

    async fn session(
        &self,
        _: Request<Streaming<ClientBatch>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        Err(Status::unimplemented("fake head"))
    }

    async fn attach(
        &self,
        request: Request<Streaming<NodeBatch>>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        if let Some(message) = &self.refuse {
            return Err(Status::failed_precondition(message.clone()));
        }
        let mut incoming = request.into_inner();
        let ops = self.ops.clone();
        tokio::spawn(async move {
            while let Ok(Some(b)) = incoming.message().await {
                for op in b.ops {
                    let _ = ops.send(op);
                }
            }
        });
        let rx = self
            .to_node
            .lock()
            .take()
            .ok_or_else(|| Status::already_exists("attached"))?;
        let first = HeadToNodeBatch {
            ops: vec![HeadToNodeOp::NodeId(NodeId(NODE))],
        };
        // `None` from the test ends the stream (the head "goes away").
        let rest = UnboundedReceiverStream::new(rx)
            .map_while(|op| op.map(|op| Ok(HeadToNodeBatch { ops: vec![op] })));
        Ok(Response::new(Box::pin(
            tokio_stream::once(Ok(first)).chain(rest),
        )))
    }

    async fn put_binary(
        &self,
        _: Request<Streaming<Chunk>>,
    ) -> Result<Response<BinaryRef>, Status> {
        Err(Status::unimplemented("fake head"))
    }

    async fn get_binary(
        &self,
        request: Request<BinaryRef>,
    ) -> Result<Response<Self::GetBinaryStream>, Status> {
        let build = request.into_inner().build;
        let data = self
            .binaries
            .get(&build)
            .cloned()
            .ok_or_else(|| Status::not_found(format!("no build {build}")))?;
        let total = data.len() as u64;
        // Small chunks, so reassembly is exercised.
        let chunks: Vec<Result<Chunk, Status>> = data
            .chunks(7)
            .enumerate()
            .map(|(i, c)| {
                Ok(Chunk {
                    data: c.to_vec(),
                    total: if i == 0 { total } else { 0 },
                    build: String::new(),
                })
            })
            .collect();
        Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
    }

    async fn fetch(&self, _: Request<FetchRequest>) -> Result<Response<Self::FetchStream>, Status> {
        Err(Status::unimplemented("fake head"))
    }

    async fn status(&self, _: Request<StatusRequest>) -> Result<Response<StatusReply>, Status> {
        Err(Status::unimplemented("fake head"))
    }

    async fn pending_reason(
        &self,
        _: Request<PendingRequest>,
    ) -> Result<Response<PendingReply>, Status> {
        Err(Status::unimplemented("fake head"))
    }

    async fn get_actor(
        &self,
        _: Request<starling_proto::status::ActorNameRequest>,
    ) -> Result<Response<starling_proto::status::ActorNameReply>, Status> {
        Err(Status::unimplemented("fake head"))
    }
}

/// The test's end of the fake head.
struct Head {
    addr: String,
    ops: mpsc::UnboundedReceiver<NodeOp>,
    to_node: mpsc::UnboundedSender<Option<HeadToNodeOp>>,
    /// Ops received but not yet asked for (heartbeats are dropped).
    seen: Vec<NodeOp>,
    server: tokio::task::JoinHandle<()>,
}

impl Head {
    async fn start(refuse: Option<&str>, binaries: HashMap<String, Vec<u8>>) -> Result<Head> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?.to_string();
        let (ops_tx, ops) = mpsc::unbounded_channel();
        let (to_node, to_node_rx) = mpsc::unbounded_channel();
        let fake = FakeHead {
            refuse: refuse.map(str::to_string),
            binaries,
            ops: ops_tx,
            to_node: Mutex::new(Some(to_node_rx)),
        };
        let server = tokio::spawn(async move {
            let _ = tonic::transport::Server::builder()
                .add_service(head_server::HeadServer::new(fake))
                .serve_with_incoming(TcpListenerStream::new(listener))
                .await;
        });
        Ok(Head {
            addr,
            ops,
            to_node,
            seen: Vec::new(),
            server,
        })
    }

    fn send(&self, op: HeadToNodeOp) {
        let _ = self.to_node.send(Some(op));
    }

    /// Ends the node stream, as a head that goes away would.
    fn close(&self) {
        let _ = self.to_node.send(None);
    }

    /// The first op (in arrival order) that `pick` accepts, waiting up to `WAIT`.
    async fn expect<T>(&mut self, what: &str, pick: impl Fn(&NodeOp) -> Option<T>) -> Result<T> {
        if let Some(i) = self.seen.iter().position(|op| pick(op).is_some()) {
            let op = self.seen.remove(i);
            return pick(&op).context("picked");
        }
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            let op = tokio::time::timeout_at(deadline, self.ops.recv())
                .await
                .with_context(|| format!("timed out waiting for {what}"))?
                .context("node stream ended")?;
            if let Some(t) = pick(&op) {
                return Ok(t);
            }
            if !matches!(op, NodeOp::Heartbeat) {
                self.seen.push(op);
            }
        }
    }

    async fn expect_exit(&mut self, pid: u32) -> Result<WorkerExit> {
        self.expect(&format!("exit of pid {pid}"), |op| match op {
            NodeOp::WorkerExit(e) if e.pid == pid => Some(e.clone()),
            _ => None,
        })
        .await
    }
}

impl Drop for Head {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// A unique temp directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Result<TempDir> {
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)?
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "starling-agent-test-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir)?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A worker script: prints its environment, a task's output between markers, then sleeps
/// (`exec`, so the pid the agent knows is the one that sleeps).
const WORKER: &str = r#"#!/bin/sh
echo "boot node=$STARLING_NODE_ID job=$STARLING_JOB_ID head=$STARLING_WORKER_HEAD"
echo "dirs store=$STARLING_STORE_DIR spill=$STARLING_SPILL_DIR objects=$STARLING_OBJECT_ADDR"
printf '\036[starling task T42]\n'
printf '\036[starling task T42]\n' >&2
echo "hello from task"
echo "oops" >&2
printf '\036[starling task -]\n'
printf '\036[starling task -]\n' >&2
echo "idle"
exec sleep 1000
"#;

fn write_script(dir: &Path, name: &str, text: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

fn config(head: &Head, root: &Path, worker: Option<PathBuf>) -> AgentConfig {
    AgentConfig {
        head: head.addr.clone(),
        resources: ResourceSet::cpus(2.0).with("disk", 1.0),
        gpu_ids: Vec::new(),
        pool: "p".to_string(),
        store_dir: root.join("store"),
        spill_dir: root.join("spill"),
        store_cap_bytes: 1 << 30,
        log_dir: root.join("logs"),
        worker_binary: worker,
        worker_link: None,
        cache_dir: root.join("cache"),
        object_bind: Some("127.0.0.1:0".parse().expect("socket address")),
        object_tls: None,
        heartbeat: Duration::from_millis(100),
        connect_timeout: Duration::from_secs(5),
        // The fake head takes one registration only: a lost head stays lost.
        reconnect_timeout: Duration::from_millis(500),
        credentials: Default::default(),
        log_to_stderr: false,
    }
}

/// The pids of `job`'s worker log files.
fn worker_pids(log_dir: &Path, job: u64) -> Result<Vec<u32>> {
    let prefix = format!("worker-J{job}-");
    let mut pids = Vec::new();
    for e in std::fs::read_dir(log_dir)? {
        let name = e?.file_name().to_string_lossy().into_owned();
        if let Some(pid) = name
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_suffix(".log"))
        {
            pids.push(pid.parse()?);
        }
    }
    pids.sort_unstable();
    Ok(pids)
}

async fn eventually<T>(what: &str, mut check: impl FnMut() -> Result<Option<T>>) -> Result<T> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(t) = check()? {
            return Ok(t);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn alive(pid: u32) -> bool {
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

async fn start(cfg: AgentConfig) -> Result<AgentHandle> {
    Ok(tokio::time::timeout(WAIT, agent::start(cfg))
        .await
        .context("start timed out")??)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registers_and_reports() -> Result<()> {
    let tmp = TempDir::new("register")?;
    let mut head = Head::start(None, HashMap::new()).await?;
    let agent = start(config(&head, &tmp.0, None)).await?;
    assert_eq!(agent.node_id(), NodeId(NODE));
    let hello = head
        .expect("hello", |op| match op {
            NodeOp::Hello(h) => Some(h.clone()),
            _ => None,
        })
        .await?;
    assert_eq!(hello.version, starling_proto::PROTOCOL_VERSION);
    assert_eq!(hello.object_address, agent.object_address().to_string());
    assert_eq!(hello.pool, "p");
    assert_eq!(hello.previous_id, None);
    assert_eq!(
        Path::new(&hello.store_dir),
        std::fs::canonicalize(tmp.0.join("store"))?
    );
    assert_eq!(hello.resources, ResourceSet::cpus(2.0).with("disk", 1.0));
    for _ in 0..3 {
        head.expect("heartbeat", |op| {
            matches!(op, NodeOp::Heartbeat).then_some(())
        })
        .await?;
    }
    std::fs::write(tmp.0.join("store/5"), b"12345")?;
    head.expect("usage", |op| match op {
        NodeOp::Usage(u) if u.objects == 1 && u.memory_bytes == 5 => Some(()),
        _ => None,
    })
    .await?;
    assert!(tmp.0.join("logs/agent-N7.log").exists());
    tokio::time::timeout(WAIT, agent.shutdown()).await?;
    // The agent made the store and spill directories, so it removes them; logs stay.
    assert!(!tmp.0.join("store").exists() && !tmp.0.join("spill").exists());
    assert!(tmp.0.join("logs/agent-N7.log").exists());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_are_logged_replaced_and_stopped() -> Result<()> {
    let tmp = TempDir::new("workers")?;
    let script = write_script(&tmp.0, "worker.sh", WORKER)?;
    let mut head = Head::start(None, HashMap::new()).await?;
    let agent = start(config(&head, &tmp.0, Some(script))).await?;
    let logs = tmp.0.join("logs");
    head.send(HeadToNodeOp::StartWorkers(StartWorkers {
        job: JobId(3),
        build: "b".into(),
        count: 2,
        env: Default::default(),
    }));
    let pids = eventually("two worker logs", || {
        let p = worker_pids(&logs, 3)?;
        Ok((p.len() == 2).then_some(p))
    })
    .await?;

    // The log is tagged by task and stream, markers stripped, environment as documented.
    // stdout and stderr are separate pipes read by separate tasks, so the last line of one
    // can land before the last line of the other: wait for both.
    let log = logs.join(format!("worker-J3-{}.log", pids[0]));
    let text = eventually("a complete log", || {
        let t = std::fs::read_to_string(&log)?;
        Ok((t.contains("[-] out|idle") && t.contains("err|oops")).then_some(t))
    })
    .await?;
    let store = std::fs::canonicalize(tmp.0.join("store"))?;
    let spill = std::fs::canonicalize(tmp.0.join("spill"))?;
    let expected = [
        format!("[-] out|boot node=7 job=3 head={}", head.addr),
        format!(
            "[-] out|dirs store={} spill={} objects={}",
            store.display(),
            spill.display(),
            agent.object_address()
        ),
        "[T42] out|hello from task".to_string(),
        "[-] out|idle".to_string(),
    ];
    let out: Vec<&str> = text.lines().filter(|l| l.contains("out|")).collect();
    assert_eq!(out, expected, "log:\n{text}");
    let err: Vec<&str> = text.lines().filter(|l| l.contains("err|")).collect();
    assert_eq!(err, ["[T42] err|oops"], "log:\n{text}");
    assert!(!text.contains('\x1e'));

    // A worker killed from outside is reported and replaced.
    let killed = pids[0];
    std::process::Command::new("kill")
        .args(["-9", &killed.to_string()])
        .status()?;
    let exit = head.expect_exit(killed).await?;
    assert_eq!((exit.job, exit.code), (JobId(3), -9));
    let now = eventually("a replacement", || {
        let p = worker_pids(&logs, 3)?;
        Ok((p.len() == 3).then_some(p))
    })
    .await?;
    let replacement = *now.iter().find(|p| !pids.contains(p)).context("new pid")?;
    eventually("the replacement to run", || {
        Ok(alive(replacement).then_some(()))
    })
    .await?;

    // KillWorker (a force-cancelled task) kills a worker of the job it names, never another
    // job's process or one the agent did not start; ops are handled in order, so the two
    // refused ones come first: had the first killed `replacement`, it would be dead by the
    // time the third's exit is reported.
    head.send(HeadToNodeOp::KillWorker {
        job: JobId(4),
        pid: replacement,
    });
    head.send(HeadToNodeOp::KillWorker {
        job: JobId(3),
        pid: std::process::id(),
    });
    head.send(HeadToNodeOp::KillWorker {
        job: JobId(3),
        pid: pids[1],
    });
    let exit = head.expect_exit(pids[1]).await?;
    assert_eq!((exit.job, exit.code), (JobId(3), -9));
    assert!(alive(replacement), "KillWorker killed another worker");
    let now = eventually("a replacement for the killed worker", || {
        let p = worker_pids(&logs, 3)?;
        Ok((p.len() == 4).then_some(p))
    })
    .await?;
    let second = *now
        .iter()
        .find(|p| !pids.contains(p) && **p != replacement)
        .context("new pid")?;
    eventually("the second replacement to run", || {
        Ok(alive(second).then_some(()))
    })
    .await?;
    let live = [replacement, second];

    // StopJob kills the rest, reports them, and starts nothing new.
    head.send(HeadToNodeOp::StopJob(JobId(3)));
    for pid in live {
        let exit = head.expect_exit(pid).await?;
        assert_eq!(exit.code, -9);
        assert!(!alive(pid), "pid {pid} survived StopJob");
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        worker_pids(&logs, 3)?.len(),
        4,
        "a worker was started after StopJob"
    );
    agent.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_and_drop_leave_no_process() -> Result<()> {
    let tmp = TempDir::new("shutdown")?;
    let script = write_script(&tmp.0, "worker.sh", WORKER)?;
    let head = Head::start(None, HashMap::new()).await?;
    let logs = tmp.0.join("logs");

    let agent = start(config(&head, &tmp.0, Some(script.clone()))).await?;
    head.send(HeadToNodeOp::StartWorkers(StartWorkers {
        job: JobId(1),
        build: "b".into(),
        count: 3,
        env: Default::default(),
    }));
    let pids = eventually("three live workers", || {
        let p = worker_pids(&logs, 1)?;
        Ok((p.len() == 3 && p.iter().all(|p| alive(*p))).then_some(p))
    })
    .await?;
    tokio::time::timeout(WAIT, agent.shutdown())
        .await
        .context("shutdown timed out")?;
    for pid in &pids {
        assert!(!alive(*pid), "pid {pid} outlived shutdown");
    }

    // Dropping the handle stops the agent too.
    let head = Head::start(None, HashMap::new()).await?;
    let agent = start(config(&head, &tmp.0, Some(script))).await?;
    head.send(HeadToNodeOp::StartWorkers(StartWorkers {
        job: JobId(2),
        build: "b".into(),
        count: 1,
        env: Default::default(),
    }));
    let pid = eventually("a live worker", || {
        let p = worker_pids(&logs, 2)?;
        Ok(p.first().copied().filter(|p| alive(*p)))
    })
    .await?;
    drop(agent);
    eventually("the worker to die after drop", || {
        Ok((!alive(pid)).then_some(()))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_the_binary_by_build() -> Result<()> {
    let tmp = TempDir::new("binary")?;
    let build = starling_proto::build_id_of(WORKER.as_bytes());
    let binaries = HashMap::from([(build.clone(), WORKER.as_bytes().to_vec())]);
    let mut head = Head::start(None, binaries).await?;
    let agent = start(config(&head, &tmp.0, None)).await?;
    let logs = tmp.0.join("logs");
    // An unknown build fails quietly (logged); the known one runs, twice from one download.
    head.send(HeadToNodeOp::StartWorkers(StartWorkers {
        job: JobId(8),
        build: "f".repeat(64),
        count: 1,
        env: Default::default(),
    }));
    for _ in 0..2 {
        head.send(HeadToNodeOp::StartWorkers(StartWorkers {
            job: JobId(9),
            build: build.clone(),
            count: 1,
            env: Default::default(),
        }));
    }
    let pids = eventually("two workers of the downloaded build", || {
        let p = worker_pids(&logs, 9)?;
        Ok((p.len() == 2).then_some(p))
    })
    .await?;
    let cached = tmp.0.join("cache").join(&build);
    assert_eq!(std::fs::read(&cached)?, WORKER.as_bytes());
    assert_eq!(
        std::fs::metadata(&cached)?.permissions().mode() & 0o777,
        0o700
    );
    assert!(worker_pids(&logs, 8)?.is_empty());
    eventually("the failed download in the agent log", || {
        let log = std::fs::read_to_string(logs.join("agent-N7.log"))?;
        Ok(log.contains("J8: cannot start 1 worker(s)").then_some(()))
    })
    .await?;
    head.send(HeadToNodeOp::StopJob(JobId(9)));
    for pid in pids {
        head.expect_exit(pid).await?;
    }
    agent.shutdown().await;
    Ok(())
}

/// A binary is run only if its bytes are the build they are named for: a file planted in the
/// cache under a build's name is removed and the real build downloaded, and bytes the head
/// sends under the wrong name are refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_binary_is_never_run() -> Result<()> {
    let tmp = TempDir::new("tampered")?;
    let build = starling_proto::build_id_of(WORKER.as_bytes());
    let planted = tmp.0.join("planted-ran");
    let forged_ran = tmp.0.join("forged-ran");
    let forged =
        |marker: &Path| format!("#!/bin/sh\ntouch {}\nexec sleep 1000\n", marker.display());
    // The head serves a forged file under the name of other bytes.
    let forged_build = starling_proto::build_id_of(b"what the driver uploaded");
    let binaries = HashMap::from([
        (build.clone(), WORKER.as_bytes().to_vec()),
        (forged_build.clone(), forged(&forged_ran).into_bytes()),
    ]);
    let mut head = Head::start(None, binaries).await?;
    let cache = tmp.0.join("cache");
    starling_proto::dirs::ensure_dir(&cache)?;
    write_script(&cache, &build, &forged(&planted))?;
    let agent = start(config(&head, &tmp.0, None)).await?;
    let logs = tmp.0.join("logs");
    head.send(HeadToNodeOp::StartWorkers(StartWorkers {
        job: JobId(9),
        build: build.clone(),
        count: 1,
        env: Default::default(),
    }));
    head.send(HeadToNodeOp::StartWorkers(StartWorkers {
        job: JobId(8),
        build: forged_build.clone(),
        count: 1,
        env: Default::default(),
    }));
    let pids = eventually("a worker of the real build", || {
        let p = worker_pids(&logs, 9)?;
        Ok((p.len() == 1).then_some(p))
    })
    .await?;
    let log = eventually("both refusals in the agent log", || {
        let log = std::fs::read_to_string(logs.join("agent-N7.log"))?;
        Ok((log.contains(&format!("refused cached build {build}"))
            && log.contains("J8: cannot start 1 worker(s)"))
        .then_some(log))
    })
    .await?;
    assert!(log.contains("whose build id is"), "{log}");
    assert_eq!(std::fs::read(cache.join(&build))?, WORKER.as_bytes());
    assert!(!cache.join(&forged_build).exists());
    assert!(!planted.exists(), "the planted file ran");
    assert!(!forged_ran.exists(), "the forged download ran");
    assert!(worker_pids(&logs, 8)?.is_empty());
    head.send(HeadToNodeOp::StopJob(JobId(9)));
    for pid in pids {
        head.expect_exit(pid).await?;
    }
    agent.shutdown().await;
    Ok(())
}

/// Writes `data` as a store file of object `id` under head `epoch` (header first), made
/// elsewhere with modification time `modified` and renamed in, as a worker does.
fn store_file(dir: &Path, id: u64, epoch: u64, data: &[u8], modified: SystemTime) -> Result<()> {
    store_file_of(dir, id, epoch, 0, data, modified)
}

/// [`store_file`] of an object of `job`.
fn store_file_of(
    dir: &Path,
    id: u64,
    epoch: u64,
    job: u64,
    data: &[u8],
    modified: SystemTime,
) -> Result<()> {
    use starling_proto::store_file::StoreHeader;
    let header = StoreHeader {
        object: id,
        epoch,
        size: data.len() as u64,
        job,
    };
    let tmp = dir
        .parent()
        .context("a store has a parent")?
        .join(format!(".{id}.tmp"));
    let mut bytes = header.encode().to_vec();
    bytes.extend_from_slice(data);
    std::fs::write(&tmp, &bytes)?;
    std::fs::File::options()
        .write(true)
        .open(&tmp)?
        .set_modified(modified)?;
    std::fs::rename(&tmp, dir.join(id.to_string()))?;
    Ok(())
}

/// With a certificate, the object service speaks TLS only: a fetcher trusting the cluster's CA
/// gets the object, a plain-text one (whose token would cross the network in clear) does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_are_served_over_tls_when_the_node_has_a_certificate() -> Result<()> {
    use starling_proto::security::{Credentials, ServerTls, TlsCa};
    let certs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cli/tests/certs");
    let tmp = TempDir::new("objects-tls")?;
    let head = Head::start(None, HashMap::new()).await?;
    let mut cfg = config(&head, &tmp.0, None);
    cfg.object_tls = Some(ServerTls::read(
        &certs.join("server.pem"),
        &certs.join("server.key"),
    )?);
    let store = tmp.0.join("store");
    let agent = start(cfg).await?;
    let data = vec![7u8; 300_000];
    store_file(&store, 1, 0, &data, SystemTime::now())?;

    let creds = Credentials {
        token: None,
        tls_ca: Some(TlsCa::read(&certs.join("ca.pem"))?),
    };
    let https = format!("https://{}", agent.object_address());
    let channel = creds.endpoint(&https)?.connect().await?;
    let mut client =
        ObjectServiceClient::new(channel).max_decoding_message_size(agent::MAX_MESSAGE_BYTES);
    let mut chunks = client
        .fetch(FetchRequest {
            object: ObjectId(1),
            epoch: 0,
        })
        .await?
        .into_inner();
    let mut got = Vec::new();
    while let Some(c) = tokio::time::timeout(WAIT, chunks.message()).await?? {
        got.extend_from_slice(&c.data);
    }
    assert!(got == data, "the object came back different over TLS");

    let plain = async {
        let mut client =
            ObjectServiceClient::connect(format!("http://{}", agent.object_address())).await?;
        client
            .fetch(FetchRequest {
                object: ObjectId(1),
                epoch: 0,
            })
            .await
            .map_err(anyhow::Error::from)
    };
    let answer = tokio::time::timeout(WAIT, plain).await?;
    assert!(answer.is_err(), "a plain-text fetch was served");
    agent.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frees_spills_and_serves_objects() -> Result<()> {
    use starling_proto::store_file::HEADER_LEN;
    let hdr = HEADER_LEN as u64;
    let tmp = TempDir::new("objects")?;
    let mut head = Head::start(None, HashMap::new()).await?;
    let mut cfg = config(&head, &tmp.0, None);
    // Room for the three 1 MiB objects and the small files planted below (the planted ones are
    // the newest, so going over the cap with them would spill object 3, the oldest left).
    cfg.store_cap_bytes = (3 << 20) + 4096;
    let (store, spill) = (tmp.0.join("store"), tmp.0.join("spill"));
    // A store directory that already holds an object: the agent empties it.
    std::fs::create_dir_all(&store)?;
    std::fs::write(store.join("7"), b"left by an earlier agent")?;
    let agent = start(cfg).await?;
    assert!(!store.join("7").exists(), "a stale object file was kept");
    // Five 1 MiB objects (oldest first), one of them larger and patterned for the fetch check.
    let big: Vec<u8> = (0..(2 << 20) + 12345)
        .map(|i: u32| (i % 251) as u8)
        .collect();
    let now = SystemTime::now();
    for id in 1..=5u64 {
        let data = if id == 2 {
            big.clone()
        } else {
            vec![id as u8; 1 << 20]
        };
        store_file(&store, id, 0, &data, now - Duration::from_secs(100 - id))?;
    }
    std::fs::write(store.join("9.tmp"), b"partial")?;

    // Total 6 MiB + change; the cap is 3 MiB: objects 1 and 2 (the oldest) must go.
    let usage = head
        .expect("usage after spill", |op| match op {
            NodeOp::Usage(u) if u.spilled_bytes > 0 => Some(*u),
            _ => None,
        })
        .await?;
    assert_eq!(usage.memory_bytes, (3 << 20) + 3 * hdr + 7);
    assert_eq!(usage.spilled_bytes, (1 << 20) + big.len() as u64 + 2 * hdr);
    assert_eq!(usage.objects, 5);
    assert!(spill.join("1").exists() && spill.join("2").exists());
    assert!(!store.join("1").exists() && store.join("3").exists() && store.join("9.tmp").exists());

    // Fetch serves stored and spilled objects byte for byte; a missing one is NOT_FOUND.
    let mut client = ObjectServiceClient::connect(format!("http://{}", agent.object_address()))
        .await?
        .max_decoding_message_size(agent::MAX_MESSAGE_BYTES);
    for (id, expected) in [(2u64, big.clone()), (3, vec![3u8; 1 << 20])] {
        let mut chunks = client
            .fetch(FetchRequest {
                object: ObjectId(id),
                epoch: 0,
            })
            .await?
            .into_inner();
        let mut got = Vec::new();
        let mut sizes = Vec::new();
        let mut total = None;
        while let Some(c) = tokio::time::timeout(WAIT, chunks.message()).await?? {
            total.get_or_insert(c.total);
            sizes.push(c.data.len());
            got.extend_from_slice(&c.data);
        }
        assert_eq!(total, Some(expected.len() as u64));
        assert!(sizes[..sizes.len() - 1]
            .iter()
            .all(|s| *s == agent::FETCH_CHUNK));
        assert!(got == expected, "object {id} differs");
    }
    let missing = client
        .fetch(FetchRequest {
            object: ObjectId(404),
            epoch: 0,
        })
        .await;
    let status = missing
        .err()
        .context("fetching a missing object succeeded")?;
    assert_eq!(status.code(), tonic::Code::NotFound);
    assert!(status.message().contains("O404"), "{}", status.message());

    // A file with an object's name is served only if its header says it is that object of
    // the fetcher's head: planted bytes, another object's file and an earlier head's are not.
    std::fs::write(store.join("10"), vec![0u8; 100])?;
    store_file(&store, 11, 0xe1, b"object twelve", now)?;
    std::fs::rename(store.join("11"), store.join("12"))?;
    store_file(&store, 13, 0xe1, b"an earlier head's", now)?;
    for (object, epoch, says) in [
        (10, 0, "not a store file"),
        (12, 0xe1, "holds object 11, not 12"),
        (13, 0xe2, "head epoch e1, not e2"),
    ] {
        let refused = client
            .fetch(FetchRequest {
                object: ObjectId(object),
                epoch,
            })
            .await;
        let status = refused.err().context("a mismatched file was served")?;
        assert_eq!(status.code(), tonic::Code::DataLoss, "{}", status.message());
        assert!(status.message().contains(says), "{}", status.message());
        std::fs::remove_file(store.join(object.to_string()))?;
    }

    // FreeObject deletes from the store and from the spill directory.
    head.send(HeadToNodeOp::FreeObject(ObjectId(1)));
    head.send(HeadToNodeOp::FreeObject(ObjectId(4)));
    eventually("objects 1 and 4 freed", || {
        Ok((!spill.join("1").exists() && !store.join("4").exists()).then_some(()))
    })
    .await?;
    head.expect("usage after free", |op| match op {
        NodeOp::Usage(u) if u.objects == 3 => Some(()),
        _ => None,
    })
    .await?;
    agent.shutdown().await;
    // A store directory that existed before the agent is left in place.
    assert!(store.join("3").exists());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_the_head_stops_workers() -> Result<()> {
    let tmp = TempDir::new("lost")?;
    let script = write_script(&tmp.0, "worker.sh", WORKER)?;
    let head = Head::start(None, HashMap::new()).await?;
    let mut agent = start(config(&head, &tmp.0, Some(script))).await?;
    head.send(HeadToNodeOp::StartWorkers(StartWorkers {
        job: JobId(4),
        build: "b".into(),
        count: 1,
        env: Default::default(),
    }));
    let logs = tmp.0.join("logs");
    let pid = eventually("a live worker", || {
        Ok(worker_pids(&logs, 4)?
            .first()
            .copied()
            .filter(|p| alive(*p)))
    })
    .await?;
    head.close();
    let ended = tokio::time::timeout(WAIT, agent.wait())
        .await
        .context("wait timed out")?;
    match ended {
        Err(AgentError::HeadLost { addr, .. }) => assert_eq!(addr, head.addr),
        other => bail!("expected HeadLost, got {other:?}"),
    }
    assert!(!alive(pid), "the worker outlived the head");
    // Asking again gives the same answer at once.
    assert!(matches!(
        agent.wait().await,
        Err(AgentError::HeadLost { .. })
    ));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_and_refusing_heads_are_typed_errors() -> Result<()> {
    let tmp = TempDir::new("refused")?;
    // A port that refuses connections: bound for the whole test (so no head started here or
    // by another test can take it), never listening.
    let closed = tokio::net::TcpSocket::new_v4()?;
    closed.bind("127.0.0.1:0".parse()?)?;
    let port = closed.local_addr()?.port();
    let head = Head::start(None, HashMap::new()).await?;
    let mut cfg = config(&head, &tmp.0, None);
    cfg.head = format!("http://127.0.0.1:{port}");
    cfg.connect_timeout = Duration::from_millis(400);
    let began = std::time::Instant::now();
    match tokio::time::timeout(WAIT, agent::start(cfg.clone())).await? {
        Err(AgentError::HeadUnreachable { addr }) => assert_eq!(addr, cfg.head),
        other => bail!("expected HeadUnreachable, got {other:?}"),
    }
    assert!(began.elapsed() < Duration::from_secs(3));

    let refusing = Head::start(Some("protocol version 1 is not supported"), HashMap::new()).await?;
    match tokio::time::timeout(WAIT, agent::start(config(&refusing, &tmp.0, None))).await? {
        Err(AgentError::Refused { message }) => {
            assert!(
                message.contains("protocol version 1 is not supported"),
                "{message}"
            )
        }
        other => bail!("expected Refused, got {other:?}"),
    }
    Ok(())
}

/// A job's credential fetches that job's objects from a node and no other job's; the cluster
/// token fetches any. The store file's header says whose an object is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_s_credential_fetches_only_that_job_s_objects() -> Result<()> {
    use starling_proto::security::{Credentials, Token};
    let tmp = TempDir::new("objects-scoped")?;
    let head = Head::start(None, HashMap::new()).await?;
    let cluster = Token::parse("cluster-token-for-scopes")?;
    let mut cfg = config(&head, &tmp.0, None);
    cfg.credentials.token = Some(cluster.clone());
    let store = tmp.0.join("store");
    let agent = start(cfg).await?;
    store_file_of(&store, 5, 0, 3, b"job 3's object", SystemTime::now())?;

    let fetch = |token: Token| {
        let addr = agent.object_address();
        async move {
            let creds = Credentials {
                token: Some(token),
                tls_ca: None,
            };
            let channel = creds.endpoint(&addr.to_string())?.connect().await?;
            let mut client = ObjectServiceClient::new(creds.intercept(channel));
            let answer = client
                .fetch(FetchRequest {
                    object: ObjectId(5),
                    epoch: 0,
                })
                .await;
            let mut got = Vec::new();
            match answer {
                Ok(stream) => {
                    let mut chunks = stream.into_inner();
                    while let Some(c) = tokio::time::timeout(WAIT, chunks.message()).await?? {
                        got.extend_from_slice(&c.data);
                    }
                    Ok::<_, anyhow::Error>(Ok(got))
                }
                Err(status) => Ok(Err(status)),
            }
        }
    };
    let own =
        tokio::time::timeout(WAIT, fetch(cluster.for_job(starling_proto::JobId(3)))).await??;
    assert_eq!(own.expect("job 3 reads its object"), b"job 3's object");
    let any = tokio::time::timeout(WAIT, fetch(cluster.clone())).await??;
    assert_eq!(any.expect("the cluster token reads any"), b"job 3's object");
    let other =
        tokio::time::timeout(WAIT, fetch(cluster.for_job(starling_proto::JobId(4)))).await??;
    let status = other.expect_err("job 4 read job 3's object");
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    assert!(
        status.message().contains("of job J3"),
        "{}",
        status.message()
    );
    agent.shutdown().await;
    Ok(())
}
