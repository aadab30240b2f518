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
            let merged = merge(&single_numa_node::filter(sources), false);
            let best = single_numa_node::normalize(merged, numa);
            PolicyDecision {
                best,
                admit: single_numa_node::admits(&best),
            }
        }
    }
}
