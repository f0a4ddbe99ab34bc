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
        let path = self.path(id);
        let tmp = self.dir.join(format!(".{}.tmp", id.0));
        let header = StoreHeader {
            object: id.0,
            epoch,
            size: bytes.len() as u64,
            job,
        };
        let mut file = starling_proto::dirs::create_file(&tmp)?;
        file.write_all(&header.encode())?;
        file.write_all(bytes)?;
        drop(file);
        std::fs::rename(&tmp, &path)?;
        Ok(ObjectLocation {
            node: NodeId(self.node),
            address: String::new(),
            path: path.to_string_lossy().into_owned(),
            size: bytes.len() as u64,
            object: id,
        })
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
