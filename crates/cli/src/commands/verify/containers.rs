//! `topoalign verify --containers`: every running container of a kubelet's
//! pods against what the kubelet decided for it. The decision is read as
//! every command reads a kubelet (`topoalign_observe`: the checkpoints
//! restored into this machine and kubelet configuration); each container's
//! processes are found, read and judged by
//! `topoalign_observe::verify_containers` (the pod UID, and the container
//! id of the pod's `status.containerStatuses`), as the follower does.
//! Without the node's pods, the kubelet's PodResources API names the
//! active pods' containers and what it allocated to each, and the
//! kubelet's log links (`/var/log/containers`) give their ids and pod UIDs
//! (`topoalign_observe::verify_served`).

use std::fmt::Write as _;
use std::path::Path;

use topoalign_host::Host;
use topoalign_intake::{Events, NodeInputs, Overrides, WithoutConfig};
use topoalign_k8s::{ManifestOptions, ManifestPod, read_manifests};
use topoalign_observe::{CheckpointStatus, ContainerStatus, Inputs, KubeletDir, PodNames, RunningContainer};
use topoalign_verify::{Report, Summary};

use super::{Args, emit, render_reports};
use crate::commands::{Error, Result};

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
        .or_else(|| Some(dir.join("pods.yaml")).filter(|p| p.is_file()));
    let files = kubelet_dir.read_checkpoints();
    // With the node's pods: their statuses name each container's id, and
    // the checkpoints' UIDs. Without: the kubelet's PodResources API names
    // the active pods' containers and what it allocated to each, and the
    // kubelet's log links (/var/log/containers) their ids and pod UIDs.
    let (pods, served) = match &pods_file {
        Some(path) => (Some(read_pod_list(path)?), None),
        None => {
            let socket = kubelet_dir.socket();
            let answer = kubelet_dir
                .socket_present()
                .map_err(|e| e.to_string())
                .and_then(|present| {
                    if present {
                        crate::commands::diagnose::ask_pod_resources(socket)
                    } else {
                        Err(format!("{}: no socket", socket.display()))
                    }
                })
                .map_err(|e| {
                    Error::bad_input(format!(
                        "verify --containers needs the node's pods (--pods FILE, or {}) or the kubelet's \
                         PodResources API (--pod-resources SOCKET): {e}",
                        dir.join("pods.yaml").display()
                    ))
                })?;
            (None, Some(answer))
        }
    };
    let listed: Option<Vec<_>> = pods
        .as_ref()
        .map(|pods| pods.iter().map(topoalign_explain::diagnose::listed_pod).collect());
    let observed = topoalign_observe::observe(
        &started.node,
        Inputs {
            files: &files,
            pod_resources: served.as_ref(),
            pods: listed.as_deref(),
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
    let host = match root {
        Some(root) => Host::under(root),
        None => Host::live(),
    };
    let verified = match (&pods, served) {
        (Some(pods), _) => topoalign_observe::verify_containers(node, &running(pods), &host),
        (None, Some(answer)) => {
            let listed: std::collections::BTreeSet<(&str, &str, &str)> = answer
                .pods
                .iter()
                .flat_map(|p| {
                    p.containers
                        .iter()
                        .map(|c| (p.namespace.as_str(), p.name.as_str(), c.name.as_str()))
                })
                .collect();
            let running: Vec<RunningContainer> = topoalign_observe::read_log_links(root.unwrap_or(Path::new("/")))
                .into_iter()
                .filter(|c| listed.contains(&(c.namespace.as_str(), c.pod.as_str(), c.container.as_str())))
                .collect();
            topoalign_observe::verify_served(node, answer.pods.clone(), &running, &host)
        }
        (None, None) => Ok(topoalign_observe::Verified::default()),
    }
    .map_err(|error| match error {
        topoalign_host::HostError::Io { ref path, .. } if path.ends_with("proc") => Error::bad_input(error),
        error => Error::Failed(error.into()),
    })?;
    let (reports, not_found) = (verified.reports, verified.not_found);
    emit(args, &reports, &not_found, |summary| {
        render(&dir, &reports, summary, &not_found)
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
/// its runtime id when its status has one (`topoalign_observe`'s rule).
fn running(pods: &[ManifestPod]) -> Vec<RunningContainer> {
    pods.iter()
        .flat_map(|pod| {
            let phase = pod
                .manifest
                .pointer("/status/phase")
                .and_then(serde_json::Value::as_str);
            let statuses = ["/status/initContainerStatuses", "/status/containerStatuses"]
                .into_iter()
                .flat_map(|list| {
                    pod.manifest
                        .pointer(list)
                        .and_then(|v| v.as_array())
                        .into_iter()
                        .flatten()
                })
                .filter_map(|status| {
                    Some(ContainerStatus {
                        name: status.get("name")?.as_str()?,
                        id: status.get("containerID").and_then(|v| v.as_str()),
                        terminated: status.pointer("/state/terminated").is_some(),
                    })
                });
            let names = PodNames {
                namespace: &pod.pod.namespace,
                name: &pod.pod.name,
                uid: &pod.pod.uid,
                phase,
            };
            let containers = pod.pod.init_containers.iter().chain(&pod.pod.containers);
            topoalign_observe::running_containers(names, containers.map(|c| c.name.as_str()), statuses)
        })
        .collect()
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
