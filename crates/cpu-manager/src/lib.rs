//! The kubelet's CPU Manager, as a pure library: the `none` and `static`
//! policies, their options, topology hints and exclusive CPU assignment.
//!
//! Owns: the CPU view of the machine ([`CpuTopology`]), the shared pool and
//! per-container exclusive CPU sets, hint generation, the CPU allocator
//! (`takeByTopology` and its variants), init-container CPU reuse.
//! Must not touch: files, clocks, logging, other managers' state. The caller
//! (the engine's node) decides when each entry point runs, in the kubelet's
//! order; the affinity chosen by the topology manager is passed in.
//!
//! Code map:
//! - `topology`: [`CpuTopology`], the machine as the kubelet's CPU manager
//!   sees it (cores named by their lowest CPU, NUMA nodes with CPUs only).
//! - `options`: [`StaticPolicyOptions`], parsed and validated at start.
//! - `assignment`: [`take_by_topology`], the allocator (packed, spread,
//!   NUMA-distributed, uncore-cache aware), quirks included.
//! - `hints`: [`generate_cpu_topology_hints`].
//! - `policy_static`: the static policy's state and entry points.
//! - `restore`: [`CpuManagerState`] (what `cpu_manager_state` holds) and
//!   restoring it the way a restarting kubelet does (`validateState`).
//! - this file: [`CpuManager`], the `none`/`static` dispatch and start-up.

mod assignment;
mod hints;
#[cfg(test)]
mod machines;
mod options;
mod policy_static;
mod restore;
mod topology;

pub use assignment::{CpuSortingStrategy, TakeError, take_by_topology};
pub use hints::{CpuHintRule, generate_cpu_topology_hints};
pub use options::{CpuPolicyOption, PolicyOptionError, StaticPolicyOptions};
pub use policy_static::StaticPolicyError;
pub use restore::{CpuManagerState, CpuRestoreError, CpuStateView, SharedCpus};
pub use topology::{CpuInfo, CpuTopology};

use std::collections::BTreeMap;

use topoalign_model::{
    Container, CpuSet, FeatureGates, KubeletVersion, Machine, Pod, ProviderHints, Quantity, TopologyHint,
};

use policy_static::StaticPolicy;

topoalign_model::kubelet_vocabulary! {
    /// `cpuManagerPolicy`.
    pub enum CpuPolicyName("CPU manager policy") {
        None = "none",
        Static = "static",
    }
}

/// What the CPU manager is started with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuManagerConfig {
    pub policy: CpuPolicyName,
    /// `cpuManagerPolicyOptions` as written; parsed and validated at start.
    pub options: BTreeMap<String, String>,
    /// `reservedSystemCPUs`, when given (already checked to be a subset of
    /// the machine's CPUs).
    pub reserved_system_cpus: Option<CpuSet>,
    /// The node-allocatable CPU reservation (systemReserved + kubeReserved
    /// cpu, after `reservedSystemCPUs` overrode them) as the kubelet's
    /// `GetNodeAllocatableReservation` gives it: `None` when nothing was
    /// reserved *or the sum is zero* (the kubelet drops zero entries, so a
    /// `cpu: "0"` reservation reads "unable to determine reserved CPU
    /// resources"; `Some(0)` gives `NewManager`'s own zero check).
    pub reserved_cpu: Option<Quantity>,
    pub feature_gates: FeatureGates,
    /// The kubelet release whose rules to follow.
    pub kubelet_version: KubeletVersion,
    /// Whether the topology manager policy is `single-numa-node`
    /// (incompatible with `align-by-socket`).
    pub topology_policy_is_single_numa_node: bool,
}

/// Why the CPU manager refuses to start. Display is the kubelet's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuManagerStartError {
    /// An error from the kubelet's `NewManager` / `NewStaticPolicy`, with the
    /// kubelet's exact message (e.g. `new static policy error: ...`).
    #[error("{0}")]
    Kubelet(String),
}

/// Why an allocation failed after the topology manager admitted the pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CpuAllocateError {
    /// `full-pcpus-only` refused a request; the kubelet's admission reason
    /// is `SMTAlignmentError` and the message is this error's text.
    #[error("{0}")]
    SmtAlignment(String),
    /// Any other failure (kubelet: `UnexpectedAdmissionError`); the text is
    /// the kubelet's error, e.g. `not enough cpus available to satisfy
    /// request: requested=4, available=3`.
    #[error("{0}")]
    Other(String),
    /// A pod managed at the pod level whose exclusive containers leave no
    /// CPUs for the ones that share (kubelet `EmptyPodSharedPoolError`,
    /// the admission reason of the same name); the text is the kubelet's.
    #[error("{0}")]
    EmptyPodSharedPool(String),
}

/// Why the manager refuses to start, structured; [`CpuManager::start`]
/// reports it as [`CpuManagerStartError::Kubelet`] with this text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum StartError {
    #[error("new none policy error: None policy: received unsupported options={}", go_map(.0))]
    NonePolicyOptions(BTreeMap<String, String>),
    /// `topology.Discover` on a machine without CPUs.
    #[error("could not detect number of cpus")]
    NoCpus,
    #[error("[cpumanager] unable to determine reserved CPU resources for static policy")]
    NoCpuReservation,
    #[error("[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero")]
    ZeroCpuReservation,
    #[error("new static policy error: {0}")]
    StaticPolicy(#[from] StaticPolicyError),
}

/// Go's `%v` of a `map[string]string`: `map[k1:v1 k2:v2]`, keys sorted.
fn go_map(map: &BTreeMap<String, String>) -> String {
    let pairs: Vec<String> = map.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    format!("map[{}]", pairs.join(" "))
}

/// The active policy and its state.
#[derive(Clone, Debug)]
enum Policy {
    /// Every container runs in the shared pool; the state stays empty.
    None,
    Static(Box<StaticPolicy>),
}

/// The CPU manager of one node.
#[derive(Clone, Debug)]
pub struct CpuManager {
    policy: Policy,
}

impl CpuManager {
    /// Creates and starts the manager with empty state, as the kubelet's
    /// `NewManager` + `Start` do (reserved CPUs chosen by the allocator when
    /// `reservedSystemCPUs` is not given).
    ///
    /// # Errors
    /// [`CpuManagerStartError`] with the kubelet's start-up error text.
    pub fn start(machine: &Machine, config: &CpuManagerConfig) -> Result<CpuManager, CpuManagerStartError> {
        let policy = start_policy(machine, config).map_err(|e| CpuManagerStartError::Kubelet(e.to_string()))?;
        Ok(CpuManager { policy })
    }

    /// The machine as the static policy sees it (`None` for the `none`
    /// policy, which never looks at the topology).
    pub fn topology(&self) -> Option<&CpuTopology> {
        match &self.policy {
            Policy::None => None,
            Policy::Static(p) => Some(p.topology()),
        }
    }

    /// Hints for one container (container scope). `None` policy: no preference.
    pub fn container_hints(&mut self, pod: &Pod, container: &Container) -> ProviderHints {
        match &self.policy {
            Policy::None => ProviderHints::no_preference(),
            Policy::Static(p) => p.container_hints(pod, container),
        }
    }

    /// Hints for the whole pod (pod scope).
    pub fn pod_hints(&mut self, pod: &Pod) -> ProviderHints {
        match &self.policy {
            Policy::None => ProviderHints::no_preference(),
            Policy::Static(p) => p.pod_hints(pod),
        }
    }

    /// Assigns exclusive CPUs to `container` if it qualifies, using the
    /// topology manager's `affinity` for it.
    ///
    /// # Errors
    /// [`CpuAllocateError`] as the kubelet's `Allocate` fails.
    pub fn allocate(
        &mut self,
        pod: &Pod,
        container: &Container,
        affinity: TopologyHint,
    ) -> Result<(), CpuAllocateError> {
        match &mut self.policy {
            Policy::None => Ok(()),
            Policy::Static(p) => p.allocate(pod, container, affinity.affinity),
        }
    }

    /// Allocates for a whole pod managed at the pod level (kubelet
    /// `AllocatePod`, called by the pod scope instead of `allocate` for
    /// each container when `PodLevelResourceManagers` is on and the pod has
    /// pod-level resources): the pod's CPUs, then its containers' inside them.
    ///
    /// # Errors
    /// [`CpuAllocateError`] as the kubelet's `AllocatePod` fails.
    pub fn allocate_pod(&mut self, pod: &Pod, affinity: TopologyHint) -> Result<(), CpuAllocateError> {
        match &mut self.policy {
            Policy::None => Ok(()),
            Policy::Static(p) => p.allocate_pod(pod, affinity.affinity),
        }
    }

    /// The container was started (kubelet `AddContainer`). The kubelet only
    /// records the container id and its cgroup state there; no decision
    /// depends on it.
    pub fn add_container(&mut self, _pod: &Pod, _container: &Container) {}

    /// Releases everything the pod holds (deletion, or garbage collection
    /// of a pod that is no longer active).
    pub fn remove_pod(&mut self, pod_uid: &str) {
        if let Policy::Static(p) = &mut self.policy {
            p.remove_pod(pod_uid);
        }
    }

    /// The shared pool (`defaultCpuSet` of `cpu_manager_state`); empty under
    /// the `none` policy, which never fills it.
    pub fn default_cpu_set(&self) -> CpuSet {
        match &self.policy {
            Policy::None => CpuSet::new(),
            Policy::Static(p) => p.shared().clone(),
        }
    }

    /// The exclusive CPUs of one container, if it has any.
    pub fn container_cpus(&self, pod_uid: &str, container: &str) -> Option<CpuSet> {
        match &self.policy {
            Policy::None => None,
            Policy::Static(p) => p.assignment(pod_uid, container).cloned(),
        }
    }

    /// The pod-level assignments (`podEntries`): pod uid → CPUs.
    pub fn pod_assignments(&self) -> BTreeMap<String, CpuSet> {
        match &self.policy {
            Policy::None => BTreeMap::new(),
            Policy::Static(p) => p.pod_assignments().clone(),
        }
    }

    /// The CPUs held exclusively by containers, and those held by pods at
    /// the pod level (`podEntries`), each as one set (who holds what left
    /// out; nothing is copied but the sets). Empty under the `none` policy.
    pub fn held_cpus(&self) -> (CpuSet, CpuSet) {
        let mut by_containers = CpuSet::new();
        let mut by_pods = CpuSet::new();
        if let Policy::Static(p) = &self.policy {
            for cpus in p.assignments().values().flat_map(|containers| containers.values()) {
                by_containers.union_with(cpus);
            }
            for cpus in p.pod_assignments().values() {
                by_pods.union_with(cpus);
            }
        }
        (by_containers, by_pods)
    }

    /// All exclusive assignments: pod uid → container name → CPUs.
    pub fn assignments(&self) -> BTreeMap<String, BTreeMap<String, CpuSet>> {
        match &self.policy {
            Policy::None => BTreeMap::new(),
            Policy::Static(p) => p
                .assignments()
                .iter()
                .map(|(pod, containers)| {
                    (
                        pod.clone(),
                        containers
                            .iter()
                            .map(|(name, cpus)| (name.clone(), cpus.clone()))
                            .collect(),
                    )
                })
                .collect(),
        }
    }
}

/// `NewManager` for each policy, in the kubelet's order of checks.
fn start_policy(machine: &Machine, config: &CpuManagerConfig) -> Result<Policy, StartError> {
    match config.policy {
        CpuPolicyName::None => {
            if !config.options.is_empty() {
                return Err(StartError::NonePolicyOptions(config.options.clone()));
            }
            Ok(Policy::None)
        }
        CpuPolicyName::Static => {
            let topology = CpuTopology::from_machine(machine);
            if topology.num_cpus() == 0 {
                return Err(StartError::NoCpus);
            }
            let reserved = config.reserved_cpu.ok_or(StartError::NoCpuReservation)?;
            if reserved.is_zero() {
                return Err(StartError::ZeroCpuReservation);
            }
            // Fractional CPUs cannot be reserved exclusively: round up, as
            // Go does it: `int(math.Ceil(float64(MilliValue()) / 1000))`
            // (MilliValue wrapped past int64; the quotient always fits).
            #[allow(clippy::cast_precision_loss, reason = "Go's float64(int64) conversion rounds too")]
            let reserved_cpus = reserved.go_milli_value() as f64 / 1000.0;
            #[allow(clippy::cast_possible_truncation, reason = "at most 9.3e15: exact in i64")]
            let num_reserved = reserved_cpus.ceil() as i64;
            let options = StaticPolicyOptions::parse(&config.options, &config.feature_gates, config.kubelet_version)
                .map_err(StaticPolicyError::from)?;
            let policy = StaticPolicy::new(
                topology,
                options,
                config.topology_policy_is_single_numa_node,
                num_reserved,
                config.reserved_system_cpus.as_ref(),
            )?
            .for_release(config.kubelet_version, &config.feature_gates);
            Ok(Policy::Static(Box::new(policy)))
        }
    }
}

#[cfg(test)]
mod tests;
