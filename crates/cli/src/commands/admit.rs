//! `topoalign admit POD.yaml [more.yaml …]`: would the kubelet admit these
//! pods on this node, in this order, and on what? Per pod: admitted or not,
//! the NUMA affinity, exclusive CPUs (list and cores per NUMA node), memory
//! and huge pages per NUMA node, devices, the QoS class, warnings for silent
//! no-ops; for a rejected pod (or every pod with `--explain`) the
//! explanation with fixes. `-o json|yaml` prints `{"results": [...]}`.
//!
//! Exit status: 0 when every pod is admitted, 3 when any is not admitted —
//! rejected, or a pod the kubelet crashes on (the report is printed either
//! way), 2 for input that cannot be read.
//!
//! NUMA ids are the machine's own, 64 and more too (a machine read with
//! labels; the reports' ids are labelled by explain, the machine's by
//! `render`). Where the kubelet crashes (a `KubeletPanic`: such an id under
//! a topology policy other than `none`, or the Static memory manager's
//! default hint under `none`) the pod's verdict says so with the panic's
//! text, and the pods after it are not reached, as the kubelet stops there;
//! explain's warnings say which policies crash such a machine.

use std::path::PathBuf;

use serde_json::json;
use topoalign_explain::dra::DraExplanation;
use topoalign_explain::{PodReport, admit_all};
use topoalign_intake::{Events, StartedNode, read_pods};
use topoalign_k8s::ManifestPod;

use super::node_args::{self, NodeArgs};
use super::output::Output;
use super::{Outcome, Result, render};

#[derive(clap::Args)]
pub struct Args {
    /// Pod manifests: Pods, `v1 List`s (`kubectl get -o yaml`), workloads
    /// (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob) by
    /// their pod template; several YAML documents per file; `-` reads
    /// standard input. Pods are admitted in order onto the same node.
    #[arg(required = true, value_name = "POD.yaml")]
    pub pods: Vec<PathBuf>,
    #[command(flatten)]
    pub node: NodeArgs,
    /// Pods made from each workload's template [default: the workload's
    /// own `spec.replicas` (a Job's `parallelism`), 1 when it has none].
    #[arg(long, value_name = "N")]
    pub replicas: Option<u32>,
    /// Explain every pod, admitted or not.
    #[arg(long)]
    pub explain: bool,
    /// The cluster's Dynamic Resource Allocation objects (DeviceClass,
    /// ResourceSlice, ResourceClaim, ResourceClaimTemplate, the Node;
    /// YAML documents or `kubectl get -o yaml` Lists): pods' claims are
    /// allocated as the scheduler would and shown beside the kubelet's
    /// NUMA nodes, with fixes. A node scenario's `dra:` block is read too.
    #[arg(long, value_name = "FILE")]
    pub dra: Option<PathBuf>,
    #[command(flatten)]
    pub output: Output<DocumentFormat>,
}

#[derive(Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DocumentFormat {
    /// For people (the default).
    #[default]
    Text,
    /// One JSON document: admit and explain give `{"results": [...]}`,
    /// replay's result entries plus qosClass, affinity, warnings and
    /// explanation; `explain pod/NAME` every node's answer; diagnose the
    /// kubelet state it read; nodes `{"nodes": [...]}`.
    Json,
    /// The same document as YAML.
    Yaml,
}

pub fn run(args: &Args) -> Result {
    run_with(args, args.explain)
}

/// `admit`, with explanations for every pod when `always_explain`.
pub fn run_with(args: &Args, always_explain: bool) -> Result {
    let mut started = args.node.start(Events::Replay, None)?;
    // The node's notes — its start hazards among them (a kubelet that
    // starts but crashes later) — are in the text report; beside a
    // document they go to standard error.
    if args.output.format() != DocumentFormat::Text {
        for note in &started.notes {
            eprintln!("topoalign: note: {note}");
        }
    }
    let pods = read_replicas(args, &mut started)?;
    for note in &pods.skipped {
        eprintln!("topoalign: {note}");
    }
    let dra_state = super::dra_input::dra_state(args.node.node.as_deref(), args.dra.as_deref(), &started)?;
    let before = dra_state.as_ref().map(|_| started.node.clone());
    let mut reports = admit_all(&mut started.node, &started.kubelet, &pods.pods, always_explain);
    let not_reached = stop_at_crash(&mut reports);
    let dra = match (dra_state, before) {
        (Some(mut state), Some(before)) => {
            topoalign_explain::dra::explain_all(&before, &started.kubelet, &pods.pods, &mut state)
                .map_err(|(index, error)| super::Error::bad_input(format!("{}: {error}", pods.pods[index].origin)))?
        }
        _ => {
            let with_claims = pods.pods.iter().filter(|pod| {
                pod.manifest
                    .pointer("/spec/resourceClaims")
                    .and_then(|claims| claims.as_array())
                    .is_some_and(|claims| !claims.is_empty())
            });
            for pod in with_claims {
                eprintln!(
                    "topoalign: {}: its resourceClaims are not explained: give the cluster's DRA objects with \
                     --dra FILE (or a node scenario with a dra: block)",
                    pod.origin
                );
            }
            Vec::new()
        }
    };
    let text = match args.output.format() {
        DocumentFormat::Json => serde_json::to_string_pretty(&json!({ "results": documents(&reports, &dra)? }))? + "\n",
        DocumentFormat::Yaml => serde_yaml_ng::to_string(&json!({ "results": documents(&reports, &dra)? }))?,
        DocumentFormat::Text => {
            let mut text = text(&started, &pods.pods, &reports, &dra);
            if let Some(note) = &not_reached {
                text.push('\n');
                text.push_str(&render::wrap("not reached: ", "    ", note));
            }
            text
        }
    };
    if let (Some(note), false) = (&not_reached, args.output.format() == DocumentFormat::Text) {
        eprintln!("topoalign: not reached: {note}");
    }
    args.output.write(text.as_bytes())?;
    if reports.iter().all(|report| report.admitted) {
        Ok(Outcome::Success)
    } else {
        Ok(Outcome::Rejected)
    }
}

/// Cuts the reports after the first pod the kubelet crashes on: the
/// kubelet stops there (and, restarted, admits that pod again and crashes
/// again while it is bound to the node), so the pods after it are never
/// answered. Returns what to tell people about them.
fn stop_at_crash(reports: &mut Vec<PodReport>) -> Option<String> {
    let crash = reports.iter().position(render::kubelet_crashes)?;
    let later: Vec<String> = reports[crash + 1..].iter().map(|r| r.pod.clone()).collect();
    reports.truncate(crash + 1);
    (!later.is_empty()).then(|| {
        format!(
            "{} (the kubelet crashed admitting {}; it stops there, and once restarted it admits that pod again \
             and crashes again while the pod is bound to this node)",
            later.join(", "),
            reports[crash].pod
        )
    })
}

/// The reports as documents, each with its pod's DRA explanation (`dra`)
/// when it has one.
fn documents(reports: &[PodReport], dra: &[Option<DraExplanation>]) -> Result<Vec<serde_json::Value>> {
    let mut out = Vec::with_capacity(reports.len());
    for (index, report) in reports.iter().enumerate() {
        let mut value = serde_json::to_value(report)?;
        if let (Some(Some(explanation)), Some(object)) = (dra.get(index), value.as_object_mut()) {
            object.insert("dra".to_owned(), serde_json::to_value(explanation)?);
        }
        out.push(value);
    }
    Ok(out)
}

/// The whole text report.
fn text(started: &StartedNode, pods: &[ManifestPod], reports: &[PodReport], dra: &[Option<DraExplanation>]) -> String {
    let mut out = render::wrap("node: ", "    ", &node_args::describe(started));
    if !started.running_before.is_empty() {
        out.push_str(&render::wrap("running: ", "    ", &started.running_before.join(", ")));
    }
    for note in &started.notes {
        out.push_str(&render::wrap("note: ", "    ", note));
    }
    if dra.is_empty() {
        out.push_str(&pod_blocks(started, pods, reports));
    } else {
        for (index, (pod, report)) in pods.iter().zip(reports).enumerate() {
            out.push('\n');
            out.push_str(&render::pod_text(started.node.machine(), &pod.pod, &pod.origin, report));
            if let Some(Some(explanation)) = dra.get(index) {
                out.push_str(&super::dra_input::dra_text(explanation));
            }
        }
    }
    out
}

/// Each pod's block, after a blank line, in order.
pub fn pod_blocks(started: &StartedNode, pods: &[ManifestPod], reports: &[PodReport]) -> String {
    let mut out = String::new();
    for (pod, report) in pods.iter().zip(reports) {
        out.push('\n');
        out.push_str(&render::pod_text(started.node.machine(), &pod.pod, &pod.origin, report));
    }
    out
}

/// The warnings of pod-level `spec.resources` dropped while reading, among
/// the node's notes (and on stderr when the output is not text).
fn note_dropped(args: &Args, started: &mut StartedNode, pods: &topoalign_intake::Pods) {
    for note in &pods.notes {
        if args.output.format() != DocumentFormat::Text {
            eprintln!("topoalign: note: {note}");
        }
        started.notes.push(note.clone());
    }
}

/// The pods to admit, reading `--replicas N` at most `maxPods + 1` times
/// per workload. A node holds at most `maxPods` pods (the kubelet rejects
/// the next with `OutOfpods`), so among that many replicas one is
/// rejected; a rejection changes nothing on the node, and the replicas of
/// a workload differ only in name and uid, so every later replica would be
/// rejected exactly as the one before it. They are counted in a note
/// instead of made: `--replicas 1000000` (the most [`read_pods`] reads)
/// answers in the time and memory of `maxPods + 1` pods, and later files
/// are admitted onto the same node as if they had been made.
fn read_replicas(args: &Args, started: &mut StartedNode) -> Result<topoalign_intake::Pods> {
    const UIDS: &str = "topoalign-admit";
    // The node's release and gates decide whether pod-level resources are
    // kept, as `replay` decides it.
    let pod_level = topoalign_k8s::PodLevelField::of_kubelet(&started.kubelet);
    let Some(asked) = args.replicas else {
        let pods = read_pods(&args.pods, None, UIDS, pod_level)?;
        note_dropped(args, started, &pods);
        return Ok(pods);
    };
    if !usize::try_from(asked).is_ok_and(|asked| asked <= topoalign_k8s::MAX_PODS) {
        return Err(super::Error::bad_input(format!(
            "--replicas {asked}: at most {} pods are read, replicas included",
            topoalign_k8s::MAX_PODS
        )));
    }
    let max_pods = started.node.config().max_pods;
    let made = asked.min(max_pods.saturating_add(1));
    let pods = read_pods(&args.pods, Some(made), UIDS, pod_level)?;
    note_dropped(args, started, &pods);
    if made < asked {
        let note = format!(
            "replicas {made}-{} of each workload ({} pods each) are not made: this node holds at most {max_pods} \
             pods (maxPods), so replica {} is rejected, and each later one would be rejected alike (a rejection \
             changes nothing on the node)",
            asked - 1,
            asked - made,
            made - 1
        );
        if args.output.format() != DocumentFormat::Text {
            eprintln!("topoalign: note: {note}");
        }
        started.notes.push(note);
    }
    Ok(pods)
}
