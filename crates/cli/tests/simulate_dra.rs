//! `topoalign simulate` on a fleet whose GPUs come from DRA: the real
//! binary on examples/fleet/dra-fleet.yaml and dra-workload.yaml.
//!
//! The expected answers come from the fleet's construction (its header
//! says why): each node runs exactly two of the four pods; on `swapped-0`
//! the scheduler's first-fit allocator gives each pod the GPU of the NUMA
//! node its CPUs are *not* on, whichever pods they are; on `straight-0`
//! each pod's GPU and CPUs share a NUMA node. So the stock scheduler
//! (`unaware`) places all four and misaligns exactly the two on
//! `swapped-0`, and topoalign (`exact`, as the extender's `--dra-align`)
//! places two, both on `straight-0`, misaligns none, and leaves two
//! unplaced.

mod agent_support;
mod common;

use common::{fleet_example, run_of as run, topoalign};
use serde_json::Value;

const FLEET: &str = "dra-fleet.yaml";
const WORKLOAD: &str = "dra-workload.yaml";

fn simulate(extra: &[&str]) -> std::process::Output {
    common::simulate(&fleet_example(FLEET), WORKLOAD, extra)
}

fn simulate_json(extra: &[&str]) -> Value {
    common::simulate_json(&fleet_example(FLEET), WORKLOAD, extra)
}

#[test]
fn stock_placement_misaligns_the_pods_on_the_swapped_node_and_topoalign_none() {
    let doc = simulate_json(&["--verify"]);
    assert_eq!(doc["nodes"], 2);
    assert_eq!(doc["pods"], 4);

    for stock in ["unaware", "nrt"] {
        let stock = run(&doc, stock);
        assert_eq!(stock["scheduled"], 4, "{stock}");
        assert_eq!(stock["draPods"], 4, "{stock}");
        assert_eq!(stock["draMisaligned"], 2, "{stock}");
        let pods = stock["draMisalignedPods"].as_array().expect("named pods");
        assert_eq!(pods.len(), 2, "{stock}");
        let mut kubelet_numa = Vec::new();
        for pod in pods {
            assert!(pod["pod"].as_str().is_some_and(|p| p.starts_with("ml/train-")), "{pod}");
            assert_eq!(pod["node"], "swapped-0", "{pod}");
            // One GPU, on the NUMA node the kubelet did not pin.
            let numa = pod["kubeletNumaNodes"].as_array().expect("NUMA nodes");
            assert_eq!(numa.len(), 1, "{pod}");
            let pinned = numa[0].as_u64().expect("a NUMA node");
            let devices = pod["devices"].as_array().expect("devices");
            assert_eq!(devices.len(), 1, "{pod}");
            let device = devices[0].as_str().expect("text");
            assert!(device.starts_with("gpu/gpu: gpu"), "{device}");
            assert!(device.ends_with(&format!("on NUMA node {}", 1 - pinned)), "{device}");
            kubelet_numa.push(pinned);
        }
        // The first pod there has its CPUs on NUMA 0, the second on NUMA 1.
        kubelet_numa.sort_unstable();
        assert_eq!(kubelet_numa, [0, 1]);
    }

    let exact = run(&doc, "exact");
    assert_eq!(exact["scheduled"], 2, "{exact}");
    assert_eq!(exact["draPods"], 2, "{exact}");
    assert!(exact.get("draMisaligned").is_none(), "0 is left out: {exact}");
    assert!(exact.get("draMisalignedPods").is_none(), "{exact}");
    assert_eq!(exact["unplaced"], 2, "{exact}");
    assert_eq!(
        exact["unplacedReasons"]["no node with room admits it with its DRA devices on the kubelet's NUMA nodes"], 2,
        "{exact}"
    );
    assert_eq!(exact["replayRejectedAtAdmission"], 0, "{exact}");
}

#[test]
fn the_table_counts_misaligned_pods_and_names_them() {
    let output = simulate(&[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(text.contains("DRA misaligned"), "{text}");
    assert!(text.contains("2 of 4"), "{text}");
    assert!(text.contains("0 of 2"), "{text}");
    assert!(
        text.contains("single-numa-node / as-configured / unaware: 2 of 4 DRA pods"),
        "{text}"
    );
    assert_eq!(text.matches(" on swapped-0: gpu/gpu: gpu").count(), 4, "{text}");
}

#[test]
fn the_chart_gains_a_dra_panel() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let svg = dir.path().join("report.svg");
    let output = simulate(&["--plot", svg.to_str().expect("path")]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let drawn = std::fs::read_to_string(&svg).expect("SVG written");
    assert!(drawn.contains("Pods whose DRA devices miss their CPUs"), "no DRA panel");
}

#[test]
fn claims_without_a_dra_block_are_refused_naming_the_pod() {
    let output = topoalign()
        .arg("simulate")
        .arg(fleet_example("fleet.yaml"))
        .arg(fleet_example(WORKLOAD))
        .output()
        .expect("runs");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("pod ml/train-0 takes DRA claims"), "{stderr}");
    assert!(stderr.contains("no `dra:` block"), "{stderr}");
}

#[test]
fn drivers_can_come_from_the_command_line() {
    // The fleet's drivers given again with --dra change nothing.
    let doc = simulate_json(&["--dra", "example.com/gpu=gpu.example.com"]);
    assert_eq!(run(&doc, "unaware")["draMisaligned"], 2);
}
