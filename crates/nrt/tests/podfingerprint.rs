//! The pod-set fingerprint of NRT objects: the same string the
//! podfingerprint library (which scheduler-plugins' cache checks objects
//! with) computes, on vectors that library printed (tests/data/README.md),
//! and on the objects `build` makes, the fingerprint of the pods the node
//! holds — admitted ones, not the refused, and none once they are removed.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use serde::Deserialize;
use serde_json::json;
use topoalign_model::UniformMachine;
use topoalign_nrt::{
    BuildOptions, FINGERPRINT_ATTRIBUTE, FINGERPRINT_METHOD_ALL, FINGERPRINT_METHOD_ATTRIBUTE, NodeResourceTopology,
    NodeSpec, build, pods_fingerprint, start_node,
};
use topoalign_scenario::TopologySpec;

#[derive(Deserialize)]
struct Vector {
    pods: Vec<(String, String)>,
    fingerprint: String,
}

#[test]
fn the_librarys_vectors() {
    let text = include_str!("data/podfingerprint-v001.json");
    let vectors: Vec<Vector> = serde_json::from_str(text).unwrap();
    assert!(vectors.len() >= 10, "the vectors file holds {} sets", vectors.len());
    for vector in &vectors {
        let ours = pods_fingerprint(vector.pods.iter().map(|(ns, name)| (ns.as_str(), name.as_str())));
        assert_eq!(ours, vector.fingerprint, "pods {:?}", vector.pods);
    }
}

fn attribute<'a>(object: &'a NodeResourceTopology, name: &str) -> &'a str {
    object
        .attributes
        .iter()
        .find(|a| a.name == name)
        .map(|a| a.value.as_str())
        .unwrap_or_else(|| panic!("no attribute {name}"))
}

#[test]
fn objects_carry_the_fingerprint_of_the_pods_the_node_holds() {
    let machine = UniformMachine::new(2, 4).memory_per_numa(16 << 30).build().unwrap();
    let spec = NodeSpec {
        topology: TopologySpec::from_machine(&machine),
        kubelet: json!({"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}),
    };
    let pod = |name: &str, cpu: &str| {
        topoalign_k8s::pod_from_value(
            &json!({"metadata": {"name": name, "namespace": "team"},
                    "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": cpu, "memory": "1Gi"}}}]}}),
            &format!("uid-{name}"),
        )
        .unwrap()
    };
    let fingerprint = |node: &topoalign_engine::Node| {
        let object = build("w", node, BuildOptions { exact_state: None });
        assert_eq!(attribute(&object, FINGERPRINT_METHOD_ATTRIBUTE), FINGERPRINT_METHOD_ALL);
        attribute(&object, FINGERPRINT_ATTRIBUTE).to_owned()
    };
    let mut node = start_node(&spec).unwrap();
    assert_eq!(fingerprint(&node), pods_fingerprint([]));
    assert!(node.admit(pod("a", "3")).admitted());
    assert!(node.admit(pod("b", "1")).admitted());
    // Five CPUs fit no NUMA node of four: refused, so not held.
    assert!(!node.admit(pod("c", "5")).admitted());
    assert_eq!(fingerprint(&node), pods_fingerprint([("team", "b"), ("team", "a")]));
    assert!(node.remove("uid-a"));
    assert_eq!(fingerprint(&node), pods_fingerprint([("team", "b")]));
}
