//! The head over real sockets: bad clients are refused with a clear status and everyone else is
//! still served. Ports from 127.0.0.1:0; every wait bounded.

use std::time::Duration;

use starling_head::{serve, HeadConfig};
use starling_proto::chunks::FetchRequest;
use starling_proto::rpc::head_client::HeadClient;
use starling_proto::security::{AuthChannel, Credentials, Token};
use starling_proto::session::{
    ClientBatch, ClientOp, HeadBatch, HeadOp, Hello, ObjectValue, Value, Welcome,
};
use starling_proto::status::{StatusReply, StatusRequest};
use starling_proto::{JobId, NodeId, ObjectId, ResourceSet, TaskArg, TaskId, TaskSpec};
use tokio::io::AsyncWriteExt;
use tokio_stream::StreamExt;

const LIMIT: Duration = Duration::from_secs(20);

fn hello(version: u32) -> ClientBatch {
    let hello = Hello {
        version,
        build: "0123abcd".into(),
        node: NodeId(0),
        job: JobId(0),
        is_worker: false,
        pid: 1,
        env: Default::default(),
    };
    ClientBatch {
        ops: vec![ClientOp::Hello(hello)],
    }
}

/// A task calling `function` with `args`, everything else left at its default.
fn task(id: u64, function: &str, args: Vec<TaskArg>) -> TaskSpec {
    TaskSpec {
        id: TaskId(id),
        function: function.into(),
        args,
        resources: ResourceSet::new(),
        max_retries: 0,
        attempt: 0,
        job: JobId(0),
        parent: None,
        extras: Default::default(),
    }
}

/// The token the tests' heads require.
const TOKEN: &str = "test-token-0123";

fn config(dir: &std::path::Path) -> HeadConfig {
    let mut c = HeadConfig::new("127.0.0.1:0".parse().unwrap(), dir.to_path_buf());
    c.token = Some(Token::parse(TOKEN).unwrap());
    c
}

async fn client_with(addr: std::net::SocketAddr, token: Option<&str>) -> HeadClient<AuthChannel> {
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
    HeadClient::new(creds.intercept(channel))
}

async fn client(addr: std::net::SocketAddr) -> HeadClient<AuthChannel> {
    client_with(addr, Some(TOKEN)).await
}

/// The head's status for the driver job, as a client with the cluster token asks for it.
async fn status(addr: std::net::SocketAddr) -> StatusReply {
    client(addr)
        .await
        .status(StatusRequest { job: JobId(0) })
        .await
        .expect("status")
        .into_inner()
}

/// Opens a session with `first` as the first batch and returns the head's first reply.
async fn open(addr: std::net::SocketAddr, first: ClientBatch) -> Result<HeadBatch, tonic::Status> {
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
        let not_hello = ClientBatch {
            ops: vec![ClientOp::Release(ObjectId(7))],
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
        assert!(matches!(ok.ops[0], HeadOp::Welcome(_)));
        let status = status(addr).await;
        assert_eq!(status.submitted, 0);
        head.shutdown().await;
        let _ = std::fs::remove_dir_all(dir);
    })
    .await
    .expect("bounded");
}

/// A client that keeps its session open but neither reads nor closes it (a stopped or wedged
/// process) does not hold up the head's shutdown past its grace period.
#[tokio::test]
async fn a_silent_client_does_not_hold_up_shutdown() {
    tokio::time::timeout(LIMIT, async {
        let dir = temp_dir("silent-client");
        let head = serve(config(&dir)).await.unwrap();
        let mut c = client(head.addr()).await;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        tx.send(hello(starling_proto::PROTOCOL_VERSION)).unwrap();
        let mut replies = c
            .session(tokio_stream::wrappers::UnboundedReceiverStream::new(rx))
            .await
            .unwrap()
            .into_inner();
        let welcome = replies.next().await.expect("a reply").unwrap();
        assert!(matches!(welcome.ops[0], HeadOp::Welcome(_)));
        // From here on the client neither reads `replies` nor closes `tx`.
        let started = std::time::Instant::now();
        head.shutdown().await;
        let took = started.elapsed();
        assert!(
            took < starling_head::SHUTDOWN_GRACE + Duration::from_secs(2),
            "shutdown took {took:?}"
        );
        drop((tx, replies, c));
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
        // A task without a function name: it encodes, and the head's codec refuses it.
        batch.ops.push(ClientOp::Submit(task(1, "", vec![])));
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
                .status(StatusRequest { job: JobId(0) })
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
            .status(StatusRequest { job: JobId(0) })
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
    match &first.ops[0] {
        HeadOp::Welcome(w) => w.id_base,
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

/// A driver session kept open: its sender, its replies, its welcome.
struct Session {
    tx: tokio::sync::mpsc::UnboundedSender<ClientBatch>,
    replies: tonic::Streaming<HeadBatch>,
    welcome: Welcome,
}

async fn session(addr: std::net::SocketAddr) -> Session {
    let mut c = client(addr).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tx.send(hello(starling_proto::PROTOCOL_VERSION)).unwrap();
    let mut replies = c
        .session(tokio_stream::wrappers::UnboundedReceiverStream::new(rx))
        .await
        .expect("a session")
        .into_inner();
    let first = replies.next().await.expect("a reply").expect("welcomed");
    let welcome = match &first.ops[0] {
        HeadOp::Welcome(w) => w.clone(),
        other => panic!("no welcome: {other:?}"),
    };
    Session {
        tx,
        replies,
        welcome,
    }
}

impl Session {
    fn send(&self, op: ClientOp) {
        self.tx.send(ClientBatch { ops: vec![op] }).unwrap();
    }

    /// The status the head ended this session with.
    async fn refusal(mut self) -> tonic::Status {
        loop {
            match self.replies.next().await {
                Some(Ok(_)) => continue,
                Some(Err(s)) => return s,
                None => panic!("the session ended without a refusal"),
            }
        }
    }
}

/// A task no node can hold is told to the session that submitted it (its driver warns once)
/// and counted, with why, in the head's status; it leaves both when cancelled.
#[tokio::test]
async fn an_infeasible_task_is_told_to_its_submitter_and_shown_in_status() {
    tokio::time::timeout(LIMIT, async {
        let dir = temp_dir("infeasible");
        let head = serve(config(&dir)).await.unwrap();
        let addr = head.addr();
        let mut s = session(addr).await;
        let id = s.welcome.id_base | 1;
        let mut spec = task(id, "f", vec![]);
        spec.resources = ResourceSet::cpus(1.0).with("no_such_thing", 1.0);
        s.send(ClientOp::Submit(spec));
        let (task, reason) = loop {
            let batch = s.replies.next().await.expect("a reply").expect("no error");
            if let Some(found) = batch.ops.into_iter().find_map(|op| match op {
                HeadOp::Infeasible { task, reason } => Some((task, reason)),
                _ => None,
            }) {
                break found;
            }
        };
        assert_eq!(task, TaskId(id));
        assert!(reason.contains("no_such_thing"), "{reason}");
        let listed = status(addr).await;
        assert_eq!(listed.infeasible, 1);
        assert_eq!(listed.infeasible_tasks, [(TaskId(id), reason)]);

        s.send(ClientOp::Cancel(TaskId(id)));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let st = status(addr).await;
            if st.infeasible == 0 && st.infeasible_tasks.is_empty() {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the cancelled task is still listed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(s);
        head.shutdown().await;
        let _ = std::fs::remove_dir_all(dir);
    })
    .await
    .expect("bounded");
}

/// An op a session of another job tries, made from that session.
type Attempt = Box<dyn Fn(&Session) -> ClientOp>;

/// A session reaches only its own job's objects and tasks, whatever ids it names: it cannot
/// read another job's object (over its session or with `Fetch` and a job credential), pass it
/// to a task, cancel another job's task, or make an object or task in another session's range.
#[tokio::test]
async fn a_session_reaches_only_its_own_job_s_objects_and_tasks() {
    tokio::time::timeout(LIMIT, async {
        let dir = temp_dir("job-objects");
        let head = serve(config(&dir)).await.unwrap();
        let addr = head.addr();
        // Job A puts a value the head holds, and keeps its session (so the value lives).
        let a = session(addr).await;
        let secret = a.welcome.id_base | 1;
        a.send(ClientOp::Put(ObjectValue {
            object: ObjectId(secret),
            value: Value::Inline(b"job A's secret".to_vec()),
        }));
        // Its own session reads it back: the put landed.
        a.send(ClientOp::Subscribe(ObjectId(secret)));
        let mut a = a;
        let value = loop {
            let batch = a.replies.next().await.expect("a reply").expect("no error");
            if let Some(v) = batch.ops.into_iter().find_map(|op| match op {
                HeadOp::Value(v) if v.object == ObjectId(secret) => Some(v),
                _ => None,
            }) {
                break v;
            }
        };
        assert_eq!(value.value, Value::Inline(b"job A's secret".to_vec()));
        let job_a = a.welcome.job;

        let spec = |id: u64, args: Vec<TaskArg>| task(id, "f", args);
        let attempts: Vec<(&str, Attempt)> = vec![
            (
                "read object",
                Box::new(move |_| ClientOp::Subscribe(ObjectId(secret))),
            ),
            (
                "pass object",
                Box::new(move |b| {
                    ClientOp::Submit(spec(
                        b.welcome.id_base | 1,
                        vec![TaskArg::Object(ObjectId(secret))],
                    ))
                }),
            ),
            (
                "cancel task",
                Box::new(move |_| ClientOp::Cancel(TaskId(secret))),
            ),
            (
                "submit task",
                Box::new(move |_| ClientOp::Submit(spec(secret + 1, vec![]))),
            ),
            (
                "put object",
                Box::new(move |_| {
                    ClientOp::Put(ObjectValue {
                        object: ObjectId(secret + 2),
                        value: Value::Inline(b"planted".to_vec()),
                    })
                }),
            ),
        ];
        for (what, op) in attempts {
            let b = session(addr).await;
            assert_ne!(b.welcome.job, job_a);
            b.send(op(&b));
            let refusal = b.refusal().await;
            assert_eq!(
                refusal.code(),
                tonic::Code::PermissionDenied,
                "{what}: {refusal:?}"
            );
            assert!(
                refusal.message().contains(&format!("cannot {what}")),
                "{what}: {}",
                refusal.message()
            );
        }

        // Fetch with a job credential: job A's reads its value, another job's is refused.
        let cluster = Token::parse(TOKEN).unwrap();
        let fetch = |job: u64| {
            let token = cluster.for_job(JobId(job));
            async move {
                client_with(addr, Some(token.expose()))
                    .await
                    .fetch(FetchRequest {
                        object: ObjectId(secret),
                        epoch: 0,
                    })
                    .await
            }
        };
        let mut own = fetch(job_a.0)
            .await
            .expect("job A fetches its own")
            .into_inner();
        let chunk = own.next().await.expect("a chunk").expect("no error");
        assert_eq!(chunk.data, b"job A's secret");
        let other = fetch(job_a.0 + 1)
            .await
            .expect_err("another job's credential");
        assert_eq!(other.code(), tonic::Code::PermissionDenied, "{other:?}");

        // Job A's value is still there: none of it touched it.
        a.send(ClientOp::Subscribe(ObjectId(secret)));
        let batch = a
            .replies
            .next()
            .await
            .expect("a reply")
            .expect("job A's session lives");
        assert!(batch.ops.iter().any(|op| matches!(
            op,
            HeadOp::Value(v) if v.value == Value::Inline(b"job A's secret".to_vec())
        )));
        // A graceful shutdown waits for open sessions.
        drop(a);
        head.shutdown().await;
        let _ = std::fs::remove_dir_all(dir);
    })
    .await
    .expect("bounded");
}

/// Frames on the session link: a credential, then a batch; the head's reply frame.
mod on_link {
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    use starling_proto::link::{put_frame, FrameReader, AUTH, BATCH, REFUSED};
    use starling_proto::rpc::Wire;
    use starling_proto::session::{ClientBatch, HeadBatch};

    /// Connects, sends `credential` and `first` (raw batch bytes), and returns the head's first
    /// frame (`None`: it closed the link without one).
    pub fn open(
        path: &std::path::Path,
        credential: &str,
        first: &[u8],
    ) -> (UnixStream, Option<(u8, Vec<u8>)>) {
        let s = UnixStream::connect(path).expect("connect to the link");
        s.set_read_timeout(Some(super::LIMIT)).unwrap();
        let mut out = Vec::new();
        put_frame(AUTH, credential.as_bytes(), &mut out);
        put_frame(BATCH, first, &mut out);
        (&s).write_all(&out).unwrap();
        let frame = FrameReader::new(s.try_clone().unwrap())
            .read_frame()
            .expect("a frame or a clean end");
        (s, frame)
    }

    pub fn refusal(frame: Option<(u8, Vec<u8>)>) -> String {
        match frame {
            Some((REFUSED, why)) => String::from_utf8(why).unwrap(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    pub fn batch(frame: Option<(u8, Vec<u8>)>) -> HeadBatch {
        match frame {
            Some((BATCH, bytes)) => HeadBatch::from_bytes(&bytes).unwrap(),
            other => panic!("expected a batch, got {other:?}"),
        }
    }

    pub fn bytes(b: ClientBatch) -> Vec<u8> {
        b.to_bytes()
    }
}

/// The session link (worker processes of the head's host): its socket is private, a wrong
/// credential, a session without hello or a malformed batch is refused with a reason and the
/// link closed, and a good session is still welcomed and served after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_link_refuses_bad_clients_and_serves_good_ones() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("link");
    let mut c = config(&dir);
    c.link = true;
    let head = serve(c).await.unwrap();
    let path = head.link_path().expect("the link is served").to_path_buf();
    let checks = tokio::task::spawn_blocking(move || {
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the link's socket is this user's only");
        let good = on_link::bytes(hello(starling_proto::PROTOCOL_VERSION));

        let (_, frame) = on_link::open(&path, "wrong-token", &good);
        let why = on_link::refusal(frame);
        assert!(why.contains("cluster token"), "{why}");

        let not_hello = on_link::bytes(ClientBatch {
            ops: vec![ClientOp::Release(ObjectId(7))],
        });
        let (_, frame) = on_link::open(&path, TOKEN, &not_hello);
        assert!(on_link::refusal(frame).contains("hello"));

        let (_, frame) = on_link::open(&path, TOKEN, b"\xff\xff not protobuf");
        assert!(on_link::refusal(frame).contains("malformed"));

        // A welcomed session that then sends garbage is refused and closed.
        let (s, frame) = on_link::open(&path, TOKEN, &good);
        assert!(matches!(on_link::batch(frame).ops[0], HeadOp::Welcome(_)));
        let mut out = Vec::new();
        starling_proto::link::put_frame(starling_proto::link::BATCH, b"\xff\xfe", &mut out);
        std::io::Write::write_all(&mut &s, &out).unwrap();
        let mut r = starling_proto::link::FrameReader::new(s);
        let why = loop {
            match r.read_frame().expect("a frame or a clean end") {
                Some((starling_proto::link::REFUSED, why)) => {
                    break String::from_utf8(why).unwrap()
                }
                Some(_) => continue,
                None => panic!("closed without saying why"),
            }
        };
        assert!(why.contains("malformed"), "{why}");
        assert!(
            r.read_frame().map(|f| f.is_none()).unwrap_or(true),
            "then closed"
        );

        // A good session is still welcomed.
        let (_still_open, frame) = on_link::open(&path, TOKEN, &good);
        assert!(matches!(on_link::batch(frame).ops[0], HeadOp::Welcome(_)));
        path
    })
    .await
    .unwrap();
    let status = status(head.addr()).await;
    assert_eq!(status.submitted, 0);
    head.shutdown().await;
    assert!(
        !checks.exists(),
        "the socket is removed when the head stops"
    );
    let _ = std::fs::remove_dir_all(dir);
}
