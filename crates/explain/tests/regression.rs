//! One test per answer that was missing or slow, named after what it
//! reproduces. Every fix found is replayed and must admit.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use serde_json::{Value, json};
use topoalign_engine::Node;
use topoalign_explain::{Explanation, Situation, explain, fixes};
use topoalign_k8s::{KubeletConfiguration, node_config, pod_from_value};
use topoalign_model::UniformMachine;

/// `numa` NUMA nodes of `cores` cores × `threads` threads, 16Gi each
/// (siblings N and N + numa·cores, as on Intel machines).
fn node(numa: usize, cores: u32, threads: u32, kubelet: &Value) -> Node {
    let machine = UniformMachine::new(numa, cores)
        .threads_per_core(threads)
        .memory_per_numa(16 << 30)
        .build()
        .unwrap();
    let config = node_config(&KubeletConfiguration::from_value(kubelet).unwrap(), &machine).unwrap();
    Node::start(machine, config).unwrap()
}

fn pod_manifest(resources: Value) -> Value {
    json!({"metadata": {"name": "want", "namespace": "default"},
           "spec": {"containers": [{"name": "app", "resources": resources}]}})
}

/// Explains `manifest` on `node`, replays every fix and returns the
/// explanation.
fn explain_and_replay(node: &Node, kubelet: &Value, manifest: &Value) -> Explanation {
    let pod = pod_from_value(manifest, "uid-want").unwrap();
    let decision = node.clone().admit(pod.clone());
    assert!(!decision.admitted(), "the pod must be rejected for this test");
    let situation = Situation {
        node,
        kubelet,
        manifest,
        pod: &pod,
    };
    let explanation = explain(&situation, &decision);
    for fix in &explanation.fixes {
        let replayed = fixes::apply(&situation, &fix.change).unwrap();
        assert!(replayed.admitted(), "{}", fix.description);
    }
    explanation
}

fn descriptions(explanation: &Explanation) -> Vec<&str> {
    explanation.fixes.iter().map(|f| f.description.as_str()).collect()
}

/// Every spelling Go's `strconv.ParseBool` reads as on turns the option on
/// for the kubelet, so each gets the same fixes.
#[test]
fn smt_alignment_error_gets_a_whole_core_fix_and_an_option_fix() {
    for on in ["true", "True", "TRUE", "1", "t"] {
        let kubelet = json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0,8",
                             "cpuManagerPolicyOptions": {"full-pcpus-only": on}});
        let node = node(2, 4, 2, &kubelet);
        let manifest = pod_manifest(json!({"limits": {"cpu": "1", "memory": "1Gi"}}));
        let explanation = explain_and_replay(&node, &kubelet, &manifest);
        let texts = descriptions(&explanation);
        assert!(
            texts.iter().any(|t| t.starts_with("Ask for cpu: 2 instead of 1")),
            "{on}: {texts:?}"
        );
        assert!(
            texts
                .iter()
                .any(|t| t.starts_with("Turn off the CPU manager option full-pcpus-only")),
            "{on}: {texts:?}"
        );
    }
}

/// A pod asking for huge pages of size zero (`hugepages-0Gi`, found by the
/// long fuzz run of `agent_request`) made the fix search divide by zero.
#[test]
fn huge_pages_of_size_zero_are_explained_without_a_crash() {
    let kubelet = json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
                         "topologyManagerPolicy": "single-numa-node"});
    let node = node(2, 4, 1, &kubelet);
    let manifest = pod_manifest(json!({"limits": {"cpu": "1", "memory": "1Gi", "hugepages-0Gi": "1"}}));
    let explanation = explain_and_replay(&node, &kubelet, &manifest);
    assert_eq!(
        explanation.empty_node.reason.as_deref(),
        Some("OutOfhugepages-0Gi"),
        "{explanation:?}"
    );
    assert!(explanation.summary.contains("hugepages-0Gi"), "{}", explanation.summary);
    assert!(
        descriptions(&explanation)
            .iter()
            .any(|d| d.starts_with("Leave out hugepages-0Gi")),
        "{:?}",
        descriptions(&explanation)
    );
}

/// Huge pages of a size the node does not have (2Mi on a node with none)
/// got no fix: no smaller amount fits, but leaving them out admits.
#[test]
fn huge_pages_of_a_size_the_node_lacks_get_a_leave_out_fix() {
    let kubelet = json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
                         "topologyManagerPolicy": "single-numa-node"});
    let node = node(2, 4, 1, &kubelet);
    let manifest = pod_manifest(json!({"limits": {"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "4Mi"}}));
    let explanation = explain_and_replay(&node, &kubelet, &manifest);
    let fixes = descriptions(&explanation);
    assert!(
        fixes
            .iter()
            .any(|d| d.starts_with("Leave out hugepages-2Mi (this node has none of it): admitted")),
        "{fixes:?}"
    );
}

#[test]
fn an_absurd_cpu_request_is_answered_with_a_bounded_search() {
    let kubelet = json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
                         "topologyManagerPolicy": "single-numa-node"});
    let node = node(2, 4, 1, &kubelet);
    for cpu in ["10000000", "1e15"] {
        let manifest = pod_manifest(json!({"limits": {"cpu": cpu, "memory": "1Gi"}}));
        let explanation = explain_and_replay(&node, &kubelet, &manifest);
        // The largest that fits: a whole free NUMA node (4 CPUs; NUMA 0
        // has only 3 left beside the reserved one).
        assert!(
            descriptions(&explanation)
                .iter()
                .any(|t| t.starts_with("Ask for cpu: 4 instead of")),
            "{cpu}: {:?}",
            descriptions(&explanation)
        );
    }
}

#[test]
fn an_absurd_memory_request_is_answered_with_a_bounded_search() {
    let kubelet = json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0"});
    let node = node(2, 4, 1, &kubelet);
    let manifest = pod_manifest(json!({"limits": {"cpu": "1", "memory": "8E"}}));
    let explanation = explain_and_replay(&node, &kubelet, &manifest);
    assert!(
        descriptions(&explanation)
            .iter()
            .any(|t| t.starts_with("Ask for memory: ")),
        "{:?}",
        descriptions(&explanation)
    );
}

#[test]
fn out_of_cpu_for_a_fractional_request_gets_a_fix() {
    let kubelet = json!({});
    let node = node(1, 4, 1, &kubelet);
    let manifest = pod_manifest(json!({"requests": {"cpu": "5500m", "memory": "1Gi"}}));
    let explanation = explain_and_replay(&node, &kubelet, &manifest);
    assert!(
        descriptions(&explanation)
            .iter()
            .any(|t| t.starts_with("Ask for cpu: 4 instead of 5500m")),
        "{:?}",
        descriptions(&explanation)
    );
}

/// On a 64-NUMA machine the "why" sentence listed all 64 nodes.
#[test]
fn the_why_sentence_on_a_64_numa_machine_names_nodes_as_ranges() {
    let kubelet = json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
                         "topologyManagerPolicy": "single-numa-node",
                         "topologyManagerPolicyOptions": {"max-allowable-numa-nodes": "64"}});
    let node = node(64, 2, 1, &kubelet);
    let manifest = pod_manifest(json!({"limits": {"cpu": "3", "memory": "1Gi"}}));
    let explanation = explain_and_replay(&node, &kubelet, &manifest);
    assert!(
        explanation
            .summary
            .starts_with("NUMA 0 has only 1 of the 3 CPUs free; NUMA 1-63 have only 2 of the 3 CPUs free."),
        "{}",
        explanation.summary
    );
}

/// Under the container scope the table showed the pod's total as
/// "requested" and marked NUMA nodes short for an admitted pod.
#[test]
fn container_scope_table_compares_containers_and_never_marks_an_admitted_pod_short() {
    let kubelet = json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
                         "topologyManagerPolicy": "single-numa-node"});
    let node = node(2, 4, 1, &kubelet);
    let manifest = json!({"metadata": {"name": "two", "namespace": "default"},
        "spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "3", "memory": "1Gi"}}}]}});
    let pod = pod_from_value(&manifest, "uid-two").unwrap();
    let decision = node.clone().admit(pod.clone());
    assert!(decision.admitted());
    let situation = Situation {
        node: &node,
        kubelet: &kubelet,
        manifest: &manifest,
        pod: &pod,
    };
    let table = explain(&situation, &decision).resources;
    assert_eq!(table.requested_by, "the largest container of each resource");
    assert_eq!(table.requested.get("cpu").map(String::as_str), Some("3"));
    assert!(
        table
            .numa
            .iter()
            .all(|row| row.resources.values().all(|cell| !cell.short)),
        "{table:?}"
    );
    // A rejected container is compared on its own.
    let big = json!({"metadata": {"name": "big", "namespace": "default"},
        "spec": {"containers": [
            {"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}},
            {"name": "b", "resources": {"limits": {"cpu": "5", "memory": "1Gi"}}}]}});
    let explanation = explain_and_replay(&node, &kubelet, &big);
    assert_eq!(explanation.resources.requested_by, "container b");
    assert_eq!(
        explanation.resources.requested.get("cpu").map(String::as_str),
        Some("5")
    );
}

/// A node whose `reservedSystemCPUs` takes most of it refuses a pod that
/// fits once fewer CPUs are reserved: the kubelet fix names the largest
/// list that still admits (bisection, each candidate a restarted kubelet).
#[test]
fn a_rejection_due_to_reserved_cpus_gets_a_smaller_reservation() {
    let kubelet = json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0-5",
                         "topologyManagerPolicy": "single-numa-node"});
    let node = node(2, 4, 1, &kubelet);
    // NUMA 0 keeps CPUs 0–3 reserved, NUMA 1 CPUs 4–5: two free CPUs on
    // NUMA 1, none on NUMA 0; three CPUs on one node need CPUs 5 or 3 back.
    let manifest = pod_manifest(json!({"limits": {"cpu": "3", "memory": "1Gi"}}));
    let explanation = explain_and_replay(&node, &kubelet, &manifest);
    let texts = descriptions(&explanation);
    assert!(
        texts.iter().any(|t| t.starts_with(
            "Reserve fewer CPUs for the system: reservedSystemCPUs: \"0-4\" instead of \"0-5\""
        )),
        "{texts:?}"
    );
}

/// The same with the reservation written as `kubeReserved` and
/// `systemReserved` quantities (the CPU manager's `none` policy: the
/// resource-fit check refuses it, `OutOfcpu`): `systemReserved` gives way
/// first, and no reservation at all is tried when one CPU is too many.
#[test]
fn out_of_cpu_due_to_reserved_quantities_gets_a_smaller_reservation() {
    let kubelet = json!({"kubeReserved": {"cpu": "1", "memory": "100Mi"},
                         "systemReserved": {"cpu": "1500m"}});
    let node = node(1, 4, 1, &kubelet);
    let manifest = pod_manifest(json!({"requests": {"cpu": "3"}}));
    let explanation = explain_and_replay(&node, &kubelet, &manifest);
    let texts = descriptions(&explanation);
    assert!(
        texts.iter().any(|t| t.starts_with(
            "Reserve fewer CPUs for the system: systemReserved.cpu: 0 instead of 1500m in the kubelet configuration"
        )),
        "{texts:?}"
    );
    let manifest = pod_manifest(json!({"requests": {"cpu": "4"}}));
    let explanation = explain_and_replay(&node, &kubelet, &manifest);
    let texts = descriptions(&explanation);
    assert!(
        texts.iter().any(|t| t.starts_with(
            "Reserve fewer CPUs for the system: systemReserved.cpu: 0 instead of 1500m, kubeReserved.cpu: 0 instead of 1"
        )),
        "{texts:?}"
    );
}
