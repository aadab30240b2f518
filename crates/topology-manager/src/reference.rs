//! The kubelet's hint merge as it is written: every permutation of one hint
//! per list, folded through the kubelet's pairwise comparison. Exponential;
//! kept as the reference the fast [`crate::merge()`] is tested and
//! benchmarked against.

use topoalign_model::{NumaMask, TopologyHint};

use crate::NumaInfo;
use crate::merge::best_non_preferred_count;

/// The kubelet's merge by brute force (same inputs and result as
/// [`crate::merge()`]).
pub fn merge_by_permutations(lists: &[Vec<TopologyHint>], numa: &NumaInfo, closest: bool) -> TopologyHint {
    let default = numa.all_nodes();
    let wanted = best_non_preferred_count(lists);
    let mut best: Option<(NumaMask, bool)> = None;
    let mut chosen = Vec::with_capacity(lists.len());
    for_each_permutation(lists, &mut chosen, &mut |permutation| {
        let candidate = merge_permutation(default, permutation);
        best = Some(match best {
            None if candidate.0.is_empty() => return,
            None => candidate,
            Some(current) => fold_step(current, candidate, wanted, numa, closest),
        });
    });
    let (mask, preferred) = best.unwrap_or((default, false));
    TopologyHint::new(mask, preferred)
}

fn for_each_permutation<'a>(
    lists: &'a [Vec<TopologyHint>],
    chosen: &mut Vec<&'a TopologyHint>,
    visit: &mut dyn FnMut(&[&TopologyHint]),
) {
    let Some((first, rest)) = lists.split_first() else {
        visit(chosen);
        return;
    };
    for hint in first {
        chosen.push(hint);
        for_each_permutation(rest, chosen, visit);
        chosen.pop();
    }
}

/// AND of the affinities; preferred only if every hint is preferred and all
/// affinities present are equal.
fn merge_permutation(default: NumaMask, permutation: &[&TopologyHint]) -> (NumaMask, bool) {
    let affinities: Vec<NumaMask> = permutation.iter().filter_map(|h| h.affinity).collect();
    let all_equal = affinities.windows(2).all(|w| w[0] == w[1]);
    let preferred = all_equal && permutation.iter().all(|h| h.preferred);
    (affinities.into_iter().fold(default, |acc, m| acc & m), preferred)
}

/// One step of the kubelet's `HintMerger.compare`.
fn fold_step(
    current: (NumaMask, bool),
    candidate: (NumaMask, bool),
    wanted: u32,
    numa: &NumaInfo,
    closest: bool,
) -> (NumaMask, bool) {
    let better = |c: (NumaMask, bool), d: (NumaMask, bool)| {
        if c.0 == d.0 || numa.better(c.0, d.0, closest) == c.0 {
            c
        } else {
            d
        }
    };
    let (c, d) = (current.0.count(), candidate.0.count());
    match (current.1, candidate.1) {
        _ if candidate.0.is_empty() => current,
        (false, true) => candidate,
        (true, false) => current,
        (true, true) => better(current, candidate),
        (false, false) if c > wanted => better(current, candidate),
        (false, false) if c == wanted => {
            if d == wanted {
                better(current, candidate)
            } else {
                current
            }
        }
        (false, false) if d > wanted => current,
        (false, false) if d == wanted => candidate,
        (false, false) if d > c => candidate,
        (false, false) if d < c => current,
        (false, false) => better(current, candidate),
    }
}
