//! [`ClusterSnapshot`]: one reading of a cluster, as plain data — every
//! Node with the engine node its NodeResourceTopology object describes
//! (exact, approximate, unknown, missing or unreadable, and stale or not),
//! who holds what on it, and every pod with what it waits for.
//!
//! Built by [`build`] from the API objects and the time of the reading;
//! pure (the reading itself is [`crate::read`]).
//!
//! Owns: how an object says it is exact, approximate or unknown
//! ([`NodeSource`]), when it is stale ([`ClusterNode::stale`]), which pods
//! wait ([`PodState`]), which DRA devices are a node's ([`crate::dra`]).
//! Must not touch: decisions (the engine's, asked through
//! [`crate::answer`]), the NRT formats (`topoalign-nrt`'s).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node as K8sNode, Pod as K8sPod};
use serde_json::Value;
use topoalign_engine::{ContainerPlacement, Node};
use topoalign_k8s::PodError;
use topoalign_model::Pod;
use topoalign_nrt::{NodeResourceTopology, NodeSpec, STATE_UNKNOWN_ATTRIBUTE};
use topoalign_scenario::dra::DraSpec;

use crate::dra::NodeDra;

/// One NodeResourceTopology object as read, with when its writer last
/// changed it (the latest `managedFields` time, else its creation).
#[derive(Clone, Debug)]
pub struct TopologyObject {
    /// `metadata.name`: the node's name.
    pub name: String,
    /// The object, or why it is not one of the shape `topoalign-nrt` reads.
    pub object: Result<NodeResourceTopology, UnreadableObject>,
    pub updated: Option<Timestamp>,
}

/// A NodeResourceTopology object not of the shape `topoalign-nrt` reads:
/// its name and the decoder's complaint (naming the field).
#[derive(Clone, Debug, thiserror::Error)]
#[error("NodeResourceTopology {name}: {source}")]
pub struct UnreadableObject {
    pub name: String,
    /// Shared: a snapshot is cloned, a decoding error cannot be.
    #[source]
    pub source: std::sync::Arc<serde_json::Error>,
}

impl UnreadableObject {
    /// The object named `name` that `source` could not decode.
    pub fn new(name: impl Into<String>, source: serde_json::Error) -> UnreadableObject {
        UnreadableObject {
            name: name.into(),
            source: std::sync::Arc::new(source),
        }
    }
}

/// What a reading of the cluster returned.
#[derive(Clone, Debug, Default)]
pub struct Objects {
    pub nodes: Vec<K8sNode>,
    pub topologies: Vec<TopologyObject>,
    pub pods: Vec<K8sPod>,
    /// DeviceClasses, ResourceSlices, ResourceClaims and
    /// ResourceClaimTemplates (`node` unset); empty where the API server
    /// serves no `resource.k8s.io/v1`.
    pub dra: DraSpec,
}

/// The cluster at one moment.
#[derive(Clone, Debug)]
pub struct ClusterSnapshot {
    /// When it was read.
    pub taken_at: Timestamp,
    /// Every Node, by name.
    pub nodes: Vec<ClusterNode>,
    /// Every pod read, by `namespace/name`.
    pub pods: Vec<ClusterPod>,
    /// The cluster's DRA objects, as read.
    pub dra: DraSpec,
}

/// One Node.
#[derive(Clone, Debug)]
pub struct ClusterNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// `key=value:Effect` of each taint.
    pub taints: Vec<String>,
    /// The Ready condition is True.
    pub ready: bool,
    /// `spec.unschedulable` (cordoned).
    pub unschedulable: bool,
    /// What its NodeResourceTopology object says of it.
    pub source: NodeSource,
    /// When the object's writer last changed it.
    pub updated: Option<Timestamp>,
    /// Why the object's exact state is not the node's now, in words (empty:
    /// it agrees with the API server's pods). Only exact objects are
    /// checked.
    pub stale: Vec<String>,
    /// The pods the node's state holds, in admission order (exact objects
    /// only).
    pub holdings: Vec<Holding>,
    /// Its DRA devices: the slices published for it, the devices claims
    /// hold there and by which pods.
    pub dra: NodeDra,
}

/// How much a node's NodeResourceTopology object tells.
#[derive(Clone, Debug)]
pub enum NodeSource {
    /// topoalign's exact-state attributes, restored into the engine: the
    /// node as its kubelet holds it (see docs/nrt.md).
    Exact(Box<ExactNode>),
    /// Zones only (another exporter, or `--no-exact-state`): per-NUMA
    /// counts, not which CPUs or devices; the engine cannot be asked.
    Approximate(Box<NodeResourceTopology>),
    /// The publisher says it does not know the node's state now
    /// (`topoalign.io/state-unknown`), and why.
    Unknown { reason: String },
    /// No object for this node.
    Missing,
    /// An object that cannot be read or restored, and why.
    Unreadable { error: String },
}

/// A node rebuilt from its exact state.
#[derive(Clone, Debug)]
pub struct ExactNode {
    /// The machine and kubelet blocks (`spec.kubelet` is the JSON
    /// `explain`'s kubelet fixes change).
    pub spec: NodeSpec,
    /// The engine node in the published state.
    pub node: Node,
}

/// What one pod holds on a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holding {
    /// `namespace/name`.
    pub pod: String,
    pub uid: String,
    /// `spec.priority` of the pod in the API server (0 when it has none,
    /// or the API server does not list it).
    pub priority: i32,
    /// Exclusive CPUs, pinned memory and devices per container (containers
    /// holding nothing exclusively are left out).
    pub containers: Vec<ContainerPlacement>,
    /// The NUMA nodes its exclusive CPUs, pinned memory and devices are on.
    pub numa: BTreeSet<usize>,
}

/// One pod.
#[derive(Clone, Debug)]
pub struct ClusterPod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node_name: Option<String>,
    /// `spec.priority` (0 when unset).
    pub priority: i32,
    pub state: PodState,
    /// `status.message`.
    pub message: Option<String>,
    /// The pod as the API server returned it (for `explain`, whose pod
    /// fixes change a copy of it).
    pub manifest: Value,
    /// The pod as the engine reads it, or why it cannot (the field).
    pub pod: Result<Pod, PodError>,
}

/// Where a pod stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PodState {
    /// Pending, no node yet.
    Unscheduled,
    /// Bound to a node, not started yet (the kubelet has not admitted it).
    Bound,
    /// Running on its node.
    Running,
    /// Failed by the kubelet's admission (`TopologyAffinityError`,
    /// `UnexpectedAdmissionError`, `SMTAlignmentError`, `OutOf…`): the
    /// reason.
    Rejected { reason: String },
    /// Succeeded, or Failed for another reason.
    Finished,
}

/// The kubelet's admission refusals (`status.reason` of a pod it rejected).
pub fn is_admission_reason(reason: &str) -> bool {
    matches!(
        reason,
        "TopologyAffinityError" | "UnexpectedAdmissionError" | "SMTAlignmentError"
    ) || reason.starts_with("OutOf")
}

impl ClusterPod {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Waiting for a node: unscheduled, or rejected by a kubelet.
    pub fn waiting(&self) -> bool {
        matches!(self.state, PodState::Unscheduled | PodState::Rejected { .. })
    }
}

impl ClusterNode {
    /// The engine node, when the object carries the exact state.
    pub fn exact(&self) -> Option<&ExactNode> {
        match &self.source {
            NodeSource::Exact(exact) => Some(exact),
            _ => None,
        }
    }

    /// How the node's state is known, in a few words: `exact`,
    /// `approximate (zones only)`, `unknown: …`, `no NodeResourceTopology
    /// object`, `unreadable: …`; `, stale: …` after it when it is.
    pub fn source_words(&self) -> String {
        let mut words = match &self.source {
            NodeSource::Exact(_) => "exact".to_owned(),
            NodeSource::Approximate(_) => {
                "approximate (zones only: no topoalign exact state, so which CPUs and devices are free is not known)"
                    .to_owned()
            }
            NodeSource::Unknown { reason } => format!("unknown: {reason}"),
            NodeSource::Missing => "no NodeResourceTopology object".to_owned(),
            NodeSource::Unreadable { error } => format!("unreadable: {error}"),
        };
        if !self.stale.is_empty() {
            words.push_str(&format!(", stale: {}", self.stale.join("; ")));
        }
        words
    }
}

impl ClusterSnapshot {
    pub fn node(&self, name: &str) -> Option<&ClusterNode> {
        self.nodes.iter().find(|n| n.name == name)
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<&ClusterPod> {
        self.pods.iter().find(|p| p.namespace == namespace && p.name == name)
    }

    /// The pods waiting for a node ([`ClusterPod::waiting`]).
    pub fn waiting(&self) -> impl Iterator<Item = &ClusterPod> {
        self.pods.iter().filter(|p| p.waiting())
    }
}

/// The snapshot of `objects`, read at `now`.
pub fn build(objects: Objects, now: Timestamp) -> ClusterSnapshot {
    let pods: Vec<ClusterPod> = {
        let mut pods: Vec<ClusterPod> = objects.pods.iter().map(cluster_pod).collect();
        pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        pods
    };
    let by_uid: HashMap<&str, &ClusterPod> = pods.iter().map(|p| (p.uid.as_str(), p)).collect();
    let mut topologies: HashMap<String, TopologyObject> =
        objects.topologies.into_iter().map(|t| (t.name.clone(), t)).collect();
    let mut nodes: Vec<ClusterNode> = objects
        .nodes
        .iter()
        .map(|object| {
            let name = object.metadata.name.clone().unwrap_or_default();
            let topology = topologies.remove(&name);
            let updated = topology.as_ref().and_then(|t| t.updated);
            let source = match topology {
                None => NodeSource::Missing,
                Some(topology) => source_of(topology.object),
            };
            let (holdings, stale) = match &source {
                NodeSource::Exact(exact) => (holdings(&exact.node, &by_uid), stale(&name, &exact.node, &pods)),
                _ => (Vec::new(), Vec::new()),
            };
            let spec = object.spec.as_ref();
            ClusterNode {
                labels: object.metadata.labels.clone().unwrap_or_default(),
                taints: spec
                    .and_then(|s| s.taints.as_ref())
                    .into_iter()
                    .flatten()
                    .map(|t| match &t.value {
                        Some(value) => format!("{}={value}:{}", t.key, t.effect),
                        None => format!("{}:{}", t.key, t.effect),
                    })
                    .collect(),
                ready: object
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .into_iter()
                    .flatten()
                    .any(|c| c.type_ == "Ready" && c.status == "True"),
                unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false),
                dra: NodeDra::of(object, &objects.dra),
                name,
                source,
                updated,
                stale,
                holdings,
            }
        })
        .collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    ClusterSnapshot {
        taken_at: now,
        nodes,
        pods,
        dra: objects.dra,
    }
}

/// What an object says of its node.
fn source_of(object: Result<NodeResourceTopology, UnreadableObject>) -> NodeSource {
    let object = match object {
        Ok(object) => object,
        Err(error) => {
            return NodeSource::Unreadable {
                error: error.to_string(),
            };
        }
    };
    if let Some(reason) = object.attribute(STATE_UNKNOWN_ATTRIBUTE) {
        return NodeSource::Unknown {
            reason: reason.to_owned(),
        };
    }
    let has = |name| object.attribute(name).is_some();
    if !has(topoalign_nrt::exact::NODE_SPEC_ATTRIBUTE) && !has(topoalign_nrt::exact::STATE_ATTRIBUTE) {
        return NodeSource::Approximate(Box::new(object));
    }
    let restored = topoalign_nrt::read_spec(&object).and_then(|spec| {
        let state = topoalign_nrt::read_state(&object)?;
        let node = topoalign_nrt::restore_onto(topoalign_nrt::start_node(&spec)?, &state)?;
        Ok(ExactNode { spec, node })
    });
    match restored {
        Ok(exact) => NodeSource::Exact(Box::new(exact)),
        Err(error) => NodeSource::Unreadable {
            error: error.to_string(),
        },
    }
}

/// Who holds what on `node`, with the API server's priorities.
fn holdings(node: &Node, by_uid: &HashMap<&str, &ClusterPod>) -> Vec<Holding> {
    let state = node.state();
    let devices = node.snapshot().devices;
    let machine = node.machine();
    node.pods()
        .iter()
        .map(|pod| {
            let key = pod.key();
            let mut containers = Vec::new();
            let mut numa = BTreeSet::new();
            for (container, init) in pod
                .init_containers
                .iter()
                .map(|c| (c, true))
                .chain(pod.containers.iter().map(|c| (c, false)))
            {
                let cpus = state
                    .cpu_assignments
                    .get(&key)
                    .and_then(|m| m.get(&container.name))
                    .cloned();
                let memory_numa = state
                    .memory_assignments
                    .get(&key)
                    .and_then(|m| m.get(&container.name))
                    .cloned();
                let held: BTreeMap<String, Vec<String>> = devices
                    .get(&pod.uid)
                    .and_then(|m| m.get(&container.name))
                    .cloned()
                    .unwrap_or_default();
                if cpus.is_none() && memory_numa.is_none() && held.is_empty() {
                    continue;
                }
                if let Some(cpus) = &cpus {
                    numa.extend(cpus.iter().filter_map(|cpu| machine.cpu(cpu).map(|c| c.numa)));
                }
                numa.extend(memory_numa.iter().flatten().copied());
                for (resource, ids) in &held {
                    for id in ids {
                        let attached = machine
                            .devices()
                            .get(resource)
                            .and_then(|list| list.iter().find(|d| &d.id == id))
                            .map(|d| d.numa.clone());
                        numa.extend(attached.into_iter().flatten());
                    }
                }
                containers.push(ContainerPlacement {
                    name: container.name.clone(),
                    init,
                    cpus,
                    memory_numa,
                    devices: held,
                });
            }
            Holding {
                pod: key,
                uid: pod.uid.clone(),
                priority: by_uid.get(pod.uid.as_str()).map_or(0, |p| p.priority),
                containers,
                numa,
            }
        })
        .collect()
}

/// Why the exact state of node `name` disagrees with the API server's pods.
fn stale(name: &str, node: &Node, pods: &[ClusterPod]) -> Vec<String> {
    let held: BTreeSet<&str> = node.pods().iter().map(|p| p.uid.as_str()).collect();
    let mut reasons = Vec::new();
    let missing: Vec<String> = pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(name) && p.state == PodState::Running)
        .filter(|p| !held.contains(p.uid.as_str()))
        .map(ClusterPod::key)
        .collect();
    if !missing.is_empty() {
        reasons.push(format!("running here but not in its state: {}", missing.join(", ")));
    }
    let live: BTreeSet<&str> = pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(name) && matches!(p.state, PodState::Running | PodState::Bound))
        .map(|p| p.uid.as_str())
        .collect();
    let gone: Vec<String> = node
        .pods()
        .iter()
        .filter(|p| !live.contains(p.uid.as_str()))
        .map(|p| p.key())
        .collect();
    if !gone.is_empty() {
        reasons.push(format!(
            "in its state but deleted, finished or elsewhere: {}",
            gone.join(", ")
        ));
    }
    reasons
}

/// One pod as read.
fn cluster_pod(object: &K8sPod) -> ClusterPod {
    let metadata = &object.metadata;
    let spec = object.spec.as_ref();
    let status = object.status.as_ref();
    let node_name = spec.and_then(|s| s.node_name.clone()).filter(|n| !n.is_empty());
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    let reason = status.and_then(|s| s.reason.clone());
    let state = match phase {
        "Pending" if node_name.is_none() => PodState::Unscheduled,
        "Pending" => PodState::Bound,
        "Running" => PodState::Running,
        "Failed" => match reason {
            Some(reason) if is_admission_reason(&reason) => PodState::Rejected { reason },
            _ => PodState::Finished,
        },
        _ => PodState::Finished,
    };
    let uid = metadata.uid.clone().unwrap_or_default();
    ClusterPod {
        namespace: metadata.namespace.clone().unwrap_or_else(|| "default".to_owned()),
        name: metadata.name.clone().unwrap_or_default(),
        node_name,
        priority: spec.and_then(|s| s.priority).unwrap_or(0),
        state,
        message: status.and_then(|s| s.message.clone()),
        manifest: serde_json::to_value(object).unwrap_or(Value::Null),
        pod: topoalign_k8s::pod_from_k8s(object, &uid),
        uid,
    }
}
