//! The values the head holds (small task results, remote drivers' `put`s), within a budget.
//!
//! Up to `budget` bytes stay in memory; a value that would take the head past it is written to
//! `<data dir>/values/<id>` instead (by a file thread, never under the head's lock, see
//! [`Files`]) and served from there: a task or driver that needs it is sent its location (node
//! 0: the head), and fetches it with `Fetch`, which reads the file off the lock. So a program
//! that keeps many results alive grows the head's disk, not its memory.

use std::path::PathBuf;

use starling_proto::id_table::IdTable;
use starling_proto::ObjectId;

use super::files::Files;

/// The values the head holds, in memory or spilled.
#[derive(Default)]
pub(crate) struct HeadValues {
    /// Boxed slices, not vectors: a program may keep a million small results alive.
    memory: IdTable<ObjectId, Box<[u8]>>,
    memory_bytes: u64,
    spilled: IdTable<ObjectId, u64>,
    spilled_bytes: u64,
    /// `None`: no budget (everything in memory).
    spill: Option<Spill>,
}

struct Spill {
    budget: u64,
    dir: PathBuf,
    files: Files,
}

/// Where a value is.
pub(crate) enum Held<'a> {
    /// In memory.
    Memory(&'a [u8]),
    /// On the head's disk: its size.
    Spilled(u64),
}

/// A value taken out for sending: its bytes, or the file to read them from (after
/// [`Files::flush`], off the lock).
pub(crate) enum Owned {
    Bytes(Vec<u8>),
    File(PathBuf, Files),
}

impl HeadValues {
    /// Values beyond `budget` bytes go to files in `dir` (which must exist), written by `files`.
    pub(crate) fn with_budget(budget: u64, dir: PathBuf, files: Files) -> Self {
        HeadValues {
            spill: Some(Spill { budget, dir, files }),
            ..Self::default()
        }
    }

    pub(crate) fn insert(&mut self, object: ObjectId, bytes: Vec<u8>) {
        let len = bytes.len() as u64;
        if let Some(s) = &self.spill {
            if len > 0 && self.memory_bytes + len > s.budget {
                s.files.write(s.dir.join(object.0.to_string()), bytes);
                self.spilled.insert(object, len);
                self.spilled_bytes += len;
                return;
            }
        }
        self.memory_bytes += len;
        if let Some(old) = self.memory.insert(object, bytes.into_boxed_slice()) {
            self.memory_bytes -= old.len() as u64;
        }
    }

    pub(crate) fn get(&self, object: &ObjectId) -> Option<Held<'_>> {
        if let Some(v) = self.memory.get(object) {
            return Some(Held::Memory(v));
        }
        self.spilled.get(object).map(|size| Held::Spilled(*size))
    }

    /// The value, to send after the lock is released.
    pub(crate) fn owned(&self, object: &ObjectId) -> Option<Owned> {
        match self.get(object)? {
            Held::Memory(v) => Some(Owned::Bytes(v.to_vec())),
            Held::Spilled(_) => {
                let s = self.spill.as_ref()?;
                Some(Owned::File(
                    s.dir.join(object.0.to_string()),
                    s.files.clone(),
                ))
            }
        }
    }

    pub(crate) fn remove(&mut self, object: &ObjectId) {
        if let Some(v) = self.memory.remove(object) {
            self.memory_bytes -= v.len() as u64;
        }
        if let Some(size) = self.spilled.remove(object) {
            self.spilled_bytes -= size;
            if let Some(s) = &self.spill {
                s.files.remove_file(s.dir.join(object.0.to_string()));
            }
        }
    }

    /// Bytes held in memory.
    pub(crate) fn memory_bytes(&self) -> u64 {
        self.memory_bytes
    }

    /// Bytes spilled to disk.
    pub(crate) fn spilled_bytes(&self) -> u64 {
        self.spilled_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_past_the_budget_go_to_disk_and_come_back() {
        let dir = std::env::temp_dir().join(format!("starling-head-values-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let files = Files::start();
        let mut v = HeadValues::with_budget(100, dir.clone(), files.clone());
        v.insert(ObjectId(1), vec![1; 60]);
        v.insert(ObjectId(2), vec![2; 60]);
        v.insert(ObjectId(3), vec![3; 30]);
        assert_eq!((v.memory_bytes(), v.spilled_bytes()), (90, 60));
        assert!(matches!(v.get(&ObjectId(2)), Some(Held::Spilled(60))));
        let Some(Owned::File(path, files)) = v.owned(&ObjectId(2)) else {
            panic!("object 2 should be on disk");
        };
        files.flush();
        assert_eq!(std::fs::read(&path).unwrap(), vec![2; 60]);
        v.remove(&ObjectId(2));
        v.remove(&ObjectId(1));
        files.flush();
        assert!(!path.exists(), "a freed value's file goes");
        assert_eq!((v.memory_bytes(), v.spilled_bytes()), (30, 0));
        v.insert(ObjectId(4), vec![4; 60]);
        assert!(
            matches!(v.get(&ObjectId(4)), Some(Held::Memory(_))),
            "room again"
        );
        let _ = std::fs::remove_dir_all(dir);
    }
}
