//! [`rebuild`]: one [`Observation`] of a kubelet's sources turned into the
//! node the kubelet holds by `topoalign_observe` — the one reading
//! `diagnose` makes too — and published only when every source agrees;
//! otherwise [`Unknown`] with the reason. Pure: no I/O, no clock.
//!
//! The rules for finished pods, stale UIDs and devices are
//! `topoalign_observe`'s. What the follower adds is when it publishes:
//! - `cpu_manager_state` is there (and `memory_manager_state` under the
//!   `Static` memory policy): a kubelet that has not started its managers
//!   has no state to follow;
//! - every checkpoint present decodes and its checksum verifies (a file
//!   caught mid-write, cut or edited does not), the device manager's too,
//!   and the CPU and memory managers' restore accepts them under the
//!   configured policies and kubelet release;
//! - the pods the API server has bound to the node and not finished are
//!   exactly the pods the kubelet's PodResources API lists (a pod bound but
//!   not yet admitted, or one the kubelet still runs after the API server
//!   let it go, is a moment when the state is in flux);
//! - each container PodResources reports holds the same exclusive CPUs,
//!   pinned memory blocks and device ids as the checkpoints record;
//! - what it serves as allocatable is what this machine and configuration
//!   make allocatable.
//!
//! A [`Rebuilder`] (the follower's) keeps what it parsed at the last
//! rebuild: its `topoalign_observe::Observer` each checkpoint's bytes with
//! the state they decode to, and each pod with its conversion. A
//! checkpoint byte for byte the one decoded last time, and a pod equal to
//! the one converted, are not decoded again — that state was checked when
//! it was; every check that relates the sources to each other (the pods
//! listed, PodResources against the checkpoints, the restore, the
//! allocatable resources) runs at every rebuild.

use std::collections::HashMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod as ApiPod;
use topoalign_engine::{MemoryPolicyName, Node};
use topoalign_k8s::checkpoint::{CPU_MANAGER_STATE, DEVICE_CHECKPOINT, MEMORY_MANAGER_STATE};
use topoalign_observe::{
    CheckpointFile, CheckpointFiles, CheckpointReport, CheckpointStatus, FileContent, ListedPod, Observer,
    PodResourcesAnswer, Restart,
};
use topoalign_podresources::{Allocatable, Difference, Field, PodAllocation};

/// Everything gathered from the kubelet's sources at one moment.
#[derive(Clone, Debug, Default)]
pub struct Observation {
    /// `cpu_manager_state`'s bytes (`None`: no file).
    pub cpu_state: Option<Vec<u8>>,
    pub memory_state: Option<Vec<u8>>,
    /// `device-plugins/kubelet_internal_checkpoint`.
    pub device_state: Option<Vec<u8>>,
    /// The node's pods as the API server (or a pods file) has them, each
    /// shared with the source that keeps it (an unchanged pod is the same
    /// allocation from gather to gather).
    pub pods: Vec<Arc<ApiPod>>,
    /// PodResources `List`.
    pub pod_resources: Vec<PodAllocation>,
    /// PodResources `GetAllocatableResources`.
    pub allocatable: Option<Allocatable>,
}

impl Observation {
    /// The checkpoint files as `topoalign_observe` takes them, named as
    /// the follower's reasons name them (relative to the root directory).
    pub fn checkpoint_files(&self) -> CheckpointFiles {
        let file = |name: &str, bytes: &Option<Vec<u8>>| CheckpointFile {
            path: name.to_owned(),
            content: bytes.clone().map_or(FileContent::Absent, FileContent::Bytes),
        };
        CheckpointFiles {
            cpu: file(CPU_MANAGER_STATE, &self.cpu_state),
            memory: file(MEMORY_MANAGER_STATE, &self.memory_state),
            devices: file(DEVICE_CHECKPOINT, &self.device_state),
        }
    }
}

/// Why the kubelet's state is not known now.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Unknown {
    /// Which source: `checkpoint`, `pods`, `pod-resources`, `restore`, or
    /// `changing` for files rewritten while they were read (a metric
    /// label).
    pub kind: &'static str,
    pub reason: String,
}

impl Unknown {
    pub fn new(kind: &'static str, reason: impl Into<String>) -> Unknown {
        Unknown {
            kind,
            reason: reason.into(),
        }
    }
}

/// The node as the kubelet holds it.
#[derive(Clone, Debug)]
pub struct Rebuilt {
    pub node: Node,
    /// Pod uids the checkpoints still held for pods nobody lists, or that
    /// finished (released).
    pub stale: Vec<String>,
    /// The devices DRA allocated to each container (PodResources
    /// `dynamic_resources`; the checkpoints hold none).
    pub dynamic_devices: Vec<topoalign_observe::ContainerDynamicDevices>,
}

/// Checks `observation`'s sources against each other and restores them
/// into a copy of `base` (the started, empty node of this machine and
/// kubelet configuration).
///
/// # Errors
/// [`Unknown`] naming the source and what disagrees.
pub fn rebuild(base: &Node, observation: &Observation) -> Result<Rebuilt, Unknown> {
    Rebuilder::default().rebuild(base, observation)
}

/// [`rebuild`] again and again on one base node, keeping what it decoded
/// (see the module docs). Give it one base node only.
#[derive(Default)]
pub struct Rebuilder {
    observer: Observer,
    /// Pod uid → the API server's pod and its conversion.
    pods: HashMap<String, (Arc<ApiPod>, ListedPod)>,
}

impl Rebuilder {
    /// [`rebuild`], decoding only what changed since the last call.
    ///
    /// # Errors
    /// As [`rebuild`].
    pub fn rebuild(&mut self, base: &Node, observation: &Observation) -> Result<Rebuilt, Unknown> {
        let pods = listed_pods(&observation.pods, &mut self.pods)?;
        let answer = PodResourcesAnswer {
            socket: String::new(),
            pods: observation.pod_resources.clone(),
            allocatable: observation.allocatable.clone(),
        };
        let files = observation.checkpoint_files();
        let observed = self.observer.observe(
            base,
            topoalign_observe::Inputs {
                files: &files,
                pod_resources: Some(&answer),
                pods: Some(&pods),
            },
        );
        if matches!(observed.cpu.status, CheckpointStatus::Absent) {
            return Err(Unknown::new(
                "checkpoint",
                format!("{CPU_MANAGER_STATE}: absent (the kubelet has not started its CPU manager)"),
            ));
        }
        if base.config().memory_policy == MemoryPolicyName::Static
            && matches!(observed.memory.status, CheckpointStatus::Absent)
        {
            return Err(Unknown::new(
                "checkpoint",
                format!("{MEMORY_MANAGER_STATE}: absent (the kubelet has not started its memory manager)"),
            ));
        }
        for report in [&observed.cpu, &observed.memory] {
            checkpoint_usable(report)?;
        }
        if let Some(why) = &observed.device_problem {
            return Err(Unknown::new("checkpoint", why.clone()));
        }
        if let Restart::Fails { error } = &observed.restart {
            return Err(Unknown::new(
                "restore",
                format!("the kubelet's state cannot be restored: {error}"),
            ));
        }
        // A pod on one side only says more than what its containers hold.
        let found = &observed.differences;
        if let Some(difference) = found.iter().find(|d| d.field == Field::Pod).or(found.first()) {
            return Err(disagreement(difference));
        }
        // What the kubelet serves as allocatable must be what this node's
        // machine and kubelet configuration make allocatable (the check
        // `diagnose` makes): otherwise the machine, its devices or the
        // configuration are not the kubelet's, and nothing rebuilt from
        // them is its state.
        if !observed.allocatable_differences.is_empty() {
            let words: Vec<String> = observed
                .allocatable_differences
                .iter()
                .map(ToString::to_string)
                .collect();
            return Err(Unknown::new(
                "pod-resources",
                format!(
                    "GetAllocatableResources differs from this node's machine and kubelet configuration: {}",
                    words.join("; ")
                ),
            ));
        }
        let node = observed
            .node
            .ok_or_else(|| Unknown::new("restore", "the kubelet's state was not restored"))?;
        Ok(Rebuilt {
            node,
            stale: observed.stale,
            dynamic_devices: observed.dynamic_devices,
        })
    }
}

/// A CPU or memory checkpoint the follower can publish from: absent (where
/// allowed) or verified.
fn checkpoint_usable(report: &CheckpointReport) -> Result<(), Unknown> {
    match report.status.problem() {
        Some(problem) if !report.status.usable() => {
            Err(Unknown::new("checkpoint", format!("{}: {problem}", report.file)))
        }
        _ => Ok(()),
    }
}

/// What `difference` (PodResources' `List` against the checkpoints) means
/// for the state: a pod in flux, or a source that disagrees.
fn disagreement(difference: &Difference) -> Unknown {
    let pod = &difference.pod;
    let file = match difference.field {
        Field::Pod if difference.served == "-" => {
            return Unknown::new(
                "pods",
                format!("pod {pod} is bound to this node but the kubelet does not list it yet"),
            );
        }
        Field::Pod => {
            return Unknown::new(
                "pods",
                format!(
                    "the kubelet lists pod {pod}, which the API server does not have on this node (deleted \
                     already, or not stored yet)"
                ),
            );
        }
        Field::Cpus => CPU_MANAGER_STATE,
        Field::Memory => MEMORY_MANAGER_STATE,
        Field::Devices => DEVICE_CHECKPOINT,
    };
    let what = match difference.field {
        Field::Cpus => "exclusive CPUs",
        Field::Memory => "pinned memory",
        _ => "devices",
    };
    Unknown::new(
        "pod-resources",
        format!(
            "pod {pod} container {}: PodResources reports {what} {}, {file} records {}",
            difference.container, difference.served, difference.recorded
        ),
    )
}

/// The node's pods as `topoalign_observe` takes them. A finished pod is
/// left out here already: observe's rule leaves it out of the state (what
/// it held is stale either way), so it is not converted.
///
/// `converted` holds the pods converted last time by uid, and is left
/// holding this time's: a pod equal to the one converted is not converted
/// again.
fn listed_pods(
    pods: &[Arc<ApiPod>],
    converted: &mut HashMap<String, (Arc<ApiPod>, ListedPod)>,
) -> Result<Vec<ListedPod>, Unknown> {
    let mut last = std::mem::take(converted);
    let mut listed = Vec::with_capacity(pods.len());
    for pod in pods {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if ListedPod::finished_phase(phase) {
            continue;
        }
        let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let key = || format!("{namespace}/{name}");
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        if uid.is_empty() {
            return Err(Unknown::new("pods", format!("pod {}: metadata.uid is missing", key())));
        }
        // The same allocation is the same pod (the source kept it);
        // another one equal to it is too.
        let (uid, pod_listed) = match last.remove_entry(uid) {
            Some((uid, (seen, known))) if Arc::ptr_eq(&seen, pod) || seen == *pod => (uid, known),
            _ => {
                let pod_converted = topoalign_k8s::pod_from_k8s(pod, "")
                    .map_err(|e| Unknown::new("pods", format!("pod {}: {}: {}", key(), e.path(), e.message())))?;
                let known = ListedPod {
                    pod: pod_converted,
                    finished: false,
                    created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
                };
                (uid.to_owned(), known)
            }
        };
        listed.push(pod_listed.clone());
        converted.insert(uid, (Arc::clone(pod), pod_listed));
    }
    Ok(listed)
}

/// The containers of `pods` that may have processes, with their runtime
/// ids (`topoalign_observe`'s rule: not of a finished pod, not
/// terminated).
pub fn running_containers(pods: &[Arc<ApiPod>]) -> Vec<topoalign_observe::RunningContainer> {
    let mut running = Vec::new();
    for pod in pods {
        let (Some(spec), Some(status)) = (pod.spec.as_ref(), pod.status.as_ref()) else {
            continue;
        };
        let names = topoalign_observe::PodNames {
            namespace: pod.metadata.namespace.as_deref().unwrap_or("default"),
            name: pod.metadata.name.as_deref().unwrap_or_default(),
            uid: pod.metadata.uid.as_deref().unwrap_or_default(),
            phase: status.phase.as_deref(),
        };
        let containers = spec.init_containers.iter().flatten().chain(&spec.containers);
        let statuses = status
            .init_container_statuses
            .iter()
            .flatten()
            .chain(status.container_statuses.iter().flatten())
            .map(|status| topoalign_observe::ContainerStatus {
                name: &status.name,
                id: status.container_id.as_deref(),
                terminated: status.state.as_ref().is_some_and(|s| s.terminated.is_some()),
            });
        running.extend(topoalign_observe::running_containers(
            names,
            containers.map(|c| c.name.as_str()),
            statuses,
        ));
    }
    running
}
