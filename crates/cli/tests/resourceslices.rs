//! `topoalign topology -o resourceslices` driven as a user would: the
//! output read back the way `kubectl apply -f` reads it (YAML 1.1 through
//! `sigs.k8s.io/yaml`, then JSON into the API type), checked against the
//! API server's rules that hold offline, and the flags' errors.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use predicates::prelude::*;
use topoalign_discovery::resourceslices::{ResourceSlice, validate_resource_slice};

fn capture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/topologies/sysfs")
        .join(name)
}

fn topoalign() -> Command {
    Command::cargo_bin("topoalign").expect("binary is built")
}

/// The documents of `text` as Kubernetes reads YAML, into the API type.
fn read_slices(text: &str) -> Vec<ResourceSlice> {
    topoalign_k8s::go_yaml::documents(text)
        .map(|doc| doc.expect("YAML"))
        .filter(|doc| !doc.is_null())
        .map(|doc| serde_json::from_value(doc).expect("a ResourceSlice"))
        .collect()
}

fn dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    let edge = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    name.len() <= 63
        && bytes.first().is_some_and(edge)
        && bytes.last().is_some_and(edge)
        && bytes.iter().all(|b| edge(b) || *b == b'-')
}

/// `ID` or `domain/ID`, the ID a C identifier of at most 32 characters.
fn qualified(name: &str) -> bool {
    let id = name.rsplit_once('/').map_or(name, |(_, id)| id);
    id.len() <= 32
        && id.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.matches('/').count() <= 1
}

#[test]
fn a_capture_becomes_slices_kubectl_would_apply() {
    let output = topoalign()
        .args(["topology", "-o", "resourceslices", "--node-name", "worker-1", "--sysfs"])
        .arg(capture("hwloc-32em64t-2n8c+1mic.tar.bz2"))
        .output()
        .expect("runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("warning: NVMe 0000:00:02.0: its numa_node is -1 (no NUMA affinity)"),
        "{stderr}"
    );
    let text = String::from_utf8(output.stdout).expect("UTF-8");
    let slices = read_slices(&text);
    assert_eq!(slices.len(), 1);
    let slice = &slices[0];
    assert_eq!(validate_resource_slice(slice), Vec::<String>::new());
    assert_eq!(slice.metadata.name.as_deref(), Some("worker-1-pci.topoalign.io-0"));
    assert_eq!(slice.spec.node_name.as_deref(), Some("worker-1"));
    assert_eq!(slice.spec.driver, "pci.topoalign.io");
    assert_eq!(slice.spec.pool.name, "worker-1");
    assert_eq!(slice.spec.pool.resource_slice_count, 1);
    let devices = slice.spec.devices.as_deref().expect("devices");
    assert!(devices.len() <= 128);
    let mut names = BTreeSet::new();
    for device in devices {
        assert!(dns_label(&device.name), "{}", device.name);
        assert!(names.insert(device.name.as_str()), "unique: {}", device.name);
        let attributes = device.attributes.as_ref().expect("attributes");
        assert!(attributes.len() <= 32);
        for name in attributes.keys() {
            assert!(qualified(name), "{name}");
        }
        // Addresses stay strings however YAML 1.1 would read them.
        let address = attributes["pciAddress"].string.as_deref().expect("a string");
        assert_eq!(device.name, format!("pci-{}", address.replace([':', '.'], "-")));
    }
    let infiniband = devices
        .iter()
        .find(|d| d.name == "pci-0000-82-00-0")
        .and_then(|d| d.attributes.as_ref());
    let infiniband = infiniband.expect("the InfiniBand HCA");
    assert_eq!(infiniband["resource.kubernetes.io/numaNode"].int, Some(1));
    assert_eq!(
        infiniband["resource.kubernetes.io/pcieRoot"].string.as_deref(),
        Some("pci0000:80")
    );
    let nvme = devices
        .iter()
        .find(|d| d.name == "pci-0000-00-02-0")
        .expect("the NVMe drive");
    assert!(
        !nvme
            .attributes
            .as_ref()
            .expect("attributes")
            .contains_key("resource.kubernetes.io/numaNode")
    );
}

#[test]
fn driver_pool_and_the_list_form_are_the_users() {
    let output = topoalign()
        .args([
            "topology",
            "-o",
            "resourceslices",
            "--node-name",
            "gpu-7",
            "--driver",
            "locality.example.com",
            "--pool",
            "gpu-7/pci",
            "--numa-node-form",
            "list",
            "--node",
        ])
        .arg(capture("ocp-bm-master.internal.sysinfo.tgz"))
        .output()
        .expect("runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let slices = read_slices(&String::from_utf8(output.stdout).expect("UTF-8"));
    let slice = &slices[0];
    assert_eq!(validate_resource_slice(slice), Vec::<String>::new());
    assert_eq!(slice.spec.driver, "locality.example.com");
    assert_eq!(slice.spec.pool.name, "gpu-7/pci");
    let lists: Vec<Vec<i64>> = slice
        .spec
        .devices
        .iter()
        .flatten()
        .filter_map(|d| {
            d.attributes
                .as_ref()?
                .get("resource.kubernetes.io/numaNode")?
                .ints
                .clone()
        })
        .collect();
    // Two sockets of one NUMA node each: every list is one node; both
    // nodes have devices.
    assert!(lists.contains(&vec![0]) && lists.contains(&vec![1]), "{lists:?}");
    assert!(lists.iter().all(|l| l.len() == 1));
}

#[test]
fn flags_that_cannot_work_are_errors_naming_the_flag() {
    let file = capture("hwloc-32em64t-2n8c+1mic.tar.bz2");
    topoalign()
        .args(["topology", "-o", "resourceslices", "--sysfs"])
        .arg(&file)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("needs --node-name NAME"));
    topoalign()
        .args(["topology", "-o", "json", "--driver", "x.io", "--sysfs"])
        .arg(&file)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--driver is only for -o resourceslices"));
    for (flag, value) in [
        ("--driver", "not a driver"),
        ("--pool", "a//b"),
        ("--node-name", "Worker_1"),
    ] {
        let mut args = vec!["topology", "-o", "resourceslices", "--node-name", "w1"];
        if flag == "--node-name" {
            args.truncate(3);
        }
        args.extend([flag, value, "--sysfs"]);
        topoalign()
            .args(&args)
            .arg(&file)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(format!("{flag}: ")));
    }
}
