//! Where the generated protobuf types may be named: a ratchet toward "only in `proto`".
//!
//! The generated code is private to this crate; `pb` re-exports it for the crates that speak
//! the cluster protocol. Those uses are moving behind domain types with conversions at the
//! edge (as the job table's did, `starling_proto::jobs`). This test lists the files that still
//! name `pb`: a file not on the list that starts naming it fails, and so does a listed file
//! that no longer does (take it off the list), so the list only shrinks.

use std::path::{Path, PathBuf};

/// Files outside `proto` that still name generated types, by workspace-relative path.
const STILL_NAMING_PB: &[&str] = &[
    "cli/src/status.rs",
    "core/src/cluster/client/connect.rs",
    "core/src/cluster/client/incoming.rs",
    "core/src/cluster/client/mod.rs",
    "core/src/cluster/client/outbound.rs",
    "core/src/cluster/objects.rs",
    "core/src/cluster/worker.rs",
    "core/src/jobs.rs",
    "scheduler/head/src/lib.rs",
    "scheduler/head/src/service.rs",
    "scheduler/head/src/state.rs",
    "scheduler/head/tests/fuzz_head.rs",
    "scheduler/head/tests/head.rs",
    "worker/src/agent/binary.rs",
    "worker/src/agent/disk.rs",
    "worker/src/agent/instances.rs",
    "worker/src/agent/logs.rs",
    "worker/src/agent/mod.rs",
    "worker/src/agent/objects.rs",
    "worker/src/agent/session.rs",
    "worker/tests/agent.rs",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && name != ".git" && name != "proto" {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether `text` names the generated module (`pb::X`, `use starling_proto::pb`, `{.., pb}`).
fn names_pb(text: &str) -> bool {
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .any(|code| {
            code.contains("starling_proto::pb")
                || code.contains(" pb::")
                || code.contains("(pb::")
                || code.contains("<pb::")
                || code.contains("&pb::")
                || code.contains("[pb::")
                || code.trim_start().starts_with("pb::")
                || code.contains(", pb,")
                || code.contains("{pb,")
                || code.contains(", pb}")
        })
}

#[test]
fn generated_types_are_named_only_where_listed() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root");
    let mut files = Vec::new();
    rust_files(workspace, &mut files);
    // `scheduler/tests/no_io.rs` names `pb::` as a word it forbids, not as a type.
    let exempt = ["scheduler/tests/no_io.rs", "proto/tests/pb_boundary.rs"];
    let mut naming = Vec::new();
    for f in &files {
        let rel = f
            .strip_prefix(workspace)
            .expect("under the workspace")
            .to_string_lossy()
            .replace('\\', "/");
        if exempt.contains(&rel.as_str()) {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("read a source file");
        if names_pb(&text) {
            naming.push(rel);
        }
    }
    assert!(files.len() > 50, "found the workspace's sources");
    let new: Vec<&String> = naming
        .iter()
        .filter(|f| !STILL_NAMING_PB.contains(&f.as_str()))
        .collect();
    assert!(
        new.is_empty(),
        "{new:?} name generated protobuf types: convert at the edge to domain types \
         (starling_proto's own, like starling_proto::jobs) instead"
    );
    let done: Vec<&&str> = STILL_NAMING_PB
        .iter()
        .filter(|f| !naming.iter().any(|n| n == *f))
        .collect();
    assert!(
        done.is_empty(),
        "{done:?} no longer name generated types: take them off STILL_NAMING_PB"
    );
}
