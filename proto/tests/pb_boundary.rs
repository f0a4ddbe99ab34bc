//! The generated protobuf types are named only in `proto`.
//!
//! The generated module is private to this crate, so the compiler already refuses a use from
//! another crate; this test keeps it so: it fails if `pb` stops being private, or if a source
//! file outside `proto` names it (`pb::X`, `use starling_proto::pb`). Everything else speaks in
//! the domain types (`starling_proto::{session, node, jobs, status, chunks}`) and the
//! domain-typed gRPC stubs of `starling_proto::rpc`, whose codec converts at the edge.

use std::path::{Path, PathBuf};

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
fn generated_types_are_named_only_in_proto() {
    let proto = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = std::fs::read_to_string(proto.join("src/lib.rs")).expect("read proto's lib.rs");
    assert!(
        lib.lines().any(|l| l.trim() == "mod pb {"),
        "proto/src/lib.rs must declare the generated module as a private `mod pb`"
    );
    assert!(
        !lib.contains("pub mod pb")
            && !lib.contains("pub use pb")
            && !lib.contains("pub use crate::pb"),
        "the generated module must not be exported"
    );
    let workspace = proto.parent().expect("the workspace root");
    let mut files = Vec::new();
    rust_files(workspace, &mut files);
    // `scheduler/tests/no_io.rs` names `pb::` as a word it forbids, not as a type.
    let exempt = ["scheduler/tests/no_io.rs"];
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
    assert!(
        naming.is_empty(),
        "{naming:?} name generated protobuf types: use the domain types of starling_proto \
         (session, node, jobs, status, chunks) and the stubs of starling_proto::rpc instead"
    );
}

/// The check above would catch the ways a file names the module.
#[test]
fn the_check_sees_a_use() {
    assert!(names_pb("use starling_proto::pb::{self, client_op};"));
    assert!(names_pb("    let b = pb::ClientBatch { ops };"));
    assert!(names_pb("fn f(x: &pb::Hello) {}"));
    assert!(!names_pb("// pb::X in a comment"));
    assert!(!names_pb("let pbx = 1;"));
}
