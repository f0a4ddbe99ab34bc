//! The node's object service: other nodes and drivers fetch large objects from it, and read
//! its log files (`ReadLog`: a worker process's, or the agent's own; `starling logs`).
//!
//! `Fetch(FetchRequest { object })` streams the object's file (from the store, else from the
//! spill directory) in [`CHUNK`]-sized chunks; the first chunk carries the total size, also for
//! an empty object (which is one empty chunk). A missing object is `NOT_FOUND`.
//!
//! # Invariants
//! - The file is opened once, before the response starts, so a spill or free that happens
//!   during the transfer cannot tear it: the open descriptor keeps the bytes readable.
//! - Chunks are exactly [`CHUNK`] bytes except the last, so a receiver can preallocate.

use std::path::PathBuf;
use std::sync::Arc;

use starling_proto::chunks::{Chunk, FetchRequest};
use starling_proto::jobs::{LogChunk, LogFileRequest};
use starling_proto::rpc::object_service_server::ObjectService;
use starling_proto::security::Scope;
use starling_proto::store_file::{HeaderError, StoreHeader, HEADER_LEN};
use starling_proto::{JobId, TaskId};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::disk::Disk;
use super::logs::{self, Writing};

/// Bytes per streamed chunk.
pub use starling_proto::limits::CHUNK;

/// The gRPC `ObjectService` of one node.
#[derive(Debug)]
pub(crate) struct ObjectServer {
    pub(crate) disk: Arc<Disk>,
    /// Where worker processes' logs are.
    pub(crate) log_dir: PathBuf,
    /// The agent's own log.
    pub(crate) agent_log: PathBuf,
    pub(crate) writing: Writing,
}

#[tonic::async_trait]
impl ObjectService for ObjectServer {
    type FetchStream = ReceiverStream<Result<Chunk, Status>>;

    async fn fetch(
        &self,
        request: Request<FetchRequest>,
    ) -> Result<Response<Self::FetchStream>, Status> {
        let scope = starling_proto::security::Scope::of(&request);
        let request = request.into_inner();
        let id = request.object;
        let (mut file, path) = self.disk.open(id).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Status::not_found(format!(
                    "object {id} is not on this node (neither {} nor {})",
                    self.disk.store_path(id).display(),
                    self.disk.spill_path(id).display()
                ))
            } else {
                Status::internal(format!("cannot open object {id}: {e}"))
            }
        })?;
        let len = file
            .metadata()
            .await
            .map_err(|e| Status::internal(format!("cannot stat {}: {e}", path.display())))?
            .len();
        // Only the object asked for, of the fetcher's head: never a file that merely has its
        // name (see `starling_proto::store_file`).
        let mut header = [0u8; HEADER_LEN];
        let refused = |why: String| {
            Status::data_loss(format!("object {id}: {} refused: {why}", path.display()))
        };
        file.read_exact(&mut header)
            .await
            .map_err(|_| refused(HeaderError::NoHeader.to_string()))?;
        let header = StoreHeader::decode(&header)
            .and_then(|h| h.check(id.0, request.epoch, len).map(|()| h))
            .map_err(|e| refused(e.to_string()))?;
        // A job's credential reads only that job's objects (the header says whose it is).
        if let starling_proto::security::Scope::Job(job) = scope {
            if header.job != job.0 {
                return Err(Status::permission_denied(format!(
                    "a credential of job {job} cannot read object {id} of job {}",
                    starling_proto::JobId(header.job)
                )));
            }
        }
        let total = len - HEADER_LEN as u64;
        // A small window: enough to keep the connection busy, bounded memory per transfer.
        let (tx, rx) = mpsc::channel(4);
        tokio::spawn(starling_proto::chunks::send_file(file, total, tx));
        Ok(Response::new(ReceiverStream::new(rx)))
    }

    async fn read_log(
        &self,
        request: Request<LogFileRequest>,
    ) -> Result<Response<LogChunk>, Status> {
        let scope = Scope::of(&request);
        let r = request.into_inner();
        let job = JobId(r.job);
        // A job's credential reads only its own processes' logs; the agent's names every job.
        if let Scope::Job(own) = scope {
            if r.pid == 0 || own != job {
                return Err(Status::permission_denied(format!(
                    "a credential of job {own} reads only the logs of that job's processes"
                )));
            }
        }
        let (path, writing) = if r.pid == 0 {
            (self.agent_log.clone(), true)
        } else {
            // Asked before the read: a process not writing now wrote everything before it.
            let path = self.log_dir.join(logs::worker_log_name(job, r.pid));
            (path, self.writing.contains(job, r.pid))
        };
        let task = (r.task != 0).then_some(TaskId(r.task));
        let at = path.clone();
        let read = tokio::task::spawn_blocking(move || {
            let mut file = std::fs::File::open(&at)?;
            logs::read_log(&mut file, r.offset, task)
        })
        .await
        .map_err(|e| Status::internal(format!("the log read failed: {e}")))?;
        let (data, offset, at_end) = read.map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Status::not_found(format!("no log {} on this node", path.display()))
            } else {
                Status::internal(format!("cannot read {}: {e}", path.display()))
            }
        })?;
        Ok(Response::new(LogChunk {
            data,
            offset,
            ended: at_end && !writing,
        }))
    }
}
