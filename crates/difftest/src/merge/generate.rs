//! Random merge cases: the machine's NUMA ids (1-16 mostly, now and then
//! sparse ids or up to 64 nodes), distances for `prefer-closest-numa-nodes`,
//! and 0-5 providers of 1-3 resources whose lists are drawn directly — nil
//! and empty maps and lists, "any" hints, non-preferred hints, duplicates —
//! or, in about a quarter of the cases, made by the engine's providers from
//! per-NUMA numbers ([`super::rules`]).
//!
//! A seed names one case (the stream is `crate::rng`'s). The kubelet's
//! merge walks every permutation of one hint per list, so cases are kept to
//! [`MAX_PERMUTATIONS_USUAL`] permutations, one in seven (and the cases
//! made from rules) to [`MAX_PERMUTATIONS`], one in a hundred to
//! [`MAX_PERMUTATIONS_RARE`].

use topoalign_model::{KubeletVersion, MAX_NUMA_NODES, NumaMask, TopologyHint};

use super::case::{Case, Hints, Provider};
use super::rules;
use crate::rng::Rng;

/// The most permutations the kubelet walks for most drawn cases (the
/// kubelet's merge costs about half a microsecond a permutation and
/// policy: the run's time goes there) …
pub const MAX_PERMUTATIONS_USUAL: u128 = 512;
/// … for one in seven, and for the cases made from rules.
pub const MAX_PERMUTATIONS: u128 = 4096;
/// … and for the few big ones.
pub const MAX_PERMUTATIONS_RARE: u128 = 1 << 16;
/// The most hints a case sends (a rule's list on 16 nodes has up to 65535).
pub const MAX_HINTS: usize = 1 << 17;

/// Resource names the providers use (hints are per resource name; the
/// names themselves mean nothing to the merge).
const RESOURCES: [&str; 6] = [
    "cpu",
    "memory",
    "hugepages-2Mi",
    "hugepages-1Gi",
    "example.com/gpu",
    "example.com/nic",
];

/// The case of `seed`.
pub fn case(seed: u64, version: KubeletVersion) -> Case {
    let mut rng = Rng::new(seed);
    let from_rules = rng.chance(25);
    let mut case = if from_rules {
        rules::case(seed, &mut rng.fork(1), version)
    } else {
        explicit(seed, &mut rng.fork(2))
    };
    let cap = match rng.below(1000) {
        0..10 => MAX_PERMUTATIONS_RARE,
        10..150 => MAX_PERMUTATIONS,
        _ if from_rules => MAX_PERMUTATIONS,
        _ => MAX_PERMUTATIONS_USUAL,
    };
    fit(&mut case, cap);
    case
}

/// Drops the longest lists (explicit ones halved, rule-made ones removed
/// with their resource) until the kubelet walks at most `cap`
/// permutations and the case sends at most [`MAX_HINTS`] hints.
pub fn fit(case: &mut Case, cap: u128) {
    let hints = |case: &Case| -> usize {
        case.resources()
            .map(|(_, h)| h.kubelet_list().map_or(0, <[_]>::len))
            .sum()
    };
    while case.permutations() > cap || hints(case) > MAX_HINTS {
        let longest = case
            .providers
            .iter()
            .enumerate()
            .filter_map(|(p, provider)| match provider {
                Provider::Resources(resources) => {
                    Some(resources.iter().enumerate().map(move |(r, (_, h))| (h.walked(), p, r)))
                }
                _ => None,
            })
            .flatten()
            .max();
        let Some((_, p, r)) = longest else {
            return;
        };
        let Provider::Resources(resources) = &mut case.providers[p] else {
            return;
        };
        if let Hints::List(list) = &mut resources[r].1 {
            if list.len() > 1 {
                list.truncate(list.len() / 2);
            } else {
                resources[r].1 = Hints::Impossible;
            }
        } else {
            resources.remove(r);
        }
        if resources.is_empty() {
            case.providers[p] = Provider::Empty;
        }
    }
}

/// NUMA ids: mostly `0..n` for `n` in 1-16, sometimes sparse, rarely up to
/// 64 nodes.
pub fn numa_ids(rng: &mut Rng, most: usize) -> Vec<usize> {
    let n = match rng.below(100) {
        0..30 => rng.urange(1, 4),
        30..60 => rng.urange(5, 8),
        60..97 => rng.urange(9, 16),
        _ => rng.urange(17, most.max(17)),
    }
    .min(most);
    if rng.chance(85) {
        return (0..n).collect();
    }
    let mut ids: Vec<usize> = (0..(n + rng.urange(1, n)).min(MAX_NUMA_NODES)).collect();
    rng.shuffle(&mut ids);
    ids.truncate(n);
    ids.sort_unstable();
    ids
}

/// Distances for `prefer-closest-numa-nodes` (about 40% of cases): one row
/// per id up to the largest, the rows of absent ids empty. SLIT-like
/// (10 to itself, sockets of nearer nodes), random, asymmetric, all equal
/// (the kubelet's tie-break decides), or with zeros and large values.
pub fn distances(rng: &mut Rng, ids: &[usize]) -> Option<Vec<Vec<u64>>> {
    if !rng.chance(40) {
        return None;
    }
    let last = *ids.last()?;
    let style = rng.below(5);
    let per_socket = rng.urange(1, 4);
    let near = rng.range(11, 21);
    let far = rng.range(20, 40);
    let same = rng.range(11, 40);
    let mut rows = vec![Vec::new(); last + 1];
    for &i in ids {
        let mut row = vec![0; last + 1];
        for &j in ids {
            row[j] = match style {
                0 if i == j => 10,
                0 if i / per_socket == j / per_socket => near,
                0 => far,
                1 if i == j => 10,
                1 => same,
                2 if i == j => 10,
                2 => rng.range(11, 255),
                3 => rng.range(0, 255),
                _ if rng.chance(10) => rng.range(0, 1_000_000),
                _ => rng.range(0, 40),
            };
        }
        rows[i] = row;
    }
    // Symmetric unless drawn entry by entry.
    if style <= 2 {
        for &i in ids {
            for &j in ids {
                if j < i {
                    rows[i][j] = rows[j][i];
                }
            }
        }
    }
    Some(rows)
}

/// `max-allowable-numa-nodes`: needed above 8 nodes (any value up to 64
/// that allows the machine), now and then set below that too.
pub fn max_allowable(rng: &mut Rng, nodes: usize) -> Option<usize> {
    if nodes > 8 || rng.chance(10) {
        Some(rng.urange(nodes.max(8), MAX_NUMA_NODES.max(nodes)))
    } else {
        None
    }
}

fn explicit(seed: u64, rng: &mut Rng) -> Case {
    let nodes = numa_ids(rng, MAX_NUMA_NODES);
    let distances = distances(rng, &nodes);
    let max_allowable = max_allowable(rng, nodes.len());
    let universe = NumaMask::from_nodes(nodes.iter().copied());
    let count = *rng.weighted(&[(3, 0), (15, 1), (30, 2), (30, 3), (12, 4), (10, 5)]);
    let providers = (0..count)
        .map(|_| match rng.below(100) {
            0..5 => Provider::Nil,
            5..10 => Provider::Empty,
            _ => {
                let mut names = RESOURCES.to_vec();
                rng.shuffle(&mut names);
                let n = *rng.weighted(&[(60, 1), (30, 2), (10, 3)]);
                Provider::Resources(
                    names[..n]
                        .iter()
                        .map(|name| ((*name).to_owned(), explicit_hints(rng, universe)))
                        .collect(),
                )
            }
        })
        .collect();
    Case {
        id: seed,
        nodes,
        distances,
        max_allowable,
        providers,
        from_rules: false,
    }
}

fn explicit_hints(rng: &mut Rng, universe: NumaMask) -> Hints {
    match rng.below(100) {
        0..8 => return Hints::NoPreference,
        8..15 => return Hints::Impossible,
        _ => {}
    }
    let len = match rng.below(100) {
        0..60 => rng.urange(1, 3),
        60..90 => rng.urange(4, 6),
        _ => rng.urange(7, 24),
    };
    let mut masks: Vec<Option<NumaMask>> = Vec::with_capacity(len);
    for _ in 0..len {
        let mask = match rng.below(100) {
            0..8 => None,
            8..43 => Some(single(rng, universe)),
            43..68 => {
                let k = rng.urange(2, 3);
                Some(few(rng, universe, k))
            }
            68..83 => Some(subset(rng, universe)),
            83..93 => Some(universe),
            _ => match masks.last() {
                Some(&previous) => previous,
                None => Some(single(rng, universe)),
            },
        };
        masks.push(mask);
    }
    // How preference is given: at random; all; none; like the providers
    // (the narrowest size); the narrowest and "any".
    let narrowest = masks.iter().flatten().map(|m| m.count()).min();
    let style = rng.below(5);
    let list = masks
        .into_iter()
        .map(|affinity| {
            let preferred = match style {
                0 => rng.chance(50),
                1 => true,
                2 => false,
                3 => affinity.map(NumaMask::count) == narrowest,
                _ => affinity.is_none_or(|m| Some(m.count()) == narrowest),
            };
            TopologyHint { affinity, preferred }
        })
        .collect();
    Hints::List(list)
}

/// One node of `universe`.
fn single(rng: &mut Rng, universe: NumaMask) -> NumaMask {
    let nodes: Vec<usize> = universe.nodes().collect();
    NumaMask::single(*rng.pick(&nodes))
}

/// Up to `k` nodes of `universe` (at least one).
fn few(rng: &mut Rng, universe: NumaMask, k: usize) -> NumaMask {
    let mut nodes: Vec<usize> = universe.nodes().collect();
    rng.shuffle(&mut nodes);
    NumaMask::from_nodes(nodes.into_iter().take(k))
}

/// A random non-empty subset of `universe`.
fn subset(rng: &mut Rng, universe: NumaMask) -> NumaMask {
    let keep = rng.range(10, 90);
    let mask = NumaMask::from_nodes(universe.nodes().filter(|_| rng.below(100) < keep));
    if mask.is_empty() { single(rng, universe) } else { mask }
}
