//! A trial admission ([`Node::try_admit`]): the decision [`Node::admit`]
//! would make, and the node's usage after it, with the node itself left as
//! it is — what a scheduler extender asks of every candidate node.
//!
//! Owns: the copy a trial works on. Must not touch: the decision — the
//! trial runs the very admission chain of [`Node::admit`] on a copy of the
//! managers' state.

use topoalign_model::{Machine, Pod};

use super::{Node, NumaUsage};
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
}

impl Node {
    /// The decision [`Node::admit`] would make for `pod` in this state,
    /// without admitting it. Cheaper than admitting on a clone of the node:
    /// only the managers' state is copied, not the admitted pods (which
    /// admission does not read), and the node's shared parts are shared.
    pub fn try_admit(&self, pod: &Pod) -> TrialAdmission {
        let mut after = Node {
            machine: self.machine.clone(),
            config: self.config.clone(),
            resources: self.resources.clone(),
            fit_allocatable: self.fit_allocatable.clone(),
            topology: self.topology.clone(),
            devices: self.devices.clone(),
            cpus: self.cpus.clone(),
            memory: self.memory.clone(),
            active: Vec::new(),
            fit_usage: self.fit_usage.clone(),
        };
        let decision = after.admit(pod.clone());
        // The pod admission just recorded: not part of what a trial keeps.
        after.active.clear();
        TrialAdmission { decision, after }
    }
}
