//! `topoalign topology` driven as a user would: the real binary on the real
//! machines of testdata/topologies, every output format, and the errors.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;

fn topologies() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies")
}

fn corona() -> PathBuf {
    topologies().join("hwloc-xml/mpibind-epyc-corona.xml")
}

fn topoalign() -> Command {
    Command::cargo_bin("topoalign").expect("binary is built")
}

fn scratch(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("topology-{name}"))
}

#[test]
fn text_shows_sockets_nodes_cores_devices_distances_and_gpu_links() {
    topoalign()
        .args(["topology", "--hwloc"])
        .arg(corona())
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "Summary  2 sockets · 8 NUMA nodes · 48 cores · 96 CPUs (2 threads/core) · 16 L3 groups",
        ))
        .stdout(predicate::str::contains("  NUMA node 5 · 12 CPUs · 32.0 GiB"))
        .stdout(predicate::str::contains("L3 #0 8.0 MiB   0+48 1+49 2+50"))
        .stdout(predicate::str::contains("GPU  53:00.0  1002:66a1"))
        .stdout(predicate::str::contains("     0 10 16 16 16 32 32 32 32"))
        .stdout(predicate::str::contains("GPU links (PCI topology)"))
        .stdout(predicate::str::contains("amd.com/gpu"));
}

#[test]
fn a_sysfs_capture_archive_is_read_directly() {
    topoalign()
        .args(["topology", "--sysfs"])
        .arg(topologies().join("sysfs/hwloc-16em64t-4s2c2t-offlines.tar.bz2"))
        .assert()
        .success()
        .stdout(predicate::str::contains("4 sockets · 1 NUMA node · 7 cores · 12 CPUs"))
        .stdout(predicate::str::contains(
            "! 4 CPU(s) offline or not available: 2,5,13-14",
        ));
}

/// `--node` reads a node file as `admit`, `agent` and `run` do, whatever
/// its kind: the same machine as the flag that names the kind.
#[test]
fn node_reads_every_kind_of_node_file_like_the_other_commands() {
    let capture = topologies().join("sysfs/hwloc-16em64t-4s2c2t-offlines.tar.bz2");
    for (kind, file) in [("--hwloc", corona()), ("--sysfs", capture)] {
        let named = topoalign()
            .args(["topology", "-o", "json", kind])
            .arg(&file)
            .output()
            .unwrap();
        let detected = topoalign()
            .args(["topology", "-o", "json", "--node"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            detected.status.success(),
            "{}",
            String::from_utf8_lossy(&detected.stderr)
        );
        assert_eq!(detected.stdout, named.stdout, "{kind}");
    }
    let scenario = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/nodes/two-numa.yaml");
    topoalign()
        .args(["topology", "--node"])
        .arg(&scenario)
        .assert()
        .success()
        .stdout(predicate::str::contains("2 NUMA nodes"));
    topoalign()
        .args(["topology", "--node", "/tmp", "--hwloc"])
        .arg(corona())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
}

#[test]
fn json_and_yaml_hold_the_whole_machine() {
    let output = topoalign()
        .args(["topology", "-o", "json", "--hwloc"])
        .arg(corona())
        .output()
        .expect("runs");
    assert!(output.status.success());
    let doc: Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(doc["numaNodes"].as_array().map(Vec::len), Some(8));
    assert_eq!(doc["packages"][1]["cpus"], "24-47,72-95");
    assert_eq!(doc["cpus"][48]["core"], 0, "CPU 48 is CPU 0's sibling");
    assert_eq!(doc["pciDevices"][0]["kind"], "nvme");
    assert_eq!(doc["numaNodes"][0]["distances"]["4"], 32);
    topoalign()
        .args(["topology", "-o", "yaml", "--hwloc"])
        .arg(corona())
        .assert()
        .success()
        .stdout(predicate::str::contains("numaNodes:"))
        .stdout(predicate::str::contains("cpuModel: AMD EPYC 7401 24-Core Processor"));
}

#[test]
fn a_machine_written_as_a_scenario_replays() {
    let scenario = scratch("corona-scenario.json");
    topoalign()
        .args(["topology", "-o", "scenario", "--out-file"])
        .arg(&scenario)
        .arg("--hwloc")
        .arg(corona())
        .assert()
        .success();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&scenario).expect("written")).expect("JSON");
    assert_eq!(doc["events"], serde_json::json!([]));
    assert_eq!(doc["topology"]["numaNodes"][0]["memory"], "33440596Ki");
    assert_eq!(
        doc["topology"]["devices"]["amd.com/gpu"][0]["numa"],
        serde_json::json!([1])
    );
    let replayed = topoalign().arg("replay").arg(&scenario).output().expect("runs");
    assert!(
        replayed.status.success(),
        "{}",
        String::from_utf8_lossy(&replayed.stdout)
    );
    let result: Value = serde_json::from_slice(&replayed.stdout).expect("result");
    assert_eq!(result["results"], serde_json::json!([]));
    // And read back: the same machine.
    topoalign()
        .args(["topology", "--scenario"])
        .arg(&scenario)
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "2 sockets · 8 NUMA nodes · 48 cores · 96 CPUs",
        ));
}

#[test]
fn pictures_as_svg_and_png() {
    topoalign()
        .args(["topology", "-o", "svg", "--hwloc"])
        .arg(corona())
        .assert()
        .success()
        .stdout(predicate::str::starts_with("<svg"))
        .stdout(predicate::str::contains(r#"id="cpu-95""#))
        .stdout(predicate::str::contains("NUMA 7 · 32.0 GiB"));
    let png = scratch("corona.png");
    topoalign()
        .args(["topology", "-o", "png", "--out-file"])
        .arg(&png)
        .arg("--hwloc")
        .arg(corona())
        .assert()
        .success();
    let bytes = std::fs::read(&png).expect("png written");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    topoalign()
        .args(["topology", "-o", "png", "--hwloc"])
        .arg(corona())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("give the file with --out-file FILE"));
}

#[test]
fn without_arguments_the_local_machine() {
    topoalign()
        .arg("topology")
        .assert()
        .success()
        .stdout(predicate::str::starts_with("Machine  sysfs /"))
        .stdout(predicate::str::contains("NUMA node 0"));
}

#[test]
fn unreadable_input_exits_2_naming_the_path() {
    topoalign()
        .args(["topology", "--sysfs", "/nonexistent/capture.tar.gz"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot read /nonexistent/capture.tar.gz"));
    let readme = topologies().join("README.md");
    topoalign()
        .args(["topology", "--hwloc"])
        .arg(&readme)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!(
            "{}: not an hwloc XML topology",
            readme.display()
        )));
    topoalign()
        .args(["topology", "--sysfs"])
        .arg(&readme)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot unpack the capture: not a tar archive"));
    topoalign()
        .args(["topology", "--sysfs", "/tmp", "--hwloc"])
        .arg(corona())
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot be used with"));
}

#[test]
fn gpu_memory_numa_nodes_are_in_the_scenario_with_their_ids_and_a_warning() {
    // POWER9: the GPUs' memory is NUMA nodes 250-255, without CPUs. The
    // kubelet counts them (cAdvisor lists every node directory), so the
    // scenario keeps them with their ids, and a warning says the kubelet's
    // 64-bit NUMA masks cannot hold them.
    let output = topoalign()
        .args(["topology", "-o", "scenario", "--sysfs"])
        .arg(topologies().join("sysfs/hwloc-nvidiagpunumanodes.tar.bz2"))
        .assert()
        .success()
        .stderr(predicate::str::contains("hold device memory"))
        .stderr(predicate::str::contains("64-bit NUMA masks"))
        .get_output()
        .stdout
        .clone();
    let scenario: serde_json::Value = serde_json::from_slice(&output).expect("a scenario");
    let ids: Vec<u64> = scenario["topology"]["numaNodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["id"].as_u64())
        .collect();
    assert_eq!(ids, vec![0, 8, 250, 251, 252, 253, 254, 255]);
    let cpu_nodes: std::collections::BTreeSet<u64> = scenario["topology"]["cpus"]
        .as_array()
        .expect("cpus")
        .iter()
        .filter_map(|c| c["numa"].as_u64())
        .collect();
    assert_eq!(cpu_nodes, [0, 8].into());
    // The scenario reads back as the same machine: `topology --scenario`
    // shows the same ids.
    let file = std::env::temp_dir().join(format!("topoalign-power9-scenario-{}.json", std::process::id()));
    std::fs::write(&file, &output).expect("write");
    let again = topoalign()
        .args(["topology", "-o", "json", "--scenario"])
        .arg(&file)
        .output()
        .expect("runs");
    std::fs::remove_file(&file).ok();
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let topology: serde_json::Value = serde_json::from_slice(&again.stdout).expect("JSON");
    let ids: Vec<u64> = topology["numaNodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter_map(|n| n["id"].as_u64())
        .collect();
    assert_eq!(ids, vec![0, 8, 250, 251, 252, 253, 254, 255]);
}
