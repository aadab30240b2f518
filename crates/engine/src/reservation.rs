//! The node-allocatable reservation: what the node keeps for the system,
//! the kubelet and hard eviction, per resource of its capacity.

use topoalign_model::{Quantity, ResourceList};

use crate::NodeConfig;

/// The kubelet's `GetNodeAllocatableReservation`: for every resource of
/// `capacity`, systemReserved + kubeReserved + hard eviction, keeping only
/// non-zero sums. The sum starts from a zero that takes the format of the
/// first amount added (Go's `Quantity.Add`), which is how the kubelet comes
/// to print `1124Mi` for `1Gi` + `100Mi`.
pub fn node_allocatable_reservation(capacity: &ResourceList, config: &NodeConfig) -> ResourceList {
    capacity
        .keys()
        .filter_map(|resource| {
            let total = [&config.system_reserved, &config.kube_reserved, &config.hard_eviction]
                .into_iter()
                .filter_map(|list| list.get(resource).copied())
                .fold(Quantity::ZERO, |sum, amount| sum + amount);
            (!total.is_zero()).then(|| (resource.clone(), total))
        })
        .collect()
}
