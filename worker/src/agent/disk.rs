//! The node's object files: the in-memory store directory (tmpfs), the spill directory (disk),
//! and the work on them — freeing, spilling over the memory cap, measuring, opening for fetch.
//!
//! An object lives in one file named by its id in decimal (`<store_dir>/42`), written by the
//! worker process that produced it. When the store directory holds more than its cap, the
//! oldest objects (by modification time) move to the spill directory, so a full store slows
//! down instead of failing. Readers look in the store first, then in the spill directory.
//!
//! A freed object's file of at least [`REUSE_MIN`] bytes is not deleted at once: it is renamed
//! to `.free.<id>` ([`free_name`]), where the process that wrote it can take it back for its
//! next object (its pages are allocated, and mapped in that writer, so the next write runs at
//! memory speed instead of the kernel's page-allocation speed). A freed file waits there at
//! most [`FREE_TTL`], and less when the store needs the memory; deleting one first releases
//! its pages when no process maps it any more, as its writer may still hold a mapping.
//!
//! # Invariants
//! - Only files whose name is a decimal object id are objects. Anything else (a producer's
//!   temporary file, written before it is renamed into place) counts toward memory use but is
//!   never moved, served or counted as an object.
//! - At every instant an object file is in the store, in the spill directory, or in both (a
//!   copy across filesystems lands under a temporary name and is renamed into place before the
//!   original is removed), so a reader that looks in the store and then in the spill directory
//!   always finds it.
//! - Moves and deletions hold one lock, so a `free` cannot interleave with a spill of the same
//!   object and leave a copy behind.
//! - A freed file's pages are released (its hole punched) only while no reader holds its
//!   lock (see [`crate::store::open_reader`]): a value a process still maps never changes.
//! - Everything here blocks; callers run it on the blocking pool, never on the agent's loop.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use starling_proto::node::StoreUsage;
use starling_proto::store_file::{free_name, FREE_PREFIX, REUSE_MIN};
use starling_proto::ObjectId;

/// How long a freed store file waits for its writer to reuse it before it is deleted.
pub(crate) const FREE_TTL: Duration = Duration::from_secs(10);

/// The most bytes of freed files waiting for reuse at once: past it the oldest go at once. A
/// writer reuses only the few files it keeps (see `core::cluster::slabs`), so a workload that
/// frees gigabytes of blocks a second would otherwise hold them all for [`FREE_TTL`].
pub(crate) const FREE_KEEP_BYTES: u64 = 512 << 20;

/// The store and spill directories of one node.
#[derive(Debug)]
pub(crate) struct Disk {
    store: PathBuf,
    spill: PathBuf,
    cap: u64,
    moves: Mutex<()>,
    /// Freed files waiting for reuse, oldest first (some may have been taken back since).
    waiting: Mutex<Waiting>,
}

#[derive(Debug, Default)]
struct Waiting {
    files: std::collections::VecDeque<(ObjectId, u64)>,
    bytes: u64,
}

/// One file found in a directory scan.
struct Entry {
    object: Option<ObjectId>,
    /// For a freed file waiting to be reused (`.free.<id>`), the object it held.
    freed: Option<ObjectId>,
    len: u64,
    mtime: SystemTime,
    /// When it was last renamed (for a freed file: when it was freed).
    ctime: SystemTime,
}

/// The object id a file name stands for, if it is one.
pub(crate) fn object_of(name: &str) -> Option<ObjectId> {
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok().map(ObjectId)
}

impl Disk {
    pub(crate) fn new(store: PathBuf, spill: PathBuf, cap: u64) -> Self {
        Disk {
            store,
            spill,
            cap,
            moves: Mutex::new(()),
            waiting: Mutex::default(),
        }
    }

    pub(crate) fn store_path(&self, id: ObjectId) -> PathBuf {
        self.store.join(id.0.to_string())
    }

    pub(crate) fn spill_path(&self, id: ObjectId) -> PathBuf {
        self.spill.join(id.0.to_string())
    }

    /// Deletes the object from the store and the spill directory. Returns whether a file was
    /// there; a missing object is not an error (the head may free what was never stored here).
    ///
    /// A file in the store of at least [`REUSE_MIN`] bytes is kept for its writer to reuse
    /// (renamed to [`free_name`]) rather than deleted.
    pub(crate) fn free(&self, id: ObjectId) -> io::Result<bool> {
        let _guard = self.moves.lock();
        let mut found = false;
        let store = self.store_path(id);
        let len = fs::metadata(&store).map_or(0, |m| m.len());
        if len >= REUSE_MIN && fs::rename(&store, self.store.join(free_name(id.0))).is_ok() {
            found = true;
            let mut waiting = self.waiting.lock();
            waiting.files.push_back((id, len));
            waiting.bytes += len;
            while waiting.bytes > FREE_KEEP_BYTES {
                let Some((old, len)) = waiting.files.pop_front() else {
                    break;
                };
                waiting.bytes -= len;
                release(&self.store.join(free_name(old.0)));
            }
        }
        for path in [store, self.spill_path(id)] {
            match fs::remove_file(&path) {
                Ok(()) => found = true,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(found)
    }

    /// Removes every object from the store and the spill directory (a new head knows none of
    /// them, and may hand out their ids again). Returns how many were removed.
    pub(crate) fn clear(&self) -> io::Result<usize> {
        let _guard = self.moves.lock();
        let mut removed = 0;
        for dir in [&self.store, &self.spill] {
            for entry in std::fs::read_dir(dir)?.flatten() {
                let name = entry.file_name();
                let Some(name) = name.to_str() else { continue };
                if name.starts_with(FREE_PREFIX) {
                    release(&entry.path());
                } else if object_of(name).is_some() && std::fs::remove_file(entry.path()).is_ok() {
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    /// Spills the oldest objects while the store is over its cap, then measures both
    /// directories. Returns the usage and the objects spilled (oldest first).
    ///
    /// Freed files waiting for reuse do not count as used; they are deleted once older than
    /// [`FREE_TTL`], and before any object is spilled, oldest first, while the store and they
    /// together are over the cap.
    pub(crate) fn maintain(&self) -> io::Result<(StoreUsage, Vec<ObjectId>)> {
        let (mut freed, mut store): (Vec<Entry>, Vec<Entry>) = scan(&self.store)?
            .into_iter()
            .partition(|e| e.freed.is_some());
        let mut memory: u64 = store.iter().map(|e| e.len).sum();
        let mut waiting: u64 = freed.iter().map(|e| e.len).sum();
        freed.sort_by_key(|e| e.ctime);
        let now = SystemTime::now();
        let mut released = 0;
        for e in &freed {
            let expired = now.duration_since(e.ctime).unwrap_or_default() >= FREE_TTL;
            if !expired && memory + waiting <= self.cap {
                break;
            }
            if let Some(id) = e.freed {
                release(&self.store.join(free_name(id.0)));
            }
            waiting -= e.len;
            released += 1;
        }
        // What waits now (files taken back since the last scan no longer count).
        *self.waiting.lock() = Waiting {
            files: freed[released..]
                .iter()
                .filter_map(|e| Some((e.freed?, e.len)))
                .collect(),
            bytes: waiting,
        };
        let mut spilled_now = Vec::new();
        if memory > self.cap {
            // Oldest first; ties broken by id so the order is deterministic.
            store.sort_by_key(|e| (e.mtime, e.object));
            for e in store.iter().filter(|e| e.object.is_some()) {
                if memory <= self.cap {
                    break;
                }
                let Some(id) = e.object else { continue };
                if self.spill_one(id)? {
                    memory = memory.saturating_sub(e.len);
                    spilled_now.push(id);
                }
            }
        }
        let spill = scan(&self.spill)?;
        let objects = store.iter().filter(|e| e.object.is_some()).count() - spilled_now.len()
            + spill.iter().filter(|e| e.object.is_some()).count();
        let usage = StoreUsage {
            memory_bytes: memory,
            spilled_bytes: spill.iter().map(|e| e.len).sum(),
            objects: objects as u64,
        };
        Ok((usage, spilled_now))
    }

    /// Moves one object to the spill directory. Returns false if it was gone (freed meanwhile).
    fn spill_one(&self, id: ObjectId) -> io::Result<bool> {
        let _guard = self.moves.lock();
        let (src, dst) = (self.store_path(id), self.spill_path(id));
        match fs::rename(&src, &dst) {
            Ok(()) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            // Typically EXDEV (tmpfs to disk): copy under a temporary name, then publish.
            Err(_) => {}
        }
        let tmp = self.spill.join(format!(".{}.spilling", id.0));
        match fs::copy(&src, &tmp) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound && !src.exists() => {
                let _ = fs::remove_file(&tmp);
                return Ok(false);
            }
            Err(e) => {
                let _ = fs::remove_file(&tmp);
                return Err(e);
            }
        }
        fs::rename(&tmp, &dst)?;
        // Its writer may keep a mapping of the store file (for reuse), which would hold the
        // memory the spill is meant to free.
        release(&src);
        Ok(true)
    }

    /// Opens the object for reading, as one of its readers (the file cannot be reused while
    /// it is open): from the store, else from the spill directory.
    pub(crate) async fn open(&self, id: ObjectId) -> io::Result<(tokio::fs::File, PathBuf)> {
        let mut last = io::Error::from(io::ErrorKind::NotFound);
        for path in [self.store_path(id), self.spill_path(id)] {
            let opening = path.clone();
            let opened =
                tokio::task::spawn_blocking(move || crate::store::open_reader(&opening)).await;
            match opened.map_err(io::Error::other)? {
                Ok(f) => return Ok((tokio::fs::File::from_std(f), path)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }
}

/// Deletes the store file at `path` (freed, or copied to the spill directory), first releasing
/// its pages when no process maps it as a reader: its writer may still hold a mapping of it
/// (for reuse), which would otherwise keep the pages allocated after the name is gone.
///
/// The exclusive lock also keeps the writer out: it takes a freed file back (renames it) only
/// under the same lock, so a file that is still under `path` once the lock is held has not been
/// taken, and cannot be while its pages are released.
fn release(path: &Path) {
    use crate::store::{names, try_lock_exclusive};
    use std::os::unix::io::AsRawFd;
    if let Ok(file) = fs::OpenOptions::new().write(true).open(path) {
        if try_lock_exclusive(&file) {
            match names(path, &file) {
                Ok(true) => {
                    if let Ok(meta) = file.metadata() {
                        // SAFETY: fallocate on a descriptor this function owns; the whole file.
                        unsafe {
                            libc::fallocate(
                                file.as_raw_fd(),
                                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                                0,
                                meta.len() as libc::off_t,
                            );
                        }
                    }
                    let _ = fs::remove_file(path);
                    return;
                }
                // Taken back by its writer since it was opened: not this one's to delete.
                Ok(false) => return,
                Err(_) => {}
            }
        }
    }
    let _ = fs::remove_file(path);
}

/// The regular files directly in `dir`. Files that vanish during the scan are skipped.
fn scan(dir: &Path) -> io::Result<Vec<Entry>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let Ok(entry) = entry else { continue };
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let name = entry.file_name();
        let name = name.to_str();
        let ctime = SystemTime::UNIX_EPOCH
            + Duration::new(meta.ctime().max(0) as u64, meta.ctime_nsec().max(0) as u32);
        out.push(Entry {
            object: name.and_then(object_of),
            freed: name
                .and_then(|n| n.strip_prefix(FREE_PREFIX))
                .and_then(object_of),
            len: meta.len(),
            mtime: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            ctime,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn dirs(name: &str) -> (PathBuf, PathBuf, PathBuf) {
        let root = std::env::temp_dir().join(format!(
            "starling-disk-unit-{name}-{}-{:?}",
            std::process::id(),
            SystemTime::now()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap_or_default()
        ));
        let (store, spill) = (root.join("store"), root.join("spill"));
        fs::create_dir_all(&store).unwrap();
        fs::create_dir_all(&spill).unwrap();
        (root, store, spill)
    }

    fn write(path: &Path, len: usize, age_s: u64) {
        let f = fs::File::create(path).unwrap();
        f.set_len(len as u64).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(age_s))
            .unwrap();
    }

    #[test]
    fn object_names() {
        assert_eq!(object_of("42"), Some(ObjectId(42)));
        for bad in [
            "",
            "+1",
            "42.tmp",
            ".42.spilling",
            "x",
            "99999999999999999999999",
        ] {
            assert_eq!(object_of(bad), None, "{bad}");
        }
    }

    #[test]
    fn spills_oldest_until_under_cap_and_frees() {
        let (root, store, spill) = dirs("spill");
        let disk = Disk::new(store.clone(), spill.clone(), 2500);
        write(&store.join("1"), 1000, 50);
        write(&store.join("2"), 1000, 40);
        write(&store.join("3"), 1000, 30);
        write(&store.join("4"), 1000, 20);
        write(&store.join("4.tmp"), 100, 100);
        let (usage, moved) = disk.maintain().unwrap();
        assert_eq!(moved, [ObjectId(1), ObjectId(2)]);
        assert_eq!(usage.memory_bytes, 2100);
        assert_eq!(usage.spilled_bytes, 2000);
        assert_eq!(usage.objects, 4);
        assert!(spill.join("1").exists() && !store.join("1").exists());
        assert!(store.join("4.tmp").exists());
        assert!(disk.free(ObjectId(1)).unwrap());
        assert!(disk.free(ObjectId(3)).unwrap());
        assert!(!disk.free(ObjectId(3)).unwrap());
        let (usage, moved) = disk.maintain().unwrap();
        assert!(moved.is_empty());
        assert_eq!(
            (usage.memory_bytes, usage.spilled_bytes, usage.objects),
            (1100, 1000, 2)
        );
        fs::remove_dir_all(root).unwrap();
    }

    fn filled(path: &Path, len: usize) {
        fs::write(path, vec![7u8; len]).unwrap();
    }

    /// The file at `path` as its writer keeps it (open for reading and writing, for reuse).
    fn writer_of(path: &Path) -> fs::File {
        fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap()
    }

    fn read_all(mut f: &fs::File) -> Vec<u8> {
        use std::io::{Read, Seek};
        let mut v = Vec::new();
        f.rewind().unwrap();
        f.read_to_end(&mut v).unwrap();
        v
    }

    #[test]
    fn a_large_freed_file_waits_for_reuse_and_is_released_when_memory_is_needed() {
        let (root, store, spill) = dirs("reuse");
        let big = REUSE_MIN as usize;
        let disk = Disk::new(store.clone(), spill, 10 * REUSE_MIN);
        filled(&store.join("5"), big);
        filled(&store.join("6"), 100);
        filled(&store.join("7"), big);
        // The writer of 7 keeps it open (for reuse); a reader maps 5.
        let writer = writer_of(&store.join("7"));
        let reader = crate::store::open_reader(&store.join("5")).unwrap();
        for id in [5, 6, 7] {
            assert!(disk.free(ObjectId(id)).unwrap());
        }
        assert!(store.join(".free.5").exists() && store.join(".free.7").exists());
        assert!(!store.join("6").exists() && !store.join(".free.6").exists());
        // Waiting files are not used memory, and stay while the store has room.
        let (usage, _) = disk.maintain().unwrap();
        assert_eq!((usage.memory_bytes, usage.objects), (0, 0));
        assert!(store.join(".free.5").exists() && store.join(".free.7").exists());
        // Over the cap, they go first: pages released where no reader maps the file.
        filled(&store.join("8"), 9 * big + 1);
        let (usage, spilled) = disk.maintain().unwrap();
        assert!(spilled.is_empty(), "{spilled:?}");
        assert_eq!(usage.objects, 1);
        assert!(!store.join(".free.5").exists() && !store.join(".free.7").exists());
        assert_eq!(
            read_all(&reader),
            vec![7u8; big],
            "a reader's bytes never change"
        );
        assert_eq!(
            read_all(&writer),
            vec![0u8; big],
            "released while the writer held it"
        );
        // A new head clears freed files too.
        filled(&store.join("9"), big);
        assert!(disk.free(ObjectId(9)).unwrap());
        assert_eq!(disk.clear().unwrap(), 1);
        assert!(!store.join(".free.9").exists());
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn a_spilled_copy_releases_the_memory_its_writer_maps() {
        use std::os::unix::fs::MetadataExt;
        // The store on tmpfs where there is one, the spill directory on the temp dir's disk.
        let (root, store, spill) = dirs("spill-release");
        let shm = Path::new("/dev/shm").join(format!(
            "starling-disk-unit-{}-spill-release",
            std::process::id()
        ));
        let store = if fs::create_dir_all(&shm).is_ok() {
            shm.clone()
        } else {
            store
        };
        let copied = fs::metadata(&store).unwrap().dev() != fs::metadata(&spill).unwrap().dev();
        let big = REUSE_MIN as usize;
        let disk = Disk::new(store.clone(), spill.clone(), 0);
        filled(&store.join("1"), big);
        let writer = writer_of(&store.join("1"));
        let (_, spilled) = disk.maintain().unwrap();
        assert_eq!(spilled, [ObjectId(1)]);
        assert_eq!(fs::read(spill.join("1")).unwrap(), vec![7u8; big]);
        if copied {
            assert_eq!(
                read_all(&writer),
                vec![0u8; big],
                "released under the writer"
            );
        } else {
            // Moved by a rename: the same file, nothing to release.
            assert_eq!(read_all(&writer), vec![7u8; big]);
        }
        let _ = fs::remove_dir_all(&shm);
        fs::remove_dir_all(root).unwrap();
    }

    #[test]
    fn freed_files_past_the_waiting_bound_go_at_once_oldest_first() {
        let (root, store, spill) = dirs("keep-bound");
        let disk = Disk::new(store.clone(), spill, u64::MAX);
        for id in [11, 12, 13] {
            // Sparse: the length counts, no memory is used.
            fs::File::create(store.join(id.to_string()))
                .unwrap()
                .set_len(FREE_KEEP_BYTES / 2)
                .unwrap();
        }
        assert!(disk.free(ObjectId(11)).unwrap());
        assert!(disk.free(ObjectId(12)).unwrap());
        assert!(store.join(".free.11").exists() && store.join(".free.12").exists());
        assert!(disk.free(ObjectId(13)).unwrap());
        assert!(
            !store.join(".free.11").exists(),
            "the oldest goes past the bound"
        );
        assert!(store.join(".free.12").exists() && store.join(".free.13").exists());
        fs::remove_dir_all(root).unwrap();
    }
}
