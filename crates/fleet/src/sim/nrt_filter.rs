//! The NRT-approximate scheduler's filter: what the scheduler-plugins
//! NodeResourceTopologyMatch plugin decides from a node's NRT zones —
//! per-NUMA *available counts only*, with no knowledge of which CPUs,
//! which memory groups or which device ids are free.
//!
//! Its rules (scheduler-plugins `pkg/noderesourcetopology/filter.go`):
//! - only nodes whose topology manager policy is `single-numa-node` are
//!   filtered; any other policy passes every pod;
//! - BestEffort pods asking for no extended resource pass;
//! - container scope: each init container must fit in some zone on its
//!   own; each app container must fit in some zone, and what it asks is
//!   taken from the lowest-numbered zone that fits before the next one is
//!   checked;
//! - pod scope: the pod's effective request must fit in one zone;
//! - "fits" for one resource: a request of zero is ignored; a resource the
//!   node does not list at all fails; a non-native resource (and
//!   `ephemeral-storage`) that no zone lists is fine (node level only); for
//!   non-Guaranteed pods cpu, memory and huge pages always fit; otherwise
//!   the zone's `available` must cover the request.

use topoalign_engine::{NumaUsage, TopologyPolicyName, TopologyScope};
use topoalign_model::{Pod, QosClass, Quantity, ResourceList, resource_name};

/// Whether the plugin lets `pod` onto a node with these zones.
pub(crate) fn admits(
    policy: TopologyPolicyName,
    scope: TopologyScope,
    zones: &[NumaUsage],
    node_allocatable: &ResourceList,
    pod: &Pod,
) -> bool {
    if policy != TopologyPolicyName::SingleNumaNode {
        return true;
    }
    let all = pod
        .all_containers()
        .flat_map(|(c, _)| c.requests.keys())
        .any(|r| !resource_name::is_native(r));
    if pod.qos == QosClass::BestEffort && !all {
        return true;
    }
    match scope {
        TopologyScope::Pod => {
            let request = topoalign_engine::fit::pod_request_totals(pod);
            fitting_zone(zones, node_allocatable, &request, pod.qos).is_some()
        }
        TopologyScope::Container => {
            let mut zones = zones.to_vec();
            for init in &pod.init_containers {
                if fitting_zone(&zones, node_allocatable, &init.requests, pod.qos).is_none() {
                    return false;
                }
            }
            for container in &pod.containers {
                let Some(z) = fitting_zone(&zones, node_allocatable, &container.requests, pod.qos) else {
                    return false;
                };
                for (resource, amount) in &container.requests {
                    if let Some(a) = zones[z].resources.get_mut(resource) {
                        a.available -= *amount;
                    }
                }
            }
            true
        }
    }
}

/// The lowest-numbered zone every requested resource fits in (index into
/// `zones`), as the plugin's `resourcesAvailableInAnyNUMANodes`.
fn fitting_zone(
    zones: &[NumaUsage],
    node_allocatable: &ResourceList,
    request: &ResourceList,
    qos: QosClass,
) -> Option<usize> {
    let mut candidates: Vec<bool> = vec![true; zones.len()];
    for (resource, &amount) in request {
        if amount == Quantity::ZERO {
            continue;
        }
        if !node_allocatable.contains_key(resource) {
            return None;
        }
        let listed = zones.iter().any(|z| z.resources.contains_key(resource));
        if !listed && (!resource_name::is_native(resource) || resource == resource_name::EPHEMERAL_STORAGE) {
            continue;
        }
        for (i, zone) in zones.iter().enumerate() {
            let suitable = zone.resources.get(resource).is_some_and(|a| {
                (qos != QosClass::Guaranteed && resource_name::is_cpu_or_memory(resource)) || a.available >= amount
            });
            candidates[i] &= suitable;
        }
        if !candidates.iter().any(|&c| c) {
            return None;
        }
    }
    candidates.iter().position(|&c| c)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use topoalign_engine::ResourceUsage;
    use topoalign_model::{Container, CpuSet};

    use super::*;

    fn zone(numa: usize, cpus: i128, memory_gi: i128) -> NumaUsage {
        let amounts = |q: Quantity| ResourceUsage {
            capacity: q,
            allocatable: q,
            allocated: Quantity::ZERO,
            available: q,
            placed: true,
        };
        NumaUsage {
            numa,
            cpus: CpuSet::new(),
            reserved_cpus: CpuSet::new(),
            free_cpus: None,
            free_devices: BTreeMap::new(),
            resources: BTreeMap::from([
                ("cpu".to_string(), amounts(Quantity::from_units(cpus))),
                ("memory".to_string(), amounts(Quantity::from_units(memory_gi << 30))),
            ]),
        }
    }

    fn pod(qos: QosClass, containers: &[(i128, i128)]) -> Pod {
        Pod {
            namespace: "default".into(),
            name: "p".into(),
            uid: "u".into(),
            qos,
            init_containers: Vec::new(),
            containers: containers
                .iter()
                .enumerate()
                .map(|(i, &(cpu, gi))| {
                    let r = ResourceList::from_iter([
                        ("cpu".to_string(), Quantity::from_units(cpu)),
                        ("memory".to_string(), Quantity::from_units(gi << 30)),
                    ]);
                    Container {
                        name: format!("c{i}"),
                        requests: r.clone(),
                        limits: r,
                        restartable: false,
                    }
                })
                .collect(),
            overhead: ResourceList::new(),
            pod_resources: None,
        }
    }

    fn allocatable() -> ResourceList {
        ResourceList::from_iter([
            ("cpu".to_string(), Quantity::from_units(16)),
            ("memory".to_string(), Quantity::from_units(64 << 30)),
        ])
    }

    #[test]
    fn the_plugins_rules() {
        use QosClass::{Burstable, Guaranteed};
        use TopologyPolicyName::{Restricted, SingleNumaNode};
        use TopologyScope::{Container, Pod};
        let zones = [zone(0, 4, 16), zone(1, 6, 16)];
        // (policy, scope, pod, admitted)
        let table = [
            (SingleNumaNode, Container, pod(Guaranteed, &[(6, 8)]), true),
            (SingleNumaNode, Container, pod(Guaranteed, &[(7, 8)]), false),
            // Each container alone fits, but the second no longer fits after the first took zone 1.
            (SingleNumaNode, Container, pod(Guaranteed, &[(5, 1), (5, 1)]), false),
            (SingleNumaNode, Container, pod(Guaranteed, &[(4, 1), (5, 1)]), true),
            (SingleNumaNode, Pod, pod(Guaranteed, &[(4, 1), (4, 1)]), false),
            (SingleNumaNode, Pod, pod(Guaranteed, &[(3, 1), (3, 1)]), true),
            // Burstable: cpu and memory always "fit" per zone.
            (SingleNumaNode, Container, pod(Burstable, &[(12, 8)]), true),
            // Other policies are not filtered at all.
            (Restricted, Container, pod(Guaranteed, &[(12, 8)]), true),
            (TopologyPolicyName::BestEffort, Pod, pod(Guaranteed, &[(12, 8)]), true),
        ];
        for (i, (policy, scope, pod, admitted)) in table.into_iter().enumerate() {
            assert_eq!(admits(policy, scope, &zones, &allocatable(), &pod), admitted, "row {i}");
        }
    }

    #[test]
    fn resources_the_node_lacks_fail_and_unzoned_extended_resources_pass() {
        let zones = [zone(0, 4, 16)];
        let mut gpu_pod = pod(QosClass::Guaranteed, &[(1, 1)]);
        let gpu = ("example.com/gpu".to_string(), Quantity::from_units(1));
        gpu_pod.containers[0].requests.insert(gpu.0.clone(), gpu.1);
        let policy = TopologyPolicyName::SingleNumaNode;
        assert!(!admits(
            policy,
            TopologyScope::Container,
            &zones,
            &allocatable(),
            &gpu_pod
        ));
        let mut with_gpu = allocatable();
        with_gpu.insert(gpu.0, gpu.1);
        assert!(admits(policy, TopologyScope::Container, &zones, &with_gpu, &gpu_pod));
    }
}
