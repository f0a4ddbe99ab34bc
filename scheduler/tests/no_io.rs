//! The state machine's freedom from I/O, checked: its manifest depends on `starling-proto`
//! alone (no async runtime, RPC or protobuf crate), and its code names no file system, network,
//! thread or clock API. Time comes in as handler arguments; effects go out through transports.

use std::path::Path;

fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).expect("read the source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).expect("read a source file");
            out.push((path.display().to_string(), text));
        }
    }
}

#[test]
fn the_scheduler_depends_on_the_wire_types_alone() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml"))
            .expect("read Cargo.toml");
    let deps = manifest
        .split("\n[dependencies]\n")
        .nth(1)
        .expect("a [dependencies] table");
    let deps: Vec<&str> = deps
        .lines()
        .take_while(|l| !l.starts_with('['))
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect();
    assert_eq!(
        deps,
        vec!["starling-proto.workspace = true"],
        "the state machine may depend on starling-proto only"
    );
}

#[test]
fn the_scheduler_s_code_does_no_io_and_reads_no_clock() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 5, "found the sources");
    let forbidden = [
        "std::fs",
        "std::net",
        "std::thread",
        "std::process",
        "Instant::now",
        "SystemTime",
        "tokio::",
        "tonic::",
        "prost::",
        "pb::",
    ];
    for (path, text) in &files {
        for word in forbidden {
            assert!(
                !text.contains(word),
                "{path} names `{word}`: the scheduler does no I/O and reads no clock"
            );
        }
    }
}
