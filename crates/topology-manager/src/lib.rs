//! The kubelet's Topology Manager, as a pure library: policies, scopes,
//! options and the hint merge.
//!
//! Owns: turning the providers' hints into one [`TopologyHint`] and an
//! admit/reject verdict ([`TopologyManager::decide`]), the start-up checks
//! of the topology manager (options, NUMA distances, the NUMA node limit).
//! Must not touch: provider state, allocation, files or clocks. The engine
//! asks the providers for hints and hands them here; which containers are
//! merged together (the scope) is the engine's loop, this crate only names it.

mod merge;
mod numa_info;
mod options;
mod policy;
pub mod reference;

use std::collections::BTreeMap;
use std::sync::Arc;

pub use merge::{HintSource, merge, merge_by_search, merge_lists};
pub use numa_info::{MissingDistances, NumaInfo};
pub use options::{DEFAULT_MAX_ALLOWABLE_NUMA_NODES, PolicyOptions, TopologyPolicyOption};
pub use policy::PolicyDecision;

use topoalign_model::{FeatureGates, KubeletVersion, Machine, ProviderHints, ResourceHints, TopologyHint};

topoalign_model::kubelet_vocabulary! {
    /// `topologyManagerPolicy`.
    pub enum TopologyPolicyName("topology manager policy") {
        None = "none",
        BestEffort = "best-effort",
        Restricted = "restricted",
        SingleNumaNode = "single-numa-node",
    }
}

topoalign_model::kubelet_vocabulary! {
    /// `topologyManagerScope`.
    pub enum TopologyScope("topology manager scope") {
        /// One merge per container.
        Container = "container",
        /// One merge for the whole pod.
        Pod = "pod",
    }
}

/// Why the topology manager refuses to start; Display is the kubelet's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct TopologyManagerStartError(pub String);

/// How hints are merged. All give the same answer; the permutation fold
/// is the kubelet's exponential algorithm, kept to measure against, and the
/// forced search lets the conformance vectors check the search on explicit
/// lists too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MergeStrategy {
    /// [`merge()`]: sets on explicit lists, candidate search once a
    /// provider gives a rule (and, under `single-numa-node`, the merge on
    /// masks).
    #[default]
    Fast,
    /// [`merge_by_search`] whatever the machine size.
    CandidateSearch,
    /// [`reference::merge_by_permutations`]: every permutation, as the kubelet.
    KubeletPermutations,
}

/// A started topology manager.
#[derive(Clone, Debug)]
pub struct TopologyManager {
    policy: TopologyPolicyName,
    scope: TopologyScope,
    options: PolicyOptions,
    /// Never changes after start; shared between clones of the node.
    numa: Arc<NumaInfo>,
    strategy: MergeStrategy,
}

impl TopologyManager {
    /// Starts the manager as the kubelet's `NewManager` does. Under policy
    /// `none` nothing is checked: the kubelet short-circuits before reading
    /// options or counting NUMA nodes.
    ///
    /// # Errors
    /// The kubelet's texts for bad options, missing NUMA distances, and a
    /// machine with more NUMA nodes than `max-allowable-numa-nodes`.
    pub fn start(
        machine: &Machine,
        policy: TopologyPolicyName,
        scope: TopologyScope,
        options: &BTreeMap<String, String>,
        gates: &FeatureGates,
        version: KubeletVersion,
    ) -> Result<TopologyManager, TopologyManagerStartError> {
        if policy == TopologyPolicyName::None {
            return Ok(TopologyManager {
                policy,
                scope,
                options: PolicyOptions::default(),
                numa: Arc::new(NumaInfo::new(machine)),
                strategy: MergeStrategy::Fast,
            });
        }
        let options = PolicyOptions::parse(options, gates, version)?;
        let numa = if options.prefer_closest_numa {
            NumaInfo::with_distances(machine).map_err(|MissingDistances| {
                TopologyManagerStartError(
                    "cannot discover NUMA topology: error getting NUMA distances from cadvisor".to_string(),
                )
            })?
        } else {
            NumaInfo::new(machine)
        };
        if numa.node_count() > options.max_allowable_numa_nodes {
            return Err(TopologyManagerStartError(format!(
                "unsupported on machines with more than {} NUMA Nodes",
                options.max_allowable_numa_nodes
            )));
        }
        Ok(TopologyManager {
            policy,
            scope,
            options,
            numa: Arc::new(numa),
            strategy: MergeStrategy::Fast,
        })
    }

    /// The policy.
    pub fn policy(&self) -> TopologyPolicyName {
        self.policy
    }

    /// The scope.
    pub fn scope(&self) -> TopologyScope {
        self.scope
    }

    /// The parsed options.
    pub fn options(&self) -> PolicyOptions {
        self.options
    }

    /// The NUMA nodes it aligns over.
    pub fn numa_info(&self) -> &NumaInfo {
        &self.numa
    }

    /// Chooses the merge algorithm (for benchmarks and cross-checks).
    pub fn set_merge_strategy(&mut self, strategy: MergeStrategy) {
        self.strategy = strategy;
    }

    /// Merges the providers' hints for one container (or one pod, under the
    /// pod scope) and says whether the policy admits the result.
    pub fn decide<'a>(&self, providers: impl IntoIterator<Item = &'a ProviderHints>) -> PolicyDecision {
        let lists = flatten_provider_hints(providers);
        policy::decide(
            self.policy,
            lists,
            &self.numa,
            self.options.prefer_closest_numa,
            self.strategy,
        )
    }
}

/// One hint source per provider resource, as the kubelet's
/// `filterProvidersHints` builds its lists: a provider with no opinion at
/// all, or no preference for a resource, contributes a preferred "any" hint;
/// a resource that cannot be placed contributes a non-preferred "any" hint.
pub fn flatten_provider_hints<'a>(providers: impl IntoIterator<Item = &'a ProviderHints>) -> Vec<HintSource> {
    let mut sources = Vec::new();
    for provider in providers {
        if provider.is_empty() {
            sources.push(HintSource::List(vec![TopologyHint::any(true)]));
            continue;
        }
        for hints in provider.by_resource.values() {
            sources.push(match hints {
                ResourceHints::NoPreference => HintSource::List(vec![TopologyHint::any(true)]),
                ResourceHints::Impossible => HintSource::List(vec![TopologyHint::any(false)]),
                ResourceHints::Hints(list) => HintSource::List(list.clone()),
                ResourceHints::Rule(rule) => HintSource::Rule(rule.clone()),
            });
        }
    }
    sources
}
