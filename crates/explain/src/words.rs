//! A decision in one line: the wording front ends print next to a decision
//! (the extender's refusal, the agent's summary, its log), so that one
//! decision reads the same everywhere.
//!
//! Owns: those sentences. Must not touch: why a pod was rejected beyond
//! the kubelet's own reason and message (that is [`crate::explain`]'s).

use std::fmt::Write as _;

use topoalign_engine::{Decision, Node, RejectionStage};
use topoalign_model::Machine;

/// A refusal in one line: the kubelet's reason and message, and for a
/// topology refusal the policy and scope that made it; `admitted` for an
/// admitted pod. A pod the kubelet crashes admitting
/// ([`Decision::kubelet_panic`]) is no refusal: the line says the kubelet
/// crashes, and why.
pub fn refusal(decision: &Decision) -> String {
    if let Some(panic) = &decision.kubelet_panic {
        return format!("no verdict, the kubelet crashes: {panic}");
    }
    let Some(rejection) = &decision.rejection else {
        return "admitted".to_owned();
    };
    match rejection.stage {
        RejectionStage::TopologyPolicy => format!(
            "{}: {} (topology manager policy {}, scope {})",
            rejection.reason,
            rejection.message,
            decision.trace.policy.as_str(),
            decision.trace.scope.as_str()
        ),
        _ => format!("{}: {}", rejection.reason, rejection.message),
    }
}

/// The decision on `machine` in one sentence: `ns/name is admitted under
/// topology policy P, aligned on NUMA [0]: c gets CPUs 2-3 (exclusive),
/// memory on NUMA [0].`, or `ns/name is rejected: <refusal>.`, or for a pod
/// the kubelet crashes admitting `ns/name crashes the kubelet: <why>.` NUMA
/// ids are the machine's own ([`Machine::numa_label`]).
pub fn decision_line(machine: &Machine, decision: &Decision) -> String {
    line(decision, &|n| machine.numa_label(n))
}

fn line(decision: &Decision, label: &dyn Fn(usize) -> usize) -> String {
    if let Some(panic) = &decision.kubelet_panic {
        return format!("{} crashes the kubelet: {panic}.", decision.pod);
    }
    if !decision.admitted() {
        return format!("{} is rejected: {}.", decision.pod, refusal(decision));
    }
    let mut text = format!(
        "{} is admitted under topology policy {}",
        decision.pod,
        decision.trace.policy.as_str()
    );
    let affinities: Vec<String> = decision
        .trace
        .merges
        .iter()
        .filter_map(|m| {
            m.best
                .affinity
                .map(|mask| format!("{:?}", mask.nodes().map(label).collect::<Vec<_>>()))
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
            let nodes: Vec<usize> = nodes.iter().map(|&n| label(n)).collect();
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

/// What each NUMA node has free for pinning now, from the engine's read
/// side ([`Node::numa_usage`]): `NUMA 0: 3 CPUs, 2Gi memory, 1
/// nvidia.com/gpu; NUMA 1: -`. Resources no manager places on NUMA nodes
/// are left out.
pub fn free_now(node: &Node) -> String {
    let nodes: Vec<String> = node
        .numa_usage()
        .iter()
        .map(|usage| {
            let parts: Vec<String> = usage
                .resources
                .iter()
                .filter(|(_, amounts)| amounts.placed)
                .map(|(resource, amounts)| match resource.as_str() {
                    "cpu" => format!("{} CPUs", amounts.available),
                    other => format!("{} {other}", amounts.available),
                })
                .collect();
            let parts = if parts.is_empty() {
                "-".to_owned()
            } else {
                parts.join(", ")
            };
            format!("NUMA {}: {parts}", node.machine().numa_label(usage.numa))
        })
        .collect();
    nodes.join("; ")
}
