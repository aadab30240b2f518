//! Compiles the kubelet's PodResources proto (`proto/api.proto`) with
//! protox, a pure-Rust protobuf compiler, so that building needs no
//! `protoc` on the machine. Without the `grpc` feature there is no protocol
//! to generate.

#[cfg(feature = "grpc")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/api.proto");
    let descriptors = protox::compile(["proto/api.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}

#[cfg(not(feature = "grpc"))]
fn main() {}
