//! [`CpuTopology`]: the CPU manager's view of the machine (the kubelet's
//! `topology.CPUTopology` as built by `topology.Discover` from cAdvisor's
//! `MachineInfo`): for each logical CPU its core, socket, NUMA node and
//! uncore cache, plus the machine-wide counts the allocator divides by.
//!
//! Owns: turning a [`Machine`] into that view, the way the conformance
//! oracle feeds cAdvisor (see the conformance README, "Interpretations"):
//! - a core is the set of CPUs sharing a scenario `core` id *within one NUMA
//!   node* (cAdvisor lists cores per node), and the kubelet names it by its
//!   lowest logical CPU id;
//! - socket and uncore cache are per core (cAdvisor's `Core.SocketID` /
//!   `Core.UncoreCaches`); we take them from the core's lowest CPU;
//! - the uncore cache id falls back to the socket id when absent;
//! - NUMA nodes without CPUs do not exist here.
//!
//! Must not touch: allocation state. This is immutable once built.

use std::collections::{BTreeMap, BTreeSet};

use topoalign_model::{CpuSet, Machine, NumaMask};

/// Where one logical CPU sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuInfo {
    /// The core, named by its lowest logical CPU id.
    pub core: u32,
    pub socket: u32,
    pub numa: usize,
    /// The uncore (L3) cache, or the socket id when the machine gives none.
    pub uncore_cache: u32,
}

/// A level of the CPU hierarchy the allocator groups CPUs by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    Numa,
    Socket,
    UncoreCache,
    Core,
}

impl Level {
    /// Every level.
    pub(crate) const ALL: [Level; 4] = [Level::Numa, Level::Socket, Level::UncoreCache, Level::Core];

    /// The id of `info` at this level (NUMA ids are below 64, so they fit).
    pub(crate) fn id_of(self, info: &CpuInfo) -> u32 {
        match self {
            Level::Numa => info.numa as u32,
            Level::Socket => info.socket,
            Level::UncoreCache => info.uncore_cache,
            Level::Core => info.core,
        }
    }
}

/// The CPU manager's view of the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuTopology {
    cpus: BTreeMap<u32, CpuInfo>,
    num_cpus: usize,
    num_cores: usize,
    num_sockets: usize,
    num_numa_nodes: usize,
    num_uncore_caches: usize,
    /// Members of each group, per level (indexed by `Level as usize`),
    /// ascending by group id: the kubelet's `CPUsInNUMANodes`,
    /// `CPUsInSockets`, ... on the full topology. A sorted vector, searched
    /// by id: the allocator looks groups up many times per admission.
    groups: [Vec<(u32, CpuSet)>; 4],
    all: CpuSet,
    empty: CpuSet,
    /// Derived once for the allocator and the hints, which ask per call:
    /// each CPU's description indexed by its id, the NUMA nodes with CPUs,
    /// and the CPU count of each of those nodes, largest first.
    by_id: Vec<Option<CpuInfo>>,
    numa_mask: NumaMask,
    numa_sizes_descending: Vec<u64>,
    /// The CPU count of the smallest group at each level (indexed by
    /// `Level as usize`; 0 for a level without groups).
    smallest_group: [usize; 4],
    /// For each child level and parent level (indexed `[child][parent]`,
    /// `Level as usize`): each parent group, ascending by id, with the
    /// child groups sharing CPUs with it, ascending by id, and the CPUs
    /// they share. The allocator's nested orders read it instead of
    /// mapping every free CPU of a parent to its child on each call.
    nested: [[ChildGroups; 4]; 4],
}

/// Parent groups, ascending by id, each with the child groups sharing CPUs
/// with it (ascending by id) and the CPUs they share.
type ChildGroups = Vec<(u32, Vec<(u32, CpuSet)>)>;

impl CpuTopology {
    /// The topology the kubelet discovers on `machine`.
    pub fn from_machine(machine: &Machine) -> CpuTopology {
        // cAdvisor lists cores per NUMA node; a core is a (node, core id)
        // pair. Machine CPUs come sorted by id, so the first CPU seen for a
        // core is its lowest one, which names it and gives its socket and
        // uncore cache.
        let mut cores: BTreeMap<(usize, u32), (u32, CpuInfo)> = BTreeMap::new();
        let mut infos = Vec::with_capacity(machine.cpus().len());
        for cpu in machine.cpus() {
            let (_, info) = *cores.entry((cpu.numa, cpu.core)).or_insert_with(|| {
                let info = CpuInfo {
                    core: cpu.id,
                    socket: cpu.socket,
                    numa: cpu.numa,
                    uncore_cache: cpu.uncore_cache.unwrap_or(cpu.socket),
                };
                (cpu.id, info)
            });
            infos.push((cpu.id, info));
        }
        // Sockets are counted from the machine's distinct socket values
        // (cAdvisor's NumSockets), not from the per-core view.
        let num_sockets = machine.cpus().iter().map(|c| c.socket).collect::<BTreeSet<_>>().len();
        CpuTopology::build(infos, Some(cores.len()), num_sockets)
    }

    /// A topology from explicit CPU descriptions, as the kubelet's own tests
    /// write them (core ids are taken as given). Counts are derived from the
    /// CPUs.
    pub fn from_cpu_infos(cpus: impl IntoIterator<Item = (u32, CpuInfo)>) -> CpuTopology {
        let infos: Vec<(u32, CpuInfo)> = cpus.into_iter().collect();
        let num_sockets = infos.iter().map(|(_, i)| i.socket).collect::<BTreeSet<_>>().len();
        CpuTopology::build(infos, None, num_sockets)
    }

    fn build(infos: Vec<(u32, CpuInfo)>, num_cores: Option<usize>, num_sockets: usize) -> CpuTopology {
        let cpus: BTreeMap<u32, CpuInfo> = infos.into_iter().collect();
        let mut by_level: [BTreeMap<u32, CpuSet>; 4] = Default::default();
        for (&id, info) in &cpus {
            for level in [Level::Numa, Level::Socket, Level::UncoreCache, Level::Core] {
                by_level[level as usize]
                    .entry(level.id_of(info))
                    .or_default()
                    .insert(id);
            }
        }
        let groups: [Vec<(u32, CpuSet)>; 4] = by_level.map(|level| level.into_iter().collect());
        let count = |level: Level| groups[level as usize].len();
        let (num_numa_nodes, num_uncore_caches) = (count(Level::Numa), count(Level::UncoreCache));
        let num_cores = num_cores.unwrap_or_else(|| count(Level::Core));
        let all: CpuSet = cpus.keys().copied().collect();
        let mut by_id = vec![None; cpus.keys().next_back().map_or(0, |&id| id as usize + 1)];
        for (&id, info) in &cpus {
            by_id[id as usize] = Some(*info);
        }
        let numa_mask = NumaMask::from_maskable_nodes(cpus.values().map(|i| i.numa));
        let mut numa_sizes_descending: Vec<u64> = groups[Level::Numa as usize]
            .iter()
            .map(|(_, members)| members.len() as u64)
            .collect();
        numa_sizes_descending.sort_unstable_by(|a, b| b.cmp(a));
        let mut smallest_group = [0; 4];
        for (smallest, level) in smallest_group.iter_mut().zip(&groups) {
            *smallest = level.iter().map(|(_, members)| members.len()).min().unwrap_or(0);
        }
        let mut nested: [[ChildGroups; 4]; 4] = Default::default();
        for child in Level::ALL {
            for parent in Level::ALL {
                if child == parent {
                    continue;
                }
                let mut shared: BTreeMap<u32, BTreeMap<u32, CpuSet>> = BTreeMap::new();
                for (&id, info) in &cpus {
                    shared
                        .entry(parent.id_of(info))
                        .or_default()
                        .entry(child.id_of(info))
                        .or_default()
                        .insert(id);
                }
                nested[child as usize][parent as usize] = shared
                    .into_iter()
                    .map(|(parent_id, children)| (parent_id, children.into_iter().collect()))
                    .collect();
            }
        }
        CpuTopology {
            smallest_group,
            nested,
            by_id,
            numa_mask,
            numa_sizes_descending,
            num_cpus: cpus.len(),
            num_cores,
            num_sockets,
            num_numa_nodes,
            num_uncore_caches,
            cpus,
            groups,
            all,
            empty: CpuSet::new(),
        }
    }

    /// Number of logical CPUs (`NumCPUs`).
    pub fn num_cpus(&self) -> usize {
        self.num_cpus
    }

    /// Number of physical cores (`NumCores`).
    pub fn num_cores(&self) -> usize {
        self.num_cores
    }

    /// Number of sockets (`NumSockets`).
    pub fn num_sockets(&self) -> usize {
        self.num_sockets
    }

    /// Number of NUMA nodes that have CPUs (`NumNUMANodes`).
    pub fn num_numa_nodes(&self) -> usize {
        self.num_numa_nodes
    }

    /// Number of distinct uncore caches (`NumUncoreCache`).
    pub fn num_uncore_caches(&self) -> usize {
        self.num_uncore_caches
    }

    /// `CPUsPerCore`: an integer ratio of machine-wide counts, as the kubelet
    /// computes it (0 on a machine without cores).
    pub fn cpus_per_core(&self) -> usize {
        self.num_cpus.checked_div(self.num_cores).unwrap_or(0)
    }

    /// `CPUsPerSocket` (integer ratio, 0 without sockets).
    pub fn cpus_per_socket(&self) -> usize {
        self.num_cpus.checked_div(self.num_sockets).unwrap_or(0)
    }

    /// `CPUsPerUncore` (integer ratio, 0 without uncore caches).
    pub fn cpus_per_uncore(&self) -> usize {
        self.num_cpus.checked_div(self.num_uncore_caches).unwrap_or(0)
    }

    /// Where `cpu` sits, if the machine has it.
    pub fn cpu(&self, cpu: u32) -> Option<CpuInfo> {
        self.by_id.get(cpu as usize).copied().flatten()
    }

    /// Every logical CPU.
    pub fn all_cpus(&self) -> &CpuSet {
        &self.all
    }

    /// The NUMA nodes that have CPUs.
    pub fn numa_mask(&self) -> NumaMask {
        self.numa_mask
    }

    /// The CPU count of each NUMA node that has CPUs, largest first.
    pub(crate) fn numa_sizes_descending(&self) -> &[u64] {
        &self.numa_sizes_descending
    }

    /// The CPUs of the NUMA nodes in `mask`.
    pub fn cpus_in_numa_nodes(&self, mask: NumaMask) -> CpuSet {
        mask.nodes()
            .fold(CpuSet::new(), |acc, n| acc.union(self.group(Level::Numa, n as u32)))
    }

    /// The sockets the CPUs of the NUMA nodes in `mask` sit on.
    pub fn sockets_in_numa_nodes(&self, mask: NumaMask) -> BTreeSet<u32> {
        self.cpus
            .values()
            .filter(|i| mask.contains(i.numa))
            .map(|i| i.socket)
            .collect()
    }

    /// The sockets of the CPUs of the NUMA nodes `ids` (the kubelet's
    /// `SocketsInNUMANodes`, plain ids: any node, also one past 63 on a
    /// machine wider than masks, `Machine::fits_numa_masks`).
    pub fn sockets_in_numa_ids(&self, ids: &[usize]) -> BTreeSet<u32> {
        self.cpus
            .values()
            .filter(|i| ids.contains(&i.numa))
            .map(|i| i.socket)
            .collect()
    }

    /// The CPUs of `socket`.
    pub fn cpus_in_socket(&self, socket: u32) -> &CpuSet {
        self.group(Level::Socket, socket)
    }

    /// The CPUs of the core `core` (named by its lowest CPU id).
    pub fn cpus_in_core(&self, core: u32) -> &CpuSet {
        self.group(Level::Core, core)
    }

    /// The CPU count of the smallest group at `level` (0 when there is
    /// none).
    pub(crate) fn smallest_group(&self, level: Level) -> usize {
        self.smallest_group[level as usize]
    }

    /// Every group of `level`, ascending by id, with its CPUs.
    pub(crate) fn groups(&self, level: Level) -> &[(u32, CpuSet)] {
        &self.groups[level as usize]
    }

    /// The groups of `child` sharing CPUs with the group `parent_id` of
    /// `parent`, ascending by id, each with the CPUs they share (empty when
    /// there is no such parent group, or `child` is `parent`).
    pub(crate) fn children(&self, child: Level, parent: Level, parent_id: u32) -> &[(u32, CpuSet)] {
        let parents = &self.nested[child as usize][parent as usize];
        match parents.binary_search_by_key(&parent_id, |(id, _)| *id) {
            Ok(index) => &parents[index].1,
            Err(_) => &[],
        }
    }

    /// Every CPU of the group `id` at `level` (empty when there is none).
    pub(crate) fn group(&self, level: Level, id: u32) -> &CpuSet {
        let groups = &self.groups[level as usize];
        match groups.binary_search_by_key(&id, |(group, _)| *group) {
            Ok(index) => &groups[index].1,
            Err(_) => &self.empty,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use topoalign_model::{Cpu, Machine, NumaNode};

    use super::*;

    fn machine(cpus: &[(u32, u32, u32, usize, Option<u32>)], numa_nodes: &[usize]) -> Machine {
        let nodes = numa_nodes
            .iter()
            .map(|&id| NumaNode {
                id,
                memory: 1 << 30,
                hugepages: BTreeMap::new(),
                distances: None,
            })
            .collect();
        let cpus = cpus
            .iter()
            .map(|&(id, core, socket, numa, uncore_cache)| Cpu {
                id,
                core,
                socket,
                numa,
                uncore_cache,
            })
            .collect();
        Machine::new(nodes, cpus, BTreeMap::new()).unwrap()
    }

    #[test]
    fn cores_are_named_by_their_lowest_cpu_and_grouped_per_numa_node() {
        // Intel-style numbering: siblings N and N+4; scenario core ids 10..13.
        let m = machine(
            &[
                (0, 10, 0, 0, None),
                (1, 11, 0, 0, None),
                (2, 12, 1, 1, None),
                (3, 13, 1, 1, None),
                (4, 10, 0, 0, None),
                (5, 11, 0, 0, None),
                (6, 12, 1, 1, None),
                (7, 13, 1, 1, None),
            ],
            &[0, 1, 2],
        );
        let topo = CpuTopology::from_machine(&m);
        assert_eq!(topo.cpu(5).unwrap().core, 1);
        assert_eq!(topo.cpus_in_core(2).to_string(), "2,6");
        assert_eq!(
            (
                topo.num_cpus(),
                topo.num_cores(),
                topo.num_sockets(),
                topo.num_numa_nodes()
            ),
            (8, 4, 2, 2),
            "NUMA node 2 has no CPUs and does not count"
        );
        assert_eq!(topo.cpus_per_core(), 2);
        assert_eq!(topo.cpus_per_socket(), 4);
        // No uncore cache given: the socket stands in for it.
        assert_eq!(topo.num_uncore_caches(), 2);
        assert_eq!(topo.cpu(6).unwrap().uncore_cache, 1);
        assert_eq!(topo.numa_mask(), NumaMask::from_nodes([0, 1]));
        assert_eq!(
            topo.cpus_in_numa_nodes(NumaMask::from_nodes([1, 2])).to_string(),
            "2-3,6-7"
        );
    }

    #[test]
    fn the_same_core_id_on_two_numa_nodes_is_two_cores() {
        let m = machine(&[(0, 0, 0, 0, Some(7)), (1, 0, 0, 1, Some(7))], &[0, 1]);
        let topo = CpuTopology::from_machine(&m);
        assert_eq!(topo.num_cores(), 2);
        assert_eq!(topo.cpus_per_core(), 1);
        assert_eq!(topo.cpu(1).unwrap().core, 1);
        assert_eq!(topo.num_uncore_caches(), 1);
        assert_eq!(topo.cpus_per_uncore(), 2);
    }
}
