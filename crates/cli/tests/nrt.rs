//! `topoalign nrt` as a user runs it: objects that validate against the
//! shipped CRD, and that `topoalign extender --nrt` reads back.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn crd_schema() -> serde_json::Value {
    let crd = std::fs::read_to_string(repo().join("deploy/noderesourcetopology-crd.yaml")).expect("CRD");
    topoalign_nrt::schema::crd_schema(&crd, "v1alpha2").expect("v1alpha2 schema")
}

#[test]
fn a_scenarios_node_as_yaml_validates_against_the_crd() {
    let output = Command::cargo_bin("topoalign")
        .expect("binary")
        .args(["nrt", "--name", "gpu-node"])
        .arg(repo().join("examples/scenarios/two-socket-gpu.yaml"))
        .output()
        .expect("runs");
    assert!(output.status.success());
    let objects = topoalign_nrt::object::parse_objects(&String::from_utf8_lossy(&output.stdout)).expect("objects");
    assert_eq!(objects.len(), 1);
    let value = serde_json::to_value(&objects[0]).expect("JSON");
    assert_eq!(
        topoalign_nrt::schema::validate(&crd_schema(), &value),
        Vec::<String>::new()
    );
    assert_eq!(objects[0].metadata.name, "gpu-node");
    // The scenario's training pod holds the GPU on NUMA 1.
    let zone1 = &objects[0].zones[1];
    let gpu = zone1
        .resources
        .iter()
        .find(|r| r.name == "nvidia.com/gpu")
        .expect("GPU listed");
    assert_eq!(gpu.available, "0");
    // Its exact-state attributes rebuild the node the scenario leaves.
    let text = std::fs::read_to_string(repo().join("examples/scenarios/two-socket-gpu.yaml")).expect("scenario");
    let scenario = topoalign_scenario::Scenario::parse(&text).expect("scenario parses");
    let (_, node) = topoalign_nrt::scenario_node(&scenario).expect("the scenario's node");
    let rebuilt = topoalign_nrt::restore(&objects[0]).expect("rebuilds").node;
    assert_eq!(rebuilt.state(), node.state());
    assert_eq!(rebuilt.devices_in_use(), node.devices_in_use());
}

#[test]
fn a_fleets_objects_feed_the_extender() {
    let dir = std::env::temp_dir().join(format!("topoalign-nrt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("nodes.json");
    Command::cargo_bin("topoalign")
        .expect("binary")
        .args(["nrt", "-o", "json", "--fleet"])
        .arg(repo().join("examples/fleet/fleet.yaml"))
        .arg("--out-file")
        .arg(&file)
        .assert()
        .success();
    let objects =
        topoalign_nrt::object::parse_objects(&std::fs::read_to_string(&file).expect("written")).expect("objects");
    assert_eq!(objects.len(), 24);
    let schema = crd_schema();
    for object in &objects {
        let value = serde_json::to_value(object).expect("JSON");
        assert_eq!(topoalign_nrt::schema::validate(&schema, &value), Vec::<String>::new());
    }
    // A bad file is refused with exit 2 before the extender listens.
    std::fs::write(dir.join("bad.yaml"), "kind: NodeResourceTopology\nzones: 3\n").expect("write");
    Command::cargo_bin("topoalign")
        .expect("binary")
        .args(["extender", "--listen", "127.0.0.1:0", "--nrt"])
        .arg(dir.join("bad.yaml"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("invalid NodeResourceTopology objects"));
    std::fs::remove_dir_all(&dir).ok();
}
