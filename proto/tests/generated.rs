//! The protobuf code in `src/generated/` is what `protox` and `tonic-build` make of
//! `proto/starling.proto`. It is committed, so that building Starling (a user's payload crate
//! builds it from source) compiles neither them nor their dependencies, a large part of a
//! first build, and checked here against the schema. After changing the schema:
//! `STARLING_REGENERATE=1 cargo test -p starling-proto --test generated`.

use std::path::Path;

/// The schema's services, with the domain types as their messages (see `src/rpc/mod.rs`): one
/// line per method, `name Route Input Output streaming`, where streaming is `-`, `client`,
/// `server` or `both`. The test below checks these against the `service` blocks of the schema.
const HEAD: &[(&str, &str, &str, &str, &str)] = &[
    (
        "session",
        "Session",
        "session::ClientBatch",
        "session::HeadBatch",
        "both",
    ),
    (
        "attach",
        "Attach",
        "node::NodeBatch",
        "node::HeadToNodeBatch",
        "both",
    ),
    (
        "put_binary",
        "PutBinary",
        "chunks::Chunk",
        "chunks::BinaryRef",
        "client",
    ),
    (
        "get_binary",
        "GetBinary",
        "chunks::BinaryRef",
        "chunks::Chunk",
        "server",
    ),
    (
        "fetch",
        "Fetch",
        "chunks::FetchRequest",
        "chunks::Chunk",
        "server",
    ),
    (
        "status",
        "Status",
        "status::StatusRequest",
        "status::StatusReply",
        "-",
    ),
    (
        "pending_reason",
        "PendingReason",
        "status::PendingRequest",
        "status::PendingReply",
        "-",
    ),
    (
        "get_actor",
        "GetActor",
        "status::ActorNameRequest",
        "status::ActorNameReply",
        "-",
    ),
    (
        "submit_job",
        "SubmitJob",
        "jobs::JobSpec",
        "jobs::JobInfo",
        "-",
    ),
    (
        "list_jobs",
        "ListJobs",
        "rpc::Empty",
        "::std::vec::Vec<crate::jobs::JobInfo>",
        "-",
    ),
    ("get_job", "GetJob", "jobs::JobRef", "jobs::JobInfo", "-"),
    (
        "cancel_job",
        "CancelJob",
        "jobs::JobRef",
        "jobs::JobInfo",
        "-",
    ),
    ("delete_job", "DeleteJob", "jobs::JobRef", "rpc::Empty", "-"),
    (
        "job_logs",
        "JobLogs",
        "jobs::LogRequest",
        "jobs::LogChunk",
        "-",
    ),
    (
        "set_job_result",
        "SetJobResult",
        "jobs::JobResult",
        "rpc::Empty",
        "-",
    ),
    (
        "create_pool",
        "CreatePool",
        "jobs::PoolSpec",
        "jobs::PoolInfo",
        "-",
    ),
    (
        "list_pools",
        "ListPools",
        "rpc::Empty",
        "::std::vec::Vec<crate::jobs::PoolInfo>",
        "-",
    ),
    (
        "describe_pool",
        "DescribePool",
        "jobs::PoolRef",
        "jobs::PoolInfo",
        "-",
    ),
    (
        "delete_pool",
        "DeletePool",
        "jobs::PoolRef",
        "rpc::Empty",
        "-",
    ),
    (
        "list_tasks",
        "ListTasks",
        "state::TaskQuery",
        "state::TaskList",
        "-",
    ),
    (
        "list_objects",
        "ListObjects",
        "state::TaskQuery",
        "state::StateList",
        "-",
    ),
    (
        "list_workers",
        "ListWorkers",
        "state::TaskQuery",
        "state::StateList",
        "-",
    ),
];

const OBJECT_SERVICE: &[(&str, &str, &str, &str, &str)] = &[
    (
        "fetch",
        "Fetch",
        "chunks::FetchRequest",
        "chunks::Chunk",
        "server",
    ),
    (
        "read_log",
        "ReadLog",
        "jobs::LogFileRequest",
        "jobs::LogChunk",
        "-",
    ),
];

fn service(
    name: &str,
    methods: &[(&str, &str, &str, &str, &str)],
    schema: &str,
) -> tonic_build::manual::Service {
    let path = |t: &str| {
        if t.starts_with("::") {
            t.to_string()
        } else {
            format!("crate::{t}")
        }
    };
    let block = schema
        .split(&format!("service {name} {{"))
        .nth(1)
        .and_then(|rest| rest.split('}').next())
        .unwrap_or_else(|| panic!("the schema has no service {name}"));
    let rpcs: Vec<&str> = block
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("rpc "))
        .collect();
    assert_eq!(rpcs.len(), methods.len(), "service {name}: {rpcs:?}");
    let mut b = tonic_build::manual::Service::builder()
        .name(name)
        .package("starling.v1");
    for ((rust, route, input, output, streaming), rpc) in methods.iter().zip(rpcs) {
        let client = rpc.contains(&format!("{route}(stream "));
        let server = rpc.contains("returns (stream ");
        assert!(
            rpc.starts_with(&format!("rpc {route}(")),
            "{name}: {rpc} is not {route}"
        );
        assert_eq!(
            (client, server),
            match *streaming {
                "both" => (true, true),
                "client" => (true, false),
                "server" => (false, true),
                _ => (false, false),
            },
            "{name}: {rpc} streams otherwise than {streaming}"
        );
        let mut m = tonic_build::manual::Method::builder()
            .name(rust)
            .route_name(route)
            .input_type(path(input))
            .output_type(path(output))
            .codec_path("crate::rpc::WireCodec");
        if client {
            m = m.client_streaming();
        }
        if server {
            m = m.server_streaming();
        }
        b = b.method(m.build());
    }
    b.build()
}

#[test]
fn the_committed_protobuf_code_is_what_the_schema_generates() {
    // Paths as the schema has always been compiled: relative to the crate, so the generated
    // code does not depend on where the checkout is.
    let files = ["proto/starling.proto"];
    let fds = protox::compile(files, ["proto"]).expect("compile the .proto files");
    let out = std::env::temp_dir().join(format!("starling-proto-generated-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("create a scratch directory");
    // The messages, from the schema; the services, in domain types, from the table above.
    tonic_build::configure()
        .build_client(false)
        .build_server(false)
        .out_dir(&out)
        .compile_fds(fds)
        .expect("generate Rust code from the .proto descriptors");
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let schema =
        std::fs::read_to_string(crate_dir.join("proto/starling.proto")).expect("the schema");
    tonic_build::manual::Builder::new().out_dir(&out).compile(&[
        service("Head", HEAD, &schema),
        service("ObjectService", OBJECT_SERVICE, &schema),
    ]);
    let mut stale = Vec::new();
    for file in [
        "starling.v1.rs",
        "starling.v1.Head.rs",
        "starling.v1.ObjectService.rs",
    ] {
        let fresh = std::fs::read_to_string(out.join(file)).expect("generated code");
        let committed = crate_dir.join("src/generated").join(file);
        if std::env::var_os("STARLING_REGENERATE").is_some() {
            std::fs::write(&committed, &fresh).expect("write the generated code");
            continue;
        }
        if std::fs::read_to_string(&committed).unwrap_or_default() != fresh {
            stale.push(committed.display().to_string());
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        stale.is_empty(),
        "{stale:?} are not what proto/starling.proto generates: run \
         `STARLING_REGENERATE=1 cargo test -p starling-proto --test generated`"
    );
}
