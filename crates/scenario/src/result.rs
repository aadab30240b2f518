//! The result document of a replay (docs/scenario.md, "Result document").

use std::collections::BTreeMap;

use serde::Serialize;
use topoalign_engine::ContainerPlacement;

/// What `topoalign replay` prints for a scenario the kubelet would run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResultDocument {
    pub results: Vec<EventResult>,
    #[serde(rename = "final")]
    pub final_state: FinalState,
    /// What the scheduler's DRA allocator gave the pods with claims, and
    /// whether those devices share the NUMA nodes the kubelet pinned the
    /// pods' CPUs and memory to; absent without a `dra:` block. Beside the
    /// kubelet's answer, not part of it (the kubelet's oracle has none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dra: Vec<crate::dra::DraEventResult>,
    /// What the kubelet starts with although its answers are dangerous
    /// (`topoalign_engine::StartHazard`), worded for a person. Not part of
    /// the document: the document is the kubelet's answer, compared with
    /// the oracle's; front ends print these beside it.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// The outcome of one event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EventResult {
    pub event: usize,
    /// `namespace/name`; empty (and absent from the JSON) for a `restart`.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub pod: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admitted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<bool>,
    /// A `resize` event: whether the new sizes are the pod's allocation now.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resized: Option<bool>,
    /// A `restart` event: whether the new kubelet process started (when
    /// not, `message` is its error and no later event was played).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restarted: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<ContainerPlacement>>,
    /// A `restart` that started: the pods running before it, admitted
    /// again in admission order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pods: Option<Vec<Readmission>>,
    /// A `resize` or `delete` event (1.34+): the other pods whose pending
    /// resize the kubelet's retry after this event accepted, in its order;
    /// absent when none was.
    #[serde(rename = "acceptedPending", skip_serializing_if = "Vec::is_empty")]
    pub accepted_pending: Vec<String>,
}

/// One pod admitted again after a restart: as an `add`'s result, without
/// the event number.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Readmission {
    /// `namespace/name`.
    pub pod: String,
    pub admitted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<ContainerPlacement>>,
}

/// The node state after the last event.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FinalState {
    pub default_cpu_set: String,
    pub cpu_assignments: BTreeMap<String, BTreeMap<String, String>>,
    pub memory_assignments: BTreeMap<String, BTreeMap<String, Vec<usize>>>,
    /// Pod-level CPU assignments (`PodLevelResourceManagers`, 1.36+);
    /// absent when no pod has one, as the kubelet oracle writes it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_cpu_assignments: BTreeMap<String, String>,
    /// Pod-level memory assignments (NUMA nodes), likewise.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_memory_assignments: BTreeMap<String, Vec<usize>>,
}
