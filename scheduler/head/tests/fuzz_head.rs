//! A running head against hostile peers: random and mutated batches from drivers, worker
//! processes and node agents must be refused or applied, never panic the head, and the head
//! keeps serving; a message over the size limit is refused with a status naming the size and
//! the limit. Ports from 127.0.0.1:0; every wait bounded.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prost::Message;
use starling_head::{serve, ClientTx, HeadConfig, HeadHandle, MAX_MESSAGE_BYTES};
use starling_proto::fuzz::{self, Rng};
use starling_proto::pb::{self, client_op, node_op};
use starling_proto::security::{AuthChannel, Credentials};
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

fn hello(worker: bool, node: u64, job: u64) -> pb::Hello {
    pb::Hello {
        version: starling_proto::PROTOCOL_VERSION,
        build: "00ff".into(),
        node,
        job,
        is_worker: worker,
        pid: 1,
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

fn random_op(rng: &mut Rng, base: u64) -> pb::ClientOp {
    use client_op::Kind;
    let value = |rng: &mut Rng| {
        let kind = match rng.below(4) {
            0 => Some(pb::object_value::Kind::Inline(rng.bytes(8))),
            1 => Some(pb::object_value::Kind::Location(pb::ObjectLocation {
                node: rng.below(4) as u64,
                address: "127.0.0.1:1".into(),
                path: rng.string(),
                size: rng.edgy_u64(),
                object: rng.below(32) as u64,
            })),
            2 => Some(pb::object_value::Kind::Failure(pb::TaskFailure {
                task_id: rng.below(32) as u64,
                attempt: 0,
                kind: Some(pb::task_failure::Kind::Cancelled(true)),
            })),
            _ => None,
        };
        pb::ObjectValue {
            object: id(rng, base),
            kind,
        }
    };
    let kind = match rng.below(12) {
        0 => Kind::Submit(pb::TaskSpec {
            task_id: id(rng, base),
            function: rng.pick(&["f", "", "g#1"]).to_string(),
            args: (0..rng.below(3))
                .map(|_| pb::TaskArg {
                    kind: match rng.below(3) {
                        0 => Some(pb::task_arg::Kind::Object(id(rng, base))),
                        1 => Some(pb::task_arg::Kind::Inline(vec![1])),
                        _ => None,
                    },
                })
                .collect(),
            resources: Some(pb::Resources {
                amounts: vec![pb::ResourceAmount {
                    name: rng.pick(&["CPU", "GPU", "x", ""]).to_string(),
                    milli4: rng.edgy_u64(),
                }],
            }),
            max_retries: rng.edgy_u64() as u32,
            retry_exceptions: rng.one_in(2),
            strategy: Some(pb::SchedulingStrategy {
                kind: Some(match rng.below(3) {
                    0 => pb::scheduling_strategy::Kind::Spread(true),
                    1 => pb::scheduling_strategy::Kind::NodeAffinity(pb::NodeAffinity {
                        node: rng.below(4) as u64,
                        soft: rng.one_in(2),
                    }),
                    _ => pb::scheduling_strategy::Kind::Default(true),
                }),
            }),
            attempt: rng.edgy_u64() as u32,
            job: rng.below(4) as u64,
        }),
        1 => Kind::Put(value(rng)),
        2 => Kind::PutStored(value(rng)),
        3 => Kind::Release(id(rng, base)),
        4 => Kind::Subscribe(id(rng, base)),
        5 => Kind::Cancel(id(rng, base)),
        6 => Kind::CancelForce(id(rng, base)),
        7 => Kind::Blocked(true),
        8 => Kind::Unblocked(true),
        9 => Kind::Hello(hello(rng.one_in(2), 1, 0)),
        _ => Kind::Done(pb::TaskDone {
            task: id(rng, base),
            kind: match rng.below(6) {
                0 => Some(pb::task_done::Kind::Inline(vec![1, 2])),
                1 => Some(pb::task_done::Kind::Stored(rng.edgy_u64())),
                2 => Some(pb::task_done::Kind::Failed(pb::RemoteError::default())),
                3 => Some(pb::task_done::Kind::BadArgument(pb::RemoteError::default())),
                4 => Some(pb::task_done::Kind::FunctionNotFound("00".into())),
                _ => None,
            },
            runtime_us: rng.edgy_u64(),
        }),
    };
    pb::ClientOp {
        kind: (!rng.one_in(40)).then_some(kind),
    }
}

fn random_node_op(rng: &mut Rng) -> pb::NodeOp {
    use node_op::Kind;
    let kind = match rng.below(7) {
        0 => Kind::Heartbeat(true),
        1 => Kind::WorkerExit(pb::WorkerExit {
            job: rng.below(4) as u64,
            pid: rng.edgy_u64() as u32,
            code: rng.edgy_u64() as i32,
        }),
        2 => Kind::Usage(pb::StoreUsage {
            memory_bytes: rng.edgy_u64(),
            spilled_bytes: rng.edgy_u64(),
            objects: rng.edgy_u64(),
        }),
        3 => Kind::JobLog(pb::JobLog {
            job: rng.below(4) as u64,
            data: rng.bytes(8),
        }),
        4 => Kind::EntrypointExit(pb::EntrypointExit {
            job: rng.edgy_u64(),
            code: rng.edgy_u64() as i32,
            error: rng.string(),
        }),
        5 => Kind::JobStopped(rng.edgy_u64()),
        _ => Kind::Hello(pb::NodeHello::default()),
    };
    pb::NodeOp { kind: Some(kind) }
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
            .send(pb::NodeBatch {
                ops: vec![pb::NodeOp {
                    kind: Some(node_op::Kind::Hello(pb::NodeHello {
                        version: starling_proto::PROTOCOL_VERSION,
                        resources: Some(pb::Resources {
                            amounts: vec![pb::ResourceAmount {
                                name: "CPU".into(),
                                milli4: 40_000,
                            }],
                        }),
                        object_address: "127.0.0.1:1".into(),
                        store_dir: "/nonexistent".into(),
                        ..Default::default()
                    })),
                }],
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
        let node = match first.ops[0].kind {
            Some(pb::head_to_node_op::Kind::NodeId(n)) => n,
            ref other => panic!("expected a node id, got {other:?}"),
        };
        // Drain what the head sends the node (start workers, free objects, ...).
        tokio::spawn(async move { while to_node.next().await.is_some() {} });

        let service = head.service().clone();
        let seeds: Vec<Vec<u8>> = {
            let mut rng = Rng::new(7);
            (0..16)
                .map(|_| {
                    pb::ClientBatch {
                        ops: (0..4).map(|_| random_op(&mut rng, 1 << 40)).collect(),
                    }
                    .encode_to_vec()
                })
                .collect()
        };
        let report = tokio::task::spawn_blocking(move || {
            let open = |worker: bool, job: u64| {
                service
                    .open_local_session(
                        &hello(worker, node, job),
                        ClientTx::Direct(Arc::new(|_| {})),
                    )
                    .ok()
            };
            let mut driver = open(false, 0).expect("a driver session");
            let mut worker = open(true, 1);
            let mut refused = 0u64;
            let report = fuzz::run("head sessions", 3.0, 300, |rng: &mut Rng| {
                let ops = if rng.one_in(3) {
                    match pb::ClientBatch::decode(fuzz::mutate(rng, &seeds).as_slice()) {
                        Ok(b) => b.ops,
                        Err(_) => return,
                    }
                } else {
                    (0..1 + rng.below(6))
                        .map(|_| random_op(rng, driver << 40))
                        .collect()
                };
                let to_worker = rng.one_in(2);
                let client = match (to_worker, worker) {
                    (true, Some(w)) => w,
                    _ => driver,
                };
                if service.local_batch(client, ops).is_err() {
                    // A refused batch ends the session, as over gRPC.
                    refused += 1;
                    service.close_local_session(client, "refused");
                    if client == driver {
                        driver = open(false, 0).expect("a driver session");
                    } else {
                        worker = open(true, rng.below(3) as u64);
                    }
                }
                if rng.one_in(4) {
                    let ops = (0..1 + rng.below(4)).map(|_| random_node_op(rng)).collect();
                    let _ = node_tx.send(pb::NodeBatch { ops });
                }
                if rng.one_in(50) {
                    // Workers come and go.
                    if let Some(w) = worker.take() {
                        service.close_local_session(w, "gone");
                    }
                    worker = open(true, rng.below(3) as u64);
                }
            });
            assert!(refused > 0, "malformed batches were sent and refused");
            (report, node_tx)
        })
        .await
        .expect("the fuzz loop");
        let (_report, node_tx) = report;

        // The head still serves, and the node is still attached.
        let status = c
            .status(pb::StatusRequest { job: 0 })
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
        let spec = pb::JobSpec {
            pool: "p".into(),
            input: vec![0u8; MAX_MESSAGE_BYTES + 1],
            ..Default::default()
        };
        let size = spec.encoded_len();
        let err = c.submit_job(spec).await.unwrap_err();
        assert_eq!(err.code(), tonic::Code::OutOfRange, "{err:?}");
        assert!(
            err.message().contains(&size.to_string())
                && err.message().contains(&MAX_MESSAGE_BYTES.to_string()),
            "the status names the size and the limit: {}",
            err.message()
        );
        // Served afterwards, on the same connection and on a new one.
        c.status(pb::StatusRequest { job: 0 }).await.unwrap();
        let mut fresh = client(&head).await;
        let jobs = fresh.list_jobs(pb::Empty {}).await.unwrap().into_inner();
        assert!(jobs.jobs.is_empty());
        head.shutdown().await;
        let _ = std::fs::remove_dir_all(dir);
    })
    .await
    .expect("bounded");
}

/// A gRPC client of `head` that carries its cluster token.
async fn client(head: &HeadHandle) -> pb::head_client::HeadClient<AuthChannel> {
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
    pb::head_client::HeadClient::new(creds.intercept(channel))
}
