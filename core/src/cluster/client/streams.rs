//! Streaming tasks over a session: a submitter's items as the head forwards them, and a worker
//! process's producers, which pause for room until the submitter's progress comes back (see
//! [`crate::stream`]).

use super::*;
use crate::object_ref::RefHandle;
use crate::runtime::Runtime;
use crate::stream::Stream;
use starling_proto::session::{StreamAck, StreamItem};

/// How often a producer waiting for room checks whether its task was cancelled or its session
/// ended.
const ROOM_RECHECK: Duration = Duration::from_millis(100);

impl Client {
    /// The head forwarded an item of a streaming task this client submitted; it counted one
    /// ref of this session to it, which the group made here holds.
    pub(super) fn receive_item(self: &Arc<Self>, item: StreamItem) {
        let group = RefHandle::adopt_counted(item.object, Runtime::from_client(self.clone()));
        match self.streams.get(item.task) {
            Some(stream) => stream.push(item.index, group),
            // The generator was dropped: the item goes at once.
            None => drop(group),
        }
    }

    /// The submitter of a streaming task this process runs took `ack.consumed` items.
    pub(super) fn receive_ack(&self, ack: StreamAck) {
        let mut producing = self.producing.lock();
        if let Some(taken) = producing.get_mut(&ack.task) {
            *taken = (*taken).max(ack.consumed);
            drop(producing);
            self.room.notify_all();
        }
    }

    /// Gives back one count the head holds for this session on `id`.
    pub fn uncount(&self, id: ObjectId) {
        if !self.shut_down.load(Ordering::Relaxed) {
            self.send(ClientOp::Release(id));
        }
    }

    /// Waits for the next item of `stream`, or the end of its task.
    pub fn wait_stream(
        &self,
        stream: &Stream,
        end: ObjectId,
        deadline: Option<Instant>,
    ) -> Result<Option<Arc<RefHandle>>> {
        wait::wait_stream(
            &self.store,
            stream,
            end,
            deadline,
            &Hooks::new(self, &[end]),
        )
    }

    /// This client took `taken` items of its streaming task `task`.
    pub fn stream_taken(&self, task: TaskId, taken: u64) {
        if !self.shut_down.load(Ordering::Relaxed) {
            self.send(ClientOp::StreamAck(StreamAck {
                task,
                consumed: taken,
            }));
        }
    }

    /// The streaming task `task`, running in this worker process, yielded item `index` (`item`,
    /// a group of a put of this session): tells the head, lets go of the group after, and
    /// waits while the task is `window` items ahead of its submitter.
    pub fn stream_yield(&self, task: TaskId, index: u64, item: Arc<RefHandle>, window: u32) {
        self.producing.lock().entry(task).or_insert(0);
        self.send(ClientOp::StreamItem(StreamItem {
            task,
            index,
            object: item.id,
        }));
        // After the item on the same ordered stream: the head counted the submitter's ref.
        drop(item);
        if window == 0 {
            return;
        }
        let yielded = index + 1;
        let mut producing = self.producing.lock();
        loop {
            let taken = producing.get(&task).copied().unwrap_or(u64::MAX);
            if yielded.saturating_sub(taken) < u64::from(window)
                || self.cancelled.lock().contains(&task.0)
                || self.closed_error().is_some()
            {
                return;
            }
            self.room.wait_for(&mut producing, ROOM_RECHECK);
        }
    }

    /// The streaming task `task` yields no more here.
    pub fn stream_done(&self, task: TaskId) {
        self.producing.lock().remove(&task);
    }
}
