//! DRA `ResourceSlice`s (`resource.k8s.io/v1`) of a machine's PCI devices,
//! carrying the locality attributes that device-plugin nodes and DRA
//! drivers that publish none lack: the standard
//! `resource.kubernetes.io/pcieRoot`, `pciBusID` and `numaNode` (KEP-6072),
//! by the rules of Kubernetes' own helper library,
//! `k8s.io/dynamic-resource-allocation/deviceattribute` (v0.37), so that a
//! `matchAttribute` constraint can align these devices with those of
//! drivers that call the helper.
//!
//! Entry point: [`resource_slices`], pure: a [`Topology`] and
//! [`SliceOptions`] in, slices and [`SliceWarning`]s out. The sysfs reader
//! records what the rules need ([`PciDevice::numa_node_file`],
//! [`PciDevice::pcie_root`]); [`validate_resource_slice`] checks a slice
//! against the API server's offline rules.
//!
//! The helper's rules, read from its source (`pci_linux.go`,
//! `numa_linux.go`, `attribute.go`):
//! - Every standard attribute needs a PCI address of the form
//!   `dddd:bb:dd.f` in lower-case hex (`verifyPCIBDFFormat`); a device with
//!   another address (a five-digit VMD domain) gets none.
//! - `pcieRoot` (string): the directory right under `/sys/devices` that the
//!   device's `bus/pci/devices/<address>` link leads into, when the link
//!   leads to `devices/pci…/…/<address>` — `pci<domain>:<bus>` of the root
//!   complex, however many bridges or switches lie below it; a virtual
//!   function sits below its physical function's port and shares its root.
//!   No such link, no attribute.
//! - `pciBusID` (string): the address itself.
//! - `numaNode`: the device's `numa_node` file. Negative (-1: no NUMA
//!   affinity) — never published, "a value of -1 would match every other
//!   NUMA-less device"; the helper returns an error and the driver leaves
//!   the attribute out. Nothing else is special-cased, a single-NUMA-node
//!   machine included: its devices publish 0 when the kernel says 0 and
//!   nothing when it says -1. Two forms under the one name (the KEP's list
//!   has no name of its own such as `numaNodes`): the scalar `int`
//!   (`ScalarAttribute`, no feature gate) and the list `ints`
//!   (`ListAttribute`, alpha `DRAListTypeAttributes`): the device's node
//!   first, then, ascending, every other node at the minimum non-self SLIT
//!   distance from it whose socket (the `physical_package_id` of a CPU in
//!   its `cpulist`) is the device node's — a node whose socket cannot be
//!   told (no CPUs) is kept, and when the device node's own socket cannot be
//!   told nobody is filtered out; no distances or no other node: `[node]`.
//!
//! Where this differs from the helper, on purpose: the kernel's distance
//! row has one column per *online* node in ascending id order, and the
//! helper takes the column's position for the node id; with ids that are
//! not 0..n-1 (POWER's 0 and 8) it names nodes that are not those. The
//! lists here use the real ids and a [`SliceWarning::SparseNumaIds`] says
//! that helper-based drivers on the machine publish something else. Devices
//! of hwloc XML have no sysfs links: no `pcieRoot`, and `numaNode` from the
//! one NUMA node hwloc attaches them to.

mod validate;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

pub use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, ResourceSlice};
use k8s_openapi::api::resource::v1::{ResourcePool, ResourceSliceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub use validate::{
    MAX_ATTRIBUTE_VALUES, MAX_ATTRIBUTES, MAX_DEVICES, MAX_DEVICES_ADVANCED, MAX_VALUE_LENGTH, validate_resource_slice,
};

use crate::topology::{DeviceKind, NumaNode, PciDevice, Topology};

/// `StandardDeviceAttributePCIeRoot`.
pub const PCIE_ROOT: &str = "resource.kubernetes.io/pcieRoot";
/// `StandardDeviceAttributePCIBusID`.
pub const PCI_BUS_ID: &str = "resource.kubernetes.io/pciBusID";
/// `StandardDeviceAttributeNUMANode` (KEP-6072), scalar or list.
pub const NUMA_NODE: &str = "resource.kubernetes.io/numaNode";
/// The driver name when none is given.
pub const DEFAULT_DRIVER: &str = "pci.topoalign.io";
/// The label every slice carries, so that `kubectl delete resourceslices
/// -l app.kubernetes.io/managed-by=topoalign` finds them.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "topoalign");

/// Which form `resource.kubernetes.io/numaNode` takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NumaNodeForm {
    /// `int`: the device's NUMA node. Needs no feature gate.
    #[default]
    Scalar,
    /// `ints`: the device's node, then the same-socket nodes at the minimum
    /// SLIT distance. Needs `DRAListTypeAttributes` (alpha in 1.37) on the
    /// API server and scheduler: with it off, the API server drops the list
    /// and refuses the attribute left without a value. A slice with list
    /// attributes holds at most 64 devices.
    List,
}

/// Whose slices they are.
#[derive(Clone, Debug)]
pub struct SliceOptions {
    /// The Kubernetes node (`spec.nodeName`).
    pub node_name: String,
    /// The DRA driver name (`spec.driver`; the domain of the driver's own
    /// attributes).
    pub driver: String,
    /// The pool; the node name when `None`.
    pub pool: Option<String>,
    pub numa_node_form: NumaNodeForm,
}

impl SliceOptions {
    /// Slices of `node_name` under [`DEFAULT_DRIVER`], pool = node, scalar
    /// `numaNode`.
    pub fn for_node(node_name: impl Into<String>) -> SliceOptions {
        SliceOptions {
            node_name: node_name.into(),
            driver: DEFAULT_DRIVER.into(),
            pool: None,
            numa_node_form: NumaNodeForm::Scalar,
        }
    }
}

/// The slices of one node and what a person should know about them.
#[derive(Clone, Debug)]
pub struct Slices {
    /// One pool; more than one slice only past 128 devices (64 with list
    /// attributes), named `<node>-<driver>-<index>`.
    pub slices: Vec<ResourceSlice>,
    pub warnings: Vec<SliceWarning>,
}

/// An option that makes no valid slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SliceOption {
    NodeName,
    Driver,
    Pool,
}

impl fmt::Display for SliceOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SliceOption::NodeName => "node name",
            SliceOption::Driver => "driver name",
            SliceOption::Pool => "pool name",
        })
    }
}

/// Why no slices could be made: an option the API server would refuse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{option} {value:?}: {detail}")]
pub struct SliceError {
    pub option: SliceOption,
    pub value: String,
    pub detail: String,
}

/// Why a device has no `numaNode`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoLocality {
    /// Its `numa_node` file says -1 (any negative value): no NUMA affinity.
    Negative { value: i64 },
    /// Nothing says: no `numa_node` file, or hwloc attaches it to the whole
    /// machine.
    Unknown,
    /// hwloc attaches it to several NUMA nodes: no one physical node.
    Several { nodes: Vec<usize> },
}

/// Something the slices leave out, never a reason to fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SliceWarning {
    /// A device published without `resource.kubernetes.io/numaNode`.
    NoNumaNode {
        address: String,
        kind: DeviceKind,
        why: NoLocality,
        /// The machine has one NUMA node with CPUs.
        single_node: bool,
    },
    /// Devices published without `resource.kubernetes.io/pcieRoot`.
    NoPcieRoot { addresses: Vec<String> },
    /// Devices whose address is not `dddd:bb:dd.f`: published without any
    /// standard attribute.
    NotBdf { address: String },
    /// A device no DNS-label name can be made for: left out.
    Unnamed { address: String },
    /// The same address twice (hwloc test files): published once.
    Duplicate { address: String },
    /// NUMA ids that are not 0..n-1 under the list form (see the module).
    SparseNumaIds { ids: Vec<usize> },
    /// No PCI device of interest: the pool's one slice is empty.
    NoDevices,
}

impl fmt::Display for SliceWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SliceWarning::NoNumaNode {
                address,
                kind,
                why,
                single_node,
            } => {
                let why = match why {
                    NoLocality::Negative { value } => format!("its numa_node is {value} (no NUMA affinity)"),
                    NoLocality::Unknown => {
                        "no NUMA affinity is known (no numa_node file, or hwloc attaches it to the whole machine)"
                            .to_string()
                    }
                    NoLocality::Several { nodes } => {
                        let ids: Vec<String> = nodes.iter().map(ToString::to_string).collect();
                        format!("hwloc attaches it to NUMA nodes {}, not one", ids.join(", "))
                    }
                };
                write!(
                    f,
                    "{} {address}: {why}: published without {NUMA_NODE}, which never invents locality{}",
                    kind.label(),
                    if *single_node {
                        " (even on this single-NUMA-node machine)"
                    } else {
                        ""
                    }
                )
            }
            SliceWarning::NoPcieRoot { addresses } => write!(
                f,
                "{} device(s) published without {PCIE_ROOT}: no sysfs link of theirs leads into /sys/devices/pci… (hwloc XML and scenarios have none): {}",
                addresses.len(),
                addresses.join(", ")
            ),
            SliceWarning::NotBdf { address } => write!(
                f,
                "{address}: not a dddd:bb:dd.f PCI address: published without standard attributes (the deviceattribute helper refuses it)"
            ),
            SliceWarning::Unnamed { address } => {
                write!(f, "{address}: no device name (a DNS label) can be made of it: left out")
            }
            SliceWarning::Duplicate { address } => write!(f, "{address} is listed twice: published once"),
            SliceWarning::SparseNumaIds { ids } => {
                let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
                write!(
                    f,
                    "NUMA node ids {} are not 0..n-1: the deviceattribute helper reads the kernel's distance row by position and so lists other ids on this machine; these lists use the real ids",
                    ids.join(", ")
                )
            }
            SliceWarning::NoDevices => f.write_str("no PCI device of interest: the pool's slice has no devices"),
        }
    }
}

/// The `ResourceSlice`s of the machine's PCI devices of interest (GPUs,
/// NICs and their virtual functions, NVMe drives, accelerators, display
/// controllers: [`DeviceKind::is_of_interest`]), one pool on one node.
///
/// Each device is named `pci-<address with - for : and .>`
/// (`pci-0000-3b-00-0`) and carries the standard attributes (see the
/// module) and the driver's own: `pciAddress`, `vendorID` and `deviceID`
/// (four hex digits), `class` (six), `kind` (`gpu`, `ethernet-nic`,
/// `infiniband-nic`, `other-nic`, `nvme`, `accelerator`, `display`),
/// `virtualFunction`, and a virtual function's `physicalFunction`.
///
/// # Errors
/// [`SliceError`] when the node, driver or pool name is one the API server
/// refuses, or the slice names they make are too long.
pub fn resource_slices(topology: &Topology, options: &SliceOptions) -> Result<Slices, SliceError> {
    let invalid = |option, value: &str, detail: String| SliceError {
        option,
        value: value.to_string(),
        detail,
    };
    validate::dns_subdomain(&options.node_name).map_err(|e| invalid(SliceOption::NodeName, &options.node_name, e))?;
    validate::driver_name(&options.driver).map_err(|e| invalid(SliceOption::Driver, &options.driver, e))?;
    let pool = options.pool.clone().unwrap_or_else(|| options.node_name.clone());
    validate::pool_name(&pool).map_err(|e| invalid(SliceOption::Pool, &pool, e))?;

    let mut warnings = Vec::new();
    let single_node = topology.numa_nodes.iter().filter(|n| !n.cpus.is_empty()).count() <= 1;
    if options.numa_node_form == NumaNodeForm::List {
        let ids: Vec<usize> = topology.numa_nodes.iter().map(|n| n.id).collect();
        if ids.iter().enumerate().any(|(position, &id)| position != id) {
            warnings.push(SliceWarning::SparseNumaIds { ids });
        }
    }
    let mut seen = BTreeSet::new();
    let mut devices = Vec::new();
    let mut without_root = Vec::new();
    for pci in topology.pci_devices.iter().filter(|d| d.kind.is_of_interest()) {
        if !seen.insert(pci.address.as_str()) {
            warnings.push(SliceWarning::Duplicate {
                address: pci.address.clone(),
            });
            continue;
        }
        let name = device_name(&pci.address);
        if validate::dns_label(&name).is_err() {
            warnings.push(SliceWarning::Unnamed {
                address: pci.address.clone(),
            });
            continue;
        }
        let mut attributes = own_attributes(pci);
        if is_bdf(&pci.address) {
            attributes.insert(PCI_BUS_ID.into(), string(&pci.address));
            match &pci.pcie_root {
                Some(root) => {
                    attributes.insert(PCIE_ROOT.into(), string(root));
                }
                None => without_root.push(pci.address.clone()),
            }
            match physical_node(pci) {
                Ok(node) => {
                    let value = match options.numa_node_form {
                        NumaNodeForm::Scalar => DeviceAttribute {
                            int: Some(node),
                            ..DeviceAttribute::default()
                        },
                        NumaNodeForm::List => DeviceAttribute {
                            ints: Some(numa_list(topology, node)),
                            ..DeviceAttribute::default()
                        },
                    };
                    attributes.insert(NUMA_NODE.into(), value);
                }
                Err(why) => warnings.push(SliceWarning::NoNumaNode {
                    address: pci.address.clone(),
                    kind: pci.kind,
                    why,
                    single_node,
                }),
            }
        } else {
            warnings.push(SliceWarning::NotBdf {
                address: pci.address.clone(),
            });
        }
        devices.push(Device {
            name,
            attributes: Some(attributes),
            ..Device::default()
        });
    }
    if !without_root.is_empty() {
        warnings.push(SliceWarning::NoPcieRoot {
            addresses: without_root,
        });
    }
    if devices.is_empty() {
        warnings.push(SliceWarning::NoDevices);
    }

    let lists = devices
        .iter()
        .any(|d| d.attributes.iter().flatten().any(|(_, a)| a.ints.is_some()));
    let per_slice = if lists { MAX_DEVICES_ADVANCED } else { MAX_DEVICES };
    let chunks: Vec<Vec<Device>> = if devices.is_empty() {
        vec![Vec::new()]
    } else {
        devices.chunks(per_slice).map(<[Device]>::to_vec).collect()
    };
    let count = i64::try_from(chunks.len()).unwrap_or(i64::MAX);
    let prefix = format!("{}-{}", options.node_name, options.driver.to_lowercase());
    let last_name = format!("{prefix}-{}", chunks.len() - 1);
    validate::dns_subdomain(&last_name).map_err(|e| {
        invalid(
            SliceOption::NodeName,
            &options.node_name,
            format!("with the driver name it makes slice names the API server refuses: {e}"),
        )
    })?;
    let slices = chunks
        .into_iter()
        .enumerate()
        .map(|(index, devices)| ResourceSlice {
            metadata: ObjectMeta {
                name: Some(format!("{prefix}-{index}")),
                labels: Some(BTreeMap::from([(MANAGED_BY.0.to_string(), MANAGED_BY.1.to_string())])),
                ..ObjectMeta::default()
            },
            spec: ResourceSliceSpec {
                driver: options.driver.clone(),
                node_name: Some(options.node_name.clone()),
                pool: ResourcePool {
                    name: pool.clone(),
                    generation: 0,
                    resource_slice_count: count,
                },
                devices: Some(devices),
                ..ResourceSliceSpec::default()
            },
        })
        .collect();
    Ok(Slices { slices, warnings })
}

/// `pci-` and the address with `-` for `:` and `.`, lower case.
fn device_name(address: &str) -> String {
    let tail: String = address
        .chars()
        .map(|c| match c {
            ':' | '.' => '-',
            c => c.to_ascii_lowercase(),
        })
        .collect();
    format!("pci-{tail}")
}

/// The helper's `verifyPCIBDFFormat`: `^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-9a-f]$`.
fn is_bdf(address: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    let mut parts = address.splitn(3, ':');
    let (Some(domain), Some(bus), Some(rest)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let Some((device, function)) = rest.split_once('.') else {
        return false;
    };
    hex(domain, 4) && hex(bus, 2) && hex(device, 2) && hex(function, 1)
}

/// The driver's own attributes (unqualified names: the driver's domain).
fn own_attributes(pci: &PciDevice) -> BTreeMap<String, DeviceAttribute> {
    let mut attributes = BTreeMap::new();
    attributes.insert("pciAddress".to_string(), string(&pci.address));
    if let Some(vendor) = pci.vendor {
        attributes.insert("vendorID".to_string(), string(format!("{vendor:04x}")));
    }
    if let Some(device) = pci.device {
        attributes.insert("deviceID".to_string(), string(format!("{device:04x}")));
    }
    attributes.insert("class".to_string(), string(format!("{:06x}", pci.class)));
    attributes.insert("kind".to_string(), string(kind_name(pci.kind)));
    attributes.insert(
        "virtualFunction".to_string(),
        DeviceAttribute {
            bool: Some(pci.virtual_function),
            ..DeviceAttribute::default()
        },
    );
    if let Some(pf) = &pci.physical_function {
        attributes.insert("physicalFunction".to_string(), string(pf));
    }
    attributes
}

fn string(value: impl Into<String>) -> DeviceAttribute {
    DeviceAttribute {
        string: Some(value.into()),
        ..DeviceAttribute::default()
    }
}

/// The `kind` attribute: [`DeviceKind`]'s serialized name.
fn kind_name(kind: DeviceKind) -> &'static str {
    match kind {
        DeviceKind::Gpu => "gpu",
        DeviceKind::EthernetNic => "ethernet-nic",
        DeviceKind::InfinibandNic => "infiniband-nic",
        DeviceKind::OtherNic => "other-nic",
        DeviceKind::Nvme => "nvme",
        DeviceKind::Accelerator => "accelerator",
        DeviceKind::Display => "display",
        DeviceKind::Other => "other",
    }
}

/// The device's physical NUMA node: sysfs `numa_node` when read (published
/// as written when not negative, as the helper does, even for a node the
/// machine does not list), else the one NUMA node hwloc gives.
fn physical_node(pci: &PciDevice) -> Result<i64, NoLocality> {
    match pci.numa_node_file {
        Some(value) if value >= 0 => Ok(value),
        Some(value) => Err(NoLocality::Negative { value }),
        None => match pci.numa.as_slice() {
            [] => Err(NoLocality::Unknown),
            &[node] => i64::try_from(node).map_err(|_| NoLocality::Unknown),
            nodes => Err(NoLocality::Several { nodes: nodes.to_vec() }),
        },
    }
}

/// The list form: `node`, then ascending every other node at the minimum
/// non-self distance from it on its socket (or of unknown socket).
fn numa_list(topology: &Topology, node: i64) -> Vec<i64> {
    let mut list = vec![node];
    let Some(home) = usize::try_from(node).ok().and_then(|id| topology.numa_node(id)) else {
        return list;
    };
    let others = || home.distances.iter().filter(|&(&to, _)| to != home.id);
    let Some(nearest) = others().map(|(_, &d)| d).min() else {
        return list;
    };
    let socket = socket_of(topology, home);
    for (&to, _) in others().filter(|&(_, &d)| d == nearest) {
        let theirs = topology.numa_node(to).and_then(|n| socket_of(topology, n));
        let same_socket = match (socket, theirs) {
            (Some(mine), Some(theirs)) => mine == theirs,
            _ => true,
        };
        if same_socket && let Ok(to) = i64::try_from(to) {
            list.push(to);
        }
    }
    list
}

/// The package of an online CPU the node's `cpulist` names.
fn socket_of(topology: &Topology, node: &NumaNode) -> Option<u32> {
    node.local_cpus.iter().find_map(|cpu| {
        topology
            .cpus
            .binary_search_by_key(&cpu, |c| c.id)
            .ok()
            .map(|at| topology.cpus[at].package)
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use topoalign_model::CpuSet;

    use super::*;
    use crate::topology::{LogicalCpu, NumaNode};

    /// A NUMA node: id, socket (`None`: no CPUs), distances by node id.
    type NodeRow<'a> = (usize, Option<u32>, &'a [(usize, u64)]);

    /// One CPU per node with CPUs (id = node id) on its socket.
    fn machine(nodes: &[NodeRow]) -> Topology {
        let mut topology = Topology::empty("test");
        for &(id, socket, row) in nodes {
            let cpu = u32::try_from(id).unwrap();
            let mut cpus = CpuSet::new();
            if let Some(package) = socket {
                cpus.insert(cpu);
                topology.cpus.push(LogicalCpu {
                    id: cpu,
                    core: cpu,
                    package,
                    die: None,
                    numa: Some(id),
                    l3: None,
                });
            }
            topology.numa_nodes.push(NumaNode {
                id,
                local_cpus: cpus.clone(),
                cpus,
                memory: Some(1 << 30),
                memory_free: None,
                hugepages: BTreeMap::new(),
                distances: row.iter().copied().collect(),
                subtype: None,
            });
        }
        topology.cpus.sort_by_key(|c| c.id);
        topology
    }

    fn nic(address: &str, numa_node_file: Option<i64>) -> PciDevice {
        let mut device = PciDevice::new(address, 0x020000, Some(0x8086), Some(0x1593));
        device.numa_node_file = numa_node_file;
        device
    }

    fn numa_attribute(slices: &Slices, device: &str) -> Option<DeviceAttribute> {
        slices.slices[0]
            .spec
            .devices
            .iter()
            .flatten()
            .find(|d| d.name == device)
            .and_then(|d| d.attributes.as_ref()?.get(NUMA_NODE).cloned())
    }

    /// The KEP's AMD EPYC 9825 NPS4 example: the NVMe on node 0 lists its
    /// socket's nodes 0-3, the VF on node 6 lists 6, then 4, 5, 7.
    #[test]
    fn the_keps_nps4_example() {
        let row = |me: usize| -> Vec<(usize, u64)> {
            (0..8)
                .map(|to| {
                    (
                        to,
                        if to == me {
                            10
                        } else if to / 4 == me / 4 {
                            12
                        } else {
                            32
                        },
                    )
                })
                .collect()
        };
        let rows: Vec<Vec<(usize, u64)>> = (0..8).map(row).collect();
        let nodes: Vec<NodeRow> = (0..8)
            .map(|id| (id, Some(u32::try_from(id / 4).unwrap()), rows[id].as_slice()))
            .collect();
        let topology = machine(&nodes);
        assert_eq!(numa_list(&topology, 0), vec![0, 1, 2, 3]);
        assert_eq!(numa_list(&topology, 6), vec![6, 4, 5, 7]);
    }

    /// The socket filter: a node of the other socket at the same minimum
    /// distance is left out; a node whose socket cannot be told (no CPUs)
    /// is kept; with the device node's own socket unknown, nobody is left
    /// out.
    #[test]
    fn the_socket_filter_and_unknown_sockets() {
        let topology = machine(&[
            (0, Some(0), &[(0, 10), (1, 20), (2, 20), (3, 20)]),
            (1, Some(1), &[(0, 20), (1, 10), (2, 20), (3, 20)]),
            (2, None, &[(0, 20), (1, 20), (2, 10), (3, 20)]),
            (3, Some(0), &[(0, 20), (1, 20), (2, 20), (3, 10)]),
        ]);
        assert_eq!(numa_list(&topology, 0), vec![0, 2, 3]);
        assert_eq!(numa_list(&topology, 2), vec![2, 0, 1, 3], "node 2 has no socket");
        // No distances, or a node the machine does not list: the node alone.
        let lone = machine(&[(0, Some(0), &[]), (1, Some(0), &[])]);
        assert_eq!(numa_list(&lone, 0), vec![0]);
        assert_eq!(numa_list(&topology, 9), vec![9]);
        // A single node: no other node at any distance.
        let single = machine(&[(0, Some(0), &[(0, 10)])]);
        assert_eq!(numa_list(&single, 0), vec![0]);
    }

    #[test]
    fn minus_one_is_never_published_even_on_one_numa_node() {
        let mut topology = machine(&[(0, Some(0), &[(0, 10)])]);
        topology.pci_devices = vec![
            nic("0000:3b:00.0", Some(-1)),
            nic("0000:3b:00.1", Some(0)),
            nic("0000:3b:00.2", None),
        ];
        let slices = resource_slices(&topology, &SliceOptions::for_node("n1")).unwrap();
        assert_eq!(numa_attribute(&slices, "pci-0000-3b-00-0"), None);
        assert_eq!(numa_attribute(&slices, "pci-0000-3b-00-1").and_then(|a| a.int), Some(0));
        assert_eq!(numa_attribute(&slices, "pci-0000-3b-00-2"), None);
        let warnings: Vec<String> = slices.warnings.iter().map(ToString::to_string).collect();
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("0000:3b:00.0: its numa_node is -1") && w.contains("single-NUMA-node")),
            "{warnings:?}"
        );
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("0000:3b:00.2: no NUMA affinity is known"))
        );
    }

    #[test]
    fn sparse_ids_are_listed_by_id_with_a_warning() {
        let mut topology = machine(&[(0, Some(0), &[(0, 10), (8, 40)]), (8, Some(8), &[(0, 40), (8, 10)])]);
        topology.pci_devices = vec![nic("0000:01:00.0", Some(8))];
        let options = SliceOptions {
            numa_node_form: NumaNodeForm::List,
            ..SliceOptions::for_node("n1")
        };
        let slices = resource_slices(&topology, &options).unwrap();
        assert_eq!(
            numa_attribute(&slices, "pci-0000-01-00-0").and_then(|a| a.ints),
            Some(vec![8])
        );
        assert!(
            slices
                .warnings
                .contains(&SliceWarning::SparseNumaIds { ids: vec![0, 8] })
        );
    }

    #[test]
    fn addresses_outside_the_bdf_form_get_no_standard_attributes() {
        assert!(is_bdf("0000:3b:00.0"));
        for bad in [
            "10000:e0:1d.0",
            "0000:3B:00.0",
            "0000:3b:00.10",
            "3b:00.0",
            "0000:3b:00",
        ] {
            assert!(!is_bdf(bad), "{bad}");
        }
        let mut topology = machine(&[(0, Some(0), &[(0, 10)])]);
        let mut vmd = nic("10000:e0:1d.0", Some(0));
        vmd.pcie_root = Some("pci10000:e0".into());
        topology.pci_devices = vec![vmd];
        let slices = resource_slices(&topology, &SliceOptions::for_node("n1")).unwrap();
        let device = &slices.slices[0].spec.devices.as_ref().unwrap()[0];
        assert_eq!(device.name, "pci-10000-e0-1d-0");
        let names: Vec<&str> = device.attributes.as_ref().unwrap().keys().map(String::as_str).collect();
        assert!(
            names.iter().all(|n| !n.starts_with("resource.kubernetes.io/")),
            "{names:?}"
        );
    }

    #[test]
    fn options_the_api_server_refuses_are_errors_naming_the_option() {
        let topology = machine(&[(0, Some(0), &[])]);
        for (options, option) in [
            (SliceOptions::for_node("Node_1"), SliceOption::NodeName),
            (
                SliceOptions {
                    driver: "bad driver".into(),
                    ..SliceOptions::for_node("n1")
                },
                SliceOption::Driver,
            ),
            (
                SliceOptions {
                    pool: Some("a//b".into()),
                    ..SliceOptions::for_node("n1")
                },
                SliceOption::Pool,
            ),
            (SliceOptions::for_node("a".repeat(240)), SliceOption::NodeName),
        ] {
            let error = resource_slices(&topology, &options).unwrap_err();
            assert_eq!(error.option, option, "{error}");
        }
    }

    /// Past 128 devices the pool spans several slices, each counting them
    /// all; with list attributes the limit is 64.
    #[test]
    fn large_pools_are_split_within_the_apis_limits() {
        let mut topology = machine(&[(0, Some(0), &[(0, 10)])]);
        topology.pci_devices = (0..300)
            .map(|i| nic(&format!("0000:{:02x}:{:02x}.{}", i / 32, i % 32, 0), Some(0)))
            .collect();
        for (form, sizes) in [
            (NumaNodeForm::Scalar, vec![128, 128, 44]),
            (NumaNodeForm::List, vec![64, 64, 64, 64, 44]),
        ] {
            let options = SliceOptions {
                numa_node_form: form,
                ..SliceOptions::for_node("n1")
            };
            let slices = resource_slices(&topology, &options).unwrap();
            let got: Vec<usize> = slices
                .slices
                .iter()
                .map(|s| s.spec.devices.as_ref().map_or(0, Vec::len))
                .collect();
            assert_eq!(got, sizes, "{form:?}");
            for slice in &slices.slices {
                assert_eq!(
                    slice.spec.pool.resource_slice_count,
                    i64::try_from(sizes.len()).unwrap()
                );
                assert_eq!(validate_resource_slice(slice), Vec::<String>::new());
            }
            assert_eq!(
                slices.slices.last().unwrap().metadata.name.as_deref(),
                Some(format!("n1-pci.topoalign.io-{}", sizes.len() - 1).as_str())
            );
        }
    }
}
