//! The Static policy for a pod managed at the pod level
//! (`PodLevelResourceManagers`, 1.36+, with pod-level resources): the
//! pod's memory reserved once on one NUMA affinity, then divided among its
//! containers — blocks of their own for the containers Guaranteed by
//! themselves, what is left (the pod's own shared pool) for the others.
//!
//! Owns: the pod's requests, the empty-pod-shared-pool check, pod hints,
//! `AllocatePod` and the release of a pod-level pod's containers. Must not
//! touch: the hint rules or the machine table's arithmetic (the parent's).

use std::collections::BTreeMap;

use topoalign_model::{Pod, QosClass, ResourceHints, TopologyHint};

use super::{AllocateError, StaticPolicy};
use crate::hints::HintMap;
use crate::machine_state::{Block, MEMORY, is_hugepage_resource};
use crate::requests::{Requested, UnrepresentableRequest, quantity_as_u64};

/// Why `AllocatePod` refuses a pod: the containers that share the pod's
/// memory would get none (kubelet `EmptyPodSharedPoolError`; the text is
/// the kubelet's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PodAllocateError {
    #[error("{0}")]
    EmptyPodSharedPool(String),
    #[error(transparent)]
    Allocate(#[from] AllocateError),
}

/// `getPodRequestedResources` for a pod managed at the pod level: its
/// pod-level `memory` and huge page requests, those above zero.
fn pod_level_requests(pod: &Pod) -> Result<Requested<'_>, UnrepresentableRequest> {
    let mut requested = Requested::new();
    let Some(resources) = &pod.pod_resources else {
        return Ok(requested);
    };
    for (name, &quantity) in &resources.requests {
        if name.as_str() != MEMORY && !is_hugepage_resource(name) {
            continue;
        }
        let bytes = quantity_as_u64(quantity).ok_or(UnrepresentableRequest)?;
        // Go's `int64` test before the conversion: negative amounts drop.
        if bytes as i64 > 0 {
            requested.insert(name.as_str(), bytes);
        }
    }
    Ok(requested)
}

impl StaticPolicy {
    /// `validatePodScopeResources`: containers that share the pod's memory
    /// need some left once the exclusive ones have theirs. The error is the
    /// kubelet's text.
    fn validate_pod_scope(&self, pod: &Pod) -> Result<(), String> {
        let budget = pod_level_requests(pod).map_err(|e| e.to_string())?;
        let mut shared_long_running = false;
        let mut exclusive: BTreeMap<&str, u64> = BTreeMap::new();
        let exhausted = |exclusive: &BTreeMap<&str, u64>| {
            budget
                .iter()
                .find(|(name, pool)| exclusive.get(*name).copied().unwrap_or(0) >= **pool)
                .map(|(&name, _)| name)
        };
        for container in &pod.init_containers {
            let requests = self.container_requests(pod, container).map_err(|e| e.to_string())?;
            if !container.restartable {
                if requests.is_empty()
                    && let Some(name) = exhausted(&exclusive)
                {
                    return Err(format!(
                        "pod rejected, pod has shared init containers but no {name} available for them"
                    ));
                }
            } else if requests.is_empty() {
                shared_long_running = true;
            } else {
                for (name, size) in requests {
                    let sum = exclusive.entry(name).or_insert(0);
                    *sum = sum.wrapping_add(size);
                }
            }
        }
        for container in &pod.containers {
            let requests = self.container_requests(pod, container).map_err(|e| e.to_string())?;
            if requests.is_empty() {
                shared_long_running = true;
            }
            for (name, size) in requests {
                let sum = exclusive.entry(name).or_insert(0);
                *sum = sum.wrapping_add(size);
            }
        }
        if shared_long_running && let Some(name) = exhausted(&exclusive) {
            return Err(format!(
                "pod rejected, sum of exclusive container {name} requests equals pod budget, leaving no memory for shared containers"
            ));
        }
        Ok(())
    }

    /// `GetPodTopologyHints` for a pod managed at the pod level.
    pub(super) fn pod_level_hints(&self, pod: &Pod) -> Option<HintMap> {
        if pod.qos != QosClass::Guaranteed {
            return None;
        }
        let requested = pod_level_requests(pod).ok()?;
        if self.validate_pod_scope(pod).is_err() {
            return Some(
                requested
                    .keys()
                    .map(|name| ((*name).to_owned(), ResourceHints::Impossible))
                    .collect(),
            );
        }
        if requested.is_empty() {
            return None;
        }
        self.pod_hints_for(pod, &requested)
    }

    /// `AllocatePod`: the pod's memory on the topology manager's
    /// `affinity` (defaulted or widened as `Allocate` does), then its
    /// division among the containers.
    ///
    /// # Errors
    /// [`PodAllocateError`] as the kubelet's `AllocatePod` fails; the state
    /// is unchanged then.
    pub fn allocate_pod(&mut self, pod: &Pod, affinity: TopologyHint) -> Result<(), PodAllocateError> {
        if pod.qos != QosClass::Guaranteed {
            return Ok(());
        }
        // The kubelet logs a request it cannot read and admits the pod.
        let Ok(total) = pod_level_requests(pod) else {
            return Ok(());
        };
        self.validate_pod_scope(pod)
            .map_err(PodAllocateError::EmptyPodSharedPool)?;
        let mut chosen = affinity;
        if chosen.affinity.is_none() {
            let default = self.default_hint(&pod.uid, &total)?;
            if !default.preferred && chosen.preferred {
                return Err(AllocateError::DefaultNotPreferred.into());
            }
            chosen = default;
        }
        let Some(mut mask) = chosen.affinity else {
            return Err(AllocateError::NoDefaultAffinity.into());
        };
        if !self.machine.covers(mask, &total) {
            let extended = self.extended_hint(&pod.uid, &total, mask)?;
            if !extended.preferred && chosen.preferred {
                return Err(AllocateError::ExtendedNotPreferred.into());
            }
            mask = extended.affinity.unwrap_or(mask);
        }
        if self.machine.violates_group_rule(mask) {
            return Err(AllocateError::ViolatesNumaAllocation.into());
        }
        let blocks_of = |amounts: &Requested| -> Vec<Block> {
            amounts
                .iter()
                .filter(|(_, size)| **size > 0)
                .map(|(resource, &size)| Block {
                    affinity: mask,
                    resource: (*resource).to_owned(),
                    size,
                })
                .collect()
        };
        let left_by = |taken: &Requested| -> Requested {
            total
                .iter()
                .map(|(&name, size)| (name, size.wrapping_sub(taken.get(name).copied().unwrap_or(0))))
                .collect()
        };

        let mut own: BTreeMap<&str, Vec<Block>> = BTreeMap::new();
        let mut sidecars = Requested::new();
        for container in &pod.init_containers {
            let requests = self.container_requests(pod, container).map_err(AllocateError::from)?;
            if requests.is_empty() {
                if !container.restartable {
                    own.insert(&container.name, blocks_of(&left_by(&sidecars)));
                }
                continue;
            }
            own.insert(&container.name, blocks_of(&requests));
            if container.restartable {
                for (name, size) in requests {
                    let sum = sidecars.entry(name).or_insert(0);
                    *sum = sum.wrapping_add(size);
                }
            }
        }
        let mut pool = left_by(&sidecars);
        for container in &pod.containers {
            let requests = self.container_requests(pod, container).map_err(AllocateError::from)?;
            if requests.is_empty() {
                continue;
            }
            for (name, &size) in &requests {
                if size > 0
                    && let Some(left) = pool.get_mut(name)
                {
                    *left = left.wrapping_sub(size);
                }
            }
            own.insert(&container.name, blocks_of(&requests));
        }
        let pod_shared = blocks_of(&pool);

        for (resource, &size) in &total {
            self.machine.reserve(mask, resource, size);
        }
        self.pod_blocks.insert(
            pod.uid.clone(),
            total
                .iter()
                .map(|(resource, &size)| Block {
                    affinity: mask,
                    resource: (*resource).to_owned(),
                    size,
                })
                .collect(),
        );
        for (container, _) in pod.all_containers() {
            let blocks = own.get(container.name.as_str()).unwrap_or(&pod_shared).clone();
            self.set_blocks(&pod.uid, &container.name, blocks);
        }
        Ok(())
    }

    /// `RemoveContainer` for a pod with a pod-level assignment: the
    /// container's entry goes; the pod's memory is released once the last
    /// one is gone.
    pub(super) fn remove_pod_level_container(&mut self, pod_uid: &str, container: &str) {
        let last = match self.blocks.get_mut(pod_uid) {
            Some(containers) => {
                std::sync::Arc::make_mut(containers).remove(container);
                containers.is_empty()
            }
            None => true,
        };
        if !last {
            return;
        }
        self.blocks.remove(pod_uid);
        if let Some(blocks) = self.pod_blocks.remove(pod_uid) {
            for block in &blocks {
                self.machine.release(block);
            }
        }
    }

    /// The pod-level assignments: pod uid → blocks.
    pub fn pod_assignments(&self) -> impl Iterator<Item = (&str, &[Block])> {
        self.pod_blocks
            .iter()
            .map(|(uid, blocks)| (uid.as_str(), blocks.as_slice()))
    }
}
