//! The kubelet's allocations as PodResources reports them, from the
//! state its checkpoints record ([`pod_allocations`]), and what differs
//! between two such answers ([`differences`]): what `diagnose` reports
//! when the kubelet's API and its checkpoint files disagree.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use topoalign_engine::NodeSnapshot;
use topoalign_model::Machine;

use crate::{ContainerAllocation, DeviceGroup, MemoryBlock, PodAllocation};

/// The PodResources answer's pods for a node's `state` (the engine's
/// snapshot, or the kubelet's checkpoints read back): each pod's app
/// containers and sidecars (restartable init containers) with their
/// exclusive CPUs, pinned memory and device ids (each device its own group
/// with the device's NUMA nodes on `machine`). NUMA nodes are the
/// machine's own ids, as the kubelet reports them (`Machine::numa_label`).
pub fn pod_allocations(state: &NodeSnapshot, machine: &Machine) -> Vec<PodAllocation> {
    let numa_of = |resource: &str, id: &str| {
        machine
            .devices()
            .get(resource)
            .and_then(|list| list.iter().find(|d| d.id == id))
            .map(|d| d.numa.iter().map(|&n| machine.numa_label(n)).collect())
            .unwrap_or_default()
    };
    state
        .pods
        .iter()
        .map(|pod| PodAllocation {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            containers: pod
                .init_containers
                .iter()
                .filter(|c| c.restartable)
                .chain(&pod.containers)
                .map(|c| ContainerAllocation {
                    name: c.name.clone(),
                    cpus: state
                        .cpu
                        .assignments
                        .get(&pod.uid)
                        .and_then(|a| a.get(&c.name))
                        .cloned()
                        .unwrap_or_default(),
                    memory: state
                        .memory
                        .as_ref()
                        .and_then(|m| m.assignments.get(&pod.uid))
                        .and_then(|a| a.get(&c.name))
                        .into_iter()
                        .flatten()
                        .map(|b| MemoryBlock {
                            resource: b.resource.clone(),
                            size: b.size,
                            numa: b.numa_affinity.iter().map(|&n| machine.numa_label(n)).collect(),
                        })
                        .collect(),
                    devices: state
                        .devices
                        .get(&pod.uid)
                        .and_then(|a| a.get(&c.name))
                        .into_iter()
                        .flatten()
                        .map(|(resource, ids)| {
                            let groups = ids
                                .iter()
                                .map(|id| DeviceGroup {
                                    ids: vec![id.clone()],
                                    numa: numa_of(resource, id),
                                })
                                .collect();
                            (resource.clone(), groups)
                        })
                        .collect(),
                    // DRA's allocations are not in these checkpoints.
                    dynamic: Vec::new(),
                })
                .collect(),
        })
        .collect()
}

/// Which part of a container's allocation differs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Field {
    /// The pod is listed on one side only.
    Pod,
    /// Exclusive CPUs (`cpu_ids`; the CPU manager's checkpoint).
    Cpus,
    /// Pinned memory blocks (`memory`; the memory manager's checkpoint).
    Memory,
    /// Device ids (`devices`; the device manager's checkpoint).
    Devices,
}

impl Field {
    /// The field's name in the PodResources answer.
    pub fn wire_name(self) -> &'static str {
        match self {
            Field::Pod => "pod_resources",
            Field::Cpus => "cpu_ids",
            Field::Memory => "memory",
            Field::Devices => "devices",
        }
    }
}

/// One way a served answer differs from the recorded one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    /// `namespace/name`.
    pub pod: String,
    /// Empty for [`Field::Pod`].
    pub container: String,
    pub field: Field,
    /// What the served answer says, in words (`-` for nothing).
    pub served: String,
    /// What the recorded answer says.
    pub recorded: String,
}

/// Every way `served` (a kubelet's `List`) differs from `recorded` (the
/// same answer built from its checkpoints with [`pod_allocations`]): pods
/// on one side only, then per container the exclusive CPUs, the pinned
/// memory blocks (in any order) and the device ids per resource (in any
/// order and grouping). A container missing on one side holds nothing
/// there. In pod, container, field order.
pub fn differences(served: &[PodAllocation], recorded: &[PodAllocation]) -> Vec<Difference> {
    let served = by_key(served);
    let recorded = by_key(recorded);
    let mut found = Vec::new();
    let (mut s_at, mut r_at) = (0, 0);
    loop {
        let (s, r) = match (served.get(s_at), recorded.get(r_at)) {
            (None, None) => break,
            (Some(s), Some(r)) => match key_order(s, r) {
                Ordering::Equal => (Some(*s), Some(*r)),
                Ordering::Less => (Some(*s), None),
                Ordering::Greater => (None, Some(*r)),
            },
            (s, r) => (s.copied(), r.copied()),
        };
        s_at += usize::from(s.is_some());
        r_at += usize::from(r.is_some());
        let pod = || {
            format!(
                "{}/{}",
                s.or(r).map_or("", |p| &p.namespace),
                s.or(r).map_or("", |p| &p.name)
            )
        };
        let (s, r) = match (s, r) {
            (Some(s), Some(r)) => (s, r),
            (s, _) => {
                let (listed, missing) = if s.is_some() { ("listed", "-") } else { ("-", "listed") };
                found.push(Difference {
                    pod: pod(),
                    container: String::new(),
                    field: Field::Pod,
                    served: listed.to_owned(),
                    recorded: missing.to_owned(),
                });
                continue;
            }
        };
        let mut containers: Vec<&str> = s
            .containers
            .iter()
            .chain(&r.containers)
            .map(|c| c.name.as_str())
            .collect();
        containers.sort_unstable();
        containers.dedup();
        let empty = ContainerAllocation::default();
        for name in containers {
            let (s, r) = (container(s, name, &empty), container(r, name, &empty));
            // The same answer, field for field, differs in no word: only
            // answers that differ somehow are described (the words compare
            // memory blocks and devices in any order).
            if s.cpus == r.cpus && s.memory == r.memory && s.devices == r.devices {
                continue;
            }
            let mut differ = |field: Field, served: String, recorded: String| {
                if served != recorded {
                    found.push(Difference {
                        pod: pod(),
                        container: name.to_owned(),
                        field,
                        served,
                        recorded,
                    });
                }
            };
            differ(Field::Cpus, describe_cpus(s), describe_cpus(r));
            differ(Field::Memory, describe_memory(&s.memory), describe_memory(&r.memory));
            differ(
                Field::Devices,
                describe_devices(&s.devices),
                describe_devices(&r.devices),
            );
        }
    }
    found
}

/// The pods of an answer in the order of their `namespace/name` (compared
/// as that text, without writing it), one per name: the last listed.
fn by_key(pods: &[PodAllocation]) -> Vec<&PodAllocation> {
    let mut sorted: Vec<&PodAllocation> = pods.iter().collect();
    // Stable: of pods with one name, the last listed stays last.
    sorted.sort_by(|a, b| key_order(a, b));
    let mut unique: Vec<&PodAllocation> = Vec::with_capacity(sorted.len());
    for pod in sorted {
        match unique.last_mut() {
            Some(last) if key_order(last, pod) == Ordering::Equal => *last = pod,
            _ => unique.push(pod),
        }
    }
    unique
}

/// `a` and `b` ordered as their `namespace/name` texts.
fn key_order(a: &PodAllocation, b: &PodAllocation) -> Ordering {
    if a.namespace == b.namespace {
        return a.name.cmp(&b.name);
    }
    fn key(p: &PodAllocation) -> impl Iterator<Item = u8> + '_ {
        p.namespace.bytes().chain(std::iter::once(b'/')).chain(p.name.bytes())
    }
    key(a).cmp(key(b))
}

/// `pod`'s container `name`, or `empty`.
fn container<'a>(pod: &'a PodAllocation, name: &str, empty: &'a ContainerAllocation) -> &'a ContainerAllocation {
    pod.containers.iter().find(|c| c.name == name).unwrap_or(empty)
}

fn describe_cpus(container: &ContainerAllocation) -> String {
    if container.cpus.is_empty() {
        "-".to_owned()
    } else {
        container.cpus.to_string()
    }
}

fn describe_memory(blocks: &[MemoryBlock]) -> String {
    let mut parts: Vec<String> = blocks
        .iter()
        .map(|b| {
            let numa: Vec<String> = b.numa.iter().map(ToString::to_string).collect();
            format!("{} {} bytes on NUMA {}", b.resource, b.size, numa.join(","))
        })
        .collect();
    parts.sort();
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join("; ")
    }
}

fn describe_devices(devices: &BTreeMap<String, Vec<DeviceGroup>>) -> String {
    let parts: Vec<String> = devices
        .iter()
        .filter_map(|(resource, groups)| {
            let mut ids: Vec<&str> = groups.iter().flat_map(|g| g.ids.iter().map(String::as_str)).collect();
            ids.sort_unstable();
            ids.dedup();
            (!ids.is_empty()).then(|| format!("{resource} {}", ids.join(",")))
        })
        .collect();
    if parts.is_empty() {
        "-".to_owned()
    } else {
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::{Field, differences};
    use crate::{ContainerAllocation, PodAllocation};

    fn pod(namespace: &str, name: &str, cpus: &str) -> PodAllocation {
        PodAllocation {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            containers: vec![ContainerAllocation {
                name: "app".to_owned(),
                cpus: topoalign_model::CpuSet::parse(cpus).unwrap_or_default(),
                ..ContainerAllocation::default()
            }],
        }
    }

    /// Pods come in the order of their `namespace/name` text (`a-b/y`
    /// before `a/x`: `-` sorts before `/`), each once, the last listed of
    /// a name standing for it; a pod on one side only is a `Pod`
    /// difference.
    #[test]
    fn pods_are_compared_in_the_order_of_their_names() {
        let served = [
            pod("a", "x", "1"),
            pod("a-b", "y", "2"),
            pod("a", "z", "9"),
            pod("a", "z", "3"),
            pod("c", "only-served", ""),
        ];
        let recorded = [
            pod("a-b", "y", "5"),
            pod("a", "x", "4"),
            pod("a", "z", "3"),
            pod("b", "only-recorded", ""),
        ];
        let found: Vec<(String, Field, String, String)> = differences(&served, &recorded)
            .into_iter()
            .map(|d| (d.pod, d.field, d.served, d.recorded))
            .collect();
        let expected = [
            ("a-b/y", Field::Cpus, "2", "5"),
            ("a/x", Field::Cpus, "1", "4"),
            ("b/only-recorded", Field::Pod, "-", "listed"),
            ("c/only-served", Field::Pod, "listed", "-"),
        ];
        let expected: Vec<(String, Field, String, String)> = expected
            .iter()
            .map(|&(pod, field, s, r)| (pod.to_owned(), field, s.to_owned(), r.to_owned()))
            .collect();
        assert_eq!(found, expected);
    }
}
