//! The scheduler's Dynamic Resource Allocation (DRA) allocator for
//! structured parameters: given a node, the cluster's DeviceClasses and
//! ResourceSlices, the devices other claims already hold, and a pod's
//! ResourceClaims, which devices each claim's requests get — or why none fit —
//! exactly as `k8s.io/dynamic-resource-allocation/structured` decides in the
//! kube-scheduler of each release (1.34–1.37).
//!
//! The Topology Manager never sees these devices: the kubelet prepares claims
//! after admission. This crate is the DRA half of "where will the pod's
//! devices be"; the engine is the kubelet half.
//!
//! Owns: the allocation case format shared with the Go oracle ([`case`]),
//! the release's DRA feature defaults ([`features`]), CEL device selectors
//! ([`selector`]), the allocation search ([`allocator`]) and DRA-backed
//! extended resources, the plugin's special claim ([`extended`]), which nodes
//! a ResourceSlice and its devices serve ([`nodesel`]); the devices
//! allocated claims hold, for callers counting free devices ([`held`]). Pure: no files,
//! clocks or network; inputs are resource.k8s.io/v1 objects as k8s-openapi
//! reads them.

pub mod allocator;
mod capacity;
pub mod case;
pub mod extended;
pub mod features;
pub mod held;
pub mod names;
pub mod nodesel;
mod pools;
pub mod selector;

pub use allocator::{allocate, allocate_with};
pub use case::{AllocationCase, Outcome};
pub use extended::{PodCase, PodOutcome, allocate_pod};
pub use held::{DeviceId, held_devices};
