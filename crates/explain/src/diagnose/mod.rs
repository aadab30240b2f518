//! A node's kubelet state as `topoalign diagnose` reports it: the
//! observation of `topoalign-observe` — `cpu_manager_state`,
//! `memory_manager_state` (every release's layout, read as the node's
//! kubelet release reads it) and the device manager's
//! `kubelet_internal_checkpoint` decoded and their checksums verified (a
//! mismatch is reported with the kubelet's own error, never ignored),
//! restored into the engine with the kubelet's start-up checks, the
//! PodResources answer compared with them — written for a person: the
//! per-NUMA allocation map (who holds which CPUs, memory and devices
//! where), the disagreements naming the checkpoint file and the API's
//! field, warnings, and for the pods given, the explanation `explain`
//! gives.
//!
//! The rules for finished pods, stale UIDs, devices and double
//! assignments are `topoalign-observe`'s (the follower's and `verify`'s
//! too); this module only words what it observed.
//!
//! Entry point: [`diagnose`], a pure function over the checkpoint files'
//! contents ([`CheckpointFile`]), the API's answer, the started node and
//! its kubelet configuration, and the pods. Reading the files and printing the
//! [`Diagnosis`] are the front end's.

mod numa;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;
use topoalign_engine::Node;
use topoalign_k8s::ManifestPod;
use topoalign_observe::{CheckpointFiles, Comparison, ListedPod, Observer};
use topoalign_podresources::Field;

use crate::{PodReport, admit_all};

pub use numa::{MemoryLine, NumaAllocation};
pub use topoalign_observe::{
    CheckpointFile, CheckpointReport, CheckpointStatus, FileContent, PodResourcesAnswer, Restart,
};

/// What [`diagnose`] works on.
pub struct Inputs<'a> {
    /// The node the kubelet runs, started with its configuration and
    /// empty; the state is restored into it.
    pub node: &'a mut Node,
    /// The node's effective KubeletConfiguration fields (for fixes).
    pub kubelet: &'a Value,
    pub cpu_checkpoint: CheckpointFile,
    pub memory_checkpoint: CheckpointFile,
    /// `device-plugins/kubelet_internal_checkpoint`: who holds which
    /// devices. Absent or unusable, the assignments are read from
    /// `pod_resources` when there is an answer and a pod list, and
    /// inferred otherwise (the notes say which).
    pub device_checkpoint: CheckpointFile,
    /// The kubelet's PodResources `List`, when it was asked.
    pub pod_resources: Option<PodResourcesAnswer>,
    /// The node's pods, naming the state's UIDs (`None`: no pod list;
    /// the UIDs then stand for the pods).
    pub pods: Option<&'a [ManifestPod]>,
    /// Pods to explain on the node as it stands.
    pub explain: &'a [ManifestPod],
}

/// A way the PodResources API's `GetAllocatableResources` differs from
/// what the node's machine and kubelet configuration make allocatable
/// (`topoalign_podresources::allocatable_differences`, the follower's
/// check too).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AllocatableDisagreement {
    /// The answer's field: `cpu_ids`, `memory` or `devices`.
    pub field: &'static str,
    /// What differs, in words.
    pub what: String,
}

impl std::fmt::Display for AllocatableDisagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GetAllocatableResources {}: {} (the machine and kubelet configuration diagnosed are not the kubelet's)",
            self.field, self.what
        )
    }
}

/// A container (or pod) the PodResources API and the checkpoint files
/// report differently.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Disagreement {
    /// `namespace/name`.
    pub pod: String,
    /// Empty when the whole pod is listed by one side only.
    pub container: String,
    /// The API's field: `cpu_ids`, `memory`, `devices`, or
    /// `pod_resources` for a pod listed by one side only.
    pub field: &'static str,
    /// Where the other side comes from: the checkpoint file, or the pod
    /// list for a pod.
    pub file: String,
    /// What the API reports (`-`: nothing).
    pub served: String,
    /// What `file` records.
    pub recorded: String,
}

impl std::fmt::Display for Disagreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.container.is_empty() {
            let (who, other) = if self.served == "-" {
                (self.file.as_str(), "the kubelet's PodResources API does not list it")
            } else {
                ("the kubelet's PodResources API", "the pod list does not have it")
            };
            write!(f, "pod {}: {who} lists it, {other}", self.pod)
        } else {
            write!(
                f,
                "pod {} container {}: PodResources {} is {}, {} records {}",
                self.pod, self.container, self.field, self.served, self.file, self.recorded
            )
        }
    }
}

/// What [`diagnose`] found.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnosis {
    /// `cpu_manager_state`, then `memory_manager_state`.
    pub checkpoints: [CheckpointReport; 2],
    pub restart: Restart,
    /// The shared pool the CPU checkpoint records (empty when there is
    /// none or it is unusable).
    pub default_cpu_set: String,
    /// The allocation map as the checkpoints record it, keyed by
    /// `namespace/name` (or the UID of a pod the pod list does not name):
    /// container → CPUs.
    pub cpu_assignments: BTreeMap<String, BTreeMap<String, String>>,
    /// Container → NUMA nodes of its pinned memory.
    pub memory_assignments: BTreeMap<String, BTreeMap<String, Vec<usize>>>,
    /// Pod-level assignments (`podEntries`, `PodLevelResourceManagers`),
    /// keyed as above: the pod's CPUs.
    pub pod_cpu_assignments: BTreeMap<String, String>,
    /// The NUMA nodes of a pod-level pod's memory.
    pub pod_memory_assignments: BTreeMap<String, Vec<usize>>,
    pub numa: Vec<NumaAllocation>,
    /// UIDs in the state that the pod list does not name.
    pub unknown_uids: Vec<String>,
    /// UIDs whose state the kubelet releases before its next admission
    /// (no active pod has them: not listed, or finished), keyed as above;
    /// the node restored does not hold them.
    pub stale: Vec<String>,
    /// The socket the PodResources API answered on (`None`: not asked).
    pub pod_resources: Option<String>,
    /// Where the PodResources API and the checkpoints disagree.
    pub disagreements: Vec<Disagreement>,
    /// Where the PodResources API's allocatable resources differ from
    /// the node's machine and kubelet configuration (empty when they
    /// agree, or were not asked; then absent from the document).
    pub allocatable_disagreements: Vec<AllocatableDisagreement>,
    pub notes: Vec<String>,
    /// The pods given to explain.
    pub results: Vec<PodReport>,
    /// The devices DRA allocated to each container, as the PodResources
    /// API serves them (`dynamic_resources`; the checkpoints hold none):
    /// containers holding any, in the API's order.
    pub dra_devices: Vec<ContainerDraDevices>,
}

/// The DRA devices one container holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ContainerDraDevices {
    /// `namespace/name`.
    pub pod: String,
    pub container: String,
    pub devices: Vec<DraDevice>,
}

/// One DRA device, and the ResourceClaim it was allocated to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DraDevice {
    /// `namespace/name` of the claim.
    pub claim: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
}

/// Why [`diagnose`] could not answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiagnoseError {
    /// Pods to explain on state the kubelet would not restart with.
    #[error("cannot explain pods on state the kubelet refuses: {0}")]
    CannotExplain(String),
}

/// A pod of a pod list as `topoalign-observe` takes it: its phase says
/// whether it finished, its `metadata.creationTimestamp` where it comes in
/// the kubelet's admission order.
pub fn listed_pod(pod: &ManifestPod) -> ListedPod {
    let text = |pointer: &str| pod.manifest.pointer(pointer).and_then(Value::as_str);
    ListedPod {
        pod: pod.pod.clone(),
        finished: ListedPod::finished_phase(text("/status/phase")),
        created: text("/metadata/creationTimestamp").and_then(|t| t.parse().ok()),
    }
}

/// Observes the checkpoints (`topoalign_observe::observe`), restores them
/// into `inputs.node`, maps who holds what per NUMA node and explains the
/// pods given.
///
/// # Errors
/// [`DiagnoseError::CannotExplain`] when pods are to be explained on state
/// the kubelet refuses.
pub fn diagnose(inputs: Inputs<'_>) -> Result<Diagnosis, DiagnoseError> {
    let node = inputs.node;
    let mut notes = Vec::new();
    let listed = inputs.pods.unwrap_or_default();
    if inputs.pods.is_none() {
        notes.push("no pod list (--pods): pods are named by their UIDs".to_owned());
    }
    let names: BTreeMap<&str, String> = listed.iter().map(|p| (p.pod.uid.as_str(), p.pod.key())).collect();
    let key_of = |uid: &str| names.get(uid).cloned().unwrap_or_else(|| uid.to_owned());

    let files = CheckpointFiles {
        cpu: inputs.cpu_checkpoint,
        memory: inputs.memory_checkpoint,
        devices: inputs.device_checkpoint,
    };
    let listed_pods: Option<Vec<ListedPod>> = inputs.pods.map(|pods| pods.iter().map(listed_pod).collect());
    let observed = Observer::default().observe(
        node,
        topoalign_observe::Inputs {
            files: &files,
            pod_resources: inputs.pod_resources.as_ref(),
            pods: listed_pods.as_deref(),
        },
    );
    let cpu_state = observed.cpu_state.as_ref();
    let memory_state = observed.memory_state.as_ref();

    for shared in &observed.double_assignments {
        notes.push(format!(
            "warning: cpu_manager_state: CPUs {} are assigned to both {}/{} and {}/{}; the kubelet never writes \
             this (only an init container's CPUs are reused, by the containers of its pod that start after it) and \
             does not check it, so both containers run on these \"exclusive\" CPUs",
            shared.cpus,
            key_of(&shared.first.0),
            shared.first.1,
            key_of(&shared.second.0),
            shared.second.1,
        ));
    }
    let mut state_uids: BTreeSet<String> = BTreeSet::new();
    let mut cpu_assignments = BTreeMap::new();
    for (uid, containers) in cpu_state.iter().flat_map(|s| &s.assignments) {
        state_uids.insert(uid.clone());
        let entry: &mut BTreeMap<String, String> = cpu_assignments.entry(key_of(uid)).or_default();
        for (name, cpus) in containers {
            entry.insert(name.clone(), cpus.to_string());
        }
    }
    // The states' NUMA ids are the engine's indices; shown, the machine's.
    let machine = node.machine().clone();
    let label = |id: &usize| machine.numa_label(*id);
    let mut memory_assignments = BTreeMap::new();
    for (uid, containers) in memory_state.iter().flat_map(|s| &s.assignments) {
        for (name, blocks) in containers {
            let nodes: BTreeSet<usize> = blocks.iter().flat_map(|b| b.numa_affinity.iter().map(label)).collect();
            if nodes.is_empty() {
                continue;
            }
            state_uids.insert(uid.clone());
            let entry: &mut BTreeMap<String, Vec<usize>> = memory_assignments.entry(key_of(uid)).or_default();
            entry.insert(name.clone(), nodes.into_iter().collect());
        }
    }
    let mut pod_cpu_assignments = BTreeMap::new();
    for (uid, cpus) in cpu_state.iter().flat_map(|s| &s.pod_assignments) {
        state_uids.insert(uid.clone());
        pod_cpu_assignments.insert(key_of(uid), cpus.to_string());
    }
    let mut pod_memory_assignments = BTreeMap::new();
    for (uid, blocks) in memory_state.iter().flat_map(|s| &s.pod_assignments) {
        let nodes: BTreeSet<usize> = blocks.iter().flat_map(|b| b.numa_affinity.iter().map(label)).collect();
        if !nodes.is_empty() {
            state_uids.insert(uid.clone());
            pod_memory_assignments.insert(key_of(uid), nodes.into_iter().collect());
        }
    }
    let unknown_uids: Vec<String> = state_uids
        .iter()
        .filter(|u| !names.contains_key(u.as_str()))
        .cloned()
        .collect();
    notes.extend(observed.notes.iter().cloned());
    notes.extend(past_masks_warning(node));

    let mut disagreements = Vec::new();
    if let Some(answer) = &inputs.pod_resources {
        match observed.comparison {
            Comparison::Compared => {
                disagreements = observed
                    .differences
                    .iter()
                    .map(|d| Disagreement {
                        file: match d.field {
                            Field::Pod => "the pod list (--pods)".to_owned(),
                            Field::Cpus => observed.cpu.file.clone(),
                            Field::Memory => observed.memory.file.clone(),
                            Field::Devices => observed.device_file.clone(),
                        },
                        field: d.field.wire_name(),
                        pod: d.pod.clone(),
                        container: d.container.clone(),
                        served: d.served.clone(),
                        recorded: d.recorded.clone(),
                    })
                    .collect();
                notes.push(format!(
                    "the kubelet's PodResources API on {} lists {} pod(s); {}",
                    answer.socket,
                    answer.pods.len(),
                    match disagreements.len() {
                        0 => "every container's CPUs, memory and devices agree with the checkpoints".to_owned(),
                        n => format!("{n} disagreement(s) with the checkpoints"),
                    }
                ));
            }
            Comparison::NoPodList if observed.restart == Restart::Starts => notes.push(format!(
                "the kubelet's PodResources API on {} answered, but without a pod list (--pods) its pods cannot be \
                 matched to the checkpoints' UIDs: not cross-checked",
                answer.socket
            )),
            Comparison::NoPodList | Comparison::NotRestored | Comparison::NotAsked => {}
        }
    }
    // What the kubelet serves as allocatable against this machine and
    // configuration: silent when they agree.
    let allocatable_disagreements: Vec<AllocatableDisagreement> = observed
        .allocatable_differences
        .iter()
        .map(|d| AllocatableDisagreement {
            field: d.field.wire_name(),
            what: d.what.clone(),
        })
        .collect();
    let restored = observed.node.is_some();
    if let Some(restored) = observed.node {
        *node = restored;
    }
    let numa = numa::numa_map(node, cpu_state, memory_state, &key_of, restored);
    let default_cpu_set = cpu_state.map(|s| s.default_cpu_set.to_string()).unwrap_or_default();

    let restart = observed.restart;
    let results = match (&restart, inputs.explain) {
        (_, []) => Vec::new(),
        (Restart::Fails { error }, _) => return Err(DiagnoseError::CannotExplain(error.clone())),
        (Restart::Starts, pods) => admit_all(node, inputs.kubelet, pods, true),
    };
    Ok(Diagnosis {
        checkpoints: [observed.cpu, observed.memory],
        restart,
        default_cpu_set,
        cpu_assignments,
        memory_assignments,
        pod_cpu_assignments,
        pod_memory_assignments,
        numa,
        unknown_uids,
        stale: observed.stale.iter().map(|uid| key_of(uid)).collect(),
        pod_resources: inputs.pod_resources.as_ref().map(|a| a.socket.clone()),
        disagreements,
        allocatable_disagreements,
        notes,
        results,
        dra_devices: observed
            .dynamic_devices
            .into_iter()
            .map(|c| ContainerDraDevices {
                pod: format!("{}/{}", c.namespace, c.pod),
                container: c.container,
                devices: c
                    .devices
                    .into_iter()
                    .map(|d| DraDevice {
                        claim: format!("{}/{}", d.claim_namespace, d.claim_name),
                        driver: d.driver,
                        pool: d.pool,
                        device: d.device,
                    })
                    .collect(),
            })
            .collect(),
    })
}

/// The dangerous configuration of a machine with a NUMA id of 64 or more
/// (the kubelet's NUMA masks are 64-bit), as a warning: which topology
/// manager policy crashes the kubelet, and under `none` the Static memory
/// manager on Guaranteed pods.
fn past_masks_warning(node: &Node) -> Option<String> {
    let numa_id = node.machine().numa_id_past_masks()?;
    let config = node.config();
    let policy = config.topology_policy;
    let memory = if config.memory_policy == topoalign_engine::MemoryPolicyName::Static {
        "; and with memoryManagerPolicy Static it crashes admitting any Guaranteed pod whose memory the Static \
         memory manager pins (its default hint builds masks of every NUMA node)"
    } else {
        ""
    };
    Some(if policy == topoalign_engine::TopologyPolicyName::None {
        format!(
            "warning: NUMA node id {numa_id} does not fit the kubelet's 64-bit NUMA masks: it runs with \
             topologyManagerPolicy none only; any other policy crashes it at every admission and at a restart with \
             pods{memory}"
        )
    } else {
        format!(
            "warning: NUMA node id {numa_id} does not fit the kubelet's 64-bit NUMA masks: topologyManagerPolicy {} \
             crashes this kubelet at every admission and at a restart with pods; only policy none runs on this \
             machine",
            policy.as_str()
        )
    })
}

/// The JSON document (`topoalign diagnose -o json`): the checkpoint and
/// restart reports as flat records (`present`, `ok`, `problem`,
/// `kubeletError`, …), the map, the notes and the explained pods.
impl Serialize for Diagnosis {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Document<'a> {
            checkpoints: Vec<CheckpointRecord<'a>>,
            restart: RestartRecord<'a>,
            default_cpu_set: &'a str,
            cpu_assignments: &'a BTreeMap<String, BTreeMap<String, String>>,
            memory_assignments: &'a BTreeMap<String, BTreeMap<String, Vec<usize>>>,
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            pod_cpu_assignments: &'a BTreeMap<String, String>,
            #[serde(skip_serializing_if = "BTreeMap::is_empty")]
            pod_memory_assignments: &'a BTreeMap<String, Vec<usize>>,
            numa: &'a [NumaAllocation],
            unknown_uids: &'a [String],
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            stale: &'a [String],
            #[serde(skip_serializing_if = "Option::is_none")]
            pod_resources: Option<&'a str>,
            disagreements: &'a [Disagreement],
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            allocatable_disagreements: &'a [AllocatableDisagreement],
            notes: &'a [String],
            results: &'a [PodReport],
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            dra_devices: &'a [ContainerDraDevices],
        }
        #[derive(Serialize)]
        struct RestartRecord<'a> {
            ok: bool,
            #[serde(skip_serializing_if = "Option::is_none")]
            error: Option<&'a str>,
        }
        let restart = match &self.restart {
            Restart::Starts => RestartRecord { ok: true, error: None },
            Restart::Fails { error } => RestartRecord {
                ok: false,
                error: Some(error),
            },
        };
        Document {
            checkpoints: self.checkpoints.iter().map(CheckpointRecord::of).collect(),
            restart,
            default_cpu_set: &self.default_cpu_set,
            cpu_assignments: &self.cpu_assignments,
            memory_assignments: &self.memory_assignments,
            pod_cpu_assignments: &self.pod_cpu_assignments,
            pod_memory_assignments: &self.pod_memory_assignments,
            numa: &self.numa,
            unknown_uids: &self.unknown_uids,
            stale: &self.stale,
            pod_resources: self.pod_resources.as_deref(),
            disagreements: &self.disagreements,
            allocatable_disagreements: &self.allocatable_disagreements,
            notes: &self.notes,
            results: &self.results,
            dra_devices: &self.dra_devices,
        }
        .serialize(serializer)
    }
}

/// A [`CheckpointReport`] as one flat JSON record.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CheckpointRecord<'a> {
    file: &'a str,
    present: bool,
    /// Whether the kubelet can restore from it.
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    policy: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stored_checksum: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    computed_checksum: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kubelet_error: Option<&'a str>,
}

impl<'a> CheckpointRecord<'a> {
    fn of(report: &'a CheckpointReport) -> Self {
        let status = &report.status;
        let (policy, stored, computed) = match status {
            CheckpointStatus::Verified {
                policy,
                stored,
                computed,
            }
            | CheckpointStatus::Refused {
                policy,
                stored,
                computed,
                ..
            } => (Some(policy.as_str()), Some(*stored), Some(*computed)),
            CheckpointStatus::Corrupt { stored, computed, .. } => (None, Some(*stored), Some(*computed)),
            CheckpointStatus::Absent | CheckpointStatus::Unreadable { .. } | CheckpointStatus::Undecodable { .. } => {
                (None, None, None)
            }
        };
        CheckpointRecord {
            file: &report.file,
            present: !matches!(status, CheckpointStatus::Absent),
            ok: status.usable(),
            policy,
            stored_checksum: stored,
            computed_checksum: computed,
            problem: status.problem(),
            kubelet_error: status.kubelet_error(),
        }
    }
}
