//! Discover real machines for topoalign: the Linux sysfs of the running
//! machine or of a capture (directory or `.tar`/`.tar.gz`/`.tar.bz2`/
//! `.tar.xz` archive), hwloc XML exports (v1 and v2/v3), NVIDIA GPUs through
//! NVML, and the scenario `topology:` block — into a [`Topology`], which
//! becomes the engine's [`Machine`](topoalign_model::Machine) with
//! [`Topology::to_machine`] (and from there a scenario block with
//! `topoalign-scenario`'s `TopologySpec::from_machine`).
//!
//! For people: [`render_text`] (better than `numactl --hardware` and
//! `nvidia-smi topo -m` together) and [`render_svg`]/[`render_png`], which
//! take an optional [`Colouring`] to show allocations. For clusters:
//! [`resourceslices`], DRA `ResourceSlice`s of the PCI devices with the
//! standard locality attributes (`pcieRoot`, `numaNode`).
//!
//! Layout: pure `parse_*(&str)` functions in [`parse`]; readers that take a
//! root path ([`read_sysfs`], [`read_hwloc`], [`read_scenario`]) so tests
//! and captures use the same code as the live machine; errors name the path.
//! This crate does I/O; the engine crates must not depend on it.

mod error;
mod hwloc;
mod links;
mod nvml;
pub mod parse;
mod picture;
pub mod resourceslices;
mod scenario;
mod sysfs;
mod text;
mod topology;
mod tree;
mod vf;

pub use error::DiscoveryError;
pub use hwloc::{HwlocError, parse_hwloc_file, parse_hwloc_xml, read_hwloc};
pub use links::pcie_level;
pub use nvml::{NvmlError, NvmlGpu, NvmlSnapshot, apply_nvml, probe as probe_nvml};
pub use picture::{Colour, Colouring, PictureError, render_png, render_svg};
pub use scenario::{parse_scenario_topology, read_scenario};
pub use sysfs::read_sysfs;
pub use text::render_text;
pub use topology::{
    Cache, DeviceKind, Die, GpuDetails, GpuLink, GpuLinks, HugePages, LogicalCpu, NumaNode, Package, PciDevice,
    PcieLevel, ResourceDevice, ToMachineError, Topology, Warning, resources_from_pci,
};

/// Reads the machine this program runs on: sysfs under `/`, then NVML for
/// NVIDIA GPUs (without a driver, a note says so when the machine has
/// NVIDIA PCI devices — elsewhere NVML's absence is the normal case and not
/// worth a line on every command).
///
/// # Errors
/// [`DiscoveryError`] when `/sys` cannot be read.
pub fn read_local() -> Result<Topology, DiscoveryError> {
    let mut topology = read_sysfs(std::path::Path::new("/"))?;
    match probe_nvml() {
        Ok(snapshot) => apply_nvml(&mut topology, &snapshot),
        Err(note) if nvml_note_relevant(&topology) => topology.notes.push(note.to_string()),
        Err(_) => {}
    }
    Ok(topology)
}

/// PCI vendor id of NVIDIA.
const NVIDIA_VENDOR: u16 = 0x10de;

/// Whether NVML's absence is worth telling: the machine has NVIDIA devices.
pub fn nvml_note_relevant(topology: &Topology) -> bool {
    topology.pci_devices.iter().any(|d| d.vendor == Some(NVIDIA_VENDOR))
}
