//! The NRT objects topoalign writes validate against the upstream CRD
//! schema shipped in `deploy/` (version v1alpha2), and the validator
//! catches objects that would not.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use serde_json::{Value, json};
use topoalign_nrt::{BuildOptions, NodeSpec, build, schema, start_node};

fn crd_schema() -> Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/noderesourcetopology-crd.yaml");
    schema::crd_schema(&std::fs::read_to_string(path).unwrap(), "v1alpha2").unwrap()
}

/// `numa` NUMA nodes × 4 cores × 2 threads, 16Gi each (2Gi of it in 1Gi
/// huge pages when `hugepages`), one GPU per NUMA node when `gpus`.
fn spec(numa: u32, hugepages: bool, gpus: bool, kubelet: Value) -> NodeSpec {
    let cpus: Vec<Value> = (0..numa * 8)
        .map(|id| {
            let core = id % (numa * 4);
            json!({"id": id, "core": core, "socket": core / 4, "numa": core / 4})
        })
        .collect();
    let numa_nodes: Vec<Value> = (0..numa)
        .map(|n| {
            let distances: Vec<u32> = (0..numa).map(|m| if m == n { 10 } else { 20 }).collect();
            let mut node = json!({"id": n, "memory": "16Gi", "distances": distances});
            if hugepages {
                node["hugepages-1Gi"] = json!("2Gi");
            }
            node
        })
        .collect();
    let mut topology = json!({"numaNodes": numa_nodes, "cpus": cpus});
    if gpus {
        let devices: Vec<Value> = (0..numa)
            .map(|n| json!({"id": format!("gpu{n}"), "numa": [n]}))
            .collect();
        topology["devices"] = json!({"nvidia.com/gpu": devices});
    }
    serde_json::from_value(json!({"topology": topology, "kubelet": kubelet})).unwrap()
}

fn pod(name: &str, limits: Value) -> topoalign_model::Pod {
    topoalign_k8s::pod_from_value(
        &json!({"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}),
        &format!("uid-{name}"),
    )
    .unwrap()
}

#[test]
fn objects_of_every_kind_of_node_validate_against_the_crd() {
    let schema = crd_schema();
    let static_kubelet = json!({
        "topologyManagerPolicy": "single-numa-node", "topologyManagerScope": "pod",
        "cpuManagerPolicy": "static", "memoryManagerPolicy": "Static", "reservedSystemCPUs": "0",
        "systemReserved": {"memory": "1Gi"}, "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]
    });
    let cases = [
        ("plain", spec(1, false, false, json!({}))),
        ("static", spec(2, true, true, static_kubelet.clone())),
        (
            "four-numa",
            spec(
                4,
                false,
                true,
                json!({"topologyManagerPolicy": "restricted", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0-1"}),
            ),
        ),
    ];
    for (name, spec) in cases {
        let mut node = start_node(&spec).unwrap();
        node.admit(pod("a", json!({"cpu": "2", "memory": "2Gi"})));
        node.admit(pod("b", json!({"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"})));
        for exact in [None, Some(&spec)] {
            let object = build(name, &node, BuildOptions { exact_state: exact });
            let value = serde_json::to_value(&object).unwrap();
            assert_eq!(
                schema::validate(&schema, &value),
                Vec::<String>::new(),
                "{name}: {value:#}"
            );
            // What a YAML round trip (kubectl apply -f) gives back validates too.
            let yaml = serde_yaml_ng::to_string(&object).unwrap();
            let back: Value = serde_yaml_ng::from_str(&yaml).unwrap();
            assert_eq!(schema::validate(&schema, &back), Vec::<String>::new());
        }
    }
}

#[test]
fn zones_hold_what_the_engine_holds() {
    let spec = spec(
        2,
        true,
        true,
        json!({"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static", "memoryManagerPolicy": "Static",
               "reservedSystemCPUs": "0", "systemReserved": {"memory": "1Gi"},
               "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]}),
    );
    let mut node = start_node(&spec).unwrap();
    assert!(
        node.admit(pod("gpu", json!({"cpu": "4", "memory": "4Gi", "nvidia.com/gpu": "1"})))
            .admitted()
    );
    let object = build("worker", &node, BuildOptions { exact_state: None });
    let value = serde_json::to_value(&object).unwrap();
    let zone = |i: usize| &value["zones"][i];
    let resource = |z: usize, name: &str| {
        zone(z)["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == name)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(zone(0)["name"], "node-0");
    assert_eq!(zone(0)["type"], "Node");
    assert_eq!(
        zone(0)["costs"],
        json!([{"name": "node-0", "value": 10}, {"name": "node-1", "value": 20}])
    );
    // NUMA 0: 8 CPUs, CPU 0 reserved; the pod went to NUMA 0 (the first that fits).
    assert_eq!(
        resource(0, "cpu"),
        json!({"name": "cpu", "capacity": "8", "allocatable": "7", "available": "3"})
    );
    assert_eq!(
        resource(1, "cpu"),
        json!({"name": "cpu", "capacity": "8", "allocatable": "8", "available": "8"})
    );
    assert_eq!(resource(0, "nvidia.com/gpu")["available"], "0");
    assert_eq!(resource(1, "nvidia.com/gpu")["available"], "1");
    // Memory: 16Gi, of which the 2Gi huge page pool and 1124Mi reserved on
    // NUMA 0 are not allocatable; 4Gi taken.
    assert_eq!(resource(0, "memory")["capacity"], "16Gi");
    assert_eq!(resource(0, "memory")["allocatable"], "13212Mi");
    assert_eq!(resource(0, "memory")["available"], "9116Mi");
    assert_eq!(resource(1, "hugepages-1Gi")["available"], "2Gi");
    assert_eq!(
        value["attributes"],
        json!([
            {"name": "topologyManagerPolicy", "value": "single-numa-node"},
            {"name": "topologyManagerScope", "value": "container"},
            // The pod fingerprint (tests/podfingerprint.rs checks the
            // function on the library's own vectors); a pod without a
            // namespace is in "default".
            {"name": "nodeTopologyPodsFingerprint", "value": topoalign_nrt::pods_fingerprint([("default", "gpu")])},
            {"name": "nodeTopologyPodsFingerprintMethod", "value": "all"}
        ])
    );
    assert_eq!(value["topologyPolicies"], json!(["SingleNUMANodeContainerLevel"]));
}

#[test]
fn the_validator_catches_what_the_api_server_would_refuse_or_drop() {
    let schema = crd_schema();
    let good = json!({
        "apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
        "metadata": {"name": "n"},
        "zones": [{"name": "node-0", "type": "Node",
                   "resources": [{"name": "cpu", "capacity": "8", "allocatable": 8, "available": "7"}]}]
    });
    assert_eq!(schema::validate(&schema, &good), Vec::<String>::new());
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut value = good.clone();
        edit(&mut value);
        schema::validate(&schema, &value)
    };
    assert_eq!(
        broken(&|v| {
            v["zones"][0].as_object_mut().unwrap().remove("type");
        }),
        ["zones[0]: required field type is missing"]
    );
    assert_eq!(
        broken(&|v| v["zones"][0]["resources"][0]["available"] = json!("lots")),
        [
            r#"zones[0].resources[0].available: "lots" does not match ^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"#
        ]
    );
    assert_eq!(
        broken(&|v| v["spec"] = json!({})),
        ["spec: not in the schema (the API server would drop it)"]
    );
    assert_eq!(
        broken(&|v| v["zones"][0]["costs"] = json!([{"name": "node-1", "value": "far"}])),
        [r#"zones[0].costs[0].value: expected integer, found "far""#]
    );
    assert_eq!(
        broken(&|v| v.as_object_mut().unwrap().clear()),
        ["<root>: required field zones is missing"]
    );
}
