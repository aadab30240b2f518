//! `oracle merge` as a child process: started once, fed case lines on its
//! stdin, read answer lines from its stdout.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use anyhow::{Context, bail};
use topoalign_topology_manager::TopologyPolicyName;

use super::case::{Answer, Case, Reply};

/// Starts `binary merge`, its stderr passed through.
///
/// # Errors
/// When the process cannot be started.
pub fn spawn(binary: &Path) -> anyhow::Result<(Child, ChildStdin, ChildStdout)> {
    let mut child = Command::new(binary)
        .arg("merge")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {} merge", binary.display()))?;
    let stdin = child.stdin.take().context("the oracle's stdin")?;
    let stdout = child.stdout.take().context("the oracle's stdout")?;
    Ok((child, stdin, stdout))
}

/// Reads one answer line.
///
/// # Errors
/// When the oracle has ended or answered something else than a reply.
pub fn read_reply(from: &mut impl BufRead, line: &mut String) -> anyhow::Result<Reply> {
    line.clear();
    if from.read_line(line).context("reading the oracle's answer")? == 0 {
        bail!("the oracle ended before answering (see its stderr above)");
    }
    serde_json::from_str(line).with_context(|| format!("the oracle's answer {:?}", line.trim_end()))
}

/// One case at a time, for confirming and shrinking a difference.
pub struct MergeOracle {
    child: Child,
    stdin: BufWriter<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl MergeOracle {
    /// # Errors
    /// When the process cannot be started.
    pub fn start(binary: &Path) -> anyhow::Result<MergeOracle> {
        let (child, stdin, stdout) = spawn(binary)?;
        Ok(MergeOracle {
            child,
            stdin: BufWriter::new(stdin),
            stdout: BufReader::new(stdout),
            line: String::new(),
        })
    }

    /// The kubelet's answers for `case`, one per policy.
    ///
    /// # Errors
    /// When the oracle fails or answers with an error.
    pub fn ask(&mut self, case: &Case, policies: &[TopologyPolicyName]) -> anyhow::Result<Vec<Answer>> {
        self.stdin.write_all(case.wire(policies).as_bytes())?;
        self.stdin.flush()?;
        let reply = read_reply(&mut self.stdout, &mut self.line)?;
        if reply.id != case.id {
            bail!("the oracle answered case {} for case {}", reply.id, case.id);
        }
        match (reply.answers, reply.error) {
            (_, Some(error)) => bail!("the oracle refused case {}: {error}", case.id),
            (Some(answers), None) if answers.len() == policies.len() => Ok(answers),
            _ => bail!("the oracle's answer to case {} has not one answer per policy", case.id),
        }
    }
}

impl Drop for MergeOracle {
    fn drop(&mut self) {
        // Our own child, by its handle: closing stdin ends it; kill in case.
        let _ = self.stdin.flush();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
