//! Explanations on machines with NUMA node ids of 64 and more (issue #29,
//! "never stricter than the kubelet"): such a machine is read with its ids
//! kept as labels (`Machine::with_numa_labels`) and numbered anew.
//!
//! Under topology manager policy `none` the kubelet decides exactly as on
//! the machine renumbered 0..n, so every explanation must be the one of
//! the renumbered machine with its NUMA ids written as the original ids —
//! the expected answer is computed on the renumbered machine and mapped,
//! never written down — plus the warning that any other policy crashes
//! the kubelet. Where the kubelet crashes (any other policy; the Static
//! memory manager's default hint under `none`) the explanation says so and
//! offers only the settings it runs with, each replayed.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use serde_json::{Value, json};
use topoalign_engine::{Decision, Node, PanicSite};
use topoalign_explain::hints::merges_in_words;
use topoalign_explain::{Change, Situation, explain, fixes, pod_report, words};
use topoalign_model::{Machine, Pod, QosClass, UniformMachine};

mod renumbered;

use renumbered::{map_document, map_text};

/// Two NUMA nodes with ids `ids` (4 CPUs and 4Gi each), GPUs `gpu0` on
/// the first, `gpu1` and `gpu2` on the second, `gpu3` without affinity.
fn machine(ids: [usize; 2]) -> Machine {
    UniformMachine::new(2, 4)
        .sockets(2)
        .memory_per_numa(4 << 30)
        .device("example.com/gpu", "gpu0", &[0])
        .device("example.com/gpu", "gpu1", &[1])
        .device("example.com/gpu", "gpu2", &[1])
        .device("example.com/gpu", "gpu3", &[])
        .numa_ids(ids)
        .build()
        .unwrap()
}

/// The kubelet configuration: static CPU policy, CPU 0 reserved, the
/// given topology and memory policies (50Mi reserved on each NUMA node,
/// named by `ids`, under Static).
fn kubelet(topology: &str, memory: &str, ids: [usize; 2]) -> Value {
    let mut kubelet = json!({
        "kubeletVersion": "1.32",
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0",
        "topologyManagerPolicy": topology,
        "memoryManagerPolicy": memory,
    });
    if memory == "Static" {
        kubelet["reservedMemory"] = json!(ids.map(|id| json!({"numaNode": id, "limits": {"memory": "50Mi"}})));
    }
    kubelet
}

fn pod(name: &str, requests: &Value, limits: &Value) -> (Value, Pod) {
    let manifest = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "pause", "resources": {"requests": requests, "limits": limits}}]},
    });
    let pod = topoalign_k8s::pod_from_value(&manifest, &format!("uid-{name}")).unwrap();
    (manifest, pod)
}

fn guaranteed(name: &str, cpu: &str, memory: &str, gpus: u32) -> (Value, Pod) {
    let amounts = json!({"cpu": cpu, "memory": memory, "example.com/gpu": gpus.to_string()});
    pod(name, &amounts, &amounts)
}

/// The pods the `none` comparison admits in order: Guaranteed pods with
/// and without GPUs, a Burstable one, and pods too large for the node in
/// CPUs and in GPUs (rejected, so explained with fixes).
fn pods() -> Vec<(Value, Pod)> {
    vec![
        guaranteed("g1", "2", "1Gi", 1),
        guaranteed("g2", "3", "1Gi", 2),
        pod(
            "b1",
            &json!({"cpu": "500m", "example.com/gpu": "1"}),
            &json!({"example.com/gpu": "1"}),
        ),
        guaranteed("too-many-cpus", "100", "1Gi", 0),
        pod(
            "too-many-gpus",
            &json!({"example.com/gpu": "5"}),
            &json!({"example.com/gpu": "5"}),
        ),
        guaranteed("g3", "1", "1Gi", 0),
    ]
}

/// `node` admitting each pod in order, each reported with its explanation
/// on the node as the ones before left it.
fn reports(node: &mut Node, kubelet: &Value, pods: &[(Value, Pod)]) -> Vec<(Value, String)> {
    let mut reports = Vec::new();
    for (event, (manifest, pod)) in pods.iter().enumerate() {
        let before = node.clone();
        let decision = node.admit(pod.clone());
        let situation = Situation {
            node: &before,
            kubelet,
            manifest,
            pod,
        };
        let report = pod_report(event, &situation, &decision, true);
        for fix in report.explanation.iter().flat_map(|e| &e.fixes) {
            let replayed = fixes::apply(&situation, &fix.change).unwrap();
            assert!(
                replayed.admitted(),
                "{}: {} does not admit",
                decision.pod,
                fix.description
            );
        }
        let line = words::decision_line(before.machine(), &decision);
        reports.push((serde_json::to_value(&report).unwrap(), line));
    }
    reports
}

#[test]
fn under_policy_none_the_explanation_is_the_renumbered_machines_with_the_ids_kept() {
    for (ids, memory) in [([0, 64], "None"), ([0, 64], "Static"), ([3, 200], "None")] {
        let map = |n: usize| ids[n];
        let labelled = machine(ids);
        assert_eq!(labelled.numa_labels(), Some(&ids[..]));
        let plain = machine([0, 1]);
        let pods: Vec<(Value, Pod)> = pods()
            .into_iter()
            .filter(|(_, pod)| memory == "None" || pod.qos != QosClass::Guaranteed)
            .collect();
        let kubelet_labelled = kubelet("none", memory, ids);
        let kubelet_plain = kubelet("none", memory, [0, 1]);
        let mut node = topoalign_k8s::start_node(labelled, &kubelet_labelled).unwrap();
        let mut renumbered = topoalign_k8s::start_node(plain, &kubelet_plain).unwrap();
        let got = reports(&mut node, &kubelet_labelled, &pods);
        let expected = reports(&mut renumbered, &kubelet_plain, &pods);
        assert!(
            got.iter().any(|(report, _)| report["admitted"] == false),
            "a rejection is explained"
        );
        for ((mut report, line), (renumbered_report, renumbered_line)) in got.into_iter().zip(expected) {
            let expected = map_document(&renumbered_report, &map);
            // Beside the renumbered machine's warnings: the policy warning.
            let warnings = report["warnings"].as_array_mut().unwrap();
            let first = warnings.remove(0);
            let first = first.as_str().unwrap();
            assert!(
                first.contains(&format!("NUMA node id {}", ids[1])) && first.contains("topologyManagerPolicy none"),
                "{first}"
            );
            assert_eq!(report, expected, "ids {ids:?}, memory {memory}");
            assert_eq!(line, map_text(&renumbered_line, &map));
            assert!(report["kubeletPanic"].is_null());
        }
        assert_eq!(
            words::free_now(&node),
            map_text(&words::free_now(&renumbered), &map),
            "free now"
        );
    }
}

/// The explanation of the single pod `pod` on an empty node.
fn explained(node: &Node, kubelet: &Value, pod: &(Value, Pod)) -> (Decision, topoalign_explain::Explanation) {
    let decision = node.clone().admit(pod.1.clone());
    let situation = Situation {
        node,
        kubelet,
        manifest: &pod.0,
        pod: &pod.1,
    };
    let explanation = explain(&situation, &decision);
    for fix in &explanation.fixes {
        let replayed = fixes::apply(&situation, &fix.change).unwrap();
        assert!(replayed.admitted(), "{} does not admit", fix.description);
        assert!(replayed.kubelet_panic.is_none());
    }
    (decision, explanation)
}

#[test]
fn under_another_policy_the_kubelet_crashes_and_only_policy_none_is_offered() {
    for memory in ["None", "Static"] {
        let kubelet = kubelet("single-numa-node", memory, [0, 64]);
        let node = topoalign_k8s::start_node(machine([0, 64]), &kubelet).unwrap();
        let pod = guaranteed("g1", "2", "1Gi", 1);
        let (decision, explanation) = explained(&node, &kubelet, &pod);
        let panic = decision.kubelet_panic.clone().expect("the kubelet crashes");
        assert!(matches!(panic.site, PanicSite::TopologyManager(_)));
        assert_eq!(panic.numa_id, 64);
        assert_eq!(
            explanation.summary,
            format!("The kubelet crashes instead of deciding: {panic}.")
        );
        assert!(
            explanation
                .resources
                .numa
                .iter()
                .all(|row| row.resources.values().all(|c| !c.short))
        );
        // Policy none; with the Static memory manager, which crashes it on a
        // Guaranteed pod under none, memory policy None too.
        let mut fields = serde_json::Map::new();
        fields.insert("topologyManagerPolicy".into(), json!("none"));
        if memory == "Static" {
            fields.insert("memoryManagerPolicy".into(), json!("None"));
        }
        assert_eq!(
            explanation.fixes.iter().map(|f| f.change.clone()).collect::<Vec<_>>(),
            [Change::Kubelet(fields)]
        );
        assert_eq!(
            words::refusal(&decision),
            format!("no verdict, the kubelet crashes: {panic}")
        );
        assert_eq!(
            words::decision_line(node.machine(), &decision),
            format!("default/g1 crashes the kubelet: {panic}.")
        );
        let situation = Situation {
            node: &node,
            kubelet: &kubelet,
            manifest: &pod.0,
            pod: &pod.1,
        };
        let report = pod_report(0, &situation, &decision, false);
        assert_eq!(report.kubelet_panic, Some(panic.to_string()));
        // Where this configuration crashes the kubelet is the node's start
        // hazard (said once with the node); the pod's warnings repeat
        // neither it nor the decision's crash.
        let hazards: Vec<String> = node.start_hazards().iter().map(ToString::to_string).collect();
        assert!(
            hazards.iter().any(|h| h.contains("at its first pod admission")
                && h.contains("topology manager policy single-numa-node builds masks of every NUMA node")),
            "{hazards:?}"
        );
        assert!(
            report.warnings.iter().all(|w| !w.contains("64-bit NUMA masks")),
            "{:?}",
            report.warnings
        );
        // A larger node of this machine keeps its NUMA ids: it crashes too.
        let larger = fixes::apply(&situation, &Change::LargerNode { factor: 2, pod: None }).unwrap();
        assert_eq!(larger.kubelet_panic.map(|p| p.numa_id), Some(64));
    }
}

#[test]
fn the_static_memory_managers_crash_under_none_is_explained_with_the_settings_that_run() {
    let kubelet = kubelet("none", "Static", [0, 64]);
    let node = topoalign_k8s::start_node(machine([0, 64]), &kubelet).unwrap();
    // A Guaranteed pod that reaches the memory manager crashes the kubelet.
    let (decision, explanation) = explained(&node, &kubelet, &guaranteed("g1", "2", "1Gi", 1));
    let panic = decision.kubelet_panic.clone().expect("the kubelet crashes");
    assert!(matches!(panic.site, PanicSite::MemoryDefaultHint { .. }));
    assert!(explanation.summary.contains(&panic.to_string()));
    let kinds: Vec<&Change> = explanation.fixes.iter().map(|f| &f.change).collect();
    assert!(matches!(kinds[..], [Change::Kubelet(_), Change::Pod(_)]), "{kinds:?}");
    let Change::Pod(manifest) = kinds[1] else {
        unreachable!()
    };
    assert_ne!(
        topoalign_k8s::pod_from_value(manifest, "uid").unwrap().qos,
        QosClass::Guaranteed
    );
    // One refused first (100 CPUs, by the CPU manager) crashes it too once
    // it is small enough: only a Burstable pod, shrunk, runs.
    let (decision, explanation) = explained(&node, &kubelet, &guaranteed("big", "100", "1Gi", 0));
    assert!(decision.kubelet_panic.is_none() && !decision.admitted());
    assert!(!explanation.fixes.is_empty());
    for fix in &explanation.fixes {
        assert!(fix.description.starts_with("Make it Burstable"), "{}", fix.description);
    }
}

#[test]
fn hints_in_words_name_the_machines_ids() {
    // Single-numa-node decides on the renumbered machine; its merges read
    // on the labelled machine name the original ids.
    let plain = machine([0, 1]);
    let labelled = machine([0, 64]);
    let kubelet = kubelet("single-numa-node", "Static", [0, 1]);
    let mut node = topoalign_k8s::start_node(plain.clone(), &kubelet).unwrap();
    for (_, pod) in [guaranteed("g1", "3", "1Gi", 1), guaranteed("g2", "2", "2Gi", 2)] {
        let decision = node.admit(pod);
        assert!(!decision.trace.merges.is_empty());
        let map = |n: usize| [0, 64][n];
        let expected = map_document(
            &serde_json::to_value(merges_in_words(&plain, &decision.trace)).unwrap(),
            &map,
        );
        let got = serde_json::to_value(merges_in_words(&labelled, &decision.trace)).unwrap();
        assert_eq!(got, expected);
        assert!(got.to_string().contains("NUMA 64"), "{got}");
        assert_eq!(
            words::decision_line(&labelled, &decision),
            words::decision_line(&plain, &decision).replace("[1]", "[64]")
        );
    }
}
