//! topoalign's alignment engine: a [`Node`] that admits and releases pods
//! exactly as the kubelet v1.32 would, and explains every decision.
//!
//! Owns: the wiring of the topology, device, CPU and memory managers in the
//! kubelet's order, the resource-fit check, decisions and explanations,
//! snapshots of a node's state and restoring them (`node/snapshot.rs`),
//! and the one read side of that state: per NUMA node what is there, what
//! may be given, what is given and what is free (`node/usage.rs`).
//! Pure: no files, clocks, network or async; callers do I/O and logging.

mod config;
mod decision;
pub mod fit;
mod hazard;
mod node;
mod pod_level;
mod reservation;

pub use config::{CpuPolicyName, MemoryPolicyName, NodeConfig, ReservedMemory, TopologyPolicyName, TopologyScope};
pub use decision::{
    ContainerPlacement, Decision, KubeletPanic, MergeRecord, MergeTrace, PanicSite, Provider, Rejection, RejectionStage,
};
pub use hazard::{CrashPoint, KubeletCrash, StartHazard};
pub use node::{
    Deletion, Node, NodeSnapshot, NodeState, NumaUsage, PendingReason, ResizeDecision, ResizeError, ResizeOutcome,
    ResourceUsage, RestoreError, SnapshotView, TrialAdmission, UsageReader,
};
pub use reservation::node_allocatable_reservation;
/// The managers' state types a [`NodeSnapshot`] is made of.
pub use topoalign_cpu_manager::{CpuManagerState, CpuStateView};
pub use topoalign_device_manager::{
    ContainerDevicesView, DeviceAssignments, DeviceIdsView, DevicesView, PodDevicesView,
};
pub use topoalign_memory_manager::{
    BlocksView, MemoryBlock, MemoryBlockView, MemoryManagerState, MemoryStateView, MemoryTableState, NumaMemoryState,
    NumaMemoryView, ReservationOverrun,
};
pub use topoalign_topology_manager::MergeStrategy;

use topoalign_cpu_manager::CpuManagerStartError;
use topoalign_memory_manager::MemoryManagerStartError;
use topoalign_topology_manager::TopologyManagerStartError;

/// Why a node would not start: the kubelet would refuse this configuration
/// on this machine. Display is the kubelet's error text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartupError {
    #[error(transparent)]
    TopologyManager(#[from] TopologyManagerStartError),
    #[error(transparent)]
    CpuManager(#[from] CpuManagerStartError),
    #[error(transparent)]
    MemoryManager(#[from] MemoryManagerStartError),
    /// The node-allocatable reservation exceeds capacity.
    #[error(transparent)]
    NodeAllocatable(#[from] fit::NodeAllocatableError),
}
