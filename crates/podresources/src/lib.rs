//! The kubelet's PodResources API v1 — `List`, `GetAllocatableResources`
//! and `Get` on the kubelet's Unix socket (by default
//! [`DEFAULT_SOCKET`]) — as topoalign uses it:
//!
//! - [`Client`] asks a kubelet what it allocated, and gives the answer as
//!   plain data ([`PodAllocation`], [`Allocatable`]), checked (a CPU id or
//!   NUMA node id no machine has is an error naming the field);
//! - [`serve`] answers the same calls for a node no kubelet runs on (tests,
//!   simulated nodes), from whatever [`Snapshot`] the caller provides —
//!   the real protocol on a real socket.
//!
//! The wire types are generated from the kubelet's own `proto/api.proto`
//! ([`v1`]).
//!
//! [`pod_allocations`] gives the answer a kubelet with a given state (its
//! checkpoints read back) must give, and [`differences`] what differs
//! between two answers; [`allocatable_of`] the `GetAllocatableResources`
//! answer a kubelet with a given machine and configuration must give, and
//! [`allocatable_differences`] what differs from it (the one check
//! `diagnose` and the follower make).
//!
//! The plain data ([`PodAllocation`] and its parts, [`pod_allocations`],
//! [`differences`]) is always built; the protocol ([`Client`], [`serve`],
//! [`v1`], [`PodResourcesError`]) only with the `grpc` feature (on by
//! default), so a pure crate such as `topoalign-explain` can compare
//! answers without pulling in tonic, tokio and the proto compiler.
//!
//! Owns: the protocol and its conversion. Must not touch:
//! decisions (the engine's) or what the allocations mean for a node's state
//! (the follower's).

mod allocatable;
#[cfg(feature = "grpc")]
mod client;
#[cfg(feature = "grpc")]
mod convert;
#[cfg(feature = "grpc")]
mod server;
mod state;

use std::collections::BTreeMap;

use topoalign_model::CpuSet;

pub use allocatable::{AllocatableDifference, allocatable_differences, allocatable_of};
#[cfg(feature = "grpc")]
pub use client::Client;
#[cfg(feature = "grpc")]
pub use server::{SnapshotSource, serve};
pub use state::{Difference, Field, differences, pod_allocations};

/// The generated wire types and service stubs of `proto/api.proto`.
#[cfg(feature = "grpc")]
#[allow(clippy::unwrap_used, missing_docs)] // reason: generated code
pub mod v1 {
    tonic::include_proto!("v1");
}

/// Where a kubelet serves the API.
pub const DEFAULT_SOCKET: &str = "/var/lib/kubelet/pod-resources/kubelet.sock";

/// The largest CPU id accepted from a peer: Linux's `NR_CPUS` upper bound
/// (`CONFIG_NR_CPUS` is at most 8192 on every architecture the kubelet
/// supports). Beyond it an id is an error, not a bitmap to allocate.
pub const MAX_CPU_ID: u32 = 8191;

/// The largest NUMA node id accepted from a peer (Linux `MAX_NUMNODES`
/// is at most 1024).
pub const MAX_NUMA_ID: usize = 1023;

/// What a kubelet reports of one pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodAllocation {
    pub namespace: String,
    pub name: String,
    pub containers: Vec<ContainerAllocation>,
}

/// What a kubelet reports of one container.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ContainerAllocation {
    pub name: String,
    /// Exclusive CPUs (empty when the container runs in the shared pool).
    pub cpus: CpuSet,
    /// Memory and huge pages the memory manager pinned.
    pub memory: Vec<MemoryBlock>,
    /// Device ids per resource.
    pub devices: BTreeMap<String, Vec<DeviceGroup>>,
    /// Devices DRA allocated to it through its resource claims
    /// (`dynamic_resources`), one per device. The kubelet's checkpoints
    /// that `topoalign-observe` reads hold none of these: only the
    /// PodResources answer has them.
    pub dynamic: Vec<DynamicDevice>,
}

/// One device a resource claim gave a container (`DynamicResource` and
/// one of its `ClaimResource`s): the driver/pool/device triplet names the
/// device uniquely.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct DynamicDevice {
    pub claim_namespace: String,
    pub claim_name: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
}

/// Memory of one type on some NUMA nodes (`ContainerMemory`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryBlock {
    /// `memory` or `hugepages-<size>`.
    pub resource: String,
    /// Bytes.
    pub size: u64,
    /// NUMA nodes, ascending.
    pub numa: Vec<usize>,
}

/// Devices of one resource that share a topology (`ContainerDevices`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceGroup {
    pub ids: Vec<String>,
    /// NUMA nodes, ascending; empty when the device has no affinity.
    pub numa: Vec<usize>,
}

/// What the node can allocate (`GetAllocatableResources`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Allocatable {
    pub cpus: CpuSet,
    pub memory: Vec<MemoryBlock>,
    pub devices: BTreeMap<String, Vec<DeviceGroup>>,
}

/// Everything a server answers from: the pods with their allocations and
/// what the node can allocate.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub pods: Vec<PodAllocation>,
    pub allocatable: Allocatable,
}

/// Why a PodResources call failed.
#[cfg(feature = "grpc")]
#[derive(Debug, thiserror::Error)]
pub enum PodResourcesError {
    /// The socket could not be reached.
    #[error("{socket}: cannot connect to the kubelet's PodResources API: {message}")]
    Connect { socket: String, message: String },
    /// The kubelet answered the call with an error status.
    #[error("{socket}: {method}: {code:?}: {message}")]
    Call {
        socket: String,
        method: &'static str,
        code: tonic::Code,
        message: String,
    },
    /// The answer holds a value no node has.
    #[error("{socket}: {method}: {field}: {message}")]
    Invalid {
        socket: String,
        method: &'static str,
        field: String,
        message: String,
    },
}
