//! The memory manager's state as its checkpoint (`memory_manager_state`)
//! holds it, and restoring a manager from it the way a restarting kubelet
//! does (checkpoint restore, then the Static policy's `validateState`).
//!
//! Owns: [`MemoryManagerState`] and its parts, [`MemoryManager::state`],
//! [`MemoryManager::restore`] and its [`MemoryRestoreError`] texts. Must
//! not touch: the checkpoint file format and checksum (`topoalign-k8s`) or
//! any allocation decision.

use std::collections::BTreeMap;

use topoalign_model::{Machine, NumaMask};

use crate::machine_state::{Block, MachineState, NumaNodeState};
use crate::policy_static::StaticPolicy;
use crate::{MemoryManager, Policy};

/// What `memory_manager_state` records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemoryManagerState {
    /// `machineState`: per NUMA node; empty = none recorded (a fresh start).
    pub machine_state: BTreeMap<usize, NumaMemoryState>,
    /// `entries`: pod uid → container name → memory blocks.
    pub assignments: BTreeMap<String, BTreeMap<String, Vec<MemoryBlock>>>,
    /// `podEntries` (`PodLevelResourceManagers`, 1.36+): pod uid → the
    /// blocks reserved for the whole pod, which its containers' entries
    /// divide.
    pub pod_assignments: BTreeMap<String, Vec<MemoryBlock>>,
}

/// One NUMA node of the machine state (kubelet `NUMANodeState`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumaMemoryState {
    /// Blocks placed on the node.
    pub number_of_assignments: i64,
    /// Per resource (`memory`, `hugepages-1Gi`, ...).
    pub memory: BTreeMap<String, MemoryTableState>,
    /// The node's group: itself, or the nodes a multi-node block spans.
    pub cells: Vec<usize>,
}

impl MemoryManagerState {
    /// This state with the machine's own NUMA ids ([`Machine::numa_label`])
    /// for the engine's indices — machine-state keys, cells, every block's
    /// affinity: what the kubelet writes in its checkpoint. Unchanged on a
    /// machine not numbered anew.
    pub fn with_numa_labels(self, machine: &Machine) -> MemoryManagerState {
        if machine.numa_labels().is_none() {
            return self;
        }
        self.map_numa_ids(|index| machine.numa_label(index))
    }

    /// This state, read from the kubelet's checkpoint (the machine's own
    /// NUMA ids), with the engine's indices; an id the machine does not
    /// have is put past every index, so the restore refuses it as a machine
    /// state that differs. Unchanged on a machine not numbered anew.
    pub fn with_numa_indices(self, machine: &Machine) -> MemoryManagerState {
        let Some(labels) = machine.numa_labels() else {
            return self;
        };
        let past = labels.len();
        self.map_numa_ids(|id| machine.numa_id_of_label(id).unwrap_or(past.saturating_add(id)))
    }

    fn map_numa_ids(mut self, map: impl Fn(usize) -> usize) -> MemoryManagerState {
        self.machine_state = std::mem::take(&mut self.machine_state)
            .into_iter()
            .map(|(id, mut node)| {
                node.cells = node.cells.iter().map(|&cell| map(cell)).collect();
                (map(id), node)
            })
            .collect();
        let blocks = self
            .assignments
            .values_mut()
            .flat_map(|containers| containers.values_mut())
            .chain(self.pod_assignments.values_mut());
        for block in blocks.flatten() {
            block.numa_affinity = block.numa_affinity.iter().map(|&id| map(id)).collect();
        }
        self
    }
}

/// One resource on one NUMA node, in bytes (kubelet `MemoryTable`): the
/// policy's own table, recorded as it is.
pub use crate::machine_state::MemoryTable as MemoryTableState;

/// One pinned piece of a container's memory (kubelet `Block`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryBlock {
    pub numa_affinity: Vec<usize>,
    /// `memory` or `hugepages-<size>`.
    pub resource: String,
    /// Bytes.
    pub size: u64,
}

/// Why a restarting kubelet refuses restored memory manager state. Display
/// is the kubelet's text; it reports it as `start memory manager error:
/// <text>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryRestoreError {
    #[error("[memorymanager] machine state can not be empty when it has memory assignments")]
    EmptyMachineState,
    #[error(
        "[memorymanager] (pod: {pod}, container: {container}) the memory assignment uses the NUMA that does not exist"
    )]
    UnknownNumaNode { pod: String, container: String },
    #[error(
        "[memorymanager] (pod: {pod}, container: {container}) the memory assignment uses memory resource that does not exist"
    )]
    UnknownResource { pod: String, container: String },
    #[error("[memorymanager] the expected machine state is different from the real one")]
    MachineStateDiffers,
}

/// [`MemoryManagerState`] borrowed from the manager, for a reader that
/// only writes it out (the NRT exact-state attribute): no copy of its
/// maps. Maps come in key order, as [`MemoryManagerState`]'s.
#[derive(Clone, Copy)]
pub struct MemoryStateView<'a>(&'a StaticPolicy);

/// One NUMA node of [`MemoryStateView::machine_state`]
/// ([`NumaMemoryState`] borrowed).
#[derive(Clone, Copy, Debug)]
pub struct NumaMemoryView<'a> {
    pub number_of_assignments: i64,
    pub memory: &'a BTreeMap<String, MemoryTableState>,
    /// The node's group (see [`NumaMemoryView::cell_ids`]).
    node: &'a NumaNodeState,
    id: usize,
}

impl NumaMemoryView<'_> {
    /// The node's group as NUMA ids, ascending: itself, or the nodes a
    /// multi-node block spans.
    pub fn cell_ids(&self) -> Vec<usize> {
        self.node.cell_ids(self.id)
    }
}

/// A container's or pod's memory blocks, borrowed.
#[derive(Clone, Copy)]
pub struct BlocksView<'a>(&'a [Block]);

/// One memory block ([`MemoryBlock`] borrowed).
#[derive(Clone, Copy, Debug)]
pub struct MemoryBlockView<'a> {
    pub numa_affinity: NumaMask,
    pub resource: &'a str,
    pub size: u64,
}

impl<'a> BlocksView<'a> {
    pub fn iter(self) -> impl ExactSizeIterator<Item = MemoryBlockView<'a>> + 'a {
        self.0.iter().map(|b| MemoryBlockView {
            numa_affinity: b.affinity,
            resource: &b.resource,
            size: b.size,
        })
    }
}

impl<'a> MemoryStateView<'a> {
    /// `machineState`, by NUMA node.
    pub fn machine_state(self) -> impl Iterator<Item = (usize, NumaMemoryView<'a>)> + 'a {
        self.0.machine_state().nodes.iter().map(|(&id, node)| {
            let view = NumaMemoryView {
                number_of_assignments: node.assignments,
                memory: &node.memory,
                node,
                id,
            };
            (id, view)
        })
    }

    /// `entries`: pod uid → its containers (by name) and their blocks.
    pub fn assignments(self) -> impl Iterator<Item = (&'a str, Vec<(&'a str, BlocksView<'a>)>)> + 'a {
        let mut all = self.0.all_blocks().peekable();
        std::iter::from_fn(move || {
            let (uid, name, blocks) = all.next()?;
            let mut containers = vec![(name, BlocksView(blocks))];
            while let Some((name, blocks)) = all
                .next_if(|next| next.0 == uid)
                .map(|(_, name, blocks)| (name, blocks))
            {
                containers.push((name, BlocksView(blocks)));
            }
            containers.sort_unstable_by_key(|c| c.0);
            Some((uid, containers))
        })
    }

    /// `podEntries`: pod uid → the pod's blocks.
    pub fn pod_assignments(self) -> impl Iterator<Item = (&'a str, BlocksView<'a>)> + 'a {
        self.0.pod_assignments().map(|(uid, blocks)| (uid, BlocksView(blocks)))
    }
}

impl MemoryManager {
    /// [`MemoryManager::state`] borrowed; `None` under the `None` policy.
    pub fn state_view(&self) -> Option<MemoryStateView<'_>> {
        match &self.policy {
            Policy::Static(policy) => Some(MemoryStateView(policy)),
            Policy::None => None,
        }
    }

    /// The state as the kubelet would checkpoint it now; `None` under the
    /// `None` policy, whose checkpoint records nothing.
    pub fn state(&self) -> Option<MemoryManagerState> {
        let Policy::Static(policy) = &self.policy else {
            return None;
        };
        let machine_state = policy
            .machine_state()
            .nodes
            .iter()
            .map(|(&id, node)| {
                let state = NumaMemoryState {
                    number_of_assignments: node.assignments,
                    memory: node.memory.clone(),
                    cells: node.cell_ids(id),
                };
                (id, state)
            })
            .collect();
        let plain = |blocks: &[Block]| -> Vec<MemoryBlock> {
            blocks
                .iter()
                .map(|b| MemoryBlock {
                    numa_affinity: b.affinity.nodes().collect(),
                    resource: b.resource.clone(),
                    size: b.size,
                })
                .collect()
        };
        let mut assignments: BTreeMap<String, BTreeMap<String, Vec<MemoryBlock>>> = BTreeMap::new();
        for (uid, container, blocks) in policy.all_blocks() {
            assignments
                .entry(uid.to_owned())
                .or_default()
                .insert(container.to_owned(), plain(blocks));
        }
        let pod_assignments = policy
            .pod_assignments()
            .map(|(uid, blocks)| (uid.to_owned(), plain(blocks)))
            .collect();
        Some(MemoryManagerState {
            machine_state,
            assignments,
            pod_assignments,
        })
    }

    /// Replaces the state with a restored one, as a restarting kubelet does:
    /// the Static policy recomputes the machine state from the blocks,
    /// refuses a stored one that differs, and keeps the stored one; the
    /// `None` policy keeps and checks nothing. Pod-level assignments are
    /// kept only with `PodLevelResourceManagers` on (the kubelet's state
    /// reads them only then). The policy name recorded in the checkpoint is
    /// the caller's to compare.
    ///
    /// # Errors
    /// [`MemoryRestoreError`] with the kubelet's text; the manager is then
    /// unchanged.
    pub fn restore(&mut self, state: MemoryManagerState) -> Result<(), MemoryRestoreError> {
        let Policy::Static(policy) = &mut self.policy else {
            return Ok(());
        };
        let machine = if state.machine_state.is_empty() {
            None
        } else {
            Some(to_machine_state(state.machine_state).ok_or(MemoryRestoreError::MachineStateDiffers)?)
        };
        // Collected, not inserted one by one: the maps come in key order,
        // and collecting a sorted run builds the map in one pass instead of
        // a search per pod.
        let blocks = state
            .assignments
            .into_iter()
            .map(|(pod, containers)| {
                let pod_blocks = containers
                    .into_iter()
                    .map(|(container, list)| {
                        let converted = engine_blocks(list, &pod, &container)?;
                        Ok((container, converted))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((pod, pod_blocks))
            })
            .collect::<Result<BTreeMap<_, _>, _>>()?;
        let pod_level = state
            .pod_assignments
            .into_iter()
            .map(|(pod, list)| {
                let converted = engine_blocks(list, &pod, "")?;
                Ok((pod, converted))
            })
            .collect::<Result<BTreeMap<_, _>, _>>()?;
        policy.restore(machine, blocks, pod_level)
    }
}

/// Restored blocks as the policy's; a NUMA id no mask can hold is an
/// unknown node of `pod`'s `container` (`""` for a pod-level entry, as the
/// kubelet names it).
fn engine_blocks(list: Vec<MemoryBlock>, pod: &str, container: &str) -> Result<Vec<Block>, MemoryRestoreError> {
    list.into_iter()
        .map(|block| {
            let affinity = mask(&block.numa_affinity).ok_or_else(|| MemoryRestoreError::UnknownNumaNode {
                pod: pod.to_owned(),
                container: container.to_owned(),
            })?;
            Ok(Block {
                affinity,
                resource: block.resource,
                size: block.size,
            })
        })
        .collect()
}

/// NUMA ids as a mask; `None` for an id a mask cannot hold (no machine has
/// such a node).
fn mask(nodes: &[usize]) -> Option<NumaMask> {
    nodes
        .iter()
        .all(|&n| n < topoalign_model::MAX_NUMA_NODES)
        .then(|| NumaMask::from_nodes(nodes.iter().copied()))
}

fn to_machine_state(nodes: BTreeMap<usize, NumaMemoryState>) -> Option<MachineState> {
    let nodes = nodes
        .into_iter()
        .map(|(id, node)| {
            let state = NumaNodeState {
                memory: node.memory,
                assignments: node.number_of_assignments,
                cells: NumaNodeState::cells_of_ids(id, &node.cells)?,
            };
            Some((id, state))
        })
        .collect::<Option<_>>()?;
    Some(MachineState { nodes })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use topoalign_model::UniformMachine;

    use super::*;

    fn state(ids: [usize; 2]) -> MemoryManagerState {
        let node = |id: usize| NumaMemoryState {
            number_of_assignments: 1,
            memory: BTreeMap::new(),
            cells: vec![ids[0], id],
        };
        let block = MemoryBlock {
            numa_affinity: ids.to_vec(),
            resource: "memory".into(),
            size: 1 << 30,
        };
        MemoryManagerState {
            machine_state: ids.iter().map(|&id| (id, node(id))).collect(),
            assignments: [("uid".to_owned(), [("app".to_owned(), vec![block.clone()])].into())].into(),
            pod_assignments: [("uid".to_owned(), vec![block])].into(),
        }
    }

    #[test]
    fn numa_ids_are_the_machine_s_own_in_files_and_indices_inside() {
        let labelled = UniformMachine::new(2, 2).numa_ids([0, 64]).build().unwrap();
        assert_eq!(state([0, 1]).with_numa_labels(&labelled), state([0, 64]));
        assert_eq!(state([0, 64]).with_numa_indices(&labelled), state([0, 1]));
        // An id the machine lacks goes past every index: a state that
        // differs, which the restore refuses.
        let read = state([0, 65]).with_numa_indices(&labelled);
        assert_eq!(read.machine_state.keys().copied().collect::<Vec<_>>(), [0, 67]);
        // A machine with its own ids is left as it is.
        let plain = UniformMachine::new(2, 2).build().unwrap();
        assert_eq!(state([0, 1]).with_numa_labels(&plain), state([0, 1]));
        assert_eq!(state([0, 5]).with_numa_indices(&plain), state([0, 5]));
    }
}
