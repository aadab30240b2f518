//! The CPU manager's state as its checkpoint (`cpu_manager_state`) holds it,
//! and restoring a manager from it the way a restarting kubelet does
//! (checkpoint restore, then the static policy's `validateState`).
//!
//! Owns: [`CpuManagerState`], [`CpuManager::state`],
//! [`CpuManager::restore`] and its [`CpuRestoreError`] texts, and the free
//! CPUs explanations read ([`CpuManager::available_cpus`]). Must not touch:
//! the checkpoint file format and its checksum (that is `topoalign-k8s`) or
//! any allocation decision.

use std::collections::BTreeMap;
use std::sync::Arc;

use topoalign_model::{CpuSet, FlatMap};

use crate::{CpuManager, Policy};

/// What `cpu_manager_state` records: the shared pool and each container's
/// exclusive CPUs, by pod uid then container name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpuManagerState {
    /// `defaultCpuSet`; empty under the `none` policy.
    pub default_cpu_set: CpuSet,
    /// `entries`: pod uid → container name → CPUs.
    pub assignments: BTreeMap<String, BTreeMap<String, CpuSet>>,
    /// `podEntries` (`PodLevelResourceManagers`, 1.36+): pod uid → the
    /// CPUs taken from the shared pool for the whole pod (its "bubble"),
    /// which its containers' entries divide.
    pub pod_assignments: BTreeMap<String, CpuSet>,
}

/// Exclusive CPUs that two containers' assignments both hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SharedCpus {
    /// `(pod uid, container)` holding them first, in state order.
    pub first: (String, String),
    pub second: (String, String),
    pub cpus: CpuSet,
}

impl CpuManagerState {
    /// Assignments that overlap: the kubelet's `validateState` checks each
    /// assignment against the shared pool and the machine, but not against
    /// the others, so a kubelet restarts on such a file and both containers
    /// run on the same "exclusive" CPUs. Worth a warning; linear in the
    /// state's size.
    pub fn shared_cpus(&self) -> Vec<SharedCpus> {
        // (pod uid, container)
        type Holder<'a> = (&'a str, &'a str);
        let mut owner: BTreeMap<u32, Holder> = BTreeMap::new();
        let mut shared: BTreeMap<(Holder, Holder), CpuSet> = BTreeMap::new();
        for (pod, containers) in &self.assignments {
            for (container, cpus) in containers {
                let this = (pod.as_str(), container.as_str());
                for cpu in cpus.iter() {
                    match owner.get(&cpu) {
                        Some(&first) => shared.entry((first, this)).or_default().insert(cpu),
                        None => {
                            owner.insert(cpu, this);
                        }
                    }
                }
            }
        }
        shared
            .into_iter()
            .map(|((first, second), cpus)| SharedCpus {
                first: (first.0.to_owned(), first.1.to_owned()),
                second: (second.0.to_owned(), second.1.to_owned()),
                cpus,
            })
            .collect()
    }
}

/// Why a restarting kubelet refuses restored CPU manager state (the static
/// policy's `validateState`). Display is the kubelet's text; the kubelet
/// reports it as `start cpu manager error: <text>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuRestoreError {
    #[error("default cpuset cannot be empty")]
    EmptyDefaultCpuSet,
    #[error("some of strictly reserved cpus: \"{reserved}\" are present in defaultCpuSet: \"{pool}\"")]
    StrictReservedInPool { reserved: CpuSet, pool: CpuSet },
    #[error("not all reserved cpus: \"{reserved}\" are present in defaultCpuSet: \"{pool}\"")]
    ReservedNotInPool { reserved: CpuSet, pool: CpuSet },
    #[error("pod: {pod}, container: {container} cpuset: \"{cpus}\" overlaps with default cpuset \"{pool}\"")]
    /// (The sets are boxed: two names and two sets inline would make
    /// every `Result` carrying this error large.)
    OverlapsPool {
        pod: String,
        container: String,
        cpus: Box<CpuSet>,
        pool: Box<CpuSet>,
    },
    #[error("current set of available CPUs \"{machine}\" doesn't match with CPUs in state \"{state}\"")]
    CpusChanged { machine: CpuSet, state: CpuSet },
}

/// [`CpuManagerState`] borrowed from the manager, for a reader that only
/// writes it out (the NRT exact-state attribute): no copy of its maps.
#[derive(Clone, Copy, Debug)]
pub struct CpuStateView<'a> {
    pub default_cpu_set: &'a CpuSet,
    /// Pod uid → container → exclusive CPUs (each pod's map shared).
    pub assignments: &'a BTreeMap<String, Arc<FlatMap<String, CpuSet>>>,
    pub pod_assignments: &'a BTreeMap<String, CpuSet>,
}

impl CpuManager {
    /// [`CpuManager::state`] borrowed; `None` under the `none` policy, whose
    /// state is empty.
    pub fn state_view(&self) -> Option<CpuStateView<'_>> {
        match &self.policy {
            Policy::None => None,
            Policy::Static(p) => Some(CpuStateView {
                default_cpu_set: p.shared(),
                assignments: p.assignments(),
                pod_assignments: p.pod_assignments(),
            }),
        }
    }

    /// The state as the kubelet would checkpoint it now.
    pub fn state(&self) -> CpuManagerState {
        CpuManagerState {
            default_cpu_set: self.default_cpu_set(),
            assignments: self.assignments(),
            pod_assignments: self.pod_assignments(),
        }
    }

    /// Replaces the state with a restored one, as a restarting kubelet does:
    /// the static policy checks it (`validateState`) and keeps it; the `none`
    /// policy keeps nothing and checks nothing. Pod-level assignments are
    /// kept only with `PodLevelResourceManagers` on (the kubelet's state
    /// reads them only then). The policy name recorded in the checkpoint is
    /// the caller's to compare.
    ///
    /// # Errors
    /// [`CpuRestoreError`] with the kubelet's text; the manager is then
    /// unchanged.
    pub fn restore(&mut self, state: CpuManagerState) -> Result<(), CpuRestoreError> {
        match &mut self.policy {
            Policy::None => Ok(()),
            Policy::Static(policy) => policy.restore(state.default_cpu_set, state.assignments, state.pod_assignments),
        }
    }

    /// CPUs free for exclusive allocation (the kubelet's
    /// `GetAvailableCPUs`: the shared pool without the reserved CPUs);
    /// `None` under the `none` policy, which hands out no CPUs.
    pub fn available_cpus(&self) -> Option<CpuSet> {
        match &self.policy {
            Policy::None => None,
            Policy::Static(policy) => Some(policy.shared().difference(policy.reserved())),
        }
    }

    /// The CPUs reserved for the system (never handed out exclusively);
    /// empty under the `none` policy.
    pub fn reserved_cpus(&self) -> CpuSet {
        match &self.policy {
            Policy::None => CpuSet::new(),
            Policy::Static(policy) => policy.reserved().clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    #[test]
    fn overlapping_assignments_are_found_once_per_pair() {
        use super::{CpuManagerState, SharedCpus};
        let set = |text: &str| CpuSet::parse(text).unwrap_or_default();
        let mut state = CpuManagerState {
            default_cpu_set: set("0"),
            ..CpuManagerState::default()
        };
        state
            .assignments
            .insert("a".into(), BTreeMap::from([("x".to_owned(), set("1-3"))]));
        state
            .assignments
            .insert("b".into(), BTreeMap::from([("y".to_owned(), set("3-4"))]));
        state
            .assignments
            .insert("c".into(), BTreeMap::from([("z".to_owned(), set("5"))]));
        assert_eq!(
            state.shared_cpus(),
            vec![SharedCpus {
                first: ("a".into(), "x".into()),
                second: ("b".into(), "y".into()),
                cpus: set("3"),
            }]
        );
    }

    use topoalign_model::{CpuSet, FeatureGates, Machine};

    use crate::{CpuManager, CpuManagerConfig, CpuPolicyName, CpuRestoreError, restore::CpuManagerState};

    /// The kubelet's `topoDualSocketHT` as a machine: 2 sockets (= NUMA
    /// nodes) of 3 cores, siblings N and N+6, even CPUs on socket 0.
    fn dual_socket_ht() -> Machine {
        crate::tests::machine_from(12, |c| (c % 6, c % 2, (c % 2) as usize, None))
    }

    fn cpus(text: &str) -> CpuSet {
        CpuSet::parse(text).expect("valid cpuset literal")
    }

    fn manager(options: &[(&str, &str)]) -> CpuManager {
        let config = CpuManagerConfig {
            policy: CpuPolicyName::Static,
            options: options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            reserved_system_cpus: Some(cpus("0,6")),
            reserved_cpu: Some(topoalign_model::Quantity::from_units(2)),
            feature_gates: FeatureGates::default(),
            kubelet_version: topoalign_model::KubeletVersion::V1_32,
            topology_policy_is_single_numa_node: false,
        };
        CpuManager::start(&dual_socket_ht(), &config).expect("starts")
    }

    fn state(pool: &str, entries: &[(&str, &str, &str)]) -> CpuManagerState {
        let mut assignments: BTreeMap<String, BTreeMap<String, CpuSet>> = BTreeMap::new();
        for (pod, container, set) in entries {
            assignments
                .entry(pod.to_string())
                .or_default()
                .insert(container.to_string(), cpus(set));
        }
        CpuManagerState {
            default_cpu_set: cpus(pool),
            assignments,
            pod_assignments: BTreeMap::new(),
        }
    }

    /// The kubelet's `TestStaticPolicyStart` cases on `topoDualSocketHT`
    /// (12 CPUs, siblings N and N+6) with CPUs 0 and 6 reserved.
    #[test]
    fn validate_state_like_the_kubelet() {
        let table: [(&str, CpuManagerState, Result<(), &str>); 6] = [
            (
                "a consistent state",
                state("0-1,6-11", &[("pod", "app", "2-5")]),
                Ok(()),
            ),
            (
                "reserved CPU 6 missing from the pool",
                state("0-1,7-11", &[("pod", "app", "2-6")]),
                Err("not all reserved cpus: \"0,6\" are present in defaultCpuSet: \"0-1,7-11\""),
            ),
            (
                "assigned CPU 2 also in the pool",
                state("0,2-11", &[("pod", "app", "1-2")]),
                Err("pod: pod, container: app cpuset: \"1-2\" overlaps with default cpuset \"0,2-11\""),
            ),
            (
                "CPU 12 is not on the machine",
                state("0,5-12", &[("pod", "app", "1-4")]),
                Err("current set of available CPUs \"0-11\" doesn't match with CPUs in state \"0-12\""),
            ),
            (
                "CPU 11 is missing",
                state("0,5-10", &[("pod", "app", "1-4")]),
                Err("current set of available CPUs \"0-11\" doesn't match with CPUs in state \"0-10\""),
            ),
            (
                "an empty pool with assignments",
                state("", &[("pod", "app", "1-4")]),
                Err("default cpuset cannot be empty"),
            ),
        ];
        for (name, restored, expected) in table {
            let mut m = manager(&[]);
            let before = m.state();
            let result = m.restore(restored.clone()).map_err(|e| e.to_string());
            assert_eq!(result.as_ref().map(|_| ()).map_err(String::as_str), expected, "{name}");
            if result.is_ok() {
                assert_eq!(m.state(), restored, "{name}");
                assert_eq!(m.available_cpus(), Some(cpus("1,7-11")), "{name}");
            } else {
                assert_eq!(m.state(), before, "{name}: a refused state changes nothing");
            }
        }
    }

    #[test]
    fn an_empty_state_is_a_fresh_start() {
        let mut m = manager(&[]);
        m.restore(CpuManagerState::default()).expect("fresh");
        assert_eq!(m.state().default_cpu_set, cpus("0-11"));
        assert_eq!(m.reserved_cpus(), cpus("0,6"));
    }

    #[test]
    fn strict_reservation_keeps_reserved_cpus_out_of_the_pool() {
        let gates_on = |mut m: CpuManagerConfig| {
            m.feature_gates.cpu_manager_policy_alpha_options = true;
            m
        };
        let config = gates_on(CpuManagerConfig {
            policy: CpuPolicyName::Static,
            options: [("strict-cpu-reservation".to_string(), "true".to_string())].into(),
            reserved_system_cpus: Some(cpus("0,6")),
            reserved_cpu: Some(topoalign_model::Quantity::from_units(2)),
            feature_gates: FeatureGates::default(),
            kubelet_version: topoalign_model::KubeletVersion::V1_32,
            topology_policy_is_single_numa_node: false,
        });
        let mut m = CpuManager::start(&dual_socket_ht(), &config).expect("starts");
        assert_eq!(
            m.restore(state("0-1,7-11", &[("pod", "app", "2-5")])),
            Err(CpuRestoreError::StrictReservedInPool {
                reserved: cpus("0"),
                pool: cpus("0-1,7-11"),
            })
        );
        m.restore(state("1,7-11", &[("pod", "app", "2-5")])).expect("valid");
        assert_eq!(m.available_cpus(), Some(cpus("1,7-11")));
    }

    #[test]
    fn the_none_policy_keeps_nothing() {
        let config = CpuManagerConfig {
            policy: CpuPolicyName::None,
            options: BTreeMap::new(),
            reserved_system_cpus: None,
            reserved_cpu: None,
            feature_gates: FeatureGates::default(),
            kubelet_version: topoalign_model::KubeletVersion::V1_32,
            topology_policy_is_single_numa_node: false,
        };
        let mut m = CpuManager::start(&dual_socket_ht(), &config).expect("starts");
        m.restore(state("0-11", &[("pod", "app", "1")]))
            .expect("none checks nothing");
        assert_eq!(m.state(), CpuManagerState::default());
        assert_eq!(m.available_cpus(), None);
    }
}
