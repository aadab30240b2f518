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
//! The writing side is [`StateRecord`] (`exact/write.rs`): the attribute's
//! one writer, borrowing from the node what it writes; [`state_json`] is
//! its text. The reading side is [`StateView`] (`exact/view.rs`).
//!
//! NUMA ids are the machine's own everywhere — in the node spec, in the
//! state (as the kubelet's checkpoints key them) and in the zone names
//! ([`crate::build`]): a machine with NUMA ids of 64 and more (sparse ids,
//! CXL memory nodes) runs in the engine numbered anew
//! ([`topoalign_model::Machine::with_numa_labels`]), writes its original
//! ids through [`topoalign_model::Machine::numa_label`] and reads them back
//! through [`topoalign_model::Machine::numa_id_of_label`].
//!
//! Owns: the attribute formats and the rebuild. Must not touch: decisions.

mod view;
mod write;

use serde::{Deserialize, Serialize};
use topoalign_engine::{MemoryTableState, Node};
use topoalign_model::Pod;
use topoalign_scenario::{CpuSpec, DeviceSpec, NumaNodeSpec, TopologySpec};
pub use view::{
    BlockView, ContainerView, CpuView, Few, MemoryView, NumaMemoryView, Pairs, PodResourcesView, PodView, StateError,
    StateView, Text,
};
pub use write::{
    BlockRecord, ContainerRecord, CpuRecord, MemoryRecord, NumaMemoryRecord, PodRecord, PodResourcesRecord,
    StateRecord, state_json,
};

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

/// One resource's table on one NUMA node, in bytes: written by
/// [`NumaMemoryRecord`], read by [`StateView`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TableRecord {
    pub total: u64,
    pub system_reserved: u64,
    pub allocatable: u64,
    pub reserved: u64,
    pub free: u64,
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

/// The scenario `topology:` block describing `machine`, with its own NUMA
/// ids ([`topoalign_model::Machine::numa_label`]; distance rows then list
/// one distance per node, in id order).
pub fn topology_spec(machine: &topoalign_model::Machine) -> TopologySpec {
    let bytes = |n: u64| n.to_string();
    let label = |numa: usize| machine.numa_label(numa);
    TopologySpec {
        numa_nodes: machine
            .numa_nodes()
            .iter()
            .map(|n| NumaNodeSpec {
                id: label(n.id),
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
                numa: label(c.numa),
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
                        numa: d.numa.iter().map(|&numa| label(numa)).collect(),
                    })
                    .collect();
                (resource.clone(), list)
            })
            .collect(),
    }
}

/// Starts the node a spec describes, NUMA ids up to 1023 taken as the
/// kubelet takes them ([`TopologySpec::to_machine_with_numa_labels`]: with
/// an id past 63 the machine is numbered anew, its ids kept as labels).
///
/// # Errors
/// [`RestoreError::Malformed`] for a bad topology or kubelet block,
/// [`RestoreError::Refused`] when the kubelet would not start.
pub fn start_node(spec: &NodeSpec) -> Result<Node, RestoreError> {
    let malformed = |message: String| RestoreError::Malformed {
        attribute: NODE_SPEC_ATTRIBUTE,
        message,
    };
    let machine = spec
        .topology
        .to_machine_with_numa_labels()
        .map_err(|e| malformed(e.to_string()))?;
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
    let snapshot = state
        .to_snapshot_on(node.machine())
        .map_err(|error| RestoreError::Malformed {
            attribute: STATE_ATTRIBUTE,
            message: error.to_string(),
        })?;
    node.restored(snapshot)
        .map_err(|e| RestoreError::Unrestorable(e.to_string()))
}

/// The node a scenario leaves behind: its machine and kubelet blocks, and
/// the engine node after all its events (adds and deletes, as `topoalign
/// replay` plays them).
///
/// # Errors
/// [`ScenarioNodeError`]: the malformed part, or the kubelet's start-up
/// refusal.
pub fn scenario_node(scenario: &topoalign_scenario::Scenario) -> Result<(NodeSpec, Node), ScenarioNodeError> {
    let spec = NodeSpec {
        topology: scenario.topology.clone(),
        kubelet: scenario.kubelet.clone(),
    };
    let mut node = start_node(&spec)?;
    topoalign_scenario::play_events(&mut node, &spec.kubelet, scenario)?;
    Ok((spec, node))
}

/// Why a scenario leaves no node behind.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioNodeError {
    /// The machine or kubelet block is malformed, or the kubelet would not
    /// start.
    #[error(transparent)]
    Start(#[from] RestoreError),
    /// An event is malformed.
    #[error(transparent)]
    Events(#[from] topoalign_scenario::ScenarioError),
}
