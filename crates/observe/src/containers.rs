//! The kubelet's running containers against what it decided for them —
//! proof of placement on a Kubernetes node, for `verify --containers` and
//! the follower alike.
//!
//! - [`running_containers`]: the one rule for which containers of a pod
//!   have processes to check (the pod not finished, the container not
//!   terminated) and their runtime ids (`containerID` without its
//!   `containerd://` scheme);
//! - [`in_container`]: whether a cgroup path names a container, in the
//!   layouts of both cgroup drivers (`cgroupfs`:
//!   `kubepods/<qos>/pod<uid>/<id>`; `systemd`:
//!   `kubepods-<qos>-pod<uid with _>.slice/cri-containerd-<id>.scope`);
//! - [`verify_containers`]: each container's processes found by their
//!   `/proc/PID/cgroup`, the first one's facts read by `topoalign-host`,
//!   judged by `topoalign-verify` against the container's allocation in
//!   the observed node;
//! - [`judged`]: a process's facts as the judge takes them ([`applied`]),
//!   judged — `verify --pid` uses it too.
//!
//! Must not touch: the judgement's rules (`topoalign-verify`'s), what is
//! read of a process (`topoalign-host`'s), printing.

use std::collections::BTreeMap;

use topoalign_engine::Node;
use topoalign_host::{DeviceFacts, Host, HostError, ProcessFacts};
use topoalign_model::Machine;
use topoalign_podresources::{ContainerAllocation, pod_allocations};
use topoalign_verify::{
    Applied, AppliedDevices, CgroupCpuset, Decided, DecidedCpus, DecidedDevice, DeviceSource, MemoryByNode, NodeSet,
    NumaLayout, Report, Subject, VisibleDevice, judge,
};

use crate::ListedPod;

/// The GPU visibility variables, in the order they are believed.
pub const VISIBILITY: [&str; 2] = ["NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"];

/// One container of an active pod, and where to find its processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunningContainer {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub container: String,
    /// The runtime's id (`containerID` without its scheme); `None`: not
    /// started yet.
    pub id: Option<String>,
}

impl RunningContainer {
    /// `namespace/pod container`.
    pub fn label(&self) -> String {
        format!("{}/{} {}", self.namespace, self.pod, self.container)
    }
}

/// One entry of a pod's `status.initContainerStatuses` or
/// `status.containerStatuses`.
#[derive(Clone, Copy, Debug)]
pub struct ContainerStatus<'a> {
    pub name: &'a str,
    /// `containerID` (`containerd://<id>`).
    pub id: Option<&'a str>,
    /// `state.terminated` is set.
    pub terminated: bool,
}

/// A pod as [`running_containers`] takes it.
#[derive(Clone, Copy, Debug)]
pub struct PodNames<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: &'a str,
    /// `status.phase`.
    pub phase: Option<&'a str>,
}

/// The containers named `containers` (init containers first) of `pod`
/// that may have processes: none when the pod has finished, and not those
/// whose status says they terminated (an init container that completed).
pub fn running_containers<'a>(
    pod: PodNames<'_>,
    containers: impl IntoIterator<Item = &'a str>,
    statuses: impl IntoIterator<Item = ContainerStatus<'a>>,
) -> Vec<RunningContainer> {
    if ListedPod::finished_phase(pod.phase) {
        return Vec::new();
    }
    let mut ids: BTreeMap<&str, &str> = BTreeMap::new();
    let mut terminated: Vec<&str> = Vec::new();
    for status in statuses {
        if status.terminated {
            terminated.push(status.name);
        } else if let Some(id) = status.id.filter(|id| !id.is_empty()) {
            ids.insert(status.name, id.rsplit("://").next().unwrap_or(id));
        }
    }
    containers
        .into_iter()
        .filter(|name| !terminated.contains(name))
        .map(|name| RunningContainer {
            namespace: pod.namespace.to_string(),
            pod: pod.name.to_string(),
            uid: pod.uid.to_string(),
            container: name.to_string(),
            id: ids.get(name).map(|id| (*id).to_string()),
        })
        .collect()
}

/// Whether a cgroup path (or a `/proc/PID/cgroup` text) names container
/// `id` of pod `uid`, in the cgroupfs driver's layout
/// (`kubepods/burstable/pod<uid>/<id>`) or the systemd driver's
/// (`kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope`).
pub fn in_container(text: &str, uid: &str, id: &str) -> bool {
    if uid.is_empty() || id.is_empty() {
        return false;
    }
    let cgroupfs = format!("pod{uid}/");
    let systemd = format!("pod{}.slice/", uid.replace('-', "_"));
    text.lines().any(|line| {
        [&cgroupfs, &systemd].iter().any(|pod| {
            line.find(pod.as_str()).is_some_and(|at| {
                let rest = &line[at + pod.len()..];
                // The container's own directory: the id is its name
                // (cgroupfs) or inside it (`cri-containerd-<id>.scope`).
                rest.split('/').next().is_some_and(|dir| dir.contains(id))
            })
        })
    })
}

/// The containers the kubelet's log links name (`/var/log/containers/
/// <pod>_<namespace>_<container>-<id>.log`, each a link to
/// `/var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log`), read
/// under `root`: how a container's runtime id and pod UID are found
/// without the pods' statuses. Links that do not read so are left out;
/// no directory is no links.
pub fn read_log_links(root: &std::path::Path) -> Vec<RunningContainer> {
    let dir = root.join("var/log/containers");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut found: Vec<RunningContainer> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let target = std::fs::read_link(entry.path()).ok()?;
            parse_log_link(&name, target.to_str()?)
        })
        .collect();
    found.sort_by(|a, b| (&a.namespace, &a.pod, &a.container, &a.id).cmp(&(&b.namespace, &b.pod, &b.container, &b.id)));
    found
}

/// One log link: its name `<pod>_<namespace>_<container>-<id>.log` and
/// its target `…/<namespace>_<pod>_<uid>/<container>/<n>.log` (pod,
/// namespace and container names cannot hold `_`).
pub fn parse_log_link(name: &str, target: &str) -> Option<RunningContainer> {
    let stem = name.strip_suffix(".log")?;
    let (names, id) = stem.rsplit_once('-')?;
    let mut parts = names.splitn(3, '_');
    let (pod, namespace, container) = (parts.next()?, parts.next()?, parts.next()?);
    if id.is_empty() || pod.is_empty() || namespace.is_empty() || container.is_empty() {
        return None;
    }
    let prefix = format!("{namespace}_{pod}_");
    let uid = target
        .split('/')
        .find_map(|component| component.strip_prefix(&prefix))
        .filter(|uid| !uid.is_empty())?;
    Some(RunningContainer {
        namespace: namespace.to_string(),
        pod: pod.to_string(),
        uid: uid.to_string(),
        container: container.to_string(),
        id: Some(id.to_string()),
    })
}

/// What [`verify_containers`] found.
#[derive(Clone, Debug, Default)]
pub struct Verified {
    /// One per container whose processes were found, in the order given.
    pub reports: Vec<Report>,
    /// Containers the kubelet decided for whose processes were not found
    /// (`namespace/pod container`).
    pub not_found: Vec<String>,
}

/// Each of `containers` that `node` holds an allocation for, judged: its
/// processes found in `host`'s `/proc/PID/cgroup`, the first one's facts
/// read, compared with the allocation (exclusive CPUs or the shared pool,
/// pinned memory nodes, device ids) under the node's topology policy.
/// A container `node` holds nothing for (or of a pod it does not hold) is
/// left out. NUMA nodes are compared by the machine's own ids on both
/// sides (the kernel's, [`layout`]).
///
/// # Errors
/// [`HostError`] when `/proc` cannot be listed or a process's file that
/// exists cannot be read (a process gone meanwhile is not an error: its
/// container counts as not found).
pub fn verify_containers(node: &Node, containers: &[RunningContainer], host: &Host) -> Result<Verified, HostError> {
    let decided = pod_allocations(&node.snapshot(), node.machine());
    verify_served(node, decided, containers, host)
}

/// [`verify_containers`] against the allocations the kubelet serves on
/// its PodResources API (`List`) instead of the node's restored state —
/// for a node whose pods are not listed, where the state restored from
/// the checkpoints holds UIDs, not names. `node` gives the machine, the
/// shared pool and the policy.
///
/// # Errors
/// As [`verify_containers`].
pub fn verify_served(
    node: &Node,
    served: Vec<topoalign_podresources::PodAllocation>,
    containers: &[RunningContainer],
    host: &Host,
) -> Result<Verified, HostError> {
    let machine = node.machine();
    let snapshot = node.snapshot();
    let pool = (!snapshot.cpu.default_cpu_set.is_empty()).then(|| snapshot.cpu.default_cpu_set.clone());
    let policy = node.config().topology_policy;
    let allocations: BTreeMap<(String, String), BTreeMap<String, ContainerAllocation>> = served
        .into_iter()
        .map(|pod| {
            let containers = pod.containers.into_iter().map(|c| (c.name.clone(), c)).collect();
            ((pod.namespace, pod.name), containers)
        })
        .collect();
    let layout = layout(machine);
    let memberships = host.cgroup_memberships()?;
    let mut verified = Verified::default();
    for known in containers {
        let Some(allocation) = allocations
            .get(&(known.namespace.clone(), known.pod.clone()))
            .and_then(|pod| pod.get(&known.container))
        else {
            continue;
        };
        let pids: Vec<u32> = match &known.id {
            Some(id) => memberships
                .iter()
                .filter(|(_, text)| in_container(text, &known.uid, id))
                .map(|(pid, _)| *pid)
                .collect(),
            None => Vec::new(),
        };
        let Some(&first) = pids.first() else {
            verified.not_found.push(known.label());
            continue;
        };
        let facts = match host.process(first, &VISIBILITY) {
            Ok(facts) => facts,
            Err(HostError::NoProcess { .. }) => {
                verified.not_found.push(known.label());
                continue;
            }
            Err(error) => return Err(error),
        };
        let own_cgroup = facts
            .cgroup
            .as_ref()
            .map(|cgroup| cgroup.path.display().to_string())
            .filter(|path| known.id.as_deref().is_some_and(|id| in_container(path, &known.uid, id)));
        let decided = decided(allocation, pool.clone(), own_cgroup, policy);
        let subject = Subject::Container {
            namespace: known.namespace.clone(),
            pod: known.pod.clone(),
            container: known.container.clone(),
            pids,
        };
        verified
            .reports
            .push(judged(machine, &layout, &facts, subject, Some(decided)));
    }
    Ok(verified)
}

/// What the kubelet decided for a container, as the judge takes it.
fn decided(
    allocation: &ContainerAllocation,
    pool: Option<topoalign_model::CpuSet>,
    cgroup: Option<String>,
    policy: topoalign_engine::TopologyPolicyName,
) -> Decided {
    Decided {
        by: "kubelet checkpoints".to_string(),
        cpus: if allocation.cpus.is_empty() {
            DecidedCpus::Shared { pool }
        } else {
            DecidedCpus::Exclusive {
                cpus: allocation.cpus.clone(),
            }
        },
        memory_nodes: {
            let nodes: NodeSet = allocation.memory.iter().flat_map(|b| b.numa.iter().copied()).collect();
            (!nodes.is_empty()).then_some(nodes)
        },
        devices: allocation
            .devices
            .iter()
            .flat_map(|(resource, groups)| {
                groups.iter().flat_map(move |group| {
                    let numa: NodeSet = group.numa.iter().copied().collect();
                    group.ids.iter().map(move |id| DecidedDevice {
                        resource: resource.clone(),
                        id: id.clone(),
                        numa: (!numa.is_empty()).then(|| numa.clone()),
                    })
                })
            })
            .collect(),
        cgroup,
        policy: Some(policy),
        not_enforced: false,
    }
}

/// `machine`'s NUMA nodes and their CPUs, as the judge takes them: each
/// node by the machine's own id ([`Machine::numa_label`]), the id the
/// kernel writes in `Mems_allowed_list`, `cpuset.mems` and `numa_maps` and
/// the kubelet in what it decided — not the engine's index, which differs
/// on a machine numbered anew (NUMA ids past 63).
pub fn layout(machine: &Machine) -> NumaLayout {
    NumaLayout::new(
        machine
            .numa_nodes()
            .iter()
            .map(|node| (machine.numa_label(node.id), machine.numa_cpus(node.id))),
    )
}

/// The NUMA nodes of device `id` on `machine`, when it has any, by the
/// machine's own ids (as [`layout`]).
pub fn device_numa(machine: &Machine, id: &str) -> Option<NodeSet> {
    machine
        .devices()
        .values()
        .flatten()
        .find(|device| device.id == id)
        .map(|device| device.numa.iter().map(|&n| machine.numa_label(n)).collect::<NodeSet>())
        .filter(|nodes| !nodes.is_empty())
}

/// `facts` judged against `decided` (what the kernel applies, as the
/// judge takes it: [`applied`]).
pub fn judged(
    machine: &Machine,
    layout: &NumaLayout,
    facts: &ProcessFacts,
    subject: Subject,
    decided: Option<Decided>,
) -> Report {
    judge(subject, layout, applied(machine, facts), decided)
}

/// What the kernel applies to a process, as the judge takes it.
pub fn applied(machine: &Machine, facts: &ProcessFacts) -> Applied {
    let device_numa = |id: &str| device_numa(machine, id);
    let environment = facts.environment.clone().unwrap_or_default();
    Applied {
        cgroup: facts.cgroup.as_ref().map(|cgroup| CgroupCpuset {
            version: cgroup.version.as_str().to_string(),
            path: cgroup.path.display().to_string(),
            cpus: cgroup.cpus.clone(),
            mems: cgroup.mems.as_ref().map(|m| m.iter().copied().collect()),
        }),
        cpus: facts.cpus.clone(),
        mems_allowed: facts.mems_allowed.iter().copied().collect(),
        memory_bind: facts
            .numa_maps
            .as_ref()
            .and_then(|m| m.bind.as_ref())
            .map(|nodes| nodes.iter().copied().collect()),
        memory: facts.numa_maps.as_ref().map(|m| MemoryByNode {
            anonymous: m.anonymous.clone(),
            huge_pages: m.huge_pages.clone(),
            file: m.file.clone(),
        }),
        devices: applied_devices(facts, &environment, &device_numa),
    }
}

/// What the process can see: a GPU visibility variable where it has one,
/// else its v1 device cgroup's rules; v2's eBPF program is not readable.
fn applied_devices(
    facts: &ProcessFacts,
    environment: &BTreeMap<String, String>,
    device_numa: &dyn Fn(&str) -> Option<NodeSet>,
) -> AppliedDevices {
    if let Some((variable, value)) = VISIBILITY
        .iter()
        .find_map(|name| environment.get(*name).map(|value| (*name, value)))
    {
        let all = value.trim() == "all";
        let devices = value
            .split(',')
            .map(str::trim)
            .filter(|id| !id.is_empty() && !matches!(*id, "all" | "none" | "void"))
            .map(|id| VisibleDevice {
                id: id.to_string(),
                numa: device_numa(id),
            })
            .collect();
        return AppliedDevices::Listed {
            source: DeviceSource::Environment(variable.to_string()),
            all,
            devices,
        };
    }
    match &facts.devices {
        DeviceFacts::V1 { path, rules } => AppliedDevices::Listed {
            source: DeviceSource::DeviceCgroup(path.join("devices.list").display().to_string()),
            all: rules.iter().any(|rule| rule.all),
            devices: rules
                .iter()
                .filter(|rule| !rule.all)
                .map(|rule| VisibleDevice {
                    id: rule.text.clone(),
                    numa: rule.numa.map(|node| NodeSet::from([node])),
                })
                .collect(),
        },
        DeviceFacts::V2 => AppliedDevices::Unreadable {
            reason: "cgroup v2 controls devices with an eBPF program the kernel does not show, and its environment \
                     names no visible GPUs"
                .to_string(),
        },
        DeviceFacts::Unknown => AppliedDevices::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_links_name_the_container_its_id_and_pod_uid() {
        let found = parse_log_link(
            "web-7d4f_default_nginx-3f2a9c.log",
            "/var/log/pods/default_web-7d4f_1b4e28ba-2fa1/nginx/0.log",
        );
        assert_eq!(
            found,
            Some(RunningContainer {
                namespace: "default".to_string(),
                pod: "web-7d4f".to_string(),
                uid: "1b4e28ba-2fa1".to_string(),
                container: "nginx".to_string(),
                id: Some("3f2a9c".to_string()),
            })
        );
        // Not a log link, a target of another pod, no id.
        assert_eq!(
            parse_log_link(
                "web_default_nginx-3f2a9c.txt",
                "/var/log/pods/default_web_u/nginx/0.log"
            ),
            None
        );
        assert_eq!(
            parse_log_link("web_default_nginx-3f2a9c.log", "/var/log/pods/default_db_u/nginx/0.log"),
            None
        );
        assert_eq!(
            parse_log_link("web_default_nginx-.log", "/var/log/pods/default_web_u/nginx/0.log"),
            None
        );
    }

    #[test]
    fn both_cgroup_drivers_name_the_container() {
        let uid = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";
        let id = "3f2a9c";
        // cgroupfs driver, v2 and v1 lines.
        assert!(in_container(
            &format!("0::/kubepods/burstable/pod{uid}/{id}\n"),
            uid,
            id
        ));
        assert!(in_container(&format!("5:cpuset:/kubepods/pod{uid}/{id}\n"), uid, id));
        // systemd driver.
        assert!(in_container(
            &format!(
                "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice/cri-containerd-{id}.scope\n",
                uid.replace('-', "_")
            ),
            uid,
            id
        ));
        // The pod's own cgroup, another pod, the pause container's id.
        assert!(!in_container(&format!("0::/kubepods/burstable/pod{uid}\n"), uid, id));
        assert!(!in_container(
            &format!("0::/kubepods/burstable/podother/{id}\n"),
            uid,
            id
        ));
        assert!(!in_container(
            &format!("0::/kubepods/burstable/pod{uid}/ffff\n"),
            uid,
            id
        ));
        assert!(!in_container(
            &format!("0::/kubepods/burstable/pod{uid}/{id}\n"),
            uid,
            ""
        ));
    }
}
