//! `topoalign diagnose` on the kubelet's own checkpoint files
//! (`testdata/kubelet-state/`): every folder reproduces the allocation map of
//! its scenario's expected `final` state, with checksums verified the
//! kubelet's way; every corrupt variant is reported with the kubelet's own
//! error.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn testdata() -> PathBuf {
    repo().join("testdata")
}

fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn diagnose(dir: &Path, scenario: &str, extra: &[&str]) -> (i32, Value) {
    let output = Command::cargo_bin("topoalign")
        .expect("binary")
        .arg("diagnose")
        .arg("--kubelet-dir")
        .arg(dir)
        .arg("--node")
        .arg(testdata().join(format!("conformance/1.32/scenarios/{scenario}.json")))
        .args(extra)
        .args(["-o", "json"])
        .output()
        .expect("runs");
    let document = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|e| panic!("{}: {e}: {}", dir.display(), String::from_utf8_lossy(&output.stderr)));
    (output.status.code().unwrap_or(-1), document)
}

fn folders() -> Vec<String> {
    let index = read_json(&testdata().join("kubelet-state/index.json"));
    let folders: Vec<String> = index["fixtures"]
        .as_object()
        .expect("fixtures")
        .keys()
        .cloned()
        .collect();
    assert!(folders.len() >= 13, "the shared folders are all there");
    folders
}

#[test]
fn every_folder_reproduces_the_expected_final_state() {
    let index = read_json(&testdata().join("kubelet-state/index.json"));
    for folder in folders() {
        let dir = testdata().join("kubelet-state").join(&folder);
        let fixture = &index["fixtures"][&folder];
        let scenario = fixture["scenario"].as_str().expect("scenario");
        let (status, doc) = diagnose(&dir, scenario, &[]);
        assert_eq!(status, 0, "{folder}: {doc}");
        assert_eq!(doc["restart"]["ok"], true, "{folder}: {}", doc["restart"]);
        let expected = read_json(&testdata().join(format!("conformance/1.32/expected/{scenario}.json")));
        let expected = &expected["final"];
        for field in ["defaultCpuSet", "cpuAssignments", "memoryAssignments"] {
            assert_eq!(doc[field], expected[field], "{folder}: {field}");
        }
        assert_eq!(doc["unknownUids"], serde_json::json!([]), "{folder}");
        // Checksums verified the kubelet's way, equal to what it wrote.
        let checkpoints = doc["checkpoints"].as_array().expect("checkpoints");
        assert_eq!(checkpoints[0]["storedChecksum"], fixture["cpuChecksum"], "{folder}");
        assert_eq!(checkpoints[0]["computedChecksum"], fixture["cpuChecksum"], "{folder}");
        if fixture["memoryChecksum"].is_number() {
            assert_eq!(
                checkpoints[1]["computedChecksum"], fixture["memoryChecksum"],
                "{folder}"
            );
        } else {
            assert_eq!(checkpoints[1]["present"], false, "{folder}");
        }
    }
}

/// Without a pod list the state's UIDs stand for the pods, and the map is
/// the same (keyed by UID).
#[test]
fn without_pods_the_uids_name_the_pods() {
    let dir = testdata().join("kubelet-state/0023");
    let empty = std::env::temp_dir().join("topoalign-diagnose-no-pods");
    std::fs::create_dir_all(&empty).expect("temp dir");
    for file in ["cpu_manager_state", "memory_manager_state", "kubelet-config.yaml"] {
        std::fs::copy(dir.join(file), empty.join(file)).expect("copy");
    }
    let (status, doc) = diagnose(&empty, "0023", &[]);
    assert_eq!(status, 0, "{doc}");
    assert_eq!(
        doc["cpuAssignments"]["00000000-0000-0000-0000-000000000001"]["app"],
        "12-15,36-39"
    );
    assert_eq!(doc["unknownUids"][0], "00000000-0000-0000-0000-000000000001");
}

#[test]
fn corrupt_checkpoints_get_the_kubelets_own_errors() {
    let index = read_json(&testdata().join("kubelet-state/index.json"));
    let base = testdata().join("kubelet-state/0023");
    let variants = index["corrupt"].as_object().expect("corrupt variants");
    assert!(variants.len() >= 3);
    for (variant, info) in variants {
        let dir = testdata().join("kubelet-state/corrupt").join(variant);
        let (status, doc) = diagnose(
            &dir,
            "0023",
            &[
                "--kubelet-config",
                &base.join("kubelet-config.yaml").display().to_string(),
                "--pods",
                &base.join("pods.yaml").display().to_string(),
            ],
        );
        assert_eq!(status, 2, "{variant}: state the kubelet refuses is not healthy");
        assert_eq!(doc["restart"]["ok"], false, "{variant}");
        for report in doc["checkpoints"].as_array().expect("checkpoints") {
            let file = Path::new(report["file"].as_str().expect("file"))
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            match info["kubeletStartError"].get(&file) {
                Some(expected) => {
                    let expected = expected
                        .as_str()
                        .expect("text")
                        .replace("/var/lib/kubelet", &dir.display().to_string());
                    assert_eq!(report["ok"], false, "{variant} {file}");
                    assert_eq!(report["kubeletError"], expected.as_str(), "{variant} {file}");
                    assert!(report["problem"].is_string(), "{variant} {file}: says what is wrong");
                }
                None => assert_eq!(report["present"], false, "{variant} {file}"),
            }
        }
    }
}

/// Issue #32: a FIFO where a checkpoint should be hung `diagnose` (opening
/// it waits for a writer). It now ends at once: the file is reported
/// unreadable with what it is, and the kubelet would not restart on it
/// (exit 2). A FIFO where `config.yaml` should be is a clear error too.
/// (If this regresses, the test hangs.)
#[test]
fn a_fifo_where_a_checkpoint_should_be_ends_with_a_clear_error() {
    let base = testdata().join("kubelet-state/0023");
    let copy = tempfile::tempdir().expect("tempdir");
    for name in ["memory_manager_state", "kubelet-config.yaml", "pods.yaml"] {
        std::fs::copy(base.join(name), copy.path().join(name)).expect("copy");
    }
    let fifo = copy.path().join("cpu_manager_state");
    let mkfifo = |path: &Path| {
        let status = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .expect("mkfifo runs");
        assert!(status.success(), "mkfifo {}", path.display());
    };
    mkfifo(&fifo);
    let (status, doc) = diagnose(copy.path(), "0023", &[]);
    assert_eq!(status, 2);
    assert_eq!(doc["restart"]["ok"], false);
    assert_eq!(doc["checkpoints"][0]["ok"], false);
    assert_eq!(
        doc["checkpoints"][0]["problem"],
        "cannot be read: a FIFO (named pipe), not a regular file"
    );
    assert!(
        doc["restart"]["error"]
            .as_str()
            .expect("error")
            .starts_with(&format!("{}: cannot be read: a FIFO", fifo.display())),
        "{doc}"
    );

    let config = copy.path().join("config.yaml");
    mkfifo(&config);
    let output = Command::cargo_bin("topoalign")
        .expect("binary")
        .arg("diagnose")
        .arg("--kubelet-dir")
        .arg(copy.path())
        .arg("--node")
        .arg(testdata().join("conformance/1.32/scenarios/0023.json"))
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains(&format!(
            "{}: a FIFO (named pipe), not a regular file",
            config.display()
        )),
        "{stderr}"
    );
}

/// What the kubelet of `kubelet-state/0023` serves on its PodResources API
/// (the checkpoints' CPUs and memory), its container also holding a GPU
/// from DRA (`dynamic_resources`; no checkpoint records those).
fn answer_with_dra_devices() -> topoalign_podresources::Snapshot {
    use topoalign_podresources::{ContainerAllocation, DynamicDevice, MemoryBlock, PodAllocation};
    topoalign_podresources::Snapshot {
        pods: vec![PodAllocation {
            namespace: "default".to_owned(),
            name: "train".to_owned(),
            containers: vec![ContainerAllocation {
                name: "app".to_owned(),
                cpus: topoalign_model::CpuSet::parse("12-15,36-39").expect("CPUs"),
                memory: vec![MemoryBlock {
                    resource: "memory".to_owned(),
                    size: 17_179_869_184,
                    numa: vec![1],
                }],
                devices: Default::default(),
                dynamic: vec![DynamicDevice {
                    claim_namespace: "default".to_owned(),
                    claim_name: "train-gpu".to_owned(),
                    driver: "gpu.example.com".to_owned(),
                    pool: "node-0".to_owned(),
                    device: "gpu-1".to_owned(),
                }],
            }],
        }],
        allocatable: topoalign_podresources::Allocatable::default(),
    }
}

/// Each container's DRA devices, as the PodResources API serves them (a
/// real server speaking the kubelet's proto on a Unix socket), in the
/// document (`draDevices`) and the text.
#[test]
fn dra_devices_are_shown_per_container() {
    let dir = testdata().join("kubelet-state/0023");
    let sockets = tempfile::tempdir().expect("temp dir");
    let socket = sockets.path().join("kubelet.sock");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let listener = {
        let _entered = runtime.enter();
        tokio::net::UnixListener::bind(&socket).expect("bind")
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = runtime.spawn(topoalign_podresources::serve(
        listener,
        answer_with_dra_devices,
        async {
            let _ = stopped.await;
        },
    ));
    let socket_arg = socket.to_str().expect("UTF-8 path");
    let (_, doc) = diagnose(&dir, "0023", &["--pod-resources", socket_arg]);
    assert_eq!(doc["disagreements"], serde_json::json!([]), "{doc}");
    assert_eq!(
        doc["draDevices"],
        serde_json::json!([{"pod": "default/train", "container": "app", "devices": [
            {"claim": "default/train-gpu", "driver": "gpu.example.com", "pool": "node-0", "device": "gpu-1"}]}])
    );
    let yaml = Command::cargo_bin("topoalign")
        .expect("binary")
        .arg("diagnose")
        .arg("--kubelet-dir")
        .arg(&dir)
        .arg("--node")
        .arg(testdata().join("conformance/1.32/scenarios/0023.json"))
        .args(["--pod-resources", socket_arg, "-o", "yaml"])
        .output()
        .expect("runs");
    let yaml = String::from_utf8_lossy(&yaml.stdout);
    assert!(yaml.contains("draDevices:") && yaml.contains("device: gpu-1"), "{yaml}");
    let text = Command::cargo_bin("topoalign")
        .expect("binary")
        .arg("diagnose")
        .arg("--kubelet-dir")
        .arg(&dir)
        .arg("--node")
        .arg(testdata().join("conformance/1.32/scenarios/0023.json"))
        .args(["--pod-resources", socket_arg])
        .output()
        .expect("runs");
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("DRA devices (PodResources dynamic_resources):\n  default/train container app: gpu.example.com/node-0/gpu-1 (claim default/train-gpu)\n"),
        "{text}"
    );
    let _ = stop.send(());
    runtime.block_on(server).expect("joined").expect("served");
}
