//! [`zone_usage`]: what each NUMA node of a started [`Node`] has, may give
//! to pods and has left — the numbers of a NodeResourceTopology zone, as
//! numbers rather than strings, for the scheduler side to compute with.
//!
//! Owns: the accounting rules below. Must not touch: any decision (it only
//! reads the engine's state).
//!
//! Per NUMA node `n`:
//! - `cpu`: capacity = logical CPUs on `n`; allocatable = capacity minus
//!   the CPU manager's reserved CPUs on `n`; available = allocatable minus
//!   the exclusive CPUs assigned on `n`. (Shared-pool pods take no CPU
//!   from a zone, as in the resource-topology-exporter.)
//! - `memory` and each non-empty `hugepages-<size>` pool: the memory
//!   manager's table (total, allocatable, free) under its Static policy —
//!   regular memory's total is the NUMA node's memory, its allocatable
//!   leaves out the reservation and the huge page pools; under `None`, which
//!   keeps no table, capacity = the NUMA node's memory and allocatable =
//!   available = that minus the huge page pools.
//! - each device resource: the devices whose affinity includes `n`
//!   (a device attached to several NUMA nodes counts in each); available =
//!   those not in use. Devices without affinity belong to no zone.

use std::collections::BTreeMap;

use topoalign_engine::{CpuPolicyName, Node};
use topoalign_model::{Quantity, QuantityFormat, hugepage_resource_name};

/// One resource's amounts in one zone.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Amounts {
    pub capacity: Quantity,
    pub allocatable: Quantity,
    pub available: Quantity,
}

/// One NUMA node's resources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZoneUsage {
    pub numa: usize,
    /// Resource name → amounts, in name order.
    pub resources: BTreeMap<String, Amounts>,
}

impl ZoneUsage {
    /// What is left of `resource` (zero when the zone does not list it).
    pub fn available(&self, resource: &str) -> Quantity {
        self.resources.get(resource).map(|a| a.available).unwrap_or_default()
    }
}

/// The zones of `node`, one per NUMA node in id order.
pub fn zone_usage(node: &Node) -> Vec<ZoneUsage> {
    let machine = node.machine();
    let reserved = node.reserved_cpus();
    // Under the static policy every CPU is either in the shared pool or
    // assigned exclusively; the `none` policy assigns nothing.
    let exclusive = match node.config().cpu_policy {
        CpuPolicyName::Static => machine.cpu_set().difference(&node.default_cpu_set()),
        CpuPolicyName::None => topoalign_model::CpuSet::new(),
    };
    let memory = node.memory_usage();
    let in_use = node.devices_in_use();
    let units = |n: usize| Quantity::from_units(i128::try_from(n).unwrap_or(i128::MAX));
    let bytes = |n: u64| Quantity::from_units(i128::from(n)).with_format(QuantityFormat::BinarySI);

    machine
        .numa_nodes()
        .iter()
        .map(|numa| {
            let mut resources = BTreeMap::new();
            let cpus: Vec<u32> = machine
                .cpus()
                .iter()
                .filter(|c| c.numa == numa.id)
                .map(|c| c.id)
                .collect();
            let reserved_here = cpus.iter().filter(|&&c| reserved.contains(c)).count();
            let taken_here = cpus
                .iter()
                .filter(|&&c| exclusive.contains(c) && !reserved.contains(c))
                .count();
            let allocatable = cpus.len() - reserved_here;
            resources.insert(
                "cpu".to_string(),
                Amounts {
                    capacity: units(cpus.len()),
                    allocatable: units(allocatable),
                    available: units(allocatable.saturating_sub(taken_here)),
                },
            );
            match memory.get(&numa.id) {
                Some(table) => {
                    for (resource, usage) in table {
                        if usage.total == 0 && resource != "memory" {
                            continue;
                        }
                        resources.insert(
                            resource.clone(),
                            Amounts {
                                capacity: bytes(usage.total),
                                allocatable: bytes(usage.allocatable),
                                available: bytes(usage.free),
                            },
                        );
                    }
                }
                None => {
                    let pools: u64 = numa.hugepages.values().sum();
                    let regular = bytes(numa.memory.saturating_sub(pools));
                    resources.insert(
                        "memory".to_string(),
                        Amounts {
                            capacity: bytes(numa.memory),
                            allocatable: regular,
                            available: regular,
                        },
                    );
                    for (&size, &total) in &numa.hugepages {
                        if total > 0 {
                            let amount = bytes(total);
                            resources.insert(
                                hugepage_resource_name(size),
                                Amounts {
                                    capacity: amount,
                                    allocatable: amount,
                                    available: amount,
                                },
                            );
                        }
                    }
                }
            }
            for (resource, devices) in machine.devices() {
                let here: Vec<&str> = devices
                    .iter()
                    .filter(|d| d.numa.contains(&numa.id))
                    .map(|d| d.id.as_str())
                    .collect();
                if here.is_empty() {
                    continue;
                }
                let used = in_use.get(resource);
                let free = here
                    .iter()
                    .filter(|id| !used.is_some_and(|u| u.iter().any(|x| x == *id)))
                    .count();
                resources.insert(
                    resource.clone(),
                    Amounts {
                        capacity: units(here.len()),
                        allocatable: units(here.len()),
                        available: units(free),
                    },
                );
            }
            ZoneUsage {
                numa: numa.id,
                resources,
            }
        })
        .collect()
}
