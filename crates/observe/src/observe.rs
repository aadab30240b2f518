//! [`observe`]: the kubelet's checkpoints, PodResources answer and pods to
//! the node it holds. Pure: no I/O, no clock. The rules are the crate's
//! (see the crate docs).

use std::collections::{BTreeMap, BTreeSet};

use topoalign_engine::{CpuManagerState, DeviceAssignments, MemoryManagerState, Node, NodeSnapshot};
use topoalign_k8s::checkpoint::{CheckpointKind, CpuCheckpoint, DeviceCheckpoint, MemoryCheckpoint, Reading};
use topoalign_model::{Container, CpuSet, Pod, QosClass, Quantity, QuantityFormat, ResourceList};
use topoalign_podresources::{
    Allocatable, AllocatableDifference, Difference, PodAllocation, allocatable_differences, allocatable_of,
    differences, pod_allocations,
};

use crate::status::{CheckpointFile, CheckpointFiles, CheckpointReport, FileContent, Restart, judge};

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

/// One pod of the node's pod list.
#[derive(Clone, Debug, PartialEq)]
pub struct ListedPod {
    pub pod: Pod,
    /// `status.phase` is `Succeeded` or `Failed` ([`ListedPod::finished_phase`]).
    pub finished: bool,
    /// `metadata.creationTimestamp`.
    pub created: Option<jiff::Timestamp>,
}

impl ListedPod {
    /// Whether a pod in `phase` has finished: the kubelet no longer counts
    /// it among its active pods.
    pub fn finished_phase(phase: Option<&str>) -> bool {
        matches!(phase, Some("Succeeded" | "Failed"))
    }
}

/// What [`observe`] reads.
#[derive(Clone, Copy, Debug)]
pub struct Inputs<'a> {
    pub files: &'a CheckpointFiles,
    /// The kubelet's PodResources answer, when it was asked.
    pub pod_resources: Option<&'a PodResourcesAnswer>,
    /// The node's pods (`None`: no pod list; see the crate's rules).
    pub pods: Option<&'a [ListedPod]>,
}

/// Where the observed device assignments come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeviceSource {
    /// The device manager's checkpoint.
    Checkpoint,
    /// Its checkpoint was absent or unusable (why): the PodResources
    /// answer, its pods matched to UIDs by the pod list.
    PodResources { why: String },
    /// Neither: inferred from the pods' requests and NUMA placement.
    Inferred { why: String },
}

/// Whether the PodResources answer was compared with the checkpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// No answer was given.
    NotAsked,
    /// No pod list to match the answer's pods to the checkpoints' UIDs.
    NoPodList,
    /// The checkpoints could not be restored.
    NotRestored,
    /// Compared: [`Observed::differences`] holds what differs.
    Compared,
}

/// Exclusive CPUs two containers both hold, in a way the kubelet never
/// writes (see the crate's rules).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DoubleAssignment {
    /// `(pod uid, container)` holding them first, in state order.
    pub first: (String, String),
    pub second: (String, String),
    pub cpus: CpuSet,
}

/// The node as the kubelet holds it, and what was found on the way.
#[derive(Clone, Debug)]
pub struct Observed {
    /// `cpu_manager_state` as the node's kubelet release reads it.
    pub cpu: CheckpointReport,
    /// `memory_manager_state`.
    pub memory: CheckpointReport,
    /// The device checkpoint's path.
    pub device_file: String,
    /// Why the device checkpoint, present, was not used (it does not
    /// decode, or cannot be read); `None` when used or absent.
    pub device_problem: Option<String>,
    /// The states the CPU and memory checkpoints decode to (every UID,
    /// stale ones included); `None` when absent or unusable.
    pub cpu_state: Option<CpuManagerState>,
    pub memory_state: Option<MemoryManagerState>,
    pub restart: Restart,
    /// The started node with the state restored (active pods only); `None`
    /// when a kubelet would not restart on it.
    pub node: Option<Node>,
    /// Where `node`'s device assignments come from (`None` with no node).
    pub devices: Option<DeviceSource>,
    /// UIDs whose state is released: no active pod has them.
    pub stale: Vec<String>,
    /// Without a pod list: the UIDs standing for pods.
    pub unnamed: Vec<String>,
    pub double_assignments: Vec<DoubleAssignment>,
    pub comparison: Comparison,
    /// Where the PodResources `List` differs from what the checkpoints
    /// say the kubelet must serve (active pods only).
    pub differences: Vec<Difference>,
    /// Where `GetAllocatableResources` differs from what the node's
    /// machine and configuration make allocatable.
    pub allocatable_differences: Vec<AllocatableDifference>,
    /// What a person should know about how the state was read.
    pub notes: Vec<String>,
    /// The devices DRA allocated to each container, from the PodResources
    /// answer (the checkpoints read here hold none): containers holding
    /// any, in the answer's order.
    pub dynamic_devices: Vec<ContainerDynamicDevices>,
}

/// The DRA devices one container holds (PodResources `dynamic_resources`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerDynamicDevices {
    pub namespace: String,
    pub pod: String,
    pub container: String,
    pub devices: Vec<topoalign_podresources::DynamicDevice>,
}

/// The containers of `answer` holding DRA devices.
fn dynamic_devices(answer: Option<&PodResourcesAnswer>) -> Vec<ContainerDynamicDevices> {
    answer
        .into_iter()
        .flat_map(|answer| &answer.pods)
        .flat_map(|pod| {
            pod.containers
                .iter()
                .filter(|c| !c.dynamic.is_empty())
                .map(|c| ContainerDynamicDevices {
                    namespace: pod.namespace.clone(),
                    pod: pod.name.clone(),
                    container: c.name.clone(),
                    devices: c.dynamic.clone(),
                })
        })
        .collect()
}

/// The kubelet's state from `inputs`, restored into a copy of `base` (the
/// started, empty node of the kubelet's machine and configuration; its
/// `kubelet_version` and feature gates say how the files are read).
pub fn observe(base: &Node, inputs: Inputs<'_>) -> Observed {
    Observer::default().observe(base, inputs)
}

/// A file's bytes and what they were judged to be.
type Judged<S> = Option<(Vec<u8>, CheckpointReport, Option<S>)>;

/// [`observe`] again and again on one base node, keeping each checkpoint's
/// bytes with what they decoded to: a file byte for byte the same is not
/// decoded again. Give it one base node only.
#[derive(Default)]
pub struct Observer {
    cpu: Judged<CpuManagerState>,
    memory: Judged<MemoryManagerState>,
    devices: Option<(Vec<u8>, Result<DeviceAssignments, String>)>,
    allocatable: Option<Allocatable>,
}

/// `judge` of `file`, or the memo's when its bytes are the memo's.
fn judged<S: Clone>(
    memo: &mut Judged<S>,
    file: &CheckpointFile,
    judge_file: impl FnOnce(&CheckpointFile) -> (CheckpointReport, Option<S>),
) -> (CheckpointReport, Option<S>) {
    let FileContent::Bytes(bytes) = &file.content else {
        return judge_file(file);
    };
    if let Some((last, report, state)) = memo.as_ref()
        && last == bytes
        && report.file == file.path
    {
        return (report.clone(), state.clone());
    }
    let (report, state) = judge_file(file);
    *memo = Some((bytes.clone(), report.clone(), state.clone()));
    (report, state)
}

impl Observer {
    /// [`observe`], decoding only the files that changed since the last
    /// call.
    pub fn observe(&mut self, base: &Node, inputs: Inputs<'_>) -> Observed {
        let config = base.config();
        let reading = Reading::of(config.kubelet_version, &config.feature_gates);
        let cpu_policy = config.cpu_policy.as_str();
        let memory_policy = config.memory_policy.as_str();
        let mut notes = Vec::new();

        let (cpu, cpu_state) = judged(&mut self.cpu, &inputs.files.cpu, |file| {
            judge(
                file,
                CheckpointKind::Cpu,
                |b| CpuCheckpoint::parse_for(b, reading),
                |c| (c.policy_name.clone(), c.checksum, u64::from(c.computed_checksum())),
                |c| c.to_state(cpu_policy),
            )
        });
        let (memory, memory_state) = judged(&mut self.memory, &inputs.files.memory, |file| {
            judge(
                file,
                CheckpointKind::Memory,
                |b| MemoryCheckpoint::parse_for(b, reading),
                |c| (c.policy_name.clone(), c.checksum, u64::from(c.computed_checksum())),
                |c| c.to_state(memory_policy),
            )
        });
        // The kubelet keys its memory state by the machine's NUMA ids; a
        // machine numbered anew (ids past 63) is indexed by the engine.
        let memory_state = memory_state.map(|state| state.with_numa_indices(base.machine()));
        let mut errors: Vec<String> = [&cpu, &memory].iter().filter_map(|r| r.restart_error()).collect();

        // The pods: active ones in admission order, the rest named.
        let listed = inputs.pods;
        let mut active: Vec<&ListedPod> = listed.unwrap_or_default().iter().filter(|p| !p.finished).collect();
        active.sort_by(|a, b| {
            a.created
                .cmp(&b.created)
                .then_with(|| key_text(&a.pod).cmp(key_text(&b.pod)))
        });
        let active_uids: BTreeSet<&str> = active.iter().map(|p| p.pod.uid.as_str()).collect();

        let device_file = &inputs.files.devices;
        let from_checkpoint: Result<DeviceAssignments, String> = match &device_file.content {
            FileContent::Bytes(bytes) => match &self.devices {
                Some((last, decoded)) if last == bytes => decoded.clone(),
                _ => {
                    let decoded = DeviceCheckpoint::parse(bytes)
                        .map(|c| c.assignments())
                        .map_err(|e| format!("{}: {e}", device_file.path));
                    self.devices = Some((bytes.clone(), decoded.clone()));
                    decoded
                }
            },
            FileContent::Absent => Err(format!("there is no {}", device_file.path)),
            FileContent::Unreadable(error) => Err(format!("{}: cannot be read: {error}", device_file.path)),
        };
        let device_problem = match (&device_file.content, &from_checkpoint) {
            (FileContent::Absent, _) | (_, Ok(_)) => None,
            (_, Err(why)) => Some(why.clone()),
        };

        let state_uids = held_uids(cpu_state.as_ref(), memory_state.as_ref(), from_checkpoint.as_ref().ok());
        let (stale, unnamed): (Vec<String>, Vec<String>) = match listed {
            Some(_) => (
                state_uids
                    .iter()
                    .filter(|u| !active_uids.contains(u.as_str()))
                    .cloned()
                    .collect(),
                Vec::new(),
            ),
            None => (Vec::new(), state_uids.iter().cloned().collect()),
        };
        if !stale.is_empty() {
            notes.push(format!(
                "{} UID(s) in the state belong to no active pod: stale entries the kubelet releases before its next \
                 admission (released here)",
                stale.len()
            ));
        }
        let double_assignments = cpu_state
            .as_ref()
            .map(|state| kubelet_never_writes(state, listed))
            .unwrap_or_default();

        let mut pods: Vec<Pod> = active.iter().map(|p| p.pod.clone()).collect();
        if listed.is_none() {
            let empty = CpuManagerState::default();
            pods.extend(
                unnamed
                    .iter()
                    .map(|uid| stand_in(uid, cpu_state.as_ref().unwrap_or(&empty), memory_state.as_ref())),
            );
        }

        let mut node = None;
        let mut devices = None;
        let mut recorded: Option<Vec<PodAllocation>> = None;
        if errors.is_empty() {
            let has_devices = base.machine().devices().values().any(|d| !d.is_empty());
            // The kubelet goes on without a device record it cannot read
            // ("Continue after failing to read checkpoint file"); its own
            // answer then names the devices, else they are inferred.
            let (assignments, source) = match (from_checkpoint, inputs.pod_resources) {
                (Ok(assignments), _) => (Some(assignments), DeviceSource::Checkpoint),
                (Err(why), Some(answer)) if listed.is_some() => {
                    if has_devices {
                        notes.push(format!(
                            "device assignments read from the kubelet's PodResources API on {} ({why})",
                            answer.socket
                        ));
                    }
                    (
                        Some(served_devices(&answer.pods, &active)),
                        DeviceSource::PodResources { why },
                    )
                }
                (Err(why), _) => (None, DeviceSource::Inferred { why }),
            };
            let snapshot = NodeSnapshot {
                pods,
                cpu: cpu_state.clone().unwrap_or_default(),
                memory: memory_state.clone(),
                devices: assignments.unwrap_or_default(),
            };
            if inputs.pod_resources.is_some() && listed.is_some() {
                recorded = Some(pod_allocations(&snapshot, base.machine()));
            }
            match base.clone().restored(snapshot) {
                Ok(mut restored) => {
                    if let DeviceSource::Inferred { why } = &source {
                        let inferred = restored.infer_device_assignments();
                        if has_devices {
                            notes.push(format!(
                                "device assignments are inferred from the pods' requests and NUMA placement, not \
                                 read from the device manager's checkpoint ({why})"
                            ));
                        }
                        notes.extend(inferred);
                    } else if has_devices && source == DeviceSource::Checkpoint {
                        notes.push(format!("device assignments read from {}", device_file.path));
                    }
                    node = Some(restored);
                    devices = Some(source);
                }
                Err(error) => errors.push(error.to_string()),
            }
        }
        let restart = match errors.into_iter().next() {
            None => Restart::Starts,
            Some(error) => Restart::Fails { error },
        };

        let (comparison, differences) = match (inputs.pod_resources, listed, &node, recorded) {
            (None, _, _, _) => (Comparison::NotAsked, Vec::new()),
            (Some(_), None, _, _) => (Comparison::NoPodList, Vec::new()),
            (Some(answer), Some(_), Some(_), Some(recorded)) => {
                (Comparison::Compared, differences(&answer.pods, &recorded))
            }
            (Some(_), Some(_), _, _) => (Comparison::NotRestored, Vec::new()),
        };
        let allocatable_differences = match inputs.pod_resources.and_then(|a| a.allocatable.as_ref()) {
            Some(served) => {
                let expected = self.allocatable.get_or_insert_with(|| allocatable_of(base));
                allocatable_differences(served, expected)
            }
            None => Vec::new(),
        };

        Observed {
            cpu,
            memory,
            device_file: device_file.path.clone(),
            device_problem,
            cpu_state,
            memory_state,
            restart,
            node,
            devices,
            stale,
            unnamed,
            double_assignments,
            comparison,
            differences,
            allocatable_differences,
            notes,
            dynamic_devices: dynamic_devices(inputs.pod_resources),
        }
    }
}

/// Every UID the state holds anything for.
fn held_uids(
    cpu: Option<&CpuManagerState>,
    memory: Option<&MemoryManagerState>,
    devices: Option<&DeviceAssignments>,
) -> BTreeSet<String> {
    let mut uids = BTreeSet::new();
    if let Some(cpu) = cpu {
        uids.extend(cpu.assignments.keys().cloned());
        uids.extend(cpu.pod_assignments.keys().cloned());
    }
    if let Some(memory) = memory {
        uids.extend(memory.assignments.keys().cloned());
        uids.extend(memory.pod_assignments.keys().cloned());
    }
    if let Some(devices) = devices {
        uids.extend(devices.keys().cloned());
    }
    uids
}

/// The bytes of `namespace/name`, compared without writing it.
fn key_text(pod: &Pod) -> impl Iterator<Item = u8> + '_ {
    pod.namespace
        .bytes()
        .chain(std::iter::once(b'/'))
        .chain(pod.name.bytes())
}

/// The state's double assignments but those the kubelet writes itself:
/// the CPU manager's static policy hands an init container's CPUs
/// (`cpusToReuse`) to the containers of the same pod that start after it,
/// and keeps the init container's entry. A sidecar (a restartable init
/// container) keeps running, so its CPUs are not reused.
fn kubelet_never_writes(state: &CpuManagerState, pods: Option<&[ListedPod]>) -> Vec<DoubleAssignment> {
    let by_uid: BTreeMap<&str, &Pod> = pods
        .unwrap_or_default()
        .iter()
        .map(|p| (p.pod.uid.as_str(), &p.pod))
        .collect();
    state
        .shared_cpus()
        .into_iter()
        .filter(|shared| {
            if shared.first.0 != shared.second.0 {
                return true;
            }
            // One pod: without its spec there is no telling.
            let Some(pod) = by_uid.get(shared.first.0.as_str()) else {
                return false;
            };
            let order: Vec<(&str, bool)> = pod
                .init_containers
                .iter()
                .map(|c| (c.name.as_str(), !c.restartable))
                .chain(pod.containers.iter().map(|c| (c.name.as_str(), false)))
                .collect();
            let position = |name: &str| order.iter().position(|(n, _)| *n == name);
            let (Some(a), Some(b)) = (position(&shared.first.1), position(&shared.second.1)) else {
                return true;
            };
            let reused_from_init = order[a.min(b)].1;
            !reused_from_init
        })
        .map(|shared| DoubleAssignment {
            first: shared.first,
            second: shared.second,
            cpus: shared.cpus,
        })
        .collect()
}

/// The device assignments in a PodResources answer, keyed by the UIDs the
/// pod list gives its active pods (a pod the list lacks is left out: the
/// comparison reports it).
fn served_devices(pods: &[PodAllocation], active: &[&ListedPod]) -> DeviceAssignments {
    let uids: BTreeMap<(&str, &str), &str> = active
        .iter()
        .map(|p| ((p.pod.namespace.as_str(), p.pod.name.as_str()), p.pod.uid.as_str()))
        .collect();
    let mut assignments = DeviceAssignments::new();
    for pod in pods {
        let Some(uid) = uids.get(&(pod.namespace.as_str(), pod.name.as_str())) else {
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

/// A stand-in for a pod no pod list names, sized from what the state says
/// it holds, so that it keeps its resources.
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
