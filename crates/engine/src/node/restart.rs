//! A kubelet that restarts: the new process's managers restore what the old
//! one's wrote, then the API server's pods come back and are admitted again.
//!
//! Owns: [`Node::restarted`], the order of a restart's re-admission. Must
//! not touch: reading or writing checkpoint files (`topoalign-k8s`
//! round-trips the old node's state through the files its release writes,
//! so a changed policy meets the kubelet's own checks there), or admission
//! itself — a pod admitted again goes through [`Node::admit`] like any.
//!
//! What the kubelet does, and so what this does: `ContainerManager.Start`
//! restores every manager's state with no pod active yet (the config
//! sources have not been seen, so no stale state is collected); then
//! `HandlePodAdditions` adds the pods one by one in creation order, each to
//! the pod manager first, and admits each. The first admission's hint
//! request (or allocation) runs the CPU, memory and device managers'
//! stale-state collection, which now sees only that first pod as active:
//! every later pod loses what it held and is allocated afresh when its turn
//! comes — an exclusive CPU of a running container can move. Its containers
//! run already and are not started again, so no manager hears of them: a
//! finished init container's pinned memory, which the app container took
//! over at its start, is held again. A pod refused now is Failed; what it
//! held is released.

use topoalign_model::Pod;

use super::{Containers, Node, NodeSnapshot, RestoreError};
use crate::Decision;

impl Node {
    /// This freshly started node (the new process: same machine, its own
    /// configuration) restores `snapshot` — the old process's state as its
    /// checkpoint files give it back, with the pods that were running, in
    /// admission order — and admits those pods again as the kubelet does
    /// after a restart. Returns the node and each pod's new decision, in
    /// that order.
    ///
    /// # Errors
    /// [`RestoreError`] with the kubelet's text when its managers refuse
    /// the restored state: the kubelet does not start.
    pub fn restarted(self, snapshot: NodeSnapshot) -> Result<(Node, Vec<Decision>), RestoreError> {
        let pods: Vec<Pod> = snapshot.pods.clone();
        let mut node = self.restored(snapshot)?;
        // The API server's pods are not in the pod manager yet.
        node.set_active(Vec::new());
        // The first admission's stale-state collection: only the first pod
        // is active then.
        for pod in pods.iter().skip(1) {
            node.release(&pod.uid);
        }
        let mut decisions = Vec::with_capacity(pods.len());
        for pod in pods {
            let uid = pod.uid.clone();
            let decision = node.admit_then(pod, Containers::Running);
            if !decision.admitted() {
                // Failed, no longer active: the next collection releases
                // whatever it still held.
                node.release(&uid);
            }
            decisions.push(decision);
        }
        Ok((node, decisions))
    }
}
