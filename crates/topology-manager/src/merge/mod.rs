//! The hint merge: from every provider's hint list to the one best hint.
//!
//! The kubelet enumerates the cross product of all hint lists and folds the
//! merged candidates through a pairwise comparison. That comparison is not a
//! valid ordering in general, but on the candidates a merge produces its
//! outcome does not depend on the fold order, which lets us compute it from
//! sets instead of permutations; [`crate::reference`] keeps the kubelet's
//! fold and the tests prove they agree.
//!
//! What the fold selects, with `default` = every NUMA node and a candidate =
//! the AND of one hint from each list (an "any" hint leaves it as is),
//! candidates with no node left being ignored:
//! 1. If some candidate is *preferred* (every chosen hint preferred and all
//!    chosen affinities equal), the best preferred affinity wins.
//! 2. Otherwise let `B` be the largest, over the lists, of the narrowest
//!    affinity's node count (`bestNonPreferredAffinityCount`). The best
//!    candidate with exactly `B` nodes wins; failing that, the best among the
//!    widest candidates with fewer than `B` nodes; failing that, the best
//!    (i.e. narrowest) candidate with more than `B` nodes.
//! 3. With no candidate at all (some list is empty, or every AND is empty),
//!    `default`, not preferred.
//!
//! "Best" is [`NumaInfo::compare`]: narrowest, or closest with
//! `prefer-closest-numa-nodes`.
//!
//! Two evaluations of the rule: [`sets`] when every list is explicit,
//! [`search`] as soon as one is given as a rule, which walks candidates in
//! the rule's order and stops at the first that wins — cheaper than
//! expanding the rules into lists even on two NUMA nodes.

mod search;
mod sets;

use topoalign_model::{HintRule, NumaMask, SharedHintRule, TopologyHint};

use crate::NumaInfo;

/// One provider resource's hints, as the merge receives them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HintSource {
    /// An explicit list (possibly a single "any" hint).
    List(Vec<TopologyHint>),
    /// A list given by its rule.
    Rule(SharedHintRule),
}

impl HintSource {
    /// The explicit list.
    pub fn to_list(&self) -> Vec<TopologyHint> {
        match self {
            HintSource::List(list) => list.clone(),
            HintSource::Rule(rule) => rule.to_list(),
        }
    }
}

/// Merges one hint source per provider resource (see
/// [`crate::flatten_provider_hints`]) into the best hint.
pub fn merge(sources: &[HintSource], numa: &NumaInfo, closest: bool) -> TopologyHint {
    let explicit = sources.iter().all(|s| matches!(s, HintSource::List(_)));
    if explicit {
        let lists: Vec<Vec<TopologyHint>> = sources.iter().map(HintSource::to_list).collect();
        sets::merge_lists(&lists, numa, closest)
    } else {
        search::merge_by_search(sources, numa, closest)
    }
}

/// The merge on explicit lists (the set evaluation).
pub fn merge_lists(lists: &[Vec<TopologyHint>], numa: &NumaInfo, closest: bool) -> TopologyHint {
    sets::merge_lists(lists, numa, closest)
}

/// The merge by candidate search, whatever the size (exposed so tests can
/// hold it against the other two on small machines).
pub fn merge_by_search(sources: &[HintSource], numa: &NumaInfo, closest: bool) -> TopologyHint {
    search::merge_by_search(sources, numa, closest)
}

/// `bestNonPreferredAffinityCount`: over all lists, the largest node count
/// of a list's narrowest affinity (lists of only "any" hints count 0).
pub(crate) fn best_non_preferred_count(lists: &[Vec<TopologyHint>]) -> u32 {
    lists
        .iter()
        .filter_map(|list| list.iter().filter_map(|h| h.affinity).min())
        .map(NumaMask::count)
        .max()
        .unwrap_or(0)
}

/// A rule's hints as `dyn HintRule`, for code that takes both forms.
pub(crate) fn as_rule(rule: &SharedHintRule) -> &dyn HintRule {
    &**rule
}
