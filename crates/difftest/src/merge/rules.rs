//! Merge cases made by the engine's own hint providers from per-NUMA
//! numbers: a machine with CPUs, memory, huge page pools and devices on
//! 1-16 NUMA nodes, part of it taken by earlier pods, and a Guaranteed
//! container asking for CPUs, memory, huge pages and devices.
//!
//! The CPU manager's [`CpuHintRule`] (built directly), the memory manager's
//! and the device manager's rules (asked of the managers, as an admission
//! asks them) come back as `ResourceHints::Rule`: the engine merges the
//! rules — its candidate search, the path real admissions on big machines
//! take —, the kubelet the rules' lists (`to_list`, the kubelet's
//! `IterateBitMasks` order).

use std::collections::BTreeMap;

use topoalign_cpu_manager::{CpuHintRule, CpuTopology};
use topoalign_device_manager::DeviceManager;
use topoalign_memory_manager::{MemoryManager, MemoryManagerConfig, MemoryPolicyName, ReservedMemory};
use topoalign_model::{
    Container, Cpu, CpuSet, Device, KubeletVersion, Machine, NumaMask, NumaNode, Pod, ProviderHints, QosClass,
    Quantity, ResourceHints, ResourceList, TopologyHint,
};

use super::case::{Case, Hints, Provider};
use super::generate;
use crate::rng::Rng;

const MI: u64 = 1 << 20;
const GI: u64 = 1 << 30;
const GPU: &str = "example.com/gpu";
const NIC: &str = "example.com/nic";
/// What the memory manager's Static policy is started with: reserved on
/// the first node, as `systemReserved` says.
const RESERVED: u64 = 256 * MI;

/// A case of `seed` from the providers' rules.
pub fn case(seed: u64, rng: &mut Rng, version: KubeletVersion) -> Case {
    let nodes = numa_ids(rng);
    let distances = generate::distances(rng, &nodes);
    let max_allowable = generate::max_allowable(rng, nodes.len());
    let shape = Shape::draw(rng, &nodes);
    let machine = shape.machine();
    let mut providers = Vec::new();
    if rng.chance(75) {
        providers.push(cpu(rng, &shape, &machine));
    }
    if rng.chance(65) {
        providers.push(memory(rng, &shape, &machine, version));
    }
    if rng.chance(60) {
        providers.push(devices(rng, &shape, &machine, version));
    }
    // The kubelet's order is CPU, memory, devices; the merge must not care.
    if rng.chance(30) {
        rng.shuffle(&mut providers);
    }
    Case {
        id: seed,
        nodes,
        distances,
        max_allowable,
        providers,
        from_rules: true,
    }
}

/// 1-16 NUMA ids; big machines less often than in the explicit cases (a
/// rule's list there has up to 2^16 entries).
fn numa_ids(rng: &mut Rng) -> Vec<usize> {
    let n = match rng.below(100) {
        0..35 => rng.urange(1, 4),
        35..70 => rng.urange(5, 8),
        70..90 => rng.urange(9, 12),
        _ => rng.urange(13, 16),
    };
    if rng.chance(90) {
        return (0..n).collect();
    }
    let mut ids: Vec<usize> = (0..n + rng.urange(1, n)).collect();
    rng.shuffle(&mut ids);
    ids.truncate(n);
    ids.sort_unstable();
    ids
}

/// The machine by its per-NUMA numbers.
struct Shape {
    nodes: Vec<usize>,
    /// Cores per node (0: a memory-only node).
    cores: Vec<u32>,
    threads: u32,
    sockets: usize,
    /// Regular memory per node, and the 2Mi and 1Gi pools.
    memory: Vec<u64>,
    pages_2m: Vec<u64>,
    pages_1g: Vec<u64>,
    /// Devices: (resource, per node, devices without NUMA, devices on two nodes).
    devices: Vec<(&'static str, Vec<usize>, usize, usize)>,
}

impl Shape {
    fn draw(rng: &mut Rng, nodes: &[usize]) -> Shape {
        let n = nodes.len();
        // Big machines are often memory-expansion ones: a few nodes with
        // CPUs, the rest memory only.
        let cpu_nodes = if n > 4 && rng.chance(40) { rng.urange(1, 4) } else { n };
        let mut with_cpus: Vec<bool> = (0..n).map(|i| i < cpu_nodes).collect();
        rng.shuffle(&mut with_cpus);
        let cores = with_cpus
            .iter()
            .map(|&has| {
                if !has || rng.chance(5) {
                    0
                } else {
                    rng.range(1, 6) as u32
                }
            })
            .collect();
        let sockets = *rng.pick(&[1, 1, 2, 2, 4]);
        let memory = (0..n).map(|_| rng.range(1, 16) * GI).collect();
        let pages_2m = (0..n)
            .map(|_| if rng.chance(50) { rng.range(0, 2048) * 2 * MI } else { 0 })
            .collect();
        let pages_1g = (0..n)
            .map(|_| if rng.chance(30) { rng.range(0, 4) * GI } else { 0 })
            .collect();
        let mut devices = Vec::new();
        for resource in [GPU, NIC] {
            if rng.chance(70) {
                let spread = rng.range(20, 90);
                let per_node = (0..n)
                    .map(|_| if rng.below(100) < spread { rng.urange(1, 4) } else { 0 })
                    .collect();
                let unknown = if rng.chance(5) { rng.urange(1, 2) } else { 0 };
                let doubled = if n > 1 && rng.chance(5) { rng.urange(1, 2) } else { 0 };
                devices.push((resource, per_node, unknown, doubled));
            }
        }
        Shape {
            nodes: nodes.to_vec(),
            cores,
            threads: if rng.chance(50) { 2 } else { 1 },
            sockets: sockets.min(n),
            memory,
            pages_2m,
            pages_1g,
            devices,
        }
    }

    fn machine(&self) -> Machine {
        let n = self.nodes.len();
        let numa_nodes = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, &id)| {
                let mut hugepages = BTreeMap::new();
                if self.pages_2m[i] > 0 {
                    hugepages.insert(2 * MI, self.pages_2m[i]);
                }
                if self.pages_1g[i] > 0 {
                    hugepages.insert(GI, self.pages_1g[i]);
                }
                NumaNode {
                    id,
                    memory: self.memory[i] + self.pages_2m[i] + self.pages_1g[i],
                    hugepages,
                    distances: None,
                }
            })
            .collect();
        let mut cpus = Vec::new();
        let mut core = 0;
        for (i, &id) in self.nodes.iter().enumerate() {
            let socket = (i * self.sockets / n) as u32;
            for _ in 0..self.cores[i] {
                for _ in 0..self.threads {
                    cpus.push(Cpu {
                        id: cpus.len() as u32,
                        core,
                        socket,
                        numa: id,
                        uncore_cache: None,
                    });
                }
                core += 1;
            }
        }
        let mut devices = BTreeMap::new();
        for (resource, per_node, unknown, doubled) in &self.devices {
            let mut list = Vec::new();
            let mut add = |numa: Vec<usize>| {
                list.push(Device {
                    id: format!("{}-{}", resource.trim_start_matches("example.com/"), list.len()),
                    numa,
                });
            };
            for (i, &count) in per_node.iter().enumerate() {
                for _ in 0..count {
                    add(vec![self.nodes[i]]);
                }
            }
            for _ in 0..*unknown {
                add(Vec::new());
            }
            for k in 0..*doubled {
                add(vec![self.nodes[k % n], self.nodes[(k + 1) % n]]);
            }
            if !list.is_empty() {
                devices.insert((*resource).to_owned(), list);
            }
        }
        Machine::new(numa_nodes, cpus, devices).expect("the shape makes a valid machine")
    }
}

/// The CPU manager's rule for a request of exclusive CPUs on a machine
/// whose free CPUs are drawn per NUMA node.
fn cpu(rng: &mut Rng, shape: &Shape, machine: &Machine) -> Provider {
    let topology = CpuTopology::from_machine(machine);
    let keep: Vec<u64> = shape
        .nodes
        .iter()
        .map(|_| *rng.pick(&[0, 25, 50, 75, 100, 100]))
        .collect();
    let index_of = |numa: usize| shape.nodes.iter().position(|&id| id == numa).unwrap_or(0);
    let available: CpuSet = machine
        .cpus()
        .iter()
        .filter(|cpu| rng.below(100) < keep[index_of(cpu.numa)])
        .map(|cpu| cpu.id)
        .collect();
    // CPUs of the pod's finished init containers, reusable by this one.
    let reusable: CpuSet = if rng.chance(10) {
        machine
            .cpus()
            .iter()
            .filter(|cpu| !available.contains(cpu.id) && rng.chance(20))
            .map(|cpu| cpu.id)
            .collect()
    } else {
        CpuSet::new()
    };
    let total = machine.cpus().len().max(1) as u64;
    let request = match rng.below(100) {
        0..40 => rng.range(1, 4),
        40..80 => rng.range(1, total),
        _ => rng.range(total / 2 + 1, total + 2),
    };
    let align_by_socket = shape.sockets > 1 && rng.chance(20);
    let rule = CpuHintRule::new(&topology, &available, &reusable, request as i64, align_by_socket);
    Provider::Resources(vec![(
        "cpu".to_owned(),
        Hints::from_engine(&ResourceHints::from_rule(rule)),
    )])
}

/// The memory manager's (Static) hints for a Guaranteed container, after
/// earlier pods were pinned to single nodes and multi-node groups.
fn memory(rng: &mut Rng, shape: &Shape, machine: &Machine, version: KubeletVersion) -> Provider {
    let config = MemoryManagerConfig {
        policy: MemoryPolicyName::Static,
        reserved_memory: vec![ReservedMemory {
            numa_node: shape.nodes[0],
            limits: resources(&[("memory", RESERVED)]),
        }],
        node_allocatable_reservation: resources(&[("memory", RESERVED)]),
        kubelet_version: version,
        pod_level_managers: false,
    };
    let mut manager = MemoryManager::start(machine, &config).expect("a valid reservation");
    let n = shape.nodes.len();
    // Earlier pods: most on one node, some on a group of nodes; what does
    // not fit is refused and leaves nothing.
    let earlier = if n > 8 && rng.chance(60) {
        rng.urange(n / 2, 2 * n)
    } else {
        rng.urange(0, n)
    };
    for k in 0..earlier {
        let mask = if rng.chance(75) || n == 1 {
            NumaMask::single(*rng.pick(&shape.nodes))
        } else {
            let mut ids = shape.nodes.clone();
            rng.shuffle(&mut ids);
            NumaMask::from_nodes(ids.into_iter().take(rng.urange(2, 3)))
        };
        let mut asks = vec![("memory", rng.range(1, 12) * GI / 2)];
        if rng.chance(20) {
            asks.push(("hugepages-2Mi", rng.range(1, 512) * 2 * MI));
        }
        if rng.chance(10) {
            asks.push(("hugepages-1Gi", rng.range(1, 2) * GI));
        }
        let pod = guaranteed(&format!("earlier-{k}"), &asks);
        let _ = manager.allocate(&pod, &pod.containers[0], TopologyHint::new(mask, true));
    }
    let mut asks = vec![(
        "memory",
        match rng.below(100) {
            0..50 => rng.range(1, 8) * GI / 4,
            50..85 => rng.range(1, 16) * GI,
            _ => rng.range(1, 64) * GI,
        },
    )];
    if rng.chance(30) {
        asks.push(("hugepages-2Mi", rng.range(1, 1024) * 2 * MI));
    }
    if rng.chance(20) {
        asks.push(("hugepages-1Gi", rng.range(1, 3) * GI));
    }
    let pod = guaranteed("new", &asks);
    provider(&manager.container_hints(&pod, &pod.containers[0]))
}

/// The device manager's hints for a container asking for devices, after
/// earlier pods took some.
fn devices(rng: &mut Rng, shape: &Shape, machine: &Machine, version: KubeletVersion) -> Provider {
    let mut manager = DeviceManager::new(machine, version);
    let resources: Vec<&str> = machine.devices().keys().map(String::as_str).collect();
    if resources.is_empty() {
        return Provider::Empty;
    }
    for k in 0..rng.urange(0, shape.nodes.len()) {
        let resource = *rng.pick(&resources);
        let hint = if rng.chance(70) {
            TopologyHint::new(NumaMask::single(*rng.pick(&shape.nodes)), true)
        } else {
            TopologyHint::any(false)
        };
        let pod = guaranteed(&format!("earlier-{k}"), &[(resource, rng.range(1, 3))]);
        let _ = manager.allocate(&pod, &pod.containers[0], hint);
    }
    let mut asks = Vec::new();
    for &resource in &resources {
        if rng.chance(70) {
            asks.push((resource, rng.range(1, 4)));
        }
    }
    let pod = guaranteed("new", &asks);
    provider(&manager.container_hints(&pod, &pod.containers[0]))
}

/// A provider's answer as the case holds it: an empty map stays empty.
fn provider(hints: &ProviderHints) -> Provider {
    if hints.is_empty() {
        return Provider::Empty;
    }
    Provider::Resources(
        hints
            .by_resource
            .iter()
            .map(|(name, hints)| (name.clone(), Hints::from_engine(hints)))
            .collect(),
    )
}

fn resources(entries: &[(&str, u64)]) -> ResourceList {
    entries
        .iter()
        .map(|&(name, amount)| (name.to_owned(), Quantity::from_units(i128::from(amount))))
        .collect()
}

/// A Guaranteed pod of one container asking for `asks` (limits = requests).
fn guaranteed(name: &str, asks: &[(&str, u64)]) -> Pod {
    let requests = resources(asks);
    Pod {
        namespace: "default".to_owned(),
        name: name.to_owned(),
        uid: format!("uid-{name}"),
        qos: QosClass::Guaranteed,
        init_containers: Vec::new(),
        containers: vec![Container {
            name: "c".to_owned(),
            limits: requests.clone(),
            requests,
            restartable: false,
        }],
        overhead: ResourceList::new(),
        pod_resources: None,
    }
}
