//! Per-NUMA-node capacity, allocatable and allocated amounts, and
//! stranded capacity: what `GET /v1/topology` shows and the gauges export.
//!
//! Owns the arithmetic; reads the ledger's node (never changes it).
//!
//! - `cpu`: capacity = the node's logical CPUs; allocatable = capacity
//!   minus `reservedSystemCPUs` on the node (a reservation given only as a
//!   count, `systemReserved.cpu`, is not attributed to a node);
//!   allocated = CPUs held exclusively.
//! - `memory`, `hugepages-<size>`: under the memory manager's `Static`
//!   policy, from its table (allocatable = free on the empty node,
//!   allocated = allocatable − free now); under `None` nothing is tracked
//!   per node, so `allocated` is absent.
//! - device resources: devices local to the node (a device local to two
//!   nodes counts on both), and those held.
//! - stranded: free CPUs on a node whose allocatable memory is all taken,
//!   and free memory on a node whose allocatable CPUs are all taken —
//!   capacity no Guaranteed workload can use (only computed where both are
//!   tracked: static CPU and memory managers).

use std::collections::{BTreeMap, BTreeSet};

use topoalign_engine::{CpuPolicyName, Node};
use topoalign_model::{CpuSet, Quantity};

use crate::ledger::Ledger;
use crate::wire::{NumaNodeUsage, Topology, Usage};

/// The topology document for the ledger's current state.
pub fn topology(ledger: &Ledger, enforcement: &str) -> Topology {
    let node = ledger.node();
    let machine = node.machine();
    let config = node.config();
    let state = node.state();
    let exclusive: CpuSet = state
        .cpu_assignments
        .values()
        .flat_map(|containers| containers.values())
        .fold(CpuSet::new(), |all, cpus| all.union(cpus));
    let reserved = config.reserved_system_cpus.clone().unwrap_or_default();
    let allocatable_memory = memory_table(ledger.empty_node());
    let free_memory = memory_table(node);
    let held_devices: BTreeSet<(&str, &str)> = ledger
        .held()
        .iter()
        .flat_map(|h| h.record.placements.iter())
        .flat_map(|p| p.devices.iter())
        .flat_map(|(resource, ids)| ids.iter().map(move |id| (resource.as_str(), id.as_str())))
        .collect();

    let numa_nodes = machine
        .numa_nodes()
        .iter()
        .map(|numa| {
            let cpus = machine.numa_cpus(numa.id);
            let mut resources = BTreeMap::new();
            let cpu = Usage {
                capacity: cpus.len() as u64,
                allocatable: cpus.difference(&reserved).len() as u64,
                allocated: Some(cpus.intersection_len(&exclusive) as u64),
            };
            resources.insert("cpu".to_string(), cpu);

            let hugepage_total: u64 = numa.hugepages.values().sum();
            let mut capacities: BTreeMap<String, u64> = numa
                .hugepages
                .iter()
                .map(|(&page, &total)| (topoalign_model::hugepage_resource_name(page), total))
                .collect();
            capacities.insert("memory".to_string(), numa.memory.saturating_sub(hugepage_total));
            for (resource, capacity) in capacities {
                let tracked = allocatable_memory.get(&(numa.id, resource.clone()));
                let usage = match tracked {
                    Some(&allocatable) => {
                        let free = free_memory.get(&(numa.id, resource.clone())).copied().unwrap_or(0);
                        Usage {
                            capacity,
                            allocatable,
                            allocated: Some(allocatable.saturating_sub(free)),
                        }
                    }
                    None => Usage {
                        capacity,
                        allocatable: capacity,
                        allocated: None,
                    },
                };
                resources.insert(resource, usage);
            }

            for (resource, devices) in machine.devices() {
                let local: Vec<&str> = devices
                    .iter()
                    .filter(|d| d.numa.contains(&numa.id))
                    .map(|d| d.id.as_str())
                    .collect();
                if local.is_empty() {
                    continue;
                }
                let held = local
                    .iter()
                    .filter(|id| held_devices.contains(&(resource.as_str(), **id)))
                    .count();
                resources.insert(
                    resource.clone(),
                    Usage {
                        capacity: local.len() as u64,
                        allocatable: local.len() as u64,
                        allocated: Some(held as u64),
                    },
                );
            }

            let stranded = stranded(&resources, config.cpu_policy == CpuPolicyName::Static);
            NumaNodeUsage {
                id: numa.id,
                cpus: cpus.to_string(),
                resources,
                stranded,
                distances: numa.distances.clone(),
            }
        })
        .collect();

    Topology {
        topology_policy: config.topology_policy.as_str().to_string(),
        topology_scope: config.topology_scope.as_str().to_string(),
        cpu_policy: match config.cpu_policy {
            CpuPolicyName::None => "none",
            CpuPolicyName::Static => "static",
        }
        .to_string(),
        memory_policy: format!("{:?}", config.memory_policy),
        enforcement: enforcement.to_string(),
        shared_cpus: state.default_cpu_set.to_string(),
        numa_nodes,
    }
}

/// Free amounts per (NUMA node, resource) in the memory manager's table;
/// empty under the `None` policy.
fn memory_table(node: &Node) -> BTreeMap<(usize, String), u64> {
    node.numa_free()
        .into_iter()
        .flat_map(|free| {
            let numa = free.node;
            free.memory
                .into_iter()
                .map(move |(resource, quantity)| ((numa, resource), bytes(quantity)))
        })
        .collect()
}

fn bytes(quantity: Quantity) -> u64 {
    u64::try_from(quantity.value().max(0)).unwrap_or(u64::MAX)
}

fn stranded(resources: &BTreeMap<String, Usage>, cpus_tracked: bool) -> BTreeMap<String, u64> {
    let free = |usage: &Usage| usage.allocated.map(|a| usage.allocatable.saturating_sub(a));
    let mut stranded = BTreeMap::new();
    let (Some(cpu), Some(memory)) = (resources.get("cpu"), resources.get("memory")) else {
        return stranded;
    };
    let (Some(free_cpus), Some(free_memory)) = (free(cpu).filter(|_| cpus_tracked), free(memory)) else {
        return stranded;
    };
    if free_memory == 0 && free_cpus > 0 {
        stranded.insert("cpu".to_string(), free_cpus);
    }
    if free_cpus == 0 && free_memory > 0 {
        stranded.insert("memory".to_string(), free_memory);
    }
    stranded
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(allocatable: u64, allocated: Option<u64>) -> Usage {
        Usage {
            capacity: allocatable,
            allocatable,
            allocated,
        }
    }

    #[test]
    fn stranded_capacity_is_one_resource_free_where_the_other_is_gone() {
        let table = |cpu: Usage, memory: Usage| -> BTreeMap<String, Usage> {
            [("cpu".to_string(), cpu), ("memory".to_string(), memory)].into()
        };
        for (cpu, memory, cpus_tracked, expected) in [
            (usage(4, Some(1)), usage(100, Some(100)), true, vec![("cpu", 3)]),
            (usage(4, Some(4)), usage(100, Some(40)), true, vec![("memory", 60)]),
            (usage(4, Some(4)), usage(100, Some(100)), true, vec![]),
            (usage(4, Some(1)), usage(100, Some(10)), true, vec![]),
            // Memory not tracked per node, or CPUs not exclusive: unknown.
            (usage(4, Some(1)), usage(100, None), true, vec![]),
            (usage(4, Some(0)), usage(100, Some(100)), false, vec![]),
        ] {
            let expected: BTreeMap<String, u64> = expected.into_iter().map(|(r, n)| (r.to_string(), n)).collect();
            assert_eq!(stranded(&table(cpu, memory), cpus_tracked), expected);
        }
    }
}
