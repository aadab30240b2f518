//! `topoalign simulate` on a fleet whose GPUs come from DRA and whose pods
//! ask for them as a plain extended resource (`example.com/gpu: 1`, served
//! by the DeviceClass's `extendedResourceName`, KEP-5004): the real binary
//! on examples/fleet/dra-extended-fleet.yaml and dra-extended-workload.yaml.
//!
//! The expected answers come from the fleet's construction (its header says
//! why), as for the claims of simulate_dra.rs: each node runs two of the
//! four pods (3 exclusive CPUs each; NUMA 0 has 4 CPUs for pods, NUMA 1
//! has 3); the kubelet pins a node's first pod to NUMA 0 and its second to
//! NUMA 1; the allocator takes the first free GPU of the node's slice:
//! swapped-0 lists its NUMA 1 GPU first, straight-0 its NUMA 0 GPU. So:
//! - the stock scheduler (`unaware`, spreading) puts two pods on each node
//!   and misaligns exactly the two on swapped-0, each device being the
//!   special claim's one request, `container-0-request-1` (the container's
//!   requests sorted: cpu, example.com/gpu, memory);
//! - `nrt` places none: NodeResourceTopologyMatch reads the node's
//!   allocatable, which has no example.com/gpu (scheduler-plugins refuses a
//!   resource the node does not list);
//! - topoalign (`exact`) passes only straight-0: two placed, aligned, two
//!   never placed;
//! - on 1.35 (DRAExtendedResource off) the scheduler's resource fit finds no
//!   example.com/gpu anywhere: no pod is placed by any scheduler;
//! - without the fleet's `dra:` block the device plugin serves the GPUs:
//!   nothing is DRA's.

mod agent_support;
mod common;

use std::path::{Path, PathBuf};

use common::{fleet_example, run_of as run};
use serde_json::Value;

const FLEET: &str = "dra-extended-fleet.yaml";
const WORKLOAD: &str = "dra-extended-workload.yaml";

/// `simulate -o json --verify` of `fleet` and the example workload.
fn simulate(fleet: &Path) -> Value {
    common::simulate_json(fleet, WORKLOAD, &["--verify"])
}

/// The example fleet file with `edit` applied, in `dir`.
fn edited_fleet(dir: &Path, edit: impl Fn(&str) -> String) -> PathBuf {
    let text = std::fs::read_to_string(fleet_example(FLEET)).expect("the example fleet");
    let edited = edit(&text);
    assert_ne!(edited, text, "the edit changes the fleet");
    let path = dir.join("fleet.yaml");
    std::fs::write(&path, edited).expect("written");
    path
}

#[test]
fn stock_placement_misaligns_the_special_claims_on_the_swapped_node_and_topoalign_none() {
    let doc = simulate(&fleet_example(FLEET));
    assert_eq!(doc["nodes"], 2);
    assert_eq!(doc["pods"], 4);

    let stock = run(&doc, "unaware");
    assert_eq!(stock["scheduled"], 4, "{stock}");
    assert_eq!(stock["rejectedAtAdmission"], 0, "{stock}");
    assert_eq!(stock["replayRejectedAtAdmission"], 0, "{stock}");
    assert_eq!(stock["draPods"], 4, "{stock}");
    assert_eq!(stock["draMisaligned"], 2, "{stock}");
    let pods = stock["draMisalignedPods"].as_array().expect("named pods");
    assert_eq!(pods.len(), 2, "{stock}");
    let mut pinned_nodes = Vec::new();
    for pod in pods {
        assert!(pod["pod"].as_str().is_some_and(|p| p.starts_with("ml/train-")), "{pod}");
        assert_eq!(pod["node"], "swapped-0", "{pod}");
        let numa = pod["kubeletNumaNodes"].as_array().expect("NUMA nodes");
        assert_eq!(numa.len(), 1, "{pod}");
        let pinned = numa[0].as_u64().expect("a NUMA node");
        let devices = pod["devices"].as_array().expect("devices");
        assert_eq!(devices.len(), 1, "{pod}");
        // The GPU of the other NUMA node: gpu1 for the pod on NUMA 0.
        let other = 1 - pinned;
        assert_eq!(
            devices[0],
            format!("extended-resources/container-0-request-1: gpu{other} on NUMA node {other}"),
            "{pod}"
        );
        pinned_nodes.push(pinned);
    }
    pinned_nodes.sort_unstable();
    assert_eq!(pinned_nodes, [0, 1]);

    let nrt = run(&doc, "nrt");
    assert_eq!(nrt["scheduled"], 0, "{nrt}");
    assert_eq!(nrt["unplaced"], 4, "{nrt}");
    assert_eq!(
        nrt["unplacedReasons"]["NodeResourceTopologyMatch or DRA refused every node with room"], 4,
        "{nrt}"
    );

    let exact = run(&doc, "exact");
    assert_eq!(exact["scheduled"], 2, "{exact}");
    assert_eq!(exact["draPods"], 2, "{exact}");
    assert!(exact.get("draMisaligned").is_none(), "0 is left out: {exact}");
    assert_eq!(exact["unplaced"], 2, "{exact}");
    assert_eq!(
        exact["unplacedReasons"]["no node with room admits it with its DRA devices on the kubelet's NUMA nodes"], 2,
        "{exact}"
    );
    assert_eq!(exact["replayRejectedAtAdmission"], 0, "{exact}");
}

#[test]
fn with_the_feature_off_no_node_has_room_for_the_resource() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let fleet = edited_fleet(dir.path(), |text| {
        text.replace("kubeletVersion: \"1.37\"", "kubeletVersion: \"1.35\"")
    });
    let doc = simulate(&fleet);
    for scheduler in ["unaware", "nrt", "exact"] {
        let run = run(&doc, scheduler);
        assert_eq!(run["scheduled"], 0, "{run}");
        assert_eq!(run["unplaced"], 4, "{run}");
        assert_eq!(run["unplacedReasons"]["no node has room for its requests"], 4, "{run}");
        assert!(run.get("draPods").is_none(), "{run}");
    }
}

#[test]
fn a_device_plugin_serving_the_resource_leaves_dra_nothing() {
    let dir = tempfile::tempdir().expect("temporary directory");
    // The drivers line gone: the nodes' device plugins keep their GPUs and
    // advertise them; the class still names the resource.
    let fleet = edited_fleet(dir.path(), |text| {
        text.replace("  drivers: [example.com/gpu=gpu.example.com]\n", "")
    });
    let doc = simulate(&fleet);
    let stock = run(&doc, "unaware");
    assert_eq!(stock["scheduled"], 4, "{stock}");
    assert!(stock.get("draPods").is_none(), "{stock}");
    // The device manager aligns each GPU with its pod's CPUs under
    // single-numa-node: nothing to misalign, nothing rejected.
    assert_eq!(stock["rejectedAtAdmission"], 0, "{stock}");
    let exact = run(&doc, "exact");
    assert_eq!(exact["scheduled"], 4, "{exact}");
    assert!(exact.get("draPods").is_none(), "{exact}");
}

#[test]
fn the_table_counts_them_among_the_dra_pods() {
    let output = common::simulate(&fleet_example(FLEET), WORKLOAD, &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    assert!(text.contains("DRA misaligned"), "{text}");
    assert!(
        text.contains("single-numa-node / as-configured / unaware: 2 of 4 DRA pods"),
        "{text}"
    );
}
