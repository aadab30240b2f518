//! A pod-scope admission onto an empty node — one container with 2 CPUs,
//! 1Gi and one GPU; each NUMA node has 4 cores (2 threads each), 16Gi and
//! one GPU; static CPU and memory managers — under single-numa-node,
//! restricted and best-effort, on machines of 1 to 64 NUMA nodes. The
//! kubelet's permutation merge runs beside the fast merge where it can.
//!
//! The real kubelet's cost on the same node, pod and configuration is
//! measured beside these figures, in the same run, by `bench/speed.sh`
//! (`oracle bench`, oracle/bench.go: the v1.37 kubelet code at 1–16 NUMA
//! nodes), which prints the ratio per policy and size.

mod common;

use std::hint::black_box;

use common::{config, machine, pod};
use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use topoalign_engine::{MergeStrategy, Node, TopologyPolicyName};
use topoalign_model::Pod;

/// One admission. The node is handed back so that dropping it (and its
/// clone made in the setup) stays outside the measured time.
fn admit((mut node, pod): (Node, Pod)) -> (Node, topoalign_engine::Decision) {
    let decision = node.admit(pod);
    (node, black_box(decision))
}

fn admission(c: &mut Criterion) {
    let policies = [
        TopologyPolicyName::SingleNumaNode,
        TopologyPolicyName::Restricted,
        TopologyPolicyName::BestEffort,
    ];
    for policy in policies {
        let name = policy.as_str();
        let mut group = c.benchmark_group(format!("admit/{name}"));
        for numa_nodes in [1, 2, 4, 8, 16, 32, 64] {
            let Ok(node) = Node::start(machine(numa_nodes), config(policy, numa_nodes)) else {
                eprintln!("skipping {name} at {numa_nodes} NUMA nodes: the node does not start");
                continue;
            };
            let pod = pod();
            group.bench_with_input(BenchmarkId::new("fast", numa_nodes), &numa_nodes, |b, _| {
                b.iter_batched(|| (node.clone(), pod.clone()), admit, BatchSize::SmallInput)
            });
            // The permutation fold is exponential: run it only where it
            // finishes in reasonable time.
            let feasible = match policy {
                TopologyPolicyName::SingleNumaNode => numa_nodes <= 16,
                _ => numa_nodes <= 4,
            };
            if feasible {
                let mut reference = node.clone();
                reference.set_merge_strategy(MergeStrategy::KubeletPermutations);
                group.bench_with_input(
                    BenchmarkId::new("kubelet-permutations", numa_nodes),
                    &numa_nodes,
                    |b, _| b.iter_batched(|| (reference.clone(), pod.clone()), admit, BatchSize::SmallInput),
                );
            }
        }
        group.finish();
    }
}

/// Copying a node holding a few pods: what the extender pays per trial
/// admission on top of the admission itself.
fn clone(c: &mut Criterion) {
    let mut group = c.benchmark_group("clone");
    for numa_nodes in [2, 4] {
        let Ok(mut node) = Node::start(
            machine(numa_nodes),
            config(TopologyPolicyName::SingleNumaNode, numa_nodes),
        ) else {
            continue;
        };
        for i in 0..3 {
            let mut pod = pod();
            pod.uid = format!("held-{i}");
            pod.name = format!("held-{i}");
            node.admit(pod);
        }
        group.bench_with_input(BenchmarkId::new("node with 3 pods", numa_nodes), &numa_nodes, |b, _| {
            b.iter(|| black_box(node.clone()))
        });
    }
    group.finish();
}

criterion_group!(benches, admission, clone);
criterion_main!(benches);
