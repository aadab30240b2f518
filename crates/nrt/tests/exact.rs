//! The exact-state attributes: a node rebuilt from its NRT object is the
//! node, whatever history of admissions and deletions led to it.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use serde_json::json;
use topoalign_model::UniformMachine;
use topoalign_nrt::{BuildOptions, NodeSpec, build, restore, start_node};
use topoalign_scenario::TopologySpec;

fn spec() -> NodeSpec {
    let machine = UniformMachine::new(2, 4)
        .threads_per_core(2)
        .sockets(2)
        .memory_per_numa(16 << 30)
        .device("example.com/nic", "nic0", &[0])
        .device("example.com/nic", "nic1", &[1])
        .build()
        .unwrap();
    NodeSpec {
        topology: TopologySpec::from_machine(&machine),
        kubelet: json!({"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static",
                    "memoryManagerPolicy": "Static", "reservedSystemCPUs": "0",
                    "systemReserved": {"memory": "1Gi"},
                    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]}),
    }
}

fn pod(name: &str, cpu: &str, nic: bool) -> topoalign_model::Pod {
    let mut limits = json!({"cpu": cpu, "memory": "1Gi"});
    if nic {
        limits["example.com/nic"] = json!("1");
    }
    topoalign_k8s::pod_from_value(
        &json!({"metadata": {"name": name, "namespace": "team"},
                "spec": {"initContainers": [{"name": "init", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}],
                         "containers": [{"name": "app", "resources": {"limits": limits}}]}}),
        &format!("uid-{name}"),
    )
    .unwrap()
}

#[test]
fn a_node_without_deletions_is_rebuilt_exactly() {
    let spec = spec();
    let mut node = start_node(&spec).unwrap();
    for (name, cpu, nic) in [("a", "2", true), ("b", "3", false), ("c", "1", false)] {
        let decision = node.admit(pod(name, cpu, nic));
        assert!(decision.admitted(), "{name}: {:?}", decision.rejection);
    }
    let object = build(
        "w",
        &node,
        BuildOptions {
            exact_state: Some(&spec),
        },
    );
    // Through JSON, as it travels.
    let object: topoalign_nrt::NodeResourceTopology =
        serde_json::from_str(&serde_json::to_string(&object).unwrap()).unwrap();
    let rebuilt = restore(&object).unwrap();
    assert_eq!(rebuilt.node.state(), node.state());
    assert_eq!(rebuilt.node.devices_in_use(), node.devices_in_use());
    assert_eq!(
        rebuilt.pods.iter().map(|p| p.uid.as_str()).collect::<Vec<_>>(),
        ["uid-a", "uid-b", "uid-c"]
    );
}

/// Regression: the first format carried only the pods and admitted them
/// again; after a deletion that gave `b` the CPUs `a` had left.
#[test]
fn a_node_after_deletions_is_rebuilt_exactly() {
    let spec = spec();
    let mut node = start_node(&spec).unwrap();
    assert!(node.admit(pod("a", "2", false)).admitted());
    assert!(node.admit(pod("b", "2", false)).admitted());
    node.remove("uid-a");
    // c takes the CPUs a left; admitting b then c again gives b a's CPUs.
    assert!(node.admit(pod("c", "2", false)).admitted());
    let object = build(
        "w",
        &node,
        BuildOptions {
            exact_state: Some(&spec),
        },
    );
    let rebuilt = restore(&object).unwrap();
    assert_eq!(rebuilt.node.state(), node.state());
    assert_eq!(
        rebuilt.pods.iter().map(|p| p.uid.as_str()).collect::<Vec<_>>(),
        ["uid-b", "uid-c"]
    );
    // Admitting the same pods again in order does not give this node back.
    let mut readmitted = start_node(&spec).unwrap();
    for pod in rebuilt.pods {
        assert!(readmitted.admit(pod).admitted());
    }
    assert_ne!(readmitted.state(), node.state());
}

#[test]
fn missing_or_malformed_attributes_are_errors_that_say_which() {
    let spec = spec();
    let node = start_node(&spec).unwrap();
    let plain = build("w", &node, BuildOptions { exact_state: None });
    assert_eq!(
        restore(&plain).unwrap_err().to_string(),
        "attribute topoalign.io/node-spec is missing"
    );
    let mut bad = build(
        "w",
        &node,
        BuildOptions {
            exact_state: Some(&spec),
        },
    );
    for attribute in &mut bad.attributes {
        if attribute.name == topoalign_nrt::exact::STATE_ATTRIBUTE {
            attribute.value = "{\"pods\": [{\"namespace\": 1}]}".into();
        }
    }
    assert!(
        restore(&bad)
            .unwrap_err()
            .to_string()
            .starts_with("attribute topoalign.io/state: invalid type")
    );
}

/// The object of a large, busy node stays well inside what the API server
/// stores (etcd's default request limit is 1.5 MiB): 256 CPUs on 8 NUMA
/// nodes, 200 pods with exclusive CPUs and pinned memory.
#[test]
fn a_large_busy_node_fits_the_api_servers_limits() {
    let cpus: Vec<_> = (0..256)
        .map(|id| {
            let core = id % 128;
            json!({"id": id, "core": core, "socket": core / 64, "numa": core / 16})
        })
        .collect();
    let numa: Vec<_> = (0..8).map(|id| json!({"id": id, "memory": "64Gi"})).collect();
    let spec: NodeSpec = serde_json::from_value(json!({
        "topology": {"numaNodes": numa, "cpus": cpus},
        "kubelet": {"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static",
                    "memoryManagerPolicy": "Static", "reservedSystemCPUs": "0,128",
                    "systemReserved": {"memory": "1Gi"},
                    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}],
                    "maxPods": 250}
    }))
    .unwrap();
    let mut node = start_node(&spec).unwrap();
    for i in 0..200 {
        let pod = topoalign_k8s::pod_from_value(
            &json!({"metadata": {"name": format!("inference-worker-{i:04}"), "namespace": "production-serving"},
                    "spec": {"containers": [{"name": "server", "resources": {"limits": {"cpu": "1", "memory": "2Gi"}}}]}}),
            &format!("0b5f0c2e-4f6a-4d3b-9c1e-{i:012}"),
        )
        .unwrap();
        assert!(node.admit(pod).admitted(), "pod {i}");
    }
    let object = build(
        "big",
        &node,
        BuildOptions {
            exact_state: Some(&spec),
        },
    );
    let bytes = serde_json::to_vec(&object).unwrap().len();
    eprintln!("256 CPUs, 8 NUMA nodes, 200 pods: {bytes} bytes of JSON");
    assert!(bytes < 512 * 1024, "{bytes} bytes");
    assert_eq!(restore(&object).unwrap().node.state(), node.state());
}

/// The two readings of the state attribute — the owned record and the
/// view read in place, which the restore uses — give the same snapshot,
/// escaped strings included (a view borrows only what needs no
/// unescaping).
#[test]
fn the_state_reads_back_as_the_node_holds_it() {
    let spec = spec();
    let mut node = start_node(&spec).unwrap();
    assert!(node.admit(pod("a", "2", true)).admitted());
    assert!(node.admit(pod("b", "1", false)).admitted());
    assert!(node.admit(pod("c", "500m", false)).admitted());
    node.remove("uid-a");
    assert!(node.admit(pod("d", "3", true)).admitted());
    let object = build(
        "w",
        &node,
        BuildOptions {
            exact_state: Some(&spec),
        },
    );
    // The namespace written with an escape (`\u0061` is `a`): read
    // unescaped, not borrowed.
    let mut object = object;
    for attribute in &mut object.attributes {
        if attribute.name == topoalign_nrt::exact::STATE_ATTRIBUTE {
            assert!(attribute.value.contains("\"team\""));
            attribute.value = attribute.value.replace("\"team\"", "\"te\\u0061m\"");
        }
    }
    let view = topoalign_nrt::read_state(&object).unwrap().to_snapshot().unwrap();
    assert_eq!(view, node.snapshot());
    assert_eq!(restore(&object).unwrap().node.snapshot(), node.snapshot());
}

/// State the snapshot keeps for a pod it does not list (a pod the kubelet
/// deleted between writing its checkpoints) is released by the restore, as
/// the kubelet's stale-state collection releases it: the node is the one
/// without that pod.
#[test]
fn state_of_a_pod_not_listed_is_released() {
    let spec = spec();
    let mut node = start_node(&spec).unwrap();
    for (name, cpu, nic) in [("a", "2", false), ("b", "3", true), ("c", "1", false)] {
        let decision = node.admit(pod(name, cpu, nic));
        assert!(decision.admitted(), "{name}: {:?}", decision.rejection);
    }
    let mut snapshot = node.snapshot();
    snapshot.pods.retain(|p| p.uid != "uid-b");
    assert!(snapshot.cpu.assignments.contains_key("uid-b") && snapshot.devices.contains_key("uid-b"));
    let restored = start_node(&spec).unwrap().restored(snapshot).unwrap();
    assert!(node.remove("uid-b"));
    assert_eq!(restored.snapshot(), node.snapshot());
    assert_eq!(restored.devices_in_use(), node.devices_in_use());
}
