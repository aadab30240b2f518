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

/// Runs `simulate FLEET WORKLOAD -o json` on text files.
fn simulate_texts(fleet: &str, workload: &str, extra: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().expect("temp dir");
    let fleet_path = dir.path().join("fleet.json");
    let workload_path = dir.path().join("workload.yaml");
    std::fs::write(&fleet_path, fleet).expect("fleet written");
    std::fs::write(&workload_path, workload).expect("workload written");
    topoalign()
        .current_dir(dir.path())
        .arg("simulate")
        .arg("fleet.json")
        .arg("workload.yaml")
        .args(extra)
        .output()
        .expect("runs")
}

/// A fleet entry of `numa` NUMA nodes with 2 CPUs and 4Gi each.
fn entry(name: &str, numa: u32) -> Value {
    let cpus: Vec<Value> = (0..numa * 2)
        .map(|id| serde_json::json!({"id": id, "core": id, "socket": 0, "numa": id / 2}))
        .collect();
    let numa_nodes: Vec<Value> = (0..numa)
        .map(|n| {
            let distances: Vec<u32> = (0..numa).map(|m| if m == n { 10 } else { 21 }).collect();
            serde_json::json!({"id": n, "memory": "4Gi", "distances": distances})
        })
        .collect();
    serde_json::json!({"name": name, "count": 2, "topology": {"numaNodes": numa_nodes, "cpus": cpus},
        "kubelet": {"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"}})
}

#[test]
fn json_names_the_rejected_and_unplaced_pods_in_the_tables_words() {
    let doc = simulate_json(&["--shuffle", "1"]);
    let output = topoalign()
        .arg("simulate")
        .arg(examples().join("fleet.yaml"))
        .arg(examples().join("workload.yaml"))
        .args(["--shuffle", "1"])
        .output()
        .expect("runs");
    assert!(output.status.success());
    let table = String::from_utf8_lossy(&output.stdout).to_string();
    let mut named = 0;
    for run in doc["runs"].as_array().expect("runs") {
        for (list, count, reasons) in [
            ("rejectedPods", "rejectedAtAdmission", "rejectionReasons"),
            ("unplacedPods", "unplaced", "unplacedReasons"),
        ] {
            let pods = run[list].as_array().expect(list);
            assert_eq!(pods.len() as u64, run[count].as_u64().unwrap_or(0), "{list} in {run}");
            // Each pod's reason is one of the counted reasons, counted right.
            let mut counted = std::collections::BTreeMap::<String, u64>::new();
            for pod in pods {
                let name = pod["pod"].as_str().expect("pod name");
                assert!(name.contains('/'), "{name}: namespace/name");
                *counted
                    .entry(pod["reason"].as_str().expect("reason").to_string())
                    .or_default() += 1;
            }
            let expected: std::collections::BTreeMap<String, u64> =
                serde_json::from_value(run[reasons].clone()).expect("reason counts");
            assert_eq!(counted, expected, "{reasons} in {run}");
            // The table prints the same words.
            for (reason, n) in &expected {
                assert!(table.contains(&format!("{n} {reason}")), "{n} {reason} not in\n{table}");
            }
            named += pods.len();
        }
    }
    assert!(named > 0, "the example has failed pods");
}

#[test]
fn an_empty_workload_has_no_fragmentation() {
    let output = topoalign()
        .arg("simulate")
        .arg(examples().join("fleet.yaml"))
        .arg("-")
        .args(["-o", "json", "--policy", "restricted"])
        .write_stdin("apiVersion: v1\nkind: List\nitems: []\n")
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let doc: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    for run in doc["runs"].as_array().expect("runs") {
        assert_eq!(run["fragmentation"]["cpu"], 0.0, "{run}");
        assert_eq!(run["fragmentation"]["memory"], 0.0, "{run}");
        assert!(run["freeCpus"].as_f64().unwrap_or(0.0) > 0.0);
    }
}

#[test]
fn a_kubelet_that_would_not_start_exits_2_naming_the_fleet_entry() {
    // Nine NUMA nodes: the topology manager will not start under any
    // policy but none.
    let fleet = serde_json::json!({"nodes": [entry("small", 2), entry("wide", 9)]}).to_string();
    let output = simulate_texts(&fleet, "generator: {pods: 3, sizes: [{cpu: '1', memory: 1Gi}]}\n", &[]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&output.stdout)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("fleet.json: invalid fleet: nodes[1] (wide).kubelet: the kubelet would not start"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "no report for a fleet that cannot run");
    // Under `none` alone it runs.
    let output = simulate_texts(
        &fleet,
        "generator: {pods: 3, sizes: [{cpu: '1', memory: 1Gi}]}\n",
        &["--policy", "none"],
    );
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn bad_sizes_exit_2_naming_the_file_and_field() {
    let fleet = serde_json::json!({"nodes": [entry("small", 2)]}).to_string();
    for (workload, expected) in [
        (
            "generator: {pods: 3, sizes: [{cpu: '-2', memory: 1Gi}]}\n",
            "workload.yaml: generator.sizes[0].cpu: \"-2\" is not positive",
        ),
        (
            "generator: {pods: 3, sizes: [{cpu: '1', memory: 0}]}\n",
            "workload.yaml: generator.sizes[0].memory: \"0\" is not positive",
        ),
        (
            "generator: {pods: 3, sizes: [{cpu: '2000000', memory: 1Gi}]}\n",
            "workload.yaml: generator.sizes[0].cpu: \"2000000\" is too large",
        ),
        (
            "generator: {pods: -3, sizes: [{cpu: '1', memory: 1Gi}]}\n",
            "workload.yaml: generator.pods: invalid value: integer `-3`",
        ),
    ] {
        let output = simulate_texts(&fleet, workload, &[]);
        assert_eq!(output.status.code(), Some(2), "{workload}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{stderr} (expected {expected})");
    }
    let mut zero = entry("none", 2);
    zero["count"] = 0.into();
    let fleet = serde_json::json!({"nodes": [entry("small", 2), zero]}).to_string();
    let output = simulate_texts(&fleet, "generator: {pods: 3, sizes: [{cpu: '1', memory: 1Gi}]}\n", &[]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("fleet.json: invalid fleet: nodes[1].count: must be at least 1"),
        "{stderr}"
    );
}
