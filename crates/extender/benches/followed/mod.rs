//! The object of `bench/follower.sh`'s node, shared by `benches/restore.rs`
//! and `examples/restore_once.rs`: `topoalign_simnodes::bench`'s node — 256
//! CPUs on 8 NUMA nodes, 16 GPUs, 1Gi huge pages, static CPU and memory
//! managers, restricted policy — holding 200 of its pods after 100 changes
//! (deletes and adds), published with its exact state — what the kubelet
//! follower publishes and the extender restores at start, 5,000 times for
//! a large cluster.

use topoalign_extender::Cluster;
use topoalign_nrt::{BuildOptions, NodeResourceTopology, NodeSpec};
use topoalign_simnodes::bench;

/// The follower bench's node (`examples/nodes/256-cpu-8-numa.yaml`).
fn spec() -> NodeSpec {
    serde_json::from_value(bench::node()).expect("a valid node spec")
}

/// The follower bench's pod `index`.
fn pod(index: usize) -> topoalign_model::Pod {
    Cluster::read_pod(&bench::pod(index)).expect("a valid pod")
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
