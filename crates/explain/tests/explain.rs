//! Explanations and fixes on the seeds' situations (built from the files in
//! `examples/`), and the snapshot/restore round trip the kubelet fixes rely
//! on, checked on every public conformance scenario.

use std::path::{Path, PathBuf};

use serde_json::Value;
use topoalign_engine::{Decision, Node};
use topoalign_explain::{Change, Situation, explain, fixes, warnings::warnings};
use topoalign_k8s::{KubeletConfiguration, node_config, pod_from_value};
use topoalign_model::Pod;
use topoalign_scenario::Scenario;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A node from a scenario: machine, kubelet block, events replayed.
fn node_from(text: &str) -> Option<(Node, Value)> {
    let scenario = Scenario::parse(text).ok()?;
    let machine = scenario.topology.to_machine().ok()?;
    let kubelet = if scenario.kubelet.is_null() {
        serde_json::json!({})
    } else {
        scenario.kubelet.clone()
    };
    let config = node_config(&KubeletConfiguration::from_value(&kubelet).ok()?, &machine).ok()?;
    let mut node = Node::start(machine, config).ok()?;
    let mut added: Vec<(String, String)> = Vec::new();
    for (i, event) in scenario.events.iter().enumerate() {
        if let Some(manifest) = &event.add {
            let pod = pod_from_value(manifest, &format!("uid-{i}")).ok()?;
            added.push((pod.key(), pod.uid.clone()));
            node.admit(pod);
        } else if let Some(key) = &event.delete {
            let key = if key.contains('/') {
                key.clone()
            } else {
                format!("default/{key}")
            };
            if let Some(position) = added.iter().rposition(|(k, _)| *k == key) {
                node.remove(&added.remove(position).1);
            }
        }
    }
    Some((node, kubelet))
}

fn example(node_file: &str, pod_file: &str) -> (Node, Value, Value, Pod) {
    let text = std::fs::read_to_string(repo().join(node_file)).expect("node file");
    let (node, kubelet) = node_from(&text).expect("a valid node");
    let pod_text = std::fs::read_to_string(repo().join(pod_file)).expect("pod file");
    let manifest: Value = serde_yaml_ng::from_str(&pod_text).expect("YAML");
    let pod = pod_from_value(&manifest, "the-pod").expect("pod");
    (node, kubelet, manifest, pod)
}

fn decide(node: &Node, pod: &Pod) -> Decision {
    node.clone().admit(pod.clone())
}

/// Scenario 2 of the seeds (conformance 0008): NUMA 0 has 4 CPUs and 20Gi
/// free, NUMA 1 6 CPUs and 15Gi; the pod wants 5 CPUs and 18Gi.
#[test]
fn fragmentation_is_explained_and_fixed() {
    let (node, kubelet, manifest, pod) = example(
        "examples/nodes/two-numa-fragmented.yaml",
        "examples/pods/fragmented.yaml",
    );
    let decision = decide(&node, &pod);
    let situation = Situation {
        node: &node,
        kubelet: &kubelet,
        manifest: &manifest,
        pod: &pod,
    };
    let explanation = explain(&situation, &decision);
    let cell = |numa: usize, resource: &str| {
        let cell = &explanation.resources.numa[numa].resources[resource];
        (cell.free.clone().unwrap_or_default(), cell.short)
    };
    assert_eq!(cell(0, "cpu"), ("4".to_owned(), true));
    assert_eq!(cell(0, "memory"), ("20Gi".to_owned(), false));
    assert_eq!(cell(1, "cpu"), ("6".to_owned(), false));
    assert_eq!(cell(1, "memory"), ("15Gi".to_owned(), true));
    assert!(explanation.empty_node.admitted);
    let merge = &explanation.merges[0];
    let texts: Vec<&str> = merge.providers.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(
        texts,
        [
            "no preference",
            "prefers NUMA 1; also possible, not preferred: NUMA 0+1",
            "prefers NUMA 0"
        ]
    );
    // best-effort admits with affinity {0} (conformance 0013); restricted
    // rejects (0010) and so is not offered.
    let kubelet_fixes: Vec<&Change> = explanation
        .fixes
        .iter()
        .map(|f| &f.change)
        .filter(|c| matches!(c, Change::Kubelet(_)))
        .collect();
    assert_eq!(kubelet_fixes.len(), 1);
    let Change::Kubelet(fields) = kubelet_fixes[0] else {
        unreachable!("filtered")
    };
    assert_eq!(fields["topologyManagerPolicy"], "best-effort");
    let removals: Vec<&Change> = explanation
        .fixes
        .iter()
        .map(|f| &f.change)
        .filter(|c| matches!(c, Change::Remove(_)))
        .collect();
    assert_eq!(removals.len(), 2, "removing either fill pod makes room");
    for fix in &explanation.fixes {
        let again = fixes::apply(&situation, &fix.change).expect("applies");
        assert!(again.admitted(), "{}", fix.description);
    }
    // The decision on the node itself is untouched by all of this.
    assert_eq!(decide(&node, &pod), decision);
}

/// Scenario 1 (conformance 0001/0002): too large for any NUMA node, so it
/// fails on an empty node too; restricted and best-effort admit it on both
/// nodes, and shrinking to one NUMA node's free amounts admits it.
#[test]
fn too_large_for_any_numa_node() {
    let (node, kubelet, manifest, pod) = example("examples/nodes/two-numa.yaml", "examples/pods/too-large.yaml");
    let decision = decide(&node, &pod);
    let situation = Situation {
        node: &node,
        kubelet: &kubelet,
        manifest: &manifest,
        pod: &pod,
    };
    let explanation = explain(&situation, &decision);
    assert!(!explanation.empty_node.admitted);
    assert!(
        explanation.summary.contains("too large for any NUMA node"),
        "{}",
        explanation.summary
    );
    for resource in ["cpu", "memory"] {
        assert!(
            explanation
                .resources
                .numa
                .iter()
                .all(|row| row.resources[resource].short),
            "every NUMA node is short of {resource}"
        );
    }
    let descriptions: Vec<&str> = explanation.fixes.iter().map(|f| f.description.as_str()).collect();
    assert!(
        descriptions[0].starts_with("Shrink it to what NUMA 1 has free (cpu: 8 instead of 12, memory: 32Gi"),
        "{descriptions:?}"
    );
    assert!(
        descriptions
            .iter()
            .any(|d| d.contains("restricted") && d.contains("NUMA 0+1"))
    );
    assert!(
        !descriptions.iter().any(|d| d.starts_with("Remove")),
        "nothing runs, nothing to remove"
    );
    for fix in &explanation.fixes {
        assert!(fixes::apply(&situation, &fix.change).expect("applies").admitted());
    }
}

#[test]
fn warnings_name_the_silent_no_ops() {
    let (node, ..) = example("examples/nodes/two-numa.yaml", "examples/pods/too-large.yaml");
    let pod = |limits: Value, requests: Value| {
        let manifest = serde_json::json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "resources": {"limits": limits, "requests": requests}}]}});
        pod_from_value(&manifest, "u").expect("pod")
    };
    let table = [
        (
            pod(serde_json::json!({"cpu": "2", "memory": "1Gi"}), serde_json::json!({})),
            vec![],
        ),
        (
            pod(
                serde_json::json!({"cpu": "3500m", "memory": "1Gi"}),
                serde_json::json!({}),
            ),
            vec!["container c asks for 3500m CPU"],
        ),
        (
            pod(serde_json::json!({"cpu": "2"}), serde_json::json!({"cpu": "1"})),
            vec!["not Guaranteed (QoS Burstable)"],
        ),
        (
            pod(
                serde_json::json!({"cpu": "1", "memory": "1Gi", "example.com/fpga": "1"}),
                serde_json::json!({}),
            ),
            vec!["example.com/fpga is not a device resource of this node"],
        ),
    ];
    for (pod, expected) in table {
        let found = warnings(&node, &pod);
        assert_eq!(found.len(), expected.len(), "{found:?}");
        for (warning, start) in found.iter().zip(expected) {
            assert!(warning.starts_with(start), "{warning}");
        }
    }
}

/// The state of every public conformance scenario, after its last event,
/// taken as a snapshot and restored into a freshly started node: the
/// restored node holds the same state and decides the next pod the same
/// way. (Kubelet fixes restart a node this way.)
#[test]
fn snapshots_restore_exactly_on_every_conformance_scenario() {
    let dir = repo().join("testdata/conformance/1.32/scenarios");
    let mut checked = 0;
    let mut refused = 0;
    let mut entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("conformance scenarios")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    let probe = pod_from_value(
        &serde_json::json!({"metadata": {"name": "probe"}, "spec": {"containers": [
            {"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}}),
        "probe-uid",
    )
    .expect("probe");
    for path in entries {
        let text = std::fs::read_to_string(&path).expect("scenario");
        let Some((node, _)) = node_from(&text) else {
            continue; // a configuration the kubelet refuses
        };
        let mut restored = Node::start(node.machine().clone(), node.config().clone()).expect("starts again");
        if let Err(error) = restored.restore(node.snapshot()) {
            // Real kubelet quirks: its own in-memory state can be one it
            // refuses on restart. With strict-cpu-reservation and every
            // other CPU assigned the shared pool is empty (e.g. vector 1080);
            // a rejected pod's single-node memory block overwrites a
            // multi-node group's `Cells` and releasing it does not restore
            // them (e.g. 1610).
            let text = error.to_string();
            let state = node.state();
            let empty_pool = state.default_cpu_set.is_empty() && !state.cpu_assignments.is_empty();
            assert!(
                (empty_pool && text == "start cpu manager error: default cpuset cannot be empty")
                    || text
                        == "start memory manager error: [memorymanager] the expected machine state is different \
                            from the real one",
                "{}: {text}",
                path.display()
            );
            refused += 1;
            continue;
        }
        assert_eq!(restored.state(), node.state(), "{}", path.display());
        assert_eq!(restored.snapshot(), node.snapshot(), "{}", path.display());
        assert_eq!(decide(&restored, &probe), decide(&node, &probe), "{}", path.display());
        checked += 1;
    }
    assert!(checked > 900, "{checked} scenarios checked");
    assert!(
        refused * 20 < checked,
        "{refused} scenarios end in a state the kubelet refuses on restart"
    );
}
