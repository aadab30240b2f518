//! `difftest merge`: the topology manager's hint merge alone, the engine's
//! against the kubelet's (issue #29).
//!
//! Each seed names a case ([`generate`]): NUMA nodes (1-16, sometimes
//! sparse ids or up to 64), distances with `prefer-closest-numa-nodes`,
//! `max-allowable-numa-nodes`, and the hint providers' answers — drawn as
//! lists, or made by the engine's CPU, memory and device managers from
//! per-NUMA numbers ([`rules`]). The kubelet's `Policy.Merge` of the
//! release (`oracle merge`, one process for the whole run) and the
//! engine's `TopologyManager::decide` each merge the case under every
//! policy asked for; the engine along each of its ways ([`case::Path`]:
//! the fast merge as admissions call it, the candidate search forced, and
//! for rule-made cases the fast merge on the rules' lists). Every answer
//! must be the kubelet's: the merged affinity, whether it is preferred,
//! and whether the policy admits.
//!
//! Generating and the engine's merges run on one thread, the kubelet's in
//! the oracle, reading and comparing on another: cases go out in chunks,
//! each chunk's engine answers handed to the reader before the chunk is
//! written, so neither side waits for the other except for a full pipe.
//! Differences are confirmed and shrunk when the run ends, through a
//! second oracle process, one case at a time.

mod case;
mod generate;
mod oracle;
mod rules;
mod shrink;

use std::collections::BTreeMap;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressStyle};
use topoalign_model::KubeletVersion;
use topoalign_topology_manager::TopologyPolicyName;

pub use self::case::POLICIES;
use self::case::{Answer, Engine, Path as EnginePath, describe};
use self::oracle::{MergeOracle, read_reply, spawn};
use crate::release::Release;

/// Cases per chunk written to the oracle.
const CHUNK: usize = 64;

/// What to run.
#[derive(Clone, Debug)]
pub struct MergeOptions {
    pub release: Release,
    pub oracle: PathBuf,
    pub seed: u64,
    /// Stop after this many cases …
    pub count: Option<u64>,
    /// … or when this much time has passed (whichever comes first).
    pub duration: Option<Duration>,
    pub policies: Vec<TopologyPolicyName>,
    /// Most oracle calls spent shrinking one difference.
    pub shrink_budget: usize,
    /// How many differing cases are confirmed, shrunk and shown.
    pub show: usize,
}

/// A difference, confirmed and shrunk.
#[derive(Clone, Debug)]
pub struct Finding {
    /// The kubelet's answer changed when asked again (Go map order).
    pub unstable: bool,
    pub report: String,
}

/// Counts over a run.
#[derive(Clone, Debug, Default)]
pub struct MergeSummary {
    pub cases: u64,
    /// Every policy's answers the same along every path.
    pub same: u64,
    /// … and some policy refused.
    pub same_refusals: u64,
    /// Cases whose engine merge was given a rule (the candidate search).
    pub rule_cases: u64,
    /// Cases with more than 8 NUMA nodes, and those of them given a rule.
    pub big_cases: u64,
    pub big_rule_cases: u64,
    /// Differing cases, and per policy.
    pub differ: u64,
    pub differ_by_policy: BTreeMap<TopologyPolicyName, u64>,
    /// Cases where the oracle or the engine failed.
    pub harness_failures: Vec<(u64, String)>,
    pub findings: Vec<Finding>,
    pub seconds: u64,
}

impl MergeSummary {
    /// Confirmed differences whose kubelet answer was not stable.
    pub fn unstable(&self) -> u64 {
        self.findings.iter().filter(|f| f.unstable).count() as u64
    }
}

/// What the engine answered for one case, handed from the generating
/// thread to the comparing one.
struct Expected {
    seed: u64,
    rules: bool,
    big: bool,
    /// Per policy, the answer along each path; or why the engine failed.
    engine: Result<Vec<Vec<(EnginePath, Answer)>>, String>,
}

/// The release as the engine names it.
fn kubelet_version(release: Release) -> anyhow::Result<KubeletVersion> {
    KubeletVersion::parse(&release.name()).map_err(|e| anyhow::anyhow!("{e}"))
}

/// The engine's answers for a case.
fn engine_answers(
    case: &case::Case,
    policies: &[TopologyPolicyName],
    version: KubeletVersion,
) -> Result<Vec<Vec<(EnginePath, Answer)>>, String> {
    let engine = Engine::start(case, policies, version).map_err(|e| e.to_string())?;
    Ok((0..policies.len())
        .map(|i| {
            EnginePath::for_case(case)
                .iter()
                .map(|&path| (path, engine.answer(case, i, path)))
                .collect()
        })
        .collect())
}

/// Runs the differential.
///
/// # Errors
/// When the oracle cannot be started or stops answering.
pub fn run(options: &MergeOptions) -> anyhow::Result<MergeSummary> {
    let version = kubelet_version(options.release)?;
    let started = Instant::now();
    let (mut child, stdin, stdout) = spawn(&options.oracle)?;
    let (tx, rx) = mpsc::sync_channel::<Vec<Expected>>(8);
    let policies = options.policies.clone();
    let (first, count, duration) = (options.seed, options.count, options.duration);
    let writer = std::thread::spawn(move || -> anyhow::Result<()> {
        let mut out = BufWriter::with_capacity(1 << 16, stdin);
        let mut seed = first;
        let mut text = String::new();
        loop {
            let mut chunk = Vec::with_capacity(CHUNK);
            text.clear();
            while chunk.len() < CHUNK {
                let played = seed - first;
                if count.is_some_and(|n| played >= n) || duration.is_some_and(|d| started.elapsed() >= d) {
                    break;
                }
                let case = generate::case(seed, version);
                text.push_str(&case.wire(&policies));
                chunk.push(Expected {
                    seed,
                    rules: case.has_rules(),
                    big: case.nodes.len() > 8,
                    engine: engine_answers(&case, &policies, version),
                });
                seed += 1;
            }
            if chunk.is_empty() {
                return Ok(());
            }
            if tx.send(chunk).is_err() {
                // The reader stopped (it says why).
                return Ok(());
            }
            out.write_all(text.as_bytes()).context("writing to the oracle")?;
            out.flush().context("writing to the oracle")?;
        }
    });

    let progress = match options.count {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    progress.set_style(
        ProgressStyle::with_template("{elapsed_precise} {wide_bar} {human_pos}/{human_len} cases, {per_sec} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut summary = MergeSummary::default();
    let mut differing: Vec<(u64, TopologyPolicyName)> = Vec::new();
    let mut answers = BufReader::with_capacity(1 << 16, stdout);
    let mut line = String::new();
    let read = (|| -> anyhow::Result<()> {
        for chunk in rx {
            for expected in chunk {
                let reply = read_reply(&mut answers, &mut line)?;
                if reply.id != expected.seed {
                    bail!("the oracle answered case {} for case {}", reply.id, expected.seed);
                }
                summary.cases += 1;
                summary.rule_cases += u64::from(expected.rules);
                summary.big_cases += u64::from(expected.big);
                summary.big_rule_cases += u64::from(expected.big && expected.rules);
                let engine = match (expected.engine, reply.error, reply.answers) {
                    (Err(why), _, _) => {
                        summary.harness_failures.push((expected.seed, format!("engine: {why}")));
                        continue;
                    }
                    (_, Some(why), _) => {
                        summary.harness_failures.push((expected.seed, format!("oracle: {why}")));
                        continue;
                    }
                    (Ok(engine), None, Some(kubelet)) if kubelet.len() == engine.len() => {
                        engine.into_iter().zip(kubelet).collect::<Vec<_>>()
                    }
                    _ => {
                        summary
                            .harness_failures
                            .push((expected.seed, "oracle: not one answer per policy".to_owned()));
                        continue;
                    }
                };
                let mut differs = false;
                for (i, (paths, kubelet)) in engine.iter().enumerate() {
                    if paths.iter().any(|(_, a)| a != kubelet) {
                        differs = true;
                        *summary.differ_by_policy.entry(options.policies[i]).or_default() += 1;
                        differing.push((expected.seed, options.policies[i]));
                    }
                }
                if differs {
                    summary.differ += 1;
                } else {
                    summary.same += 1;
                    summary.same_refusals += u64::from(engine.iter().any(|(_, kubelet)| !kubelet.admit));
                }
            }
            progress.set_position(summary.cases);
            if summary.differ > 0 || !summary.harness_failures.is_empty() {
                progress.set_message(format!(
                    "{} differ, {} harness failures",
                    summary.differ,
                    summary.harness_failures.len()
                ));
            }
        }
        Ok(())
    })();
    progress.finish_and_clear();
    if read.is_err() {
        // The writer may be blocked on a full pipe to an oracle nobody
        // reads any more: stop our child first.
        let _ = child.kill();
    }
    // The writer ends when the reader drops the channel or the run is over.
    let written = writer
        .join()
        .map_err(|_| anyhow::anyhow!("the case generator panicked"))?;
    let _ = child.wait();
    read?;
    written?;
    summary.seconds = started.elapsed().as_secs();

    if !differing.is_empty() {
        let mut oracle = MergeOracle::start(&options.oracle)?;
        for &(seed, policy) in differing.iter().take(options.show) {
            summary.findings.push(confirm_and_shrink(
                seed,
                policy,
                version,
                &mut oracle,
                options.shrink_budget,
            )?);
        }
    }
    Ok(summary)
}

/// Asks the kubelet again (its lists are Go maps: a merge that depended on
/// their order would answer differently), shrinks the case, and words both.
fn confirm_and_shrink(
    seed: u64,
    policy: TopologyPolicyName,
    version: KubeletVersion,
    oracle: &mut MergeOracle,
    budget: usize,
) -> anyhow::Result<Finding> {
    let case = generate::case(seed, version);
    let mut kubelet_answers = Vec::new();
    for _ in 0..10 {
        let a = shrink::answers(&case, policy, version, oracle)?;
        if !kubelet_answers.contains(&a.kubelet) {
            kubelet_answers.push(a.kubelet);
        }
    }
    let (minimal, calls) = shrink::shrink(&case, policy, version, oracle, budget);
    let answers = shrink::answers(&minimal, policy, version, oracle)?;
    let mut report = format!(
        "seed {seed}, {policy}: the kubelet and the engine differ{}\nminimal case ({calls} oracle calls to shrink):\n{}",
        if kubelet_answers.len() > 1 {
            format!(
                " (the kubelet itself answered {} ways for the seed's case)",
                kubelet_answers.len()
            )
        } else {
            String::new()
        },
        describe(&minimal)
    );
    report.push_str(&format!("  kubelet: {}\n", answers.kubelet));
    for (path, answer) in &answers.engine {
        let mark = if *answer == answers.kubelet { "" } else { "  <- differs" };
        report.push_str(&format!("  engine, {}: {answer}{mark}\n", path.name()));
    }
    report.push_str(&format!("  as `oracle merge` reads it:\n  {}", minimal.wire(&[policy])));
    Ok(Finding {
        unstable: kubelet_answers.len() > 1,
        report,
    })
}

/// The oracle build: the cache key of oracle/build.sh's layout
/// (`<version>/<key>/oracle`, 16 hex digits, reached through the
/// `<version>/oracle` link), first 12 digits.
pub fn oracle_key(binary: &Path) -> Option<String> {
    let resolved = std::fs::canonicalize(binary).ok()?;
    let key = resolved.parent()?.file_name()?.to_str()?;
    (key.len() == 16 && key.bytes().all(|b| b.is_ascii_hexdigit())).then(|| key[..12].to_owned())
}

/// `best-effort,restricted`.
pub fn policy_list(policies: &[TopologyPolicyName]) -> String {
    policies.iter().map(|p| p.as_str()).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests;
