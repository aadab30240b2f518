//! [`rebuild`]: one [`Observation`] of a kubelet's sources, checked
//! against each other and restored into the engine node the kubelet holds
//! — or [`Unknown`] with the reason. Pure: no I/O, no clock.
//!
//! What must agree:
//! - every checkpoint decodes and its checksum verifies (a file caught
//!   mid-write, cut or edited does not), and the CPU and memory managers'
//!   restore accepts it under the configured policies;
//! - the pods the API server has bound to the node and not finished are
//!   exactly the pods the kubelet's PodResources API lists (a pod bound but
//!   not yet admitted, or one the kubelet still runs after the API server
//!   let it go, is a moment when the state is in flux);
//! - each container PodResources reports holds the same exclusive CPUs,
//!   pinned memory blocks and device ids as the checkpoints record — the
//!   checkpoints' snapshot turned into the answer the kubelet must give
//!   (`topoalign_podresources::pod_allocations`) and compared by
//!   `topoalign_podresources::differences`, the comparison `diagnose`
//!   makes;
//! - the engine restores the whole, with its own start-up checks.
//!
//! State the checkpoints keep for a pod that neither the API server nor
//! the kubelet lists any more is stale: the kubelet releases it before its
//! next admission, and so does the restore.
//!
//! A [`Rebuilder`] (the follower's) keeps what it parsed at the last
//! rebuild: each checkpoint's bytes with the state they decode to, each
//! pod with its conversion. A checkpoint byte for byte the one decoded
//! last time, and a pod equal to the one converted, are not decoded again
//! — that state was checked when it was; every check that relates the
//! sources to each other (the pods listed, PodResources against the
//! checkpoints, the restore, the allocatable resources) runs at every
//! rebuild.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod as ApiPod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use topoalign_engine::{CpuManagerState, DeviceAssignments, MemoryManagerState, MemoryPolicyName, Node, NodeSnapshot};
use topoalign_k8s::checkpoint::{
    CPU_MANAGER_STATE, CheckpointKind, CpuCheckpoint, DEVICE_CHECKPOINT, DeviceCheckpoint, MEMORY_MANAGER_STATE,
    MemoryCheckpoint,
};
use topoalign_model::Pod;
use topoalign_podresources::{
    Allocatable, Difference, Field, PodAllocation, allocatable_differences, allocatable_of, differences,
    pod_allocations,
};

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
    /// Pod uids the checkpoints still held for pods nobody lists (released).
    pub stale: Vec<String>,
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
    cpu: Option<(Vec<u8>, CpuManagerState)>,
    memory: Option<(Vec<u8>, MemoryManagerState)>,
    devices: Option<(Vec<u8>, DeviceAssignments)>,
    /// Pod uid → the API server's pod and its conversion.
    pods: HashMap<String, (Arc<ApiPod>, Pod)>,
    /// What the kubelet must serve as allocatable for the base node.
    allocatable: Option<Allocatable>,
}

/// The value `bytes` decode to: the memo's when they are its bytes, or
/// `decode`'s (kept in the memo when it succeeds).
fn decoded<T: Clone, E>(
    memo: &mut Option<(Vec<u8>, T)>,
    bytes: &[u8],
    decode: impl FnOnce(&[u8]) -> Result<T, E>,
) -> Result<T, E> {
    if let Some((last, value)) = memo.as_ref()
        && last.as_slice() == bytes
    {
        return Ok(value.clone());
    }
    let value = decode(bytes)?;
    *memo = Some((bytes.to_vec(), value.clone()));
    Ok(value)
}

impl Rebuilder {
    /// [`rebuild`], decoding only what changed since the last call.
    ///
    /// # Errors
    /// As [`rebuild`].
    pub fn rebuild(&mut self, base: &Node, observation: &Observation) -> Result<Rebuilt, Unknown> {
        let config = base.config();
        let cpu_policy = config.cpu_policy.as_str();
        let cpu_bytes = observation.cpu_state.as_deref().ok_or_else(|| {
            Unknown::new(
                "checkpoint",
                format!("{CPU_MANAGER_STATE}: absent (the kubelet has not started its CPU manager)"),
            )
        })?;
        let cpu = decoded(&mut self.cpu, cpu_bytes, |bytes| {
            CpuCheckpoint::parse(bytes).and_then(|c| c.to_state(cpu_policy))
        })
        .map_err(|e| checkpoint_error(CheckpointKind::Cpu.file_name(), &e.to_string()))?;
        let memory = match config.memory_policy {
            MemoryPolicyName::None => None,
            MemoryPolicyName::Static => {
                let bytes = observation.memory_state.as_deref().ok_or_else(|| {
                    Unknown::new(
                        "checkpoint",
                        format!("{MEMORY_MANAGER_STATE}: absent (the kubelet has not started its memory manager)"),
                    )
                })?;
                Some(
                    decoded(&mut self.memory, bytes, |bytes| {
                        MemoryCheckpoint::parse(bytes).and_then(|c| c.to_state(MemoryPolicyName::Static.as_str()))
                    })
                    .map_err(|e| checkpoint_error(MEMORY_MANAGER_STATE, &e.to_string()))?,
                )
            }
        };
        let devices: DeviceAssignments = match observation.device_state.as_deref() {
            None => DeviceAssignments::new(),
            Some(bytes) => decoded(&mut self.devices, bytes, |bytes| {
                DeviceCheckpoint::parse(bytes).map(|c| c.assignments())
            })
            .map_err(|e| checkpoint_error(DEVICE_CHECKPOINT, &e.to_string()))?,
        };

        let pods = running_pods(&observation.pods, &mut self.pods)?;
        let listed: BTreeSet<&str> = pods.iter().map(|p| p.uid.as_str()).collect();
        let mut held: BTreeSet<&str> = cpu.assignments.keys().map(String::as_str).collect();
        held.extend(memory.iter().flat_map(|m| m.assignments.keys().map(String::as_str)));
        held.extend(devices.keys().map(String::as_str));
        let stale: Vec<String> = held
            .into_iter()
            .filter(|uid| !listed.contains(uid))
            .map(str::to_owned)
            .collect();

        let snapshot = NodeSnapshot {
            pods,
            cpu,
            memory,
            devices,
        };
        // The one comparison (the one `diagnose` makes): what PodResources
        // lists against the answer the checkpoints give for the API
        // server's pods.
        let recorded = pod_allocations(&snapshot, base.machine());
        let found = differences(&observation.pod_resources, &recorded);
        // A pod on one side only says more than what its containers hold.
        if let Some(difference) = found.iter().find(|d| d.field == Field::Pod).or(found.first()) {
            return Err(disagreement(difference));
        }
        if let Some(served) = &observation.allocatable {
            let expected = self.allocatable.get_or_insert_with(|| allocatable_of(base));
            check_allocatable(served, expected)?;
        }

        // One copy of the started node, given to the restore
        // (`Node::restore` would copy it again to stay unchanged on error).
        let node = base
            .clone()
            .restored(snapshot)
            .map_err(|e| Unknown::new("restore", format!("the kubelet's state cannot be restored: {e}")))?;
        Ok(Rebuilt { node, stale })
    }
}

fn checkpoint_error(file: &str, error: &str) -> Unknown {
    Unknown::new("checkpoint", format!("{file}: {error}"))
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

/// What the kubelet serves as allocatable must be what this node's machine
/// and kubelet configuration make allocatable (the check `diagnose`
/// makes): otherwise the machine, its devices or the configuration are not
/// the kubelet's, and nothing rebuilt from them is its state.
fn check_allocatable(served: &Allocatable, expected: &Allocatable) -> Result<(), Unknown> {
    let found = allocatable_differences(served, expected);
    if found.is_empty() {
        return Ok(());
    }
    let words: Vec<String> = found.iter().map(ToString::to_string).collect();
    Err(Unknown::new(
        "pod-resources",
        format!(
            "GetAllocatableResources differs from this node's machine and kubelet configuration: {}",
            words.join("; ")
        ),
    ))
}

/// The pods that hold resources: bound, not finished, in the kubelet's
/// admission order (creation time, then name).
///
/// `converted` holds the pods converted last time by uid, and is left
/// holding this time's: a pod equal to the one converted is not converted
/// again.
fn running_pods(
    pods: &[Arc<ApiPod>],
    converted: &mut HashMap<String, (Arc<ApiPod>, Pod)>,
) -> Result<Vec<Pod>, Unknown> {
    let mut last = std::mem::take(converted);
    let mut running: Vec<(Option<&Time>, &str, &str, Pod)> = Vec::with_capacity(pods.len());
    for pod in pods {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
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
        let (uid, pod_converted) = match last.remove_entry(uid) {
            Some((uid, (seen, known))) if Arc::ptr_eq(&seen, pod) || seen == *pod => (uid, known),
            _ => {
                let pod_converted = topoalign_k8s::pod_from_k8s(pod, "")
                    .map_err(|e| Unknown::new("pods", format!("pod {}: {}: {}", key(), e.path(), e.message())))?;
                (uid.to_owned(), pod_converted)
            }
        };
        converted.insert(uid, (Arc::clone(pod), pod_converted.clone()));
        let created = pod.metadata.creation_timestamp.as_ref();
        running.push((created, namespace, name, pod_converted));
    }
    // Creation time, then `namespace/name` as text (compared without
    // writing it).
    running.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| key_text(a.1, a.2).cmp(key_text(b.1, b.2))));
    Ok(running.into_iter().map(|(_, _, _, pod)| pod).collect())
}

/// The bytes of `namespace/name`.
fn key_text<'a>(namespace: &'a str, name: &'a str) -> impl Iterator<Item = u8> + 'a {
    namespace.bytes().chain(std::iter::once(b'/')).chain(name.bytes())
}
