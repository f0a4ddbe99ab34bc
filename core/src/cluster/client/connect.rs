//! Opening a session: dialing the head (token, TLS, keepalive), uploading this executable,
//! the hello and the head's welcome.

use super::*;

/// Connects to the head, retrying until `timeout`; every call on the channel carries the
/// cluster token.
pub(crate) async fn connect_channel(
    creds: &Credentials,
    addr: &str,
    timeout: Duration,
) -> Result<AuthChannel> {
    let unreachable = |why: String| Error::HeadUnreachable {
        addr: addr.to_string(),
        why,
    };
    let endpoint = creds
        .endpoint(addr)
        .map_err(|e| unreachable(e.to_string()))?
        .tcp_nodelay(true);
    starling_proto::security::dial(&endpoint, Instant::now() + timeout)
        .await
        .map(|c| creds.intercept(c))
        .map_err(|why| unreachable(format!("no answer within {timeout:?} ({why})")))
}

pub(super) type Opened = (Outbound, Welcome, (Vec<HeadOp>, Incoming));

/// Opens a `Session` stream that starts with `hello` and waits for the head's welcome.
pub(super) async fn open_stream(
    addr: &str,
    creds: &Credentials,
    hello: Hello,
    timeout: Duration,
) -> Result<Opened> {
    let (tx, rx) = Outbound::new();
    tx.send(ClientOp::Hello(hello));
    let channel = connect_channel(creds, addr, timeout).await?;
    let mut head = HeadClient::new(channel)
        .max_decoding_message_size(MAX_MESSAGE_BYTES)
        .max_encoding_message_size(MAX_MESSAGE_BYTES);
    let refused = |s: tonic::Status| Error::from_status(addr, &s);
    let mut incoming = head.session(rx).await.map_err(refused)?.into_inner();
    let first = incoming.message().await.map_err(refused)?;
    let mut ops = first.map(|b| b.ops).unwrap_or_default().into_iter();
    let welcome = ops
        .next()
        .and_then(|op| match op {
            HeadOp::Welcome(w) => Some(w),
            _ => None,
        })
        .ok_or_else(|| Error::Refused {
            addr: addr.to_string(),
            message: "the head did not welcome the session".into(),
        })?;
    // The welcome may share its batch with the first tasks for a worker.
    let rest: Vec<HeadOp> = ops.collect();
    Ok((tx, welcome, (rest, Box::pin(incoming) as Incoming)))
}

pub(super) fn driver_hello(build: String) -> Hello {
    Hello {
        version: starling_proto::PROTOCOL_VERSION,
        build,
        node: NodeId(0),
        // A multi-node job's entrypoint joins its job.
        job: JobId(
            std::env::var(crate::cluster::env::JOB_ID)
                .ok()
                .and_then(|j| j.parse().ok())
                .unwrap_or(0),
        ),
        is_worker: false,
        pid: std::process::id(),
        env: starling_proto::EnvId::NONE,
    }
}

/// A driver's hello for a local cluster, whose node agent runs this very executable.
pub(crate) fn local_driver_hello() -> Hello {
    driver_hello(build_id().to_string())
}

/// Uploads this executable to the head (content-addressed: the head keeps one copy per build)
/// and returns its build id.
pub(super) async fn upload_binary(
    addr: &str,
    creds: &Credentials,
    timeout: Duration,
) -> Result<String> {
    let exe = std::env::current_exe()
        .map_err(|e| Error::Startup(format!("cannot find this executable: {e}")))?;
    let data = tokio::fs::read(&exe)
        .await
        .map_err(|e| Error::Startup(format!("cannot read {}: {e}", exe.display())))?;
    let channel = connect_channel(creds, addr, timeout).await?;
    let mut head = HeadClient::new(channel).max_encoding_message_size(MAX_MESSAGE_BYTES);
    let reply = head
        .put_binary(tokio_stream::iter(upload_chunks(&data)))
        .await
        .map_err(|s| Error::from_status(addr, &s))?;
    Ok(reply.into_inner().build)
}

/// `data` as the chunks of a `PutBinary` upload: 1 MiB each, the total size and the build id
/// (which the head checks) in the first (one empty chunk for empty data).
pub(crate) fn upload_chunks(data: &[u8]) -> Vec<starling_proto::chunks::Chunk> {
    starling_proto::chunks::of_bytes(data, starling_proto::build_id_of(data))
}
