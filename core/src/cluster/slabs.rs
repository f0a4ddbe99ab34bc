//! Store files reused by the process that wrote them ("slabs"), so that a large value is
//! written into memory that is already allocated and mapped instead of a fresh file's pages.
//!
//! A fresh store file costs its writer the kernel's allocation and clearing of every page
//! (about 2 GB/s here) and, when mapped, a fault per page; a copy into a mapping it already
//! has runs at memory speed (four times that). So a process keeps the store files it wrote of
//! at least [`REUSE_MIN`] bytes (an open descriptor and, once reused, a writable mapping) in a
//! small cache. When the head frees such an object, its node renames the file to
//! `.free.<id>` instead of deleting it; the writer's next large value of at most that size
//! takes the file back (renames it to its own temporary name), writes through the mapping it
//! kept, and publishes it under the new object's name as any store file.
//!
//! # Invariants
//! - A file is taken back only while no process maps it as a reader: readers hold a shared
//!   `flock` for as long as they map a store file (`starling_worker::store::open_reader`),
//!   and the claim holds the exclusive lock across its check and its rename. The node's
//!   deletion of an expired freed file takes the same lock, so the two never interleave.
//! - Only freed files are written: a slab whose object is alive is skipped, one whose file is
//!   gone (deleted by the node, spilled, cleared by a new head) is dropped from the cache.
//! - A slab is owned by one writer at a time: it leaves the cache while it is written and
//!   comes back when its value is stored (or is dropped with a failed write).

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use starling_proto::store_file::{free_name, REUSE_MIN};
use starling_proto::ObjectId;

/// The most bytes of slabs one process keeps for reuse.
const CACHE_BYTES: usize = 512 << 20;
/// The most slabs one process keeps.
const CACHE_SLABS: usize = 64;
/// A slab not reused for this long is let go (at the next store write that looks).
const IDLE: Duration = Duration::from_secs(60);
/// How many cached slabs one store write looks at (a `stat` each) before it writes a fresh
/// file instead.
const TAKE_LOOKS: usize = 8;
/// Copies of at least this many bytes into a slab are split over two threads (where the
/// machine has two cores): one thread alone does not reach the memory's bandwidth.
const PARALLEL_COPY_MIN: usize = 8 << 20;

/// One reusable store file of this process.
pub(crate) struct Slab {
    file: File,
    /// Writable, shared: what is written here is the file's content for every reader. Made
    /// (with its pages populated) when the slab is first reused.
    map: Option<memmap2::MmapMut>,
    /// The bytes the mapping covers (before it is made: the file's length).
    cap: usize,
    /// The file's identity, to know it under another name.
    dev: u64,
    ino: u64,
    /// The store directory it lives in.
    dir: PathBuf,
    /// The object it holds (or held, once freed).
    object: ObjectId,
    used: Instant,
}

static CACHE: Mutex<Vec<Slab>> = Mutex::new(Vec::new());

/// Whether a store file of `len` bytes (header included) is worth keeping for reuse.
pub(crate) fn reusable(len: usize) -> bool {
    len as u64 >= REUSE_MIN
}

impl Slab {
    /// A store file this process has just written (`file`, open for reading and writing), of
    /// `len` bytes, in `dir` ([`keep`] says which object it holds).
    pub(crate) fn new(file: File, dir: &Path, len: usize) -> std::io::Result<Self> {
        let meta = file.metadata()?;
        Ok(Slab {
            file,
            map: None,
            cap: len,
            dev: meta.dev(),
            ino: meta.ino(),
            dir: dir.to_path_buf(),
            object: ObjectId(0),
            used: Instant::now(),
        })
    }

    /// A store file this process is writing (`file`, open for reading and writing) of `len`
    /// bytes in `dir`, sized and mapped to be filled in place.
    pub(crate) fn mapped(file: File, dir: &Path, len: usize) -> std::io::Result<Self> {
        file.set_len(len as u64)?;
        let mut slab = Slab::new(file, dir, len)?;
        // SAFETY: a temporary file of this process's, which nobody else opens.
        slab.map = Some(unsafe { memmap2::MmapOptions::new().len(len).map_mut(&slab.file)? });
        Ok(slab)
    }

    /// Bytes `from..to` of the file, to write in place (the slab is mapped).
    pub(crate) fn region(&mut self, from: usize, to: usize) -> &mut [u8] {
        &mut self
            .map
            .as_mut()
            .expect("a slab written in place is mapped")[from..to]
    }

    /// Copies `bytes` to offset `at` of the file. The caller keeps within the length the
    /// slab was taken for.
    pub(crate) fn write_at(&mut self, at: usize, bytes: &[u8]) {
        let map = self.map.as_mut().expect("a taken slab is mapped");
        let dst = &mut map[at..at + bytes.len()];
        if bytes.len() >= PARALLEL_COPY_MIN && two_cores() {
            let half = bytes.len() / 2;
            let (d0, d1) = dst.split_at_mut(half);
            let (s0, s1) = bytes.split_at(half);
            std::thread::scope(|s| {
                s.spawn(|| d1.copy_from_slice(s1));
                d0.copy_from_slice(s0);
            });
        } else {
            dst.copy_from_slice(bytes);
        }
    }

    /// Whether the file has no name left (deleted or moved off this filesystem).
    fn is_gone(&self) -> bool {
        self.file.metadata().map_or(true, |m| m.nlink() == 0)
    }

    /// Sizes the file to `len` bytes and maps it, if it was not yet.
    fn prepare(&mut self, len: usize) -> std::io::Result<()> {
        if self.file.metadata()?.len() != len as u64 {
            self.file.set_len(len as u64)?;
        }
        if self.map.is_none() {
            // SAFETY: the file is this process's, taken back under the exclusive lock (no
            // reader maps it) and under a temporary name nobody else opens.
            let map = unsafe {
                memmap2::MmapOptions::new()
                    .len(len)
                    .populate()
                    .map_mut(&self.file)?
            };
            self.map = Some(map);
            self.cap = len;
        }
        Ok(())
    }
}

fn two_cores() -> bool {
    static N: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().is_ok_and(|n| n.get() > 1))
}

/// Takes back a freed store file of this process in `dir` that can hold `len` bytes, renamed
/// to `tmp`, sized to `len` and mapped; `None` when there is none (write a fresh file).
pub(crate) fn take(dir: &Path, len: usize, tmp: &Path) -> Option<Slab> {
    let mut cache = CACHE.lock();
    // The smallest that fit, and among those the longest unused (the likeliest freed).
    let mut order: Vec<usize> = (0..cache.len())
        .filter(|&i| cache[i].cap >= len && cache[i].dir == dir)
        .collect();
    order.sort_by_key(|&i| (cache[i].cap, cache[i].used));
    // A slab whose file is not freed (its object is alive, or the file is gone: `keep` drops
    // those) or is still read by some process is passed over.
    let taken = order.into_iter().take(TAKE_LOOKS).find(|&i| {
        let slab = &cache[i];
        let freed = dir.join(free_name(slab.object.0));
        std::fs::metadata(&freed).is_ok_and(|m| (m.dev(), m.ino()) == (slab.dev, slab.ino))
            && claim(slab, &freed, tmp)
    })?;
    let mut s = cache.swap_remove(taken);
    drop(cache);
    s.used = Instant::now();
    match s.prepare(len) {
        Ok(()) => Some(s),
        Err(_) => {
            let _ = std::fs::remove_file(tmp);
            None
        }
    }
}

/// Renames the freed file `freed` of `slab` to `tmp` under the file's exclusive lock: refused
/// while any process maps it as a reader.
fn claim(slab: &Slab, freed: &Path, tmp: &Path) -> bool {
    use starling_worker::store::{try_lock_exclusive, unlock};
    if !try_lock_exclusive(&slab.file) {
        return false;
    }
    let renamed = std::fs::rename(freed, tmp).is_ok();
    unlock(&slab.file);
    renamed
}

/// Keeps `slab`, whose file now holds `object`'s stored value, for reuse, letting go of the
/// slabs not used for a while and, past the cache's bounds, the least recently used.
pub(crate) fn keep(mut slab: Slab, object: ObjectId) {
    slab.object = object;
    slab.used = Instant::now();
    let mut cache = CACHE.lock();
    cache.retain(|s| s.used.elapsed() < IDLE);
    cache.push(slab);
    let over = |c: &Vec<Slab>| {
        c.len() > CACHE_SLABS || c.iter().map(|s| s.cap).sum::<usize>() > CACHE_BYTES
    };
    if over(&cache) {
        cache.retain(|s| !s.is_gone());
        while over(&cache) {
            let oldest = (0..cache.len())
                .min_by_key(|&i| cache[i].used)
                .expect("over its bounds, the cache is not empty");
            cache.swap_remove(oldest);
        }
    }
}

#[cfg(test)]
pub(crate) fn cached() -> usize {
    CACHE.lock().len()
}
