//! Compiles `proto/*.proto` with `protox` (a pure-Rust protobuf compiler) and generates the
//! messages (prost) and gRPC stubs (tonic), so building Starling needs no system `protoc`.

fn main() {
    let files = ["proto/starling.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"]).expect("compile .proto files");
    tonic_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)
        .expect("generate Rust code from the .proto descriptors");
}
