//! The static policy for a pod managed at the pod level
//! (`PodLevelResourceManagers`, 1.36+, with pod-level resources): the
//! pod's CPUs ("bubble") taken from the shared pool as one allocation,
//! then divided among its containers — exclusive CPUs for the containers
//! that are Guaranteed by themselves, the rest of the bubble (the pod's own
//! shared pool) for the others.
//!
//! Owns: the pod's CPU count, the empty-pod-shared-pool check and
//! `AllocatePod`. Must not touch: hints (the parent reads the pod's count
//! and the check) nor release (the parent returns the bubble whole).

use std::collections::BTreeMap;

use topoalign_model::{CpuSet, NumaMask, Pod, QosClass};

use super::StaticPolicy;
use crate::CpuAllocateError;
use crate::assignment::take_by_topology;

/// `podGuaranteedCPUs` for a pod managed at the pod level: its pod-level
/// CPU request when the pod is Guaranteed and the request is whole, else 0.
pub(super) fn pod_cpus(pod: &Pod) -> i64 {
    if pod.qos != QosClass::Guaranteed {
        return 0;
    }
    let Some(cpu) = pod.pod_resources.as_ref().and_then(|r| r.requests.get("cpu")) else {
        return 0;
    };
    if !cpu.is_whole() {
        return 0;
    }
    i64::try_from(cpu.value()).unwrap_or(i64::MAX)
}

impl StaticPolicy {
    /// `validatePodScopeResources`: containers that share the pod's CPUs
    /// need some left once the exclusive ones have theirs. The error is the
    /// kubelet's text.
    pub(super) fn validate_pod_scope(&self, pod: &Pod) -> Result<(), &'static str> {
        let budget = self.pod_guaranteed(pod);
        let mut shared_long_running = false;
        let mut exclusive_long_running = 0;
        for container in &pod.init_containers {
            let cpus = self.guaranteed(pod, container);
            if !container.restartable {
                if cpus == 0 && exclusive_long_running >= budget {
                    return Err("pod rejected, pod has shared init containers but no cpus available for them");
                }
            } else if cpus == 0 {
                shared_long_running = true;
            } else {
                exclusive_long_running += cpus;
            }
        }
        for container in &pod.containers {
            match self.guaranteed(pod, container) {
                0 => shared_long_running = true,
                cpus => exclusive_long_running += cpus,
            }
        }
        if shared_long_running && exclusive_long_running >= budget {
            return Err(
                "pod rejected, sum of exclusive container cpu requests equals pod budget, leaving no cpus for shared containers",
            );
        }
        Ok(())
    }

    /// `AllocatePod`: the bubble, preferring `affinity`'s NUMA nodes, then
    /// its division. Init containers reuse the bubble (minus the sidecars
    /// started before them); app containers take from what the sidecars
    /// leave, and the containers without CPUs of their own share the rest.
    pub(crate) fn allocate_pod(&mut self, pod: &Pod, affinity: Option<NumaMask>) -> Result<(), CpuAllocateError> {
        let total = self.pod_guaranteed(pod);
        if total == 0 {
            return Ok(());
        }
        self.validate_pod_scope(pod)
            .map_err(|e| CpuAllocateError::EmptyPodSharedPool(e.to_owned()))?;
        if self.options.full_pcpus_only {
            self.check_smt_alignment(total)
                .map_err(|e| CpuAllocateError::SmtAlignment(e.to_string()))?;
        }
        let bubble = self
            .allocate_cpus(total, affinity, &CpuSet::new())
            .map_err(|e| CpuAllocateError::Other(e.to_string()))?;
        self.pod_cpus.insert(pod.uid.clone(), bubble.clone());

        let take = |policy: &StaticPolicy, from: &CpuSet, count: i64| {
            take_by_topology(&policy.topology, &policy.options, from, count)
                .map_err(|e| CpuAllocateError::Other(e.to_string()))
        };
        let mut own: BTreeMap<&str, CpuSet> = BTreeMap::new();
        let mut sidecars = CpuSet::new();
        for container in &pod.init_containers {
            let runnable = bubble.difference(&sidecars);
            match self.guaranteed(pod, container) {
                0 if container.restartable => {}
                0 => {
                    own.insert(&container.name, runnable);
                }
                count => {
                    let cpus = take(self, &runnable, count)?;
                    if container.restartable {
                        sidecars = sidecars.union(&cpus);
                    }
                    own.insert(&container.name, cpus);
                }
            }
        }
        let mut pod_shared = bubble.difference(&sidecars);
        for container in &pod.containers {
            let count = self.guaranteed(pod, container);
            if count > 0 {
                let cpus = take(self, &pod_shared, count)?;
                pod_shared = pod_shared.difference(&cpus);
                own.insert(&container.name, cpus);
            }
        }
        let entry = self.assignments.entry(pod.uid.clone()).or_default();
        for (container, _) in pod.all_containers() {
            let cpus = own.get(container.name.as_str()).unwrap_or(&pod_shared).clone();
            entry.insert(container.name.clone(), cpus);
        }
        Ok(())
    }
}
