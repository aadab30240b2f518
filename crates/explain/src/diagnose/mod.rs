//! A node's kubelet state, read the way the kubelet reads it:
//! `cpu_manager_state`, `memory_manager_state` (every release's layout)
//! and the device manager's `kubelet_internal_checkpoint` decoded and their
//! checksums verified (a mismatch is reported with the kubelet's own error,
//! never ignored), restored into the engine with the kubelet's start-up
//! checks; then the per-NUMA allocation map (who holds which CPUs, memory
//! and devices where) and, for the pods given, the explanation `explain`
//! gives.
//!
//! When the kubelet's PodResources API answered ([`PodResourcesAnswer`]),
//! its answer is read too: the device assignments come from it when the
//! device manager's checkpoint cannot be read (rather than being
//! inferred), and otherwise it is cross-checked against the checkpoints —
//! every container whose exclusive CPUs, pinned memory or devices the two
//! report differently is a [`Disagreement`] naming the checkpoint file and
//! the API's field.
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
use topoalign_engine::{CpuManagerState, MemoryManagerState, Node, NodeSnapshot};
use topoalign_k8s::ManifestPod;
use topoalign_k8s::checkpoint::{CheckpointError, CheckpointKind, CpuCheckpoint, DeviceCheckpoint, MemoryCheckpoint};
use topoalign_model::{Container, Pod, QosClass, Quantity, QuantityFormat, ResourceList};
use topoalign_podresources::{
    Allocatable, Field, PodAllocation, allocatable_differences, allocatable_of, differences, pod_allocations,
};

use crate::{PodReport, admit_all};

pub use numa::{MemoryLine, NumaAllocation};

/// One checkpoint file as the front end found it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointFile {
    /// The path as the kubelet would name it in its errors.
    pub path: String,
    pub content: FileContent,
}

/// What a checkpoint file holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileContent {
    /// There is no such file.
    Absent,
    /// The file exists but cannot be read; the I/O error.
    Unreadable(String),
    /// The file's bytes.
    Bytes(Vec<u8>),
}

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

/// What the kubelet's PodResources API answered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodResourcesAnswer {
    /// The socket it answered on.
    pub socket: String,
    /// `List`'s pods.
    pub pods: Vec<PodAllocation>,
    /// `GetAllocatableResources`' answer, when it was asked.
    pub allocatable: Option<Allocatable>,
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

/// What one checkpoint file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckpointStatus {
    /// No file: a kubelet starting now begins with empty state.
    Absent,
    /// The file exists but cannot be read.
    Unreadable { error: String },
    /// Decoded, checksum verified, restorable. `stored` is 0 when the
    /// file records no checksum (an old CPU checkpoint; the kubelet then
    /// skips the check), and `computed` is the content's.
    Verified { policy: String, stored: u64, computed: u64 },
    /// The checksum does not match the content: changed after the kubelet
    /// wrote it.
    Corrupt {
        stored: u64,
        computed: u64,
        kubelet_error: String,
    },
    /// Not a checkpoint the kubelet can decode (cut short, not JSON, a
    /// wrong type).
    Undecodable { problem: String, kubelet_error: String },
    /// Decoded and verified, but the kubelet refuses to restore it (another
    /// policy, CPUs or NUMA nodes this machine does not have).
    Refused {
        policy: String,
        stored: u64,
        computed: u64,
        problem: String,
        kubelet_error: String,
    },
}

impl CheckpointStatus {
    /// Whether a kubelet starting now can go on with this file (absent or
    /// verified).
    pub fn usable(&self) -> bool {
        matches!(self, CheckpointStatus::Absent | CheckpointStatus::Verified { .. })
    }

    /// What a restarting kubelet says about the file, if it refuses it.
    pub fn kubelet_error(&self) -> Option<&str> {
        match self {
            CheckpointStatus::Corrupt { kubelet_error, .. }
            | CheckpointStatus::Undecodable { kubelet_error, .. }
            | CheckpointStatus::Refused { kubelet_error, .. } => Some(kubelet_error),
            CheckpointStatus::Absent | CheckpointStatus::Unreadable { .. } | CheckpointStatus::Verified { .. } => None,
        }
    }

    /// What is wrong (or, for an absent file, what that means), in words.
    pub fn problem(&self) -> Option<String> {
        match self {
            CheckpointStatus::Absent => Some("absent: a kubelet starting now begins with empty state".to_owned()),
            CheckpointStatus::Unreadable { error } => Some(format!("cannot be read: {error}")),
            CheckpointStatus::Verified { .. } => None,
            CheckpointStatus::Corrupt { stored, computed, .. } => Some(format!(
                "checksum mismatch: the file records {stored}, its content hashes to {computed} — it was changed \
                 after the kubelet wrote it"
            )),
            CheckpointStatus::Undecodable { problem, .. } | CheckpointStatus::Refused { problem, .. } => {
                Some(problem.clone())
            }
        }
    }
}

/// One checkpoint file and what it says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointReport {
    pub file: String,
    pub status: CheckpointStatus,
}

/// Whether a kubelet restarting with this state on this machine and
/// configuration would start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Restart {
    Starts,
    /// It would not; its first error.
    Fails {
        error: String,
    },
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
}

/// Why [`diagnose`] could not answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiagnoseError {
    /// Pods to explain on state the kubelet would not restart with.
    #[error("cannot explain pods on state the kubelet refuses: {0}")]
    CannotExplain(String),
}

/// Reads the checkpoints, checks them the kubelet's way, restores them into
/// `inputs.node`, maps who holds what per NUMA node and explains the pods
/// given.
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

    let config = node.config().clone();
    let cpu_policy = config.cpu_policy.as_str();
    let memory_policy = config.memory_policy.as_str();
    let (cpu_report, cpu_state) = checkpoint(
        &inputs.cpu_checkpoint,
        CheckpointKind::Cpu,
        CpuCheckpoint::parse,
        |c| (c.policy_name.clone(), c.checksum, u64::from(c.computed_checksum())),
        |c| c.to_state(cpu_policy),
    );
    let (memory_report, memory_state) = checkpoint(
        &inputs.memory_checkpoint,
        CheckpointKind::Memory,
        MemoryCheckpoint::parse,
        |c| (c.policy_name.clone(), c.checksum, u64::from(c.computed_checksum())),
        |c| c.to_state(memory_policy),
    );
    let mut errors: Vec<String> = [&cpu_report, &memory_report]
        .iter()
        .filter_map(|r| match &r.status {
            CheckpointStatus::Unreadable { error } => Some(format!("{}: cannot be read: {error}", r.file)),
            other => other.kubelet_error().map(str::to_owned),
        })
        .collect();

    let mut state_uids: BTreeSet<String> = BTreeSet::new();
    let mut cpu_assignments = BTreeMap::new();
    for shared in cpu_state.iter().flat_map(|state| state.shared_cpus()) {
        notes.push(format!(
            "warning: cpu_manager_state: CPUs {} are assigned to both {}/{} and {}/{}; the kubelet does not check \
             this, so both containers run on these \"exclusive\" CPUs",
            shared.cpus,
            key_of(&shared.first.0),
            shared.first.1,
            key_of(&shared.second.0),
            shared.second.1,
        ));
    }
    for (uid, containers) in cpu_state.iter().flat_map(|s| &s.assignments) {
        state_uids.insert(uid.clone());
        let entry: &mut BTreeMap<String, String> = cpu_assignments.entry(key_of(uid)).or_default();
        for (name, cpus) in containers {
            entry.insert(name.clone(), cpus.to_string());
        }
    }
    let mut memory_assignments = BTreeMap::new();
    for (uid, containers) in memory_state.iter().flat_map(|s| &s.assignments) {
        for (name, blocks) in containers {
            let nodes: BTreeSet<usize> = blocks.iter().flat_map(|b| b.numa_affinity.iter().copied()).collect();
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
        let nodes: BTreeSet<usize> = blocks.iter().flat_map(|b| b.numa_affinity.iter().copied()).collect();
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
    if !listed.is_empty() && !unknown_uids.is_empty() {
        notes.push(format!(
            "{} UID(s) in the state belong to no listed pod: stale entries the kubelet removes at its next admission",
            unknown_uids.len()
        ));
    }

    // Restore into the engine: the kubelet's start-up checks, then the
    // node as it stands for explanations.
    let mut pods: Vec<Pod> = listed.iter().map(|p| p.pod.clone()).collect();
    if listed.is_empty() {
        let empty = CpuManagerState::default();
        pods.extend(
            unknown_uids
                .iter()
                .map(|uid| stand_in(uid, cpu_state.as_ref().unwrap_or(&empty), memory_state.as_ref())),
        );
    }
    let usable = errors.is_empty();
    if usable {
        let has_devices = node.machine().devices().values().any(|d| !d.is_empty());
        let file = &inputs.device_checkpoint;
        // The kubelet goes on without a device record it cannot read
        // ("Continue after failing to read checkpoint file"): so does the
        // diagnosis, inferring the assignments and saying why.
        let from_checkpoint = match &file.content {
            FileContent::Bytes(bytes) => match DeviceCheckpoint::parse(bytes) {
                Ok(checkpoint) => Ok(checkpoint.assignments()),
                Err(error) => Err(format!("{}: {error}", file.path)),
            },
            FileContent::Absent => Err(format!("there is no {}", file.path)),
            FileContent::Unreadable(error) => Err(format!("{}: cannot be read: {error}", file.path)),
        };
        // Without a usable checkpoint, the kubelet's own answer names the
        // devices (its pods matched to UIDs through the pod list).
        let (recorded, device_source) = match (from_checkpoint, &inputs.pod_resources) {
            (Ok(assignments), _) => (Ok(assignments), file.path.clone()),
            (Err(why), Some(answer)) if !listed.is_empty() => {
                notes.push(format!(
                    "device assignments read from the kubelet's PodResources API on {} ({why})",
                    answer.socket
                ));
                (Ok(served_devices(&answer.pods, &names)), answer.socket.clone())
            }
            (Err(why), _) => (Err(why), String::new()),
        };
        let snapshot = NodeSnapshot {
            pods,
            cpu: cpu_state.clone().unwrap_or_default(),
            memory: memory_state.clone(),
            devices: recorded.clone().unwrap_or_default(),
        };
        if let Err(error) = node.restore(snapshot) {
            errors.push(error.to_string());
        } else if let Err(why) = recorded {
            let device_notes = node.infer_device_assignments();
            if has_devices {
                notes.push(format!(
                    "device assignments are inferred from the pods' requests and NUMA placement, not read from \
                     the device manager's checkpoint ({why})"
                ));
            }
            notes.extend(device_notes);
        } else if has_devices && device_source == file.path {
            notes.push(format!("device assignments read from {}", file.path));
        }
    }
    let mut disagreements = Vec::new();
    if let Some(answer) = &inputs.pod_resources {
        if errors.is_empty() && inputs.pods.is_some() {
            disagreements = cross_check(
                node,
                answer,
                listed,
                &inputs.device_checkpoint.path,
                &cpu_report,
                &memory_report,
            );
            notes.push(format!(
                "the kubelet's PodResources API on {} lists {} pod(s); {}",
                answer.socket,
                answer.pods.len(),
                match disagreements.len() {
                    0 => "every container's CPUs, memory and devices agree with the checkpoints".to_owned(),
                    n => format!("{n} disagreement(s) with the checkpoints"),
                }
            ));
        } else if errors.is_empty() {
            notes.push(format!(
                "the kubelet's PodResources API on {} answered, but without a pod list (--pods) its pods cannot be \
                 matched to the checkpoints' UIDs: not cross-checked",
                answer.socket
            ));
        }
    }
    // What the kubelet serves as allocatable against this machine and
    // configuration: silent when they agree.
    let allocatable_disagreements: Vec<AllocatableDisagreement> = inputs
        .pod_resources
        .as_ref()
        .and_then(|answer| answer.allocatable.as_ref())
        .map(|served| {
            allocatable_differences(served, &allocatable_of(node))
                .into_iter()
                .map(|d| AllocatableDisagreement {
                    field: d.field.wire_name(),
                    what: d.what,
                })
                .collect()
        })
        .unwrap_or_default();
    let restart = match errors.first() {
        None => Restart::Starts,
        Some(error) => Restart::Fails { error: error.clone() },
    };
    let numa = numa::numa_map(
        node,
        cpu_state.as_ref(),
        memory_state.as_ref(),
        &key_of,
        usable && restart == Restart::Starts,
    );
    let default_cpu_set = cpu_state
        .as_ref()
        .map(|s| s.default_cpu_set.to_string())
        .unwrap_or_default();

    let results = match (&restart, inputs.explain) {
        (_, []) => Vec::new(),
        (Restart::Fails { error }, _) => return Err(DiagnoseError::CannotExplain(error.clone())),
        (Restart::Starts, pods) => admit_all(node, inputs.kubelet, pods, true),
    };
    Ok(Diagnosis {
        checkpoints: [cpu_report, memory_report],
        restart,
        default_cpu_set,
        cpu_assignments,
        memory_assignments,
        pod_cpu_assignments,
        pod_memory_assignments,
        numa,
        unknown_uids,
        pod_resources: inputs.pod_resources.as_ref().map(|a| a.socket.clone()),
        disagreements,
        allocatable_disagreements,
        notes,
        results,
    })
}

/// The device assignments in a PodResources answer, keyed by the UIDs the
/// pod list gives its pods (a pod the list lacks is left out: the
/// cross-check reports it).
fn served_devices(pods: &[PodAllocation], names: &BTreeMap<&str, String>) -> topoalign_engine::DeviceAssignments {
    let uids: BTreeMap<&str, &str> = names.iter().map(|(uid, key)| (key.as_str(), *uid)).collect();
    let mut assignments = topoalign_engine::DeviceAssignments::new();
    for pod in pods {
        let Some(uid) = uids.get(format!("{}/{}", pod.namespace, pod.name).as_str()) else {
            continue;
        };
        for container in &pod.containers {
            for (resource, groups) in &container.devices {
                let mut ids: Vec<String> = groups.iter().flat_map(|g| g.ids.iter().cloned()).collect();
                ids.sort();
                ids.dedup();
                if ids.is_empty() {
                    continue;
                }
                assignments
                    .entry((*uid).to_owned())
                    .or_default()
                    .entry(container.name.clone())
                    .or_default()
                    .insert(resource.clone(), ids);
            }
        }
    }
    assignments
}

/// The PodResources answer against the one the restored node gives (its
/// checkpoints as the kubelet must report them), leaving out the listed
/// pods that have finished (the kubelet lists active pods only).
fn cross_check(
    node: &Node,
    answer: &PodResourcesAnswer,
    listed: &[ManifestPod],
    device_file: &str,
    cpu: &CheckpointReport,
    memory: &CheckpointReport,
) -> Vec<Disagreement> {
    let finished: BTreeSet<&str> = listed
        .iter()
        .filter(|p| {
            matches!(
                p.manifest.pointer("/status/phase").and_then(Value::as_str),
                Some("Succeeded" | "Failed")
            )
        })
        .map(|p| p.pod.uid.as_str())
        .collect();
    let mut snapshot = node.snapshot();
    snapshot.pods.retain(|p| !finished.contains(p.uid.as_str()));
    let recorded = pod_allocations(&snapshot, node.machine());
    differences(&answer.pods, &recorded)
        .into_iter()
        .map(|d| Disagreement {
            file: match d.field {
                Field::Pod => "the pod list (--pods)".to_owned(),
                Field::Cpus => cpu.file.clone(),
                Field::Memory => memory.file.clone(),
                Field::Devices => device_file.to_owned(),
            },
            field: d.field.wire_name(),
            pod: d.pod,
            container: d.container,
            served: d.served,
            recorded: d.recorded,
        })
        .collect()
}

/// One checkpoint file decoded, verified and restored to the state the
/// kubelet's `restoreState` takes, or what is wrong with it.
fn checkpoint<C, S>(
    file: &CheckpointFile,
    kind: CheckpointKind,
    parse: impl Fn(&[u8]) -> Result<C, CheckpointError>,
    describe: impl Fn(&C) -> (String, u64, u64),
    to_state: impl FnOnce(&C) -> Result<S, CheckpointError>,
) -> (CheckpointReport, Option<S>) {
    let report = |status| CheckpointReport {
        file: file.path.clone(),
        status,
    };
    let bytes = match &file.content {
        FileContent::Absent => return (report(CheckpointStatus::Absent), None),
        FileContent::Unreadable(error) => {
            return (report(CheckpointStatus::Unreadable { error: error.clone() }), None);
        }
        FileContent::Bytes(bytes) => bytes,
    };
    let checkpoint = match parse(bytes) {
        Ok(checkpoint) => checkpoint,
        Err(error) => {
            let kubelet_error = error.kubelet_start_text(kind, &file.path);
            let status = match error {
                CheckpointError::Corrupt { stored, computed } => CheckpointStatus::Corrupt {
                    stored,
                    computed,
                    kubelet_error,
                },
                CheckpointError::Decode(text) if text == "unexpected end of JSON input" => {
                    CheckpointStatus::Undecodable {
                        problem: format!("cut short ({} bytes): {text}", bytes.len()),
                        kubelet_error,
                    }
                }
                other => CheckpointStatus::Undecodable {
                    problem: other.to_string(),
                    kubelet_error,
                },
            };
            return (report(status), None);
        }
    };
    let (policy, stored, computed) = describe(&checkpoint);
    match to_state(&checkpoint) {
        Ok(state) => (
            report(CheckpointStatus::Verified {
                policy,
                stored,
                computed,
            }),
            Some(state),
        ),
        Err(error) => (
            report(CheckpointStatus::Refused {
                policy,
                stored,
                computed,
                problem: error.to_string(),
                kubelet_error: error.kubelet_start_text(kind, &file.path),
            }),
            None,
        ),
    }
}

/// A stand-in for a pod the pod list does not name, sized from what the
/// state says it holds, so that it keeps its resources.
fn stand_in(uid: &str, cpu: &CpuManagerState, memory: Option<&MemoryManagerState>) -> Pod {
    let mut containers: BTreeMap<String, ResourceList> = BTreeMap::new();
    for (name, cpus) in cpu.assignments.get(uid).into_iter().flatten() {
        let units = i128::try_from(cpus.len()).unwrap_or(i128::MAX);
        containers
            .entry(name.clone())
            .or_default()
            .insert("cpu".into(), Quantity::from_units(units));
    }
    for (name, blocks) in memory.and_then(|m| m.assignments.get(uid)).into_iter().flatten() {
        for block in blocks {
            let amount = Quantity::from_units(i128::from(block.size)).with_format(QuantityFormat::BinarySI);
            *containers
                .entry(name.clone())
                .or_default()
                .entry(block.resource.clone())
                .or_default() += amount;
        }
    }
    Pod {
        namespace: "unknown".into(),
        name: uid.to_owned(),
        uid: uid.to_owned(),
        qos: QosClass::Guaranteed,
        init_containers: Vec::new(),
        containers: containers
            .into_iter()
            .map(|(name, requests)| Container {
                name,
                limits: requests.clone(),
                requests,
                restartable: false,
            })
            .collect(),
        overhead: ResourceList::new(),
        pod_resources: None,
    }
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
            #[serde(skip_serializing_if = "Option::is_none")]
            pod_resources: Option<&'a str>,
            disagreements: &'a [Disagreement],
            #[serde(skip_serializing_if = "<[_]>::is_empty")]
            allocatable_disagreements: &'a [AllocatableDisagreement],
            notes: &'a [String],
            results: &'a [PodReport],
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
            pod_resources: self.pod_resources.as_deref(),
            disagreements: &self.disagreements,
            allocatable_disagreements: &self.allocatable_disagreements,
            notes: &self.notes,
            results: &self.results,
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
