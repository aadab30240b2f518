//! The two judges of a scenario and what they answer: the oracle (the real
//! kubelet code of one release: `oracle replay`, a process per scenario, or
//! `oracle batch`, one process for many)
//! and the engine (`topoalign-scenario`'s replay, in process, exactly what
//! the conformance test and `topoalign replay` run).

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::{Value, json};
use topoalign_scenario::{Replay, Scenario, replay};

use crate::release::Release;

/// What one side answered for a scenario.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A result document, or `{"error": ...}` for a configuration the
    /// kubelet refuses to start with.
    Document(Value),
    /// The scenario is malformed for this side (`{"error": "invalid
    /// scenario: ..."}`): not a kubelet decision.
    Invalid(String),
    /// The engine panicked (always a bug).
    Panic(String),
    /// The oracle did not finish in time (the kubelet's merge is
    /// exponential; such scenarios are skipped, not judged).
    Timeout,
    /// The oracle harness itself failed (exit status 1, no document).
    Failed(String),
}

impl Answer {
    /// The answer as the JSON document a side prints.
    pub fn to_json(&self) -> Value {
        match self {
            Answer::Document(doc) => doc.clone(),
            Answer::Invalid(text) => json!({"error": format!("invalid scenario: {text}")}),
            Answer::Panic(text) => json!({"panic": text}),
            Answer::Timeout => json!({"timeout": true}),
            Answer::Failed(text) => json!({"harness failure": text}),
        }
    }

    /// A start-up refusal: `{"error": ...}`.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Answer::Document(doc) if doc.get("error").is_some())
    }
}

/// The engine's answer, in process. A panic is caught and reported.
pub fn engine(text: &str) -> Answer {
    let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| Scenario::parse(text).and_then(|s| replay(&s))));
    match outcome {
        Ok(Ok(Replay::Completed(doc))) => match serde_json::to_value(doc) {
            Ok(value) => Answer::Document(value),
            Err(e) => Answer::Panic(format!("result document does not serialise: {e}")),
        },
        Ok(Ok(Replay::Refused(error))) => Answer::Document(json!({ "error": error })),
        Ok(Err(invalid)) => Answer::Invalid(invalid.to_string()),
        Err(panic) => Answer::Panic(
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "a panic without a message".to_owned()),
        ),
    }
}

/// The releases the engine reproduces, found by asking it: a scenario
/// naming a release it does not reproduce is refused as invalid, naming
/// `kubeletVersion`.
pub fn engine_supports(release: Release) -> bool {
    let probe = json!({
        "topology": {"numaNodes": [{"id": 0, "memory": "1Gi"}], "cpus": [{"id": 0, "core": 0, "socket": 0, "numa": 0}]},
        "kubelet": {"kubeletVersion": release.name()},
        "events": [],
    });
    match engine(&probe.to_string()) {
        Answer::Invalid(text) => !text.contains("kubeletVersion"),
        _ => true,
    }
}

/// The oracle binary of one release.
#[derive(Clone, Debug)]
pub struct Oracle {
    pub release: Release,
    pub binary: PathBuf,
    pub timeout: Duration,
}

impl Oracle {
    /// Where `oracle/build.sh` puts the release's binary:
    /// `${TOPOALIGN_CACHE:-$HOME/.cache/topoalign}/oracle/<release>/oracle`
    /// (a link to the build used last).
    pub fn default_binary(release: Release) -> anyhow::Result<PathBuf> {
        let cache = match std::env::var_os("TOPOALIGN_CACHE") {
            Some(dir) => PathBuf::from(dir),
            None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?).join(".cache/topoalign"),
        };
        Ok(cache.join("oracle").join(release.name()).join("oracle"))
    }

    /// The oracle at `binary`, checked to be the release's.
    ///
    /// # Errors
    /// When the binary is missing, does not run, or runs another release.
    pub fn open(release: Release, binary: PathBuf, timeout: Duration) -> anyhow::Result<Oracle> {
        let out = Command::new(&binary).arg("version").output().with_context(|| {
            format!(
                "cannot run the v{} oracle {}: build it with oracle/build.sh {}",
                release.name(),
                binary.display(),
                release.name()
            )
        })?;
        let says = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if says != release.name() {
            bail!("{} is the v{says} oracle, not v{}", binary.display(), release.name());
        }
        Ok(Oracle {
            release,
            binary,
            timeout,
        })
    }

    /// The oracle's answer for the scenario in `file`.
    pub fn answer(&self, file: &Path) -> Answer {
        // A process group of its own: the oracle re-executes itself in a
        // mount namespace, and a timeout must stop both processes.
        let child = Command::new(&self.binary)
            .arg("replay")
            .arg(file)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn();
        let mut child = match child {
            Ok(child) => child,
            Err(e) => return Answer::Failed(format!("cannot start {}: {e}", self.binary.display())),
        };
        let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
            return Answer::Failed("no pipes to the oracle".into());
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut out = Vec::new();
            let mut err = Vec::new();
            let read = stdout.read_to_end(&mut out).and_then(|_| stderr.read_to_end(&mut err));
            let _ = tx.send(read.map(|_| (out, err)));
        });
        let output = match rx.recv_timeout(self.timeout) {
            Ok(Ok(output)) => output,
            Ok(Err(e)) => return Answer::Failed(format!("reading the oracle's output: {e}")),
            Err(_) => {
                // The whole group: the namespaced child holds the pipes too.
                let _ = Command::new("kill")
                    .args(["-KILL", "--", &format!("-{}", child.id())])
                    .status();
                let _ = child.wait();
                return Answer::Timeout;
            }
        };
        let status = match child.wait() {
            Ok(status) => status,
            Err(e) => return Answer::Failed(format!("waiting for the oracle: {e}")),
        };
        let (out, err) = output;
        let doc: Option<Value> = serde_json::from_slice(&out).ok();
        from_replay(status.code(), doc, || {
            format!(
                "{} {}",
                String::from_utf8_lossy(&out).trim(),
                String::from_utf8_lossy(&err).trim()
            )
        })
    }
}

/// What `oracle replay` exiting with `code` after printing `doc` answers;
/// `text` is the harness's message, asked for only when it failed.
fn from_replay(code: Option<i32>, doc: Option<Value>, text: impl FnOnce() -> String) -> Answer {
    match (code, doc) {
        (Some(0), Some(doc)) => Answer::Document(doc),
        (Some(2), Some(doc)) => {
            let text = doc.get("error").and_then(Value::as_str).unwrap_or_default();
            Answer::Invalid(text.strip_prefix("invalid scenario: ").unwrap_or(text).to_owned())
        }
        (code, _) => Answer::Failed(format!("exit status {code:?}: {}", text())),
    }
}

/// Scenarios one `oracle batch` process replays before a fresh one takes
/// over: each replay leaves its CPU manager's sleeping reconcile goroutine
/// behind (oracle/batch.go), so a batch must not live for ever.
const BATCH_LIFETIME: usize = 300;

/// The Go collector's target for a batch process, unless the caller's
/// environment sets `GOGC`: the kubelet's hint merge allocates a great
/// deal, and at Go's default (100) the collector takes about a quarter of
/// a batch's CPU. At 400 a batch of 150 generated scenarios used 25 % less
/// CPU for about 125 MB instead of 80 MB. The answers do not depend on it.
const BATCH_GOGC: &str = "400";

/// An `oracle batch` process (oracle/batch.go): many replays in one
/// process, each from a fresh state, answers streamed back, the same
/// answers as [`Oracle::answer`] (`oracle check --batch` checks that on the
/// vectors) at a fraction of the cost. Restarted after a timeout, a failure
/// or [`BATCH_LIFETIME`] scenarios.
pub struct Batch {
    oracle: Oracle,
    process: Option<BatchProcess>,
}

struct BatchProcess {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    served: usize,
}

impl BatchProcess {
    fn kill(mut self) {
        // The whole group: the namespaced child holds the pipes too.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.wait();
    }
}

/// One line of `oracle batch`.
#[derive(Deserialize)]
struct BatchLine {
    status: i32,
    document: Value,
    #[serde(default)]
    stderr: String,
}

impl Batch {
    pub fn new(oracle: &Oracle) -> Batch {
        Batch {
            oracle: oracle.clone(),
            process: None,
        }
    }

    fn start(&self) -> std::io::Result<BatchProcess> {
        let mut command = Command::new(&self.oracle.binary);
        if std::env::var_os("GOGC").is_none() {
            command.env("GOGC", BATCH_GOGC);
        }
        let mut child = command
            .arg("batch")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("no pipes to the oracle"));
        };
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Ok(BatchProcess {
            child,
            stdin,
            lines,
            served: 0,
        })
    }

    /// The oracle's answer for the scenario in `file` (an absolute path).
    /// When the batch process dies without answering, the scenario is
    /// replayed in a fresh process, whose answer (or failure text) counts.
    pub fn answer(&mut self, file: &Path) -> Answer {
        let process = match self.process.take() {
            Some(p) if p.served < BATCH_LIFETIME => p,
            old => {
                if let Some(old) = old {
                    old.kill();
                }
                match self.start() {
                    Ok(p) => p,
                    Err(e) => {
                        return Answer::Failed(format!("cannot start {} batch: {e}", self.oracle.binary.display()));
                    }
                }
            }
        };
        let mut process = process;
        if writeln!(process.stdin, "{}", file.display())
            .and_then(|()| process.stdin.flush())
            .is_err()
        {
            process.kill();
            return self.oracle.answer(file);
        }
        match wait_for_line(&process, self.oracle.timeout) {
            Ok(line) => {
                process.served += 1;
                let Ok(line) = serde_json::from_str::<BatchLine>(&line) else {
                    process.kill();
                    return Answer::Failed(format!("oracle batch answered {line:?}"));
                };
                if line.status == 1 {
                    // A panic ends the batch; a harness failure may have
                    // left anything behind: start afresh.
                    process.kill();
                } else {
                    self.process = Some(process);
                }
                from_replay(Some(line.status), Some(line.document), || line.stderr)
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                process.kill();
                Answer::Timeout
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                process.kill();
                self.oracle.answer(file)
            }
        }
    }
}

/// Waits for the batch's next answer while the oracle has used less than
/// `limit` of CPU time (user and system, all processes of its group: the
/// batch re-executes itself in a mount namespace) on it, and at most ten
/// times `limit` of wall-clock time. CPU time, not wall-clock time, so that
/// what counts as a timeout does not depend on the machine's load; where
/// `/proc` cannot be read, wall-clock time.
fn wait_for_line(process: &BatchProcess, limit: Duration) -> Result<String, mpsc::RecvTimeoutError> {
    const POLL: Duration = Duration::from_millis(250);
    let pgid = process.child.id();
    let started = std::time::Instant::now();
    let baseline = group_cpu(pgid);
    loop {
        let waited = started.elapsed();
        let wall_left = (limit * 10).saturating_sub(waited);
        match process.lines.recv_timeout(POLL.min(wall_left)) {
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let cpu = match (baseline, group_cpu(pgid)) {
                    (Some(before), Some(now)) => now.saturating_sub(before),
                    _ => waited + POLL,
                };
                if cpu >= limit || started.elapsed() >= limit * 10 {
                    return Err(mpsc::RecvTimeoutError::Timeout);
                }
            }
            other => return other,
        }
    }
}

/// CPU time (user and system) used so far by the processes of process
/// group `pgid`, from `/proc/*/stat`; `None` when `/proc` cannot be read.
fn group_cpu(pgid: u32) -> Option<Duration> {
    // USER_HZ, the unit of /proc's times: 100 on every Linux architecture
    // Rust supports.
    const TICKS_PER_SECOND: u64 = 100;
    let mut ticks = 0u64;
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command name (which may hold spaces) in parentheses:
        // state, ppid, pgrp, ..., utime (14th field), stime (15th).
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
        if field(2) == Some(u64::from(pgid)) {
            ticks += field(11).unwrap_or(0) + field(12).unwrap_or(0);
        }
    }
    Some(Duration::from_millis(ticks * 1000 / TICKS_PER_SECOND))
}

impl Drop for Batch {
    fn drop(&mut self) {
        if let Some(p) = self.process.take() {
            p.kill();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's group, from `/proc/self/stat` (`pgrp`, 5th field).
    fn own_group() -> u32 {
        let stat = std::fs::read_to_string("/proc/self/stat").expect("Linux /proc");
        let (_, rest) = stat.rsplit_once(')').expect("a stat line");
        rest.split_whitespace()
            .nth(2)
            .and_then(|f| f.parse().ok())
            .expect("pgrp")
    }

    #[test]
    fn a_process_groups_cpu_time_is_read_from_proc() {
        let group = own_group();
        let mut sum = 0u64;
        let mut used = Duration::ZERO;
        // Work until the kernel has charged this group some CPU time.
        while used == Duration::ZERO {
            for i in 0..1_000_000u64 {
                sum = sum.wrapping_add(i * i);
            }
            used = group_cpu(group).expect("/proc is readable");
        }
        assert!(sum > 0);
        assert!(group_cpu(group).expect("/proc is readable") >= used);
        // No process group has an id above the kernel's pid_max (at most
        // 2^22): nothing charged.
        assert_eq!(group_cpu(u32::MAX), Some(Duration::ZERO));
    }
}
