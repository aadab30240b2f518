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

/// A `hand-numa-nodes-72-*` vector of release 1.37 (72 NUMA nodes, ids
/// 0-71, past the kubelet's 64-bit masks): its node (machine and kubelet
/// blocks), events and the oracle's (the real kubelet's) answer.
fn wide_vector(name: &str) -> (topoalign_nrt::NodeSpec, Vec<Value>, Value) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/conformance/1.37");
    let read = |kind: &str| -> Value {
        let path = root.join(kind).join(format!("hand-numa-nodes-72-{name}.json"));
        serde_json::from_str(&std::fs::read_to_string(path).expect("the vector")).expect("JSON")
    };
    let scenario = read("scenarios");
    let spec = serde_json::from_value(json!({"topology": scenario["topology"], "kubelet": scenario["kubelet"]}))
        .expect("a node spec");
    let events = scenario["events"].as_array().expect("events").clone();
    (spec, events, read("expected"))
}

/// An agent on `spec`'s node.
fn agent_on(spec: &topoalign_nrt::NodeSpec, dir: &std::path::Path) -> NodeAgent {
    let machine = topoalign_nrt::start_node(spec)
        .expect("the kubelet starts")
        .machine()
        .clone();
    let config = topoalign_k8s::node_config_from_value(&spec.kubelet, &machine).expect("a valid configuration");
    let (ledger, recovery) = Ledger::open(dir, machine, config).expect("a ledger");
    let procfs = Procfs::default();
    NodeAgent::new(
        ledger,
        &recovery,
        Enforcement::choose(false, false, "unused", &procfs),
        procfs,
    )
}

/// The agent on a machine of 72 NUMA nodes under topology policy none
/// (which its kubelet runs): the vectors' pods up to the restart, each
/// admitted where the real kubelet admitted it, on the CPUs and devices it
/// gave, refused with its reason where it refused (the oracle's answers);
/// deletions release. Its topology document and metrics name all 72
/// NUMA nodes by their ids. With the Static memory manager, a Guaranteed
/// pod that reaches the memory manager meets the kubelet's crash (reason
/// KubeletPanic), never an admission.
#[test]
fn a_machine_of_72_numa_nodes_is_served_as_its_kubelet_runs_it() {
    for name in ["memory-none", "static-memory", "cpu-none"] {
        let (spec, events, expected) = wide_vector(name);
        let dir = tempfile::tempdir().expect("a temporary directory");
        let mut agent = agent_on(&spec, dir.path());
        let results = expected["results"].as_array().expect("results");
        let mut ids = std::collections::BTreeMap::new();
        let mut compared = 0;
        for (index, event) in events.iter().enumerate() {
            let at = format!("{name}: event {index}");
            let oracle = &results[index];
            if let Some(key) = event["delete"].as_str() {
                let id: String = ids.remove(key).expect("deleting an admitted pod");
                agent.release(&id).expect("released");
                continue;
            }
            let Some(manifest) = event.get("add") else {
                // The restart: the rest is the journal's business.
                break;
            };
            let body = serde_json::to_vec(manifest).expect("JSON");
            let workload = read_body(&body, false, &AdmitOptions::default()).expect("a valid request");
            let response = agent.admit(&workload).expect("answered");
            assert_eq!(response.admitted, oracle["admitted"] == true, "{at}: {response:?}");
            if !response.admitted {
                assert_eq!(response.reason.as_deref(), oracle["reason"].as_str(), "{at}");
                assert_eq!(response.message.as_deref(), oracle["message"].as_str(), "{at}");
                continue;
            }
            let allocation = response.allocation.expect("an allocation");
            ids.insert(oracle["pod"].as_str().expect("a pod").to_owned(), allocation.id.clone());
            let containers = oracle["containers"].as_array().expect("containers");
            if let [only] = containers.as_slice() {
                // One container: its CPUs and devices are the allocation's.
                match only["cpus"].as_str() {
                    Some(cpus) => {
                        assert!(allocation.exclusive, "{at}");
                        assert_eq!(allocation.cpus.to_string(), cpus, "{at}");
                    }
                    None => assert!(!allocation.exclusive, "{at}"),
                }
                let devices: std::collections::BTreeMap<String, Vec<String>> =
                    serde_json::from_value(only.get("devices").cloned().unwrap_or(json!({}))).expect("devices");
                assert_eq!(allocation.devices, devices, "{at}");
                compared += 1;
            }
        }
        assert!(compared > 1, "{name}");

        let topology = serde_json::to_value(agent.topology()).expect("JSON");
        let nodes: Vec<&Value> = topology["numaNodes"].as_array().expect("NUMA nodes").iter().collect();
        let own: Vec<Value> = spec.topology.numa_nodes.iter().map(|n| json!(n.id)).collect();
        assert_eq!(nodes.iter().map(|n| n["id"].clone()).collect::<Vec<_>>(), own, "{name}");
        let metrics = agent.metrics_text();
        assert!(metrics.contains("numa_node=\"71\""), "{name}");

        // The journal read again (the agent restarted) gives the same
        // allocations on the same machine.
        let before = serde_json::to_value(agent.allocations()).expect("JSON");
        drop(agent);
        let mut agent = agent_on(&spec, dir.path());
        assert_eq!(
            serde_json::to_value(agent.allocations()).expect("JSON"),
            before,
            "{name}"
        );

        if name == "static-memory" {
            let body = br#"{"cpus": 2, "memory": "1Gi"}"#;
            let workload = read_body(body, false, &AdmitOptions::default()).expect("a valid request");
            let response = agent.admit(&workload).expect("answered");
            assert!(!response.admitted, "{response:?}");
            assert_eq!(response.reason.as_deref(), Some("KubeletPanic"));
            let message = response.message.unwrap_or_default();
            assert!(message.contains("Static memory manager"), "{message}");
        }
    }
}

/// Under another topology policy the kubelet refuses to start on 72 NUMA
/// nodes (`max-allowable-numa-nodes`, 8 by default: the oracle's answer
/// for the best-effort vector), and so does the agent's node; with the
/// option raised it starts, and every admission meets the kubelet's crash
/// (reason KubeletPanic).
#[test]
fn under_another_policy_a_machine_of_72_numa_nodes_is_refused_or_crashes() {
    let (mut spec, _, expected) = wide_vector("best-effort");
    let error = topoalign_nrt::start_node(&spec).expect_err("refused").to_string();
    let refusal = expected["error"].as_str().expect("the oracle's refusal");
    assert!(error.contains(refusal), "{error} / oracle: {refusal}");

    spec.kubelet["topologyManagerPolicyOptions"] = json!({"max-allowable-numa-nodes": "72"});
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut agent = agent_on(&spec, dir.path());
    for body in [&br#"{"cpus": 2, "memory": "1Gi"}"#[..], br#"{"cpus": "500m"}"#] {
        let workload = read_body(body, false, &AdmitOptions::default()).expect("a valid request");
        let response = agent.admit(&workload).expect("answered");
        assert!(!response.admitted, "{response:?}");
        assert_eq!(response.reason.as_deref(), Some("KubeletPanic"));
    }
    assert!(agent.allocations().is_empty());
}
