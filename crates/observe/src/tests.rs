//! [`observe`] and [`KubeletDir`] on the checkpoint files real kubelets
//! wrote (`testdata/kubelet-state/layouts`: v1.32.10, v1.36.3 and v1.37.2,
//! from the oracle).

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use topoalign_engine::Node;
use topoalign_model::KubeletVersion;

use crate::test_support::{layouts, layouts_node, layouts_pods};
use crate::*;

/// The layouts' node as the kubelet of `version` runs it (`gates`:
/// `featureGates` entries laid over the configuration).
fn node(version: KubeletVersion, gates: &[&str]) -> Node {
    let overrides = topoalign_intake::Overrides {
        kubelet_version: Some(version),
        feature_gates: gates.iter().map(|g| (*g).to_owned()).collect(),
        ..Default::default()
    };
    layouts_node(&overrides).unwrap()
}

fn pods() -> Vec<ListedPod> {
    layouts_pods()
        .unwrap()
        .into_iter()
        .map(|pod| ListedPod {
            pod,
            finished: false,
            created: None,
        })
        .collect()
}

fn files(release: &str) -> CheckpointFiles {
    KubeletDir::new(layouts().join(release), None).read_checkpoints()
}

fn observed(node: &Node, files: &CheckpointFiles, pods: Option<&[ListedPod]>) -> Observed {
    observe(
        node,
        Inputs {
            files,
            pod_resources: None,
            pods,
        },
    )
}

/// The CPU checkpoint's JSON with `edit` applied, written back as bytes.
fn edited(file: &CheckpointFile, edit: impl Fn(&mut serde_json::Value)) -> CheckpointFile {
    let mut value: serde_json::Value = serde_json::from_slice(file.content.bytes().unwrap()).unwrap();
    edit(&mut value);
    CheckpointFile {
        path: file.path.clone(),
        content: FileContent::Bytes(serde_json::to_vec(&value).unwrap()),
    }
}

fn verified(report: &CheckpointReport) -> bool {
    matches!(report.status, CheckpointStatus::Verified { .. })
}

/// Issue #32 part 6: v1.37's files carry the older layout beside `data`.
/// A kubelet before v1.37 reads only the older fields, v1.37 only `data`:
/// where the two disagree, each release's outcome is its own.
#[test]
fn each_release_reads_the_layers_it_knows() {
    let pods = pods();
    let v1_37 = files("1.37");
    // Both layers intact: every release restarts on the same state.
    let mut states = Vec::new();
    for version in [KubeletVersion::V1_32, KubeletVersion::V1_36, KubeletVersion::V1_37] {
        let seen = observed(&node(version, &[]), &v1_37, Some(&pods));
        assert_eq!(seen.restart, Restart::Starts, "{version:?}");
        states.push(seen.node.unwrap().snapshot());
    }
    assert_eq!(states[0], states[1]);
    assert_eq!(states[1], states[2]);

    // The older fields changed after the kubelet wrote them, `data` intact:
    // v1.37 does not read them; older releases find the checksum wrong.
    let mut stale_legacy = v1_37.clone();
    stale_legacy.cpu = edited(&v1_37.cpu, |v| v["defaultCpuSet"] = "0-15".into());
    let seen = observed(&node(KubeletVersion::V1_37, &[]), &stale_legacy, Some(&pods));
    assert!(verified(&seen.cpu), "{:?}", seen.cpu);
    assert_eq!(seen.restart, Restart::Starts);
    for version in [KubeletVersion::V1_32, KubeletVersion::V1_35, KubeletVersion::V1_36] {
        let seen = observed(&node(version, &[]), &stale_legacy, Some(&pods));
        assert!(
            matches!(seen.cpu.status, CheckpointStatus::Corrupt { .. }),
            "{version:?}: {:?}",
            seen.cpu
        );
        assert!(matches!(seen.restart, Restart::Fails { .. }), "{version:?}");
    }

    // `data` damaged, the older fields intact: v1.37 refuses the file (a
    // set data checksum that does not match is never a fallback), older
    // releases never look at `data`.
    let mut bad_data = v1_37.clone();
    bad_data.cpu = edited(&v1_37.cpu, |v| {
        v["dataChecksum"] = (v["dataChecksum"].as_u64().unwrap() + 1).into();
    });
    let seen = observed(&node(KubeletVersion::V1_37, &[]), &bad_data, Some(&pods));
    assert!(
        matches!(seen.cpu.status, CheckpointStatus::Corrupt { .. }),
        "{:?}",
        seen.cpu
    );
    for version in [KubeletVersion::V1_32, KubeletVersion::V1_36] {
        let seen = observed(&node(version, &[]), &bad_data, Some(&pods));
        assert!(verified(&seen.cpu), "{version:?}: {:?}", seen.cpu);
        assert_eq!(seen.restart, Restart::Starts, "{version:?}");
    }
}

/// v1.36 with `PodLevelResourceManagers` writes CPU v3 and memory v2,
/// whose checksums cover `podEntries`: v1.36 with the gate and v1.37 read
/// them; v1.35, and v1.36 without the gate, verify the older struct's
/// checksum and refuse the file.
#[test]
fn the_pod_level_layout_is_read_only_where_the_gate_is() {
    let pods = pods();
    let v1_36 = files("1.36-pod-level");
    let gates = ["PodLevelResources=true", "PodLevelResourceManagers=true"];
    for (version, gates, reads) in [
        (KubeletVersion::V1_36, &gates[..], true),
        (KubeletVersion::V1_37, &[][..], true),
        (KubeletVersion::V1_36, &[][..], false),
        (KubeletVersion::V1_35, &[][..], false),
    ] {
        let seen = observed(&node(version, gates), &v1_36, Some(&pods));
        assert_eq!(verified(&seen.cpu), reads, "{version:?} {gates:?}: {:?}", seen.cpu);
        assert_eq!(
            verified(&seen.memory),
            reads,
            "{version:?} {gates:?}: {:?}",
            seen.memory
        );
        assert_eq!(seen.restart == Restart::Starts, reads, "{version:?} {gates:?}");
    }
}

/// Issue #32: the kubelet reuses an init container's CPUs for the
/// containers of its pod that start after it, and keeps the init
/// container's entry. In the files v1.32.10 wrote, `setup` (an init
/// container) holds CPUs 1,9 and the sidecar `log` after it holds CPU 1:
/// no warning. The same CPUs held by containers of two pods, or by a
/// sidecar and a later container (a sidecar keeps running), are.
#[test]
fn double_assignments_the_kubelet_writes_are_not_reported() {
    let pods = pods();
    let node = node(KubeletVersion::V1_32, &[]);
    let real = files("1.32");
    let state = observed(&node, &real, Some(&pods));
    let cpus = &state.cpu_state.as_ref().unwrap().assignments["00000000-0000-0000-0000-000000000001"];
    assert_eq!(cpus["setup"].to_string(), "1,9");
    assert_eq!(cpus["log"].to_string(), "1");
    assert_eq!(state.double_assignments, []);
    // Without a pod list nothing says `setup` is an init container: a
    // pod's own overlaps are not reported either.
    assert_eq!(observed(&node, &real, None).double_assignments, []);

    let train = "00000000-0000-0000-0000-000000000001";
    let db = "00000000-0000-0000-0000-000000000003";
    let rewrite = |edit: &dyn Fn(&mut topoalign_engine::CpuManagerState)| {
        let mut cpu_state = state.cpu_state.clone().unwrap();
        edit(&mut cpu_state);
        let checkpoint = topoalign_k8s::checkpoint::CpuCheckpoint::of_state("static", &cpu_state, 2);
        let mut files = real.clone();
        files.cpu.content = FileContent::Bytes(checkpoint.to_bytes().unwrap());
        observed(&node, &files, Some(&pods)).double_assignments
    };
    let set = |text: &str| topoalign_model::CpuSet::parse(text).unwrap();
    // Another pod's container on `app`'s CPU 2.
    let across = rewrite(&|s| {
        s.assignments.get_mut(db).unwrap().insert("db".into(), set("2,3,11"));
    });
    assert_eq!(across.len(), 1, "{across:?}");
    assert_eq!(across[0].cpus.to_string(), "2");
    assert_ne!(across[0].first.0, across[0].second.0);
    // The sidecar's CPU reused by `app`: the sidecar still runs on it.
    let from_sidecar = rewrite(&|s| {
        s.assignments
            .get_mut(train)
            .unwrap()
            .insert("app".into(), set("1,2,10"));
    });
    assert!(
        from_sidecar
            .iter()
            .any(|d| d.cpus.to_string() == "1" && [&d.first.1, &d.second.1].contains(&&"log".to_owned())),
        "{from_sidecar:?}"
    );
}

/// One rule for finished pods and stale UIDs: a finished pod's state is
/// released like that of a pod nobody lists; without a pod list every UID
/// stands for a pod.
#[test]
fn finished_and_unlisted_pods_are_released() {
    let node = node(KubeletVersion::V1_32, &[]);
    let files = files("1.32");
    let mut pods = pods();
    let all = observed(&node, &files, Some(&pods));
    assert_eq!(all.stale, Vec::<String>::new());
    let held = all.node.unwrap();
    let db = pods.iter().position(|p| p.pod.name == "db").unwrap();
    let uid = pods[db].pod.uid.clone();
    assert!(held.snapshot().cpu.assignments.contains_key(&uid));

    pods[db].finished = true;
    let finished = observed(&node, &files, Some(&pods));
    pods.remove(db);
    let unlisted = observed(&node, &files, Some(&pods));
    for seen in [&finished, &unlisted] {
        assert_eq!(seen.stale, std::slice::from_ref(&uid));
        let state = seen.node.as_ref().unwrap().snapshot();
        assert!(!state.cpu.assignments.contains_key(&uid));
        assert!(!state.pods.iter().any(|p| p.uid == uid));
    }
    assert_eq!(finished.node.unwrap().snapshot(), unlisted.node.unwrap().snapshot());

    let unnamed = observed(&node, &files, None);
    assert_eq!(unnamed.stale, Vec::<String>::new());
    assert!(unnamed.unnamed.contains(&uid));
    assert!(unnamed.node.unwrap().snapshot().cpu.assignments.contains_key(&uid));
}

/// Issue #32 part 3: a FIFO where a checkpoint or `config.yaml` should be
/// is reported at once, naming what it is (a blocking open would wait for
/// a writer forever); so is one where the PodResources socket should be.
#[test]
fn fifos_are_refused_without_blocking() {
    let root = tempfile::tempdir().unwrap();
    let mkfifo = |name: &str| {
        let status = std::process::Command::new("mkfifo")
            .arg(root.path().join(name))
            .status()
            .unwrap();
        assert!(status.success());
    };
    mkfifo("cpu_manager_state");
    mkfifo("config.yaml");
    std::fs::create_dir(root.path().join("pod-resources")).unwrap();
    mkfifo("pod-resources/kubelet.sock");
    let dir = KubeletDir::new(root.path().to_path_buf(), None);
    dir.check().unwrap();
    let files = dir.read_checkpoints();
    assert_eq!(
        files.cpu.content,
        FileContent::Unreadable("a FIFO (named pipe), not a regular file".to_owned())
    );
    assert_eq!(files.memory.content, FileContent::Absent);
    let error = dir.config_file().unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "{}: a FIFO (named pipe), not a regular file",
            root.path().join("config.yaml").display()
        )
    );
    let error = dir.socket_present().unwrap_err();
    assert!(
        error
            .to_string()
            .ends_with("kubelet.sock: a FIFO (named pipe), not a socket"),
        "{error}"
    );

    // The observation says what a restarting kubelet would meet.
    let seen = observed(&node(KubeletVersion::V1_32, &[]), &files, None);
    assert!(matches!(seen.restart, Restart::Fails { .. }));
    assert!(matches!(seen.cpu.status, CheckpointStatus::Unreadable { .. }));
}

/// A directory with none of a kubelet's files is not taken for an empty
/// kubelet; `config.yaml` comes before `kubelet-config.yaml`.
#[test]
fn kubelet_dir_finds_its_files() {
    let root = tempfile::tempdir().unwrap();
    let dir = KubeletDir::new(root.path().to_path_buf(), None);
    assert!(dir.check().unwrap_err().to_string().contains("no kubelet state here"));
    assert_eq!(dir.socket(), root.path().join(SOCKET_IN_ROOT));
    assert!(!dir.socket_present().unwrap());
    std::fs::write(root.path().join("kubelet-config.yaml"), "kind: KubeletConfiguration\n").unwrap();
    dir.check().unwrap();
    assert_eq!(
        dir.config_file().unwrap(),
        Some(root.path().join("kubelet-config.yaml"))
    );
    std::fs::write(root.path().join("config.yaml"), "kind: KubeletConfiguration\n").unwrap();
    assert_eq!(dir.config_file().unwrap(), Some(root.path().join("config.yaml")));
    let missing = KubeletDir::new(root.path().join("nothing"), None);
    assert!(
        missing
            .check()
            .unwrap_err()
            .to_string()
            .ends_with("nothing: not a directory")
    );
}
