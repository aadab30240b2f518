//! `topoalign simulate` on fleets whose nodes have NUMA ids of 64 and more
//! (issue #29). The kubelet under topology manager policy `none` decides as
//! on the machine renumbered `0..n` in id order, so the report on NUMA ids
//! {0, 64} must be the report on {0, 1} with every NUMA id it prints mapped
//! (zone names `node-<id>`, the kubelet's NUMA nodes and the DRA devices'
//! NUMA nodes of misaligned pods). Every expected answer is derived by
//! running the same fleet renumbered; none is written down. Under every
//! other policy the kubelet crashes admitting any pod: no pod is admitted,
//! each one placed counts as a failed admission whose reason is the crash.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fleet")
}

/// The example fleet `name`, as JSON.
fn example_fleet(name: &str) -> Value {
    let text = std::fs::read_to_string(examples().join(name)).expect("example fleet");
    serde_yaml_ng::from_str(&text).expect("fleet YAML")
}

/// `fleet` with every NUMA id of its nodes' topologies mapped by `map`:
/// the NUMA nodes' ids, the CPUs' and devices' NUMA nodes.
fn relabel(fleet: &Value, map: impl Fn(u64) -> u64) -> Value {
    let mut fleet = fleet.clone();
    let id = |v: &mut Value| *v = Value::from(map(v.as_u64().expect("a NUMA id")));
    for node in fleet["nodes"].as_array_mut().expect("nodes") {
        let topology = &mut node["topology"];
        for numa in topology["numaNodes"].as_array_mut().expect("numaNodes") {
            id(&mut numa["id"]);
        }
        for cpu in topology["cpus"].as_array_mut().expect("cpus") {
            id(&mut cpu["numa"]);
        }
        if let Some(devices) = topology.get_mut("devices").and_then(Value::as_object_mut) {
            for list in devices.values_mut() {
                for device in list.as_array_mut().expect("devices") {
                    for numa in device["numa"].as_array_mut().expect("device NUMA nodes") {
                        id(numa);
                    }
                }
            }
        }
    }
    fleet
}

/// `simulate FLEET WORKLOAD -o json EXTRA`, the fleet written as JSON.
fn simulate(fleet: &Value, workload: &Path, extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("fleet.json");
    std::fs::write(&path, fleet.to_string()).expect("fleet written");
    let output = Command::cargo_bin("topoalign")
        .expect("binary is built")
        .arg("simulate")
        .arg(&path)
        .arg(workload)
        .args(["-o", "json"])
        .args(extra)
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

/// The report of the fleet on NUMA ids {0, 1} with NUMA node 1 printed as
/// `label`: every place simulate prints a NUMA id.
fn map_report(report: &Value, label: u64) -> Value {
    let mut report = report.clone();
    let map = |n: u64| if n == 1 { label } else { n };
    for run in report["runs"].as_array_mut().expect("runs") {
        for zone in run
            .get_mut("strandedByZone")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            let name = zone["zone"].as_str().expect("zone name");
            let id: u64 = name.strip_prefix("node-").expect("node-<id>").parse().expect("id");
            zone["zone"] = Value::from(format!("node-{}", map(id)));
        }
        for pod in run
            .get_mut("draMisalignedPods")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            for numa in pod["kubeletNumaNodes"].as_array_mut().expect("NUMA nodes") {
                *numa = Value::from(map(numa.as_u64().expect("id")));
            }
            for device in pod["devices"].as_array_mut().expect("devices") {
                let text = device.as_str().expect("text").to_owned();
                let (head, id) = text.rsplit_once("on NUMA node ").expect("names its NUMA node");
                let id: u64 = id.parse().expect("one id");
                *device = Value::from(format!("{head}on NUMA node {}", map(id)));
            }
        }
    }
    report
}

fn zones_named(report: &Value) -> Vec<String> {
    let mut names: Vec<String> = report["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .flat_map(|run| run["strandedByZone"].as_array().cloned().unwrap_or_default())
        .map(|zone| zone["zone"].as_str().expect("zone").to_owned())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The device-plugin fleet: the DRA example's nodes with their GPUs left
/// to the device plugin, three of each, and a generated workload that
/// leaves pods unplaced (so capacity is stranded on both NUMA nodes).
fn device_plugin_case() -> (Value, tempfile::TempDir, PathBuf) {
    let mut fleet = example_fleet("dra-fleet.yaml");
    fleet.as_object_mut().expect("fleet").remove("dra");
    for node in fleet["nodes"].as_array_mut().expect("nodes") {
        node["count"] = Value::from(3);
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let workload = dir.path().join("workload.yaml");
    std::fs::write(
        &workload,
        "generator:\n  pods: 60\n  seed: 3\n  sizes:\n    - {weight: 2, cpu: \"2\", memory: 2Gi}\n    \
         - {weight: 1, cpu: \"3\", memory: 5Gi}\n    - {weight: 1, cpu: 500m, memory: 1Gi}\n  gpuShare: 0.4\n  \
         gpuResource: example.com/gpu\n  gpus: 1\n  guaranteedShare: 0.8\n  churn: 0.3\n",
    )
    .expect("workload written");
    (fleet, dir, workload)
}

#[test]
fn under_none_the_report_on_ids_0_64_is_the_renumbered_machines_with_ids_mapped() {
    let (fleet, _dir, workload) = device_plugin_case();
    let plain = simulate(&fleet, &workload, &["--policy", "none", "--verify"]);
    let labelled = simulate(
        &relabel(&fleet, |n| if n == 1 { 64 } else { n }),
        &workload,
        &["--policy", "none", "--verify"],
    );
    assert_eq!(labelled, map_report(&plain, 64));
    // Not vacuous: something is stranded on the second NUMA node, which
    // is named by its own id.
    assert_eq!(zones_named(&plain), ["node-0", "node-1"], "{plain}");
    assert_eq!(zones_named(&labelled), ["node-0", "node-64"], "{labelled}");
    let runs = labelled["runs"].as_array().expect("runs");
    assert!(runs.iter().any(|run| run["scheduled"].as_u64() > Some(0)), "{labelled}");
}

#[test]
fn dra_devices_on_numa_64_are_matched_to_their_zone_and_printed_by_id() {
    let fleet = example_fleet("dra-fleet.yaml");
    let workload = examples().join("dra-workload.yaml");
    let plain = simulate(&fleet, &workload, &["--policy", "none", "--verify"]);
    let labelled = simulate(
        &relabel(&fleet, |n| if n == 1 { 64 } else { n }),
        &workload,
        &["--policy", "none", "--verify"],
    );
    assert_eq!(labelled, map_report(&plain, 64));
    // The stock scheduler misaligns pods there: the kubelet's NUMA nodes
    // and the devices' are printed as the machine's ids.
    let unaware = labelled["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|run| run["scheduler"] == "unaware")
        .expect("unaware run");
    let text = unaware["draMisalignedPods"].to_string();
    assert!(text.contains("on NUMA node 64"), "{text}");
    assert!(!text.contains("on NUMA node 1\""), "{text}");
}

#[test]
fn under_single_numa_node_the_kubelet_crashes_and_admits_nothing() {
    let (fleet, _dir, workload) = device_plugin_case();
    let labelled = relabel(&fleet, |n| if n == 1 { 64 } else { n });
    let report = simulate(&labelled, &workload, &["--policy", "single-numa-node"]);
    let plain = simulate(&fleet, &workload, &["--policy", "single-numa-node"]);
    for run in report["runs"].as_array().expect("runs") {
        assert_eq!(run["scheduled"], 0, "no pod is admitted: {run}");
        if run["scheduler"] == "exact" {
            // The exact scheduler (the extender) fails every node.
            continue;
        }
        let rejected = run["rejectedAtAdmission"].as_u64().expect("count");
        assert!(rejected > 0, "{run}");
        let reasons = run["rejectionReasons"].as_object().expect("reasons");
        assert_eq!(
            reasons.values().filter_map(Value::as_u64).sum::<u64>(),
            rejected,
            "{run}"
        );
        for reason in reasons.keys() {
            assert!(
                reason.starts_with("KubeletPanic: the v1.37 kubelet panics admitting this pod"),
                "{reason}"
            );
            assert!(reason.contains("NUMA node id 64"), "{reason}");
            assert!(reason.contains("topology manager policy single-numa-node"), "{reason}");
        }
        for pod in run["rejectedPods"].as_array().expect("named") {
            assert!(
                pod["reason"].as_str().is_some_and(|r| r.starts_with("KubeletPanic: ")),
                "{pod}"
            );
        }
    }
    // The renumbered machine's kubelet runs and admits pods.
    let scheduled: u64 = plain["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["scheduled"].as_u64())
        .sum();
    assert!(scheduled > 0, "{plain}");
}
