//! The merge by candidate search: the choice rule of [`super`] evaluated
//! without enumerating any list, for hint lists given as rules on machines
//! with many NUMA nodes.
//!
//! - Preferred: a preferred candidate is a preferred hint of every list
//!   that has no preferred "any" hint. One such list generates candidates,
//!   narrowest first; the others only answer "is this mask a preferred
//!   hint of yours?".
//! - Otherwise: candidates are walked size by size in the rule's order
//!   (`B`, then smaller sizes downward, then larger sizes upward), each size
//!   narrowest first, and each is tested for *reachability*: a mask `m` is
//!   the AND of one hint per list exactly when every list can pick a hint
//!   `a ⊇ m` (or its "any" hint) such that together they leave out every
//!   node outside `m`. That is a small covering search, since which nodes a
//!   list can leave out depends only on `has_hint_between`.
//!
//! Cost follows the answer, not the machine: an empty 64-node machine with a
//! preferred single-node hint costs 64 membership tests.

use std::cell::OnceCell;
use std::collections::HashSet;

use topoalign_model::{HintRule, NumaMask, TopologyHint};

use crate::NumaInfo;

use super::{HintSource, as_rule};

/// One hint source seen through the questions the search asks.
struct Source<'a> {
    /// Whether the list has a preferred "any" hint.
    any_preferred: bool,
    /// Whether the list has an "any" hint at all.
    any: bool,
    members: Members<'a>,
    /// [`Source::narrowest`], worked out on first use: a rule answers it
    /// by search, and both the emptiness test and the non-preferred walk
    /// ask.
    narrowest: OnceCell<Option<u32>>,
}

enum Members<'a> {
    Listed(Vec<(NumaMask, bool)>),
    Rule(&'a dyn HintRule),
}

impl<'a> Source<'a> {
    fn new(source: &'a HintSource) -> Source<'a> {
        match source {
            HintSource::List(list) => Source {
                any_preferred: list.iter().any(|h| h.affinity.is_none() && h.preferred),
                any: list.iter().any(|h| h.affinity.is_none()),
                members: Members::Listed(
                    list.iter()
                        .filter_map(|h| h.affinity.map(|m| (m, h.preferred)))
                        .collect(),
                ),
                narrowest: OnceCell::new(),
            },
            HintSource::Rule(rule) => Source {
                any_preferred: false,
                any: false,
                members: Members::Rule(as_rule(rule)),
                narrowest: OnceCell::new(),
            },
        }
    }

    /// Whether the list has no hint at all (the merge is then impossible).
    fn is_empty(&self) -> bool {
        !self.any && self.narrowest().is_none()
    }

    /// `None` if `mask` is not one of the list's affinities; otherwise
    /// whether it is there as a preferred hint.
    fn classify(&self, mask: NumaMask) -> Option<bool> {
        match &self.members {
            Members::Listed(masks) => {
                let mut found = None;
                for &(m, preferred) in masks {
                    if m == mask {
                        found = Some(found.unwrap_or(false) || preferred);
                    }
                }
                found
            }
            Members::Rule(rule) => (!mask.is_empty() && mask.is_subset_of(rule.universe()))
                .then(|| rule.classify(mask))
                .flatten(),
        }
    }

    /// Whether some affinity `a` of the list has `must ⊆ a ⊆ within`.
    fn has_between(&self, must: NumaMask, within: NumaMask) -> bool {
        match &self.members {
            Members::Listed(masks) => masks
                .iter()
                .any(|&(a, _)| must.is_subset_of(a) && a.is_subset_of(within)),
            Members::Rule(rule) => rule.has_hint_between(must, within),
        }
    }

    /// Node count of the narrowest affinity.
    fn narrowest(&self) -> Option<u32> {
        *self.narrowest.get_or_init(|| match &self.members {
            Members::Listed(masks) => masks.iter().map(|(m, _)| m.count()).min(),
            Members::Rule(rule) => rule.narrowest_count(),
        })
    }

    /// Every node some affinity of the list may contain.
    fn span(&self) -> NumaMask {
        match &self.members {
            Members::Listed(masks) => masks.iter().fold(NumaMask::EMPTY, |acc, (m, _)| acc | *m),
            Members::Rule(rule) => rule.universe(),
        }
    }

    /// The preferred affinities of one size, in increasing value (a rule
    /// is asked lazily, so a caller that stops early asks little).
    fn preferred_of_size(&self, size: u32) -> impl Iterator<Item = NumaMask> + '_ {
        match &self.members {
            Members::Listed(masks) => {
                let mut found: Vec<NumaMask> = masks
                    .iter()
                    .filter(|(m, p)| *p && m.count() == size)
                    .map(|(m, _)| *m)
                    .collect();
                found.sort_unstable_by_key(|m| m.bits());
                found.dedup();
                Either::Left(found.into_iter())
            }
            Members::Rule(rule) => Either::Right(
                NumaMask::subsets_of_size(rule.universe(), size).filter(|&m| rule.classify(m) == Some(true)),
            ),
        }
    }

    /// The sizes preferred affinities may have, ascending.
    fn preferred_sizes(&self) -> impl Iterator<Item = u32> + use<> {
        match &self.members {
            Members::Listed(masks) => {
                let mut sizes: Vec<u32> = masks.iter().filter(|(_, p)| *p).map(|(m, _)| m.count()).collect();
                sizes.sort_unstable();
                sizes.dedup();
                Either::Left(sizes.into_iter())
            }
            Members::Rule(rule) => Either::Right(match rule.preferred_count() {
                Some(size) => size..=size,
                None => 1..=rule.universe().count(),
            }),
        }
    }
}

/// One of two iterators of the same items: the list's answer or the rule's,
/// without boxing either.
enum Either<L, R> {
    Left(L),
    Right(R),
}

impl<T, L: Iterator<Item = T>, R: Iterator<Item = T>> Iterator for Either<L, R> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match self {
            Either::Left(left) => left.next(),
            Either::Right(right) => right.next(),
        }
    }
}

/// The merge by candidate search (see the module doc).
pub(crate) fn merge_by_search(sources: &[HintSource], numa: &NumaInfo, closest: bool) -> TopologyHint {
    let default = numa.all_nodes();
    let sources: Vec<Source<'_>> = sources.iter().map(Source::new).collect();
    if sources.iter().any(Source::is_empty) {
        return TopologyHint::new(default, false);
    }
    if let Some(best) = best_preferred(&sources, default, numa, closest) {
        return TopologyHint::new(best, true);
    }
    best_non_preferred(&sources, default, numa, closest)
        .map_or(TopologyHint::new(default, false), |m| TopologyHint::new(m, false))
}

/// The best of `masks` (all of one size) under the comparator.
fn best_of(masks: impl Iterator<Item = NumaMask>, numa: &NumaInfo, closest: bool) -> Option<NumaMask> {
    masks.min_by(|a, b| numa.compare(*a, *b, closest))
}

fn best_preferred(sources: &[Source<'_>], default: NumaMask, numa: &NumaInfo, closest: bool) -> Option<NumaMask> {
    let accepted_by_all = |mask: NumaMask| {
        sources
            .iter()
            .all(|s| s.any_preferred || s.classify(mask) == Some(true))
    };
    // A list without a preferred "any" hint must supply the candidate: let
    // it generate, narrowest sizes first.
    if let Some(generator) = sources.iter().find(|s| !s.any_preferred) {
        // Without distances, masks of one size within `default` come out
        // narrowest first: the first accepted one is the best of its size.
        let first_is_best = !closest && generator.span().is_subset_of(default);
        for size in generator.preferred_sizes() {
            let mut found = generator
                .preferred_of_size(size)
                .filter(|&m| accepted_by_all(m))
                .map(|m| m & default)
                .filter(|m| !m.is_empty());
            let best = if first_is_best {
                found.next()
            } else {
                best_of(found, numa, closest)
            };
            if let Some(best) = best {
                return Some(best);
            }
        }
        return None;
    }
    // Every list has a preferred "any" hint: the all-"any" permutation gives
    // `default`, and each list's preferred affinities are candidates too.
    let mut candidates = vec![default];
    for source in sources {
        for size in source.preferred_sizes() {
            let found: Vec<NumaMask> = source
                .preferred_of_size(size)
                .map(|m| m & default)
                .filter(|m| !m.is_empty())
                .collect();
            if let Some(best) = best_of(found.into_iter(), numa, closest) {
                candidates.push(best);
                break;
            }
        }
    }
    best_of(candidates.into_iter(), numa, closest)
}

fn best_non_preferred(sources: &[Source<'_>], default: NumaMask, numa: &NumaInfo, closest: bool) -> Option<NumaMask> {
    let wanted = sources.iter().filter_map(Source::narrowest).max().unwrap_or(0);
    // A candidate lies within every list's span, except where a list may
    // pick its "any" hint.
    let space = sources.iter().filter(|s| !s.any).fold(default, |acc, s| acc & s.span());
    let size_limit = space.count();
    let best_at = |size: u32| {
        let mut reachable = NumaMask::subsets_of_size(space, size).filter(|&m| is_reachable(sources, m, default));
        // Without distances the first (lowest-valued) mask of a size is the
        // narrowest; with them every reachable mask of the size competes.
        if closest {
            best_of(reachable, numa, closest)
        } else {
            reachable.next()
        }
    };
    if wanted >= 1
        && wanted <= size_limit
        && let Some(best) = best_at(wanted)
    {
        return Some(best);
    }
    let below = (1..wanted.min(size_limit + 1)).rev();
    let above = (wanted + 1)..=size_limit;
    below.chain(above).find_map(best_at)
}

/// Whether `m` is the AND of one hint per list (see the module doc).
fn is_reachable(sources: &[Source<'_>], m: NumaMask, default: NumaMask) -> bool {
    // Each list must be able to pick something compatible with `m`.
    if !sources.iter().all(|s| s.any || s.has_between(m, default)) {
        return false;
    }
    // Nodes outside a list's span are left out by any hint it picks, as
    // long as it picks a hint rather than "any": when a list cannot pick
    // "any", those nodes are covered for free.
    let mut outside = default.without(m);
    for source in sources.iter().filter(|s| !s.any) {
        outside = outside & source.span();
    }
    let nodes: Vec<usize> = outside.nodes().collect();
    let mut excluded = vec![NumaMask::EMPTY; sources.len()];
    let mut failed = HashSet::new();
    cover(sources, m, default, &nodes, &mut excluded, &mut failed)
}

/// Assigns each remaining node to a list that can leave it out together
/// with what it already leaves out.
fn cover(
    sources: &[Source<'_>],
    m: NumaMask,
    default: NumaMask,
    nodes: &[usize],
    excluded: &mut Vec<NumaMask>,
    failed: &mut HashSet<(usize, Vec<NumaMask>)>,
) -> bool {
    let Some((&node, rest)) = nodes.split_first() else {
        return true;
    };
    if failed.contains(&(nodes.len(), excluded.clone())) {
        return false;
    }
    for i in 0..sources.len() {
        let widened = excluded[i] | NumaMask::single(node);
        let within = default.without(widened);
        if !sources[i].has_between(m, within) {
            continue;
        }
        let before = excluded[i];
        excluded[i] = widened;
        if cover(sources, m, default, rest, excluded, failed) {
            return true;
        }
        excluded[i] = before;
    }
    failed.insert((nodes.len(), excluded.clone()));
    false
}
