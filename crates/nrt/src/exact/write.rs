//! [`state_json`]: the [`STATE_ATTRIBUTE`](super::STATE_ATTRIBUTE) text of
//! a node written straight from the node — no [`StateRecord`] tree in
//! between — byte for byte `serde_json::to_string(&StateRecord::of(node))`
//! (a test holds the two together).

use std::collections::BTreeMap;

use serde::ser::{Serialize, SerializeMap, SerializeStruct, Serializer};
use topoalign_engine::{CpuManagerState, MemoryBlock, MemoryManagerState, MemoryTableState, Node, NumaMemoryState};
use topoalign_model::{Container, CpuSet, Pod, ResourceList};

#[cfg(doc)]
use super::StateRecord;

/// The JSON text of [`StateRecord::of`]`(node)`.
pub fn state_json(node: &Node) -> String {
    let snapshot = node.snapshot();
    let state = State {
        pods: &snapshot.pods,
        cpu: &snapshot.cpu,
        memory: snapshot.memory.as_ref(),
        devices: &snapshot.devices,
    };
    // Serializing plain data into a string cannot fail.
    serde_json::to_string(&state).unwrap_or_default()
}

struct State<'a> {
    pods: &'a [Pod],
    cpu: &'a CpuManagerState,
    memory: Option<&'a MemoryManagerState>,
    devices: &'a BTreeMap<String, BTreeMap<String, BTreeMap<String, Vec<String>>>>,
}

impl Serialize for State<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_struct("StateRecord", 4)?;
        out.serialize_field("pods", &Each(self.pods))?;
        out.serialize_field("cpu", &CpuOut(self.cpu))?;
        if let Some(memory) = self.memory {
            out.serialize_field("memory", &MemoryOut(memory))?;
        }
        if !self.devices.is_empty() {
            out.serialize_field("devices", self.devices)?;
        }
        out.end()
    }
}

/// How one item of a list is written.
trait Record {
    fn write<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error>;
}

/// A slice of records.
struct Each<'a, T>(&'a [T]);

impl<T: Record> Serialize for Each<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(One))
    }
}

/// One record.
struct One<'a, T>(&'a T);

impl<T: Record> Serialize for One<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.write(serializer)
    }
}

impl Record for Pod {
    fn write<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let pod = self;
        let mut out = serializer.serialize_struct("PodRecord", 7)?;
        out.serialize_field("namespace", &pod.namespace)?;
        out.serialize_field("name", &pod.name)?;
        out.serialize_field("uid", &pod.uid)?;
        if !pod.init_containers.is_empty() {
            out.serialize_field("initContainers", &Each(&pod.init_containers))?;
        }
        out.serialize_field("containers", &Each(&pod.containers))?;
        if !pod.overhead.is_empty() {
            out.serialize_field("overhead", &Texts(&pod.overhead))?;
        }
        if let Some(resources) = &pod.pod_resources {
            out.serialize_field(
                "podResources",
                &PodResourcesWriter {
                    requests: &resources.requests,
                    limits: &resources.limits,
                },
            )?;
        }
        out.end()
    }
}

struct PodResourcesWriter<'a> {
    requests: &'a ResourceList,
    limits: &'a ResourceList,
}

impl Serialize for PodResourcesWriter<'_> {
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

impl Record for Container {
    fn write<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let c = self;
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

struct CpuOut<'a>(&'a CpuManagerState);

impl Serialize for CpuOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let cpu = self.0;
        let mut out = serializer.serialize_struct("CpuRecord", 3)?;
        out.serialize_field("defaultCpuSet", &Text(&cpu.default_cpu_set))?;
        if !cpu.assignments.is_empty() {
            out.serialize_field("entries", &CpuEntries(&cpu.assignments))?;
        }
        if !cpu.pod_assignments.is_empty() {
            out.serialize_field("podEntries", &CpuSets(&cpu.pod_assignments))?;
        }
        out.end()
    }
}

struct CpuEntries<'a>(&'a BTreeMap<String, BTreeMap<String, CpuSet>>);

impl Serialize for CpuEntries<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(uid, containers)| (uid, CpuSets(containers))))
    }
}

/// Name → CPU set, each set in kubelet list form.
struct CpuSets<'a>(&'a BTreeMap<String, CpuSet>);

impl Serialize for CpuSets<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(name, cpus)| (name, Text(cpus))))
    }
}

struct MemoryOut<'a>(&'a MemoryManagerState);

impl Serialize for MemoryOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let memory = self.0;
        let mut out = serializer.serialize_struct("MemoryRecord", 3)?;
        out.serialize_field("machineState", &MachineState(&memory.machine_state))?;
        if !memory.assignments.is_empty() {
            out.serialize_field("entries", &MemoryEntries(&memory.assignments))?;
        }
        if !memory.pod_assignments.is_empty() {
            out.serialize_field("podEntries", &BlockLists(&memory.pod_assignments))?;
        }
        out.end()
    }
}

struct MachineState<'a>(&'a BTreeMap<usize, NumaMemoryState>);

impl Serialize for MachineState<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut out = serializer.serialize_map(Some(self.0.len()))?;
        for (numa, node) in self.0 {
            out.serialize_entry(numa, &NumaOut(node))?;
        }
        out.end()
    }
}

struct NumaOut<'a>(&'a NumaMemoryState);

impl Serialize for NumaOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let node = self.0;
        let mut out = serializer.serialize_struct("NumaMemoryRecord", 3)?;
        out.serialize_field("numberOfAssignments", &node.number_of_assignments)?;
        out.serialize_field("memoryMap", &Tables(&node.memory))?;
        out.serialize_field("cells", &node.cells)?;
        out.end()
    }
}

struct Tables<'a>(&'a BTreeMap<String, MemoryTableState>);

impl Serialize for Tables<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(resource, table)| (resource, TableOut(table))))
    }
}

struct TableOut<'a>(&'a MemoryTableState);

impl Serialize for TableOut<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let t = self.0;
        let mut out = serializer.serialize_struct("TableRecord", 5)?;
        out.serialize_field("total", &t.total)?;
        out.serialize_field("systemReserved", &t.system_reserved)?;
        out.serialize_field("allocatable", &t.allocatable)?;
        out.serialize_field("reserved", &t.reserved)?;
        out.serialize_field("free", &t.free)?;
        out.end()
    }
}

struct MemoryEntries<'a>(&'a BTreeMap<String, BTreeMap<String, Vec<MemoryBlock>>>);

impl Serialize for MemoryEntries<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(uid, containers)| (uid, BlockLists(containers))))
    }
}

/// Name → memory blocks.
struct BlockLists<'a>(&'a BTreeMap<String, Vec<MemoryBlock>>);

impl Serialize for BlockLists<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(name, blocks)| (name, Each(blocks.as_slice()))))
    }
}

impl Record for MemoryBlock {
    fn write<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let b = self;
        let mut out = serializer.serialize_struct("BlockRecord", 3)?;
        out.serialize_field("numaAffinity", &b.numa_affinity)?;
        out.serialize_field("type", &b.resource)?;
        out.serialize_field("size", &b.size)?;
        out.end()
    }
}
