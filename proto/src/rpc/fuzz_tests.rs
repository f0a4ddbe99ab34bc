//! Hostile bytes against every protobuf message the head, the node agents and the clients
//! decode from the network, and against the conversions into domain types in `wire`.
//!
//! Each message type is seeded with valid encodings and fed mutations of them (see
//! `crate::fuzz`). Decoding must return an error or a message, never panic; a message
//! that decodes must survive re-encoding unchanged, and its conversion (`TaskSpec`,
//! `TaskFailure`, `ResourceSet`, ...) must return a value or a `DecodeError`.

use std::collections::HashMap;
use std::sync::Arc;

use crate::fuzz::{self, Rng};
use crate::pb::{self, client_op, head_op, head_to_node_op, node_op};
use crate::rpc::Wire;
use crate::wire::{self, DecodeError};
use crate::{
    FailureKind, JobId, NodeId, ObjectId, RemoteError, ResourceSet, SchedulingStrategy, TaskArg,
    TaskFailure, TaskId, TaskSpec,
};
use prost::Message;

fn spec() -> TaskSpec {
    TaskSpec {
        id: TaskId(7 << 40 | 3),
        function: "demo::add#00ff".into(),
        args: vec![
            TaskArg::Inline(vec![1, 2, 3, 0xfd]),
            TaskArg::Object(ObjectId(9)),
        ],
        resources: ResourceSet::cpus(1.5).with("gpu", 1.0).with("tpu", 0.25),
        max_retries: 3,
        attempt: 1,
        job: JobId(4),
        parent: Some(TaskId(1)),
        extras: crate::TaskExtras {
            retry_exceptions: true,
            strategy: SchedulingStrategy::NodeAffinity {
                node: NodeId(2),
                soft: true,
            },
            retry_on: vec![Arc::from("std::io::error::Error")],
            contained: vec![ObjectId(9), ObjectId(u64::MAX)],
            returns: 4,
            streaming: true,
            backpressure: 2,
            max_concurrency: 3,
            env: crate::TaskEnv::new([("B".into(), "2".into()), ("A".into(), "1".into())]),
            actor: crate::ActorRole::Create(Arc::new(crate::ActorOptions {
                class_name: "Counter".into(),
                max_restarts: u32::MAX,
                max_task_retries: 2,
                name: "counter".into(),
                detached: true,
                max_concurrency: 1000,
            })),
            direct: Some(crate::WorkerId(5)),
        }
        .into(),
    }
}

fn failure() -> TaskFailure {
    let root = TaskFailure {
        task: TaskId(1),
        attempt: 2,
        kind: FailureKind::Application(RemoteError::new("panic", "boom")),
    };
    TaskFailure {
        task: TaskId(2),
        attempt: 0,
        kind: FailureKind::Upstream(Arc::new(TaskFailure {
            task: TaskId(3),
            attempt: 0,
            kind: FailureKind::Upstream(Arc::new(root)),
        })),
    }
}

fn location() -> pb::ObjectLocation {
    pb::ObjectLocation {
        node: 3,
        address: "127.0.0.1:4000".into(),
        path: "/tmp/store/12".into(),
        size: 1 << 20,
        object: 12,
    }
}

fn client_batch() -> pb::ClientBatch {
    use client_op::Kind;
    let ops = vec![
        Kind::Hello(pb::Hello {
            version: crate::PROTOCOL_VERSION,
            build: "00ff".into(),
            node: 1,
            job: 2,
            is_worker: true,
            pid: 77,
            env: 5,
        }),
        Kind::Submit((&spec()).into()),
        Kind::Put(pb::ObjectValue {
            object: 5,
            kind: Some(pb::object_value::Kind::Inline(vec![9; 20])),
        }),
        Kind::PutStored(pb::ObjectValue {
            object: 6,
            kind: Some(pb::object_value::Kind::Location(location())),
        }),
        Kind::Release(5),
        Kind::AddRef(5),
        Kind::StreamItem(pb::StreamItem {
            task: 7,
            index: 2,
            object: 9,
        }),
        Kind::StreamAck(pb::StreamAck {
            task: 7,
            consumed: 3,
        }),
        Kind::Nested(pb::Nested {
            container: 5,
            refs: vec![6, 7],
        }),
        Kind::Subscribe(6),
        Kind::Cancel(7),
        Kind::CancelForce(8),
        Kind::KillActor(9),
        Kind::KillActorRestart(10),
        Kind::Blocked(true),
        Kind::Unblocked(true),
        Kind::Done(pb::TaskDone {
            task: 7,
            kind: Some(pb::task_done::Kind::Failed(
                (&RemoteError::new("e", "m")).into(),
            )),
            runtime_us: 12,
        }),
        Kind::Done(pb::TaskDone {
            task: 8,
            kind: Some(pb::task_done::Kind::Stored(1 << 30)),
            runtime_us: 0,
        }),
    ];
    pb::ClientBatch {
        ops: ops
            .into_iter()
            .map(|k| pb::ClientOp { kind: Some(k) })
            .collect(),
    }
}

fn head_batch() -> pb::HeadBatch {
    use head_op::Kind;
    let ops = vec![
        Kind::Welcome(pb::Welcome {
            client: 1,
            job: 2,
            id_base: 1 << 40,
            worker: 3,
            epoch: 0x5eed,
        }),
        Kind::Value(pb::ObjectValue {
            object: 4,
            kind: Some(pb::object_value::Kind::Failure((&failure()).into())),
        }),
        Kind::Run(pb::RunTask {
            spec: Some((&spec()).into()),
            args: vec![
                pb::ResolvedArg {
                    kind: Some(pb::resolved_arg::Kind::Inline(vec![1, 2])),
                },
                pb::ResolvedArg {
                    kind: Some(pb::resolved_arg::Kind::Location(location())),
                },
                pb::ResolvedArg {
                    kind: Some(pb::resolved_arg::Kind::Local(3)),
                },
            ],
            gpu_ids: vec!["0".into(), "GPU-8f2e".into()],
        }),
        Kind::Cancel(9),
    ];
    pb::HeadBatch {
        ops: ops
            .into_iter()
            .map(|k| pb::HeadOp { kind: Some(k) })
            .collect(),
    }
}

fn node_batch() -> pb::NodeBatch {
    use node_op::Kind;
    let ops = vec![
        Kind::Hello(pb::NodeHello {
            version: crate::PROTOCOL_VERSION,
            resources: Some((&ResourceSet::cpus(4.0).with("disk", 2.0)).into()),
            object_address: "127.0.0.1:5000".into(),
            pool: "gpu".into(),
            store_dir: "/tmp/s".into(),
            previous_id: 3,
            pid: 99,
            gpu_ids: vec!["1".into()],
        }),
        Kind::Heartbeat(true),
        Kind::WorkerExit(pb::WorkerExit {
            job: 1,
            pid: 2,
            code: -9,
        }),
        Kind::Usage(pb::StoreUsage {
            memory_bytes: 1,
            spilled_bytes: 2,
            objects: 3,
        }),
        Kind::JobLog(pb::JobLog {
            job: 1,
            data: b"[-] out|hello\n".to_vec(),
        }),
        Kind::EntrypointExit(pb::EntrypointExit {
            job: 1,
            code: 1,
            error: "no such file".into(),
        }),
        Kind::JobStopped(1),
    ];
    pb::NodeBatch {
        ops: ops
            .into_iter()
            .map(|k| pb::NodeOp { kind: Some(k) })
            .collect(),
    }
}

fn job_spec() -> pb::JobSpec {
    pb::JobSpec {
        name: "train".into(),
        pool: "gpu".into(),
        payload: Some(pb::Payload {
            kind: Some(pb::payload::Kind::Directory("00ff".into())),
            entrypoint: "./run.sh".into(),
            command: vec!["python3".into(), "-u".into()],
        }),
        args: vec!["--epochs".into(), "3".into()],
        env: HashMap::from([("K".to_string(), "V".to_string())]),
        target_instances: 3,
        min_instances: 2,
        instance_timeout_ms: 1000,
        input: vec![1, 2, 3],
        max_instance_failures: Some(1),
    }
}

fn head_to_node_batch() -> pb::HeadToNodeBatch {
    use head_to_node_op::Kind;
    let spec = job_spec();
    let ops = vec![
        Kind::NodeId(3),
        Kind::StartWorkers(pb::StartWorkers {
            job: 1,
            build: "00ff".into(),
            count: 4,
            env: vec![pb::EnvVar {
                name: "K".into(),
                value: "v".into(),
            }],
        }),
        Kind::StopJob(2),
        Kind::FreeObject(5),
        Kind::JobInstance(pb::JobInstance {
            job: 1,
            instance: 0,
            num_instances: 2,
            entrypoint: Some(pb::Entrypoint {
                payload: spec.payload,
                args: spec.args,
                env: spec.env,
                head: "127.0.0.1:1".into(),
                input: vec![7],
            }),
        }),
        Kind::KillWorker(pb::KillWorker { job: 1, pid: 77 }),
        Kind::KeepWorker(pb::KillWorker { job: 1, pid: 78 }),
    ];
    pb::HeadToNodeBatch {
        ops: ops
            .into_iter()
            .map(|k| pb::HeadToNodeOp { kind: Some(k) })
            .collect(),
    }
}

fn job_info() -> pb::JobInfo {
    pb::JobInfo {
        id: 4,
        spec: Some(job_spec()),
        status: "FAILED".into(),
        message: "boom".into(),
        exit_code: Some(-9),
        created_ms: 1,
        started_ms: 2,
        completed_ms: 3,
        nodes: vec![1, 2, 3],
        result: vec![4, 5],
        error: Some((&RemoteError::new("t", "m")).into()),
        instances: vec![pb::InstanceState {
            index: 1,
            node: 2,
            state: "LOST".into(),
            lost_ms: 5,
            reason: "heartbeat timeout".into(),
        }],
    }
}

fn pool_info() -> pb::PoolInfo {
    pb::PoolInfo {
        spec: Some(pb::PoolSpec {
            name: "gpu".into(),
            min_nodes: 1,
            max_nodes: 4,
            num_cpus_per_node: 2,
            launched: true,
            idle_timeout_ms: 60_000,
        }),
        nodes: vec![1, 2],
        busy: 1,
        starting: 1,
    }
}

/// Decodes `bytes` as `M`; if that works, re-encoding must give a message that decodes to the
/// same value (no field lost or invented).
fn check_round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(bytes: &[u8]) -> Option<M> {
    let m = M::decode(bytes).ok()?;
    let again = M::decode(m.encode_to_vec().as_slice()).expect("a decoded message re-encodes");
    assert_eq!(m, again);
    Some(m)
}

/// The conversions the head and the clients apply to what they decoded.
fn convert_task(t: pb::TaskSpec) {
    let encoded_function = t.function.clone();
    match TaskSpec::try_from(t) {
        Ok(spec) => {
            assert!(!spec.function.is_empty());
            assert_eq!(&*spec.function, encoded_function.as_str());
            // The domain value encodes again, and decodes to itself.
            let back = wire::decode_task(&wire::encode_task(&spec)).expect("round trip");
            assert_eq!(
                (back.id, back.args, back.extras.strategy),
                (spec.id, spec.args, spec.extras.strategy)
            );
            assert_eq!(back.resources, spec.resources);
        }
        Err(DecodeError(why)) => assert!(!why.is_empty()),
    }
}

fn convert_failure(f: pb::TaskFailure) {
    if let Ok(f) = TaskFailure::try_from(f) {
        let _ = f.to_string();
        let _ = f.root();
        let back = wire::decode_failure(&wire::encode_failure(&f)).expect("round trip");
        assert_eq!(back, f);
    }
}

fn convert_resources(r: pb::Resources) {
    let set = ResourceSet::from(r);
    let _ = set.to_string();
    let mut sum = set.clone();
    sum.add(&set);
    sum.subtract(&set);
}

fn convert_value(v: pb::ObjectValue) {
    match v.kind {
        Some(pb::object_value::Kind::Failure(f)) => convert_failure(f),
        Some(pb::object_value::Kind::Location(l)) => {
            let _ = (l.node, l.size, l.path, l.address);
        }
        Some(pb::object_value::Kind::Inline(_)) | None => {}
    }
}

#[test]
fn every_network_message_decodes_or_errs() {
    let seeds: Vec<(&str, Vec<u8>)> = vec![
        ("ClientBatch", client_batch().encode_to_vec()),
        ("HeadBatch", head_batch().encode_to_vec()),
        ("NodeBatch", node_batch().encode_to_vec()),
        ("HeadToNodeBatch", head_to_node_batch().encode_to_vec()),
        ("JobSpec", job_spec().encode_to_vec()),
        ("JobInfo", job_info().encode_to_vec()),
        ("PoolInfo", pool_info().encode_to_vec()),
        ("TaskSpec", wire::encode_task(&spec())),
        ("TaskFailure", wire::encode_failure(&failure())),
        (
            "Chunk",
            pb::Chunk {
                data: vec![1; 40],
                total: 40,
                build: String::new(),
            }
            .encode_to_vec(),
        ),
        (
            "LogRequest",
            pb::LogRequest {
                job: 1,
                instance: 2,
                offset: 1 << 33,
            }
            .encode_to_vec(),
        ),
        (
            "JobResult",
            pb::JobResult {
                job: 1,
                kind: Some(pb::job_result::Kind::Error(
                    (&RemoteError::new("t", "m")).into(),
                )),
            }
            .encode_to_vec(),
        ),
        (
            "DirArchive",
            pb::DirArchive {
                files: vec![
                    pb::DirFile {
                        path: "run.sh".into(),
                        mode: 0o755,
                        data: b"#!/bin/sh\n".to_vec(),
                    },
                    pb::DirFile {
                        path: "data/a.txt".into(),
                        mode: 0o644,
                        data: vec![0; 10],
                    },
                ],
            }
            .encode_to_vec(),
        ),
    ];
    let corpus: Vec<Vec<u8>> = seeds.iter().map(|(_, b)| b.clone()).collect();
    let mut decoded = 0u64;
    fuzz::run("protobuf messages", 3.0, 2000, |rng: &mut Rng| {
        let bytes = fuzz::mutate(rng, &corpus);
        // Every input goes to every decoder: a mutation of one message is a plausible lie
        // about another.
        if let Some(b) = check_round_trip::<pb::ClientBatch>(&bytes) {
            decoded += 1;
            for op in b.ops {
                match op.kind {
                    Some(client_op::Kind::Submit(t)) => convert_task(t),
                    Some(client_op::Kind::Put(v)) | Some(client_op::Kind::PutStored(v)) => {
                        convert_value(v)
                    }
                    Some(client_op::Kind::Done(d)) => {
                        if let Some(
                            pb::task_done::Kind::Failed(e) | pb::task_done::Kind::BadArgument(e),
                        ) = d.kind
                        {
                            let _ = RemoteError::from(e).to_string();
                        }
                    }
                    _ => {}
                }
            }
        }
        if let Some(b) = check_round_trip::<pb::HeadBatch>(&bytes) {
            for op in b.ops {
                match op.kind {
                    Some(head_op::Kind::Value(v)) => convert_value(v),
                    Some(head_op::Kind::Run(r)) => {
                        if let Some(t) = r.spec {
                            convert_task(t);
                        }
                    }
                    _ => {}
                }
            }
        }
        if let Some(b) = check_round_trip::<pb::NodeBatch>(&bytes) {
            for op in b.ops {
                if let Some(node_op::Kind::Hello(h)) = op.kind {
                    if let Some(r) = h.resources {
                        convert_resources(r);
                    }
                }
            }
        }
        let _ = check_round_trip::<pb::HeadToNodeBatch>(&bytes);
        // What the codec does with a message off the network: a domain value or an error.
        let _ = crate::session::ClientBatch::from_bytes(&bytes);
        let _ = crate::session::HeadBatch::from_bytes(&bytes);
        let _ = crate::node::NodeBatch::from_bytes(&bytes);
        let _ = crate::node::HeadToNodeBatch::from_bytes(&bytes);
        let _ = crate::status::StatusReply::from_bytes(&bytes);
        let _ = crate::jobs::JobResult::from_bytes(&bytes);
        let _ = crate::jobs::JobSpec::from_bytes(&bytes);
        let _ = Vec::<crate::jobs::JobInfo>::from_bytes(&bytes);
        let _ = crate::chunks::Chunk::from_bytes(&bytes);
        let _ = check_round_trip::<pb::JobSpec>(&bytes);
        let _ = check_round_trip::<pb::JobInfo>(&bytes);
        let _ = check_round_trip::<pb::JobList>(&bytes);
        let _ = check_round_trip::<pb::PoolSpec>(&bytes);
        let _ = check_round_trip::<pb::PoolInfo>(&bytes);
        let _ = check_round_trip::<pb::StatusReply>(&bytes);
        let _ = check_round_trip::<pb::LogRequest>(&bytes);
        let _ = check_round_trip::<pb::LogChunk>(&bytes);
        let _ = check_round_trip::<pb::JobResult>(&bytes);
        let _ = check_round_trip::<pb::Chunk>(&bytes);
        let _ = check_round_trip::<pb::DirArchive>(&bytes);
        let _ = check_round_trip::<pb::StatusRequest>(&bytes);
        let _ = check_round_trip::<pb::FetchRequest>(&bytes);
        let _ = check_round_trip::<pb::BinaryRef>(&bytes);
        let _ = check_round_trip::<pb::JobRef>(&bytes);
        let _ = check_round_trip::<pb::PoolRef>(&bytes);
        if let Some(r) = check_round_trip::<pb::Resources>(&bytes) {
            convert_resources(r);
        }
        if let Some(t) = check_round_trip::<pb::TaskSpec>(&bytes) {
            convert_task(t);
        }
        if let Some(f) = check_round_trip::<pb::TaskFailure>(&bytes) {
            convert_failure(f);
        }
    });
    assert!(
        decoded > 0,
        "some mutations still decode, so the conversions were exercised"
    );
}

#[test]
fn missing_and_out_of_range_fields_are_errors() {
    // A task without a function name, an argument without a value, a failure without a kind.
    let mut t: pb::TaskSpec = (&spec()).into();
    t.function.clear();
    assert!(TaskSpec::try_from(t).is_err());
    let mut t: pb::TaskSpec = (&spec()).into();
    t.args.push(pb::TaskArg { kind: None });
    assert!(TaskSpec::try_from(t).is_err());
    let f = pb::TaskFailure {
        task_id: 1,
        attempt: 0,
        kind: None,
    };
    assert!(TaskFailure::try_from(f).is_err());
    // An upstream chain that ends without a kind is an error, not a half-built chain.
    let f = pb::TaskFailure {
        task_id: 1,
        attempt: 0,
        kind: Some(pb::task_failure::Kind::Upstream(Box::new(
            pb::TaskFailure {
                task_id: 2,
                attempt: 0,
                kind: None,
            },
        ))),
    };
    assert!(TaskFailure::try_from(f).is_err());
    // Ids of 0, missing optional parts: defaults, not panics.
    let t = pb::TaskSpec {
        function: "f".into(),
        ..Default::default()
    };
    let spec = TaskSpec::try_from(t).expect("only the function is required");
    assert_eq!(
        (spec.id, spec.job, spec.extras.strategy),
        (TaskId(0), JobId(0), SchedulingStrategy::Default)
    );
    assert!(spec.resources.is_empty());
    // Resource amounts at the top of the range add up without overflowing.
    let huge = pb::Resources {
        amounts: vec![
            pb::ResourceAmount {
                name: "CPU".into(),
                milli4: u64::MAX,
            },
            pb::ResourceAmount {
                name: "x".into(),
                milli4: u64::MAX,
            },
        ],
    };
    let mut r = ResourceSet::from(huge.clone());
    r.add(&ResourceSet::from(huge));
    assert_eq!(r.units("CPU"), u64::MAX, "saturates");
    assert_eq!(r.units("x"), u64::MAX, "saturates");
}

#[test]
fn a_deeply_nested_failure_is_refused_not_a_stack_overflow() {
    // 10,000 nested `upstream` failures: prost's recursion limit refuses them.
    let mut bytes = pb::TaskFailure {
        task_id: 1,
        attempt: 0,
        kind: Some(pb::task_failure::Kind::Cancelled(true)),
    }
    .encode_to_vec();
    for _ in 0..10_000 {
        let mut outer = vec![(4 << 3) | 2];
        let mut len = bytes.len() as u64;
        while len >= 0x80 {
            outer.push((len as u8) | 0x80);
            len >>= 7;
        }
        outer.push(len as u8);
        outer.extend_from_slice(&bytes);
        bytes = outer;
    }
    assert!(wire::decode_failure(&bytes).is_err());
}
