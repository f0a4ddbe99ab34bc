//! Streaming returns (Ray's streaming generators): a `#[remote]` function that returns an
//! iterator (`impl Iterator<Item = T>` or [`Generator<T>`]) yields its items as it makes them,
//! and the caller takes them with an [`ObjectRefGenerator<T>`] while the task still runs.
//!
//! Each item is an object of its own, `put` by the process running the task the moment the
//! function yields it; the caller gets one `ObjectRef<T>` per item, in order. The task's own
//! object is, once it ends, the number of items ([`ObjectRefGenerator::completed`]); a task that
//! fails after yielding some items gives those items, then its error.
//!
//! How an item travels:
//! - in-process, the executor hands the item's ref group straight to the caller's [`Stream`];
//! - in a cluster, the worker process says `StreamItem` after its put; the head counts one ref of
//!   the submitter's session to the item and forwards it (`scheduler/head/src/streams.rs`); the
//!   submitter's client puts the group it makes for it into the [`Stream`] of the task.
//!
//! **Backpressure** ([`TaskOptions::backpressure`](crate::TaskOptions::backpressure), Ray's
//! `_generator_backpressure_num_objects`): the producer pauses while it is that many items
//! ahead of what the caller took. In-process it waits on the caller's `Stream`; in a cluster the
//! caller says how many items it took (`StreamAck`), which the head passes to the worker.

use std::collections::{HashMap, VecDeque};
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use starling_proto::TaskId;

use crate::__private::RemoteValue;
use crate::error::{Error, Result};
use crate::object_ref::{ObjectRef, RefHandle};

/// What a streaming `#[remote]` function may return: any iterator, boxed. A function may as well
/// return `impl Iterator<Item = T>`; `Generator<T>` names the type where a name is needed (a
/// trait method, a `match` of iterators of different types).
///
/// ```
/// #[starling::remote]
/// fn countdown(n: u32) -> starling::Generator<u32> {
///     starling::Generator::new((0..n).rev())
/// }
/// ```
pub struct Generator<T> {
    items: Box<dyn Iterator<Item = T>>,
}

impl<T> Generator<T> {
    /// Yields what `items` yields.
    pub fn new<I>(items: I) -> Self
    where
        I: IntoIterator<Item = T>,
        I::IntoIter: 'static,
    {
        Generator {
            items: Box::new(items.into_iter()),
        }
    }
}

impl<T> Iterator for Generator<T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        self.items.next()
    }
}

impl<T> std::fmt::Debug for Generator<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Generator<{}>", std::any::type_name::<T>())
    }
}

/// The caller's side of one streaming task: the items that came and were not taken yet.
pub(crate) struct Stream {
    task: TaskId,
    /// How many items the producer may be ahead of the caller (0: no limit).
    pub(crate) window: u64,
    state: Mutex<State>,
    /// In-process producers wait here for room.
    room: Condvar,
}

struct State {
    items: VecDeque<Arc<RefHandle>>,
    /// Items received (the index the next one must have).
    received: u64,
    /// Items the caller took.
    taken: u64,
    /// Woken when an item comes.
    waker: Option<Waker>,
    /// The caller dropped its generator: items are dropped as they come.
    closed: bool,
}

impl Stream {
    fn new(task: TaskId, window: u64) -> Self {
        Stream {
            task,
            window,
            state: Mutex::new(State {
                items: VecDeque::new(),
                received: 0,
                taken: 0,
                waker: None,
                closed: false,
            }),
            room: Condvar::new(),
        }
    }

    /// Item `index` came. Ignored (the group dropped, which lets the item go) if it is one the
    /// stream already has (a retried task yields its items again) or the caller is gone.
    pub(crate) fn push(&self, index: u64, item: Arc<RefHandle>) {
        let mut s = self.state.lock();
        if s.closed || index != s.received {
            drop(s);
            drop(item);
            return;
        }
        s.received += 1;
        s.items.push_back(item);
        let waker = s.waker.take();
        drop(s);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// The next item if one came; else registers `waker` for the next one.
    pub(crate) fn take(&self, waker: Option<&Waker>) -> Option<Arc<RefHandle>> {
        let mut s = self.state.lock();
        match s.items.pop_front() {
            Some(item) => {
                s.taken += 1;
                drop(s);
                self.room.notify_all();
                Some(item)
            }
            None => {
                if let Some(w) = waker {
                    if !s.waker.as_ref().is_some_and(|x| x.will_wake(w)) {
                        s.waker = Some(w.clone());
                    }
                }
                None
            }
        }
    }

    /// Items the caller took.
    pub(crate) fn taken(&self) -> u64 {
        self.state.lock().taken
    }

    /// The caller is gone: drops what came and lets a paused producer go on.
    fn close(&self) {
        let items = {
            let mut s = self.state.lock();
            s.closed = true;
            std::mem::take(&mut s.items)
        };
        self.room.notify_all();
        drop(items);
    }

    /// In-process producers: waits until `yielded` items are fewer than the window ahead of
    /// what the caller took, the caller is gone, or `stop` says so (checked every 100 ms).
    pub(crate) fn wait_room(&self, yielded: u64, stop: impl Fn() -> bool) {
        if self.window == 0 {
            return;
        }
        let mut s = self.state.lock();
        while !s.closed && yielded.saturating_sub(s.taken) >= self.window && !stop() {
            self.room.wait_for(&mut s, Duration::from_millis(100));
        }
    }
}

/// The streams of one runtime's callers, by task.
#[derive(Default)]
pub(crate) struct Streams {
    map: Mutex<HashMap<TaskId, Arc<Stream>>>,
}

impl Streams {
    /// A stream for the task `task`, about to be submitted.
    pub(crate) fn open(&self, task: TaskId, window: u32) {
        let stream = Arc::new(Stream::new(task, u64::from(window)));
        self.map.lock().insert(task, stream);
    }

    /// The stream of `task`, if its caller still has it.
    pub(crate) fn get(&self, task: TaskId) -> Option<Arc<Stream>> {
        self.map.lock().get(&task).cloned()
    }

    /// Forgets the stream of `task` (its caller dropped the generator).
    pub(crate) fn remove(&self, task: TaskId) {
        self.map.lock().remove(&task);
    }
}

/// The items of a streaming task, taken as the task yields them: what a call of a `#[remote]`
/// function returning an iterator gives back (Ray's `ObjectRefGenerator`).
///
/// As an [`Iterator`], `next()` blocks until the next item comes and gives its `ObjectRef<T>`;
/// it gives `None` once the task ended and every item was taken, and `Some(Err(..))` once if
/// the task failed (after the items it yielded before it failed). A wait inside a task lends
/// the task's CPUs, as `get` does. [`next_ready`](Self::next_ready) is the same for `async`
/// code, [`next_timeout`](Self::next_timeout) with a bound.
///
/// Dropping the generator lets go of the items not taken; the task runs to its end (cancel it
/// through [`completed`](Self::completed) to stop it), unpaused if it waited for room.
///
/// ```no_run
/// #[starling::remote]
/// fn squares(n: u64) -> impl Iterator<Item = u64> {
///     (0..n).map(|i| i * i)
/// }
///
/// # fn main() -> starling::Result<()> {
/// let mut sum = 0;
/// for item in squares::remote(4) {
///     sum += starling::get(&item?)?;
/// }
/// assert_eq!(sum, 0 + 1 + 4 + 9);
/// # Ok(())
/// # }
/// ```
pub struct ObjectRefGenerator<T> {
    completed: ObjectRef<u64>,
    stream: Arc<Stream>,
    /// The task ended and that was said (`None` from now on).
    finished: bool,
    _t: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for ObjectRefGenerator<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ObjectRefGenerator<{}>({})",
            std::any::type_name::<T>(),
            self.stream.task
        )
    }
}

impl<T> ObjectRefGenerator<T> {
    /// A generator over the stream the backend opened for `completed`'s task at submit.
    pub(crate) fn new(completed: ObjectRef<u64>) -> Self {
        let task = completed.id().task();
        let stream = completed
            .runtime()
            .stream(task)
            .unwrap_or_else(|| Arc::new(Stream::new(task, 0)));
        ObjectRefGenerator {
            completed,
            stream,
            finished: false,
            _t: PhantomData,
        }
    }

    /// The task's own object: the number of items, once the task ended (its error if it
    /// failed). `cancel` it to cancel the task; `wait` on it to learn that the task ended.
    pub fn completed(&self) -> &ObjectRef<u64> {
        &self.completed
    }

    /// The next item, waiting at most `timeout` for it: `Some(Err(Error::Timeout { .. }))`
    /// if none came (the generator stays usable).
    pub fn next_timeout(&mut self, timeout: Duration) -> Option<Result<ObjectRef<T>>> {
        self.next_until(Some(Instant::now() + timeout))
    }

    /// The next item, for `async` code: as [`Iterator::next`], without blocking the thread.
    pub async fn next_ready(&mut self) -> Option<Result<ObjectRef<T>>> {
        std::future::poll_fn(|cx| self.poll_next(cx)).await
    }

    /// Polls for the next item (the `Stream` trait's `poll_next`, without the dependency).
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<ObjectRef<T>>>> {
        if self.finished {
            return Poll::Ready(None);
        }
        if let Some(item) = self.stream.take(Some(cx.waker())) {
            return Poll::Ready(Some(Ok(self.took(item))));
        }
        let rt = self.completed.runtime().clone();
        match rt.poll_object(self.completed.id(), cx.waker()) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(end) => Poll::Ready(self.ended(end.map(|_| ()))),
        }
    }

    fn next_until(&mut self, deadline: Option<Instant>) -> Option<Result<ObjectRef<T>>> {
        if self.finished {
            return None;
        }
        let rt = self.completed.runtime().clone();
        match rt.wait_stream(&self.stream, self.completed.id(), deadline) {
            Ok(Some(item)) => Some(Ok(self.took(item))),
            Ok(None) => {
                let end = rt.wait_object(self.completed.id(), None).map(|_| ());
                self.ended(end)
            }
            Err(e @ Error::Timeout { .. }) => Some(Err(e)),
            Err(e) => {
                self.finished = true;
                Some(Err(e))
            }
        }
    }

    /// The caller took `item`: tells the producer when it waits for room.
    fn took(&self, item: Arc<RefHandle>) -> ObjectRef<T> {
        if self.stream.window > 0 {
            self.completed
                .runtime()
                .stream_taken(self.stream.task, self.stream.taken());
        }
        ObjectRef::from_handle(item)
    }

    /// The task ended (`end`: how) and every item it yielded was taken.
    fn ended(&mut self, end: Result<()>) -> Option<Result<ObjectRef<T>>> {
        // An item that came between the last look and the end is still the caller's.
        if let Some(item) = self.stream.take(None) {
            return Some(Ok(self.took(item)));
        }
        self.finished = true;
        end.err().map(Err)
    }
}

impl<T: RemoteValue> Iterator for ObjectRefGenerator<T> {
    type Item = Result<ObjectRef<T>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_until(None)
    }
}

impl<T> Drop for ObjectRefGenerator<T> {
    fn drop(&mut self) {
        self.stream.close();
        let paused = self.stream.window > 0 && !self.finished;
        self.completed
            .runtime()
            .stream_closed(self.stream.task, paused);
    }
}
