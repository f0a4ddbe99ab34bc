//! The head over real sockets: bad clients are refused with a clear status and everyone else is
//! still served. Ports from 127.0.0.1:0; every wait bounded.

use std::time::Duration;

use starling_proto::pb::{self, client_op, head_op};
use starling_proto::security::{AuthChannel, Credentials, Token};
use starling_scheduler::head::{serve, HeadConfig};
use tokio::io::AsyncWriteExt;
use tokio_stream::StreamExt;

const LIMIT: Duration = Duration::from_secs(20);

fn hello(version: u32) -> pb::ClientBatch {
    let hello = pb::Hello {
        version,
        build: "0123abcd".into(),
        node: 0,
        job: 0,
        is_worker: false,
        pid: 1,
    };
    pb::ClientBatch {
        ops: vec![pb::ClientOp {
            kind: Some(client_op::Kind::Hello(hello)),
        }],
    }
}

/// The token the tests' heads require.
const TOKEN: &str = "test-token-0123";

fn config(dir: &std::path::Path) -> HeadConfig {
    let mut c = HeadConfig::new("127.0.0.1:0".parse().unwrap(), dir.to_path_buf());
    c.token = Some(Token::parse(TOKEN).unwrap());
    c
}

async fn client_with(
    addr: std::net::SocketAddr,
    token: Option<&str>,
) -> pb::head_client::HeadClient<AuthChannel> {
    let creds = Credentials {
        token: token.map(|t| Token::parse(t).unwrap()),
        tls_ca: None,
    };
    let channel = creds
        .endpoint(&addr.to_string())
        .unwrap()
        .connect()
        .await
        .expect("connect");
    pb::head_client::HeadClient::new(creds.intercept(channel))
}

async fn client(addr: std::net::SocketAddr) -> pb::head_client::HeadClient<AuthChannel> {
    client_with(addr, Some(TOKEN)).await
}

/// Opens a session with `first` as the first batch and returns the head's first reply.
async fn open(
    addr: std::net::SocketAddr,
    first: pb::ClientBatch,
) -> Result<pb::HeadBatch, tonic::Status> {
    let mut c = client(addr).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tx.send(first).unwrap();
    let mut replies = c
        .session(tokio_stream::wrappers::UnboundedReceiverStream::new(rx))
        .await?
        .into_inner();
    let first = replies.next().await.expect("a reply")?;
    drop(tx);
    Ok(first)
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("starling-head-test-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[tokio::test]
async fn bad_clients_are_refused_and_good_ones_still_served() {
    tokio::time::timeout(LIMIT, async {
        let dir = temp_dir("refuse");
        let head = serve(config(&dir)).await.unwrap();
        let addr = head.addr();

        // A client of another protocol version.
        let err = open(addr, hello(99)).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::FailedPrecondition);
        assert!(
            err.message().contains("protocol version 99"),
            "{}",
            err.message()
        );

        // A session that does not start with hello.
        let not_hello = pb::ClientBatch {
            ops: vec![pb::ClientOp {
                kind: Some(client_op::Kind::Release(7)),
            }],
        };
        let err = open(addr, not_hello).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.message().contains("hello"), "{}", err.message());

        // Garbage bytes on the port.
        let mut raw = tokio::net::TcpStream::connect(addr).await.unwrap();
        raw.write_all(b"\x00\xffGARBAGE\r\n\r\n\x16\x03\x01 not http/2 at all")
            .await
            .unwrap();
        drop(raw);

        // A well-behaved driver is still welcomed.
        let ok = open(addr, hello(starling_proto::PROTOCOL_VERSION))
            .await
            .unwrap();
        assert!(matches!(ok.ops[0].kind, Some(head_op::Kind::Welcome(_))));
        let status = client(addr)
            .await
            .status(pb::StatusRequest { job: 0 })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(status.submitted, 0);
        head.shutdown().await;
        let _ = std::fs::remove_dir_all(dir);
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn a_malformed_task_is_refused_with_a_clear_status() {
    tokio::time::timeout(LIMIT, async {
        let dir = temp_dir("malformed");
        let head = serve(config(&dir)).await.unwrap();
        let mut batch = hello(starling_proto::PROTOCOL_VERSION);
        // A task without a function name.
        batch.ops.push(pb::ClientOp {
            kind: Some(client_op::Kind::Submit(pb::TaskSpec {
                task_id: 1,
                ..Default::default()
            })),
        });
        let err = open(head.addr(), batch).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.message().contains("function name"), "{}", err.message());
        head.shutdown().await;
        let _ = std::fs::remove_dir_all(dir);
    })
    .await
    .expect("bounded");
}

#[tokio::test]
async fn calls_without_the_cluster_token_are_refused() {
    tokio::time::timeout(LIMIT, async {
        let dir = temp_dir("token");
        let mut cfg = config(&dir);
        cfg.token_hint = "pass --token-file X".into();
        let head = serve(cfg).await.unwrap();
        let addr = head.addr();
        for token in [None, Some("wrong-token")] {
            let err = client_with(addr, token)
                .await
                .status(pb::StatusRequest { job: 0 })
                .await
                .unwrap_err();
            assert_eq!(err.code(), tonic::Code::Unauthenticated, "{token:?}");
            assert_eq!(
                err.message(),
                "missing or wrong cluster token: pass --token-file X"
            );
            // Streams too: the check runs before any method.
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            tx.send(hello(starling_proto::PROTOCOL_VERSION)).unwrap();
            let err = client_with(addr, token)
                .await
                .session(tokio_stream::wrappers::UnboundedReceiverStream::new(rx))
                .await
                .unwrap_err();
            assert_eq!(err.code(), tonic::Code::Unauthenticated);
        }
        assert_eq!(head.token(), &Token::parse(TOKEN).unwrap());
        client(addr)
            .await
            .status(pb::StatusRequest { job: 0 })
            .await
            .expect("the right token is accepted");
        head.shutdown().await;
        let _ = std::fs::remove_dir_all(dir);
    })
    .await
    .expect("bounded");
}

/// The id base a new driver session is welcomed with.
async fn id_base(addr: std::net::SocketAddr) -> u64 {
    let first = open(addr, hello(starling_proto::PROTOCOL_VERSION))
        .await
        .expect("welcomed");
    match &first.ops[0].kind {
        Some(head_op::Kind::Welcome(w)) => w.id_base,
        other => panic!("no welcome: {other:?}"),
    }
}

/// A head that restarts on its data dir never hands out an id base it handed out before: ids
/// (a session's base, then its own counter) never repeat across starts, so nothing made
/// before a restart is taken for something made after it.
#[tokio::test]
async fn ids_never_repeat_across_restarts_of_a_head() {
    tokio::time::timeout(LIMIT, async {
        let dir = temp_dir("restart-ids");
        let mut seen = std::collections::HashSet::new();
        for start in 0..3 {
            let head = serve(config(&dir)).await.unwrap();
            for _ in 0..3 {
                let base = id_base(head.addr()).await;
                assert!(base != 0, "start {start}: a zero id base");
                assert!(
                    seen.insert(base),
                    "start {start}: id base {base:#x} was handed out by an earlier start"
                );
            }
            head.shutdown().await;
        }
        let _ = std::fs::remove_dir_all(dir);
    })
    .await
    .expect("bounded");
}
