//! The node object store: object values (or failures) by id, and the wakers waiting on them.
//!
//! The store is sharded by id so that producers (executors) and consumers (drivers in `get`)
//! rarely contend; a shard keeps its entries in an [`IdTable`] by the id's number within the
//! shard, so the ids a session counts up fill its pages (no hash table to grow and rehash as a
//! million results arrive). Values are immutable, reference-counted byte buffers: a `get` hands out a
//! clone of the `Arc`, never a copy of the bytes.
//!
//! # Invariants
//! - An entry settles at most once: the first `put` or `fail` wins and later ones are ignored,
//!   so a cancelled task that finishes late cannot overwrite its `Cancelled` failure.
//! - Every waker registered on a pending entry is woken exactly once, when it settles or is
//!   removed.

use std::ops::Deref;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Waker;

use parking_lot::Mutex;
use starling_proto::id_table::{IdTable, TableId};
use starling_proto::{ObjectId, TaskFailure};

/// An immutable object value: encoded bytes shared by reference count, in memory or mapped
/// from a node store file (read without copying). An empty value (what a function returning
/// `()` stores) allocates nothing: no backing at all.
#[derive(Clone)]
pub struct Blob(Option<Arc<Backing>>);

enum Backing {
    Heap(Vec<u8>),
    /// A mapped file and where the value starts in it (after a store file's header).
    Mapped(memmap2::Mmap, usize),
}

impl Blob {
    /// Wraps `bytes` without copying them.
    pub fn new(bytes: Vec<u8>) -> Self {
        if bytes.is_empty() {
            return Blob(None);
        }
        Blob(Some(Arc::new(Backing::Heap(bytes))))
    }

    /// Maps the file at `path` read-only. The store's files are immutable once written (written
    /// under a temporary name, then renamed), and a mapping stays valid if the file is later
    /// unlinked or spilled, so readers never see it change.
    pub fn map_file(path: &std::path::Path) -> std::io::Result<Self> {
        let file = std::fs::File::open(path)?;
        if file.metadata()?.len() == 0 {
            return Ok(Blob::new(Vec::new()));
        }
        // SAFETY: the file is never written after it is renamed into the store (see above);
        // the mapping is read-only and private to this process.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        Ok(Blob(Some(Arc::new(Backing::Mapped(map, 0)))))
    }

    /// Maps the node store file at `path` as object `object` of head `epoch` (`0`: any): its
    /// header must say so, with the file's length (see [`starling_proto::store_file`]), or the
    /// file is refused with `InvalidData`. The blob is the value after the header.
    pub fn map_object(path: &std::path::Path, object: u64, epoch: u64) -> std::io::Result<Self> {
        use starling_proto::store_file::{StoreHeader, HEADER_LEN};
        let file = open_reader(path)?;
        let len = file.metadata()?.len();
        let refuse = |e: starling_proto::store_file::HeaderError| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} refused: {e}", path.display()),
            )
        };
        if len < HEADER_LEN as u64 {
            return Err(refuse(starling_proto::store_file::HeaderError::NoHeader));
        }
        // SAFETY: as in `map_file`: a store file is not written while a reader holds its
        // lock (`open_reader`), which this mapping keeps until it is unmapped.
        let map = unsafe { memmap2::Mmap::map(&file)? };
        let header = StoreHeader::decode(&map).map_err(refuse)?;
        header.check(object, epoch, len).map_err(refuse)?;
        Ok(Blob(Some(Arc::new(Backing::Mapped(map, HEADER_LEN)))))
    }

    /// Whether the bytes are a mapped store file (rather than memory of this process).
    pub fn is_mapped(&self) -> bool {
        matches!(self.0.as_deref(), Some(Backing::Mapped(..)))
    }

    /// Whether `slice` points into this blob's bytes.
    pub fn contains(&self, slice: &[u8]) -> bool {
        let range = self.as_ptr_range();
        let s = slice.as_ptr_range();
        range.start <= s.start && s.end <= range.end
    }
}

/// Opens the node store file at `path` to read it, registered as one of its readers: a shared
/// `flock` on the opened file, which lasts as long as the file stays open or mapped (the lock
/// belongs to the open file, which a mapping keeps alive after the descriptor is closed, and
/// the kernel drops it when the process dies). A freed store file is reused by its writer only
/// while no reader holds the lock (see [`starling_proto::store_file::REUSE_MIN`]), so what a
/// reader maps never changes under it.
///
/// `NotFound` when the file is no longer the object its path names: it was freed (and is being
/// reused) between the open and the lock.
pub fn open_reader(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::io::AsRawFd;
    let file = std::fs::File::open(path)?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            // Held exclusively: its writer is taking the freed file back this instant.
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} is being reused", path.display()),
            ));
        }
        return Err(e);
    }
    // Locked: the file cannot be taken for reuse now. Is it still the one the path names?
    if !names(path, &file)? {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{} was replaced while it was opened", path.display()),
        ));
    }
    Ok(file)
}

/// Whether `path` names `file` (the same file on the same device); `NotFound` when it names
/// nothing.
pub fn names(path: &std::path::Path, file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let (opened, named) = (file.metadata()?, std::fs::metadata(path)?);
    Ok((opened.dev(), opened.ino()) == (named.dev(), named.ino()))
}

/// Takes the exclusive `flock` of a store file if no process holds it (no reader maps the
/// file); `false` otherwise. It lasts until [`unlock`] or the file is closed.
pub fn try_lock_exclusive(file: &std::fs::File) -> bool {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a descriptor `file` owns.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}

/// Lets go of the `flock` this open file holds.
pub fn unlock(file: &std::fs::File) {
    use std::os::unix::io::AsRawFd;
    // SAFETY: flock on a descriptor `file` owns.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_UN) };
}

impl Default for Blob {
    fn default() -> Self {
        Blob::new(Vec::new())
    }
}

impl PartialEq for Blob {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for Blob {}

impl Deref for Blob {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self.0.as_deref() {
            None => &[],
            Some(Backing::Heap(v)) => v,
            Some(Backing::Mapped(m, start)) => &m[*start..],
        }
    }
}

impl std::fmt::Debug for Blob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Blob({} B)", self.len())
    }
}

/// What a lookup found.
#[derive(Clone, Debug)]
pub enum Lookup {
    /// The value.
    Ready(Blob),
    /// The object will never have a value.
    Failed(Arc<TaskFailure>),
    /// Not settled yet (the waker, if any, was registered).
    Pending,
}

/// 16 bytes: the wakers of a pending entry are a boxed slice (only a waited-on object has
/// them, rarely more than one), so a store holding a million values pays 8 bytes less for
/// each, about twice over (a table's slack).
enum Slot {
    Pending(Box<[Waker]>),
    Ready(Blob),
    Failed(Arc<TaskFailure>),
}

type Shard = Mutex<IdTable<InShard, Slot>>;

const SHARDS: usize = 64;

/// An object's number within its shard: its id divided by [`SHARDS`] (the shard is the
/// remainder), so consecutive ids of one shard are consecutive here.
#[derive(Clone, Copy)]
struct InShard(u64);

impl InShard {
    #[inline]
    fn of_id(id: ObjectId) -> Self {
        InShard(id.0 / SHARDS as u64)
    }
}

impl TableId for InShard {
    #[inline]
    fn number(self) -> u64 {
        self.0
    }

    #[inline]
    fn of(number: u64) -> Self {
        InShard(number)
    }
}

/// Object values of one node.
pub struct ObjectStore {
    shards: Box<[Shard]>,
    bytes: AtomicU64,
    /// Bumped after every settle, so spinning waiters can poll one atomic instead of a lock.
    epoch: AtomicU64,
}

impl Default for ObjectStore {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ObjectStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ObjectStore({} B)", self.bytes_used())
    }
}

impl ObjectStore {
    /// An empty store.
    pub fn new() -> Self {
        ObjectStore {
            shards: (0..SHARDS).map(|_| Mutex::new(IdTable::new())).collect(),
            bytes: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
        }
    }

    #[inline]
    fn shard(&self, id: ObjectId) -> &Shard {
        &self.shards[(id.0 as usize) % SHARDS]
    }

    /// Stores the value of `id` and wakes its waiters. Ignored if `id` already settled.
    /// Returns whether the value was stored.
    pub fn put(&self, id: ObjectId, value: Blob) -> bool {
        let len = value.len() as u64;
        let wakers = {
            let mut shard = self.shard(id).lock();
            match shard.get_mut(&InShard::of_id(id)) {
                Some(slot @ Slot::Pending(_)) => {
                    let Slot::Pending(w) = std::mem::replace(slot, Slot::Ready(value)) else {
                        unreachable!()
                    };
                    w.into_vec()
                }
                Some(_) => return false,
                None => {
                    shard.insert(InShard::of_id(id), Slot::Ready(value));
                    Vec::new()
                }
            }
        };
        self.bytes.fetch_add(len, Ordering::Relaxed);
        self.epoch.fetch_add(1, Ordering::Release);
        wakers.into_iter().for_each(Waker::wake);
        true
    }

    /// Records that `id` will never have a value and wakes its waiters. Ignored if settled.
    pub fn fail(&self, id: ObjectId, failure: Arc<TaskFailure>) {
        let wakers = {
            let mut shard = self.shard(id).lock();
            match shard.get_mut(&InShard::of_id(id)) {
                Some(slot @ Slot::Pending(_)) => {
                    let Slot::Pending(w) = std::mem::replace(slot, Slot::Failed(failure)) else {
                        unreachable!()
                    };
                    w.into_vec()
                }
                Some(_) => return,
                None => {
                    shard.insert(InShard::of_id(id), Slot::Failed(failure));
                    Vec::new()
                }
            }
        };
        self.epoch.fetch_add(1, Ordering::Release);
        wakers.into_iter().for_each(Waker::wake);
    }

    /// Looks `id` up; if it is not settled and `waker` is given, registers it (creating the
    /// pending entry if needed).
    pub fn lookup(&self, id: ObjectId, waker: Option<&Waker>) -> Lookup {
        let mut shard = self.shard(id).lock();
        match shard.get_mut(&InShard::of_id(id)) {
            Some(Slot::Ready(b)) => Lookup::Ready(b.clone()),
            Some(Slot::Failed(f)) => Lookup::Failed(f.clone()),
            Some(Slot::Pending(w)) => {
                if let Some(waker) = waker {
                    if !w.iter().any(|x| x.will_wake(waker)) {
                        let mut more = std::mem::take(w).into_vec();
                        more.push(waker.clone());
                        *w = more.into_boxed_slice();
                    }
                }
                Lookup::Pending
            }
            None => {
                if let Some(waker) = waker {
                    shard.insert(InShard::of_id(id), Slot::Pending(Box::new([waker.clone()])));
                }
                Lookup::Pending
            }
        }
    }

    /// Whether `id` has settled (value or failure).
    pub fn is_settled(&self, id: ObjectId) -> bool {
        matches!(
            self.shard(id).lock().get(&InShard::of_id(id)),
            Some(Slot::Ready(_) | Slot::Failed(_))
        )
    }

    /// Drops `id`'s value or failure; returns whether it had settled. Waiters of a pending entry
    /// are woken (they will find the object gone).
    pub fn remove(&self, id: ObjectId) -> bool {
        let slot = self.shard(id).lock().remove(&InShard::of_id(id));
        match slot {
            Some(Slot::Ready(b)) => {
                self.bytes.fetch_sub(b.len() as u64, Ordering::Relaxed);
                true
            }
            Some(Slot::Pending(w)) => {
                w.into_vec().into_iter().for_each(Waker::wake);
                false
            }
            Some(Slot::Failed(_)) => true,
            None => false,
        }
    }

    /// A counter that changes whenever any entry settles. A waiter that saw the same epoch
    /// twice knows nothing settled in between, without taking a lock.
    #[inline]
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Bytes of values held.
    pub fn bytes_used(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Entries held (values, failures and pending waits).
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().len()).sum()
    }

    /// Whether the store holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_proto::{FailureKind, TaskId};
    use std::sync::atomic::AtomicUsize;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn first_settle_wins_and_wakes_once() {
        let s = ObjectStore::new();
        let c = Arc::new(Count(AtomicUsize::new(0)));
        let w = Waker::from(c.clone());
        assert!(matches!(s.lookup(ObjectId(1), Some(&w)), Lookup::Pending));
        assert!(matches!(s.lookup(ObjectId(1), Some(&w)), Lookup::Pending));
        let f = Arc::new(TaskFailure {
            task: TaskId(1),
            attempt: 0,
            kind: FailureKind::Cancelled,
        });
        s.fail(ObjectId(1), f);
        assert!(
            !s.put(ObjectId(1), Blob::new(vec![1])),
            "a late value must not replace a failure"
        );
        assert_eq!(c.0.load(Ordering::SeqCst), 1);
        assert!(matches!(s.lookup(ObjectId(1), None), Lookup::Failed(_)));
        assert_eq!(s.bytes_used(), 0);
    }

    #[test]
    fn values_are_shared_and_accounted() {
        let s = ObjectStore::new();
        assert!(s.put(ObjectId(2), Blob::new(vec![7; 100])));
        let Lookup::Ready(b) = s.lookup(ObjectId(2), None) else {
            panic!()
        };
        assert_eq!(b.len(), 100);
        assert_eq!(s.bytes_used(), 100);
        s.remove(ObjectId(2));
        assert_eq!(s.bytes_used(), 0);
        assert!(s.is_empty());
        assert_eq!(b[0], 7, "a reader keeps its value alive after removal");
    }
}
