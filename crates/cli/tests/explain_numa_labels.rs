//! `topoalign explain` and `topoalign diagnose` on machines with NUMA ids
//! of 64 and more, read as the kubelet reads them (issue #29, never
//! stricter than the kubelet). Under topology policy `none` the kubelet
//! decides as on the machine numbered 0..n in id order, so the explanation
//! must be the one on that machine with its ids written back — both are
//! computed here by running the command, no answer is written down —
//! beside a warning that any other policy crashes this kubelet; under
//! `single-numa-node` the kubelet crashes, and the answer says so.

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

mod agent_support;
mod common;
#[path = "../../explain/tests/renumbered/mod.rs"]
mod renumbered;

use common::topoalign;
use renumbered::map_document;

fn write(name: &str, text: &str) -> PathBuf {
    common::temp_file("explain-numa-labels", name, text)
}

/// The kubelet configuration (a `kubelet:` block's fields, two spaces in).
fn kubelet(policy: &str) -> String {
    format!(
        "  topologyManagerPolicy: {policy}\n  cpuManagerPolicy: static\n  reservedSystemCPUs: \"0\"\n  \
         memoryManagerPolicy: None\n"
    )
}

/// A node scenario with NUMA nodes `ids` (4 CPUs and 4Gi each, one
/// `example.com/gpu` on each) and the kubelet configuration of `policy`.
/// Two calls with different ids give the same machine but for the ids.
fn node(name: &str, ids: [usize; 2], policy: &str) -> PathBuf {
    let mut text = format!(
        "topology:\n  numaNodes:\n    - {{id: {}, memory: 4Gi}}\n    - {{id: {}, memory: 4Gi}}\n  cpus:\n",
        ids[0], ids[1]
    );
    for cpu in 0..8 {
        text.push_str(&format!(
            "    - {{id: {cpu}, core: {cpu}, socket: {}, numa: {}}}\n",
            cpu / 4,
            ids[cpu / 4]
        ));
    }
    text.push_str("  devices:\n    example.com/gpu:\n");
    for (index, id) in ids.iter().enumerate() {
        text.push_str(&format!("      - {{id: gpu-{index}, numa: [{id}]}}\n"));
    }
    text.push_str("kubelet:\n");
    text.push_str(&kubelet(policy));
    write(name, &text)
}

/// Pods to explain: two admitted (exclusive CPUs, a device), one too
/// large for the node (rejected, with fixes), one more admitted.
fn pods() -> PathBuf {
    let pod = |name: &str, cpu: &str, gpus: u32| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: c\n    \
             resources:\n      limits: {{cpu: '{cpu}', memory: 1Gi, example.com/gpu: '{gpus}'}}\n"
        )
    };
    let pods = [
        pod("a", "2", 1),
        pod("b", "3", 1),
        pod("big", "40", 0),
        pod("c", "1", 0),
    ];
    write("pods.yaml", &pods.join("---\n"))
}

fn run(args: &[&str], files: &[&Path]) -> Output {
    topoalign().args(args).args(files).output().expect("runs")
}

fn json_of(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("JSON on stdout ({e}): {}", String::from_utf8_lossy(&output.stderr)))
}

/// The document without the warnings naming NUMA node id 64 (the
/// renumbered machine has none); how many there were.
fn without_past_masks_warnings(mut document: Value) -> (Value, usize) {
    let mut removed = 0;
    for result in document["results"].as_array_mut().expect("results") {
        if let Some(warnings) = result["warnings"].as_array_mut() {
            let before = warnings.len();
            warnings.retain(|w| !w.as_str().unwrap_or_default().contains("NUMA node id 64"));
            removed += before - warnings.len();
        }
    }
    (document, removed)
}

#[test]
fn explain_under_policy_none_is_the_renumbered_machines_with_the_ids_kept() {
    let pods = pods();
    let labelled = node("labelled.yaml", [0, 64], "none");
    let renumbered = node("renumbered.yaml", [0, 1], "none");
    let got = run(&["explain", "-o", "json", "--node"], &[&labelled, &pods]);
    let expected = run(&["explain", "-o", "json", "--node"], &[&renumbered, &pods]);
    assert_eq!(got.status.code(), expected.status.code());
    let (got, warned) = without_past_masks_warnings(json_of(&got));
    let expected = map_document(&json_of(&expected), &|n| [0, 64][n]);
    assert_eq!(got, expected);
    assert!(
        warned >= 4,
        "every pod is warned that other policies crash this kubelet"
    );
    assert!(
        got["results"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["admitted"] == false && !r["explanation"]["fixes"].as_array().unwrap().is_empty()),
        "a rejection is explained with fixes"
    );
    assert!(got.to_string().contains("\"node\":64"), "the table names NUMA 64");
    // In text too: the warning beside the verdicts.
    let text = run(&["explain", "--node"], &[&labelled, &pods]);
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("NUMA node id 64"), "{text}");
    assert!(!text.contains("NUMA 1:") && !text.contains("NUMA 1 "), "{text}");
}

#[test]
fn explain_under_single_numa_node_says_the_kubelet_crashes() {
    let labelled = node("crash.yaml", [0, 64], "single-numa-node");
    let pod = write(
        "one.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec:\n  containers:\n  - name: c\n    resources:\n      \
         limits: {cpu: '2', memory: 1Gi}\n",
    );
    let output = run(&["explain", "--node"], &[&labelled, &pod]);
    let text = String::from_utf8(output.stdout).unwrap();
    assert!(
        text.contains("NUMA node id 64 does not fit its 64-bit NUMA masks"),
        "{text}"
    );
    assert!(text.to_lowercase().contains("crash"), "{text}");
    let document = json_of(&run(&["explain", "-o", "json", "--node"], &[&labelled, &pod]));
    let result = &document["results"][0];
    assert_eq!(result["admitted"], false);
    assert_eq!(result["reason"], "KubeletPanic");
    assert!(
        result["message"]
            .as_str()
            .unwrap()
            .contains("topology manager policy single-numa-node builds masks of every NUMA node"),
        "{result}"
    );
}

#[test]
fn diagnose_shows_the_machines_numa_ids_and_warns() {
    let labelled = node("diagnosed.yaml", [0, 64], "none");
    let config = write(
        "kubelet/config.yaml",
        &format!(
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n{}",
            kubelet("none").replace("\n  ", "\n").trim_start()
        ),
    );
    let dir = config.parent().expect("the kubelet directory");
    let pods = pods();
    let output = topoalign()
        .args(["diagnose", "--no-pod-resources", "--kubelet-dir"])
        .arg(dir)
        .arg("--node")
        .arg(&labelled)
        .arg(&pods)
        .args(["-o", "json"])
        .output()
        .expect("runs");
    let document = json_of(&output);
    let nodes: Vec<u64> = document["numa"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_u64().unwrap())
        .collect();
    assert_eq!(nodes, [0, 64], "{document}");
    let notes = document["notes"].to_string();
    assert!(
        notes.contains("NUMA node id 64") && notes.contains("topologyManagerPolicy none"),
        "{notes}"
    );
    assert_eq!(document["results"].as_array().unwrap().len(), 4);
    let text = topoalign()
        .args(["diagnose", "--no-pod-resources", "--kubelet-dir"])
        .arg(dir)
        .arg("--node")
        .arg(&labelled)
        .output()
        .expect("runs");
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("NUMA 64 (CPUs 4-7)"), "{text}");
}
