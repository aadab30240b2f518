//! The simulation report: one [`RunReport`] per policy × scope ×
//! scheduler. Serialized as the `-o json` document:
//!
//! ```json
//! {"nodes": 5000, "pods": 100000, "events": 100000, "skipped": {},
//!  "runs": [{"policy": "single-numa-node", "scope": "container", "scheduler": "exact",
//!            "scheduled": 99000, "rejectedAtAdmission": 0, "unplaced": 1000, ...}]}
//! ```

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
    /// Free capacity left at the end, fleet-wide.
    pub free_cpus: f64,
    pub free_memory_bytes: f64,
    /// Free capacity on nodes that admit none of the failed pods' shapes.
    pub stranded_cpus: f64,
    pub stranded_memory_bytes: f64,
    pub stranded_devices: BTreeMap<String, f64>,
    /// The same per NUMA zone (`node-<id>`), summed over nodes.
    pub stranded_by_zone: Vec<ZoneCapacity>,
    pub fragmentation: Fragmentation,
    /// With `--verify`: the admission rejections counted when the run's
    /// placements are replayed node by node through fresh engine nodes
    /// ([`crate::replay_check`]); zero for `exact`, `rejectedAtAdmission`
    /// for the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay_rejected_at_admission: Option<usize>,
    /// Set when the kubelet configuration would not start under this
    /// policy and scope; the counts are then zero.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Capacity of one zone index, summed over nodes.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneCapacity {
    pub zone: String,
    pub cpus: f64,
    pub memory_bytes: f64,
    pub devices: BTreeMap<String, f64>,
}

/// Share of free capacity outside each node's largest free zone (0 = all
/// free capacity of a node sits in one NUMA node).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Fragmentation {
    pub cpu: f64,
    pub memory: f64,
}
