//! `topoalign verify`: proof of placement. Reads what the kernel really
//! applies to processes (`topoalign_host`), what was decided
//! for them (`topoalign run`'s record in their environment,
//! `topoalign_verify::run_record`) and judges it (`topoalign_verify`).
//!
//! Exit status: 0 every placement is kept (aligned, or nothing decided);
//! 4 something drifted, is misaligned or spilled memory (the report says
//! which); 2 bad input (no such process, a node file that does not read);
//! 1 a file that exists could not be read.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use topoalign_host::{Host, HostError, ProcessFacts};
use topoalign_model::{Machine, human_bytes};
use topoalign_observe::containers::{VISIBILITY, device_numa, judged, layout};
use topoalign_verify::run_record::{self, RunRecord};
use topoalign_verify::{AppliedDevices, DecidedCpus, DeviceSource, NumaLayout, Report, Subject, Summary, nodes_text};

use super::kubelet_dir::KubeletDirArgs;
use super::output::Output;
use super::{Error, Outcome, Result};

/// Exit status when a placement is not kept.
const NOT_KEPT: u8 = 4;

/// Proof of placement: compare what the kernel applies to processes (CPUs,
/// memory nodes and pages per NUMA node, devices) with what was decided for
/// them and what the topology manager policy promised.
#[derive(clap::Args)]
#[command(after_long_help = VERIFY_HELP)]
pub struct Args {
    /// A process to check (repeatable): any process; for one started by
    /// `topoalign run` (or its descendants), against what run decided.
    /// Without --pid: every process `topoalign run` started on this host.
    #[arg(long = "pid", value_name = "PID", conflicts_with = "containers")]
    pids: Vec<u32>,
    /// Check every running container of the kubelet's pods against what
    /// the kubelet decided for it (its checkpoints, read as `diagnose`
    /// reads them). Implied by --kubelet-dir, --pod-resources or --pods.
    #[arg(long)]
    containers: bool,
    #[command(flatten)]
    kubelet: KubeletDirArgs,
    /// Read a captured host under DIR instead of this one: DIR/proc, and
    /// the cgroup mounts DIR/proc/self/mountinfo names, under DIR.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// The machine's NUMA layout from a node file (scenario, hwloc XML,
    /// sysfs tree or capture); default: this machine, or the sysfs under
    /// --root.
    #[arg(long, value_name = "FILE")]
    node: Option<PathBuf>,
    #[command(flatten)]
    output: Output<VerifyFormat>,
}

const VERIFY_HELP: &str = "\
Examples:
  topoalign verify --pid 4242
  topoalign verify                      # every process topoalign run started here
  topoalign verify --pid 4242 -o json
  topoalign verify --containers         # every container of the kubelet in /var/lib/kubelet
  topoalign verify --kubelet-dir DIR --pods pods.yaml

Verdicts: aligned; not-placed (nothing decided; where it runs is shown);
drifted (CPUs or memory nodes changed since admission); misaligned (a
resource on a NUMA node the policy did not promise, or devices not its own);
memory-spilled (its own memory on NUMA nodes it was not pinned to).
Exit status: 0 every placement kept; 4 something drifted, misaligned or
spilled; 2 bad input (no such process); 1 a file could not be read.";

#[derive(Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
enum VerifyFormat {
    /// A report for people (the default).
    #[default]
    Text,
    /// Every report with its facts, and the summary.
    Json,
}

/// The JSON document.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Document<'a> {
    reports: &'a [Report],
    summary: &'a Summary,
    /// Containers mode: containers the kubelet decided for whose processes
    /// were not found (`namespace/pod container`).
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    not_found: &'a [String],
}

pub fn run(args: &Args) -> Result {
    if args.containers || args.kubelet.any_given() {
        return containers::run(args);
    }
    let host = match &args.root {
        Some(root) => Host::under(root),
        None => Host::live(),
    };
    let machine_file = args.node.as_deref().or(args.root.as_deref());
    let machine = topoalign_intake::read_node_file(machine_file)?.machine;
    let layout = layout(&machine);
    let pids = if args.pids.is_empty() {
        run_children(args.root.as_deref().unwrap_or(Path::new("/")))?
    } else {
        args.pids.clone()
    };
    let mut keep: Vec<&str> = run_record::VARIABLES.to_vec();
    keep.extend(VISIBILITY);
    let mut reports = Vec::new();
    for pid in pids {
        let facts = match host.process(pid, &keep) {
            Ok(facts) => facts,
            Err(error @ HostError::NoProcess { .. }) if !args.pids.is_empty() => {
                return Err(Error::bad_input(error));
            }
            // Found by the scan, gone since: nothing to check.
            Err(HostError::NoProcess { .. }) => continue,
            Err(error) => return Err(Error::Failed(error.into())),
        };
        reports.push(report_of(&machine, &layout, facts)?);
    }
    emit(args, &reports, &[], |summary| {
        render(&reports, summary, args.pids.is_empty())
    })
}

/// Writes the reports — `text` given their summary, or the JSON document —
/// and gives the exit status: success when every placement is kept, else
/// [`NOT_KEPT`]. The end of both modes (`--pid` and `--containers`).
fn emit(args: &Args, reports: &[Report], not_found: &[String], text: impl FnOnce(&Summary) -> String) -> Result {
    let summary = Summary::of(reports);
    let bytes = match args.output.format() {
        VerifyFormat::Text => text(&summary).into_bytes(),
        VerifyFormat::Json => (serde_json::to_string_pretty(&Document {
            reports,
            summary: &summary,
            not_found,
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

/// The processes whose environment has `run`'s record, in pid order.
fn run_children(root: &Path) -> Result<Vec<u32>> {
    let proc = root.join("proc");
    let entries = std::fs::read_dir(&proc).map_err(|e| Error::bad_input(format!("{}: {e}", proc.display())))?;
    let mut pids: Vec<u32> = entries
        .filter_map(std::result::Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|pid: &u32| {
            // Another user's environment is not readable: not ours to check.
            std::fs::read(proc.join(pid.to_string()).join("environ"))
                .is_ok_and(|bytes| !topoalign_host::parse_environ(&bytes, &[run_record::ALLOCATION]).is_empty())
        })
        .collect();
    pids.sort_unstable();
    Ok(pids)
}

fn report_of(machine: &Machine, layout: &NumaLayout, facts: ProcessFacts) -> Result<Report> {
    let environment = facts.environment.clone().unwrap_or_default();
    let decided = RunRecord::from_env(&environment)
        .map_err(|e| Error::bad_input(format!("pid {}: {e}", facts.pid)))?
        .map(|record| record.decided(|_, id| device_numa(machine, id)));
    let subject = Subject::Process {
        pid: facts.pid,
        command: facts.command.clone(),
    };
    Ok(judged(machine, layout, &facts, subject, decided))
}

fn render(reports: &[Report], summary: &Summary, scanned: bool) -> String {
    let mut out = String::new();
    if reports.is_empty() && scanned {
        out.push_str("no process here was started by topoalign run; name one with --pid\n");
    }
    render_reports(&mut out, reports);
    let _ = writeln!(out, "summary: {summary}");
    out
}

fn render_reports(out: &mut String, reports: &[Report]) {
    for report in reports {
        let by = match &report.decided {
            Some(decided) => match decided.policy {
                Some(policy) => format!(" — {} ({})", decided.by, policy.as_str()),
                None => format!(" — {}", decided.by),
            },
            None => String::new(),
        };
        let _ = writeln!(out, "{}: {}{by}", report.subject, report.verdict.as_str());
        let placement = &report.placement;
        let cpus = match report.decided.as_ref().map(|d| &d.cpus) {
            Some(DecidedCpus::Exclusive { cpus }) => format!(", exclusive, decided {cpus}"),
            Some(DecidedCpus::Shared { .. }) => ", shared pool".to_string(),
            None => String::new(),
        };
        let _ = writeln!(
            out,
            "  CPUs {} (NUMA {}){cpus}",
            placement.cpus,
            nodes_text(&placement.cpu_nodes)
        );
        let pinned = match report.decided.as_ref().and_then(|d| d.memory_nodes.as_ref()) {
            Some(nodes) => format!("pinned to NUMA {}", nodes_text(nodes)),
            None => "not pinned".to_string(),
        };
        let resident = if placement.own_memory.is_empty() {
            match report.applied.memory {
                Some(_) => "no resident memory of its own".to_string(),
                None => "resident memory not readable".to_string(),
            }
        } else {
            let per_node: Vec<String> = placement
                .own_memory
                .iter()
                .map(|(node, bytes)| format!("{} on NUMA {node}", human_bytes(*bytes)))
                .collect();
            per_node.join(", ")
        };
        let _ = writeln!(
            out,
            "  memory: may allocate on NUMA {} ({pinned}); {resident}",
            nodes_text(&placement.memory_nodes)
        );
        if let Some(cgroup) = &report.applied.cgroup {
            let cpus = cgroup.cpus.as_ref().map_or("?".to_string(), ToString::to_string);
            let mems = cgroup.mems.as_ref().map_or("?".to_string(), nodes_text);
            let _ = writeln!(
                out,
                "  cgroup: {} ({}): CPUs {cpus}, memory nodes {mems}",
                cgroup.path, cgroup.version
            );
        }
        let devices = match &report.applied.devices {
            AppliedDevices::Unknown => None,
            AppliedDevices::Unreadable { reason } => Some(format!("not known: {reason}")),
            AppliedDevices::Listed { source, all, devices } => {
                let source = match source {
                    DeviceSource::Environment(variable) => variable.clone(),
                    DeviceSource::DeviceCgroup(path) => path.clone(),
                };
                let listed: Vec<String> = devices
                    .iter()
                    .map(|d| match &d.numa {
                        Some(numa) => format!("{} (NUMA {})", d.id, nodes_text(numa)),
                        None => d.id.clone(),
                    })
                    .collect();
                Some(match (all, listed.is_empty()) {
                    (true, _) => format!("every device ({source})"),
                    (false, true) => format!("none ({source})"),
                    (false, false) => format!("{} ({source})", listed.join(", ")),
                })
            }
        };
        if let Some(devices) = devices {
            let _ = writeln!(out, "  devices: {devices}");
        }
        for finding in &report.findings {
            let _ = writeln!(out, "  - {finding}");
        }
        for note in &report.notes {
            let _ = writeln!(out, "  note: {note}");
        }
    }
}

mod containers;
