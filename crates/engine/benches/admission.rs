//! A pod-scope admission onto an empty node — one container with 2 CPUs,
//! 1Gi and one GPU; each NUMA node has 4 cores (2 threads each), 16Gi and
//! one GPU; static CPU and memory managers — under single-numa-node,
//! restricted and best-effort, on machines of 1 to 64 NUMA nodes. The
//! kubelet's permutation merge runs beside the fast merge where it can.
//!
//! For reference, the real kubelet on this setup and this kind of machine:
//! ~150 µs per admission at 2 NUMA nodes; 3.5 ms (single-numa-node) and 9 s
//! (restricted / best-effort) at 8; 2 s (single-numa-node) at 16.

use std::collections::BTreeMap;
use std::hint::black_box;

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use topoalign_engine::{
    CpuPolicyName, MemoryPolicyName, MergeStrategy, Node, NodeConfig, ReservedMemory, TopologyPolicyName, TopologyScope,
};
use topoalign_model::{Container, Cpu, Device, Machine, NumaNode, Pod, QosClass, Quantity, ResourceList};

const GI: i128 = 1 << 30;
const MI: i128 = 1 << 20;

fn machine(numa_nodes: usize) -> Machine {
    let nodes = (0..numa_nodes)
        .map(|id| NumaNode {
            id,
            memory: 16 << 30,
            hugepages: BTreeMap::new(),
            distances: Some((0..numa_nodes).map(|o| if o == id { 10 } else { 20 }).collect()),
        })
        .collect();
    let cores_per_node = 4;
    let threads = numa_nodes * cores_per_node;
    let cpus = (0..threads * 2)
        .map(|id| {
            let core = id % threads;
            let numa = core / cores_per_node;
            Cpu {
                id: id as u32,
                core: core as u32,
                socket: numa as u32,
                numa,
                uncore_cache: None,
            }
        })
        .collect();
    let gpus = (0..numa_nodes)
        .map(|n| Device {
            id: format!("gpu{n}"),
            numa: vec![n],
        })
        .collect();
    Machine::new(nodes, cpus, BTreeMap::from([("nvidia.com/gpu".to_string(), gpus)])).expect("valid machine")
}

fn config(policy: TopologyPolicyName, numa_nodes: usize) -> NodeConfig {
    let list =
        |pairs: &[(&str, Quantity)]| -> ResourceList { pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect() };
    NodeConfig {
        topology_policy: policy,
        topology_scope: TopologyScope::Pod,
        topology_options: BTreeMap::from([("max-allowable-numa-nodes".to_string(), numa_nodes.max(8).to_string())]),
        cpu_policy: CpuPolicyName::Static,
        memory_policy: MemoryPolicyName::Static,
        system_reserved: list(&[("cpu", Quantity::from_units(1)), ("memory", Quantity::from_units(GI))]),
        hard_eviction: list(&[("memory", Quantity::from_units(100 * MI))]),
        reserved_memory: vec![ReservedMemory {
            numa_node: 0,
            limits: list(&[("memory", Quantity::from_units(GI + 100 * MI))]),
        }],
        ..NodeConfig::default()
    }
}

fn pod() -> Pod {
    let resources: ResourceList = [
        ("cpu".to_string(), Quantity::from_units(2)),
        ("memory".to_string(), Quantity::from_units(GI)),
        ("nvidia.com/gpu".to_string(), Quantity::from_units(1)),
    ]
    .into_iter()
    .collect();
    Pod {
        namespace: "default".into(),
        name: "bench".into(),
        uid: "bench-uid".into(),
        qos: QosClass::Guaranteed,
        init_containers: Vec::new(),
        containers: vec![Container {
            name: "app".into(),
            requests: resources.clone(),
            limits: resources,
            restartable: false,
        }],
        overhead: ResourceList::new(),
        pod_resources: None,
    }
}

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
