//! A decision in words and as a document: the engine's
//! [`Decision`](topoalign_engine::Decision) and its explanation turned into
//! the API's [`Explanation`], with a summary a person can act on — for a
//! rejection, what was free where and what would fit.
//!
//! Owns the texts; computes nothing the engine decides.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use topoalign_engine::{CpuPolicyName, Decision, RejectionStage, TopologyPolicyName};
use topoalign_model::{Pod, QosClass, ResourceHints, TopologyHint};

use crate::wire::{Explanation, Hint, Hints, Merge, Topology};

/// Machines up to this many NUMA nodes list every hint; larger ones say
/// how narrow the narrowest is.
const LIST_HINTS_UP_TO_NODES: usize = 8;

/// The explanation of `decision` for `pod`, in the state `topology`
/// describes (after the decision when admitted, unchanged when rejected).
pub fn explain(pod: &Pod, decision: &Decision, topology: &Topology, cpu_policy: CpuPolicyName) -> Explanation {
    let numa_count = topology.numa_nodes.len();
    let merges = decision
        .explanation
        .merges
        .iter()
        .map(|merge| {
            let mut hints: BTreeMap<String, BTreeMap<String, Hints>> = BTreeMap::new();
            for (provider, provider_hints) in &merge.hints {
                let by_resource = provider_hints
                    .by_resource
                    .iter()
                    .map(|(resource, h)| (resource.clone(), hints_doc(h, numa_count)))
                    .collect();
                hints.insert(provider.as_str().to_string(), by_resource);
            }
            Merge {
                container: merge.container.clone(),
                hints,
                best: hint_doc(&merge.best),
                admitted: merge.admitted,
            }
        })
        .collect();
    let policy = decision.explanation.policy;
    let mut notes = Vec::new();
    let summary = match &decision.rejection {
        None => admitted_summary(decision, policy),
        Some(rejection) => {
            let mut text = format!(
                "{} is rejected: {}: {}.",
                decision.pod, rejection.reason, rejection.message
            );
            match rejection.stage {
                RejectionStage::TopologyPolicy => {
                    let _ = write!(text, " {}", policy_demand(policy));
                }
                RejectionStage::ResourceFit => {
                    text.push_str(" The node's allocatable resources (capacity minus reservations and what is held) do not cover the request.");
                }
                RejectionStage::Allocation(provider) => {
                    let _ = write!(
                        text,
                        " The {} could not allocate after the policy admitted.",
                        provider.as_str()
                    );
                }
            }
            let _ = write!(text, " Free now: {}.", free_text(topology));
            if let Some(fit) = fit_hint(pod, topology, policy) {
                let _ = write!(text, " {fit}");
            }
            text
        }
    };
    if decision.admitted() {
        let exclusive = decision.containers.iter().any(|c| c.cpus.is_some());
        if !exclusive {
            match cpu_policy {
                CpuPolicyName::None => notes.push(
                    "the node's CPU manager policy is none: no workload gets exclusive CPUs; all run on the shared pool"
                        .to_string(),
                ),
                CpuPolicyName::Static if pod.qos != QosClass::Guaranteed => notes.push(format!(
                    "no exclusive CPUs: the workload is {} — only Guaranteed workloads (memory given, limits equal to \
                     requests) asking for whole CPUs get exclusive CPUs; it runs on the shared pool",
                    pod.qos.as_str()
                )),
                CpuPolicyName::Static => notes.push(
                    "no exclusive CPUs: a fractional CPU request runs on the shared pool; ask for a whole number"
                        .to_string(),
                ),
            }
        }
    }
    Explanation {
        policy: policy.as_str().to_string(),
        scope: decision.explanation.scope.as_str().to_string(),
        summary,
        notes,
        merges,
    }
}

fn admitted_summary(decision: &Decision, policy: TopologyPolicyName) -> String {
    let mut text = format!("{} is admitted under topology policy {}", decision.pod, policy.as_str());
    let affinities: Vec<String> = decision
        .explanation
        .merges
        .iter()
        .filter_map(|m| {
            m.best
                .affinity
                .map(|mask| format!("{:?}", mask.nodes().collect::<Vec<_>>()))
        })
        .collect();
    if !affinities.is_empty() {
        let _ = write!(text, ", aligned on NUMA {}", affinities.join(" / "));
    }
    text.push(':');
    for placement in &decision.containers {
        let _ = write!(text, " {} gets ", placement.name);
        match &placement.cpus {
            Some(cpus) => {
                let _ = write!(text, "CPUs {cpus} (exclusive)");
            }
            None => text.push_str("the shared CPU pool"),
        }
        if let Some(nodes) = &placement.memory_numa {
            let _ = write!(text, ", memory on NUMA {nodes:?}");
        }
        for (resource, ids) in &placement.devices {
            let _ = write!(text, ", {resource} {}", ids.join(","));
        }
        text.push(';');
    }
    text.pop();
    text.push('.');
    text
}

fn policy_demand(policy: TopologyPolicyName) -> &'static str {
    match policy {
        TopologyPolicyName::SingleNumaNode => {
            "Policy single-numa-node needs each container's (or, under the pod scope, the pod's) CPUs, memory and \
             devices on one NUMA node, and no node has them all free."
        }
        TopologyPolicyName::Restricted => {
            "Policy restricted needs every resource's preferred (narrowest possible) alignment, and the free \
             resources only allow a wider one."
        }
        TopologyPolicyName::BestEffort | TopologyPolicyName::None => "",
    }
}

/// `NUMA 0: 3 CPUs, 2Gi memory, 1 nvidia.com/gpu; NUMA 1: …`.
fn free_text(topology: &Topology) -> String {
    let nodes: Vec<String> = topology
        .numa_nodes
        .iter()
        .map(|node| {
            let parts: Vec<String> = node
                .resources
                .iter()
                .filter_map(|(resource, usage)| {
                    let free = usage.allocatable.saturating_sub(usage.allocated?);
                    Some(match resource.as_str() {
                        "cpu" => format!("{free} CPUs"),
                        r if r == "memory" || r.starts_with("hugepages-") => format!("{} {r}", human_bytes(free)),
                        r => format!("{free} {r}"),
                    })
                })
                .collect();
            format!(
                "NUMA {}: {}",
                node.id,
                if parts.is_empty() {
                    "-".to_string()
                } else {
                    parts.join(", ")
                }
            )
        })
        .collect();
    nodes.join("; ")
}

/// What would fit on one NUMA node, for a rejected one-NUMA request.
fn fit_hint(pod: &Pod, topology: &Topology, policy: TopologyPolicyName) -> Option<String> {
    let requested_cpus: i128 = pod.containers.iter().map(|c| c.request("cpu").value()).max()?;
    let most_free = topology
        .numa_nodes
        .iter()
        .filter_map(|n| {
            let cpu = n.resources.get("cpu")?;
            Some(cpu.allocatable.saturating_sub(cpu.allocated?))
        })
        .max()?;
    if policy == TopologyPolicyName::SingleNumaNode && requested_cpus > i128::from(most_free) {
        Some(format!(
            "At most {most_free} CPUs are free on one NUMA node: ask for that many or fewer, or use a looser \
             policy (best-effort admits spanning nodes)."
        ))
    } else {
        None
    }
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [(&str, u64); 3] = [("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
    for (unit, size) in UNITS {
        if bytes >= size && bytes.is_multiple_of(size) {
            return format!("{}{unit}", bytes / size);
        }
    }
    if bytes >= 1 << 30 {
        return format!("{:.1}Gi", bytes as f64 / f64::from(1u32 << 30));
    }
    format!("{bytes}")
}

fn hint_doc(hint: &TopologyHint) -> Hint {
    Hint {
        numa: hint.affinity.map(|mask| mask.nodes().collect()),
        preferred: hint.preferred,
    }
}

fn hints_doc(hints: &ResourceHints, numa_count: usize) -> Hints {
    match hints {
        ResourceHints::NoPreference => Hints::NoPreference,
        ResourceHints::Impossible => Hints::Impossible,
        ResourceHints::Hints(list) => Hints::List {
            hints: list.iter().map(hint_doc).collect(),
        },
        ResourceHints::Rule(rule) if numa_count <= LIST_HINTS_UP_TO_NODES => Hints::List {
            hints: rule.to_list().iter().map(hint_doc).collect(),
        },
        ResourceHints::Rule(rule) => Hints::Rule {
            narrowest: rule.narrowest_count(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn bytes_read_in_binary_units() {
        for (bytes, text) in [
            (0, "0"),
            (512, "512"),
            (1 << 30, "1Gi"),
            (3 << 29, "1536Mi"),
            ((1 << 30) + 1, "1.0Gi"),
        ] {
            assert_eq!(human_bytes(bytes), text);
        }
    }
}
