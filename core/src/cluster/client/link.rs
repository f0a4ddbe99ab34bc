//! A worker process's session over the head's session link (`starling_proto::link`): the
//! hello and welcome, and the reader thread that hands what the head sends to the client (tasks
//! straight to the executors' channel). Sends go out on the thread that makes them
//! (`Sink::Link`).

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::path::Path;

use starling_proto::link::{self, FrameReader, LinkError, LinkWriter, AUTH, BATCH, REFUSED};
use starling_proto::rpc::Wire;

use super::*;

impl Client {
    /// Opens a session on the head's link at `path` (`addr` stays the head's gRPC address, for
    /// everything but the session).
    pub fn connect_link(
        path: &Path,
        addr: &str,
        creds: Credentials,
        kind: SessionKind,
        rt: tokio::runtime::Handle,
        timeout: Duration,
    ) -> Result<Arc<Client>> {
        let unreachable = |why: String| Error::HeadUnreachable {
            addr: addr.to_string(),
            why: format!("session link {}: {why}", path.display()),
        };
        let refused = |message: String| Error::Refused {
            addr: addr.to_string(),
            message,
        };
        let stream = UnixStream::connect(path).map_err(|e| unreachable(e.to_string()))?;
        let mut first = Vec::new();
        let token = creds.token.as_ref().map(|t| t.expose()).unwrap_or_default();
        link::put_frame(AUTH, token.as_bytes(), &mut first);
        let hello = ClientBatch {
            ops: vec![ClientOp::Hello(kind.hello)],
        };
        link::put_frame(BATCH, &hello.to_bytes(), &mut first);
        (&stream)
            .write_all(&first)
            .map_err(|e| unreachable(e.to_string()))?;
        let read = stream.try_clone().map_err(|e| unreachable(e.to_string()))?;
        let mut reader = FrameReader::new(read);
        let _ = reader.socket().set_read_timeout(Some(timeout));
        let mut ops = match reader.read_frame() {
            Ok(Some((BATCH, payload))) => HeadBatch::from_bytes(&payload)
                .map_err(|e| refused(e.to_string()))?
                .ops
                .into_iter(),
            Ok(Some((REFUSED, why))) => return Err(refused(String::from_utf8_lossy(&why).into())),
            Ok(Some((kind, _))) => return Err(refused(format!("a frame of unknown kind {kind}"))),
            Ok(None) => return Err(unreachable("closed before the welcome".into())),
            Err(e) => return Err(unreachable(e.to_string())),
        };
        let welcome = match ops.next() {
            Some(HeadOp::Welcome(w)) => w,
            _ => return Err(refused("the head did not welcome the session".into())),
        };
        // A live head is never silent this long (it says `alive` on quiet sessions).
        let _ = reader.socket().set_read_timeout(Some(SILENCE_LIMIT));
        let out =
            LinkWriter::new(stream, "starling-link-out").map_err(|e| unreachable(e.to_string()))?;
        let client = Client::start(
            addr,
            creds,
            Sink::Link(out),
            welcome,
            None,
            kind.local,
            None,
            rt.clone(),
        );
        // The welcome may share its batch with the first tasks for a worker.
        let rest: Vec<HeadOp> = ops.collect();
        let weak = Arc::downgrade(&client);
        let runs = kind.runs;
        std::thread::Builder::new()
            .name("starling-link-in".into())
            .spawn(move || read_link(weak, rest, reader, runs, rt))
            .map_err(|e| Error::Startup(format!("cannot start the link reader: {e}")))?;
        Ok(client)
    }
}

/// Handles what the head sends on the link until the session ends.
fn read_link(
    client: std::sync::Weak<Client>,
    first: Vec<HeadOp>,
    mut reader: FrameReader,
    runs: Option<crossbeam::channel::Sender<RunTask>>,
    rt: tokio::runtime::Handle,
) {
    // Handling a value may start I/O (a fetch from another node).
    let _rt = rt.enter();
    let mut pending = Some(first);
    let end = loop {
        let ops = match pending.take() {
            Some(ops) => ops,
            None => match reader.read_frame() {
                Ok(Some((BATCH, payload))) => match HeadBatch::from_bytes(&payload) {
                    Ok(b) => b.ops,
                    Err(e) => break e.to_string(),
                },
                Ok(Some((REFUSED, why))) => {
                    break format!("refused: {}", String::from_utf8_lossy(&why))
                }
                Ok(Some((kind, _))) => break format!("a frame of unknown kind {kind}"),
                Ok(None) => break "the head closed the session".to_string(),
                Err(LinkError::Io(e))
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    break format!(
                        "the head sent nothing for {SILENCE_LIMIT:?} (stopped, hung or cut off)"
                    )
                }
                Err(e) => break e.to_string(),
            },
        };
        let Some(c) = client.upgrade() else { return };
        for op in ops {
            c.handle_op(op, runs.as_ref());
        }
    };
    if let Some(c) = client.upgrade() {
        let addr = c.addr.clone();
        c.session_lost(Error::HeadLost { addr, why: end });
    }
    // Dropping `runs` ends a worker process's task loop.
}

/// `ops` in batches of at most `MAX_BATCH_BYTES` encoded bytes (one op may be larger).
pub(super) fn batches(ops: Vec<ClientOp>) -> impl Iterator<Item = ClientBatch> {
    starling_proto::limits::split_by_size(ops, ClientOp::wire_size)
        .into_iter()
        .map(|ops| ClientBatch { ops })
}

/// The link's writer.
pub(super) type LinkOut = Arc<LinkWriter<ClientBatch>>;
