//! The merge policies. Each is a filter over the providers' hints plus an
//! admission rule; the merge itself is shared ([`crate::merge()`]).

mod best_effort;
mod restricted;
mod single_numa_node;

use topoalign_model::TopologyHint;

use crate::{HintSource, MergeStrategy, NumaInfo, TopologyPolicyName, merge, merge_by_search, reference};

/// The result of merging under a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PolicyDecision {
    /// The hint the containers' resources will be aligned to.
    pub best: TopologyHint,
    /// Whether the policy admits the pod with it.
    pub admit: bool,
}

/// Merges `sources` (see [`crate::flatten_provider_hints`]) under `policy`.
pub(crate) fn decide(
    policy: TopologyPolicyName,
    sources: Vec<HintSource>,
    numa: &NumaInfo,
    prefer_closest: bool,
    strategy: MergeStrategy,
) -> PolicyDecision {
    let merge = |sources: &[HintSource], closest: bool| match strategy {
        MergeStrategy::Fast => merge(sources, numa, closest),
        MergeStrategy::CandidateSearch => merge_by_search(sources, numa, closest),
        MergeStrategy::KubeletPermutations => {
            let lists: Vec<Vec<TopologyHint>> = sources.iter().map(HintSource::to_list).collect();
            reference::merge_by_permutations(&lists, numa, closest)
        }
    };
    match policy {
        // The kubelet's none policy never merges: it admits with "any".
        TopologyPolicyName::None => PolicyDecision {
            best: TopologyHint::any(false),
            admit: true,
        },
        TopologyPolicyName::BestEffort => {
            let best = merge(&sources, prefer_closest);
            PolicyDecision {
                best,
                admit: best_effort::admits(&best),
            }
        }
        TopologyPolicyName::Restricted => {
            let best = merge(&sources, prefer_closest);
            PolicyDecision {
                best,
                admit: restricted::admits(&best),
            }
        }
        TopologyPolicyName::SingleNumaNode => {
            // Every surviving hint is a single node, so distances never
            // decide anything here: the kubelet ignores the option.
            let best = match strategy {
                MergeStrategy::Fast => single_numa_node::merge(&sources, numa),
                _ => single_numa_node::normalize(merge(&single_numa_node::filter(sources), false), numa),
            };
            PolicyDecision {
                best,
                admit: single_numa_node::admits(&best),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;
    use topoalign_model::{HintRule, Machine, NumaMask, NumaNode, SharedHintRule, TopologyHint};

    use super::*;

    /// A rule naming exactly `members`.
    #[derive(Debug)]
    struct Members {
        universe: NumaMask,
        members: Vec<(NumaMask, bool)>,
    }

    impl HintRule for Members {
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
    }

    /// Hints that are mostly single nodes or "any", as what survives the
    /// single-numa-node filter decides the merge.
    fn hint(n: usize) -> impl Strategy<Value = TopologyHint> {
        let universe = (1u64 << n) - 1;
        prop_oneof![
            2 => any::<bool>().prop_map(TopologyHint::any),
            6 => (0..n, any::<bool>()).prop_map(|(node, p)| TopologyHint::new(NumaMask::single(node), p)),
            2 => (1..=universe, any::<bool>()).prop_map(|(bits, p)| TopologyHint::new(NumaMask::from_bits(bits), p)),
        ]
    }

    fn source(n: usize) -> impl Strategy<Value = HintSource> {
        prop_oneof![
            proptest::collection::vec(hint(n), 0..6).prop_map(HintSource::List),
            proptest::collection::vec(hint(n), 1..6).prop_map(move |hints| {
                let mut members: Vec<(NumaMask, bool)> = Vec::new();
                for h in hints {
                    let mask = h.affinity.unwrap_or(NumaMask::from_bits((1 << n) - 1));
                    if !members.iter().any(|(m, _)| *m == mask) {
                        members.push((mask, h.preferred));
                    }
                }
                HintSource::Rule(SharedHintRule::new(Members {
                    universe: NumaMask::from_bits((1 << n) - 1),
                    members,
                }))
            }),
        ]
    }

    fn numa(n: usize) -> NumaInfo {
        let nodes = (0..n)
            .map(|id| NumaNode {
                id,
                memory: 1 << 30,
                hugepages: BTreeMap::new(),
                distances: None,
            })
            .collect();
        NumaInfo::new(&Machine::new(nodes, Vec::new(), BTreeMap::new()).expect("valid machine"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        /// The single-numa-node merge on masks decides what the filter,
        /// the kubelet's permutation fold and the normalisation decide.
        #[test]
        fn single_numa_node_on_masks_equals_the_permutation_fold(
            (n, sources) in (1usize..=6).prop_flat_map(|n| (Just(n), proptest::collection::vec(source(n), 1..5)))
        ) {
            let numa = numa(n);
            let fast = decide(TopologyPolicyName::SingleNumaNode, sources.clone(), &numa, false, MergeStrategy::Fast);
            let reference = decide(
                TopologyPolicyName::SingleNumaNode,
                sources,
                &numa,
                false,
                MergeStrategy::KubeletPermutations,
            );
            prop_assert_eq!(fast, reference);
        }
    }
}
