//! The per-node cache of job binaries, downloaded from the head by build id.
//!
//! A driver uploads its executable once (`PutBinary`); every node that runs one of its workers
//! downloads it once (`GetBinary`) into `cache_dir/<build>` and reuses it for every later job of
//! the same build.
//!
//! # Invariants
//! - `cache_dir/<build>` is either absent or a complete executable: the download goes to a
//!   temporary name, is closed, made executable (0755) and then renamed into place.
//! - One download per build at a time in this agent; concurrent requests wait for it.
//! - A build id is a plain file name (letters, digits, `.`, `_`, `-`, not starting with `.`),
//!   so it cannot escape the cache directory.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use starling_proto::pb;
use starling_proto::pb::head_client::HeadClient;
use starling_proto::security::AuthChannel;
use tokio::io::AsyncWriteExt;

use super::error::AgentError;

/// Job binaries by build id.
#[derive(Debug)]
pub(crate) struct BinaryCache {
    dir: PathBuf,
    head: HeadClient<AuthChannel>,
    downloads: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

fn valid_build(build: &str) -> bool {
    !build.is_empty()
        && build.len() <= 128
        && !build.starts_with('.')
        && build
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

impl BinaryCache {
    pub(crate) fn new(dir: PathBuf, head: HeadClient<AuthChannel>) -> Self {
        BinaryCache {
            dir,
            head,
            downloads: Mutex::new(HashMap::new()),
        }
    }

    /// The path of `build`'s executable, downloading it first if this node lacks it.
    pub(crate) async fn get(&self, build: &str) -> Result<PathBuf, AgentError> {
        if !valid_build(build) {
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
            return Ok(path);
        }
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let tmp = self.dir.join(format!(
            ".{build}.{}.{}.part",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let result = self.download(build, &tmp, &path).await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        result.map(|()| path)
    }

    async fn download(&self, build: &str, tmp: &Path, path: &Path) -> Result<(), AgentError> {
        let binary_error = |message: String| AgentError::Binary {
            build: build.to_string(),
            message,
        };
        let mut chunks = self
            .head
            .clone()
            .get_binary(pb::BinaryRef {
                build: build.to_string(),
            })
            .await
            .map_err(|s| binary_error(format!("the head cannot send it: {}", s.message())))?
            .into_inner();
        let mut file = tokio::fs::File::create(tmp)
            .await
            .map_err(|e| AgentError::io(tmp, e))?;
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
        file.flush().await.map_err(|e| AgentError::io(tmp, e))?;
        // Close the file for certain before anyone executes it (else `ETXTBSY`).
        let file = file.into_std().await;
        file.set_permissions(std::fs::Permissions::from_mode(0o755))
            .map_err(|e| AgentError::io(tmp, e))?;
        drop(file);
        tokio::fs::rename(tmp, path)
            .await
            .map_err(|e| AgentError::io(path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::valid_build;

    #[test]
    fn build_ids_are_plain_names() {
        assert!(valid_build("0123abcdef"));
        assert!(valid_build("my-app_1.2"));
        for bad in ["", ".hidden", "../x", "a/b", "a b", &"x".repeat(129)] {
            assert!(!valid_build(bad), "{bad}");
        }
    }
}
