//! The hwloc XML reader (what `lstopo --of xml` writes), formats v1 (hwloc
//! 1.x: `Socket`, `Cache depth=3`, NUMA nodes as tree levels, `distances`
//! with `latency` entries) and v2/v3 (`Package`, `L3Cache`, NUMA nodes as
//! memory children, `distances2`), into a [`Topology`].
//!
//! Owns the meaning of hwloc objects: a PU's core, package, die and L3 are
//! its nearest ancestors of those types; a NUMA node's CPUs are its cpuset;
//! a PCI device's locality is its nearest non-I/O ancestor (one attached to
//! the whole machine has none); GPU fabric links come from the bandwidth
//! matrices (NVLink, XGMI). Parsed with `roxmltree`, no libhwloc.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use topoalign_model::CpuSet;

use crate::links::pcie_matrix;
use crate::parse::{self, parse_hex_mask};
use crate::topology::{
    Cache, Die, GpuLink, HugePages, LogicalCpu, NumaNode, Package, PciDevice, Topology, Warning, assign_home_nodes,
    package_ids,
};
use crate::tree::{MAX_INPUT_BYTES, read_bounded};
use crate::{DiscoveryError, vf};

/// Why an XML text is not a usable hwloc topology.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HwlocError {
    /// Not XML, or XML of something else.
    #[error("{0}")]
    NotHwloc(String),
    /// An hwloc document with an impossible object.
    #[error("{0}")]
    Malformed(String),
}

/// Reads an hwloc XML file.
///
/// # Errors
/// [`DiscoveryError::Io`] when the file cannot be read,
/// [`DiscoveryError::NotHwloc`] when it is not an hwloc topology,
/// [`DiscoveryError::BadHwloc`] when it is one with impossible objects.
pub fn read_hwloc(path: &Path) -> Result<Topology, DiscoveryError> {
    let bytes = read_bounded(path, MAX_INPUT_BYTES, false).map_err(|error| DiscoveryError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    parse_hwloc_file(&String::from_utf8_lossy(&bytes), path)
}

/// The hwloc XML `text` read from `path` (or standard input, `-`), with
/// errors naming the path.
///
/// # Errors
/// [`DiscoveryError::NotHwloc`], [`DiscoveryError::BadHwloc`].
pub fn parse_hwloc_file(text: &str, path: &Path) -> Result<Topology, DiscoveryError> {
    parse_hwloc_xml(text, &format!("hwloc XML {}", path.display())).map_err(|error| match error {
        HwlocError::NotHwloc(detail) => DiscoveryError::NotHwloc {
            path: path.to_path_buf(),
            detail,
        },
        HwlocError::Malformed(detail) => DiscoveryError::BadHwloc {
            path: path.to_path_buf(),
            detail,
        },
    })
}

/// One `object` element, with the attributes discovery uses.
#[derive(Default)]
struct Obj {
    kind: String,
    parent: Option<usize>,
    os_index: Option<u64>,
    gp_index: Option<u64>,
    cpuset: Option<CpuSet>,
    complete_cpuset: Option<CpuSet>,
    nodeset: Option<CpuSet>,
    local_memory: Option<u64>,
    page_types: Vec<(u64, u64)>,
    subtype: Option<String>,
    cache_size: Option<u64>,
    pci_busid: Option<String>,
    pci_type: Option<String>,
    bridge_type: Option<String>,
    name: Option<String>,
    infos: Vec<(String, String)>,
}

impl Obj {
    fn info(&self, name: &str) -> Option<&str> {
        self.infos.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    fn is_io(&self) -> bool {
        matches!(self.kind.as_str(), "Bridge" | "PCIDev" | "OSDev" | "Misc")
    }
}

/// Parses an hwloc XML document; `source` labels the result.
///
/// # Errors
/// [`HwlocError::NotHwloc`] for text that is not XML or whose root is not
/// `<topology>` with objects; [`HwlocError::Malformed`] for PUs or NUMA
/// nodes without (or with duplicate) OS indexes and bad bit masks.
pub fn parse_hwloc_xml(text: &str, source: &str) -> Result<Topology, HwlocError> {
    let options = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let document = roxmltree::Document::parse_with_options(text, options)
        .map_err(|e| HwlocError::NotHwloc(format!("not XML: {e}")))?;
    let root = document.root_element();
    if root.tag_name().name() != "topology" {
        return Err(HwlocError::NotHwloc(format!(
            "the root element is <{}>, hwloc writes <topology>",
            root.tag_name().name()
        )));
    }
    let objects = collect_objects(root)?;
    if objects.is_empty() {
        return Err(HwlocError::NotHwloc("<topology> holds no <object>".into()));
    }
    let version = root.attribute("version").unwrap_or("1.x");
    let mut builder = Builder {
        objects,
        topology: Topology::empty(format!("{source} (format {version})")),
        pus: CpuSet::new(),
    };
    builder.read_cpus()?;
    builder.read_numa(root)?;
    builder.read_pci(root);
    let mut topology = builder.topology;
    topology.add_common_warnings();
    topology.refresh_resources();
    Ok(topology)
}

fn collect_objects(root: roxmltree::Node<'_, '_>) -> Result<Vec<Obj>, HwlocError> {
    let mut objects = Vec::new();
    let mut stack: Vec<(roxmltree::Node<'_, '_>, Option<usize>)> = root
        .children()
        .filter(|n| n.has_tag_name("object"))
        .map(|n| (n, None))
        .collect();
    stack.reverse();
    while let Some((node, parent)) = stack.pop() {
        let index = objects.len();
        objects.push(read_object(node, parent)?);
        let mut children: Vec<_> = node
            .children()
            .filter(|n| n.has_tag_name("object"))
            .map(|n| (n, Some(index)))
            .collect();
        children.reverse();
        stack.extend(children);
    }
    Ok(objects)
}

fn read_object(node: roxmltree::Node<'_, '_>, parent: Option<usize>) -> Result<Obj, HwlocError> {
    let number = |name: &str| -> Result<Option<u64>, HwlocError> {
        node.attribute(name)
            .map(|v| {
                v.trim()
                    .parse::<u64>()
                    .map_err(|_| HwlocError::Malformed(format!("{name}={v:?} is not a number")))
            })
            .transpose()
    };
    let mask = |name: &str| -> Result<Option<CpuSet>, HwlocError> {
        node.attribute(name)
            .map(|v| parse_hex_mask(v).map_err(|e| HwlocError::Malformed(format!("{name}: {e}"))))
            .transpose()
    };
    let raw_kind = node.attribute("type").unwrap_or("");
    // hwloc 1.x spelling → 2.x spelling.
    let kind = match raw_kind {
        "Socket" => "Package".to_string(),
        "Cache" => {
            let depth = node.attribute("depth").unwrap_or("0");
            let instruction = node.attribute("cache_type") == Some("2");
            format!("L{depth}{}Cache", if instruction { "i" } else { "" })
        }
        other => other.to_string(),
    };
    let infos: Vec<(String, String)> = node
        .children()
        .filter(|n| n.has_tag_name("info"))
        .filter_map(|n| Some((n.attribute("name")?.to_string(), n.attribute("value")?.to_string())))
        .collect();
    let page_types = node
        .children()
        .filter(|n| n.has_tag_name("page_type"))
        .filter_map(|n| Some((n.attribute("size")?.parse().ok()?, n.attribute("count")?.parse().ok()?)))
        .collect();
    let subtype = node
        .attribute("subtype")
        .map(str::to_string)
        .or_else(|| infos.iter().find(|(n, _)| n == "Type").map(|(_, v)| v.clone()));
    Ok(Obj {
        kind,
        parent,
        os_index: number("os_index")?,
        gp_index: number("gp_index")?,
        cpuset: mask("cpuset")?,
        complete_cpuset: mask("complete_cpuset")?,
        nodeset: mask("nodeset")?,
        local_memory: number("local_memory")?,
        page_types,
        subtype,
        cache_size: number("cache_size")?,
        pci_busid: node.attribute("pci_busid").map(str::to_string),
        pci_type: node.attribute("pci_type").map(str::to_string),
        bridge_type: node.attribute("bridge_type").map(str::to_string),
        name: node.attribute("name").map(str::to_string),
        infos,
    })
}

struct Builder {
    objects: Vec<Obj>,
    topology: Topology,
    pus: CpuSet,
}

impl Builder {
    fn ancestors(&self, index: usize) -> impl Iterator<Item = usize> + '_ {
        std::iter::successors(self.objects[index].parent, move |&i| self.objects[i].parent)
    }

    fn nearest(&self, index: usize, kind: &str) -> Option<usize> {
        self.ancestors(index).find(|&i| self.objects[i].kind == kind)
    }

    /// The PUs below (or at) an object.
    fn pus_below(&self) -> HashMap<usize, CpuSet> {
        let mut below: HashMap<usize, CpuSet> = HashMap::new();
        for (index, object) in self.objects.iter().enumerate() {
            if object.kind != "PU" {
                continue;
            }
            // Larger ids are refused by `read_cpus`; none may size a set.
            let Some(os) = object
                .os_index
                .and_then(|o| u32::try_from(o).ok())
                .filter(|&o| o <= CpuSet::MAX_CPU_ID)
            else {
                continue;
            };
            for ancestor in std::iter::once(index).chain(self.ancestors(index)) {
                below.entry(ancestor).or_default().insert(os);
            }
        }
        below
    }

    fn read_cpus(&mut self) -> Result<(), HwlocError> {
        let below = self.pus_below();
        let mut cpus: Vec<LogicalCpu> = Vec::new();
        let mut package_of: BTreeMap<u32, Option<usize>> = BTreeMap::new();
        let mut l3_of: BTreeMap<u32, usize> = BTreeMap::new();
        for (index, object) in self.objects.iter().enumerate() {
            if object.kind != "PU" {
                continue;
            }
            let os_index = object
                .os_index
                .ok_or_else(|| HwlocError::Malformed("a PU has no os_index".into()))?;
            let id = u32::try_from(os_index)
                .ok()
                .filter(|&o| o <= CpuSet::MAX_CPU_ID)
                .ok_or_else(|| {
                    HwlocError::Malformed(format!(
                        "PU os_index {os_index} is larger than {}, the largest CPU id a Linux machine can have",
                        CpuSet::MAX_CPU_ID
                    ))
                })?;
            if self.pus.contains(id) {
                return Err(HwlocError::Malformed(format!("PU os_index {id} appears twice")));
            }
            self.pus.insert(id);
            let core = match self.nearest(index, "Core") {
                Some(core) => below.get(&core).and_then(CpuSet::first).unwrap_or(id),
                None => id,
            };
            let die = self.nearest(index, "Die").map(|d| {
                // Die os indexes repeat across packages; hwloc keeps them.
                self.objects[d]
                    .os_index
                    .and_then(|o| u32::try_from(o).ok())
                    .unwrap_or(0)
            });
            if let Some(l3) = self.nearest(index, "L3Cache") {
                l3_of.insert(id, l3);
            }
            package_of.insert(id, self.nearest(index, "Package"));
            cpus.push(LogicalCpu {
                id,
                core,
                package: 0,
                die,
                numa: None,
                l3: None,
            });
        }
        if cpus.is_empty() {
            return Err(HwlocError::Malformed("the topology has no PU objects".into()));
        }
        cpus.sort_by_key(|c| c.id);

        // Packages: OS indexes when all have distinct ones, else document order.
        let package_objects: Vec<usize> = package_of
            .values()
            .flatten()
            .copied()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let os: Vec<Option<u64>> = package_objects.iter().map(|&p| self.objects[p].os_index).collect();
        let distinct_os: BTreeSet<i64> = os.iter().flatten().filter_map(|&o| i64::try_from(o).ok()).collect();
        let by_os = os.iter().all(Option::is_some) && distinct_os.len() == package_objects.len();
        let ids = package_ids(&distinct_os);
        let mut package_id_of: HashMap<usize, (u32, Option<i64>)> = HashMap::new();
        for (dense, &p) in package_objects.iter().enumerate() {
            let os_id = self.objects[p].os_index.and_then(|o| i64::try_from(o).ok());
            // `dense` counts packages, far below u32::MAX.
            let id = if by_os {
                os_id.and_then(|o| ids.get(&o).copied()).unwrap_or(0)
            } else {
                dense as u32
            };
            package_id_of.insert(p, (id, os_id));
        }
        let orphan_package = package_id_of.values().map(|&(id, _)| id + 1).max().unwrap_or(0);
        for cpu in &mut cpus {
            cpu.package = match package_of.get(&cpu.id).copied().flatten() {
                Some(p) => package_id_of.get(&p).map_or(orphan_package, |&(id, _)| id),
                None => orphan_package,
            };
        }
        let mut packages: BTreeMap<u32, Package> = BTreeMap::new();
        for cpu in &cpus {
            let os_id = package_of
                .get(&cpu.id)
                .copied()
                .flatten()
                .and_then(|p| package_id_of.get(&p))
                .and_then(|&(_, os)| os);
            let package = packages.entry(cpu.package).or_insert_with(|| Package {
                id: cpu.package,
                os_id,
                cpus: CpuSet::new(),
                dies: Vec::new(),
            });
            package.cpus.insert(cpu.id);
            if let Some(die) = cpu.die {
                match package.dies.iter_mut().find(|d| d.id == die) {
                    Some(d) => d.cpus.insert(cpu.id),
                    None => package.dies.push(Die {
                        id: die,
                        cpus: [cpu.id].into_iter().collect(),
                    }),
                }
            }
        }
        self.topology.packages = packages.into_values().collect();

        // L3 groups, numbered by their lowest PU.
        let mut groups: Vec<usize> = l3_of.values().copied().collect::<BTreeSet<_>>().into_iter().collect();
        groups.sort_by_key(|g| below.get(g).and_then(CpuSet::first));
        for (dense, &group) in groups.iter().enumerate() {
            // `dense` counts caches, far below u32::MAX.
            let id = dense as u32;
            self.topology.caches.push(Cache {
                id,
                cpus: below.get(&group).cloned().unwrap_or_default(),
                size: self.objects[group].cache_size,
            });
            for cpu in cpus.iter_mut().filter(|c| l3_of.get(&c.id) == Some(&group)) {
                cpu.l3 = Some(id);
            }
        }
        self.topology.cpus = cpus;

        let machine = &self.objects[0];
        let complete = machine.complete_cpuset.as_ref().or(machine.cpuset.as_ref());
        if let Some(complete) = complete {
            self.topology.offline_cpus = complete.difference(&self.pus);
        }
        self.topology.cpu_model = self
            .objects
            .iter()
            .find_map(|o| o.info("CPUModel"))
            .map(|m| m.split_whitespace().collect::<Vec<_>>().join(" "));
        Ok(())
    }

    fn read_numa(&mut self, root: roxmltree::Node<'_, '_>) -> Result<(), HwlocError> {
        let mut nodes: Vec<NumaNode> = Vec::new();
        for object in self.objects.iter().filter(|o| o.kind == "NUMANode") {
            let id = object
                .os_index
                .and_then(|o| usize::try_from(o).ok())
                .ok_or_else(|| HwlocError::Malformed("a NUMANode has no os_index".into()))?;
            if nodes.iter().any(|n| n.id == id) {
                return Err(HwlocError::Malformed(format!("NUMANode os_index {id} appears twice")));
            }
            nodes.push(NumaNode {
                id,
                cpus: CpuSet::new(),
                local_cpus: object
                    .cpuset
                    .as_ref()
                    .map(|c| c.intersection(&self.pus))
                    .unwrap_or_default(),
                memory: object.local_memory,
                memory_free: None,
                hugepages: hugepages(&object.page_types),
                distances: BTreeMap::new(),
                subtype: object.subtype.clone(),
            });
        }
        if nodes.is_empty() {
            // hwloc 1.x on a machine without NUMA: the machine holds the memory.
            let machine = &self.objects[0];
            nodes.push(NumaNode {
                id: 0,
                cpus: CpuSet::new(),
                local_cpus: self.pus.clone(),
                memory: machine.local_memory,
                memory_free: None,
                hugepages: hugepages(&machine.page_types),
                distances: BTreeMap::new(),
                subtype: None,
            });
        }
        let document_order: Vec<usize> = nodes.iter().map(|n| n.id).collect();
        nodes.sort_by_key(|n| n.id);
        if let Some(matrix) = self.numa_distances(root, &document_order) {
            for node in &mut nodes {
                if let Some(row) = matrix.get(&node.id) {
                    node.distances = row.clone();
                }
            }
        }
        let (several, none) = assign_home_nodes(&mut self.topology.cpus, &mut nodes);
        if !several.is_empty() {
            self.topology
                .warnings
                .push(Warning::CpusInSeveralNumaNodes { cpus: several });
        }
        if !none.is_empty() {
            if let [only] = nodes.as_mut_slice() {
                for cpu in self.topology.cpus.iter_mut().filter(|c| c.numa.is_none()) {
                    cpu.numa = Some(only.id);
                    only.cpus.insert(cpu.id);
                }
            } else {
                self.topology.warnings.push(Warning::CpusWithoutNumaNode { cpus: none });
            }
        }
        self.topology.numa_nodes = nodes;
        Ok(())
    }

    /// The NUMA distance matrix: v2 `distances2` over NUMA nodes (the
    /// `NUMALatency` one first), or a v1 `distances` whose objects are the
    /// NUMA nodes in document order (values × `latency_base`).
    fn numa_distances(
        &self,
        root: roxmltree::Node<'_, '_>,
        document_order: &[usize],
    ) -> Option<BTreeMap<usize, BTreeMap<usize, u64>>> {
        let mut v2: Vec<roxmltree::Node<'_, '_>> = root
            .descendants()
            .filter(|n| n.has_tag_name("distances2") && n.attribute("type") == Some("NUMANode"))
            .collect();
        v2.sort_by_key(|n| n.attribute("name") != Some("NUMALatency"));
        for element in v2 {
            let indexing_gp = element.attribute("indexing") == Some("gp");
            let indexes: Vec<u64> = numbers(element, "indexes");
            let values: Vec<u64> = numbers(element, "u64values");
            let n = indexes.len();
            if n == 0 || values.len() != n * n {
                continue;
            }
            let ids: Vec<Option<usize>> = indexes
                .iter()
                .map(|&index| {
                    if indexing_gp {
                        self.objects
                            .iter()
                            .find(|o| o.kind == "NUMANode" && o.gp_index == Some(index))
                            .and_then(|o| o.os_index)
                            .and_then(|o| usize::try_from(o).ok())
                    } else {
                        usize::try_from(index).ok()
                    }
                })
                .collect();
            return Some(matrix(&ids, &values));
        }
        for element in root.descendants().filter(|n| n.has_tag_name("distances")) {
            let base: f64 = element
                .attribute("latency_base")
                .and_then(|b| b.parse().ok())
                .unwrap_or(1.0);
            let values: Vec<u64> = element
                .children()
                .filter(|n| n.has_tag_name("latency"))
                .filter_map(|n| n.attribute("value")?.parse::<f64>().ok())
                .map(|v| (v * base).round() as u64)
                .collect();
            let n = document_order.len();
            if values.len() == n * n && n > 0 {
                let ids: Vec<Option<usize>> = document_order.iter().map(|&id| Some(id)).collect();
                return Some(matrix(&ids, &values));
            }
        }
        None
    }

    fn read_pci(&mut self, root: roxmltree::Node<'_, '_>) {
        let node_ids: BTreeSet<usize> = self.topology.numa_nodes.iter().map(|n| n.id).collect();
        let mut address_of: HashMap<usize, String> = HashMap::new();
        let mut devices = Vec::new();
        for (index, object) in self.objects.iter().enumerate() {
            if object.kind != "PCIDev" {
                continue;
            }
            let Some(address) = object.pci_busid.as_deref().and_then(parse::normalize_pci_address) else {
                continue;
            };
            let (class, vendor, device) = object
                .pci_type
                .as_deref()
                .and_then(parse::parse_hwloc_pci_type)
                .map_or((0, None, None), |(c, v, d)| (u32::from(c) << 8, Some(v), Some(d)));
            let mut pci = PciDevice::new(address.clone(), class, vendor, device);
            let locality = self.ancestors(index).find(|&i| !self.objects[i].is_io());
            match locality {
                Some(owner) if self.objects[owner].parent.is_some() => {
                    let owner = &self.objects[owner];
                    let cpus = owner
                        .cpuset
                        .as_ref()
                        .map(|c| c.intersection(&self.pus))
                        .unwrap_or_default();
                    pci.numa = match &owner.nodeset {
                        Some(set) => set
                            .iter()
                            .filter_map(|n| usize::try_from(n).ok())
                            .filter(|n| node_ids.contains(n))
                            .collect(),
                        None => self
                            .topology
                            .numa_nodes
                            .iter()
                            .filter(|n| n.cpus.intersection_len(&cpus) > 0)
                            .map(|n| n.id)
                            .collect(),
                    };
                    pci.local_cpus = Some(cpus);
                }
                _ => pci.local_cpus = Some(self.pus.clone()),
            }
            pci.pci_path = self
                .ancestors(index)
                .filter(|&i| self.objects[i].kind == "Bridge")
                .map(|i| {
                    let bridge = &self.objects[i];
                    match (&bridge.pci_busid, bridge.bridge_type.as_deref()) {
                        (Some(busid), Some(t)) if !t.starts_with("0-") => busid.clone(),
                        _ => format!("hostbridge#{i}"),
                    }
                })
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            pci.names = self
                .objects
                .iter()
                .filter(|o| o.kind == "OSDev" && o.parent == Some(index))
                .filter_map(|o| o.name.clone())
                .collect();
            let description: Vec<&str> = ["PCIVendor", "PCIDevice"]
                .iter()
                .filter_map(|k| object.info(k))
                .collect();
            pci.description = (!description.is_empty()).then(|| description.join(" "));
            pci.virtual_function = vf::is_known_virtual_function(vendor, device);
            address_of.insert(index, address);
            devices.push(pci);
        }
        devices.sort_by(|a, b| a.address.cmp(&b.address));
        let single_node = self.topology.numa_nodes.iter().filter(|n| !n.cpus.is_empty()).count() <= 1;
        let mut links = pcie_matrix(&devices, single_node);
        if let Some(links) = &mut links {
            self.overlay_fabric(root, links, &address_of);
        }
        self.topology.pci_devices = devices;
        self.topology.gpu_links = links;
    }

    /// Replaces PCIe levels by fabric links from hwloc's bandwidth matrices
    /// (`NVLinkBandwidth`, `XGMIBandwidth`): a direct link when the matrix
    /// has one; through switches (e.g. NVSwitch) when both GPUs reach the
    /// same non-GPU endpoints, with the smaller of their total bandwidths.
    fn overlay_fabric(
        &self,
        root: roxmltree::Node<'_, '_>,
        links: &mut crate::GpuLinks,
        address_of: &HashMap<usize, String>,
    ) {
        let by_gp: HashMap<u64, usize> = self
            .objects
            .iter()
            .enumerate()
            .filter_map(|(i, o)| Some((o.gp_index?, i)))
            .collect();
        // An OSDev stands for its PCI device.
        let address = |gp: u64| -> Option<String> {
            let index = *by_gp.get(&gp)?;
            let pci = if self.objects[index].kind == "OSDev" {
                self.objects[index].parent?
            } else {
                index
            };
            address_of.get(&pci).cloned()
        };
        let mut sources = Vec::new();
        for element in root
            .descendants()
            .filter(|n| n.has_tag_name("distances2") || n.has_tag_name("distances2hetero"))
        {
            let Some(name) = element.attribute("name").filter(|n| n.ends_with("Bandwidth")) else {
                continue;
            };
            let indexes: Vec<Option<u64>> = element
                .children()
                .filter(|n| n.has_tag_name("indexes"))
                .flat_map(|n| {
                    n.text()
                        .unwrap_or("")
                        .split_whitespace()
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .map(|token| token.rsplit(':').next().and_then(|gp| gp.parse().ok()))
                .collect();
            let values = numbers(element, "u64values");
            let n = indexes.len();
            if n == 0 || values.len() != n * n {
                continue;
            }
            let endpoints: Vec<Option<String>> = indexes.iter().map(|gp| gp.and_then(address)).collect();
            let mut bandwidth: HashMap<(String, String), u64> = HashMap::new();
            for i in 0..n {
                for j in 0..n {
                    if let (Some(a), Some(b)) = (&endpoints[i], &endpoints[j])
                        && a != b
                        && values[i * n + j] > 0
                    {
                        let entry = bandwidth.entry((a.clone(), b.clone())).or_default();
                        *entry = (*entry).max(values[i * n + j]);
                    }
                }
            }
            let fabric = name.trim_end_matches("Bandwidth").to_string();
            let gpus = &links.gpus;
            let is_gpu = |a: &String| gpus.contains(a);
            let to_switches = |gpu: &String| -> (u64, BTreeSet<String>) {
                let mut total = 0;
                let mut switches = BTreeSet::new();
                for ((a, b), bw) in &bandwidth {
                    if a == gpu && !is_gpu(b) {
                        total += bw;
                        switches.insert(b.clone());
                    }
                }
                (total, switches)
            };
            let mut used = false;
            for i in 0..gpus.len() {
                for j in 0..gpus.len() {
                    if i == j {
                        continue;
                    }
                    let direct = bandwidth.get(&(gpus[i].clone(), gpus[j].clone())).copied();
                    let link = match direct {
                        Some(bw) => Some(GpuLink::Fabric {
                            name: fabric.clone(),
                            bandwidth_mbps: bw,
                            switched: false,
                        }),
                        None => {
                            let (total_i, switches_i) = to_switches(&gpus[i]);
                            let (total_j, switches_j) = to_switches(&gpus[j]);
                            (!switches_i.is_disjoint(&switches_j)).then(|| GpuLink::Fabric {
                                name: fabric.clone(),
                                bandwidth_mbps: total_i.min(total_j),
                                switched: true,
                            })
                        }
                    };
                    if let Some(link) = link {
                        links.links[i][j] = link;
                        used = true;
                    }
                }
            }
            if used {
                sources.push(format!("hwloc {name}"));
            }
        }
        if !sources.is_empty() {
            links.source = format!("{} + PCI topology", sources.join(" + "));
        }
    }
}

/// All whitespace-separated numbers of an element's children named `tag`
/// (hwloc splits long lists over several elements).
fn numbers(element: roxmltree::Node<'_, '_>, tag: &str) -> Vec<u64> {
    element
        .children()
        .filter(|n| n.has_tag_name(tag))
        .flat_map(|n| {
            n.text()
                .unwrap_or("")
                .split_whitespace()
                .filter_map(|v| v.parse().ok())
                .collect::<Vec<u64>>()
        })
        .collect()
}

/// A row-major matrix as rows by node id.
fn matrix(ids: &[Option<usize>], values: &[u64]) -> BTreeMap<usize, BTreeMap<usize, u64>> {
    let n = ids.len();
    let mut rows: BTreeMap<usize, BTreeMap<usize, u64>> = BTreeMap::new();
    for (i, from) in ids.iter().enumerate() {
        for (j, to) in ids.iter().enumerate() {
            if let (Some(from), Some(to)) = (from, to) {
                rows.entry(*from).or_default().insert(*to, values[i * n + j]);
            }
        }
    }
    rows
}

/// Huge page pools: every page size but the smallest, which is the base
/// page (4 KiB on x86, 64 KiB on many arm64 and POWER kernels).
fn hugepages(page_types: &[(u64, u64)]) -> BTreeMap<u64, HugePages> {
    let Some(base) = page_types.iter().map(|&(size, _)| size).min() else {
        return BTreeMap::new();
    };
    page_types
        .iter()
        .filter(|&&(size, _)| size > base)
        .map(|&(size, count)| {
            (
                size,
                HugePages {
                    total: count,
                    free: None,
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DeviceKind;

    const TINY_V2: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE topology SYSTEM "hwloc2.dtd">
<topology version="2.0">
  <object type="Machine" os_index="0" cpuset="0x0000000f" complete_cpuset="0x0000001f" nodeset="0x3" gp_index="1">
    <object type="Package" os_index="0" cpuset="0x00000003" nodeset="0x1" gp_index="2">
      <object type="NUMANode" os_index="0" cpuset="0x00000003" nodeset="0x1" gp_index="3" local_memory="1073741824">
        <page_type size="4096" count="262144"/>
        <page_type size="2097152" count="0"/>
      </object>
      <object type="L3Cache" cpuset="0x3" cache_size="1048576" depth="3" gp_index="4">
        <object type="Core" os_index="0" cpuset="0x3" gp_index="5">
          <object type="PU" os_index="0" cpuset="0x1" gp_index="6"/>
          <object type="PU" os_index="1" cpuset="0x2" gp_index="7"/>
        </object>
      </object>
      <object type="Bridge" gp_index="8" bridge_type="0-1" depth="0">
        <object type="PCIDev" gp_index="9" pci_busid="0000:3b:00.0" pci_type="0302 [10de:1db4] [10de:1214] a1">
          <object type="OSDev" gp_index="10" name="nvidia0" osdev_type="1"/>
        </object>
      </object>
    </object>
    <object type="Package" os_index="1" cpuset="0x0000000c" nodeset="0x2" gp_index="11">
      <object type="NUMANode" os_index="1" cpuset="0x0000000c" nodeset="0x2" gp_index="12" local_memory="2147483648"/>
      <object type="Core" os_index="0" cpuset="0xc" gp_index="13">
        <object type="PU" os_index="2" cpuset="0x4" gp_index="14"/>
        <object type="PU" os_index="3" cpuset="0x8" gp_index="15"/>
      </object>
    </object>
  </object>
  <distances2 type="NUMANode" nbobjs="2" kind="5" name="NUMALatency" indexing="os">
    <indexes length="4">0 1 </indexes>
    <u64values length="12">10 21 21 10 </u64values>
  </distances2>
</topology>"#;

    #[test]
    fn a_tiny_v2_machine() {
        let t = parse_hwloc_xml(TINY_V2, "test").unwrap();
        assert_eq!(t.packages.len(), 2);
        assert_eq!(
            t.cpus.iter().map(|c| c.core).collect::<Vec<_>>(),
            vec![0, 0, 2, 2],
            "machine-unique cores"
        );
        assert_eq!(t.numa_nodes[1].memory, Some(2 << 30));
        assert_eq!(t.numa_nodes[0].hugepages.get(&(2 << 20)).map(|h| h.total), Some(0));
        assert_eq!(t.numa_nodes[0].distances.get(&1), Some(&21));
        assert_eq!(t.offline_cpus.to_string(), "4");
        assert_eq!(t.caches.len(), 1);
        let gpu = &t.pci_devices[0];
        assert_eq!((gpu.kind, gpu.numa.clone()), (DeviceKind::Gpu, vec![0]));
        assert_eq!(gpu.names, vec!["nvidia0"]);
        assert_eq!(t.resources["nvidia.com/gpu"][0].id, "0000:3b:00.0");
        let machine = t.to_machine().unwrap();
        assert_eq!(machine.cpus().len(), 4);
    }

    #[test]
    fn not_hwloc() {
        assert!(matches!(parse_hwloc_xml("<svg/>", "x"), Err(HwlocError::NotHwloc(m)) if m.contains("<svg>")));
        assert!(matches!(parse_hwloc_xml("{\"a\":1}", "x"), Err(HwlocError::NotHwloc(m)) if m.starts_with("not XML")));
        assert!(matches!(
            parse_hwloc_xml("<topology/>", "x"),
            Err(HwlocError::NotHwloc(_))
        ));
        let no_pu_index = TINY_V2.replace(r#"type="PU" os_index="3""#, r#"type="PU""#);
        assert!(matches!(
            parse_hwloc_xml(&no_pu_index, "x"),
            Err(HwlocError::Malformed(_))
        ));
    }
}
