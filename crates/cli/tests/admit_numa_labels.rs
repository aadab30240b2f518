//! `topoalign admit` on machines with NUMA ids of 64 and more, as the
//! kubelet reads them (issue #29, never stricter than the kubelet): under
//! topology policy `none` the kubelet decides as on the machine numbered
//! 0..n in id order, so admit's answer must be the answer on that machine
//! with the ids written back (both are computed here by running admit, no
//! answer is written down); where the kubelet crashes (any other policy,
//! the Static memory manager under `none`), admit says it crashes.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

mod agent_support;
mod common;
#[path = "../../explain/tests/renumbered/mod.rs"]
mod renumbered;

use agent_support::repo;
use common::topoalign;
use renumbered::{map_document, map_text};

fn write(name: &str, text: &str) -> PathBuf {
    common::temp_file("admit-numa-labels", name, text)
}

/// A node scenario whose NUMA nodes have the ids `ids` (in this order),
/// each with 4 CPUs (2 cores of 2 threads) of its own socket, 8Gi, a row
/// of distances (one per node, in id order) and one `example.com/gpu`
/// device; `kubelet` is the `kubelet:` block. Two calls with different
/// ids give the same machine but for the ids.
fn node(name: &str, ids: &[usize], kubelet: &str) -> PathBuf {
    let mut text = String::from("topology:\n  numaNodes:\n");
    for (index, id) in ids.iter().enumerate() {
        let row: Vec<String> = (0..ids.len())
            .map(|to| if to == index { "10".into() } else { "21".into() })
            .collect();
        text.push_str(&format!(
            "    - {{id: {id}, memory: 8Gi, distances: [{}]}}\n",
            row.join(", ")
        ));
    }
    text.push_str("  cpus:\n");
    for (index, id) in ids.iter().enumerate() {
        for thread in 0..4 {
            let cpu = index * 4 + thread;
            let core = index * 4 + thread / 2 * 2;
            text.push_str(&format!(
                "    - {{id: {cpu}, core: {core}, socket: {index}, numa: {id}}}\n"
            ));
        }
    }
    text.push_str("  devices:\n    example.com/gpu:\n");
    for (index, id) in ids.iter().enumerate() {
        text.push_str(&format!("      - {{id: gpu-{index}, numa: [{id}]}}\n"));
    }
    text.push_str("kubelet:\n");
    text.push_str(kubelet);
    write(name, &text)
}

const STATIC_CPUS_NONE: &str = "  topologyManagerPolicy: none\n  cpuManagerPolicy: static\n  \
                                reservedSystemCPUs: \"0\"\n  memoryManagerPolicy: None\n";

/// Pods whose answers print NUMA ids: exclusive CPUs spanning nodes,
/// devices, the shared pool; all admitted on two NUMA nodes and more.
fn pods() -> PathBuf {
    write(
        "pods.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: wide}\nspec:\n  containers:\n  - name: c\n    resources:\n      \
         limits: {cpu: '6', memory: 1Gi, example.com/gpu: '1'}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: \
         shared}\nspec:\n  containers:\n  - name: c\n    resources:\n      requests: {cpu: 500m, memory: 256Mi}\n---\n\
         apiVersion: v1\nkind: Pod\nmetadata: {name: pair}\nspec:\n  containers:\n  - name: c\n    resources:\n      \
         limits: {cpu: '2', memory: 1Gi, example.com/gpu: '1'}\n",
    )
}

fn admit(node: &Path, extra: &[&str]) -> Output {
    admit_pods(node, extra, &pods())
}

fn admit_pods(node: &Path, extra: &[&str], pods: &Path) -> Output {
    topoalign()
        .arg("admit")
        .arg("--node")
        .arg(node)
        .args(extra)
        .arg(pods)
        .output()
        .expect("runs")
}

fn json_of(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("JSON on stdout ({e}): {}", String::from_utf8_lossy(&output.stderr)))
}

fn text_of(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).expect("UTF-8")
}

/// The pod blocks of a text report (after the node's lines), words only:
/// longer ids change the wrapping and table widths, not the words.
fn pod_words(text: &str) -> String {
    let blocks = text.split_once("\n\n").map_or("", |(_, blocks)| blocks);
    blocks.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The warning admit adds under `none` on a machine with an id past 63.
const PAST_MASKS: &str = "does not fit the kubelet's 64-bit NUMA masks";

/// A text report without the lines of the past-masks warning (the warning
/// and its continuation lines).
fn without_past_masks_warning(text: &str) -> (String, usize) {
    let mut out = String::new();
    let mut removed = 0;
    let mut skipping = false;
    for line in text.lines() {
        if line.starts_with("  warning: NUMA node id") {
            skipping = true;
            removed += 1;
            continue;
        }
        if skipping && line.starts_with("    ") {
            continue;
        }
        skipping = false;
        out.push_str(line);
        out.push('\n');
    }
    (out, removed)
}

/// The same pods on `labelled` (ids with some past 63) and on the machine
/// numbered 0..n, under `none`: the same answers, ids mapped.
fn same_answers_with_ids_mapped(ids: &[usize]) {
    let name = ids.iter().map(ToString::to_string).collect::<Vec<_>>().join("-");
    let labelled = node(&format!("labelled-{name}.yaml"), ids, STATIC_CPUS_NONE);
    let dense: Vec<usize> = (0..ids.len()).collect();
    let renumbered = node(&format!("renumbered-{name}.yaml"), &dense, STATIC_CPUS_NONE);
    let map = |index: usize| ids[index];

    for extra in [&["-o", "json"][..], &["-o", "json", "--explain"][..]] {
        let on_labels = admit(&labelled, extra);
        let on_dense = admit(&renumbered, extra);
        assert_eq!(
            on_labels.status.code(),
            on_dense.status.code(),
            "{}",
            String::from_utf8_lossy(&on_labels.stderr)
        );
        let expected = map_document(&json_of(&on_dense), &map);
        let mut got = json_of(&on_labels);
        let results = got["results"].as_array_mut().expect("results");
        assert_eq!(results.len(), 3);
        for result in results {
            // Under none, every answer that is no crash carries the warning.
            let warnings = result["warnings"].as_array_mut().expect("warnings");
            let before = warnings.len();
            warnings.retain(|w| !w.as_str().unwrap_or_default().contains(PAST_MASKS));
            assert_eq!(warnings.len() + 1, before, "one past-masks warning: {result}");
        }
        assert_eq!(got, expected, "{extra:?} on ids {ids:?}");
    }

    for extra in [&[][..], &["--explain"][..]] {
        let on_labels = text_of(&admit(&labelled, extra));
        let on_dense = text_of(&admit(&renumbered, extra));
        let (on_labels, removed) = without_past_masks_warning(&on_labels);
        assert_eq!(removed, 3, "a warning beside each verdict:\n{on_labels}");
        assert_eq!(
            pod_words(&on_labels),
            pod_words(&map_text(&on_dense, &map)),
            "{extra:?} on ids {ids:?}:\n{on_labels}"
        );
        // Something NUMA-specific was compared.
        assert!(
            ids.iter()
                .filter(|&&id| id >= 64)
                .any(|id| on_labels.contains(&format!("NUMA {id}"))),
            "{on_labels}"
        );
        let node_line = on_labels.split("\n\n").next().unwrap_or_default();
        let node_words = node_line.split_whitespace().collect::<Vec<_>>().join(" ");
        let listed: Vec<String> = ids.iter().map(ToString::to_string).collect();
        assert!(
            node_words.contains(&format!("(ids {})", listed.join(", "))),
            "{node_words}"
        );
    }
}

#[test]
fn ids_0_and_64_answer_as_the_renumbered_machine_under_none() {
    same_answers_with_ids_mapped(&[0, 64]);
}

#[test]
fn ids_0_1_128_129_answer_as_the_renumbered_machine_under_none() {
    same_answers_with_ids_mapped(&[0, 1, 128, 129]);
}

/// Under single-numa-node the kubelet crashes admitting the first pod: the
/// verdict says so with the panic's text (exit 3, not admitted), and the
/// pods after it are not reached.
#[test]
fn single_numa_node_on_id_64_is_the_kubelets_crash() {
    let kubelet =
        "  topologyManagerPolicy: single-numa-node\n  cpuManagerPolicy: static\n  reservedSystemCPUs: \"0\"\n";
    let labelled = node("crash-0-64.yaml", &[0, 64], kubelet);
    let output = admit(&labelled, &[]);
    assert_eq!(
        output.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = text_of(&output);
    assert!(text.contains("THE KUBELET CRASHES"), "{text}");
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(words.contains("NUMA node id 64"), "{text}");
    assert!(words.contains("single-numa-node"), "{text}");
    assert!(
        !text.contains("default/wide: admitted") && !text.contains("default/wide: REJECTED"),
        "{text}"
    );
    assert!(words.contains("not reached: default/shared, default/pair"), "{text}");
    let explained = text_of(&admit(&labelled, &["--explain"]));
    assert!(
        explained.contains("on an empty node of this shape: the kubelet crashes there too"),
        "{explained}"
    );

    let output = admit(&labelled, &["-o", "json", "--explain"]);
    assert_eq!(output.status.code(), Some(3));
    let doc = json_of(&output);
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), 1, "the kubelet stops at the crash: {doc}");
    assert_eq!(results[0]["admitted"], false);
    assert_eq!(results[0]["reason"], "KubeletPanic");
    assert!(
        results[0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("NUMA node id 64")
    );
    assert!(String::from_utf8_lossy(&output.stderr).contains("not reached"));

    // The same machine numbered 0..n runs under that policy: the crash is
    // the ids'.
    let renumbered = node("crash-renumbered.yaml", &[0, 1], kubelet);
    let output = admit(&renumbered, &["-o", "json"]);
    let doc = json_of(&output);
    assert!(
        doc["results"]
            .as_array()
            .expect("results")
            .iter()
            .all(|r| r["reason"] != "KubeletPanic"),
        "{doc}"
    );
}

/// Under none the Static memory manager's default hint for a Guaranteed
/// container crashes the kubelet; a Burstable pod before it is admitted.
#[test]
fn static_memory_manager_under_none_crashes_on_a_guaranteed_pod() {
    let kubelet = "  topologyManagerPolicy: none\n  cpuManagerPolicy: static\n  reservedSystemCPUs: \"0\"\n  \
                   memoryManagerPolicy: Static\n  systemReserved: {memory: 1Gi}\n  reservedMemory:\n    - \
                   {numaNode: 64, limits: {memory: 1124Mi}}\n";
    let labelled = node("static-memory-0-64.yaml", &[0, 64], kubelet);
    let pods = write(
        "burstable-then-guaranteed.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: shared}\nspec:\n  containers:\n  - name: c\n    resources:\n      \
         requests: {cpu: 500m, memory: 256Mi}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: pinned}\nspec:\n  \
         containers:\n  - name: c\n    resources:\n      limits: {cpu: '2', memory: 1Gi}\n",
    );
    let output = topoalign()
        .args(["admit", "-o", "json", "--node"])
        .arg(&labelled)
        .arg(&pods)
        .output()
        .expect("runs");
    assert_eq!(
        output.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc = json_of(&output);
    let results = doc["results"].as_array().expect("results");
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["admitted"], true);
    // Beside the Burstable pod's verdict: why it escapes the crash.
    let warnings = results[0]["warnings"].as_array().expect("warnings");
    assert!(
        warnings.iter().any(|w| {
            let w = w.as_str().unwrap_or_default();
            w.contains(PAST_MASKS) && w.contains("not Guaranteed") && w.contains("Static memory manager")
        }),
        "{warnings:?}"
    );
    // Where the configuration crashes is said once, with the node.
    let stderr = String::from_utf8_lossy(&output.stderr);
    let words = stderr.split_whitespace().collect::<Vec<_>>().join(" ");
    assert_eq!(
        words
            .matches("NUMA node id(s) 64 do not fit the kubelet's 64-bit NUMA masks")
            .count(),
        1,
        "{stderr}"
    );
    assert!(
        words.contains("at the first container of a Guaranteed pod that reaches the memory manager"),
        "{stderr}"
    );
    assert_eq!(results[1]["reason"], "KubeletPanic");
    assert!(
        results[1]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("memory manager")
    );
}

/// A real POWER9 capture: the GPUs' memory is CPU-less NUMA nodes 250-255.
/// The kubelet counts them; under none it runs (with the warnings), under
/// single-numa-node it crashes admitting any pod.
#[test]
fn power9_gpu_memory_nodes_are_the_kubelets_nodes() {
    let capture = repo().join("testdata/topologies/sysfs/hwloc-nvidiagpunumanodes.tar.bz2");
    let pods = write(
        "power9-pods.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: shared}\nspec:\n  containers:\n  - name: c\n    resources:\n      \
         requests: {cpu: 500m, memory: 256Mi}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: small}\nspec:\n  \
         containers:\n  - name: c\n    resources:\n      limits: {cpu: '1', memory: 1Gi}\n---\napiVersion: v1\nkind: \
         Pod\nmetadata: {name: free}\nspec:\n  containers:\n  - name: c\n",
    );
    let output = admit_pods(&capture, &["--policy", "none"], &pods);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let text = text_of(&output);
    let words = text.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("8 NUMA nodes (ids 0, 8, 250, 251, 252, 253, 254, 255)"),
        "{text}"
    );
    assert!(words.contains("hold device memory"), "{text}");
    assert!(
        words.contains("NUMA node id 250 does not fit the kubelet's 64-bit NUMA masks"),
        "{text}"
    );
    assert_eq!(words.matches(": admitted").count(), 3, "{text}");

    let output = admit_pods(
        &capture,
        &[
            "--policy",
            "single-numa-node",
            "--cpu-policy",
            "static",
            "--reserved-cpus",
            "0",
            "-o",
            "json",
        ],
        &pods,
    );
    assert_eq!(
        output.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let doc = json_of(&output);
    assert_eq!(doc["results"][0]["reason"], "KubeletPanic", "{doc}");
    assert!(
        doc["results"][0]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("NUMA node id 250")
    );
}
