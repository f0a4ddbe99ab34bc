//! Waiting for objects in a store, shared by every runtime backend.
//!
//! A wait first spins briefly (short tasks finish within microseconds), then registers a waker
//! and parks. A thread that executes a task reports itself blocked before parking, so its
//! runtime can lend its CPUs to other tasks, and unblocked afterwards.

use std::time::{Duration, Instant};

use std::sync::Arc;

use starling_proto::ObjectId;
use starling_worker::store::{Blob, Lookup, ObjectStore};

use super::exec;
use crate::error::{Error, Result};
use crate::object_ref::RefHandle;
use crate::stream::Stream;

/// What a backend contributes to a wait.
pub(crate) trait WaitHooks {
    /// Called once per wait before it parks: `true` when the wait starts blocking, `false` when
    /// it ends (only if it was called with `true`).
    fn blocked(&self, blocked: bool);
    /// An error that ends every wait (shut down, connection lost), if any.
    fn closed(&self) -> Option<Error>;
    /// How long to spin before parking.
    fn spin(&self) -> Duration {
        exec::WAIT_SPIN
    }
    /// Whether `id` (not settled in the store) is an object that exists or will: `false` for
    /// an id nobody made or one already freed, which would otherwise be waited on forever. A
    /// backend that cannot tell here may ask for the object's fate and answer `true`.
    fn known(&self, _id: ObjectId) -> bool {
        true
    }
}

fn settled(l: Lookup) -> Option<Result<Blob>> {
    match l {
        Lookup::Ready(b) => Some(Ok(b)),
        Lookup::Failed(f) => Some(Err(Error::from(&*f))),
        Lookup::Pending => None,
    }
}

/// Blocks until `id` settles in `store`, `deadline` passes, or the backend closes.
pub(crate) fn wait_one(
    store: &ObjectStore,
    id: ObjectId,
    deadline: Option<Instant>,
    hooks: &impl WaitHooks,
) -> Result<Blob> {
    let start = Instant::now();
    if let Some(r) = settled(store.lookup(id, None)) {
        return r;
    }
    let mut seen = u64::MAX;
    let settled_now = || {
        let epoch = store.epoch();
        let changed = epoch != seen;
        seen = epoch;
        changed && store.is_settled(id)
    };
    if exec::spin_until(hooks.spin(), settled_now) {
        if let Some(r) = settled(store.lookup(id, None)) {
            return r;
        }
    }
    if !hooks.known(id) {
        // It may have settled meanwhile; otherwise no value will ever come.
        return settled(store.lookup(id, None)).unwrap_or(Err(Error::ObjectLost(id)));
    }
    hooks.blocked(true);
    let waker = exec::thread_waker();
    let result = loop {
        if let Some(r) = settled(store.lookup(id, Some(&waker))) {
            break r;
        }
        if let Some(e) = hooks.closed() {
            break Err(e);
        }
        match deadline {
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    break Err(Error::Timeout {
                        waited: now - start,
                    });
                }
                // Woken by the value; the session's end is checked at least every
                // RECHECK, also before a far deadline.
                std::thread::park_timeout((d - now).min(RECHECK));
            }
            None => std::thread::park_timeout(RECHECK),
        }
    };
    hooks.blocked(false);
    result
}

/// Blocks until an item of `stream` comes (`Some`), `end` (the streaming task's own object)
/// settles with no item left to take (`None`), `deadline` passes or the backend closes.
pub(crate) fn wait_stream(
    store: &ObjectStore,
    stream: &Stream,
    end: ObjectId,
    deadline: Option<Instant>,
    hooks: &impl WaitHooks,
) -> Result<Option<Arc<RefHandle>>> {
    let start = Instant::now();
    let waker = exec::thread_waker();
    let mut blocked = false;
    let result = loop {
        if let Some(item) = stream.take(Some(&waker)) {
            break Ok(Some(item));
        }
        if !matches!(store.lookup(end, Some(&waker)), Lookup::Pending) {
            // An item that came just before the end is the caller's still.
            break Ok(stream.take(None));
        }
        if let Some(e) = hooks.closed() {
            break Err(e);
        }
        let park = match deadline {
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    break Err(Error::Timeout {
                        waited: now - start,
                    });
                }
                (d - now).min(RECHECK)
            }
            None => RECHECK,
        };
        if !blocked {
            hooks.blocked(true);
            blocked = true;
            // The producer may be waiting for this thread's CPU: look again before parking.
            continue;
        }
        std::thread::park_timeout(park);
    };
    if blocked {
        hooks.blocked(false);
    }
    result
}

/// How often a parked wait checks whether its session ended (nothing wakes it for that).
const RECHECK: Duration = Duration::from_millis(200);

/// Waits until `num_returns` of `ids` settled or `timeout` passes; returns which settled.
pub(crate) fn wait_many(
    store: &ObjectStore,
    ids: &[ObjectId],
    num_returns: usize,
    timeout: Option<Duration>,
    hooks: &impl WaitHooks,
) -> Vec<bool> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let waker = exec::thread_waker();
    let mut blocked = false;
    let mut done = vec![false; ids.len()];
    loop {
        let mut n = 0;
        for (i, id) in ids.iter().enumerate() {
            if !done[i] {
                done[i] = !matches!(store.lookup(*id, Some(&waker)), Lookup::Pending);
            }
            n += usize::from(done[i]);
        }
        if n >= num_returns.min(ids.len()) || hooks.closed().is_some() {
            break;
        }
        let park = match deadline {
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    break;
                }
                (d - now).min(RECHECK)
            }
            None => RECHECK,
        };
        if !blocked {
            hooks.blocked(true);
            blocked = true;
        }
        std::thread::park_timeout(park);
    }
    if blocked {
        hooks.blocked(false);
    }
    done
}
