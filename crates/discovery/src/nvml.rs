//! NVIDIA GPUs through NVML (`libnvidia-ml.so.1`, loaded at run time by
//! `nvml-wrapper`): UUID, name, memory, and the GPU-to-GPU link matrix
//! (NVLink count per pair, else NVML's common PCIe ancestor level).
//!
//! Owns the NVML calls ([`probe`]) and how their answers enrich a topology
//! ([`apply_nvml`], pure, tested with made-up snapshots). A machine without
//! the driver is normal: [`probe`] then returns a one-line note.

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::TopologyLevel;

use crate::parse::normalize_pci_address;
use crate::topology::{GpuDetails, GpuLink, GpuLinks, PciDevice, PcieLevel, Topology};

/// NVML's `NVML_NVLINK_MAX_LINKS` (not re-exported by `nvml-wrapper`).
const NVLINK_MAX_LINKS: u32 = 18;

/// What NVML reported, as plain data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvmlSnapshot {
    pub gpus: Vec<NvmlGpu>,
    /// `links[i][j]` between `gpus[i]` and `gpus[j]`, when NVML answered.
    pub links: Vec<Vec<Option<GpuLink>>>,
}

/// One GPU as NVML reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvmlGpu {
    /// Kernel-style PCI address (`0000:3b:00.0`).
    pub address: String,
    pub uuid: String,
    pub name: String,
    pub memory: u64,
}

/// Why NVML says nothing about the GPUs: a one-line note for the machine's
/// report, not a failure.
#[derive(Debug, thiserror::Error)]
pub enum NvmlError {
    /// No driver, or its library would not load.
    #[error("NVML not available ({0}): no NVIDIA GPU details or NVLink counts")]
    Unavailable(nvml_wrapper::error::NvmlError),
    #[error("NVML: cannot count GPUs: {0}")]
    Count(nvml_wrapper::error::NvmlError),
    #[error("NVML: GPU {index}: {error}")]
    Gpu {
        index: u32,
        error: nvml_wrapper::error::NvmlError,
    },
}

/// Asks NVML about the local GPUs.
///
/// # Errors
/// [`NvmlError`], a note (not a failure) when there is no driver or NVML
/// fails.
pub fn probe() -> Result<NvmlSnapshot, NvmlError> {
    let nvml = Nvml::init().map_err(NvmlError::Unavailable)?;
    let count = nvml.device_count().map_err(NvmlError::Count)?;
    let mut gpus = Vec::new();
    for index in 0..count {
        let device = nvml
            .device_by_index(index)
            .map_err(|error| NvmlError::Gpu { index, error })?;
        let bus_id = device.pci_info().map(|p| p.bus_id).unwrap_or_default();
        gpus.push(NvmlGpu {
            address: normalize_pci_address(&bus_id).unwrap_or(bus_id),
            uuid: device.uuid().unwrap_or_default(),
            name: device.name().unwrap_or_default(),
            memory: device.memory_info().map(|m| m.total).unwrap_or(0),
        });
    }
    let mut links = vec![vec![None; gpus.len()]; gpus.len()];
    for (i, row) in links.iter_mut().enumerate() {
        let Ok(device) = nvml.device_by_index(i as u32) else {
            continue;
        };
        // NVLinks per remote GPU.
        let mut nvlinks = vec![0u32; gpus.len()];
        for link in 0..NVLINK_MAX_LINKS {
            let wrapper = device.link_wrapper_for(link);
            if !matches!(wrapper.is_active(), Ok(true)) {
                continue;
            }
            let Ok(remote) = wrapper.remote_pci_info() else {
                continue;
            };
            let remote = normalize_pci_address(&remote.bus_id);
            if let Some(j) = gpus.iter().position(|g| Some(&g.address) == remote.as_ref()) {
                nvlinks[j] += 1;
            }
        }
        for (j, slot) in row.iter_mut().enumerate() {
            *slot = if i == j {
                Some(GpuLink::Same)
            } else if nvlinks[j] > 0 {
                Some(GpuLink::NvLink { links: nvlinks[j] })
            } else {
                nvml.device_by_index(j as u32)
                    .and_then(|other| device.topology_common_ancestor(other))
                    .ok()
                    .map(|level| GpuLink::Pcie {
                        level: pcie_level(level),
                    })
            };
        }
    }
    Ok(NvmlSnapshot { gpus, links })
}

fn pcie_level(level: TopologyLevel) -> PcieLevel {
    match level {
        TopologyLevel::Internal | TopologyLevel::Single => PcieLevel::Pix,
        TopologyLevel::Multiple => PcieLevel::Pxb,
        TopologyLevel::HostBridge => PcieLevel::Phb,
        TopologyLevel::Node => PcieLevel::Node,
        TopologyLevel::System => PcieLevel::Sys,
    }
}

/// Adds NVML's answers to a topology read from sysfs: GPU details on the
/// matching PCI devices (a GPU sysfs does not show is added), NVML's links
/// in place of the PCI-derived ones, and the `nvidia.com/gpu` devices
/// renamed to their UUIDs (what the NVIDIA device plugin advertises).
pub fn apply_nvml(topology: &mut Topology, snapshot: &NvmlSnapshot) {
    for gpu in &snapshot.gpus {
        let index = match topology.pci_devices.iter().position(|d| d.address == gpu.address) {
            Some(index) => index,
            None => {
                topology
                    .pci_devices
                    .push(PciDevice::new(gpu.address.clone(), 0x030200, Some(0x10de), None));
                topology.pci_devices.len() - 1
            }
        };
        topology.pci_devices[index].gpu = Some(GpuDetails {
            uuid: gpu.uuid.clone(),
            name: gpu.name.clone(),
            memory: gpu.memory,
        });
    }
    topology.pci_devices.sort_by(|a, b| a.address.cmp(&b.address));
    let addresses: Vec<String> = topology.gpus().map(|g| g.address.clone()).collect();
    if addresses.len() >= 2 {
        let single_node = topology.numa_nodes.iter().filter(|n| !n.cpus.is_empty()).count() <= 1;
        let mut links = crate::links::pcie_matrix(&topology.pci_devices, single_node).unwrap_or(GpuLinks {
            gpus: addresses.clone(),
            links: Vec::new(),
            source: String::new(),
        });
        let position = |address: &String| snapshot.gpus.iter().position(|g| &g.address == address);
        for (i, a) in addresses.iter().enumerate() {
            for (j, b) in addresses.iter().enumerate() {
                if let (Some(x), Some(y)) = (position(a), position(b))
                    && let Some(Some(link)) = snapshot.links.get(x).and_then(|row| row.get(y))
                    && let Some(slot) = links.links.get_mut(i).and_then(|row| row.get_mut(j))
                {
                    *slot = link.clone();
                }
            }
        }
        links.source = "NVML".into();
        topology.gpu_links = Some(links);
    }
    topology.refresh_resources();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeviceKind;

    #[test]
    fn nvml_answers_replace_pci_guesses() {
        let mut topology = Topology::empty("test");
        for address in ["0000:3b:00.0", "0000:5e:00.0"] {
            topology
                .pci_devices
                .push(PciDevice::new(address, 0x030200, Some(0x10de), Some(0x1db4)));
        }
        let snapshot = NvmlSnapshot {
            gpus: vec![
                NvmlGpu {
                    address: "0000:3b:00.0".into(),
                    uuid: "GPU-aaaa".into(),
                    name: "Tesla V100".into(),
                    memory: 16 << 30,
                },
                NvmlGpu {
                    address: "0000:5e:00.0".into(),
                    uuid: "GPU-bbbb".into(),
                    name: "Tesla V100".into(),
                    memory: 16 << 30,
                },
            ],
            links: vec![
                vec![Some(GpuLink::Same), Some(GpuLink::NvLink { links: 2 })],
                vec![Some(GpuLink::NvLink { links: 2 }), Some(GpuLink::Same)],
            ],
        };
        apply_nvml(&mut topology, &snapshot);
        let links = topology.gpu_links.as_ref().unwrap();
        assert_eq!(links.source, "NVML");
        assert_eq!(links.links[0][1].to_string(), "NV2");
        assert_eq!(topology.resources["nvidia.com/gpu"][1].id, "GPU-bbbb");
        assert_eq!(topology.pci_devices[0].kind, DeviceKind::Gpu);
    }

    #[test]
    fn without_a_driver_probe_is_a_note_not_a_failure() {
        // On machines with a driver this returns GPUs; either way no panic.
        match probe() {
            Ok(snapshot) => assert_eq!(snapshot.links.len(), snapshot.gpus.len()),
            Err(note) => assert!(note.to_string().starts_with("NVML"), "{note}"),
        }
    }
}
