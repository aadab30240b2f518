//! NUMA node ids of 64 or more (issue #29, "never stricter than the
//! kubelet"). The kubelet's NUMA masks are 64 bits wide; it checks only
//! the number of NUMA nodes, not their ids. What the real kubelet does,
//! found with the oracle on every release 1.32-1.37 (docs/kubelet-versions.md,
//! "NUMA node ids of 64 or more"; the vectors `hand-numa-id-64-*` hold its
//! answers): under the `none` topology policy it runs and decides as on
//! the same machine numbered 0..n — except that the Static memory manager's
//! default hint for a Guaranteed container crashes it; under every other
//! policy the first admission crashes it. A replay answers with an error
//! naming the event where the kubelet crashes.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use serde_json::{Value, json};
use topoalign_scenario::{Replay, ResultDocument, Scenario, ScenarioError, TopologySpec, replay};

/// A machine with NUMA nodes `ids` (4 CPUs and 4Gi each), GPUs on the
/// first and the last node and one without affinity.
fn topology(ids: [usize; 2]) -> Value {
    let cpus: Vec<Value> = (0..8)
        .map(|cpu| json!({"id": cpu, "core": cpu, "socket": cpu / 4, "numa": ids[cpu / 4]}))
        .collect();
    json!({
        "numaNodes": [{"id": ids[0], "memory": "4Gi"}, {"id": ids[1], "memory": "4Gi"}],
        "cpus": cpus,
        "devices": {"example.com/gpu": [
            {"id": "gpu0", "numa": [ids[0]]},
            {"id": "gpu1", "numa": [ids[1]]},
            {"id": "gpu2", "numa": [ids[1]]},
            {"id": "gpu3"},
        ]},
    })
}

fn pod(name: &str, cpu: &str, memory: &str, gpus: u32, guaranteed: bool) -> Value {
    let mut requests = json!({"cpu": cpu, "memory": memory});
    if gpus > 0 {
        requests["example.com/gpu"] = json!(gpus.to_string());
    }
    let mut resources = json!({ "requests": requests });
    if guaranteed {
        resources["limits"] = resources["requests"].clone();
    } else if gpus > 0 {
        resources["limits"] = json!({"example.com/gpu": gpus.to_string()});
    }
    json!({"add": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10", "resources": resources}]}}})
}

fn scenario(ids: [usize; 2], kubelet: Value, events: Vec<Value>) -> Scenario {
    let text = json!({"topology": topology(ids), "kubelet": kubelet, "events": events}).to_string();
    Scenario::parse(&text).unwrap()
}

fn completed(outcome: Result<Replay, ScenarioError>) -> ResultDocument {
    match outcome {
        Ok(Replay::Completed(document)) => document,
        other => panic!("expected a result document, got {other:?}"),
    }
}

/// The error a replay answers where the kubelet crashes: its path and text.
fn crash(outcome: Result<Replay, ScenarioError>) -> (String, String) {
    match outcome {
        Err(ScenarioError::Field { path, message }) => (path, message),
        other => panic!("expected the kubelet's crash, got {other:?}"),
    }
}

fn static_cpu(version: &str, topology_policy: &str, memory: Option<Value>) -> Value {
    let mut kubelet = json!({
        "kubeletVersion": version,
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0",
        "topologyManagerPolicy": topology_policy,
    });
    if let Some(reserved) = memory {
        kubelet["memoryManagerPolicy"] = json!("Static");
        kubelet["reservedMemory"] = reserved;
    }
    kubelet
}

/// The kubelet is blind to the ids under `none` (the oracle sweep of every
/// vector numbered anew, docs/kubelet-versions.md), so a machine with ids
/// 0 and 64 must give exactly what the same machine with ids 0 and 1 gives.
#[test]
fn under_none_the_ids_are_only_labels() {
    let events = vec![
        pod("g1", "2", "1Gi", 1, true),
        pod("b1", "500m", "1Gi", 2, false),
        pod("g2", "3", "1Gi", 1, true),
        json!({"delete": "g1"}),
        pod("g3", "2", "512Mi", 2, true),
        pod("g4", "100", "1Gi", 0, true),
    ];
    for version in ["1.32", "1.35", "1.37"] {
        let kubelet = static_cpu(version, "none", None);
        let sparse = completed(replay(&scenario([0, 64], kubelet.clone(), events.clone())));
        let dense = completed(replay(&scenario([0, 1], kubelet, events.clone())));
        assert_eq!(sparse, dense, "{version}");
        // Something was decided: exclusive CPUs on the second node, devices.
        let g2 = &sparse.results[2].containers.as_ref().unwrap()[0];
        assert!(g2.cpus.is_some() && !g2.devices.is_empty(), "{version}: {g2:?}");
    }
}

#[test]
fn a_guaranteed_pod_under_the_static_memory_manager_crashes_the_kubelet() {
    let reserved =
        json!([{"numaNode": 0, "limits": {"memory": "50Mi"}}, {"numaNode": 64, "limits": {"memory": "50Mi"}}]);
    for version in ["1.32", "1.33", "1.34", "1.35", "1.36", "1.37"] {
        let kubelet = static_cpu(version, "none", Some(reserved.clone()));
        // Burstable and BestEffort pods never reach the memory manager.
        let events = vec![pod("b1", "500m", "1Gi", 1, false), pod("g1", "1", "1Gi", 1, true)];
        let (path, message) = crash(replay(&scenario([0, 64], kubelet.clone(), events)));
        assert_eq!(path, "events[1].add", "{version}");
        assert!(
            message.starts_with(&format!(
                "the v{version} kubelet panics admitting this pod: NUMA node id 64 does not fit its 64-bit NUMA masks"
            )),
            "{version}: {message}"
        );
        assert!(message.contains("Static memory manager"), "{message}");
        assert!(message.contains("container \"app\""), "{message}");
        // Without the Guaranteed pod the kubelet runs, and the reservation
        // on NUMA node 64 is the scenario's.
        let document = completed(replay(&scenario(
            [0, 64],
            kubelet,
            vec![pod("b1", "500m", "1Gi", 1, false)],
        )));
        assert_eq!(document.results[0].admitted, Some(true));
    }
}

/// The device manager allocates before the memory manager: a Guaranteed
/// pod it refuses never reaches the default hint.
#[test]
fn a_pod_refused_before_the_memory_manager_does_not_crash_it() {
    let reserved = json!([{"numaNode": 64, "limits": {"memory": "100Mi"}}]);
    let kubelet = static_cpu("1.37", "none", Some(reserved));
    let document = completed(replay(&scenario(
        [0, 64],
        kubelet,
        vec![pod("g1", "1", "1Gi", 5, true)],
    )));
    assert_eq!(document.results[0].admitted, Some(false));
    assert_eq!(document.results[0].reason.as_deref(), Some("UnexpectedAdmissionError"));
}

#[test]
fn every_other_topology_policy_crashes_at_the_first_admission() {
    for policy in ["best-effort", "restricted", "single-numa-node"] {
        let kubelet = json!({"kubeletVersion": "1.34", "topologyManagerPolicy": policy});
        // It starts: with nothing to admit the replay completes.
        let document = completed(replay(&scenario([0, 64], kubelet.clone(), vec![])));
        assert!(document.results.is_empty());
        // A BestEffort pod is enough.
        let events = vec![
            json!({"add": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "be"},
            "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}}}),
        ];
        let (path, message) = crash(replay(&scenario([0, 64], kubelet, events)));
        assert_eq!(path, "events[0].add");
        assert!(
            message.starts_with("the v1.34 kubelet panics admitting this pod: NUMA node id 64")
                && message.contains(&format!("topology manager policy {policy} builds masks")),
            "{message}"
        );
    }
}

#[test]
fn a_restart_into_another_policy_crashes_readmitting_the_pods() {
    let events = vec![
        pod("b1", "500m", "1Gi", 0, false),
        json!({"restart": {"kubelet": {"topologyManagerPolicy": "restricted"}}}),
    ];
    let (path, message) = crash(replay(&scenario([0, 64], json!({"kubeletVersion": "1.36"}), events)));
    assert_eq!(path, "events[1].restart");
    assert!(
        message.starts_with("admitting default/b1 again after the restart: the v1.36 kubelet panics"),
        "{message}"
    );
}

#[test]
fn reserved_memory_and_warnings_name_the_scenario_s_ids() {
    let kubelet = |reserved: Value| static_cpu("1.37", "none", Some(reserved));
    // NUMA node 1 does not exist (the second node is 64): the kubelet's text.
    let refused = replay(&scenario(
        [0, 64],
        kubelet(json!([{"numaNode": 1, "limits": {"memory": "100Mi"}}])),
        vec![],
    ));
    match refused {
        Ok(Replay::Refused(text)) => assert!(
            text.contains("references a NUMA node 1 that does not exist on this machine"),
            "{text}"
        ),
        other => panic!("expected the kubelet's refusal, got {other:?}"),
    }
    // A reservation larger than NUMA node 64 holds: the kubelet starts, the
    // warning names node 64.
    let mut overrun = json!({"kubeletVersion": "1.37", "cpuManagerPolicy": "static", "reservedSystemCPUs": "0",
        "memoryManagerPolicy": "Static", "systemReserved": {"memory": "5Gi"},
        "reservedMemory": [{"numaNode": 64, "limits": {"memory": "5220Mi"}}]});
    overrun["evictionHard"] = json!({"memory.available": "100Mi"});
    let document = completed(replay(&scenario([0, 64], overrun, vec![])));
    assert!(
        document
            .warnings
            .iter()
            .any(|w| w.starts_with("reservedMemory: NUMA node 64 reserves")),
        "{:?}",
        document.warnings
    );
}

#[test]
fn ids_linux_does_not_number_are_errors_naming_them_and_more_than_64_nodes_replay() {
    let kubelet = json!({"kubeletVersion": "1.37"});
    let (path, message) = crash(replay(&scenario([0, 1024], kubelet.clone(), vec![])));
    assert_eq!(path, "topology");
    assert!(message.contains("NUMA node id 1024 is larger than 1023"), "{message}");
    // 65 nodes: the kubelet starts under policy none (no mask is built)
    // and so does the replay; the vectors `hand-numa-nodes-72-*` check
    // its answers against the oracle.
    let nodes: Vec<Value> = (0..65).map(|i| json!({"id": i * 10, "memory": "1Gi"})).collect();
    let text = json!({"topology": {"numaNodes": nodes, "cpus": [{"id": 0, "core": 0, "socket": 0, "numa": 640}]},
        "kubelet": kubelet, "events": []})
    .to_string();
    let document = completed(replay(&Scenario::parse(&text).unwrap()));
    assert!(document.results.is_empty());
}

/// A machine numbered anew is written back with the scenario's ids.
#[test]
fn the_topology_block_keeps_the_ids() {
    let spec: TopologySpec = serde_json::from_value(topology([3, 700])).unwrap();
    let machine = spec.to_machine_with_numa_labels().unwrap();
    assert_eq!(machine.numa_labels(), Some(&[3, 700][..]));
    let again = TopologySpec::from_machine(&machine);
    let written = serde_json::to_value(&again).unwrap();
    assert_eq!(written["numaNodes"][1]["id"], 700);
    assert_eq!(written["cpus"][7]["numa"], 700);
    assert_eq!(written["devices"]["example.com/gpu"][1]["numa"], json!([700]));
    assert_eq!(again.to_machine_with_numa_labels().unwrap(), machine);
    // Readers that print the machine's own ids still refuse such ids.
    assert!(spec.to_machine().is_err());
}
