//! Node scores for `prioritize`, 0–10 (`MaxExtenderPriority`), at NUMA-zone
//! level, from the engine's actual placement of the pod on a copy of the
//! node — not, as the NodeResourceTopologyMatch plugin must, from a guess
//! of which zones the kubelet would pick.
//!
//! The zones a pod *uses* are the NUMA nodes of its exclusive CPUs, its
//! pinned memory and its devices; a pod that gets none of those (shared
//! pool, unpinned memory) uses every zone. Over the used zones, for each
//! resource the pod requests that the zones account (cpu, memory, huge
//! pages, devices), `free = available / allocatable` after the placement:
//! - `LeastAllocated`: 10 × mean free share (spread);
//! - `MostAllocated`: 10 × (1 − mean free share) (pack);
//! - `BalancedAllocation`: 10 × (1 − standard deviation of the used
//!   shares) (resources used evenly);
//! - `LeastNUMANodes`: 10 × (N − k + 1) / N for a pod spanning k of the
//!   node's N NUMA nodes (10 when it needs no zone at all).
//!
//! Owns: these formulas. Must not touch: the decision itself.

use std::collections::BTreeSet;

use topoalign_engine::{Decision, Node, ResourceUsage, TrialAdmission, UsageReader};
use topoalign_model::{Machine, NumaNode, Pod, ResourceList};

use crate::api::MAX_EXTENDER_PRIORITY;

/// How `prioritize` ranks nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    LeastAllocated,
    MostAllocated,
    BalancedAllocation,
    LeastNumaNodes,
}

impl Strategy {
    pub const ALL: [Strategy; 4] = [
        Strategy::LeastAllocated,
        Strategy::MostAllocated,
        Strategy::BalancedAllocation,
        Strategy::LeastNumaNodes,
    ];

    /// The name used on the command line and in scheduler-plugins.
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::LeastAllocated => "LeastAllocated",
            Strategy::MostAllocated => "MostAllocated",
            Strategy::BalancedAllocation => "BalancedAllocation",
            Strategy::LeastNumaNodes => "LeastNUMANodes",
        }
    }

    fn index(self) -> usize {
        match self {
            Strategy::LeastAllocated => 0,
            Strategy::MostAllocated => 1,
            Strategy::BalancedAllocation => 2,
            Strategy::LeastNumaNodes => 3,
        }
    }
}

/// The scores of one placement under every strategy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scores([i64; 4]);

impl Scores {
    pub fn get(self, strategy: Strategy) -> i64 {
        self.0[strategy.index()]
    }
}

/// Scores `pod` as placed by `decision` on `after` (the node with the pod
/// admitted).
pub fn score(after: &Node, decision: &Decision, pod: &Pod) -> Scores {
    let requested = topoalign_engine::fit::pod_request_totals(pod);
    score_usage(after.machine(), &after.usage_reader(), decision, &requested)
}

/// [`score`] of a trial admission ([`Node::try_admit`]) that admitted the
/// pod: the same placement, the same usage after it. `requested`: the
/// pod's request totals ([`topoalign_engine::fit::pod_request_totals`]),
/// read once for all the trials of one pod.
pub fn score_trial(trial: &TrialAdmission, requested: &ResourceList) -> Scores {
    score_usage(trial.machine(), &trial.usage_reader(), &trial.decision, requested)
}

/// Scores a pod requesting `requested` in total, placed by `decision` on
/// a node of `machine` whose zones are then read through `zones`
/// ([`Node::usage_reader`]: the numbers of [`Node::numa_usage`], only those
/// the scores need).
fn score_usage(machine: &Machine, zones: &UsageReader<'_>, decision: &Decision, requested: &ResourceList) -> Scores {
    let mut used: BTreeSet<usize> = BTreeSet::new();
    for container in &decision.containers {
        if let Some(cpus) = &container.cpus {
            used.extend(cpus.iter().filter_map(|cpu| machine.cpu(cpu)).map(|c| c.numa));
        }
        used.extend(container.memory_numa.iter().flatten().copied());
        for (resource, ids) in &container.devices {
            let devices = machine.devices().get(resource).map(Vec::as_slice).unwrap_or_default();
            for id in ids {
                if let Some(device) = devices.iter().find(|d| &d.id == id) {
                    used.extend(device.numa.iter().copied());
                }
            }
        }
    }
    let in_use: Vec<&NumaNode> = machine
        .numa_nodes()
        .iter()
        .filter(|z| used.is_empty() || used.contains(&z.id))
        .collect();
    // Each requested resource's amounts on the used zones, read once; the
    // resources none of those zones has are left out.
    let amounts_of = |r: &str| -> Vec<Option<ResourceUsage>> { in_use.iter().map(|z| zones.resource(z, r)).collect() };
    let mut columns: Vec<Vec<Option<ResourceUsage>>> = requested
        .iter()
        .filter(|(_, q)| q.milli() > 0)
        .map(|(r, _)| amounts_of(r))
        .filter(|amounts| amounts.iter().any(Option::is_some))
        .collect();
    if columns.is_empty() {
        columns = vec![amounts_of("cpu"), amounts_of("memory")];
    }
    let free: Vec<f64> = columns
        .iter()
        .map(|amounts| {
            let (available, allocatable) = amounts.iter().fold((0.0, 0.0), |(a, t), amounts| {
                let amounts = amounts.unwrap_or_default();
                (
                    a + amounts.available.milli() as f64,
                    t + amounts.allocatable.milli() as f64,
                )
            });
            if allocatable > 0.0 {
                (available / allocatable).clamp(0.0, 1.0)
            } else {
                0.0
            }
        })
        .collect();
    let mean = free.iter().sum::<f64>() / free.len() as f64;
    let variance = free.iter().map(|f| (f - mean).powi(2)).sum::<f64>() / free.len() as f64;
    let max = MAX_EXTENDER_PRIORITY as f64;
    let numa_count = machine.numa_nodes().len().max(1) as f64;
    let least_numa = if used.is_empty() {
        max
    } else {
        max * (numa_count - used.len() as f64 + 1.0) / numa_count
    };
    let round = |x: f64| (x.round() as i64).clamp(0, MAX_EXTENDER_PRIORITY);
    Scores([
        round(max * mean),
        round(max * (1.0 - mean)),
        round(max * (1.0 - variance.sqrt())),
        round(least_numa),
    ])
}
