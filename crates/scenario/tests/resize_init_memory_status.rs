//! In-place resize on 1.32/1.33 under the `Static` memory policy and the
//! pod scope: the topology manager admits the resized pod again and the
//! memory manager allocates the memory of an init container that ran to
//! completion afresh, on the NUMA nodes of the pod's merged hint — which
//! the CPU and memory managers work out from the app containers' status
//! (`allocatedResources`), a status a scenario does not carry. Where that
//! decides, the replay is an error naming the event, the release and the
//! init container, never an answer. The neighbours whose answer does not
//! depend on it are answered: vectors `1.32/resize-init-memory-container-scope`
//! (the container scope sizes an init container by its own spec) and
//! `1.33/resize-init-memory-pod-scope-cpu` (1.33 counts the held sizes once
//! the status is written: a CPU change under the `none` CPU policy changes
//! nothing the managers count), both from the oracle and replayed by the
//! conformance test.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::path::Path;

use serde_json::Value;
use topoalign_scenario::{Replay, Scenario, replay};

fn vector(release: &str, name: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/conformance")
        .join(release)
        .join("scenarios")
        .join(format!("{name}.json"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn outcome(value: &Value) -> Result<Replay, String> {
    replay(&Scenario::parse(&value.to_string()).unwrap()).map_err(|e| e.to_string())
}

fn assert_not_reproduced(value: &Value, release: &str) {
    let error = outcome(value).map(|_| ()).unwrap_err();
    assert!(error.contains("events[3].resize"), "{error}");
    assert!(error.contains(&format!("kubelet {release}")), "{error}");
    assert!(error.contains("Static memory policy"), "{error}");
    assert!(error.contains("\"init0\""), "{error}");
    assert!(error.contains("allocatedResources"), "{error}");
}

fn assert_answered(value: &Value, what: &str) {
    assert!(matches!(outcome(value), Ok(Replay::Completed(_))), "{what}");
}

/// The app container's new memory request (2Gi to 2560Mi), in place of
/// the vector's CPU change.
fn memory_change(value: &mut Value) {
    let resources = &mut value["events"][3]["resize"]["containers"][0]["resources"];
    for part in ["requests", "limits"] {
        resources[part]["cpu"] = "1".into();
        resources[part]["memory"] = "2560Mi".into();
    }
}

#[test]
fn v1_32_pod_scope_is_refused_whatever_the_resize_changes() {
    // 1.32 without InPlacePodVerticalScalingAllocatedStatus (alpha, off)
    // counts an app container with a status as asking nothing.
    let container_scope = vector("1.32", "resize-init-memory-container-scope");
    let mut pod_scope = container_scope.clone();
    pod_scope["kubelet"]["topologyManagerScope"] = "pod".into();
    assert_not_reproduced(&pod_scope, "1.32");
    let mut memory = pod_scope.clone();
    memory_change(&mut memory);
    assert_not_reproduced(&memory, "1.32");
    // Static CPU policy with the exclusive-CPU gate: the resize reaches the
    // managers the same way.
    let mut exclusive = pod_scope.clone();
    exclusive["kubelet"]["cpuManagerPolicy"] = "static".into();
    exclusive["kubelet"]["reservedSystemCPUs"] = "0".into();
    exclusive["kubelet"]["featureGates"]["InPlacePodVerticalScalingExclusiveCPUs"] = true.into();
    assert_not_reproduced(&exclusive, "1.32");
    for policy in ["restricted", "single-numa-node"] {
        let mut aligning = pod_scope.clone();
        aligning["kubelet"]["topologyManagerPolicy"] = policy.into();
        assert_not_reproduced(&aligning, "1.32");
    }
}

#[test]
fn v1_33_pod_scope_is_refused_when_a_counted_size_changes() {
    let cpu_only = vector("1.33", "resize-init-memory-pod-scope-cpu");
    assert_answered(&cpu_only, "1.33, CPU policy none, a CPU change");
    let mut memory = cpu_only.clone();
    memory_change(&mut memory);
    assert_not_reproduced(&memory, "1.33");
    // Under the static CPU policy the CPU manager's pod hints count the CPU
    // request too.
    let mut static_cpu = cpu_only.clone();
    static_cpu["kubelet"]["cpuManagerPolicy"] = "static".into();
    static_cpu["kubelet"]["reservedSystemCPUs"] = "0".into();
    assert_not_reproduced(&static_cpu, "1.33");
}

#[test]
fn status_independent_neighbours_are_answered() {
    let container_scope = vector("1.32", "resize-init-memory-container-scope");
    assert_answered(&container_scope, "1.32 container scope");
    let mut memory = container_scope.clone();
    memory_change(&mut memory);
    assert_answered(&memory, "1.32 container scope, memory change");
    for (release, base) in [
        ("1.32", container_scope.clone()),
        ("1.33", vector("1.33", "resize-init-memory-pod-scope-cpu")),
    ] {
        let mut pod_scope = base;
        pod_scope["kubelet"]["topologyManagerScope"] = "pod".into();
        memory_change(&mut pod_scope);
        // The none topology policy asks for no hints.
        let mut none = pod_scope.clone();
        none["kubelet"]["topologyManagerPolicy"] = "none".into();
        assert_answered(&none, &format!("{release} none policy"));
        // One NUMA node: every reading places the memory there.
        let mut one_node = pod_scope.clone();
        one_node["topology"]["numaNodes"] = serde_json::json!([{"id": 0, "memory": "8Gi"}]);
        one_node["kubelet"]["reservedMemory"] = serde_json::json!([{"numaNode": 0, "limits": {"memory": "968Mi"}}]);
        for cpu in one_node["topology"]["cpus"].as_array_mut().unwrap() {
            cpu["numa"] = 0.into();
        }
        assert_answered(&one_node, &format!("{release} one NUMA node"));
    }
}
