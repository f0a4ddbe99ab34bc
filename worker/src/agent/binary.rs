//! The per-node cache of job binaries, downloaded from the head by build id.
//!
//! A driver uploads its executable once (`PutBinary`); every node that runs one of its workers
//! downloads it once (`GetBinary`) into `cache_dir/<build>` and reuses it for every later job of
//! the same build.
//!
//! # Invariants
//! - `cache_dir/<build>` is either absent or a complete executable: the download goes to a
//!   temporary name (mode 0700), is checked against its build id (the SHA-256 of its bytes),
//!   closed and then renamed into place.
//! - Nothing is executed unverified: a cached file is hashed again before each use, and one
//!   whose bytes do not match its name is removed and downloaded afresh.
//! - One download per build at a time in this agent; concurrent requests wait for it.
//! - The cache is bounded: after each download, builds beyond the [`KEEP_BUILDS`] most recently
//!   used are removed, unless used within [`KEEP_USED_WITHIN`]. A build's use is its file's
//!   modification time, set on every `get` and, for the jobs this agent runs, on every
//!   heartbeat ([`touch`]), so a live job's binary (which its workers restart from) stays.
//! - A build id is 64 hex digits ([`starling_proto::is_build_id`]), so it cannot escape the
//!   cache directory.

use std::collections::HashMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use starling_proto::chunks::BinaryRef;
use starling_proto::is_build_id;
use starling_proto::rpc::head_client::HeadClient;
use starling_proto::security::AuthChannel;
use tokio::io::AsyncWriteExt;

use super::error::AgentError;
use super::logs::AgentLog;

/// Builds kept after a download however long ago they were used: the most recently used.
pub(crate) const KEEP_BUILDS: usize = 8;

/// A build used within this long is kept whatever their number.
pub(crate) const KEEP_USED_WITHIN: Duration = Duration::from_secs(600);

/// Marks a cached build as used now (its modification time; the file is not opened, so this
/// works on an executable that is running).
pub(crate) fn touch(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return;
    };
    let now = libc::timespec {
        tv_sec: 0,
        tv_nsec: libc::UTIME_NOW,
    };
    // SAFETY: `c` is a NUL-terminated path and `times` two valid timespecs, as utimensat
    // requires; it only reads them.
    unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), [now, now].as_ptr(), 0) };
}

/// Removes cached builds (plain files with build-id names; downloads in progress and other
/// entries are left alone) beyond the `keep` most recently used, except `current` and those
/// used within `used_within`. Returns the removed paths.
pub(crate) fn prune(dir: &Path, current: &str, keep: usize, used_within: Duration) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut builds: Vec<(SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_str().is_some_and(is_build_id))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            meta.is_file()
                .then(|| Some((meta.modified().ok()?, e.path())))
                .flatten()
        })
        .collect();
    builds.sort_by_key(|b| std::cmp::Reverse(b.0));
    let now = SystemTime::now();
    let mut removed = Vec::new();
    for (used, path) in builds.into_iter().skip(keep) {
        let recent = now
            .duration_since(used)
            .map_or(true, |idle| idle < used_within);
        if recent || path.file_name().is_some_and(|n| n == current) {
            continue;
        }
        if std::fs::remove_file(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// Job binaries by build id.
#[derive(Debug)]
pub(crate) struct BinaryCache {
    dir: PathBuf,
    head: HeadClient<AuthChannel>,
    downloads: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    log: Arc<AgentLog>,
}

impl BinaryCache {
    pub(crate) fn new(dir: PathBuf, head: HeadClient<AuthChannel>, log: Arc<AgentLog>) -> Self {
        BinaryCache {
            dir,
            head,
            downloads: Mutex::new(HashMap::new()),
            log,
        }
    }

    /// The path of `build`'s executable, downloading it first if this node lacks it.
    pub(crate) async fn get(&self, build: &str) -> Result<PathBuf, AgentError> {
        if !is_build_id(build) {
            return Err(AgentError::Binary {
                build: build.to_string(),
                message: "not a valid build id".to_string(),
            });
        }
        let lock = self
            .downloads
            .lock()
            .entry(build.to_string())
            .or_default()
            .clone();
        let _one_at_a_time = lock.lock().await;
        let path = self.dir.join(build);
        if tokio::fs::metadata(&path)
            .await
            .map(|m| m.is_file())
            .unwrap_or(false)
        {
            let file = path.clone();
            let actual =
                tokio::task::spawn_blocking(move || starling_proto::build_id_of_file(&file))
                    .await
                    .map_err(|e| AgentError::io(&path, std::io::Error::other(e)))?;
            match actual {
                Ok(actual) if actual == build => {
                    touch(&path);
                    return Ok(path);
                }
                // Changed since it was stored (or unreadable): never run it; fetch it again.
                found => {
                    let found = match found {
                        Ok(id) => format!("bytes with build id {id}"),
                        Err(e) => format!("an unreadable file ({e})"),
                    };
                    self.log.line(format_args!(
                        "refused cached build {build}: {} holds {found}; downloading it again",
                        path.display()
                    ));
                    tokio::fs::remove_file(&path)
                        .await
                        .map_err(|e| AgentError::io(&path, e))?;
                }
            }
        }
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join(format!(
            ".{build}.{}.{}.part",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        match self.download(build, &tmp, &path).await {
            Ok(()) => {
                // Room for the next: the cache keeps the builds in use and the latest few.
                let (dir, current) = (self.dir.clone(), build.to_string());
                let _ = tokio::task::spawn_blocking(move || {
                    prune(&dir, &current, KEEP_BUILDS, KEEP_USED_WITHIN)
                })
                .await;
                Ok(path)
            }
            Err(e) => {
                let _ = tokio::fs::remove_file(&tmp).await;
                Err(e)
            }
        }
    }

    async fn download(&self, build: &str, tmp: &Path, path: &Path) -> Result<(), AgentError> {
        let binary_error = |message: String| AgentError::Binary {
            build: build.to_string(),
            message,
        };
        let mut chunks = self
            .head
            .clone()
            .get_binary(BinaryRef {
                build: build.to_string(),
            })
            .await
            .map_err(|s| binary_error(format!("the head cannot send it: {}", s.message())))?
            .into_inner();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .open(tmp)
            .map_err(|e| AgentError::io(tmp, e))?;
        let mut file = tokio::fs::File::from_std(file);
        let mut hasher = starling_proto::BuildHasher::new();
        let (mut total, mut written, mut first) = (0u64, 0u64, true);
        while let Some(chunk) = chunks
            .message()
            .await
            .map_err(|s| binary_error(format!("download failed: {}", s.message())))?
        {
            if first {
                total = chunk.total;
                first = false;
            }
            hasher.update(&chunk.data);
            file.write_all(&chunk.data)
                .await
                .map_err(|e| AgentError::io(tmp, e))?;
            written += chunk.data.len() as u64;
        }
        if first || (total != 0 && written != total) {
            return Err(binary_error(format!(
                "download truncated: {written} of {total} bytes"
            )));
        }
        let actual = hasher.finish();
        if actual != build {
            return Err(binary_error(format!(
                "the head sent bytes whose build id is {actual}: refused"
            )));
        }
        file.flush().await.map_err(|e| AgentError::io(tmp, e))?;
        // Close the file for certain before anyone executes it (else `ETXTBSY`).
        drop(file.into_std().await);
        tokio::fs::rename(tmp, path)
            .await
            .map_err(|e| AgentError::io(path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sets `path`'s modification time to `ago` before now.
    fn used_ago(path: &Path, ago: Duration) {
        let at = SystemTime::now() - ago;
        std::fs::File::options()
            .write(true)
            .open(path)
            .and_then(|f| f.set_modified(at))
            .expect("set mtime");
    }

    /// A build id named for a test.
    fn id(name: &str) -> String {
        starling_proto::build_id_of(name.as_bytes())
    }

    fn names(removed: &[PathBuf]) -> std::collections::BTreeSet<String> {
        removed
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    }

    fn ids(names: &[&str]) -> std::collections::BTreeSet<String> {
        names.iter().map(|n| id(n)).collect()
    }

    #[test]
    fn the_cache_keeps_recent_builds_and_the_latest_few() {
        let dir = std::env::temp_dir().join(format!("starling-bin-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("jobs")).expect("dir");
        // b0 used 1 hour ago, b1 2 hours ago, ... b5 6 hours ago; r0..r2 a minute ago.
        for i in 0..6u64 {
            let p = dir.join(id(&format!("b{i}")));
            std::fs::write(&p, b"x").expect("write");
            used_ago(&p, Duration::from_secs(3600 * (i + 1)));
        }
        for i in 0..3u64 {
            let p = dir.join(id(&format!("r{i}")));
            std::fs::write(&p, b"x").expect("write");
            used_ago(&p, Duration::from_secs(60));
        }
        // A download in progress, a file with another name and a job directory are not builds.
        let part = dir.join(format!(".{}.1.0.part", id("b9")));
        std::fs::write(&part, b"x").expect("write");
        used_ago(&part, Duration::from_secs(86_400));
        let other = dir.join("notes");
        std::fs::write(&other, b"x").expect("write");
        used_ago(&other, Duration::from_secs(86_400));
        // Keep 4: r0..r2 and b0 are the most recent; b1..b5 go, but for b4, the current build.
        let removed = prune(&dir, &id("b4"), 4, Duration::from_secs(600));
        assert_eq!(names(&removed), ids(&["b1", "b2", "b3", "b5"]));
        for kept in ["r0", "r1", "r2", "b0", "b4"] {
            assert!(dir.join(id(kept)).exists(), "{kept} kept");
        }
        assert!(part.exists() && other.exists() && dir.join("jobs").exists());
        // Used within the window: kept beyond the count. Touching marks a build used.
        touch(&dir.join(id("b0")));
        let removed = prune(&dir, "none", 1, Duration::from_secs(600));
        assert_eq!(
            names(&removed),
            ids(&["b4"]),
            "r0..r2 and the touched b0 are recent"
        );
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn build_ids_are_sha256_hex() {
        assert!(is_build_id(&id("x")));
        assert_eq!(
            id(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        for bad in ["", "0123abcdef", "../x", &"A".repeat(64), &"0".repeat(65)] {
            assert!(!is_build_id(bad), "{bad}");
        }
    }
}
