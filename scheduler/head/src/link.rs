//! The head's end of the session link (`starling_proto::link`): worker processes on the head's
//! own host open their sessions on a Unix socket in the head's private data directory.
//!
//! One thread accepts; each connection gets a thread that checks its credential and hello as
//! the gRPC `Session` does, then reads its batches and applies them under the head's lock
//! (`Head::client_batch`), the same handlers as every other session. What the head sends it is
//! queued under the lock and written after (`ClientTx::Link`). A connection's end, clean or
//! not, closes its session.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use starling_proto::link::{self, FrameReader, LinkWriter, AUTH, BATCH, REFUSED};
use starling_proto::rpc::Wire;
use starling_proto::security::RequireToken;
use starling_proto::session::{ClientBatch, ClientOp};

use super::state::{ClientTx, Head};

/// How long a new connection has to present its credential and hello.
const HELLO_LIMIT: Duration = Duration::from_secs(10);

/// At most this many ops of batches that arrived together are applied under one lock.
const MAX_OPS_TOGETHER: usize = 8192;

/// The link's socket and its accepting thread.
pub(crate) struct LinkListener {
    path: PathBuf,
    closed: Arc<AtomicBool>,
}

impl LinkListener {
    /// Listens at `path` (in the head's data directory: 0700), socket file 0600.
    pub(crate) fn start(
        path: PathBuf,
        head: Arc<Head>,
        auth: RequireToken,
    ) -> std::io::Result<LinkListener> {
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
        let closed = Arc::new(AtomicBool::new(false));
        let stop = closed.clone();
        std::thread::Builder::new()
            .name("starling-link".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let Ok(conn) = conn else { continue };
                    let (head, auth) = (head.clone(), auth.clone());
                    let _ = std::thread::Builder::new()
                        .name("starling-link-session".into())
                        .spawn(move || serve(conn, &head, &auth));
                }
            })?;
        Ok(LinkListener { path, closed })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Stops accepting and removes the socket (sessions end as the head closes them).
    pub(crate) fn stop(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        // Wake the accepting thread.
        let _ = UnixStream::connect(&self.path);
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for LinkListener {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Tells the peer why it is refused (best effort: it is being dropped anyway).
fn refuse(mut stream: &UnixStream, why: &str) {
    let mut frame = Vec::new();
    link::put_frame(REFUSED, why.as_bytes(), &mut frame);
    let _ = stream.write_all(&frame);
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// A batch frame's ops, or why the frame is not one.
fn batch(frame: Result<Option<(u8, Vec<u8>)>, link::LinkError>) -> Result<Vec<ClientOp>, String> {
    match frame {
        Ok(Some((BATCH, payload))) => {
            ClientBatch::from_bytes(&payload)
                .map(|b| b.ops)
                .map_err(|e| {
                    starling_proto::rpc::note_malformed();
                    format!("refused: {e}")
                })
        }
        Ok(Some((kind, _))) => {
            starling_proto::rpc::note_malformed();
            Err(format!("refused: a frame of unknown kind {kind}"))
        }
        Ok(None) => Err("connection closed".into()),
        Err(e) => Err(format!("connection lost: {e}")),
    }
}

/// One connection: credential, hello, then batches until it ends.
fn serve(conn: UnixStream, head: &Head, auth: &RequireToken) {
    let Ok(raw) = conn.try_clone() else { return };
    let mut reader = FrameReader::new(conn);
    let _ = reader.socket().set_read_timeout(Some(HELLO_LIMIT));
    let scope = match reader.read_frame() {
        Ok(Some((AUTH, credential))) => {
            let mut presented = b"Bearer ".to_vec();
            presented.extend_from_slice(&credential);
            auth.check(&presented)
        }
        _ => None,
    };
    let Some(scope) = scope else {
        return refuse(&raw, "missing or wrong cluster token");
    };
    let mut ops = match batch(reader.read_frame()) {
        Ok(ops) => ops.into_iter(),
        Err(why) => return refuse(&raw, &why),
    };
    let hello = match ops.next() {
        Some(ClientOp::Hello(h)) => h,
        _ => return refuse(&raw, "a session must start with hello"),
    };
    // As a gRPC session: a job's processes join that job; a new driver needs the cluster token.
    let allowed = if hello.job.0 == 0 {
        scope.require_cluster("start a driver of a new job")
    } else {
        scope.may_touch(hello.job.0)
    };
    if let Err(s) = allowed {
        return refuse(&raw, s.message());
    }
    let _ = reader.socket().set_read_timeout(None);
    let Ok(out) = raw
        .try_clone()
        .and_then(|s| LinkWriter::new(s, "starling-link-out"))
    else {
        return refuse(&raw, "the head cannot serve the link");
    };
    let client = match head.open_session(&hello, ClientTx::Link(out.clone())) {
        Ok(c) => c,
        Err(s) => return refuse(&raw, s.message()),
    };
    let mut next: Vec<ClientOp> = ops.collect();
    let why = loop {
        if !next.is_empty() {
            match head.client_batch(client, std::mem::take(&mut next)) {
                // Past the limit of live tasks a driver's batches wait for room (worker
                // processes' never do).
                Ok(true) => head.room.wait_blocking(),
                Ok(false) => {}
                Err(s) => {
                    refuse(&raw, s.message());
                    break format!("refused: {}", s.message());
                }
            }
        }
        // Batches that arrived together are applied together: one lock, one scheduling pass.
        let mut failed = None;
        loop {
            match batch(reader.read_frame()) {
                Ok(ops) => next.extend(ops),
                Err(why) => {
                    failed = Some(why);
                    break;
                }
            }
            if !reader.has_buffered() || next.len() >= MAX_OPS_TOGETHER {
                break;
            }
        }
        if let Some(why) = failed {
            if !next.is_empty() {
                let _ = head.client_batch(client, std::mem::take(&mut next));
            }
            if why.starts_with("refused") {
                refuse(&raw, &why);
            }
            break why;
        }
    };
    head.close_session(client, &why);
    out.close();
}
