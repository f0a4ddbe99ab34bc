//! Large objects on nodes: written as files into the node's store directory (a tmpfs), read by
//! consumers on the same host straight from the file, fetched over gRPC by everyone else.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use std::time::Duration;

use starling_proto::chunks::FetchRequest;
use starling_proto::rpc::head_client::HeadClient;
use starling_proto::rpc::object_service_client::ObjectServiceClient;
use starling_proto::security::Credentials;
use starling_proto::session::ObjectLocation;
use starling_proto::store_file::{StoreHeader, HEADER_LEN};
use starling_proto::{NodeId, ObjectId};
use starling_worker::store::Blob;

use super::slabs::{self, Slab};
use crate::error::Error;

/// This host's node store, when the process runs next to a node agent.
#[derive(Clone, Debug)]
pub(crate) struct LocalStore {
    pub node: u64,
    pub dir: PathBuf,
    pub spill_dir: PathBuf,
}

impl LocalStore {
    /// Where object `id`'s file is, once stored.
    pub fn path(&self, id: ObjectId) -> PathBuf {
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
        let len = HEADER_LEN + size;
        let sink = match slabs::reusable(len)
            .then(|| slabs::take(&self.dir, len, &tmp))
            .flatten()
        {
            Some(mut slab) => {
                slab.write_at(0, &header.encode());
                Sink::Slab(slab)
            }
            None => {
                // Readable too, so that the file can be mapped for reuse once it is freed.
                let file = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&tmp)?;
                let mut w = std::io::BufWriter::with_capacity(STORE_WRITE_BUFFER, file);
                w.write_all(&header.encode())?;
                Sink::File(w)
            }
        };
        Ok(StoreFile {
            id,
            epoch,
            node: self.node,
            dir: self.dir.clone(),
            path: self.path(id),
            tmp,
            sink: Some(sink),
            size,
            at: 0,
            done: false,
        })
    }
}

/// Small writes to a store file are gathered up to this many bytes; larger ones (the bytes of
/// a `Bytes` or `Vec<u8>`) go to the file as they are, from the caller's memory.
const STORE_WRITE_BUFFER: usize = 256 << 10;

/// Where a store file's bytes go: a fresh file (written with `write(2)`, the fastest way to
/// fill pages the kernel has yet to allocate) or a reused one, through its mapping.
enum Sink {
    File(std::io::BufWriter<std::fs::File>),
    Slab(Slab),
}

/// An object's store file being written (see [`LocalStore::create`]).
pub(crate) struct StoreFile {
    id: ObjectId,
    epoch: u64,
    node: u64,
    dir: PathBuf,
    path: PathBuf,
    tmp: PathBuf,
    sink: Option<Sink>,
    size: usize,
    /// Value bytes written so far (after the header).
    at: usize,
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
        if self.at != self.size {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "object {}: {} bytes written, {} announced",
                    self.id.0, self.at, self.size
                ),
            ));
        }
        let Some(sink) = self.sink.take() else {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        };
        // Kept for reuse if its node will keep it once freed (a value written in place may
        // be smaller).
        let len = HEADER_LEN + self.size;
        let slab = match sink {
            Sink::File(w) => {
                let file = w.into_inner().map_err(|e| e.into_error())?;
                slabs::reusable(len)
                    .then(|| Slab::new(file, &self.dir, len).ok())
                    .flatten()
            }
            Sink::Slab(slab) => slabs::reusable(len).then_some(slab),
        };
        std::fs::rename(&self.tmp, &self.path)?;
        self.done = true;
        if let Some(slab) = slab {
            slabs::keep(slab, self.id);
        }
        Ok(ObjectLocation {
            node: NodeId(self.node),
            address: String::new(),
            path: self.path.to_string_lossy().into_owned(),
            size: self.size as u64,
            object: self.id,
        })
    }

    /// The rest of the value (past what was written, up to the size announced), to be written
    /// in place: the file's own memory, mapped. It counts as written.
    pub fn rest_in_place(&mut self) -> std::io::Result<&mut [u8]> {
        if let Some(Sink::File(w)) = self.sink.take_if(|s| matches!(s, Sink::File(_))) {
            let file = w.into_inner().map_err(|e| e.into_error())?;
            let len = HEADER_LEN + self.size;
            self.sink = Some(Sink::Slab(Slab::mapped(file, &self.dir, len)?));
        }
        let Some(Sink::Slab(slab)) = self.sink.as_mut() else {
            return Err(std::io::ErrorKind::BrokenPipe.into());
        };
        let (from, to) = (HEADER_LEN + self.at, HEADER_LEN + self.size);
        self.at = self.size;
        Ok(slab.region(from, to))
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
        self.write_all(buf)?;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match self.sink.as_mut() {
            Some(Sink::File(w)) => w.write_all(buf)?,
            Some(Sink::Slab(slab)) => {
                // The slab was sized for exactly the announced value.
                if self.at + buf.len() > self.size {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "object {}: more than the {} bytes announced",
                            self.id.0, self.size
                        ),
                    ));
                }
                slab.write_at(HEADER_LEN + self.at, buf);
            }
            None => return Err(std::io::ErrorKind::BrokenPipe.into()),
        }
        self.at += buf.len();
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self.sink.as_mut() {
            Some(Sink::File(w)) => w.flush(),
            _ => Ok(()),
        }
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

    fn ino(path: &str) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).unwrap().ino()
    }

    /// What the node does when the head frees `id` (see the agent's `Disk::free`).
    fn free(store: &LocalStore, id: u64) {
        use starling_proto::store_file::free_name;
        std::fs::rename(store.path(ObjectId(id)), store.dir.join(free_name(id))).unwrap();
    }

    fn big(seed: u8) -> Vec<u8> {
        (0..(1usize << 20)).map(|k| (k as u8) ^ seed).collect()
    }

    #[test]
    fn a_freed_large_file_is_reused_for_the_next_value_once_no_reader_maps_it() {
        let (_dir, store) = store("reuse");
        let (one, two) = (big(1), big(2));
        let first = store.write(ObjectId(21), 3, 4, &one).unwrap();
        let blob = Blob::map_object(Path::new(&first.path), 21, 3).unwrap();
        free(&store, 21);
        // A reader still maps object 21: its file is not taken for the next value.
        let second = store.write(ObjectId(22), 3, 4, &two).unwrap();
        let freed = store.dir.join(".free.21");
        assert_ne!(ino(freed.to_str().unwrap()), ino(&second.path));
        let second_ino = ino(&second.path);
        assert_eq!(
            &blob[..],
            &one[..],
            "the freed value a reader maps never changes"
        );
        drop(blob);
        // Unmapped: the next value of at most its size goes into the same file.
        let first_ino = ino(freed.to_str().unwrap());
        let third = store.write(ObjectId(23), 3, 4, &one[..1000 << 10]).unwrap();
        assert_eq!(ino(&third.path), first_ino);
        assert!(!freed.exists(), "{:?}", names(&store));
        let again = Blob::map_object(Path::new(&third.path), 23, 3).unwrap();
        assert_eq!(&again[..], &one[..1000 << 10]);
        assert_eq!(again.len(), 1000 << 10);
        // The second file is reused the same way, at full size, through its mapping.
        free(&store, 22);
        let fourth = store.write(ObjectId(24), 3, 4, &two).unwrap();
        assert_eq!(ino(&fourth.path), second_ino);
        let b = Blob::map_object(Path::new(&fourth.path), 24, 3).unwrap();
        assert_eq!(&b[..], &two[..]);
        // A freed object's name no longer opens.
        assert!(Blob::map_object(Path::new(&first.path), 21, 3).is_err());
        assert!(super::slabs::cached() >= 2);
    }

    #[test]
    fn a_reused_file_refuses_more_bytes_than_announced_and_leaves_nothing() {
        let (_dir, store) = store("reuse-size");
        let one = big(3);
        store.write(ObjectId(31), 3, 4, &one).unwrap();
        free(&store, 31);
        let mut f = store.create(ObjectId(32), 3, 4, one.len() - 1).unwrap();
        assert!(names(&store).contains(&".32.tmp".to_string()));
        assert!(
            !names(&store).contains(&".free.31".to_string()),
            "taken back"
        );
        assert!(f.write_all(&one).is_err());
        drop(f);
        let mut f = store.create(ObjectId(33), 3, 4, one.len()).unwrap();
        f.write_all(&one[..100]).unwrap();
        assert!(f.finish().is_err());
        assert!(
            names(&store).iter().all(|n| !n.ends_with(".tmp")),
            "{:?}",
            names(&store)
        );
    }
}
