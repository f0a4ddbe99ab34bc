//! The node's object files: the in-memory store directory (tmpfs), the spill directory (disk),
//! and the work on them — freeing, spilling over the memory cap, measuring, opening for fetch.
//!
//! An object lives in one file named by its id in decimal (`<store_dir>/42`), written by the
//! worker process that produced it. When the store directory holds more than its cap, the
//! oldest objects (by modification time) move to the spill directory, so a full store slows
//! down instead of failing. Readers look in the store first, then in the spill directory.
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
//! - Everything here blocks; callers run it on the blocking pool, never on the agent's loop.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use parking_lot::Mutex;
use starling_proto::node::StoreUsage;
use starling_proto::ObjectId;

/// The store and spill directories of one node.
#[derive(Debug)]
pub(crate) struct Disk {
    store: PathBuf,
    spill: PathBuf,
    cap: u64,
    moves: Mutex<()>,
}

/// One file found in a directory scan.
struct Entry {
    object: Option<ObjectId>,
    len: u64,
    mtime: SystemTime,
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
    pub(crate) fn free(&self, id: ObjectId) -> io::Result<bool> {
        let _guard = self.moves.lock();
        let mut found = false;
        for path in [self.store_path(id), self.spill_path(id)] {
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
                if name.to_str().and_then(object_of).is_some()
                    && std::fs::remove_file(entry.path()).is_ok()
                {
                    removed += 1;
                }
            }
        }
        Ok(removed)
    }

    /// Spills the oldest objects while the store is over its cap, then measures both
    /// directories. Returns the usage and the objects spilled (oldest first).
    pub(crate) fn maintain(&self) -> io::Result<(StoreUsage, Vec<ObjectId>)> {
        let mut store = scan(&self.store)?;
        let mut memory: u64 = store.iter().map(|e| e.len).sum();
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
        fs::remove_file(&src)?;
        Ok(true)
    }

    /// Opens the object for reading: from the store, else from the spill directory.
    pub(crate) async fn open(&self, id: ObjectId) -> io::Result<(tokio::fs::File, PathBuf)> {
        let mut last = io::Error::from(io::ErrorKind::NotFound);
        for path in [self.store_path(id), self.spill_path(id)] {
            match tokio::fs::File::open(&path).await {
                Ok(f) => return Ok((f, path)),
                Err(e) if e.kind() == io::ErrorKind::NotFound => last = e,
                Err(e) => return Err(e),
            }
        }
        Err(last)
    }
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
        out.push(Entry {
            object: entry.file_name().to_str().and_then(object_of),
            len: meta.len(),
            mtime: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
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
}
