//! The kubelet's checkpoint files of a machine of 72 NUMA nodes (ids
//! 0-71, more than its 64-bit NUMA masks hold; it runs under topology
//! policy `none`): `testdata/kubelet-state/layouts/<release>-numa-nodes-72-*`
//! hold what v1.32.10 and v1.37.2 wrote (the oracle, `--checkpoint-dir`)
//! replaying the conformance vectors `hand-numa-nodes-72-memory-none` and
//! `-static-memory`, after the last event and, in `at-restart/`, just
//! before the scenario's `restart` event.
//!
//! The engine replaying the same scenario holds what the files say (CPU
//! assignments, the memory manager's machine state with every node's
//! `cells` — a node past 63 is a group of its own —, device assignments);
//! a node restarted over the `at-restart` files accepts them as the
//! kubelet does, admits the running pods again and then the scenario's
//! later pods with the kubelet's answers (its `result.json`), and ends
//! holding the kubelet's last files.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use topoalign_engine::{Decision, MemoryManagerState, Node, NodeSnapshot};
use topoalign_k8s::{CpuCheckpoint, DeviceCheckpoint, MemoryCheckpoint, start_node};
use topoalign_scenario::{Scenario, play_events};

const RELEASES: [&str; 2] = ["1.32", "1.37"];
const NAMES: [&str; 2] = ["memory-none", "static-memory"];
const NUMA_NODES: usize = 72;

fn dir(release: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/kubelet-state/layouts")
        .join(format!("{release}-numa-nodes-72-{name}"))
}

fn scenario(release: &str, name: &str) -> Scenario {
    Scenario::parse(&std::fs::read_to_string(dir(release, name).join("scenario.json")).unwrap()).unwrap()
}

/// The oracle's result document for the scenario.
fn result(release: &str, name: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir(release, name).join("result.json")).unwrap()).unwrap()
}

fn fresh(scenario: &Scenario) -> Node {
    let machine = scenario.topology.to_machine_with_numa_labels().unwrap();
    assert_eq!(machine.numa_nodes().len(), NUMA_NODES);
    assert!(!machine.fits_numa_masks());
    start_node(machine, &scenario.kubelet).unwrap()
}

fn static_memory(scenario: &Scenario) -> bool {
    scenario.kubelet["memoryManagerPolicy"] == "Static"
}

/// The kubelet's uid of the `k`-th pod added (from 1), as the oracle gives
/// it.
fn kubelet_uid(k: usize) -> String {
    format!("00000000-0000-0000-0000-{k:012}")
}

/// Event index → the kubelet's uid of the pod it adds.
fn kubelet_uids(scenario: &Scenario) -> BTreeMap<usize, String> {
    (0..scenario.events.len())
        .filter(|&i| scenario.events[i].add.is_some())
        .enumerate()
        .map(|(k, i)| (i, kubelet_uid(k + 1)))
        .collect()
}

/// The kubelet's uid → the engine's replay's (`topoalign-event-<index>`).
fn engine_uid(scenario: &Scenario) -> impl Fn(String) -> String + use<> {
    let by_kubelet: BTreeMap<String, usize> = kubelet_uids(scenario).into_iter().map(|(i, uid)| (uid, i)).collect();
    move |uid: String| format!("topoalign-event-{}", by_kubelet[&uid])
}

fn renamed<V>(map: BTreeMap<String, V>, uid: &impl Fn(String) -> String) -> BTreeMap<String, V> {
    map.into_iter().map(|(k, v)| (uid(k), v)).collect()
}

/// What the files in `dir` say, as a snapshot holding `pods`, uids renamed
/// by `uid`. `memory` is `None` under the `None` policy (the oracle writes
/// no memory file for it).
fn from_files(
    dir: &Path,
    scenario: &Scenario,
    pods: Vec<topoalign_model::Pod>,
    uid: &impl Fn(String) -> String,
) -> NodeSnapshot {
    let mut cpu = CpuCheckpoint::parse(&std::fs::read(dir.join("cpu_manager_state")).unwrap())
        .unwrap()
        .to_state("static")
        .unwrap();
    cpu.assignments = renamed(cpu.assignments, uid);
    let memory_file = dir.join("memory_manager_state");
    assert_eq!(
        memory_file.exists(),
        static_memory(scenario),
        "{}",
        memory_file.display()
    );
    let memory = static_memory(scenario).then(|| {
        let mut memory = MemoryCheckpoint::parse(&std::fs::read(&memory_file).unwrap())
            .unwrap()
            .to_state("Static")
            .unwrap();
        memory.assignments = renamed(memory.assignments, uid);
        memory
    });
    let devices =
        DeviceCheckpoint::parse(&std::fs::read(dir.join("device-plugins/kubelet_internal_checkpoint")).unwrap())
            .unwrap()
            .assignments();
    NodeSnapshot {
        pods,
        cpu,
        memory,
        devices: renamed(devices, uid),
    }
}

/// Blocks in resource order: the kubelet lists a container's blocks in Go
/// map order.
fn sorted(mut state: MemoryManagerState) -> MemoryManagerState {
    for blocks in state.assignments.values_mut().flat_map(|c| c.values_mut()) {
        blocks.sort_by(|a, b| a.resource.cmp(&b.resource));
    }
    state
}

fn assert_same(ours: &NodeSnapshot, files: &NodeSnapshot, what: &str) {
    assert_eq!(ours.cpu, files.cpu, "{what}: cpu_manager_state");
    assert_eq!(
        ours.memory.clone().map(sorted),
        files.memory.clone().map(sorted),
        "{what}: memory_manager_state"
    );
    assert_eq!(ours.devices, files.devices, "{what}: kubelet_internal_checkpoint");
}

/// The memory files of the Static policy record all 72 nodes, each (no
/// container pins memory here) a group of its own — nodes past 63 too.
fn assert_every_node_alone(memory: &MemoryManagerState, what: &str) {
    assert_eq!(memory.machine_state.len(), NUMA_NODES, "{what}");
    for (&id, node) in &memory.machine_state {
        assert_eq!(node.cells, vec![id], "{what}: node {id}'s cells");
    }
}

#[test]
fn the_engine_holds_what_the_kubelet_wrote() {
    for release in RELEASES {
        for name in NAMES {
            let what = format!("{release} {name}");
            let scenario = scenario(release, name);
            let mut replayed = fresh(&scenario);
            play_events(&mut replayed, &scenario.kubelet, &scenario).unwrap();
            let held = replayed.snapshot();
            let files = from_files(
                &dir(release, name),
                &scenario,
                held.pods.clone(),
                &engine_uid(&scenario),
            );
            if let Some(memory) = &files.memory {
                assert_every_node_alone(memory, &what);
            }
            assert_same(&held, &files, &what);
        }
    }
}

/// Our answer for an admission, as the result document writes it.
fn admission(decision: &Decision) -> Value {
    assert!(
        decision.kubelet_panic.is_none(),
        "{}: {:?}",
        decision.pod,
        decision.kubelet_panic
    );
    match &decision.rejection {
        Some(rejection) => json!({
            "pod": decision.pod, "admitted": false,
            "reason": rejection.reason, "message": rejection.message,
        }),
        None => json!({
            "pod": decision.pod, "admitted": true,
            "containers": serde_json::to_value(&decision.containers).unwrap(),
        }),
    }
}

/// The pod an `add` event creates, with the kubelet's uid.
fn pod(scenario: &Scenario, event: usize, uids: &BTreeMap<usize, String>) -> topoalign_model::Pod {
    topoalign_k8s::pod_from_value(scenario.events[event].add.as_ref().unwrap(), &uids[&event]).unwrap()
}

/// Restarted over the files the kubelet had written when the scenario's
/// `restart` came, a node takes them (the CPU and memory managers'
/// checks of restored state), admits the running pods again and the later
/// pods as the kubelet did, and ends with the kubelet's last files.
#[test]
fn a_node_restarted_over_the_files_goes_on_as_the_kubelet() {
    for release in RELEASES {
        for name in NAMES {
            let what = format!("{release} {name}");
            let scenario = scenario(release, name);
            let expected = result(release, name);
            let results = expected["results"].as_array().unwrap();
            let uids = kubelet_uids(&scenario);
            let restart = scenario.events.iter().position(|e| e.restart.is_some()).unwrap();

            // The pods running at the restart, in admission order, as the
            // kubelet lists them again.
            let running: Vec<&str> = results[restart]["pods"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["pod"].as_str().unwrap())
                .collect();
            let mut pods = Vec::new();
            for key in &running {
                let event = (0..restart)
                    .rev()
                    .find(|&i| results[i]["pod"] == *key && results[i]["admitted"] == true)
                    .unwrap();
                pods.push(pod(&scenario, event, &uids));
            }
            let files = from_files(&dir(release, name).join("at-restart"), &scenario, pods, &|u| u);
            if let Some(memory) = &files.memory {
                assert_every_node_alone(memory, &what);
            }

            let (mut node, again) = fresh(&scenario)
                .restarted(files)
                .unwrap_or_else(|refusal| panic!("{what}: the kubelet restarts over its own files: {refusal}"));
            let again: Vec<Value> = again.iter().map(admission).collect();
            assert_eq!(
                Value::Array(again),
                results[restart]["pods"],
                "{what}: the pods admitted again"
            );

            // The later events, by the kubelet's uids.
            let mut running: BTreeMap<String, String> = BTreeMap::new();
            for pod in node.snapshot().pods {
                running.insert(pod.key(), pod.uid);
            }
            assert_eq!(results.len(), scenario.events.len(), "{what}");
            for (event, expected) in results.iter().enumerate().skip(restart + 1) {
                let ours = if scenario.events[event].add.is_some() {
                    let pod = pod(&scenario, event, &uids);
                    let (key, uid) = (pod.key(), pod.uid.clone());
                    let decision = node.admit(pod);
                    if decision.rejection.is_none() {
                        running.insert(key, uid);
                    }
                    admission(&decision)
                } else {
                    let key = scenario.events[event].delete.clone().unwrap();
                    let uid = running.remove(&key).unwrap();
                    json!({ "pod": key, "deleted": node.delete(&uid).found })
                };
                let mut ours = ours;
                ours["event"] = event.into();
                assert_eq!(&ours, expected, "{what}: event {event}");
            }

            // The state it ends with is what the kubelet wrote last, and
            // a kubelet restarting over those files takes them.
            let held = node.snapshot();
            let last = from_files(&dir(release, name), &scenario, held.pods.clone(), &|u| u);
            assert_same(&held, &last, &format!("{what}, after the restart"));
            fresh(&scenario)
                .restore(last)
                .unwrap_or_else(|refusal| panic!("{what}: the kubelet restarts over its last files: {refusal}"));
        }
    }
}

/// The restored machine state is checked on every node, past 63 too: a
/// node 64 recorded in a group with 65 is not what the kubelet computes
/// from the (empty) assignments, and the memory manager refuses it with
/// the kubelet's text.
#[test]
fn a_group_the_assignments_do_not_make_is_refused_past_63() {
    for release in RELEASES {
        let scenario = scenario(release, "static-memory");
        let dir = dir(release, "static-memory");
        let mut replayed = fresh(&scenario);
        play_events(&mut replayed, &scenario.kubelet, &scenario).unwrap();
        let mut files = from_files(&dir, &scenario, replayed.snapshot().pods, &engine_uid(&scenario));
        let memory = files.memory.as_mut().unwrap();
        memory.machine_state.get_mut(&64).unwrap().cells = vec![64, 65];
        memory.machine_state.get_mut(&65).unwrap().cells = vec![64, 65];
        let refusal = fresh(&scenario).restore(files).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "start memory manager error: [memorymanager] the expected machine state is different from the real one",
            "{release}"
        );
    }
}
