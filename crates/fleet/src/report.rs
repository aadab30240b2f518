//! The simulation report: one [`RunReport`] per policy × scope ×
//! scheduler. Serialized as the `-o json` document:
//!
//! ```json
//! {"nodes": 5000, "pods": 100000, "events": 100000, "skipped": {},
//!  "runs": [{"policy": "single-numa-node", "scope": "container", "scheduler": "exact",
//!            "scheduled": 99000, "rejectedAtAdmission": 0, "unplaced": 1000, ...,
//!            "rejectedPods": [], "unplacedPods": [{"pod": "default/gen-17",
//!              "reason": "no node has room for its requests"}, ...]}]}
//! ```
//!
//! Every sum adds up: `strandedByZone` sums to `strandedCpus`,
//! `strandedMemoryBytes` and `strandedDevices` (the simulator keeps them in
//! integers: millicores, bytes, devices).

use std::collections::BTreeMap;

use serde::Serialize;

/// The whole report.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub nodes: usize,
    pub pods: usize,
    pub events: usize,
    /// Workload documents that are not workloads, by kind.
    pub skipped: BTreeMap<String, usize>,
    pub runs: Vec<RunReport>,
}

/// One policy × scope × scheduler.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunReport {
    /// `none`, `best-effort`, `restricted`, `single-numa-node`.
    pub policy: String,
    /// `container`, `pod`, or `as-configured` when the fleet's own scopes
    /// were kept.
    pub scope: String,
    /// `unaware`, `nrt`, `exact`.
    pub scheduler: String,
    /// Pods placed and admitted.
    pub scheduled: usize,
    /// Pods placed on a node whose kubelet then rejected them.
    pub rejected_at_admission: usize,
    /// Pods no node passed the scheduler's filter for.
    pub unplaced: usize,
    /// Delete events in the workload.
    pub deleted: usize,
    /// Admission rejections by the kubelet's reason.
    pub rejection_reasons: BTreeMap<String, usize>,
    /// Never-placed pods by reason ([`UNPLACED_NO_ROOM`], [`UNPLACED_NRT`],
    /// [`UNPLACED_EXACT`]).
    pub unplaced_reasons: BTreeMap<String, usize>,
    /// The pods rejected at admission, in workload order, with the
    /// kubelet's reason (the words of `rejectionReasons`).
    pub rejected_pods: Vec<PodOutcome>,
    /// The pods never placed, in workload order, with why (the words of
    /// `unplacedReasons`).
    pub unplaced_pods: Vec<PodOutcome>,
    /// Free capacity left at the end, fleet-wide: per node the smaller of
    /// its zones' NRT `available` summed and its allocatable minus its
    /// requests.
    pub free_cpus: f64,
    pub free_memory_bytes: f64,
    /// Free capacity on nodes that admit none of the failed pods' shapes.
    pub stranded_cpus: f64,
    pub stranded_memory_bytes: f64,
    pub stranded_devices: BTreeMap<String, f64>,
    /// The same per NUMA zone (`node-<id>`), summed over nodes; adds up to
    /// the three above. Where a node's zones hold more than it has free
    /// node-wide (CPUs of the shared pool, memory the memory manager does
    /// not pin), its free amount is apportioned to its zones in proportion
    /// to their own.
    pub stranded_by_zone: Vec<ZoneCapacity>,
    pub fragmentation: Fragmentation,
    /// With `--verify`: the admission rejections counted when the run's
    /// placements are replayed node by node through fresh engine nodes
    /// ([`crate::replay_check`]); zero for `exact`, `rejectedAtAdmission`
    /// for the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay_rejected_at_admission: Option<usize>,
    /// Pods with DRA claims, or extended resources DRA serves (KEP-5004),
    /// placed and admitted (absent when none).
    #[serde(skip_serializing_if = "is_zero")]
    pub dra_pods: usize,
    /// Of those, the pods some of whose DRA devices sit off the NUMA nodes
    /// the kubelet pinned their CPUs and memory to (the one rule:
    /// `topoalign_scenario::dra::misaligned_devices`).
    #[serde(skip_serializing_if = "is_zero")]
    pub dra_misaligned: usize,
    /// Each of them, in workload order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dra_misaligned_pods: Vec<DraMisalignedPod>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A pod whose DRA devices miss the kubelet's NUMA nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DraMisalignedPod {
    /// `namespace/name`.
    pub pod: String,
    /// The node it was placed on.
    pub node: String,
    /// The NUMA nodes of its exclusive CPUs and pinned memory.
    pub kubelet_numa_nodes: Vec<usize>,
    /// `claim/request: device on NUMA node N`, each device off them.
    pub devices: Vec<String>,
}

/// A pod and what happened to it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PodOutcome {
    /// `namespace/name`.
    pub pod: String,
    pub reason: String,
}

/// Why a pod was never placed: no node had room for its requests
/// (`NodeResourcesFit`, every scheduler).
pub const UNPLACED_NO_ROOM: &str = "no node has room for its requests";
/// ... nodes had room, and NodeResourceTopologyMatch refused every one.
pub const UNPLACED_NRT: &str = "NodeResourceTopologyMatch refused every node with room";
/// ... nodes had room, and the engine refused the pod on every one.
pub const UNPLACED_EXACT: &str = "the kubelet would reject it on every node with room";

/// ... a pod with DRA claims: nodes had room, and the scheduler's DRA
/// allocator found its devices on none of them.
pub const UNPLACED_DRA: &str = "no node with room has devices for its DRA claims";
/// ... a pod with DRA claims: NodeResourceTopologyMatch or the DRA
/// allocator refused every node with room.
pub const UNPLACED_NRT_DRA: &str = "NodeResourceTopologyMatch or DRA refused every node with room";
/// ... a pod with DRA claims: on every node with room the kubelet would
/// reject it, DRA finds no devices, or they miss its CPUs' NUMA nodes.
pub const UNPLACED_EXACT_DRA: &str = "no node with room admits it with its DRA devices on the kubelet's NUMA nodes";

/// Capacity of one zone index, summed over nodes.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneCapacity {
    pub zone: String,
    pub cpus: f64,
    pub memory_bytes: f64,
    pub devices: BTreeMap<String, f64>,
}

/// How much the largest free blocks (the most one NUMA zone can still give
/// a pod) fall short of what the same free capacity packed into as few
/// zones as possible would offer, as a share: `Σ (potential − largest) /
/// Σ potential` over the nodes, where a node's potential is
/// `min(its free total, the largest block of an empty node of its shape)`.
/// 0 when nothing is placed, when free capacity is packed, or when there
/// is none; the one definition is `sim::capacity::FragmentationSum`.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Fragmentation {
    pub cpu: f64,
    pub memory: f64,
}
