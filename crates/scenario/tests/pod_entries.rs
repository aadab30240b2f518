//! Pod-level assignments (`PodLevelResourceManagers`) through the
//! checkpoint files: `testdata/kubelet-state/layouts/*-pod-entries` hold
//! the files v1.36.3 and v1.37.2 wrote (the oracle, `--checkpoint-dir`)
//! for a scenario with two pod-level pods ("bubbles") and one deleted.
//! The engine replaying the same scenario holds the same state, and a node
//! restored from the files holds it again and goes on as the replayed one.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::path::{Path, PathBuf};

use topoalign_engine::{MemoryManagerState, Node, NodeSnapshot};
use topoalign_k8s::{CpuCheckpoint, MemoryCheckpoint, start_node};
use topoalign_scenario::{Scenario, play_events};

/// The bubble pod's uid on the engine's node (the replay names a pod
/// after its event).
const BUBBLE: &str = "topoalign-event-1";

fn dir(release: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/kubelet-state/layouts")
        .join(format!("{release}-pod-entries"))
}

fn scenario(release: &str) -> Scenario {
    Scenario::parse(&std::fs::read_to_string(dir(release).join("scenario.json")).unwrap()).unwrap()
}

/// A fresh node of the scenario, with `gate` for `PodLevelResourceManagers`.
fn fresh(scenario: &Scenario, gate: bool) -> Node {
    let mut kubelet = scenario.kubelet.clone();
    kubelet["featureGates"]["PodLevelResourceManagers"] = gate.into();
    start_node(scenario.topology.to_machine().unwrap(), &kubelet).unwrap()
}

/// The kubelet's uid of a pod (the oracle gives the k-th pod added
/// `00000000-0000-0000-0000-<k in 12 digits>`) → the engine's
/// (`topoalign-event-<event index>`).
fn engine_uid(scenario: &Scenario) -> impl Fn(String) -> String + use<> {
    let adds: Vec<usize> = (0..scenario.events.len())
        .filter(|&i| scenario.events[i].add.is_some())
        .collect();
    move |uid: String| {
        let k: usize = uid.rsplit('-').next().unwrap().parse().unwrap();
        format!("topoalign-event-{}", adds[k - 1])
    }
}

fn renamed<V>(
    map: std::collections::BTreeMap<String, V>,
    uid: &impl Fn(String) -> String,
) -> std::collections::BTreeMap<String, V> {
    map.into_iter().map(|(k, v)| (uid(k), v)).collect()
}

/// The snapshot the kubelet's files describe (pod uids as the engine's),
/// with the replayed node's pods and devices.
fn from_files(release: &str, replayed: &NodeSnapshot) -> NodeSnapshot {
    let uid = engine_uid(&scenario(release));
    let mut cpu = CpuCheckpoint::parse(&std::fs::read(dir(release).join("cpu_manager_state")).unwrap())
        .unwrap()
        .to_state("static")
        .unwrap();
    cpu.assignments = renamed(cpu.assignments, &uid);
    cpu.pod_assignments = renamed(cpu.pod_assignments, &uid);
    let mut memory = MemoryCheckpoint::parse(&std::fs::read(dir(release).join("memory_manager_state")).unwrap())
        .unwrap()
        .to_state("Static")
        .unwrap();
    memory.assignments = renamed(memory.assignments, &uid);
    memory.pod_assignments = renamed(memory.pod_assignments, &uid);
    NodeSnapshot {
        pods: replayed.pods.clone(),
        cpu,
        memory: Some(memory),
        devices: replayed.devices.clone(),
    }
}

/// Blocks in resource order: the kubelet lists a container's blocks in Go
/// map order.
fn sorted(mut state: MemoryManagerState) -> MemoryManagerState {
    for blocks in state.assignments.values_mut().flat_map(|c| c.values_mut()) {
        blocks.sort_by(|a, b| a.resource.cmp(&b.resource));
    }
    for blocks in state.pod_assignments.values_mut() {
        blocks.sort_by(|a, b| a.resource.cmp(&b.resource));
    }
    state
}

fn assert_same(a: &NodeSnapshot, b: &NodeSnapshot, what: &str) {
    assert_eq!(a.cpu, b.cpu, "{what}: cpu");
    assert_eq!(
        a.memory.clone().map(sorted),
        b.memory.clone().map(sorted),
        "{what}: memory"
    );
}

#[test]
fn the_engine_holds_the_bubbles_the_kubelet_wrote() {
    for release in ["1.36", "1.37"] {
        let scenario = scenario(release);
        let mut replayed = fresh(&scenario, true);
        play_events(&mut replayed, &scenario.kubelet, &scenario).unwrap();
        let held = replayed.snapshot();
        assert_eq!(held.cpu.pod_assignments.len(), 2, "{release}");
        assert_eq!(held.memory.as_ref().unwrap().pod_assignments.len(), 2, "{release}");
        let files = from_files(release, &held);
        assert_same(&held, &files, release);

        // Restored from the files, the node holds the same, and removing
        // a bubble pod returns its CPUs and memory as on the replayed node.
        let mut restored = fresh(&scenario, true);
        restored.restore(files).unwrap();
        assert_same(&restored.snapshot(), &held, release);
        for node in [&mut replayed, &mut restored] {
            node.remove(BUBBLE);
        }
        let (after, again) = (replayed.snapshot(), restored.snapshot());
        assert!(!after.cpu.pod_assignments.contains_key(BUBBLE), "{release}");
        assert_same(&after, &again, &format!("{release} after removing the bubble"));
    }
}

/// Without the gate the kubelet does not read `podEntries`: the CPU
/// manager restores the containers' entries alone.
#[test]
fn without_the_gate_pod_entries_are_not_read() {
    let scenario = scenario("1.36");
    let mut replayed = fresh(&scenario, true);
    play_events(&mut replayed, &scenario.kubelet, &scenario).unwrap();
    let mut files = from_files("1.36", &replayed.snapshot());
    files.memory = None;
    let mut restored = fresh(&scenario, false);
    restored.restore(files.clone()).unwrap();
    let state = restored.snapshot().cpu;
    assert!(state.pod_assignments.is_empty());
    assert_eq!(state.assignments, files.cpu.assignments);
}
