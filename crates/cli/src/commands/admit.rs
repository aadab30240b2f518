//! `topoalign admit POD.yaml [more.yaml …]`: would the kubelet admit these
//! pods on this node, in this order, and on what? Per pod: admitted or not,
//! the NUMA affinity, exclusive CPUs (list and cores per NUMA node), memory
//! and huge pages per NUMA node, devices, the QoS class, warnings for silent
//! no-ops; for a rejected pod (or every pod with `--explain`) the
//! explanation with fixes. `-o json|yaml` prints `{"results": [...]}`.
//!
//! Exit status: 0 once every pod was evaluated (admitted or not), 2 for
//! input that cannot be read.

use std::path::PathBuf;

use serde_json::json;
use topoalign_explain::{PodReport, Situation, pod_report};
use topoalign_k8s::{ManifestOptions, ManifestPod, read_manifests};

use super::node_source::{self, BadInput, Events, NodeArgs, ResolvedNode};
use super::render;
use crate::Outcome;

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
    /// Pods made from each workload's template.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub replicas: u32,
    /// Explain every pod, admitted or not.
    #[arg(long)]
    pub explain: bool,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// For people.
    Text,
    /// `{"results": [...]}`: replay's result entries plus qosClass,
    /// affinity, warnings and explanation.
    Json,
    /// The same document as YAML.
    Yaml,
}

pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    run_with(args, args.explain)
}

/// `admit`, with explanations for every pod when `always_explain`.
pub fn run_with(args: &Args, always_explain: bool) -> anyhow::Result<Outcome> {
    let (mut resolved, pods) = match inputs(args) {
        Ok(inputs) => inputs,
        Err(BadInput(message)) => {
            eprintln!("topoalign: {message}");
            return Ok(Outcome::BadInput);
        }
    };
    let reports = admit_all(&mut resolved, &pods, always_explain);
    print(args.output, &resolved, &pods, &reports)?;
    Ok(Outcome::Success)
}

fn inputs(args: &Args) -> Result<(ResolvedNode, Vec<ManifestPod>), BadInput> {
    let resolved = node_source::resolve(&args.node, Events::Replay, None)?;
    let pods = read_pods(&args.pods, args.replicas, "topoalign-admit")?;
    Ok((resolved, pods))
}

/// Every pod of every file, in order; errors name the file.
pub fn read_pods(paths: &[PathBuf], replicas: u32, uid_prefix: &str) -> Result<Vec<ManifestPod>, BadInput> {
    let mut pods = Vec::new();
    for (index, path) in paths.iter().enumerate() {
        let text = node_source::read_text(path)?;
        let options = ManifestOptions {
            replicas,
            uid_prefix: format!("{uid_prefix}-{index}-"),
        };
        let manifests = read_manifests(&text, &options).map_err(|e| BadInput(format!("{}: {e}", path.display())))?;
        for note in &manifests.skipped {
            eprintln!("topoalign: {}: {note}", path.display());
        }
        if manifests.pods.is_empty() {
            return Err(BadInput(format!("{}: no pods in this file", path.display())));
        }
        pods.extend(manifests.pods);
    }
    Ok(pods)
}

/// Admits the pods in order, each on the node as the previous ones left it.
pub fn admit_all(resolved: &mut ResolvedNode, pods: &[ManifestPod], always_explain: bool) -> Vec<PodReport> {
    let mut reports = Vec::with_capacity(pods.len());
    for (event, pod) in pods.iter().enumerate() {
        let before = resolved.node.clone();
        let decision = resolved.node.admit(pod.pod.clone());
        let situation = Situation {
            node: &before,
            kubelet: &resolved.kubelet,
            manifest: &pod.manifest,
            pod: &pod.pod,
        };
        reports.push(pod_report(event, &situation, &decision, always_explain));
    }
    reports
}

fn print(format: Format, resolved: &ResolvedNode, pods: &[ManifestPod], reports: &[PodReport]) -> anyhow::Result<()> {
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&json!({ "results": reports }))?),
        Format::Yaml => print!("{}", serde_yaml_ng::to_string(&json!({ "results": reports }))?),
        Format::Text => print!("{}", text(resolved, pods, reports)),
    }
    Ok(())
}

/// The whole text report.
pub fn text(resolved: &ResolvedNode, pods: &[ManifestPod], reports: &[PodReport]) -> String {
    let mut out = render::wrap("node: ", "    ", &node_source::describe(resolved));
    if !resolved.running_before.is_empty() {
        out.push_str(&render::wrap("running: ", "    ", &resolved.running_before.join(", ")));
    }
    for note in &resolved.notes {
        out.push_str(&render::wrap("note: ", "    ", note));
    }
    out.push_str(&pod_blocks(resolved, pods, reports));
    out
}

/// Each pod's block, after a blank line, in order.
pub fn pod_blocks(resolved: &ResolvedNode, pods: &[ManifestPod], reports: &[PodReport]) -> String {
    let mut out = String::new();
    for (pod, report) in pods.iter().zip(reports) {
        out.push('\n');
        out.push_str(&render::pod_text(
            resolved.node.machine(),
            &pod.pod,
            &pod.origin,
            report,
        ));
    }
    out
}
