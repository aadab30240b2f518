//! Checkpoints written by the kubelet's own code (from
//! `testdata/kubelet-state/0023`), their corrupted variants, and the kubelet's
//! texts for each failure.

use super::envelope::data_checksum;
use super::*;

/// `0023/cpu_manager_state`, byte for byte.
const CPU_0023: &str = r#"{"policyName":"static","defaultCpuSet":"0-11,16-35,40-47","entries":{"00000000-0000-0000-0000-000000000001":{"app":"12-15,36-39"}},"checksum":2541130207}"#;
/// `0023/memory_manager_state`, byte for byte.
const MEMORY_0023: &str = r#"{"policyName":"Static","machineState":{"0":{"numberOfAssignments":0,"memoryMap":{"hugepages-1Gi":{"total":0,"systemReserved":0,"allocatable":0,"reserved":0,"free":0},"hugepages-2Mi":{"total":0,"systemReserved":0,"allocatable":0,"reserved":0,"free":0},"memory":{"total":68719476736,"systemReserved":1178599424,"allocatable":67540877312,"reserved":0,"free":67540877312}},"cells":[0]},"1":{"numberOfAssignments":1,"memoryMap":{"hugepages-1Gi":{"total":0,"systemReserved":0,"allocatable":0,"reserved":0,"free":0},"hugepages-2Mi":{"total":0,"systemReserved":0,"allocatable":0,"reserved":0,"free":0},"memory":{"total":68719476736,"systemReserved":0,"allocatable":68719476736,"reserved":17179869184,"free":51539607552}},"cells":[1]}},"entries":{"00000000-0000-0000-0000-000000000001":{"app":[{"numaAffinity":[1],"type":"memory","size":17179869184}]}},"checksum":156301432}"#;

const PATH_CPU: &str = "/var/lib/kubelet/cpu_manager_state";
const PATH_MEMORY: &str = "/var/lib/kubelet/memory_manager_state";

#[test]
fn real_checkpoints_verify() {
    let cpu = CpuCheckpoint::parse(CPU_0023.as_bytes()).expect("valid");
    assert_eq!((cpu.version, cpu.checksum), (2, 2_541_130_207));
    assert_eq!(u64::from(cpu.computed_checksum()), cpu.checksum);
    let state = cpu.to_state("static").expect("static");
    assert_eq!(state.default_cpu_set.to_string(), "0-11,16-35,40-47");
    assert_eq!(
        state.assignments["00000000-0000-0000-0000-000000000001"]["app"].to_string(),
        "12-15,36-39"
    );

    let memory = MemoryCheckpoint::parse(MEMORY_0023.as_bytes()).expect("valid");
    assert_eq!(u64::from(memory.computed_checksum()), 156_301_432);
    let state = memory.to_state("Static").expect("Static");
    assert_eq!(state.machine_state[&1].memory["memory"].free, 51_539_607_552);
    assert_eq!(state.machine_state[&1].cells, [1]);
    let blocks = &state.assignments["00000000-0000-0000-0000-000000000001"]["app"];
    assert_eq!(
        (blocks[0].numa_affinity.as_slice(), blocks[0].size),
        (&[1][..], 16 << 30)
    );
}

/// The files a kubelet writes for empty state, with the checksums it wrote
/// (`1184/cpu_manager_state`; the `None` memory policy's file).
#[test]
fn empty_state_checksums() {
    let none = r#"{"policyName":"none","defaultCpuSet":"","checksum":1353318690}"#;
    let cpu = CpuCheckpoint::parse(none.as_bytes()).expect("valid");
    assert_eq!(u64::from(cpu.computed_checksum()), 1_353_318_690);
    assert!(cpu.to_state("none").expect("none").assignments.is_empty());
    let memory_none = r#"{"policyName":"None","machineState":{},"checksum":4236770233}"#;
    let memory = MemoryCheckpoint::parse(memory_none.as_bytes()).expect("valid");
    assert_eq!(memory.policy_name, "None");
}

/// The corrupt variants of `testdata/kubelet-state/corrupt`, with the texts
/// the kubelet gave for each.
#[test]
fn corrupt_checkpoints_get_the_kubelet_texts() {
    let corrupted = "could not restore state from checkpoint: checkpoint is corrupted, please drain this node and \
                     delete the CPU manager checkpoint file \"/var/lib/kubelet/cpu_manager_state\" before restarting \
                     Kubelet";
    let digit = CPU_0023.replace("2541130207", "2541140207");
    let error = CpuCheckpoint::parse(digit.as_bytes()).expect_err("corrupt");
    assert_eq!(
        error,
        CheckpointError::Corrupt {
            stored: 2_541_140_207,
            computed: 2_541_130_207
        }
    );
    assert_eq!(error.kubelet_text(CheckpointKind::Cpu, PATH_CPU), corrupted);
    assert_eq!(
        error.kubelet_start_text(CheckpointKind::Cpu, PATH_CPU),
        format!("start cpu manager error: {corrupted}")
    );

    let edited = CPU_0023.replace("12-15,36-39", "12-15,36-39,47");
    let error = CpuCheckpoint::parse(edited.as_bytes()).expect_err("corrupt");
    assert_eq!(error.kubelet_text(CheckpointKind::Cpu, PATH_CPU), corrupted);

    let truncated = &CPU_0023.as_bytes()[..76];
    assert_eq!(
        CpuCheckpoint::parse(truncated)
            .expect_err("cut")
            .kubelet_text(CheckpointKind::Cpu, PATH_CPU),
        "could not restore state from checkpoint: unexpected end of JSON input, please drain this node and delete \
         the CPU manager checkpoint file \"/var/lib/kubelet/cpu_manager_state\" before restarting Kubelet"
    );

    let digit = MEMORY_0023.replace("156301432", "156311432");
    assert_eq!(
        MemoryCheckpoint::parse(digit.as_bytes())
            .expect_err("corrupt")
            .kubelet_start_text(CheckpointKind::Memory, PATH_MEMORY),
        "start memory manager error: could not restore state from checkpoint: checkpoint is corrupted, please \
         drain this node and delete the memory manager checkpoint file \"/var/lib/kubelet/memory_manager_state\" \
         before restarting Kubelet"
    );
    let truncated = &MEMORY_0023.as_bytes()[..432];
    assert_eq!(
        MemoryCheckpoint::parse(truncated).expect_err("cut").to_string(),
        "unexpected end of JSON input"
    );
}

#[test]
fn checksum_zero_is_accepted_by_the_cpu_manager_only() {
    let cpu = CPU_0023.replace("2541130207", "0");
    assert!(CpuCheckpoint::parse(cpu.as_bytes()).is_ok());
    let memory = MEMORY_0023.replace("156301432", "0");
    assert!(matches!(
        MemoryCheckpoint::parse(memory.as_bytes()),
        Err(CheckpointError::Corrupt { stored: 0, .. })
    ));
}

#[test]
fn policy_and_cpuset_errors_have_the_kubelet_texts() {
    let cpu = CpuCheckpoint::parse(CPU_0023.as_bytes()).expect("valid");
    assert_eq!(
        cpu.to_state("none").expect_err("mismatch").to_string(),
        "configured policy \"none\" differs from state checkpoint policy \"static\""
    );
    let memory = MemoryCheckpoint::parse(MEMORY_0023.as_bytes()).expect("valid");
    assert_eq!(
        memory.to_state("None").expect_err("mismatch").to_string(),
        "[memorymanager] configured policy \"None\" differs from state checkpoint policy \"Static\""
    );
    let mut bad = cpu.clone();
    bad.default_cpu_set = "0-x".into();
    assert_eq!(
        bad.to_state("static").expect_err("bad").to_string(),
        "could not parse default cpu set \"0-x\": strconv.Atoi: parsing \"x\": invalid syntax"
    );
    let mut bad = cpu;
    bad.entries = Some([("pod".to_string(), Some([("app".to_string(), "3-1".to_string())].into()))].into());
    assert_eq!(
        bad.to_state("static").expect_err("bad").to_string(),
        "could not parse cpuset \"3-1\" for container \"app\" in pod \"pod\": invalid range \"3-1\" (3 > 1)"
    );
}

#[test]
fn decoding_follows_go() {
    // Wrong types name the field; unknown fields are ignored; a null map is
    // nil (and hashes as such).
    let error = CpuCheckpoint::parse(br#"{"policyName":"static","defaultCpuSet":7,"checksum":1}"#).expect_err("type");
    assert_eq!(
        error.to_string(),
        "json: cannot unmarshal number 7 into Go struct field CPUManagerCheckpoint.defaultCpuSet of type string"
    );
    assert_eq!(
        CpuCheckpoint::parse(b"[1]").expect_err("array").to_string(),
        "json: cannot unmarshal array into Go value of type state.CPUManagerCheckpoint"
    );
    assert_eq!(
        CpuCheckpoint::parse(b"").expect_err("empty").to_string(),
        "unexpected end of JSON input"
    );
    let with_extra = CPU_0023.replace("\"checksum\"", "\"someday\":[1,2],\"checksum\"");
    assert!(CpuCheckpoint::parse(with_extra.as_bytes()).is_ok());
    let nil_entries = CpuCheckpoint {
        version: 2,
        policy_name: "static".into(),
        default_cpu_set: "0-3".into(),
        entries: None,
        pod_entries: Default::default(),
        checksum: 0,
        data: None,
        baselines: Default::default(),
    };
    let empty_entries = CpuCheckpoint {
        entries: Some(Default::default()),
        ..nil_entries.clone()
    };
    assert_ne!(nil_entries.computed_checksum(), empty_entries.computed_checksum());
    let text = format!(
        r#"{{"policyName":"static","defaultCpuSet":"0-3","entries":null,"checksum":{}}}"#,
        nil_entries.computed_checksum()
    );
    assert_eq!(CpuCheckpoint::parse(text.as_bytes()).expect("valid").entries, None);
}

#[test]
fn v1_checkpoints_migrate_only_without_container_entries() {
    let v1 = CpuCheckpoint {
        version: 1,
        policy_name: "static".into(),
        default_cpu_set: "0-7".into(),
        entries: Some(Default::default()),
        pod_entries: Default::default(),
        checksum: 0,
        data: None,
        baselines: Default::default(),
    };
    let text = r#"{"policyName":"static","defaultCpuSet":"0-7","entries":{"abc123":"1-2"},"checksum":0}"#;
    assert_eq!(
        CpuCheckpoint::parse(text.as_bytes())
            .expect_err("v1 entries")
            .to_string(),
        "error migrating v1 checkpoint state to v2 checkpoint state: containerID 'abc123' not found in initial \
         containers list"
    );
    let text = r#"{"policyName":"static","defaultCpuSet":"0-7","checksum":0}"#;
    assert_eq!(CpuCheckpoint::parse(text.as_bytes()).expect("v1"), v1);
}

/// The checkpoints of one scenario as each release's kubelet code wrote
/// them (`testdata/kubelet-state/layouts`): every layout verifies and
/// gives the same state.
mod layouts {
    use super::*;

    macro_rules! file {
        ($release:literal, $name:literal) => {
            include_bytes!(concat!(
                "../../../../testdata/kubelet-state/layouts/",
                $release,
                "/",
                $name
            ))
            .as_slice()
        };
    }

    const CPU: [(&[u8], u8); 3] = [
        (file!("1.32", "cpu_manager_state"), 2),
        (file!("1.36-pod-level", "cpu_manager_state"), 3),
        (file!("1.37", "cpu_manager_state"), 4),
    ];
    const MEMORY: [(&[u8], u8); 3] = [
        (file!("1.32", "memory_manager_state"), 1),
        (file!("1.36-pod-level", "memory_manager_state"), 2),
        (file!("1.37", "memory_manager_state"), 3),
    ];
    const DEVICES: [&[u8]; 3] = [
        file!("1.32", "device-plugins/kubelet_internal_checkpoint"),
        file!("1.36-pod-level", "device-plugins/kubelet_internal_checkpoint"),
        file!("1.37", "device-plugins/kubelet_internal_checkpoint"),
    ];

    #[test]
    fn every_release_layout_verifies_to_the_same_state() {
        let states: Vec<_> = CPU
            .iter()
            .map(|(bytes, version)| {
                let checkpoint = CpuCheckpoint::parse(bytes).expect("verifies");
                assert_eq!(checkpoint.version, *version);
                assert_eq!(u64::from(checkpoint.computed_checksum()), checkpoint.checksum);
                checkpoint.to_state("static").expect("restorable")
            })
            .collect();
        assert_eq!(states[0].default_cpu_set.to_string(), "0,5-8,12-15");
        assert_eq!(
            states[0].assignments["00000000-0000-0000-0000-000000000001"]["setup"].to_string(),
            "1,9"
        );
        assert!(states.iter().all(|s| *s == states[0]));

        let states: Vec<_> = MEMORY
            .iter()
            .map(|(bytes, version)| {
                let checkpoint = MemoryCheckpoint::parse(bytes).expect("verifies");
                assert_eq!(checkpoint.version, *version);
                assert_eq!(u64::from(checkpoint.computed_checksum()), checkpoint.checksum);
                checkpoint.to_state("Static").expect("restorable")
            })
            .collect();
        let blocks = |i: usize| {
            let mut b = states[i].assignments["00000000-0000-0000-0000-000000000001"]["app"].clone();
            b.sort_by(|x, y| x.resource.cmp(&y.resource));
            b
        };
        assert_eq!(blocks(0).len(), 2);
        assert_eq!(blocks(0), blocks(2), "v1.37 lists the blocks in another order");
        assert_eq!(states[0].machine_state, states[2].machine_state);

        for bytes in DEVICES {
            let checkpoint = DeviceCheckpoint::parse(bytes).expect("verifies");
            assert_eq!(u64::from(checkpoint.computed_checksum()), checkpoint.checksum);
            let devices = checkpoint.assignments();
            assert_eq!(
                devices["00000000-0000-0000-0000-000000000001"]["app"]["nvidia.com/gpu"],
                ["gpu0"]
            );
            assert_eq!(
                devices["00000000-0000-0000-0000-000000000005"]["g"]["example.com/nic"],
                ["nic1"]
            );
            assert_eq!(
                checkpoint.registered_devices()["example.com/nic"],
                ["nic0", "nic1", "nic2"]
            );
        }
    }

    /// A data checksum that does not match is corruption, never a reason
    /// to fall back to the old fields (which still verify).
    #[test]
    fn a_damaged_data_layer_is_corrupt_not_a_fallback() {
        let text = std::str::from_utf8(CPU[2].0).expect("utf-8");
        let edited = text.replace(r#"\"g\":\"4\""#, r#"\"g\":\"5\""#);
        assert_ne!(edited, text);
        assert!(matches!(
            CpuCheckpoint::parse(edited.as_bytes()),
            Err(CheckpointError::Corrupt {
                stored: 3_267_933_528,
                ..
            })
        ));
        let text = std::str::from_utf8(MEMORY[2].0).expect("utf-8");
        let edited = text.replace("\"dataChecksum\":145353568", "\"dataChecksum\":145353569");
        assert!(matches!(
            MemoryCheckpoint::parse(edited.as_bytes()),
            Err(CheckpointError::Corrupt { .. })
        ));
        // The data string is not JSON (checksum recomputed): a decode error
        // naming the data.
        let bad = "{not json";
        let file = format!(
            r#"{{"data":{},"dataChecksum":{}}}"#,
            serde_json::json!(bad),
            data_checksum(bad)
        );
        let error = CpuCheckpoint::parse(file.as_bytes()).expect_err("undecodable");
        assert!(
            error
                .to_string()
                .starts_with("failed to deserialize cpu manager checkpoint data"),
            "{error}"
        );
    }

    #[test]
    fn damaged_device_checkpoints_are_refused() {
        let text = std::str::from_utf8(DEVICES[0]).expect("utf-8");
        let moved = text.replace(r#"{"0":["gpu0"]}"#, r#"{"1":["gpu0"]}"#);
        assert!(matches!(
            DeviceCheckpoint::parse(moved.as_bytes()),
            Err(CheckpointError::Corrupt {
                stored: 2_751_045_920,
                ..
            })
        ));
        let cut = &DEVICES[0][..DEVICES[0].len() / 2];
        assert_eq!(
            DeviceCheckpoint::parse(cut).expect_err("cut").to_string(),
            "unexpected end of JSON input"
        );
        let key = text.replace(r#"{"0":["gpu0"]}"#, r#"{"zero":["gpu0"]}"#);
        assert!(
            DeviceCheckpoint::parse(key.as_bytes())
                .expect_err("key")
                .to_string()
                .contains("cannot unmarshal number zero")
        );
    }

    /// Pod-level assignments are parsed as the kubelet's `PodEntry`
    /// decoding parses them: a CPU list that does not parse fails the
    /// decoding.
    #[test]
    fn pod_level_entries_are_cpu_sets() {
        let file = |data: &str| {
            format!(
                r#"{{"data":{},"dataChecksum":{}}}"#,
                serde_json::json!(data),
                data_checksum(data)
            )
        };
        let data = r#"{"policyName":"static","defaultCpuSet":"0-1","podEntries":{"u1":{"cpuSet":"3,2"},"u2":{}}}"#;
        let checkpoint = CpuCheckpoint::parse(file(data).as_bytes()).expect("verifies");
        let state = checkpoint.to_state("static").expect("restorable");
        assert_eq!(state.pod_assignments["u1"].to_string(), "2-3");
        assert!(state.pod_assignments["u2"].is_empty());
        let bad = data.replace("3,2", "3-2");
        assert_eq!(
            CpuCheckpoint::parse(file(&bad).as_bytes())
                .expect_err("bad set")
                .to_string(),
            "failed to parse cpuset: invalid range \"3-2\" (3 > 2)"
        );
    }
}

/// Pod-level assignments (`PodLevelResourceManagers`) as v1.36.3 (CPU v3,
/// memory v2) and v1.37.2 (CPU v4, memory v3) wrote them
/// (`testdata/kubelet-state/layouts/*-pod-entries`): both releases' files
/// give the same state, bubbles included, and the oracle's final state
/// names the same pods.
mod pod_entries {
    use super::*;

    const CPU: [(&[u8], u8); 2] = [
        (
            include_bytes!("../../../../testdata/kubelet-state/layouts/1.36-pod-entries/cpu_manager_state"),
            3,
        ),
        (
            include_bytes!("../../../../testdata/kubelet-state/layouts/1.37-pod-entries/cpu_manager_state"),
            4,
        ),
    ];
    const MEMORY: [(&[u8], u8); 2] = [
        (
            include_bytes!("../../../../testdata/kubelet-state/layouts/1.36-pod-entries/memory_manager_state"),
            2,
        ),
        (
            include_bytes!("../../../../testdata/kubelet-state/layouts/1.37-pod-entries/memory_manager_state"),
            3,
        ),
    ];
    const BUBBLE: &str = "00000000-0000-0000-0000-000000000002";
    const BUBBLE2: &str = "00000000-0000-0000-0000-000000000007";

    #[test]
    fn both_releases_give_the_same_bubbles() {
        let cpu: Vec<_> = CPU
            .iter()
            .map(|(bytes, version)| {
                let checkpoint = CpuCheckpoint::parse(bytes).expect("verifies");
                assert_eq!(checkpoint.version, *version);
                checkpoint.to_state("static").expect("restorable")
            })
            .collect();
        assert_eq!(cpu[0], cpu[1]);
        assert_eq!(cpu[0].pod_assignments[BUBBLE].to_string(), "4-5,12-13");
        assert_eq!(cpu[0].pod_assignments[BUBBLE2].to_string(), "7,15");
        assert_eq!(cpu[0].assignments[BUBBLE]["helper"].to_string(), "5,13");

        let memory: Vec<_> = MEMORY
            .iter()
            .map(|(bytes, version)| {
                let checkpoint = MemoryCheckpoint::parse(bytes).expect("verifies");
                assert_eq!(checkpoint.version, *version);
                checkpoint.to_state("Static").expect("restorable")
            })
            .collect();
        let sorted = |state: &topoalign_engine::MemoryManagerState, pod: &str| {
            let mut blocks = state.pod_assignments[pod].clone();
            blocks.sort_by(|a, b| a.resource.cmp(&b.resource));
            blocks
        };
        for pod in [BUBBLE, BUBBLE2] {
            assert_eq!(sorted(&memory[0], pod), sorted(&memory[1], pod), "{pod}");
        }
        let bubble = sorted(&memory[0], BUBBLE);
        assert_eq!(
            bubble
                .iter()
                .map(|b| (b.resource.as_str(), b.size, b.numa_affinity.clone()))
                .collect::<Vec<_>>(),
            [("hugepages-1Gi", 1 << 30, vec![1]), ("memory", 4 << 30, vec![1])]
        );
        assert_eq!(memory[0].machine_state, memory[1].machine_state);
    }

    /// Written from the state, each release's layout is the kubelet's file
    /// (memory v2 and v3 list a pod's blocks in Go map order, which the
    /// written file follows only when the state keeps it: compared parsed).
    #[test]
    fn written_from_the_state_they_are_the_kubelets() {
        for (bytes, version) in CPU {
            let checkpoint = CpuCheckpoint::parse(bytes).expect("verifies");
            let state = checkpoint.to_state("static").expect("restorable");
            let again = CpuCheckpoint::of_state("static", &state, version);
            assert_eq!(
                String::from_utf8(again.to_bytes().expect("write")).expect("utf-8"),
                String::from_utf8(bytes.to_vec()).expect("utf-8"),
                "v{version}"
            );
        }
        for (bytes, version) in MEMORY {
            let checkpoint = MemoryCheckpoint::parse(bytes).expect("verifies");
            assert_eq!(checkpoint.to_bytes().expect("write"), bytes, "v{version}");
            let state = checkpoint.to_state("Static").expect("restorable");
            let again = MemoryCheckpoint::of_state("Static", &state, version);
            let back = MemoryCheckpoint::parse(&again.to_bytes().expect("write")).expect("verifies");
            assert_eq!(back.to_state("Static").expect("restorable"), state, "v{version}");
        }
    }

    /// Older layouts have no place for pod entries: written without them
    /// from the state, refused when asked to carry them.
    #[test]
    fn older_layouts_leave_pod_entries_out() {
        let state = CpuCheckpoint::parse(CPU[0].0)
            .expect("verifies")
            .to_state("static")
            .expect("restorable");
        let v2 = CpuCheckpoint::of_state("static", &state, 2);
        assert!(v2.pod_entries.is_empty());
        let back = CpuCheckpoint::parse(&v2.to_bytes().expect("write")).expect("verifies");
        assert_eq!(back.version, 2);
        assert!(back.to_state("static").expect("restorable").pod_assignments.is_empty());
        let forced = CpuCheckpoint {
            pod_entries: state.pod_assignments.clone(),
            ..v2
        };
        assert!(matches!(forced.to_bytes(), Err(CheckpointError::Unsupported(_))));
    }
}

/// The writer against the kubelet's own files: every checkpoint in
/// `testdata/kubelet-state` (13 v1.32 nodes, and one node in each
/// release's layouts) read and written back gives the same bytes, and so
/// does a file written from the restored state (what a kubelet holding
/// that state writes).
mod write {
    use std::path::{Path, PathBuf};

    use super::*;

    fn state_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/kubelet-state")
    }

    /// Every folder holding checkpoint files the kubelet's code wrote.
    fn kubelet_dirs() -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(state_dir())
            .expect("testdata/kubelet-state")
            .map(|e| e.expect("entry").path())
            .filter(|p| p.join("cpu_manager_state").is_file())
            .collect();
        for release in ["1.32", "1.36-pod-level", "1.37", "1.36-pod-entries", "1.37-pod-entries"] {
            dirs.push(state_dir().join("layouts").join(release));
        }
        dirs.sort();
        assert_eq!(dirs.len(), 18);
        dirs
    }

    fn text(bytes: &[u8]) -> String {
        String::from_utf8_lossy(bytes).into_owned()
    }

    #[test]
    fn every_real_checkpoint_is_written_back_byte_for_byte() {
        let mut seen = [0usize; 5];
        for dir in kubelet_dirs() {
            let cpu_bytes = std::fs::read(dir.join("cpu_manager_state")).expect("cpu");
            let cpu = CpuCheckpoint::parse(&cpu_bytes).expect("valid");
            seen[usize::from(cpu.version)] += 1;
            assert_eq!(
                text(&cpu.to_bytes().expect("write")),
                text(&cpu_bytes),
                "{}",
                dir.display()
            );
            let state = cpu.to_state(&cpu.policy_name).expect("state");
            let again = CpuCheckpoint::of_state(&cpu.policy_name, &state, cpu.version);
            assert_eq!(
                text(&again.to_bytes().expect("write")),
                text(&cpu_bytes),
                "{}",
                dir.display()
            );
            assert_eq!(again.checksum, cpu.checksum, "{}", dir.display());

            if let Ok(memory_bytes) = std::fs::read(dir.join("memory_manager_state")) {
                let memory = MemoryCheckpoint::parse(&memory_bytes).expect("valid");
                assert_eq!(
                    text(&memory.to_bytes().expect("write")),
                    text(&memory_bytes),
                    "{}",
                    dir.display()
                );
                let state = memory.to_state(&memory.policy_name).expect("state");
                let again = MemoryCheckpoint::of_state(&memory.policy_name, &state, memory.version);
                assert_eq!(
                    text(&again.to_bytes().expect("write")),
                    text(&memory_bytes),
                    "{}",
                    dir.display()
                );
            }
            if let Ok(device_bytes) = std::fs::read(dir.join(DEVICE_CHECKPOINT)) {
                let devices = DeviceCheckpoint::parse(&device_bytes).expect("valid");
                assert_eq!(text(&devices.to_bytes()), text(&device_bytes), "{}", dir.display());
            }
        }
        // v2 (v1.32 and 1.36 without the gate), v3 and v4 all met.
        assert_eq!(seen, [0, 0, 14, 2, 2]);
    }

    /// The empty files a kubelet writes at its first start.
    #[test]
    fn empty_state_files_are_the_kubelets() {
        let none = CpuCheckpoint::of_state("none", &Default::default(), 2);
        assert_eq!(
            text(&none.to_bytes().expect("write")),
            r#"{"policyName":"none","defaultCpuSet":"","checksum":1353318690}"#
        );
        let memory = MemoryCheckpoint::of_state("None", &Default::default(), 1);
        assert_eq!(
            text(&memory.to_bytes().expect("write")),
            r#"{"policyName":"None","machineState":{},"checksum":4236770233}"#
        );
        // Every layout written is read back as the same checkpoint.
        for version in 1..=4 {
            let cpu = CpuCheckpoint::of_state("none", &Default::default(), version);
            let back = CpuCheckpoint::parse(&cpu.to_bytes().expect("write")).expect("valid");
            assert_eq!((back.version, back.checksum), (version, cpu.checksum));
        }
        for version in 1..=3 {
            let memory = MemoryCheckpoint::of_state("None", &Default::default(), version);
            let back = MemoryCheckpoint::parse(&memory.to_bytes().expect("write")).expect("valid");
            assert_eq!((back.version, back.checksum), (version, memory.checksum));
        }
    }

    /// Go's orders and escapes: map keys sorted as strings (NUMA node 10
    /// before 2), HTML characters escaped inside `data`.
    #[test]
    fn go_orders_and_escapes() {
        let mut state = topoalign_engine::MemoryManagerState::default();
        for numa in [2usize, 10] {
            state.machine_state.insert(
                numa,
                topoalign_engine::NumaMemoryState {
                    number_of_assignments: 0,
                    memory: Default::default(),
                    cells: vec![numa],
                },
            );
        }
        let written = text(
            &MemoryCheckpoint::of_state("Static", &state, 3)
                .to_bytes()
                .expect("write"),
        );
        assert!(
            written.starts_with(r#"{"policyName":"Static","machineState":{"10":{"numberOfAssignments":0,"memoryMap":{},"cells":[10]},"2":"#),
            "{written}"
        );
        let back = MemoryCheckpoint::parse(written.as_bytes()).expect("valid");
        assert_eq!(back.to_state("Static").expect("state"), state);

        let mut cpu = CpuCheckpoint::of_state("static", &Default::default(), 4);
        cpu.policy_name = "<a&b>".into();
        let written = text(&cpu.to_bytes().expect("write"));
        assert!(
            written.contains(r#""data":"{\"policyName\":\"\\u003ca\\u0026b\\u003e\""#),
            "{written}"
        );
        assert_eq!(
            CpuCheckpoint::parse(written.as_bytes()).expect("valid").policy_name,
            "<a&b>"
        );
    }
}

/// The direct reading (typed structs, no generic tree) against the tree:
/// wherever it takes a file it gives the checkpoint the tree gives, it
/// takes every file a kubelet of the data layout writes, and every file it
/// leaves — odd, damaged, in an older layout — is read by the tree with
/// the same result, errors included.
mod direct {
    use std::path::Path;

    use serde_json::{Value, json};
    use topoalign_model::CpuSet;

    use super::envelope::read_data_layer_direct;
    use super::*;

    fn state_files(name: &str) -> Vec<Vec<u8>> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/kubelet-state");
        let mut dirs: Vec<_> = std::fs::read_dir(&root)
            .expect("testdata/kubelet-state")
            .chain(std::fs::read_dir(root.join("layouts")).expect("layouts"))
            .chain(std::fs::read_dir(root.join("corrupt")).expect("corrupt"))
            .map(|e| e.expect("entry").path())
            .collect();
        dirs.sort();
        dirs.iter().filter_map(|d| std::fs::read(d.join(name)).ok()).collect()
    }

    /// Both readings of one CPU file; whether the direct one took it.
    fn cpu_agrees(bytes: &[u8]) -> bool {
        let direct = read_data_layer_direct::<CpuCheckpoint>(bytes);
        let tree = CpuCheckpoint::parse_tree(bytes);
        if let Some(direct) = &direct {
            assert_eq!(Ok(direct), tree.as_ref(), "{}", String::from_utf8_lossy(bytes));
        }
        assert_eq!(CpuCheckpoint::parse(bytes), tree);
        direct.is_some()
    }

    fn memory_agrees(bytes: &[u8]) -> bool {
        let direct = read_data_layer_direct::<MemoryCheckpoint>(bytes);
        let tree = MemoryCheckpoint::parse_tree(bytes);
        if let Some(direct) = &direct {
            assert_eq!(Ok(direct), tree.as_ref(), "{}", String::from_utf8_lossy(bytes));
        }
        assert_eq!(MemoryCheckpoint::parse(bytes), tree);
        direct.is_some()
    }

    fn device_agrees(bytes: &[u8]) -> bool {
        let direct = device::decode_direct(bytes);
        let tree = DeviceCheckpoint::parse_tree(bytes);
        let taken = direct.filter(|d| d.checksum == u64::from(d.computed_checksum()));
        if let Some(direct) = &taken {
            assert_eq!(Ok(direct), tree.as_ref(), "{}", String::from_utf8_lossy(bytes));
        }
        assert_eq!(DeviceCheckpoint::parse(bytes), tree);
        taken.is_some()
    }

    /// The file with its `data` payload edited (as JSON) and both
    /// checksums made to match, so that the edit reaches the payload.
    fn resealed(file: &[u8], edit: impl FnOnce(&mut Value)) -> Vec<u8> {
        let mut outer: Value = serde_json::from_slice(file).expect("JSON");
        let mut payload: Value = serde_json::from_str(outer["data"].as_str().expect("data")).expect("payload");
        edit(&mut payload);
        let data = payload.to_string();
        outer["dataChecksum"] = json!(envelope::data_checksum(&data));
        outer["data"] = json!(data);
        outer.to_string().into_bytes()
    }

    /// The file with its `data` string replaced by `data`, resealed.
    fn with_data(file: &[u8], data: &str) -> Vec<u8> {
        let mut outer: Value = serde_json::from_slice(file).expect("JSON");
        outer["dataChecksum"] = json!(envelope::data_checksum(data));
        outer["data"] = json!(data);
        outer.to_string().into_bytes()
    }

    #[test]
    fn every_kubelet_file_reads_the_same_and_the_data_layout_directly() {
        let (mut cpu, mut memory, mut devices) = (0, 0, 0);
        for bytes in state_files("cpu_manager_state") {
            let taken = cpu_agrees(&bytes);
            let version = CpuCheckpoint::parse_tree(&bytes).map(|c| c.version);
            assert_eq!(taken, version == Ok(4), "{}", String::from_utf8_lossy(&bytes));
            cpu += usize::from(taken);
        }
        for bytes in state_files("memory_manager_state") {
            let taken = memory_agrees(&bytes);
            let version = MemoryCheckpoint::parse_tree(&bytes).map(|c| c.version);
            assert_eq!(taken, version == Ok(3), "{}", String::from_utf8_lossy(&bytes));
            memory += usize::from(taken);
        }
        for bytes in state_files(DEVICE_CHECKPOINT) {
            assert!(device_agrees(&bytes), "{}", String::from_utf8_lossy(&bytes));
            devices += 1;
        }
        assert_eq!(
            (cpu, memory),
            (4, 3),
            "the v1.37 layouts: with and without pod entries, and the 72-NUMA-node machine's two (a memory \
             file under the Static policy only)"
        );
        assert!(devices >= 5, "{devices} device checkpoints");
    }

    /// Files written from states with pod-level entries, baselines, huge
    /// pages on many NUMA nodes (keys "10" before "2") and names that
    /// need escapes: taken directly, the same as the tree.
    #[test]
    fn written_files_read_directly() {
        let mut cpu = CpuCheckpoint::of_state(
            "static",
            &topoalign_engine::CpuManagerState {
                default_cpu_set: CpuSet::from_iter([0, 1, 7]),
                assignments: [(
                    "u\"1<".to_owned(),
                    [("c\\a".to_owned(), CpuSet::from_iter([2, 3]))].into(),
                )]
                .into(),
                pod_assignments: [("u2".to_owned(), CpuSet::from_iter([4, 5, 6]))].into(),
            },
            4,
        );
        cpu.baselines = [("u\"1<".to_owned(), [("c\\a".to_owned(), "2-3".to_owned())].into())].into();
        let cpu = CpuCheckpoint { data: None, ..cpu };
        let cpu = envelope::seal(cpu, CpuCheckpoint::computed_checksum);
        let bytes = cpu.to_bytes().expect("write");
        assert!(cpu_agrees(&bytes));
        assert_eq!(CpuCheckpoint::parse(&bytes).expect("valid"), cpu);

        let mut state = topoalign_engine::MemoryManagerState::default();
        for numa in [2usize, 10] {
            state.machine_state.insert(
                numa,
                topoalign_engine::NumaMemoryState {
                    number_of_assignments: 1,
                    memory: [("hugepages-1Gi".to_owned(), Default::default())].into(),
                    cells: vec![numa],
                },
            );
        }
        let block = topoalign_engine::MemoryBlock {
            numa_affinity: vec![2, 10],
            resource: "memory".into(),
            size: 1 << 30,
        };
        state
            .assignments
            .insert("u<1>".into(), [("app".to_owned(), vec![block.clone()])].into());
        state.pod_assignments.insert("u2".into(), vec![block]);
        state.pod_assignments.insert("u3".into(), Vec::new());
        let memory = MemoryCheckpoint::of_state("Static", &state, 3);
        let bytes = memory.to_bytes().expect("write");
        assert!(memory_agrees(&bytes));
        assert_eq!(
            MemoryCheckpoint::parse(&bytes).expect("valid").to_state("Static"),
            Ok(state)
        );
    }

    /// Whatever a kubelet does not write is left to the tree, which
    /// decides it as before: names in another case, a member twice, `null`
    /// where Go makes a nil map, missing or unknown fields, numbers that
    /// are not integers, a NUMA id spelled twice, damaged checksums.
    #[test]
    fn what_a_kubelet_does_not_write_is_left_to_the_tree() {
        let cpu_file = state_files("cpu_manager_state")
            .into_iter()
            .find(|b| CpuCheckpoint::parse_tree(b).is_ok_and(|c| c.version == 4 && !c.pod_entries.is_empty()))
            .expect("a v4 file with pod entries");
        let text = String::from_utf8(cpu_file.clone()).expect("utf-8");
        let cpu_variants: Vec<Vec<u8>> = vec![
            text.replacen("\"data\":", "\"Data\":", 1).into_bytes(),
            text.replacen("\"dataChecksum\":", "\"datachecksum\":", 1).into_bytes(),
            text.replacen("{", "{\"data\":\"\",", 1).into_bytes(),
            text.replacen("{", "{\"dataChecksum\":1,", 1).into_bytes(),
            text.replacen("{", "{\"extra\":[1,{\"data\":2}],", 1).into_bytes(),
            text.replacen("\"dataChecksum\":", "\"dataChecksum\":1.0,\"x\":", 1)
                .into_bytes(),
            text.as_bytes()[..text.len() - 1].to_vec(),
            format!("{text} x").into_bytes(),
            b"null".to_vec(),
            b"{}".to_vec(),
            with_data(&cpu_file, ""),
            with_data(&cpu_file, "null"),
            with_data(&cpu_file, "[]"),
            resealed(&cpu_file, |p| p["PolicyName"] = json!("none")),
            resealed(&cpu_file, |p| p["entries"] = Value::Null),
            resealed(&cpu_file, |p| p["podEntries"] = Value::Null),
            resealed(&cpu_file, |p| p["baselines"] = json!({"u": null})),
            resealed(&cpu_file, |p| p["baselines"] = json!({"u": {"c": {"baseline": "1"}}})),
            resealed(&cpu_file, |p| p["baselines"] = json!({"u": {"c": {}}})),
            resealed(&cpu_file, |p| p["entries"] = json!({"u": null})),
            resealed(&cpu_file, |p| p["entries"] = json!({"u": {"c": null}})),
            resealed(&cpu_file, |p| p["entries"] = json!({"u": {"c": 7}})),
            resealed(&cpu_file, |p| p["podEntries"] = json!({"u": {"cpuSet": "x"}})),
            resealed(&cpu_file, |p| p["podEntries"] = json!({"u": {}})),
            resealed(&cpu_file, |p| p["podEntries"] = json!({"u": null})),
            resealed(&cpu_file, |p| p["checksum"] = json!(5)),
            resealed(&cpu_file, |p| {
                p.as_object_mut().expect("object").remove("policyName");
            }),
            resealed(&cpu_file, |p| p["defaultCpuSet"] = json!("0-")),
            resealed(&cpu_file, |p| p["defaultCpuSet"] = Value::Null),
            with_data(
                &cpu_file,
                r#"{"policyName":"static","defaultCpuSet":"1","defaultCpuSet":"2"}"#,
            ),
        ];
        let taken: Vec<bool> = cpu_variants.iter().map(|b| cpu_agrees(b)).collect();
        // Not taken: names in another case, members twice, damage, `null`
        // where Go makes a nil map; members it does not read are skipped.
        let left: Vec<usize> = (0..15).filter(|&i| i != 4).collect();
        assert!(left.iter().all(|&i| !taken[i]), "{taken:?}");
        assert!(taken[4] && taken[17] && taken[19] && taken[23], "{taken:?}");

        let memory_file = state_files("memory_manager_state")
            .into_iter()
            .find(|b| MemoryCheckpoint::parse_tree(b).is_ok_and(|c| c.version == 3))
            .expect("a v3 file");
        let text = String::from_utf8(memory_file.clone()).expect("utf-8");
        let memory_variants: Vec<Vec<u8>> = vec![
            text.replacen("\"data\":", "\"DATA\":", 1).into_bytes(),
            text.replacen("\"dataChecksum\":", "\"dataChecksum\":-", 1).into_bytes(),
            resealed(&memory_file, |p| p["machineState"] = Value::Null),
            resealed(&memory_file, |p| {
                p["machineState"]["00"] = p["machineState"]["0"].clone()
            }),
            resealed(&memory_file, |p| {
                p["machineState"]["x"] = p["machineState"]["0"].clone()
            }),
            resealed(&memory_file, |p| p["machineState"]["0"] = Value::Null),
            resealed(&memory_file, |p| p["machineState"]["0"]["cells"] = Value::Null),
            resealed(&memory_file, |p| p["machineState"]["0"]["memoryMap"] = Value::Null),
            resealed(&memory_file, |p| {
                p["machineState"]["0"]["memoryMap"]["memory"] = Value::Null
            }),
            resealed(&memory_file, |p| {
                p["machineState"]["0"]["memoryMap"]["memory"]["free"] = json!(-1);
            }),
            resealed(&memory_file, |p| {
                p["machineState"]["0"]["memoryMap"]["memory"]
                    .as_object_mut()
                    .expect("table")
                    .remove("free");
            }),
            resealed(&memory_file, |p| {
                p["machineState"]["0"]["numberOfAssignments"] = json!(1.5)
            }),
            resealed(&memory_file, |p| p["entries"] = Value::Null),
            resealed(&memory_file, |p| p["entries"] = json!({"u": null})),
            resealed(&memory_file, |p| p["entries"] = json!({"u": {"c": null}})),
            resealed(&memory_file, |p| {
                p["entries"] = json!({"u": {"c": [{"numaAffinity": null, "type": "memory", "size": 1}]}});
            }),
            resealed(&memory_file, |p| {
                p["entries"] = json!({"u": {"c": [{"numaAffinity": [-1], "type": "memory", "size": 1}]}});
            }),
            resealed(&memory_file, |p| {
                p["entries"] = json!({"u": {"c": [{"type": "memory", "size": 1}]}})
            }),
            resealed(&memory_file, |p| p["entries"] = json!({"u": {"c": [null]}})),
            resealed(&memory_file, |p| p["podEntries"] = Value::Null),
            resealed(&memory_file, |p| p["podEntries"] = json!({"u": null})),
            resealed(&memory_file, |p| p["podEntries"] = json!({"u": {}})),
            resealed(&memory_file, |p| p["podEntries"] = json!({"u": {"memoryBlocks": null}})),
            resealed(&memory_file, |p| p["podEntries"] = json!({"u": {"memoryBlocks": []}})),
            resealed(&memory_file, |p| p["policyName"] = json!("None")),
            resealed(&memory_file, |p| p["Entries"] = json!({})),
        ];
        let taken: Vec<bool> = memory_variants.iter().map(|b| memory_agrees(b)).collect();
        assert!(!taken[..9].iter().any(|&t| t), "{taken:?}");
        assert!(taken[21] && taken[22] && taken[23] && taken[24], "{taken:?}");

        let device_file = state_files(DEVICE_CHECKPOINT).pop().expect("a device checkpoint");
        let text = String::from_utf8(device_file).expect("utf-8");
        let device_variants = [
            text.replacen("\"Checksum\":", "\"checksum\":", 1),
            text.replacen("\"PodUID\":", "\"PodUid\":", 1),
            text.replacen("\"AllocResp\":\"\"", "\"AllocResp\":null", 1),
            text.replacen("\"AllocResp\":\"\"", "\"AllocResp\":\"!\"", 1),
            text.replacen("\"DeviceIDs\":{\"0\":", "\"DeviceIDs\":{\"00\":[],\"0\":", 1),
            text.replacen("\"RegisteredDevices\":{", "\"RegisteredDevices\":{\"x\":null,", 1),
            text.replacen("\"Checksum\":", "\"Checksum\":1", 1),
            text.replacen("{\"Data\":", "{\"Extra\":1,\"Data\":", 1),
        ];
        for variant in device_variants {
            assert!(!device_agrees(variant.as_bytes()), "{variant}");
        }
    }
}
