//! The differential run: scenarios from consecutive seeds, each played
//! through the oracle (an `oracle batch` process per worker) and the
//! engine; a difference is confirmed (the oracle is asked again, in fresh
//! processes: texts that follow Go map order may come out either way, and
//! the engine may give any of them), shrunk to a minimal scenario (fresh
//! processes again), printed side by side and saved.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;
use topoalign_scenario::Scenario;

use crate::answer::{Answer, Batch, Oracle, engine};
use crate::compare::{Difference, Verdict, first_differing_event, judge, same_event_by_event};
use crate::generate::{Profile, generate_profiled};
use crate::show::side_by_side;
use crate::shrink::shrink;

/// What to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub oracle: Oracle,
    pub seed: u64,
    /// Stop after this many scenarios …
    pub count: Option<u64>,
    /// … or when this much time has passed (whichever comes first).
    pub duration: Option<Duration>,
    pub jobs: usize,
    /// Where minimal failing scenarios go (`<dir>/<release>/seed-N.yaml`).
    pub save: Option<PathBuf>,
    /// Most oracle calls spent shrinking one difference.
    pub shrink_budget: usize,
    /// How often the oracle is asked again before a difference counts.
    pub confirmations: usize,
    /// Which machines and pods the generator makes.
    pub profile: Profile,
    /// Scenarios with any of these generator tags are skipped (a known
    /// difference class, while another is looked for).
    pub exclude: Vec<String>,
    /// Where to write one line per scenario (`seed`, outcome, milliseconds
    /// the oracle took, the machine's NUMA nodes, topology policy and
    /// scope, CPU and memory policies): where the time goes.
    pub timings: Option<PathBuf>,
}

/// One confirmed difference, shrunk.
#[derive(Clone, Debug)]
pub struct Finding {
    pub seed: u64,
    pub kind: Difference,
    pub minimal: Scenario,
    pub oracle: Value,
    pub engine: Value,
    pub shrink_calls: usize,
}

/// Counts over a run.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub scenarios: u64,
    pub same: u64,
    /// Same answer and that answer is a start-up refusal.
    pub same_refusals: u64,
    /// The oracle answered differently on a second ask, and one of its
    /// answers was the engine's (texts in Go map order).
    pub same_after_asking_again: u64,
    pub timeouts: u64,
    /// Differences that came and went while shrinking: the oracle also
    /// gave the engine's answer for the minimal scenario (the kubelet
    /// chose in Go map order somewhere the generator did not foresee).
    pub unstable: Vec<u64>,
    /// Skipped for an excluded tag.
    pub excluded: u64,
    pub harness_failures: Vec<(u64, String)>,
    pub findings: Vec<Finding>,
}

impl Summary {
    pub fn differences(&self) -> BTreeMap<Difference, usize> {
        let mut by_kind = BTreeMap::new();
        for f in &self.findings {
            *by_kind.entry(f.kind).or_insert(0) += 1;
        }
        by_kind
    }

    /// Findings grouped by what their minimal scenarios contain (the
    /// kind of difference, the configuration keys, the pods' shapes): one
    /// group is usually one cause.
    pub fn groups(&self) -> BTreeMap<String, Vec<u64>> {
        let mut groups: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for f in &self.findings {
            groups.entry(signature(f)).or_default().push(f.seed);
        }
        groups
    }
}

/// Without a terminal, a progress line every this many scenarios.
const PROGRESS_EVERY: u64 = 500;

/// What a worker reports for one scenario: the outcome, the time the
/// oracle's first answer took, and the scenario's shape (for `--timings`).
struct Timed {
    seed: u64,
    outcome: Outcome,
    oracle: Duration,
    profile: String,
}

/// The shape columns of a timings line: NUMA nodes, topology policy and
/// scope, CPU and memory policies (from the generator's tags).
fn profile(tags: &[String]) -> String {
    let tagged = |prefix: &str| {
        tags.iter()
            .find_map(|t| t.strip_prefix(prefix))
            .unwrap_or("-")
            .to_owned()
    };
    [
        tagged("numa-"),
        tagged("policy:"),
        tagged("scope:"),
        tagged("cpu:"),
        tagged("memory:"),
    ]
    .join("\t")
}

/// What a worker reports for one scenario.
enum Outcome {
    Excluded,
    Same { refusal: bool, asked_again: bool },
    Timeout,
    Unstable(u64),
    HarnessFailure(u64, String),
    Found(Box<Finding>),
}

/// Runs scenarios until the count or the time is used up.
///
/// # Errors
/// When the scratch directory or the save directory cannot be written.
pub fn run(options: &RunOptions) -> anyhow::Result<Summary> {
    let scratch = scratch_dir()?;
    let deadline = options.duration.map(|d| Instant::now() + d);
    let next = Arc::new(AtomicU64::new(0));
    let bar = match options.count {
        Some(n) => ProgressBar::new(n),
        None => ProgressBar::new_spinner(),
    };
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{wide_bar}] {pos}/{len} {per_sec} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let (tx, rx) = mpsc::channel::<Timed>();
    let mut workers = Vec::new();
    for worker in 0..options.jobs.max(1) {
        let tx = tx.clone();
        let next = Arc::clone(&next);
        let options = options.clone();
        let file = scratch.join(format!("worker-{worker}.json"));
        workers.push(std::thread::spawn(move || {
            let mut batch = Batch::new(&options.oracle);
            loop {
                let index = next.fetch_add(1, Ordering::SeqCst);
                if options.count.is_some_and(|n| index >= n) || deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let seed = options.seed.wrapping_add(index);
                let timed = one_scenario(&options, &mut batch, seed, &file);
                if tx.send(timed).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);

    let mut timings = match &options.timings {
        Some(path) => {
            let mut file = std::io::BufWriter::new(
                std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
            );
            writeln!(file, "seed\toutcome\toracle_ms\tnuma\tpolicy\tscope\tcpu\tmemory")?;
            Some(file)
        }
        None => None,
    };
    let mut summary = Summary::default();
    for timed in rx {
        summary.scenarios += 1;
        if let Some(file) = &mut timings {
            writeln!(
                file,
                "{}\t{}\t{}\t{}",
                timed.seed,
                timed.outcome.label(),
                timed.oracle.as_millis(),
                timed.profile
            )?;
        }
        match timed.outcome {
            Outcome::Excluded => summary.excluded += 1,
            Outcome::Same { refusal, asked_again } => {
                summary.same += 1;
                summary.same_refusals += u64::from(refusal);
                summary.same_after_asking_again += u64::from(asked_again);
            }
            Outcome::Timeout => summary.timeouts += 1,
            Outcome::Unstable(seed) => {
                bar.suspend(|| {
                    eprintln!("seed {seed}: a difference the oracle does not give every time (not counted)")
                });
                summary.unstable.push(seed);
            }
            Outcome::HarnessFailure(seed, text) => {
                bar.suspend(|| eprintln!("seed {seed}: the oracle harness failed: {text}"));
                summary.harness_failures.push((seed, text));
            }
            Outcome::Found(finding) => {
                bar.suspend(|| println!("{}", report(&finding, options.oracle.release.name().as_str())));
                if let Some(dir) = &options.save {
                    save(dir, &options.oracle.release.name(), &finding)?;
                }
                summary.findings.push(*finding);
            }
        }
        bar.set_position(summary.scenarios);
        if bar.is_hidden() && summary.scenarios.is_multiple_of(PROGRESS_EVERY) {
            // No terminal (a long run in the background): a line now and then.
            eprintln!(
                "{} scenarios: same {} (refused {}), differ {}, timeouts {}, excluded {}",
                summary.scenarios,
                summary.same,
                summary.same_refusals,
                summary.findings.len(),
                summary.timeouts,
                summary.excluded
            );
        }
        bar.set_message(format!(
            "same {} (refused {}), differ {}, timeouts {}",
            summary.same,
            summary.same_refusals,
            summary.findings.len(),
            summary.timeouts
        ));
    }
    bar.finish();
    if let Some(mut file) = timings {
        file.flush()?;
    }
    for w in workers {
        let _ = w.join();
    }
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(summary)
}

fn scratch_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("topoalign-difftest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Both answers for a scenario.
fn answers(oracle: &Oracle, scenario: &Scenario, file: &Path) -> (Answer, Answer) {
    let text = serde_json::to_string(scenario).unwrap_or_default();
    if let Err(e) = std::fs::write(file, &text) {
        return (
            Answer::Failed(format!("writing {}: {e}", file.display())),
            Answer::Timeout,
        );
    }
    (oracle.answer(file), engine(&text))
}

impl Outcome {
    fn label(&self) -> &'static str {
        match self {
            Outcome::Excluded => "excluded",
            Outcome::Same { refusal: true, .. } => "same-refusal",
            Outcome::Same { .. } => "same",
            Outcome::Timeout => "timeout",
            Outcome::Unstable(_) => "unstable",
            Outcome::HarnessFailure(..) => "harness-failure",
            Outcome::Found(_) => "differ",
        }
    }
}

fn one_scenario(options: &RunOptions, batch: &mut Batch, seed: u64, file: &Path) -> Timed {
    let generated = generate_profiled(seed, options.oracle.release, options.profile);
    let mut timed = Timed {
        seed,
        outcome: Outcome::Excluded,
        oracle: Duration::ZERO,
        profile: profile(&generated.tags),
    };
    if generated.tags.iter().any(|t| options.exclude.contains(t)) {
        return timed;
    }
    let text = serde_json::to_string(&generated.scenario).unwrap_or_default();
    if let Err(e) = std::fs::write(file, &text) {
        timed.outcome = Outcome::HarnessFailure(seed, format!("writing {}: {e}", file.display()));
        return timed;
    }
    let started = Instant::now();
    let oracle_answer = batch.answer(file);
    timed.oracle = started.elapsed();
    timed.outcome = judged(options, seed, &generated.scenario, oracle_answer, engine(&text), file);
    timed
}

/// The outcome of a scenario whose two answers are in: the same, or a
/// difference confirmed, shrunk and reported.
fn judged(
    options: &RunOptions,
    seed: u64,
    scenario: &Scenario,
    oracle_answer: Answer,
    engine_answer: Answer,
    file: &Path,
) -> Outcome {
    let kind = match judge(&oracle_answer, &engine_answer) {
        Verdict::Same => {
            return Outcome::Same {
                refusal: oracle_answer.is_refusal(),
                asked_again: false,
            };
        }
        Verdict::Unjudged => {
            return match oracle_answer {
                Answer::Failed(text) => Outcome::HarnessFailure(seed, text),
                _ => Outcome::Timeout,
            };
        }
        Verdict::Differs(kind) => kind,
    };
    // Ask again: a text in Go map order may come out as the engine's, in
    // one replay or event by event over several.
    let mut replays = vec![oracle_answer.clone()];
    for _ in 0..options.confirmations {
        let (again, _) = answers(&options.oracle, scenario, file);
        if judge(&again, &engine_answer) == Verdict::Same {
            return Outcome::Same {
                refusal: again.is_refusal(),
                asked_again: true,
            };
        }
        replays.push(again);
        if same_event_by_event(&replays, &engine_answer) {
            return Outcome::Same {
                refusal: false,
                asked_again: true,
            };
        }
    }
    // Events after the first differing one cannot matter for it.
    let mut start = scenario.clone();
    if let Some(i) = first_differing_event(&oracle_answer.to_json(), &engine_answer.to_json()) {
        start.events.truncate(i + 1);
        if judge_scenario(&options.oracle, &start, file) != Verdict::Differs(kind) {
            start = scenario.clone();
        }
    }
    let (minimal, shrink_calls) = shrink(&start, options.shrink_budget, |candidate| {
        judge_scenario(&options.oracle, candidate, file) == Verdict::Differs(kind)
    });
    let (oracle_answer, engine_answer) = answers(&options.oracle, &minimal, file);
    for _ in 0..=options.confirmations {
        let (again, _) = answers(&options.oracle, &minimal, file);
        if judge(&again, &engine_answer) == Verdict::Same || judge(&oracle_answer, &engine_answer) == Verdict::Same {
            return Outcome::Unstable(seed);
        }
    }
    Outcome::Found(Box::new(Finding {
        seed,
        kind,
        minimal,
        oracle: oracle_answer.to_json(),
        engine: engine_answer.to_json(),
        shrink_calls,
    }))
}

fn judge_scenario(oracle: &Oracle, scenario: &Scenario, file: &Path) -> Verdict {
    let (o, e) = answers(oracle, scenario, file);
    judge(&o, &e)
}

/// What a minimal scenario holds, in a few words: the kind of
/// difference, the `kubelet:` keys (gates and options by name), the
/// pods' features, and the oracle's reason where the events differ.
pub fn signature(f: &Finding) -> String {
    let mut words = vec![format!("{:?}", f.kind)];
    if let Some(kubelet) = f.minimal.kubelet.as_object() {
        for (key, value) in kubelet {
            match value.as_object() {
                Some(inner) if key.ends_with("Options") || key == "featureGates" => {
                    words.extend(
                        inner
                            .iter()
                            .map(|(k, v)| format!("{k}={}", v.as_str().map_or(v.to_string(), str::to_owned))),
                    );
                }
                _ if key == "kubeletVersion" => {}
                _ => words.push(key.clone()),
            }
        }
    }
    for event in &f.minimal.events {
        let Some(pod) = &event.add else {
            words.push("delete".into());
            continue;
        };
        let spec = &pod["spec"];
        if spec.get("resources").is_some() {
            words.push("pod-level-resources".into());
        }
        if spec.get("initContainers").is_some() {
            words.push("init-containers".into());
        }
        let text = spec.to_string();
        for (needle, word) in [
            ("hugepages-", "hugepages"),
            ("/gpu", "devices"),
            ("/nic", "devices"),
            ("restartPolicy", "sidecar"),
        ] {
            if text.contains(needle) {
                words.push(word.into());
            }
        }
    }
    if let Some(i) = first_differing_event(&f.oracle, &f.engine)
        && let Some(reason) = f.oracle["results"][i].get("reason").and_then(Value::as_str)
    {
        words.push(format!("oracle:{reason}"));
    }
    words.sort();
    words.dedup();
    words.join(" ")
}

/// A finding for people: the minimal scenario and both answers.
pub fn report(f: &Finding, release: &str) -> String {
    let yaml = serde_yaml_ng::to_string(&f.minimal).unwrap_or_else(|e| format!("(cannot print: {e})"));
    format!(
        "== DIFFERENCE ({:?}) kubelet {release}, seed {} (difftest run --version {release} --seed {} --count 1); \
         minimal scenario after {} oracle calls:\n{yaml}\n{}",
        f.kind,
        f.seed,
        f.seed,
        f.shrink_calls,
        side_by_side(&f.oracle, &f.engine)
    )
}

/// Saves `<dir>/<release>/seed-N.yaml` (the minimal scenario, ready for
/// `oracle replay` and `topoalign replay`) and `seed-N.txt` (both answers).
fn save(dir: &Path, release: &str, f: &Finding) -> anyhow::Result<()> {
    let dir = dir.join(release);
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let yaml = serde_yaml_ng::to_string(&f.minimal)?;
    let header = format!(
        "# difftest: kubelet {release}, seed {}, {:?} difference, shrunk.\n# oracle: {}\n# engine: {}\n",
        f.seed, f.kind, f.oracle, f.engine
    );
    let path = dir.join(format!("seed-{}.yaml", f.seed));
    std::fs::write(&path, header + &yaml).with_context(|| format!("writing {}", path.display()))?;
    let path = dir.join(format!("seed-{}.txt", f.seed));
    std::fs::write(&path, report(f, release)).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
