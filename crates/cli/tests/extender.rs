//! `topoalign extender` as a user runs it: the real binary on the example
//! fleet, one real HTTP request.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};

mod agent_support;

#[test]
fn the_binary_serves_filter_on_the_example_fleet() {
    let fleet = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fleet/fleet.yaml");
    let mut child = agent_support::dies_with_test(&mut Command::new(assert_cmd::cargo::cargo_bin!("topoalign")))
        .args([
            "extender",
            "--listen",
            "127.0.0.1:0",
            "--scoring",
            "LeastNUMANodes",
            "--fleet",
        ])
        .arg(&fleet)
        .stdout(Stdio::piped())
        .spawn()
        .expect("starts");
    let mut first_line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut first_line)
        .expect("prints its address");
    let address = first_line
        .trim()
        .rsplit("http://")
        .next()
        .expect("an address")
        .to_string();
    assert!(first_line.starts_with("topoalign extender: 24 nodes"), "{first_line}");

    let body = r#"{"Pod":{"metadata":{"name":"big","uid":"u1"},"spec":{"containers":[{"name":"c","resources":{"limits":{"cpu":"30","memory":"4Gi"}}}]}},"Nodes":null,"NodeNames":["gpu-0","cpu-0","elsewhere"]}"#;
    let mut stream = TcpStream::connect(&address).expect("connects");
    write!(
        stream,
        "POST /filter HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("sends");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("answers");
    child.kill().ok();
    child.wait().ok();
    let json: serde_json::Value =
        serde_json::from_str(response.split_once("\r\n\r\n").expect("a body").1).expect("JSON");
    // The GPU nodes (single-numa-node, 24 CPUs per NUMA node) refuse 30
    // CPUs for good; the CPU nodes (policy none) admit them.
    assert_eq!(json["NodeNames"], serde_json::json!(["cpu-0", "elsewhere"]));
    assert!(
        json["FailedAndUnresolvableNodes"]["gpu-0"]
            .as_str()
            .expect("a reason")
            .starts_with("TopologyAffinityError")
    );
}

#[test]
fn without_nodes_it_refuses_to_start() {
    let output = Command::new(assert_cmd::cargo::cargo_bin!("topoalign"))
        .args(["extender", "--listen", "127.0.0.1:0"])
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&output.stderr).contains("give --fleet FILE, --nrt FILE and/or --nrt-from-cluster")
    );
}
