//! A running head against hostile peers: random and mutated batches from drivers, worker
//! processes and node agents must be refused or applied, never panic the head, and the head
//! keeps serving; a message over the size limit is refused with a status naming the size and
//! the limit. Ports from 127.0.0.1:0; every wait bounded.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use starling_head::{serve, ClientTx, HeadConfig, HeadHandle, MAX_MESSAGE_BYTES};
use starling_proto::fuzz::{self, Rng};
use starling_proto::jobs::JobSpec;
use starling_proto::node::{
    EntrypointExit, HeadToNodeOp, JobLog, NodeBatch, NodeHello, NodeOp, StoreUsage, WorkerExit,
};
use starling_proto::rpc::head_client::HeadClient;
use starling_proto::rpc::{Empty, Wire};
use starling_proto::security::{AuthChannel, Credentials};
use starling_proto::session::{
    ClientBatch, ClientOp, Hello, ObjectLocation, ObjectValue, Outcome, Returned, StreamAck,
    StreamItem, TaskDone, Value,
};
use starling_proto::status::StatusRequest;
use starling_proto::{
    FailureKind, JobId, NodeId, ObjectId, RemoteError, ResourceSet, SchedulingStrategy, TaskArg,
    TaskFailure, TaskId, TaskSpec,
};
use tokio_stream::StreamExt;

const LIMIT: Duration = Duration::from_secs(60);

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("starling-fuzz-head-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Counts panics on any thread (a head's stream task that panics would otherwise only print).
fn count_panics() -> Arc<AtomicUsize> {
    let n = Arc::new(AtomicUsize::new(0));
    let seen = n.clone();
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        seen.fetch_add(1, Ordering::SeqCst);
        default(info);
    }));
    n
}

fn hello(worker: bool, node: NodeId, job: JobId) -> Hello {
    Hello {
        version: starling_proto::PROTOCOL_VERSION,
        build: "00ff".into(),
        node,
        job,
        is_worker: worker,
        pid: 1,
        env: Default::default(),
    }
}

/// An id that often names something the head knows (small numbers, the session's own id
/// range), sometimes anything.
fn id(rng: &mut Rng, base: u64) -> u64 {
    match rng.below(4) {
        0 => rng.edgy_u64(),
        1 => base | rng.below(32) as u64,
        _ => rng.below(32) as u64,
    }
}

/// Field numbers of `proto/proto/starling.proto`, to write the ops that domain types cannot
/// hold.
mod field {
    /// `ClientBatch.ops`.
    pub const BATCH_OPS: u64 = 1;
    /// `ClientOp.submit`, `.put`, `.done`, `.put_stored`.
    pub const OP_SUBMIT: u64 = 2;
    pub const OP_PUT: u64 = 3;
    pub const OP_DONE: u64 = 10;
    pub const OP_PUT_STORED: u64 = 11;
    /// `TaskSpec.task_id`, `.function`, `.args`.
    pub const SPEC_TASK_ID: u64 = 1;
    pub const SPEC_FUNCTION: u64 = 2;
    pub const SPEC_ARGS: u64 = 3;
    /// `ObjectValue.object`.
    pub const VALUE_OBJECT: u64 = 1;
    /// `TaskDone.task`, `.runtime_us`.
    pub const DONE_TASK: u64 = 1;
    pub const DONE_RUNTIME_US: u64 = 7;
}

/// Appends `v` as a protobuf varint.
fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends varint field `number` holding `v`.
fn varint_field(out: &mut Vec<u8>, number: u64, v: u64) {
    varint(out, number << 3);
    varint(out, v);
}

/// Appends length-delimited field `number` holding `body`.
fn bytes_field(out: &mut Vec<u8>, number: u64, body: &[u8]) {
    varint(out, number << 3 | 2);
    varint(out, body.len() as u64);
    out.extend_from_slice(body);
}

/// The encoding of a `ClientOp` holding `body` in field `number`.
fn op_bytes(number: u64, body: &[u8]) -> Vec<u8> {
    let mut op = Vec::new();
    bytes_field(&mut op, number, body);
    op
}

/// One op of a made-up batch.
enum Made {
    Op(ClientOp),
    /// The encoding of an op that decodes but does not convert (the op, its value, an argument
    /// of its task or its task's end has no kind): domain types cannot hold it, and the
    /// codec refuses it before the head sees it.
    Malformed(Vec<u8>),
}

fn random_op(rng: &mut Rng, base: u64) -> Made {
    // A value; `None`: one without a kind.
    let value = |rng: &mut Rng| match rng.below(4) {
        0 => Some(Value::Inline(rng.bytes(8))),
        1 => Some(Value::Location(ObjectLocation {
            node: NodeId(rng.below(4) as u64),
            address: "127.0.0.1:1".into(),
            path: rng.string(),
            size: rng.edgy_u64(),
            object: ObjectId(rng.below(32) as u64),
        })),
        2 => Some(Value::Failure(TaskFailure {
            task: TaskId(rng.below(32) as u64),
            attempt: 0,
            kind: FailureKind::Cancelled,
        })),
        _ => None,
    };
    let put = |rng: &mut Rng, stored: bool| {
        let object = id(rng, base);
        match value(rng) {
            Some(value) => {
                let v = ObjectValue {
                    object: ObjectId(object),
                    value,
                };
                Made::Op(if stored {
                    ClientOp::PutStored(v)
                } else {
                    ClientOp::Put(v)
                })
            }
            None => {
                let mut v = Vec::new();
                varint_field(&mut v, field::VALUE_OBJECT, object);
                let number = if stored {
                    field::OP_PUT_STORED
                } else {
                    field::OP_PUT
                };
                Made::Malformed(op_bytes(number, &v))
            }
        }
    };
    let made = match rng.below(16) {
        0 => {
            let task = id(rng, base);
            let function = *rng.pick(&["f", "", "g#1"]);
            let mut kindless_arg = false;
            let args: Vec<TaskArg> = (0..rng.below(3))
                .filter_map(|_| match rng.below(3) {
                    0 => Some(TaskArg::Object(ObjectId(id(rng, base)))),
                    1 => Some(TaskArg::Inline(vec![1])),
                    _ => {
                        kindless_arg = true;
                        None
                    }
                })
                .collect();
            let mut resources = ResourceSet::new();
            let name = *rng.pick(&["CPU", "GPU", "x", ""]);
            resources.set_units(name, rng.edgy_u64());
            let strategy = match rng.below(3) {
                0 => SchedulingStrategy::Spread,
                1 => SchedulingStrategy::NodeAffinity {
                    node: NodeId(rng.below(4) as u64),
                    soft: rng.one_in(2),
                },
                _ => SchedulingStrategy::Default,
            };
            if kindless_arg {
                // The task, its function and an argument without a kind.
                let mut spec = Vec::new();
                varint_field(&mut spec, field::SPEC_TASK_ID, task);
                bytes_field(&mut spec, field::SPEC_FUNCTION, function.as_bytes());
                bytes_field(&mut spec, field::SPEC_ARGS, &[]);
                Made::Malformed(op_bytes(field::OP_SUBMIT, &spec))
            } else {
                Made::Op(ClientOp::Submit(TaskSpec {
                    id: TaskId(task),
                    function: function.into(),
                    args,
                    resources,
                    max_retries: rng.edgy_u64() as u32,
                    attempt: rng.edgy_u64() as u32,
                    job: JobId(rng.below(4) as u64),
                    parent: (rng.below(2) == 0).then(|| TaskId(id(rng, base))),
                    extras: starling_proto::TaskExtras {
                        retry_exceptions: rng.one_in(2),
                        strategy,
                        retry_on: (0..rng.below(3)).map(|_| "panic".into()).collect(),
                        contained: (0..rng.below(3)).map(|_| ObjectId(id(rng, base))).collect(),
                        returns: *rng.pick(&[0, 1, 2, 5, u32::MAX]),
                        streaming: rng.below(4) == 0,
                        backpressure: *rng.pick(&[0, 1, 3, u32::MAX]),
                        max_concurrency: *rng.pick(&[0, 1, 2, 5, u32::MAX]),
                        env: starling_proto::TaskEnv::new(
                            (0..rng.below(2)).map(|_| (rng.string(), rng.string())),
                        ),
                        actor: match rng.below(3) {
                            0 => starling_proto::ActorRole::None,
                            1 => starling_proto::ActorRole::Call(TaskId(rng.edgy_u64())),
                            _ => starling_proto::ActorRole::Create(std::sync::Arc::new(
                                starling_proto::ActorOptions {
                                    class_name: rng.string(),
                                    max_restarts: rng.edgy_u64() as u32,
                                    max_task_retries: rng.edgy_u64() as u32,
                                    name: rng.string(),
                                    detached: rng.one_in(2),
                                    max_concurrency: rng.edgy_u64() as u32,
                                },
                            )),
                        },
                        // A call said to be sent straight to a worker: to one that exists or not.
                        direct: rng
                            .one_in(4)
                            .then(|| starling_proto::WorkerId(rng.below(4) as u64)),
                    }
                    .into(),
                }))
            }
        }
        1 => put(rng, false),
        2 => put(rng, true),
        3 => Made::Op(ClientOp::Release(ObjectId(id(rng, base)))),
        4 => Made::Op(ClientOp::Subscribe(ObjectId(id(rng, base)))),
        5 => Made::Op(ClientOp::Cancel(TaskId(id(rng, base)))),
        6 => Made::Op(ClientOp::CancelForce(TaskId(id(rng, base)))),
        7 => Made::Op(ClientOp::Blocked),
        8 => Made::Op(ClientOp::Unblocked),
        9 => Made::Op(ClientOp::Hello(hello(rng.one_in(2), NodeId(1), JobId(0)))),
        10 => Made::Op(ClientOp::AddRef(ObjectId(id(rng, base)))),
        11 => Made::Op(ClientOp::Nested {
            container: ObjectId(id(rng, base)),
            refs: (0..rng.below(4)).map(|_| ObjectId(id(rng, base))).collect(),
        }),
        12 => Made::Op(ClientOp::StreamItem(StreamItem {
            task: TaskId(id(rng, base)),
            index: rng.edgy_u64(),
            object: ObjectId(id(rng, base)),
        })),
        13 => Made::Op(ClientOp::StreamAck(StreamAck {
            task: TaskId(id(rng, base)),
            consumed: rng.edgy_u64(),
        })),
        _ => {
            let task = id(rng, base);
            let outcome = match rng.below(7) {
                5 => Some(Outcome::Returns(vec![
                    Returned::Inline(vec![1]),
                    Returned::Stored(rng.edgy_u64()),
                ])),
                0 => Some(Outcome::Inline(vec![1, 2])),
                1 => Some(Outcome::Stored(rng.edgy_u64())),
                2 => Some(Outcome::Failed(RemoteError::new("", ""))),
                3 => Some(Outcome::BadArgument(RemoteError::new("", ""))),
                4 => Some(Outcome::FunctionNotFound("00".into())),
                _ => None,
            };
            let runtime_us = rng.edgy_u64();
            match outcome {
                Some(outcome) => Made::Op(ClientOp::Done(TaskDone {
                    task: TaskId(task),
                    outcome,
                    runtime_us,
                })),
                // A task's end without a kind.
                None => {
                    let mut done = Vec::new();
                    varint_field(&mut done, field::DONE_TASK, task);
                    varint_field(&mut done, field::DONE_RUNTIME_US, runtime_us);
                    Made::Malformed(op_bytes(field::OP_DONE, &done))
                }
            }
        }
    };
    // Now and then an op without a kind at all.
    if rng.one_in(40) {
        Made::Malformed(Vec::new())
    } else {
        made
    }
}

/// A made-up batch of `n` ops as a peer would send it: its encoding, and whether the codec
/// must refuse it (an op that does not convert: a malformed one, or a task without a function
/// name).
fn random_batch(rng: &mut Rng, base: u64, n: usize) -> (Vec<u8>, bool) {
    let mut bytes = Vec::new();
    let mut refused = false;
    for _ in 0..n {
        match random_op(rng, base) {
            Made::Op(op) => {
                refused |= matches!(&op, ClientOp::Submit(t) if t.function.is_empty());
                // A batch's encoding is its ops' entries one after another.
                bytes.extend(ClientBatch { ops: vec![op] }.to_bytes());
            }
            Made::Malformed(op) => {
                refused = true;
                bytes_field(&mut bytes, field::BATCH_OPS, &op);
            }
        }
    }
    (bytes, refused)
}

fn random_node_op(rng: &mut Rng) -> NodeOp {
    match rng.below(7) {
        0 => NodeOp::Heartbeat,
        1 => NodeOp::WorkerExit(WorkerExit {
            job: JobId(rng.below(4) as u64),
            pid: rng.edgy_u64() as u32,
            code: rng.edgy_u64() as i32,
        }),
        2 => NodeOp::Usage(StoreUsage {
            memory_bytes: rng.edgy_u64(),
            spilled_bytes: rng.edgy_u64(),
            objects: rng.edgy_u64(),
        }),
        3 => NodeOp::JobLog(JobLog {
            job: JobId(rng.below(4) as u64),
            data: rng.bytes(8),
        }),
        4 => NodeOp::EntrypointExit(EntrypointExit {
            job: JobId(rng.edgy_u64()),
            code: rng.edgy_u64() as i32,
            error: rng.string(),
        }),
        5 => NodeOp::JobStopped(JobId(rng.edgy_u64())),
        _ => NodeOp::Hello(NodeHello::default()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_batches_never_panic_the_head() {
    let panics = count_panics();
    tokio::time::timeout(LIMIT, async {
        let dir = temp_dir("batches");
        let head = serve(HeadConfig::new("127.0.0.1:0".parse().unwrap(), dir.clone()))
            .await
            .unwrap();
        let mut c = client(&head).await;

        // A node agent, attached over gRPC, whose batches the test makes up.
        let (node_tx, node_rx) = tokio::sync::mpsc::unbounded_channel();
        node_tx
            .send(NodeBatch {
                ops: vec![NodeOp::Hello(NodeHello {
                    version: starling_proto::PROTOCOL_VERSION,
                    resources: ResourceSet::cpus(4.0),
                    object_address: "127.0.0.1:1".into(),
                    store_dir: "/nonexistent".into(),
                    ..Default::default()
                })],
            })
            .unwrap();
        let mut to_node = c
            .attach(tokio_stream::wrappers::UnboundedReceiverStream::new(
                node_rx,
            ))
            .await
            .unwrap()
            .into_inner();
        let first = to_node.next().await.expect("a node id").unwrap();
        let node = match first.ops[0] {
            HeadToNodeOp::NodeId(n) => n,
            ref other => panic!("expected a node id, got {other:?}"),
        };
        // Drain what the head sends the node (start workers, free objects, ...).
        tokio::spawn(async move { while to_node.next().await.is_some() {} });

        let service = head.service().clone();
        let seeds: Vec<Vec<u8>> = {
            let mut rng = Rng::new(7);
            (0..16)
                .map(|_| random_batch(&mut rng, 1 << 40, 4).0)
                .collect()
        };
        let report = tokio::task::spawn_blocking(move || {
            let open = |worker: bool, job: u64| {
                service
                    .open_local_session(
                        &hello(worker, node, JobId(job)),
                        ClientTx::Direct(Arc::new(|_| {})),
                    )
                    .ok()
            };
            let mut driver = open(false, 0).expect("a driver session");
            let mut worker = open(true, 1);
            // Batches the head refused, and made-up batches the codec refused.
            let mut refused = 0u64;
            let mut malformed = 0u64;
            let report = fuzz::run("head sessions", 3.0, 300, |rng: &mut Rng| {
                // The bytes a peer sends, and whether they must be refused (made-up batches).
                let (bytes, must_refuse) = if rng.one_in(3) {
                    (fuzz::mutate(rng, &seeds), None)
                } else {
                    let n = 1 + rng.below(6);
                    let (bytes, must_refuse) = random_batch(rng, driver << 40, n);
                    (bytes, Some(must_refuse))
                };
                let to_worker = rng.one_in(2);
                let client = match (to_worker, worker) {
                    (true, Some(w)) => w,
                    _ => driver,
                };
                // Over gRPC the codec converts a batch before the head sees it, and refuses one
                // that does not convert (`INVALID_ARGUMENT`), which ends the session.
                let accepted = match ClientBatch::from_bytes(&bytes) {
                    Ok(batch) => {
                        assert_ne!(must_refuse, Some(true), "converted: {batch:?}");
                        let ok = service.local_batch(client, batch.ops).is_ok();
                        refused += u64::from(!ok);
                        ok
                    }
                    Err(e) => {
                        if let Some(must) = must_refuse {
                            assert!(must, "a well-formed batch was refused: {e}");
                            assert!(e.0.contains("without"), "refused for another reason: {e}");
                            malformed += 1;
                        }
                        false
                    }
                };
                if !accepted {
                    // A refused batch ends the session, as over gRPC.
                    service.close_local_session(client, "refused");
                    if client == driver {
                        driver = open(false, 0).expect("a driver session");
                    } else {
                        worker = open(true, rng.below(3) as u64);
                    }
                }
                if rng.one_in(4) {
                    let ops = (0..1 + rng.below(4)).map(|_| random_node_op(rng)).collect();
                    let _ = node_tx.send(NodeBatch { ops });
                }
                if rng.one_in(50) {
                    // Workers come and go.
                    if let Some(w) = worker.take() {
                        service.close_local_session(w, "gone");
                    }
                    worker = open(true, rng.below(3) as u64);
                }
            });
            assert!(
                refused > 0,
                "batches the head refuses were sent and refused"
            );
            assert!(
                malformed > 0,
                "malformed batches were sent and refused by the codec"
            );
            (report, node_tx)
        })
        .await
        .expect("the fuzz loop");
        let (_report, node_tx) = report;

        // The head still serves, and the node is still attached.
        let status = c
            .status(StatusRequest { job: JobId(0) })
            .await
            .unwrap()
            .into_inner();
        assert!(status.nodes.iter().any(|n| n.id == node), "{status:?}");
        drop(node_tx);
        head.shutdown().await;
        let _ = std::fs::remove_dir_all(dir);
    })
    .await
    .expect("bounded");
    assert_eq!(panics.load(Ordering::SeqCst), 0, "the head panicked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_is_refused_and_the_head_keeps_serving() {
    tokio::time::timeout(LIMIT, async {
        let dir = temp_dir("oversized");
        let head = serve(HeadConfig::new("127.0.0.1:0".parse().unwrap(), dir.clone()))
            .await
            .unwrap();
        let mut c = client(&head).await.max_encoding_message_size(usize::MAX);
        // A job spec whose input alone is over the head's limit.
        let spec = JobSpec {
            pool: "p".into(),
            input: vec![0u8; MAX_MESSAGE_BYTES + 1],
            ..Default::default()
        };
        let size = spec.clone().to_bytes().len();
        let err = c.submit_job(spec).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::OutOfRange, "{err:?}");
        assert!(
            err.message().contains(&size.to_string())
                && err.message().contains(&MAX_MESSAGE_BYTES.to_string()),
            "the status names the size and the limit: {}",
            err.message()
        );
        // Served afterwards, on the same connection and on a new one.
        c.status(StatusRequest { job: JobId(0) }).await.unwrap();
        let mut fresh = client(&head).await;
        let jobs = fresh.list_jobs(Empty).await.unwrap().into_inner();
        assert!(jobs.is_empty());
        head.shutdown().await;
        let _ = std::fs::remove_dir_all(dir);
    })
    .await
    .expect("bounded");
}

/// A gRPC client of `head` that carries its cluster token.
async fn client(head: &HeadHandle) -> HeadClient<AuthChannel> {
    let creds = Credentials {
        token: Some(head.token().clone()),
        tls_ca: None,
    };
    let channel = creds
        .endpoint(&head.addr().to_string())
        .unwrap()
        .connect()
        .await
        .expect("connect");
    HeadClient::new(creds.intercept(channel))
}
