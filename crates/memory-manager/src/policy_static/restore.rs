//! Restoring the Static policy's state after a kubelet restart (the
//! policy's `Start` on a restored checkpoint): the machine state is
//! recomputed from the default one and the restored blocks, compared with
//! the stored machine state the way the kubelet compares them
//! (`validateState`, `areMachineStatesEqual`), and the stored state is kept.
//!
//! Must not touch: allocation. Reusable init-container memory starts empty,
//! as in a freshly started kubelet.

use std::collections::BTreeMap;

use super::{PodBlocks, StaticPolicy};
use crate::machine_state::{Block, MachineState, MemoryTable, NumaNodeState};
use crate::restore::MemoryRestoreError;

impl StaticPolicy {
    /// The machine state with nothing allocated (kubelet
    /// `getDefaultMachineState`), from the current one.
    fn default_machine_state(&self) -> MachineState {
        let mut machine = self.machine.clone();
        for (&id, node) in &mut machine.nodes {
            node.assignments = 0;
            node.cells = NumaNodeState::alone(id);
            for table in node.memory.values_mut() {
                *table = MemoryTable {
                    reserved: 0,
                    free: table.allocatable,
                    ..*table
                };
            }
        }
        machine
    }

    /// Validates and installs a restored state. `machine` is `None` when the
    /// checkpoint holds no machine state (a fresh start). `pod_level` (pod
    /// uid → the pod's blocks) is read only with `PodLevelResourceManagers`
    /// on; then a pod holding such blocks is accounted by them instead of
    /// its containers' (which divide them), as the kubelet's
    /// `validateState` does — for the pods with container entries only.
    pub(crate) fn restore(
        &mut self,
        machine: Option<MachineState>,
        blocks: BTreeMap<String, Vec<(String, Vec<Block>)>>,
        mut pod_level: BTreeMap<String, Vec<Block>>,
    ) -> Result<(), MemoryRestoreError> {
        if !self.pod_level_managers {
            pod_level.clear();
        }
        let default = self.default_machine_state();
        let Some(stored) = machine else {
            if blocks.values().any(|containers| !containers.is_empty()) {
                return Err(MemoryRestoreError::EmptyMachineState);
            }
            self.machine = default;
            self.blocks.clear();
            self.pod_blocks = pod_level;
            self.reusable = Default::default();
            return Ok(());
        };
        let mut expected = default;
        for (pod, containers) in &blocks {
            if let Some(whole) = pod_level.get(pod).filter(|b| !b.is_empty()) {
                for block in whole {
                    account(&mut expected, block).map_err(|missing| missing.error(pod, ""))?;
                }
                continue;
            }
            for (container, container_blocks) in containers {
                for block in container_blocks {
                    account(&mut expected, block).map_err(|missing| missing.error(pod, container))?;
                }
            }
        }
        if !machine_states_equal(&stored, &expected) {
            return Err(MemoryRestoreError::MachineStateDiffers);
        }
        self.machine = stored;
        self.blocks = blocks
            .into_iter()
            .map(|(pod, containers)| (pod, std::sync::Arc::new(containers.into_iter().collect::<PodBlocks>())))
            .collect();
        self.pod_blocks = pod_level;
        self.reusable = Default::default();
        Ok(())
    }
}

/// What a restored block refers to that the machine lacks.
enum Missing {
    Node,
    Resource,
}

impl Missing {
    fn error(self, pod: &str, container: &str) -> MemoryRestoreError {
        let (pod, container) = (pod.to_owned(), container.to_owned());
        match self {
            Missing::Node => MemoryRestoreError::UnknownNumaNode { pod, container },
            Missing::Resource => MemoryRestoreError::UnknownResource { pod, container },
        }
    }
}

/// One block's share of the expected machine state (the loop of the
/// kubelet's `validateState`, which fills the block's nodes in the order the
/// block lists them — ascending here, as masks are).
fn account(machine: &mut MachineState, block: &Block) -> Result<(), Missing> {
    let mut size = block.size;
    for node in block.affinity.nodes() {
        let state = machine.nodes.get_mut(&node).ok_or(Missing::Node)?;
        state.assignments += 1;
        state.cells = block.affinity;
        let table = state.memory.get_mut(&block.resource).ok_or(Missing::Resource)?;
        if size == 0 || table.free == 0 {
            continue;
        }
        let taken = size.min(table.free);
        table.reserved = table.reserved.wrapping_add(taken);
        table.free -= taken;
        size -= taken;
    }
    Ok(())
}

/// The kubelet's `areMachineStatesEqual`: the same nodes with the same
/// assignment counts, groups and resources; per resource the same total,
/// system-reserved and allocatable amounts; and per group the same free and
/// reserved sums. (Free and reserved are compared per group, not per node:
/// how a multi-node block splits over its nodes depends on the order blocks
/// were taken in.)
fn machine_states_equal(stored: &MachineState, expected: &MachineState) -> bool {
    if stored.nodes.len() != expected.nodes.len() {
        return false;
    }
    for (id, node) in &stored.nodes {
        let Some(other) = expected.nodes.get(id) else {
            return false;
        };
        if node.assignments != other.assignments || node.cells != other.cells {
            return false;
        }
        if node.memory.len() != other.memory.len() {
            return false;
        }
        for (resource, table) in &node.memory {
            let Some(other_table) = other.memory.get(resource) else {
                return false;
            };
            if (table.total, table.system_reserved, table.allocatable)
                != (other_table.total, other_table.system_reserved, other_table.allocatable)
            {
                return false;
            }
            let group_sums = |state: &MachineState| {
                node.cell_ids(*id)
                    .into_iter()
                    .fold((0u64, 0u64), |(free, reserved), member| {
                        let t = state.table(member, resource);
                        (free.wrapping_add(t.free), reserved.wrapping_add(t.reserved))
                    })
            };
            if group_sums(stored) != group_sums(expected) {
                return false;
            }
        }
    }
    true
}
