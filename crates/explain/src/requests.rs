//! What a pod asks the aligned managers for, per resource: exclusive CPUs,
//! memory and huge pages, device-plugin devices — per container, and for
//! the whole pod the way the kubelet sizes a pod (the larger of the biggest
//! init container, plus the sidecars started before it, and the app
//! containers plus every sidecar).

use std::collections::BTreeMap;

use topoalign_engine::Node;
use topoalign_model::{Container, Pod, QosClass, Quantity, resource_name};

/// Whether the resource is one the aligned managers place on NUMA nodes on
/// this node: `cpu`, `memory`, huge pages, or a device resource it has.
pub(crate) fn is_aligned_resource(node: &Node, resource: &str) -> bool {
    resource_name::is_cpu_or_memory(resource) || node.machine().devices().contains_key(resource)
}

/// The container's requests of aligned resources (zero amounts left out).
/// CPUs count only when they are exclusive: a whole number in a Guaranteed
/// pod (anything else runs in the shared pool, placed by no manager).
pub(crate) fn container_requests(node: &Node, pod: &Pod, container: &Container) -> BTreeMap<String, Quantity> {
    container
        .requests
        .iter()
        .filter(|(resource, amount)| is_aligned_resource(node, resource) && !amount.is_zero())
        .filter(|(resource, amount)| {
            resource.as_str() != "cpu" || (pod.qos == QosClass::Guaranteed && amount.is_whole())
        })
        .map(|(resource, amount)| (resource.clone(), *amount))
        .collect()
}

/// The largest request of each aligned resource among the pod's
/// containers: what one NUMA node must hold under the container scope.
pub(crate) fn largest_container_requests(node: &Node, pod: &Pod) -> BTreeMap<String, Quantity> {
    let mut largest: BTreeMap<String, Quantity> = BTreeMap::new();
    for (container, _) in pod.all_containers() {
        for (resource, amount) in container_requests(node, pod, container) {
            let entry = largest.entry(resource).or_default();
            *entry = (*entry).max(amount);
        }
    }
    largest
}

/// The pod's requests of aligned resources, sized as the kubelet sizes a
/// pod for the pod scope.
pub(crate) fn pod_requests(node: &Node, pod: &Pod) -> BTreeMap<String, Quantity> {
    let of = |c: &Container| container_requests(node, pod, c);
    let init: Vec<(bool, BTreeMap<String, Quantity>)> =
        pod.init_containers.iter().map(|c| (c.restartable, of(c))).collect();
    let apps: Vec<BTreeMap<String, Quantity>> = pod.containers.iter().map(of).collect();
    let mut resources: Vec<String> = init
        .iter()
        .flat_map(|(_, r)| r.keys())
        .chain(apps.iter().flat_map(BTreeMap::keys))
        .cloned()
        .collect();
    resources.sort();
    resources.dedup();
    resources
        .into_iter()
        .filter_map(|resource| {
            let amount = |r: &BTreeMap<String, Quantity>| r.get(&resource).copied().unwrap_or_default();
            let mut sidecars = Quantity::ZERO;
            let mut by_init = Quantity::ZERO;
            for (restartable, requests) in &init {
                if *restartable {
                    sidecars += amount(requests);
                } else if sidecars + amount(requests) > by_init {
                    by_init = sidecars + amount(requests);
                }
            }
            let apps: Quantity = apps.iter().map(amount).sum();
            let total = by_init.max(apps + sidecars);
            (!total.is_zero()).then_some((resource, total))
        })
        .collect()
}
