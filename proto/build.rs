//! Compiles `proto/*.proto` with `protox` (a pure-Rust protobuf compiler), so building Starling
//! needs no system `protoc`.

fn main() {
    let files = ["proto/starling.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"]).expect("compile .proto files");
    prost_build::Config::new()
        .compile_fds(fds)
        .expect("generate Rust code from the .proto descriptors");
}
