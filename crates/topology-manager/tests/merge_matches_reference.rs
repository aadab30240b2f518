//! The fast merge must pick exactly what the kubelet's permutation fold
//! picks, for any hint lists on machines of up to 8 NUMA nodes, with and
//! without `prefer-closest-numa-nodes`.

use proptest::prelude::*;
use topoalign_model::{HintRule, Machine, NumaMask, SharedHintRule, TopologyHint, UniformMachine};
use topoalign_topology_manager::{
    HintSource, NumaInfo, merge_by_search, merge_lists, reference::merge_by_permutations,
};

/// A CPU-less machine with `n` NUMA nodes and the given symmetric distances.
fn machine(n: usize, distance: &dyn Fn(usize, usize) -> u64) -> Machine {
    let rows = (0..n)
        .map(|id| (0..n).map(|other| distance(id, other)).collect())
        .collect();
    UniformMachine::new(n, 0)
        .distances(rows)
        .build()
        .expect("valid machine")
}

fn hint_list(nodes: usize) -> impl Strategy<Value = Vec<TopologyHint>> {
    let universe = (1u64 << nodes) - 1;
    let hint = prop_oneof![
        1 => any::<bool>().prop_map(TopologyHint::any),
        8 => (1..=universe, any::<bool>()).prop_map(|(bits, p)| TopologyHint::new(NumaMask::from_bits(bits), p)),
    ];
    prop_oneof![
        1 => Just(Vec::new()),
        12 => proptest::collection::vec(hint, 1..6),
    ]
}

fn scenario() -> impl Strategy<Value = (usize, Vec<Vec<TopologyHint>>, Vec<u64>)> {
    (1usize..=8).prop_flat_map(|n| {
        (
            Just(n),
            proptest::collection::vec(hint_list(n), 1..5),
            proptest::collection::vec(11u64..40, n * n),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn fast_merge_equals_permutation_fold((n, lists, raw) in scenario(), closest in any::<bool>()) {
        let m = machine(n, &|a, b| if a == b { 10 } else { raw[a.min(b) * n + a.max(b)] });
        let numa = if closest { NumaInfo::with_distances(&m).unwrap() } else { NumaInfo::new(&m) };
        prop_assert_eq!(merge_lists(&lists, &numa, closest), merge_by_permutations(&lists, &numa, closest));
    }

    #[test]
    fn search_merge_equals_permutation_fold((n, sources, raw) in rule_scenario(), closest in any::<bool>()) {
        let m = machine(n, &|a, b| if a == b { 10 } else { raw[a.min(b) * n + a.max(b)] });
        let numa = if closest { NumaInfo::with_distances(&m).unwrap() } else { NumaInfo::new(&m) };
        let lists: Vec<Vec<TopologyHint>> = sources.iter().map(HintSource::to_list).collect();
        prop_assert_eq!(merge_by_search(&sources, &numa, closest), merge_by_permutations(&lists, &numa, closest));
    }
}

/// A hint list given as a rule: an arbitrary set of masks, so the search
/// cannot lean on any structure the real providers' rules happen to have.
#[derive(Debug)]
struct ArbitraryRule {
    universe: NumaMask,
    members: Vec<(NumaMask, bool)>,
    same_preferred_size: bool,
}

impl HintRule for ArbitraryRule {
    fn universe(&self) -> NumaMask {
        self.universe
    }
    fn classify(&self, mask: NumaMask) -> Option<bool> {
        self.members.iter().find(|(m, _)| *m == mask).map(|(_, p)| *p)
    }
    fn has_hint_between(&self, must: NumaMask, within: NumaMask) -> bool {
        self.members
            .iter()
            .any(|(a, _)| must.is_subset_of(*a) && a.is_subset_of(within))
    }
    fn preferred_count(&self) -> Option<u32> {
        let sizes: Vec<u32> = self
            .members
            .iter()
            .filter(|(_, p)| *p)
            .map(|(m, _)| m.count())
            .collect();
        (self.same_preferred_size && sizes.windows(2).all(|w| w[0] == w[1]))
            .then(|| sizes.first().copied())
            .flatten()
    }
}

fn rule(nodes: usize) -> impl Strategy<Value = HintSource> {
    let universe = (1u64 << nodes) - 1;
    (
        1..=universe,
        proptest::collection::btree_map(1..=universe, any::<bool>(), 1..12),
        any::<bool>(),
    )
        .prop_map(|(universe, members, same_preferred_size)| {
            let universe = NumaMask::from_bits(universe);
            let members: Vec<(NumaMask, bool)> = members
                .into_iter()
                .map(|(bits, p)| (NumaMask::from_bits(bits & universe.bits()), p))
                .collect();
            let mut unique: Vec<(NumaMask, bool)> = Vec::new();
            for (mask, preferred) in members {
                if !mask.is_empty() && !unique.iter().any(|(m, _)| *m == mask) {
                    unique.push((mask, preferred));
                }
            }
            if unique.is_empty() {
                // A rule is never empty: the provider says Impossible instead.
                unique.push((universe, false));
            }
            HintSource::Rule(SharedHintRule::new(ArbitraryRule {
                universe,
                members: unique,
                same_preferred_size,
            }))
        })
}

fn rule_scenario() -> impl Strategy<Value = (usize, Vec<HintSource>, Vec<u64>)> {
    (1usize..=8).prop_flat_map(|n| {
        let source = prop_oneof![
            3 => rule(n),
            2 => hint_list(n).prop_map(HintSource::List),
        ];
        (
            Just(n),
            proptest::collection::vec(source, 1..5),
            proptest::collection::vec(11u64..40, n * n),
        )
    })
}

#[test]
fn realistic_provider_lists_agree_on_eight_nodes() {
    // Upward-closed lists like the CPU and device managers produce: every
    // mask holding enough capacity, preferred at the minimal width.
    let m = machine(8, &|a, b| {
        if a == b {
            10
        } else if a / 4 == b / 4 {
            12
        } else {
            32
        }
    });
    let numa = NumaInfo::with_distances(&m).unwrap();
    let all = NumaMask::from_bits(0xff);
    let list = |need: u32, free: &dyn Fn(usize) -> u32| -> Vec<TopologyHint> {
        let fits = |mask: NumaMask| mask.nodes().map(free).sum::<u32>() >= need;
        let min = NumaMask::subsets_by_size(all)
            .filter(|&m| fits(m))
            .map(NumaMask::count)
            .min()
            .unwrap_or(0);
        NumaMask::subsets_by_size(all)
            .filter(|&m| fits(m))
            .map(|m| TopologyHint::new(m, m.count() == min))
            .collect()
    };
    let lists = vec![list(6, &|n| if n % 3 == 0 { 4 } else { 1 }), list(3, &|n| n as u32 % 2)];
    let sources: Vec<HintSource> = lists.iter().cloned().map(HintSource::List).collect();
    for closest in [false, true] {
        let kubelet = merge_by_permutations(&lists, &numa, closest);
        assert_eq!(merge_lists(&lists, &numa, closest), kubelet);
        assert_eq!(merge_by_search(&sources, &numa, closest), kubelet);
    }
}
