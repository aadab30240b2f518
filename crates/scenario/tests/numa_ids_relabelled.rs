//! Every conformance vector with its NUMA nodes numbered anew past 63
//! (id i becomes 64 + 60·i, testdata/numa-ids/relabel.py), held to what
//! the real kubelet of its release did with it: `testdata/numa-ids/<release>.tsv`,
//! written by `testdata/numa-ids/sweep.sh` from the oracle. Where the
//! kubelet gave its answer (`same`: the vector's expected document, NUMA
//! ids renumbered) the engine must give it too; where the kubelet crashed
//! (`panic`) the engine must say that it crashes.
//!
//! `TOPOALIGN_VECTORS=0001,1112` limits a run to some vectors.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use topoalign_model::KubeletVersion;
use topoalign_scenario::{Replay, Scenario, ScenarioError, replay};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

fn label(id: u64) -> u64 {
    64 + 60 * id
}

fn relabel_reserved(kubelet: &mut Value, ids: &[u64]) {
    let Some(list) = kubelet.get_mut("reservedMemory").and_then(Value::as_array_mut) else {
        return;
    };
    for reservation in list {
        // A node the machine does not have keeps its number (the sweep
        // skips vectors where it would meet a new id).
        if let Some(node) = reservation.get("numaNode").and_then(Value::as_u64)
            && ids.contains(&node)
        {
            reservation["numaNode"] = json!(label(node));
        }
    }
}

/// relabel.py's `scenario` (for the vectors it applies to).
fn relabel_scenario(scenario: &mut Value) {
    let ids: Vec<u64> = scenario["topology"]["numaNodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node["id"].as_u64().unwrap())
        .collect();
    let topology = &mut scenario["topology"];
    for node in topology["numaNodes"].as_array_mut().unwrap() {
        node["id"] = json!(label(node["id"].as_u64().unwrap()));
    }
    for cpu in topology
        .get_mut("cpus")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        cpu["numa"] = json!(label(cpu["numa"].as_u64().unwrap()));
    }
    for devices in topology
        .get_mut("devices")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|d| d.values_mut())
    {
        for device in devices.as_array_mut().unwrap() {
            if let Some(nodes) = device.get_mut("numa").and_then(Value::as_array_mut) {
                for node in nodes {
                    *node = json!(label(node.as_u64().unwrap()));
                }
            }
        }
    }
    if let Some(kubelet) = scenario.get_mut("kubelet") {
        relabel_reserved(kubelet, &ids);
    }
    for event in scenario
        .get_mut("events")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        if let Some(kubelet) = event.get_mut("restart").and_then(|r| r.get_mut("kubelet")) {
            relabel_reserved(kubelet, &ids);
        }
    }
}

fn relabel_nodes(nodes: Option<&mut Value>) {
    for node in nodes.and_then(Value::as_array_mut).into_iter().flatten() {
        *node = json!(label(node.as_u64().unwrap()));
    }
}

fn relabel_containers(containers: Option<&mut Value>) {
    for container in containers.and_then(Value::as_array_mut).into_iter().flatten() {
        relabel_nodes(container.get_mut("memoryNuma"));
    }
}

/// relabel.py's `expected`.
fn relabel_expected(document: &mut Value) {
    for result in document
        .get_mut("results")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        relabel_containers(result.get_mut("containers"));
        for pod in result
            .get_mut("pods")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            relabel_containers(pod.get_mut("containers"));
        }
    }
    let Some(final_state) = document.get_mut("final") else {
        return;
    };
    for pod in final_state
        .get_mut("memoryAssignments")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|m| m.values_mut())
    {
        for nodes in pod.as_object_mut().into_iter().flat_map(|p| p.values_mut()) {
            relabel_nodes(Some(nodes));
        }
    }
    for nodes in final_state
        .get_mut("podMemoryAssignments")
        .and_then(Value::as_object_mut)
        .into_iter()
        .flat_map(|m| m.values_mut())
    {
        relabel_nodes(Some(nodes));
    }
}

/// What the engine answers, as the conformance test writes it, or
/// `Err(text)` when it says the kubelet crashes.
fn answer(scenario: &Value, version: KubeletVersion) -> Result<Value, String> {
    let mut scenario = Scenario::parse(&scenario.to_string()).map_err(|e| format!("invalid: {e}"))?;
    topoalign_k8s::apply_kubelet_version(&mut scenario.kubelet, version).unwrap();
    match replay(&scenario) {
        Ok(Replay::Completed(document)) => Ok(serde_json::to_value(document).unwrap()),
        Ok(Replay::Refused(text)) => Ok(json!({ "error": text })),
        Err(ScenarioError::Field { path, message }) if message.contains(" kubelet panics ") => {
            Err(format!("{path}: {message}"))
        }
        Err(invalid) => Ok(json!({ "error": format!("invalid scenario: {invalid}") })),
    }
}

/// The vectors' alternative texts: the engine's text may be any the
/// kubelet gave (Go map order), as in the conformance test.
fn matches(ours: &Value, expected: &Value, alternatives: Option<&Value>) -> bool {
    if ours == expected {
        return true;
    }
    let Some(alternatives) = alternatives.and_then(Value::as_object) else {
        return false;
    };
    let mut patched = expected.clone();
    for (place, texts) in alternatives {
        let pointer = if place == "error" {
            "/error".to_owned()
        } else {
            let Some(event) = place
                .strip_prefix("event ")
                .and_then(|p| p.strip_suffix(" message"))
                .and_then(|n| n.parse::<usize>().ok())
            else {
                continue;
            };
            format!("/results/{event}/message")
        };
        if let (Some(slot), Some(text)) = (patched.pointer_mut(&pointer), ours.pointer(&pointer))
            && texts.as_array().is_some_and(|t| t.contains(text))
        {
            *slot = text.clone();
        }
    }
    ours == &patched
}

#[test]
fn every_vector_numbered_past_63_answers_as_the_kubelet_did() {
    let only: Option<Vec<String>> = std::env::var("TOPOALIGN_VECTORS")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_owned()).collect());
    let mut releases = 0;
    let mut failures = Vec::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for version in KubeletVersion::SUPPORTED {
        let table = testdata().join(format!("numa-ids/{version}.tsv"));
        let table = std::fs::read_to_string(&table).unwrap_or_else(|e| panic!("{}: {e}", table.display()));
        releases += 1;
        let dir = testdata().join(format!("conformance/{version}"));
        let index: BTreeMap<String, Value> = std::fs::read_to_string(dir.join("index.json"))
            .map(|text| serde_json::from_str(&text).unwrap())
            .unwrap_or_default();
        for line in table.lines() {
            let mut fields = line.split('\t');
            let (name, outcome) = (fields.next().unwrap(), fields.next().unwrap());
            *counts.entry(format!("{version} {outcome}")).or_default() += 1;
            if outcome == "skipped"
                || only.as_ref().is_some_and(|o| !o.iter().any(|n| n == name))
                || !dir.join(format!("scenarios/{name}.json")).exists()
            {
                continue;
            }
            let read = |sub: &str| -> Value {
                serde_json::from_str(&std::fs::read_to_string(dir.join(sub).join(format!("{name}.json"))).unwrap())
                    .unwrap()
            };
            let mut scenario = read("scenarios");
            relabel_scenario(&mut scenario);
            let ours = answer(&scenario, version);
            match (outcome, &ours) {
                ("panic", Err(_)) => {}
                ("panic", Ok(document)) => {
                    failures.push(format!("{version}/{name}: the kubelet crashes; ours: {document}"));
                }
                ("same", Ok(document)) => {
                    let mut expected = read("expected");
                    relabel_expected(&mut expected);
                    let alternatives = index.get(name).and_then(|i| i.get("alternativeTexts"));
                    if !matches(document, &expected, alternatives) {
                        failures.push(format!(
                            "{version}/{name}:\n  ours:     {document}\n  expected: {expected}"
                        ));
                    }
                }
                ("same", Err(text)) => {
                    failures.push(format!("{version}/{name}: the kubelet answers; ours: {text}"));
                }
                (other, _) => panic!("{version}.tsv: {name}: outcome {other:?} (the sweep found a difference)"),
            }
        }
    }
    eprintln!("{counts:?}");
    assert_eq!(releases, KubeletVersion::SUPPORTED.len());
    for failure in failures.iter().take(10) {
        eprintln!("MISMATCH {failure}");
    }
    assert!(
        failures.is_empty(),
        "{} vectors answer otherwise than the kubelet",
        failures.len()
    );
}
