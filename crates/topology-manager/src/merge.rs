//! The hint merge: from every provider's hint list to the one best hint.
//!
//! The kubelet enumerates the cross product of all hint lists and folds the
//! merged candidates through a pairwise comparison. That comparison is not a
//! valid ordering in general, but on the candidates a merge produces its
//! outcome does not depend on the fold order, which lets us compute it from
//! sets instead of permutations ([`merge`]); [`crate::reference`] keeps the
//! kubelet's fold and the tests prove the two agree.
//!
//! What the fold selects, with `default` = every NUMA node and a candidate =
//! the AND of one hint from each list (a `None` affinity leaves it as is),
//! candidates with no node left being ignored:
//! 1. If some candidate is *preferred* (every chosen hint preferred and all
//!    chosen affinities equal), the best preferred affinity wins.
//! 2. Otherwise let `B` be the largest, over the lists, of the narrowest
//!    affinity's node count (`bestNonPreferredAffinityCount`). The best
//!    candidate with exactly `B` nodes wins; failing that, the best among the
//!    widest candidates with fewer than `B` nodes; failing that, the best
//!    (i.e. narrowest) candidate with more than `B` nodes.
//! 3. With no candidate at all, `default`, not preferred.
//!
//! "Best" is [`NumaInfo::compare`]: narrowest, or closest with
//! `prefer-closest-numa-nodes`.

use std::collections::HashSet;

use topoalign_model::{NumaMask, TopologyHint};

use crate::NumaInfo;

/// Merges filtered hint lists (one list per provider resource, see
/// [`crate::flatten_provider_hints`]) into the best hint.
pub fn merge(lists: &[Vec<TopologyHint>], numa: &NumaInfo, closest: bool) -> TopologyHint {
    let default = numa.all_nodes();
    // An empty list has no hint to pick, so the cross product is empty.
    if lists.iter().any(Vec::is_empty) {
        return TopologyHint::new(default, false);
    }
    if let Some(best) = best_preferred(lists, default, numa, closest) {
        return TopologyHint::new(best, true);
    }
    let wanted = best_non_preferred_count(lists);
    let candidates = reachable_candidates(lists, default);
    let best = |pool: &mut dyn Iterator<Item = NumaMask>| pool.min_by(|a, b| numa.compare(*a, *b, closest));
    if let Some(at_wanted) = best(&mut candidates.iter().copied().filter(|m| m.count() == wanted)) {
        return TopologyHint::new(at_wanted, false);
    }
    let widest_below = candidates.iter().map(|m| m.count()).filter(|&c| c < wanted).max();
    let chosen = match widest_below {
        Some(count) => best(&mut candidates.iter().copied().filter(|m| m.count() == count)),
        None => best(&mut candidates.iter().copied()),
    };
    TopologyHint::new(chosen.unwrap_or(default), false)
}

/// The best affinity reachable by a preferred permutation: each list
/// contributes either a preferred "any" hint or a preferred hint for the
/// same mask `M`.
fn best_preferred(lists: &[Vec<TopologyHint>], default: NumaMask, numa: &NumaInfo, closest: bool) -> Option<NumaMask> {
    let any_preferred = |list: &[TopologyHint]| list.iter().any(|h| h.affinity.is_none() && h.preferred);
    let preferred_masks: Vec<HashSet<NumaMask>> = lists
        .iter()
        .map(|list| list.iter().filter(|h| h.preferred).filter_map(|h| h.affinity).collect())
        .collect();
    let accepts = |i: usize, mask: NumaMask| any_preferred(&lists[i]) || preferred_masks[i].contains(&mask);

    let mut candidates: Vec<NumaMask> = preferred_masks
        .iter()
        .flatten()
        .copied()
        .filter(|&mask| (0..lists.len()).all(|i| accepts(i, mask)))
        .map(|mask| mask & default)
        .collect();
    if lists.iter().all(|l| any_preferred(l)) {
        candidates.push(default);
    }
    candidates.into_iter().filter(|m| !m.is_empty()).min_by(|a, b| numa.compare(*a, *b, closest))
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

/// Every non-empty AND of one affinity per list, starting from `default`.
fn reachable_candidates(lists: &[Vec<TopologyHint>], default: NumaMask) -> HashSet<NumaMask> {
    let mut reachable = HashSet::from([default]);
    for list in lists {
        let affinities: HashSet<Option<NumaMask>> = list.iter().map(|h| h.affinity).collect();
        reachable = reachable
            .iter()
            .flat_map(|&so_far| affinities.iter().map(move |a| a.map_or(so_far, |a| so_far & a)))
            .filter(|m| !m.is_empty())
            .collect();
        if reachable.is_empty() {
            break;
        }
    }
    reachable
}
