//! Files and byte buffers as streams of `Chunk`s: the one encoding of every streamed transfer
//! (binaries and payloads from the head, objects from a node's object service, uploads).
//!
//! Chunks are exactly [`CHUNK`] bytes except the last, so a receiver can preallocate; the first
//! carries the total size, also for an empty transfer, which is one empty chunk.

use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;
use tonic::Status;

use crate::limits::CHUNK;
use crate::ObjectId;

/// A piece of a streamed transfer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    pub data: Vec<u8>,
    /// Total size, in the first chunk.
    pub total: u64,
    /// In the first chunk of an upload: the build id (SHA-256, hex) the sender computed over
    /// all the data, which the receiver checks before keeping it.
    pub build: String,
}

/// Asks a node's object service (or the head) for an object's bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FetchRequest {
    pub object: ObjectId,
    /// The fetcher's head epoch (0: unknown); a store file of another epoch is refused.
    pub epoch: u64,
}

/// Names an uploaded binary or payload archive by its build id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BinaryRef {
    pub build: String,
}

/// Reads `file` from where it stands in full chunks and sends them, the first saying `total`,
/// until its end or until the receiver hangs up; a read error is sent as `INTERNAL`.
pub async fn send_file(
    mut file: tokio::fs::File,
    total: u64,
    tx: mpsc::Sender<Result<Chunk, Status>>,
) {
    let mut first = true;
    loop {
        let mut data = vec![0u8; CHUNK];
        let mut filled = 0;
        while filled < CHUNK {
            match file.read(&mut data[filled..]).await {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) => {
                    let _ = tx
                        .send(Err(Status::internal(format!("read failed: {e}"))))
                        .await;
                    return;
                }
            }
        }
        if filled == 0 && !first {
            return;
        }
        data.truncate(filled);
        let chunk = Chunk {
            data,
            total: if first { total } else { 0 },
            build: String::new(),
        };
        first = false;
        if tx.send(Ok(chunk)).await.is_err() || filled < CHUNK {
            return;
        }
    }
}

/// `data` as chunks, the first naming `build` and saying the total size.
pub fn of_bytes(data: &[u8], build: String) -> Vec<Chunk> {
    if data.is_empty() {
        return vec![Chunk {
            build,
            ..Chunk::default()
        }];
    }
    let mut build = Some(build);
    data.chunks(CHUNK)
        .enumerate()
        .map(|(i, c)| Chunk {
            data: c.to_vec(),
            total: if i == 0 { data.len() as u64 } else { 0 },
            build: build.take().unwrap_or_default(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_become_full_chunks_the_first_saying_the_total() {
        let data = vec![3u8; CHUNK * 2 + 5];
        let chunks = of_bytes(&data, "b".into());
        assert_eq!(
            chunks.iter().map(|c| c.data.len()).collect::<Vec<_>>(),
            [CHUNK, CHUNK, 5]
        );
        assert_eq!(chunks[0].total, data.len() as u64);
        assert_eq!(chunks[0].build, "b");
        assert!(chunks[1..]
            .iter()
            .all(|c| c.total == 0 && c.build.is_empty()));
        let empty = of_bytes(&[], "e".into());
        assert_eq!(empty.len(), 1);
        assert!(empty[0].data.is_empty() && empty[0].build == "e");
    }

    #[test]
    fn a_file_streams_in_full_chunks_and_an_empty_one_as_one_chunk() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let dir = std::env::temp_dir().join(format!("starling-chunks-{}", std::process::id()));
        crate::dirs::create_dir(&dir).unwrap();
        for len in [0, 7, CHUNK, CHUNK + 1] {
            let path = dir.join(format!("f{len}"));
            std::fs::write(&path, vec![9u8; len]).unwrap();
            let got = rt.block_on(async {
                let file = tokio::fs::File::open(&path).await.unwrap();
                let (tx, mut rx) = mpsc::channel(4);
                tokio::spawn(send_file(file, len as u64, tx));
                let mut chunks = Vec::new();
                while let Some(c) = rx.recv().await {
                    chunks.push(c.unwrap());
                }
                chunks
            });
            assert_eq!(got[0].total, len as u64, "{len}");
            assert_eq!(got.iter().map(|c| c.data.len()).sum::<usize>(), len);
            assert!(got[..got.len() - 1].iter().all(|c| c.data.len() == CHUNK));
            assert_eq!(got.len(), len.div_ceil(CHUNK).max(1), "{len}");
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}
