//! One test per bug that was found on a real machine or with hostile input,
//! named after what it reproduces (see issue 13, "Real machines" and
//! "Resource bounds").

mod support;

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use support::synthetic::{Shape, write_sysfs};
use topoalign_discovery::{DiscoveryError, PciDevice, Topology, Warning, parse_hwloc_xml, read_sysfs};
use topoalign_model::CpuSet;

fn machine() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("capture");
    write_sysfs(&root, &Shape::small());
    (dir, root)
}

fn cpu_dir(root: &Path) -> PathBuf {
    root.join("sys/devices/system/cpu")
}

fn error(root: &Path) -> DiscoveryError {
    read_sysfs(root).expect_err("the reader refuses this tree")
}

fn topologies() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies")
}

/// A real ia64 capture has no `cpu/online` mask and an empty `cpu0/online`
/// file: the kernel writes nothing for a CPU that cannot go offline.
#[test]
fn ia64_empty_cpu_online_file_means_online_with_a_warning() {
    let (_dir, root) = machine();
    fs::remove_file(cpu_dir(&root).join("online")).expect("rm mask");
    fs::write(cpu_dir(&root).join("cpu0/online"), "").expect("empty");
    fs::write(cpu_dir(&root).join("cpu1/online"), "1\n").expect("one");
    fs::write(cpu_dir(&root).join("cpu2/online"), "0\n").expect("zero");
    let t = read_sysfs(&root).expect("reads");
    assert!(t.cpus.iter().any(|c| c.id == 0), "cpu0 is online");
    assert!(t.cpus.iter().all(|c| c.id != 2), "cpu2 is offline");
    assert!(
        t.warnings.contains(&Warning::EmptyOnlineFile {
            cpus: CpuSet::parse("0").unwrap()
        }),
        "{:?}",
        t.warnings
    );
    t.to_machine().expect("becomes a machine");
}

/// POWER9 with NVIDIA V100s: the GPUs' memory is NUMA nodes 250-255, with
/// no CPUs. The kubelet counts them (cAdvisor lists every node directory),
/// so the machine keeps them, numbered anew with their ids as labels, and
/// warnings say what they are and that the kubelet's masks stop at 63.
#[test]
fn power9_gpu_memory_numa_nodes_are_kept_with_their_ids_and_warnings() {
    let t = read_sysfs(&topologies().join("sysfs/hwloc-nvidiagpunumanodes.tar.bz2")).expect("reads");
    let gpu_nodes = vec![250, 251, 252, 253, 254, 255];
    let device_memory = t
        .warnings
        .iter()
        .find_map(|w| match w {
            Warning::DeviceMemoryNodes { nodes } => Some(nodes.clone()),
            _ => None,
        })
        .expect("a warning names the device-memory nodes");
    assert_eq!(device_memory, gpu_nodes);
    let past_masks = t
        .warnings
        .iter()
        .find_map(|w| match w {
            Warning::NumaIdsPastMasks { nodes } => Some(nodes.clone()),
            _ => None,
        })
        .expect("a warning names the ids past the kubelet's masks");
    assert_eq!(past_masks, gpu_nodes);
    assert!(
        t.warnings.iter().any(|w| w.to_string().contains("crashes")),
        "{:?}",
        t.warnings
    );
    let machine = t.to_machine().expect("becomes a machine");
    assert_eq!(machine.numa_nodes().len(), 8, "every node the kubelet sees");
    assert_eq!(machine.numa_labels(), Some(&[0, 8, 250, 251, 252, 253, 254, 255][..]));
    assert_eq!(machine.numa_id_past_masks(), Some(250));
    for (index, node) in machine.numa_nodes().iter().enumerate() {
        let label = machine.numa_label(index);
        assert_eq!(machine.numa_id_of_label(label), Some(index));
        let discovered = t.numa_node(label).expect("the discovered node");
        assert_eq!(Some(node.memory), discovered.memory, "node {label}");
        assert_eq!(machine.numa_cpus(index).len(), discovered.cpus.len(), "node {label}");
        // Distance rows follow the nodes in id order.
        if let Some(row) = &node.distances {
            for (to, distance) in row.iter().enumerate() {
                assert_eq!(
                    discovered.distances.get(&machine.numa_label(to)),
                    Some(distance),
                    "{label} to {to}"
                );
            }
        }
    }
    assert_eq!(machine.cpus().len(), t.cpus.len(), "no CPU is lost");
    // The topology made back from the machine shows the machine's own ids.
    let again = Topology::from_machine(&machine, "again");
    let ids: Vec<usize> = again.numa_nodes.iter().map(|n| n.id).collect();
    assert_eq!(ids, vec![0, 8, 250, 251, 252, 253, 254, 255]);
    assert_eq!(again.to_machine().expect("again a machine"), machine);
}

/// A node past id 63 with CPUs is read too (ids up to 1023, as the
/// kubelet reads them): numbered anew, the id kept as its label.
#[test]
fn numa_node_with_cpus_past_63_is_read_with_its_id() {
    let (_dir, root) = machine();
    let node_dir = root.join("sys/devices/system/node");
    fs::rename(node_dir.join("node3"), node_dir.join("node300")).expect("rename");
    let t = read_sysfs(&root).expect("reads");
    let read = t.to_machine().expect("a machine");
    assert_eq!(read.numa_labels(), Some(&[0, 1, 2, 300][..]));
    let cpus_300 = t.numa_node(300).expect("node 300").cpus.clone();
    assert!(!cpus_300.is_empty());
    assert_eq!(read.numa_cpus(3), cpus_300);
    assert!(
        t.warnings
            .iter()
            .any(|w| matches!(w, Warning::NumaIdsPastMasks { nodes } if nodes == &[300]))
    );
    // Past 1023 (Linux's largest) it is refused, naming the id.
    let (_dir, root) = machine();
    let node_dir = root.join("sys/devices/system/node");
    fs::rename(node_dir.join("node3"), node_dir.join("node1024")).expect("rename");
    let e = read_sysfs(&root).expect("reads").to_machine().expect_err("refused");
    assert!(e.to_string().contains("NUMA node id 1024"), "{e}");
}

/// A CPU-less memory node past id 63 (a CXL or GPU memory node) in a
/// sysfs tree: in the machine, as the kubelet counts it, with its memory,
/// huge pages and distances, and warned about.
#[test]
fn cpu_less_numa_node_252_is_in_the_machine() {
    let (_dir, root) = machine();
    let node_dir = root.join("sys/devices/system/node");
    // Four nodes with CPUs (0-3) and node 252 with memory only.
    let ids = [0usize, 1, 2, 3, 252];
    fs::write(node_dir.join("online"), "0-3,252\n").expect("online");
    let node = node_dir.join("node252");
    fs::create_dir_all(node.join("hugepages/hugepages-2048kB")).expect("mkdir");
    fs::write(node.join("cpulist"), "\n").expect("cpulist");
    let kb = 16 * 1024 * 1024;
    fs::write(
        node.join("meminfo"),
        format!("Node 252 MemTotal:       {kb} kB\nNode 252 MemFree:        {kb} kB\n"),
    )
    .expect("meminfo");
    fs::write(node.join("hugepages/hugepages-2048kB/nr_hugepages"), "0\n").expect("pool");
    fs::write(node.join("hugepages/hugepages-2048kB/free_hugepages"), "0\n").expect("pool");
    for &from in &ids {
        let row: Vec<String> = ids
            .iter()
            .map(|&to| match (from == to, from == 252 || to == 252) {
                (true, _) => "10".to_owned(),
                (false, true) => "80".to_owned(),
                (false, false) => "20".to_owned(),
            })
            .collect();
        fs::write(node_dir.join(format!("node{from}/distance")), row.join(" ") + "\n").expect("distance");
    }
    let t = read_sysfs(&root).expect("reads");
    let discovered: Vec<usize> = t.numa_nodes.iter().map(|n| n.id).collect();
    assert_eq!(discovered, ids);
    assert!(t.numa_node(252).expect("node 252").is_device_memory());
    assert!(
        t.warnings
            .iter()
            .any(|w| matches!(w, Warning::DeviceMemoryNodes { nodes } if nodes == &[252])),
        "{:?}",
        t.warnings
    );
    assert!(
        t.warnings
            .iter()
            .any(|w| matches!(w, Warning::NumaIdsPastMasks { nodes } if nodes == &[252]))
    );
    let machine = t.to_machine().expect("a machine");
    assert_eq!(machine.numa_labels(), Some(&ids[..]));
    assert_eq!(machine.numa_label(4), 252);
    assert_eq!(machine.numa_id_of_label(252), Some(4));
    assert_eq!(machine.numa_id_of_label(4), None, "4 is no id of this machine");
    let memory_node = machine.numa_node(4).expect("index 4");
    assert_eq!(memory_node.memory, 16 << 30);
    assert!(machine.numa_cpus(4).is_empty());
    assert_eq!(memory_node.distances.as_deref(), Some(&[80, 80, 80, 80, 10][..]));
    assert_eq!(
        machine.numa_node(0).expect("node 0").distances.as_deref(),
        Some(&[10, 20, 20, 20, 80][..])
    );
    assert_eq!(machine.cpus().len(), t.cpus.len());
}

/// A sysfs file that is a link to `/dev/zero` would be read forever.
#[test]
fn sysfs_file_linked_to_dev_zero_is_refused_not_read() {
    let (_dir, root) = machine();
    let file = cpu_dir(&root).join("cpu3/topology/physical_package_id");
    fs::remove_file(&file).expect("rm");
    std::os::unix::fs::symlink("/dev/zero", &file).expect("link");
    let e = error(&root);
    assert!(matches!(e, DiscoveryError::Io { .. }), "{e}");
    assert_eq!(e.path(), file.as_path());
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

/// Opening a FIFO for reading blocks until a writer comes: the type is
/// checked before the open. (If this regresses, the test hangs.)
#[test]
fn sysfs_fifo_is_refused_without_blocking() {
    let (_dir, root) = machine();
    let file = cpu_dir(&root).join("cpu3/topology/physical_package_id");
    fs::remove_file(&file).expect("rm");
    let status = std::process::Command::new("mkfifo")
        .arg(&file)
        .status()
        .expect("mkfifo runs");
    assert!(status.success());
    let e = error(&root);
    assert_eq!(e.path(), file.as_path());
    assert!(e.to_string().contains("not a regular file"), "{e}");
}

/// A sysfs file far larger than any the kernel writes.
#[test]
fn oversized_sysfs_file_is_refused() {
    let (_dir, root) = machine();
    let file = cpu_dir(&root).join("cpu3/topology/physical_package_id");
    let big = fs::File::create(&file).expect("create");
    big.set_len(17 << 20).expect("sparse 17 MiB");
    let e = error(&root);
    assert_eq!(e.path(), file.as_path());
    assert!(e.to_string().contains("larger than 16.0 MiB"), "{e}");
}

/// A small archive whose member claims 3 GiB: refused from the header,
/// before anything is decompressed.
#[test]
fn archive_member_of_3_gib_is_refused_from_its_header() {
    let mut header = tar::Header::new_gnu();
    header.set_path("m/sys/devices/system/cpu/online").expect("path");
    header.set_size(3 << 30);
    header.set_mode(0o644);
    header.set_cksum();
    let mut tar = header.as_bytes().to_vec();
    tar.extend_from_slice(&[0u8; 4096]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).expect("gz");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bomb.tgz");
    fs::write(&path, gz.finish().expect("gz")).expect("write");
    let e = error(&path);
    assert!(matches!(e, DiscoveryError::Archive { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("m/sys/devices/system/cpu/online: 3221225472 bytes"),
        "{e}"
    );
}

/// Directory names and hwloc `os_index` values near `u32::MAX` used to size
/// CPU sets (4 GB of memory, then an abort).
#[test]
fn cpu_ids_near_u32_max_are_refused_naming_the_place() {
    let (_dir, root) = machine();
    let huge = cpu_dir(&root).join("cpu4294967295");
    fs::create_dir(&huge).expect("mkdir");
    let e = error(&root);
    assert_eq!(e.path(), huge.as_path());
    assert!(e.to_string().contains("at most 16383"), "{e}");

    let xml = r#"<?xml version="1.0"?><topology version="2.0">
      <object type="Machine" os_index="0" cpuset="0x1" gp_index="1">
        <object type="NUMANode" os_index="0" cpuset="0x1" nodeset="0x1" gp_index="2" local_memory="1073741824"/>
        <object type="Core" os_index="0" cpuset="0x1" gp_index="3">
          <object type="PU" os_index="4294967295" cpuset="0x1" gp_index="4"/>
        </object>
      </object></topology>"#;
    let e = parse_hwloc_xml(xml, "test").expect_err("refused");
    assert!(
        e.to_string().contains("PU os_index 4294967295 is larger than 16383"),
        "{e}"
    );
}

/// The NVML note ("NVML not available") is for machines with NVIDIA
/// devices; elsewhere it was printed on every command.
#[test]
fn nvml_note_only_on_machines_with_nvidia_devices() {
    let plain = read_sysfs(&topologies().join("sysfs/nri-desktop.tar.bz2")).expect("reads");
    assert!(!topoalign_discovery::nvml_note_relevant(&plain));
    let mut with_gpu: Topology = plain.clone();
    with_gpu
        .pci_devices
        .push(PciDevice::new("0000:3b:00.0", 0x030200, Some(0x10de), Some(0x1db4)));
    assert!(topoalign_discovery::nvml_note_relevant(&with_gpu));
}
