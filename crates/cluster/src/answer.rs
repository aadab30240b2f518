//! One pod asked about across the cluster ([`explain_pod`]): per node,
//! would its kubelet admit the pod now, where, and if not why — the
//! engine's decision in `topoalign-explain`'s words — then the cheapest
//! fix, each one checked by running the engine again:
//!
//! 1. a node that admits the pod as it is (for a pod with ResourceClaims,
//!    one where DRA can allocate them, nodes where their devices share the
//!    kubelet's NUMA nodes first; then ready, schedulable and untainted
//!    nodes first, then by name);
//! 2. else the fewest evictions on one node: pods of the pod's priority or
//!    lower only (a pod never displaces a more important one), the fewest
//!    pods, then the lowest highest priority among them, then the lowest
//!    sum; re-checked by `topoalign_explain::fixes::apply` with those pods
//!    removed. *At most* the pod's priority, where kube-scheduler's
//!    preemption and `topoalign defrag` (which evicts by itself) take only
//!    *strictly lower* ones: this answer is advice a person acts on, and in
//!    a cluster without PriorityClasses every pod is 0, where strictly
//!    lower would never find an eviction. Lower ones still come first (the
//!    key's second part);
//! 3. else the pod change `explain` proposes (its first pod fix on the
//!    first node that has one, verified by `explain` itself).
//!
//! A pod with ResourceClaims is also asked, on each node judged, which
//! devices the scheduler's DRA allocator would give it there and whether
//! they share the NUMA nodes the kubelet pins its CPUs and memory to:
//! `topoalign_explain::dra::explain`, as `topoalign explain --dra` asks it,
//! on the node's DRA view ([`crate::dra::node_state`]).
//!
//! Pure: works on a [`ClusterSnapshot`]. Must not touch: decisions (the
//! engine's and the DRA allocator's), words for a decision
//! (`topoalign-explain`'s).

use std::collections::BTreeSet;

use itertools::Itertools as _;
use serde::Serialize;
use topoalign_engine::{Decision, Node};
use topoalign_explain::dra::DraExplanation;
use topoalign_explain::{Change, Explanation, Fix, Situation};
use topoalign_model::Pod;

use crate::snapshot::{ClusterNode, ClusterPod, ClusterSnapshot, NodeSource, PodState};

/// At most this many eviction sets are tried per node (they grow
/// combinatorially).
const EVICTION_ATTEMPTS: usize = 2000;
/// At most this many pods are evicted together.
const EVICTION_SET_SIZE: usize = 3;

/// The answer for one pod.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodAnswer {
    /// `namespace/name`.
    pub pod: String,
    /// Where the pod stands now, in words (`Pending, not scheduled`,
    /// `Failed on node-1: TopologyAffinityError: …`, `Running on node-1`).
    pub status: String,
    /// Per node, by name.
    pub nodes: Vec<NodeVerdict>,
    /// The cheapest verified fix; `None` when nothing found admits it.
    pub fix: Option<ClusterFix>,
    /// Why the pod cannot be judged at all (it cannot be read), else empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One node's answer for the pod.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeVerdict {
    pub node: String,
    /// How the node's state is known ([`ClusterNode::source_words`]).
    pub state: String,
    /// Not ready, cordoned, tainted: why a scheduler would not send pods
    /// here (the kubelet admits a pod bound by name regardless).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cautions: Vec<String>,
    #[serde(flatten)]
    pub verdict: Verdict,
    /// For a pod with ResourceClaims, on a node judged: the devices DRA
    /// would allocate here beside the kubelet's NUMA nodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dra: Option<DraVerdict>,
}

/// The DRA side of a pod on one node.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum DraVerdict {
    /// `topoalign_explain::dra`'s explanation: per request the devices and
    /// their NUMA nodes, the misaligned ones, fixes.
    Explained(Box<DraExplanation>),
    /// Why DRA is not asked here.
    NotJudged { why: String },
}

impl DraVerdict {
    /// DRA would allocate every claim here, each device with a NUMA node on
    /// the kubelet's (or the kubelet pins nothing).
    fn aligned(&self) -> bool {
        matches!(self, DraVerdict::Explained(e) if e.outcome == "allocated" && e.misaligned.is_empty())
    }

    /// DRA cannot allocate the claims here: the scheduler would not place
    /// the pod here.
    fn unallocatable(&self) -> bool {
        matches!(self, DraVerdict::Explained(e) if e.outcome != "allocated")
    }
}

/// Would the node's kubelet admit the pod now.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase", tag = "verdict")]
pub enum Verdict {
    /// Admitted: `line` is `explain`'s decision line, `affinity` the NUMA
    /// nodes.
    Admitted {
        line: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        affinity: Option<Vec<usize>>,
    },
    /// Rejected: `line` is the kubelet's refusal as `explain` words it,
    /// `explanation` the whole of `explain` (its summary is the why).
    Rejected {
        line: String,
        explanation: Box<Explanation>,
    },
    /// The node's state is not known exactly, or the pod could not land
    /// there at all: why.
    NotJudged { why: String },
}

/// The cheapest fix found.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum ClusterFix {
    /// The node admits the pod as it is: recreate it bound there
    /// (`spec.nodeName`, or a `nodeSelector` on `kubernetes.io/hostname`).
    Node { node: String, line: String },
    /// Evict these pods (`namespace/name`, priority) from `node` first;
    /// `line` is the re-checked decision.
    Evict {
        node: String,
        evict: Vec<Eviction>,
        line: String,
    },
    /// Change the pod as `explain` proposes for `node`.
    PodChange { node: String, fix: Box<Fix> },
}

/// One pod to evict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Eviction {
    pub pod: String,
    pub priority: i32,
}

impl ClusterFix {
    /// The fix in one sentence.
    pub fn words(&self) -> String {
        match self {
            ClusterFix::Node { node, line } => {
                format!("{node} admits it as it is; recreate the pod with spec.nodeName: {node}: {line}")
            }
            ClusterFix::Evict { node, evict, line } => {
                let pods: Vec<String> = evict
                    .iter()
                    .map(|e| format!("{} (priority {})", e.pod, e.priority))
                    .collect();
                format!(
                    "No node admits it as it is. Evict {} from {node} first, then recreate the pod with spec.nodeName: \
                     {node}: {line}",
                    pods.join(", ")
                )
            }
            ClusterFix::PodChange { node, fix } => format!(
                "No node admits it as it is, nor after evicting pods of its priority or lower. On {node}: {}",
                fix.description
            ),
        }
    }

    /// The node the fix lands the pod on.
    pub fn node(&self) -> &str {
        match self {
            ClusterFix::Node { node, .. } | ClusterFix::Evict { node, .. } | ClusterFix::PodChange { node, .. } => node,
        }
    }
}

/// The answer for `pod` across `snapshot`.
pub fn explain_pod(snapshot: &ClusterSnapshot, pod: &ClusterPod) -> PodAnswer {
    let mut answer = PodAnswer {
        pod: pod.key(),
        status: status_words(pod),
        nodes: Vec::new(),
        fix: None,
        notes: Vec::new(),
    };
    let model = match &pod.pod {
        Ok(model) => model,
        Err(error) => {
            answer.notes.push(format!("the pod cannot be read: {error}"));
            return answer;
        }
    };
    let claims = crate::dra::has_claims(&pod.manifest);
    let mut candidates: Vec<(&ClusterNode, Node, bool)> = Vec::new();
    let mut rejected: Vec<(&ClusterNode, Node, Explanation)> = Vec::new();
    for node in &snapshot.nodes {
        let (verdict, judged) = judge(node, pod, model);
        let mut dra = None;
        if let Some((engine, decision, explanation)) = judged {
            if claims {
                dra = Some(dra_verdict(snapshot, node, &engine, &decision, pod, model));
            }
            if decision.admitted() {
                if !dra.as_ref().is_some_and(DraVerdict::unallocatable) {
                    let aligned = dra.as_ref().is_none_or(DraVerdict::aligned);
                    candidates.push((node, engine, aligned));
                }
            } else if let Some(explanation) = explanation {
                rejected.push((node, engine, explanation));
            }
        }
        answer.nodes.push(NodeVerdict {
            node: node.name.clone(),
            state: node.source_words(),
            cautions: cautions(node),
            verdict,
            dra,
        });
    }
    // 1. A node as it is; DRA-aligned, then ready, schedulable, untainted
    // ones first.
    candidates.sort_by_key(|(node, _, aligned)| (!aligned, !cautions(node).is_empty(), node.name.clone()));
    if let Some((node, _, _)) = candidates.first()
        && let Some(NodeVerdict {
            verdict: Verdict::Admitted { line, .. },
            ..
        }) = answer.nodes.iter().find(|v| v.node == node.name)
    {
        answer.fix = Some(ClusterFix::Node {
            node: node.name.clone(),
            line: line.clone(),
        });
        return answer;
    }
    // 2. The fewest evictions, by priority, verified.
    let mut best: Option<(EvictionKey, ClusterFix)> = None;
    for (node, engine, _) in &rejected {
        let Some(exact) = node.exact() else { continue };
        let situation = Situation {
            node: engine,
            kubelet: &exact.spec.kubelet,
            manifest: &pod.manifest,
            pod: model,
        };
        if let Some((key, evict, decision)) = fewest_evictions(node, &situation, pod.priority)
            && best.as_ref().is_none_or(|(best_key, _)| key < *best_key)
        {
            best = Some((
                key,
                ClusterFix::Evict {
                    node: node.name.clone(),
                    evict,
                    line: topoalign_explain::words::decision_line(engine.machine(), &decision),
                },
            ));
        }
    }
    if let Some((_, fix)) = best {
        answer.fix = Some(fix);
        return answer;
    }
    // 3. The pod change explain proposes.
    answer.fix = rejected.iter().find_map(|(node, _, explanation)| {
        explanation
            .fixes
            .iter()
            .find(|fix| matches!(fix.change, Change::Pod(_)))
            .map(|fix| ClusterFix::PodChange {
                node: node.name.clone(),
                fix: Box::new(fix.clone()),
            })
    });
    answer
}

/// The DRA side of `pod` on `node`, the kubelet's `decision` for it on
/// `engine` (the node without the pod).
fn dra_verdict(
    snapshot: &ClusterSnapshot,
    node: &ClusterNode,
    engine: &Node,
    decision: &Decision,
    pod: &ClusterPod,
    model: &Pod,
) -> DraVerdict {
    let Some(exact) = node.exact() else {
        return DraVerdict::NotJudged {
            why: "the node's state is not known exactly".to_owned(),
        };
    };
    let release = engine.config().kubelet_version.to_string();
    if !topoalign_explain::dra::RELEASES.contains(&release.as_str()) {
        return DraVerdict::NotJudged {
            why: format!(
                "its kubelet is {release}; the DRA allocator is reproduced for {}",
                topoalign_explain::dra::RELEASES.join(", ")
            ),
        };
    }
    let kube_pod = match serde_json::from_value::<k8s_openapi::api::core::v1::Pod>(pod.manifest.clone()) {
        Ok(kube_pod) => kube_pod,
        Err(error) => {
            return DraVerdict::NotJudged {
                why: format!("the pod cannot be read as a Pod: {error}"),
            };
        }
    };
    let (state, kube_pod) = crate::dra::node_state(
        &snapshot.dra,
        &node.name,
        &node.labels,
        engine.machine(),
        &release,
        &kube_pod,
    );
    let situation = Situation {
        node: engine,
        kubelet: &exact.spec.kubelet,
        manifest: &pod.manifest,
        pod: model,
    };
    match topoalign_explain::dra::explain(&situation, decision, &state, &kube_pod) {
        Ok(Some(explanation)) => DraVerdict::Explained(Box::new(explanation)),
        Ok(None) => DraVerdict::NotJudged {
            why: "the pod names no ResourceClaim".to_owned(),
        },
        // The scenario crate's words name its `dra:` block; here the
        // objects are the cluster's.
        Err(error) => DraVerdict::NotJudged {
            why: format!(
                "the pod's {}",
                error.to_string().replace(" in the dra block", " in the cluster")
            ),
        },
    }
}

/// (pods evicted, highest priority, sum of priorities, node name): smaller
/// is cheaper.
type EvictionKey = (usize, i32, i64, String);

/// The cheapest set of pods (priority at most `priority`) whose eviction
/// lets `situation.node` admit the pod, re-checked by
/// `topoalign_explain::fixes::apply`.
fn fewest_evictions(
    node: &ClusterNode,
    situation: &Situation<'_>,
    priority: i32,
) -> Option<(EvictionKey, Vec<Eviction>, Decision)> {
    let mut evictable: Vec<Eviction> = node
        .holdings
        .iter()
        .filter(|h| h.priority <= priority && h.uid != situation.pod.uid)
        .map(|h| Eviction {
            pod: h.pod.clone(),
            priority: h.priority,
        })
        .collect();
    evictable.sort_by(|a, b| (a.priority, &a.pod).cmp(&(b.priority, &b.pod)));
    let mut attempts = 0;
    for size in 1..=EVICTION_SET_SIZE.min(evictable.len()) {
        let mut found: Option<(EvictionKey, Vec<Eviction>, Decision)> = None;
        for set in (0..evictable.len()).combinations(size) {
            if attempts >= EVICTION_ATTEMPTS {
                break;
            }
            attempts += 1;
            let chosen: Vec<Eviction> = set.iter().map(|&i| evictable[i].clone()).collect();
            let keys: Vec<String> = chosen.iter().map(|e| e.pod.clone()).collect();
            let Ok(decision) = topoalign_explain::fixes::apply(situation, &Change::Remove(keys)) else {
                continue;
            };
            if !decision.admitted() {
                continue;
            }
            let key = (
                size,
                chosen.iter().map(|e| e.priority).max().unwrap_or(i32::MIN),
                chosen.iter().map(|e| i64::from(e.priority)).sum(),
                node.name.clone(),
            );
            if found.as_ref().is_none_or(|(k, _, _)| key < *k) {
                found = Some((key, chosen, decision));
            }
        }
        if found.is_some() {
            return found;
        }
    }
    None
}

/// The verdict on one node, and for an exact node the engine node the pod
/// was tried on (without the pod itself, if it held it), the decision and,
/// for a rejection, `explain`'s explanation.
fn judge(
    node: &ClusterNode,
    pod: &ClusterPod,
    model: &Pod,
) -> (Verdict, Option<(Node, Decision, Option<Explanation>)>) {
    let exact = match &node.source {
        NodeSource::Exact(exact) => exact,
        NodeSource::Approximate(_) => {
            return (
                Verdict::NotJudged {
                    why: "its NodeResourceTopology object has zone counts only, not which CPUs and devices are free"
                        .to_owned(),
                },
                None,
            );
        }
        NodeSource::Unknown { reason } => {
            return (
                Verdict::NotJudged {
                    why: format!("its publisher does not know its state now: {reason}"),
                },
                None,
            );
        }
        NodeSource::Missing => {
            return (
                Verdict::NotJudged {
                    why: "no NodeResourceTopology object describes it".to_owned(),
                },
                None,
            );
        }
        NodeSource::Unreadable { error } => {
            return (
                Verdict::NotJudged {
                    why: format!("its NodeResourceTopology object cannot be read: {error}"),
                },
                None,
            );
        }
    };
    if let Some(why) = selector_mismatch(node, pod) {
        return (Verdict::NotJudged { why }, None);
    }
    let mut engine = exact.node.clone();
    // A pod the node holds (it runs there) is judged as if it did not.
    engine.remove(&model.uid);
    let decision = engine.try_admit(model).decision;
    if decision.admitted() {
        let verdict = Verdict::Admitted {
            line: topoalign_explain::words::decision_line(engine.machine(), &decision),
            affinity: topoalign_explain::report::numa_affinity(engine.machine(), &decision),
        };
        return (verdict, Some((engine, decision, None)));
    }
    let situation = Situation {
        node: &engine,
        kubelet: &exact.spec.kubelet,
        manifest: &pod.manifest,
        pod: model,
    };
    let explanation = topoalign_explain::explain(&situation, &decision);
    let verdict = Verdict::Rejected {
        line: topoalign_explain::words::refusal(&decision),
        explanation: Box::new(explanation.clone()),
    };
    (verdict, Some((engine, decision, Some(explanation))))
}

/// The pod's `spec.nodeSelector` entries the node's labels do not match,
/// in words (the kubelet refuses such a pod: `NodeAffinity`).
fn selector_mismatch(node: &ClusterNode, pod: &ClusterPod) -> Option<String> {
    let selector = pod.manifest.pointer("/spec/nodeSelector")?.as_object()?;
    let unmatched: Vec<String> = selector
        .iter()
        .filter(|(key, value)| node.labels.get(*key).map(String::as_str) != value.as_str())
        .map(|(key, value)| format!("{key}={}", value.as_str().unwrap_or_default()))
        .collect();
    (!unmatched.is_empty()).then(|| {
        format!(
            "its labels do not match the pod's nodeSelector {}",
            unmatched.join(", ")
        )
    })
}

/// Why a scheduler would not send pods to `node`.
pub fn cautions(node: &ClusterNode) -> Vec<String> {
    let mut out = Vec::new();
    if !node.ready {
        out.push("not Ready".to_owned());
    }
    if node.unschedulable {
        out.push("cordoned".to_owned());
    }
    let taints: BTreeSet<&String> = node
        .taints
        .iter()
        .filter(|t| t.ends_with(":NoSchedule") || t.ends_with(":NoExecute"))
        .collect();
    if !taints.is_empty() {
        out.push(format!(
            "tainted {}",
            taints.into_iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    out
}

/// Where the pod stands, in words.
fn status_words(pod: &ClusterPod) -> String {
    let on = pod.node_name.as_deref().unwrap_or("?");
    match &pod.state {
        PodState::Unscheduled => "Pending, not scheduled".to_owned(),
        PodState::Bound => format!("Pending, bound to {on}, not admitted yet"),
        PodState::Running => format!("Running on {on}"),
        PodState::Rejected { reason } => match &pod.message {
            Some(message) => format!("Failed on {on}: {reason}: {message}"),
            None => format!("Failed on {on}: {reason}"),
        },
        PodState::Finished => "finished (Succeeded, or Failed after it ran)".to_owned(),
    }
}
