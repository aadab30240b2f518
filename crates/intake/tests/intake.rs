//! The intake on the repository's node files: every kind of node file
//! gives a machine; configurations are chosen in one documented order;
//! overrides, refusals and bad files get one text each.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::path::{Path, PathBuf};

use topoalign_intake::{Events, IntakeError, NodeInputs, Overrides, WithoutConfig, read_fleet, read_node_file, start};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn every_kind_of_node_file_gives_a_machine() {
    let scenario = read_node_file(Some(&repo().join("examples/nodes/two-numa.yaml"))).unwrap();
    assert_eq!(scenario.machine.numa_nodes().len(), 2);
    assert!(
        scenario.scenario.is_some(),
        "a scenario brings its kubelet block and events"
    );

    let xml = repo().join("testdata/topologies/hwloc-xml/hwloc-16amd64-4distances.xml");
    let hwloc = read_node_file(Some(&xml)).unwrap();
    assert_eq!(hwloc.machine.numa_nodes().len(), 8);
    assert!(hwloc.scenario.is_none());

    let capture = std::fs::read_dir(repo().join("testdata/topologies/sysfs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .unwrap();
    let sysfs = read_node_file(Some(&capture)).unwrap();
    assert!(!sysfs.machine.cpus().is_empty());
    assert!(sysfs.scenario.is_none());
}

#[test]
fn a_scenarios_events_are_replayed_only_when_asked() {
    let node = repo().join("examples/nodes/two-numa-fragmented.yaml");
    let overrides = Overrides::default();
    let ignored = start(&NodeInputs::new(Some(&node), None, &overrides)).unwrap();
    assert!(ignored.running_before.is_empty());
    let replayed = start(&NodeInputs {
        events: Events::Replay,
        ..NodeInputs::new(Some(&node), None, &overrides)
    })
    .unwrap();
    assert_eq!(replayed.running_before, ["default/fill-b", "default/fill-a"]);
    assert_eq!(
        replayed.kubelet_source,
        format!("the kubelet block of {}", node.display())
    );
}

/// Issue #29: with `InPlacePodVerticalScaling` off (1.32's default) the
/// kubelet does not look at a resize and counts the desired sizes; the
/// replayed node's notes say so (was "keeps its allocated resources").
/// The vector's answers are the real v1.32.10 kubelet's.
#[test]
fn a_resize_with_the_gate_off_is_noted_as_taken_unchecked() {
    let node = repo().join("testdata/conformance/1.32/scenarios/resize-gate-off-admission.json");
    let overrides = Overrides::default();
    let started = start(&NodeInputs {
        events: Events::Replay,
        ..NodeInputs::new(Some(&node), None, &overrides)
    })
    .unwrap();
    let note = started
        .notes
        .iter()
        .find(|n| n.starts_with("default/s1 (event 1) "))
        .unwrap_or_else(|| panic!("no note on the resize: {:?}", started.notes));
    assert!(
        note.contains("did not look at the resize and counts the desired sizes"),
        "{note}"
    );
    // s2, refused because s1 counts 7 CPUs now, is noted as refused.
    assert!(
        started
            .notes
            .iter()
            .any(|n| n.starts_with("default/s2 (event 2) was not admitted")),
        "{:?}",
        started.notes
    );
}

#[test]
fn configurations_in_order_file_fallback_scenario_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "kubelet.yaml",
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ncpuManagerPolicy: static\nreservedSystemCPUs: \"1\"\n",
    );
    let fallback = write(
        dir.path(),
        "fallback.yaml",
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\ntopologyManagerPolicy: restricted\n",
    );
    let node = repo().join("examples/nodes/two-numa.yaml");
    let xml = repo().join("testdata/topologies/hwloc-xml/hwloc-16amd64-4distances.xml");
    let overrides = Overrides::default();
    let source = |node: &Path, file: Option<&Path>, fallback: Option<&Path>, without: WithoutConfig| {
        let started = start(&NodeInputs {
            fallback_kubelet_config: fallback.map(Path::to_path_buf),
            without_config: without,
            ..NodeInputs::new(Some(node), file, &overrides)
        })
        .unwrap();
        started.kubelet_source
    };
    let kubelet = WithoutConfig::KubeletDefaults;
    assert_eq!(
        source(&node, Some(&file), Some(&fallback), kubelet),
        file.display().to_string()
    );
    assert_eq!(
        source(&node, None, Some(&fallback), kubelet),
        fallback.display().to_string()
    );
    assert!(source(&node, None, None, kubelet).starts_with("the kubelet block of"));
    assert_eq!(source(&xml, None, None, kubelet), "kubelet defaults");
    assert!(source(&xml, None, None, WithoutConfig::AgentDefaults).starts_with("the agent's defaults"));
}

#[test]
fn overrides_are_laid_over_the_configuration() {
    let node = repo().join("examples/nodes/two-numa.yaml");
    let overrides = Overrides {
        policy: Some(topoalign_engine::TopologyPolicyName::Restricted),
        cpu_policy_options: vec!["full-pcpus-only=true".into()],
        feature_gates: vec!["CPUManagerPolicyOptions=true".into()],
        ..Overrides::default()
    };
    let started = start(&NodeInputs::new(Some(&node), None, &overrides)).unwrap();
    assert_eq!(started.kubelet["topologyManagerPolicy"], "restricted");
    assert_eq!(started.kubelet["cpuManagerPolicyOptions"]["full-pcpus-only"], "true");
    assert_eq!(started.kubelet["featureGates"]["CPUManagerPolicyOptions"], true);

    let bad = Overrides {
        feature_gates: vec!["CPUManagerPolicyOptions=yes".into()],
        ..Overrides::default()
    };
    let error = start(&NodeInputs::new(Some(&node), None, &bad)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "--feature-gate \"CPUManagerPolicyOptions=yes\": expected NAME=true or NAME=false"
    );
}

/// One text for a refusal, with the kubelet's own words, wherever the
/// configuration came from.
#[test]
fn a_refusal_is_the_kubelets_text_once() {
    let node = repo().join("examples/nodes/two-numa.yaml");
    let overrides = Overrides {
        reserved_cpus: Some("0-99".into()),
        ..Overrides::default()
    };
    let inputs = NodeInputs {
        without_config: WithoutConfig::KubeletDefaults,
        ..NodeInputs::new(Some(&node), None, &overrides)
    };
    let error = start(&inputs).unwrap_err();
    assert!(matches!(error, IntakeError::Refused(_)), "{error:?}");
    assert_eq!(
        error.to_string(),
        "the kubelet would refuse to start: reserved-cpus: 0-99 is not a subset of online-cpus: 0-15"
    );
}

#[test]
fn bad_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yaml");
    let error = read_node_file(Some(&missing)).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with(&format!("cannot read {}", missing.display())),
        "{error}"
    );

    let broken = write(dir.path(), "broken.yaml", "topology: {numaNodes: 3}\n");
    let error = read_node_file(Some(&broken)).unwrap_err();
    assert!(error.to_string().starts_with(&broken.display().to_string()), "{error}");

    let node = repo().join("examples/nodes/two-numa.yaml");
    let not_kubelet = write(dir.path(), "kubelet.yaml", "kind: Pod\n");
    let overrides = Overrides::default();
    let error = start(&NodeInputs::new(Some(&node), Some(&not_kubelet), &overrides)).unwrap_err();
    assert!(
        error.to_string().starts_with(&not_kubelet.display().to_string()),
        "{error}"
    );
}

#[test]
fn a_fleet_reads_its_scenarios_relative_to_itself() {
    let fleet = read_fleet(&repo().join("examples/fleet/fleet.yaml"), None).unwrap();
    assert!(!fleet.groups.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let bad = write(
        dir.path(),
        "fleet.yaml",
        "nodes: [{name: a, count: 1, scenario: nowhere.yaml}]\n",
    );
    let error = read_fleet(&bad, None).unwrap_err();
    let text = error.to_string();
    assert!(text.starts_with(&format!("{}: invalid fleet", bad.display())), "{text}");
    assert!(text.contains("nowhere.yaml"), "{text}");
}

/// A fleet's `kubeletVersion` is its nodes' default, a node's own wins, and
/// `--kubelet-version` fills in only for nodes that name none; a node naming
/// another release than the flag, or an unsupported one, is an error naming
/// the entry.
#[test]
fn a_fleet_names_its_kubelet_releases() {
    use topoalign_model::KubeletVersion;
    let dir = tempfile::tempdir().unwrap();
    let topology = r#"{numaNodes: [{id: 0, memory: 4Gi}], cpus: [{id: 0, core: 0, socket: 0, numa: 0}]}"#;
    let fleet_text = |default: &str, node: &str| {
        format!("{default}nodes:\n  - {{name: a, topology: {topology}{node}}}\n  - {{name: b, topology: {topology}}}\n")
    };
    let versions = |path: &Path, flag: Option<KubeletVersion>| {
        read_fleet(path, flag).map(|fleet| {
            fleet
                .groups
                .iter()
                .map(|g| {
                    g.spec
                        .kubelet
                        .get("kubeletVersion")
                        .and_then(|v| v.as_str())
                        .map(str::to_owned)
                })
                .collect::<Vec<_>>()
        })
    };
    let some = |v: &str| Some(v.to_owned());

    let mixed = write(
        dir.path(),
        "mixed.yaml",
        &fleet_text("kubeletVersion: \"1.33\"\n", ", kubelet: {kubeletVersion: \"1.32\"}"),
    );
    assert_eq!(versions(&mixed, None).unwrap(), [some("1.32"), some("1.33")]);
    let error = versions(&mixed, Some(KubeletVersion::V1_33)).unwrap_err().to_string();
    assert!(error.contains("nodes[0] (a).kubelet: kubeletVersion:"), "{error}");

    let plain = write(dir.path(), "plain.yaml", &fleet_text("", ""));
    assert_eq!(versions(&plain, None).unwrap(), [None, None]);
    assert_eq!(
        versions(&plain, Some(KubeletVersion::V1_34)).unwrap(),
        [some("1.34"), some("1.34")]
    );

    let unsupported = write(
        dir.path(),
        "old.yaml",
        &fleet_text("", ", kubelet: {kubeletVersion: \"1.28\"}"),
    );
    let error = versions(&unsupported, None).unwrap_err().to_string();
    assert!(
        error.contains("nodes[0].kubelet: kubeletVersion: kubelet \"1.28\" is not supported"),
        "{error}"
    );
    let bad_default = write(dir.path(), "bad.yaml", &fleet_text("kubeletVersion: 1.99\n", ""));
    let error = versions(&bad_default, None).unwrap_err().to_string();
    assert!(error.contains("kubeletVersion: "), "{error}");
}

/// NUMA ids up to 1023 are read as the kubelet reads them: the machine is
/// numbered anew and keeps the ids as labels, with a note on what the
/// kubelet does with ids past its 64-bit masks; past 1023 the file and the
/// id are named.
#[test]
fn numa_ids_past_63_are_read_with_labels() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = |ids: [usize; 2]| {
        format!(
            "topology:\n  numaNodes:\n    - {{id: {a}, memory: 4Gi}}\n    - {{id: {b}, memory: 4Gi}}\n  cpus:\n    \
             - {{id: 0, core: 0, socket: 0, numa: {a}}}\n    - {{id: 1, core: 1, socket: 1, numa: {b}}}\n  devices:\n    \
             example.com/dev:\n      - {{id: d1, numa: [{b}]}}\n",
            a = ids[0],
            b = ids[1]
        )
    };
    let path = write(dir.path(), "sparse.yaml", &scenario([0, 64]));
    let node = read_node_file(Some(&path)).unwrap();
    let machine = &node.machine;
    assert_eq!(machine.numa_labels(), Some(&[0, 64][..]));
    assert_eq!(machine.numa_id_of_label(64), Some(1));
    assert_eq!(machine.cpus()[1].numa, 1);
    assert_eq!(machine.devices()["example.com/dev"][0].numa, vec![1]);
    assert!(
        node.notes
            .iter()
            .any(|n| n.contains("64") && n.contains("64-bit NUMA masks")),
        "{:?}",
        node.notes
    );

    // The same machine with ids 0 and 1 is the renumbered one, without notes.
    let dense = read_node_file(Some(&write(dir.path(), "dense.yaml", &scenario([0, 1])))).unwrap();
    assert!(dense.notes.is_empty(), "{:?}", dense.notes);
    assert_eq!(dense.machine.numa_nodes(), machine.numa_nodes());
    assert_eq!(dense.machine.cpus(), machine.cpus());

    // A node started on it runs under the kubelet's defaults (policy none).
    let overrides = Overrides::default();
    let started = start(&NodeInputs::new(Some(&path), None, &overrides)).unwrap();
    assert_eq!(started.node.machine().numa_label(1), 64);

    let past = write(dir.path(), "past.yaml", &scenario([0, 1024]));
    let error = read_node_file(Some(&past)).unwrap_err().to_string();
    assert!(error.contains("past.yaml") && error.contains("1024"), "{error}");
}
