//! The kubelet's Memory Manager, as a pure library: the `None` and `Static`
//! policies, per-NUMA-node regular memory and huge pages, multi-NUMA groups.
//!
//! Owns: the per-NUMA memory table (`memory_manager_state`'s machine state),
//! per-container memory blocks, hint generation, allocation, init-container
//! memory reuse. Must not touch: files, clocks, logging, other managers'
//! state. The caller (the engine's node) decides when each entry point runs,
//! in the kubelet's order; the affinity chosen by the topology manager is
//! passed in.
//!
//! Code map:
//! - `validation`: the Static policy's start-up checks of `reservedMemory`.
//! - `machine_state`: the per-node, per-resource table; taking and giving
//!   back memory; the single- vs multi-NUMA group rule.
//! - `requests`: what a container or a pod asks for.
//! - `hints`: which masks can hold a request, which are preferred, the best
//!   of a list.
//! - `init_reuse`: memory of finished init containers that later
//!   containers of the same pod take over.
//! - `policy_static`: the Static policy: blocks per container, `Allocate`,
//!   `RemoveContainer`, `AddContainer`.
//! - `restore`: [`MemoryManagerState`] (what `memory_manager_state` holds)
//!   and restoring it the way a restarting kubelet does (`validateState`).
//!
//! The `None` policy keeps no state and is handled here.
//!
//! Architecture invariant: every decision is the kubelet's Static policy's,
//! including its Go `uint64` wrap-arounds (a reservation larger than its
//! node starts, as in the kubelet; [`reservation_overruns`] names it for a
//! warning) and its tie-breaks;
//! where the kubelet follows Go map order (which mismatching resource a
//! start-up error names) the first in name order is chosen.

mod hints;
mod init_reuse;
mod machine_state;
mod policy_static;
mod requests;
mod restore;
mod validation;

pub use validation::reservation_overruns;

use std::collections::BTreeMap;

use topoalign_model::{
    Container, KubeletVersion, Machine, NumaMask, Pod, ProviderHints, Quantity, QuantityFormat, ResourceList,
    TopologyHint,
};

use crate::policy_static::StaticPolicy;

pub use restore::{
    BlocksView, MemoryBlock, MemoryBlockView, MemoryManagerState, MemoryRestoreError, MemoryStateView,
    MemoryTableState, NumaMemoryState, NumaMemoryView,
};

topoalign_model::kubelet_vocabulary! {
    /// `memoryManagerPolicy` (capitalised, unlike the other policies).
    pub enum MemoryPolicyName("memory manager policy") {
        None = "None",
        Static = "Static",
    }
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
    /// The kubelet release whose decisions to reproduce.
    pub kubelet_version: KubeletVersion,
    /// `PodLevelResourceManagers` in force (`FeatureGates::pod_level_managers`).
    pub pod_level_managers: bool,
}

/// Why the memory manager refuses to start. Display is the kubelet's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryManagerStartError {
    #[error("{0}")]
    Kubelet(String),
}

/// A NUMA node that reserves more of a resource than it has. The kubelet
/// starts with it and computes about 16 EiB free (Go `uint64` wraps), so it
/// admits and pins pods to memory that does not exist: a hazard to warn
/// about beside the kubelet's answers, never a different answer. Display is
/// the warning.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "reservedMemory: NUMA node {node} reserves {reserved} bytes of {resource} but has only {available} \
     (memory counts without the huge page pools); the kubelet starts anyway, computes about 16 EiB free \
     there (uint64 wrap-around) and will pin pods to memory that does not exist"
)]
pub struct ReservationOverrun {
    pub node: usize,
    pub resource: String,
    pub reserved: u64,
    pub available: u64,
}

/// Why an allocation failed after the topology manager admitted the pod
/// (kubelet: `UnexpectedAdmissionError`). Display is the kubelet's text,
/// e.g. `[memorymanager] failed to find NUMA nodes to extend the current
/// topology hint`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct MemoryAllocateError(pub String);

/// What a container's `Allocate` does instead of pinning its memory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryAllocateFailure {
    /// It fails with the kubelet's error.
    #[error(transparent)]
    Error(#[from] MemoryAllocateError),
    /// The kubelet crashes: with no topology affinity (policy `none`) the
    /// Static policy computes a default hint over masks of every NUMA node
    /// (`calculateHints`, `bitmask.IterateBitMasks`), `bitmask.NewBitMask`
    /// fails for NUMA id `numa_id` (64 or more; the error is discarded)
    /// and the nil mask is dereferenced.
    #[error(
        "the memory manager's default hint dereferences a nil NUMA mask: NUMA node id {numa_id} does not fit the \
         kubelet's 64-bit masks"
    )]
    KubeletPanic { numa_id: usize },
}

/// Why `AllocatePod` failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryPodAllocateError {
    /// The pod's shared containers would get no memory (kubelet
    /// `EmptyPodSharedPoolError`, the admission reason of the same name).
    #[error("{0}")]
    EmptyPodSharedPool(String),
    /// Any other failure (kubelet: `UnexpectedAdmissionError`).
    #[error(transparent)]
    Other(#[from] MemoryAllocateError),
}

/// The memory manager of one node.
#[derive(Clone, Debug)]
pub struct MemoryManager {
    policy: Policy,
}

/// The active policy. `None` keeps no state: no hints, no pinning.
#[derive(Clone, Debug)]
enum Policy {
    None,
    Static(Box<StaticPolicy>),
}

impl MemoryManager {
    /// Creates and starts the manager with empty state, as the kubelet's
    /// `NewManager` + `Start` do. Only the Static policy checks
    /// `reservedMemory`.
    ///
    /// # Errors
    /// [`MemoryManagerStartError`] with the kubelet's start-up error text.
    pub fn start(machine: &Machine, config: &MemoryManagerConfig) -> Result<MemoryManager, MemoryManagerStartError> {
        let policy = match config.policy {
            MemoryPolicyName::None => Policy::None,
            MemoryPolicyName::Static => {
                let system_reserved = validation::system_reserved_memory(machine, config)?;
                Policy::Static(Box::new(StaticPolicy::new(
                    machine,
                    &system_reserved,
                    config.kubelet_version,
                    config.pod_level_managers,
                )))
            }
        };
        Ok(MemoryManager { policy })
    }

    /// Hints for one container (container scope). Non-Guaranteed pods, the
    /// `None` policy, and requests no NUMA combination can hold all give no
    /// preference.
    pub fn container_hints(&mut self, pod: &Pod, container: &Container) -> ProviderHints {
        match &self.policy {
            Policy::None => ProviderHints::no_preference(),
            Policy::Static(policy) => hints::to_provider_hints(policy.container_hints(pod, container)),
        }
    }

    /// Hints for the whole pod (pod scope).
    pub fn pod_hints(&mut self, pod: &Pod) -> ProviderHints {
        match &self.policy {
            Policy::None => ProviderHints::no_preference(),
            Policy::Static(policy) => hints::to_provider_hints(policy.pod_hints(pod)),
        }
    }

    /// Pins the container's memory if the pod qualifies.
    ///
    /// # Errors
    /// [`MemoryAllocateFailure`] as the kubelet's `Allocate` fails (or crashes).
    pub fn allocate(
        &mut self,
        pod: &Pod,
        container: &Container,
        affinity: TopologyHint,
    ) -> Result<(), MemoryAllocateFailure> {
        match &mut self.policy {
            Policy::None => Ok(()),
            Policy::Static(policy) => policy.allocate(pod, container, affinity).map_err(|e| match e {
                policy_static::AllocateError::NumaIdPastMasks(numa_id) => {
                    MemoryAllocateFailure::KubeletPanic { numa_id }
                }
                e => MemoryAllocateError(e.to_string()).into(),
            }),
        }
    }

    /// Reserves the memory of a whole pod managed at the pod level (kubelet
    /// `AllocatePod`, called by the pod scope instead of `allocate` for each
    /// container when `PodLevelResourceManagers` is on and the pod has
    /// pod-level resources), then divides it among the containers.
    ///
    /// # Errors
    /// [`MemoryPodAllocateError`] as the kubelet's `AllocatePod` fails.
    pub fn allocate_pod(&mut self, pod: &Pod, affinity: TopologyHint) -> Result<(), MemoryPodAllocateError> {
        match &mut self.policy {
            Policy::None => Ok(()),
            Policy::Static(policy) => policy.allocate_pod(pod, affinity).map_err(|e| match e {
                policy_static::PodAllocateError::EmptyPodSharedPool(text) => {
                    MemoryPodAllocateError::EmptyPodSharedPool(text)
                }
                policy_static::PodAllocateError::Allocate(e) => {
                    MemoryPodAllocateError::Other(MemoryAllocateError(e.to_string()))
                }
            }),
        }
    }

    /// The pod-level assignments (`podEntries`): pod uid → the NUMA nodes of
    /// the pod's memory.
    pub fn pod_assignments(&self) -> BTreeMap<String, Vec<usize>> {
        let Policy::Static(policy) = &self.policy else {
            return BTreeMap::new();
        };
        policy
            .pod_assignments()
            .map(|(uid, blocks)| (uid.to_string(), numa_nodes_of(blocks).unwrap_or_default()))
            .collect()
    }

    /// The container was started (kubelet `AddContainer`): releases the
    /// blocks of the pod's earlier non-restartable init containers.
    pub fn add_container(&mut self, pod: &Pod, container: &Container) {
        if let Policy::Static(policy) = &mut self.policy {
            policy.add_container(pod, container);
        }
    }

    /// Releases everything the pod holds.
    pub fn remove_pod(&mut self, pod_uid: &str) {
        if let Policy::Static(policy) = &mut self.policy {
            policy.remove_pod(pod_uid);
        }
    }

    /// The NUMA nodes the container's memory is pinned to, if pinned
    /// (kubelet `GetMemoryNUMANodes`): every node of every block, ascending.
    pub fn container_numa_nodes(&self, pod_uid: &str, container: &str) -> Option<Vec<usize>> {
        let Policy::Static(policy) = &self.policy else {
            return None;
        };
        numa_nodes_of(policy.blocks(pod_uid, container)?)
    }

    /// Every container the Static policy holds blocks for: pod uid →
    /// container name → NUMA nodes. A container allocated nothing (no
    /// memory requested in a pod Guaranteed by its pod-level resources)
    /// is listed with no nodes, as the kubelet's state lists it.
    pub fn assignments(&self) -> BTreeMap<String, BTreeMap<String, Vec<usize>>> {
        let mut assignments: BTreeMap<String, BTreeMap<String, Vec<usize>>> = BTreeMap::new();
        let Policy::Static(policy) = &self.policy else {
            return assignments;
        };
        for (pod_uid, container, blocks) in policy.all_blocks() {
            assignments
                .entry(pod_uid.to_string())
                .or_default()
                .insert(container.to_string(), numa_nodes_of(blocks).unwrap_or_default());
        }
        assignments
    }

    /// The Static policy's table for NUMA node `numa` (resource → usage);
    /// `None` under the `None` policy, which keeps no table.
    pub fn table(&self, numa: usize) -> Option<&BTreeMap<String, MemoryTableState>> {
        let Policy::Static(policy) = &self.policy else {
            return None;
        };
        policy.machine_state().nodes.get(&numa).map(|state| &state.memory)
    }

    /// Feeds the Static policy's machine state to `state`: per NUMA node
    /// its table, its assignment count and its group (nothing of which pod
    /// holds what); only `false` under the `None` policy.
    pub fn hash_machine_state<H: std::hash::Hasher>(&self, state: &mut H) {
        use std::hash::Hash;
        let Policy::Static(policy) = &self.policy else {
            false.hash(state);
            return;
        };
        true.hash(state);
        for (id, node) in &policy.machine_state().nodes {
            (id, node.assignments, node.cells).hash(state);
            for (resource, table) in &node.memory {
                (resource, table.total, table.system_reserved, table.allocatable).hash(state);
                (table.reserved, table.free).hash(state);
            }
        }
    }

    /// Free amount per NUMA node and resource, for explanations. Empty
    /// under the `None` policy, which keeps no table.
    pub fn free(&self) -> BTreeMap<usize, BTreeMap<String, Quantity>> {
        let Policy::Static(policy) = &self.policy else {
            return BTreeMap::new();
        };
        policy
            .machine_state()
            .nodes
            .iter()
            .map(|(&node, state)| {
                let free = state
                    .memory
                    .iter()
                    .map(|(resource, table)| {
                        // Bytes read best in binary notation (`31644Mi`).
                        let free = Quantity::from_units(i128::from(table.free)).with_format(QuantityFormat::BinarySI);
                        (resource.clone(), free)
                    })
                    .collect();
                (node, free)
            })
            .collect()
    }
}

/// The union of the blocks' NUMA nodes, ascending; `None` when empty.
fn numa_nodes_of(blocks: &[machine_state::Block]) -> Option<Vec<usize>> {
    let mask = blocks.iter().fold(NumaMask::EMPTY, |mask, block| mask | block.affinity);
    (!mask.is_empty()).then(|| mask.nodes().collect())
}
