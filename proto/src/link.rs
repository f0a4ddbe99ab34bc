//! The session link: a head's sessions with the worker processes of its own host, carried over
//! a Unix socket in the head's private data directory instead of gRPC.
//!
//! A `Session` stream over HTTP/2 costs several thread hand-offs per message on each side
//! (the connection task, the stream's task, the session's reader); on a link each side reads
//! frames on one thread of its own and writes them from the thread that has them. The
//! messages are the session's own (`ClientBatch` up, `HeadBatch` down, protobuf), so the head
//! applies them exactly as it applies a gRPC session's.
//!
//! A frame is a 4-byte little-endian length (of what follows), a kind byte and the payload.
//! A connection starts with an [`AUTH`] frame (the cluster token or a job's credential, checked
//! as the gRPC `authorization` header is), then a [`BATCH`] starting with `Hello`; the head
//! answers with batches, or one [`REFUSED`] frame saying why before it closes.
//!
//! Writes never wait on the writer's thread: [`LinkWriter`] writes what it can without
//! blocking and hands the rest to a thread of its own, which writes it in order before
//! anything queued later. The head queues batches under its lock and writes them once the lock
//! is released ([`LinkWriter::queue`], then [`LinkWriter::drain`]), so the lock orders a
//! session's batches without holding any I/O.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use prost::Message;

use crate::limits::MAX_MESSAGE_BYTES;
use crate::rpc::Wire;

/// A session batch (`ClientBatch` from the client, `HeadBatch` from the head).
pub const BATCH: u8 = 0;
/// The head refused the session or a batch: the payload says why (UTF-8); the link closes.
pub const REFUSED: u8 = 1;
/// The first frame of a connection: the credential (cluster token or a job's credential).
pub const AUTH: u8 = 2;

/// The longest socket path a link may have (`sun_path` holds 108 bytes with its NUL).
pub const MAX_PATH: usize = 100;

/// How long a peer that takes nothing may hold back the writer before the link is closed.
pub const WRITE_STALL_LIMIT: Duration = Duration::from_secs(30);

/// Why a link's frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The socket failed or the peer closed it mid-frame.
    #[error("link: {0}")]
    Io(#[from] io::Error),
    /// A frame longer than [`MAX_MESSAGE_BYTES`].
    #[error("link: a frame of {0} bytes is over the limit of {MAX_MESSAGE_BYTES}")]
    Oversized(usize),
    /// A frame of no kind.
    #[error("link: an empty frame")]
    Empty,
}

/// Reads a link's frames.
pub struct FrameReader {
    stream: io::BufReader<UnixStream>,
}

impl FrameReader {
    pub fn new(stream: UnixStream) -> Self {
        FrameReader {
            stream: io::BufReader::with_capacity(64 * 1024, stream),
        }
    }

    /// The next frame's kind and payload; `None` once the peer closed the link between frames.
    pub fn read_frame(&mut self) -> Result<Option<(u8, Vec<u8>)>, LinkError> {
        let mut len = [0u8; 4];
        // A clean end is an end before a frame's first byte.
        match self.stream.read(&mut len[..1])? {
            0 => return Ok(None),
            _ => self.stream.read_exact(&mut len[1..])?,
        }
        let len = u32::from_le_bytes(len) as usize;
        if len > MAX_MESSAGE_BYTES + 1 {
            return Err(LinkError::Oversized(len));
        }
        if len == 0 {
            return Err(LinkError::Empty);
        }
        let mut kind = [0u8; 1];
        self.stream.read_exact(&mut kind)?;
        let mut payload = vec![0u8; len - 1];
        self.stream.read_exact(&mut payload)?;
        Ok(Some((kind[0], payload)))
    }

    /// Whether a frame (or part of one) was read from the socket and not yet returned: reading
    /// it will not wait for the peer as long as the rest of it is on its way.
    pub fn has_buffered(&self) -> bool {
        !self.stream.buffer().is_empty()
    }

    /// The socket (to set its read timeout).
    pub fn socket(&self) -> &UnixStream {
        self.stream.get_ref()
    }
}

/// Appends a frame of `kind` holding `payload` to `out`.
pub fn put_frame(kind: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&((payload.len() + 1) as u32).to_le_bytes());
    out.push(kind);
    out.extend_from_slice(payload);
}

/// `msgs` as [`BATCH`] frames, encoded in place into `out` (emptied first).
fn encode_all<M: Wire>(msgs: VecDeque<M>, out: &mut Vec<u8>) {
    out.clear();
    for msg in msgs {
        let start = out.len();
        out.extend_from_slice(&[0, 0, 0, 0, BATCH]);
        // Encoding into a Vec cannot run out of room.
        let _ = msg.into_pb().encode(out);
        let len = (out.len() - start - 4) as u32;
        out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    }
}

/// The sending side of a link: messages go out in the order they were queued, written by
/// whichever thread finds the link idle, without ever blocking it (see the module docs).
pub struct LinkWriter<M> {
    stream: UnixStream,
    state: Mutex<Out<M>>,
    stalled: Condvar,
}

struct Out<M> {
    queue: VecDeque<M>,
    /// A thread is writing (the writer thread once a write would have blocked): others only
    /// queue.
    busy: bool,
    /// Bytes a write left over, for the writer thread.
    rest: Option<Vec<u8>>,
    closed: bool,
    /// The writer thread was started (at the first write that would have blocked).
    thread: bool,
    name: &'static str,
}

impl<M: Wire> LinkWriter<M> {
    /// A writer on `stream` (a clone of the reader's socket); its thread `name`, for writes
    /// that would block, starts when one first does.
    pub fn new(stream: UnixStream, name: &'static str) -> io::Result<Arc<Self>> {
        stream.set_write_timeout(Some(WRITE_STALL_LIMIT))?;
        Ok(Arc::new(LinkWriter {
            stream,
            state: Mutex::new(Out {
                queue: VecDeque::new(),
                busy: false,
                rest: None,
                closed: false,
                thread: false,
                name,
            }),
            stalled: Condvar::new(),
        }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Out<M>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `msg`; `true` if the caller must [`drain`](Self::drain) (no thread writes now).
    pub fn queue(&self, msg: M) -> bool {
        let mut g = self.lock();
        if g.closed {
            return false;
        }
        g.queue.push_back(msg);
        !std::mem::replace(&mut g.busy, true)
    }

    /// Writes what is queued, after [`queue`](Self::queue) returned `true`.
    pub fn drain(self: &Arc<Self>) {
        let mut bytes = Vec::new();
        loop {
            let msgs = {
                let mut g = self.lock();
                if g.queue.is_empty() || g.closed {
                    g.busy = false;
                    return;
                }
                std::mem::take(&mut g.queue)
            };
            encode_all(msgs, &mut bytes);
            match send(&self.stream, &bytes, libc::MSG_DONTWAIT) {
                Ok(n) if n == bytes.len() => {}
                Ok(n) => {
                    // The peer is behind: the writer thread writes the rest, and whatever is
                    // queued meanwhile after it (the link stays busy until it is done).
                    let mut g = self.lock();
                    g.rest = Some(bytes.split_off(n));
                    if !std::mem::replace(&mut g.thread, true) {
                        let weak = Arc::downgrade(self);
                        let started = std::thread::Builder::new()
                            .name(g.name.into())
                            .spawn(move || writer_thread(weak));
                        if started.is_err() {
                            drop(g);
                            self.close();
                            return;
                        }
                    }
                    drop(g);
                    self.stalled.notify_one();
                    return;
                }
                Err(_) => {
                    self.close();
                    return;
                }
            }
        }
    }

    /// Queues `msg` and writes, unless another thread is writing (it takes `msg` too).
    pub fn send(self: &Arc<Self>, msg: M) {
        if self.queue(msg) {
            self.drain();
        }
    }

    /// Closes the link both ways: the peer's reader ends, and so does ours.
    pub fn close(&self) {
        let mut g = self.lock();
        g.closed = true;
        g.queue.clear();
        drop(g);
        self.stalled.notify_all();
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// Writes what a non-blocking write left, then what was queued behind it, blocking (at most
/// [`WRITE_STALL_LIMIT`] per write: a peer that takes nothing that long is gone).
fn writer_thread<M: Wire>(w: std::sync::Weak<LinkWriter<M>>) {
    loop {
        let Some(link) = w.upgrade() else { return };
        let rest = {
            let mut g = link.lock();
            loop {
                if g.closed {
                    return;
                }
                if let Some(rest) = g.rest.take() {
                    break rest;
                }
                // Wake now and then to notice the link was dropped.
                g = link
                    .stalled
                    .wait_timeout(g, Duration::from_secs(1))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                if Arc::strong_count(&link) == 1 {
                    return;
                }
            }
        };
        let mut bytes = rest;
        loop {
            if send_all(&link.stream, &bytes).is_err() {
                link.close();
                return;
            }
            let mut g = link.lock();
            if g.queue.is_empty() || g.closed {
                g.busy = false;
                break;
            }
            let msgs = std::mem::take(&mut g.queue);
            drop(g);
            encode_all(msgs, &mut bytes);
        }
    }
}

/// One `send(2)` of `bytes` with `flags` (never raising SIGPIPE): how many went out (0 where a
/// non-blocking send would have blocked).
fn send(stream: &UnixStream, bytes: &[u8], flags: i32) -> io::Result<usize> {
    loop {
        // SAFETY: `bytes` is a live buffer of `bytes.len()` bytes; the descriptor is open for
        // as long as `stream` is.
        let n = unsafe {
            libc::send(
                stream.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                flags | libc::MSG_NOSIGNAL,
            )
        };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        match e.kind() {
            io::ErrorKind::Interrupted => continue,
            io::ErrorKind::WouldBlock if flags & libc::MSG_DONTWAIT != 0 => return Ok(0),
            _ => return Err(e),
        }
    }
}

/// Sends all of `bytes`, blocking (up to the socket's write timeout per call).
fn send_all(stream: &UnixStream, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        match send(stream, bytes, 0)? {
            0 => return Err(io::ErrorKind::WriteZero.into()),
            n => bytes = &bytes[n..],
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::{ClientBatch, ClientOp};
    use crate::ObjectId;

    fn batch(n: u64) -> ClientBatch {
        ClientBatch {
            ops: vec![ClientOp::Release(ObjectId(n))],
        }
    }

    fn released(bytes: &[u8]) -> u64 {
        match ClientBatch::from_bytes(bytes).unwrap().ops.as_slice() {
            [ClientOp::Release(id)] => id.0,
            other => panic!("unexpected ops {other:?}"),
        }
    }

    /// Far more than a socket buffer holds, written while the reader is not reading: the
    /// writes never block the sender, and every message arrives once, in order.
    #[test]
    fn messages_arrive_in_order_past_a_full_socket() {
        let (a, b) = UnixStream::pair().unwrap();
        let w = LinkWriter::<ClientBatch>::new(a, "test-link").unwrap();
        let n = 200_000;
        for k in 0..n {
            w.send(batch(k));
        }
        let mut r = FrameReader::new(b);
        for k in 0..n {
            let (kind, payload) = r.read_frame().unwrap().expect("a frame");
            assert_eq!(kind, BATCH);
            assert_eq!(released(&payload), k);
        }
        w.close();
        assert!(r.read_frame().unwrap().is_none());
    }

    #[test]
    fn oversized_and_empty_frames_are_errors() {
        use std::io::Write;
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(&u32::MAX.to_le_bytes()).unwrap();
        let mut r = FrameReader::new(b);
        assert!(matches!(r.read_frame(), Err(LinkError::Oversized(_))));
        let (mut a, b) = UnixStream::pair().unwrap();
        a.write_all(&0u32.to_le_bytes()).unwrap();
        assert!(matches!(
            FrameReader::new(b).read_frame(),
            Err(LinkError::Empty)
        ));
    }
}
