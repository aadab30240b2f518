//! Shared by the cli's DRA and admission tests (simulate_dra*.rs,
//! explain_dra*.rs, admit.rs, pod_level_gate.rs): `simulate` on the example
//! fleets, the examples read and replayed, pod files for `admit` and
//! `explain`. Built on `agent_support` (the binary, the repository root):
//! a file using this module declares `mod agent_support;` too.
#![allow(dead_code, reason = "each test file uses a different part")]

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use crate::agent_support::{binary, repo, run_in_repo};

/// The node file `admit` and `explain` are asked about: two NUMA nodes of
/// 8 CPUs, CPU 0 reserved.
pub const TWO_NUMA: &str = "examples/nodes/two-numa.yaml";

/// `topoalign`, run from the repository root (as the README runs it).
pub fn topoalign() -> assert_cmd::Command {
    let mut command = assert_cmd::Command::new(binary());
    command.current_dir(repo());
    command
}

/// `name` in examples/fleet.
pub fn fleet_example(name: &str) -> PathBuf {
    repo().join("examples/fleet").join(name)
}

/// `topoalign simulate FLEET WORKLOAD --policy single-numa-node --threads 1`
/// with `extra`; `workload` is in examples/fleet.
pub fn simulate(fleet: &Path, workload: &str, extra: &[&str]) -> Output {
    topoalign()
        .arg("simulate")
        .arg(fleet)
        .arg(fleet_example(workload))
        .args(["--policy", "single-numa-node", "--threads", "1"])
        .args(extra)
        .output()
        .expect("runs")
}

/// [`simulate`]'s `-o json` document; the command must succeed.
pub fn simulate_json(fleet: &Path, workload: &str, extra: &[&str]) -> Value {
    let mut args = vec!["-o", "json"];
    args.extend_from_slice(extra);
    let output = simulate(fleet, workload, &args);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("JSON")
}

/// The run of `scheduler` in a `simulate` document.
pub fn run_of<'a>(doc: &'a Value, scheduler: &str) -> &'a Value {
    doc["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|r| r["scheduler"] == scheduler)
        .unwrap_or_else(|| panic!("no {scheduler} run in {doc}"))
}

/// A YAML file of the repository (`path` from its root).
pub fn yaml_file(path: &str) -> Value {
    let text = std::fs::read_to_string(repo().join(path)).expect("example");
    serde_yaml_ng::from_str(&text).expect("YAML")
}

/// `topoalign replay -o text` of `scenario`: its text, which must have a
/// Dynamic Resource Allocation section.
pub fn replay_text(scenario: &Value) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("scenario.json");
    std::fs::write(&path, serde_json::to_string(scenario).expect("JSON")).expect("write");
    let (status, stdout, stderr) = run_in_repo(&["replay", path.to_str().expect("path"), "-o", "text"]);
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.contains("Dynamic Resource Allocation"), "{stdout}");
    stdout
}

/// `text` written to `name` in a directory of `test`'s own, kept for the
/// test binary's run (`topoalign-<test>-<pid>` under the temporary
/// directory); a `name` with directories (`kubelet/config.yaml`) is
/// written there, its directories made.
pub fn temp_file(test: &str, name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("topoalign-{test}-{}", std::process::id()));
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap_or(&dir)).expect("temp dir");
    std::fs::write(&path, text).expect("write");
    path
}
