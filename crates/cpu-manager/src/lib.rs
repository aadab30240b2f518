//! The kubelet's CPU Manager, as a pure library: the `none` and `static`
//! policies, their options, topology hints and exclusive CPU assignment.
//!
//! Owns: the CPU view of the machine ([`CpuTopology`]), the shared pool and
//! per-container exclusive CPU sets, hint generation, the CPU allocator
//! (`takeByTopology` and its variants), init-container CPU reuse.
//! Must not touch: files, clocks, logging, other managers' state. The caller
//! (the engine's node) decides when each entry point runs, in the kubelet's
//! order; the affinity chosen by the topology manager is passed in.

mod topology;

pub use topology::CpuTopology;

use std::collections::BTreeMap;

use topoalign_model::{Container, CpuSet, FeatureGates, Machine, Pod, ProviderHints, Quantity, TopologyHint};

/// `cpuManagerPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuPolicyName {
    None,
    Static,
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
    /// cpu, after `reservedSystemCPUs` overrode them); `None` when no `cpu`
    /// entry was reserved at all.
    pub reserved_cpu: Option<Quantity>,
    pub feature_gates: FeatureGates,
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
}

/// The CPU manager of one node.
#[derive(Clone, Debug)]
pub struct CpuManager {
    _private: (),
}

impl CpuManager {
    /// Creates and starts the manager with empty state, as the kubelet's
    /// `NewManager` + `Start` do (reserved CPUs chosen by the allocator when
    /// `reservedSystemCPUs` is not given).
    ///
    /// # Errors
    /// [`CpuManagerStartError`] with the kubelet's start-up error text.
    pub fn start(_machine: &Machine, _config: &CpuManagerConfig) -> Result<CpuManager, CpuManagerStartError> {
        todo!("cpu manager start")
    }

    /// Hints for one container (container scope). `None` policy: no preference.
    pub fn container_hints(&mut self, _pod: &Pod, _container: &Container) -> ProviderHints {
        todo!()
    }

    /// Hints for the whole pod (pod scope).
    pub fn pod_hints(&mut self, _pod: &Pod) -> ProviderHints {
        todo!()
    }

    /// Assigns exclusive CPUs to `container` if it qualifies, using the
    /// topology manager's `affinity` for it.
    ///
    /// # Errors
    /// [`CpuAllocateError`] as the kubelet's `Allocate` fails.
    pub fn allocate(
        &mut self,
        _pod: &Pod,
        _container: &Container,
        _affinity: TopologyHint,
    ) -> Result<(), CpuAllocateError> {
        todo!()
    }

    /// The container was started (kubelet `AddContainer`).
    pub fn add_container(&mut self, _pod: &Pod, _container: &Container) {
        todo!()
    }

    /// Releases everything the pod holds (deletion, or garbage collection
    /// of a pod that is no longer active).
    pub fn remove_pod(&mut self, _pod_uid: &str) {
        todo!()
    }

    /// The shared pool (`defaultCpuSet` of `cpu_manager_state`).
    pub fn default_cpu_set(&self) -> CpuSet {
        todo!()
    }

    /// The exclusive CPUs of one container, if it has any.
    pub fn container_cpus(&self, _pod_uid: &str, _container: &str) -> Option<CpuSet> {
        todo!()
    }

    /// All exclusive assignments: pod uid → container name → CPUs.
    pub fn assignments(&self) -> BTreeMap<String, BTreeMap<String, CpuSet>> {
        todo!()
    }
}
