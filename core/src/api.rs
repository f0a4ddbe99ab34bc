//! The free functions of the public API: `get`, `put`, `wait`, `cancel`, `nodes`.

use std::time::{Duration, Instant};

use crate::__private::RemoteValue;
use crate::bytes::Bytes;
use crate::codec;
use crate::error::{Error, Result};
use crate::object_ref::ObjectRef;
use crate::runtime::{current_or_init, NodeInfo};

/// Blocks until the value of `r` is available and returns it. Inside a task, the task's CPUs are
/// lent back while it waits, so nested tasks cannot deadlock, whichever of the task's threads
/// waits. See [`get_timeout`] for a bound.
pub fn get<T: RemoteValue>(r: &ObjectRef<T>) -> Result<T> {
    let blob = r.runtime().wait_object(r.id(), None)?;
    codec::decode_for(r.runtime(), &blob)
}

/// Like [`get`], but gives up with [`Error::Timeout`] after `timeout`.
pub fn get_timeout<T: RemoteValue>(r: &ObjectRef<T>, timeout: Duration) -> Result<T> {
    let blob = r
        .runtime()
        .wait_object(r.id(), Some(Instant::now() + timeout))?;
    codec::decode_for(r.runtime(), &blob)
}

/// The values of all `refs`, in order. Fails with the first error in input order.
pub fn get_all<T: RemoteValue>(refs: &[ObjectRef<T>]) -> Result<Vec<T>> {
    refs.iter().map(get).collect()
}

/// Like [`get_all`], with one deadline for all of them.
pub fn get_all_timeout<T: RemoteValue>(refs: &[ObjectRef<T>], timeout: Duration) -> Result<Vec<T>> {
    let deadline = Instant::now() + timeout;
    refs.iter()
        .map(|r| {
            codec::decode_for(
                r.runtime(),
                &r.runtime().wait_object(r.id(), Some(deadline))?,
            )
        })
        .collect()
}

/// Stores `value` in the object store of the current runtime and returns a ref to it.
///
/// `value` may hold `ObjectRef`s (of this runtime): the objects they refer to live at least as
/// long as the stored value.
pub fn put<T: RemoteValue>(value: T) -> Result<ObjectRef<T>> {
    let rt = current_or_init();
    let foreign = |refs: &[std::sync::Arc<crate::object_ref::RefHandle>]| {
        refs.iter()
            .find(|h| h.rt.owner() != rt.owner())
            .map(|h| Error::ForeignObject(h.id))
    };
    // A large value on a node is encoded straight into its store file.
    let encoded = match codec::encode_nested_into(&value, |size| rt.open_put(size)) {
        Ok((codec::Body::Bytes(bytes), refs)) => codec::Encoded { bytes, refs },
        Ok((codec::Body::Written(file), refs)) => {
            if let Some(e) = foreign(&refs) {
                return Err(e);
            }
            let nested = refs.iter().map(|h| h.id).collect();
            match rt.put_file(file, nested) {
                Ok(id) => {
                    drop(value);
                    // The nested refs' groups go only now, after the scheduler was told the
                    // value holds them.
                    drop(refs);
                    return Ok(ObjectRef::from_raw(id, rt));
                }
                // The file could not be completed (the store is full, ..): put as any other
                // value.
                Err(_) => codec::encode_nested(&value)?,
            }
        }
        // The encoding failed, or writing the file did: in memory, where only the first can.
        Err(_) => codec::encode_nested(&value)?,
    };
    drop(value);
    if let Some(e) = foreign(&encoded.refs) {
        return Err(e);
    }
    let nested = encoded.ref_ids();
    let id = rt.put_bytes(encoded.bytes, nested)?;
    // The nested refs' groups go only now, after the scheduler was told the value holds them.
    drop(encoded.refs);
    Ok(ObjectRef::from_raw(id, rt))
}

/// Stores `len` bytes that `fill` writes in place and returns a ref to them as [`Bytes`]: a
/// large value made without a copy (Ray plasma's create and seal).
///
/// On a node (a local cluster's driver, a task, a driver beside a node agent) `fill` writes
/// straight into the object store's memory, where readers on the host will map the value;
/// where this process has written a large value before and it was freed, into the same,
/// already mapped memory. Elsewhere (in-process, a driver on a host with no node, a value too
/// small for the store) `fill` writes into a buffer that is then put.
///
/// `fill` must write every byte: those it leaves hold whatever the memory held (zeros, or an
/// earlier value of this process's).
///
/// ```
/// # fn main() -> Result<(), starling::Error> {
/// # let rt = starling::Runtime::in_process(2)?;
/// # let _guard = rt.enter();
/// let r = starling::put_with(1 << 20, |buf| {
///     for (i, b) in buf.iter_mut().enumerate() {
///         *b = i as u8;
///     }
/// })?;
/// let v = starling::get(&r)?;
/// assert_eq!((v.len(), v[300]), (1 << 20, 44));
/// # Ok(())
/// # }
/// ```
pub fn put_with(len: usize, fill: impl FnOnce(&mut [u8])) -> Result<ObjectRef<Bytes>> {
    use std::io::Write;
    let rt = current_or_init();
    let prefix = codec::bytes_prefix(len);
    if let Some(mut file) = rt.open_put(prefix.len() + len) {
        if file.write_all(&prefix).is_ok() {
            if let Ok(buf) = file.rest_in_place() {
                fill(buf);
                return match rt.put_file(file, Vec::new()) {
                    Ok(id) => Ok(ObjectRef::from_raw(id, rt)),
                    Err(e) => Err(Error::Store(e.to_string())),
                };
            }
        }
    }
    let mut bytes = vec![0u8; len];
    fill(&mut bytes);
    put(Bytes::new(bytes))
}

/// What [`wait`] returns: `(ready, not_ready)`, each in input order.
pub type WaitResult<T> = (Vec<ObjectRef<T>>, Vec<ObjectRef<T>>);

/// Waits until `num_returns` of `refs` are settled (have a value or an error) or `timeout`
/// passes, and returns `(ready, not_ready)`, as `ray.wait` does: `ready` holds at most
/// `num_returns` refs, the first settled ones in input order, and `not_ready` every other ref,
/// in input order (settled ones past the first `num_returns` included). With a timeout,
/// `ready` may hold fewer.
///
/// An empty `refs` returns two empty lists at once. The same object twice is
/// [`Error::DuplicateRef`]; `num_returns` of 0 or more than `refs.len()` is
/// [`Error::WaitCount`].
///
/// ```
/// # #[starling::remote]
/// # fn add(a: i64, b: i64) -> i64 { a + b }
/// # fn main() -> Result<(), starling::Error> {
/// # let rt = starling::Runtime::in_process(2)?;
/// # let _guard = rt.enter();
/// let refs: Vec<_> = (0..3).map(|i| add::remote(i, 1)).collect();
/// starling::get_all(&refs)?; // all three are settled now
/// let (ready, rest) = starling::wait(&refs, 2, None)?;
/// assert_eq!(ready, refs[..2]);
/// assert_eq!(rest, refs[2..]);
/// # Ok(()) }
/// ```
pub fn wait<T>(
    refs: &[ObjectRef<T>],
    num_returns: usize,
    timeout: Option<Duration>,
) -> Result<WaitResult<T>> {
    let Some(first) = refs.first() else {
        return Ok((Vec::new(), Vec::new()));
    };
    let rt = first.runtime();
    if let Some(r) = refs.iter().find(|r| r.runtime() != rt) {
        return Err(Error::ForeignObject(r.id()));
    }
    let ids: Vec<_> = refs.iter().map(ObjectRef::id).collect();
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    if let Some(dup) = ids.iter().find(|id| !seen.insert(**id)) {
        return Err(Error::DuplicateRef(*dup));
    }
    if num_returns == 0 || num_returns > refs.len() {
        return Err(Error::WaitCount {
            num_returns,
            refs: refs.len(),
        });
    }
    let done = rt.wait_many(&ids, num_returns, timeout);
    let mut ready = Vec::with_capacity(num_returns);
    let mut rest = Vec::with_capacity(refs.len() - num_returns);
    for (r, d) in refs.iter().zip(done) {
        if d && ready.len() < num_returns {
            ready.push(r.clone());
        } else {
            rest.push(r.clone());
        }
    }
    Ok((ready, rest))
}

/// Cancels the task that produces `r`, and, recursively, every unfinished task it submitted (as
/// Ray's `ray.cancel`). A queued task never runs; a running one is asked to stop (see
/// [`is_cancelled`](crate::is_cancelled)). Its `get` returns [`Error::Cancelled`], it is never
/// retried, and tasks depending on it fail.
///
/// With `force`, a running task is stopped whether it asks or not: on a cluster (local or not)
/// its worker process is killed and its node starts a fresh one; what it held is free at once.
/// In-process, where a thread cannot be killed, its resources are free at once too and its
/// executor thread ends when the function returns (another one takes its place), but the
/// function runs on until it returns or sees [`is_cancelled`](crate::is_cancelled).
///
/// Tasks count as submitted by a task when its own thread submitted them; a thread the task
/// started itself submits as a driver would. Cancelling a finished task does nothing.
pub fn cancel<T>(r: &ObjectRef<T>, force: bool) -> Result<()> {
    r.runtime().cancel(r.id(), force)
}

/// Why the task that produces `r` has not started, in words (`"infeasible: needs gpu=1; no node
/// has gpu"`, `"waiting for 2 argument(s)"`), or `None` if it is running or finished.
pub fn pending_reason<T>(r: &ObjectRef<T>) -> Option<String> {
    r.runtime().pending_reason(r.id())
}

/// The nodes of the current runtime, like `ray.nodes()`.
pub fn nodes() -> Result<Vec<NodeInfo>> {
    Ok(current_or_init().nodes())
}
