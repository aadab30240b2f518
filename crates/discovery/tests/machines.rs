//! Every real machine of `testdata/topologies` (hwloc XML exports and sysfs
//! captures) loads and matches the figures of its `expected.json`: NUMA
//! nodes, packages, cores, PUs, L3 groups and memory, node by node; and the
//! sysfs reader agrees with hwloc where both views of one machine exist.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use topoalign_discovery::{DeviceKind, Topology, read_hwloc, read_sysfs};
use topoalign_model::CpuSet;

fn topologies() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies")
}

fn expected() -> BTreeMap<String, Value> {
    let text = std::fs::read_to_string(topologies().join("expected.json")).expect("expected.json");
    serde_json::from_str(&text).expect("expected.json is JSON")
}

fn set(list: &str) -> CpuSet {
    CpuSet::parse(list).expect("a CPU list")
}

fn count(value: &Value) -> usize {
    value.as_u64().expect("a count") as usize
}

/// CPU sets as comparable strings, order-independent.
fn sets<'a>(lists: impl Iterator<Item = &'a CpuSet>) -> BTreeSet<String> {
    lists.map(ToString::to_string).collect()
}

fn core_sets(t: &Topology) -> BTreeSet<String> {
    sets(t.cores().values())
}

fn check_hwloc(name: &str, truth: &Value) -> Result<(), String> {
    let t = read_hwloc(&topologies().join("hwloc-xml").join(name)).map_err(|e| e.to_string())?;
    let counts = &truth["counts"];
    let mut problems = Vec::new();
    let mut check = |what: &str, got: String, want: String| {
        if got != want {
            problems.push(format!("{what}: got {got}, expected {want}"));
        }
    };
    check(
        "packages",
        t.packages.len().to_string(),
        count(&counts["packages"]).to_string(),
    );
    check(
        "NUMA nodes",
        t.numa_nodes.len().to_string(),
        count(&counts["numa_nodes"]).to_string(),
    );
    check(
        "cores",
        t.cores().len().to_string(),
        count(&counts["cores"]).to_string(),
    );
    check("PUs", t.cpus.len().to_string(), count(&counts["pus"]).to_string());
    check(
        "L3",
        t.caches.len().to_string(),
        count(&counts["l3_caches"]).to_string(),
    );
    check(
        "PU ids",
        t.cpu_set().to_string(),
        set(truth["pus"].as_str().unwrap_or("")).to_string(),
    );
    let want_packages: BTreeSet<String> = truth["package_pus"]
        .as_object()
        .expect("package_pus")
        .values()
        .map(|v| set(v.as_str().unwrap_or("")).to_string())
        .collect();
    check(
        "package CPUs",
        format!("{:?}", sets(t.packages.iter().map(|p| &p.cpus))),
        format!("{want_packages:?}"),
    );
    let want_cores: BTreeSet<String> = truth["core_pus"]
        .as_array()
        .expect("core_pus")
        .iter()
        .map(|v| set(v.as_str().unwrap_or("")).to_string())
        .collect();
    if !want_cores.is_empty() {
        check("core CPUs", format!("{:?}", core_sets(&t)), format!("{want_cores:?}"));
    }
    let want_l3: BTreeSet<String> = truth["l3"]
        .as_array()
        .expect("l3")
        .iter()
        .map(|v| set(v["pus"].as_str().unwrap_or("")).to_string())
        .collect();
    check(
        "L3 CPUs",
        format!("{:?}", sets(t.caches.iter().map(|c| &c.cpus))),
        format!("{want_l3:?}"),
    );
    for (id, node) in truth["numa"].as_object().expect("numa") {
        let id: usize = id.parse().expect("node id");
        let Some(got) = t.numa_node(id) else {
            check("NUMA node", format!("none with id {id}"), format!("node {id}"));
            continue;
        };
        // expected.json writes 0 where hwloc gives no size.
        check(
            &format!("node {id} memory"),
            format!("{:?}", got.memory.or(Some(0))),
            format!("{:?}", node["memory_bytes"].as_u64()),
        );
        check(
            &format!("node {id} CPUs"),
            got.local_cpus.to_string(),
            set(node["cpuset_pus"].as_str().unwrap_or("")).to_string(),
        );
        let want_pages: BTreeMap<u64, u64> = node["hugepages"]
            .as_object()
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.parse().expect("size"), v.as_u64().expect("n")))
                    .collect()
            })
            .unwrap_or_default();
        let got_pages: BTreeMap<u64, u64> = got
            .hugepages
            .iter()
            .filter(|&(&size, _)| size > 65536)
            .map(|(&size, p)| (size, p.total))
            .collect();
        check(
            &format!("node {id} hugepages"),
            format!("{got_pages:?}"),
            format!("{want_pages:?}"),
        );
    }
    if let Some(matrix) = truth["distances"]
        .as_array()
        .and_then(|all| all.iter().find(|d| d["type"] == "NUMANode"))
    {
        let ids: Vec<usize> = matrix["indexes"]
            .as_array()
            .expect("indexes")
            .iter()
            .map(|i| i.as_str().and_then(|s| s.parse().ok()).expect("id"))
            .collect();
        for (row, from) in matrix["matrix"].as_array().expect("matrix").iter().zip(&ids) {
            let want: Vec<u64> = row
                .as_array()
                .expect("row")
                .iter()
                .map(|v| v.as_u64().expect("d"))
                .collect();
            let got: Vec<u64> = ids
                .iter()
                .map(|to| {
                    t.numa_node(*from)
                        .and_then(|n| n.distances.get(to))
                        .copied()
                        .unwrap_or(0)
                })
                .collect();
            check(
                &format!("node {from} distances"),
                format!("{got:?}"),
                format!("{want:?}"),
            );
        }
    }
    for device in truth["pci_of_interest"].as_array().into_iter().flatten() {
        let busid = device["busid"].as_str().expect("busid");
        let class = u32::from_str_radix(device["class"].as_str().expect("class"), 16).expect("hex") << 8;
        // hwloc's test files may repeat a bus id: match the class too.
        let Some(got) = t.pci_devices.iter().find(|d| d.address == busid && d.class == class) else {
            check("PCI device", "missing".into(), busid.into());
            continue;
        };
        let want: Vec<usize> = device["local_numa_nodes"]
            .as_array()
            .map(|a| a.iter().map(|n| n.as_u64().expect("node") as usize).collect())
            .unwrap_or_default();
        check(&format!("{busid} NUMA"), format!("{:?}", got.numa), format!("{want:?}"));
    }
    if let Some(absent) = truth["complete_cpuset_pus_absent_from_tree"].as_str() {
        check(
            "offline or disallowed",
            t.offline_cpus.to_string(),
            set(absent).to_string(),
        );
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n    "))
    }
}

fn check_sysfs(name: &str, raw: &Value) -> Result<(), String> {
    let t = read_sysfs(&topologies().join("sysfs").join(name)).map_err(|e| e.to_string())?;
    let counts = &raw["counts"];
    let mut problems = Vec::new();
    let mut check = |what: &str, got: String, want: String| {
        if got != want {
            problems.push(format!("{what}: got {got}, expected {want}"));
        }
    };
    check(
        "packages",
        t.packages.len().to_string(),
        count(&counts["packages"]).to_string(),
    );
    check(
        "NUMA nodes",
        t.numa_nodes.len().to_string(),
        count(&counts["numa_nodes"]).to_string(),
    );
    check(
        "cores",
        t.cores().len().to_string(),
        count(&counts["cores"]).to_string(),
    );
    check(
        "CPUs",
        t.cpus.len().to_string(),
        count(&counts["online_logical_cpus"]).to_string(),
    );
    check(
        "L3",
        t.caches.len().to_string(),
        count(&counts["l3_caches"]).to_string(),
    );
    check(
        "online CPUs",
        t.cpu_set().to_string(),
        set(raw["online_cpus_with_topology"].as_str().unwrap_or("")).to_string(),
    );
    for (os_id, cpus) in raw["package_cpus"].as_object().expect("package_cpus") {
        let os_id: i64 = os_id.parse().expect("package id");
        let got = t
            .packages
            .iter()
            .find(|p| p.os_id == Some(os_id))
            .map(|p| p.cpus.to_string());
        check(
            &format!("package {os_id}"),
            format!("{got:?}"),
            format!("{:?}", Some(set(cpus.as_str().unwrap_or("")).to_string())),
        );
    }
    let want_cores: BTreeSet<String> = raw["core_cpus"]
        .as_array()
        .expect("core_cpus")
        .iter()
        .map(|v| set(v.as_str().unwrap_or("")).intersection(&t.cpu_set()).to_string())
        .collect();
    check("core CPUs", format!("{:?}", core_sets(&t)), format!("{want_cores:?}"));
    let want_l3: BTreeSet<String> = raw["l3"]
        .as_array()
        .expect("l3")
        .iter()
        .map(|v| set(v["cpus"].as_str().unwrap_or("")).to_string())
        .collect();
    check(
        "L3 CPUs",
        format!("{:?}", sets(t.caches.iter().map(|c| &c.cpus))),
        format!("{want_l3:?}"),
    );
    let order: Vec<usize> = raw["numa_node_order"]
        .as_array()
        .map(|a| a.iter().map(|v| v.as_u64().expect("id") as usize).collect())
        .unwrap_or_default();
    for (id, node) in raw["numa"].as_object().expect("numa") {
        let id: usize = id.parse().expect("node id");
        let Some(got) = t.numa_node(id) else {
            check("NUMA node", format!("none with id {id}"), format!("node {id}"));
            continue;
        };
        check(
            &format!("node {id} memory"),
            format!("{:?}", got.memory),
            format!("{:?}", node["memory_bytes"].as_u64()),
        );
        check(
            &format!("node {id} cpulist"),
            got.local_cpus.to_string(),
            set(node["cpus"].as_str().unwrap_or("")).to_string(),
        );
        if let Some(row) = node["distance_row"].as_array() {
            let want: Vec<u64> = row.iter().map(|v| v.as_u64().expect("d")).collect();
            let got_row: Vec<u64> = order
                .iter()
                .map(|to| got.distances.get(to).copied().unwrap_or(0))
                .collect();
            check(
                &format!("node {id} distances"),
                format!("{got_row:?}"),
                format!("{want:?}"),
            );
        }
        if let Some(pages) = node["hugepages_nr"].as_object() {
            let want: BTreeMap<u64, u64> = pages
                .iter()
                .map(|(k, v)| (k.parse().expect("size"), v.as_u64().expect("n")))
                .collect();
            let got_pages: BTreeMap<u64, u64> = got.hugepages.iter().map(|(&s, p)| (s, p.total)).collect();
            check(
                &format!("node {id} hugepages"),
                format!("{got_pages:?}"),
                format!("{want:?}"),
            );
        }
    }
    for device in raw["pci_of_interest"].as_array().into_iter().flatten() {
        let bdf = device["bdf"].as_str().expect("bdf");
        let Some(got) = t.pci_devices.iter().find(|d| d.address == bdf) else {
            check("PCI device", "missing".into(), bdf.into());
            continue;
        };
        let want: Vec<usize> = device["numa_node"]
            .as_i64()
            .and_then(|n| usize::try_from(n).ok())
            .into_iter()
            .collect();
        check(&format!("{bdf} NUMA"), format!("{:?}", got.numa), format!("{want:?}"));
        check(
            &format!("{bdf} of interest"),
            got.kind.is_of_interest().to_string(),
            "true".into(),
        );
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n    "))
    }
}

#[test]
fn every_machine_matches_its_expected_figures() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for (name, entry) in expected() {
        let truth = &entry["truth"];
        let result = if let Some(raw) = truth.get("sysfs_raw") {
            check_sysfs(&name, raw)
        } else {
            check_hwloc(&name, truth)
        };
        checked += 1;
        if let Err(problem) = result {
            failures.push(format!("{name}:\n    {problem}"));
        }
    }
    assert_eq!(checked, 38, "every machine of the folder is checked");
    assert!(
        failures.is_empty(),
        "{} machine(s) differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The same machine read from sysfs and from hwloc: same packages, cores,
/// L3 groups, NUMA nodes (CPUs, memory, distances).
fn assert_agree(sysfs: &Topology, hwloc: &Topology, what: &str) {
    let packages = |t: &Topology| sets(t.packages.iter().map(|p| &p.cpus));
    assert_eq!(packages(sysfs), packages(hwloc), "{what}: packages");
    assert_eq!(core_sets(sysfs), core_sets(hwloc), "{what}: cores");
    assert_eq!(
        sets(sysfs.caches.iter().map(|c| &c.cpus)),
        sets(hwloc.caches.iter().map(|c| &c.cpus)),
        "{what}: L3 groups"
    );
    assert_eq!(sysfs.cpu_set(), hwloc.cpu_set(), "{what}: CPUs");
    assert_eq!(sysfs.offline_cpus, hwloc.offline_cpus, "{what}: offline CPUs");
    // A single node's distance to itself is in sysfs only.
    let nodes = |t: &Topology| -> Vec<(usize, String, BTreeMap<usize, u64>)> {
        let several = t.numa_nodes.len() > 1;
        t.numa_nodes
            .iter()
            .map(|n| {
                (
                    n.id,
                    n.cpus.to_string(),
                    if several { n.distances.clone() } else { BTreeMap::new() },
                )
            })
            .collect()
    };
    assert_eq!(nodes(sysfs), nodes(hwloc), "{what}: NUMA nodes");
    for (a, b) in sysfs.numa_nodes.iter().zip(&hwloc.numa_nodes) {
        let (a, b) = (a.memory.unwrap_or(0), b.memory.unwrap_or(0));
        // hwloc rounds page counts; allow a page per huge page size.
        assert!(a.abs_diff(b) <= 2 << 20, "{what}: node memory {a} vs {b}");
    }
    let machine_sysfs = sysfs.to_machine().expect("sysfs machine");
    let machine_hwloc = hwloc.to_machine().expect("hwloc machine");
    assert_eq!(
        machine_sysfs.cpus(),
        machine_hwloc.cpus(),
        "{what}: the engine sees the same CPUs"
    );
}

#[test]
fn sysfs_and_hwloc_agree_on_the_same_machine() {
    let sysfs = topologies().join("sysfs");
    let pairs = [
        (
            sysfs.join("hwloc-memorysidecaches.tar.bz2"),
            topologies().join("hwloc-xml/hwloc-memorysidecaches.xml"),
        ),
        (
            sysfs.join("hwloc-16em64t-4s2c2t-offlines.tar.bz2"),
            sysfs.join("hwloc-16em64t-4s2c2t-offlines.xml.output"),
        ),
        (
            sysfs.join("hwloc-32em64t-2n8c+1mic.tar.bz2"),
            sysfs.join("hwloc-32em64t-2n8c+1mic.output"),
        ),
    ];
    for (capture, xml) in pairs {
        let a = read_sysfs(&capture).expect("sysfs capture");
        let b = read_hwloc(&xml).expect("hwloc XML");
        assert_agree(&a, &b, &capture.display().to_string());
    }
    // PCI locality agrees too where both list the device.
    let a = read_sysfs(&sysfs.join("hwloc-32em64t-2n8c+1mic.tar.bz2")).expect("capture");
    let b = read_hwloc(&sysfs.join("hwloc-32em64t-2n8c+1mic.output")).expect("xml");
    let mut compared = 0;
    for device in a
        .pci_devices
        .iter()
        .filter(|d| d.kind.is_of_interest() && !d.numa.is_empty())
    {
        if let Some(other) = b.pci_devices.iter().find(|d| d.address == device.address) {
            assert_eq!(device.numa, other.numa, "{}", device.address);
            assert_eq!(device.kind, other.kind, "{}", device.address);
            compared += 1;
        }
    }
    assert!(compared >= 4, "compared {compared} devices");
}

#[test]
fn the_two_lassen_exports_agree_on_the_cpu_side() {
    let dir = topologies().join("hwloc-xml");
    let v1 = read_hwloc(&dir.join("mpibind-coral-lassen-hwloc1.xml")).expect("v1");
    let v2 = read_hwloc(&dir.join("mpibind-coral-lassen.xml")).expect("v2");
    assert_eq!(core_sets(&v1), core_sets(&v2));
    assert_eq!(
        v1.numa_node(0).map(|n| n.cpus.clone()),
        v2.numa_node(0).map(|n| n.cpus.clone())
    );
    // hwloc 2 hides the GPU memory nodes 252-255 that hwloc 1 shows as CPU-less.
    let memory_only: Vec<usize> = v1
        .numa_nodes
        .iter()
        .filter(|n| n.cpus.is_empty())
        .map(|n| n.id)
        .collect();
    assert_eq!(memory_only, vec![252, 253, 254, 255]);
    assert_eq!(v1.gpus().count(), 4);
    assert_eq!(v2.gpus().count(), 4);
}

#[test]
fn devices_are_classified_and_become_resources() {
    let dir = topologies().join("hwloc-xml");
    let dgx = read_hwloc(&dir.join("hwloc-nvidiaDGX2.xml")).expect("DGX-2");
    assert_eq!(dgx.gpus().count(), 16, "16 V100, the 12 NVSwitches are not GPUs");
    assert_eq!(dgx.resources["nvidia.com/gpu"].len(), 16);
    let links = dgx.gpu_links.as_ref().expect("link matrix");
    assert!(links.source.contains("NVLinkBandwidth"), "{}", links.source);
    assert_eq!(
        links.links[0][1].to_string(),
        "NV*150G",
        "six 25 GB/s links through NVSwitches"
    );
    let corona = read_hwloc(&dir.join("mpibind-epyc-corona.xml")).expect("corona");
    let gpus: Vec<Vec<usize>> = corona.gpus().map(|g| g.numa.clone()).collect();
    assert_eq!(
        gpus,
        vec![vec![1], vec![2], vec![5], vec![7]],
        "AMD Vega 20 on nodes 1, 2, 5, 7; BMC VGA is no GPU"
    );
    assert_eq!(corona.resources["amd.com/gpu"].len(), 4);
    let vfs = read_hwloc(&dir.join("hwloc-16intel64-manyVFs.xml")).expect("manyVFs");
    assert!(vfs.pci_devices.iter().filter(|d| d.virtual_function).count() >= 8);
    assert!(vfs.resources.contains_key("intel.com/sriov_netdevice"));
    let ghw =
        read_sysfs(&topologies().join("sysfs/ghw-linux-amd64-8581cf3a529e5d8b97ea876eade2f60d.tar.gz")).expect("ghw");
    let i350_vfs: Vec<&str> = ghw
        .pci_devices
        .iter()
        .filter(|d| d.virtual_function)
        .map(|d| d.address.as_str())
        .collect();
    assert_eq!(i350_vfs.len(), 8, "{i350_vfs:?}");
    let nvme = read_sysfs(&topologies().join("sysfs/hwloc-32em64t-2n8c+1mic.tar.bz2")).expect("mic");
    let kinds: BTreeSet<DeviceKind> = nvme.pci_devices.iter().map(|d| d.kind).collect();
    assert!(
        kinds.contains(&DeviceKind::Nvme) && kinds.contains(&DeviceKind::Accelerator),
        "{kinds:?}"
    );
}

#[test]
fn every_machine_becomes_an_engine_machine_or_says_why() {
    for (name, entry) in expected() {
        let path = if entry["truth"].get("sysfs_raw").is_some() {
            topologies().join("sysfs").join(&name)
        } else {
            topologies().join("hwloc-xml").join(&name)
        };
        let t = if name.ends_with(".xml") {
            read_hwloc(&path)
        } else {
            read_sysfs(&path)
        }
        .expect("reads");
        match t.to_machine() {
            Ok(machine) => {
                assert_eq!(machine.cpus().len(), t.cpus.len(), "{name}");
                // Every node the kubelet sees, CPU-less ones too.
                assert_eq!(machine.numa_nodes().len(), t.numa_nodes.len(), "{name}");
                let labels: Vec<usize> = machine.numa_nodes().iter().map(|n| machine.numa_label(n.id)).collect();
                let ids: Vec<usize> = t.numa_nodes.iter().map(|n| n.id).collect();
                assert_eq!(labels, ids, "{name}");
                // Core ids are machine-unique: threads of one core share a socket.
                let mut socket_of_core = BTreeMap::new();
                for cpu in machine.cpus() {
                    assert_eq!(
                        *socket_of_core.entry(cpu.core).or_insert(cpu.socket),
                        cpu.socket,
                        "{name}"
                    );
                }
            }
            Err(error) => {
                // Only ids past Linux's 1023, or more than 64 nodes, are refused.
                assert!(
                    t.numa_nodes.iter().any(|n| n.id > 1023) || t.numa_nodes.len() > 64,
                    "{name}: {error}"
                );
                assert!(error.to_string().contains("NUMA node"), "{name}: {error}");
            }
        }
    }
}
