//! The read side of a node's state: what each NUMA node has, may give to
//! pods, has given and has left, per resource ([`Node::numa_usage`]). The
//! one place where "what is free on NUMA 1" is computed; the agent's
//! `/v1/topology` and metrics, NodeResourceTopology zones, `diagnose`,
//! explanations and the fleet's and extender's scoring all read it.
//!
//! Owns: the meaning of capacity, allocatable, allocated and available per
//! NUMA node (documented on [`NumaUsage`]). Must not touch: any decision —
//! it only reads the managers' state.

use std::collections::BTreeMap;

use topoalign_memory_manager::MemoryTableState;
use topoalign_model::{CpuSet, NumaNode, Quantity, QuantityFormat, hugepage_resource_name};

use super::Node;

/// One NUMA node's resources, as the node's managers account them.
///
/// Per resource ([`NumaUsage::resources`]), in the kubelet's meaning:
///
/// - `cpu` (counts CPUs): *capacity* = the node's logical CPUs;
///   *allocatable* = capacity minus the CPU manager's reserved CPUs on the
///   node — under the `static` policy the set it keeps for the system,
///   whether named by `reservedSystemCPUs` or chosen by the policy for a
///   count (`systemReserved` + `kubeReserved` `cpu`, rounded up, taken by
///   topology like any allocation); the `none` policy reserves no CPU set;
///   *allocated* = CPUs on the node held exclusively by containers, or by
///   a pod managed at the pod level (`PodLevelResourceManagers`: the pod's
///   whole set, its containers' shared part included);
///   *available* = allocatable − allocated = the free CPU set's size.
///   Shared-pool pods take no CPU from a NUMA node.
/// - `memory` and each `hugepages-<size>` with a non-empty pool (bytes):
///   under the memory manager's `Static` policy its table (the kubelet's
///   `memory_manager_state`): *capacity* = `total` (for `memory` the NUMA
///   node's whole memory, huge page pools included, as the node's capacity
///   counts it; for a pool its whole pages), *allocatable* = total minus
///   `reservedMemory` on the node (and, for `memory`, minus the pools),
///   *allocated* = pinned by containers, *available* = `free`. Under
///   `None`, which keeps no table and pins nothing, capacity is the same,
///   allocatable = capacity minus the pools for `memory` (no per-node
///   reservation exists), allocated = 0 and available = allocatable.
/// - each device-plugin resource with a device attached to the node:
///   *capacity* = *allocatable* = those devices (a device attached to
///   several NUMA nodes counts on each), *allocated* = those held by a
///   container, *available* = the rest. Devices without NUMA affinity
///   belong to no NUMA node.
///
/// For every resource allocated + available = allocatable ≤ capacity; no
/// CPU, byte or device is counted twice on one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumaUsage {
    /// The NUMA node id.
    pub numa: usize,
    /// All of the node's logical CPUs.
    pub cpus: CpuSet,
    /// The CPU manager's reserved CPUs on this node (empty under `none`).
    pub reserved_cpus: CpuSet,
    /// CPUs free for exclusive allocation: the shared pool on this node
    /// minus the reserved CPUs. `None` under the `none` CPU policy, which
    /// hands out no CPU exclusively.
    pub free_cpus: Option<CpuSet>,
    /// Resource name → amounts, in name order.
    pub resources: BTreeMap<String, ResourceUsage>,
    /// Device resource → ids of its devices on this node that no container
    /// holds, in the machine's order (resources with a device here only).
    pub free_devices: BTreeMap<String, Vec<String>>,
}

/// One resource's amounts on one NUMA node (see [`NumaUsage`] for what
/// each means). `cpu` and devices are counts, memory is bytes in binary
/// notation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResourceUsage {
    pub capacity: Quantity,
    pub allocatable: Quantity,
    pub allocated: Quantity,
    pub available: Quantity,
    /// Whether a manager assigns this resource to NUMA nodes: the `static`
    /// CPU policy, the `Static` memory policy, devices. When not, nothing is
    /// ever allocated here and a pod's use of it is not attributed to a
    /// NUMA node.
    pub placed: bool,
}

impl NumaUsage {
    /// The amounts of `resource` on this node, if the node has any.
    pub fn get(&self, resource: &str) -> Option<&ResourceUsage> {
        self.resources.get(resource)
    }

    /// What is left of `resource` (zero when the node does not have it).
    pub fn available(&self, resource: &str) -> Quantity {
        self.get(resource).map(|r| r.available).unwrap_or_default()
    }
}

impl Node {
    /// What each NUMA node has, may give and has left, ascending by NUMA
    /// id; see [`NumaUsage`] for the meaning of every number.
    pub fn numa_usage(&self) -> Vec<NumaUsage> {
        let reader = self.usage_reader();
        self.machine.numa_nodes().iter().map(|numa| reader.zone(numa)).collect()
    }

    /// [`Node::numa_usage`] read one NUMA node and one resource at a time.
    pub fn usage_reader(&self) -> UsageReader<'_> {
        let reserved = self.cpus.reserved_cpus();
        // Containers' exclusive CPUs and pods' pod-level CPUs (a pod
        // managed at the pod level holds its whole set, shared part too).
        let (by_containers, by_pods) = self.cpus.held_cpus();
        UsageReader {
            node: self,
            cpu_placed: self.cpus.available_cpus().is_some(),
            shared: self.cpus.default_cpu_set(),
            exclusive: by_containers.union(&by_pods).difference(&reserved),
            reserved,
        }
    }
}

/// [`Node::numa_usage`] one NUMA node and one resource at a time
/// ([`UsageReader::resource`]), for readers that want a few of its numbers
/// (the extender scores the resources a pod asks for on the zones it uses,
/// once per trial admission): what every number shares is worked out once
/// and no [`NumaUsage`] is built. `numa_usage` itself is built from it, so
/// both read the same numbers.
pub struct UsageReader<'a> {
    node: &'a Node,
    cpu_placed: bool,
    shared: CpuSet,
    reserved: CpuSet,
    exclusive: CpuSet,
}

impl UsageReader<'_> {
    /// `resource` on `numa`: [`NumaUsage::resources`]' entry, `None` where
    /// it has none.
    pub fn resource(&self, numa: &NumaNode, resource: &str) -> Option<ResourceUsage> {
        // The order `zone` fills the map in, a later entry replacing an
        // earlier one of the same name: CPUs, memory, devices.
        if let Some((usage, _)) = self.devices(numa, resource) {
            return Some(usage);
        }
        match self.node.memory.table(numa.id) {
            Some(table) => {
                if let Some(usage) = table.get(resource).and_then(|usage| table_usage(resource, usage)) {
                    return Some(usage);
                }
            }
            None => {
                if let Some((_, usage)) = unplaced_memory(numa).find(|(name, _)| name == resource) {
                    return Some(usage);
                }
            }
        }
        (resource == "cpu").then(|| self.cpu(&self.node.machine.numa_cpus(numa.id)))
    }

    /// One NUMA node's [`NumaUsage`].
    fn zone(&self, numa: &NumaNode) -> NumaUsage {
        let cpus = self.node.machine.numa_cpus(numa.id);
        let mut resources = BTreeMap::from([("cpu".to_owned(), self.cpu(&cpus))]);
        match self.node.memory.table(numa.id) {
            Some(table) => {
                for (resource, usage) in table {
                    if let Some(usage) = table_usage(resource, usage) {
                        resources.insert(resource.clone(), usage);
                    }
                }
            }
            None => resources.extend(unplaced_memory(numa)),
        }
        let mut free_devices = BTreeMap::new();
        for resource in self.node.machine.devices().keys() {
            if let Some((usage, free)) = self.devices(numa, resource) {
                resources.insert(resource.clone(), usage);
                free_devices.insert(resource.clone(), free.into_iter().map(str::to_owned).collect());
            }
        }
        NumaUsage {
            numa: numa.id,
            free_cpus: self
                .cpu_placed
                .then(|| cpus.intersection(&self.shared).difference(&self.reserved)),
            reserved_cpus: cpus.intersection(&self.reserved),
            cpus,
            resources,
            free_devices,
        }
    }

    /// `cpu` on the NUMA node whose CPUs are `cpus`.
    fn cpu(&self, cpus: &CpuSet) -> ResourceUsage {
        let allocatable = cpus.len() - cpus.intersection_len(&self.reserved);
        let allocated = cpus.intersection_len(&self.exclusive);
        ResourceUsage {
            capacity: units(cpus.len()),
            allocatable: units(allocatable),
            allocated: units(allocated),
            available: units(allocatable.saturating_sub(allocated)),
            placed: self.cpu_placed,
        }
    }

    /// The device resource `resource` on `numa` and the ids of its free
    /// devices there, in the machine's order; `None` when no device of it
    /// is attached to `numa` (or it is not a device resource).
    fn devices(&self, numa: &NumaNode, resource: &str) -> Option<(ResourceUsage, Vec<&str>)> {
        let devices = self.node.machine.devices().get(resource)?;
        let mut count = 0;
        let mut free = Vec::new();
        for device in devices.iter().filter(|d| d.numa.contains(&numa.id)) {
            count += 1;
            if !self.node.devices.is_in_use(resource, &device.id) {
                free.push(device.id.as_str());
            }
        }
        if count == 0 {
            return None;
        }
        let usage = ResourceUsage {
            capacity: units(count),
            allocatable: units(count),
            allocated: units(count - free.len()),
            available: units(free.len()),
            placed: true,
        };
        Some((usage, free))
    }
}

/// A resource of the memory manager's table on one node: `memory`, and
/// each huge page pool that is not empty.
fn table_usage(resource: &str, usage: &MemoryTableState) -> Option<ResourceUsage> {
    if usage.total == 0 && resource != "memory" {
        return None;
    }
    Some(ResourceUsage {
        capacity: bytes(usage.total),
        allocatable: bytes(usage.allocatable),
        allocated: bytes(usage.reserved),
        available: bytes(usage.free),
        placed: true,
    })
}

/// `memory` and the non-empty huge page pools of `numa` where the memory
/// manager keeps no table (its `None` policy).
fn unplaced_memory(numa: &NumaNode) -> impl Iterator<Item = (String, ResourceUsage)> + '_ {
    let unplaced = |capacity: u64, allocatable: u64| ResourceUsage {
        capacity: bytes(capacity),
        allocatable: bytes(allocatable),
        allocated: bytes(0),
        available: bytes(allocatable),
        placed: false,
    };
    // Whole pages only, as cAdvisor reports them (and as the memory
    // manager's table counts them under Static).
    let pools = numa
        .hugepages
        .iter()
        .map(|(&size, &pool)| (size, pool.checked_div(size).map_or(0, |pages| pages * size)))
        .filter(|&(_, total)| total > 0);
    let pooled = pools.clone().fold(0u64, |sum, (_, total)| sum.saturating_add(total));
    pools
        .map(move |(size, total)| (hugepage_resource_name(size), unplaced(total, total)))
        .chain(std::iter::once((
            "memory".to_owned(),
            unplaced(numa.memory, numa.memory.saturating_sub(pooled)),
        )))
}

fn units(n: usize) -> Quantity {
    Quantity::from_units(i128::try_from(n).unwrap_or(i128::MAX))
}

/// Bytes read best in binary notation (`31644Mi`).
fn bytes(n: u64) -> Quantity {
    Quantity::from_units(i128::from(n)).with_format(QuantityFormat::BinarySI)
}
