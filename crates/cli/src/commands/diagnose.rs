//! `topoalign diagnose`: a live node's (or a copy's) kubelet state, read
//! the way the kubelet reads it — `cpu_manager_state` and
//! `memory_manager_state` decoded and their checksums verified (a mismatch
//! is reported with the kubelet's own error, never ignored), restored into
//! the engine with the kubelet's start-up checks — then the per-NUMA
//! allocation map (who holds which CPUs, memory and devices where) and, for
//! the pods given, the explanation `explain` gives.
//!
//! The machine is this one unless `--node` says otherwise; the kubelet
//! configuration is `DIR/config.yaml` (or `DIR/kubelet-config.yaml`) unless
//! `--kubelet-config` says otherwise; `--pods` (default `DIR/pods.yaml` when
//! present) names the pods behind the state's UIDs.
//!
//! Exit status: 0 for state the kubelet accepts, 2 for state it would
//! refuse (a corrupt or unreadable checkpoint, a failed start-up check) and
//! for input that cannot be read.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use topoalign_engine::{CpuManagerState, MemoryManagerState, NodeSnapshot};
use topoalign_explain::PodReport;
use topoalign_k8s::checkpoint::{CheckpointError, CheckpointKind, CpuCheckpoint, MemoryCheckpoint};
use topoalign_k8s::{ManifestPod, read_manifests};
use topoalign_model::{Container, Pod, QosClass, Quantity, QuantityFormat, ResourceList};

use super::admit::{self, Format};
use super::node_source::{self, BadInput, Events, NodeArgs, ResolvedNode};
use super::render;
use crate::Outcome;

#[derive(clap::Args)]
pub struct Args {
    /// The kubelet's root directory, or a copy of it.
    #[arg(long, value_name = "DIR", default_value = "/var/lib/kubelet")]
    pub kubelet_dir: PathBuf,
    /// The node's pods (`kubectl get pods -o yaml --field-selector
    /// spec.nodeName=NODE`), to name the pods behind the state's UIDs.
    /// Default: DIR/pods.yaml when it exists.
    #[arg(long, value_name = "FILE")]
    pub pods: Option<PathBuf>,
    /// Pods to explain on the node as it is now.
    #[arg(value_name = "POD.yaml")]
    pub explain: Vec<PathBuf>,
    #[command(flatten)]
    pub node: NodeArgs,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// What `diagnose` found.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Diagnosis {
    kubelet_dir: String,
    checkpoints: Vec<CheckpointReport>,
    /// Whether a kubelet restarting with this state on this machine and
    /// configuration would start, and its error if not.
    restart: Restart,
    /// The allocation map as the checkpoints record it, keyed by
    /// `namespace/name` (or the UID of a pod the pod list does not name).
    default_cpu_set: String,
    cpu_assignments: BTreeMap<String, BTreeMap<String, String>>,
    memory_assignments: BTreeMap<String, BTreeMap<String, Vec<usize>>>,
    numa: Vec<NumaAllocation>,
    /// UIDs in the state that the pod list does not name.
    unknown_uids: Vec<String>,
    notes: Vec<String>,
    /// The pods given to explain.
    results: Vec<PodReport>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CheckpointReport {
    file: String,
    present: bool,
    /// Whether the kubelet can restore from it.
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stored_checksum: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    computed_checksum: Option<u64>,
    /// What is wrong, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
    /// What a restarting kubelet says about it.
    #[serde(skip_serializing_if = "Option::is_none")]
    kubelet_error: Option<String>,
}

#[derive(Serialize)]
struct Restart {
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct NumaAllocation {
    node: usize,
    cpus: String,
    /// The shared pool's CPUs on this node.
    shared_pool: String,
    /// The pool's CPUs reserved for the system (never exclusive).
    reserved: String,
    /// Exclusive CPUs: `namespace/name container` → CPUs on this node.
    exclusive: BTreeMap<String, String>,
    /// Per memory resource: allocatable, pinned, free.
    memory: BTreeMap<String, MemoryLine>,
    /// Pinned memory blocks touching this node: `namespace/name container`
    /// → `resource size` (with the group for multi-node blocks).
    pinned: BTreeMap<String, Vec<String>>,
    /// Devices attached to this node: id → holder (`null` = free); empty
    /// when the state could not be restored.
    devices: BTreeMap<String, BTreeMap<String, Option<String>>>,
}

#[derive(Serialize)]
struct MemoryLine {
    allocatable: String,
    reserved: String,
    free: String,
}

pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    match diagnose(args) {
        Ok((diagnosis, text)) => {
            let healthy = diagnosis.restart.ok;
            match args.output {
                Format::Json => println!("{}", serde_json::to_string_pretty(&diagnosis)?),
                Format::Yaml => print!("{}", serde_yaml_ng::to_string(&diagnosis)?),
                Format::Text => print!("{text}"),
            }
            Ok(if healthy { Outcome::Success } else { Outcome::BadInput })
        }
        Err(BadInput(message)) => {
            eprintln!("topoalign: {message}");
            Ok(Outcome::BadInput)
        }
    }
}

fn bytes(n: u64) -> String {
    Quantity::from_units(i128::from(n))
        .with_format(QuantityFormat::BinarySI)
        .to_string()
}

/// Refuses a directory that holds no kubelet state at all: reading it as a
/// kubelet that starts with empty state would answer for a node that was
/// never looked at. (A running kubelet always writes `cpu_manager_state`.)
fn check_kubelet_dir(dir: &Path) -> Result<(), BadInput> {
    if !dir.is_dir() {
        return Err(BadInput(format!("--kubelet-dir {}: not a directory", dir.display())));
    }
    let known = [
        CheckpointKind::Cpu.file_name(),
        CheckpointKind::Memory.file_name(),
        "config.yaml",
        "kubelet-config.yaml",
    ];
    if !known.iter().any(|name| dir.join(name).exists()) {
        return Err(BadInput(format!(
            "--kubelet-dir {}: no kubelet state here (none of {}); give the kubelet's root directory, \
             /var/lib/kubelet on most nodes",
            dir.display(),
            known.join(", ")
        )));
    }
    Ok(())
}

/// The checkpoint files read and checked.
struct Checkpoints {
    reports: Vec<CheckpointReport>,
    cpu: Option<CpuCheckpoint>,
    memory: Option<MemoryCheckpoint>,
}

fn read_checkpoint<T>(
    dir: &Path,
    kind: CheckpointKind,
    parse: impl Fn(&[u8]) -> Result<T, CheckpointError>,
    describe: impl Fn(&T) -> (String, u64, u64),
) -> (CheckpointReport, Option<T>) {
    let path = dir.join(kind.file_name());
    let shown = path.display().to_string();
    let mut report = CheckpointReport {
        file: shown.clone(),
        present: false,
        ok: false,
        policy: None,
        stored_checksum: None,
        computed_checksum: None,
        problem: None,
        kubelet_error: None,
    };
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            report.ok = true;
            report.problem = Some("absent: a kubelet starting now begins with empty state".to_owned());
            return (report, None);
        }
        Err(error) => {
            report.present = true;
            report.problem = Some(format!("cannot be read: {error}"));
            return (report, None);
        }
    };
    report.present = true;
    match parse(&bytes) {
        Ok(checkpoint) => {
            let (policy, stored, computed) = describe(&checkpoint);
            report.ok = true;
            report.policy = Some(policy);
            report.stored_checksum = Some(stored);
            report.computed_checksum = Some(computed);
            (report, Some(checkpoint))
        }
        Err(error) => {
            report.problem = Some(match &error {
                CheckpointError::Corrupt { stored, computed } => format!(
                    "checksum mismatch: the file records {stored}, its content hashes to {computed} — it was \
                     changed after the kubelet wrote it"
                ),
                CheckpointError::Decode(text) if text == "unexpected end of JSON input" => {
                    format!("cut short ({} bytes): {text}", bytes.len())
                }
                other => other.to_string(),
            });
            if let CheckpointError::Corrupt { stored, computed } = &error {
                report.stored_checksum = Some(*stored);
                report.computed_checksum = Some(*computed);
            }
            report.kubelet_error = Some(error.kubelet_start_text(kind, &shown));
            (report, None)
        }
    }
}

/// The state a read checkpoint restores to; one the kubelet would refuse
/// marks its report and adds the kubelet's error.
fn restored_state<C, S>(
    checkpoint: Option<&C>,
    to_state: impl FnOnce(&C) -> Result<S, CheckpointError>,
    kind: CheckpointKind,
    dir: &Path,
    report: &mut CheckpointReport,
    errors: &mut Vec<String>,
) -> Option<S> {
    match to_state(checkpoint?) {
        Ok(state) => Some(state),
        Err(error) => {
            let path = dir.join(kind.file_name()).display().to_string();
            report.ok = false;
            report.problem = Some(error.to_string());
            let text = error.kubelet_start_text(kind, &path);
            report.kubelet_error = Some(text.clone());
            errors.push(text);
            None
        }
    }
}

fn read_checkpoints(dir: &Path) -> Checkpoints {
    let (cpu_report, cpu) = read_checkpoint(dir, CheckpointKind::Cpu, CpuCheckpoint::parse, |c| {
        (c.policy_name.clone(), c.checksum, u64::from(c.computed_checksum()))
    });
    let (memory_report, memory) = read_checkpoint(dir, CheckpointKind::Memory, MemoryCheckpoint::parse, |c| {
        (c.policy_name.clone(), c.checksum, u64::from(c.computed_checksum()))
    });
    Checkpoints {
        reports: vec![cpu_report, memory_report],
        cpu,
        memory,
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
    }
}

fn diagnose(args: &Args) -> Result<(Diagnosis, String), BadInput> {
    let dir = &args.kubelet_dir;
    check_kubelet_dir(dir)?;
    let fallback = ["config.yaml", "kubelet-config.yaml"]
        .iter()
        .map(|name| dir.join(name))
        .find(|path| path.is_file());
    let mut resolved = node_source::resolve(&args.node, Events::Ignore, fallback.as_deref())?;
    let mut notes = std::mem::take(&mut resolved.notes);

    let pods_file = args
        .pods
        .clone()
        .or_else(|| Some(dir.join("pods.yaml")).filter(|p| p.is_file()));
    let listed: Vec<ManifestPod> = match &pods_file {
        Some(path) => {
            let text = node_source::read_text(path)?;
            read_manifests(&text, &Default::default())
                .map_err(|e| BadInput(format!("{}: {e}", path.display())))?
                .pods
        }
        None => {
            notes.push("no pod list (--pods): pods are named by their UIDs".to_owned());
            Vec::new()
        }
    };
    let names: BTreeMap<&str, String> = listed.iter().map(|p| (p.pod.uid.as_str(), p.pod.key())).collect();

    let checkpoints = read_checkpoints(dir);
    let config = resolved.node.config().clone();
    let cpu_policy = match config.cpu_policy {
        topoalign_engine::CpuPolicyName::None => "none",
        topoalign_engine::CpuPolicyName::Static => "static",
    };
    let memory_policy = match config.memory_policy {
        topoalign_engine::MemoryPolicyName::None => "None",
        topoalign_engine::MemoryPolicyName::Static => "Static",
    };
    let mut reports = checkpoints.reports;
    let mut errors: Vec<String> = reports.iter().filter_map(|r| r.kubelet_error.clone()).collect();

    // The restored content, as the kubelet's restoreState takes it.
    let cpu_state = restored_state(
        checkpoints.cpu.as_ref(),
        |c| c.to_state(cpu_policy),
        CheckpointKind::Cpu,
        dir,
        &mut reports[0],
        &mut errors,
    );
    let memory_state = restored_state(
        checkpoints.memory.as_ref(),
        |c| c.to_state(memory_policy),
        CheckpointKind::Memory,
        dir,
        &mut reports[1],
        &mut errors,
    );

    let key_of = |uid: &str| names.get(uid).cloned().unwrap_or_else(|| uid.to_owned());
    for shared in cpu_state.iter().flat_map(|state| state.shared_cpus()) {
        notes.push(format!(
            "warning: {}: CPUs {} are assigned to both {}/{} and {}/{}; the kubelet does not check this, so both \
             containers run on these \"exclusive\" CPUs",
            CheckpointKind::Cpu.file_name(),
            shared.cpus,
            key_of(&shared.first.0),
            shared.first.1,
            key_of(&shared.second.0),
            shared.second.1,
        ));
    }
    let mut state_uids: BTreeSet<String> = BTreeSet::new();
    let mut cpu_assignments = BTreeMap::new();
    if let Some(state) = &cpu_state {
        for (uid, containers) in &state.assignments {
            state_uids.insert(uid.clone());
            let entry: &mut BTreeMap<String, String> = cpu_assignments.entry(key_of(uid)).or_default();
            for (name, cpus) in containers {
                entry.insert(name.clone(), cpus.to_string());
            }
        }
    }
    let mut memory_assignments = BTreeMap::new();
    if let Some(state) = &memory_state {
        for (uid, containers) in &state.assignments {
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
    let snapshot = NodeSnapshot {
        pods,
        cpu: cpu_state.clone().unwrap_or_default(),
        memory: memory_state.clone(),
        devices: Default::default(),
    };
    let usable = errors.is_empty();
    if usable {
        if let Err(error) = resolved.node.restore(snapshot) {
            errors.push(error.to_string());
        } else {
            let device_notes = resolved.node.infer_device_assignments();
            if resolved.node.machine().devices().values().any(|d| !d.is_empty()) {
                notes.push(
                    "device assignments are inferred from the pods' requests and NUMA placement (the device \
                     manager's checkpoint is not read)"
                        .to_owned(),
                );
            }
            notes.extend(device_notes);
        }
    }
    let restart = Restart {
        ok: errors.is_empty(),
        error: errors.first().cloned(),
    };

    let numa = numa_map(
        &resolved,
        cpu_state.as_ref(),
        memory_state.as_ref(),
        &key_of,
        usable && restart.ok,
    );
    let default_cpu_set = cpu_state
        .as_ref()
        .map(|s| s.default_cpu_set.to_string())
        .unwrap_or_default();

    let mut results = Vec::new();
    let mut explained: Vec<ManifestPod> = Vec::new();
    if !args.explain.is_empty() {
        if !restart.ok {
            return Err(BadInput(format!(
                "cannot explain pods on state the kubelet refuses: {}",
                restart.error.clone().unwrap_or_default()
            )));
        }
        explained = admit::read_pods(&args.explain, 1, "topoalign-diagnose")?;
        results = admit::admit_all(&mut resolved, &explained, true);
    }

    let diagnosis = Diagnosis {
        kubelet_dir: dir.display().to_string(),
        checkpoints: reports,
        restart,
        default_cpu_set,
        cpu_assignments,
        memory_assignments,
        numa,
        unknown_uids,
        notes,
        results,
    };
    let text = text(&diagnosis, &resolved, &explained);
    Ok((diagnosis, text))
}

fn numa_map(
    resolved: &ResolvedNode,
    cpu: Option<&CpuManagerState>,
    memory: Option<&MemoryManagerState>,
    key_of: &dyn Fn(&str) -> String,
    restored: bool,
) -> Vec<NumaAllocation> {
    let machine = resolved.node.machine();
    let shared = cpu.map(|s| s.default_cpu_set.clone()).unwrap_or_default();
    let assignments = resolved.node.snapshot().devices;
    let usage = resolved.node.numa_usage();
    machine
        .numa_nodes()
        .iter()
        .map(|numa| {
            let on_node = machine.numa_cpus(numa.id);
            let mut exclusive = BTreeMap::new();
            for (uid, containers) in cpu.map(|s| &s.assignments).into_iter().flatten() {
                for (name, cpus) in containers {
                    let here = cpus.intersection(&on_node);
                    if !here.is_empty() {
                        exclusive.insert(format!("{} {name}", key_of(uid)), here.to_string());
                    }
                }
            }
            let mut memory_lines = BTreeMap::new();
            let mut pinned: BTreeMap<String, Vec<String>> = BTreeMap::new();
            if let Some(state) = memory {
                // The kubelet's own table as its checkpoint records it, shown
                // even when it is refused; a restored node's `numa_usage`
                // agrees with it (the restore checks the table).
                if let Some(node) = state.machine_state.get(&numa.id) {
                    for (resource, table) in &node.memory {
                        if table.allocatable == 0 && table.total == 0 {
                            continue;
                        }
                        memory_lines.insert(
                            resource.clone(),
                            MemoryLine {
                                allocatable: bytes(table.allocatable),
                                reserved: bytes(table.reserved),
                                free: bytes(table.free),
                            },
                        );
                    }
                }
                for (uid, containers) in &state.assignments {
                    for (name, blocks) in containers {
                        for block in blocks.iter().filter(|b| b.numa_affinity.contains(&numa.id)) {
                            let group = if block.numa_affinity.len() > 1 {
                                let ids: Vec<String> = block.numa_affinity.iter().map(ToString::to_string).collect();
                                format!(" (shared by NUMA {})", ids.join("+"))
                            } else {
                                String::new()
                            };
                            pinned
                                .entry(format!("{} {name}", key_of(uid)))
                                .or_default()
                                .push(format!("{} {}{group}", block.resource, bytes(block.size)));
                        }
                    }
                }
            }
            let mut devices: BTreeMap<String, BTreeMap<String, Option<String>>> = BTreeMap::new();
            // Who holds a device is only known once the state is restored.
            for (resource, list) in machine.devices().iter().filter(|_| restored) {
                for device in list.iter().filter(|d| d.numa.contains(&numa.id)) {
                    let holder = restored
                        .then(|| {
                            assignments.iter().find_map(|(uid, containers)| {
                                containers.iter().find_map(|(name, by_resource)| {
                                    by_resource
                                        .get(resource)
                                        .is_some_and(|ids| ids.contains(&device.id))
                                        .then(|| format!("{} {name}", key_of(uid)))
                                })
                            })
                        })
                        .flatten();
                    devices
                        .entry(resource.clone())
                        .or_default()
                        .insert(device.id.clone(), holder);
                }
            }
            let pool = shared.intersection(&on_node);
            let reserved = usage
                .iter()
                .find(|u| u.numa == numa.id)
                .filter(|_| restored)
                .map(|u| pool.intersection(&u.reserved_cpus).to_string())
                .unwrap_or_default();
            NumaAllocation {
                node: numa.id,
                cpus: on_node.to_string(),
                shared_pool: pool.to_string(),
                reserved,
                exclusive,
                memory: memory_lines,
                pinned,
                devices,
            }
        })
        .collect()
}

fn text(diagnosis: &Diagnosis, resolved: &ResolvedNode, explained: &[ManifestPod]) -> String {
    let mut out = render::wrap("kubelet state in ", "    ", &diagnosis.kubelet_dir);
    out.push_str(&render::wrap("node: ", "    ", &node_source::describe(resolved)));
    out.push_str(&render::wrap(
        "kubelet configuration: ",
        "    ",
        &resolved.kubelet_source,
    ));
    for report in &diagnosis.checkpoints {
        let name = Path::new(&report.file)
            .file_name()
            .map_or(report.file.clone(), |n| n.to_string_lossy().into_owned());
        let line = match (&report.problem, &report.policy) {
            (None, Some(policy)) => format!(
                "policy {policy}, checksum {} verified",
                report.stored_checksum.map_or_else(String::new, |c| c.to_string())
            ),
            (Some(problem), _) if report.ok => problem.clone(),
            (Some(problem), _) => format!("UNUSABLE: {problem}"),
            (None, None) => "read".to_owned(),
        };
        out.push_str(&render::wrap(&format!("  {name}: "), "      ", &line));
        if let Some(error) = &report.kubelet_error {
            out.push_str(&render::wrap("      the kubelet says: ", "        ", error));
        }
    }
    match &diagnosis.restart.error {
        None => out.push_str("  restart check: a kubelet restarting with this state on this node starts\n"),
        Some(error) => out.push_str(&render::wrap(
            "  restart check: FAILS — the kubelet would not start: ",
            "      ",
            error,
        )),
    }
    for note in &diagnosis.notes {
        out.push_str(&render::wrap("  note: ", "      ", note));
    }
    out.push('\n');
    let cpu_usable = diagnosis.checkpoints.first().is_some_and(|c| c.ok);
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
    if !diagnosis.unknown_uids.is_empty() {
        out.push_str(&render::wrap(
            "UIDs without a listed pod: ",
            "    ",
            &diagnosis.unknown_uids.join(", "),
        ));
    }
    out.push_str(&admit::pod_blocks(resolved, explained, &diagnosis.results));
    out
}
