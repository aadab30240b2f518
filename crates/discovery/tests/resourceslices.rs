//! DRA ResourceSlices of real machines (the sysfs captures and hwloc files
//! of testdata/topologies) and of a small sysfs tree built here for what no
//! capture has (NUMA nodes sharing a socket, a CPU-less node, a device
//! behind a PCIe switch, a virtual function, a Hyper-V bus).
//!
//! The expected `pcieRoot` and `numaNode` values are what Kubernetes' own
//! helper, `k8s.io/dynamic-resource-allocation/deviceattribute` v0.37.2
//! (`GetPCIeRootAttributeByPCIBusID`, `GetNUMANodeAttributeByPCIBusID` with
//! `ScalarAttribute` and `ListAttribute`), answered on the unpacked
//! captures and on this file's tree (written to
//! `$CARGO_TARGET_TMPDIR/resourceslices-tree`, where it stays after a run),
//! not what this crate computes.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use topoalign_discovery::resourceslices::{
    DeviceAttribute, MAX_ATTRIBUTES, MAX_DEVICES, NUMA_NODE, NoLocality, NumaNodeForm, PCI_BUS_ID, PCIE_ROOT,
    ResourceSlice, SliceOptions, SliceWarning, Slices, resource_slices, validate_resource_slice,
};
use topoalign_discovery::{DeviceKind, Topology, read_hwloc, read_sysfs};

fn topologies() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies")
}

fn capture(name: &str) -> Topology {
    read_sysfs(&topologies().join("sysfs").join(name)).expect("the capture reads")
}

fn slices(topology: &Topology, form: NumaNodeForm) -> Slices {
    let options = SliceOptions {
        numa_node_form: form,
        ..SliceOptions::for_node("worker-1")
    };
    let slices = resource_slices(topology, &options).expect("valid options");
    for slice in &slices.slices {
        assert_eq!(validate_resource_slice(slice), Vec::<String>::new());
    }
    slices
}

/// The standard attributes of every device: address → (pcieRoot, numaNode).
fn standard(slices: &Slices) -> BTreeMap<String, (Option<String>, Option<DeviceAttribute>)> {
    slices
        .slices
        .iter()
        .flat_map(|s| s.spec.devices.iter().flatten())
        .map(|d| {
            let attributes = d.attributes.as_ref().expect("attributes");
            let address = attributes["pciAddress"].string.clone().expect("pciAddress");
            let root = attributes.get(PCIE_ROOT).and_then(|a| a.string.clone());
            (address, (root, attributes.get(NUMA_NODE).cloned()))
        })
        .collect()
}

fn scalar(node: i64) -> Option<DeviceAttribute> {
    Some(DeviceAttribute {
        int: Some(node),
        ..DeviceAttribute::default()
    })
}

fn list(nodes: &[i64]) -> Option<DeviceAttribute> {
    Some(DeviceAttribute {
        ints: Some(nodes.to_vec()),
        ..DeviceAttribute::default()
    })
}

/// Intel dual-socket with a Xeon Phi: NICs on node 0, InfiniBand and the
/// Phi on node 1, an NVMe drive whose numa_node is -1.
#[test]
fn a_two_socket_capture_with_an_nvme_drive_of_no_affinity() {
    let topology = capture("hwloc-32em64t-2n8c+1mic.tar.bz2");
    let slices = slices(&topology, NumaNodeForm::Scalar);
    let got = standard(&slices);
    let root = |r: &str| Some(r.to_string());
    let expected = BTreeMap::from([
        ("0000:00:02.0".to_string(), (root("pci0000:00"), None)),
        ("0000:02:00.0".to_string(), (root("pci0000:00"), scalar(0))),
        ("0000:02:00.3".to_string(), (root("pci0000:00"), scalar(0))),
        ("0000:05:00.0".to_string(), (root("pci0000:00"), scalar(0))),
        ("0000:82:00.0".to_string(), (root("pci0000:80"), scalar(1))),
        ("0000:83:00.0".to_string(), (root("pci0000:80"), scalar(1))),
    ]);
    assert_eq!(got, expected);
    assert!(
        slices.warnings.contains(&SliceWarning::NoNumaNode {
            address: "0000:00:02.0".into(),
            kind: DeviceKind::Nvme,
            why: NoLocality::Negative { value: -1 },
            single_node: false,
        }),
        "{:?}",
        slices.warnings
    );
    let text: Vec<String> = slices.warnings.iter().map(ToString::to_string).collect();
    assert!(
        text.contains(&"NVMe 0000:00:02.0: its numa_node is -1 (no NUMA affinity): published without resource.kubernetes.io/numaNode, which never invents locality".to_string()),
        "{text:?}"
    );
    // Two sockets of one node each: the list is the node alone.
    let lists = standard(&self::slices(&topology, NumaNodeForm::List));
    assert_eq!(lists["0000:82:00.0"].1, list(&[1]));
}

/// A Dell server (ghw snapshot): Broadcom NICs with numa_node -1 and I350
/// virtual functions on both nodes, all under one root complex.
#[test]
fn virtual_functions_keep_their_root_and_node() {
    let topology = capture("ghw-linux-amd64-8581cf3a529e5d8b97ea876eade2f60d.tar.gz");
    let slices = slices(&topology, NumaNodeForm::Scalar);
    let got = standard(&slices);
    assert_eq!(got.len(), 15);
    for (address, node) in [
        ("0000:05:00.0", Some(0)),
        ("0000:05:00.1", Some(1)),
        ("0000:05:10.0", Some(0)),
        ("0000:05:10.1", Some(1)),
        ("0000:05:11.5", Some(1)),
        ("0000:01:00.0", None),
        ("0000:02:00.1", None),
    ] {
        assert_eq!(
            got[address],
            (Some("pci0000:00".to_string()), node.and_then(scalar)),
            "{address}"
        );
    }
    let vf = slices.slices[0]
        .spec
        .devices
        .iter()
        .flatten()
        .find(|d| d.name == "pci-0000-05-10-1")
        .expect("the VF");
    let attributes = vf.attributes.as_ref().expect("attributes");
    assert_eq!(attributes["virtualFunction"].bool, Some(true));
    assert_eq!(attributes["kind"].string.as_deref(), Some("ethernet-nic"));
    assert_eq!(attributes["vendorID"].string.as_deref(), Some("8086"));
    assert_eq!(attributes["deviceID"].string.as_deref(), Some("1520"));
    assert_eq!(attributes["class"].string.as_deref(), Some("020000"));
    assert_eq!(attributes[PCI_BUS_ID].string.as_deref(), Some("0000:05:10.1"));
    let no_affinity = slices
        .warnings
        .iter()
        .filter(|w| matches!(w, SliceWarning::NoNumaNode { .. }))
        .count();
    assert_eq!(no_affinity, 5, "the four Broadcom ports and 07:03.0");
}

/// NEC SX-Aurora host: vector engines and InfiniBand behind PCIe switches;
/// the root is the root complex, not the switch.
#[test]
fn devices_behind_switches_name_the_root_complex() {
    let topology = capture("hwloc-32intel64-2p8co2t+8ve.tar.bz2");
    let got = standard(&slices(&topology, NumaNodeForm::Scalar));
    for (address, root) in [
        ("0000:1a:00.0", "pci0000:17"),
        ("0000:1e:00.0", "pci0000:17"),
        ("0000:3e:00.0", "pci0000:3a"),
        ("0000:41:00.0", "pci0000:3a"),
        ("0000:60:00.0", "pci0000:5d"),
        ("0000:60:00.1", "pci0000:5d"),
    ] {
        assert_eq!(got[address], (Some(root.to_string()), scalar(0)), "{address}");
    }
}

/// POWER9 with NVIDIA GPUs: the capture has no numa_node files and keeps
/// directories where sysfs has links: no locality of either kind, said.
#[test]
fn a_capture_without_numa_node_files_or_links() {
    let topology = capture("hwloc-nvidiagpunumanodes.tar.bz2");
    let slices = slices(&topology, NumaNodeForm::List);
    let got = standard(&slices);
    assert_eq!(got.len(), 6);
    assert!(got.values().all(|v| *v == (None, None)), "{got:?}");
    assert!(slices.warnings.iter().any(|w| matches!(
        w,
        SliceWarning::NoPcieRoot { addresses } if addresses.len() == 6
    )));
    assert!(
        slices
            .warnings
            .iter()
            .any(|w| matches!(w, SliceWarning::SparseNumaIds { ids } if ids[..2] == [0, 8]))
    );
}

/// hwloc XML: `numaNode` from the node hwloc attaches a device to; no
/// sysfs links, so no `pcieRoot`.
#[test]
fn hwloc_files_give_numa_nodes_but_no_roots() {
    let topology = read_hwloc(&topologies().join("hwloc-xml/hwloc-32em64t-2n8c2t-pci-wholeio.xml")).expect("reads");
    let slices = slices(&topology, NumaNodeForm::Scalar);
    let got = standard(&slices);
    for device in topology.pci_devices.iter().filter(|d| d.kind == DeviceKind::Gpu) {
        let expected = match device.numa.as_slice() {
            &[node] => scalar(i64::try_from(node).expect("small")),
            _ => None,
        };
        assert_eq!(got[&device.address], (None, expected), "{}", device.address);
    }
    assert!(got.values().any(|(_, numa)| numa.is_some()));
    assert!(
        slices
            .warnings
            .iter()
            .any(|w| matches!(w, SliceWarning::NoPcieRoot { .. }))
    );
}

/// Many devices: the SR-IOV test file of hwloc (hundreds of virtual
/// functions) spans several slices, none above the API's limit.
#[test]
fn many_virtual_functions_span_several_slices() {
    let topology = read_hwloc(&topologies().join("hwloc-xml/hwloc-16intel64-manyVFs.xml")).expect("reads");
    let slices = slices(&topology, NumaNodeForm::Scalar);
    let devices: usize = slices
        .slices
        .iter()
        .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
        .sum();
    let of_interest = topology
        .pci_devices
        .iter()
        .filter(|d| d.kind.is_of_interest())
        .map(|d| d.address.as_str())
        .collect::<std::collections::BTreeSet<_>>()
        .len();
    assert_eq!(devices, of_interest);
    let count = i64::try_from(slices.slices.len()).expect("few");
    for slice in &slices.slices {
        assert!(slice.spec.devices.as_ref().map_or(0, Vec::len) <= MAX_DEVICES);
        assert_eq!(slice.spec.pool.resource_slice_count, count);
        for device in slice.spec.devices.iter().flatten() {
            assert!(device.attributes.as_ref().map_or(0, BTreeMap::len) <= MAX_ATTRIBUTES);
        }
    }
}

// --- A tree for what no capture has -------------------------------------

/// Five NUMA nodes: 0 and 1 on socket 0, 2 and 3 on socket 1, 4 without
/// CPUs. Node 0's nearest others (12) are 1, 2 (the other socket) and 4
/// (socket unknown).
const DISTANCES: [[u32; 5]; 5] = [
    [10, 12, 12, 20, 12],
    [12, 10, 20, 20, 30],
    [12, 20, 10, 11, 20],
    [20, 20, 11, 10, 20],
    [12, 30, 20, 20, 10],
];

/// Path under sys/devices, class, vendor, device, numa_node, physfn.
type DeviceRow = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    i64,
    Option<&'static str>,
);

const DEVICES: &[DeviceRow] = &[
    ("pci0000:00/0000:00:01.0", "0x060400", "0x8086", "0x2030", 0, None),
    (
        "pci0000:00/0000:00:01.0/0000:01:00.0",
        "0x020000",
        "0x8086",
        "0x1593",
        0,
        None,
    ),
    (
        "pci0000:00/0000:00:01.0/0000:01:02.0",
        "0x020000",
        "0x8086",
        "0x1889",
        0,
        Some("0000:01:00.0"),
    ),
    ("pci0000:40/0000:40:01.0", "0x060400", "0x8086", "0x2030", 2, None),
    (
        "pci0000:40/0000:40:01.0/0000:41:00.0",
        "0x060400",
        "0x10b5",
        "0xc010",
        2,
        None,
    ),
    (
        "pci0000:40/0000:40:01.0/0000:41:00.0/0000:42:00.0",
        "0x030200",
        "0x10de",
        "0x20b0",
        2,
        None,
    ),
    ("pci0000:80/0000:80:00.0", "0x010802", "0x144d", "0xa808", -1, None),
    ("pci0000:c0/0000:c0:00.0", "0x120000", "0x1bcf", "0x001c", 4, None),
    ("pci0000:c0/0000:c1:00.0", "0x020000", "0x15b3", "0x101b", 1, None),
    ("pci0000:c0/0000:c2:00.0", "0x020000", "0x15b3", "0x101b", 7, None),
    (
        "LNXSYSTM:00/LNXSYBUS:00/VMBUS:00/f8b3781b/pci7870:00/7870:00:00.0",
        "0x020000",
        "0x15b3",
        "0x101a",
        3,
        None,
    ),
];

fn write(path: &Path, text: &str) {
    fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    fs::write(path, text).expect("write");
}

/// Writes the tree under `root` (`root/sys/...`).
fn write_tree(root: &Path) {
    let sys = root.join("sys");
    let cpu = sys.join("devices/system/cpu");
    write(&cpu.join("online"), "0-7\n");
    write(&cpu.join("present"), "0-7\n");
    for id in 0..8 {
        let topology = cpu.join(format!("cpu{id}/topology"));
        write(&topology.join("physical_package_id"), &format!("{}\n", id / 4));
        write(&topology.join("core_id"), &format!("{id}\n"));
        write(&topology.join("thread_siblings_list"), &format!("{id}\n"));
    }
    for (node, row) in DISTANCES.iter().enumerate() {
        let dir = sys.join(format!("devices/system/node/node{node}"));
        let cpus = if node < 4 {
            format!("{}-{}\n", node * 2, node * 2 + 1)
        } else {
            "\n".to_string()
        };
        write(&dir.join("cpulist"), &cpus);
        write(
            &dir.join("meminfo"),
            &format!("Node {node} MemTotal:       1048576 kB\nNode {node} MemFree:        524288 kB\n"),
        );
        let row: Vec<String> = row.iter().map(ToString::to_string).collect();
        write(&dir.join("distance"), &format!("{}\n", row.join(" ")));
    }
    let bus = sys.join("bus/pci/devices");
    fs::create_dir_all(&bus).expect("mkdir");
    for &(path, class, vendor, device, numa, physfn) in DEVICES {
        let dir = sys.join("devices").join(path);
        write(&dir.join("class"), &format!("{class}\n"));
        write(&dir.join("vendor"), &format!("{vendor}\n"));
        write(&dir.join("device"), &format!("{device}\n"));
        write(&dir.join("numa_node"), &format!("{numa}\n"));
        if let Some(pf) = physfn {
            std::os::unix::fs::symlink(format!("../{pf}"), dir.join("physfn")).expect("symlink");
        }
        let address = path.rsplit('/').next().expect("address");
        std::os::unix::fs::symlink(format!("../../../devices/{path}"), bus.join(address)).expect("symlink");
    }
}

/// The tree, written to `$CARGO_TARGET_TMPDIR/<name>` (one per test: they
/// run at the same time).
fn tree(name: &str) -> Topology {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    if root.exists() {
        fs::remove_dir_all(&root).expect("clean");
    }
    write_tree(&root);
    read_sysfs(&root).expect("the tree reads")
}

/// What the deviceattribute helper answered on this tree, device by
/// device: pcieRoot, scalar numaNode, list numaNode.
#[test]
fn the_helpers_answers_on_a_tree_with_shared_sockets_and_a_cpu_less_node() {
    let topology = tree("resourceslices-tree");
    let scalars = standard(&slices(&topology, NumaNodeForm::Scalar));
    let lists_slices = slices(&topology, NumaNodeForm::List);
    let lists = standard(&lists_slices);
    // Address, pcieRoot, scalar numaNode, list numaNode.
    type Answer = (&'static str, Option<&'static str>, Option<i64>, &'static [i64]);
    let expected: &[Answer] = &[
        ("0000:01:00.0", Some("pci0000:00"), Some(0), &[0, 1, 4]),
        ("0000:01:02.0", Some("pci0000:00"), Some(0), &[0, 1, 4]),
        ("0000:42:00.0", Some("pci0000:40"), Some(2), &[2, 3]),
        ("0000:80:00.0", Some("pci0000:80"), None, &[]),
        ("0000:c0:00.0", Some("pci0000:c0"), Some(4), &[4, 0]),
        ("0000:c1:00.0", Some("pci0000:c0"), Some(1), &[1, 0]),
        ("0000:c2:00.0", Some("pci0000:c0"), Some(7), &[7]),
        ("7870:00:00.0", None, Some(3), &[3, 2]),
    ];
    assert_eq!(scalars.len(), expected.len(), "{scalars:?}");
    for &(address, root, node, nodes) in expected {
        let root = root.map(str::to_string);
        assert_eq!(scalars[address], (root.clone(), node.and_then(scalar)), "{address}");
        let listed = (!nodes.is_empty()).then(|| list(nodes)).flatten();
        assert_eq!(lists[address], (root, listed), "{address}");
    }
    // The virtual function names its physical function.
    let vf = lists_slices.slices[0]
        .spec
        .devices
        .iter()
        .flatten()
        .find(|d| d.name == "pci-0000-01-02-0")
        .expect("the VF");
    let attributes = vf.attributes.as_ref().expect("attributes");
    assert_eq!(attributes["physicalFunction"].string.as_deref(), Some("0000:01:00.0"));
    assert_eq!(attributes["virtualFunction"].bool, Some(true));
    assert!(lists_slices.warnings.contains(&SliceWarning::NoPcieRoot {
        addresses: vec!["7870:00:00.0".into()]
    }));
}

/// The API server takes JSON: every slice goes through serde unchanged.
#[test]
fn slices_round_trip_through_json() {
    let topology = tree("resourceslices-tree-json");
    for slice in slices(&topology, NumaNodeForm::List).slices {
        let text = serde_json::to_string(&slice).expect("serializes");
        assert!(
            text.starts_with(r#"{"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice""#),
            "{text}"
        );
        let back: ResourceSlice = serde_json::from_str(&text).expect("deserializes");
        assert_eq!(back, slice);
    }
}

/// The validator refuses what the API server refuses (it is what the CLI
/// checks its output with, so it must not pass everything).
#[test]
fn the_validator_refuses_broken_slices() {
    let topology = tree("resourceslices-tree-validator");
    let good = slices(&topology, NumaNodeForm::Scalar).slices.remove(0);
    type Breaks = Box<dyn Fn(&mut ResourceSlice)>;
    let broken: Vec<(&str, Breaks)> = vec![
        (
            "metadata.name",
            Box::new(|s| s.metadata.name = Some("Not_A_Name".into())),
        ),
        (
            "spec.driver",
            Box::new(|s| s.spec.driver = format!("{}.io", "d".repeat(61))),
        ),
        ("spec.pool.name", Box::new(|s| s.spec.pool.name = "a//b".into())),
        (
            "spec.pool.resourceSliceCount",
            Box::new(|s| s.spec.pool.resource_slice_count = 0),
        ),
        ("spec: exactly one", Box::new(|s| s.spec.all_nodes = Some(true))),
        ("spec: exactly one", Box::new(|s| s.spec.node_name = None)),
        (".name", Box::new(|s| device(s).name = "pci-0000:01:00.0".into())),
        (
            "duplicate",
            Box::new(|s| {
                let first = device(s).name.clone();
                s.spec.devices.as_mut().expect("devices")[1].name = first;
            }),
        ),
        (
            "attributes and capacities",
            Box::new(|s| {
                let attributes = device(s).attributes.as_mut().expect("attributes");
                for i in 0..40 {
                    attributes.insert(format!("extra{i}"), text_value("x"));
                }
            }),
        ),
        (
            "attribute values",
            Box::new(|s| {
                let attributes = device(s).attributes.as_mut().expect("attributes");
                attributes.insert(
                    "many".into(),
                    DeviceAttribute {
                        ints: Some((0..60).collect()),
                        ..DeviceAttribute::default()
                    },
                );
            }),
        ),
        (
            "not a C identifier",
            Box::new(|s| {
                insert(s, "pci-address", text_value("x"));
            }),
        ),
        (
            "domain",
            Box::new(|s| {
                insert(s, "Bad Domain/x", text_value("x"));
            }),
        ),
        (
            "exactly one value",
            Box::new(|s| {
                insert(
                    s,
                    "both",
                    DeviceAttribute {
                        int: Some(1),
                        string: Some("1".into()),
                        ..DeviceAttribute::default()
                    },
                );
            }),
        ),
        (
            "exactly one value",
            Box::new(|s| {
                insert(s, "none", DeviceAttribute::default());
            }),
        ),
        (
            "longer than 64",
            Box::new(|s| {
                insert(s, "long", text_value(&"x".repeat(65)));
            }),
        ),
        (
            "must not be empty",
            Box::new(|s| {
                insert(
                    s,
                    "empty",
                    DeviceAttribute {
                        ints: Some(Vec::new()),
                        ..DeviceAttribute::default()
                    },
                );
            }),
        ),
        (
            "at most 128",
            Box::new(|s| {
                let one = device(s).clone();
                let devices = s.spec.devices.as_mut().expect("devices");
                for i in 0..130 {
                    let mut copy = one.clone();
                    copy.name = format!("copy-{i}");
                    devices.push(copy);
                }
            }),
        ),
        (
            "at most 64",
            Box::new(|s| {
                let mut one = device(s).clone();
                one.attributes.as_mut().expect("attributes").insert(
                    NUMA_NODE.into(),
                    DeviceAttribute {
                        ints: Some(vec![0]),
                        ..DeviceAttribute::default()
                    },
                );
                let devices = s.spec.devices.as_mut().expect("devices");
                for i in 0..60 {
                    let mut copy = one.clone();
                    copy.name = format!("copy-{i}");
                    devices.push(copy);
                }
            }),
        ),
    ];
    assert_eq!(validate_resource_slice(&good), Vec::<String>::new());
    for (what, breaks) in broken {
        let mut slice = good.clone();
        breaks(&mut slice);
        let errors = validate_resource_slice(&slice);
        assert!(
            errors.iter().any(|e| e.contains(what.trim_start_matches("spec: "))),
            "{what}: {errors:?}"
        );
    }
}

fn device(slice: &mut ResourceSlice) -> &mut topoalign_discovery::resourceslices::Device {
    &mut slice.spec.devices.as_mut().expect("devices")[0]
}

fn insert(slice: &mut ResourceSlice, name: &str, value: DeviceAttribute) {
    device(slice)
        .attributes
        .as_mut()
        .expect("attributes")
        .insert(name.into(), value);
}

fn text_value(text: &str) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(text.into()),
        ..DeviceAttribute::default()
    }
}
