//! The static policy for a pod managed at the pod level
//! (`PodLevelResourceManagers`, 1.36+, with pod-level resources): the
//! pod's CPUs ("bubble") taken from the shared pool as one allocation,
//! then divided among its containers — exclusive CPUs for the containers
//! that are Guaranteed by themselves, the rest of the bubble (the pod's own
//! shared pool) for the others.
//!
//! Owns: the pod's CPU count, the empty-pod-shared-pool check and
//! `AllocatePod`. Must not touch: hints (the parent reads the pod's count
//! and the check) nor release (the parent returns the bubble whole).

use std::collections::BTreeMap;

use topoalign_model::{CpuSet, NumaMask, Pod, QosClass};

use super::StaticPolicy;
use crate::CpuAllocateError;
use crate::assignment::take_by_topology;

/// `podGuaranteedCPUs` for a pod managed at the pod level: its pod-level
/// CPU request when the pod is Guaranteed and the request is whole, else 0.
pub(super) fn pod_cpus(pod: &Pod) -> i64 {
    if pod.qos != QosClass::Guaranteed {
        return 0;
    }
    let Some(cpu) = pod.pod_resources.as_ref().and_then(|r| r.requests.get("cpu")) else {
        return 0;
    };
    super::integral_cpus(*cpu)
}

impl StaticPolicy {
    /// `validatePodScopeResources`: containers that share the pod's CPUs
    /// need some left once the exclusive ones have theirs. The error is the
    /// kubelet's text.
    pub(super) fn validate_pod_scope(&self, pod: &Pod) -> Result<(), &'static str> {
        let budget = self.pod_guaranteed(pod);
        let mut shared_long_running = false;
        let mut exclusive_long_running = 0;
        for container in &pod.init_containers {
            let cpus = self.guaranteed(pod, container);
            if !container.restartable {
                if cpus == 0 && exclusive_long_running >= budget {
                    return Err("pod rejected, pod has shared init containers but no cpus available for them");
                }
            } else if cpus == 0 {
                shared_long_running = true;
            } else {
                exclusive_long_running += cpus;
            }
        }
        for container in &pod.containers {
            match self.guaranteed(pod, container) {
                0 => shared_long_running = true,
                cpus => exclusive_long_running += cpus,
            }
        }
        if shared_long_running && exclusive_long_running >= budget {
            return Err(
                "pod rejected, sum of exclusive container cpu requests equals pod budget, leaving no cpus for shared containers",
            );
        }
        Ok(())
    }

    /// `AllocatePod`: the bubble, preferring `affinity`'s NUMA nodes, then
    /// its division. Init containers reuse the bubble (minus the sidecars
    /// started before them); app containers take from what the sidecars
    /// leave, and the containers without CPUs of their own share the rest.
    pub(crate) fn allocate_pod(&mut self, pod: &Pod, affinity: Option<NumaMask>) -> Result<(), CpuAllocateError> {
        let total = self.pod_guaranteed(pod);
        if total == 0 {
            return Ok(());
        }
        self.validate_pod_scope(pod)
            .map_err(|e| CpuAllocateError::EmptyPodSharedPool(e.to_owned()))?;
        if self.options.full_pcpus_only {
            self.check_smt_alignment(total)
                .map_err(|e| CpuAllocateError::SmtAlignment(e.to_string()))?;
        }
        let bubble = self
            .allocate_cpus(total, affinity, &CpuSet::new())
            .map_err(|e| CpuAllocateError::Other(e.to_string()))?;
        self.pod_cpus.insert(pod.uid.clone(), bubble.clone());

        let take = |policy: &StaticPolicy, from: &CpuSet, count: i64| {
            take_by_topology(&policy.topology, &policy.options, from, count)
                .map_err(|e| CpuAllocateError::Other(e.to_string()))
        };
        let mut own: BTreeMap<&str, CpuSet> = BTreeMap::new();
        let mut sidecars = CpuSet::new();
        for container in &pod.init_containers {
            let runnable = bubble.difference(&sidecars);
            match self.guaranteed(pod, container) {
                0 if container.restartable => {}
                0 => {
                    own.insert(&container.name, runnable);
                }
                count => {
                    let cpus = take(self, &runnable, count)?;
                    if container.restartable {
                        sidecars = sidecars.union(&cpus);
                    }
                    own.insert(&container.name, cpus);
                }
            }
        }
        let mut pod_shared = bubble.difference(&sidecars);
        for container in &pod.containers {
            let count = self.guaranteed(pod, container);
            if count > 0 {
                let cpus = take(self, &pod_shared, count)?;
                pod_shared = pod_shared.difference(&cpus);
                own.insert(&container.name, cpus);
            }
        }
        let entry = std::sync::Arc::make_mut(self.assignments.entry(pod.uid.clone()).or_default());
        for (container, _) in pod.all_containers() {
            let cpus = own.get(container.name.as_str()).unwrap_or(&pod_shared).clone();
            entry.insert(container.name.clone(), cpus);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use topoalign_model::{
        Container, CpuSet, FeatureGates, KubeletVersion, PodResources, ProviderHints, Quantity, ResourceHints,
        ResourceList, TopologyHint,
    };

    use super::*;
    use crate::{CpuManager, CpuManagerConfig, CpuPolicyName};

    /// Two NUMA nodes of 4 cores, siblings N and N+8; CPU 0 reserved.
    fn manager(gate: Option<bool>) -> CpuManager {
        let machine = crate::tests::two_node_ht();
        let config = CpuManagerConfig {
            policy: CpuPolicyName::Static,
            options: BTreeMap::new(),
            reserved_system_cpus: Some(CpuSet::parse("0").unwrap()),
            reserved_cpu: Some(Quantity::from_units(1)),
            feature_gates: FeatureGates {
                pod_level_managers_set: gate,
                ..FeatureGates::default()
            },
            kubelet_version: KubeletVersion::V1_37,
            topology_policy_is_single_numa_node: false,
        };
        CpuManager::start(&machine, &config).unwrap()
    }

    fn list(cpu_milli: i128, memory: i128) -> ResourceList {
        [
            ("cpu".to_string(), Quantity::from_milli(cpu_milli)),
            ("memory".to_string(), Quantity::from_units(memory)),
        ]
        .into_iter()
        .collect()
    }

    /// Requests equal to limits: Guaranteed by itself.
    fn pinned(name: &str, cpus: i128) -> Container {
        Container {
            name: name.to_string(),
            requests: list(cpus * 1000, 1 << 30),
            limits: list(cpus * 1000, 1 << 30),
            restartable: false,
        }
    }

    /// Requests only: shares the pod's CPUs.
    fn shared(name: &str) -> Container {
        Container {
            name: name.to_string(),
            requests: list(250, 1 << 20),
            limits: ResourceList::new(),
            restartable: false,
        }
    }

    fn pod(cpus: i128, init: Vec<Container>, apps: Vec<Container>) -> Pod {
        let resources = list(cpus * 1000, 4 << 30);
        Pod {
            namespace: "default".to_string(),
            name: "p".to_string(),
            uid: "p".to_string(),
            qos: QosClass::Guaranteed,
            init_containers: init,
            containers: apps,
            overhead: Default::default(),
            pod_resources: Some(PodResources {
                requests: resources.clone(),
                limits: resources,
            }),
        }
    }

    fn on_node_0() -> TopologyHint {
        TopologyHint::new(topoalign_model::NumaMask::from_nodes([0]), true)
    }

    fn cpus(manager: &CpuManager, container: &str) -> CpuSet {
        manager.container_cpus("p", container).unwrap()
    }

    #[test]
    fn the_bubble_is_divided_among_the_containers() {
        let mut m = manager(Some(true));
        let side = Container {
            restartable: true,
            ..pinned("side", 1)
        };
        let p = pod(5, vec![side, shared("setup")], vec![pinned("app", 2), shared("rest")]);
        m.allocate_pod(&p, on_node_0()).unwrap();
        let bubble = m.pod_assignments()["p"].clone();
        assert_eq!(bubble.len(), 5);
        assert!(bubble.is_subset(&CpuSet::parse("1-3,8-11").unwrap()), "{bubble}");
        assert!(m.default_cpu_set().intersection(&bubble).is_empty());
        let (side, setup, app, rest) = (cpus(&m, "side"), cpus(&m, "setup"), cpus(&m, "app"), cpus(&m, "rest"));
        assert_eq!((side.len(), app.len()), (1, 2));
        assert_eq!(setup, bubble.difference(&side));
        assert_eq!(rest, bubble.difference(&side).difference(&app));
        m.remove_pod("p");
        assert_eq!(m.default_cpu_set(), CpuSet::parse("0-15").unwrap());
        assert!(m.pod_assignments().is_empty() && m.assignments().is_empty());
    }

    #[test]
    fn a_budget_the_exclusive_containers_use_up_is_refused() {
        let mut m = manager(Some(true));
        let p = pod(2, vec![], vec![pinned("app", 2), shared("rest")]);
        assert_eq!(m.pod_hints(&p), ProviderHints::single("cpu", ResourceHints::Impossible));
        assert_eq!(
            m.allocate_pod(&p, on_node_0()),
            Err(CpuAllocateError::EmptyPodSharedPool(
                "pod rejected, sum of exclusive container cpu requests equals pod budget, leaving no cpus for shared containers"
                    .to_string()
            ))
        );
        assert_eq!(m.default_cpu_set(), CpuSet::parse("0-15").unwrap());
        let sidecar_first = pod(
            2,
            vec![
                Container {
                    restartable: true,
                    ..pinned("side", 2)
                },
                shared("setup"),
            ],
            vec![pinned("app", 0)],
        );
        assert_eq!(
            m.allocate_pod(&sidecar_first, on_node_0()),
            Err(CpuAllocateError::EmptyPodSharedPool(
                "pod rejected, pod has shared init containers but no cpus available for them".to_string()
            ))
        );
    }

    /// `validateState` counts the bubbles' CPUs only with the gate on: a
    /// bubble CPU no container holds is known then, missing without it
    /// (the kubelet's state does not read `podEntries`).
    #[test]
    fn restored_bubbles_count_only_with_the_gate() {
        let mut on = manager(Some(true));
        let p = pod(3, vec![], vec![pinned("app", 1), shared("rest")]);
        on.allocate_pod(&p, on_node_0()).unwrap();
        let mut state = on.state();
        assert_eq!(state.pod_assignments["p"].len(), 3);
        // The sharing container ends; its CPUs stay the pod's.
        state.assignments.get_mut("p").unwrap().remove("rest");

        let mut again = manager(Some(true));
        again.restore(state.clone()).unwrap();
        assert_eq!(again.state(), state);

        let mut off = manager(None);
        let missing = off.restore(state.clone()).unwrap_err();
        assert!(
            matches!(missing, crate::CpuRestoreError::CpusChanged { .. }),
            "{missing}"
        );
        state
            .assignments
            .get_mut("p")
            .unwrap()
            .insert("rest".into(), on.container_cpus("p", "rest").unwrap());
        off.restore(state.clone()).unwrap();
        assert!(off.state().pod_assignments.is_empty());
    }

    #[test]
    fn without_the_gate_such_pods_stay_in_the_shared_pool() {
        let mut m = manager(None);
        let p = pod(3, vec![], vec![pinned("app", 2), shared("rest")]);
        assert_eq!(m.pod_hints(&p), ProviderHints::no_preference());
        m.allocate(&p, &p.containers[0], on_node_0()).unwrap();
        assert_eq!(m.container_cpus("p", "app"), None);
        assert_eq!(m.default_cpu_set(), CpuSet::parse("0-15").unwrap());
    }
}
