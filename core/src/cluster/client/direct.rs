//! Calls sent straight to an actor's worker: the caller's side (the actor's side and the
//! channel's protocol are in `cluster::worker::direct`).
//!
//! A driver whose head runs in its own process (the local cluster's) submits every actor call
//! to the head; from its second call of an actor on this host on, it also writes each plain
//! call (inline arguments, one return, run one at a time) on a channel of its own to the
//! actor's worker, marked for the head as sent there (`TaskExtras::direct`). The worker
//! answers with the value, which lands in the store where waits find it, ahead of the head's
//! copy (the first one settles it; the head's is dropped).
//!
//! # Invariants
//! - A caller's calls of an actor run in the order it made them, whichever way each goes: a
//!   call goes straight only once the last call that took the head's way has settled; one
//!   that takes the head's way after calls sent straight is held back by the head until those
//!   ran (`starling_scheduler::actors`).
//! - A broken channel loses nothing: the head knows its calls and runs them again on the
//!   actor's next worker (or fails them) as it does any call; the caller takes the head's way
//!   until their last one settled.
//! - An answer settles an object only while the caller still holds it (a release forgets it).

use std::io::Write;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::AtomicUsize;

use starling_proto::link::{self as wire, FrameReader, LinkWriter, AUTH};
use starling_proto::session::ResolvedArg;
use starling_proto::{ActorRole, TaskSpec};

use super::*;
use crate::cluster::worker::direct::{readable, socket_path, ELSEWHERE, READY, VALUE};

/// How long after a failed connection a caller tries the actor's socket again.
const RETRY: Duration = Duration::from_millis(100);

/// How long the actor has to answer a new connection.
const HELLO_LIMIT: Duration = Duration::from_secs(2);

/// A caller's channels to actors, and its calls waiting for an answer on them.
#[derive(Default)]
pub(super) struct Direct {
    routes: Mutex<HashMap<TaskId, Route>>,
    /// Calls sent straight and not answered, with their channel.
    waiting: Mutex<HashMap<ObjectId, Arc<Channel>>>,
    /// The last call of each actor that took the head's way, while it has not settled (as
    /// [`Route::last_head`]), by its object: its value may be dropped as soon as it settles.
    heads: Mutex<HashMap<ObjectId, TaskId>>,
    /// Calls sent straight so far.
    sent: AtomicU64,
}

impl Direct {
    pub(super) fn sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// `object` (a call of `actor`, or `None`) is now `route`'s last call of the head's way:
    /// later ones go straight only once it settled (kept findable by object in `heads`).
    fn set_last_head(&self, route: &mut Route, actor: TaskId, object: Option<ObjectId>) {
        let mut heads = self.heads.lock();
        if let Some(old) = std::mem::replace(&mut route.last_head, object) {
            heads.remove(&old);
        }
        if let Some(object) = object {
            heads.insert(object, actor);
        }
    }
}

/// How this caller reaches one actor.
#[derive(Default)]
struct Route {
    calls: u32,
    channel: Option<Arc<Channel>>,
    /// No new connection before this (the last attempt failed).
    retry_at: Option<Instant>,
    /// The last call that took the head's way: later ones go straight only once it settled.
    last_head: Option<ObjectId>,
}

/// A connection to an actor's worker.
struct Channel {
    /// The worker, as the head knows it.
    worker: WorkerId,
    out: Arc<LinkWriter<HeadBatch>>,
    /// Read by the channel's thread, or by a thread waiting for an answer of it (see
    /// [`Client::wait_direct`]).
    reader: Mutex<FrameReader>,
    fd: RawFd,
    open: AtomicBool,
    /// Threads reading for their own answer: the channel's thread stays off the socket
    /// meanwhile, so an answer costs it no wake.
    readers: AtomicUsize,
    quiet: parking_lot::Condvar,
    quiet_lock: Mutex<()>,
    /// Calls written (or queued) and answers read: while some are unanswered, a new call waits
    /// in the writer's queue for the next answer (or a batch's worth of calls), so calls made
    /// in a row go out together; a call made when none is unanswered goes out at once.
    calls: AtomicU64,
    answers: AtomicU64,
    /// Calls wait in the writer's queue, for whoever reads the next answer to send.
    unflushed: AtomicBool,
}

/// How many unanswered calls a call may wait in the writer's queue behind.
const BATCH: u64 = 64;

impl Channel {
    /// Sends (or queues, see [`Channel::calls`]) one call.
    fn send(&self, call: HeadBatch) {
        let before = self.calls.fetch_add(1, Ordering::SeqCst);
        if !self.out.queue(call) {
            // Another thread writes, or owes a flush that takes this call too.
            return;
        }
        self.unflushed.store(true, Ordering::SeqCst);
        let unanswered = before - self.answers.load(Ordering::SeqCst).min(before);
        if unanswered == 0 || unanswered >= BATCH {
            self.flush();
        }
    }

    /// Writes what waits in the writer's queue.
    fn flush(&self) {
        if self.unflushed.swap(false, Ordering::SeqCst) {
            self.out.drain();
        }
    }
}

impl Client {
    /// Submits `spec`, a call of an actor; see the module docs for when it also goes straight.
    pub(super) fn submit_call(&self, mut spec: TaskSpec) {
        let (Some(direct), ActorRole::Call(actor)) = (&self.direct, &spec.extras.actor) else {
            self.send(ClientOp::Submit(spec));
            return;
        };
        let actor = *actor;
        let object = spec.return_object();
        let plain = spec.return_count() == 1
            && !spec.extras.streaming
            && spec.extras.max_concurrency <= 1
            && spec.extras.contained.is_empty()
            && spec.args.iter().all(|a| matches!(a, TaskArg::Inline(_)));
        let mut routes = direct.routes.lock();
        let route = routes.entry(actor).or_default();
        route.calls = route.calls.saturating_add(1);
        let head_done = route.last_head.is_none_or(|o| self.store.is_settled(o));
        if head_done && route.last_head.is_some() {
            direct.set_last_head(route, actor, None);
        }
        let channel = if plain && head_done {
            self.channel(route, actor)
        } else {
            None
        };
        let Some(channel) = channel else {
            direct.set_last_head(route, actor, Some(object));
            drop(routes);
            self.send(ClientOp::Submit(spec));
            return;
        };
        spec.extras.make_mut().direct = Some(channel.worker);
        let mut sent = spec.clone();
        let args = sent
            .args
            .iter_mut()
            .map(|a| match a {
                TaskArg::Inline(bytes) => ResolvedArg::Inline(std::mem::take(bytes)),
                TaskArg::Object(o) => ResolvedArg::Local(*o),
            })
            .collect();
        let run = RunTask {
            spec: sent,
            args,
            gpu_ids: Vec::new(),
        };
        // The head hears of the call before the worker can report it, and may refuse it as
        // sent straight (the actor died or moved, which this channel has not shown yet).
        if !self.submit_straight(spec) {
            direct.set_last_head(route, actor, Some(object));
            return;
        }
        direct.waiting.lock().insert(object, channel.clone());
        direct.sent.fetch_add(1, Ordering::Relaxed);
        channel.send(HeadBatch {
            ops: vec![HeadOp::Run(run)],
        });
    }

    /// Submits `spec`, a call to send straight, to the head in this process; `false` if the
    /// head takes it its own way (then it pushes the outcome here as for any call).
    fn submit_straight(&self, spec: TaskSpec) -> bool {
        let Sink::Local { head, client, open } = &self.sink else {
            self.send(ClientOp::Submit(spec));
            return false;
        };
        if !open.load(Ordering::Acquire) {
            return false;
        }
        match head.local_submit_direct(*client, spec) {
            Ok(taken) => taken,
            Err(s) => {
                self.close(Error::HeadLost {
                    addr: self.addr.clone(),
                    why: format!("refused: {}", s.message()),
                });
                false
            }
        }
    }

    /// The open channel to `actor`, connecting if this is not the first call and the actor
    /// was made (as this client saw it); `None`: the head's way.
    fn channel(&self, route: &mut Route, actor: TaskId) -> Option<Arc<Channel>> {
        if let Some(c) = &route.channel {
            if c.open.load(Ordering::Acquire) {
                return Some(c.clone());
            }
            route.channel = None;
        }
        if route.calls < 2 || route.retry_at.is_some_and(|t| Instant::now() < t) {
            return None;
        }
        if !matches!(
            self.store.lookup(ObjectId::from(actor), None),
            Lookup::Ready(_)
        ) {
            return None;
        }
        match self.connect_actor(actor) {
            Ok(c) => {
                route.channel = Some(c.clone());
                route.retry_at = None;
                Some(c)
            }
            Err(_) => {
                route.retry_at = Some(Instant::now() + RETRY);
                None
            }
        }
    }

    fn connect_actor(&self, actor: TaskId) -> std::io::Result<Arc<Channel>> {
        let bad = |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, why.to_string());
        let local = self.local.as_ref().ok_or_else(|| bad("no node store"))?;
        let path = socket_path(&local.dir, actor);
        let stream = UnixStream::connect(&path)?;
        let mut first = Vec::new();
        // The actor's worker holds its job's credential (made from the cluster token); a
        // driver of that job can make the same.
        let token = match &self.creds.token {
            Some(t) if t.job().is_none() => t.for_job(JobId(self.job())).expose().to_string(),
            Some(t) => t.expose().to_string(),
            None => String::new(),
        };
        wire::put_frame(AUTH, token.as_bytes(), &mut first);
        (&stream).write_all(&first)?;
        let mut reader = FrameReader::new(stream.try_clone()?);
        reader.socket().set_read_timeout(Some(HELLO_LIMIT))?;
        let worker = match reader.read_frame() {
            Ok(Some((READY, id))) if id.len() == 8 => {
                WorkerId(u64::from_le_bytes(id.try_into().expect("8 bytes")))
            }
            _ => return Err(bad("the actor did not answer")),
        };
        reader.socket().set_read_timeout(None)?;
        let fd = reader.socket().as_raw_fd();
        let channel = Arc::new(Channel {
            worker,
            out: LinkWriter::new(stream, "starling-direct-out")?,
            reader: Mutex::new(reader),
            fd,
            open: AtomicBool::new(true),
            calls: AtomicU64::new(0),
            answers: AtomicU64::new(0),
            unflushed: AtomicBool::new(false),
            readers: AtomicUsize::new(0),
            quiet: parking_lot::Condvar::new(),
            quiet_lock: Mutex::new(()),
        });
        let me = self.me.get().cloned().ok_or_else(|| bad("no client"))?;
        let c = channel.clone();
        std::thread::Builder::new()
            .name("starling-direct-in".into())
            .spawn(move || read_answers(me, c, actor))?;
        Ok(channel)
    }

    /// Reads the frames `channel` has now (none if another thread took them first); `false`
    /// once it is broken.
    fn read_channel(&self, channel: &Channel, reader: &mut FrameReader) -> bool {
        if !reader.has_buffered() && !readable(channel.fd) {
            return true;
        }
        loop {
            match reader.read_frame() {
                Ok(Some((VALUE, payload))) if payload.len() >= 8 => {
                    channel.answers.fetch_add(1, Ordering::SeqCst);
                    let object = ObjectId(u64::from_le_bytes(
                        payload[..8].try_into().expect("8 bytes"),
                    ));
                    self.answered(object, Some(payload[8..].to_vec()));
                }
                Ok(Some((ELSEWHERE, payload))) if payload.len() % 8 == 0 => {
                    channel
                        .answers
                        .fetch_add(payload.len() as u64 / 8, Ordering::SeqCst);
                    for id in payload.chunks_exact(8) {
                        let object = ObjectId(u64::from_le_bytes(id.try_into().expect("8 bytes")));
                        self.answered(object, None);
                    }
                }
                _ => return false,
            }
            if !reader.has_buffered() && !readable(channel.fd) {
                // Calls made meanwhile waited for this answer.
                if channel.unflushed.load(Ordering::SeqCst) {
                    channel.flush();
                }
                return true;
            }
        }
    }

    /// The answer to the call whose object is `object`: its value, or `None` when the head
    /// tells its outcome (the head pushes a call sent straight only to those who ask).
    fn answered(&self, object: ObjectId, value: Option<Vec<u8>>) {
        let Some(direct) = &self.direct else { return };
        if direct.waiting.lock().remove(&object).is_none() {
            // Released meanwhile.
            return;
        }
        match value {
            Some(bytes) => {
                if self.store.put(object, Blob::new(bytes)) {
                    self.no_longer_in_flight();
                }
            }
            None => self.send(ClientOp::Subscribe(object)),
        }
    }

    /// A ref to `object` was dropped (`settled`: after its value came): an answer to it is no
    /// longer wanted, and a call of the head's way that settled no longer holds back the
    /// next ones.
    pub(super) fn forget_direct(&self, object: ObjectId, settled: bool) {
        let Some(direct) = &self.direct else { return };
        direct.waiting.lock().remove(&object);
        if !settled {
            return;
        }
        let Some(actor) = direct.heads.lock().remove(&object) else {
            return;
        };
        if let Some(route) = direct.routes.lock().get_mut(&actor) {
            if route.last_head == Some(object) {
                route.last_head = None;
            }
        }
    }

    /// Waits up to `spin` for `object`, the result of a call sent straight, reading its
    /// channel on this thread (no wake on the answer); `true` once it settled.
    pub(super) fn wait_direct(&self, object: ObjectId, spin: Duration) -> bool {
        let Some(direct) = &self.direct else {
            return false;
        };
        let Some(channel) = direct.waiting.lock().get(&object).cloned() else {
            return false;
        };
        channel.readers.fetch_add(1, Ordering::AcqRel);
        let settled = exec::spin_until(spin, || {
            if self.store.is_settled(object) {
                return true;
            }
            if readable(channel.fd) {
                if let Some(mut reader) = channel.reader.try_lock() {
                    if !self.read_channel(&channel, &mut reader) {
                        channel.open.store(false, Ordering::Release);
                        return true;
                    }
                }
            }
            self.store.is_settled(object)
        });
        let settled = settled && self.store.is_settled(object);
        // A waiter that goes on waiting hands the socket back to the channel's thread at once;
        // one with its answer leaves it be (it looks again within its pause).
        if channel.readers.fetch_sub(1, Ordering::AcqRel) == 1 && !settled {
            let _g = channel.quiet_lock.lock();
            channel.quiet.notify_all();
        }
        settled
    }

    /// `channel` (to `actor`) broke: its unanswered calls are the head's now (it runs them on
    /// the actor's next worker, or fails them), and the caller takes the head's way until the
    /// last of them settled.
    fn channel_closed(&self, channel: &Arc<Channel>, actor: TaskId) {
        let Some(direct) = &self.direct else { return };
        let mut routes = direct.routes.lock();
        let mine: Vec<ObjectId> = {
            let mut waiting = direct.waiting.lock();
            let mine: Vec<ObjectId> = waiting
                .iter()
                .filter(|(_, c)| Arc::ptr_eq(c, channel))
                .map(|(o, _)| *o)
                .collect();
            for o in &mine {
                waiting.remove(o);
            }
            mine
        };
        if let Some(route) = routes.get_mut(&actor) {
            if route
                .channel
                .as_ref()
                .is_some_and(|c| Arc::ptr_eq(c, channel))
            {
                route.channel = None;
            }
            if let Some(&last) = mine.iter().max() {
                let last = route.last_head.map_or(last, |h| h.max(last));
                direct.set_last_head(route, actor, Some(last));
            }
        }
        drop(routes);
        if !mine.is_empty() {
            self.send_many(mine.into_iter().map(ClientOp::Subscribe).collect());
        }
    }
}

/// The channel's thread: reads answers while no waiting thread does, until the channel breaks.
fn read_answers(client: std::sync::Weak<Client>, channel: Arc<Channel>, actor: TaskId) {
    loop {
        if channel.readers.load(Ordering::Acquire) > 0 {
            let mut g = channel.quiet_lock.lock();
            if channel.readers.load(Ordering::Acquire) > 0 {
                channel.quiet.wait_for(&mut g, Duration::from_millis(10));
            }
            continue;
        }
        let mut p = libc::pollfd {
            fd: channel.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; at most 100 ms, to notice a dropped client.
        let ready = unsafe { libc::poll(&mut p, 1, 100) } > 0;
        let Some(c) = client.upgrade() else { return };
        if !channel.open.load(Ordering::Acquire) {
            break;
        }
        if !ready {
            continue;
        }
        let mut reader = channel.reader.lock();
        if !c.read_channel(&channel, &mut reader) {
            break;
        }
    }
    channel.open.store(false, Ordering::Release);
    channel.out.close();
    if let Some(c) = client.upgrade() {
        c.channel_closed(&channel, actor);
    }
}
