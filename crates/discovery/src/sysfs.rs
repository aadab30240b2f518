//! The Linux sysfs reader: the live machine (root `/`), an unpacked capture
//! directory, or a capture archive, into a [`Topology`].
//!
//! What it reads, all under `sys/` (and `proc/` for the CPU model and the
//! memory of kernels without NUMA):
//! - `devices/system/cpu`: online/present masks, per CPU `topology/`
//!   (package, die, thread siblings) and `cache/index*/` (level 3 groups);
//! - `devices/system/node/nodeN`: `cpulist`, `meminfo`, `distance`,
//!   `hugepages/`;
//! - `bus/pci/devices/*`: class, ids, `numa_node`, `local_cpulist`, SR-IOV
//!   links, OS names, and the bridge path for GPU link levels.
//!
//! Files that a CPU, node or device shares with others (sibling and cache
//! lists) are read once per group, which keeps a 1,000-CPU machine well
//! under 100 ms. Owns the meaning of sysfs files; the syntax is `parse`'s.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use topoalign_model::CpuSet;

use crate::links::pcie_matrix;
use crate::parse::{self, ParseError};
use crate::topology::{
    Cache, Die, HugePages, LogicalCpu, NumaNode, Package, PciDevice, Topology, Warning, assign_home_nodes, package_ids,
};
use crate::tree::Tree;
use crate::{DiscoveryError, vf};

/// Reads the machine under `root`: a directory holding `sys/` (`/` for the
/// live machine, or an unpacked capture, also one level down), a sysfs mount
/// itself (`/sys`), or a capture archive (`.tar`, `.tar.gz`, `.tgz`,
/// `.tar.bz2`, `.tar.xz`, recognised by content).
///
/// # Errors
/// [`DiscoveryError`] naming the path: a root that cannot be read or holds
/// no sysfs, a truncated tree (e.g. an online CPU without `topology/`), a
/// file with unexpected text, an archive that cannot be unpacked.
pub fn read_sysfs(root: &Path) -> Result<Topology, DiscoveryError> {
    let tree = Tree::open(root)?;
    let layout = Layout::locate(&tree, root)?;
    let source = if tree.is_archive() {
        format!("sysfs capture {}", root.display())
    } else {
        format!("sysfs {}", root.display())
    };
    Reader { tree: &tree, layout }.read(source)
}

/// Where `sys/` and `proc/` are inside the tree.
struct Layout {
    /// Relative path of the sysfs mount (`sys`, `machine/sys`, or empty).
    sys: String,
    /// Relative path of procfs, when there is one.
    proc: Option<String>,
}

fn join(base: &str, rest: &str) -> String {
    if base.is_empty() {
        rest.to_string()
    } else {
        format!("{base}/{rest}")
    }
}

const CPU_DIR: &str = "devices/system/cpu";

impl Layout {
    fn locate(tree: &Tree, root: &Path) -> Result<Layout, DiscoveryError> {
        let sys = if tree.is_archive() {
            tree.archive_dirs_ending_with(CPU_DIR)
                .into_iter()
                .min_by_key(|d| (d.len(), d.clone()))
                .map(|d| d.strip_suffix(CPU_DIR).unwrap_or("").trim_end_matches('/').to_string())
        } else if tree.is_dir(&join("sys", CPU_DIR)) {
            Some("sys".to_string())
        } else if tree.is_dir(CPU_DIR) {
            Some(String::new())
        } else {
            // An unpacked capture whose archive had one top directory.
            let children = tree.list("")?.unwrap_or_default();
            match children.as_slice() {
                [only] if tree.is_dir(&join(only, &join("sys", CPU_DIR))) => Some(join(only, "sys")),
                _ => None,
            }
        };
        let Some(sys) = sys else {
            return Err(DiscoveryError::NotSysfs {
                path: root.to_path_buf(),
                detail: format!("no sys/{CPU_DIR} directory"),
            });
        };
        let proc = if sys == "sys" {
            Some("proc".to_string())
        } else if let Some(parent) = sys.strip_suffix("/sys") {
            Some(join(parent, "proc"))
        } else if sys.is_empty() && !tree.is_archive() {
            Some("../proc".to_string())
        } else {
            None
        };
        Ok(Layout { sys, proc })
    }
}

struct Reader<'a> {
    tree: &'a Tree,
    layout: Layout,
}

/// What the per-CPU pass learns.
struct CpuFacts {
    online: CpuSet,
    offline: CpuSet,
    package_of: BTreeMap<u32, i64>,
    die_of: BTreeMap<u32, u32>,
    core_of: BTreeMap<u32, u32>,
    l3_of: BTreeMap<u32, usize>,
    l3_groups: Vec<L3Group>,
}

struct L3Group {
    cpus: CpuSet,
    kernel_id: Option<u32>,
    size: Option<u64>,
}

impl Reader<'_> {
    fn sys(&self, rest: &str) -> String {
        join(&self.layout.sys, rest)
    }

    fn parse_error(&self, rel: &str, error: ParseError) -> DiscoveryError {
        DiscoveryError::Parse {
            path: self.tree.display(rel),
            error,
        }
    }

    /// Reads and parses an optional file.
    fn optional<T>(
        &self,
        rel: &str,
        parse: impl Fn(&str) -> Result<T, ParseError>,
    ) -> Result<Option<T>, DiscoveryError> {
        match self.tree.read(rel)? {
            // Some captures keep the NUL terminator of the kernel's buffer.
            Some(text) => parse(text.trim_end_matches(['\0', '\n', ' ']))
                .map(Some)
                .map_err(|e| self.parse_error(rel, e)),
            None => Ok(None),
        }
    }

    /// Reads and parses a file the kernel always writes.
    fn required<T>(&self, rel: &str, parse: impl Fn(&str) -> Result<T, ParseError>) -> Result<T, DiscoveryError> {
        self.optional(rel, parse)?.ok_or_else(|| DiscoveryError::Truncated {
            path: self.tree.display(rel),
            detail: "the file is missing".into(),
        })
    }

    fn read(&self, source: String) -> Result<Topology, DiscoveryError> {
        let mut topology = Topology::empty(source);
        let facts = self.read_cpus(&mut topology)?;
        self.build_packages(&mut topology, &facts);
        self.read_numa(&mut topology, &facts)?;
        self.read_pci(&mut topology)?;
        if let Some(proc) = &self.layout.proc
            && let Some(text) = self.tree.read(&join(proc, "cpuinfo"))?
        {
            topology.cpu_model = parse::parse_cpuinfo_model(&text);
        }
        topology.offline_cpus = facts.offline;
        topology.add_common_warnings();
        topology.refresh_resources();
        let single_node = topology.numa_nodes.iter().filter(|n| !n.cpus.is_empty()).count() <= 1;
        topology.gpu_links = pcie_matrix(&topology.pci_devices, single_node);
        Ok(topology)
    }

    fn read_cpus(&self, topology: &mut Topology) -> Result<CpuFacts, DiscoveryError> {
        let cpu_dir = self.sys(CPU_DIR);
        let names = self.tree.list(&cpu_dir)?.unwrap_or_default();
        let mut dirs = CpuSet::new();
        for id in names.iter().filter_map(|n| n.strip_prefix("cpu")?.parse::<u64>().ok()) {
            match u32::try_from(id).ok().filter(|&id| id <= CpuSet::MAX_CPU_ID) {
                Some(id) => dirs.insert(id),
                None => {
                    return Err(self.parse_error(
                        &format!("{cpu_dir}/cpu{id}"),
                        ParseError::new(
                            "a CPU id the kernel can have (below NR_CPUS, at most 16383)",
                            &id.to_string(),
                        ),
                    ));
                }
            }
        }
        let online = match self.optional(&join(&cpu_dir, "online"), parse::parse_cpu_list)? {
            Some(mask) => mask,
            None => {
                // Old kernels have no mask: a CPU is online unless its own
                // `online` file says 0 (cpu0 often has none). Some kernels
                // (a real ia64 capture) leave the file of a CPU that cannot
                // be taken offline empty: that CPU is online.
                let mut online = CpuSet::new();
                let mut empty = CpuSet::new();
                for cpu in dirs.iter() {
                    let file = format!("{cpu_dir}/cpu{cpu}/online");
                    let flag = match self.tree.read(&file)? {
                        Some(text) if text.trim_matches(['\0', '\n', ' ']).is_empty() => {
                            empty.insert(cpu);
                            None
                        }
                        Some(_) => self.optional(&file, parse::parse_int)?,
                        None => None,
                    };
                    if flag != Some(0) {
                        online.insert(cpu);
                    }
                }
                if !empty.is_empty() {
                    topology.warnings.push(Warning::EmptyOnlineFile { cpus: empty });
                }
                online
            }
        };
        if online.is_empty() {
            return Err(DiscoveryError::Truncated {
                path: self.tree.display(&cpu_dir),
                detail: "no online CPU".into(),
            });
        }
        let present = self
            .optional(&join(&cpu_dir, "present"), parse::parse_cpu_list)?
            .unwrap_or_else(|| dirs.clone());
        let offline = present.difference(&online);

        let mut facts = CpuFacts {
            online: online.clone(),
            offline,
            package_of: BTreeMap::new(),
            die_of: BTreeMap::new(),
            core_of: BTreeMap::new(),
            l3_of: BTreeMap::new(),
            l3_groups: Vec::new(),
        };
        // Cores known only by (package, die, core_id), for kernels without
        // sibling lists.
        let mut cores_by_id: BTreeMap<(i64, Option<u32>, i64), CpuSet> = BTreeMap::new();
        for cpu in online.iter() {
            let base = format!("{cpu_dir}/cpu{cpu}");
            if !dirs.contains(cpu) {
                return Err(DiscoveryError::Truncated {
                    path: self.tree.display(&base),
                    detail: "the CPU is listed online but its directory is missing".into(),
                });
            }
            let topo = format!("{base}/topology");
            let package_file = format!("{topo}/physical_package_id");
            let Some(package) = self.optional(&package_file, parse::parse_int)? else {
                // Say which level is missing: the file, or the whole directory.
                let (path, detail) = if self.tree.is_dir(&topo) {
                    (package_file, "the file is missing")
                } else {
                    (topo, "an online CPU has no topology directory")
                };
                return Err(DiscoveryError::Truncated {
                    path: self.tree.display(&path),
                    detail: detail.into(),
                });
            };
            facts.package_of.insert(cpu, package);
            let die = self
                .optional(&format!("{topo}/die_id"), parse::parse_int)?
                .and_then(|d| u32::try_from(d).ok());
            if let Some(die) = die {
                facts.die_of.insert(cpu, die);
            }
            if !facts.core_of.contains_key(&cpu) {
                match self.siblings(&topo)? {
                    Some(siblings) => {
                        let mut group = siblings.intersection(&online);
                        group.insert(cpu);
                        let core = group.first().unwrap_or(cpu);
                        for sibling in group.iter() {
                            facts.core_of.entry(sibling).or_insert(core);
                        }
                    }
                    None => {
                        let core_id = self.required(&format!("{topo}/core_id"), parse::parse_int)?;
                        cores_by_id.entry((package, die, core_id)).or_default().insert(cpu);
                    }
                }
            }
            if !facts.l3_of.contains_key(&cpu) {
                self.read_l3(&base, cpu, &mut facts)?;
            }
        }
        for group in cores_by_id.values() {
            let core = group.first().unwrap_or(0);
            for cpu in group.iter() {
                facts.core_of.insert(cpu, core);
            }
        }

        // Kernel cache ids when they tell the groups apart, else dense.
        let kernel_ids: BTreeSet<u32> = facts.l3_groups.iter().filter_map(|g| g.kernel_id).collect();
        let use_kernel_ids =
            kernel_ids.len() == facts.l3_groups.len() && facts.l3_groups.iter().all(|g| g.kernel_id.is_some());
        let mut order: Vec<usize> = (0..facts.l3_groups.len()).collect();
        order.sort_by_key(|&i| facts.l3_groups[i].cpus.intersection(&online).first());
        let mut cache_id_of = vec![0u32; facts.l3_groups.len()];
        for (dense, &i) in order.iter().enumerate() {
            let group = &facts.l3_groups[i];
            // Dense ids count groups, far below u32::MAX.
            let id = if use_kernel_ids {
                group.kernel_id.unwrap_or(0)
            } else {
                dense as u32
            };
            cache_id_of[i] = id;
            topology.caches.push(Cache {
                id,
                cpus: group.cpus.clone(),
                size: group.size,
            });
        }
        topology.caches.sort_by_key(|c| c.id);

        for cpu in online.iter() {
            topology.cpus.push(LogicalCpu {
                id: cpu,
                core: facts.core_of.get(&cpu).copied().unwrap_or(cpu),
                package: 0,
                die: facts.die_of.get(&cpu).copied(),
                numa: None,
                l3: facts.l3_of.get(&cpu).map(|&i| cache_id_of[i]),
            });
        }
        Ok(facts)
    }

    /// The thread siblings of a CPU, in whichever spelling the kernel has.
    fn siblings(&self, topo: &str) -> Result<Option<CpuSet>, DiscoveryError> {
        for (file, parse) in [
            (
                "thread_siblings_list",
                parse::parse_cpu_list as fn(&str) -> Result<CpuSet, ParseError>,
            ),
            ("core_cpus_list", parse::parse_cpu_list),
            ("thread_siblings", parse::parse_hex_mask),
            ("core_cpus", parse::parse_hex_mask),
        ] {
            if let Some(set) = self.optional(&format!("{topo}/{file}"), parse)? {
                return Ok(Some(set));
            }
        }
        Ok(None)
    }

    /// Finds the CPU's level 3 cache and records the group it shares.
    fn read_l3(&self, base: &str, cpu: u32, facts: &mut CpuFacts) -> Result<(), DiscoveryError> {
        let cache_dir = format!("{base}/cache");
        let Some(entries) = self.tree.list(&cache_dir)? else {
            return Ok(());
        };
        for entry in entries.iter().filter(|e| e.starts_with("index")) {
            let index = format!("{cache_dir}/{entry}");
            if self.optional(&format!("{index}/level"), parse::parse_int)? != Some(3) {
                continue;
            }
            let shared = match self.optional(&format!("{index}/shared_cpu_list"), parse::parse_cpu_list)? {
                Some(set) => Some(set),
                None => self.optional(&format!("{index}/shared_cpu_map"), parse::parse_hex_mask)?,
            };
            let mut cpus = shared.unwrap_or_default();
            cpus.insert(cpu);
            let kernel_id = self
                .optional(&format!("{index}/id"), parse::parse_int)?
                .and_then(|id| u32::try_from(id).ok());
            let size = self
                .tree
                .read(&format!("{index}/size"))?
                .and_then(|s| parse::parse_size(&s));
            let at = match facts.l3_groups.iter().position(|g| g.cpus == cpus) {
                Some(at) => at,
                None => {
                    facts.l3_groups.push(L3Group {
                        cpus: cpus.clone(),
                        kernel_id,
                        size,
                    });
                    facts.l3_groups.len() - 1
                }
            };
            for member in cpus.intersection(&facts.online).iter() {
                facts.l3_of.entry(member).or_insert(at);
            }
            return Ok(());
        }
        Ok(())
    }

    fn build_packages(&self, topology: &mut Topology, facts: &CpuFacts) {
        let os_ids: BTreeSet<i64> = facts.package_of.values().copied().collect();
        let ids = package_ids(&os_ids);
        let unknown: CpuSet = facts
            .package_of
            .iter()
            .filter(|&(_, &p)| p < 0)
            .map(|(&c, _)| c)
            .collect();
        if !unknown.is_empty() {
            topology.warnings.push(Warning::UnknownPackageId { cpus: unknown });
        }
        for cpu in &mut topology.cpus {
            if let Some(os) = facts.package_of.get(&cpu.id) {
                cpu.package = ids.get(os).copied().unwrap_or(0);
            }
        }
        for (&os, &id) in &ids {
            let cpus: CpuSet = topology.cpus.iter().filter(|c| c.package == id).map(|c| c.id).collect();
            let mut dies: BTreeMap<u32, CpuSet> = BTreeMap::new();
            for cpu in topology.cpus.iter().filter(|c| c.package == id) {
                if let Some(die) = cpu.die {
                    dies.entry(die).or_default().insert(cpu.id);
                }
            }
            topology.packages.push(Package {
                id,
                os_id: Some(os),
                cpus,
                dies: dies.into_iter().map(|(id, cpus)| Die { id, cpus }).collect(),
            });
        }
    }

    fn read_numa(&self, topology: &mut Topology, facts: &CpuFacts) -> Result<(), DiscoveryError> {
        let node_dir = self.sys("devices/system/node");
        let ids: Vec<usize> = self
            .tree
            .list(&node_dir)?
            .unwrap_or_default()
            .iter()
            .filter_map(|n| n.strip_prefix("node")?.parse().ok())
            .collect::<BTreeSet<usize>>()
            .into_iter()
            .collect();
        if ids.is_empty() {
            return self.read_without_numa(topology, facts);
        }
        for &id in &ids {
            let base = format!("{node_dir}/node{id}");
            let local_cpus = match self.optional(&format!("{base}/cpulist"), parse::parse_cpu_list)? {
                Some(set) => set,
                None => self
                    .optional(&format!("{base}/cpumap"), parse::parse_hex_mask)?
                    .ok_or_else(|| DiscoveryError::Truncated {
                        path: self.tree.display(&base),
                        detail: "the NUMA node has neither cpulist nor cpumap".into(),
                    })?,
            };
            let meminfo = self.required(&format!("{base}/meminfo"), parse::parse_meminfo)?;
            let mut node = NumaNode {
                id,
                cpus: CpuSet::new(),
                local_cpus,
                memory: meminfo.total,
                memory_free: meminfo.free,
                hugepages: self.hugepages(&format!("{base}/hugepages"))?,
                distances: BTreeMap::new(),
                subtype: None,
            };
            if let Some(row) = self.optional(&format!("{base}/distance"), parse::parse_distance_row)? {
                // Columns are the online nodes in ascending id order.
                if row.len() == ids.len() {
                    node.distances = ids.iter().copied().zip(row).collect();
                } else {
                    topology.warnings.push(Warning::BadDistances {
                        node: id,
                        detail: format!("{} values for {} nodes", row.len(), ids.len()),
                    });
                }
            }
            topology.numa_nodes.push(node);
        }
        let (several, none) = assign_home_nodes(&mut topology.cpus, &mut topology.numa_nodes);
        if !several.is_empty() {
            topology
                .warnings
                .push(Warning::CpusInSeveralNumaNodes { cpus: several });
        }
        if !none.is_empty() {
            if let [only] = topology.numa_nodes.as_mut_slice() {
                for cpu in topology.cpus.iter_mut().filter(|c| c.numa.is_none()) {
                    cpu.numa = Some(only.id);
                    only.cpus.insert(cpu.id);
                }
            } else {
                topology.warnings.push(Warning::CpusWithoutNumaNode { cpus: none });
            }
        }
        Ok(())
    }

    /// A kernel without NUMA support: one node with all CPUs and the memory
    /// of `/proc/meminfo` (what cAdvisor reports then).
    fn read_without_numa(&self, topology: &mut Topology, facts: &CpuFacts) -> Result<(), DiscoveryError> {
        let meminfo = match &self.layout.proc {
            Some(proc) => self.optional(&join(proc, "meminfo"), parse::parse_meminfo)?,
            None => None,
        }
        .unwrap_or_default();
        topology.numa_nodes.push(NumaNode {
            id: 0,
            cpus: facts.online.clone(),
            local_cpus: facts.online.clone(),
            memory: meminfo.total,
            memory_free: meminfo.free,
            hugepages: self.hugepages(&self.sys("kernel/mm/hugepages"))?,
            distances: BTreeMap::new(),
            subtype: None,
        });
        for cpu in &mut topology.cpus {
            cpu.numa = Some(0);
        }
        topology.warnings.push(Warning::NoNumaInformation);
        Ok(())
    }

    fn hugepages(&self, dir: &str) -> Result<BTreeMap<u64, HugePages>, DiscoveryError> {
        let mut pools = BTreeMap::new();
        for name in self.tree.list(dir)?.unwrap_or_default() {
            let Some(size) = parse::parse_hugepage_dir(&name) else {
                continue;
            };
            let pool = format!("{dir}/{name}");
            let Some(total) = self.optional(&format!("{pool}/nr_hugepages"), parse::parse_count)? else {
                continue;
            };
            let free = self.optional(&format!("{pool}/free_hugepages"), parse::parse_count)?;
            pools.insert(size, HugePages { total, free });
        }
        Ok(pools)
    }

    fn read_pci(&self, topology: &mut Topology) -> Result<(), DiscoveryError> {
        let pci_dir = self.sys("bus/pci/devices");
        let node_ids: BTreeSet<usize> = topology.numa_nodes.iter().map(|n| n.id).collect();
        for name in self.tree.list(&pci_dir)?.unwrap_or_default() {
            let base = format!("{pci_dir}/{name}");
            let hex16 = |file: &str| -> Result<Option<u16>, DiscoveryError> {
                Ok(self
                    .optional(&format!("{base}/{file}"), parse::parse_hex)?
                    .and_then(|v| u16::try_from(v).ok()))
            };
            let class = self.optional(&format!("{base}/class"), parse::parse_hex)?.unwrap_or(0);
            let address = parse::normalize_pci_address(&name).unwrap_or_else(|| name.clone());
            let mut device = PciDevice::new(address, class, hex16("vendor")?, hex16("device")?);
            device.numa_node_file = self.optional(&format!("{base}/numa_node"), parse::parse_int)?;
            if let Some(node) = device.numa_node_file
                && let Some(node) = usize::try_from(node).ok().filter(|n| node_ids.contains(n))
            {
                device.numa = vec![node];
            }
            device.local_cpus = match self.optional(&format!("{base}/local_cpulist"), parse::parse_cpu_list)? {
                Some(set) => Some(set),
                None => self.optional(&format!("{base}/local_cpus"), parse::parse_hex_mask)?,
            };
            device.sriov_total_vfs = self
                .optional(&format!("{base}/sriov_totalvfs"), parse::parse_count)?
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n > 0);
            if let Some(parent) = self.tree.resolve(&format!("{base}/physfn")) {
                device.virtual_function = true;
                device.physical_function = parent.rsplit('/').next().and_then(parse::normalize_pci_address);
            } else {
                device.virtual_function = vf::is_known_virtual_function(device.vendor, device.device);
            }
            for sub in ["net", "infiniband", "nvme"] {
                device
                    .names
                    .extend(self.tree.list(&format!("{base}/{sub}"))?.unwrap_or_default());
            }
            if let Some(canonical) = self.tree.resolve(&base) {
                device.pcie_root = pcie_root(&canonical, &self.layout.sys, &name);
                device.pci_path = bridge_path(&canonical);
            }
            topology.pci_devices.push(device);
        }
        topology.pci_devices.sort_by(|a, b| a.address.cmp(&b.address));
        Ok(())
    }
}

/// The host bridge and bridges above a device, from its canonical sysfs path
/// (`…/devices/pci0000:00/0000:00:03.0/0000:02:00.0/0000:03:00.0` →
/// `[pci0000:00, 0000:00:03.0, 0000:02:00.0]`).
fn bridge_path(canonical: &str) -> Vec<String> {
    let components: Vec<&str> = canonical.split('/').collect();
    let Some(root) = components.iter().position(|c| c.starts_with("pci")) else {
        return Vec::new();
    };
    let mut path: Vec<String> = components[root..].iter().map(|c| c.to_string()).collect();
    path.pop();
    path
}

/// The PCIe root complex of a device by the rule of Kubernetes'
/// `deviceattribute` helper (`GetPCIeRootAttributeByPCIBusID`): the device's
/// `bus/pci/devices/<name>` link must lead to `devices/pci…/…/<name>` under
/// the sysfs mount, and the root is the component right under `devices/`
/// (`pci0000:3a`), whatever bridges lie between it and the device; a virtual
/// function sits under its physical function's bridge and gets the same root.
/// A link leading anywhere else (a Hyper-V bus under `devices/LNXSYSTM:00`,
/// a capture holding a directory instead of the link) gives none.
///
/// `canonical` is the link followed to the end, relative to the tree's root;
/// `sys` is where the sysfs mount is in the tree. The helper reads the one
/// link and cleans it lexically, which on a live sysfs (relative links
/// straight into `devices/`) is the same path.
fn pcie_root(canonical: &str, sys: &str, name: &str) -> Option<String> {
    let inside = if sys.is_empty() {
        canonical
    } else {
        canonical.strip_prefix(sys)?.strip_prefix('/')?
    };
    let below = inside.strip_prefix("devices/pci")?;
    let (root, _) = below.split_once('/')?;
    (inside.rsplit('/').next() == Some(name)).then(|| format!("pci{root}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcie_roots_by_the_deviceattribute_rule() {
        let root = |canonical, sys, name| pcie_root(canonical, sys, name);
        // Behind two bridges: still the root complex.
        assert_eq!(
            root(
                "sys/devices/pci0000:5d/0000:5d:02.0/0000:5e:00.0/0000:5f:03.0/0000:60:00.0",
                "sys",
                "0000:60:00.0"
            )
            .as_deref(),
            Some("pci0000:5d")
        );
        assert_eq!(
            root(
                "capture/sys/devices/pci0000:00/0000:00:02.0",
                "capture/sys",
                "0000:00:02.0"
            )
            .as_deref(),
            Some("pci0000:00")
        );
        // The tree is the sysfs mount itself.
        assert_eq!(
            root("devices/pci0000:ff/0000:ff:0f.1", "", "0000:ff:0f.1").as_deref(),
            Some("pci0000:ff")
        );
        // Hyper-V: the PCI root is not right under devices/.
        assert_eq!(
            root(
                "sys/devices/LNXSYSTM:00/LNXSYBUS:00/VMBUS:00/abc/pci7870:00/7870:00:00.0",
                "sys",
                "7870:00:00.0"
            ),
            None
        );
        // A capture that kept a directory, not the link.
        assert_eq!(root("sys/bus/pci/devices/0006:00:00.0", "sys", "0006:00:00.0"), None);
        // The link must end at the device itself.
        assert_eq!(root("sys/devices/pci0000:00/0000:00:01.0", "sys", "0000:00:02.0"), None);
    }

    #[test]
    fn bridge_paths_from_canonical_paths() {
        assert_eq!(
            bridge_path("sys/devices/pci0000:00/0000:00:03.0/0000:02:00.0/0000:03:00.0"),
            vec!["pci0000:00", "0000:00:03.0", "0000:02:00.0"]
        );
        assert_eq!(bridge_path("sys/devices/pci0000:00/0000:00:01.0"), vec!["pci0000:00"]);
        assert!(bridge_path("sys/devices/virtual/net/lo").is_empty());
    }
}
