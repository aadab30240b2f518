//! The follower benchmark's node and pods, defined once: `bench/follower.sh`
//! (`crates/cli/tests/follower_bench.rs`), the extender's restore benchmark
//! (`crates/extender/benches/followed`) and the follower's profiling
//! example (`crates/follow/examples/follow_once.rs`) all use them.
//!
//! The node is `examples/nodes/256-cpu-8-numa.yaml`: 256 CPUs on 8 NUMA
//! nodes, 16 GPUs, 1Gi huge pages, static CPU and memory managers,
//! restricted policy, room for 256 pods.

use serde_json::{Value, json};

/// The node file's path, from the workspace root.
pub const NODE_FILE: &str = "examples/nodes/256-cpu-8-numa.yaml";

/// The node file's text.
pub const NODE_YAML: &str = include_str!("../../../examples/nodes/256-cpu-8-numa.yaml");

/// The node: `{"topology": …, "kubelet": …}`.
///
/// # Panics
/// Never: the file is part of the source, and a test reads it.
pub fn node() -> Value {
    #[allow(clippy::expect_used, reason = "the file is part of the source; a test reads it")]
    serde_yaml_ng::from_str(NODE_YAML).expect("examples/nodes/256-cpu-8-numa.yaml is valid YAML")
}

/// Pod `index` of the benchmark, a Pod manifest bound to the node:
/// guaranteed pods of 1 CPU and 1Gi (every 25th with a GPU, every 10th
/// with a 1Gi huge page), every 4th a burstable one of 200m and 256Mi;
/// created one second after the other, in index order.
pub fn pod(index: usize) -> Value {
    let resources = if index % 4 == 3 {
        json!({"requests": {"cpu": "200m", "memory": "256Mi"}})
    } else {
        let mut r = json!({"cpu": "1", "memory": "1Gi"});
        if index.is_multiple_of(25) {
            r["nvidia.com/gpu"] = json!("1");
        }
        if index % 10 == 1 {
            r["hugepages-1Gi"] = json!("1Gi");
        }
        json!({"requests": r, "limits": r})
    };
    json!({
        "metadata": {
            "name": format!("p{index:05}"), "namespace": "default",
            "uid": uid(index),
            "creationTimestamp": format!("2026-01-01T{:02}:{:02}:{:02}Z", index / 3600, index / 60 % 60, index % 60),
        },
        "spec": {"containers": [{"name": "app", "image": "x", "resources": resources}]},
    })
}

/// Pod `index`'s uid.
pub fn uid(index: usize) -> String {
    format!("00000000-0000-0000-0000-{index:012}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_node_file_starts_the_node_it_describes() {
        let node = super::node();
        let spec: topoalign_nrt::NodeSpec = serde_json::from_value(node).unwrap_or_else(|e| panic!("{e}"));
        let started = topoalign_nrt::start_node(&spec).unwrap_or_else(|e| panic!("{e}"));
        let machine = started.machine();
        assert_eq!(machine.cpus().len(), 256);
        assert_eq!(machine.numa_nodes().len(), 8);
        assert_eq!(machine.devices()["nvidia.com/gpu"].len(), 16);
        assert_eq!(started.config().max_pods, 256);
    }
}
