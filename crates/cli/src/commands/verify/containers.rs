//! `topoalign verify --containers`: every running container of a kubelet's
//! pods against what the kubelet decided for it. The decision is read as
//! every command reads a kubelet (`topoalign_observe`: the checkpoints
//! restored into this machine and kubelet configuration); each container's
//! processes are found by their `/proc/PID/cgroup` (the pod UID, and the
//! container id of the pod's `status.containerStatuses`), their facts read
//! by `topoalign_enforce::observe` and judged by `topoalign_verify`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use topoalign_enforce::observe::{Host, ObserveError};
use topoalign_intake::{Events, NodeInputs, Overrides, WithoutConfig};
use topoalign_k8s::{ManifestOptions, ManifestPod, read_manifests};
use topoalign_observe::{CheckpointStatus, Inputs, KubeletDir};
use topoalign_podresources::{ContainerAllocation, pod_allocations};
use topoalign_verify::{Decided, DecidedCpus, DecidedDevice, NodeSet, NumaLayout, Report, Subject, Summary};

use super::{Args, Document, NOT_KEPT, VISIBILITY, VerifyFormat, judged, render_reports};
use crate::commands::{Error, Outcome, Result};

/// One container the kubelet knows, and where to find its processes.
struct Known {
    namespace: String,
    pod: String,
    uid: String,
    container: String,
    /// The runtime's id (`status.containerStatuses[].containerID` without
    /// its `containerd://` scheme); `None`: not running.
    id: Option<String>,
}

pub(super) fn run(args: &Args) -> Result {
    let root = args.root.as_deref();
    let kubelet_dir = kubelet_dir(args);
    let dir = kubelet_dir.root().to_path_buf();
    let refused = |e: topoalign_observe::ObserveError| Error::bad_input(format!("--kubelet-dir {e}"));
    kubelet_dir.check().map_err(refused)?;
    let config = kubelet_dir.config_file().map_err(refused)?;
    let overrides = Overrides::default();
    let started = topoalign_intake::start(&NodeInputs {
        node: args.node.as_deref().or(root),
        kubelet_config: None,
        fallback_kubelet_config: config,
        without_config: WithoutConfig::KubeletDefaults,
        overrides: &overrides,
        events: Events::Ignore,
    })?;
    let pods_file = args
        .kubelet
        .pods
        .clone()
        .or_else(|| Some(dir.join("pods.yaml")).filter(|p| p.is_file()))
        .ok_or_else(|| {
            Error::bad_input(format!(
                "verify --containers needs the node's pods (--pods FILE, or {}) to know each container's name and id",
                dir.join("pods.yaml").display()
            ))
        })?;
    let pods = read_pod_list(&pods_file)?;
    let listed: Vec<_> = pods.iter().map(topoalign_explain::diagnose::listed_pod).collect();
    let files = kubelet_dir.read_checkpoints();
    let observed = topoalign_observe::observe(
        &started.node,
        Inputs {
            files: &files,
            pod_resources: None,
            pods: Some(&listed),
        },
    );
    for report in [&observed.cpu, &observed.memory] {
        if let Some(problem) = report.status.problem()
            && !matches!(report.status, CheckpointStatus::Absent)
        {
            return Err(Error::bad_input(format!("{}: {problem}", report.file)));
        }
    }
    let Some(node) = observed.node.as_ref() else {
        let why = observed
            .notes
            .first()
            .cloned()
            .unwrap_or_else(|| "the kubelet's state cannot be restored".to_string());
        return Err(Error::bad_input(format!("{}: {why}", dir.display())));
    };
    let machine = node.machine();
    let snapshot = node.snapshot();
    let pool = (!snapshot.cpu.default_cpu_set.is_empty()).then(|| snapshot.cpu.default_cpu_set.clone());
    let policy = node.config().topology_policy;
    let allocations: BTreeMap<(String, String), BTreeMap<String, ContainerAllocation>> =
        pod_allocations(&snapshot, machine)
            .into_iter()
            .map(|pod| {
                let containers = pod.containers.into_iter().map(|c| (c.name.clone(), c)).collect();
                ((pod.namespace, pod.name), containers)
            })
            .collect();
    let layout = NumaLayout::new(
        machine
            .numa_nodes()
            .iter()
            .map(|node| (node.id, machine.numa_cpus(node.id))),
    );
    let host = match root {
        Some(root) => Host::under(root),
        None => Host::live(),
    };
    let cgroups = proc_cgroups(root.unwrap_or(Path::new("/")))?;
    let keep: Vec<&str> = VISIBILITY.to_vec();
    let mut reports = Vec::new();
    let mut not_found = Vec::new();
    for known in running(&pods) {
        let key = (known.namespace.clone(), known.pod.clone());
        let Some(allocation) = allocations.get(&key).and_then(|pod| pod.get(&known.container)) else {
            // A pod the kubelet holds nothing for (or a finished one).
            continue;
        };
        let label = format!("{}/{} {}", known.namespace, known.pod, known.container);
        let pids: Vec<u32> = match &known.id {
            Some(id) => cgroups
                .iter()
                .filter(|(_, text)| in_container(text, &known.uid, id))
                .map(|(pid, _)| *pid)
                .collect(),
            None => Vec::new(),
        };
        let Some(&first) = pids.first() else {
            not_found.push(label);
            continue;
        };
        let facts = match host.process(first, &keep) {
            Ok(facts) => facts,
            Err(ObserveError::NoProcess { .. }) => {
                not_found.push(label);
                continue;
            }
            Err(error) => return Err(Error::Failed(error.into())),
        };
        let own_cgroup = facts
            .cgroup
            .as_ref()
            .map(|cgroup| cgroup.path.display().to_string())
            .filter(|path| known.id.as_deref().is_some_and(|id| in_container(path, &known.uid, id)));
        let decided = Decided {
            by: "kubelet checkpoints".to_string(),
            cpus: if allocation.cpus.is_empty() {
                DecidedCpus::Shared { pool: pool.clone() }
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
            cgroup: own_cgroup,
            policy: Some(policy),
            not_enforced: false,
        };
        let subject = Subject::Container {
            namespace: known.namespace,
            pod: known.pod,
            container: known.container,
            pids,
        };
        reports.push(judged(machine, &layout, &facts, subject, Some(decided)));
    }
    let summary = Summary::of(&reports);
    let bytes = match args.output.format() {
        VerifyFormat::Text => render(&dir, &reports, &summary, &not_found).into_bytes(),
        VerifyFormat::Json => (serde_json::to_string_pretty(&Document {
            reports: &reports,
            summary: &summary,
            not_found: &not_found,
        })? + "\n")
            .into_bytes(),
    };
    args.output.write(&bytes)?;
    Ok(if summary.all_kept() {
        Outcome::Success
    } else {
        Outcome::Exit(NOT_KEPT)
    })
}

/// The kubelet directory: --kubelet-dir, else ROOT/var/lib/kubelet under
/// --root, else the default.
fn kubelet_dir(args: &Args) -> KubeletDir {
    match (&args.kubelet.kubelet_dir, &args.root) {
        (None, Some(root)) => KubeletDir::new(
            root.join(topoalign_observe::DEFAULT_ROOT.trim_start_matches('/')),
            args.kubelet.pod_resources.clone(),
        ),
        _ => args.kubelet.dir(),
    }
}

/// A pod list (it may hold no pods).
fn read_pod_list(path: &Path) -> Result<Vec<ManifestPod>> {
    let text = topoalign_intake::read_text(path)?;
    let manifests = read_manifests(&text, &ManifestOptions::default())
        .map_err(|e| Error::bad_input(format!("{}: {e}", path.display())))?;
    Ok(manifests.pods)
}

/// Every container of the pods that have not finished, in list order, with
/// its runtime id when its status has one.
fn running(pods: &[ManifestPod]) -> Vec<Known> {
    let mut known = Vec::new();
    for pod in pods {
        let text = |pointer: &str| pod.manifest.pointer(pointer).and_then(serde_json::Value::as_str);
        if topoalign_observe::ListedPod::finished_phase(text("/status/phase")) {
            continue;
        }
        let mut ids: BTreeMap<&str, &str> = BTreeMap::new();
        let mut terminated: Vec<&str> = Vec::new();
        for list in ["/status/initContainerStatuses", "/status/containerStatuses"] {
            for status in pod
                .manifest
                .pointer(list)
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
            {
                let Some(name) = status.get("name").and_then(|v| v.as_str()) else {
                    continue;
                };
                if status.pointer("/state/terminated").is_some() {
                    terminated.push(name);
                } else if let Some(id) = status.get("containerID").and_then(|v| v.as_str()) {
                    ids.insert(name, id.rsplit("://").next().unwrap_or(id));
                }
            }
        }
        for container in pod.pod.init_containers.iter().chain(&pod.pod.containers) {
            // A finished container (an init container that completed) has
            // no processes to check.
            if terminated.contains(&container.name.as_str()) {
                continue;
            }
            known.push(Known {
                namespace: pod.pod.namespace.clone(),
                pod: pod.pod.name.clone(),
                uid: pod.pod.uid.clone(),
                container: container.name.clone(),
                id: ids.get(container.name.as_str()).map(|id| (*id).to_string()),
            });
        }
    }
    known
}

/// Whether a cgroup path (or a `/proc/PID/cgroup` file) names the
/// container `id` of pod `uid`: the cgroupfs driver writes
/// `kubepods/…/pod<uid>/<id>`, the systemd driver
/// `kubepods-…-pod<uid with _>.slice/cri-containerd-<id>.scope`.
fn in_container(text: &str, uid: &str, id: &str) -> bool {
    let systemd_uid = uid.replace('-', "_");
    text.lines().any(|line| {
        (line.contains(&format!("pod{uid}")) || line.contains(&format!("pod{systemd_uid}"))) && line.contains(id)
    })
}

/// Every process under ROOT/proc and its `cgroup` file, in pid order;
/// processes whose file cannot be read (gone since) are left out.
fn proc_cgroups(root: &Path) -> Result<Vec<(u32, String)>> {
    let proc: PathBuf = root.join("proc");
    let entries = std::fs::read_dir(&proc).map_err(|e| Error::bad_input(format!("{}: {e}", proc.display())))?;
    let mut found: Vec<(u32, String)> = entries
        .filter_map(std::result::Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter_map(|pid: u32| {
            let text = std::fs::read_to_string(proc.join(pid.to_string()).join("cgroup")).ok()?;
            Some((pid, text))
        })
        .collect();
    found.sort_unstable_by_key(|(pid, _)| *pid);
    Ok(found)
}

fn render(dir: &Path, reports: &[Report], summary: &Summary, not_found: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "containers of the kubelet in {}", dir.display());
    render_reports(&mut out, reports);
    for label in not_found {
        let _ = writeln!(out, "{label}: no running process found");
    }
    let _ = writeln!(out, "summary: {summary}");
    out
}
