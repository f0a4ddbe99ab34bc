//! The head's gRPC service: translate messages, forward to [`super::state::Head`], stream replies.

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use starling_proto::chunks::{BinaryRef, Chunk, FetchRequest};
use starling_proto::jobs::{
    JobInfo, JobRef, JobResult, JobSpec, LogChunk, LogRequest, PoolInfo, PoolRef, PoolSpec,
};
use starling_proto::node::{HeadToNodeBatch, NodeBatch, NodeOp};
use starling_proto::rpc::{head_server, Empty};
use starling_proto::security::Scope;
use starling_proto::session::{ClientBatch, ClientOp, HeadBatch, Hello};
use starling_proto::state::{StateList, TaskList, TaskQuery};
use starling_proto::status::{
    ActorNameReply, ActorNameRequest, PendingReply, PendingRequest, StatusReply, StatusRequest,
};
use starling_proto::NodeId;
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::state::{ClientTx, Head};

type BoxStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

/// The `Head` gRPC service. Cheap to clone.
#[derive(Clone)]
pub struct HeadService {
    head: Arc<Head>,
}

impl std::fmt::Debug for HeadService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HeadService")
    }
}

impl HeadService {
    pub(crate) fn new(head: Arc<Head>) -> Self {
        HeadService { head }
    }

    /// Cluster status, as `starling status` shows it.
    pub fn status_now(&self) -> StatusReply {
        self.head.status(starling_proto::JobId(0))
    }

    /// Opens a session for a client in this process (the local cluster's driver): its ops are
    /// applied by [`HeadService::local_batch`] on the caller's thread, without a socket, and the
    /// head's replies arrive on `tx`, the welcome first.
    pub fn open_local_session(&self, hello: &Hello, tx: ClientTx) -> Result<u64, Status> {
        self.head.open_session(hello, tx)
    }

    /// Applies ops of a local session.
    ///
    /// A driver that submits while the head is past its limit of live tasks waits here for
    /// room (unless it calls from an async context, which must not block).
    pub fn local_batch(&self, client: u64, ops: Vec<ClientOp>) -> Result<(), Status> {
        if self.head.client_batch(client, ops)? && tokio::runtime::Handle::try_current().is_err() {
            self.head.room.wait_blocking();
        }
        Ok(())
    }

    /// Submits `spec`, an actor call the local driver `client` would also send straight to its
    /// actor's worker; `true` if it may (see `Head::submit_direct`). Waits for room as
    /// [`local_batch`](Self::local_batch) does.
    pub fn local_submit_direct(
        &self,
        client: u64,
        spec: starling_proto::TaskSpec,
    ) -> Result<bool, Status> {
        let (full, taken) = self.head.submit_direct(client, spec)?;
        if full && tokio::runtime::Handle::try_current().is_err() {
            self.head.room.wait_blocking();
        }
        Ok(taken)
    }

    /// Ends a local session, releasing what it held.
    pub fn close_local_session(&self, client: u64, why: &str) {
        self.head.close_session(client, why)
    }

    pub(crate) fn close(&self) {
        self.head.close_all();
    }

    /// The job table's file thread (none for a table kept in memory).
    pub(crate) fn files(&self) -> Option<super::files::Files> {
        self.head
            .state
            .lock()
            .out
            .job_files
            .as_ref()
            .map(|f| f.files())
    }

    /// Declares nodes dead once they miss heartbeats for the configured timeout.
    pub(crate) fn spawn_heartbeat_monitor(&self) {
        let head = Arc::downgrade(&self.head);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let Some(head) = head.upgrade() else { return };
                for node in head.silent_nodes() {
                    let why = format!(
                        "heartbeat timeout (nothing heard for {:?})",
                        head.heartbeat_timeout
                    );
                    head.close_node(node, &why);
                }
                // Launching a node forks; keep it off the runtime's threads.
                let h = head.clone();
                let _ = tokio::task::spawn_blocking(move || h.jobs_tick()).await;
            }
        });
    }
}

/// Streams the file at `path` (a binary or payload) in chunks; `NOT_FOUND` if it cannot be opened.
fn stream_file(path: std::path::PathBuf) -> BoxStream<Chunk> {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        let file = match tokio::fs::File::open(&path).await {
            Ok(f) => f,
            Err(e) => {
                let _ = tx
                    .send(Err(Status::not_found(format!("{}: {e}", path.display()))))
                    .await;
                return;
            }
        };
        let total = file.metadata().await.map(|m| m.len()).unwrap_or(0);
        starling_proto::chunks::send_file(file, total, tx).await;
    });
    Box::pin(tokio_stream::wrappers::ReceiverStream::new(rx))
}

/// The largest binary or payload archive the head accepts.
pub const MAX_UPLOAD_BYTES: u64 = 4 << 30;

/// Streams an upload into `tmp` while hashing it, checks its size and the build id the sender
/// claimed, and moves it to `bin_dir/<build>`. Returns the build id.
async fn receive_binary(
    incoming: &mut Streaming<Chunk>,
    tmp: &std::path::Path,
    bin_dir: &std::path::Path,
) -> Result<String, Status> {
    use tokio::io::AsyncWriteExt;
    let io = |e: std::io::Error| Status::internal(format!("storing binary: {e}"));
    let file = starling_proto::dirs::create_file(tmp).map_err(io)?;
    let mut file = tokio::io::BufWriter::new(tokio::fs::File::from_std(file));
    let mut hasher = starling_proto::BuildHasher::new();
    let (mut claimed, mut total, mut received, mut first) = (String::new(), 0u64, 0u64, true);
    while let Some(chunk) = incoming.message().await? {
        if first {
            (claimed, total, first) = (chunk.build, chunk.total, false);
            if total > MAX_UPLOAD_BYTES {
                return Err(Status::resource_exhausted(format!(
                    "a binary of {total} bytes is over the limit of {MAX_UPLOAD_BYTES}"
                )));
            }
        }
        received += chunk.data.len() as u64;
        if received > MAX_UPLOAD_BYTES {
            return Err(Status::resource_exhausted(format!(
                "the upload passed the limit of {MAX_UPLOAD_BYTES} bytes"
            )));
        }
        hasher.update(&chunk.data);
        file.write_all(&chunk.data).await.map_err(io)?;
    }
    if received != total {
        return Err(Status::data_loss(format!(
            "the upload ended after {received} of {total} bytes"
        )));
    }
    let build = hasher.finish();
    if claimed != build {
        return Err(Status::data_loss(format!(
            "the upload's bytes have build id {build}, not the {claimed:?} it was sent as"
        )));
    }
    file.flush().await.map_err(io)?;
    file.into_inner().sync_all().await.map_err(io)?;
    tokio::fs::rename(tmp, bin_dir.join(&build))
        .await
        .map_err(io)?;
    Ok(build)
}

fn valid_build(build: &str) -> Result<(), Status> {
    if !starling_proto::is_build_id(build) {
        return Err(Status::invalid_argument(format!(
            "`{build}` is not a build id"
        )));
    }
    Ok(())
}

#[tonic::async_trait]
impl head_server::Head for HeadService {
    type SessionStream = BoxStream<HeadBatch>;

    async fn session(
        &self,
        request: Request<Streaming<ClientBatch>>,
    ) -> Result<Response<Self::SessionStream>, Status> {
        let scope = Scope::of(&request);
        let mut incoming = request.into_inner();
        let first = incoming
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("session closed before hello"))?;
        let mut ops = first.ops.into_iter();
        let hello = match ops.next() {
            Some(ClientOp::Hello(h)) => h,
            _ => return Err(Status::invalid_argument("a session must start with hello")),
        };
        // A job's processes join that job (its workers, its entrypoint); a new driver, a job
        // of its own, needs the cluster token.
        if hello.job.0 == 0 {
            scope.require_cluster("start a driver of a new job")?;
        } else {
            scope.may_touch(hello.job.0)?;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        let client = self
            .head
            .open_session(&hello, ClientTx::Stream(tx.clone()))?;
        let rest: Vec<ClientOp> = ops.collect();
        if !rest.is_empty() {
            if let Err(e) = self.head.client_batch(client, rest).map(drop) {
                self.head.close_session(client, "malformed first batch");
                return Err(e);
            }
        }
        let head = self.head.clone();
        tokio::spawn(async move {
            let why = loop {
                match incoming.next().await {
                    Some(Ok(batch)) => match head.client_batch(client, batch.ops) {
                        // Past the limit of live tasks: read nothing more of this driver
                        // until there is room (its sends then wait, see `head::room`).
                        // A driver that goes meanwhile is still noticed: its response
                        // stream is dropped.
                        Ok(true) => tokio::select! {
                            _ = head.room.wait() => {}
                            _ = tx.closed() => break "connection closed".to_string(),
                        },
                        Ok(false) => {}
                        Err(status) => {
                            let _ = tx.send(Err(status.clone()));
                            break format!("refused: {}", status.message());
                        }
                    },
                    // A message that does not decode, or does not convert (see `rpc`).
                    Some(Err(status)) if status.code() == tonic::Code::InvalidArgument => {
                        let _ = tx.send(Err(status.clone()));
                        break format!("refused: {}", status.message());
                    }
                    Some(Err(status)) => break format!("connection lost: {}", status.message()),
                    None => break "connection closed".to_string(),
                }
            };
            head.close_session(client, &why);
        });
        Ok(Response::new(Box::pin(UnboundedReceiverStream::new(rx))))
    }

    type AttachStream = BoxStream<HeadToNodeBatch>;

    async fn attach(
        &self,
        request: Request<Streaming<NodeBatch>>,
    ) -> Result<Response<Self::AttachStream>, Status> {
        Scope::of(&request).require_cluster("register a node")?;
        let mut incoming = request.into_inner();
        let first = incoming
            .message()
            .await?
            .ok_or_else(|| Status::invalid_argument("node stream closed before hello"))?;
        let hello = match first.ops.into_iter().next() {
            Some(NodeOp::Hello(h)) => h,
            _ => {
                return Err(Status::invalid_argument(
                    "a node stream must start with hello",
                ))
            }
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let node: NodeId = self.head.open_node(&hello, tx)?;
        let head = self.head.clone();
        tokio::spawn(async move {
            let why = loop {
                match incoming.next().await {
                    Some(Ok(batch)) => head.node_batch(node, batch.ops),
                    Some(Err(status)) => {
                        break format!("agent connection dropped ({})", status.message())
                    }
                    None => break "agent connection dropped".to_string(),
                }
            };
            head.close_node(node, &why);
        });
        Ok(Response::new(Box::pin(UnboundedReceiverStream::new(rx))))
    }

    async fn put_binary(
        &self,
        request: Request<Streaming<Chunk>>,
    ) -> Result<Response<BinaryRef>, Status> {
        let mut incoming = request.into_inner();
        static NEXT: AtomicU64 = AtomicU64::new(0);
        // Each upload its own temporary file: concurrent uploads never share one.
        let tmp = self.head.bin_dir.join(format!(
            ".upload-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let stored = receive_binary(&mut incoming, &tmp, &self.head.bin_dir).await;
        if stored.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        Ok(Response::new(BinaryRef { build: stored? }))
    }

    type GetBinaryStream = BoxStream<Chunk>;

    async fn get_binary(
        &self,
        request: Request<BinaryRef>,
    ) -> Result<Response<Self::GetBinaryStream>, Status> {
        let build = request.into_inner().build;
        valid_build(&build)?;
        let path = self.head.bin_dir.join(&build);
        if !path.exists() {
            return Err(Status::not_found(format!(
                "build {build} was never uploaded"
            )));
        }
        Ok(Response::new(stream_file(path)))
    }

    type FetchStream = BoxStream<Chunk>;

    async fn fetch(
        &self,
        request: Request<FetchRequest>,
    ) -> Result<Response<Self::FetchStream>, Status> {
        let scope = Scope::of(&request);
        let object = request.into_inner().object;
        // A job's credential reads only that job's objects.
        if let Scope::Job(job) = scope {
            match self.head.object_job(object) {
                Some(owner) if owner == job => {}
                Some(owner) => {
                    return Err(Status::permission_denied(format!(
                        "a credential of job {job} cannot read object {object} of job {owner}"
                    )))
                }
                None => {
                    return Err(Status::permission_denied(format!(
                        "a credential of job {job} cannot read object {object}, which no job \
                         of this head made"
                    )))
                }
            }
        }
        let held = self
            .head
            .head_value(object)
            .ok_or_else(|| Status::not_found(format!("object {object} is not held by the head")))?;
        let value = match held {
            super::values::Owned::Bytes(v) => v,
            // Spilled past the head's memory budget: read off the lock, once written.
            super::values::Owned::File(path, files) => tokio::task::spawn_blocking(move || {
                files.flush();
                std::fs::read(&path)
            })
            .await
            .map_err(|e| Status::internal(e.to_string()))?
            .map_err(|e| Status::data_loss(format!("object {object} on the head's disk: {e}")))?,
        };
        let chunks = starling_proto::chunks::of_bytes(&value, String::new())
            .into_iter()
            .map(Ok);
        Ok(Response::new(Box::pin(tokio_stream::iter(chunks))))
    }

    async fn status(
        &self,
        request: Request<StatusRequest>,
    ) -> Result<Response<StatusReply>, Status> {
        let job = request.into_inner().job;
        Ok(Response::new(self.head.status(job)))
    }

    async fn pending_reason(
        &self,
        request: Request<PendingRequest>,
    ) -> Result<Response<PendingReply>, Status> {
        let scope = Scope::of(&request);
        let task = request.into_inner().task;
        // A job's credential asks about its own job's tasks only.
        if let Scope::Job(job) = scope {
            let owner = self.head.object_job(starling_proto::ObjectId::from(task));
            if owner != Some(job) {
                return Err(Status::permission_denied(format!(
                    "a credential of job {job} cannot ask about task {task} of another job"
                )));
            }
        }
        Ok(Response::new(PendingReply {
            reason: self.head.pending_reason(task),
        }))
    }

    async fn get_actor(
        &self,
        request: Request<ActorNameRequest>,
    ) -> Result<Response<ActorNameReply>, Status> {
        let name = request.into_inner().name;
        Ok(Response::new(ActorNameReply {
            actor: self.head.actor_named(&name),
        }))
    }

    async fn submit_job(&self, request: Request<JobSpec>) -> Result<Response<JobInfo>, Status> {
        Scope::of(&request).require_cluster("submit a job")?;
        let head = self.head.clone();
        let spec = request.into_inner();
        let info = tokio::task::spawn_blocking(move || head.submit_job(spec))
            .await
            .map_err(|e| Status::internal(e.to_string()))??;
        Ok(Response::new(info))
    }

    async fn list_jobs(&self, request: Request<Empty>) -> Result<Response<Vec<JobInfo>>, Status> {
        let scope = Scope::of(&request);
        let mut jobs = self.head.state.lock().jobs.list();
        // A job's credential sees its own job only.
        jobs.retain(|j| scope.may_touch(j.id).is_ok());
        Ok(Response::new(jobs))
    }

    async fn get_job(&self, request: Request<JobRef>) -> Result<Response<JobInfo>, Status> {
        let scope = Scope::of(&request);
        let id = request.into_inner().id;
        scope.may_touch(id)?;
        let (info, files) = {
            let g = self.head.state.lock();
            (g.jobs.info(id), g.out.job_files.clone())
        };
        let mut info = info.ok_or_else(|| Status::not_found(format!("unknown job {id}")))?;
        if let Some(files) = files {
            // The result is written by the file thread: wait for what was queued, off the lock.
            let path = files.result_path(id);
            tokio::task::spawn_blocking(move || files.files().flush())
                .await
                .map_err(|e| Status::internal(e.to_string()))?;
            if let Ok(v) = tokio::fs::read(&path).await {
                info.result = v;
            }
        }
        Ok(Response::new(info))
    }

    async fn cancel_job(&self, request: Request<JobRef>) -> Result<Response<JobInfo>, Status> {
        let scope = Scope::of(&request);
        let id = request.into_inner().id;
        scope.may_touch(id)?;
        Ok(Response::new(self.head.cancel_job(id)?))
    }

    async fn delete_job(&self, request: Request<JobRef>) -> Result<Response<Empty>, Status> {
        Scope::of(&request).require_cluster("delete a job")?;
        let mut g = self.head.state.lock();
        let st = &mut *g;
        st.jobs
            .delete(&mut st.out, request.into_inner().id)
            .map_err(super::jobs::status_of)?;
        Ok(Response::new(Empty))
    }

    async fn job_logs(&self, request: Request<LogRequest>) -> Result<Response<LogChunk>, Status> {
        let scope = Scope::of(&request);
        let r = request.into_inner();
        scope.may_touch(r.job)?;
        let (path, ended, instances) = {
            let g = self.head.state.lock();
            let info = g
                .jobs
                .info(r.job)
                .ok_or_else(|| Status::not_found(format!("unknown job {}", r.job)))?;
            let n = info.nodes.len() as u32;
            (
                g.out
                    .job_files
                    .as_ref()
                    .map(|f| f.log_path(r.job, r.instance)),
                g.jobs.has_ended(r.job),
                n,
            )
        };
        if instances > 0 && r.instance >= instances {
            return Err(Status::invalid_argument(format!(
                "job {} has {instances} instance(s): 0..{}",
                r.job,
                instances - 1
            )));
        }
        // Read after the lock; at most 4 MiB per call (followers call again).
        let opened = match &path {
            Some(path) => tokio::fs::File::open(path).await,
            None => Err(std::io::ErrorKind::NotFound.into()),
        };
        let data = match opened {
            Ok(mut f) => {
                use tokio::io::AsyncSeekExt;
                let _ = f.seek(std::io::SeekFrom::Start(r.offset)).await;
                let mut buf = Vec::new();
                let _ = f.take(4 << 20).read_to_end(&mut buf).await;
                buf
            }
            Err(_) => Vec::new(),
        };
        let offset = r.offset + data.len() as u64;
        Ok(Response::new(LogChunk {
            data,
            offset,
            ended: ended.unwrap_or(true),
        }))
    }

    async fn set_job_result(&self, request: Request<JobResult>) -> Result<Response<Empty>, Status> {
        let scope = Scope::of(&request);
        let result = request.into_inner();
        scope.may_touch(result.job)?;
        let mut g = self.head.state.lock();
        let st = &mut *g;
        st.jobs
            .set_result(&mut st.out, result.job, result.outcome)
            .map_err(super::jobs::status_of)?;
        Ok(Response::new(Empty))
    }

    async fn create_pool(&self, request: Request<PoolSpec>) -> Result<Response<PoolInfo>, Status> {
        Scope::of(&request).require_cluster("create a pool")?;
        let can_launch = self.head.launcher.is_some();
        let info = {
            let mut g = self.head.state.lock();
            let st = &mut *g;
            st.jobs
                .create_pool(&mut st.out, request.into_inner(), can_launch)
                .map_err(super::jobs::status_of)?
        };
        // Start its min_nodes now.
        let head = self.head.clone();
        let _ = tokio::task::spawn_blocking(move || head.jobs_tick()).await;
        let name = info.spec.name.clone();
        let g = self.head.state.lock();
        Ok(Response::new(g.jobs.pool_info(&name).unwrap_or(info)))
    }

    async fn list_pools(
        &self,
        _request: Request<Empty>,
    ) -> Result<Response<Vec<PoolInfo>>, Status> {
        let g = self.head.state.lock();
        Ok(Response::new(g.jobs.pools()))
    }

    async fn describe_pool(&self, request: Request<PoolRef>) -> Result<Response<PoolInfo>, Status> {
        let name = request.into_inner().name;
        let g = self.head.state.lock();
        g.jobs
            .pool_info(&name)
            .map(Response::new)
            .ok_or_else(|| Status::not_found(format!("unknown pool `{name}`")))
    }

    async fn delete_pool(&self, request: Request<PoolRef>) -> Result<Response<Empty>, Status> {
        Scope::of(&request).require_cluster("delete a pool")?;
        let name = request.into_inner().name;
        let stop = {
            let mut g = self.head.state.lock();
            let st = &mut *g;
            st.jobs
                .delete_pool(&mut st.out, &name)
                .map_err(super::jobs::status_of)?
        };
        if let Some(l) = &self.head.launcher {
            for pid in stop {
                l.stop(pid);
            }
        }
        Ok(Response::new(Empty))
    }

    async fn list_tasks(&self, request: Request<TaskQuery>) -> Result<Response<TaskList>, Status> {
        let scope = Scope::of(&request);
        let mut query = request.into_inner();
        query.check().map_err(Status::invalid_argument)?;
        // A job's credential reads its own job's records only.
        if let Scope::Job(job) = scope {
            if query.job.is_some_and(|j| j != job) {
                return Err(Status::permission_denied(format!(
                    "a credential of job {job} cannot list the tasks of another job"
                )));
            }
            query.job = Some(job);
        }
        let head = self.head.clone();
        // A query walks up to the whole store: off the I/O threads.
        let list =
            tokio::task::spawn_blocking(move || head.state.lock().core.task_events().query(&query))
                .await
                .map_err(|e| Status::internal(format!("the task query failed: {e}")))?;
        Ok(Response::new(list))
    }

    async fn list_objects(
        &self,
        request: Request<TaskQuery>,
    ) -> Result<Response<StateList>, Status> {
        self.list_state(request, false).await
    }

    async fn list_workers(
        &self,
        request: Request<TaskQuery>,
    ) -> Result<Response<StateList>, Status> {
        self.list_state(request, true).await
    }
}

impl HeadService {
    /// Objects or (`workers`) workers, within what the caller's credential may see.
    async fn list_state(
        &self,
        request: Request<TaskQuery>,
        workers: bool,
    ) -> Result<Response<StateList>, Status> {
        let scope = Scope::of(&request);
        let mut query = request.into_inner();
        if let Scope::Job(job) = scope {
            if query.job.is_some_and(|j| j != job) {
                return Err(Status::permission_denied(format!(
                    "a credential of job {job} cannot list another job's objects or workers"
                )));
            }
            query.job = Some(job);
        }
        let head = self.head.clone();
        let list = tokio::task::spawn_blocking(move || head.list_state(&query, workers))
            .await
            .map_err(|e| Status::internal(format!("the listing failed: {e}")))?
            .map_err(Status::invalid_argument)?;
        Ok(Response::new(list))
    }
}
