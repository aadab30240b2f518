//! A node's per-NUMA usage as the documents the node agent and the kubelet
//! follower both publish: `GET /v1/topology` ([`node_topology`], the
//! engine's one read side, [`Node::numa_usage`], where every number's
//! meaning is documented, as the API's document, plus unpaired capacity)
//! and the per-NUMA gauges ([`NumaLabels`], [`gauge_value`], [`encode`]).
//!
//! Owns: the document's shape of those numbers (camelCase, CPU sets in the
//! kernel's list syntax) and the unpaired rule. Pure: reads a node, never
//! changes it; no I/O.
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

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};
use topoalign_engine::{CpuPolicyName, Node, ResourceUsage};
use topoalign_model::{CpuSet, Quantity};

/// `GET /v1/topology`: the machine, the policies, and per-NUMA usage.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    pub topology_policy: String,
    pub topology_scope: String,
    pub cpu_policy: String,
    pub memory_policy: String,
    pub enforcement: String,
    /// The shared CPU pool (list syntax on the wire).
    pub shared_cpus: CpuSet,
    pub numa_nodes: Vec<NumaNodeUsage>,
}

/// One NUMA node's resources.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NumaNodeUsage {
    /// The machine's own NUMA id ([`topoalign_model::Machine::numa_label`]).
    pub id: usize,
    /// All of the node's CPUs (list syntax on the wire).
    pub cpus: CpuSet,
    /// Resource → capacity / allocatable / allocated. `cpu` counts CPUs;
    /// `memory` and `hugepages-*` count bytes; devices count devices.
    pub resources: BTreeMap<String, Usage>,
    /// Free capacity without its partner: CPUs free on a NUMA node whose
    /// allocatable memory is all taken, or memory free on one whose CPUs
    /// are ([`node_topology`]). Not the fleet report's "stranded"
    /// capacity, which is free capacity no failed pod fits.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unpaired: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distances: Option<Vec<u64>>,
}

/// Amounts of one resource on one NUMA node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub capacity: u64,
    pub allocatable: u64,
    /// `null` where the node does not track it per NUMA node (memory under
    /// the memory manager's `None` policy).
    pub allocated: Option<u64>,
}

/// The topology document of `node`; `enforcement` says how its
/// placements are made real (`cgroup-v2`, …, `kubelet` for a followed one).
pub fn node_topology(node: &Node, enforcement: &str) -> Topology {
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
                // The machine's own NUMA id (issue #29: past 63 not the
                // engine's index; the same below 64).
                id: machine.numa_label(usage.numa),
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

/// The labels of a per-NUMA gauge, the agent's and the follower's
/// (`numa_node`, `resource`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NumaLabels {
    numa_node: String,
    resource: String,
}

impl NumaLabels {
    pub fn new(numa_node: impl std::fmt::Display, resource: &str) -> NumaLabels {
        NumaLabels {
            numa_node: numa_node.to_string(),
            resource: resource.to_owned(),
        }
    }
}

/// An amount as a gauge's value (saturating: no amount is that large).
pub fn gauge_value(amount: impl TryInto<i64>) -> i64 {
    amount.try_into().unwrap_or(i64::MAX)
}

/// The OpenMetrics text exposition of `registry`.
pub fn encode(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing to a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
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
