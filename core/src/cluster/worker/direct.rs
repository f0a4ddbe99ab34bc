//! Calls sent straight to an actor's worker: the actor's side, and the channel's protocol.
//!
//! A call's way through the head costs four thread wakes per round trip (see
//! `benches/RESULTS.md`). A caller on the actor's host that calls it again and again also
//! sends each call straight to the actor's worker process, over a Unix socket in the node's
//! private store directory (`actors/<actor>.sock`, opened once the constructor ran). The head
//! still hears of every call first (the caller submits it, marked `TaskExtras::direct` with
//! this worker) and of every outcome (this worker reports it as any call's, in batches): it
//! only does not hand the call over itself. So the head's bookkeeping (refs, lineage, events,
//! calls served, the actor's restarts and its calls' retries, `ActorDied`) is the same for
//! both ways, and a channel that breaks loses nothing: its calls are the head's.
//!
//! The connection runs the calls of a sync actor on its own thread, one at a time under the
//! worker's gate, as they come, and answers each with its value when that is small, inline
//! and holds no refs ([`VALUE`]), else with [`ELSEWHERE`] (the caller waits for the head's).
//! Between calls it polls the socket for [`SPIN`] before sleeping in `read`, so a caller that
//! calls again at once costs no wake here.
//!
//! Frames are the link's (`starling_proto::link`): the caller's [`AUTH`](link::AUTH) (the
//! cluster token), then [`BATCH`](link::BATCH)es of `HeadOp::Run`; the actor's [`READY`] (its
//! worker id, little-endian), then [`VALUE`] and [`ELSEWHERE`] frames.

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use starling_proto::link::{self, FrameReader};
use starling_proto::rpc::Wire;
use starling_proto::session::{HeadBatch, HeadOp, Outcome, RunTask, TaskDone};
use starling_proto::{ActorRole, TaskId};

use super::{Pool, TaskHolds, UNREPORTED};

/// The actor's first frame: its worker's id (8 bytes, little-endian).
pub(crate) const READY: u8 = 3;
/// A call's value: the call's object id (8 bytes, little-endian), then the value's bytes.
pub(crate) const VALUE: u8 = 4;
/// Calls whose outcome the head tells (failed, large, stored or holding refs): their object
/// ids, 8 bytes each.
pub(crate) const ELSEWHERE: u8 = 5;

/// How long a connection waits for the caller's credential.
const HELLO_LIMIT: Duration = Duration::from_secs(10);

/// How long a connection polls for the next call before sleeping in `read`.
const SPIN: Duration = Duration::from_micros(50);

/// The socket of `actor`'s worker on the node whose store directory is `store_dir`.
pub(crate) fn socket_path(store_dir: &Path, actor: TaskId) -> PathBuf {
    store_dir.join("actors").join(format!("{}.sock", actor.0))
}

/// Whether `fd` has bytes to read now (or was closed).
pub(crate) fn readable(fd: std::os::fd::RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, no timeout.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

/// Opens the socket of `actor`, whose constructor just ran in this worker process, and
/// serves its callers from now on (until the process ends). Nothing happens where the
/// process has no node store (its callers then use the head's way).
pub(super) fn listen(pool: &Arc<Pool>, actor: TaskId) {
    let Some(local) = pool.client.local_store() else {
        return;
    };
    let path = socket_path(&local.dir, actor);
    if path.as_os_str().len() > link::MAX_PATH {
        return;
    }
    let Some(dir) = path.parent() else { return };
    if starling_proto::dirs::create_dir(dir).is_err() {
        return;
    }
    // A socket left by an earlier run of the actor (its process was killed).
    let _ = std::fs::remove_file(&path);
    let Ok(listener) = UnixListener::bind(&path) else {
        return;
    };
    let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600));
    let pool = pool.clone();
    let _ = std::thread::Builder::new()
        .name("starling-actor-in".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let pool = pool.clone();
                let _ = std::thread::Builder::new()
                    .name("starling-actor-call".into())
                    .spawn(move || serve(&pool, actor, conn));
            }
        });
}

/// Answers on a caller's connection.
struct Replies {
    out: UnixStream,
    buf: Vec<u8>,
}

impl Replies {
    /// Answers the call that ended as `done`: its value if the caller can take it from here
    /// (`plain`: it holds no refs).
    fn add(&mut self, done: &TaskDone, plain: bool) {
        let object = done.task.0.to_le_bytes();
        match &done.outcome {
            Outcome::Inline(bytes) if plain => {
                self.buf
                    .extend_from_slice(&((1 + 8 + bytes.len()) as u32).to_le_bytes());
                self.buf.push(VALUE);
                self.buf.extend_from_slice(&object);
                self.buf.extend_from_slice(bytes);
            }
            _ => link::put_frame(ELSEWHERE, &object, &mut self.buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let r = self.out.write_all(&self.buf);
        self.buf.clear();
        r
    }
}

/// Serves one caller of `actor` until it goes (or breaks the protocol: sends anything but
/// calls of this actor that run one at a time).
fn serve(pool: &Arc<Pool>, actor: TaskId, conn: UnixStream) {
    let Ok(out) = conn.try_clone() else { return };
    // A caller that takes nothing for this long is gone.
    let _ = out.set_write_timeout(Some(link::WRITE_STALL_LIMIT));
    let mut reader = FrameReader::new(conn);
    let _ = reader.socket().set_read_timeout(Some(HELLO_LIMIT));
    let token = pool
        .client
        .credentials()
        .token
        .as_ref()
        .map(|t| t.expose().as_bytes().to_vec())
        .unwrap_or_default();
    match reader.read_frame() {
        Ok(Some((link::AUTH, presented)))
            if starling_proto::security::constant_time_eq(&presented, &token) => {}
        _ => return,
    }
    let _ = reader.socket().set_read_timeout(None);
    let worker = pool.client.worker.unwrap_or_default();
    let owner = Arc::as_ptr(&pool.client) as usize;
    let mut replies = Replies {
        out,
        buf: Vec::new(),
    };
    link::put_frame(READY, &worker.0.to_le_bytes(), &mut replies.buf);
    if replies.flush().is_err() {
        return;
    }
    let fd = reader.socket().as_raw_fd();
    'calls: loop {
        if !reader.has_buffered() && !readable(fd) {
            // Answers go out before any wait; reports to the head when due, or before sleeping.
            if replies.flush().is_err() {
                break;
            }
            let start = Instant::now();
            let mut came = false;
            while start.elapsed() < SPIN {
                if readable(fd) {
                    came = true;
                    break;
                }
                if UNREPORTED.with(|u| u.borrow().due()) {
                    pool.report();
                }
                // Any other thread that can run goes first: this one only waits.
                std::thread::yield_now();
            }
            if !came {
                pool.report();
            }
        }
        let ops = match reader.read_frame() {
            Ok(Some((link::BATCH, payload))) => match HeadBatch::from_bytes(&payload) {
                Ok(b) => b.ops,
                Err(_) => break,
            },
            _ => break,
        };
        for op in ops {
            let HeadOp::Run(run) = op else { break 'calls };
            let x = &run.spec.extras;
            if x.actor != ActorRole::Call(actor) || x.max_concurrency > 1 {
                break 'calls;
            }
            call(pool, owner, worker, run, &mut replies);
        }
        if UNREPORTED.with(|u| u.borrow().due()) {
            pool.report();
        }
    }
    let _ = replies.flush();
    pool.report();
}

/// Runs one call, as the executor would, and queues its answer and its report.
fn call(
    pool: &Arc<Pool>,
    owner: usize,
    worker: starling_proto::WorkerId,
    run: RunTask,
    replies: &mut Replies,
) {
    let mut holds = TaskHolds::default();
    let done = pool.run_in_gate(owner, worker, run, &mut holds);
    let nested = std::mem::take(&mut holds.nested);
    replies.add(&done, nested.iter().all(Vec::is_empty));
    UNREPORTED.with(|u| u.borrow_mut().push(done, nested));
    drop(holds);
}
