//! `topoalign replay` driven as a user would: the real binary, real files.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn topoalign() -> Command {
    Command::cargo_bin("topoalign").expect("binary is built")
}

#[test]
fn the_readme_example_replays_as_json() {
    let output = topoalign()
        .arg("replay")
        .arg(repo().join("examples/scenarios/two-socket-gpu.yaml"))
        .output()
        .expect("runs");
    assert!(output.status.success());
    let doc: Value = serde_json::from_slice(&output.stdout).expect("JSON on stdout");
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results[0]["admitted"], true);
    assert_eq!(results[0]["containers"][0]["cpus"], "12-15,36-39");
    assert_eq!(results[0]["containers"][0]["devices"]["nvidia.com/gpu"][0], "gpu0");
    assert_eq!(results[1]["reason"], "TopologyAffinityError");
    assert_eq!(results[4]["deleted"], true);
    assert_eq!(results[5]["admitted"], true);
    assert_eq!(doc["final"]["cpuAssignments"]["ml/train-3"]["trainer"], "12-13,36-37");
}

#[test]
fn text_format_is_a_table_for_people() {
    topoalign()
        .args(["replay", "-o", "text"])
        .arg(repo().join("examples/scenarios/two-socket-gpu.yaml"))
        .assert()
        .success()
        .stdout(predicate::str::contains("REJECTED TopologyAffinityError"))
        .stdout(predicate::str::contains("shared CPU pool: 0-11,14-35,38-47"));
}

#[test]
fn a_conformance_vector_matches_through_the_binary() {
    let shared = repo().join("testdata/conformance/1.32");
    let output = topoalign()
        .arg("replay")
        .arg(shared.join("scenarios/1112.json"))
        .output()
        .expect("runs");
    let ours: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(shared.join("expected/1112.json")).expect("expected"))
            .expect("JSON");
    assert_eq!(ours, expected);
}

#[test]
fn a_refused_configuration_prints_the_kubelet_error_and_exits_2() {
    let scenario = r#"{"topology": {"numaNodes": [{"id": 0, "memory": "8Gi"}],
        "cpus": [{"id": 0, "core": 0, "socket": 0, "numa": 0}]},
      "kubelet": {"cpuManagerPolicy": "static"}, "events": []}"#;
    let output = topoalign()
        .args(["replay", "-"])
        .write_stdin(scenario)
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let doc: Value = serde_json::from_slice(&output.stdout).expect("JSON error document");
    assert_eq!(
        doc["error"],
        "[cpumanager] unable to determine reserved CPU resources for static policy"
    );
}

#[test]
fn a_malformed_scenario_names_the_file_and_field_and_exits_2() {
    let dir = tempdir();
    let file = dir.join("bad.yaml");
    std::fs::write(&file, "topology:\n  numaNodes:\n    - {id: 0, memory: lots}\n").expect("write");
    let output = topoalign().arg("replay").arg(&file).output().expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let doc: Value = serde_json::from_slice(&output.stdout).expect("JSON error document");
    let error = doc["error"].as_str().expect("error text");
    assert!(error.starts_with("invalid scenario: "), "{error}");
    assert!(error.contains("bad.yaml"), "{error}");
    assert!(error.contains("topology.numaNodes[0].memory"), "{error}");
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    topoalign()
        .args(["replay", "/nonexistent/scenario.yaml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read /nonexistent/scenario.yaml"));
}

/// A fresh directory under the target dir (no tempfile dependency needed
/// for one file).
fn tempdir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("topoalign-cli-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// `--kubelet-version` chooses the release's rules for a scenario that does
/// not name one (v1.32 vector 1257: the v1.34 uncore-cache rule gives other
/// CPUs, as the v1.34.4 kubelet does); a scenario naming another release,
/// or an unsupported flag, is refused naming the file or the flag.
#[test]
fn the_kubelet_version_flag_chooses_the_release() {
    let vectors = repo().join("testdata/conformance");
    let scenario = vectors.join("1.32/scenarios/1257.json");
    let answer = |version: &str| -> Value {
        let output = topoalign()
            .args(["replay", "--kubelet-version", version])
            .arg(&scenario)
            .output()
            .expect("runs");
        assert!(output.status.success(), "{version}");
        serde_json::from_slice(&output.stdout).expect("JSON on stdout")
    };
    let expected = |path: &str| -> Value {
        serde_json::from_str(&std::fs::read_to_string(vectors.join(path)).expect("vector")).expect("JSON")
    };
    assert_eq!(answer("1.32"), expected("1.32/expected/1257.json"));
    assert_eq!(answer("v1.33.1"), expected("1.32/expected/1257.json"));
    assert_eq!(answer("1.34"), expected("1.34/expected/hand-1257.json"));

    topoalign()
        .args(["replay", "--kubelet-version", "1.33"])
        .arg(vectors.join("1.34/scenarios/hand-1257.json"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "hand-1257.json: kubelet.kubeletVersion: the configuration says kubelet 1.34 but --kubelet-version says 1.33",
        ));
    topoalign()
        .args(["replay", "--kubelet-version", "1.31"])
        .arg(&scenario)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--kubelet-version"));
}

/// A NUMA node reserving more memory than it has: the kubelet starts and
/// decides (the vector's expected document is the real kubelet's), so
/// `replay` gives that answer; the hazard is a warning on stderr, and the
/// other commands that start such a node (`explain`, `nrt`) show it too.
#[test]
fn a_reservation_overrun_is_replayed_as_the_kubelet_does_with_a_warning() {
    let vectors = repo().join("testdata/conformance/1.37");
    let scenario = vectors.join("scenarios/hand-reserved-memory-overrun.json");
    let output = topoalign().arg("replay").arg(&scenario).output().expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let ours: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(vectors.join("expected/hand-reserved-memory-overrun.json")).expect("expected"),
    )
    .expect("JSON");
    assert_eq!(ours, expected);
    let warning = "warning: reservedMemory: NUMA node 1 reserves 1073741824 bytes of memory but has only 536870912";
    assert!(
        String::from_utf8_lossy(&output.stderr).contains(warning),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    topoalign()
        .arg("nrt")
        .arg(&scenario)
        .assert()
        .success()
        .stderr(predicate::str::contains(warning));
    let explained = topoalign()
        .args(["explain", "--node"])
        .arg(&scenario)
        .arg(repo().join("examples/pods/fragmented.yaml"))
        .output()
        .expect("runs");
    assert!(explained.status.success());
    // The text report wraps its lines; the words are what count.
    let words = String::from_utf8_lossy(&explained.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(words.contains(warning), "{words}");
}
