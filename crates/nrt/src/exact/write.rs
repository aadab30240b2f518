//! The [`STATE_ATTRIBUTE`](super::STATE_ATTRIBUTE) format's one writer:
//! [`StateRecord`] and its parts, each borrowing what it writes from the
//! node ([`Node::snapshot_view`]: no copy of the pods or of the managers'
//! maps) and serializing it in the attribute's shape. [`state_json`] is
//! its JSON text; the agent's journal snapshots and the follower's
//! `/v1/state` write the same record. Its one reading is
//! [`StateView`](super::StateView).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::ser::{Serialize, SerializeMap, SerializeStruct, Serializer};
use topoalign_engine::{
    BlocksView, ContainerDevicesView, CpuStateView, DeviceIdsView, DevicesView, MemoryBlockView, MemoryStateView, Node,
    NumaMemoryView, PodDevicesView, SnapshotView,
};
use topoalign_model::{Container, CpuSet, FlatMap, Machine, Pod, ResourceList};

use super::TableRecord;

/// The JSON text of [`StateRecord::of`]`(node)`: the attribute's value.
pub fn state_json(node: &Node) -> String {
    // Serializing plain data into a string cannot fail.
    serde_json::to_string(&StateRecord::of(node)).unwrap_or_default()
}

/// Everything a node holds, in the kubelet checkpoints' vocabulary: the
/// engine's [`NodeSnapshot`](topoalign_engine::NodeSnapshot), borrowed.
/// Written as `{"pods": [PodRecord…], "cpu": CpuRecord, "memory":
/// MemoryRecord, "devices": {uid: {container: {resource: [id…]}}}}`:
///
/// - `pods`: the admitted pods, in admission order;
/// - `cpu`: `cpu_manager_state` without its checksum;
/// - `memory`: `memory_manager_state` without its checksum; absent under
///   the `None` memory policy. Its NUMA ids (the machine state's keys,
///   `cells`, the blocks' `numaAffinity`) are the machine's own
///   ([`Machine::numa_label`]: on a machine numbered anew for NUMA ids past
///   63, the original ids, as the kubelet's checkpoint keys them);
/// - `devices`: device ids per pod uid, container and resource; absent
///   when none is held.
#[derive(Clone, Copy)]
pub struct StateRecord<'a> {
    state: SnapshotView<'a>,
    /// Whose NUMA ids are written ([`Machine::numa_label`]).
    machine: &'a Machine,
}

impl StateRecord<'_> {
    /// The state `node` holds now.
    pub fn of(node: &Node) -> StateRecord<'_> {
        StateRecord {
            state: node.snapshot_view(),
            machine: node.machine(),
        }
    }
}

impl Serialize for StateRecord<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let state = &self.state;
        let mut out = serializer.serialize_struct("StateRecord", 4)?;
        out.serialize_field("pods", &Each(state.pods, PodRecord))?;
        out.serialize_field("cpu", &CpuRecord(state.cpu))?;
        if let Some(memory) = state.memory {
            out.serialize_field("memory", &MemoryRecord(memory, self.machine))?;
        }
        if !state.devices.is_empty() {
            out.serialize_field("devices", &Devices(state.devices))?;
        }
        out.end()
    }
}

/// A slice, each item written as `record` makes it.
struct Each<'a, T, R>(&'a [T], fn(&'a T) -> R);

impl<'a, T, R: Serialize> Serialize for Each<'a, T, R> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(self.1))
    }
}

/// One admitted pod: what the resource-fit check and the managers need of
/// it — `namespace`, `name`, `uid`, `initContainers` (absent when none),
/// `containers` ([`ContainerRecord`]s), `overhead` (absent when empty) and
/// `podResources` (`spec.resources` as the node admitted it, pod-level
/// resources read: defaulted, QoS taken from them; absent otherwise).
#[derive(Clone, Copy)]
pub struct PodRecord<'a>(&'a Pod);

impl PodRecord<'_> {
    /// The record of an engine pod.
    pub fn of(pod: &Pod) -> PodRecord<'_> {
        PodRecord(pod)
    }
}

impl Serialize for PodRecord<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let pod = self.0;
        let mut out = serializer.serialize_struct("PodRecord", 7)?;
        out.serialize_field("namespace", &pod.namespace)?;
        out.serialize_field("name", &pod.name)?;
        out.serialize_field("uid", &pod.uid)?;
        if !pod.init_containers.is_empty() {
            out.serialize_field("initContainers", &Each(&pod.init_containers, ContainerRecord))?;
        }
        out.serialize_field("containers", &Each(&pod.containers, ContainerRecord))?;
        if !pod.overhead.is_empty() {
            out.serialize_field("overhead", &Texts(&pod.overhead))?;
        }
        if let Some(resources) = &pod.pod_resources {
            out.serialize_field(
                "podResources",
                &PodResourcesRecord {
                    requests: &resources.requests,
                    limits: &resources.limits,
                },
            )?;
        }
        out.end()
    }
}

/// A pod's `spec.resources`: `requests` and `limits`, each absent when
/// empty.
#[derive(Clone, Copy)]
pub struct PodResourcesRecord<'a> {
    requests: &'a ResourceList,
    limits: &'a ResourceList,
}

impl Serialize for PodResourcesRecord<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("PodResourcesRecord", 2)?;
        if !self.requests.is_empty() {
            out.serialize_field("requests", &Texts(self.requests))?;
        }
        if !self.limits.is_empty() {
            out.serialize_field("limits", &Texts(self.limits))?;
        }
        out.end()
    }
}

/// One container's resources: `name`, `requests` and `limits` (each
/// absent when empty), `restartable: true` for a sidecar (absent
/// otherwise).
#[derive(Clone, Copy)]
pub struct ContainerRecord<'a>(&'a Container);

impl Serialize for ContainerRecord<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let c = self.0;
        let mut out = serializer.serialize_struct("ContainerRecord", 4)?;
        out.serialize_field("name", &c.name)?;
        if !c.requests.is_empty() {
            out.serialize_field("requests", &Texts(&c.requests))?;
        }
        if !c.limits.is_empty() {
            out.serialize_field("limits", &Texts(&c.limits))?;
        }
        if c.restartable {
            out.serialize_field("restartable", &true)?;
        }
        out.end()
    }
}

/// A resource list, each quantity as its text.
struct Texts<'a>(&'a ResourceList);

impl Serialize for Texts<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k, Text(v))))
    }
}

/// A value written as its `Display` text.
struct Text<T>(T);

impl<T: std::fmt::Display> Serialize for Text<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&self.0)
    }
}

/// The CPU manager's state (`cpu_manager_state`'s fields):
/// `defaultCpuSet` (the shared pool in kubelet list form), `entries` (pod
/// uid → container → exclusive CPUs) and `podEntries` (pod uid → the pod's
/// CPUs, `PodLevelResourceManagers`), each map absent when empty. Under
/// the `none` policy the state is empty: `{"defaultCpuSet": ""}`.
#[derive(Clone, Copy)]
pub struct CpuRecord<'a>(Option<CpuStateView<'a>>);

impl Serialize for CpuRecord<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("CpuRecord", 3)?;
        let Some(cpu) = self.0 else {
            out.serialize_field("defaultCpuSet", &Text(CpuSet::new()))?;
            return out.end();
        };
        out.serialize_field("defaultCpuSet", &Text(cpu.default_cpu_set))?;
        if !cpu.assignments.is_empty() {
            out.serialize_field("entries", &CpuEntries(cpu.assignments))?;
        }
        if !cpu.pod_assignments.is_empty() {
            out.serialize_field("podEntries", &CpuSets(cpu.pod_assignments.iter()))?;
        }
        out.end()
    }
}

struct CpuEntries<'a>(&'a BTreeMap<String, Arc<FlatMap<String, CpuSet>>>);

impl Serialize for CpuEntries<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(uid, containers)| (uid, CpuSets(containers.iter()))))
    }
}

/// Name → CPU set, each set in kubelet list form: the entries of a map
/// in name order (pod-level sets in a `BTreeMap`, a pod's containers in a
/// `FlatMap`).
struct CpuSets<I>(I);

impl<'a, I> Serialize for CpuSets<I>
where
    I: Iterator<Item = (&'a String, &'a CpuSet)> + Clone,
{
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.clone().map(|(name, cpus)| (name, Text(cpus))))
    }
}

/// The memory manager's state (`memory_manager_state`'s fields):
/// `machineState` (per NUMA node, [`NumaMemoryRecord`]), `entries` (pod
/// uid → container → [`BlockRecord`]s) and `podEntries` (pod uid → the
/// pod's blocks, `PodLevelResourceManagers`), each map of blocks absent
/// when empty. NUMA ids are the machine's own ([`Machine::numa_label`]).
#[derive(Clone, Copy)]
pub struct MemoryRecord<'a>(MemoryStateView<'a>, &'a Machine);

impl Serialize for MemoryRecord<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let MemoryRecord(memory, machine) = *self;
        let mut out = serializer.serialize_struct("MemoryRecord", 3)?;
        out.serialize_field("machineState", &MachineState(memory, machine))?;
        if memory.assignments().next().is_some() {
            out.serialize_field("entries", &MemoryEntries(memory, machine))?;
        }
        if memory.pod_assignments().next().is_some() {
            out.serialize_field("podEntries", &PodBlocks(memory, machine))?;
        }
        out.end()
    }
}

struct MachineState<'a>(MemoryStateView<'a>, &'a Machine);

impl Serialize for MachineState<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let machine = self.1;
        serializer.collect_map(
            self.0
                .machine_state()
                .map(|(numa, node)| (machine.numa_label(numa), NumaMemoryRecord(node, machine))),
        )
    }
}

/// One NUMA node of the memory manager's machine state:
/// `numberOfAssignments`, `memoryMap` (per resource, `memory` and
/// `hugepages-<size>`, a [`TableRecord`] in bytes) and `cells` (the node's
/// group, the machine's own NUMA ids).
#[derive(Clone, Copy)]
pub struct NumaMemoryRecord<'a>(NumaMemoryView<'a>, &'a Machine);

impl Serialize for NumaMemoryRecord<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let NumaMemoryRecord(node, machine) = *self;
        let mut out = serializer.serialize_struct("NumaMemoryRecord", 3)?;
        out.serialize_field("numberOfAssignments", &node.number_of_assignments)?;
        out.serialize_field("memoryMap", &Tables(node.memory))?;
        out.serialize_field("cells", &Nodes(node.cell_ids(), machine))?;
        out.end()
    }
}

/// The NUMA nodes of a mask, ascending, by the machine's own ids
/// ([`Machine::numa_label`], which keeps their order).
struct Nodes<'a>(Vec<usize>, &'a Machine);

impl Serialize for Nodes<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|&numa| self.1.numa_label(numa)))
    }
}

struct Tables<'a>(&'a BTreeMap<String, topoalign_engine::MemoryTableState>);

impl Serialize for Tables<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(
            self.0
                .iter()
                .map(|(resource, table)| (resource, TableRecord::from(table))),
        )
    }
}

struct MemoryEntries<'a>(MemoryStateView<'a>, &'a Machine);

impl Serialize for MemoryEntries<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(None)?;
        for (uid, containers) in self.0.assignments() {
            out.serialize_entry(uid, &ContainerBlocks(&containers, self.1))?;
        }
        out.end()
    }
}

/// Container name → memory blocks.
struct ContainerBlocks<'a, 'b>(&'b [(&'a str, BlocksView<'a>)], &'a Machine);

impl Serialize for ContainerBlocks<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|&(name, blocks)| (name, Blocks(blocks, self.1))))
    }
}

struct PodBlocks<'a>(MemoryStateView<'a>, &'a Machine);

impl Serialize for PodBlocks<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(
            self.0
                .pod_assignments()
                .map(|(uid, blocks)| (uid, Blocks(blocks, self.1))),
        )
    }
}

struct Blocks<'a>(BlocksView<'a>, &'a Machine);

impl Serialize for Blocks<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(|block| BlockRecord(block, self.1)))
    }
}

/// One memory block of a container: `numaAffinity` (the machine's own
/// NUMA ids), `type` (`memory` or `hugepages-<size>`) and `size` in bytes.
#[derive(Clone, Copy)]
pub struct BlockRecord<'a>(MemoryBlockView<'a>, &'a Machine);

impl Serialize for BlockRecord<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let BlockRecord(b, machine) = *self;
        let mut out = serializer.serialize_struct("BlockRecord", 3)?;
        out.serialize_field("numaAffinity", &Nodes(b.numa_affinity.nodes().collect(), machine))?;
        out.serialize_field("type", b.resource)?;
        out.serialize_field("size", &b.size)?;
        out.end()
    }
}

/// Pod uid → container → resource → device ids.
struct Devices<'a>(DevicesView<'a>);

impl Serialize for Devices<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.pods().map(|(uid, pod)| (uid, PodDevices(pod))))
    }
}

struct PodDevices<'a>(PodDevicesView<'a>);

impl Serialize for PodDevices<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(
            self.0
                .containers()
                .map(|(name, devices)| (name, ContainerDevices(devices))),
        )
    }
}

struct ContainerDevices<'a>(ContainerDevicesView<'a>);

impl Serialize for ContainerDevices<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.resources().map(|(resource, ids)| (resource, DeviceIds(ids))))
    }
}

struct DeviceIds<'a>(DeviceIdsView<'a>);

impl Serialize for DeviceIds<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter())
    }
}
