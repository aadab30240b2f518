//! The object of `bench/follower.sh`'s node, shared by `benches/restore.rs`
//! and `examples/restore_once.rs`: a 256-CPU, 8-NUMA node (16 GPUs, 1Gi
//! huge pages, static CPU and memory managers, restricted policy) holding
//! 200 pods after 100 changes (deletes and adds), published with its exact
//! state — what the kubelet follower publishes and the extender restores
//! at start, 5,000 times for a large cluster.

use serde_json::{Value, json};
use topoalign_extender::Cluster;
use topoalign_nrt::{BuildOptions, NodeResourceTopology, NodeSpec};

/// `crates/cli/tests/follower_bench.rs`'s machine and kubelet blocks.
fn spec() -> NodeSpec {
    let numa: Vec<Value> = (0..8)
        .map(|n| {
            let distances: Vec<u32> = (0..8).map(|m| if m == n { 10 } else { 21 }).collect();
            json!({"id": n, "memory": "64Gi", "distances": distances, "hugepages-1Gi": "8Gi"})
        })
        .collect();
    let cpus: Vec<Value> = (0..256)
        .map(|id| {
            let core = id % 128;
            json!({"id": id, "core": core, "socket": core / 64, "numa": core / 16})
        })
        .collect();
    let gpus: Vec<Value> = (0..16)
        .map(|i| json!({"id": format!("gpu{i}"), "numa": [i / 2]}))
        .collect();
    serde_json::from_value(json!({
        "topology": {"numaNodes": numa, "cpus": cpus, "devices": {"nvidia.com/gpu": gpus}},
        "kubelet": {
            "topologyManagerPolicy": "restricted",
            "cpuManagerPolicy": "static",
            "memoryManagerPolicy": "Static",
            "reservedSystemCPUs": "0,128",
            "maxPods": 256,
            "systemReserved": {"memory": "1Gi"},
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}],
        },
    }))
    .expect("a valid node spec")
}

/// The follower bench's pods: guaranteed pods of 1 CPU and 1Gi (every
/// 25th with a GPU, every 10th with a 1Gi huge page), every 4th a
/// burstable one.
fn pod(index: usize) -> topoalign_model::Pod {
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
    let manifest = json!({
        "metadata": {"name": format!("p{index:05}"), "namespace": "default",
            "uid": format!("00000000-0000-0000-0000-{index:012}")},
        "spec": {"containers": [{"name": "app", "image": "x", "resources": resources}]},
    });
    Cluster::read_pod(&manifest).expect("a valid pod")
}

/// The node's NRT object, named `name`, with its exact state.
pub fn object(name: &str, pods: usize) -> NodeResourceTopology {
    let spec = spec();
    let mut node = topoalign_nrt::start_node(&spec).expect("the node starts");
    let mut running = Vec::new();
    let mut next = 1;
    while running.len() < pods {
        let pod = pod(next);
        if node.admit(pod.clone()).admitted() {
            running.push(pod.uid);
        }
        next += 1;
        assert!(next < 4 * pods + 10, "the node refuses most pods");
    }
    for i in 0..100 {
        if i % 2 == 0 {
            let uid = running.remove((i * 7919) % running.len());
            node.remove(&uid);
        } else {
            let pod = pod(next);
            next += 1;
            if node.admit(pod.clone()).admitted() {
                running.push(pod.uid);
            }
        }
    }
    topoalign_nrt::build(
        name,
        &node,
        BuildOptions {
            exact_state: Some(&spec),
        },
    )
}
