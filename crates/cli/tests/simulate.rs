//! `topoalign simulate` driven as a user would: the real binary, the
//! example fleet and workloads.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fleet")
}

fn topoalign() -> Command {
    Command::cargo_bin("topoalign").expect("binary is built")
}

fn simulate_json(extra: &[&str]) -> Value {
    let output = topoalign()
        .arg("simulate")
        .arg(examples().join("fleet.yaml"))
        .arg(examples().join("workload.yaml"))
        .args(["-o", "json"])
        .args(extra)
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

#[test]
fn json_has_one_run_per_policy_and_scheduler_with_the_issues_field_names() {
    let doc = simulate_json(&["--shuffle", "1", "--verify"]);
    assert_eq!(doc["nodes"], 24);
    assert_eq!(doc["pods"], 258);
    let runs = doc["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 12);
    for run in runs {
        for field in [
            "policy",
            "scope",
            "scheduler",
            "scheduled",
            "rejectedAtAdmission",
            "unplaced",
            "strandedCpus",
            "strandedMemoryBytes",
            "strandedDevices",
            "strandedByZone",
            "fragmentation",
        ] {
            assert!(run.get(field).is_some(), "{field} missing in {run}");
        }
        let total = run["scheduled"].as_u64().unwrap_or(0)
            + run["rejectedAtAdmission"].as_u64().unwrap_or(0)
            + run["unplaced"].as_u64().unwrap_or(0);
        assert_eq!(total, 258);
        // The replay check agrees with the simulator, and exact never fails.
        assert_eq!(run["replayRejectedAtAdmission"], run["rejectedAtAdmission"]);
        if run["scheduler"] == "exact" {
            assert_eq!(run["rejectedAtAdmission"], 0);
        }
    }
    let unaware = runs
        .iter()
        .find(|r| r["policy"] == "single-numa-node" && r["scheduler"] == "unaware")
        .expect("run");
    assert!(unaware["rejectedAtAdmission"].as_u64().unwrap_or(0) > 0);
}

#[test]
fn policies_scopes_and_schedulers_can_be_chosen() {
    let doc = simulate_json(&[
        "--policy",
        "single-numa-node",
        "--scope",
        "container,pod",
        "--scheduler",
        "exact,unaware",
        "--scoring",
        "most-allocated",
    ]);
    let runs: Vec<(String, String, String)> = doc["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .map(|r| {
            let s = |k: &str| r[k].as_str().unwrap_or_default().to_string();
            (s("policy"), s("scope"), s("scheduler"))
        })
        .collect();
    let expected: Vec<(String, String, String)> = [
        ("container", "exact"),
        ("container", "unaware"),
        ("pod", "exact"),
        ("pod", "unaware"),
    ]
    .iter()
    .map(|(scope, scheduler)| ("single-numa-node".into(), scope.to_string(), scheduler.to_string()))
    .collect();
    assert_eq!(runs, expected);
}

#[test]
fn the_generator_and_the_table_and_the_plots() {
    let dir = std::env::temp_dir().join(format!("topoalign-simulate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let png = dir.join("report.png");
    let svg = dir.join("report.svg");
    topoalign()
        .arg("simulate")
        .arg(examples().join("fleet.yaml"))
        .arg(examples().join("generator.yaml"))
        .args(["--policy", "restricted"])
        .arg("--plot")
        .arg(&png)
        .arg("--plot")
        .arg(&svg)
        .assert()
        .success()
        .stdout(predicate::str::contains("restricted").and(predicate::str::contains("rejected at admission")))
        // Not a terminal: no progress bar on standard error.
        .stderr(predicate::str::is_empty());
    let png_bytes = std::fs::read(&png).expect("png written");
    assert_eq!(&png_bytes[..8], b"\x89PNG\r\n\x1a\n");
    let svg_text = std::fs::read_to_string(&svg).expect("svg written");
    assert!(svg_text.contains("<svg") && svg_text.contains("Pods rejected at admission"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_input_is_named_and_exits_2() {
    topoalign()
        .arg("simulate")
        .arg(examples().join("workload.yaml"))
        .arg(examples().join("workload.yaml"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid fleet"));
    topoalign()
        .arg("simulate")
        .arg(examples().join("fleet.yaml"))
        .arg("/nonexistent/workload.yaml")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read /nonexistent/workload.yaml"));
}
