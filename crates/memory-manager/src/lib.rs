//! The kubelet's Memory Manager, as a pure library: the `None` and `Static`
//! policies, per-NUMA-node regular memory and huge pages, multi-NUMA groups.
//!
//! Owns: the per-NUMA memory table (`memory_manager_state`'s machine state),
//! per-container memory blocks, hint generation, allocation, init-container
//! memory reuse. Must not touch: files, clocks, logging, other managers'
//! state. The caller (the engine's node) decides when each entry point runs,
//! in the kubelet's order; the affinity chosen by the topology manager is
//! passed in.

use std::collections::BTreeMap;

use topoalign_model::{Container, Machine, Pod, ProviderHints, Quantity, ResourceList, TopologyHint};

/// `memoryManagerPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryPolicyName {
    None,
    Static,
}

/// One `reservedMemory` entry of the KubeletConfiguration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReservedMemory {
    pub numa_node: usize,
    /// Resource name (`memory`, `hugepages-1Gi`, ...) → amount.
    pub limits: ResourceList,
}

/// What the memory manager is started with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryManagerConfig {
    pub policy: MemoryPolicyName,
    pub reserved_memory: Vec<ReservedMemory>,
    /// The node-allocatable reservation per resource (systemReserved +
    /// kubeReserved + hard eviction), against which `reservedMemory` is
    /// validated.
    pub node_allocatable_reservation: ResourceList,
}

/// Why the memory manager refuses to start. Display is the kubelet's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryManagerStartError {
    #[error("{0}")]
    Kubelet(String),
}

/// Why an allocation failed after the topology manager admitted the pod
/// (kubelet: `UnexpectedAdmissionError`). Display is the kubelet's text,
/// e.g. `[memorymanager] failed to find NUMA nodes to extend the current
/// topology hint`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MemoryAllocateError(pub String);

/// The memory manager of one node.
#[derive(Clone, Debug)]
pub struct MemoryManager {
    _private: (),
}

impl MemoryManager {
    /// Creates and starts the manager with empty state, as the kubelet's
    /// `NewManager` + `Start` do.
    ///
    /// # Errors
    /// [`MemoryManagerStartError`] with the kubelet's start-up error text.
    pub fn start(_machine: &Machine, _config: &MemoryManagerConfig) -> Result<MemoryManager, MemoryManagerStartError> {
        todo!("memory manager start")
    }

    /// Hints for one container (container scope).
    pub fn container_hints(&mut self, _pod: &Pod, _container: &Container) -> ProviderHints {
        todo!()
    }

    /// Hints for the whole pod (pod scope).
    pub fn pod_hints(&mut self, _pod: &Pod) -> ProviderHints {
        todo!()
    }

    /// Pins the container's memory if the pod qualifies.
    ///
    /// # Errors
    /// [`MemoryAllocateError`] as the kubelet's `Allocate` fails.
    pub fn allocate(
        &mut self,
        _pod: &Pod,
        _container: &Container,
        _affinity: TopologyHint,
    ) -> Result<(), MemoryAllocateError> {
        todo!()
    }

    /// The container was started (kubelet `AddContainer`): releases the
    /// blocks of the pod's earlier non-restartable init containers.
    pub fn add_container(&mut self, _pod: &Pod, _container: &Container) {
        todo!()
    }

    /// Releases everything the pod holds.
    pub fn remove_pod(&mut self, _pod_uid: &str) {
        todo!()
    }

    /// The NUMA nodes the container's memory is pinned to, if pinned.
    pub fn container_numa_nodes(&self, _pod_uid: &str, _container: &str) -> Option<Vec<usize>> {
        todo!()
    }

    /// All pinned containers: pod uid → container name → NUMA nodes.
    pub fn assignments(&self) -> BTreeMap<String, BTreeMap<String, Vec<usize>>> {
        todo!()
    }

    /// Free amount per NUMA node and resource, for explanations.
    pub fn free(&self) -> BTreeMap<usize, BTreeMap<String, Quantity>> {
        todo!()
    }
}
