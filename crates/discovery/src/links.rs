//! The GPU link matrix from the PCI tree, in `nvidia-smi topo -m` terms,
//! for machines read without NVML (captures, hwloc files, hosts without the
//! NVIDIA driver, AMD GPUs).
//!
//! Owns the rule that turns two bridge paths into a [`PcieLevel`]. NVLink
//! and fabric links come from NVML (`nvml`) or hwloc's bandwidth matrices
//! (`hwloc`), which replace these where they exist.

use crate::topology::{GpuLink, GpuLinks, PciDevice, PcieLevel};

/// How two devices reach each other over PCIe.
///
/// `pci_path` lists the host bridge first, then the bridges down to the
/// device. Different host bridges: `NODE` when both devices sit on the same
/// NUMA node (or the machine has one), `SYS` otherwise. Same host bridge
/// but no shared bridge below it: `PHB`. A shared bridge with at most one
/// more bridge on each side — both devices below one PCIe switch, whose
/// upstream and downstream ports are bridges of their own — is `PIX`;
/// deeper is `PXB`.
pub fn pcie_level(a: &PciDevice, b: &PciDevice, single_node: bool) -> PcieLevel {
    let same_node = (!a.numa.is_empty() && a.numa == b.numa) || (a.numa.is_empty() && b.numa.is_empty() && single_node);
    let (Some(root_a), Some(root_b)) = (a.pci_path.first(), b.pci_path.first()) else {
        return if same_node { PcieLevel::Node } else { PcieLevel::Sys };
    };
    if root_a != root_b {
        return if same_node { PcieLevel::Node } else { PcieLevel::Sys };
    }
    let bridges_a = &a.pci_path[1..];
    let bridges_b = &b.pci_path[1..];
    let shared = bridges_a.iter().zip(bridges_b).take_while(|(x, y)| x == y).count();
    if shared == 0 {
        PcieLevel::Phb
    } else if bridges_a.len() - shared <= 1 && bridges_b.len() - shared <= 1 {
        PcieLevel::Pix
    } else {
        PcieLevel::Pxb
    }
}

/// The PCIe matrix between the GPUs, when there are at least two.
pub(crate) fn pcie_matrix(devices: &[PciDevice], single_node: bool) -> Option<GpuLinks> {
    let gpus: Vec<&PciDevice> = devices.iter().filter(|d| d.kind == crate::DeviceKind::Gpu).collect();
    if gpus.len() < 2 {
        return None;
    }
    let links = gpus
        .iter()
        .enumerate()
        .map(|(i, a)| {
            gpus.iter()
                .enumerate()
                .map(|(j, b)| {
                    if i == j {
                        GpuLink::Same
                    } else {
                        GpuLink::Pcie {
                            level: pcie_level(a, b, single_node),
                        }
                    }
                })
                .collect()
        })
        .collect();
    Some(GpuLinks {
        gpus: gpus.iter().map(|g| g.address.clone()).collect(),
        links,
        source: "PCI topology".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(path: &[&str], numa: &[usize]) -> PciDevice {
        let mut device = PciDevice::new("0000:01:00.0", 0x030200, Some(0x10de), Some(0x1db4));
        device.pci_path = path.iter().map(|s| s.to_string()).collect();
        device.numa = numa.to_vec();
        device
    }

    #[test]
    fn levels_read_like_nvidia_smi() {
        let switch_a = gpu(&["pci0000:00", "00:03.0", "02:00.0", "03:08.0"], &[0]);
        let switch_b = gpu(&["pci0000:00", "00:03.0", "02:00.0", "03:10.0"], &[0]);
        let same_port = gpu(&["pci0000:00", "00:03.0", "02:00.0", "03:08.0"], &[0]);
        let other_port = gpu(&["pci0000:00", "00:02.0"], &[0]);
        let deep = gpu(
            &["pci0000:00", "00:03.0", "02:00.0", "03:10.0", "05:00.0", "06:01.0"],
            &[0],
        );
        let other_root_same_node = gpu(&["pci0000:40", "40:01.0"], &[0]);
        let other_socket = gpu(&["pci0000:80", "80:01.0"], &[1]);
        let cases = [
            (&switch_a, &switch_b, PcieLevel::Pix),
            (&switch_a, &same_port, PcieLevel::Pix),
            (&switch_a, &other_port, PcieLevel::Phb),
            (&switch_a, &deep, PcieLevel::Pxb),
            (&switch_a, &other_root_same_node, PcieLevel::Node),
            (&switch_a, &other_socket, PcieLevel::Sys),
        ];
        for (a, b, expected) in cases {
            assert_eq!(
                pcie_level(a, b, false),
                expected,
                "{:?} vs {:?}",
                a.pci_path,
                b.pci_path
            );
            assert_eq!(pcie_level(b, a, false), expected, "symmetric");
        }
        let unknown = gpu(&[], &[]);
        assert_eq!(pcie_level(&unknown, &unknown.clone(), true), PcieLevel::Node);
        assert_eq!(pcie_level(&unknown, &unknown.clone(), false), PcieLevel::Sys);
    }
}
