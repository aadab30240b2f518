//! The fast merge must pick exactly what the kubelet's permutation fold
//! picks, for any hint lists on machines of up to 8 NUMA nodes, with and
//! without `prefer-closest-numa-nodes`.

use std::collections::BTreeMap;

use proptest::prelude::*;
use topoalign_model::{Machine, NumaMask, NumaNode, TopologyHint};
use topoalign_topology_manager::{NumaInfo, merge, reference::merge_by_permutations};

/// A CPU-less machine with `n` NUMA nodes and the given symmetric distances.
fn machine(n: usize, distance: &dyn Fn(usize, usize) -> u64) -> Machine {
    let nodes = (0..n)
        .map(|id| NumaNode {
            id,
            memory: 1 << 30,
            hugepages: BTreeMap::new(),
            distances: Some((0..n).map(|other| distance(id, other)).collect()),
        })
        .collect();
    Machine::new(nodes, Vec::new(), BTreeMap::new()).expect("valid machine")
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
        (Just(n), proptest::collection::vec(hint_list(n), 1..5), proptest::collection::vec(11u64..40, n * n))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn fast_merge_equals_permutation_fold((n, lists, raw) in scenario(), closest in any::<bool>()) {
        let m = machine(n, &|a, b| if a == b { 10 } else { raw[a.min(b) * n + a.max(b)] });
        let numa = if closest { NumaInfo::with_distances(&m).unwrap() } else { NumaInfo::new(&m) };
        prop_assert_eq!(merge(&lists, &numa, closest), merge_by_permutations(&lists, &numa, closest));
    }
}

#[test]
fn realistic_provider_lists_agree_on_eight_nodes() {
    // Upward-closed lists like the CPU and device managers produce: every
    // mask holding enough capacity, preferred at the minimal width.
    let m = machine(8, &|a, b| if a == b { 10 } else if a / 4 == b / 4 { 12 } else { 32 });
    let numa = NumaInfo::with_distances(&m).unwrap();
    let all = NumaMask::from_bits(0xff);
    let list = |need: u32, free: &dyn Fn(usize) -> u32| -> Vec<TopologyHint> {
        let fits = |mask: NumaMask| mask.nodes().map(free).sum::<u32>() >= need;
        let min = NumaMask::subsets_by_size(all).filter(|&m| fits(m)).map(NumaMask::count).min().unwrap_or(0);
        NumaMask::subsets_by_size(all).filter(|&m| fits(m)).map(|m| TopologyHint::new(m, m.count() == min)).collect()
    };
    let lists = vec![list(6, &|n| if n % 3 == 0 { 4 } else { 1 }), list(3, &|n| n as u32 % 2)];
    for closest in [false, true] {
        assert_eq!(merge(&lists, &numa, closest), merge_by_permutations(&lists, &numa, closest));
    }
}
