//! Admit + release round trips per second, measured in the same run at
//! three depths: the engine alone (a `Node` in memory), the durable
//! ledger (two `fdatasync`s per change), and the whole agent — HTTP over
//! the Unix socket, JSON, the ledger, metrics — so the cost of each layer
//! reads as a ratio against the engine.
//!
//! `cargo bench -p topoalign-agent --bench round_trip [-- --seconds N]`
//! (N seconds per measurement, default 2).

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use topoalign_agent::request::{AdmitOptions, read_body};
use topoalign_agent::{Client, Endpoint, Ledger, NodeAgent, ServeConfig};
use topoalign_enforce::Procfs;
use topoalign_engine::{Node, NodeConfig};
use topoalign_model::{Machine, UniformMachine};

/// 2 NUMA nodes × 8 cores × 2 threads, 32Gi each.
fn machine() -> Machine {
    UniformMachine::new(2, 8)
        .threads_per_core(2)
        .sockets(2)
        .memory_per_numa(32 << 30)
        .remote_distance(21)
        .build()
        .expect("a valid machine")
}

fn config(machine: &Machine) -> NodeConfig {
    let kubelet = json!({
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0,16",
        "topologyManagerPolicy": "single-numa-node",
    });
    topoalign_k8s::node_config_from_value(&kubelet, machine).expect("a valid configuration")
}

const REQUEST: &str = r#"{"cpus": 4, "memory": "4Gi"}"#;

/// Round trips per second of `step`, run for about `seconds`.
fn rate(seconds: f64, mut step: impl FnMut(u64)) -> f64 {
    let budget = Duration::from_secs_f64(seconds);
    let start = Instant::now();
    let mut done = 0u64;
    while start.elapsed() < budget {
        step(done);
        done += 1;
    }
    done as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let seconds = std::env::args()
        .skip_while(|a| a != "--seconds")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let machine = machine();
    let config = config(&machine);
    let workload = read_body(REQUEST.as_bytes(), false, &AdmitOptions::default()).expect("a valid request");

    // The engine alone.
    let mut node = Node::start(machine.clone(), config.clone()).expect("a node");
    let template = workload.manifest.clone();
    let engine = rate(seconds, |i| {
        let uid = format!("u{i}");
        let mut manifest = template.clone();
        manifest["metadata"]["name"] = json!(uid);
        let pod = topoalign_k8s::pod_from_value(&manifest, &uid).expect("a pod");
        assert!(node.admit(pod).admitted());
        node.remove(&uid);
    });

    // The durable ledger.
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (mut ledger, _) = Ledger::open(dir.path(), machine.clone(), config.clone()).expect("a ledger");
    let durable = rate(seconds, |_| {
        let id = ledger.admit(&workload, None).expect("admitted").id.expect("an id");
        ledger.release(&id, "bench").expect("released");
    });

    // The agent, over HTTP on a Unix socket.
    let api_dir = tempfile::tempdir().expect("a temporary directory");
    let socket = api_dir.path().join("agent.sock");
    let (ledger, recovery) = Ledger::open(&api_dir.path().join("state"), machine, config).expect("a ledger");
    let agent = NodeAgent::new(
        ledger,
        &recovery,
        topoalign_agent::Enforcement::choose(false, false, "unused", &Procfs::default()),
        Procfs::default(),
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serve_config = ServeConfig {
        socket: Some(socket.clone()),
        tcp: None,
        reconcile_every: Duration::from_secs(3600),
        limits: Default::default(),
    };
    let server = std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        runtime.block_on(topoalign_agent::serve(agent, serve_config, async {
            let _ = stopped.await;
        }))
    });
    let client = Client::new(Endpoint::Unix(socket.clone()));
    wait_for(&client, &socket);
    let body: serde_json::Value = serde_json::from_str(REQUEST).expect("JSON");
    let api = rate(seconds, |_| {
        let answer = client.admit(&body).expect("admitted");
        let id = answer.allocation.expect("an allocation").id;
        client.release(&id).expect("released");
    });
    let _ = stop.send(());
    let _ = server.join();

    println!("admit + release round trips per second (4 exclusive CPUs, 4Gi; 32-CPU 2-NUMA node):");
    println!("  engine alone (in memory)           {engine:>10.0}/s   1x");
    println!(
        "  durable ledger (journal, 4 fsyncs) {durable:>10.0}/s   {:.0}x slower than the engine",
        engine / durable
    );
    println!(
        "  agent API (HTTP/Unix socket)       {api:>10.0}/s   {:.0}x slower than the engine, {:.2}x the ledger",
        engine / api,
        api / durable
    );
}

/// Bounded wait for the socket to answer.
fn wait_for(client: &Client, socket: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while client.health().is_err() {
        assert!(
            Instant::now() < deadline,
            "the agent at {} did not start",
            socket.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
