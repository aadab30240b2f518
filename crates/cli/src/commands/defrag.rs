//! `topoalign defrag [FLEET] [--kubeconfig FILE | --context NAME |
//! --cluster] [--evict]`: for the pods waiting for a node, the fewest
//! evictions after which the kubelet's exact model admits them, each plan
//! verified by replaying it, and the capacity stranded per NUMA node
//! (`topoalign_defrag`). Offline on a fleet document by default; on a live
//! cluster it reads the nodes' exact states (`topoalign_cluster`), and with
//! `--evict` carries the plan out through the Eviction API.
//!
//! Exit codes: 0 every pending pod has a verified plan (and, with
//! `--evict`, every eviction went through); 3 some pending pods have no
//! plan (the others' plan is printed, verified, and with `--evict`
//! carried out); 1 the replay did not verify the plan (nothing is
//! evicted) or an eviction was refused; 2 bad input.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use topoalign_defrag::plan::{Outcome as PodOutcome, Stranded};
use topoalign_defrag::{Limits, Plan, parse_document, plan};
use topoalign_model::human_bytes;

use super::output::Output;
use super::{Error, Outcome, Result};

#[derive(clap::Args)]
pub struct Args {
    /// The fleet document (JSON or YAML): a fleet file (as `simulate`
    /// reads it) with `pods` (Pod manifests; `spec.nodeName` for running
    /// pods, none for pending ones), `disruptionBudgets` and
    /// `priorityClasses` (docs/defrag.md).
    #[arg(required_unless_present_any = ["kubeconfig", "context", "cluster"],
          conflicts_with_all = ["kubeconfig", "context", "cluster"])]
    fleet: Option<PathBuf>,
    /// Read a live cluster through this kubeconfig.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// Read a live cluster through this context of the kubeconfig.
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
    /// Read the live cluster of the usual places ($KUBECONFIG, else
    /// ~/.kube/config, else the in-cluster service account).
    #[arg(long)]
    cluster: bool,
    /// Plan for the pending pods of this namespace only (live; default:
    /// every namespace).
    #[arg(short = 'n', long, value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// Carry the plan out: one Eviction (policy/v1) per planned eviction,
    /// after the replay verified the plan; then wait until the evicted pods
    /// are gone. Live mode only; without it nothing is changed.
    #[arg(long)]
    evict: bool,
    /// Seconds to wait for the evicted pods to be gone.
    #[arg(long, value_name = "SECONDS", default_value_t = 120)]
    wait_timeout: u64,
    /// Engine trials (admissions on a rebuilt node) the search may spend
    /// in all; past it, greedy sets are taken (said in the output).
    #[arg(long, default_value_t = Limits::default().max_trials)]
    max_trials: u64,
    /// The largest eviction set the exhaustive search tries for one pod.
    #[arg(long, default_value_t = Limits::default().max_victims)]
    max_victims: usize,
    #[command(flatten)]
    output: Output<Format>,
}

#[derive(Clone, Copy, Default, clap::ValueEnum)]
enum Format {
    /// For people (the default).
    #[default]
    Table,
    /// The plan document.
    Json,
}

pub fn run(args: &Args) -> Result {
    let limits = Limits {
        max_trials: args.max_trials,
        max_victims: args.max_victims,
    };
    match &args.fleet {
        Some(path) => {
            if args.evict {
                return Err(Error::bad_input(
                    "--evict carries a plan out on a live cluster: give --kubeconfig, --context or --cluster instead of a fleet file",
                ));
            }
            let text = topoalign_intake::read_text(path)?;
            let base = path.parent().map(std::path::Path::to_path_buf).unwrap_or_default();
            let (state, pending) = parse_document(&text, |scenario| {
                let scenario = base.join(scenario);
                std::fs::read_to_string(&scenario).map_err(|e| format!("cannot read {}: {e}", scenario.display()))
            })
            .map_err(|e| Error::bad_input(format!("{}: {e}", path.display())))?;
            let plan = plan(&state, &pending, &limits);
            print(args, &plan, &[], None)?;
            Ok(exit(&plan, None))
        }
        None => live(args, &limits),
    }
}

fn live(args: &Args, limits: &Limits) -> Result {
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(async {
        let connection = topoalign_defrag::live::cluster::Connection {
            kubeconfig: args.kubeconfig.clone(),
            context: args.context.clone(),
            namespace: args.namespace.clone(),
        };
        let client = connection
            .connect()
            .await
            .map_err(|e| Error::bad_input(e.to_string()))?;
        let snapshot = topoalign_defrag::live::cluster::read(&client.client)
            .await
            .map_err(|e| Error::Failed(e.into()))?;
        let budgets = topoalign_defrag::live::read_budgets(&client.client)
            .await
            .map_err(anyhow::Error::from)?;
        let (state, pending, left_out) =
            topoalign_defrag::live::from_snapshot(&snapshot, &budgets, args.namespace.as_deref())
                .map_err(|e| Error::bad_input(e.to_string()))?;
        let plan = plan(&state, &pending, limits);
        if !args.evict {
            print(args, &plan, &left_out, None)?;
            return Ok(exit(&plan, None));
        }
        if !plan.verification.verified {
            print(args, &plan, &left_out, None)?;
            return Err(Error::Failed(anyhow::anyhow!(
                "the replay did not verify the plan; nothing evicted"
            )));
        }
        let evicted = topoalign_defrag::live::evict(&client.client, &plan.evictions).await;
        let all_went = evicted.len() == plan.evictions.len() && evicted.iter().all(|e| e.ok);
        let wait = Duration::from_secs(args.wait_timeout);
        let left = if all_went {
            topoalign_defrag::live::wait_gone(&client.client, &plan.evictions, wait)
                .await
                .map_err(anyhow::Error::from)?
        } else {
            Vec::new()
        };
        // The scheduler retried the pending pods when the evicted ones were
        // deleted, on the nodes' old published state: once the new state
        // is out, a change to each pod makes it try again.
        let (unpublished, nudged) = if all_went && left.is_empty() {
            let behind = topoalign_defrag::live::wait_published(&client.client, &plan.evictions, wait)
                .await
                .map_err(anyhow::Error::from)?;
            let nudged =
                topoalign_defrag::live::nudge(&client.client, &plan.evictions, Duration::from_secs(3), wait).await;
            (behind, Some(nudged))
        } else {
            (Vec::new(), None)
        };
        let report = EvictReport {
            evicted,
            still_there: left,
            unpublished,
            pods: nudged,
        };
        print(args, &plan, &left_out, Some(&report))?;
        Ok(exit(&plan, Some(&report)))
    })
}

/// What `--evict` did.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct EvictReport {
    evicted: Vec<topoalign_defrag::live::Evicted>,
    /// Evicted pods not gone within `--wait-timeout`.
    still_there: Vec<String>,
    /// Freed nodes whose published state still held an evicted pod after
    /// `--wait-timeout` (the scheduler may refuse them until it changes).
    unpublished: Vec<String>,
    /// The pods the room was made for: bound, or not within
    /// `--wait-timeout` (asked again every 3 s through the annotation
    /// `topoalign.io/defrag`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pods: Option<topoalign_defrag::live::Nudged>,
}

fn exit(plan: &Plan, report: Option<&EvictReport>) -> Outcome {
    let refused = report.is_some_and(|r| r.evicted.iter().any(|e| !e.ok) || !r.still_there.is_empty());
    if !plan.verification.verified || refused {
        Outcome::Exit(1)
    } else if plan.pods.iter().any(|p| matches!(p.outcome, PodOutcome::NoPlan { .. })) {
        Outcome::Rejected
    } else {
        Outcome::Success
    }
}

fn print(args: &Args, plan: &Plan, left_out: &[String], report: Option<&EvictReport>) -> Result<()> {
    let text = match args.output.format() {
        Format::Json => {
            let mut value = serde_json::to_value(plan)?;
            if let serde_json::Value::Object(map) = &mut value {
                if !left_out.is_empty() {
                    map.insert("nodesLeftOut".into(), serde_json::to_value(left_out)?);
                }
                if let Some(report) = report {
                    map.insert("evicted".into(), serde_json::to_value(report)?);
                }
            }
            serde_json::to_string_pretty(&value)? + "\n"
        }
        Format::Table => render(plan, left_out, report),
    };
    args.output.write(text.as_bytes())?;
    Ok(())
}

/// The plan for people.
fn render(plan: &Plan, left_out: &[String], report: Option<&EvictReport>) -> String {
    let mut out = String::new();
    let planned = plan
        .pods
        .iter()
        .filter(|p| !matches!(p.outcome, PodOutcome::NoPlan { .. }))
        .count();
    let _ = writeln!(
        out,
        "{} pending pods, {planned} with a plan; {} evictions.",
        plan.pods.len(),
        plan.evictions.len()
    );
    for pod in &plan.pods {
        let line = match &pod.outcome {
            PodOutcome::FitsAsIs { node } => format!("fits {node} as is"),
            PodOutcome::AfterEvictions {
                node,
                evict,
                proven_smallest,
            } => format!(
                "fits {node} after evicting {}{}",
                evict.join(", "),
                if *proven_smallest {
                    " (no smaller set exists)"
                } else {
                    " (greedy: the search gave up before ruling out a smaller set)"
                }
            ),
            PodOutcome::NoPlan { reason } => format!("no plan: {reason}"),
        };
        let _ = writeln!(out, "  {} (priority {}): {line}", pod.pod, pod.priority);
    }
    if !plan.evictions.is_empty() {
        let _ = writeln!(out, "Evictions, in order:");
        for e in &plan.evictions {
            let _ = writeln!(
                out,
                "  {} on {} (priority {}) for {}",
                e.pod, e.node, e.priority, e.for_pod
            );
        }
    }
    let v = &plan.verification;
    if v.verified {
        let _ = writeln!(
            out,
            "Verified by replay: {} evictions, then {} pods admitted by the engine.",
            v.evictions_replayed, v.admitted
        );
    } else {
        let _ = writeln!(out, "NOT VERIFIED by replay:");
        for problem in &v.problems {
            let _ = writeln!(out, "  {problem}");
        }
    }
    let s = &plan.search;
    let _ = writeln!(
        out,
        "Search: {} trials of at most {}, sets of up to {} pods tried exhaustively{}.",
        s.trials,
        s.max_trials,
        s.max_victims,
        if s.gave_up {
            "; gave up (trial budget spent): some sets are greedy"
        } else {
            ""
        }
    );
    stranded(&mut out, "Stranded now", &plan.stranded_before);
    stranded(&mut out, "Stranded after the plan", &plan.stranded_after);
    if !left_out.is_empty() {
        let _ = writeln!(out, "Nodes left out:");
        for line in left_out {
            let _ = writeln!(out, "  {line}");
        }
    }
    if let Some(report) = report {
        let _ = writeln!(out, "Evictions carried out:");
        for e in &report.evicted {
            let _ = writeln!(out, "  {} on {}: {}", e.pod, e.node, e.result);
        }
        for pod in &report.still_there {
            let _ = writeln!(out, "  {pod}: still there after --wait-timeout");
        }
        for node in &report.unpublished {
            let _ = writeln!(
                out,
                "  {node}: its published state still held an evicted pod after --wait-timeout"
            );
        }
        if let Some(pods) = &report.pods {
            for (pod, node) in &pods.scheduled {
                let _ = writeln!(out, "  {pod}: scheduled to {node}");
            }
            for (pod, why) in &pods.unscheduled {
                let _ = writeln!(out, "  {pod}: {why} after --wait-timeout");
            }
        }
    }
    out
}

/// Stranded capacity: totals, then per node a bar per NUMA node (`#` a
/// stranded CPU).
fn stranded(out: &mut String, title: &str, stranded: &Stranded) {
    if stranded.nodes.is_empty() {
        let _ = writeln!(out, "{title}: nothing.");
        return;
    }
    let devices: Vec<String> = stranded.devices.iter().map(|(r, n)| format!("{n} {r}")).collect();
    let _ = writeln!(
        out,
        "{title}: {} CPUs, {} memory{}{}",
        stranded.cpus,
        human_bytes(stranded.memory_bytes),
        if devices.is_empty() { "" } else { ", " },
        devices.join(", ")
    );
    for node in &stranded.nodes {
        let _ = write!(out, "  {}:", node.node);
        for zone in &node.zones {
            let bar = "#".repeat((zone.cpus.floor() as usize).min(64));
            let devices: Vec<String> = zone
                .devices
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(r, n)| format!(" {n} {r}"))
                .collect();
            let _ = write!(
                out,
                "  NUMA {} [{bar}] {} CPUs {}{}",
                zone.numa,
                zone.cpus,
                human_bytes(zone.memory_bytes),
                devices.concat()
            );
        }
        let _ = writeln!(out);
    }
}
