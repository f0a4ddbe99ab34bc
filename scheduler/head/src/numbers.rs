//! Session numbers that never repeat across starts of a head on one data directory.
//!
//! A session's number is the top of every id it makes (`number << SESSION_SHIFT`, see `starling_proto::ids`), so
//! a number handed out twice would give two objects one id: a driver that reconnects after a
//! restart, or a store file left on a node, could then be taken for another object. The head
//! reserves numbers in blocks and records the end of each block in `DATA_DIR/sessions` before
//! it hands out any number of it; a new start begins past the last recorded end. Reserving
//! writes a small file, under this module's own lock, never the state lock.

use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use tonic::Status;

/// Numbers reserved per write of the file.
const BLOCK: u64 = 1024;

/// One more than the largest number: `number << SESSION_SHIFT` must fit in an id.
pub const END: u64 = starling_proto::SESSION_END;

pub(crate) struct SessionNumbers {
    inner: Mutex<Inner>,
}

struct Inner {
    next: u64,
    /// Numbers below this are recorded as used (by this start or an earlier one).
    reserved: u64,
    /// `None`: nothing is recorded (numbers start at 1 on every start).
    path: Option<PathBuf>,
}

impl SessionNumbers {
    /// Numbers from 1, recorded nowhere.
    pub fn in_memory() -> Self {
        SessionNumbers {
            inner: Mutex::new(Inner {
                next: 1,
                reserved: END,
                path: None,
            }),
        }
    }

    /// Numbers past those any earlier start on `dir` recorded in `dir/sessions`.
    pub fn load(dir: &Path) -> std::io::Result<Self> {
        let path = dir.join("sessions");
        let next = match std::fs::read_to_string(&path) {
            Ok(s) => s.trim().parse::<u64>().map_err(|e| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("{}: not a session number ({e})", path.display()),
                )
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => 1,
            Err(e) => return Err(e),
        };
        let numbers = SessionNumbers {
            inner: Mutex::new(Inner {
                next: next.max(1),
                reserved: next.max(1),
                path: Some(path),
            }),
        };
        // Record the first block now: a head that cannot write its data dir fails at start.
        numbers.inner.lock().reserve()?;
        Ok(numbers)
    }

    /// The next session's number.
    pub fn next(&self) -> Result<u64, Status> {
        let mut g = self.inner.lock();
        if g.next >= END {
            return Err(Status::resource_exhausted(
                "this head's data directory has used every session number; \
                 start the head with a new --data-dir",
            ));
        }
        if g.next >= g.reserved {
            g.reserve()
                .map_err(|e| Status::unavailable(format!("cannot record session numbers: {e}")))?;
        }
        let n = g.next;
        g.next += 1;
        Ok(n)
    }
}

impl Inner {
    /// Records `next + BLOCK` as used, durably, before any number below it is handed out.
    fn reserve(&mut self) -> std::io::Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let end = (self.next + BLOCK).min(END);
        let tmp = path.with_extension("tmp");
        let mut f = starling_proto::dirs::create_file(&tmp)?;
        f.write_all(format!("{end}\n").as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            // The rename is durable once the directory is.
            std::fs::File::open(dir)?.sync_all()?;
        }
        self.reserved = end;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("starling-sessions-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        starling_proto::dirs::create_dir(&d).unwrap();
        d
    }

    #[test]
    fn numbers_never_repeat_across_starts_on_one_data_dir() {
        let dir = scratch("restart");
        let mut seen = std::collections::HashSet::new();
        for _start in 0..3 {
            let numbers = SessionNumbers::load(&dir).unwrap();
            // Past one block, so a reservation happens while the head runs.
            for _ in 0..BLOCK + 5 {
                let n = numbers.next().unwrap();
                assert!(seen.insert(n), "session number {n} handed out twice");
                assert!(n > 0 && n < END);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_start_that_used_few_numbers_still_moves_the_next_start_past_its_block() {
        let dir = scratch("few");
        let first = SessionNumbers::load(&dir).unwrap().next().unwrap();
        let second = SessionNumbers::load(&dir).unwrap().next().unwrap();
        assert!(second > first, "{second} after {first}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_corrupt_record_is_refused_not_reset() {
        let dir = scratch("corrupt");
        std::fs::write(dir.join("sessions"), "twelve\n").unwrap();
        let err = SessionNumbers::load(&dir)
            .err()
            .expect("a corrupt record must be refused");
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn numbers_run_out_with_a_clear_error() {
        let dir = scratch("end");
        std::fs::write(dir.join("sessions"), format!("{}\n", END - 1)).unwrap();
        let numbers = SessionNumbers::load(&dir).unwrap();
        assert_eq!(numbers.next().unwrap(), END - 1);
        let e = numbers.next().unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
