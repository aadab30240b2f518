//! `single-numa-node`: only preferred single-node hints (or preferred "any")
//! take part; admit only a preferred result.

use topoalign_model::{NumaMask, TopologyHint};

use crate::{HintSource, NumaInfo};

/// Keeps, per list, the preferred hints that name one node or none. A list
/// left empty makes the merge impossible, as in the kubelet. What is left is
/// at most one hint per node, so rules become explicit lists here.
pub(super) fn filter(sources: Vec<HintSource>) -> Vec<HintSource> {
    sources
        .into_iter()
        .map(|source| {
            HintSource::List(match source {
                HintSource::List(list) => list
                    .into_iter()
                    .filter(|h| h.preferred && h.affinity.is_none_or(|mask| mask.count() == 1))
                    .collect(),
                HintSource::Rule(rule) => NumaMask::subsets_of_size(rule.universe(), 1)
                    .filter(|&node| rule.classify(node) == Some(true))
                    .map(|node| TopologyHint::new(node, true))
                    .collect(),
            })
        })
        .collect()
}

/// A result covering every node means "no alignment"; the kubelet reports
/// it as the "any" hint.
pub(super) fn normalize(best: TopologyHint, numa: &NumaInfo) -> TopologyHint {
    if best.affinity == Some(numa.all_nodes()) {
        TopologyHint::any(best.preferred)
    } else {
        best
    }
}

pub(super) fn admits(best: &TopologyHint) -> bool {
    best.preferred
}
