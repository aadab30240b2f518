//! A sysfs tree with more than 64 NUMA nodes (issue #29): the kubelet
//! counts every `node<N>` directory and runs such a machine under topology
//! policy `none`, so discovery must give the whole machine — 72 nodes read
//! with their own ids (`Machine::with_numa_labels`), each CPU on the node
//! whose `cpulist` names it, the distance rows as written — and warn that
//! the ids past 63 do not fit the kubelet's masks, without calling them
//! device memory (they have CPUs). Every expected figure comes from the
//! tree the test writes.

mod support;

use std::path::PathBuf;

use support::synthetic::{Shape, write_sysfs};
use topoalign_discovery::{Warning, read_sysfs};

/// Four sockets of 18 NUMA nodes, two 2-thread cores per node: 72 nodes,
/// 288 CPUs (no PCI devices: the synthetic bus numbering stops at 8
/// nodes).
fn shape() -> Shape {
    Shape {
        sockets: 4,
        nodes_per_socket: 18,
        cores_per_node: 2,
        threads: 2,
        cores_per_l3: 2,
        pci: false,
    }
}

fn tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path().join("capture");
    write_sysfs(&root, &shape());
    (dir, root)
}

/// The CPUs the tree lists for node `id` (its `cpulist`).
fn cpulist(root: &std::path::Path, id: usize) -> String {
    std::fs::read_to_string(root.join(format!("sys/devices/system/node/node{id}/cpulist")))
        .expect("cpulist")
        .trim()
        .to_owned()
}

/// The distance row the tree holds for node `id`.
fn distance_row(root: &std::path::Path, id: usize) -> Vec<u64> {
    std::fs::read_to_string(root.join(format!("sys/devices/system/node/node{id}/distance")))
        .expect("distance")
        .split_whitespace()
        .map(|d| d.parse().expect("a distance"))
        .collect()
}

#[test]
fn a_tree_of_72_numa_nodes_is_the_72_node_machine() {
    let (_dir, root) = tree();
    let topology = read_sysfs(&root).expect("reads");
    assert_eq!(topology.numa_nodes.len(), 72);
    assert_eq!(topology.cpus.len(), 288);
    let past: Vec<usize> = (64..72).collect();
    assert!(
        topology.warnings.contains(&Warning::NumaIdsPastMasks { nodes: past }),
        "{:?}",
        topology.warnings
    );
    // Nodes with CPUs are no device memory, whatever their ids.
    assert!(
        !topology
            .warnings
            .iter()
            .any(|w| matches!(w, Warning::DeviceMemoryNodes { .. })),
        "{:?}",
        topology.warnings
    );

    let machine = topology.to_machine().expect("the kubelet runs this machine under none");
    assert_eq!(machine.numa_nodes().len(), 72);
    assert!(!machine.fits_numa_masks());
    assert_eq!(machine.numa_id_past_masks(), Some(64));
    let labels: Vec<usize> = machine.numa_nodes().iter().map(|n| machine.numa_label(n.id)).collect();
    assert_eq!(labels, (0..72).collect::<Vec<_>>());
    for id in [0, 63, 64, 70, 71] {
        let index = machine.numa_id_of_label(id).expect("every id is a node");
        let cpus: topoalign_model::CpuSet = machine
            .cpus()
            .iter()
            .filter(|c| c.numa == index)
            .map(|c| c.id)
            .collect();
        assert_eq!(cpus.to_string(), cpulist(&root, id), "NUMA node {id}");
        let node = machine.numa_node(index).expect("node");
        assert_eq!(node.memory, 32 << 30, "NUMA node {id}");
        assert_eq!(
            node.distances.as_deref(),
            Some(&distance_row(&root, id)[..]),
            "NUMA node {id}: one distance per node, in id order"
        );
    }
}

/// The same tree as an archive (how captures travel) reads the same.
#[test]
fn a_capture_archive_of_72_nodes_reads_the_same() {
    let (dir, root) = tree();
    let from_dir = read_sysfs(&root).expect("directory");
    let mut builder = tar::Builder::new(Vec::new());
    builder.follow_symlinks(false);
    builder.append_dir_all("capture", &root).expect("tar");
    let archive = dir.path().join("capture.tar");
    std::fs::write(&archive, builder.into_inner().expect("tar bytes")).expect("written");
    let from_archive = read_sysfs(&archive).expect("archive");
    assert_eq!(from_archive.numa_nodes.len(), 72);
    let machine = from_archive.to_machine().expect("machine");
    assert_eq!(machine, from_dir.to_machine().expect("machine"));
}
