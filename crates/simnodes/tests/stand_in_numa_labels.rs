//! The kubelet stand-in on a machine with a NUMA id past 63 (numbered anew
//! inside, `Machine::with_numa_labels`) writes its checkpoint files as the
//! kubelet does — NUMA nodes by the machine's own ids, as in the files the
//! real kubelet wrote in testdata/kubelet-state/layouts/*-numa-nodes-72-*
//! — and starts again from them.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::path::{Path, PathBuf};

use serde_json::json;
use topoalign_k8s::{DeviceCheckpoint, MemoryCheckpoint};
use topoalign_nrt::NodeSpec;
use topoalign_simnodes::stand_in::{Change, DieAtWrite, Layout, Paths, StandIn};

/// The vector `hand-numa-id-64-static-memory` (NUMA ids 0 and 64, the
/// Static memory manager, GPUs on both nodes): its topology and kubelet.
fn spec() -> NodeSpec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/conformance/1.37/scenarios/hand-numa-id-64-static-memory.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("topoalign-stand-in-numa-labels-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn checkpoints_name_numa_nodes_by_the_machine_s_own_ids() {
    let dir = scratch("files");
    let paths = || Paths {
        root_dir: dir.join("kubelet"),
        pods_file: dir.join("pods.json"),
    };
    let base = topoalign_nrt::start_node(&spec()).unwrap();
    assert_eq!(base.machine().numa_labels(), Some(&[0, 64][..]));
    let (mut stand_in, restored) = StandIn::start(base.clone(), Layout::V1_37, paths(), DieAtWrite(None)).unwrap();
    assert!(!restored);
    // A Burstable pod with three GPUs: the vector's GPUs on NUMA 64 are
    // among them (the Static memory manager never pins a Burstable pod).
    let pod = serde_json::from_value(json!({
        "metadata": {"name": "b", "namespace": "default", "uid": "uid-b"},
        "spec": {"containers": [{"name": "app", "image": "pause", "resources": {
            "requests": {"cpu": "500m", "memory": "1Gi", "example.com/gpu": "3"},
            "limits": {"example.com/gpu": "3"}}}]}}))
    .unwrap();
    assert!(matches!(stand_in.add(pod).unwrap(), Change::Admitted { .. }));

    let root = dir.join("kubelet");
    let memory = MemoryCheckpoint::parse(&std::fs::read(root.join("memory_manager_state")).unwrap())
        .unwrap()
        .to_state("Static")
        .unwrap();
    assert_eq!(memory.machine_state.keys().copied().collect::<Vec<_>>(), [0, 64]);
    assert_eq!(memory.machine_state[&64].cells, [64]);
    let devices = std::fs::read_to_string(root.join("device-plugins/kubelet_internal_checkpoint")).unwrap();
    DeviceCheckpoint::parse(devices.as_bytes()).unwrap();
    let document: serde_json::Value = serde_json::from_str(&devices).unwrap();
    let entry = &document["Data"]["PodDeviceEntries"][0];
    assert_eq!(entry["ResourceName"], "example.com/gpu");
    let keys: Vec<&str> = entry["DeviceIDs"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert!(keys.contains(&"64"), "{keys:?}");
    assert!(!keys.contains(&"1"), "{keys:?}");

    // A new stand-in over the files restores them: the same state.
    let (again, restored) = StandIn::start(base, Layout::V1_37, paths(), DieAtWrite(None)).unwrap();
    assert!(restored);
    assert_eq!(again.node().state(), stand_in.node().state());
    assert_eq!(again.node().devices_in_use(), stand_in.node().devices_in_use());
    std::fs::remove_dir_all(&dir).unwrap();
}
