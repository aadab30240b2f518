//! [`Topology`]: everything discovery learns about a machine, richer than
//! the engine's [`Machine`] (packages, dies, L3 groups, offline CPUs, free
//! memory, PCI devices, the GPU link matrix, warnings), and its conversion to
//! and from a [`Machine`].
//!
//! Owns: the shape of a discovered machine and the rules that turn it into the
//! engine's model (which CPUs live on which NUMA node, the machine-unique core
//! id, which PCI devices become device-plugin resources). Must not read files:
//! the readers (`sysfs`, `hwloc`, `nvml`) fill it in.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Serialize, Serializer};
use topoalign_model::{Cpu, CpuSet, Device, Machine, MachineError, NumaNode as ModelNumaNode};

/// A discovered machine.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    /// Where it was read from (`sysfs /`, `hwloc XML foo.xml`, …).
    pub source: String,
    /// The CPU model name, when the source says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_model: Option<String>,
    /// Packages (sockets), ascending by id.
    pub packages: Vec<Package>,
    /// NUMA nodes, ascending by id; memory-only nodes included.
    pub numa_nodes: Vec<NumaNode>,
    /// Online logical CPUs, ascending by id.
    pub cpus: Vec<LogicalCpu>,
    /// CPUs the machine has but that are offline (or not allowed, for hwloc).
    #[serde(serialize_with = "cpu_list")]
    pub offline_cpus: CpuSet,
    /// L3 (uncore) cache groups.
    pub caches: Vec<Cache>,
    /// PCI devices, ascending by address.
    pub pci_devices: Vec<PciDevice>,
    /// Device-plugin resources the machine offers (see [`resources_from_pci`]).
    pub resources: BTreeMap<String, Vec<ResourceDevice>>,
    /// How the GPUs are connected to each other, when there are at least two.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_links: Option<GpuLinks>,
    /// Oddities the kernel or the file really produces, worth a look.
    #[serde(serialize_with = "display_list")]
    pub warnings: Vec<Warning>,
    /// Plain information (e.g. no NVIDIA driver).
    pub notes: Vec<String>,
}

/// One package (socket).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Package {
    /// The socket id the engine uses: the OS id when every package has a
    /// non-negative one, otherwise a dense index in ascending OS id order.
    pub id: u32,
    /// The id the source gave (`physical_package_id`, hwloc `os_index`);
    /// -1 is what some kernels (POWER LPARs) report.
    pub os_id: Option<i64>,
    #[serde(serialize_with = "cpu_list")]
    pub cpus: CpuSet,
    /// Dies, when the source names them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dies: Vec<Die>,
}

/// One die of a package.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Die {
    pub id: u32,
    #[serde(serialize_with = "cpu_list")]
    pub cpus: CpuSet,
}

/// One NUMA node.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NumaNode {
    pub id: usize,
    /// Online CPUs whose home is this node (each CPU has exactly one home).
    #[serde(serialize_with = "cpu_list")]
    pub cpus: CpuSet,
    /// The node's CPU locality as the source writes it (sysfs `cpulist`,
    /// hwloc `cpuset`): may list offline CPUs, and for memory-only nodes in
    /// hwloc 2 the CPUs of the object they are attached to.
    #[serde(serialize_with = "cpu_list")]
    pub local_cpus: CpuSet,
    /// Total memory in bytes, huge page pools included; `None` when the
    /// source gives none.
    pub memory: Option<u64>,
    /// Free memory in bytes, when known (live sysfs and captures).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_free: Option<u64>,
    /// Huge page pools by page size in bytes.
    pub hugepages: BTreeMap<u64, HugePages>,
    /// SLIT distance to each NUMA node, by node id.
    pub distances: BTreeMap<usize, u64>,
    /// The kind of memory when the source says (`MCDRAM`, `GPUMemory`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subtype: Option<String>,
}

impl NumaNode {
    /// Whether it is a CPU-less node that holds device memory: hwloc's
    /// `GPUMemory` subtype, or an id of 64 and more, where POWER9 firmware
    /// puts the NVIDIA GPUs' memory (nodes 250-255).
    ///
    /// The machine keeps such nodes: the kubelet counts every
    /// `/sys/devices/system/node/node<N>` directory as a NUMA node
    /// (cAdvisor's `GetNodesInfo` lists CPU-less nodes too, only logging
    /// "Found node without any CPU"; the topology manager's `NewNUMAInfo`
    /// takes every id it lists), so its answers on such a machine are
    /// answers about them. hwloc hides them by default
    /// (`HWLOC_KEEP_NVIDIA_GPU_NUMA_NODES`); the kubelet does not.
    pub fn is_device_memory(&self) -> bool {
        self.cpus.is_empty()
            && (self.id >= topoalign_model::MAX_NUMA_NODES || self.subtype.as_deref() == Some("GPUMemory"))
    }
}

/// One huge page pool of a NUMA node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HugePages {
    /// Pages in the pool.
    pub total: u64,
    /// Free pages, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free: Option<u64>,
}

/// One online logical CPU (hardware thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogicalCpu {
    pub id: u32,
    /// Machine-unique core id: the lowest CPU id among the core's threads,
    /// as the kubelet numbers cores (cAdvisor's `core_id` repeats across
    /// sockets).
    pub core: u32,
    /// [`Package::id`].
    pub package: u32,
    /// [`Die::id`] within the package, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub die: Option<u32>,
    /// Home NUMA node.
    pub numa: Option<usize>,
    /// [`Cache::id`] of its L3 group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l3: Option<u32>,
}

/// One L3 (uncore) cache and the CPUs sharing it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Cache {
    /// The kernel's cache `id` when every group has a distinct one (what the
    /// kubelet uses as uncore cache id), otherwise a dense index in order of
    /// the groups' lowest CPU.
    pub id: u32,
    #[serde(serialize_with = "cpu_list")]
    pub cpus: CpuSet,
    /// Size in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// What a PCI device is, from its class (and vendor for display controllers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeviceKind {
    Gpu,
    EthernetNic,
    InfinibandNic,
    /// Network controller of another or unspecified link type.
    OtherNic,
    Nvme,
    /// Processing accelerators and co-processors (Xeon Phi, NEC VE, …).
    Accelerator,
    /// A display controller that is no compute GPU (a server BMC's VGA).
    Display,
    Other,
}

impl DeviceKind {
    /// Classifies a device by its 24-bit class code (`0xCCSSPP`) and vendor.
    ///
    /// Display controllers count as GPUs for GPU vendors (NVIDIA, AMD,
    /// Intel) and when the vendor is unknown (captures that kept only the
    /// class); the VGA of a server's BMC (ASPEED, Matrox) is a display. A 3D
    /// controller (`0302`) is always a GPU; processing accelerators (`12xx`)
    /// are GPUs for NVIDIA and AMD (MI300A) and accelerators otherwise.
    pub fn classify(class: u32, vendor: Option<u16>) -> DeviceKind {
        const GPU_VENDORS: [u16; 3] = [0x10de, 0x1002, 0x8086];
        let base_sub = (class >> 8) & 0xffff;
        let gpu_vendor = vendor.is_some_and(|v| GPU_VENDORS.contains(&v));
        match base_sub {
            0x0302 => DeviceKind::Gpu,
            0x0300 | 0x0380 if gpu_vendor || vendor.is_none() => DeviceKind::Gpu,
            0x0300..=0x03ff => DeviceKind::Display,
            0x0200 => DeviceKind::EthernetNic,
            0x0207 => DeviceKind::InfinibandNic,
            0x0201..=0x02ff => DeviceKind::OtherNic,
            0x0c06 => DeviceKind::InfinibandNic,
            0x0108 => DeviceKind::Nvme,
            0x1200..=0x12ff if gpu_vendor && vendor != Some(0x8086) => DeviceKind::Gpu,
            0x1200..=0x12ff | 0x0b40 => DeviceKind::Accelerator,
            _ => DeviceKind::Other,
        }
    }

    /// A short label for tables and pictures.
    pub fn label(self) -> &'static str {
        match self {
            DeviceKind::Gpu => "GPU",
            DeviceKind::EthernetNic => "NIC",
            DeviceKind::InfinibandNic => "IB",
            DeviceKind::OtherNic => "NET",
            DeviceKind::Nvme => "NVMe",
            DeviceKind::Accelerator => "ACC",
            DeviceKind::Display => "VGA",
            DeviceKind::Other => "PCI",
        }
    }

    /// Whether people placing workloads care where it is.
    pub fn is_of_interest(self) -> bool {
        self != DeviceKind::Other
    }

    /// Whether it is a network controller.
    pub fn is_nic(self) -> bool {
        matches!(
            self,
            DeviceKind::EthernetNic | DeviceKind::InfinibandNic | DeviceKind::OtherNic
        )
    }
}

/// One PCI device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PciDevice {
    /// `domain:bus:device.function`, lower case (`0000:3b:00.0`).
    pub address: String,
    /// 24-bit class code `0xCCSSPP` (hwloc gives no programming interface:
    /// its low byte is then 0).
    #[serde(serialize_with = "class_hex")]
    pub class: u32,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "opt_hex16")]
    pub vendor: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "opt_hex16")]
    pub device: Option<u16>,
    pub kind: DeviceKind,
    /// NUMA affinity; empty = none (sysfs `numa_node` of -1 or absent, or an
    /// hwloc device attached to the whole machine).
    pub numa: Vec<usize>,
    /// The `numa_node` file as the kernel wrote it (sysfs only): -1 means no
    /// NUMA affinity; a node the machine does not list is kept here and left
    /// out of `numa`.
    #[serde(skip)]
    pub numa_node_file: Option<i64>,
    /// The PCIe root complex above the device, `pci<domain>:<bus>`, as
    /// Kubernetes' `deviceattribute` helper names it: the directory right
    /// under `/sys/devices` that the device's `bus/pci/devices` link leads
    /// into, however many bridges lie below it (sysfs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcie_root: Option<String>,
    /// CPUs local to the device, when known.
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "opt_cpu_list")]
    pub local_cpus: Option<CpuSet>,
    /// OS names: network interfaces, block devices, GPU handles.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    /// Vendor and device names, when the source gives them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether it is an SR-IOV virtual function.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub virtual_function: bool,
    /// The physical function of a virtual function, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub physical_function: Option<String>,
    /// How many virtual functions a physical function can have.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sriov_total_vfs: Option<u32>,
    /// Bridges between the host bridge and the device, top down; the first
    /// entry names the host bridge (root complex). Used for GPU link levels.
    #[serde(skip)]
    pub pci_path: Vec<String>,
    /// What NVML says about an NVIDIA GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuDetails>,
}

impl PciDevice {
    /// A device with nothing known but its address and class.
    pub fn new(address: impl Into<String>, class: u32, vendor: Option<u16>, device: Option<u16>) -> PciDevice {
        PciDevice {
            address: address.into(),
            class,
            vendor,
            device,
            kind: DeviceKind::classify(class, vendor),
            numa: Vec::new(),
            numa_node_file: None,
            pcie_root: None,
            local_cpus: None,
            names: Vec::new(),
            description: None,
            virtual_function: false,
            physical_function: None,
            sriov_total_vfs: None,
            pci_path: Vec::new(),
            gpu: None,
        }
    }

    /// `vvvv:dddd`, or `?` parts when unknown.
    pub fn ids(&self) -> String {
        let hex = |v: Option<u16>| v.map_or("????".to_string(), |v| format!("{v:04x}"));
        format!("{}:{}", hex(self.vendor), hex(self.device))
    }

    /// The address without the usual `0000:` domain.
    pub fn short_address(&self) -> &str {
        self.address.strip_prefix("0000:").unwrap_or(&self.address)
    }
}

/// What NVML reports for one NVIDIA GPU.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GpuDetails {
    pub uuid: String,
    pub name: String,
    /// Framebuffer memory in bytes.
    pub memory: u64,
}

/// One device of a device-plugin resource.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ResourceDevice {
    pub id: String,
    pub numa: Vec<usize>,
    /// The PCI address behind it, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
}

/// How GPUs reach each other, like `nvidia-smi topo -m`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GpuLinks {
    /// PCI addresses of the GPUs, in matrix order.
    pub gpus: Vec<String>,
    /// `links[i][j]`: how GPU i reaches GPU j.
    pub links: Vec<Vec<GpuLink>>,
    /// Where the links come from (`NVML`, `PCI topology`, `hwloc NVLinkBandwidth`).
    pub source: String,
}

/// How one GPU reaches another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum GpuLink {
    /// The GPU itself.
    Same,
    /// A bonded set of NVLinks (NVML's count).
    NvLink { links: u32 },
    /// A GPU fabric with a known bandwidth (hwloc's NVLink / XGMI matrices),
    /// direct or through switches.
    Fabric {
        name: String,
        bandwidth_mbps: u64,
        switched: bool,
    },
    /// Only PCIe (and maybe the CPU interconnect) in between.
    Pcie { level: PcieLevel },
}

/// The closest common PCIe ancestor of two devices, in `nvidia-smi`'s terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum PcieLevel {
    /// At most one PCIe bridge or switch in between.
    Pix,
    /// Several PCIe bridges, without the host bridge.
    Pxb,
    /// Through a PCIe host bridge (the CPU's root complex).
    Phb,
    /// Across host bridges within one NUMA node.
    Node,
    /// Across the CPU interconnect between NUMA nodes or sockets.
    Sys,
}

impl fmt::Display for GpuLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GpuLink::Same => f.write_str("X"),
            GpuLink::NvLink { links } => write!(f, "NV{links}"),
            GpuLink::Fabric {
                name,
                bandwidth_mbps,
                switched,
            } => {
                let short = if name.starts_with("NVLink") {
                    "NV"
                } else if name.starts_with("XGMI") {
                    "XG"
                } else {
                    "FB"
                };
                let gb = (*bandwidth_mbps as f64 / 1000.0).round() as u64;
                write!(f, "{short}{}{gb}G", if *switched { "*" } else { ":" })
            }
            GpuLink::Pcie { level } => write!(f, "{level}"),
        }
    }
}

impl fmt::Display for PcieLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PcieLevel::Pix => "PIX",
            PcieLevel::Pxb => "PXB",
            PcieLevel::Phb => "PHB",
            PcieLevel::Node => "NODE",
            PcieLevel::Sys => "SYS",
        })
    }
}

/// An oddity worth telling the user about; never a reason to fail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Warning {
    /// CPUs the machine has that are offline (sysfs) or absent from the
    /// topology (hwloc: offline or not allowed).
    OfflineCpus { cpus: CpuSet },
    /// Devices of interest without NUMA affinity on a multi-node machine.
    NoNumaAffinity { devices: Vec<String> },
    /// A NUMA node with neither CPUs nor memory.
    EmptyNumaNode { node: usize },
    /// A NUMA node with CPUs but no memory.
    MemorylessNumaNode { node: usize },
    /// The source gives no memory size for a node.
    UnknownNodeMemory { node: usize },
    /// The kernel has no NUMA node directories: one node holds everything.
    NoNumaInformation,
    /// Online CPUs listed by no NUMA node.
    CpusWithoutNumaNode { cpus: CpuSet },
    /// CPUs listed by several NUMA nodes; the lowest plain node is home.
    CpusInSeveralNumaNodes { cpus: CpuSet },
    /// `physical_package_id` is -1.
    UnknownPackageId { cpus: CpuSet },
    /// A distance row that does not match the node list.
    BadDistances { node: usize, detail: String },
    /// CPUs whose `online` file is empty (some kernels write nothing for a
    /// CPU that cannot be taken offline); they are taken as online.
    EmptyOnlineFile { cpus: CpuSet },
    /// CPU-less device-memory nodes (see [`NumaNode::is_device_memory`]):
    /// in the machine, as the kubelet counts them.
    DeviceMemoryNodes { nodes: Vec<usize> },
    /// NUMA node ids of 64 and more: the kubelet's 64-bit NUMA masks
    /// cannot hold them, so it crashes where it builds one. The machine's
    /// fact; where a given kubelet configuration crashes is its start
    /// hazard (`topoalign_engine::KubeletCrash`).
    NumaIdsPastMasks { nodes: Vec<usize> },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::OfflineCpus { cpus } => write!(
                f,
                "{} CPU(s) offline or not available: {cpus} (not in the machine model)",
                cpus.len()
            ),
            Warning::NoNumaAffinity { devices } => {
                let shown: Vec<&str> = devices.iter().take(6).map(String::as_str).collect();
                let more = devices.len().saturating_sub(shown.len());
                write!(
                    f,
                    "{} device(s) report no NUMA affinity (numa_node -1): {}{}",
                    devices.len(),
                    shown.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                )
            }
            Warning::EmptyNumaNode { node } => write!(f, "NUMA node {node} has neither CPUs nor memory"),
            Warning::MemorylessNumaNode { node } => write!(f, "NUMA node {node} has CPUs but no memory"),
            Warning::UnknownNodeMemory { node } => write!(f, "NUMA node {node}: the source gives no memory size"),
            Warning::NoNumaInformation => {
                f.write_str("no NUMA node information: the whole machine is treated as NUMA node 0")
            }
            Warning::CpusWithoutNumaNode { cpus } => write!(f, "CPU(s) {cpus} are listed by no NUMA node"),
            Warning::CpusInSeveralNumaNodes { cpus } => write!(
                f,
                "CPU(s) {cpus} are listed by several NUMA nodes; each is placed on the lowest plain one"
            ),
            Warning::UnknownPackageId { cpus } => write!(
                f,
                "CPU(s) {cpus} report physical_package_id -1 (unknown); they form one package"
            ),
            Warning::BadDistances { node, detail } => write!(f, "NUMA node {node}: distances ignored: {detail}"),
            Warning::EmptyOnlineFile { cpus } => write!(
                f,
                "CPU(s) {cpus} have an empty `online` file (the kernel writes none for a CPU that cannot go offline); taken as online"
            ),
            Warning::DeviceMemoryNodes { nodes } => write!(
                f,
                "NUMA node(s) {} have no CPUs and hold device memory (e.g. POWER9 GPU memory); they are in the \
                 machine model because the kubelet counts them as NUMA nodes (cAdvisor lists every node directory), \
                 although hwloc hides them by default",
                id_list(nodes)
            ),
            Warning::NumaIdsPastMasks { nodes } => write!(
                f,
                "NUMA node id(s) {} are 64 or more, past the kubelet's 64-bit NUMA masks: a kubelet runs this \
                 machine only under topology manager policy none, with the Static memory manager only while no \
                 Guaranteed pod comes (a configuration's own warning says where it crashes); answers show the ids \
                 as the machine has them",
                id_list(nodes)
            ),
        }
    }
}

fn id_list(ids: &[usize]) -> String {
    ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// Why a discovered machine cannot become the engine's [`Machine`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToMachineError {
    /// Online CPUs without a home NUMA node on a multi-node machine.
    #[error("CPU(s) {0} have no NUMA node, so the machine cannot be modelled")]
    CpusWithoutNumaNode(String),
    /// An invariant of the engine's model (e.g. NUMA ids above 1023).
    #[error("{0}")]
    Model(#[from] MachineError),
}

impl Topology {
    /// An empty topology read from `source`; readers fill it in.
    pub fn empty(source: impl Into<String>) -> Topology {
        Topology {
            source: source.into(),
            cpu_model: None,
            packages: Vec::new(),
            numa_nodes: Vec::new(),
            cpus: Vec::new(),
            offline_cpus: CpuSet::new(),
            caches: Vec::new(),
            pci_devices: Vec::new(),
            resources: BTreeMap::new(),
            gpu_links: None,
            warnings: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// All online CPU ids.
    pub fn cpu_set(&self) -> CpuSet {
        self.cpus.iter().map(|c| c.id).collect()
    }

    /// The CPUs of each core, keyed by the core id, ascending.
    pub fn cores(&self) -> BTreeMap<u32, CpuSet> {
        let mut cores: BTreeMap<u32, CpuSet> = BTreeMap::new();
        for cpu in &self.cpus {
            cores.entry(cpu.core).or_default().insert(cpu.id);
        }
        cores
    }

    /// The largest number of threads any core has.
    pub fn threads_per_core(&self) -> usize {
        self.cores().values().map(CpuSet::len).max().unwrap_or(0)
    }

    /// The NUMA node with `id`.
    pub fn numa_node(&self, id: usize) -> Option<&NumaNode> {
        self.numa_nodes.iter().find(|n| n.id == id)
    }

    /// Total memory of all nodes (unknown sizes count as 0).
    pub fn total_memory(&self) -> u64 {
        self.numa_nodes.iter().filter_map(|n| n.memory).sum()
    }

    /// The GPUs, in address order.
    pub fn gpus(&self) -> impl Iterator<Item = &PciDevice> {
        self.pci_devices.iter().filter(|d| d.kind == DeviceKind::Gpu)
    }

    /// The engine's machine: NUMA nodes with memory, huge pages and distances
    /// (rows indexed by NUMA id, 0 for ids that do not exist), CPUs with
    /// their core, socket, node and L3 group, and the device-plugin
    /// resources. A CPU without a NUMA node goes to the only node when there
    /// is one. Every NUMA node is kept, CPU-less device-memory nodes too
    /// (the kubelet counts them; see [`NumaNode::is_device_memory`]). With
    /// an id of 64 or more the machine is read with labels
    /// ([`Machine::with_numa_labels`]): its nodes are numbered `0..n` in id
    /// order and [`Machine::numa_label`] gives the ids back, so whoever
    /// prints a NUMA id of it prints the label.
    ///
    /// # Errors
    /// [`ToMachineError`] when a CPU has no node on a multi-node machine or
    /// the model refuses the machine (ids past 1023).
    pub fn to_machine(&self) -> Result<Machine, ToMachineError> {
        let kept: Vec<&NumaNode> = self.numa_nodes.iter().collect();
        let kept_ids: BTreeSet<usize> = kept.iter().map(|n| n.id).collect();
        let max_id = kept_ids.last().copied().unwrap_or(0);
        let labelled = max_id >= topoalign_model::MAX_NUMA_NODES;
        let nodes: Vec<ModelNumaNode> = kept
            .iter()
            .map(|node| {
                let hugepages = node
                    .hugepages
                    .iter()
                    .map(|(&size, pool)| (size, size.saturating_mul(pool.total)))
                    .collect();
                // Rows by id up to 63; past that one entry per node in id
                // order, as `Machine::with_numa_labels` takes them.
                let distances = (!node.distances.is_empty()).then(|| {
                    if labelled {
                        kept_ids
                            .iter()
                            .map(|to| node.distances.get(to).copied().unwrap_or(0))
                            .collect()
                    } else {
                        (0..=max_id)
                            .map(|to| node.distances.get(&to).copied().unwrap_or(0))
                            .collect()
                    }
                });
                ModelNumaNode {
                    id: node.id,
                    memory: node.memory.unwrap_or(0),
                    hugepages,
                    distances,
                }
            })
            .collect();
        let only_node = match kept.as_slice() {
            [only] => Some(only.id),
            _ => None,
        };
        let homeless: CpuSet = self
            .cpus
            .iter()
            .filter(|c| c.numa.is_none() && only_node.is_none())
            .map(|c| c.id)
            .collect();
        if !homeless.is_empty() {
            return Err(ToMachineError::CpusWithoutNumaNode(homeless.to_string()));
        }
        let cpus = self
            .cpus
            .iter()
            .filter_map(|c| {
                Some(Cpu {
                    id: c.id,
                    core: c.core,
                    socket: c.package,
                    numa: c.numa.or(only_node)?,
                    uncore_cache: c.l3,
                })
            })
            .collect();
        let devices = self
            .resources
            .iter()
            .map(|(name, list)| {
                let devices = list
                    .iter()
                    .map(|d| Device {
                        id: d.id.clone(),
                        // A node the machine does not list is no affinity.
                        numa: d.numa.iter().copied().filter(|n| kept_ids.contains(n)).collect(),
                    })
                    .collect();
                (name.clone(), devices)
            })
            .collect();
        Ok(Machine::with_numa_labels(nodes, cpus, devices)?)
    }

    /// A topology holding exactly what a [`Machine`] knows (e.g. from a
    /// scenario's `topology:` block): no PCI devices, free memory or names.
    /// NUMA ids are the machine's labels ([`Machine::numa_label`]), so a
    /// machine read with ids past 63 shows its own ids.
    pub fn from_machine(machine: &Machine, source: impl Into<String>) -> Topology {
        let label = |id: usize| machine.numa_label(id);
        let mut topology = Topology::empty(source);
        let mut packages: BTreeMap<u32, CpuSet> = BTreeMap::new();
        let mut caches: BTreeMap<u32, CpuSet> = BTreeMap::new();
        for cpu in machine.cpus() {
            packages.entry(cpu.socket).or_default().insert(cpu.id);
            if let Some(l3) = cpu.uncore_cache {
                caches.entry(l3).or_default().insert(cpu.id);
            }
            topology.cpus.push(LogicalCpu {
                id: cpu.id,
                core: cpu.core,
                package: cpu.socket,
                die: None,
                numa: Some(label(cpu.numa)),
                l3: cpu.uncore_cache,
            });
        }
        topology.packages = packages
            .into_iter()
            .map(|(id, cpus)| Package {
                id,
                os_id: Some(i64::from(id)),
                cpus,
                dies: Vec::new(),
            })
            .collect();
        topology.caches = caches
            .into_iter()
            .map(|(id, cpus)| Cache { id, cpus, size: None })
            .collect();
        let ids: Vec<usize> = machine.numa_nodes().iter().map(|n| n.id).collect();
        topology.numa_nodes = machine
            .numa_nodes()
            .iter()
            .map(|node| {
                let cpus = machine.numa_cpus(node.id);
                NumaNode {
                    id: label(node.id),
                    local_cpus: cpus.clone(),
                    cpus,
                    memory: Some(node.memory),
                    memory_free: None,
                    hugepages: node
                        .hugepages
                        .iter()
                        .filter(|&(&size, _)| size > 0)
                        .map(|(&size, &bytes)| {
                            (
                                size,
                                HugePages {
                                    total: bytes / size,
                                    free: None,
                                },
                            )
                        })
                        .collect(),
                    distances: node
                        .distances
                        .as_ref()
                        .map(|row| ids.iter().filter_map(|&to| Some((label(to), *row.get(to)?))).collect())
                        .unwrap_or_default(),
                    subtype: None,
                }
            })
            .collect();
        topology.resources = machine
            .devices()
            .iter()
            .map(|(name, list)| {
                let list = list
                    .iter()
                    .map(|d| ResourceDevice {
                        id: d.id.clone(),
                        numa: d.numa.iter().map(|&n| label(n)).collect(),
                        pci: None,
                    })
                    .collect();
                (name.clone(), list)
            })
            .collect();
        let past_masks: Vec<usize> = machine
            .numa_labels()
            .unwrap_or_default()
            .iter()
            .copied()
            .filter(|&id| id >= topoalign_model::MAX_NUMA_NODES)
            .collect();
        if !past_masks.is_empty() {
            topology.warnings.push(Warning::NumaIdsPastMasks { nodes: past_masks });
        }
        topology
    }

    /// Fills in `resources` from the PCI devices (see [`resources_from_pci`]).
    pub fn refresh_resources(&mut self) {
        self.resources = resources_from_pci(&self.pci_devices);
    }

    /// Adds the warnings every reader shares: offline CPUs, empty and
    /// memoryless nodes, devices without affinity on multi-node machines.
    pub(crate) fn add_common_warnings(&mut self) {
        if !self.offline_cpus.is_empty() {
            self.warnings.push(Warning::OfflineCpus {
                cpus: self.offline_cpus.clone(),
            });
        }
        for node in &self.numa_nodes {
            match (node.cpus.is_empty(), node.memory) {
                (true, Some(0)) => self.warnings.push(Warning::EmptyNumaNode { node: node.id }),
                (false, Some(0)) => self.warnings.push(Warning::MemorylessNumaNode { node: node.id }),
                (_, None) => self.warnings.push(Warning::UnknownNodeMemory { node: node.id }),
                _ => {}
            }
        }
        let device_memory: Vec<usize> = self
            .numa_nodes
            .iter()
            .filter(|n| n.is_device_memory())
            .map(|n| n.id)
            .collect();
        if !device_memory.is_empty() {
            self.warnings.push(Warning::DeviceMemoryNodes { nodes: device_memory });
        }
        let past_masks: Vec<usize> = self
            .numa_nodes
            .iter()
            .map(|n| n.id)
            .filter(|&id| id >= topoalign_model::MAX_NUMA_NODES)
            .collect();
        if !past_masks.is_empty() {
            self.warnings.push(Warning::NumaIdsPastMasks { nodes: past_masks });
        }
        let plain_nodes = self.numa_nodes.iter().filter(|n| !n.cpus.is_empty()).count();
        if plain_nodes > 1 {
            let devices: Vec<String> = self
                .pci_devices
                .iter()
                .filter(|d| d.kind.is_of_interest() && d.kind != DeviceKind::Display && d.numa.is_empty())
                .map(|d| d.address.clone())
                .collect();
            if !devices.is_empty() {
                self.warnings.push(Warning::NoNumaAffinity { devices });
            }
        }
    }
}

/// The device-plugin resources a machine's PCI devices stand for, named as
/// the usual device plugins name them:
///
/// | devices | resource | device id |
/// |---|---|---|
/// | NVIDIA GPUs | `nvidia.com/gpu` | NVML UUID, else the PCI address |
/// | AMD GPUs | `amd.com/gpu` | PCI address |
/// | Intel GPUs | `gpu.intel.com/i915` | PCI address |
/// | SR-IOV virtual functions of NICs | `intel.com/sriov_netdevice` (the SR-IOV network device plugin's default prefix and example name) | PCI address |
///
/// Each device's NUMA affinity is the device's; devices without one have
/// none (the kubelet then treats them as fitting anywhere).
pub fn resources_from_pci(devices: &[PciDevice]) -> BTreeMap<String, Vec<ResourceDevice>> {
    let mut resources: BTreeMap<String, Vec<ResourceDevice>> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for device in devices {
        let (name, id) = match (device.kind, device.vendor) {
            (DeviceKind::Gpu, Some(0x10de)) => (
                "nvidia.com/gpu",
                device.gpu.as_ref().map_or(device.address.clone(), |g| g.uuid.clone()),
            ),
            (DeviceKind::Gpu, Some(0x1002)) => ("amd.com/gpu", device.address.clone()),
            (DeviceKind::Gpu, Some(0x8086)) => ("gpu.intel.com/i915", device.address.clone()),
            (kind, _) if kind.is_nic() && device.virtual_function => {
                ("intel.com/sriov_netdevice", device.address.clone())
            }
            _ => continue,
        };
        // hwloc test files may repeat a bus id; a resource lists a device once.
        if !seen.insert((name, id.clone())) {
            continue;
        }
        resources.entry(name.to_string()).or_default().push(ResourceDevice {
            id,
            numa: device.numa.clone(),
            pci: Some(device.address.clone()),
        });
    }
    resources
}

/// Sets every CPU's home NUMA node from the nodes' `local_cpus`: the node
/// listing it; when several do, the lowest-numbered one without a memory
/// subtype (plain DRAM) — hwloc 2 attaches MCDRAM or GPU memory nodes next
/// to the DRAM node with the same CPUs, and the kernel sees those as CPU-less.
/// Fills each node's `cpus` and returns the CPUs listed by several plain
/// nodes and by none.
pub(crate) fn assign_home_nodes(cpus: &mut [LogicalCpu], nodes: &mut [NumaNode]) -> (CpuSet, CpuSet) {
    let plain = |n: &NumaNode| n.subtype.as_deref().is_none_or(|s| s.eq_ignore_ascii_case("DRAM"));
    let mut several = CpuSet::new();
    let mut none = CpuSet::new();
    for node in nodes.iter_mut() {
        node.cpus = CpuSet::new();
    }
    for cpu in cpus.iter_mut() {
        let listing: Vec<usize> = (0..nodes.len())
            .filter(|&i| nodes[i].local_cpus.contains(cpu.id))
            .collect();
        let home = listing
            .iter()
            .copied()
            .min_by_key(|&i| (!plain(&nodes[i]), nodes[i].id));
        // Memory-side nodes next to a DRAM node are expected, not odd.
        if listing.iter().filter(|&&i| plain(&nodes[i])).count() > 1 {
            several.insert(cpu.id);
        }
        match home {
            Some(i) => {
                cpu.numa = Some(nodes[i].id);
                nodes[i].cpus.insert(cpu.id);
            }
            None => {
                cpu.numa = None;
                none.insert(cpu.id);
            }
        }
    }
    (several, none)
}

/// Numbers packages for the engine: OS ids when all are non-negative and fit,
/// otherwise dense indexes in ascending OS id order. Returns (os id → id).
pub(crate) fn package_ids(os_ids: &BTreeSet<i64>) -> BTreeMap<i64, u32> {
    let all_fit = os_ids.iter().all(|&id| u32::try_from(id).is_ok());
    os_ids
        .iter()
        .enumerate()
        .map(|(index, &os)| {
            // In range: checked by all_fit, or an index below the set's size.
            let id = if all_fit { os as u32 } else { index as u32 };
            (os, id)
        })
        .collect()
}

fn cpu_list<S: Serializer>(set: &CpuSet, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(set)
}

fn opt_cpu_list<S: Serializer>(set: &Option<CpuSet>, serializer: S) -> Result<S::Ok, S::Error> {
    match set {
        Some(set) => serializer.collect_str(set),
        None => serializer.serialize_none(),
    }
}

fn display_list<S: Serializer, T: fmt::Display>(items: &[T], serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(items.iter().map(ToString::to_string))
}

fn class_hex<S: Serializer>(class: &u32, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&format_args!("{class:06x}"))
}

fn opt_hex16<S: Serializer>(value: &Option<u16>, serializer: S) -> Result<S::Ok, S::Error> {
    match value {
        Some(v) => serializer.collect_str(&format_args!("{v:04x}")),
        None => serializer.serialize_none(),
    }
}
