//! Start-up checks of the Static policy's `reservedMemory` (kubelet
//! `getSystemReservedMemory`: `validateReservedMemory`, `convertReserved`,
//! then `NewPolicyStatic`'s check), with the kubelet's error texts, in the
//! kubelet's order:
//! 1. every reservation names an existing NUMA node (first offender, in
//!    configuration order);
//! 2. per memory resource, the reservations add up to the node-allocatable
//!    reservation (systemReserved + kubeReserved + hard eviction);
//! 3. every amount is a whole number of bytes;
//! 4. some regular memory is reserved at all.
//!
//! Beside them, not a check: [`reservation_overruns`], the nodes that
//! reserve more than they have. The kubelet starts with such a
//! configuration (its `uint64` arithmetic wraps around), so topoalign does
//! too and only warns.
//!
//! Owns: those checks, the per-node reservation they produce and the
//! overruns found in it. Must not touch: the machine state built from it.

use std::collections::BTreeSet;

use topoalign_model::{Machine, Quantity, ResourceList};

use crate::machine_state::{MEMORY, SystemReserved, is_hugepage_resource};
use crate::requests::quantity_as_u64;
use crate::{MemoryManagerConfig, MemoryManagerStartError, MemoryPolicyName, ReservationOverrun};

/// The per-node reservation the Static policy starts from.
///
/// # Errors
/// [`MemoryManagerStartError`] with the kubelet's text for the first check
/// that fails.
pub(crate) fn system_reserved_memory(
    machine: &Machine,
    config: &MemoryManagerConfig,
) -> Result<SystemReserved, MemoryManagerStartError> {
    let reserved_totals = reserved_totals(machine, config)?;
    check_totals_match_node_allocatable(&reserved_totals, &config.node_allocatable_reservation)?;
    let reserved = per_node_bytes(machine, config)?;
    let memory_reserved = reserved
        .values()
        .filter_map(|by_resource| by_resource.get(MEMORY))
        .fold(0u64, |sum, &bytes| sum.wrapping_add(bytes));
    if memory_reserved == 0 {
        return Err(kubelet_error(
            "[memorymanager] you should specify the system reserved memory",
        ));
    }
    Ok(reserved)
}

/// The NUMA nodes of a Static policy's configuration that reserve more of a
/// resource than they have. The kubelet subtracts a node's reservation (and
/// its huge page pools) from its memory in Go `uint64`, so a node with
/// `memory: 0` and 1Gi reserved has about 16 EiB free, and the Static policy
/// then pins pods to memory that does not exist. The kubelet starts and
/// decides so, and so does topoalign; these are the warnings beside its
/// answers. Empty under the `None` policy and for a configuration the
/// kubelet refuses (there is no table to wrap).
pub fn reservation_overruns(machine: &Machine, config: &MemoryManagerConfig) -> Vec<ReservationOverrun> {
    if config.policy != MemoryPolicyName::Static {
        return Vec::new();
    }
    let Ok(reserved) = per_node_bytes(machine, config) else {
        return Vec::new();
    };
    let mut overruns = Vec::new();
    for node in machine.numa_nodes() {
        let Some(by_resource) = reserved.get(&node.id) else {
            continue;
        };
        let mut pools = 0u64;
        for (&page_size, &pool) in &node.hugepages {
            // Whole pages only, as the machine state counts them.
            let pool = pool.checked_div(page_size).map_or(0, |pages| pages * page_size);
            pools = pools.saturating_add(pool);
            let name = topoalign_model::hugepage_resource_name(page_size);
            let wanted = by_resource.get(&name).copied().unwrap_or(0);
            if wanted > pool {
                overruns.push(ReservationOverrun {
                    node: node.id,
                    resource: name,
                    reserved: wanted,
                    available: pool,
                });
            }
        }
        for (name, &wanted) in by_resource {
            if is_hugepage_resource(name) && wanted > 0 && !by_resource_has_pool(node, name) {
                overruns.push(ReservationOverrun {
                    node: node.id,
                    resource: name.clone(),
                    reserved: wanted,
                    available: 0,
                });
            }
        }
        let wanted = by_resource.get(MEMORY).copied().unwrap_or(0);
        let available = node.memory.saturating_sub(pools);
        if wanted > available {
            overruns.push(ReservationOverrun {
                node: node.id,
                resource: MEMORY.to_string(),
                reserved: wanted,
                available,
            });
        }
    }
    overruns
}

/// Whether the node has a huge page pool of the size `name` names.
fn by_resource_has_pool(node: &topoalign_model::NumaNode, name: &str) -> bool {
    node.hugepages
        .keys()
        .any(|&size| topoalign_model::hugepage_resource_name(size) == name)
}

fn kubelet_error(text: impl Into<String>) -> MemoryManagerStartError {
    MemoryManagerStartError::Kubelet(text.into())
}

/// The reservations summed per resource (kubelet
/// `getTotalMemoryTypeReserved`).
fn reserved_totals(machine: &Machine, config: &MemoryManagerConfig) -> Result<ResourceList, MemoryManagerStartError> {
    let mut totals = ResourceList::new();
    for reservation in &config.reserved_memory {
        // `numa_node` is the configuration's id: on a machine numbered anew
        // (NUMA ids past 63) its original id.
        if machine.numa_id_of_label(reservation.numa_node).is_none() {
            return Err(kubelet_error(format!(
                "the reserved memory configuration references a NUMA node {} that does not exist on this machine",
                reservation.numa_node
            )));
        }
        for (resource, &amount) in &reservation.limits {
            // The kubelet adds the running total to the new amount, so the
            // new amount's format wins unless it is zero.
            let total = totals.get(resource).map_or(amount, |&so_far| amount + so_far);
            totals.insert(resource.clone(), total);
        }
    }
    Ok(totals)
}

/// Check 2 (kubelet `validateReservedMemory`). The kubelet walks the
/// resources in Go map order, so with several mismatches the one it names
/// varies; here the first in name order is named.
fn check_totals_match_node_allocatable(
    reserved_totals: &ResourceList,
    node_allocatable_reservation: &ResourceList,
) -> Result<(), MemoryManagerStartError> {
    let resources: BTreeSet<&String> = reserved_totals
        .keys()
        .chain(
            node_allocatable_reservation
                .keys()
                .filter(|r| r.as_str() == MEMORY || is_hugepage_resource(r)),
        )
        .collect();
    for resource in resources {
        // Both sides start from a zero quantity, as in the kubelet, so an
        // absent side prints as "0".
        let node_allocatable = node_allocatable_reservation
            .get(resource)
            .map_or(Quantity::ZERO, |&q| Quantity::ZERO + q);
        let reserved = reserved_totals
            .get(resource)
            .map_or(Quantity::ZERO, |&q| Quantity::ZERO + q);
        // Go compares exactly (`Cmp`), to the billionth.
        if node_allocatable != reserved {
            return Err(kubelet_error(format!(
                "the total amount \"{reserved}\" of type \"{resource}\" is not equal to the value \"{node_allocatable}\" determined by Node Allocatable feature"
            )));
        }
    }
    Ok(())
}

/// Check 3 (kubelet `convertReserved`): bytes per node and resource. A node
/// listed twice keeps its last amount per resource, as in the kubelet.
fn per_node_bytes(machine: &Machine, config: &MemoryManagerConfig) -> Result<SystemReserved, MemoryManagerStartError> {
    let mut reserved: SystemReserved = machine
        .numa_nodes()
        .iter()
        .map(|n| (n.id, Default::default()))
        .collect();
    for reservation in &config.reserved_memory {
        for (resource, &amount) in &reservation.limits {
            let bytes = quantity_as_u64(amount)
                .ok_or_else(|| kubelet_error("could not covert a variable of type Quantity to int64"))?;
            let node = machine
                .numa_id_of_label(reservation.numa_node)
                .unwrap_or(reservation.numa_node);
            reserved.entry(node).or_default().insert(resource.clone(), bytes);
        }
    }
    Ok(reserved)
}
