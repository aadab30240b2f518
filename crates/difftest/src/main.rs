//! `difftest`: differential testing of the engine against the real kubelet
//! (test tooling, not part of the product).
//!
//! - `difftest gen` prints the random scenario of a seed for a release;
//! - `difftest run` plays random scenarios through the oracle (`oracle
//!   replay`, the real kubelet code of one release) and the engine, and
//!   shrinks every difference to a minimal scenario;
//! - `difftest vectors` writes a conformance vector set from generated
//!   scenarios and the oracle's answers;
//! - `difftest supported` lists the releases the engine reproduces;
//! - `difftest merge` checks the hint merge alone against the kubelet's
//!   `Policy.Merge` (`oracle merge`), millions of cases an hour;
//! - `difftest dra` checks topoalign's DRA allocator against the
//!   scheduler's (`oracle-dra batch`) on random slices and claims.
//!
//! Exit status: 0 no difference; 1 differences (or harness failures)
//! found; 2 bad arguments or a missing oracle.

mod answer;
mod compare;
mod dra;
mod generate;
mod ledger;
mod merge;
mod release;
mod rng;
mod run;
mod show;
mod shrink;
mod vectors;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

use topoalign_topology_manager::TopologyPolicyName;

use crate::answer::{Oracle, engine_supports};
use crate::release::{RELEASES, Release};

#[derive(Parser)]
#[command(
    name = "difftest",
    about = "Random scenarios through the real kubelet and the engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the scenario of a seed (YAML, or JSON with --json).
    Gen {
        #[arg(long, value_parser = parse_release)]
        version: Release,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long)]
        json: bool,
        /// Also print what the scenario exercises.
        #[arg(long)]
        tags: bool,
        /// Which machines and pods: `standard`, `big` (9-16 NUMA nodes,
        /// an aligning policy, ten times the merge budget) or `wide`
        /// (65-128 NUMA nodes with ids up to 1023, topology policy none).
        #[arg(long, value_enum, default_value_t)]
        profile: generate::Profile,
    },
    /// Differential run: oracle against engine.
    Run {
        #[arg(long, value_parser = parse_release)]
        version: Release,
        /// Number of scenarios (seeds SEED, SEED+1, ...).
        #[arg(long)]
        count: Option<u64>,
        /// Run for this long (`90s`, `10m`, `8h`); with --count, whichever ends first.
        #[arg(long, value_parser = parse_duration)]
        duration: Option<Duration>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Oracle processes at a time.
        #[arg(long, default_value_t = 2)]
        jobs: usize,
        /// Save minimal failing scenarios under DIR/<version>/.
        #[arg(long, value_name = "DIR")]
        save: Option<PathBuf>,
        #[command(flatten)]
        oracle: OracleArgs,
        /// Most oracle replays spent shrinking one difference.
        #[arg(long, default_value_t = 400)]
        shrink_budget: usize,
        /// Skip scenarios with this generator tag (see `gen --tags`), e.g.
        /// a known difference while looking for others; repeatable.
        #[arg(long, value_name = "TAG")]
        exclude: Vec<String>,
        /// Which machines and pods: `standard`, `big` (9-16 NUMA nodes,
        /// an aligning policy, ten times the merge budget; give the oracle
        /// minutes: --timeout 600) or `wide` (65-128 NUMA nodes with ids
        /// up to 1023, topology policy none, memory manager None). Keep
        /// big and wide runs in ledgers of their own
        /// (testdata/difftest-big-ledger.tsv, testdata/difftest-wide-ledger.tsv):
        /// seeds are per ledger.
        #[arg(long, value_enum, default_value_t)]
        profile: generate::Profile,
        /// Write one line per scenario to FILE: seed, outcome, the oracle's
        /// milliseconds, NUMA nodes, topology policy and scope, CPU and
        /// memory policies (tab-separated, with a header).
        #[arg(long, value_name = "FILE")]
        timings: Option<PathBuf>,
        /// Record the run in this ledger when it ends (testdata/difftest-ledger.tsv):
        /// one line with the seeds played, the counts, the time, the commit
        /// and the oracle build. Seeds the ledger already counts for the
        /// release are refused.
        #[arg(long, value_name = "FILE")]
        ledger: Option<PathBuf>,
        /// Start after the highest seed the ledger counts for the release
        /// (--seed when it has none).
        #[arg(long, requires = "ledger")]
        resume: bool,
        /// The engine commit to record (default: the repository's HEAD,
        /// `+dirty` with uncommitted changes under crates/).
        #[arg(long, requires = "ledger")]
        commit: Option<String>,
    },
    /// The ledger's totals per release, as docs/conformance.md's Markdown table.
    Ledger {
        #[arg(default_value = "testdata/difftest-ledger.tsv")]
        file: PathBuf,
    },
    /// Write a vector set (scenarios/gen-<seed>.json, expected/, index.json, README-gen.md).
    Vectors {
        #[arg(long, value_parser = parse_release)]
        version: Release,
        #[arg(long, default_value_t = 60)]
        count: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Prefer scenarios this older release answers differently.
        #[arg(long, value_parser = parse_release)]
        differs_from: Option<Release>,
        /// Most seeds tried.
        #[arg(long, default_value_t = 3000)]
        tries: u64,
        /// Output directory (default testdata/conformance/<version>).
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        oracle: OracleArgs,
    },
    /// The releases the engine reproduces, one a line.
    Supported,
    /// The hint merge alone: random provider hint sets through the
    /// kubelet's Policy.Merge (`oracle merge`) and the engine's merge.
    Merge {
        #[arg(long, value_parser = parse_release)]
        version: Release,
        /// Number of cases (seeds SEED, SEED+1, ...).
        #[arg(long)]
        count: Option<u64>,
        /// Run for this long (`90s`, `10m`, `8h`); with --count, whichever ends first.
        #[arg(long, value_parser = parse_duration)]
        duration: Option<Duration>,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Only this policy (repeatable; default: best-effort, restricted
        /// and single-numa-node, each case merged under every one).
        #[arg(long, value_parser = parse_policy)]
        policy: Vec<TopologyPolicyName>,
        /// The oracle binary (default: where oracle/build.sh VERSION puts it).
        #[arg(long, value_name = "PATH")]
        oracle: Option<PathBuf>,
        /// Most oracle calls spent shrinking one difference.
        #[arg(long, default_value_t = 2000)]
        shrink_budget: usize,
        /// How many differences are confirmed, shrunk and shown.
        #[arg(long, default_value_t = 3)]
        show: usize,
        /// Record the run in this ledger (testdata/merge-ledger.tsv), as
        /// `run --ledger` does: cases are the seeds.
        #[arg(long, value_name = "FILE")]
        ledger: Option<PathBuf>,
        /// Start after the highest seed the ledger counts for the release.
        #[arg(long, requires = "ledger")]
        resume: bool,
        /// The engine commit to record (default: HEAD, `+dirty` with
        /// uncommitted changes under crates/ or oracle/).
        #[arg(long, requires = "ledger")]
        commit: Option<String>,
    },
    /// The DRA allocator: random ResourceSlices, classes and claims through
    /// the scheduler's allocator (`oracle-dra batch`) and topoalign's.
    Dra {
        #[arg(long, value_parser = parse_dra_release)]
        version: Release,
        #[arg(long, default_value_t = 200)]
        count: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// The DRA oracle binary (default: where oracle/dra/build.sh VERSION puts it).
        #[arg(long, value_name = "PATH")]
        oracle: Option<PathBuf>,
        /// Where differing cases are written.
        #[arg(long, value_name = "DIR", default_value = "target/difftest-dra")]
        out: PathBuf,
        /// How many differences are printed.
        #[arg(long, default_value_t = 3)]
        show: usize,
        /// Print the case of SEED (JSON) instead of running.
        #[arg(long)]
        print: bool,
        /// Record the run in this ledger (testdata/dra-ledger.tsv).
        #[arg(long, value_name = "FILE")]
        ledger: Option<PathBuf>,
        /// Start after the highest seed the ledger counts for the release.
        #[arg(long, requires = "ledger")]
        resume: bool,
    },
}

#[derive(clap::Args)]
struct OracleArgs {
    /// The oracle binary (default: where oracle/build.sh VERSION puts it).
    #[arg(long, value_name = "PATH")]
    oracle: Option<PathBuf>,
    /// Seconds of CPU time an oracle replay in a batch may use (and ten
    /// times that of wall-clock time) before the scenario is counted as a
    /// timeout, not judged; a replay in a fresh process (confirming,
    /// shrinking): seconds of wall-clock time.
    #[arg(long, default_value_t = 60)]
    timeout: u64,
}

impl OracleArgs {
    fn open(&self, release: Release) -> anyhow::Result<Oracle> {
        let binary = match &self.oracle {
            Some(path) => path.clone(),
            None => Oracle::default_binary(release)?,
        };
        Oracle::open(release, binary, Duration::from_secs(self.timeout))
    }
}

fn parse_release(text: &str) -> Result<Release, String> {
    Release::parse(text).ok_or_else(|| {
        let known: Vec<String> = RELEASES.iter().map(|r| r.name()).collect();
        format!("not a kubelet release the oracle builds ({})", known.join(", "))
    })
}

fn parse_dra_release(text: &str) -> Result<Release, String> {
    match Release::parse(text) {
        Some(release) if topoalign_dra::features::RELEASES.contains(&release.name().as_str()) => Ok(release),
        _ => Err(format!(
            "not a release whose DRA allocator topoalign reproduces ({})",
            topoalign_dra::features::RELEASES.join(", ")
        )),
    }
}

fn parse_policy(text: &str) -> Result<TopologyPolicyName, String> {
    match text.parse::<TopologyPolicyName>() {
        Ok(policy) if merge::POLICIES.contains(&policy) => Ok(policy),
        _ => Err(format!(
            "not a policy that merges ({})",
            merge::policy_list(&merge::POLICIES)
        )),
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let (number, unit) = text.split_at(text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len()));
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration such as 90s, 10m or 8h"))?;
    let seconds = match unit {
        "" | "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        _ => return Err(format!("{text:?} is not a duration such as 90s, 10m or 8h")),
    };
    Ok(Duration::from_secs(seconds))
}

/// The repository's HEAD (12 hex digits), `+dirty` when crates/ or
/// oracle/ have uncommitted changes; `unknown` outside a git checkout.
fn ledger_commit() -> String {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "--short=12", "HEAD"]) {
        Some(head) => match git(&["status", "--porcelain", "--", "crates", "oracle"]) {
            Some(changes) if changes.is_empty() => head,
            _ => format!("{head}+dirty"),
        },
        None => "unknown".to_owned(),
    }
}

/// The oracle build: the first 12 hex digits of the `oracle.sha256` that
/// oracle/build.sh writes beside the binary (a hash of its sources).
/// Where `oracle/dra/build.sh VERSION` leaves the release's DRA oracle.
fn dra_oracle_binary(release: Release) -> anyhow::Result<PathBuf> {
    let cache = match std::env::var_os("TOPOALIGN_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?).join(".cache/topoalign"),
    };
    let path = cache.join("oracle-dra").join(release.name()).join("oracle-dra");
    if !path.exists() {
        bail!(
            "no DRA oracle at {} (build it: oracle/dra/build.sh {}), or give --oracle",
            path.display(),
            release.name()
        );
    }
    Ok(path)
}

/// The DRA oracle's build: the content key of the cache directory
/// `oracle/dra/build.sh` put it in (12 hex digits), else `unknown`.
fn dra_oracle_key(binary: &std::path::Path) -> String {
    std::fs::canonicalize(binary)
        .ok()
        .and_then(|path| path.parent()?.file_name()?.to_str().map(str::to_owned))
        .filter(|key| key.len() >= 12 && key.bytes().all(|b| b.is_ascii_hexdigit()))
        .map_or_else(|| "unknown".to_owned(), |key| key[..12].to_owned())
}

fn oracle_build(binary: &std::path::Path) -> String {
    let mut sums = binary.as_os_str().to_owned();
    sums.push(".sha256");
    std::fs::read_to_string(&sums)
        .ok()
        .and_then(|text| text.get(..12).map(str::to_owned))
        .unwrap_or_else(|| "unknown".to_owned())
}

fn main() -> ExitCode {
    match try_main(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("difftest: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn try_main(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Gen {
            version,
            seed,
            json,
            tags,
            profile,
        } => {
            let g = generate::generate_profiled(seed, version, profile);
            if tags {
                println!("# {}", g.tags.join(" "));
            }
            if json {
                println!("{}", serde_json::to_string(&g.scenario)?);
            } else {
                print!("{}", serde_yaml_ng::to_string(&g.scenario)?);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Run {
            version,
            count,
            duration,
            seed,
            jobs,
            save,
            oracle,
            shrink_budget,
            exclude,
            profile,
            timings,
            ledger: ledger_file,
            resume,
            commit,
        } => {
            if count.is_none() && duration.is_none() {
                bail!("say how long to run: --count N, --duration D or both");
            }
            if !engine_supports(version) {
                bail!(
                    "the engine does not reproduce kubelet {} (see `difftest supported`)",
                    version.name()
                );
            }
            let mut seed = seed;
            let recorded = match &ledger_file {
                Some(path) => {
                    let entries = ledger::read(path)?;
                    if resume {
                        seed = ledger::resume_seed(&entries, version, seed);
                    }
                    ledger::check_free(&entries, version, seed, count)?;
                    Some((path.clone(), commit.unwrap_or_else(ledger_commit)))
                }
                None => None,
            };
            let ledger_options = format!(
                "cpu-timeout={}{}{}",
                oracle.timeout,
                exclude.iter().map(|t| format!(" exclude={t}")).collect::<String>(),
                profile.ledger_option().map(|p| format!(" {p}")).unwrap_or_default()
            );
            let started = std::time::Instant::now();
            let options = run::RunOptions {
                oracle: oracle.open(version)?,
                seed,
                count,
                duration,
                jobs,
                save,
                shrink_budget,
                confirmations: 6,
                profile,
                exclude,
                timings,
            };
            let summary = run::run(&options)?;
            if let Some((path, commit)) = recorded
                && summary.scenarios > 0
            {
                let entry = ledger::Entry {
                    release: version,
                    first_seed: seed,
                    last_seed: seed + summary.scenarios - 1,
                    counts: ledger::Counts {
                        scenarios: summary.scenarios,
                        same: summary.same,
                        same_refusals: summary.same_refusals,
                        differ: summary.findings.len() as u64,
                        unstable: summary.unstable.len() as u64,
                        timeouts: summary.timeouts,
                        excluded: summary.excluded,
                        harness_failures: summary.harness_failures.len() as u64,
                        seconds: started.elapsed().as_secs(),
                    },
                    finished_utc: ledger::utc_now(),
                    commit,
                    // The build's cache key, as the merge ledger records it.
                    oracle: merge::oracle_key(&options.oracle.binary)
                        .unwrap_or_else(|| oracle_build(&options.oracle.binary)),
                    options: ledger_options,
                };
                ledger::append(&path, &entry)?;
            }
            let differences: Vec<String> = summary
                .differences()
                .iter()
                .map(|(kind, n)| format!("{kind:?} {n}"))
                .collect();
            println!(
                "kubelet {}: {} scenarios from seed {seed}: {} same ({} of them start-up refusals, {} after asking \
                 the oracle again), {} differ{}, {} unstable, {} oracle timeouts, {} harness failures",
                version.name(),
                summary.scenarios,
                summary.same,
                summary.same_refusals,
                summary.same_after_asking_again,
                summary.findings.len(),
                if differences.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", differences.join(", "))
                },
                summary.unstable.len(),
                summary.timeouts,
                summary.harness_failures.len()
            );
            if summary.excluded > 0 {
                println!("{} scenarios skipped for an excluded tag", summary.excluded);
            }
            for (signature, seeds) in summary.groups() {
                let seeds: Vec<String> = seeds.iter().map(ToString::to_string).collect();
                println!("  {} x [{signature}]: seeds {}", seeds.len(), seeds.join(" "));
            }
            let clean = summary.findings.is_empty() && summary.harness_failures.is_empty();
            Ok(if clean { ExitCode::SUCCESS } else { ExitCode::from(1) })
        }
        Command::Vectors {
            version,
            count,
            seed,
            differs_from,
            tries,
            out,
            oracle,
        } => {
            let baseline = match differs_from {
                Some(older) => Some(
                    OracleArgs {
                        oracle: None,
                        timeout: oracle.timeout,
                    }
                    .open(older)
                    .context("the baseline oracle")?,
                ),
                None => None,
            };
            let options = vectors::VectorOptions {
                oracle: oracle.open(version)?,
                baseline,
                seed,
                count,
                tries,
                repeats: 3,
                out: out.unwrap_or_else(|| vectors::default_out(version)),
            };
            let (written, differing) = vectors::make_vectors(&options)?;
            println!(
                "{written} vectors in {} ({differing} answered differently by the baseline)",
                options.out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Ledger { file } => {
            let entries = ledger::read(&file)?;
            print!("{}", ledger::table(&entries));
            Ok(ExitCode::SUCCESS)
        }
        Command::Merge {
            version,
            count,
            duration,
            seed,
            policy,
            oracle,
            shrink_budget,
            show,
            ledger: ledger_file,
            resume,
            commit,
        } => merge_command(
            version,
            count,
            duration,
            seed,
            policy,
            oracle,
            shrink_budget,
            show,
            ledger_file,
            resume,
            commit,
        ),
        Command::Dra {
            version,
            count,
            seed,
            oracle,
            out,
            show,
            print,
            ledger: ledger_file,
            resume,
        } => {
            if print {
                println!("{}", serde_json::to_string_pretty(&dra::generate::case(version, seed))?);
                return Ok(ExitCode::SUCCESS);
            }
            let mut seed = seed;
            let commit = match &ledger_file {
                Some(path) => {
                    let entries = ledger::read(path)?;
                    if resume {
                        seed = ledger::resume_seed(&entries, version, seed);
                    }
                    ledger::check_free(&entries, version, seed, Some(count))?;
                    Some(ledger_commit())
                }
                None => None,
            };
            let oracle = match oracle {
                Some(path) => path,
                None => dra_oracle_binary(version)?,
            };
            let options = dra::DraOptions {
                release: version,
                oracle: oracle.clone(),
                seed,
                count,
                out,
                show,
            };
            let summary = dra::run(&options)?;
            if let (Some(path), Some(commit)) = (ledger_file, commit)
                && summary.cases > 0
            {
                ledger::append(
                    &path,
                    &ledger::Entry {
                        release: version,
                        first_seed: seed,
                        last_seed: seed + summary.cases - 1,
                        counts: ledger::Counts {
                            scenarios: summary.cases,
                            same: summary.same,
                            same_refusals: summary.same_refusals,
                            differ: summary.differ,
                            unstable: summary.unstable,
                            timeouts: 0,
                            excluded: 0,
                            harness_failures: 0,
                            seconds: summary.seconds,
                        },
                        finished_utc: ledger::utc_now(),
                        commit,
                        oracle: dra_oracle_key(&oracle),
                        options: format!(
                            "dra allocated={} unschedulable={} errors={} pods={} extended={}",
                            summary.allocated, summary.unschedulable, summary.errors, summary.pods, summary.extended
                        ),
                    },
                )?;
            }
            match dra::report(&summary, &options) {
                Ok(()) => Ok(ExitCode::SUCCESS),
                Err(e) => {
                    eprintln!("difftest: {e:#}");
                    Ok(ExitCode::from(1))
                }
            }
        }
        Command::Supported => {
            for release in RELEASES.iter().filter(|r| engine_supports(**r)) {
                println!("{}", release.name());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `difftest merge`.
#[allow(clippy::too_many_arguments)] // reason: the subcommand's flags, taken apart once
fn merge_command(
    version: Release,
    count: Option<u64>,
    duration: Option<Duration>,
    seed: u64,
    policies: Vec<TopologyPolicyName>,
    oracle: Option<PathBuf>,
    shrink_budget: usize,
    show: usize,
    ledger_file: Option<PathBuf>,
    resume: bool,
    commit: Option<String>,
) -> anyhow::Result<ExitCode> {
    if count.is_none() && duration.is_none() {
        bail!("say how long to run: --count N, --duration D or both");
    }
    let policies = if policies.is_empty() {
        merge::POLICIES.to_vec()
    } else {
        policies
    };
    let binary = match oracle {
        Some(path) => path,
        None => Oracle::default_binary(version)?,
    };
    // Checks that the binary is the release's.
    let binary = Oracle::open(version, binary, Duration::from_secs(60))?.binary;
    let mut seed = seed;
    let recorded = match &ledger_file {
        Some(path) => {
            let entries = ledger::read(path)?;
            if resume {
                seed = ledger::resume_seed(&entries, version, seed);
            }
            ledger::check_free(&entries, version, seed, count)?;
            Some((path.clone(), commit.unwrap_or_else(ledger_commit)))
        }
        None => None,
    };
    let options = merge::MergeOptions {
        release: version,
        oracle: binary.clone(),
        seed,
        count,
        duration,
        policies: policies.clone(),
        shrink_budget,
        show,
    };
    let summary = merge::run(&options)?;
    if let Some((path, commit)) = recorded
        && summary.cases > 0
    {
        let entry = ledger::Entry {
            release: version,
            first_seed: seed,
            last_seed: seed + summary.cases - 1,
            counts: ledger::Counts {
                scenarios: summary.cases,
                same: summary.same,
                same_refusals: summary.same_refusals,
                differ: summary.differ,
                unstable: summary.unstable(),
                timeouts: 0,
                excluded: 0,
                harness_failures: summary.harness_failures.len() as u64,
                seconds: summary.seconds,
            },
            finished_utc: ledger::utc_now(),
            commit,
            oracle: merge::oracle_key(&binary).unwrap_or_else(|| oracle_build(&binary)),
            options: format!(
                "merge policies={} rules={} over-8-nodes={} over-8-nodes-rules={}",
                merge::policy_list(&policies),
                summary.rule_cases,
                summary.big_cases,
                summary.big_rule_cases
            ),
        };
        ledger::append(&path, &entry)?;
    }
    for finding in &summary.findings {
        println!("{}", finding.report);
    }
    for (seed, why) in summary.harness_failures.iter().take(10) {
        println!("harness failure, seed {seed}: {why}");
    }
    for policy in &policies {
        println!(
            "merge {} {policy}: {} cases, {} differences",
            version.name(),
            summary.cases,
            summary.differ_by_policy.get(policy).copied().unwrap_or(0)
        );
    }
    println!(
        "merge {}: {} cases from seed {seed} ({} merged from the providers' rules; {} on more than 8 NUMA nodes, \
         {} of them from rules): {} same ({} with a refusal), {} differ ({} unstable), {} harness failures, {} s",
        version.name(),
        summary.cases,
        summary.rule_cases,
        summary.big_cases,
        summary.big_rule_cases,
        summary.same,
        summary.same_refusals,
        summary.differ,
        summary.unstable(),
        summary.harness_failures.len(),
        summary.seconds
    );
    let clean = summary.differ == 0 && summary.harness_failures.is_empty();
    Ok(if clean { ExitCode::SUCCESS } else { ExitCode::from(1) })
}
