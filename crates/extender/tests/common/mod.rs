//! The node and pods the cluster-model tests (`cluster.rs`, `sync.rs`)
//! share: one spec of a 2-NUMA, 16-CPU node with a GPU on NUMA 1, and
//! single-container pods read the way the extender reads them.

#![allow(dead_code, clippy::unwrap_used)] // each test file uses part of it; a panic is how a test reports failure

use serde_json::json;
use topoalign_extender::Cluster;
use topoalign_model::{Pod, UniformMachine};
use topoalign_nrt::NodeSpec;
use topoalign_scenario::TopologySpec;

/// Two NUMA nodes of 4 cores × 2 threads and 16Gi each, one GPU on the
/// second NUMA node: [`spec`]'s machine.
pub fn machine() -> UniformMachine {
    UniformMachine::new(2, 4)
        .threads_per_core(2)
        .sockets(2)
        .memory_per_numa(16 << 30)
        .device("nvidia.com/gpu", "gpu0", &[1])
}

/// Two NUMA nodes of 4 cores × 2 threads and 16Gi each, CPU 0 reserved,
/// one GPU on NUMA 1; single-numa-node, static CPU manager.
pub fn spec() -> NodeSpec {
    let machine = machine().build().unwrap();
    NodeSpec {
        topology: TopologySpec::from_machine(&machine),
        kubelet: json!({"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}),
    }
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
