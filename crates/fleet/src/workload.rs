//! The workload: the pods to place and the order they come and go in, as
//! read from a file ([`crate::read`]) or made by [`crate::generator`].
//!
//! Pods are placed in file order; [`Workload::shuffle`] mixes them with a
//! seed. Every pod gets the uid `sim-<index>` (its position in placement
//! order, zero-padded), so uids grow with placement order on every node.
//!
//! Owns: the workload's pods and events. Must not touch text (reading is
//! [`crate::read`]'s) or placement.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodResourceClaim;
use topoalign_model::Pod;

use crate::rng::Rng;

/// One workload event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Place pod `i` of [`Workload::pods`].
    Add(u32),
    /// Delete pod `i` (if it was placed and admitted).
    Delete(u32),
}

/// Pods and the order they come and go in.
#[derive(Clone, Debug, Default)]
pub struct Workload {
    pub pods: Vec<Pod>,
    pub events: Vec<Event>,
    /// Documents of kinds that are not workloads (Services, ConfigMaps, …),
    /// counted by kind, skipped.
    pub skipped: BTreeMap<String, usize>,
    /// Per pod (same order as [`Workload::pods`]; missing entries: none),
    /// its `spec.resourceClaims`: the DRA claims it takes, which the
    /// kubelet's model of the pod does not carry.
    pub resource_claims: Vec<Vec<PodResourceClaim>>,
}

/// A workload that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    /// Kubernetes documents the shared reader refuses (it names the
    /// document and field).
    #[error(transparent)]
    Manifest(#[from] topoalign_k8s::ManifestError),
    /// A generator document that cannot be used: `generator.<field>: ...`.
    #[error("{0}")]
    Generator(String),
    /// A pod's `spec.resourceClaims` that cannot be read: `<origin>:
    /// spec.resourceClaims[0].name: ...`.
    #[error("{0}")]
    Claims(String),
}

impl Workload {
    /// Mixes the order of the pods (and so of their adds) with `seed`.
    /// Only for workloads without deletions (files); a generated workload
    /// has its own order.
    pub fn shuffle(&mut self, seed: u64) {
        if self.events.iter().any(|e| matches!(e, Event::Delete(_))) {
            return;
        }
        // The permutation depends only on the length: pods and their claims
        // move together.
        let claims = std::mem::take(&mut self.resource_claims);
        let mut paired: Vec<(Pod, Vec<PodResourceClaim>)> = std::mem::take(&mut self.pods)
            .into_iter()
            .enumerate()
            .map(|(i, pod)| (pod, claims.get(i).cloned().unwrap_or_default()))
            .collect();
        Rng::new(seed).shuffle(&mut paired);
        let has_claims = paired.iter().any(|(_, c)| !c.is_empty());
        for (pod, claims) in paired {
            self.pods.push(pod);
            if has_claims {
                self.resource_claims.push(claims);
            }
        }
        self.assign_uids();
    }

    /// The DRA claims pod `i` takes (`spec.resourceClaims`).
    pub fn claims_of(&self, i: usize) -> &[PodResourceClaim] {
        self.resource_claims.get(i).map_or(&[], Vec::as_slice)
    }

    /// Number of pod adds.
    pub fn adds(&self) -> usize {
        self.events.iter().filter(|e| matches!(e, Event::Add(_))).count()
    }

    /// `sim-<index>` in placement order.
    pub(crate) fn assign_uids(&mut self) {
        for (i, pod) in self.pods.iter_mut().enumerate() {
            pod.uid = format!("sim-{i:08}");
        }
    }
}

pub(crate) fn index_u32(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}
