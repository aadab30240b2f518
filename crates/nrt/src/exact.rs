//! The exact allocation state carried in topoalign's own NRT attributes,
//! and rebuilding an engine [`Node`] from it.
//!
//! Zones say how many CPUs, bytes and devices each NUMA node has left —
//! enough for an approximate scheduler, not for an exact one: whether the
//! kubelet admits the next pod depends on *which* CPUs are taken (whole
//! cores, uncore caches), on the memory manager's multi-NUMA groups and on
//! which device ids are free. So a node that topoalign describes publishes
//! two more top-level attributes (plain strings, as the CRD requires):
//!
//! - [`NODE_SPEC_ATTRIBUTE`] (`topoalign.io/node-spec`): JSON
//!   `{"topology": …, "kubelet": …}` — the machine and kubelet blocks of
//!   docs/scenario.md, enough to start the same engine node;
//! - [`STATE_ATTRIBUTE`] (`topoalign.io/state`): JSON [`StateRecord`] — a
//!   *snapshot* of what the node holds, in the shape of the kubelet's own
//!   checkpoints: the admitted pods (requests, limits, init and sidecar
//!   containers, overhead: what the resource-fit check counts), the CPU
//!   manager's shared pool and exclusive assignments (`cpu_manager_state`),
//!   the memory manager's machine state and memory blocks
//!   (`memory_manager_state`), and the device manager's assignments.
//!
//! [`restore`] starts the node and restores the snapshot through the
//! engine's restore path — the one a restarting kubelet takes and
//! `diagnose` uses — so the rebuilt node *is* the published node, whatever
//! history of admissions and deletions led there. (An earlier format
//! carried only the pods and admitted them again; after a deletion that
//! could give other CPUs.) A snapshot the engine refuses to restore is an
//! error, never a guess.
//!
//! The writing side, [`state_json`], writes the attribute's text straight
//! from the node, byte for byte the JSON of [`StateRecord::of`] without
//! building the record.
//!
//! Owns: the attribute formats and the rebuild. Must not touch: decisions.

mod view;
mod write;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use topoalign_engine::{MemoryBlock, MemoryManagerState, MemoryTableState, Node};
use topoalign_model::{Container, Pod, ResourceList};
use topoalign_scenario::{CpuSpec, DeviceSpec, NumaNodeSpec, TopologySpec};
pub use view::{
    BlockView, ContainerView, CpuView, Few, MemoryView, NumaMemoryView, Pairs, PodResourcesView, PodView, StateView,
    Text,
};
pub use write::state_json;

/// Attribute holding the node's machine and kubelet configuration.
pub const NODE_SPEC_ATTRIBUTE: &str = "topoalign.io/node-spec";
/// Attribute holding the node's allocation state ([`StateRecord`]).
pub const STATE_ATTRIBUTE: &str = "topoalign.io/state";

/// A node's machine and kubelet configuration, in the scenario format.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeSpec {
    pub topology: TopologySpec,
    #[serde(default)]
    pub kubelet: serde_json::Value,
}

/// Everything a node holds, as plain data: the engine's
/// [`NodeSnapshot`](topoalign_engine::NodeSnapshot) in the kubelet
/// checkpoints' vocabulary. The writer only: the text it writes is read
/// through [`StateView`], the one reading of the format.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StateRecord {
    /// The admitted pods, in admission order.
    pub pods: Vec<PodRecord>,
    /// `cpu_manager_state` without its checksum.
    pub cpu: CpuRecord,
    /// `memory_manager_state` without its checksum; absent under the
    /// `None` memory policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryRecord>,
    /// Device ids per pod uid, container and resource.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub devices: BTreeMap<String, BTreeMap<String, BTreeMap<String, Vec<String>>>>,
}

/// One admitted pod: what the resource-fit check and the managers need of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
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
    /// `spec.resources` as the node admitted it (pod-level resources read:
    /// defaulted, QoS taken from them); absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_resources: Option<PodResourcesRecord>,
}

/// A pod's `spec.resources`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodResourcesRecord {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, String>,
}

/// One container's resources.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerRecord {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restartable: bool,
}

/// The CPU manager's state (`cpu_manager_state`'s fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuRecord {
    /// The shared pool, in kubelet list form.
    pub default_cpu_set: String,
    /// Pod uid → container → exclusive CPUs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub entries: BTreeMap<String, BTreeMap<String, String>>,
    /// Pod uid → the pod's CPUs (`podEntries`, `PodLevelResourceManagers`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_entries: BTreeMap<String, String>,
}

/// The memory manager's state (`memory_manager_state`'s fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryRecord {
    /// Per NUMA node.
    pub machine_state: BTreeMap<usize, NumaMemoryRecord>,
    /// Pod uid → container → memory blocks.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub entries: BTreeMap<String, BTreeMap<String, Vec<BlockRecord>>>,
    /// Pod uid → the pod's memory blocks (`podEntries`,
    /// `PodLevelResourceManagers`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_entries: BTreeMap<String, Vec<BlockRecord>>,
}

/// One NUMA node of the memory manager's machine state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NumaMemoryRecord {
    pub number_of_assignments: i64,
    /// Per resource (`memory`, `hugepages-<size>`), in bytes.
    pub memory_map: BTreeMap<String, TableRecord>,
    pub cells: Vec<usize>,
}

/// One resource's table on one NUMA node, in bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableRecord {
    pub total: u64,
    pub system_reserved: u64,
    pub allocatable: u64,
    pub reserved: u64,
    pub free: u64,
}

/// One memory block of a container.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockRecord {
    pub numa_affinity: Vec<usize>,
    #[serde(rename = "type")]
    pub resource: String,
    pub size: u64,
}

/// Why the published state cannot be rebuilt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error("attribute {0} is missing")]
    Missing(&'static str),
    #[error("attribute {attribute}: {message}")]
    Malformed { attribute: &'static str, message: String },
    /// The kubelet would not start with this machine and configuration.
    #[error("the kubelet would refuse to start: {0}")]
    Refused(String),
    /// The node refuses the published state, as a restarting kubelet
    /// would (the text is the kubelet's).
    #[error("the published state cannot be restored: {0}")]
    Unrestorable(String),
}

/// A rebuilt node.
#[derive(Clone, Debug)]
pub struct Restored {
    pub node: Node,
    /// The pods in admission order, as the node admitted them (uids as
    /// published).
    pub pods: Vec<Pod>,
}

impl StateRecord {
    /// The state `node` holds now.
    pub fn of(node: &Node) -> StateRecord {
        let snapshot = node.snapshot();
        StateRecord {
            pods: snapshot.pods.iter().map(PodRecord::of).collect(),
            cpu: CpuRecord {
                default_cpu_set: snapshot.cpu.default_cpu_set.to_string(),
                entries: snapshot
                    .cpu
                    .assignments
                    .iter()
                    .map(|(uid, containers)| {
                        let containers = containers.iter().map(|(c, cpus)| (c.clone(), cpus.to_string()));
                        (uid.clone(), containers.collect())
                    })
                    .collect(),
                pod_entries: snapshot
                    .cpu
                    .pod_assignments
                    .iter()
                    .map(|(uid, cpus)| (uid.clone(), cpus.to_string()))
                    .collect(),
            },
            memory: snapshot.memory.as_ref().map(MemoryRecord::of),
            devices: snapshot.devices,
        }
    }
}

/// Pod uid → container → items, each item converted.
type PerContainer<T> = BTreeMap<String, BTreeMap<String, Vec<T>>>;

fn convert_entries<A, B: for<'a> From<&'a A>>(entries: &PerContainer<A>) -> PerContainer<B> {
    entries
        .iter()
        .map(|(uid, containers)| {
            let containers = containers
                .iter()
                .map(|(container, items)| (container.clone(), items.iter().map(B::from).collect()));
            (uid.clone(), containers.collect())
        })
        .collect()
}

impl From<&MemoryTableState> for TableRecord {
    fn from(t: &MemoryTableState) -> Self {
        TableRecord {
            total: t.total,
            system_reserved: t.system_reserved,
            allocatable: t.allocatable,
            reserved: t.reserved,
            free: t.free,
        }
    }
}

impl From<&MemoryBlock> for BlockRecord {
    fn from(b: &MemoryBlock) -> Self {
        BlockRecord {
            numa_affinity: b.numa_affinity.clone(),
            resource: b.resource.clone(),
            size: b.size,
        }
    }
}

impl MemoryRecord {
    fn of(state: &MemoryManagerState) -> MemoryRecord {
        MemoryRecord {
            machine_state: state
                .machine_state
                .iter()
                .map(|(&numa, node)| {
                    let record = NumaMemoryRecord {
                        number_of_assignments: node.number_of_assignments,
                        memory_map: node.memory.iter().map(|(r, t)| (r.clone(), t.into())).collect(),
                        cells: node.cells.clone(),
                    };
                    (numa, record)
                })
                .collect(),
            entries: convert_entries(&state.assignments),
            pod_entries: convert_pod_entries(&state.pod_assignments),
        }
    }
}

/// Pod uid → items, each item converted.
fn convert_pod_entries<A, B: for<'a> From<&'a A>>(entries: &BTreeMap<String, Vec<A>>) -> BTreeMap<String, Vec<B>> {
    entries
        .iter()
        .map(|(uid, items)| (uid.clone(), items.iter().map(B::from).collect()))
        .collect()
}

fn texts(list: &ResourceList) -> BTreeMap<String, String> {
    list.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()
}

impl PodRecord {
    /// The record of an engine pod.
    pub fn of(pod: &Pod) -> PodRecord {
        let container = |c: &Container| ContainerRecord {
            name: c.name.clone(),
            requests: texts(&c.requests),
            limits: texts(&c.limits),
            restartable: c.restartable,
        };
        PodRecord {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
            init_containers: pod.init_containers.iter().map(container).collect(),
            containers: pod.containers.iter().map(container).collect(),
            overhead: texts(&pod.overhead),
            pod_resources: pod.pod_resources.as_ref().map(|r| PodResourcesRecord {
                requests: texts(&r.requests),
                limits: texts(&r.limits),
            }),
        }
    }
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
    topoalign_k8s::start_node(machine, &spec.kubelet).map_err(|error| match error {
        topoalign_k8s::ConfigError::Refused(text) => RestoreError::Refused(text),
        topoalign_k8s::ConfigError::Invalid { path, message } => malformed(format!("kubelet.{path}: {message}")),
    })
}

/// Rebuilds the node an NRT object describes from its topoalign
/// attributes (see the module docs).
///
/// # Errors
/// [`RestoreError`] when an attribute is missing or malformed, the node
/// would not start, or it refuses the published state.
pub fn restore(object: &crate::NodeResourceTopology) -> Result<Restored, RestoreError> {
    let spec = read_spec(object)?;
    let state = read_state(object)?;
    let node = restore_onto(start_node(&spec)?, &state)?;
    let pods = node.pods().to_vec();
    Ok(Restored { node, pods })
}

/// The object's [`NODE_SPEC_ATTRIBUTE`], parsed.
///
/// # Errors
/// [`RestoreError::Missing`] or [`RestoreError::Malformed`].
pub fn read_spec(object: &crate::NodeResourceTopology) -> Result<NodeSpec, RestoreError> {
    parse_attribute(object, NODE_SPEC_ATTRIBUTE)
}

/// The object's attribute `name`, parsed as JSON into `T` (owned or
/// borrowing from the object).
fn parse_attribute<'a, T: serde::Deserialize<'a>>(
    object: &'a crate::NodeResourceTopology,
    name: &'static str,
) -> Result<T, RestoreError> {
    let text = object.attribute(name).ok_or(RestoreError::Missing(name))?;
    serde_json::from_str(text).map_err(|e| RestoreError::Malformed {
        attribute: name,
        message: e.to_string(),
    })
}

/// The object's [`STATE_ATTRIBUTE`], read in place ([`StateView`]: the
/// one reading of the format [`StateRecord`] writes).
///
/// # Errors
/// [`RestoreError::Missing`] or [`RestoreError::Malformed`].
pub fn read_state(object: &crate::NodeResourceTopology) -> Result<StateView<'_>, RestoreError> {
    parse_attribute(object, STATE_ATTRIBUTE)
}

/// The state restored onto `node`, a node just started from the state's
/// spec ([`start_node`]; one started node serves every object of the same
/// spec, as a clone).
///
/// # Errors
/// [`RestoreError::Malformed`] or [`RestoreError::Unrestorable`], as
/// [`restore`].
pub fn restore_onto(node: Node, state: &StateView<'_>) -> Result<Node, RestoreError> {
    let snapshot = state.to_snapshot().map_err(|message| RestoreError::Malformed {
        attribute: STATE_ATTRIBUTE,
        message,
    })?;
    node.restored(snapshot)
        .map_err(|e| RestoreError::Unrestorable(e.to_string()))
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
