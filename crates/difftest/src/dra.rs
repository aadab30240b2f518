//! `difftest dra`: the scheduler's DRA allocator, topoalign's
//! (`topoalign_dra::allocate`) against the real one (`oracle-dra batch`,
//! `k8s.io/dynamic-resource-allocation/structured` of the release), on random
//! allocation cases ([`generate`]), issue #30. A case with a pod (DRA-backed
//! extended resources, KEP-5004) is the DynamicResources plugin's decision:
//! ours is `topoalign_dra::allocate_pod`, the oracle runs the real plugin.
//!
//! Two answers are the same when both allocate and every claim's allocation
//! result is equal (devices, requests, configs, node selector) — and, with
//! a pod, the special claim's requests, container mappings and allocation
//! too — or both refuse the same way (unschedulable on this node, or an
//! error that stops scheduling). Messages are shown, not compared. A differing case is
//! asked again, several times: the 1.34/1.35 allocators visit pools in Go's
//! map order, so a case can have several answers; when the oracle's answers
//! vary and ours is one of them the case is unstable, not different. Every
//! such case is written to the output directory as `<seed>.json` with both
//! answers.

pub mod generate;

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use topoalign_dra::PodOutcome;

use self::generate::DraCase;

use crate::release::Release;

/// Cases written to the oracle before their answers are read.
const CHUNK: usize = 32;

/// How often a differing case is asked again.
const REASKS: usize = 2;

/// What to run.
#[derive(Clone, Debug)]
pub struct DraOptions {
    pub release: Release,
    pub oracle: PathBuf,
    pub seed: u64,
    pub count: u64,
    /// Where differing cases are written.
    pub out: PathBuf,
    /// How many differences are printed.
    pub show: usize,
}

/// Counts over a run.
#[derive(Clone, Debug, Default)]
pub struct DraSummary {
    pub cases: u64,
    pub same: u64,
    /// … of which both refused.
    pub same_refusals: u64,
    pub differ: u64,
    pub unstable: u64,
    pub seconds: u64,
    /// Outcome kinds over all cases (allocated, unschedulable, error).
    pub allocated: u64,
    pub unschedulable: u64,
    pub errors: u64,
    /// Cases with a pod (DRA-backed extended resources) …
    pub pods: u64,
    /// … and of those, the ones where the oracle allocated the special
    /// claim with at least one request.
    pub extended: u64,
}

/// The oracle: one `oracle-dra batch` process, a case per line in, an
/// outcome per line out (read on its own thread so neither pipe fills).
struct Oracle {
    child: Child,
    input: BufWriter<ChildStdin>,
    output: mpsc::Receiver<std::io::Result<String>>,
}

impl Oracle {
    fn spawn(binary: &Path) -> anyhow::Result<Oracle> {
        let mut child = Command::new(binary)
            .arg("batch")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start the DRA oracle {}", binary.display()))?;
        let input = BufWriter::new(child.stdin.take().context("oracle stdin")?);
        let stdout = child.stdout.take().context("oracle stdout")?;
        let (send, output) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(Oracle { child, input, output })
    }

    /// The real allocator's answers for the cases, in order: each the
    /// outcome and the other outcomes the release can give (1.34/1.35: other
    /// orders of pools and slices).
    fn ask(&mut self, cases: &[DraCase]) -> anyhow::Result<Vec<Answers>> {
        for case in cases {
            serde_json::to_writer(&mut self.input, case)?;
            self.input.write_all(b"\n")?;
        }
        self.input.flush().context("writing to the DRA oracle")?;
        let mut outcomes = Vec::with_capacity(cases.len());
        for _ in cases {
            let line = self.output.recv().context("the DRA oracle stopped answering")??;
            let answer: OracleLine = serde_json::from_str(&line)
                .with_context(|| format!("the DRA oracle's answer is not an outcome: {line}"))?;
            outcomes.push(Answers {
                outcome: answer.outcome,
                alternatives: answer.alternatives,
            });
        }
        Ok(outcomes)
    }
}

/// One line of `oracle-dra batch`: an outcome with its alternatives.
#[derive(serde::Deserialize)]
struct OracleLine {
    #[serde(flatten)]
    outcome: PodOutcome,
    #[serde(default)]
    alternatives: Vec<PodOutcome>,
}

/// Every outcome the release can give for a case, the first the oracle's.
#[derive(Clone, Debug)]
pub struct Answers {
    pub outcome: PodOutcome,
    pub alternatives: Vec<PodOutcome>,
}

impl Answers {
    fn all(&self) -> impl Iterator<Item = &PodOutcome> {
        std::iter::once(&self.outcome).chain(&self.alternatives)
    }

    /// Is `ours` one of them?
    fn admits(&self, ours: &PodOutcome) -> bool {
        self.all().any(|o| same(ours, o))
    }
}

impl Drop for Oracle {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Same answer? (Messages aside.) With a pod, the special claim (its
/// requests, mappings and allocation) must be the same too, or absent from
/// both.
pub fn same(ours: &PodOutcome, theirs: &PodOutcome) -> bool {
    match (ours, theirs) {
        (
            PodOutcome::Allocated {
                allocations: a,
                extended_resource_claim: x,
            },
            PodOutcome::Allocated {
                allocations: b,
                extended_resource_claim: y,
            },
        ) => {
            // Through JSON: absent and empty lists are one thing to the API.
            serde_json::to_value((a, x)).ok() == serde_json::to_value((b, y)).ok()
        }
        (PodOutcome::Unschedulable { .. }, PodOutcome::Unschedulable { .. }) => true,
        (PodOutcome::Error { .. }, PodOutcome::Error { .. }) => true,
        _ => false,
    }
}

/// Runs the cases of seeds `seed..seed+count`.
pub fn run(options: &DraOptions) -> anyhow::Result<DraSummary> {
    let started = Instant::now();
    let mut oracle = Oracle::spawn(&options.oracle)?;
    let mut summary = DraSummary::default();
    let bar = ProgressBar::new(options.count);
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} cases, {msg} ({elapsed}, ETA {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut shown = 0;
    let mut next = options.seed;
    let end = options.seed + options.count;
    while next < end {
        let seeds: Vec<u64> = (next..end.min(next + CHUNK as u64)).collect();
        next += seeds.len() as u64;
        let cases: Vec<DraCase> = seeds.iter().map(|&s| generate::case(options.release, s)).collect();
        let theirs = oracle.ask(&cases)?;
        for ((seed, case), answers) in seeds.iter().zip(&cases).zip(theirs) {
            let ours = case.decide();
            summary.cases += 1;
            match &answers.outcome {
                PodOutcome::Allocated {
                    extended_resource_claim,
                    ..
                } => {
                    summary.allocated += 1;
                    if extended_resource_claim.as_ref().is_some_and(|c| !c.requests.is_empty()) {
                        summary.extended += 1;
                    }
                }
                PodOutcome::Unschedulable { .. } => summary.unschedulable += 1,
                PodOutcome::Error { .. } => summary.errors += 1,
            }
            if case.has_pod() {
                summary.pods += 1;
            }
            if answers.admits(&ours) {
                summary.same += 1;
                if !matches!(answers.outcome, PodOutcome::Allocated { .. }) {
                    summary.same_refusals += 1;
                }
                continue;
            }
            // Ask again: the oracle explores slice orders at random, and
            // one more run may find the order that gives ours.
            let mut more = Vec::new();
            for _ in 0..REASKS {
                more.push(oracle.ask(std::slice::from_ref(case))?.remove(0));
            }
            let unstable = more.iter().any(|a| a.admits(&ours));
            if unstable {
                summary.unstable += 1;
            } else {
                summary.differ += 1;
            }
            let theirs = answers.outcome;
            write_difference(&options.out, *seed, case, &ours, &theirs, unstable)?;
            if shown < options.show {
                shown += 1;
                let text = format!(
                    "seed {seed}: {}\n  ours:   {}\n  oracle: {}\n  case:   {}",
                    if unstable {
                        "UNSTABLE (the oracle's answers vary; ours is one of them)"
                    } else {
                        "DIFFERENT"
                    },
                    serde_json::to_string(&ours)?,
                    serde_json::to_string(&theirs)?,
                    options.out.join(format!("{seed}.json")).display(),
                );
                bar.suspend(|| eprintln!("{text}"));
            }
        }
        bar.set_position(summary.cases);
        bar.set_message(format!(
            "{} same, {} different, {} unstable",
            summary.same, summary.differ, summary.unstable
        ));
    }
    bar.finish_and_clear();
    summary.seconds = started.elapsed().as_secs();
    Ok(summary)
}

fn write_difference(
    dir: &Path,
    seed: u64,
    case: &DraCase,
    ours: &PodOutcome,
    theirs: &PodOutcome,
    unstable: bool,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let record = serde_json::json!({
        "seed": seed, "unstable": unstable, "ours": ours, "oracle": theirs, "case": case,
    });
    let path = dir.join(format!("{seed}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&record)?)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Prints the summary; an error if any case differed.
pub fn report(summary: &DraSummary, options: &DraOptions) -> anyhow::Result<()> {
    println!(
        "dra {}: {} cases, {} with a pod (oracle: {} allocated, {} with extended resources from DRA, {} unschedulable, {} errors): {} same ({} refusals), {} different, {} unstable, {} s",
        options.release.name(),
        summary.cases,
        summary.pods,
        summary.allocated,
        summary.extended,
        summary.unschedulable,
        summary.errors,
        summary.same,
        summary.same_refusals,
        summary.differ,
        summary.unstable,
        summary.seconds
    );
    if summary.differ > 0 {
        bail!("{} cases differ; they are in {}", summary.differ, options.out.display());
    }
    Ok(())
}
