//! `topoalign simulate FLEET WORKLOAD`: place a workload over a fleet under
//! each topology-manager policy with three schedulers side by side, and
//! report admission failures, never-placed pods, stranded capacity and
//! fragmentation — as a table, JSON (`-o json`) and charts (`--plot`).

use std::io::IsTerminal;
use std::path::PathBuf;

use comfy_table::{Table, presets::UTF8_FULL};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use topoalign_engine::{TopologyPolicyName, TopologyScope};
use topoalign_fleet::{Options, Report, Scheduler, Scoring, Workload, replay_check, simulate};
use topoalign_intake::{read_fleet, read_text};

use super::node_args::kubelet_name;
use super::output::Output;
use super::{Error, Outcome, Result};

#[derive(clap::Args)]
pub struct Args {
    /// The fleet file (JSON or YAML): `{"nodes": [{"name", "count",
    /// "topology", "kubelet"} | {"name", "count", "scenario": PATH}]}`.
    fleet: PathBuf,
    #[command(flatten)]
    version: super::node_args::KubeletVersionArg,
    /// The workload: Kubernetes YAML/JSON (Pods, Deployments, StatefulSets,
    /// Jobs, ReplicaSets, v1 Lists) or a `generator:` document; `-` reads
    /// standard input.
    workload: PathBuf,
    /// Topology manager policies to compare (default: all four).
    #[arg(long = "policy", value_delimiter = ',', value_parser = kubelet_name::<TopologyPolicyName>(TopologyPolicyName::NAMES))]
    policies: Vec<TopologyPolicyName>,
    /// Scopes to compare (default: each node shape's own).
    #[arg(long = "scope", value_delimiter = ',', value_parser = kubelet_name::<TopologyScope>(TopologyScope::NAMES))]
    scopes: Vec<TopologyScope>,
    /// Schedulers to compare (default: all three).
    #[arg(long = "scheduler", value_enum, value_delimiter = ',')]
    schedulers: Vec<SchedulerArg>,
    /// How the schedulers rank the nodes that pass their filter.
    #[arg(long, value_enum, default_value_t = ScoringArg::LeastAllocated)]
    scoring: ScoringArg,
    /// Mix the workload's pods with this seed instead of file order.
    #[arg(long, value_name = "SEED")]
    shuffle: Option<u64>,
    #[command(flatten)]
    output: Output<ReportFormat>,
    /// Write charts to this file (.png or .svg); may be repeated.
    #[arg(long, value_name = "FILE")]
    plot: Vec<PathBuf>,
    /// Replay every run's placements node by node through fresh engine
    /// nodes and report the admission failures found.
    #[arg(long)]
    verify: bool,
    /// Worker threads (default: the machine's parallelism).
    #[arg(long)]
    threads: Option<usize>,
    /// Publish the fleet's device-plugin resource RESOURCE through DRA by
    /// the driver DRIVER instead (as `simulate-nodes --dra`; added to the
    /// fleet file's `dra.drivers`); may be repeated.
    #[arg(long = "dra", value_name = "RESOURCE=DRIVER")]
    dra: Vec<topoalign_fleet::dra::DraResource>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum SchedulerArg {
    Unaware,
    Nrt,
    Exact,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum ScoringArg {
    LeastAllocated,
    MostAllocated,
}

#[derive(Clone, Copy, Default, clap::ValueEnum)]
enum ReportFormat {
    /// A table for people (the default).
    #[default]
    Table,
    /// The report document.
    Json,
}

pub fn run(args: &Args) -> Result {
    let mut fleet = read_fleet(&args.fleet, args.version.kubelet_version)?;
    if !args.dra.is_empty() {
        fleet
            .dra
            .get_or_insert_with(Default::default)
            .add_drivers(&args.dra)
            .map_err(|e| Error::bad_input(format!("{}: {e}", args.fleet.display())))?;
    }
    let text = read_text(&args.workload)?;
    let mut workload = Workload::parse(&text)
        .map_err(|e| Error::bad_input(format!("invalid workload: {}: {e}", args.workload.display())))?;
    if fleet.dra.is_none()
        && let Some(i) = (0..workload.pods.len()).find(|&i| !workload.claims_of(i).is_empty())
    {
        return Err(Error::bad_input(format!(
            "{}: pod {} takes DRA claims (spec.resourceClaims), and the fleet {} has no `dra:` block \
             (its drivers, DeviceClasses and ResourceClaimTemplates; docs/simulate.md)",
            args.workload.display(),
            workload.pods[i].key(),
            args.fleet.display()
        )));
    }
    if let Some(seed) = args.shuffle {
        workload.shuffle(seed);
    }
    let options = options(args);
    let runs = options.policies.len() * options.scopes.as_ref().map_or(1, Vec::len) * options.schedulers.len();
    let progress = progress_bar((runs * workload.events.len()) as u64);
    let tick = |n: u64| progress.inc(n);
    let simulation = simulate(&fleet, &workload, &options, &tick);
    progress.finish_and_clear();
    let simulation =
        simulation.map_err(|e| Error::bad_input(format!("{}: invalid fleet: {e}", args.fleet.display())))?;

    let mut report = simulation.report;
    if args.verify {
        for ((run, key), logs) in report.runs.iter_mut().zip(&simulation.keys).zip(&simulation.logs) {
            if let Some(logs) = logs {
                let counts = replay_check(&fleet, &workload, key, logs).map_err(anyhow::Error::msg)?;
                run.replay_rejected_at_admission = Some(counts.rejected);
            }
        }
    }
    for path in &args.plot {
        crate::plot::write(path, &report.runs)?;
    }
    let text = match args.output.format() {
        ReportFormat::Json => serde_json::to_string_pretty(&report)? + "\n",
        ReportFormat::Table => render_table(&report, args.verify),
    };
    args.output.write(text.as_bytes())?;
    Ok(Outcome::Success)
}

fn options(args: &Args) -> Options {
    let mut options = Options::default();
    if !args.policies.is_empty() {
        options.policies.clone_from(&args.policies);
    }
    if !args.scopes.is_empty() {
        options.scopes = Some(args.scopes.clone());
    }
    if !args.schedulers.is_empty() {
        options.schedulers = args
            .schedulers
            .iter()
            .map(|s| match s {
                SchedulerArg::Unaware => Scheduler::Unaware,
                SchedulerArg::Nrt => Scheduler::Nrt,
                SchedulerArg::Exact => Scheduler::Exact,
            })
            .collect();
    }
    options.scoring = match args.scoring {
        ScoringArg::LeastAllocated => Scoring::LeastAllocated,
        ScoringArg::MostAllocated => Scoring::MostAllocated,
    };
    options.threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    options.keep_logs = args.verify;
    options
}

/// A progress bar on standard error, hidden when that is not a terminal.
fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    if !std::io::stderr().is_terminal() {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    if let Ok(style) = ProgressStyle::with_template("{spinner} simulating [{bar:40}] {percent}% ({eta} left)") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

fn render_table(report: &Report, verify: bool) -> String {
    let mut table = Table::new();
    table.load_style(UTF8_FULL);
    let mut header = vec![
        "policy",
        "scope",
        "scheduler",
        "scheduled",
        "rejected at admission",
        "never placed",
        "stranded CPUs",
        "stranded memory",
        "stranded devices",
        "CPU fragmentation",
        "memory fragmentation",
    ];
    let dra = report.runs.iter().any(|r| r.dra_pods > 0);
    if dra {
        header.push("DRA misaligned");
    }
    if verify {
        header.push("replayed rejections");
    }
    table.set_header(header);
    for run in &report.runs {
        let devices: Vec<String> = run
            .stranded_devices
            .iter()
            .filter(|(_, n)| **n > 0.0)
            .map(|(r, n)| format!("{n:.0} {r}"))
            .collect();
        let mut row = vec![
            run.policy.clone(),
            run.scope.clone(),
            run.scheduler.clone(),
            run.scheduled.to_string(),
            run.rejected_at_admission.to_string(),
            run.unplaced.to_string(),
            format!("{:.1}", run.stranded_cpus),
            topoalign_model::human_bytes(run.stranded_memory_bytes as u64),
            devices.join(", "),
            format!("{:.0}%", run.fragmentation.cpu * 100.0),
            format!("{:.0}%", run.fragmentation.memory * 100.0),
        ];
        if dra {
            row.push(format!("{} of {}", run.dra_misaligned, run.dra_pods));
        }
        if verify {
            row.push(
                run.replay_rejected_at_admission
                    .map_or(String::new(), |n| n.to_string()),
            );
        }
        table.add_row(row);
    }
    let mut out = format!(
        "{} nodes, {} pods ({} events)\n{table}\n",
        report.nodes, report.pods, report.events
    );
    for (kind, count) in &report.skipped {
        out.push_str(&format!("skipped {count} {kind} document(s): not a workload\n"));
    }
    out.push_str(&failure_reasons(report));
    out.push_str(&dra_misaligned(report));
    out
}

/// Per run with misaligned DRA pods, the first few (all of them in
/// `-o json`: `draMisalignedPods`).
fn dra_misaligned(report: &Report) -> String {
    const SHOWN: usize = 3;
    let mut out = String::new();
    for run in report.runs.iter().filter(|r| r.dra_misaligned > 0) {
        if out.is_empty() {
            out.push_str(
                "DRA devices off the NUMA nodes the kubelet pinned the pod's CPUs and memory to, of \
                 the DRA pods (with claims, or extended resources DRA serves; -o json names each pod):\n",
            );
        }
        out.push_str(&format!(
            "  {} / {} / {}: {} of {} DRA pods\n",
            run.policy, run.scope, run.scheduler, run.dra_misaligned, run.dra_pods
        ));
        for pod in run.dra_misaligned_pods.iter().take(SHOWN) {
            let numa: Vec<String> = pod.kubelet_numa_nodes.iter().map(usize::to_string).collect();
            out.push_str(&format!(
                "    {} on {}: {} (CPUs and memory on NUMA node {})\n",
                pod.pod,
                pod.node,
                pod.devices.join(", "),
                numa.join(",")
            ));
        }
        if run.dra_misaligned_pods.len() > SHOWN {
            out.push_str(&format!("    … and {} more\n", run.dra_misaligned_pods.len() - SHOWN));
        }
    }
    out
}

/// Per run with failures, why: the same words as `rejectionReasons` /
/// `unplacedReasons` and each pod's `reason` in `-o json`.
fn failure_reasons(report: &Report) -> String {
    let counts = |reasons: &std::collections::BTreeMap<String, usize>| {
        reasons
            .iter()
            .map(|(reason, n)| format!("{n} {reason}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = String::new();
    for run in &report.runs {
        let mut parts = Vec::new();
        if !run.rejection_reasons.is_empty() {
            parts.push(format!("rejected at admission: {}", counts(&run.rejection_reasons)));
        }
        if !run.unplaced_reasons.is_empty() {
            parts.push(format!("never placed: {}", counts(&run.unplaced_reasons)));
        }
        if parts.is_empty() {
            continue;
        }
        if out.is_empty() {
            out.push_str("why pods failed (-o json names each pod):\n");
        }
        out.push_str(&format!(
            "  {} / {} / {}: {}\n",
            run.policy,
            run.scope,
            run.scheduler,
            parts.join("; ")
        ));
    }
    out
}
