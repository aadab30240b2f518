//! The sysfs reader on synthetic trees: what it reads, the same machine from
//! every archive format, clear errors naming the path for missing,
//! truncated and unreadable trees, and warnings (not errors) for what real
//! kernels produce: offline CPUs, `numa_node` -1, empty nodes.

mod support;

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use support::synthetic::{Shape, write_sysfs};
use topoalign_discovery::{DeviceKind, DiscoveryError, PcieLevel, Topology, Warning, read_hwloc, read_sysfs};

fn machine(shape: &Shape) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("capture");
    write_sysfs(&root, shape);
    (dir, root)
}

fn cpu_dir(root: &Path) -> PathBuf {
    root.join("sys/devices/system/cpu")
}

#[test]
fn a_small_machine_reads_as_written() {
    let (_dir, root) = machine(&Shape::small());
    let t = read_sysfs(&root).expect("reads");
    assert_eq!(t.packages.len(), 2);
    assert_eq!(t.numa_nodes.len(), 4);
    assert_eq!(t.cpus.len(), 32);
    assert_eq!(t.cores().len(), 16);
    assert_eq!(t.caches.len(), 4);
    assert_eq!(t.cpu_model.as_deref(), Some("Synthetic CPU @ 2.00GHz"));
    // core_id repeats across sockets; the model's core ids do not.
    let cpu16 = t.cpus.iter().find(|c| c.id == 16).expect("cpu 16");
    assert_eq!(
        (cpu16.core, cpu16.package, cpu16.numa),
        (0, 0, Some(0)),
        "sibling of CPU 0"
    );
    let cpu8 = t.cpus.iter().find(|c| c.id == 8).expect("cpu 8");
    assert_eq!((cpu8.core, cpu8.package, cpu8.numa), (8, 1, Some(2)));
    let node = t.numa_node(1).expect("node 1");
    assert_eq!(node.memory, Some(32 << 30));
    assert_eq!(node.memory_free, Some(16 << 30));
    assert_eq!(node.hugepages[&(2 << 20)].total, 512);
    assert_eq!(
        node.distances.values().copied().collect::<Vec<_>>(),
        vec![12, 10, 32, 32]
    );
    let gpu = t.gpus().next().expect("a GPU");
    assert_eq!(gpu.numa, vec![0]);
    assert_eq!(
        t.pci_devices
            .iter()
            .filter(|d| d.kind == DeviceKind::EthernetNic)
            .count(),
        4
    );
    assert_eq!(t.resources["nvidia.com/gpu"][0].id, "0000:02:00.0");
    assert!(t.warnings.is_empty(), "{:?}", t.warnings);
    // The engine's machine: huge pages as bytes, distances by id.
    let m = t.to_machine().expect("machine");
    assert_eq!(m.numa_node(0).expect("node").hugepages[&(2 << 20)], 1 << 30);
    assert_eq!(
        m.numa_node(3).expect("node").distances.as_deref(),
        Some(&[32, 32, 12, 10][..])
    );
}

#[test]
fn a_capture_reads_the_same_from_every_archive_format() {
    let (dir, root) = machine(&Shape::small());
    let from_dir = read_sysfs(&root).expect("directory");
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.append_dir_all("capture", &root).expect("tar");
    let tar = builder.into_inner().expect("tar bytes");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&tar).expect("gz");
    let mut bz = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::fast());
    bz.write_all(&tar).expect("bz2");
    let mut xz = lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(6)).expect("xz");
    xz.write_all(&tar).expect("xz");
    let xz = xz.finish().expect("xz");
    let archives = [
        ("m.tar", tar.clone()),
        ("m.tgz", gz.finish().expect("gz")),
        ("m.tar.bz2", bz.finish().expect("bz2")),
        ("m.tar.xz", xz),
    ];
    let summary = |t: &Topology| {
        (
            t.cpus.clone(),
            t.numa_nodes.clone(),
            t.packages.clone(),
            t.caches.clone(),
            t.pci_devices.clone(),
            t.resources.clone(),
        )
    };
    for (name, bytes) in archives {
        let path = dir.path().join(name);
        fs::write(&path, bytes).expect("write archive");
        let t = read_sysfs(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(summary(&t), summary(&from_dir), "{name}");
        assert!(t.source.contains(name), "{}", t.source);
    }
    // The PCI tree survives archiving: the GPU and node 0's NIC share a root port.
    let t = read_sysfs(&dir.path().join("m.tar.xz")).expect("xz");
    let nic = t.pci_devices.iter().find(|d| d.address == "0000:01:00.0").expect("nic");
    let gpu = t.gpus().next().expect("gpu");
    assert_eq!(topoalign_discovery::pcie_level(nic, gpu, false), PcieLevel::Pix);
}

#[test]
fn the_root_may_be_the_sysfs_mount_or_a_capture_one_level_down() {
    let (dir, root) = machine(&Shape::small());
    assert_eq!(read_sysfs(&root.join("sys")).expect("sys itself").cpus.len(), 32);
    assert_eq!(read_sysfs(dir.path()).expect("one level down").cpus.len(), 32);
}

fn error(root: &Path) -> DiscoveryError {
    read_sysfs(root).expect_err("should fail")
}

#[test]
fn a_missing_root_names_its_path() {
    let e = error(Path::new("/nonexistent/topoalign-capture"));
    assert!(matches!(&e, DiscoveryError::Io { error, .. } if error.kind() == std::io::ErrorKind::NotFound));
    assert!(
        e.to_string()
            .starts_with("cannot read /nonexistent/topoalign-capture: "),
        "{e}"
    );
}

#[test]
fn a_directory_without_sysfs_is_not_a_sysfs_tree() {
    let dir = tempfile::tempdir().expect("temp dir");
    fs::create_dir_all(dir.path().join("etc")).expect("mkdir");
    fs::create_dir_all(dir.path().join("usr")).expect("mkdir");
    let e = error(dir.path());
    assert!(matches!(e, DiscoveryError::NotSysfs { .. }), "{e}");
    assert!(e.to_string().contains("no sys/devices/system/cpu directory"), "{e}");
    assert_eq!(e.path(), dir.path());
}

#[test]
fn truncated_trees_name_what_is_missing() {
    // An online CPU whose directory is gone.
    let (_dir, root) = machine(&Shape::small());
    fs::remove_dir_all(cpu_dir(&root).join("cpu31")).expect("rm");
    let e = error(&root);
    assert!(matches!(e, DiscoveryError::Truncated { .. }), "{e}");
    assert!(e.path().ends_with("sys/devices/system/cpu/cpu31"), "{e}");
    assert!(
        e.to_string().contains("listed online but its directory is missing"),
        "{e}"
    );

    // An online CPU without topology.
    let (_dir, root) = machine(&Shape::small());
    fs::remove_dir_all(cpu_dir(&root).join("cpu5/topology")).expect("rm");
    let e = error(&root);
    assert!(e.path().ends_with("cpu5/topology"), "{e}");

    // A NUMA node without meminfo.
    let (_dir, root) = machine(&Shape::small());
    let meminfo = root.join("sys/devices/system/node/node2/meminfo");
    fs::remove_file(&meminfo).expect("rm");
    let e = error(&root);
    assert_eq!(e.path(), meminfo.as_path(), "{e}");
    assert!(
        e.to_string().contains("truncated sysfs tree: the file is missing"),
        "{e}"
    );

    // A file cut short to garbage.
    let (_dir, root) = machine(&Shape::small());
    let cpulist = root.join("sys/devices/system/node/node1/cpulist");
    fs::write(&cpulist, "4-").expect("write");
    let e = error(&root);
    assert!(matches!(e, DiscoveryError::Parse { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        format!("{}: expected a CPU list like 0-3,8, found \"4-\"", cpulist.display())
    );
}

#[test]
fn an_unreadable_file_names_its_path() {
    let (_dir, root) = machine(&Shape::small());
    let file = cpu_dir(&root).join("cpu3/topology/physical_package_id");
    fs::remove_file(&file).expect("rm");
    // A directory where a file should be cannot be read, even by root.
    fs::create_dir(&file).expect("mkdir");
    let e = error(&root);
    assert!(matches!(e, DiscoveryError::Io { .. }), "{e}");
    assert_eq!(e.path(), file.as_path());
    assert!(
        e.to_string().starts_with(&format!("cannot read {}: ", file.display())),
        "{e}"
    );
}

#[test]
fn broken_archives_name_the_archive() {
    let topologies = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies/sysfs");
    let whole = fs::read(topologies.join("ghw-linux-amd64-offlineCPUs.tar.gz")).expect("capture");
    let dir = tempfile::tempdir().expect("temp dir");
    let cut = dir.path().join("cut.tar.gz");
    fs::write(&cut, &whole[..whole.len() / 2]).expect("write");
    let e = error(&cut);
    assert!(matches!(e, DiscoveryError::Archive { .. }), "{e}");
    assert!(
        e.to_string()
            .starts_with(&format!("{}: cannot unpack the capture: ", cut.display())),
        "{e}"
    );

    let junk = dir.path().join("notes.txt");
    fs::write(&junk, "not a capture\n").expect("write");
    let e = error(&junk);
    assert!(e.to_string().contains("not a tar archive"), "{e}");

    // An archive of something else entirely.
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(3);
    header.set_mode(0o644);
    builder
        .append_data(&mut header, "etc/hostname", &b"pc\n"[..])
        .expect("tar");
    let other = dir.path().join("other.tar");
    fs::write(&other, builder.into_inner().expect("tar")).expect("write");
    let e = error(&other);
    assert!(matches!(e, DiscoveryError::NotSysfs { .. }), "{e}");
}

#[test]
fn hwloc_reader_refuses_other_xml_clearly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let svg = dir.path().join("picture.xml");
    fs::write(
        &svg,
        "<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"/>",
    )
    .expect("write");
    let e = read_hwloc(&svg).expect_err("svg");
    assert_eq!(
        e.to_string(),
        format!(
            "{}: not an hwloc XML topology: the root element is <svg>, hwloc writes <topology>",
            svg.display()
        )
    );
    let json = dir.path().join("machine.xml");
    fs::write(&json, "{\"topology\": {}}").expect("write");
    let e = read_hwloc(&json).expect_err("json");
    assert!(matches!(e, DiscoveryError::NotHwloc { .. }), "{e}");
    assert!(e.to_string().contains("not XML"), "{e}");
    let e = read_hwloc(&dir.path().join("missing.xml")).expect_err("missing");
    assert!(matches!(e, DiscoveryError::Io { .. }), "{e}");
}

#[test]
fn offline_cpus_are_a_warning() {
    let (_dir, root) = machine(&Shape::small());
    fs::write(cpu_dir(&root).join("online"), "0-29\n").expect("write");
    for cpu in [30, 31] {
        fs::remove_dir_all(cpu_dir(&root).join(format!("cpu{cpu}/topology"))).expect("rm");
        fs::write(cpu_dir(&root).join(format!("cpu{cpu}/online")), "0\n").expect("write");
    }
    let t = read_sysfs(&root).expect("reads");
    assert_eq!(t.cpus.len(), 30);
    assert_eq!(t.offline_cpus.to_string(), "30-31");
    assert!(t.warnings.contains(&Warning::OfflineCpus {
        cpus: t.offline_cpus.clone()
    }));
    assert_eq!(
        t.warnings[0].to_string(),
        "2 CPU(s) offline or not available: 30-31 (not in the machine model)"
    );
    // Old kernels: no global mask, per-CPU `online` files decide.
    fs::remove_file(cpu_dir(&root).join("online")).expect("rm");
    fs::remove_file(cpu_dir(&root).join("present")).expect("rm");
    let t = read_sysfs(&root).expect("reads");
    assert_eq!(t.offline_cpus.to_string(), "30-31");
    assert!(t.to_machine().is_ok());
}

#[test]
fn numa_node_minus_one_is_a_warning_and_no_affinity() {
    let (_dir, root) = machine(&Shape::small());
    let nic = root.join("sys/bus/pci/devices/0000:21:00.0/numa_node");
    fs::write(&nic, "-1\n").expect("write");
    let t = read_sysfs(&root).expect("reads");
    let device = t.pci_devices.iter().find(|d| d.address == "0000:21:00.0").expect("nic");
    assert!(device.numa.is_empty());
    assert!(t.warnings.contains(&Warning::NoNumaAffinity {
        devices: vec!["0000:21:00.0".into()]
    }));
}

#[test]
fn empty_and_memory_only_nodes_are_warnings_not_errors() {
    let (_dir, root) = machine(&Shape::small());
    let node_dir = root.join("sys/devices/system/node");
    // Node 7: no CPUs, no memory (a kernel may show an unpopulated node).
    fs::create_dir_all(node_dir.join("node7")).expect("mkdir");
    fs::write(node_dir.join("node7/cpulist"), "\n").expect("write");
    fs::write(
        node_dir.join("node7/meminfo"),
        "Node 7 MemTotal: 0 kB\nNode 7 MemFree: 0 kB\n",
    )
    .expect("write");
    let t = read_sysfs(&root).expect("reads");
    assert!(
        t.warnings.contains(&Warning::EmptyNumaNode { node: 7 }),
        "{:?}",
        t.warnings
    );
    // Distance rows no longer match the node count: warned, ignored.
    assert!(t.warnings.iter().any(|w| matches!(w, Warning::BadDistances { .. })));
    assert_eq!(t.numa_node(7).map(|n| n.cpus.len()), Some(0));
    assert!(t.to_machine().is_ok(), "an empty node is still a machine");
}

#[test]
fn a_kernel_without_numa_gives_one_node() {
    let (_dir, root) = machine(&Shape::small());
    fs::remove_dir_all(root.join("sys/devices/system/node")).expect("rm");
    fs::write(
        root.join("proc/meminfo"),
        "MemTotal:       1048576 kB\nMemFree: 1024 kB\n",
    )
    .expect("write");
    let t = read_sysfs(&root).expect("reads");
    assert_eq!(t.numa_nodes.len(), 1);
    assert_eq!(t.numa_nodes[0].memory, Some(1 << 30));
    assert_eq!(t.numa_nodes[0].cpus.len(), 32);
    assert!(t.warnings.contains(&Warning::NoNumaInformation));
}
