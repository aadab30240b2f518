//! The per-pod document front ends print (`topoalign admit -o json`): the
//! fields of a `replay` result entry (docs/scenario.md) plus the QoS
//! class, the NUMA affinity chosen, warnings and, for a rejected pod (or on
//! request), the explanation.

use serde::Serialize;
use serde_json::Value;
use topoalign_engine::{ContainerPlacement, Decision, Node};
use topoalign_k8s::ManifestPod;
use topoalign_model::Machine;

use crate::hints::labels;
use crate::{Explanation, Situation, explain, warnings};

/// One pod's outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodReport {
    /// The pod's position among the pods admitted (0-based).
    pub event: usize,
    /// `namespace/name`.
    pub pod: String,
    pub admitted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The kubelet does not answer: it crashes admitting the pod (a Go
    /// panic; `reason` is then `KubeletPanic` and `message` this text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubelet_panic: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<ContainerPlacement>>,
    /// `Guaranteed`, `Burstable`, `BestEffort`.
    pub qos_class: String,
    /// The NUMA nodes the topology manager aligned the admitted pod to (the
    /// union over its containers under the container scope); `null` when
    /// nothing was aligned or the pod was rejected. Every NUMA id of the
    /// report is the machine's own (its original id on a machine numbered
    /// anew, [`Machine::numa_label`]).
    pub affinity: Option<Vec<usize>>,
    pub warnings: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explanation: Option<Explanation>,
}

/// The NUMA nodes a decision aligned the pod to: the union of the merged
/// hints' affinities (`None` when no merge chose any), as the engine's
/// node indices — the machine's ids unless it was read with NUMA ids past
/// 63 ([`numa_affinity`] names them as the machine does).
fn index_affinity(decision: &Decision) -> Option<Vec<usize>> {
    let union = decision
        .trace
        .merges
        .iter()
        .filter_map(|m| m.best.affinity)
        .fold(None, |acc: Option<topoalign_model::NumaMask>, mask| {
            Some(acc.map_or(mask, |a| a | mask))
        })?;
    Some(union.nodes().collect())
}

/// [`index_affinity`] with the machine's own NUMA ids ([`Machine::numa_label`]).
pub fn numa_affinity(machine: &Machine, decision: &Decision) -> Option<Vec<usize>> {
    index_affinity(decision).map(|nodes| labels(machine, nodes))
}

/// The placements of a decision on `machine` with the machine's own NUMA
/// ids (the memory's NUMA nodes; CPUs and devices carry no NUMA id).
pub fn numa_placements(machine: &Machine, containers: &[ContainerPlacement]) -> Vec<ContainerPlacement> {
    containers
        .iter()
        .map(|placement| ContainerPlacement {
            memory_numa: placement
                .memory_numa
                .as_ref()
                .map(|nodes| labels(machine, nodes.iter().copied())),
            ..placement.clone()
        })
        .collect()
}

/// The report for `decision` on `situation`; the explanation is included
/// for a rejected pod, and for an admitted one when `always_explain`.
pub fn pod_report(event: usize, situation: &Situation<'_>, decision: &Decision, always_explain: bool) -> PodReport {
    let explanation = (always_explain || !decision.admitted()).then(|| explain(situation, decision));
    let machine = situation.node.machine();
    PodReport {
        event,
        pod: decision.pod.clone(),
        admitted: decision.admitted(),
        reason: decision.rejection.as_ref().map(|r| r.reason.clone()),
        message: decision.rejection.as_ref().map(|r| r.message.clone()),
        kubelet_panic: decision.kubelet_panic.as_ref().map(ToString::to_string),
        containers: decision
            .admitted()
            .then(|| numa_placements(machine, &decision.containers)),
        qos_class: decision.qos.as_str().to_owned(),
        affinity: decision.admitted().then(|| numa_affinity(machine, decision)).flatten(),
        warnings: warnings::warnings(situation.node, situation.pod),
        explanation,
    }
}

/// Admits `pods` in order on `node`, each on the node as the previous ones
/// left it, and reports each ([`pod_report`]); `kubelet` is the node's
/// effective KubeletConfiguration fields.
pub fn admit_all(node: &mut Node, kubelet: &Value, pods: &[ManifestPod], always_explain: bool) -> Vec<PodReport> {
    let mut reports = Vec::with_capacity(pods.len());
    for (event, pod) in pods.iter().enumerate() {
        let before = node.clone();
        let decision = node.admit(pod.pod.clone());
        let situation = Situation {
            node: &before,
            kubelet,
            manifest: &pod.manifest,
            pod: &pod.pod,
        };
        reports.push(pod_report(event, &situation, &decision, always_explain));
    }
    reports
}
