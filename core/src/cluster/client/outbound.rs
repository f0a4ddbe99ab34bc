//! The sending side of a session: ops queue in a channel that one writer drains into
//! batches, bounded so that a submitter waits while the head holds the session back.

use super::*;

/// Ops queued for the head and not yet taken into a batch past which a submission waits: the
/// head stopped reading this session (it holds its limit of live tasks, see
/// `starling_head`), so the driver waits too instead of growing without bound.
pub(super) const MAX_UNSENT: usize = 16 * 1024;

/// The sending side of a session's outgoing queue (one per session; dropping it ends the
/// session's request stream and wakes any submitter waiting for room).
pub(super) struct Outbound {
    pub(super) tx: mpsc::UnboundedSender<ClientOp>,
    pub(super) unsent: Arc<Unsent>,
}

/// How many ops wait in the queue, shared by the [`Outbound`] and its [`Batcher`].
#[derive(Default)]
pub(super) struct Unsent {
    pub(super) n: std::sync::atomic::AtomicUsize,
    pub(super) closed: AtomicBool,
    pub(super) lock: Mutex<()>,
    pub(super) room: parking_lot::Condvar,
}

impl Unsent {
    pub(super) fn taken(&self, ops: usize) {
        let before = self.n.fetch_sub(ops, Ordering::AcqRel);
        if before > MAX_UNSENT / 2 && before - ops <= MAX_UNSENT / 2 {
            let _g = self.lock.lock();
            self.room.notify_all();
        }
    }

    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _g = self.lock.lock();
        self.room.notify_all();
    }

    /// Waits while the queue is over [`MAX_UNSENT`], until half of it is sent or the session
    /// ends.
    pub(super) fn wait_for_room(&self) {
        if self.n.load(Ordering::Acquire) <= MAX_UNSENT {
            return;
        }
        let mut g = self.lock.lock();
        while self.n.load(Ordering::Acquire) > MAX_UNSENT / 2
            && !self.closed.load(Ordering::Acquire)
        {
            self.room.wait(&mut g);
        }
    }
}

impl Outbound {
    pub(super) fn new() -> (Outbound, Batcher) {
        let (tx, rx) = mpsc::unbounded_channel();
        let unsent = Arc::new(Unsent::default());
        let batcher = Batcher(rx, unsent.clone());
        (Outbound { tx, unsent }, batcher)
    }

    pub(super) fn send(&self, op: ClientOp) {
        self.unsent.n.fetch_add(1, Ordering::AcqRel);
        let _ = self.tx.send(op);
    }
}

impl Drop for Outbound {
    fn drop(&mut self) {
        self.unsent.close();
    }
}

/// Batches everything queued on the channel into one message.
pub(super) struct Batcher(mpsc::UnboundedReceiver<ClientOp>, Arc<Unsent>);

impl Drop for Batcher {
    fn drop(&mut self) {
        self.1.close();
    }
}

impl Stream for Batcher {
    type Item = ClientBatch;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ClientBatch>> {
        match self.0.poll_recv(cx) {
            Poll::Ready(Some(op)) => {
                let mut bytes = op.wire_size();
                let mut ops = vec![op];
                while ops.len() < 8192 && bytes < MAX_BATCH_BYTES {
                    match self.0.try_recv() {
                        Ok(op) => {
                            bytes += op.wire_size();
                            ops.push(op);
                        }
                        Err(_) => break,
                    }
                }
                self.1.taken(ops.len());
                Poll::Ready(Some(ClientBatch { ops }))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}
