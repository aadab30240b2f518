//! Restoring the static policy's state after a kubelet restart: the
//! checkpointed shared pool and exclusive assignments are taken as they are,
//! after the kubelet's `validateState` checks (its start-up refusals, with
//! its texts). Reading the checkpoint file is the caller's job
//! (`topoalign-k8s`); this module only judges and installs the content.
//!
//! Must not touch: allocation. `cpusToReuse` starts empty, as it does in a
//! freshly started kubelet.

use std::collections::BTreeMap;

use topoalign_model::{CpuSet, FlatMap};

use super::StaticPolicy;
use crate::restore::CpuRestoreError;

impl StaticPolicy {
    /// The kubelet's `validateState` on restored content, then installs it.
    /// An empty shared pool with no assignments is a fresh state (the
    /// kubelet then initialises the pool to every CPU). Pod-level
    /// assignments (`pod_cpus`) count only with `PodLevelResourceManagers`
    /// on: without it the kubelet does not read them, and their CPUs are
    /// then missing from the state.
    pub(crate) fn restore(
        &mut self,
        shared: CpuSet,
        assignments: BTreeMap<String, BTreeMap<String, CpuSet>>,
        mut pod_cpus: BTreeMap<String, CpuSet>,
    ) -> Result<(), CpuRestoreError> {
        if !self.pod_level_managers {
            pod_cpus.clear();
        }
        let mut all_cpus = self.topology.all_cpus().clone();
        if self.options.strict_cpu_reservation {
            all_cpus = all_cpus.difference(&self.reserved);
        }
        if shared.is_empty() {
            if assignments.values().any(|containers| !containers.is_empty()) || !assignments.is_empty() {
                return Err(CpuRestoreError::EmptyDefaultCpuSet);
            }
            // The kubelet keeps what it read, pod-level entries included.
            self.shared = all_cpus;
            self.assignments.clear();
            self.pod_cpus = pod_cpus;
            self.cpus_to_reuse.clear();
            return Ok(());
        }
        let reserved_in_pool = self.reserved.intersection(&shared);
        if self.options.strict_cpu_reservation {
            if !reserved_in_pool.is_empty() {
                return Err(CpuRestoreError::StrictReservedInPool {
                    reserved: reserved_in_pool,
                    pool: shared,
                });
            }
        } else if reserved_in_pool != self.reserved {
            return Err(CpuRestoreError::ReservedNotInPool {
                reserved: self.reserved.clone(),
                pool: shared,
            });
        }
        // The kubelet walks Go maps here; pods and containers go in name
        // order, so the first overlap reported is the lowest in that order.
        for (pod, containers) in &assignments {
            for (container, cpus) in containers {
                if cpus.intersection_len(&shared) != 0 {
                    return Err(CpuRestoreError::OverlapsPool {
                        pod: pod.clone(),
                        container: container.clone(),
                        cpus: Box::new(cpus.clone()),
                        pool: Box::new(shared),
                    });
                }
            }
        }
        let known = assignments
            .values()
            .flat_map(|containers| containers.values())
            .chain(pod_cpus.values())
            .fold(shared.clone(), |acc, cpus| acc.union(cpus));
        if known != all_cpus {
            return Err(CpuRestoreError::CpusChanged {
                machine: all_cpus,
                state: known,
            });
        }
        self.shared = shared;
        // Each pod's map with room for its containers only: the node keeps
        // one per pod (one or two entries, mostly).
        self.assignments = assignments
            .into_iter()
            .map(|(pod, containers)| {
                let mut exact = FlatMap::with_capacity(containers.len());
                for (container, cpus) in containers {
                    exact.insert(container, cpus);
                }
                (pod, std::sync::Arc::new(exact))
            })
            .collect();
        self.pod_cpus = pod_cpus;
        self.cpus_to_reuse.clear();
        Ok(())
    }

    /// The reserved CPUs.
    pub(crate) fn reserved(&self) -> &CpuSet {
        &self.reserved
    }
}
