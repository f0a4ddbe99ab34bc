//! Large objects on nodes: written as files into the node's store directory (a tmpfs), read by
//! consumers on the same host straight from the file, fetched over gRPC by everyone else.

use std::path::{Path, PathBuf};

use std::time::Duration;

use starling_proto::chunks::FetchRequest;
use starling_proto::rpc::head_client::HeadClient;
use starling_proto::rpc::object_service_client::ObjectServiceClient;
use starling_proto::security::Credentials;
use starling_proto::session::ObjectLocation;
use starling_proto::store_file::StoreHeader;
use starling_proto::{NodeId, ObjectId};
use starling_worker::store::Blob;

use crate::error::Error;

/// This host's node store, when the process runs next to a node agent.
#[derive(Clone, Debug)]
pub(crate) struct LocalStore {
    pub node: u64,
    pub dir: PathBuf,
    pub spill_dir: PathBuf,
}

impl LocalStore {
    fn path(&self, id: ObjectId) -> PathBuf {
        self.dir.join(id.0.to_string())
    }

    /// Writes `bytes` as object `id` of head `epoch` and of `job`, after the store file header
    /// (to a temporary name first, so readers never see a partial file) and returns its
    /// location.
    pub fn write(
        &self,
        id: ObjectId,
        epoch: u64,
        job: u64,
        bytes: &[u8],
    ) -> std::io::Result<ObjectLocation> {
        use std::io::Write;
        let mut file = self.create(id, epoch, job, bytes.len())?;
        file.write_all(bytes)?;
        file.finish()
    }

    /// Opens object `id`'s file for a value of `size` bytes, to be written in place (an
    /// encoding streamed straight into the store, with no buffer of the whole value in this
    /// process): [`StoreFile::finish`] or [`StoreFile::commit`] puts it in the store once
    /// exactly `size` bytes were written; dropped before that, it leaves nothing behind.
    pub fn create(
        &self,
        id: ObjectId,
        epoch: u64,
        job: u64,
        size: usize,
    ) -> std::io::Result<StoreFile> {
        use std::io::Write;
        let tmp = self.dir.join(format!(".{}.tmp", id.0));
        let header = StoreHeader {
            object: id.0,
            epoch,
            size: size as u64,
            job,
        };
        let file = starling_proto::dirs::create_file(&tmp)?;
        let mut out = StoreFile {
            id,
            epoch,
            node: self.node,
            path: self.path(id),
            tmp,
            file: std::io::BufWriter::with_capacity(STORE_WRITE_BUFFER, file),
            size,
            written: 0,
            done: false,
        };
        out.file.write_all(&header.encode())?;
        Ok(out)
    }
}

/// Small writes to a store file are gathered up to this many bytes; larger ones (the bytes of
/// a `Bytes` or `Vec<u8>`) go to the file as they are, from the caller's memory.
const STORE_WRITE_BUFFER: usize = 256 << 10;

/// An object's store file being written (see [`LocalStore::create`]).
pub(crate) struct StoreFile {
    id: ObjectId,
    epoch: u64,
    node: u64,
    path: PathBuf,
    tmp: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
    size: usize,
    written: usize,
    done: bool,
}

impl StoreFile {
    /// The object this file holds.
    pub fn object(&self) -> ObjectId {
        self.id
    }

    /// Renames the file into the store and returns its location; refused (and removed) if
    /// the bytes written are not the size it was opened for.
    pub fn finish(mut self) -> std::io::Result<ObjectLocation> {
        use std::io::Write;
        if self.written != self.size {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "object {}: {} bytes written, {} announced",
                    self.id.0, self.written, self.size
                ),
            ));
        }
        self.file.flush()?;
        std::fs::rename(&self.tmp, &self.path)?;
        self.done = true;
        Ok(ObjectLocation {
            node: NodeId(self.node),
            address: String::new(),
            path: self.path.to_string_lossy().into_owned(),
            size: self.size as u64,
            object: self.id,
        })
    }

    /// [`finish`](Self::finish), and the stored value mapped for this process to read.
    pub fn commit(self) -> std::io::Result<(ObjectLocation, Blob)> {
        let (id, epoch) = (self.id, self.epoch);
        let location = self.finish()?;
        match Blob::map_object(Path::new(&location.path), id.0, epoch) {
            Ok(blob) => Ok((location, blob)),
            Err(e) => {
                let _ = std::fs::remove_file(&location.path);
                Err(e)
            }
        }
    }
}

impl std::io::Write for StoreFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n;
        Ok(n)
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.file.write_all(buf)?;
        self.written += buf.len();
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

impl Drop for StoreFile {
    fn drop(&mut self) {
        if !self.done {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// Maps the file of a located object if it is on this host (in memory or spilled) and its
/// header says it is that object of this head incarnation: no copy. A file that says otherwise
/// (left by an earlier head, planted, torn) is not read; the object is fetched from its node.
fn read_local(
    object: ObjectId,
    location: &ObjectLocation,
    spill_dir: Option<&Path>,
    epoch: u64,
) -> Option<Blob> {
    if location.path.is_empty() {
        return None;
    }
    let path = Path::new(&location.path);
    match Blob::map_object(path, object.0, epoch) {
        Ok(b) => return Some(b),
        // Refused: the node's object service checks it too and says why.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => return None,
        Err(_) => {}
    }
    let spilled = spill_dir?.join(path.file_name()?);
    Blob::map_object(&spilled, object.0, epoch).ok()
}

/// Gets the bytes of a located object: from the file when it is on this host, else from the
/// holder node's object service (or the head's, for values the head holds).
pub(crate) async fn fetch(
    object: ObjectId,
    location: &ObjectLocation,
    head: &str,
    creds: &Credentials,
    spill_dir: Option<&Path>,
    epoch: u64,
) -> Result<Blob, Error> {
    if let Some(b) = read_local(object, location, spill_dir, epoch) {
        return Ok(b);
    }
    if location.path.is_empty() && location.address.is_empty() && location.node.0 != 0 {
        return Err(Error::ObjectLost(object));
    }
    let lost = |why: String| Error::ObjectFetch { object, why };
    let request = FetchRequest { object, epoch };
    let mut chunks = if location.address.is_empty() {
        let channel = super::client::connect_channel(creds, head, Duration::from_secs(10))
            .await
            .map_err(|e| lost(e.to_string()))?;
        let mut client = HeadClient::new(channel).max_decoding_message_size(usize::MAX);
        let call = client.fetch(request);
        tokio::time::timeout(FETCH_STALL, call)
            .await
            .map_err(|_| lost(format!("the head did not answer within {FETCH_STALL:?}")))?
            .map_err(|e| lost(e.message().into()))?
    } else {
        // Node object services speak plain HTTP/2 unless their address says otherwise.
        let address = if location.address.contains("://") {
            location.address.clone()
        } else {
            format!("http://{}", location.address)
        };
        let channel = super::client::connect_channel(creds, &address, Duration::from_secs(2))
            .await
            .map_err(|e| lost(format!("{}: {e}", location.address)))?;
        let mut client = ObjectServiceClient::new(channel).max_decoding_message_size(usize::MAX);
        let call = client.fetch(request);
        tokio::time::timeout(FETCH_STALL, call)
            .await
            .map_err(|_| {
                lost(format!(
                    "{} did not answer within {FETCH_STALL:?}",
                    location.address
                ))
            })?
            .map_err(|e| lost(e.message().into()))?
    }
    .into_inner();
    let mut data = Vec::with_capacity(location.size as usize);
    let (mut total, mut first) = (None, true);
    loop {
        // A holder that stops sending (stopped, partitioned) fails the fetch, which the
        // caller reports or retries, instead of hanging it.
        let next = tokio::time::timeout(FETCH_STALL, chunks.message())
            .await
            .map_err(|_| lost(format!("no data for {FETCH_STALL:?}")))?
            .map_err(|e| lost(e.message().into()))?;
        let Some(chunk) = next else { break };
        if std::mem::take(&mut first) {
            total = Some(chunk.total);
        }
        data.extend_from_slice(&chunk.data);
    }
    let expected = total.filter(|t| *t != 0).unwrap_or(location.size);
    if expected != 0 && data.len() as u64 != expected {
        return Err(lost(format!(
            "received {} bytes of an object of {expected}",
            data.len()
        )));
    }
    Ok(Blob::new(data))
}

/// The longest a fetch waits for the next piece of an object before it fails.
pub(crate) const FETCH_STALL: Duration = Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    /// A store in a fresh directory of its own, removed when the guard drops.
    struct Scratch(PathBuf);

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn store(name: &str) -> (Scratch, LocalStore) {
        let dir =
            std::env::temp_dir().join(format!("starling-objects-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let store = LocalStore {
            node: 1,
            dir: dir.clone(),
            spill_dir: dir.join("spill"),
        };
        (Scratch(dir), store)
    }

    fn names(store: &LocalStore) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&store.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_value_written_in_place_is_stored_and_mapped() {
        let (_dir, store) = store("mapped");
        let mut f = store.create(ObjectId(9), 3, 4, 5).unwrap();
        f.write_all(b"he").unwrap();
        f.write_all(b"llo").unwrap();
        let (location, blob) = f.commit().unwrap();
        assert_eq!(&blob[..], b"hello");
        assert!(blob.is_mapped());
        assert_eq!(location.size, 5);
        assert_eq!(names(&store), vec!["9".to_string()]);
        let again = Blob::map_object(Path::new(&location.path), 9, 3).unwrap();
        assert_eq!(&again[..], b"hello");
    }

    #[test]
    fn a_file_of_another_size_than_announced_is_refused_and_leaves_nothing() {
        let (_dir, store) = store("size");
        let mut f = store.create(ObjectId(9), 3, 4, 5).unwrap();
        f.write_all(b"hell").unwrap();
        assert!(f.commit().is_err());
        let mut f = store.create(ObjectId(10), 3, 4, 2).unwrap();
        f.write_all(b"hello").unwrap();
        assert!(f.finish().is_err());
        assert!(names(&store).is_empty(), "{:?}", names(&store));
    }

    #[test]
    fn a_file_dropped_unfinished_leaves_nothing() {
        let (_dir, store) = store("dropped");
        let mut f = store.create(ObjectId(9), 3, 4, 5).unwrap();
        f.write_all(b"hel").unwrap();
        assert_eq!(names(&store), vec![".9.tmp".to_string()]);
        drop(f);
        assert!(names(&store).is_empty());
    }
}
