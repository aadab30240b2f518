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

/// [`filter`] and the merge of what it leaves, on masks instead of lists —
/// the same hint as `normalize(merge(filter(sources)))` for the merge's
/// rule (see [`crate::merge`]), without building the filtered lists.
///
/// After the filter every hint is preferred and names one node or none, so
/// a non-empty AND of one hint per list is a node every list accepts (it
/// holds that node or a preferred "any") and some list names, or — when
/// every list holds a preferred "any" — every node: the candidates are
/// exactly the preferred ones, and the narrowest wins, i.e. the lowest such
/// node.
/// Without one (an empty list included) the merge falls back to every node,
/// not preferred. A node no earlier list accepts cannot win, so a rule is
/// asked only about the nodes still in the running.
pub(super) fn merge(sources: &[HintSource], numa: &NumaInfo) -> TopologyHint {
    let default = numa.all_nodes();
    // Nodes every list so far accepts, nodes some list names, and whether
    // every list so far holds a preferred "any".
    let mut accepted = default;
    let mut named = NumaMask::EMPTY;
    let mut every_any = true;
    for source in sources {
        let (any, nodes) = match source {
            HintSource::List(list) => {
                list.iter()
                    .filter(|h| h.preferred)
                    .fold((false, NumaMask::EMPTY), |(any, nodes), h| match h.affinity {
                        None => (true, nodes),
                        Some(mask) if mask.count() == 1 => (any, nodes | mask),
                        Some(_) => (any, nodes),
                    })
            }
            HintSource::Rule(rule) => (false, rule.preferred_single_nodes(accepted)),
        };
        every_any &= any;
        named = named | nodes;
        if !any {
            accepted = accepted & nodes;
        }
        if accepted.is_empty() && !every_any {
            break;
        }
    }
    let best = match (accepted & named).nodes().next() {
        Some(lowest) => TopologyHint::new(NumaMask::single(lowest), true),
        None => TopologyHint::new(default, every_any),
    };
    normalize(best, numa)
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
