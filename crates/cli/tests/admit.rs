//! `topoalign admit` / `explain` driven as a user would: multi-document
//! files, workloads, stdin, overrides, and clear errors naming the file and
//! field for input that cannot be read.

mod agent_support;
mod common;

use std::path::PathBuf;

use common::{TWO_NUMA as NODE, topoalign};
use predicates::prelude::*;
use serde_json::Value;

fn temp_file(name: &str, text: &str) -> PathBuf {
    common::temp_file("admit-tests", name, text)
}

fn json_of(output: &std::process::Output) -> Value {
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

#[test]
fn several_documents_and_workloads_are_admitted_in_order() {
    let file = temp_file(
        "stream.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n  metadata: {name: a}\n  spec: {containers: [{name: c, \
         resources: {limits: {cpu: '4', memory: 4Gi}}}]}\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: \
         {name: db, namespace: data}\nspec:\n  template:\n    spec: {containers: [{name: db, resources: {limits: \
         {cpu: '4', memory: 4Gi}}}]}\n---\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec: \
         {containers: [{name: j, resources: {limits: {cpu: '4', memory: 4Gi}}}]}\n",
    );
    let output = topoalign()
        .args(["admit", "--node", NODE, "--replicas", "2", "-o", "json"])
        .arg(&file)
        .output()
        .expect("runs");
    // Exit status 3: pods were rejected.
    assert_eq!(
        output.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc = json_of(&output);
    let pods: Vec<(&str, bool)> = doc["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| (r["pod"].as_str().expect("pod"), r["admitted"] == true))
        .collect();
    // 7 + 8 allocatable CPUs: two 4-CPU pods per NUMA node fit once each node
    // has room, the fourth 4-CPU pod no longer fits NUMA 0 (7 CPUs).
    assert_eq!(
        pods,
        [
            ("default/a", true),
            ("data/db-0", true),
            ("data/db-1", true),
            ("default/j-0", false),
            ("default/j-1", false)
        ]
    );
    let first = &doc["results"][0];
    for field in [
        "event",
        "pod",
        "admitted",
        "containers",
        "qosClass",
        "affinity",
        "warnings",
    ] {
        assert!(first.get(field).is_some(), "result entries have {field}");
    }
    assert!(
        doc["results"][3]["explanation"]["fixes"].is_array(),
        "rejected pods are explained"
    );
}

#[test]
fn standard_input_and_overrides() {
    let pod = "metadata: {name: s}\nspec: {containers: [{name: c, resources: {limits: {cpu: '12', memory: 40Gi}}}]}\n";
    let output = topoalign()
        .args(["admit", "-", "--node", NODE, "--policy", "restricted", "-o", "yaml"])
        .write_stdin(pod)
        .output()
        .expect("runs");
    assert!(output.status.success());
    let doc: Value = serde_yaml_ng::from_slice(&output.stdout).expect("YAML");
    // conformance vector 0002: restricted admits the 12-CPU pod on both nodes.
    assert_eq!(doc["results"][0]["admitted"], true);
    assert_eq!(doc["results"][0]["containers"][0]["cpus"], "1-4,8-15");
    assert_eq!(doc["results"][0]["affinity"], serde_json::json!([0, 1]));
}

#[test]
fn warnings_for_silent_no_ops() {
    let file = temp_file(
        "noops.yaml",
        "metadata: {name: burst}\nspec: {containers: [{name: c, resources: {requests: {cpu: '2'}, limits: {cpu: \
         '4'}}}]}\n---\nmetadata: {name: gpu}\nspec: {containers: [{name: c, resources: {limits: {cpu: '2', \
         memory: 1Gi, nvidia.com/gpu: '1'}}}]}\n",
    );
    let output = topoalign()
        .args([
            "admit",
            "--node",
            NODE,
            "--cpu-policy",
            "none",
            "--memory-policy",
            "None",
            "-o",
            "json",
        ])
        .arg(&file)
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let doc = json_of(&output);
    let warnings = |i: usize| doc["results"][i]["warnings"].to_string();
    assert!(warnings(0).contains("not Guaranteed"), "{}", warnings(0));
    assert!(warnings(1).contains("cpuManagerPolicy is none"), "{}", warnings(1));
    assert!(warnings(1).contains("memoryManagerPolicy is None"), "{}", warnings(1));
    assert!(
        warnings(1).contains("nvidia.com/gpu is not a device resource"),
        "{}",
        warnings(1)
    );
    assert_eq!(
        doc["results"][1]["admitted"], true,
        "the kubelet ignores the unknown device"
    );
}

#[test]
fn bad_input_names_the_file_and_field() {
    let table = [
        (
            "malformed.yaml",
            "kind: Pod\nmetadata: {name: p\nspec: [\n",
            "malformed.yaml: ",
        ),
        (
            "no-containers.yaml",
            "kind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n",
            "no-containers.yaml: spec.containers: a pod needs at least one container",
        ),
        (
            "negative.yaml",
            "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {memory: -1Gi}}}]}\n",
            "negative.yaml: spec.containers[0].resources.limits.memory: must be greater than or equal to 0",
        ),
        (
            "no-template.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 2}\n",
            "no-template.yaml: spec.template: a Deployment needs a pod template",
        ),
    ];
    for (name, text, expected) in table {
        let file = temp_file(name, text);
        topoalign()
            .args(["admit", "--node", NODE])
            .arg(&file)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(expected));
    }
    topoalign()
        .args(["admit", "examples/pods/too-large.yaml", "--node", "no/such/node.yaml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("no/such/node.yaml"));
    topoalign()
        .args([
            "admit",
            "examples/pods/too-large.yaml",
            "--node",
            NODE,
            "--reserved-cpus",
            "0-99",
        ])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("the kubelet would refuse to start"));
}
