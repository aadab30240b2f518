//! Each topology-manager merge in words: what every provider said about
//! every resource, the merged hint, and the rule of the policy that decided
//! (kubelet v1.32 policies: `none` admits everything, `best-effort` admits
//! and aligns where it can, `restricted` admits only a preferred merged
//! hint, `single-numa-node` only a preferred hint on one NUMA node).
//!
//! Hint lists on machines with many NUMA nodes have up to 2^n entries; they
//! are shown in full only up to 6 NUMA nodes, otherwise summarised by
//! asking the provider's rule about the masks that matter.

use serde::Serialize;
use topoalign_engine::{MergeRecord, MergeTrace, Provider, TopologyPolicyName};
use topoalign_model::{Machine, NumaMask, ResourceHints, TopologyHint};

/// Lists longer than this are cut, with a count of what was left out.
const SHOWN_MASKS: usize = 6;

/// One merge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeInWords {
    /// The container merged for; `None` under the pod scope.
    pub container: Option<String>,
    pub providers: Vec<ProviderInWords>,
    /// The merged hint's NUMA nodes; `None` = any NUMA node.
    pub merged: Option<Vec<usize>>,
    pub preferred: bool,
    pub admitted: bool,
    /// The policy's rule as it applied here, in words.
    pub rule: String,
}

/// What one provider said about one resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderInWords {
    /// `CPU manager`, `memory manager`, `device manager`.
    pub provider: String,
    /// `None` when the provider had no opinion about anything.
    pub resource: Option<String>,
    /// The hints in words.
    pub text: String,
}

/// `0`, `0+1`: NUMA ids as people write a set. The ids are the machine's
/// own ([`labels`] maps a mask's indices to them).
pub fn nodes_text(nodes: &[usize]) -> String {
    // Runs of three or more consecutive ids as ranges: 64 nodes numbered
    // 0 to 63 are `0-63`, not 64 numbers; ids numbered anew keep their
    // own runs (`0+1+128-130`).
    let mut parts: Vec<String> = Vec::new();
    let mut index = 0;
    while index < nodes.len() {
        let start = nodes[index];
        let mut end = index;
        while end + 1 < nodes.len() && nodes[end + 1] == nodes[end] + 1 {
            end += 1;
        }
        match end - index {
            0 => parts.push(start.to_string()),
            1 => parts.extend([start.to_string(), nodes[end].to_string()]),
            _ => parts.push(format!("{start}-{}", nodes[end])),
        }
        index = end + 1;
    }
    parts.join("+")
}

/// The NUMA ids of node indices (a mask's, a placement's) as the machine
/// names them ([`Machine::numa_label`]: a machine read with NUMA ids past
/// 63 is numbered anew; every id shown is its original one).
pub fn labels(machine: &Machine, nodes: impl IntoIterator<Item = usize>) -> Vec<usize> {
    nodes.into_iter().map(|n| machine.numa_label(n)).collect()
}

fn mask_text(machine: &Machine, mask: NumaMask) -> String {
    nodes_text(&labels(machine, mask.nodes()))
}

fn hint_text(machine: &Machine, hint: TopologyHint) -> String {
    match hint.affinity {
        Some(mask) => format!("NUMA {}", mask_text(machine, mask)),
        None => "any NUMA node".to_owned(),
    }
}

/// The explicit list when it is short enough to show.
fn small_list(hints: &ResourceHints) -> Option<Vec<TopologyHint>> {
    match hints {
        ResourceHints::Hints(list) => Some(list.clone()),
        ResourceHints::Rule(rule) if rule.universe().count() <= 6 => Some(rule.to_list()),
        _ => None,
    }
}

fn listed(masks: &[String]) -> String {
    let shown = masks.iter().take(SHOWN_MASKS).cloned().collect::<Vec<_>>().join(", ");
    match masks.len().saturating_sub(SHOWN_MASKS) {
        0 => shown,
        more => format!("{shown} and {more} more"),
    }
}

/// A resource's hints in words, NUMA nodes named by `machine`'s ids.
pub fn resource_hints_text(machine: &Machine, hints: &ResourceHints) -> String {
    match hints {
        ResourceHints::NoPreference => "no preference".to_owned(),
        ResourceHints::Impossible => "cannot be placed on any set of NUMA nodes".to_owned(),
        ResourceHints::Hints(_) | ResourceHints::Rule(_) => {
            if let Some(list) = small_list(hints) {
                let preferred: Vec<String> = list
                    .iter()
                    .filter(|h| h.preferred)
                    .map(|&h| hint_text(machine, h))
                    .collect();
                let other: Vec<String> = list
                    .iter()
                    .filter(|h| !h.preferred)
                    .map(|&h| hint_text(machine, h))
                    .collect();
                let mut text = if preferred.is_empty() {
                    "no preferred placement".to_owned()
                } else {
                    format!("prefers {}", listed(&preferred))
                };
                if !other.is_empty() {
                    text.push_str(&format!("; also possible, not preferred: {}", listed(&other)));
                }
                return text;
            }
            let ResourceHints::Rule(rule) = hints else {
                return String::new();
            };
            let narrowest = rule.narrowest_count().unwrap_or(0);
            let singles: Vec<String> = rule
                .universe()
                .nodes()
                .filter(|&n| rule.classify(NumaMask::single(n)) == Some(true))
                .map(|n| format!("NUMA {}", machine.numa_label(n)))
                .collect();
            if singles.is_empty() {
                format!("needs at least {narrowest} NUMA nodes")
            } else {
                format!("prefers {}", listed(&singles))
            }
        }
    }
}

/// Whether `provider_hints` prefers exactly `mask` (an "any" hint, or no
/// preference at all, prefers everything).
fn prefers(hints: &ResourceHints, merged: Option<NumaMask>) -> bool {
    let Some(mask) = merged else {
        return !matches!(hints, ResourceHints::Impossible);
    };
    match hints {
        ResourceHints::NoPreference => true,
        ResourceHints::Impossible => false,
        ResourceHints::Hints(list) => list
            .iter()
            .any(|h| h.preferred && (h.affinity.is_none() || h.affinity == Some(mask))),
        ResourceHints::Rule(rule) => rule.classify(mask) == Some(true),
    }
}

/// Every merge of a decision on `machine` in words.
pub fn merges_in_words(machine: &Machine, trace: &MergeTrace) -> Vec<MergeInWords> {
    trace
        .merges
        .iter()
        .map(|merge| merge_in_words(machine, trace.policy, merge))
        .collect()
}

fn merge_in_words(machine: &Machine, policy: TopologyPolicyName, merge: &MergeRecord) -> MergeInWords {
    let mut providers = Vec::new();
    for (provider, hints) in &merge.hints {
        if hints.is_empty() {
            providers.push(ProviderInWords {
                provider: provider.as_str().to_owned(),
                resource: None,
                text: "no preference".to_owned(),
            });
        }
        for (resource, resource_hints) in &hints.by_resource {
            providers.push(ProviderInWords {
                provider: provider.as_str().to_owned(),
                resource: Some(resource.clone()),
                text: resource_hints_text(machine, resource_hints),
            });
        }
    }
    MergeInWords {
        container: merge.container.clone(),
        providers,
        merged: merge.best.affinity.map(|m| labels(machine, m.nodes())),
        preferred: merge.best.preferred,
        admitted: merge.admitted,
        rule: rule_text(machine, policy, merge),
    }
}

/// Who does not prefer the merged hint, in words.
fn dissenters(machine: &Machine, merge: &MergeRecord) -> Vec<String> {
    merge
        .hints
        .iter()
        .flat_map(|(provider, hints)| hints.by_resource.iter().map(move |(r, h)| (*provider, r, h)))
        .filter(|(_, _, hints)| !prefers(hints, merge.best.affinity))
        .map(|(provider, resource, hints): (Provider, &String, &ResourceHints)| {
            format!(
                "the {} ({resource}: {})",
                provider.as_str(),
                resource_hints_text(machine, hints)
            )
        })
        .collect()
}

fn rule_text(machine: &Machine, policy: TopologyPolicyName, merge: &MergeRecord) -> String {
    let merged = hint_text(machine, merge.best);
    let preferred = if merge.best.preferred {
        "preferred"
    } else {
        "not preferred"
    };
    if merge.admitted && merge.best.affinity.is_none() && policy != TopologyPolicyName::None {
        return format!(
            "{} admits it: no provider asked for particular NUMA nodes.",
            policy.as_str()
        );
    }
    match policy {
        TopologyPolicyName::None => "Policy none does not align anything and admits every pod.".to_owned(),
        TopologyPolicyName::BestEffort => {
            format!("best-effort admits every pod and aligns it as well as it can: here to {merged} ({preferred}).")
        }
        TopologyPolicyName::Restricted if merge.admitted => {
            format!("restricted admits a preferred merged hint: {merged}.")
        }
        TopologyPolicyName::Restricted => format!(
            "restricted admits only a merged hint every provider prefers; the best one, {merged}, is not preferred by {}.",
            or_nobody(&dissenters(machine, merge))
        ),
        TopologyPolicyName::SingleNumaNode if merge.admitted => {
            format!("single-numa-node admits a preferred hint on one NUMA node: {merged}.")
        }
        TopologyPolicyName::SingleNumaNode => {
            let why = match merge.best.affinity {
                Some(mask) if mask.count() == 1 => {
                    format!(
                        "the best one, {merged}, is not preferred by {}",
                        or_nobody(&dissenters(machine, merge))
                    )
                }
                _ => "no NUMA node is preferred by every provider".to_owned(),
            };
            format!("single-numa-node admits only a hint on one NUMA node that every provider prefers; {why}.")
        }
    }
}

fn or_nobody(items: &[String]) -> String {
    if items.is_empty() {
        "the providers together (their preferred hints do not coincide)".to_owned()
    } else {
        items.join("; ")
    }
}
