//! The merge on explicit hint lists: the candidates of the choice rule
//! (see [`super`]) computed as sets — the preferred affinities every list
//! accepts, and every non-empty AND of one affinity per list — instead of
//! the kubelet's cross product. Cost: at most |reachable| × |list| per list,
//! with at most 2^n reachable masks.

use topoalign_model::{NumaMask, TopologyHint};

use crate::NumaInfo;

use super::best_non_preferred_count;

/// Merges explicit hint lists into the best hint.
pub(crate) fn merge_lists(lists: &[Vec<TopologyHint>], numa: &NumaInfo, closest: bool) -> TopologyHint {
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
    let any_preferred: Vec<bool> = lists
        .iter()
        .map(|list| list.iter().any(|h| h.affinity.is_none() && h.preferred))
        .collect();
    // Each list's preferred affinities, sorted and without repeats.
    let preferred_masks: Vec<Vec<NumaMask>> = lists
        .iter()
        .map(|list| {
            let mut masks: Vec<NumaMask> = list.iter().filter(|h| h.preferred).filter_map(|h| h.affinity).collect();
            masks.sort_unstable_by_key(|m| m.bits());
            masks.dedup();
            masks
        })
        .collect();
    let accepts = |i: usize, mask: NumaMask| {
        any_preferred[i]
            || preferred_masks[i]
                .binary_search_by_key(&mask.bits(), |m| m.bits())
                .is_ok()
    };

    let mut candidates: Vec<NumaMask> = preferred_masks
        .iter()
        .flatten()
        .copied()
        .filter(|&mask| (0..lists.len()).all(|i| accepts(i, mask)))
        .map(|mask| mask & default)
        .collect();
    if any_preferred.iter().all(|&any| any) {
        candidates.push(default);
    }
    candidates
        .into_iter()
        .filter(|m| !m.is_empty())
        .min_by(|a, b| numa.compare(*a, *b, closest))
}

/// Every non-empty AND of one affinity per list, starting from `default`;
/// ascending by value, without repeats (callers only filter and take a
/// minimum under a total order, so the order is immaterial to them).
fn reachable_candidates(lists: &[Vec<TopologyHint>], default: NumaMask) -> Vec<NumaMask> {
    let mut reachable = vec![default];
    let mut next = Vec::new();
    let mut affinities: Vec<Option<NumaMask>> = Vec::new();
    for list in lists {
        affinities.clear();
        affinities.extend(list.iter().map(|h| h.affinity));
        affinities.sort_unstable_by_key(|a| a.map(NumaMask::bits));
        affinities.dedup();
        next.clear();
        for &so_far in &reachable {
            next.extend(
                affinities
                    .iter()
                    .map(|a| a.map_or(so_far, |a| so_far & a))
                    .filter(|m| !m.is_empty()),
            );
        }
        next.sort_unstable_by_key(|m| m.bits());
        next.dedup();
        std::mem::swap(&mut reachable, &mut next);
        if reachable.is_empty() {
            break;
        }
    }
    reachable
}
