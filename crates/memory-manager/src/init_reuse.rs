//! Memory a pod's regular init containers hold that its later containers
//! may take over (kubelet `initContainersReusableMemory`,
//! `updatePodReusableMemory`, `getPodReusableMemory`).
//!
//! An init container has finished before the next container starts, so the
//! memory pinned for it can serve the next containers of the same pod on
//! exactly the same NUMA mask. Sidecars (restartable init containers) keep
//! running and are never reused.
//!
//! Owns: the per-pod, per-mask, per-resource reusable amounts. Must not
//! touch: the machine state or the blocks themselves.

use std::collections::BTreeMap;

use topoalign_model::{Container, NumaMask, Pod};

use crate::machine_state::Block;

/// Reusable bytes: pod uid → NUMA mask → resource → bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ReusableMemory {
    by_pod: BTreeMap<String, BTreeMap<NumaMask, BTreeMap<String, u64>>>,
}

impl ReusableMemory {
    /// The masks on which the pod has reusable memory.
    pub fn masks(&self, pod_uid: &str) -> Vec<NumaMask> {
        self.by_pod
            .get(pod_uid)
            .map(|by_mask| by_mask.keys().copied().collect())
            .unwrap_or_default()
    }

    /// What the pod may reuse of `resource` on exactly `mask`.
    pub fn get(&self, pod_uid: &str, mask: NumaMask, resource: &str) -> u64 {
        self.by_pod
            .get(pod_uid)
            .and_then(|by_mask| by_mask.get(&mask))
            .and_then(|by_resource| by_resource.get(resource))
            .copied()
            .unwrap_or(0)
    }

    /// Accounts for `container`'s blocks: a regular init container makes
    /// its blocks reusable (the largest per mask and resource counts, since
    /// init containers run one after another); any other container uses up
    /// what it took over. Entries of every other pod are forgotten first —
    /// the kubelet keeps reusable memory for the pod being admitted only.
    pub fn record(&mut self, pod: &Pod, container: &Container, blocks: &[Block]) {
        self.by_pod.retain(|uid, _| *uid == pod.uid);

        if pod.is_regular_init(container) {
            let by_mask = self.by_pod.entry(pod.uid.clone()).or_default();
            for block in blocks {
                let reusable = by_mask
                    .entry(block.affinity)
                    .or_default()
                    .entry(block.resource.clone())
                    .or_insert(0);
                *reusable = (*reusable).max(block.size);
            }
            return;
        }

        for block in blocks {
            let Some(reusable) = self
                .by_pod
                .get_mut(&pod.uid)
                .and_then(|by_mask| by_mask.get_mut(&block.affinity))
                .and_then(|by_resource| by_resource.get_mut(&block.resource))
            else {
                continue;
            };
            *reusable = reusable.saturating_sub(block.size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests::fixture::{container, pod, sidecar};

    const GI: u64 = 1 << 30;

    fn block(nodes: &[usize], size: u64) -> Block {
        Block {
            affinity: NumaMask::from_nodes(nodes.iter().copied()),
            resource: "memory".to_string(),
            size,
        }
    }

    #[test]
    fn init_containers_leave_their_largest_block_and_apps_use_it_up() {
        let p = pod(
            "p",
            vec![container("i1", &[]), container("i2", &[])],
            vec![container("a1", &[]), container("a2", &[])],
        );
        let mut reuse = ReusableMemory::default();
        reuse.record(&p, &p.init_containers[0], &[block(&[0], 4 * GI)]);
        reuse.record(&p, &p.init_containers[1], &[block(&[0], 3 * GI)]);
        assert_eq!(reuse.get("p", NumaMask::single(0), "memory"), 4 * GI);
        assert_eq!(reuse.get("p", NumaMask::from_nodes([0, 1]), "memory"), 0);
        reuse.record(&p, &p.containers[0], &[block(&[0], GI)]);
        assert_eq!(reuse.get("p", NumaMask::single(0), "memory"), 3 * GI);
        reuse.record(&p, &p.containers[1], &[block(&[0], 5 * GI)]);
        assert_eq!(reuse.get("p", NumaMask::single(0), "memory"), 0);
    }

    #[test]
    fn sidecars_are_not_reusable_and_other_pods_are_forgotten() {
        let p = pod(
            "p",
            vec![sidecar("s", &[]), container("i", &[])],
            vec![container("a", &[])],
        );
        let q = pod("q", vec![], vec![container("a", &[])]);
        let mut reuse = ReusableMemory::default();
        reuse.record(&p, &p.init_containers[0], &[block(&[0], GI)]);
        assert_eq!(reuse.get("p", NumaMask::single(0), "memory"), 0);
        reuse.record(&p, &p.init_containers[1], &[block(&[1], GI)]);
        assert_eq!(reuse.get("p", NumaMask::single(1), "memory"), GI);
        reuse.record(&q, &q.containers[0], &[block(&[1], 0)]);
        assert_eq!(reuse.get("p", NumaMask::single(1), "memory"), 0);
    }
}
