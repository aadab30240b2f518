//! `GET /v1/topology` and the per-NUMA gauges: the engine's one read side
//! ([`Node::numa_usage`](topoalign_engine::Node::numa_usage), where every
//! number's meaning is documented) as the API's document, plus unpaired
//! capacity.
//!
//! Owns: the document's shape of those numbers and the unpaired rule;
//! reads the ledger's node (never changes it).
//!
//! - per resource: capacity, allocatable and allocated as the engine
//!   counts them; `allocated` is absent where no manager places the
//!   resource on NUMA nodes (CPUs under the CPU manager's `none` policy,
//!   memory under the memory manager's `None`).
//! - unpaired: free CPUs on a node whose allocatable memory is all taken,
//!   and free memory on a node whose allocatable CPUs are all taken —
//!   capacity no Guaranteed workload can use (only computed where both are
//!   placed: static CPU and memory managers). Called "unpaired", not
//!   "stranded": the fleet report's stranded capacity is another rule
//!   (free capacity no failed pod fits).

use std::collections::BTreeMap;

use topoalign_engine::{CpuPolicyName, ResourceUsage};
use topoalign_model::Quantity;

use crate::ledger::Ledger;
use crate::wire::{NumaNodeUsage, Topology, Usage};

/// The topology document for the ledger's current state.
pub fn topology(ledger: &Ledger, enforcement: &str) -> Topology {
    node_topology(ledger.node(), enforcement)
}

/// The topology document of any node (the kubelet follower's too).
pub fn node_topology(node: &topoalign_engine::Node, enforcement: &str) -> Topology {
    let machine = node.machine();
    let config = node.config();
    let numa_nodes = node
        .numa_usage()
        .into_iter()
        .map(|usage| {
            let resources: BTreeMap<String, Usage> = usage
                .resources
                .iter()
                .map(|(resource, amounts)| (resource.clone(), wire_usage(amounts)))
                .collect();
            let unpaired = unpaired(&resources, config.cpu_policy == CpuPolicyName::Static);
            NumaNodeUsage {
                id: usage.numa,
                cpus: usage.cpus.clone(),
                resources,
                unpaired,
                distances: machine.numa_node(usage.numa).and_then(|n| n.distances.clone()),
            }
        })
        .collect();

    Topology {
        topology_policy: config.topology_policy.as_str().to_string(),
        topology_scope: config.topology_scope.as_str().to_string(),
        cpu_policy: config.cpu_policy.as_str().to_string(),
        memory_policy: config.memory_policy.as_str().to_string(),
        enforcement: enforcement.to_string(),
        shared_cpus: node.default_cpu_set(),
        numa_nodes,
    }
}

/// One resource's engine amounts as the document's counts.
fn wire_usage(amounts: &ResourceUsage) -> Usage {
    let count = |quantity: Quantity| u64::try_from(quantity.value().max(0)).unwrap_or(u64::MAX);
    Usage {
        capacity: count(amounts.capacity),
        allocatable: count(amounts.allocatable),
        allocated: amounts.placed.then(|| count(amounts.allocated)),
    }
}

fn unpaired(resources: &BTreeMap<String, Usage>, cpus_tracked: bool) -> BTreeMap<String, u64> {
    let free = |usage: &Usage| usage.allocated.map(|a| usage.allocatable.saturating_sub(a));
    let mut unpaired = BTreeMap::new();
    let (Some(cpu), Some(memory)) = (resources.get("cpu"), resources.get("memory")) else {
        return unpaired;
    };
    let (Some(free_cpus), Some(free_memory)) = (free(cpu).filter(|_| cpus_tracked), free(memory)) else {
        return unpaired;
    };
    if free_memory == 0 && free_cpus > 0 {
        unpaired.insert("cpu".to_string(), free_cpus);
    }
    if free_cpus == 0 && free_memory > 0 {
        unpaired.insert("memory".to_string(), free_memory);
    }
    unpaired
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
    fn unpaired_capacity_is_one_resource_free_where_the_other_is_gone() {
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
            assert_eq!(unpaired(&table(cpu, memory), cpus_tracked), expected);
        }
    }
}
