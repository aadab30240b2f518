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
}

impl Workload {
    /// Mixes the order of the pods (and so of their adds) with `seed`.
    /// Only for workloads without deletions (files); a generated workload
    /// has its own order.
    pub fn shuffle(&mut self, seed: u64) {
        if self.events.iter().any(|e| matches!(e, Event::Delete(_))) {
            return;
        }
        Rng::new(seed).shuffle(&mut self.pods);
        self.assign_uids();
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
