//! The per-NUMA allocation map of a diagnosed node: who holds which CPUs,
//! memory and devices on each NUMA node, as the checkpoints record it.

use std::collections::BTreeMap;

use serde::Serialize;
use topoalign_engine::{CpuManagerState, MemoryManagerState, Node};
use topoalign_model::{Quantity, QuantityFormat};

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
/// One NUMA node's allocations.
pub struct NumaAllocation {
    /// The NUMA node's id as the machine (and the kubelet) names it: its
    /// original id on a machine numbered anew (`Machine::numa_label`).
    pub node: usize,
    pub cpus: String,
    /// The shared pool's CPUs on this node.
    pub shared_pool: String,
    /// The pool's CPUs reserved for the system (never exclusive).
    pub reserved: String,
    /// Exclusive CPUs: `namespace/name container` → CPUs on this node.
    pub exclusive: BTreeMap<String, String>,
    /// Per memory resource: allocatable, pinned, free.
    pub memory: BTreeMap<String, MemoryLine>,
    /// Pinned memory blocks touching this node: `namespace/name container`
    /// → `resource size` (with the group for multi-node blocks).
    pub pinned: BTreeMap<String, Vec<String>>,
    /// Devices attached to this node: id → holder (`null` = free); empty
    /// when the state could not be restored.
    pub devices: BTreeMap<String, BTreeMap<String, Option<String>>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
/// One memory resource on one NUMA node, as the memory manager's state
/// records it.
pub struct MemoryLine {
    pub allocatable: String,
    pub reserved: String,
    pub free: String,
}

/// `n` bytes as a binary-SI quantity (`16Gi`).
fn bytes(n: u64) -> String {
    Quantity::from_units(i128::from(n))
        .with_format(QuantityFormat::BinarySI)
        .to_string()
}

/// The map of every NUMA node of `node`'s machine, from the checkpoints'
/// states (NUMA ids as the engine indexes them: `topoalign-observe` reads
/// the kubelet's ids so); devices and reserved CPUs only when the state
/// was `restored`. Every NUMA id shown is the machine's own.
pub(super) fn numa_map(
    node: &Node,
    cpu: Option<&CpuManagerState>,
    memory: Option<&MemoryManagerState>,
    key_of: &dyn Fn(&str) -> String,
    restored: bool,
) -> Vec<NumaAllocation> {
    let machine = node.machine();
    let shared = cpu.map(|s| s.default_cpu_set.clone()).unwrap_or_default();
    let assignments = node.snapshot().devices;
    let usage = node.numa_usage();
    machine
        .numa_nodes()
        .iter()
        .map(|numa| {
            let on_node = machine.numa_cpus(numa.id);
            let mut exclusive = BTreeMap::new();
            for (uid, containers) in cpu.map(|s| &s.assignments).into_iter().flatten() {
                for (name, cpus) in containers {
                    let here = cpus.intersection(&on_node);
                    if !here.is_empty() {
                        exclusive.insert(format!("{} {name}", key_of(uid)), here.to_string());
                    }
                }
            }
            let mut memory_lines = BTreeMap::new();
            let mut pinned: BTreeMap<String, Vec<String>> = BTreeMap::new();
            if let Some(state) = memory {
                // The kubelet's own table as its checkpoint records it, shown
                // even when it is refused; a restored node's `numa_usage`
                // agrees with it (the restore checks the table).
                if let Some(node) = state.machine_state.get(&numa.id) {
                    for (resource, table) in &node.memory {
                        if table.allocatable == 0 && table.total == 0 {
                            continue;
                        }
                        memory_lines.insert(
                            resource.clone(),
                            MemoryLine {
                                allocatable: bytes(table.allocatable),
                                reserved: bytes(table.reserved),
                                free: bytes(table.free),
                            },
                        );
                    }
                }
                for (uid, containers) in &state.assignments {
                    for (name, blocks) in containers {
                        for block in blocks.iter().filter(|b| b.numa_affinity.contains(&numa.id)) {
                            let group = if block.numa_affinity.len() > 1 {
                                let ids: Vec<String> = block
                                    .numa_affinity
                                    .iter()
                                    .map(|&id| machine.numa_label(id).to_string())
                                    .collect();
                                format!(" (shared by NUMA {})", ids.join("+"))
                            } else {
                                String::new()
                            };
                            pinned
                                .entry(format!("{} {name}", key_of(uid)))
                                .or_default()
                                .push(format!("{} {}{group}", block.resource, bytes(block.size)));
                        }
                    }
                }
            }
            let mut devices: BTreeMap<String, BTreeMap<String, Option<String>>> = BTreeMap::new();
            // Who holds a device is only known once the state is restored.
            for (resource, list) in machine.devices().iter().filter(|_| restored) {
                for device in list.iter().filter(|d| d.numa.contains(&numa.id)) {
                    let holder = restored
                        .then(|| {
                            assignments.iter().find_map(|(uid, containers)| {
                                containers.iter().find_map(|(name, by_resource)| {
                                    by_resource
                                        .get(resource)
                                        .is_some_and(|ids| ids.contains(&device.id))
                                        .then(|| format!("{} {name}", key_of(uid)))
                                })
                            })
                        })
                        .flatten();
                    devices
                        .entry(resource.clone())
                        .or_default()
                        .insert(device.id.clone(), holder);
                }
            }
            let pool = shared.intersection(&on_node);
            let reserved = usage
                .iter()
                .find(|u| u.numa == numa.id)
                .filter(|_| restored)
                .map(|u| pool.intersection(&u.reserved_cpus).to_string())
                .unwrap_or_default();
            NumaAllocation {
                node: machine.numa_label(numa.id),
                cpus: on_node.to_string(),
                shared_pool: pool.to_string(),
                reserved,
                exclusive,
                memory: memory_lines,
                pinned,
                devices,
            }
        })
        .collect()
}
