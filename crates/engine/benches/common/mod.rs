//! The benchmarks' node and pod, shared by `benches/admission.rs` and
//! `examples/one_admission.rs` (the callgrind target): one container with 2
//! CPUs, 1Gi and one GPU; each NUMA node has 4 cores (2 threads each), 16Gi
//! and one GPU; static CPU and memory managers; pod scope.

use std::collections::BTreeMap;

use topoalign_engine::{
    CpuPolicyName, MemoryPolicyName, NodeConfig, ReservedMemory, TopologyPolicyName, TopologyScope,
};
use topoalign_model::{Container, Cpu, Device, Machine, NumaNode, Pod, QosClass, Quantity, ResourceList};

const GI: i128 = 1 << 30;
const MI: i128 = 1 << 20;

pub fn machine(numa_nodes: usize) -> Machine {
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

pub fn config(policy: TopologyPolicyName, numa_nodes: usize) -> NodeConfig {
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

pub fn pod() -> Pod {
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
