//! The protobuf code in `src/generated/` is what `protox` and `tonic-build` make of
//! `proto/starling.proto`. It is committed, so that building Starling (a user's payload crate
//! builds it from source) compiles neither them nor their dependencies, a large part of a
//! first build, and checked here against the schema. After changing the schema:
//! `STARLING_REGENERATE=1 cargo test -p starling-proto --test generated`.

use std::path::Path;

#[test]
fn the_committed_protobuf_code_is_what_the_schema_generates() {
    // Paths as the schema has always been compiled: relative to the crate, so the generated
    // code does not depend on where the checkout is.
    let files = ["proto/starling.proto"];
    let fds = protox::compile(files, ["proto"]).expect("compile the .proto files");
    let out = std::env::temp_dir().join(format!("starling-proto-generated-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("create a scratch directory");
    tonic_build::configure()
        .build_client(true)
        .build_server(true)
        .out_dir(&out)
        .compile_fds(fds)
        .expect("generate Rust code from the .proto descriptors");
    let fresh = std::fs::read_to_string(out.join("starling.v1.rs")).expect("generated code");
    let _ = std::fs::remove_dir_all(&out);
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/generated/starling.v1.rs");
    if std::env::var_os("STARLING_REGENERATE").is_some() {
        std::fs::write(&committed, &fresh).expect("write the generated code");
        return;
    }
    let old = std::fs::read_to_string(&committed).unwrap_or_default();
    assert!(
        old == fresh,
        "{} is not what proto/starling.proto generates: run \
         `STARLING_REGENERATE=1 cargo test -p starling-proto --test generated`",
        committed.display()
    );
}
