//! `memory_manager_state`: the memory manager's checkpoint (formats v3 of
//! v1.37, v2 of v1.36 with pod-level resource managers, v1), read and
//! checked as the kubelet's memory manager `stateCheckpoint.restoreState`
//! reads it. Unlike the CPU manager's, a checksum of 0 is not accepted.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use topoalign_engine::{MemoryBlock, MemoryManagerState, MemoryTableState, NumaMemoryState};

use super::envelope::{self, Enveloped, verify_checksum};
use super::go_json::{self, At, Writer};
use super::spew::{Spew, fnv32a};
use super::{CheckpointError, CheckpointKind, check_policy};

/// A memory manager checkpoint as the kubelet decodes it. `None` stands for
/// Go's nil (a `null` in the file), which prints differently in the
/// checksum from an empty map or slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryCheckpoint {
    /// Which format the file was in (1 to 3).
    pub version: u8,
    pub policy_name: String,
    /// `machineState`: NUMA id → node.
    pub machine_state: Option<BTreeMap<i64, Option<NumaNodeEntry>>>,
    /// `entries`: pod uid → container → blocks.
    pub entries: Option<Entries>,
    /// `podEntries` (v2 and v3): pod uid → the blocks of the pod's
    /// pod-level assignment (`memoryBlocks`, `None` for Go's nil slice);
    /// `None` for Go's nil map.
    pub pod_entries: Option<PodEntries>,
    /// The authoritative checksum stored in the file (`dataChecksum` in
    /// v3, `checksum` otherwise).
    pub checksum: u64,
    /// v3: the `data` string the checksum covers.
    pub data: Option<String>,
}

/// `entries`: pod uid → container → blocks, each level possibly Go's nil.
pub type Entries = BTreeMap<String, Option<BTreeMap<String, Option<Vec<BlockEntry>>>>>;

/// `podEntries`: pod uid → `memoryBlocks`, possibly Go's nil.
pub type PodEntries = BTreeMap<String, Option<Vec<BlockEntry>>>;

/// One `machineState` node (`NUMANodeState`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumaNodeEntry {
    pub number_of_assignments: i64,
    pub memory_map: Option<BTreeMap<String, Option<MemoryTableState>>>,
    pub cells: Option<Vec<i64>>,
}

/// One block (`Block`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockEntry {
    pub numa_affinity: Option<Vec<i64>>,
    /// `type`: `memory`, `hugepages-1Gi`, ...
    pub resource: String,
    pub size: u64,
}

impl MemoryCheckpoint {
    /// Reads the file's bytes and verifies the checksum: a v3 file (with
    /// `data`) by its data checksum alone, otherwise as v2, then v1.
    ///
    /// # Errors
    /// [`CheckpointError::Decode`] or [`CheckpointError::Corrupt`].
    pub fn parse(bytes: &[u8]) -> Result<MemoryCheckpoint, CheckpointError> {
        envelope::read_data_layer_direct(bytes).map_or_else(|| Self::parse_tree(bytes), Ok)
    }

    /// Reads the file's bytes as the kubelet release `reading` describes
    /// reads them ([`Reading`]): [`Self::parse`] for v1.37; before, the
    /// `data` layer unread, and the v2 layout (`podEntries`) only in v1.36
    /// with `PodLevelResourceManagers` — otherwise the v1 struct's checksum
    /// is the one verified.
    ///
    /// # Errors
    /// As [`Self::parse`].
    ///
    /// [`Reading`]: super::Reading
    pub fn parse_for(bytes: &[u8], reading: super::Reading) -> Result<MemoryCheckpoint, CheckpointError> {
        if reading.data_layer {
            return Self::parse(bytes);
        }
        let value = go_json::parse(bytes)?;
        let mut checkpoint = decode(&value)?;
        checkpoint.data = None;
        checkpoint.version = if reading.pod_entries { 2 } else { 1 };
        if checkpoint.version == 2 && u64::from(checkpoint.computed_checksum()) != checkpoint.checksum {
            checkpoint.version = 1;
        }
        if checkpoint.version == 1 {
            verify_checksum(checkpoint.checksum, checkpoint.computed_checksum())?;
            checkpoint.pod_entries = Some(BTreeMap::new());
        }
        Ok(checkpoint)
    }

    /// [`Self::parse`] through the generic tree, every layout and every
    /// error: the reference the direct reading of the data layout agrees
    /// with.
    pub(crate) fn parse_tree(bytes: &[u8]) -> Result<MemoryCheckpoint, CheckpointError> {
        let value = go_json::parse(bytes)?;
        if let Some(checkpoint) = envelope::read_data_layer(&value)? {
            return Ok(checkpoint);
        }
        let mut checkpoint = decode(&value)?;
        checkpoint.version = 2;
        if u64::from(checkpoint.computed_checksum()) != checkpoint.checksum {
            checkpoint.version = 1;
            verify_checksum(checkpoint.checksum, checkpoint.computed_checksum())?;
        }
        if checkpoint.version == 1 {
            // The v1 struct has no pod entries: its decoding drops them.
            checkpoint.pod_entries = Some(BTreeMap::new());
        }
        Ok(checkpoint)
    }

    /// The checksum of the content (checksum field taken as 0), computed
    /// the kubelet's way for the file's format: for v3 the data checksum.
    pub fn computed_checksum(&self) -> u32 {
        envelope::computed_checksum(self.data.as_deref(), || self.v1_checksum(self.version == 2))
    }

    /// The `checksum` field: FNV-32a over the printing of the v1 struct
    /// (the v2 struct with `pod_entries`; v3 writes the v1 one too), under
    /// the type name every release hashes, `state.MemoryManagerCheckpoint`.
    fn v1_checksum(&self, with_pod_entries: bool) -> u32 {
        let mut spew = Spew::default();
        spew.raw("(*state.MemoryManagerCheckpoint){");
        spew.field("PolicyName", "string").raw(&self.policy_name);
        spew.field("MachineState", "state.NUMANodeMap");
        spew.map(self.machine_state.as_ref(), |s, id, node| {
            s.display(id).raw(":");
            let Some(node) = node else {
                s.raw("<nil>");
                return;
            };
            s.raw("<*>{");
            s.field("NumberOfAssignments", "int")
                .display(node.number_of_assignments);
            s.field("MemoryMap", "map[v1.ResourceName]*state.MemoryTable");
            s.map(node.memory_map.as_ref(), |s, resource, table| {
                s.raw(resource).raw(":");
                let Some(t) = table else {
                    s.raw("<nil>");
                    return;
                };
                s.raw("<*>{");
                s.field("TotalMemSize", "uint64").display(t.total);
                s.field("SystemReserved", "uint64").display(t.system_reserved);
                s.field("Allocatable", "uint64").display(t.allocatable);
                s.field("Reserved", "uint64").display(t.reserved);
                s.field("Free", "uint64").display(t.free);
                s.raw("}");
            });
            s.field("Cells", "[]int");
            s.slice(node.cells.as_ref(), |s, cell| {
                s.display(cell);
            });
            s.raw("}");
        });
        spew.field("Entries", "state.ContainerMemoryAssignments");
        spew.map(self.entries.as_ref(), |s, pod, containers| {
            s.raw(pod).raw(":");
            s.map(containers.as_ref(), |s, container, blocks| {
                s.raw(container).raw(":");
                spew_blocks(s, blocks.as_ref());
            });
        });
        if with_pod_entries {
            spew.field("PodEntries", "state.PodMemoryAssignments");
            spew.map(self.pod_entries.as_ref(), |s, pod, blocks| {
                s.raw(pod).raw(":{");
                s.field("MemoryBlocks", "[]state.Block");
                spew_blocks(s, blocks.as_ref());
                s.raw("}");
            });
        }
        spew.field("Checksum", "checksum.Checksum").raw("0}");
        fnv32a(spew.into_string().as_bytes())
    }

    /// The checkpoint a kubelet writes for `state` under `policy_name`
    /// (`None`, `Static`) in `version`'s layout (1.32's 1, 1.36's 2 with
    /// pod-level resource managers, 1.37's 3). Pod-level assignments are
    /// written in the layouts that have them (2 and 3) and left out of v1.
    pub fn of_state(policy_name: &str, state: &MemoryManagerState, version: u8) -> MemoryCheckpoint {
        let id = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let block_entries = |blocks: &[MemoryBlock]| -> Vec<BlockEntry> {
            blocks
                .iter()
                .map(|b| BlockEntry {
                    numa_affinity: Some(b.numa_affinity.iter().map(|&n| id(n)).collect()),
                    resource: b.resource.clone(),
                    size: b.size,
                })
                .collect()
        };
        let machine_state = state
            .machine_state
            .iter()
            .map(|(&numa, node)| {
                let entry = NumaNodeEntry {
                    number_of_assignments: node.number_of_assignments,
                    memory_map: Some(node.memory.iter().map(|(r, t)| (r.clone(), Some(*t))).collect()),
                    cells: Some(node.cells.iter().map(|&c| id(c)).collect()),
                };
                (id(numa), Some(entry))
            })
            .collect();
        let entries = state
            .assignments
            .iter()
            .map(|(pod, containers)| {
                let containers = containers
                    .iter()
                    .map(|(name, blocks)| (name.clone(), Some(block_entries(blocks))))
                    .collect();
                (pod.clone(), Some(containers))
            })
            .collect();
        let checkpoint = MemoryCheckpoint {
            version,
            policy_name: policy_name.to_owned(),
            machine_state: Some(machine_state),
            entries: Some(entries),
            pod_entries: Some(if version >= 2 {
                state
                    .pod_assignments
                    .iter()
                    .map(|(pod, blocks)| (pod.clone(), Some(block_entries(blocks))))
                    .collect()
            } else {
                BTreeMap::new()
            }),
            checksum: 0,
            data: None,
        };
        envelope::seal(checkpoint, MemoryCheckpoint::computed_checksum)
    }

    /// The file's bytes as the kubelet's `MarshalCheckpoint` of
    /// `version`'s layout writes them, checksums computed afresh (v3: the
    /// `data` string made from the fields, then both checksums). Byte for
    /// byte the kubelet's file for the same content, block order included.
    ///
    /// # Errors
    /// [`CheckpointError::Unsupported`] for pod-level entries in a v1
    /// file, which has no place for them.
    pub fn to_bytes(&self) -> Result<Vec<u8>, CheckpointError> {
        if self.version == 1 && self.pod_entries.as_ref().is_some_and(|p| !p.is_empty()) {
            return Err(CheckpointError::Unsupported(
                "podEntries: a v1 memory checkpoint has no place for pod-level memory assignments".to_owned(),
            ));
        }
        let mut json = Writer::default();
        json.raw("{");
        self.write_fields(&mut json, self.version == 2);
        Ok(envelope::close(self, json))
    }

    /// `policyName`, `machineState`, `entries` and, when `with_pod_entries`,
    /// `podEntries` (both omitted when empty).
    fn write_fields(&self, json: &mut Writer, with_pod_entries: bool) {
        json.key("policyName").string(&self.policy_name);
        json.key("machineState").map(self.machine_state.as_ref(), |json, node| {
            let Some(node) = node else {
                json.raw("null");
                return;
            };
            json.raw("{");
            json.key("numberOfAssignments").number(node.number_of_assignments);
            json.key("memoryMap").map(node.memory_map.as_ref(), |json, table| {
                let Some(t) = table else {
                    json.raw("null");
                    return;
                };
                json.raw("{");
                json.key("total").number(t.total);
                json.key("systemReserved").number(t.system_reserved);
                json.key("allocatable").number(t.allocatable);
                json.key("reserved").number(t.reserved);
                json.key("free").number(t.free);
                json.raw("}");
            });
            json.key("cells").slice(node.cells.as_ref(), |json, cell| {
                json.number(cell);
            });
            json.raw("}");
        });
        if let Some(entries) = self.entries.as_ref().filter(|e| !e.is_empty()) {
            json.key("entries").map(Some(entries), |json, containers| {
                json.map(containers.as_ref(), |json, blocks| {
                    write_blocks(json, blocks.as_ref());
                });
            });
        }
        if let Some(pods) = self.pod_entries.as_ref().filter(|p| with_pod_entries && !p.is_empty()) {
            json.key("podEntries").map(Some(pods), |json, blocks| {
                json.raw("{");
                if let Some(blocks) = blocks.as_ref().filter(|b| !b.is_empty()) {
                    json.key("memoryBlocks");
                    write_blocks(json, Some(blocks));
                }
                json.raw("}");
            });
        }
    }
}

impl Enveloped for MemoryCheckpoint {
    const GO_STRUCT: &'static str = "state.MemoryManagerCheckpoint";
    const WHAT: &'static str = "memory manager";
    const DATA_VERSION: u8 = 3;

    fn decode(value: &Value) -> Result<Self, CheckpointError> {
        decode(value)
    }

    fn decode_direct(data: &str) -> Option<Self> {
        let data: MemoryData = serde_json::from_str(data).ok()?;
        let mut machine_state = BTreeMap::new();
        for (key, node) in data.machine_state {
            let id = crate::go::parse_int64(&key).ok()?;
            let node = NumaNodeEntry {
                number_of_assignments: node.number_of_assignments,
                memory_map: Some(node.memory_map.into_iter().map(|(r, t)| (r, Some(t.into()))).collect()),
                cells: Some(node.cells),
            };
            // Two spellings of one NUMA id: left to the general reading.
            if machine_state.insert(id, Some(node)).is_some() {
                return None;
            }
        }
        let blocks = |blocks: Vec<Block>| -> Vec<BlockEntry> { blocks.into_iter().map(BlockEntry::from).collect() };
        Some(MemoryCheckpoint {
            version: 1,
            policy_name: data.policy_name,
            machine_state: Some(machine_state),
            entries: Some(
                data.entries
                    .into_iter()
                    .map(|(pod, containers)| {
                        let containers = containers.into_iter().map(|(c, b)| (c, Some(blocks(b)))).collect();
                        (pod, Some(containers))
                    })
                    .collect(),
            ),
            pod_entries: Some(
                data.pod_entries
                    .into_iter()
                    .map(|(pod, entry)| (pod, entry.memory_blocks.map(blocks)))
                    .collect(),
            ),
            checksum: 0,
            data: None,
        })
    }

    /// The v1 struct's (v2's with its pod entries).
    fn struct_checksum(&self) -> u32 {
        self.v1_checksum(self.version == 2)
    }

    /// The v3 `data` string: `MemoryManagerCheckpointData` as JSON.
    fn data_json(&self) -> String {
        let mut json = Writer::default();
        json.raw("{");
        self.write_fields(&mut json, true);
        json.raw("}");
        json.into_string()
    }

    fn version(&self) -> u8 {
        self.version
    }

    fn envelope_mut(&mut self) -> (&mut u8, &mut u64, &mut Option<String>) {
        (&mut self.version, &mut self.checksum, &mut self.data)
    }
}

impl MemoryCheckpoint {
    /// The state the memory manager restores with `configured_policy`
    /// (`memoryManagerPolicy`), which must be the checkpoint's. Pod-level
    /// entries are carried; the manager keeps them only with
    /// `PodLevelResourceManagers` on, as the kubelet.
    ///
    /// # Errors
    /// [`CheckpointError::PolicyMismatch`] with the kubelet's text;
    /// [`CheckpointError::OutOfRange`] for a negative NUMA id.
    pub fn to_state(&self, configured_policy: &str) -> Result<MemoryManagerState, CheckpointError> {
        check_policy(CheckpointKind::Memory, configured_policy, &self.policy_name)?;
        let numa = |id: i64| usize::try_from(id).map_err(|_| CheckpointError::OutOfRange { what: "NUMA node", id });
        let mut machine_state = BTreeMap::new();
        for (&id, node) in self.machine_state.iter().flatten() {
            let state = match node {
                None => NumaMemoryState::default(),
                Some(node) => NumaMemoryState {
                    number_of_assignments: node.number_of_assignments,
                    memory: node
                        .memory_map
                        .iter()
                        .flatten()
                        .map(|(resource, table)| (resource.clone(), table.unwrap_or_default()))
                        .collect(),
                    cells: node
                        .cells
                        .iter()
                        .flatten()
                        .map(|&c| numa(c))
                        .collect::<Result<_, _>>()?,
                },
            };
            machine_state.insert(numa(id)?, state);
        }
        let mut assignments = BTreeMap::new();
        for (pod, containers) in self.entries.iter().flatten() {
            let mut by_container = BTreeMap::new();
            for (container, blocks) in containers.iter().flatten() {
                by_container.insert(container.clone(), memory_blocks(blocks.as_deref())?);
            }
            assignments.insert(pod.clone(), by_container);
        }
        let mut pod_assignments = BTreeMap::new();
        for (pod, blocks) in self.pod_entries.iter().flatten() {
            pod_assignments.insert(pod.clone(), memory_blocks(blocks.as_deref())?);
        }
        Ok(MemoryManagerState {
            machine_state,
            assignments,
            pod_assignments,
        })
    }
}

/// Blocks as the engine's, NUMA ids checked.
fn memory_blocks(blocks: Option<&[BlockEntry]>) -> Result<Vec<MemoryBlock>, CheckpointError> {
    let numa = |id: i64| usize::try_from(id).map_err(|_| CheckpointError::OutOfRange { what: "NUMA node", id });
    let mut converted = Vec::new();
    for block in blocks.into_iter().flatten() {
        converted.push(MemoryBlock {
            numa_affinity: block
                .numa_affinity
                .iter()
                .flatten()
                .map(|&n| numa(n))
                .collect::<Result<_, _>>()?,
            resource: block.resource.clone(),
            size: block.size,
        });
    }
    Ok(converted)
}

/// A `[]state.Block` in the checksum's printing.
fn spew_blocks(s: &mut Spew, blocks: Option<&Vec<BlockEntry>>) {
    s.slice(blocks, |s, block| {
        s.raw("{");
        s.field("NUMAAffinity", "[]int");
        s.slice(block.numa_affinity.as_ref(), |s, node| {
            s.display(node);
        });
        s.field("Type", "v1.ResourceName").raw(&block.resource);
        s.field("Size", "uint64").display(block.size);
        s.raw("}");
    });
}

/// A `[]state.Block` as JSON.
fn write_blocks(json: &mut Writer, blocks: Option<&Vec<BlockEntry>>) {
    json.slice(blocks, |json, block| {
        json.raw("{");
        json.key("numaAffinity")
            .slice(block.numa_affinity.as_ref(), |json, node| {
                json.number(node);
            });
        json.key("type").string(&block.resource);
        json.key("size").number(block.size);
        json.raw("}");
    });
}

kubelet_object! {
    /// The v3 `data` payload as a kubelet writes it, for
    /// [`Enveloped::decode_direct`]: every member [`decode`] takes as
    /// absent or `null` present and not `null`, except `memoryBlocks`
    /// (absent or `null` is `None` in both).
    struct MemoryData {
        policy_name: String = "policyName",
        machine_state: BTreeMap<String, NumaNode> = "machineState" (default),
        entries: BTreeMap<String, BTreeMap<String, Vec<Block>>> = "entries" (default),
        pod_entries: BTreeMap<String, PodBlocks> = "podEntries" (default),
    }
}

kubelet_object! {
    struct NumaNode {
        number_of_assignments: i64 = "numberOfAssignments",
        memory_map: BTreeMap<String, Table> = "memoryMap",
        cells: Vec<i64> = "cells",
    }
}

kubelet_object! {
    struct Table {
        total: u64 = "total",
        system_reserved: u64 = "systemReserved",
        allocatable: u64 = "allocatable",
        reserved: u64 = "reserved",
        free: u64 = "free",
    }
}

impl From<Table> for MemoryTableState {
    fn from(t: Table) -> MemoryTableState {
        MemoryTableState {
            total: t.total,
            system_reserved: t.system_reserved,
            allocatable: t.allocatable,
            reserved: t.reserved,
            free: t.free,
        }
    }
}

kubelet_object! {
    struct Block {
        numa_affinity: Vec<i64> = "numaAffinity",
        resource: String = "type",
        size: u64 = "size",
    }
}

impl From<Block> for BlockEntry {
    fn from(b: Block) -> BlockEntry {
        BlockEntry {
            numa_affinity: Some(b.numa_affinity),
            resource: b.resource,
            size: b.size,
        }
    }
}

kubelet_object! {
    /// `memoryBlocks` absent or `null` is `None`, as in [`decode`].
    struct PodBlocks {
        memory_blocks: Option<Vec<Block>> = "memoryBlocks" (default),
    }
}

fn at(path: &str) -> At<'_> {
    At {
        go_struct: "MemoryManagerCheckpoint",
        path,
    }
}

fn decode(value: &Value) -> Result<MemoryCheckpoint, CheckpointError> {
    let Some(object) = go_json::top_object(value, "state.MemoryManagerCheckpoint")? else {
        return Ok(MemoryCheckpoint {
            version: 1,
            policy_name: String::new(),
            machine_state: Some(BTreeMap::new()),
            entries: Some(BTreeMap::new()),
            pod_entries: Some(BTreeMap::new()),
            checksum: 0,
            data: None,
        });
    };
    // The kubelet pre-makes both maps, so a missing one is empty, not nil.
    let machine_state = match go_json::object(
        go_json::field(object, "machineState"),
        at("machineState"),
        "state.NUMANodeMap",
    )? {
        None => Some(BTreeMap::new()),
        Some(None) => None,
        Some(Some(nodes)) => Some(decode_nodes(nodes)?),
    };
    let entries = match go_json::object(
        go_json::field(object, "entries"),
        at("entries"),
        "state.ContainerMemoryAssignments",
    )? {
        None => Some(BTreeMap::new()),
        Some(None) => None,
        Some(Some(pods)) => Some(decode_entries(pods)?),
    };
    let pod_entries = match go_json::object(
        go_json::field(object, "podEntries"),
        at("podEntries"),
        "state.PodMemoryAssignments",
    )? {
        None => Some(BTreeMap::new()),
        Some(None) => None,
        Some(Some(pods)) => {
            let mut decoded = BTreeMap::new();
            for (pod, entry) in pods {
                let blocks = match go_json::object(Some(entry), at("podEntries"), "state.PodEntry")? {
                    Some(Some(fields)) => decode_blocks(go_json::field(fields, "memoryBlocks"), "podEntries")?,
                    _ => None,
                };
                decoded.insert(pod.clone(), blocks);
            }
            Some(decoded)
        }
    };
    Ok(MemoryCheckpoint {
        version: 1,
        policy_name: go_json::string(go_json::field(object, "policyName"), at("policyName"))?,
        machine_state,
        entries,
        pod_entries,
        checksum: go_json::uint64(go_json::field(object, "checksum"), at("checksum"))?,
        data: None,
    })
}

fn decode_nodes(nodes: &Map<String, Value>) -> Result<BTreeMap<i64, Option<NumaNodeEntry>>, CheckpointError> {
    let mut decoded = BTreeMap::new();
    for (key, node) in nodes {
        let id = crate::go::parse_int64(key).map_err(|_| {
            CheckpointError::Decode(format!(
                "json: cannot unmarshal number {key} into Go struct field MemoryManagerCheckpoint.machineState of type int"
            ))
        })?;
        let node = match go_json::object(Some(node), at("machineState"), "state.NUMANodeState")? {
            Some(Some(fields)) => Some(decode_node(fields)?),
            _ => None,
        };
        decoded.insert(id, node);
    }
    Ok(decoded)
}

fn decode_node(fields: &Map<String, Value>) -> Result<NumaNodeEntry, CheckpointError> {
    let at = |path| At {
        go_struct: "NUMANodeState",
        path,
    };
    let memory_map = match go_json::object(
        go_json::field(fields, "memoryMap"),
        at("machineState.memoryMap"),
        "map[v1.ResourceName]*state.MemoryTable",
    )? {
        None | Some(None) => None,
        Some(Some(tables)) => {
            let mut decoded = BTreeMap::new();
            for (resource, table) in tables {
                let table = match go_json::object(Some(table), at("machineState.memoryMap"), "state.MemoryTable")? {
                    Some(Some(t)) => {
                        let at = |path| At {
                            go_struct: "MemoryTable",
                            path,
                        };
                        let number = |name: &'static str| go_json::uint64(go_json::field(t, name), at(name));
                        Some(MemoryTableState {
                            total: number("total")?,
                            system_reserved: number("systemReserved")?,
                            allocatable: number("allocatable")?,
                            reserved: number("reserved")?,
                            free: number("free")?,
                        })
                    }
                    _ => None,
                };
                decoded.insert(resource.clone(), table);
            }
            Some(decoded)
        }
    };
    Ok(NumaNodeEntry {
        number_of_assignments: go_json::int(
            go_json::field(fields, "numberOfAssignments"),
            at("machineState.numberOfAssignments"),
            "int",
        )?,
        memory_map,
        cells: int_list(go_json::field(fields, "cells"), at("machineState.cells"))?,
    })
}

fn int_list(value: Option<&Value>, at: At<'_>) -> Result<Option<Vec<i64>>, CheckpointError> {
    go_json::array(value, at, "[]int")?
        .map(|items| items.iter().map(|item| go_json::int(Some(item), at, "int")).collect())
        .transpose()
}

/// A `[]state.Block` under `field` (`entries`, `podEntries`); `None` for
/// Go's nil (absent or `null`).
fn decode_blocks(value: Option<&Value>, field: &str) -> Result<Option<Vec<BlockEntry>>, CheckpointError> {
    let path = |leaf: &str| format!("{field}.{leaf}");
    let (numa_path, type_path, size_path) = (path("numaAffinity"), path("type"), path("size"));
    let at_block = |path| At {
        go_struct: "Block",
        path,
    };
    go_json::array(value, at(field), "[]state.Block")?
        .map(|items| {
            items
                .iter()
                .map(|item| {
                    let Some(Some(b)) = go_json::object(Some(item), at(field), "state.Block")? else {
                        return Ok(BlockEntry {
                            numa_affinity: None,
                            resource: String::new(),
                            size: 0,
                        });
                    };
                    Ok(BlockEntry {
                        numa_affinity: int_list(go_json::field(b, "numaAffinity"), at_block(&numa_path))?,
                        resource: go_json::string(go_json::field(b, "type"), at_block(&type_path))?,
                        size: go_json::uint64(go_json::field(b, "size"), at_block(&size_path))?,
                    })
                })
                .collect::<Result<Vec<_>, CheckpointError>>()
        })
        .transpose()
}

fn decode_entries(pods: &Map<String, Value>) -> Result<Entries, CheckpointError> {
    let mut decoded = BTreeMap::new();
    for (pod, containers) in pods {
        let containers = match go_json::object(Some(containers), at("entries"), "map[string][]state.Block")? {
            Some(Some(containers)) => {
                let mut by_container = BTreeMap::new();
                for (container, blocks) in containers {
                    let blocks = decode_blocks(Some(blocks), "entries")?;
                    by_container.insert(container.clone(), blocks);
                }
                Some(by_container)
            }
            _ => None,
        };
        decoded.insert(pod.clone(), containers);
    }
    Ok(decoded)
}
