//! [`diagnose`] on the kubelet's own checkpoint files
//! (`testdata/kubelet-state/`): each case names the files, the expected
//! status of each checkpoint and whether a kubelet would restart.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::path::{Path, PathBuf};

use serde_json::Value;
use topoalign_engine::Node;
use topoalign_k8s::{ManifestOptions, ManifestPod, read_manifests};

use super::*;
use topoalign_podresources::{Allocatable, allocatable_of};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// The node of fixture 0023: its scenario's machine under its kubelet's
/// configuration (`changes` laid over it), empty.
fn node_0023(changes: &[(&str, &str)]) -> (Node, Value) {
    let scenario = std::fs::read_to_string(testdata().join("conformance/1.32/scenarios/0023.json")).unwrap();
    let machine = topoalign_scenario::Scenario::parse(&scenario)
        .unwrap()
        .topology
        .to_machine()
        .unwrap();
    let config = std::fs::read_to_string(testdata().join("kubelet-state/0023/kubelet-config.yaml")).unwrap();
    let mut kubelet: Value = serde_yaml_ng::from_str(&config).unwrap();
    for (field, value) in changes {
        kubelet[*field] = Value::from(*value);
    }
    (topoalign_k8s::start_node(machine, &kubelet).unwrap(), kubelet)
}

fn pods_0023() -> Vec<ManifestPod> {
    let text = std::fs::read_to_string(testdata().join("kubelet-state/0023/pods.yaml")).unwrap();
    read_manifests(&text, &ManifestOptions::default()).unwrap().pods
}

/// A checkpoint file of a fixture folder, shown under the kubelet's path.
fn file(folder: &str, name: &str) -> CheckpointFile {
    let content = match std::fs::read(testdata().join("kubelet-state").join(folder).join(name)) {
        Ok(bytes) => FileContent::Bytes(bytes),
        Err(_) => FileContent::Absent,
    };
    CheckpointFile {
        path: format!("/var/lib/kubelet/{name}"),
        content,
    }
}

/// Diagnoses `cpu` and `memory` on node 0023 (with the pod list when
/// `named`).
fn check(cpu: CheckpointFile, memory: CheckpointFile, named: bool) -> Diagnosis {
    let (mut node, kubelet) = node_0023(&[]);
    let pods = pods_0023();
    diagnose(Inputs {
        node: &mut node,
        kubelet: &kubelet,
        cpu_checkpoint: cpu,
        memory_checkpoint: memory,
        device_checkpoint: absent(),
        pod_resources: None,
        pods: named.then_some(pods.as_slice()),
        explain: &[],
    })
    .unwrap()
}

fn start_error(variant: &str, file: &str) -> String {
    let index: Value =
        serde_json::from_str(&std::fs::read_to_string(testdata().join("kubelet-state/index.json")).unwrap()).unwrap();
    index["corrupt"][variant]["kubeletStartError"][file]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn healthy_state_is_verified_mapped_and_restarts() {
    let diagnosis = check(
        file("0023", "cpu_manager_state"),
        file("0023", "memory_manager_state"),
        true,
    );
    assert_eq!(diagnosis.restart, Restart::Starts);
    assert_eq!(
        diagnosis.checkpoints[0].status,
        CheckpointStatus::Verified {
            policy: "static".into(),
            stored: 2_541_130_207,
            computed: 2_541_130_207,
        }
    );
    assert!(matches!(
        diagnosis.checkpoints[1].status,
        CheckpointStatus::Verified { .. }
    ));
    assert_eq!(diagnosis.default_cpu_set, "0-11,16-35,40-47");
    assert_eq!(diagnosis.cpu_assignments["default/train"]["app"], "12-15,36-39");
    assert!(diagnosis.unknown_uids.is_empty());
    let numa1 = &diagnosis.numa[1];
    assert_eq!(numa1.exclusive["default/train app"], "12-15,36-39");
    // Who holds the GPU is inferred once the state is restored.
    assert!(numa1.devices["nvidia.com/gpu"].values().any(|holder| holder.is_some()));
}

#[test]
fn absent_files_mean_empty_state() {
    let absent = |name: &str| CheckpointFile {
        path: format!("/var/lib/kubelet/{name}"),
        content: FileContent::Absent,
    };
    let diagnosis = check(absent("cpu_manager_state"), absent("memory_manager_state"), false);
    assert_eq!(diagnosis.restart, Restart::Starts);
    assert_eq!(diagnosis.checkpoints[0].status, CheckpointStatus::Absent);
    assert!(diagnosis.checkpoints[0].status.usable());
    assert!(diagnosis.cpu_assignments.is_empty());
    assert!(diagnosis.notes.iter().any(|n| n.contains("no pod list")));
}

#[test]
fn without_a_pod_list_the_uids_stand_for_the_pods() {
    let diagnosis = check(
        file("0023", "cpu_manager_state"),
        file("0023", "memory_manager_state"),
        false,
    );
    let uid = "00000000-0000-0000-0000-000000000001";
    assert_eq!(diagnosis.restart, Restart::Starts);
    assert_eq!(diagnosis.cpu_assignments[uid]["app"], "12-15,36-39");
    assert_eq!(diagnosis.unknown_uids, [uid]);
}

#[test]
fn a_changed_checksum_is_corrupt_with_the_kubelets_error() {
    let diagnosis = check(
        file("corrupt/checksum-digit", "cpu_manager_state"),
        file("corrupt/checksum-digit", "memory_manager_state"),
        true,
    );
    assert_eq!(
        diagnosis.checkpoints[0].status,
        CheckpointStatus::Corrupt {
            stored: 2_541_140_207,
            computed: 2_541_130_207,
            kubelet_error: start_error("checksum-digit", "cpu_manager_state"),
        }
    );
    assert_eq!(
        diagnosis.restart,
        Restart::Fails {
            error: start_error("checksum-digit", "cpu_manager_state")
        }
    );
    // Nothing restored: no device holders are claimed.
    assert!(diagnosis.numa.iter().all(|n| n.devices.is_empty()));
}

#[test]
fn an_edited_assignment_is_caught_by_the_checksum() {
    let diagnosis = check(
        file("corrupt/edited-cpuset", "cpu_manager_state"),
        file("0023", "memory_manager_state"),
        true,
    );
    assert!(matches!(
        diagnosis.checkpoints[0].status,
        CheckpointStatus::Corrupt { .. }
    ));
    assert!(diagnosis.checkpoints[1].status.usable());
    assert!(matches!(diagnosis.restart, Restart::Fails { .. }));
}

#[test]
fn a_cut_file_is_undecodable() {
    let diagnosis = check(
        file("corrupt/truncated", "cpu_manager_state"),
        file("corrupt/truncated", "memory_manager_state"),
        true,
    );
    assert_eq!(
        diagnosis.checkpoints[0].status,
        CheckpointStatus::Undecodable {
            problem: "cut short (76 bytes): unexpected end of JSON input".into(),
            kubelet_error: start_error("truncated", "cpu_manager_state"),
        }
    );
    assert_eq!(
        diagnosis.checkpoints[1].status.kubelet_error(),
        Some(start_error("truncated", "memory_manager_state").as_str())
    );
    assert!(matches!(diagnosis.restart, Restart::Fails { .. }));
}

#[test]
fn an_unreadable_file_fails_the_restart() {
    let diagnosis = check(
        CheckpointFile {
            path: "/var/lib/kubelet/cpu_manager_state".into(),
            content: FileContent::Unreadable("permission denied".into()),
        },
        file("0023", "memory_manager_state"),
        true,
    );
    assert_eq!(
        diagnosis.checkpoints[0].status,
        CheckpointStatus::Unreadable {
            error: "permission denied".into()
        }
    );
    assert_eq!(
        diagnosis.restart,
        Restart::Fails {
            error: "/var/lib/kubelet/cpu_manager_state: cannot be read: permission denied".into()
        }
    );
}

#[test]
fn a_checkpoint_of_another_policy_is_refused_and_nothing_is_explained() {
    let (mut node, kubelet) = node_0023(&[("cpuManagerPolicy", "none"), ("reservedSystemCPUs", "")]);
    let pods = pods_0023();
    let inputs = |node, explain| Inputs {
        node,
        kubelet: &kubelet,
        cpu_checkpoint: file("0023", "cpu_manager_state"),
        memory_checkpoint: file("0023", "memory_manager_state"),
        device_checkpoint: absent(),
        pod_resources: None,
        pods: Some(pods.as_slice()),
        explain,
    };
    let diagnosis = diagnose(inputs(&mut node, &[])).unwrap();
    let CheckpointStatus::Refused {
        policy, kubelet_error, ..
    } = &diagnosis.checkpoints[0].status
    else {
        panic!("{:?}", diagnosis.checkpoints[0].status);
    };
    assert_eq!(policy, "static");
    assert!(
        kubelet_error.contains("configured policy \"none\" differs from state checkpoint policy \"static\""),
        "{kubelet_error}"
    );
    assert_eq!(
        diagnosis.restart,
        Restart::Fails {
            error: kubelet_error.clone()
        }
    );
    let (mut fresh, _) = node_0023(&[("cpuManagerPolicy", "none"), ("reservedSystemCPUs", "")]);
    let error = diagnose(inputs(&mut fresh, &pods)).unwrap_err();
    assert!(matches!(error, DiagnoseError::CannotExplain(_)), "{error}");
}

#[test]
fn pods_are_explained_on_the_restored_node() {
    let (mut node, kubelet) = node_0023(&[]);
    let pods = pods_0023();
    let extra = read_manifests(
        "metadata: {name: extra, uid: extra-1}\nspec: {containers: [{name: c, resources: {limits: {cpu: '2', memory: 1Gi}}}]}",
        &ManifestOptions::default(),
    )
    .unwrap()
    .pods;
    let diagnosis = diagnose(Inputs {
        node: &mut node,
        kubelet: &kubelet,
        cpu_checkpoint: file("0023", "cpu_manager_state"),
        memory_checkpoint: file("0023", "memory_manager_state"),
        device_checkpoint: absent(),
        pod_resources: None,
        pods: Some(pods.as_slice()),
        explain: &extra,
    })
    .unwrap();
    assert_eq!(diagnosis.results.len(), 1);
    let report = &diagnosis.results[0];
    assert!(report.admitted, "{report:?}");
    assert!(report.explanation.is_some(), "explained even when admitted");
    assert_eq!(node.pods().len(), 2, "admitted beside the restored pod");
}

/// The JSON document keeps its flat records.
#[test]
fn the_document_has_flat_checkpoint_records() {
    let diagnosis = check(
        file("corrupt/checksum-digit", "cpu_manager_state"),
        file("0023", "memory_manager_state"),
        true,
    );
    let document = serde_json::to_value(&diagnosis).unwrap();
    let cpu = &document["checkpoints"][0];
    assert_eq!(cpu["present"], true);
    assert_eq!(cpu["ok"], false);
    assert_eq!(cpu["storedChecksum"], 2_541_140_207_u64);
    assert!(cpu["problem"].as_str().unwrap().starts_with("checksum mismatch"));
    assert_eq!(document["restart"]["ok"], false);
    assert_eq!(document["checkpoints"][1]["ok"], true);
}

fn absent() -> CheckpointFile {
    CheckpointFile {
        path: "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint".into(),
        content: FileContent::Absent,
    }
}

/// The device manager's checkpoint is read, not inferred: every layout of
/// `testdata/kubelet-state/layouts` diagnoses with the devices the kubelet
/// recorded; a damaged one falls back to inference, saying why.
#[test]
fn devices_come_from_the_device_checkpoint() {
    let dir = testdata().join("kubelet-state/layouts");
    let scenario = std::fs::read_to_string(dir.join("1.32/scenario.json")).unwrap();
    let machine = topoalign_scenario::Scenario::parse(&scenario)
        .unwrap()
        .topology
        .to_machine()
        .unwrap();
    let config = std::fs::read_to_string(dir.join("kubelet-config.yaml")).unwrap();
    let kubelet: Value = serde_yaml_ng::from_str(&config).unwrap();
    let text = std::fs::read_to_string(dir.join("pods.yaml")).unwrap();
    let pods = read_manifests(&text, &ManifestOptions::default()).unwrap().pods;
    let read = |release: &str, name: &str| CheckpointFile {
        path: name.to_owned(),
        content: FileContent::Bytes(std::fs::read(dir.join(release).join(name)).unwrap()),
    };
    for release in ["1.32", "1.36-pod-level", "1.37"] {
        for damaged in [false, true] {
            let mut node = topoalign_k8s::start_node(machine.clone(), &kubelet).unwrap();
            let mut devices = read(release, "device-plugins/kubelet_internal_checkpoint");
            if damaged && let FileContent::Bytes(bytes) = &mut devices.content {
                bytes.truncate(bytes.len() / 2);
            }
            let diagnosis = diagnose(Inputs {
                node: &mut node,
                kubelet: &kubelet,
                cpu_checkpoint: read(release, "cpu_manager_state"),
                memory_checkpoint: read(release, "memory_manager_state"),
                device_checkpoint: devices,
                pod_resources: None,
                pods: Some(&pods),
                explain: &[],
            })
            .unwrap();
            assert_eq!(diagnosis.restart, Restart::Starts, "{release}");
            let held = node.snapshot().devices;
            if damaged {
                assert!(
                    diagnosis
                        .notes
                        .iter()
                        .any(|n| n.contains("inferred") && n.contains("unexpected end of JSON input")),
                    "{:?}",
                    diagnosis.notes
                );
            } else {
                assert!(
                    diagnosis
                        .notes
                        .iter()
                        .any(|n| n.starts_with("device assignments read from"))
                );
                assert_eq!(
                    held["00000000-0000-0000-0000-000000000005"]["g"]["example.com/nic"],
                    ["nic1"]
                );
                assert_eq!(
                    held["00000000-0000-0000-0000-000000000003"]["db"]["example.com/nic"],
                    ["nic0"]
                );
            }
        }
    }
}

/// Pod-level assignments (`testdata/kubelet-state/layouts/*-pod-entries`,
/// the files v1.36.3 and v1.37.2 wrote): reported per pod, and the node
/// restored with them holds them.
#[test]
fn pod_level_assignments_are_reported_and_restored() {
    let bubble = "00000000-0000-0000-0000-000000000002";
    for release in ["1.36", "1.37"] {
        let dir = testdata().join(format!("kubelet-state/layouts/{release}-pod-entries"));
        let scenario =
            topoalign_scenario::Scenario::parse(&std::fs::read_to_string(dir.join("scenario.json")).unwrap()).unwrap();
        let mut node = topoalign_k8s::start_node(scenario.topology.to_machine().unwrap(), &scenario.kubelet).unwrap();
        let read = |name: &str| CheckpointFile {
            path: format!("/var/lib/kubelet/{name}"),
            content: FileContent::Bytes(std::fs::read(dir.join(name)).unwrap()),
        };
        let diagnosis = diagnose(Inputs {
            node: &mut node,
            kubelet: &scenario.kubelet,
            cpu_checkpoint: read("cpu_manager_state"),
            memory_checkpoint: read("memory_manager_state"),
            device_checkpoint: read("device-plugins/kubelet_internal_checkpoint"),
            pod_resources: None,
            pods: None,
            explain: &[],
        })
        .unwrap();
        assert_eq!(diagnosis.restart, Restart::Starts, "{release}");
        assert_eq!(diagnosis.pod_cpu_assignments[bubble], "4-5,12-13", "{release}");
        assert_eq!(diagnosis.pod_memory_assignments[bubble], [1], "{release}");
        let document = serde_json::to_value(&diagnosis).unwrap();
        assert_eq!(document["podCpuAssignments"][bubble], "4-5,12-13", "{release}");
        let held = node.snapshot();
        assert_eq!(held.cpu.pod_assignments[bubble].to_string(), "4-5,12-13", "{release}");
        assert_eq!(held.memory.unwrap().pod_assignments[bubble].len(), 2, "{release}");
    }
}

/// The PodResources API's allocatable resources against node 0023's
/// machine and kubelet configuration (CPUs 0 and 24 reserved, one GPU):
/// the kubelet's own answer is silent; a kubelet serving its reserved
/// CPUs as allocatable, or missing the GPU, is reported with what differs
/// (the check the follower makes, `topoalign_podresources::
/// allocatable_differences`).
#[test]
fn allocatable_resources_that_are_not_the_nodes_are_reported() {
    let diagnose_with = |allocatable: Allocatable| {
        let (mut node, kubelet) = node_0023(&[]);
        diagnose(Inputs {
            node: &mut node,
            kubelet: &kubelet,
            cpu_checkpoint: absent(),
            memory_checkpoint: absent(),
            device_checkpoint: absent(),
            pod_resources: Some(PodResourcesAnswer {
                socket: "/var/lib/kubelet/pod-resources/kubelet.sock".to_owned(),
                pods: Vec::new(),
                allocatable: Some(allocatable),
            }),
            pods: None,
            explain: &[],
        })
        .unwrap()
        .allocatable_disagreements
    };
    let (node, _) = node_0023(&[]);
    let right = allocatable_of(&node);
    assert_eq!(right.cpus.to_string(), "1-23,25-47");
    assert_eq!(right.devices["nvidia.com/gpu"].len(), 1);
    assert!(!right.memory.is_empty());
    assert_eq!(diagnose_with(right.clone()), []);

    let mut reserved_served = right.clone();
    reserved_served.cpus = node.machine().cpu_set();
    let found = diagnose_with(reserved_served);
    assert_eq!(
        found,
        [AllocatableDisagreement {
            field: "cpu_ids",
            what: "CPUs 0,24 are served but are not allocatable here (reserved, or not on this machine)".to_owned(),
        }]
    );
    assert!(
        found[0]
            .to_string()
            .starts_with("GetAllocatableResources cpu_ids: CPUs 0,24 are served")
    );

    let mut no_gpu = right;
    no_gpu.devices.clear();
    assert_eq!(
        diagnose_with(no_gpu),
        [AllocatableDisagreement {
            field: "devices",
            what: "nvidia.com/gpu devices gpu0 are on this node's device list but not served (unhealthy, or not \
                   registered)"
                .to_owned(),
        }]
    );
}

/// Two NUMA nodes with ids `ids` (CPUs 0-3 and 4-7, 4Gi each), read as
/// the node files are: ids past 63 kept as labels.
fn two_node_machine(ids: [usize; 2]) -> topoalign_model::Machine {
    let cpus: Vec<Value> = (0..8)
        .map(|cpu| serde_json::json!({"id": cpu, "core": cpu, "socket": cpu / 4, "numa": ids[cpu / 4]}))
        .collect();
    let scenario = serde_json::json!({
        "topology": {"numaNodes": [{"id": ids[0], "memory": "4Gi"}, {"id": ids[1], "memory": "4Gi"}], "cpus": cpus},
        "kubelet": {},
        "events": [],
    });
    topoalign_scenario::Scenario::parse(&scenario.to_string())
        .unwrap()
        .topology
        .to_machine_with_numa_labels()
        .unwrap()
}

/// The kubelet's `memory_manager_state` keys NUMA nodes by their ids (64,
/// not the engine's index 1): diagnose reads it on a machine with NUMA
/// ids past 63 as on the machine renumbered, shows the machine's ids, and
/// warns that only topology policy none runs. A checkpoint naming NUMA
/// nodes the machine does not have is refused, as the kubelet refuses it.
#[test]
fn numa_ids_past_63_are_read_from_the_checkpoints_and_shown_as_the_machines() {
    use topoalign_k8s::checkpoint::{CpuCheckpoint, MemoryCheckpoint};
    let kubelet = |ids: [usize; 2]| {
        serde_json::json!({
            "kubeletVersion": "1.32",
            "cpuManagerPolicy": "static",
            "reservedSystemCPUs": "0",
            "memoryManagerPolicy": "Static",
            "reservedMemory": ids.map(|id| serde_json::json!({"numaNode": id, "limits": {"memory": "50Mi"}})),
            "topologyManagerPolicy": "none",
        })
    };
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: b, namespace: default, uid: uid-b}\nspec:\n  containers:\n  \
                - name: app\n    image: pause\n    resources: {requests: {cpu: 500m, memory: 1Gi}}\n";
    let pods = read_manifests(text, &ManifestOptions::default()).unwrap().pods;
    let explained = read_manifests(
        &text.replace(" b,", " c,").replace("uid-b", "uid-c"),
        &ManifestOptions::default(),
    )
    .unwrap()
    .pods;
    // The state a kubelet of the renumbered machine writes, and the same
    // state with the machine's ids, as the kubelet of {0, 64} writes it.
    let mut renumbered = topoalign_k8s::start_node(two_node_machine([0, 1]), &kubelet([0, 1])).unwrap();
    assert!(renumbered.admit(pods[0].pod.clone()).admitted());
    let snapshot = renumbered.snapshot();
    let state = snapshot.memory.clone().unwrap();
    assert_eq!(state.machine_state.keys().copied().collect::<Vec<_>>(), [0, 1]);
    let mut labelled_state = state.clone();
    labelled_state.machine_state = state
        .machine_state
        .iter()
        .map(|(&id, numa)| {
            let mut numa = numa.clone();
            numa.cells = numa.cells.iter().map(|&c| [0, 64][c]).collect();
            ([0, 64][id], numa)
        })
        .collect();
    let bytes = |name: &str, content: Vec<u8>| CheckpointFile {
        path: format!("/var/lib/kubelet/{name}"),
        content: FileContent::Bytes(content),
    };
    let cpu = CpuCheckpoint::of_state("static", &snapshot.cpu, 1).to_bytes().unwrap();
    let run = |ids: [usize; 2], memory: &topoalign_engine::MemoryManagerState| {
        let kubelet = kubelet(ids);
        let mut node = topoalign_k8s::start_node(two_node_machine(ids), &kubelet).unwrap();
        let memory = MemoryCheckpoint::of_state("Static", memory, 1).to_bytes().unwrap();
        diagnose(Inputs {
            node: &mut node,
            kubelet: &kubelet,
            cpu_checkpoint: bytes("cpu_manager_state", cpu.clone()),
            memory_checkpoint: bytes("memory_manager_state", memory),
            device_checkpoint: absent(),
            pod_resources: None,
            pods: Some(&pods),
            explain: &explained,
        })
    };
    let expected = run([0, 1], &state).unwrap();
    let got = run([0, 64], &labelled_state).unwrap();
    assert_eq!(expected.restart, Restart::Starts);
    assert_eq!(got.restart, Restart::Starts);
    assert_eq!(got.numa.iter().map(|n| n.node).collect::<Vec<_>>(), [0, 64]);
    for (got, expected) in got.numa.iter().zip(&expected.numa) {
        assert!(!got.memory.is_empty());
        assert_eq!(
            NumaAllocation {
                node: expected.node,
                ..got.clone()
            },
            *expected
        );
    }
    let warning = got.notes.iter().find(|n| n.contains("NUMA node id 64")).unwrap();
    assert!(warning.contains("topologyManagerPolicy none only") && warning.contains("Guaranteed"));
    assert_eq!(
        got.notes
            .iter()
            .filter(|n| !n.contains("NUMA node id 64"))
            .collect::<Vec<_>>(),
        expected.notes.iter().collect::<Vec<_>>()
    );
    assert_eq!(got.results.len(), 1);
    assert_eq!(got.results[0].admitted, expected.results[0].admitted);
    // The renumbered ids are not the machine's: the kubelet's machine
    // state differs from the one it computes, and it does not start.
    match run([0, 64], &state) {
        Err(DiagnoseError::CannotExplain(error)) => {
            assert!(error.contains("the expected machine state is different"), "{error}");
        }
        other => panic!("{other:?}"),
    }
}

/// The PodResources API names NUMA nodes by the machine's ids (64, not the
/// engine's index 1): on a machine {0, 64} the kubelet's allocatable
/// memory on NUMA 64 is the engine's node 1 and agrees, as the renumbered
/// machine {0, 1}'s answer agrees there; an answer naming NUMA 1 does not.
#[test]
fn allocatable_memory_on_numa_64_is_the_engines_node_1() {
    let kubelet = |ids: [usize; 2]| {
        serde_json::json!({
            "kubeletVersion": "1.32",
            "cpuManagerPolicy": "static",
            "reservedSystemCPUs": "0",
            "memoryManagerPolicy": "Static",
            "reservedMemory": ids.map(|id| serde_json::json!({"numaNode": id, "limits": {"memory": "50Mi"}})),
            "topologyManagerPolicy": "none",
        })
    };
    let run = |ids: [usize; 2], allocatable: Allocatable| {
        let kubelet = kubelet(ids);
        let mut node = topoalign_k8s::start_node(two_node_machine(ids), &kubelet).unwrap();
        diagnose(Inputs {
            node: &mut node,
            kubelet: &kubelet,
            cpu_checkpoint: absent(),
            memory_checkpoint: absent(),
            device_checkpoint: absent(),
            pod_resources: Some(PodResourcesAnswer {
                socket: "/var/lib/kubelet/pod-resources/kubelet.sock".to_owned(),
                pods: Vec::new(),
                allocatable: Some(allocatable),
            }),
            pods: None,
            explain: &[],
        })
        .unwrap()
        .allocatable_disagreements
    };
    // The renumbered machine's answer, and the same with the machine's
    // ids, as the kubelet of {0, 64} serves it.
    let renumbered = allocatable_of(&topoalign_k8s::start_node(two_node_machine([0, 1]), &kubelet([0, 1])).unwrap());
    assert!(renumbered.memory.iter().any(|b| b.numa == [1]));
    let mut labelled = renumbered.clone();
    for block in &mut labelled.memory {
        block.numa = block.numa.iter().map(|&n| [0, 64][n]).collect();
    }
    assert_eq!(run([0, 1], renumbered.clone()), []);
    assert_eq!(run([0, 64], labelled), run([0, 1], renumbered.clone()));
    // The engine's index served as the kubelet's id is a disagreement
    // naming both.
    let found = run([0, 64], renumbered);
    assert!(!found.is_empty());
    assert!(found.iter().all(|d| d.field == "memory"), "{found:?}");
    assert!(found.iter().any(|d| d.what.contains("on NUMA 1:")), "{found:?}");
    assert!(found.iter().any(|d| d.what.contains("on NUMA 64:")), "{found:?}");
}

/// A layout folder of a machine of 72 NUMA nodes
/// (`testdata/kubelet-state/layouts/<release>-numa-nodes-72-<name>`): its
/// scenario, the oracle's result, its pod list and a file of it (or of its
/// `at-restart/`), absent when the kubelet wrote none.
struct Wide {
    dir: PathBuf,
    scenario: topoalign_scenario::Scenario,
    result: Value,
    pods: Vec<ManifestPod>,
}

impl Wide {
    fn new(release: &str, name: &str) -> Wide {
        let dir = testdata().join(format!("kubelet-state/layouts/{release}-numa-nodes-72-{name}"));
        let scenario =
            topoalign_scenario::Scenario::parse(&std::fs::read_to_string(dir.join("scenario.json")).unwrap()).unwrap();
        let result = serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).unwrap()).unwrap();
        let text = std::fs::read_to_string(dir.join("pods.yaml")).unwrap();
        let pods = read_manifests(&text, &ManifestOptions::default()).unwrap().pods;
        Wide {
            dir,
            scenario,
            result,
            pods,
        }
    }

    fn file(&self, name: &str) -> CheckpointFile {
        let content = match std::fs::read(self.dir.join(name)) {
            Ok(bytes) => FileContent::Bytes(bytes),
            Err(_) => FileContent::Absent,
        };
        CheckpointFile {
            path: format!("/var/lib/kubelet/{}", name.trim_start_matches("at-restart/")),
            content,
        }
    }

    fn node(&self) -> Node {
        let machine = self.scenario.topology.to_machine_with_numa_labels().unwrap();
        assert!(!machine.fits_numa_masks());
        topoalign_k8s::start_node(machine, &self.scenario.kubelet).unwrap()
    }

    /// The scenario's pods, as pods to explain (their own names).
    fn added(&self) -> Vec<ManifestPod> {
        let mut pods = Vec::new();
        for event in &self.scenario.events {
            if let Some(manifest) = &event.add {
                let mut read = read_manifests(&manifest.to_string(), &ManifestOptions::default()).unwrap();
                pods.append(&mut read.pods);
            }
        }
        pods
    }

    fn diagnose(&self, node: &mut Node, folder: &str, pods: &[ManifestPod], explain: &[ManifestPod]) -> Diagnosis {
        diagnose(Inputs {
            node,
            kubelet: &self.scenario.kubelet,
            cpu_checkpoint: self.file(&format!("{folder}cpu_manager_state")),
            memory_checkpoint: self.file(&format!("{folder}memory_manager_state")),
            device_checkpoint: self.file(&format!("{folder}device-plugins/kubelet_internal_checkpoint")),
            pod_resources: None,
            pods: Some(pods),
            explain,
        })
        .unwrap()
    }
}

/// The files v1.32.10 and v1.37.2 wrote on a machine of 72 NUMA nodes
/// (ids 0-71, more than the kubelet's masks hold; topology policy `none`):
/// diagnose restarts on them as the kubelet did, its map is the kubelet's
/// final state (the oracle's `result.json`), every node is shown by its own
/// id with its memory table and devices (holders from the device
/// checkpoint, on nodes past 63 too), the warning says only policy `none`
/// runs, and the scenario's pods are explained without a panic — a
/// Guaranteed pod reaching the Static memory manager is the kubelet's
/// crash.
#[test]
fn a_machine_of_72_numa_nodes_diagnoses_as_its_kubelet_restarts() {
    use topoalign_k8s::checkpoint::DeviceCheckpoint;
    for release in ["1.32", "1.37"] {
        for name in ["memory-none", "static-memory"] {
            let what = format!("{release} {name}");
            let wide = Wide::new(release, name);
            // The scenario's pods, and a Guaranteed pod with exclusive CPUs
            // and memory that the CPU manager can place.
            let mut explain = wide.added();
            let guaranteed = "apiVersion: v1\nkind: Pod\nmetadata: {name: g-small, namespace: default}\nspec:\n  \
                              containers:\n  - name: app\n    image: pause\n    resources: {limits: {cpu: '1', memory: \
                              1Gi}}\n";
            explain.extend(read_manifests(guaranteed, &ManifestOptions::default()).unwrap().pods);
            let mut node = wide.node();
            let diagnosis = wide.diagnose(&mut node, "", &wide.pods, &explain);
            assert_eq!(diagnosis.restart, Restart::Starts, "{what}");
            assert!(diagnosis.checkpoints.iter().all(|c| c.status.usable()), "{what}");
            let last = &wide.result["final"];
            assert_eq!(diagnosis.default_cpu_set, last["defaultCpuSet"], "{what}");
            assert_eq!(
                serde_json::to_value(&diagnosis.cpu_assignments).unwrap(),
                last["cpuAssignments"],
                "{what}"
            );
            assert_eq!(
                serde_json::to_value(&diagnosis.memory_assignments).unwrap(),
                last["memoryAssignments"],
                "{what}"
            );
            assert!(
                diagnosis.unknown_uids.is_empty() && diagnosis.stale.is_empty(),
                "{what}"
            );
            assert_eq!(
                diagnosis.numa.iter().map(|n| n.node).collect::<Vec<_>>(),
                (0..72).collect::<Vec<_>>(),
                "{what}"
            );
            let static_memory = name == "static-memory";
            for numa in &diagnosis.numa {
                assert_eq!(
                    numa.memory.contains_key("memory"),
                    static_memory,
                    "{what}: NUMA {}",
                    numa.node
                );
            }
            // Every device the kubelet recorded is shown held, on its node.
            let recorded = DeviceCheckpoint::parse(
                &std::fs::read(wide.dir.join("device-plugins/kubelet_internal_checkpoint")).unwrap(),
            )
            .unwrap();
            let keys: BTreeMap<&str, String> = wide.pods.iter().map(|p| (p.pod.uid.as_str(), p.pod.key())).collect();
            let mut held = 0;
            for entry in recorded.entries.iter().flatten() {
                for (numa, ids) in entry.device_ids.iter().flatten() {
                    for id in ids.iter().flatten() {
                        let Ok(numa) = usize::try_from(*numa) else {
                            continue;
                        };
                        let holder = &diagnosis.numa[numa].devices[&entry.resource][id];
                        let expected = format!("{} {}", keys[entry.pod_uid.as_str()], entry.container);
                        assert_eq!(holder.as_deref(), Some(expected.as_str()), "{what}: {id}");
                        held += 1;
                    }
                }
            }
            assert!(held > 0, "{what}");
            let gpu70 = &diagnosis.numa[70].devices["example.com/gpu"]["gpu70"];
            assert!(gpu70.is_none(), "{what}: gpu70 is free");
            assert!(
                diagnosis
                    .notes
                    .iter()
                    .any(|n| n.contains("NUMA node id 64") && n.contains("topologyManagerPolicy none only")),
                "{what}: {:?}",
                diagnosis.notes
            );
            // The scenario's pods explained on the node as it stands: the
            // kubelet's crash for a Guaranteed pod the Static memory
            // manager pins, never a made-up answer.
            // (A pod the CPU or device manager refuses, as the kubelet
            // refused it at its event, never reaches the memory manager.)
            assert_eq!(diagnosis.results.len(), explain.len(), "{what}");
            let results = wide.result["results"].as_array().unwrap();
            for (report, pod) in diagnosis.results.iter().zip(&explain) {
                let refused_before = results
                    .iter()
                    .find(|r| r["pod"] == pod.pod.key().as_str() && r["admitted"] == false)
                    .map(|r| r["reason"].clone());
                let pinned = static_memory && pod.pod.qos == topoalign_model::QosClass::Guaranteed;
                match refused_before {
                    Some(reason) => {
                        assert!(
                            !report.admitted && report.kubelet_panic.is_none(),
                            "{what}: {}",
                            report.pod
                        );
                        assert_eq!(report.reason.as_deref(), reason.as_str(), "{what}: {}", report.pod);
                    }
                    None if pinned => {
                        assert!(
                            !report.admitted && report.kubelet_panic.is_some(),
                            "{what}: {}",
                            report.pod
                        );
                    }
                    None => assert!(report.kubelet_panic.is_none(), "{what}: {}", report.pod),
                }
            }
            assert!(
                !static_memory || diagnosis.results.iter().any(|r| r.kubelet_panic.is_some()),
                "{what}: a Guaranteed pod pinned by the Static memory manager"
            );

            // The files the restarting kubelet read, with the pods running
            // then: a restart too.
            let restart = wide.scenario.events.iter().position(|e| e.restart.is_some()).unwrap();
            let running: Vec<&str> = wide.result["results"][restart]["pods"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["pod"].as_str().unwrap())
                .collect();
            let mut at_restart: Vec<ManifestPod> = Vec::new();
            let mut k = 0;
            for (i, event) in wide.scenario.events[..restart].iter().enumerate() {
                let Some(manifest) = &event.add else { continue };
                k += 1;
                let key = format!("default/{}", manifest["metadata"]["name"].as_str().unwrap());
                if running.contains(&key.as_str()) && wide.result["results"][i]["admitted"] == true {
                    let mut manifest = manifest.clone();
                    manifest["metadata"]["uid"] = format!("00000000-0000-0000-0000-{k:012}").into();
                    let read = read_manifests(&manifest.to_string(), &ManifestOptions::default()).unwrap();
                    at_restart.extend(read.pods);
                }
            }
            assert_eq!(at_restart.len(), running.len(), "{what}");
            let mut node = wide.node();
            let diagnosis = wide.diagnose(&mut node, "at-restart/", &at_restart, &[]);
            assert_eq!(diagnosis.restart, Restart::Starts, "{what} at the restart");
            assert!(
                diagnosis.unknown_uids.is_empty() && diagnosis.stale.is_empty(),
                "{what}"
            );
        }
    }
}
