//! The agent on a machine with NUMA ids {0, 64} (issue #29): under
//! topology manager policy `none` the kubelet decides as on the machine
//! renumbered {0, 1}, so the agent's documents (`GET /v1/topology`,
//! `GET /v1/allocations`) and metrics are those of {0, 1} with NUMA node 1
//! named by its own id, 64. Every expected answer is the {0, 1} agent's,
//! mapped; none is written down.

use serde_json::{Value, json};
use topoalign_agent::request::{AdmitOptions, read_body};
use topoalign_agent::{Enforcement, Ledger, NodeAgent};
use topoalign_enforce::Procfs;
use topoalign_model::{Machine, UniformMachine};

/// Two NUMA nodes with ids `ids`, 4 CPUs and 8Gi each, one GPU each.
fn machine(ids: [usize; 2]) -> Machine {
    UniformMachine::new(2, 4)
        .sockets(2)
        .memory_per_numa(8 << 30)
        .numa_ids(ids)
        .build()
        .expect("a valid machine")
}

/// Admits 6 exclusive CPUs (both NUMA nodes) on `ids`; the topology
/// document, the allocations and the metrics' NUMA lines.
fn run(ids: [usize; 2]) -> (Value, Value, Vec<String>) {
    let machine = machine(ids);
    let kubelet = json!({
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0",
        "topologyManagerPolicy": "none",
    });
    let config = topoalign_k8s::node_config_from_value(&kubelet, &machine).expect("a valid configuration");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (ledger, recovery) = Ledger::open(dir.path(), machine, config).expect("a ledger");
    let procfs = Procfs::default();
    let mut agent = NodeAgent::new(
        ledger,
        &recovery,
        Enforcement::choose(false, false, "unused", &procfs),
        procfs,
    );
    let workload =
        read_body(br#"{"cpus": 6, "memory": "1Gi"}"#, false, &AdmitOptions::default()).expect("a valid request");
    let response = agent.admit(&workload).expect("answered");
    assert!(response.admitted, "{response:?}");
    let topology = serde_json::to_value(agent.topology()).expect("JSON");
    let mut allocations = serde_json::to_value(agent.allocations()).expect("JSON");
    // The allocation id is random.
    for allocation in allocations.as_array_mut().expect("a list") {
        allocation["id"] = Value::Null;
        allocation["name"] = Value::Null;
    }
    let mut metrics: Vec<String> = agent
        .metrics_text()
        .lines()
        .filter(|line| line.contains("numa_node=\""))
        .map(str::to_owned)
        .collect();
    metrics.sort();
    (topology, allocations, metrics)
}

#[test]
fn documents_and_metrics_name_numa_nodes_by_the_machines_own_ids() {
    let (topology, allocations, metrics) = run([0, 1]);
    let (wide_topology, wide_allocations, wide_metrics) = run([0, 64]);

    let mut expected = topology.clone();
    let nodes = expected["numaNodes"].as_array_mut().expect("NUMA nodes");
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[1]["id"], 1);
    nodes[1]["id"] = json!(64);
    assert_eq!(wide_topology, expected);
    assert_eq!(wide_allocations, allocations);

    let expected: Vec<String> = {
        let mut lines: Vec<String> = metrics
            .iter()
            .map(|line| line.replace("numa_node=\"1\"", "numa_node=\"64\""))
            .collect();
        lines.sort();
        lines
    };
    assert!(
        wide_metrics.iter().any(|line| line.contains("numa_node=\"64\"")),
        "{wide_metrics:?}"
    );
    assert_eq!(wide_metrics, expected);
}
