//! Answers for a person about one pod on one node: why it was (or was not)
//! admitted, in words, and the smallest changes that would admit it — each
//! one checked by running the engine again on a copy of the node, never
//! guessed.
//!
//! Owns: the per-NUMA table of free vs requested ([`table`]), provider hints
//! and the policy's rule in words ([`hints`]), counterfactual fixes
//! ([`fixes`]), warnings for silent no-ops ([`warnings`]), the report
//! documents front ends print ([`report`]), and a decision in one line
//! ([`words`]: the extender's and the agent's wording). Must not touch: any decision
//! (the engine makes them all; this crate only asks it again), files or
//! output formatting for terminals.
//!
//! Entry points: [`explain`] for a decision, [`warnings::warnings`] for a
//! pod, [`fixes::apply`] to re-check a fix, [`report::pod_report`] for the
//! whole per-pod document.

pub mod diagnose;
pub mod dra;
pub mod fixes;
pub mod hints;
pub mod report;
mod requests;
pub mod table;
pub mod warnings;
pub mod words;

use serde::Serialize;
use serde_json::Value;
use topoalign_engine::{Decision, Node, RejectionStage};
use topoalign_model::Pod;

pub use fixes::{Change, Fix, FixError};
pub use hints::MergeInWords;
pub use report::{PodReport, admit_all, pod_report};
pub use table::{NumaRow, ResourceCell, ResourceTable};

/// One pod about to be admitted on a node.
#[derive(Clone, Copy, Debug)]
pub struct Situation<'a> {
    /// The node as it was before the pod was admitted.
    pub node: &'a Node,
    /// The node's effective KubeletConfiguration fields (a JSON object, as
    /// `topoalign_k8s::KubeletConfiguration::from_value` reads it); kubelet
    /// fixes change fields of it.
    pub kubelet: &'a Value,
    /// The pod's manifest; pod fixes are changed copies of it.
    pub manifest: &'a Value,
    pub pod: &'a Pod,
}

/// Why a decision came out as it did, and what would change it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Explanation {
    /// The reason in one or two sentences.
    pub summary: String,
    /// `topologyManagerPolicy` / `topologyManagerScope` in force.
    pub policy: String,
    pub scope: String,
    /// Free vs requested per NUMA node, for every resource the pod asks
    /// the aligned managers for.
    pub resources: ResourceTable,
    /// Each topology-manager merge in words.
    pub merges: Vec<MergeInWords>,
    /// Whether the pod would fit on this node were it empty.
    pub empty_node: EmptyNode,
    /// Changes that admit the pod, each verified by admitting it again;
    /// empty for an admitted pod.
    pub fixes: Vec<Fix>,
}

/// The pod on an empty node of the same machine and configuration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EmptyNode {
    pub admitted: bool,
    /// The NUMA nodes it would get (`None`: no alignment, or rejected).
    pub affinity: Option<Vec<usize>>,
    /// The rejection reason on the empty node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// Explains `decision`, the engine's answer for `situation.pod` on
/// `situation.node`. Fixes are searched for rejected pods only; for a pod
/// the kubelet crashes admitting ([`Decision::kubelet_panic`]) the only
/// fixes are the settings under which it runs ([`fixes::panic_fixes`]).
/// Every NUMA id is the machine's own ([`topoalign_model::Machine::numa_label`]).
pub fn explain(situation: &Situation<'_>, decision: &Decision) -> Explanation {
    let machine = situation.node.machine();
    let resources = table::resource_table(situation.node, situation.pod, decision);
    let merges = hints::merges_in_words(machine, &decision.trace);
    let empty_node = empty_node(situation);
    let fixes = match &decision.kubelet_panic {
        Some(panic) => fixes::panic_fixes(situation, panic),
        None if decision.admitted() => Vec::new(),
        None => fixes::find(situation, &empty_node),
    };
    Explanation {
        summary: summary(situation, decision, &resources, &merges, &empty_node),
        policy: decision.trace.policy.as_str().to_owned(),
        scope: decision.trace.scope.as_str().to_owned(),
        resources,
        merges,
        empty_node,
        fixes,
    }
}

pub(crate) fn empty_node(situation: &Situation<'_>) -> EmptyNode {
    let node = situation.node;
    match Node::start(node.machine().clone(), node.config().clone()) {
        Ok(mut empty) => {
            let decision = empty.admit(situation.pod.clone());
            EmptyNode {
                admitted: decision.admitted(),
                affinity: report::numa_affinity(node.machine(), &decision),
                reason: decision.rejection.map(|r| r.reason),
            }
        }
        // The node was started with this machine and configuration, so a
        // fresh one starts too; say so plainly if it ever does not.
        Err(error) => EmptyNode {
            admitted: false,
            affinity: None,
            reason: Some(error.to_string()),
        },
    }
}

fn summary(
    situation: &Situation<'_>,
    decision: &Decision,
    resources: &ResourceTable,
    merges: &[MergeInWords],
    empty_node: &EmptyNode,
) -> String {
    if let Some(panic) = &decision.kubelet_panic {
        // Neither an admission nor a rejection: no reason of the pod's own.
        return format!("The kubelet crashes instead of deciding: {panic}.");
    }
    let Some(rejection) = &decision.rejection else {
        return match report::numa_affinity(situation.node.machine(), decision) {
            Some(nodes) => format!("Admitted, aligned to NUMA {}.", hints::nodes_text(&nodes)),
            None => "Admitted; nothing was aligned to a NUMA node.".to_owned(),
        };
    };
    match rejection.stage {
        RejectionStage::TopologyPolicy => {
            let mut sentences = Vec::new();
            let shortfalls = resources.shortfalls_text();
            if !shortfalls.is_empty() {
                sentences.push(format!("{shortfalls}."));
            }
            sentences.push(if empty_node.admitted {
                "It would fit on this node if it were empty: the pods running now are in the way.".to_owned()
            } else {
                format!(
                    "It does not fit even on an empty node of this shape under {}: too large for any NUMA node.",
                    decision.trace.policy.as_str()
                )
            });
            if let Some(merge) = merges.iter().find(|m| !m.admitted) {
                sentences.push(merge.rule.clone());
            }
            sentences.join(" ")
        }
        RejectionStage::Allocation(provider) => format!(
            "The topology manager admitted the pod, then the {} could not allocate: {}.",
            provider.as_str(),
            rejection.message
        ),
        RejectionStage::ResourceFit => format!(
            "The node as a whole has too little {}: {}.",
            rejection.reason.trim_start_matches("OutOf"),
            rejection.message
        ),
    }
}
