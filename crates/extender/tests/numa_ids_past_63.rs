//! Nodes whose machines have NUMA ids of 64 and more (issue #29): the
//! extender answers as their kubelets do. Under topology policy `none`
//! every answer is the answer for the same nodes numbered {0, 1} (both
//! computed here, never written by hand); where the kubelet would crash
//! admitting the pod the node fails the filter saying so, and the
//! configuration is warned about once.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

mod common;

use std::time::Instant;

use serde_json::json;
use topoalign_extender::{Cluster, ExtenderConfig, FilterOutcome};
use topoalign_model::Pod;
use topoalign_nrt::NodeSpec;
use topoalign_scenario::TopologySpec;

/// The shared spec (2 NUMA nodes, a GPU on the second) with the second
/// NUMA node's id `second`, topology policy `policy` and memory manager
/// `memory`.
fn spec(second: usize, policy: &str, memory: &str) -> NodeSpec {
    let mut spec = common::spec();
    let machine = common::machine().numa_ids([0, second]).build().unwrap();
    spec.topology = TopologySpec::from_machine(&machine);
    spec.kubelet["topologyManagerPolicy"] = json!(policy);
    spec.kubelet["memoryManagerPolicy"] = json!(memory);
    if memory == "Static" {
        spec.kubelet["systemReserved"] = json!({"memory": "1Gi"});
        spec.kubelet["reservedMemory"] = json!([{"numaNode": 0, "limits": {"memory": "1124Mi"}}]);
    }
    spec
}

fn guaranteed(name: &str, cpu: &str, gpus: u32) -> Pod {
    common::pod(name, &format!("uid-{name}"), cpu, gpus)
}

fn burstable(name: &str, cpu: &str) -> Pod {
    let manifest = json!({"metadata": {"name": name, "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}});
    Cluster::read_pod(&manifest).unwrap()
}

/// Nodes `w-1` (running `running`) and `w-2` (empty) of `spec`, synced
/// into a new cluster from their NRT objects (exact state); the sync's
/// warnings.
fn cluster(spec: &NodeSpec, running: &[Pod], now: Instant) -> (Cluster, Vec<(String, String)>) {
    let mut busy = topoalign_nrt::start_node(spec).unwrap();
    for pod in running {
        assert!(busy.admit(pod.clone()).admitted(), "{}", pod.name);
    }
    let empty = topoalign_nrt::start_node(spec).unwrap();
    let options = topoalign_nrt::BuildOptions {
        exact_state: Some(spec),
    };
    let objects = [
        topoalign_nrt::build("w-1", &busy, options),
        topoalign_nrt::build("w-2", &empty, options),
    ];
    // Through JSON, as they travel.
    let objects: Vec<topoalign_nrt::NodeResourceTopology> =
        serde_json::from_value(serde_json::to_value(objects).unwrap()).unwrap();
    let mut cluster = Cluster::new(ExtenderConfig::default());
    let report = cluster.sync_nrt(&objects, now);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.passed.is_empty(), "{:?}", report.passed);
    assert_eq!(cluster.len(), 2);
    (cluster, report.hazards)
}

fn candidates() -> Vec<String> {
    ["w-1", "w-2", "elsewhere"].map(String::from).to_vec()
}

/// One scheduling cycle: `filter`, then `prioritize` (which assumes the
/// pod on the best node).
fn cycle(cluster: &mut Cluster, pod: &Pod, now: Instant) -> (FilterOutcome, Vec<(String, i64)>) {
    let filtered = cluster.filter(pod, candidates(), now).unwrap();
    let scores = cluster.prioritize(pod, candidates(), now).unwrap();
    (filtered, scores)
}

/// Under topology policy `none` (CPU manager static, memory manager None
/// or Static with pods it does not pin), a cluster of {0, 64} nodes
/// answers every cycle as the same cluster of {0, 1} nodes — the kubelet
/// there runs every such pod.
#[test]
fn under_policy_none_the_answers_are_those_of_the_nodes_numbered_0_1() {
    let now = Instant::now();
    for memory in ["None", "Static"] {
        let pods: Vec<Pod> = if memory == "None" {
            vec![
                guaranteed("a", "2", 0),
                guaranteed("b", "4", 1),
                guaranteed("c", "6", 0),
                guaranteed("d", "7", 0),
                guaranteed("e", "1", 1),
                burstable("f", "3"),
                guaranteed("g", "9", 0),
            ]
        } else {
            ["a", "b", "c", "d", "e", "f"].map(|name| burstable(name, "5")).to_vec()
        };
        let running = [pods[0].clone()].map(|p| Pod {
            uid: "uid-running".into(),
            name: "running".into(),
            ..p
        });
        let (mut dense, dense_warnings) = cluster(&spec(1, "none", memory), &running, now);
        let (mut sparse, sparse_warnings) = cluster(&spec(64, "none", memory), &running, now);
        assert!(dense_warnings.is_empty(), "{dense_warnings:?}");
        // With the Static memory manager a Guaranteed pod would crash the
        // kubelet (another test): warned about, not asked here.
        assert_eq!(sparse_warnings.is_empty(), memory == "None", "{sparse_warnings:?}");
        assert_eq!(sparse.warnings().is_empty(), memory == "None", "{memory}");
        let (mut passed, mut refused) = (0, 0);
        for pod in &pods {
            let answer = cycle(&mut sparse, pod, now);
            assert_eq!(answer, cycle(&mut dense, pod, now), "{memory}: {}", pod.name);
            passed += answer.0.passed.iter().filter(|n| n.starts_with("w-")).count();
            refused += answer.0.failed.len() + answer.0.unresolvable.len();
        }
        // Both kinds of answer were compared.
        assert!(
            passed > 0 && refused > 0,
            "{memory}: {passed} passed, {refused} refused"
        );
        assert_eq!(sparse.assumptions(), dense.assumptions(), "{memory}");
    }
}

/// Under single-numa-node the kubelet of a {0, 64} node crashes admitting
/// any pod: the node fails the filter saying so (preemption cannot help:
/// unresolvable), scores 0 and is never assumed; the sync and the
/// cluster's warnings say it once for the nodes of that configuration.
/// The same nodes numbered {0, 1} admit the pods.
#[test]
fn under_single_numa_node_the_node_fails_with_the_kubelets_crash() {
    let now = Instant::now();
    let (mut sparse, warnings) = cluster(&spec(64, "single-numa-node", "None"), &[], now);
    let (mut dense, dense_warnings) = cluster(&spec(1, "single-numa-node", "None"), &[], now);
    assert!(dense_warnings.is_empty(), "{dense_warnings:?}");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let (first, warning) = &warnings[0];
    assert_eq!(first, "w-1");
    assert!(
        warning.starts_with("NUMA node id(s) 64 do not fit") && warning.contains("at its first pod admission"),
        "{warning}"
    );
    let listed = sparse.warnings();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].nodes, ["w-1", "w-2"]);
    assert_eq!(&listed[0].warning, warning);
    assert_eq!(
        listed[0].to_string(),
        format!("nodes w-1, w-2 (2 of one kubelet configuration): warning: {warning}")
    );

    for pod in [guaranteed("a", "2", 0), guaranteed("b", "4", 1), burstable("c", "1")] {
        let (filtered, scores) = cycle(&mut sparse, &pod, now);
        assert_eq!(filtered.passed, ["elsewhere"], "{}", pod.name);
        assert!(filtered.failed.is_empty(), "{:?}", filtered.failed);
        for node in ["w-1", "w-2"] {
            let reason = &filtered.unresolvable[node];
            assert!(
                reason.starts_with("KubeletPanic: the v") && reason.contains("kubelet would crash admitting this pod"),
                "{reason}"
            );
            assert!(
                reason.contains("NUMA node id 64") && reason.contains("single-numa-node"),
                "{reason}"
            );
            assert!(!reason.contains("admitted"), "{reason}");
        }
        assert!(scores.iter().all(|(_, score)| *score == 0), "{scores:?}");
        assert!(sparse.assumptions().is_empty(), "{:?}", sparse.assumptions());
        // Numbered {0, 1}, the kubelet admits the pod on both.
        let (filtered, _) = cycle(&mut dense, &pod, now);
        assert_eq!(filtered.passed, candidates(), "{}", pod.name);
    }
}

/// Under none with the Static memory manager the kubelet crashes on a
/// Guaranteed pod (its memory default hint) and runs a Burstable one: the
/// first fails the filter with the crash, the second passes as on {0, 1}.
#[test]
fn under_none_with_static_memory_a_guaranteed_pod_meets_the_crash() {
    let now = Instant::now();
    let (mut sparse, warnings) = cluster(&spec(64, "none", "Static"), &[], now);
    let (mut dense, _) = cluster(&spec(1, "none", "Static"), &[], now);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].1.contains("at the first container of a Guaranteed pod"),
        "{warnings:?}"
    );

    // A Burstable pod first: as on {0, 1} (then assumed on both alike).
    let pod = burstable("b", "2");
    assert_eq!(cycle(&mut sparse, &pod, now), cycle(&mut dense, &pod, now));

    let pod = guaranteed("g", "2", 0);
    let (filtered, scores) = cycle(&mut sparse, &pod, now);
    assert_eq!(filtered.passed, ["elsewhere"]);
    let reason = &filtered.unresolvable["w-1"];
    assert!(
        reason.starts_with("KubeletPanic:") && reason.contains("Static memory manager") && reason.contains("\"app\""),
        "{reason}"
    );
    assert!(scores.iter().all(|(_, score)| *score == 0), "{scores:?}");
    let (filtered, _) = cycle(&mut dense, &pod, now);
    assert_eq!(filtered.passed, candidates());
}

/// The warning reaches `/healthz`-style readers as a line per
/// configuration even when the nodes come from a fleet (built here: the
/// fleet file's reader takes NUMA ids below 64 only, for now).
#[test]
fn a_fleet_of_crashing_nodes_is_warned_about() {
    let spec = spec(64, "restricted", "None");
    let fleet = topoalign_fleet::Fleet {
        groups: vec![topoalign_fleet::NodeGroup {
            name: "cxl".into(),
            count: 3,
            machine: spec.topology.to_machine_with_numa_labels().unwrap(),
            spec,
        }],
        dra: None,
    };
    let cluster = Cluster::from_fleet(&fleet, ExtenderConfig::default()).unwrap();
    let warnings = cluster.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].nodes.len(), 3);
    assert!(warnings[0].warning.contains("policy restricted"), "{warnings:?}");
}

/// A `hand-numa-nodes-72-*` vector of release 1.37 (72 NUMA nodes, ids
/// 0-71): the scenario and the oracle's (the real kubelet's) answer.
fn wide_vector(name: &str) -> (topoalign_scenario::Scenario, serde_json::Value) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/conformance/1.37");
    let read = |kind: &str| std::fs::read_to_string(root.join(kind).join(format!("hand-numa-nodes-72-{name}.json")));
    let scenario = topoalign_scenario::Scenario::parse(&read("scenarios").unwrap()).unwrap();
    let expected = serde_json::from_str(&read("expected").unwrap()).unwrap();
    (scenario, expected)
}

/// The object of node `w-1` of `spec` after the first `events` events
/// of `scenario`, through JSON as it travels.
fn wide_object(
    spec: &NodeSpec,
    scenario: &topoalign_scenario::Scenario,
    events: usize,
) -> topoalign_nrt::NodeResourceTopology {
    let mut node = topoalign_nrt::start_node(spec).unwrap();
    let prefix = topoalign_scenario::Scenario {
        events: scenario.events[..events].to_vec(),
        ..scenario.clone()
    };
    topoalign_scenario::play_events(&mut node, &spec.kubelet, &prefix).unwrap();
    let object = topoalign_nrt::build(
        "w-1",
        &node,
        topoalign_nrt::BuildOptions {
            exact_state: Some(spec),
        },
    );
    serde_json::from_value(serde_json::to_value(object).unwrap()).unwrap()
}

/// A new cluster synced from `object`; the sync's hazards.
fn synced(object: topoalign_nrt::NodeResourceTopology, now: Instant) -> (Cluster, Vec<(String, String)>) {
    let mut cluster = Cluster::new(ExtenderConfig::default());
    let report = cluster.sync_nrt(&[object], now);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    assert!(report.passed.is_empty(), "{:?}", report.passed);
    (cluster, report.hazards)
}

/// The reason `filtered` gives node `w-1`, if it failed there.
fn failure(filtered: &FilterOutcome) -> Option<&String> {
    filtered.failed.get("w-1").or_else(|| filtered.unresolvable.get("w-1"))
}

/// A machine of 72 NUMA nodes (ids 0-71) under topology policy none,
/// which its kubelet runs: before every pod of the vectors, the node as
/// the earlier events left it (a restart among them) is published and
/// synced, and the extender passes the pod exactly where the real
/// kubelet admitted it and fails it with the kubelet's reason and
/// message where it did not (the oracle's answers). With the Static
/// memory manager a Guaranteed pod that reaches the memory manager fails
/// with the kubelet's crash (reason KubeletPanic), as on {0, 64}.
#[test]
fn a_machine_of_72_numa_nodes_under_none_is_filtered_as_its_kubelet_runs_it() {
    let now = Instant::now();
    for name in ["memory-none", "static-memory", "cpu-none"] {
        let (scenario, expected) = wide_vector(name);
        let spec = NodeSpec {
            topology: scenario.topology.clone(),
            kubelet: scenario.kubelet.clone(),
        };
        let results = expected["results"].as_array().unwrap();
        let (mut passed, mut refused) = (0, 0);
        for (index, event) in scenario.events.iter().enumerate() {
            let Some(manifest) = &event.add else { continue };
            let at = format!("{name}: event {index}");
            let (mut cluster, hazards) = synced(wide_object(&spec, &scenario, index), now);
            assert_eq!(hazards.len(), usize::from(name == "static-memory"), "{at}: {hazards:?}");
            let pod = Cluster::read_pod(manifest).unwrap();
            let filtered = cluster.filter(&pod, candidates(), now).unwrap();
            // Scored too (a node that fails scores 0).
            let scores = cluster.prioritize(&pod, candidates(), now).unwrap();
            let oracle = &results[index];
            if oracle["admitted"] != true {
                assert!(
                    scores.iter().any(|(node, score)| node == "w-1" && *score == 0),
                    "{at}: {scores:?}"
                );
            }
            assert_eq!(oracle["event"], index, "{at}");
            if oracle["admitted"] == true {
                assert_eq!(failure(&filtered), None, "{at}");
                assert!(filtered.passed.contains(&"w-1".to_owned()), "{at}: {filtered:?}");
                passed += 1;
            } else {
                let reason = failure(&filtered).unwrap_or_else(|| panic!("{at}: {filtered:?}"));
                // The kubelet's reason and message (the extender may add
                // whether preemption could help).
                let kubelet = format!(
                    "{}: {}",
                    oracle["reason"].as_str().unwrap(),
                    oracle["message"].as_str().unwrap()
                );
                assert!(reason.starts_with(&kubelet), "{at}: {reason} / oracle: {kubelet}");
                refused += 1;
            }
        }
        assert!(passed > 0, "{name}");
        assert!(refused > 0 || name == "cpu-none", "{name}");

        let (mut cluster, hazards) = synced(wide_object(&spec, &scenario, 0), now);
        if name == "static-memory" {
            let (node, warning) = &hazards[0];
            assert_eq!(node, "w-1");
            assert!(
                warning.starts_with("NUMA node id(s) 64, 65, 66, 67, 68, 69, 70, 71 do not fit")
                    && warning.contains("at the first container of a Guaranteed pod"),
                "{warning}"
            );
            assert_eq!(cluster.warnings().len(), 1);
            // A Guaranteed pod every manager before the memory manager
            // admits meets the crash.
            let filtered = cluster.filter(&guaranteed("g", "2", 0), candidates(), now).unwrap();
            let reason = &filtered.unresolvable["w-1"];
            assert!(
                reason.starts_with("KubeletPanic:") && reason.contains("Static memory manager"),
                "{reason}"
            );
            assert!(!filtered.passed.contains(&"w-1".to_owned()), "{filtered:?}");
        } else {
            assert!(cluster.warnings().is_empty(), "{name}");
        }
    }
}

/// Under another topology policy the kubelet refuses to start on 72 NUMA
/// nodes (`max-allowable-numa-nodes`, 8 by default: the oracle's answer
/// for the best-effort vector): an object saying such a node runs is not
/// taken, with that refusal. With the option raised the kubelet starts
/// and crashes at its first admission: the node fails every pod with
/// reason KubeletPanic and is warned about.
#[test]
fn under_another_policy_a_machine_of_72_numa_nodes_is_refused_or_crashes() {
    let now = Instant::now();
    let (scenario, expected) = wide_vector("best-effort");
    let mut spec = NodeSpec {
        topology: scenario.topology.clone(),
        kubelet: scenario.kubelet.clone(),
    };
    spec.kubelet["topologyManagerPolicyOptions"] = json!({"max-allowable-numa-nodes": "72"});
    let object = wide_object(&spec, &scenario, 0);

    // The same object with the option taken out of its spec.
    let mut refused = object.clone();
    for attribute in &mut refused.attributes {
        if attribute.name == topoalign_nrt::exact::NODE_SPEC_ATTRIBUTE {
            let mut inner: NodeSpec = serde_json::from_str(&attribute.value).unwrap();
            inner.kubelet = scenario.kubelet.clone();
            attribute.value = serde_json::to_string(&inner).unwrap();
        }
    }
    let mut cluster = Cluster::new(ExtenderConfig::default());
    let report = cluster.sync_nrt(&[refused], now);
    assert_eq!(report.errors.len(), 1, "{report:?}");
    let error = report.errors[0].to_string();
    let refusal = expected["error"].as_str().unwrap();
    assert!(
        error.contains("w-1") && error.contains(refusal),
        "{error} / oracle: {refusal}"
    );
    assert_eq!(cluster.len(), 0);

    let (mut cluster, hazards) = synced(object, now);
    assert_eq!(hazards.len(), 1, "{hazards:?}");
    assert!(
        hazards[0].1.contains("at its first pod admission") && hazards[0].1.contains("policy best-effort"),
        "{hazards:?}"
    );
    for pod in [guaranteed("a", "2", 0), burstable("b", "1")] {
        let filtered = cluster.filter(&pod, candidates(), now).unwrap();
        assert!(
            !filtered.passed.contains(&"w-1".to_owned()),
            "{}: {filtered:?}",
            pod.name
        );
        let reason = &filtered.unresolvable["w-1"];
        assert!(
            reason.starts_with("KubeletPanic: the v") && reason.contains("best-effort"),
            "{reason}"
        );
    }
}
