//! A trial admission ([`Node::try_admit`]): the decision [`Node::admit`]
//! would make, and the node's usage after it, with the node itself left as
//! it is — what a scheduler extender asks of every candidate node.
//!
//! Owns: the copy a trial works on. Must not touch: the decision — the
//! trial runs the very admission chain of [`Node::admit`] on a copy of the
//! managers' state.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use topoalign_model::{CpuSet, Machine, Pod};

use super::{Node, NumaUsage, UsageReader};
use crate::Decision;

/// What [`Node::try_admit`] found: the decision, and (read through
/// [`TrialAdmission::numa_usage`]) the node's usage had it been admitted.
#[derive(Clone, Debug)]
pub struct TrialAdmission {
    /// Exactly what [`Node::admit`] would have decided in this state.
    pub decision: Decision,
    /// The managers after the admission. The admitted pods are left out
    /// (admission never reads them: they only feed `pods`, `state` and
    /// removals), so this is not a node to admit on again.
    after: Node,
}

impl TrialAdmission {
    /// The machine.
    pub fn machine(&self) -> &Machine {
        self.after.machine()
    }

    /// [`Node::numa_usage`] of the node after the admission (the node
    /// before it when the pod is refused: a refusal leaves nothing
    /// behind).
    pub fn numa_usage(&self) -> Vec<NumaUsage> {
        self.after.numa_usage()
    }

    /// [`Node::usage_reader`] of the node after the admission.
    pub fn usage_reader(&self) -> UsageReader<'_> {
        self.after.usage_reader()
    }
}

impl Node {
    /// The decision [`Node::admit`] would make for `pod` in this state,
    /// without admitting it. Cheaper than admitting on a clone of the node:
    /// it admits on [`Node::trial_copy`] (the managers' state copied, not
    /// the admitted pods, the node's shared parts shared).
    pub fn try_admit(&self, pod: &Pod) -> TrialAdmission {
        let mut after = self.trial_copy();
        let decision = after.admit(pod.clone());
        // The pod admission just recorded: not part of what a trial keeps.
        after.active.clear();
        TrialAdmission { decision, after }
    }
}

impl Node {
    /// A key of everything an admission of a pod this node does not hold
    /// reads, and nothing of who holds what: the shared CPU pool, the CPUs
    /// held exclusively (as one set), the memory manager's table per NUMA
    /// node (free amounts, assignment counts, groups), the devices in use
    /// (as sets) and the pods' summed requests and count. Two nodes started
    /// with the same machine and configuration whose keys are equal give
    /// every such pod the same [`Node::try_admit`]: each manager decides a
    /// new pod from these alone (what it keeps per pod is read only for
    /// that pod), and [`Node::numa_usage`] reads no more. Nodes holding the
    /// same pods in another order — or other pods of the same sizes, placed
    /// alike — share a key.
    pub fn trial_key(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        let hasher = &mut hasher;
        let (by_containers, by_pods) = self.cpus.held_cpus();
        for cpus in [&self.cpus.default_cpu_set(), &by_containers, &by_pods] {
            hash_cpus(cpus, hasher);
        }
        self.memory.hash_machine_state(hasher);
        for resource in self.machine.devices().keys() {
            (resource, self.devices.devices_in_use(resource)).hash(hasher);
        }
        self.fit_usage.hash(hasher);
        hasher.finish()
    }
}

/// Feeds a CPU set to `hasher` as 64-bit words (one write per word, not
/// per CPU), then its size, so sets of different members differ.
fn hash_cpus(cpus: &CpuSet, hasher: &mut impl Hasher) {
    let mut word = 0u64;
    let mut index = 0u32;
    for cpu in cpus.iter() {
        if cpu / 64 != index {
            hasher.write_u64(word);
            (index + 1..cpu / 64).for_each(|_| hasher.write_u64(0));
            index = cpu / 64;
            word = 0;
        }
        word |= 1 << (cpu % 64);
    }
    hasher.write_u64(word);
    hasher.write_usize(cpus.len());
}
