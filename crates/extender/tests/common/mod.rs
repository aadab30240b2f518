//! The node and pods the cluster-model tests (`cluster.rs`, `sync.rs`)
//! share: one spec of a 2-NUMA, 16-CPU node with a GPU on NUMA 1, and
//! single-container pods read the way the extender reads them.

#![allow(dead_code, clippy::unwrap_used)] // each test file uses part of it; a panic is how a test reports failure

use serde_json::{Value, json};
use topoalign_extender::Cluster;
use topoalign_model::Pod;

/// Two NUMA nodes of 4 cores × 2 threads and 16Gi each, CPU 0 reserved,
/// one GPU on NUMA 1; single-numa-node, static CPU manager.
pub fn spec() -> topoalign_nrt::NodeSpec {
    let cpus: Vec<Value> = (0..16)
        .map(|id| {
            let core = id % 8;
            json!({"id": id, "core": core, "socket": core / 4, "numa": core / 4})
        })
        .collect();
    serde_json::from_value(json!({
        "topology": {
            "numaNodes": [{"id": 0, "memory": "16Gi"}, {"id": 1, "memory": "16Gi"}],
            "cpus": cpus,
            "devices": {"nvidia.com/gpu": [{"id": "gpu0", "numa": [1]}]}
        },
        "kubelet": {"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}
    }))
    .unwrap()
}

/// A pod named `name` with uid `uid`: one container limited to `cpu`,
/// 2Gi and `gpus` GPUs (Guaranteed).
pub fn pod(name: &str, uid: &str, cpu: &str, gpus: u32) -> Pod {
    let mut limits = json!({"cpu": cpu, "memory": "2Gi"});
    if gpus > 0 {
        limits["nvidia.com/gpu"] = json!(gpus.to_string());
    }
    let manifest = json!({"metadata": {"name": name, "uid": uid},
        "spec": {"containers": [{"name": "app", "resources": {"limits": limits}}]}});
    Cluster::read_pod(&manifest).unwrap()
}
