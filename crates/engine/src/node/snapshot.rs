//! A node's allocation state as plain data ([`NodeSnapshot`]: what the
//! kubelet's checkpoint files and pod list hold), taking one from a node and
//! restoring a node from one the way a restarting kubelet does.
//!
//! Owns: [`Node::snapshot`] and its borrowed [`Node::snapshot_view`], [`Node::restore`] / [`Node::restored`], [`RestoreError`]. Must not touch: admission — a restored node admits
//! with the same code as any other. No I/O: reading checkpoint files is
//! `topoalign-k8s`'s job.

use std::collections::{BTreeSet, HashSet};

use topoalign_cpu_manager::{CpuManagerState, CpuRestoreError, CpuStateView};
use topoalign_device_manager::{DeviceAssignments, DeviceRestoreError, DevicesView};
use topoalign_memory_manager::{MemoryManagerState, MemoryRestoreError, MemoryStateView};
use topoalign_model::Pod;
use topoalign_topology_manager::TopologyPolicyName;

use super::Node;

/// Everything a node holds: the admitted pods (in admission order) and each
/// manager's state, keyed by pod uid.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeSnapshot {
    pub pods: Vec<Pod>,
    /// `cpu_manager_state`, pod-level assignments (`podEntries`) included.
    pub cpu: CpuManagerState,
    /// `memory_manager_state`, pod-level assignments included; `None` when
    /// there is none to restore (the `None` policy, or no file: a fresh
    /// start).
    pub memory: Option<MemoryManagerState>,
    /// The device manager's record.
    pub devices: DeviceAssignments,
}

/// Why a restarting kubelet would refuse restored state. Display is the
/// kubelet's `ContainerManager.Start` text where the kubelet has one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RestoreError {
    #[error("start cpu manager error: {0}")]
    Cpu(#[from] CpuRestoreError),
    #[error("start memory manager error: {0}")]
    Memory(#[from] MemoryRestoreError),
    #[error("device manager state: {0}")]
    Devices(#[from] DeviceRestoreError),
}

/// [`NodeSnapshot`] borrowed from the node, for a reader that writes it
/// out and keeps nothing (the NRT exact-state attribute): no copy of the
/// pods or of the managers' maps. `cpu` and `memory` are `None` under
/// their `none` policies (an empty CPU state; no memory state).
#[derive(Clone, Copy)]
pub struct SnapshotView<'a> {
    pub pods: &'a [Pod],
    pub cpu: Option<CpuStateView<'a>>,
    pub memory: Option<MemoryStateView<'a>>,
    /// Pod uid → container → resource → device ids.
    pub devices: DevicesView<'a>,
}

impl Node {
    /// [`Node::snapshot`] borrowed (see [`SnapshotView`]).
    pub fn snapshot_view(&self) -> SnapshotView<'_> {
        SnapshotView {
            pods: &self.active,
            cpu: self.cpus.state_view(),
            memory: self.memory.state_view(),
            devices: self.devices.assignments_view(),
        }
    }

    /// The node's state as plain data; [`Node::restore`] on a node started
    /// with the same machine and configuration gives this node back.
    pub fn snapshot(&self) -> NodeSnapshot {
        NodeSnapshot {
            pods: self.active.clone(),
            cpu: self.cpus.state(),
            memory: self.memory.state(),
            devices: self.devices.assignments(),
        }
    }

    /// Replaces the node's pods and state with `snapshot`, the way a
    /// restarting kubelet restores its checkpoints (each manager checks what
    /// it restores, with the kubelet's texts). State held for a uid that is
    /// not among `snapshot.pods` is then released — the managers'
    /// stale-state collection, which the kubelet runs before it reads the
    /// state again.
    ///
    /// # Errors
    /// [`RestoreError`] for state the kubelet would refuse; the node is then
    /// unchanged.
    pub fn restore(&mut self, snapshot: NodeSnapshot) -> Result<(), RestoreError> {
        *self = self.clone().restored(snapshot)?;
        Ok(())
    }

    /// [`Node::restore`] of a node given away: the restored node, with no
    /// copy kept to leave unchanged on error (a caller restoring onto a
    /// fresh clone of a started node pays for one clone, not two).
    ///
    /// # Errors
    /// [`RestoreError`] for state the kubelet would refuse; the node is then
    /// dropped.
    pub fn restored(mut self, snapshot: NodeSnapshot) -> Result<Node, RestoreError> {
        let stale = snapshot.stale_uids();
        self.cpus.restore(snapshot.cpu)?;
        self.memory.restore(snapshot.memory.unwrap_or_default())?;
        self.devices.restore(snapshot.devices)?;
        let active = snapshot.pods.into_iter().map(|pod| self.as_admitted(pod)).collect();
        self.set_active(active);
        for uid in &stale {
            self.release(uid);
        }
        Ok(self)
    }
}

impl NodeSnapshot {
    /// The uids holding state that no pod has, ascending: what the
    /// managers' stale-state collection releases after a restore. Read
    /// from the snapshot (the managers keep a part of it, and releasing
    /// what they did not keep changes nothing), without copying its maps.
    fn stale_uids(&self) -> BTreeSet<String> {
        // Hashed with foldhash, not SipHash: this runs on every restore
        // (the extender restores thousands of nodes at start).
        let active: HashSet<&str, foldhash::fast::RandomState> = self.pods.iter().map(|p| p.uid.as_str()).collect();
        let memory = self
            .memory
            .iter()
            .flat_map(|m| m.assignments.keys().chain(m.pod_assignments.keys()));
        self.cpu
            .assignments
            .keys()
            .chain(self.cpu.pod_assignments.keys())
            .chain(memory)
            .chain(self.devices.keys())
            .filter(|uid| !active.contains(uid.as_str()))
            .cloned()
            .collect()
    }
}

impl Node {
    /// Gives the running pods devices when no device record was restored
    /// (the kubelet's `kubelet_internal_checkpoint` was not read): each
    /// container, in admission order, gets what the device manager would
    /// allocate for it aligned to the NUMA nodes of its exclusive CPUs and
    /// pinned memory (under topology policy `none`, unaligned, as the
    /// kubelet allocates there). Returns a note per container whose devices could not
    /// be allocated. An inference, not the kubelet's record: the caller
    /// should say so.
    pub fn infer_device_assignments(&mut self) -> Vec<String> {
        let mut notes = Vec::new();
        let pods = self.active.clone();
        for pod in &pods {
            for (container, _) in pod.all_containers() {
                let cpus = self.cpus.container_cpus(&pod.uid, &container.name).unwrap_or_default();
                let mut nodes: BTreeSet<usize> = self
                    .machine
                    .cpus()
                    .iter()
                    .filter(|c| cpus.contains(c.id))
                    .map(|c| c.numa)
                    .collect();
                nodes.extend(
                    self.memory
                        .container_numa_nodes(&pod.uid, &container.name)
                        .unwrap_or_default(),
                );
                // Under topology policy none the kubelet hands the device
                // manager no affinity (and a machine wider than masks runs
                // only under none).
                let hint = if nodes.is_empty() || self.topology.policy() == TopologyPolicyName::None {
                    topoalign_model::TopologyHint::any(false)
                } else {
                    topoalign_model::TopologyHint::new(topoalign_model::NumaMask::from_nodes(nodes), true)
                };
                if let Err(error) = self.devices.allocate(pod, container, hint) {
                    notes.push(format!("{} {}: {error}", pod.key(), container.name));
                }
            }
        }
        notes
    }
}
