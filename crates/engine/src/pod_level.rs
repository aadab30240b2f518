//! Pod-level resources (`spec.resources`) as the node's kubelet release
//! sees them when a pod arrives.
//!
//! Owns: whether the node honours them at all (the `PodLevelResources`
//! gate: alpha and off in 1.32 and 1.33, on from 1.34), the API server's
//! defaulting of them, which resource names each release covers, and the
//! QoS class they give. Must not touch: what the managers do with such a
//! pod (from 1.34 the CPU and memory managers leave it in the shared pool
//! and give no hints: each manager checks [`Pod::pod_resources`]) nor the
//! fit check's sums (`fit`).
//!
//! A pod leaves [`as_admitted`] with `pod_resources` either `None` (the
//! gate off, or no `spec.resources`) or holding only covered names,
//! defaulted; the rest of the engine reads it without asking the release.

use topoalign_model::{FeatureGates, KubeletVersion, Pod, PodResources, QosClass, ResourceList};

use topoalign_model::resource_name;

/// Whether pod-level management covers `resource` in some release: `cpu`,
/// `memory` and, from 1.33, huge pages (component-helpers
/// `IsSupportedPodLevelResource`).
pub(crate) fn covers(resource: &str) -> bool {
    resource_name::is_cpu_or_memory(resource)
}

/// [`covers`] for one release.
fn covers_in(resource: &str, version: KubeletVersion) -> bool {
    covers(resource) && (!resource_name::is_hugepages(resource) || version.at_least(KubeletVersion::V1_33))
}

/// `pod` as a kubelet of `version` with `gates` admits it: its pod-level
/// resources defaulted (core/v1 `SetDefaults_Pod`) and its QoS class taken
/// from them (`ComputePodQOS`) when the gate is on; without them otherwise.
pub(crate) fn as_admitted(mut pod: Pod, gates: &FeatureGates, version: KubeletVersion) -> Pod {
    let Some(written) = pod.pod_resources.take() else {
        return pod;
    };
    if !gates.pod_level_resources(version) {
        return pod;
    }
    let resources = if gates.pod_level_defaulting_moved(version) {
        // 1.37: the API server's create step defaults them
        // (`DefaultPodLevelResources`); the kubelet's defaulting does not.
        covered(written, version)
    } else {
        defaulted(&pod, written, version)
    };
    // 1.37: `spec.resources` naming nothing covered leaves the QoS class to
    // the containers; before, it decided (BestEffort).
    if resources.is_set() || !gates.pod_level_qos_needs_set_resources(version) {
        pod.qos = QosClass::of_pod_resources(&resources);
    }
    pod.pod_resources = Some(resources);
    pod
}

/// The API server's defaulting of `spec.resources` (after the containers'
/// own), then only the names `version` covers kept.
fn defaulted(pod: &Pod, written: PodResources, version: KubeletVersion) -> PodResources {
    let PodResources {
        mut requests,
        mut limits,
    } = written;
    // From 1.33 (`defaultHugePagePodLimits`): a huge page size the
    // containers limit and the pod names neither as request nor as limit
    // gets the containers' sum as its pod-level limit.
    if version.at_least(KubeletVersion::V1_33) && (!requests.is_empty() || !limits.is_empty()) {
        let container_limits = pod.aggregate_containers(|c| &c.limits, resource_name::is_hugepages);
        for (resource, amount) in container_limits {
            if !requests.contains_key(&resource) {
                limits.entry(resource).or_insert(amount);
            }
        }
    }
    // `defaultPodRequests`, only when some pod-level limit is given: a
    // covered, overcommittable resource the containers request gets their
    // sum; any other covered limit without a request becomes the request.
    if !limits.is_empty() {
        let container_requests = pod.aggregate_containers(|c| &c.requests, |r| matches!(r, "cpu" | "memory"));
        for (resource, amount) in container_requests {
            requests.entry(resource).or_insert(amount);
        }
        for (resource, amount) in &limits {
            if covers_in(resource, version) {
                requests.entry(resource.clone()).or_insert(*amount);
            }
        }
    }
    covered(PodResources { requests, limits }, version)
}

/// Only the names `version` covers.
fn covered(resources: PodResources, version: KubeletVersion) -> PodResources {
    let keep = |list: ResourceList| -> ResourceList {
        list.into_iter()
            .filter(|(resource, _)| covers_in(resource, version))
            .collect()
    };
    PodResources {
        requests: keep(resources.requests),
        limits: keep(resources.limits),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_model::{Container, Quantity};

    fn list(pairs: &[(&str, Quantity)]) -> ResourceList {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    fn pod(container: ResourceList, pod_level: Option<PodResources>) -> Pod {
        Pod {
            namespace: "default".into(),
            name: "p".into(),
            uid: "u".into(),
            qos: QosClass::of_containers(&[], &[]),
            init_containers: Vec::new(),
            containers: vec![Container {
                name: "c".into(),
                requests: container.clone(),
                limits: container,
                restartable: false,
            }],
            overhead: ResourceList::new(),
            pod_resources: pod_level,
        }
    }

    const GI: i128 = 1 << 30;

    fn gates(set: Option<bool>) -> FeatureGates {
        FeatureGates {
            pod_level_resources_set: set,
            ..FeatureGates::default()
        }
    }

    #[test]
    fn the_gate_decides_per_release() {
        let both = list(&[("cpu", Quantity::from_units(2)), ("memory", Quantity::from_units(GI))]);
        let p = || {
            pod(
                ResourceList::new(),
                Some(PodResources {
                    requests: both.clone(),
                    limits: both.clone(),
                }),
            )
        };
        // | release | gate as set | pod-level read | QoS |
        let table = [
            (KubeletVersion::V1_32, None, false, QosClass::BestEffort),
            (KubeletVersion::V1_33, None, false, QosClass::BestEffort),
            (KubeletVersion::V1_34, None, true, QosClass::Guaranteed),
            (KubeletVersion::V1_32, Some(true), true, QosClass::Guaranteed),
            (KubeletVersion::V1_34, Some(false), false, QosClass::BestEffort),
        ];
        for (version, set, read, qos) in table {
            let admitted = as_admitted(p(), &gates(set), version);
            assert_eq!(admitted.pod_resources.is_some(), read, "{version} {set:?}");
            assert_eq!(admitted.qos, qos, "{version} {set:?}");
        }
    }

    #[test]
    fn requests_default_from_containers_then_from_limits() {
        let limits = list(&[
            ("cpu", Quantity::from_units(4)),
            ("memory", Quantity::from_units(2 * GI)),
        ]);
        let p = pod(
            list(&[("cpu", Quantity::from_units(1))]),
            Some(PodResources {
                requests: ResourceList::new(),
                limits: limits.clone(),
            }),
        );
        let admitted = as_admitted(p, &gates(Some(true)), KubeletVersion::V1_34);
        let resources = admitted.pod_resources.expect("gate on");
        // cpu from the container's request, memory from the pod's limit.
        assert_eq!(
            resources.requests,
            list(&[
                ("cpu", Quantity::from_units(1)),
                ("memory", Quantity::from_units(2 * GI))
            ])
        );
        assert_eq!(admitted.qos, QosClass::Burstable);
    }

    /// 1.37: the kubelet's defaulting no longer fills pod-level requests
    /// (`PodLevelResourcesFixDefaulting`), and `spec.resources` naming only
    /// uncovered resources leaves the QoS class to the containers
    /// (`PodLevelResourcesFixKubeletQOSClass`); both gates can be set off.
    #[test]
    fn from_1_37_no_kubelet_defaulting_and_qos_from_set_resources_only() {
        let limits = list(&[("cpu", Quantity::from_units(4))]);
        let written = |limits: &ResourceList| {
            Some(PodResources {
                requests: ResourceList::new(),
                limits: limits.clone(),
            })
        };
        let container = list(&[("cpu", Quantity::from_units(1)), ("memory", Quantity::from_units(GI))]);
        let admitted = as_admitted(
            pod(container.clone(), written(&limits)),
            &gates(None),
            KubeletVersion::V1_37,
        );
        assert!(admitted.pod_resources.expect("gate on").requests.is_empty());
        let mut off = gates(None);
        off.pod_level_fix_defaulting_set = Some(false);
        let admitted = as_admitted(pod(container.clone(), written(&limits)), &off, KubeletVersion::V1_37);
        assert_eq!(admitted.pod_resources.expect("gate on").requests, container);

        // Only ephemeral storage at pod level: the containers decide in 1.37;
        // in 1.36 the pod-level requests defaulted from the containers (and
        // no limits) make it Burstable.
        let storage = list(&[("ephemeral-storage", Quantity::from_units(GI))]);
        // | release | fix-QoS gate as set | QoS |
        let table = [
            (KubeletVersion::V1_36, None, QosClass::Burstable),
            (KubeletVersion::V1_37, None, QosClass::Guaranteed),
            (KubeletVersion::V1_37, Some(false), QosClass::BestEffort),
        ];
        for (version, set, qos) in table {
            let mut g = gates(None);
            g.pod_level_fix_qos_set = set;
            let mut p = pod(container.clone(), written(&storage));
            p.qos = QosClass::of_containers(&[], &p.containers);
            assert_eq!(as_admitted(p, &g, version).qos, qos, "{version} {set:?}");
        }
    }

    #[test]
    fn huge_pages_are_covered_from_1_33() {
        let hp = list(&[
            ("hugepages-2Mi", Quantity::from_units(4 << 20)),
            ("cpu", Quantity::from_units(1)),
        ]);
        let written = || {
            Some(PodResources {
                requests: ResourceList::new(),
                limits: hp.clone(),
            })
        };
        let at = |version| {
            as_admitted(pod(ResourceList::new(), written()), &gates(Some(true)), version)
                .pod_resources
                .expect("gate on")
        };
        assert!(!at(KubeletVersion::V1_32).limits.contains_key("hugepages-2Mi"));
        assert_eq!(
            at(KubeletVersion::V1_33)
                .requests
                .get("hugepages-2Mi")
                .copied()
                .unwrap(),
            Quantity::from_units(4 << 20)
        );
    }

    #[test]
    fn no_spec_resources_no_change() {
        let p = pod(list(&[("cpu", Quantity::from_units(1))]), None);
        assert_eq!(as_admitted(p.clone(), &gates(Some(true)), KubeletVersion::V1_34), p);
    }
}
