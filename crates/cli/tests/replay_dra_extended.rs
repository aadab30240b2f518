//! `topoalign replay` on a DRA-backed extended resource (KEP-5004), run as
//! a user runs it on examples/dra/extended-resource.yaml: a pod asks for a
//! plain `example.com/gpu: 1` on a node with no device plugin for it, and
//! the DeviceClass naming the resource in `extendedResourceName` makes the
//! scheduler serve it from DRA (the special claim's request
//! `container-0-request-1`, as the real DynamicResources plugin names it:
//! testdata/dra/<release>/extended-gpu-one.json). The kubelet admits the pod
//! (a missing extended resource does not fail admission) without devices,
//! and the replay reports the GPU DRA gave, its NUMA node from the slice,
//! and MISALIGNED when it is not where the kubelet pinned the CPUs. A
//! release with the feature off (1.35), or a device plugin serving the
//! resource, gives no DRA entry.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

const EXAMPLE: &str = "examples/dra/extended-resource.yaml";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example() -> Value {
    let text = std::fs::read_to_string(repo().join(EXAMPLE)).expect("example");
    serde_yaml_ng::from_str(&text).expect("YAML")
}

/// `topoalign replay FILE -o FORMAT` of `scenario`, written to a temp file.
fn replay(scenario: &Value, format: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("scenario.json");
    std::fs::write(&path, serde_json::to_string(scenario).expect("JSON")).expect("write");
    let output = Command::cargo_bin("topoalign")
        .expect("binary")
        .args(["replay", path.to_str().expect("UTF-8 path"), "-o", format])
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    String::from_utf8(output.stdout).expect("UTF-8")
}

fn replay_json(scenario: &Value) -> Value {
    serde_json::from_str(&replay(scenario, "json")).expect("JSON document")
}

/// The NUMA node the example's slice gives a GPU.
fn slice_numa(scenario: &Value, device: &str) -> i64 {
    scenario["dra"]["resourceSlices"][0]["spec"]["devices"]
        .as_array()
        .expect("devices")
        .iter()
        .find(|d| d["name"] == device)
        .and_then(|d| d["attributes"]["resource.kubernetes.io/numaNode"]["int"].as_i64())
        .expect("the device's numaNode")
}

#[test]
fn the_extended_resource_is_served_by_dra_and_reported_beside_the_kubelet() {
    let scenario = example();
    let document = replay_json(&scenario);
    let train = &document["results"][1];
    assert_eq!(train["pod"], "ml/train");
    assert_eq!(
        train["admitted"], true,
        "the kubelet does not refuse a missing extended resource: {train}"
    );
    let container = &train["containers"][0];
    assert!(
        container
            .get("devices")
            .is_none_or(|d| d.as_array().is_some_and(Vec::is_empty)),
        "no device plugin serves example.com/gpu: {container}"
    );

    let dra = document["dra"].as_array().expect("a dra list");
    assert_eq!(dra.len(), 1, "only the pod with the extended resource: {dra:?}");
    let entry = &dra[0];
    assert_eq!(entry["pod"], "ml/train");
    assert_eq!(entry["outcome"], "allocated");
    let claim = &entry["claims"][0];
    assert_eq!(claim["name"], "extended-resources");
    assert_eq!(claim["claim"], "ml/train-extended-resources");
    let devices = claim["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 1, "example.com/gpu: 1 is one device: {devices:?}");
    let gpu = &devices[0];
    assert_eq!(gpu["request"], "container-0-request-1");
    assert_eq!(gpu["driver"], "gpu.example.com");
    let name = gpu["device"].as_str().expect("device name");
    let numa = slice_numa(&scenario, name);
    assert_eq!(gpu["numaNode"], numa, "the device's NUMA node is its slice's attribute");

    // MISALIGNED exactly when the device is off the kubelet's NUMA nodes.
    let kubelet: Vec<i64> = entry["kubeletNumaNodes"]
        .as_array()
        .expect("the kubelet pinned CPUs")
        .iter()
        .filter_map(Value::as_i64)
        .collect();
    let misaligned = entry["misaligned"].as_array().expect("misaligned");
    assert_eq!(
        misaligned.is_empty(),
        kubelet.contains(&numa),
        "{name} on {numa}, kubelet on {kubelet:?}: {misaligned:?}"
    );
    // The example is built so that the first-fit GPU (gpu-0, NUMA 0, as
    // the real plugin picks in extended-gpu-one) is not where the kubelet
    // can pin the pod.
    assert_eq!(name, "gpu-0");
    assert!(!misaligned.is_empty());

    let text = replay(&scenario, "text");
    assert!(
        text.contains("MISALIGNED ml/train") && text.contains("extended-resources/container-0-request-1"),
        "{text}"
    );
}

#[test]
fn release_1_35_leaves_the_extended_resource_to_device_plugins() {
    let mut scenario = example();
    scenario["kubelet"]["kubeletVersion"] = "1.35".into();
    let document = replay_json(&scenario);
    assert_eq!(document["results"][1]["admitted"], true);
    let dra = document["dra"].as_array().map(Vec::len).unwrap_or_default();
    assert_eq!(
        dra, 0,
        "DRAExtendedResource is off by default in 1.35: {}",
        document["dra"]
    );
}

#[test]
fn a_device_plugin_serving_the_resource_takes_it_from_dra() {
    let mut scenario = example();
    scenario["topology"]["devices"] = serde_json::json!({
        "example.com/gpu": [{"id": "dp-gpu0", "numa": [0]}, {"id": "dp-gpu1", "numa": [1]}]
    });
    let document = replay_json(&scenario);
    let train = &document["results"][1];
    assert_eq!(train["admitted"], true, "{train}");
    let devices = train["containers"][0]["devices"].to_string();
    assert!(devices.contains("dp-gpu"), "the device manager allocates it: {train}");
    let dra = document["dra"].as_array().map(Vec::len).unwrap_or_default();
    assert_eq!(dra, 0, "the node advertises example.com/gpu: {}", document["dra"]);
}
