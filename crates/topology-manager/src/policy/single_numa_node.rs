//! `single-numa-node`: only preferred single-node hints (or preferred "any")
//! take part; admit only a preferred result.

use topoalign_model::TopologyHint;

use crate::NumaInfo;

/// Keeps, per list, the preferred hints that name one node or none. A list
/// left empty makes the merge impossible, as in the kubelet.
pub(super) fn filter(lists: Vec<Vec<TopologyHint>>) -> Vec<Vec<TopologyHint>> {
    lists
        .into_iter()
        .map(|list| {
            list.into_iter().filter(|h| h.preferred && h.affinity.is_none_or(|mask| mask.count() == 1)).collect()
        })
        .collect()
}

/// A result covering every node means "no alignment"; the kubelet reports
/// it as the "any" hint.
pub(super) fn normalize(best: TopologyHint, numa: &NumaInfo) -> TopologyHint {
    if best.affinity == Some(numa.all_nodes()) { TopologyHint::any(best.preferred) } else { best }
}

pub(super) fn admits(best: &TopologyHint) -> bool {
    best.preferred
}
