//! `topoalign diagnose`: a live node's (or a copy's) kubelet state — the
//! checkpoint files of `--kubelet-dir` read here and judged by
//! `topoalign_explain::diagnose` — printed as the per-NUMA allocation map
//! and, for the pods given, the explanation `explain` gives.
//!
//! The machine is this one unless `--node` says otherwise; the kubelet
//! configuration is `DIR/config.yaml` (or `DIR/kubelet-config.yaml`) unless
//! `--kubelet-config` says otherwise; `--pods` (default `DIR/pods.yaml` when
//! present) names the pods behind the state's UIDs.
//!
//! The kubelet's PodResources API is read too — `--pod-resources SOCKET`,
//! or by default `DIR/pod-resources/kubelet.sock` when that socket exists
//! (on a live node, `/var/lib/kubelet/pod-resources/kubelet.sock`):
//! `List` names the devices when the device manager's checkpoint cannot,
//! and is cross-checked against the checkpoint files, each disagreement
//! naming the file and the API's field. A socket given and not answering
//! is an error; the default one not answering is a note.
//!
//! Exit status: 0 for state the kubelet accepts, 2 for state it would
//! refuse (a corrupt or unreadable checkpoint, a failed start-up check),
//! for a PodResources API that disagrees with the checkpoints, and for
//! input that cannot be read.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use topoalign_explain::diagnose::{CheckpointStatus, Diagnosis, Inputs, PodResourcesAnswer, Restart, diagnose};
use topoalign_intake::{Events, StartedNode, read_pods, read_text};
use topoalign_k8s::{ManifestOptions, ManifestPod, read_manifests};
use topoalign_observe::KubeletDir;

use super::admit::{self, DocumentFormat};
use super::kubelet_dir::KubeletDirArgs;
use super::node_args::{self, NodeArgs};
use super::output::Output;
use super::{Error, Outcome, Result, render};

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub kubelet: KubeletDirArgs,
    /// Do not ask the PodResources API (a copy of a kubelet directory).
    #[arg(long, conflicts_with = "pod_resources")]
    pub no_pod_resources: bool,
    /// Pods to explain on the node as it is now.
    #[arg(value_name = "POD.yaml")]
    pub explain: Vec<PathBuf>,
    #[command(flatten)]
    pub node: NodeArgs,
    #[command(flatten)]
    pub output: Output<DocumentFormat>,
}

pub fn run(args: &Args) -> Result {
    let kubelet_dir = args.kubelet.dir();
    let dir = kubelet_dir.root();
    let refused = |e: topoalign_observe::ObserveError| Error::bad_input(format!("--kubelet-dir {e}"));
    kubelet_dir.check().map_err(refused)?;
    let fallback = kubelet_dir.config_file().map_err(refused)?;
    let mut started = args.node.start(Events::Ignore, fallback.as_deref())?;
    let pods_file = args
        .kubelet
        .pods
        .clone()
        .or_else(|| Some(dir.join("pods.yaml")).filter(|p| p.is_file()));
    let listed = pods_file.as_deref().map(read_pod_list).transpose()?;
    let explained = if args.explain.is_empty() {
        Vec::new()
    } else {
        let pod_level = topoalign_k8s::PodLevelField::of_kubelet(&started.kubelet);
        let read = read_pods(&args.explain, Some(1), "topoalign-diagnose", pod_level)?;
        started.notes.extend(read.notes);
        read.pods
    };
    let mut notes = std::mem::take(&mut started.notes);
    let pod_resources = if args.no_pod_resources {
        None
    } else if kubelet_dir.socket_given() {
        let socket = kubelet_dir.socket();
        // Something other than a socket there is said so; no socket is
        // the connection's own error.
        let answer = kubelet_dir
            .socket_present()
            .map_err(|e| e.to_string())
            .and_then(|_| ask_pod_resources(socket));
        Some(answer.map_err(|e| Error::bad_input(format!("--pod-resources {}: {e}", socket.display())))?)
    } else {
        match kubelet_dir.socket_present() {
            Ok(false) => None,
            Ok(true) => match ask_pod_resources(kubelet_dir.socket()) {
                Ok(answer) => Some(answer),
                Err(e) => {
                    notes.push(format!("the PodResources API was not read: {e}"));
                    None
                }
            },
            Err(e) => {
                notes.push(format!("the PodResources API was not read: {e}"));
                None
            }
        }
    };
    let files = kubelet_dir.read_checkpoints();
    let kubelet = started.kubelet.clone();
    let mut diagnosis = diagnose(Inputs {
        node: &mut started.node,
        kubelet: &kubelet,
        cpu_checkpoint: files.cpu,
        memory_checkpoint: files.memory,
        device_checkpoint: files.devices,
        pod_resources,
        pods: listed.as_deref(),
        explain: &explained,
    })
    .map_err(Error::bad_input)?;
    notes.append(&mut diagnosis.notes);
    diagnosis.notes = notes;
    let healthy = diagnosis.restart == Restart::Starts
        && diagnosis.disagreements.is_empty()
        && diagnosis.allocatable_disagreements.is_empty();
    let document = serde_json::json!({ "kubeletDir": dir.display().to_string() });
    let text = match args.output.format() {
        DocumentFormat::Json => serde_json::to_string_pretty(&with_dir(document, &diagnosis)?)? + "\n",
        DocumentFormat::Yaml => serde_yaml_ng::to_string(&with_dir(document, &diagnosis)?)?,
        DocumentFormat::Text => text(&kubelet_dir, &diagnosis, &started, &explained),
    };
    args.output.write(text.as_bytes())?;
    Ok(if healthy { Outcome::Success } else { Outcome::Refused })
}

/// How long the kubelet has to answer before diagnose goes on without it.
const POD_RESOURCES_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The kubelet's PodResources `List` on `socket`, or what went wrong (the
/// error names the socket).
pub(crate) fn ask_pod_resources(socket: &Path) -> std::result::Result<PodResourcesAnswer, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let (pods, allocatable) = runtime.block_on(async {
        let call = async {
            let mut client = topoalign_podresources::Client::connect(socket).await?;
            let pods = client.list().await?;
            Ok::<_, topoalign_podresources::PodResourcesError>((pods, client.allocatable().await?))
        };
        match tokio::time::timeout(POD_RESOURCES_TIMEOUT, call).await {
            Ok(answer) => answer.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "{}: the kubelet did not answer List and GetAllocatableResources within {POD_RESOURCES_TIMEOUT:?}",
                socket.display()
            )),
        }
    })?;
    Ok(PodResourcesAnswer {
        socket: socket.display().to_string(),
        pods,
        allocatable: Some(allocatable),
    })
}

/// The diagnosis document with `kubeletDir` first.
fn with_dir(mut document: serde_json::Value, diagnosis: &Diagnosis) -> Result<serde_json::Value> {
    if let (Some(fields), serde_json::Value::Object(rest)) =
        (document.as_object_mut(), serde_json::to_value(diagnosis)?)
    {
        fields.extend(rest);
    }
    Ok(document)
}

/// A pod list (it may hold no pods).
fn read_pod_list(path: &Path) -> Result<Vec<ManifestPod>> {
    let text = read_text(path)?;
    let manifests = read_manifests(&text, &ManifestOptions::default())
        .map_err(|e| Error::bad_input(format!("{}: {e}", path.display())))?;
    Ok(manifests.pods)
}

fn text(kubelet_dir: &KubeletDir, diagnosis: &Diagnosis, started: &StartedNode, explained: &[ManifestPod]) -> String {
    let mut out = render::wrap("kubelet state in ", "    ", &kubelet_dir.root().display().to_string());
    out.push_str(&render::wrap("node: ", "    ", &node_args::describe(started)));
    out.push_str(&render::wrap(
        "kubelet configuration: ",
        "    ",
        &started.kubelet_source,
    ));
    for report in &diagnosis.checkpoints {
        let name = Path::new(&report.file)
            .file_name()
            .map_or(report.file.clone(), |n| n.to_string_lossy().into_owned());
        let line = match &report.status {
            CheckpointStatus::Verified { policy, stored, .. } => format!("policy {policy}, checksum {stored} verified"),
            status if status.usable() => status.problem().unwrap_or_default(),
            status => format!("UNUSABLE: {}", status.problem().unwrap_or_default()),
        };
        out.push_str(&render::wrap(&format!("  {name}: "), "      ", &line));
        if let Some(error) = report.status.kubelet_error() {
            out.push_str(&render::wrap("      the kubelet says: ", "        ", error));
        }
    }
    match &diagnosis.restart {
        Restart::Starts => out.push_str("  restart check: a kubelet restarting with this state on this node starts\n"),
        Restart::Fails { error } => out.push_str(&render::wrap(
            "  restart check: FAILS — the kubelet would not start: ",
            "      ",
            error,
        )),
    }
    for disagreement in &diagnosis.disagreements {
        out.push_str(&render::wrap("  DISAGREES: ", "      ", &disagreement.to_string()));
    }
    for disagreement in &diagnosis.allocatable_disagreements {
        out.push_str(&render::wrap("  DISAGREES: ", "      ", &disagreement.to_string()));
    }
    for note in &diagnosis.notes {
        out.push_str(&render::wrap("  note: ", "      ", note));
    }
    out.push('\n');
    let cpu_usable = diagnosis.checkpoints[0].status.usable();
    let _ = writeln!(
        out,
        "shared CPU pool (defaultCpuSet): {}",
        match (cpu_usable, diagnosis.default_cpu_set.is_empty()) {
            (false, _) => "unknown: cpu_manager_state is unusable",
            (true, true) => "empty (CPU manager policy none, or no state yet)",
            (true, false) => &diagnosis.default_cpu_set,
        }
    );
    for numa in &diagnosis.numa {
        let _ = writeln!(out, "NUMA {} (CPUs {})", numa.node, numa.cpus);
        if !numa.shared_pool.is_empty() {
            let reserved = if numa.reserved.is_empty() {
                String::new()
            } else {
                format!(" ({} reserved for the system)", numa.reserved)
            };
            let _ = writeln!(out, "  shared pool: {}{reserved}", numa.shared_pool);
        }
        let mut holders: BTreeMap<&String, Vec<String>> = BTreeMap::new();
        for (holder, cpus) in &numa.exclusive {
            holders.entry(holder).or_default().push(format!("CPUs {cpus}"));
        }
        for (holder, blocks) in &numa.pinned {
            holders.entry(holder).or_default().extend(blocks.iter().cloned());
        }
        for (holder, parts) in holders {
            out.push_str(&render::wrap(&format!("  {holder}: "), "      ", &parts.join(", ")));
        }
        for (resource, line) in &numa.memory {
            let _ = writeln!(
                out,
                "  {resource}: {} allocatable, {} pinned, {} free",
                line.allocatable, line.reserved, line.free
            );
        }
        for (resource, devices) in &numa.devices {
            let listed: Vec<String> = devices
                .iter()
                .map(|(id, holder)| match holder {
                    Some(holder) => format!("{id} ({holder})"),
                    None => format!("{id} (free)"),
                })
                .collect();
            out.push_str(&render::wrap(&format!("  {resource}: "), "      ", &listed.join(", ")));
        }
    }
    if !diagnosis.dra_devices.is_empty() {
        out.push_str("DRA devices (PodResources dynamic_resources):\n");
        for holder in &diagnosis.dra_devices {
            let listed: Vec<String> = holder
                .devices
                .iter()
                .map(|d| format!("{}/{}/{} (claim {})", d.driver, d.pool, d.device, d.claim))
                .collect();
            out.push_str(&render::wrap(
                &format!("  {} container {}: ", holder.pod, holder.container),
                "      ",
                &listed.join(", "),
            ));
        }
    }
    if !diagnosis.unknown_uids.is_empty() {
        out.push_str(&render::wrap(
            "UIDs without a listed pod: ",
            "    ",
            &diagnosis.unknown_uids.join(", "),
        ));
    }
    out.push_str(&admit::pod_blocks(started, explained, &diagnosis.results));
    out
}
