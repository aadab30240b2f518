//! Free and stranded capacity of one engine node, per NUMA zone — the
//! simulator's rule (docs/simulate.md, "Free and stranded capacity") for
//! callers that hold engine nodes rather than the simulator's classes
//! (`topoalign defrag`).
//!
//! - A node's free CPU (millicores) and memory (bytes) is the smaller of
//!   its zones' NRT `available` sum and its allocatable minus its pods'
//!   requests, apportioned to the zones in proportion to their own free
//!   amounts ([`crate::sim`]'s `capacity::Free`: the same arithmetic, so
//!   the zones add up to the node); devices are each zone's free devices.
//! - Its free capacity is **stranded** when some of the failed pods are
//!   ones an empty node of its shape would admit, and the node admits none
//!   of them now ([`is_stranded`]).
//!
//! Owns: those two definitions for one node. Must not touch: decisions
//! (the engine's), the simulator's classes.

use std::collections::BTreeMap;

use topoalign_engine::Node;
use topoalign_model::{Pod, resource_name};

use crate::sim::capacity::Free;

/// One NUMA zone's free capacity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneFree {
    pub numa: usize,
    pub milli_cpu: u64,
    pub memory_bytes: u64,
    /// Device-plugin resource → free devices on this zone.
    pub devices: BTreeMap<String, u64>,
}

/// A node's free capacity: the zones add up to the node's CPU and memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeFree {
    pub milli_cpu: u64,
    pub memory_bytes: u64,
    pub zones: Vec<ZoneFree>,
}

/// `node`'s free capacity per NUMA zone (see the module docs).
pub fn node_free(node: &Node) -> NodeFree {
    let usage = node.numa_usage();
    let to_u64 = |amount: i128| u64::try_from(amount).unwrap_or(if amount < 0 { 0 } else { u64::MAX });
    let allocatable = &node.resources().allocatable;
    let mut requested: BTreeMap<String, i128> = BTreeMap::new();
    for pod in node.pods() {
        for (resource, amount) in topoalign_engine::fit::pod_request_totals(pod).iter() {
            let value = if resource.as_str() == "cpu" {
                amount.milli()
            } else {
                amount.value()
            };
            *requested.entry(resource.clone()).or_default() += value;
        }
    }
    let node_wide = |resource: &str| {
        let total = allocatable
            .get(resource)
            .map_or(0, |q| if resource == "cpu" { q.milli() } else { q.value() });
        to_u64(total - requested.get(resource).copied().unwrap_or(0))
    };
    let zone_cpu: Vec<u64> = usage.iter().map(|z| to_u64(z.available("cpu").milli())).collect();
    let zone_memory: Vec<u64> = usage.iter().map(|z| to_u64(z.available("memory").value())).collect();
    let cpu = Free::new(&zone_cpu, node_wide("cpu"));
    let memory = Free::new(&zone_memory, node_wide("memory"));
    let zones = usage
        .iter()
        .enumerate()
        .map(|(i, zone)| ZoneFree {
            numa: zone.numa,
            milli_cpu: cpu.zones[i],
            memory_bytes: memory.zones[i],
            devices: zone
                .resources
                .iter()
                .filter(|(resource, _)| resource_name::is_extended(resource))
                .map(|(resource, amounts)| (resource.clone(), to_u64(amounts.available.value())))
                .collect(),
        })
        .collect();
    NodeFree {
        milli_cpu: cpu.total,
        memory_bytes: memory.total,
        zones,
    }
}

/// Whether `node`'s free capacity is stranded for `failed` pods: some of
/// them would be admitted by `empty` (an empty node of its shape), and
/// `node` admits none of them now. With no such pod nothing is stranded.
pub fn is_stranded(node: &Node, empty: &Node, failed: &[Pod]) -> bool {
    let mut wanted = failed
        .iter()
        .filter(|pod| empty.try_admit(pod).decision.admitted())
        .peekable();
    wanted.peek().is_some() && wanted.all(|pod| !node.try_admit(pod).decision.admitted())
}
