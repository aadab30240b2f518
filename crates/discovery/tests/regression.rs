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
/// no CPUs. They are left out of the machine with a warning, as hwloc does.
#[test]
fn power9_gpu_memory_numa_nodes_are_left_out_with_a_warning() {
    let t = read_sysfs(&topologies().join("sysfs/hwloc-nvidiagpunumanodes.tar.bz2")).expect("reads");
    assert!(
        t.numa_nodes.iter().any(|n| n.id == 252),
        "the topology still shows them"
    );
    let left_out = t
        .warnings
        .iter()
        .find_map(|w| match w {
            Warning::DeviceMemoryNodesLeftOut { nodes } => Some(nodes.clone()),
            _ => None,
        })
        .expect("a warning names the nodes");
    assert_eq!(left_out, vec![250, 251, 252, 253, 254, 255]);
    let machine = t.to_machine().expect("becomes a machine");
    let ids: Vec<usize> = machine.numa_nodes().iter().map(|n| n.id).collect();
    assert_eq!(ids, vec![0, 8]);
    assert_eq!(machine.cpus().len(), t.cpus.len(), "no CPU is lost");
    // And a scenario of it replays.
    let spec = topoalign_scenario::TopologySpec::from_machine(&machine);
    assert_eq!(spec.to_machine().expect("replays"), machine);
}

/// A CPU-less node past id 63 is left out, but a node with CPUs is not:
/// leaving it out would lose CPUs.
#[test]
fn numa_node_with_cpus_past_63_is_still_refused() {
    let (_dir, root) = machine();
    let node_dir = root.join("sys/devices/system/node");
    fs::rename(node_dir.join("node3"), node_dir.join("node300")).expect("rename");
    let t = read_sysfs(&root).expect("reads");
    let e = t.to_machine().expect_err("refused");
    assert!(e.to_string().contains("NUMA node id 300"), "{e}");
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
