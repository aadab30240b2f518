//! The exact allocation state carried in topoalign's own NRT attributes,
//! and rebuilding an engine [`Node`] from it.
//!
//! Zones say how many CPUs, bytes and devices each NUMA node has left —
//! enough for an approximate scheduler, not for an exact one: whether the
//! kubelet admits the next pod depends on *which* CPUs are taken (whole
//! cores, uncore caches), on the memory manager's multi-NUMA groups and on
//! which device ids are free. So a node that topoalign manages publishes two
//! more top-level attributes (plain strings, as the CRD requires):
//!
//! - [`NODE_SPEC_ATTRIBUTE`] (`topoalign.io/node-spec`): JSON
//!   `{"topology": …, "kubelet": …}` — the machine and kubelet blocks of
//!   docs/scenario.md, enough to start the same engine node;
//! - [`PODS_ATTRIBUTE`] (`topoalign.io/pods`): JSON list of the admitted
//!   pods in admission order — requests, limits, init/sidecar containers,
//!   overhead, and what each container holds now (CPUs, memory NUMA nodes,
//!   device ids).
//!
//! [`restore`] starts the node and admits the pods again in that order.
//! The engine is deterministic, so when the node's history had no
//! deletions this gives back the very same state; after deletions the
//! re-admitted placements can differ (a pod admitted after a deletion may
//! have taken CPUs a replay hands out differently). [`restore`] compares
//! every container's CPUs, memory NUMA nodes and devices with the published
//! ones and says whether the rebuilt state is [`Fidelity::Exact`]; callers
//! treat a [`Fidelity::Diverged`] node as unknown rather than guess.
//!
//! Owns: the attribute formats and the rebuild. Must not touch: decisions.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use topoalign_engine::{ContainerPlacement, Node};
use topoalign_model::{Container, Pod, Quantity, ResourceList};
use topoalign_scenario::{CpuSpec, DeviceSpec, NumaNodeSpec, TopologySpec};

/// Attribute holding the node's machine and kubelet configuration.
pub const NODE_SPEC_ATTRIBUTE: &str = "topoalign.io/node-spec";
/// Attribute holding the admitted pods and their placements.
pub const PODS_ATTRIBUTE: &str = "topoalign.io/pods";

/// A node's machine and kubelet configuration, in the scenario format.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeSpec {
    pub topology: TopologySpec,
    #[serde(default)]
    pub kubelet: serde_json::Value,
}

/// One admitted pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodRecord {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init_containers: Vec<ContainerRecord>,
    pub containers: Vec<ContainerRecord>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overhead: BTreeMap<String, String>,
}

/// One container: what it asked for and what it holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecord {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restartable: bool,
    /// Exclusive CPUs (kubelet list form); absent = shared pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_numa: Option<Vec<usize>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub devices: BTreeMap<String, Vec<String>>,
}

/// Why the published state cannot be rebuilt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error("attribute {0} is missing")]
    Missing(&'static str),
    #[error("attribute {attribute}: {message}")]
    Malformed { attribute: &'static str, message: String },
    /// The kubelet would not start with this machine and configuration.
    #[error("the node would not start: {0}")]
    Refused(String),
}

/// How faithful a rebuilt node is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fidelity {
    /// Every pod admitted again with exactly the published placements.
    Exact,
    /// The first pod whose re-admission differs, and how.
    Diverged { pod: String, detail: String },
}

/// A rebuilt node.
#[derive(Clone, Debug)]
pub struct Restored {
    pub node: Node,
    /// The pods in admission order (uids as published).
    pub pods: Vec<Pod>,
    pub fidelity: Fidelity,
}

/// The record of one admitted pod of `node`.
pub fn pod_record(node: &Node, pod: &Pod) -> PodRecord {
    let placements = node.current_placements(&pod.uid);
    let find = |name: &str, init: bool| placements.iter().find(|p| p.name == name && p.init == init);
    let container = |c: &Container, init: bool| {
        let placed = find(&c.name, init);
        ContainerRecord {
            name: c.name.clone(),
            requests: texts(&c.requests),
            limits: texts(&c.limits),
            restartable: c.restartable,
            cpus: placed.and_then(|p| p.cpus.as_ref()).map(ToString::to_string),
            memory_numa: placed.and_then(|p| p.memory_numa.clone()),
            devices: placed.map(|p| p.devices.clone()).unwrap_or_default(),
        }
    };
    PodRecord {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        uid: pod.uid.clone(),
        init_containers: pod.init_containers.iter().map(|c| container(c, true)).collect(),
        containers: pod.containers.iter().map(|c| container(c, false)).collect(),
        overhead: texts(&pod.overhead),
    }
}

/// Every admitted pod of `node`, in admission order.
pub fn pod_records(node: &Node) -> Vec<PodRecord> {
    node.pods().iter().map(|pod| pod_record(node, pod)).collect()
}

fn texts(list: &ResourceList) -> BTreeMap<String, String> {
    list.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()
}

impl PodRecord {
    /// The engine's pod (QoS recomputed from the resources).
    ///
    /// # Errors
    /// A message naming the bad quantity.
    pub fn to_pod(&self) -> Result<Pod, String> {
        let container = |c: &ContainerRecord| -> Result<Container, String> {
            Ok(Container {
                name: c.name.clone(),
                requests: quantities(&c.requests).map_err(|e| format!("{}: {e}", c.name))?,
                limits: quantities(&c.limits).map_err(|e| format!("{}: {e}", c.name))?,
                restartable: c.restartable,
            })
        };
        let init_containers = self
            .init_containers
            .iter()
            .map(container)
            .collect::<Result<Vec<_>, _>>()?;
        let containers = self.containers.iter().map(container).collect::<Result<Vec<_>, _>>()?;
        Ok(Pod {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            uid: self.uid.clone(),
            qos: topoalign_k8s::pod_qos(&init_containers, &containers),
            init_containers,
            containers,
            overhead: quantities(&self.overhead)?,
        })
    }

    /// Whether `placements` (from the engine) are what this record says.
    fn differs_from(&self, placements: &[ContainerPlacement]) -> Option<String> {
        let records = self
            .init_containers
            .iter()
            .map(|c| (c, true))
            .chain(self.containers.iter().map(|c| (c, false)));
        for (record, init) in records {
            let Some(placed) = placements.iter().find(|p| p.name == record.name && p.init == init) else {
                return Some(format!("container {} not placed", record.name));
            };
            let cpus = placed.cpus.as_ref().map(ToString::to_string);
            if cpus != record.cpus {
                return Some(format!(
                    "container {}: CPUs {} published, {} rebuilt",
                    record.name,
                    record.cpus.as_deref().unwrap_or("shared"),
                    cpus.as_deref().unwrap_or("shared")
                ));
            }
            if placed.memory_numa != record.memory_numa {
                return Some(format!("container {}: memory NUMA nodes differ", record.name));
            }
            if placed.devices != record.devices {
                return Some(format!("container {}: devices differ", record.name));
            }
        }
        None
    }
}

fn quantities(texts: &BTreeMap<String, String>) -> Result<ResourceList, String> {
    texts
        .iter()
        .map(|(k, v)| {
            topoalign_k8s::parse_quantity(v)
                .map(|q: Quantity| (k.clone(), q))
                .map_err(|e| format!("{k}: {e}"))
        })
        .collect()
}

/// The scenario `topology:` block describing `machine`.
pub fn topology_spec(machine: &topoalign_model::Machine) -> TopologySpec {
    let bytes = |n: u64| n.to_string();
    TopologySpec {
        numa_nodes: machine
            .numa_nodes()
            .iter()
            .map(|n| NumaNodeSpec {
                id: n.id,
                memory: bytes(n.memory),
                distances: n.distances.clone(),
                other: n
                    .hugepages
                    .iter()
                    .map(|(&size, &total)| {
                        (
                            topoalign_model::hugepage_resource_name(size),
                            serde_json::Value::String(bytes(total)),
                        )
                    })
                    .collect(),
            })
            .collect(),
        cpus: machine
            .cpus()
            .iter()
            .map(|c| CpuSpec {
                id: c.id,
                core: c.core,
                socket: c.socket,
                numa: c.numa,
                uncore_cache: c.uncore_cache,
            })
            .collect(),
        devices: machine
            .devices()
            .iter()
            .map(|(resource, devices)| {
                let list = devices
                    .iter()
                    .map(|d| DeviceSpec {
                        id: d.id.clone(),
                        numa: d.numa.clone(),
                    })
                    .collect();
                (resource.clone(), list)
            })
            .collect(),
    }
}

/// Starts the node a spec describes.
///
/// # Errors
/// [`RestoreError::Malformed`] for a bad topology or kubelet block,
/// [`RestoreError::Refused`] when the kubelet would not start.
pub fn start_node(spec: &NodeSpec) -> Result<Node, RestoreError> {
    let malformed = |message: String| RestoreError::Malformed {
        attribute: NODE_SPEC_ATTRIBUTE,
        message,
    };
    let machine = spec.topology.to_machine().map_err(|e| malformed(e.to_string()))?;
    let config = match topoalign_k8s::node_config_from_value(&spec.kubelet, &machine) {
        Ok(config) => config,
        Err(topoalign_k8s::ConfigError::Refused(text)) => return Err(RestoreError::Refused(text)),
        Err(topoalign_k8s::ConfigError::Invalid { path, message }) => {
            return Err(malformed(format!("kubelet.{path}: {message}")));
        }
    };
    Node::start(machine, config).map_err(|e| RestoreError::Refused(e.to_string()))
}

/// Rebuilds the node an NRT object describes from its topoalign
/// attributes (see the module docs).
///
/// # Errors
/// [`RestoreError`] when an attribute is missing or malformed, or the node
/// would not start.
pub fn restore(object: &crate::NodeResourceTopology) -> Result<Restored, RestoreError> {
    let spec_text = object
        .attribute(NODE_SPEC_ATTRIBUTE)
        .ok_or(RestoreError::Missing(NODE_SPEC_ATTRIBUTE))?;
    let spec: NodeSpec = serde_json::from_str(spec_text).map_err(|e| RestoreError::Malformed {
        attribute: NODE_SPEC_ATTRIBUTE,
        message: e.to_string(),
    })?;
    let records: Vec<PodRecord> = match object.attribute(PODS_ATTRIBUTE) {
        Some(text) => serde_json::from_str(text).map_err(|e| RestoreError::Malformed {
            attribute: PODS_ATTRIBUTE,
            message: e.to_string(),
        })?,
        None => Vec::new(),
    };
    restore_from(&spec, &records)
}

/// [`restore`] from already parsed parts.
///
/// # Errors
/// As [`restore`].
pub fn restore_from(spec: &NodeSpec, records: &[PodRecord]) -> Result<Restored, RestoreError> {
    let mut node = start_node(spec)?;
    let mut pods = Vec::with_capacity(records.len());
    let mut fidelity = Fidelity::Exact;
    for record in records {
        let pod = record.to_pod().map_err(|message| RestoreError::Malformed {
            attribute: PODS_ATTRIBUTE,
            message: format!("pod {}/{}: {message}", record.namespace, record.name),
        })?;
        let key = pod.key();
        let decision = node.admit(pod.clone());
        if fidelity == Fidelity::Exact {
            let detail = match &decision.rejection {
                Some(rejection) => Some(format!("not admitted again: {}", rejection.reason)),
                None => record.differs_from(&node.current_placements(&pod.uid)),
            };
            if let Some(detail) = detail {
                fidelity = Fidelity::Diverged { pod: key, detail };
            }
        }
        pods.push(pod);
    }
    Ok(Restored { node, pods, fidelity })
}

/// The node a scenario leaves behind: its machine and kubelet blocks, and
/// the engine node after all its events (adds and deletes, as `topoalign
/// replay` plays them).
///
/// # Errors
/// A message naming the malformed part, or the kubelet's start-up refusal.
pub fn scenario_node(scenario: &topoalign_scenario::Scenario) -> Result<(NodeSpec, Node), String> {
    let spec = NodeSpec {
        topology: scenario.topology.clone(),
        kubelet: scenario.kubelet.clone(),
    };
    let mut node = start_node(&spec).map_err(|e| e.to_string())?;
    topoalign_scenario::play_events(&mut node, scenario).map_err(|e| e.to_string())?;
    Ok((spec, node))
}
