//! `topoalign defrag` driven as a user would: the real binary on the
//! example fleet document (examples/defrag/fleet.yaml).
//!
//! The example, by construction: two nodes of two NUMA nodes (7 and 8
//! allocatable CPUs), each running a 6-CPU batch pod (priority 0) on each
//! NUMA node, so 1 + 2 CPUs are free per node and no NUMA node has 4; two
//! 4-CPU training pods (priority 1000) wait. Evicting the batch pod of a
//! node's NUMA 1 frees 8 CPUs there, room for both training pods: one
//! eviction is the fewest, and the batch budget (at most one unavailable)
//! allows exactly one.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/defrag/fleet.yaml")
}

fn topoalign() -> Command {
    Command::cargo_bin("topoalign").expect("binary is built")
}

#[test]
fn the_example_plan_is_one_verified_eviction_within_the_rules() {
    let output = topoalign()
        .arg("defrag")
        .arg(example())
        .args(["-o", "json"])
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let plan: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let evictions = plan["evictions"].as_array().expect("evictions");
    assert_eq!(evictions.len(), 1, "{evictions:?}");
    let eviction = &evictions[0];
    assert!(eviction["pod"].as_str().unwrap_or_default().starts_with("jobs/batch-"));
    assert_eq!(eviction["priority"], 0);
    let pods = plan["pods"].as_array().expect("pods");
    assert_eq!(pods.len(), 2);
    for pod in pods {
        assert_eq!(pod["priority"], 1000);
        assert_ne!(pod["outcome"], "noPlan", "{pod}");
    }
    assert_eq!(plan["verification"]["verified"], true);
    assert_eq!(plan["verification"]["admitted"], 2);
    assert_eq!(plan["verification"]["evictionsReplayed"], 1);
    assert_eq!(plan["search"]["gaveUp"], false);
    // Stranded now: 1 + 2 CPUs on each node; after the plan, nothing
    // waits, so nothing is stranded.
    assert_eq!(plan["strandedBefore"]["cpus"], 6.0);
    for node in plan["strandedBefore"]["nodes"].as_array().expect("nodes") {
        let cpus: Vec<f64> = node["zones"]
            .as_array()
            .expect("zones")
            .iter()
            .map(|z| z["cpus"].as_f64().unwrap_or(-1.0))
            .collect();
        assert_eq!(cpus, [1.0, 2.0], "{node}");
    }
    assert_eq!(plan["strandedAfter"]["nodes"].as_array().map(Vec::len), Some(0));
}

#[test]
fn the_table_says_what_to_evict_and_that_the_replay_verified_it() {
    topoalign()
        .arg("defrag")
        .arg(example())
        .assert()
        .success()
        .stdout(predicate::str::contains("2 pending pods, 2 with a plan; 1 evictions."))
        .stdout(predicate::str::contains(
            "Verified by replay: 1 evictions, then 2 pods admitted",
        ))
        .stdout(predicate::str::contains("Stranded now: 6 CPUs"))
        .stdout(predicate::str::contains("NUMA 0 [#] 1 CPUs"));
}

#[test]
fn evict_needs_a_live_cluster_and_bad_documents_name_the_field() {
    topoalign()
        .arg("defrag")
        .arg(example())
        .arg("--evict")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--evict carries a plan out on a live cluster"));
    let dir = tempfile::tempdir().expect("temp dir");
    let bad = dir.path().join("bad.yaml");
    let text = std::fs::read_to_string(example())
        .expect("example")
        .replace("nodeName: two-numa-1", "nodeName: two-numa-7")
        .replace(
            "../nodes/two-numa.yaml",
            &format!(
                "{}/../nodes/two-numa.yaml",
                example().parent().unwrap_or(Path::new(".")).display()
            ),
        );
    std::fs::write(&bad, text).expect("write");
    topoalign()
        .arg("defrag")
        .arg(&bad)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("pods[2].spec.nodeName"));
    topoalign().arg("defrag").assert().code(2);
}

#[test]
fn a_pod_without_a_plan_exits_3_and_says_why() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("fleet.yaml");
    let text = std::fs::read_to_string(example()).expect("example").replace(
        "../nodes/two-numa.yaml",
        &format!(
            "{}/../nodes/two-numa.yaml",
            example().parent().unwrap_or(Path::new(".")).display()
        ),
    );
    // A 9-CPU pod: more than any NUMA node has (single-numa-node).
    let text = text.replace(
        "disruptionBudgets:",
        "  - metadata: {name: huge, namespace: ml}\n    spec:\n      priorityClassName: training\n      containers: [{name: c, resources: {limits: {cpu: \"9\", memory: 1Gi}}}]\ndisruptionBudgets:",
    );
    std::fs::write(&path, text).expect("write");
    topoalign()
        .arg("defrag")
        .arg(&path)
        .assert()
        .code(3)
        .stdout(predicate::str::contains(
            "ml/huge (priority 1000): no plan: no node would admit it even empty",
        ));
}
