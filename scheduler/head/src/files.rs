//! The job table's file writes, done by one thread of their own, never under the head's lock.
//!
//! The head's lock guards the scheduler, sessions and the job table; a slow disk (a full
//! `job.pb` rewrite, `remove_dir_all` of a job's logs) under it would stall every handler,
//! heartbeats included, until healthy nodes were declared dead. So the job table only *queues*
//! file operations here, in the order it decides them (a channel send, under the lock), and
//! this thread performs them in that order. Readers that must see what was written (a job's
//! result, its logs) call [`Files::flush`], outside the lock, which returns once everything
//! queued before it is on disk.

use std::path::{Path, PathBuf};
use std::sync::mpsc;

/// One queued file operation.
enum Op {
    /// Writes `bytes` to `path` atomically (a temporary file, then a rename), mode 0600,
    /// creating its directory (0700) first.
    Write(PathBuf, Vec<u8>),
    /// Removes a directory and everything in it.
    RemoveDir(PathBuf),
    /// Removes a file.
    RemoveFile(PathBuf),
    /// Everything before is done: tell the waiter.
    Flush(mpsc::Sender<()>),
    /// Waits for the sender to drop before going on (tests: a disk that does not answer).
    #[cfg(test)]
    Stall(mpsc::Receiver<()>),
}

/// A handle on the job table's file thread (clones share it).
#[derive(Clone, Debug)]
pub(crate) struct Files {
    tx: mpsc::Sender<Op>,
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Op")
    }
}

impl Files {
    /// Starts the thread; it ends when the last handle is dropped.
    pub(crate) fn start() -> Files {
        let (tx, rx) = mpsc::channel::<Op>();
        std::thread::Builder::new()
            .name("starling-head-files".into())
            .spawn(move || {
                for op in rx {
                    run(op);
                }
            })
            .expect("start the head's file thread");
        Files { tx }
    }

    pub(crate) fn write(&self, path: PathBuf, bytes: Vec<u8>) {
        let _ = self.tx.send(Op::Write(path, bytes));
    }

    pub(crate) fn remove_dir(&self, path: PathBuf) {
        let _ = self.tx.send(Op::RemoveDir(path));
    }

    pub(crate) fn remove_file(&self, path: PathBuf) {
        let _ = self.tx.send(Op::RemoveFile(path));
    }

    /// Returns once every operation queued before this call is done. Never call it under the
    /// head's lock.
    pub(crate) fn flush(&self) {
        let (tx, rx) = mpsc::channel();
        if self.tx.send(Op::Flush(tx)).is_ok() {
            let _ = rx.recv();
        }
    }

    /// Holds the thread until the returned sender is dropped (a disk that does not answer).
    #[cfg(test)]
    pub(crate) fn stall(&self) -> mpsc::Sender<()> {
        let (tx, rx) = mpsc::channel();
        let _ = self.tx.send(Op::Stall(rx));
        tx
    }
}

fn run(op: Op) {
    match op {
        Op::Write(path, bytes) => {
            if let Err(e) = write_atomic(&path, &bytes) {
                // The next change of the same record writes it again.
                eprintln!("starling head: cannot write {}: {e}", path.display());
            }
        }
        Op::RemoveDir(path) => {
            let _ = std::fs::remove_dir_all(path);
        }
        Op::RemoveFile(path) => {
            let _ = std::fs::remove_file(path);
        }
        Op::Flush(done) => {
            let _ = done.send(());
        }
        #[cfg(test)]
        Op::Stall(until) => {
            let _ = until.recv();
        }
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a reader (or a head
/// restarting after a crash) sees the old file or the new one, never half of one.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            starling_proto::dirs::create_dir(dir)?;
        }
    }
    let tmp = path.with_extension("tmp");
    starling_proto::dirs::write_file(&tmp, bytes)?;
    std::fs::rename(tmp, path)
}
