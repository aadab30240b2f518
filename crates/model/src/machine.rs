//! [`Machine`]: the hardware a node offers, as discovered (sysfs, hwloc XML)
//! or described (a scenario's `topology:` block).
//!
//! The machine is immutable once built; [`Machine::new`] checks the
//! invariants every consumer relies on (unique ids, CPUs on existing NUMA
//! nodes, NUMA ids that fit a [`NumaMask`](crate::NumaMask)).
//!
//! NUMA ids of 64 and more (sparse ids, CXL memory nodes; Linux numbers
//! nodes up to 1023) do not fit a mask. [`Machine::with_numa_labels`] takes
//! them for the readers that print through the labels: the machine's ids
//! are then the indices `0..n` in the order of the original ids, and
//! [`Machine::numa_label`] gives an index's original id back. The kubelet
//! is blind to the ids themselves under its `none` topology policy (it
//! orders NUMA nodes by id and builds no mask), so an engine run on the
//! indices decides as the kubelet does there; where the kubelet builds a
//! mask from such an id it crashes, and the engine says so
//! ([`Machine::numa_id_past_masks`]).

use std::collections::{BTreeMap, BTreeSet};

use crate::{CpuSet, MAX_NUMA_NODES, NumaMask};

/// The largest NUMA node id Linux numbers: `MAX_NUMNODES` is
/// `1 << CONFIG_NODES_SHIFT`, and the shift is at most 10.
pub const MAX_NUMA_NODE_ID: usize = 1023;

/// One NUMA node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumaNode {
    pub id: usize,
    /// Total memory in bytes, huge page pools included (cAdvisor `MemTotal`).
    pub memory: u64,
    /// Huge page pools: page size in bytes → total bytes in the pool.
    pub hugepages: BTreeMap<u64, u64>,
    /// The SLIT row: distance to each NUMA node, indexed by NUMA id.
    pub distances: Option<Vec<u64>>,
}

/// One logical CPU (hardware thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cpu {
    pub id: u32,
    /// Machine-wide physical core id; SMT siblings share it.
    pub core: u32,
    pub socket: u32,
    pub numa: usize,
    /// L3 / uncore cache group, when known.
    pub uncore_cache: Option<u32>,
}

/// One device of a device-plugin resource.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub id: String,
    /// NUMA affinity; empty = the device has no topology information.
    pub numa: Vec<usize>,
}

/// A machine: NUMA nodes, logical CPUs and device-plugin devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Machine {
    numa_nodes: Vec<NumaNode>,
    cpus: Vec<Cpu>,
    devices: BTreeMap<String, Vec<Device>>,
    /// A machine read by [`Machine::with_numa_labels`] with NUMA ids past
    /// 63: the original id of each NUMA node, by index. `None` otherwise:
    /// the ids are the machine's own.
    numa_labels: Option<Vec<usize>>,
}

/// A machine description that breaks an invariant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    #[error("the machine has no NUMA nodes")]
    NoNumaNodes,
    #[error("NUMA node id {0} appears twice")]
    DuplicateNumaNode(usize),
    #[error("NUMA node id {id} is too large: at most {max} NUMA nodes (ids 0-{last}) are supported here (a scenario replay takes ids up to {linux})", max = MAX_NUMA_NODES, last = MAX_NUMA_NODES - 1, linux = MAX_NUMA_NODE_ID)]
    NumaIdTooLarge { id: usize },
    #[error("NUMA node id {id} is larger than {max}, the largest Linux numbers", max = MAX_NUMA_NODE_ID)]
    NumaIdPastLinux { id: usize },
    #[error("NUMA node {node}: distances has {got} entries, expected one per NUMA node ({expected})")]
    DistanceRowLength { node: usize, got: usize, expected: usize },
    #[error("CPU id {0} appears twice")]
    DuplicateCpu(u32),
    #[error("CPU id {0} is larger than {max}, the largest a Linux machine can have", max = CpuSet::MAX_CPU_ID)]
    CpuIdTooLarge(u32),
    #[error("CPU {cpu} is on NUMA node {numa}, which does not exist")]
    CpuOnUnknownNumaNode { cpu: u32, numa: usize },
    #[error("device {resource} {id:?} is attached to NUMA node {numa}, which does not exist")]
    DeviceOnUnknownNumaNode { resource: String, id: String, numa: usize },
    #[error("device {resource} {id:?} appears twice")]
    DuplicateDevice { resource: String, id: String },
}

impl Machine {
    /// Builds a machine, checking its invariants. NUMA nodes and CPUs are
    /// kept sorted by id.
    ///
    /// # Errors
    /// [`MachineError`] for the first broken invariant.
    pub fn new(
        numa_nodes: Vec<NumaNode>,
        cpus: Vec<Cpu>,
        devices: BTreeMap<String, Vec<Device>>,
    ) -> Result<Machine, MachineError> {
        if let Some(node) = numa_nodes
            .iter()
            .filter(|n| n.id >= MAX_NUMA_NODES)
            .min_by_key(|n| n.id)
        {
            return Err(MachineError::NumaIdTooLarge { id: node.id });
        }
        Machine::checked(numa_nodes, cpus, devices)
    }

    /// [`Machine::new`] without the bound on NUMA ids (the ids are checked
    /// by the caller).
    fn checked(
        mut numa_nodes: Vec<NumaNode>,
        mut cpus: Vec<Cpu>,
        devices: BTreeMap<String, Vec<Device>>,
    ) -> Result<Machine, MachineError> {
        if numa_nodes.is_empty() {
            return Err(MachineError::NoNumaNodes);
        }
        numa_nodes.sort_by_key(|n| n.id);
        let mut ids = BTreeSet::new();
        for node in &numa_nodes {
            if !ids.insert(node.id) {
                return Err(MachineError::DuplicateNumaNode(node.id));
            }
        }
        let max_id = numa_nodes.last().map_or(0, |n| n.id);
        for node in &numa_nodes {
            if let Some(row) = &node.distances {
                // Rows are indexed by NUMA id, so they must reach the largest id.
                if row.len() != max_id + 1 {
                    return Err(MachineError::DistanceRowLength {
                        node: node.id,
                        got: row.len(),
                        expected: max_id + 1,
                    });
                }
            }
        }
        if let Some(cpu) = cpus.iter().find(|c| c.id > CpuSet::MAX_CPU_ID) {
            return Err(MachineError::CpuIdTooLarge(cpu.id));
        }
        cpus.sort_by_key(|c| c.id);
        for pair in cpus.windows(2) {
            if pair[0].id == pair[1].id {
                return Err(MachineError::DuplicateCpu(pair[0].id));
            }
        }
        for cpu in &cpus {
            if !ids.contains(&cpu.numa) {
                return Err(MachineError::CpuOnUnknownNumaNode {
                    cpu: cpu.id,
                    numa: cpu.numa,
                });
            }
        }
        for (resource, list) in &devices {
            let mut seen = BTreeSet::new();
            for device in list {
                if !seen.insert(&device.id) {
                    return Err(MachineError::DuplicateDevice {
                        resource: resource.clone(),
                        id: device.id.clone(),
                    });
                }
                if let Some(&numa) = device.numa.iter().find(|n| !ids.contains(n)) {
                    return Err(MachineError::DeviceOnUnknownNumaNode {
                        resource: resource.clone(),
                        id: device.id.clone(),
                        numa,
                    });
                }
            }
        }
        Ok(Machine {
            numa_nodes,
            cpus,
            devices,
            numa_labels: None,
        })
    }

    /// Builds a machine as [`Machine::new`] does, taking NUMA ids up to
    /// [`MAX_NUMA_NODE_ID`] (so up to 1,024 nodes). With every
    /// id below 64 it is [`Machine::new`]'s machine. Otherwise the nodes
    /// are numbered `0..n` in the order of their ids — `NumaNode::id`,
    /// `Cpu::numa`, `Device::numa` and the distance rows all use these
    /// indices — and [`Machine::numa_label`] maps an index back to the
    /// original id. Only a reader that prints NUMA ids through
    /// [`Machine::numa_label`] may use it. Errors name the original ids.
    ///
    /// Distance rows are indexed by original id (one entry per id from 0
    /// to the largest) or list one distance per node in id order.
    ///
    /// # Errors
    /// [`MachineError`] for the first broken invariant.
    pub fn with_numa_labels(
        mut numa_nodes: Vec<NumaNode>,
        mut cpus: Vec<Cpu>,
        mut devices: BTreeMap<String, Vec<Device>>,
    ) -> Result<Machine, MachineError> {
        if numa_nodes.iter().all(|n| n.id < MAX_NUMA_NODES) {
            return Machine::new(numa_nodes, cpus, devices);
        }
        numa_nodes.sort_by_key(|n| n.id);
        if let Some(node) = numa_nodes.iter().find(|n| n.id > MAX_NUMA_NODE_ID) {
            return Err(MachineError::NumaIdPastLinux { id: node.id });
        }
        if let Some(pair) = numa_nodes.windows(2).find(|pair| pair[0].id == pair[1].id) {
            return Err(MachineError::DuplicateNumaNode(pair[0].id));
        }
        let labels: Vec<usize> = numa_nodes.iter().map(|n| n.id).collect();
        let index_of = |label: usize| labels.binary_search(&label).ok();
        let max_label = labels.last().copied().unwrap_or(0);
        for node in &mut numa_nodes {
            if let Some(row) = &node.distances {
                let dense: Vec<u64> = if row.len() == max_label + 1 {
                    labels.iter().map(|&label| row[label]).collect()
                } else if row.len() == labels.len() {
                    row.clone()
                } else {
                    return Err(MachineError::DistanceRowLength {
                        node: node.id,
                        got: row.len(),
                        expected: max_label + 1,
                    });
                };
                node.distances = Some(dense);
            }
        }
        for cpu in &mut cpus {
            cpu.numa = index_of(cpu.numa).ok_or(MachineError::CpuOnUnknownNumaNode {
                cpu: cpu.id,
                numa: cpu.numa,
            })?;
        }
        for (resource, list) in &mut devices {
            for device in list {
                for numa in &mut device.numa {
                    *numa = index_of(*numa).ok_or_else(|| MachineError::DeviceOnUnknownNumaNode {
                        resource: resource.clone(),
                        id: device.id.clone(),
                        numa: *numa,
                    })?;
                }
            }
        }
        for (index, node) in numa_nodes.iter_mut().enumerate() {
            node.id = index;
        }
        let mut machine = Machine::checked(numa_nodes, cpus, devices)?;
        machine.numa_labels = Some(labels);
        Ok(machine)
    }

    /// The original id of NUMA node `id` (see [`Machine::with_numa_labels`]);
    /// `id` itself on every other machine.
    pub fn numa_label(&self, id: usize) -> usize {
        self.numa_labels
            .as_ref()
            .and_then(|labels| labels.get(id).copied())
            .unwrap_or(id)
    }

    /// The index of the NUMA node whose original id is `label`, if there
    /// is one; on a machine without labels, `label` when such a node exists.
    pub fn numa_id_of_label(&self, label: usize) -> Option<usize> {
        match &self.numa_labels {
            Some(labels) => labels.binary_search(&label).ok(),
            None => self.numa_node(label).map(|n| n.id),
        }
    }

    /// The original NUMA ids by index, when the machine was numbered anew
    /// (an id was past 63).
    pub fn numa_labels(&self) -> Option<&[usize]> {
        self.numa_labels.as_deref()
    }

    /// The smallest NUMA id of 64 or more, if the machine has one: where
    /// the kubelet's 64-bit NUMA masks (`bitmask.NewBitMask`) fail.
    pub fn numa_id_past_masks(&self) -> Option<usize> {
        self.numa_labels()?
            .iter()
            .copied()
            .find(|&label| label >= MAX_NUMA_NODES)
    }

    /// NUMA nodes, ascending by id.
    pub fn numa_nodes(&self) -> &[NumaNode] {
        &self.numa_nodes
    }

    /// The NUMA node with `id`.
    pub fn numa_node(&self, id: usize) -> Option<&NumaNode> {
        self.numa_nodes.iter().find(|n| n.id == id)
    }

    /// Whether every NUMA node fits a [`NumaMask`]: at most 64 nodes.
    /// A wider machine (only [`Machine::with_numa_labels`] builds one) has
    /// an id past 63, so the kubelet builds no mask on it without crashing
    /// ([`Machine::numa_id_past_masks`]): nothing that merges or compares
    /// NUMA masks may run on it.
    pub fn fits_numa_masks(&self) -> bool {
        self.numa_nodes.len() <= MAX_NUMA_NODES
    }

    /// Every NUMA node id as a mask; on a machine that does not
    /// [fit masks](Machine::fits_numa_masks), the first 64 (the managers
    /// keep it for hints, which such a machine never reaches).
    pub fn numa_mask(&self) -> NumaMask {
        NumaMask::from_maskable_nodes(self.numa_nodes.iter().map(|n| n.id))
    }

    /// Logical CPUs, ascending by id.
    pub fn cpus(&self) -> &[Cpu] {
        &self.cpus
    }

    /// The CPU with `id`.
    pub fn cpu(&self, id: u32) -> Option<&Cpu> {
        self.cpus
            .binary_search_by_key(&id, |c| c.id)
            .ok()
            .map(|i| &self.cpus[i])
    }

    /// All logical CPU ids.
    pub fn cpu_set(&self) -> CpuSet {
        self.cpus.iter().map(|c| c.id).collect()
    }

    /// The logical CPUs of NUMA node `node` (empty for a node without CPUs
    /// or an unknown id).
    pub fn numa_cpus(&self, node: usize) -> CpuSet {
        self.cpus.iter().filter(|c| c.numa == node).map(|c| c.id).collect()
    }

    /// Device-plugin resources and their devices.
    pub fn devices(&self) -> &BTreeMap<String, Vec<Device>> {
        &self.devices
    }

    /// Every huge page size (bytes) any NUMA node has a pool of.
    pub fn hugepage_sizes(&self) -> BTreeSet<u64> {
        self.numa_nodes
            .iter()
            .flat_map(|n| n.hugepages.keys().copied())
            .collect()
    }

    /// Total memory of all NUMA nodes, huge pages included.
    pub fn total_memory(&self) -> u64 {
        self.numa_nodes.iter().map(|n| n.memory).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpus_must_sit_on_known_nodes() {
        let node = NumaNode {
            id: 0,
            memory: 1 << 30,
            hugepages: BTreeMap::new(),
            distances: None,
        };
        let cpu = Cpu {
            id: 0,
            core: 0,
            socket: 0,
            numa: 1,
            uncore_cache: None,
        };
        assert_eq!(
            Machine::new(vec![node], vec![cpu], BTreeMap::new())
                .unwrap_err()
                .to_string(),
            "CPU 0 is on NUMA node 1, which does not exist"
        );
    }

    fn node(id: usize, distances: Option<Vec<u64>>) -> NumaNode {
        NumaNode {
            id,
            memory: 1 << 30,
            hugepages: BTreeMap::new(),
            distances,
        }
    }

    fn cpu(id: u32, numa: usize) -> Cpu {
        Cpu {
            id,
            core: id,
            socket: 0,
            numa,
            uncore_cache: None,
        }
    }

    #[test]
    fn numa_ids_past_63_are_numbered_anew_and_keep_their_labels() {
        let mut row_64 = vec![0; 65];
        row_64[0] = 20;
        row_64[64] = 10;
        let devices = BTreeMap::from([(
            "example.com/gpu".to_owned(),
            vec![Device {
                id: "gpu0".into(),
                numa: vec![64],
            }],
        )]);
        let machine = Machine::with_numa_labels(
            vec![node(64, Some(row_64)), node(0, Some(vec![10, 20]))],
            vec![cpu(1, 64), cpu(0, 0)],
            devices,
        )
        .unwrap();
        let ids: Vec<usize> = machine.numa_nodes().iter().map(|n| n.id).collect();
        assert_eq!(ids, [0, 1]);
        assert_eq!(machine.numa_labels(), Some(&[0, 64][..]));
        assert_eq!((machine.numa_label(0), machine.numa_label(1)), (0, 64));
        assert_eq!(machine.numa_id_of_label(64), Some(1));
        assert_eq!(machine.numa_id_of_label(1), None);
        assert_eq!(machine.numa_id_past_masks(), Some(64));
        assert_eq!(machine.cpu(1).unwrap().numa, 1);
        assert_eq!(machine.devices()["example.com/gpu"][0].numa, [1]);
        // Rows indexed by id, or one entry per node in id order.
        assert_eq!(machine.numa_nodes()[0].distances, Some(vec![10, 20]));
        assert_eq!(machine.numa_nodes()[1].distances, Some(vec![20, 10]));
        assert_eq!(machine.numa_mask(), NumaMask::from_nodes([0, 1]));
    }

    #[test]
    fn ids_below_64_are_the_machine_s_own() {
        let labelled = Machine::with_numa_labels(vec![node(0, None), node(2, None)], vec![cpu(0, 2)], BTreeMap::new());
        let plain = Machine::new(vec![node(0, None), node(2, None)], vec![cpu(0, 2)], BTreeMap::new());
        assert_eq!(labelled, plain);
        let machine = labelled.unwrap();
        assert_eq!(machine.numa_labels(), None);
        assert_eq!(machine.numa_label(2), 2);
        assert_eq!(machine.numa_id_of_label(2), Some(2));
        assert_eq!(machine.numa_id_past_masks(), None);
    }

    #[test]
    fn labelled_machines_name_the_original_ids_in_errors() {
        let error = |nodes: Vec<NumaNode>, cpus: Vec<Cpu>| {
            Machine::with_numa_labels(nodes, cpus, BTreeMap::new())
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            error(vec![node(0, None), node(64, None)], vec![cpu(0, 65)]),
            "CPU 0 is on NUMA node 65, which does not exist"
        );
        assert_eq!(
            error(vec![node(0, None), node(1024, None)], vec![]),
            "NUMA node id 1024 is larger than 1023, the largest Linux numbers"
        );
        assert_eq!(
            error(vec![node(64, None), node(64, None)], vec![]),
            "NUMA node id 64 appears twice"
        );
        assert_eq!(
            error(vec![node(0, None), node(64, Some(vec![10, 20, 30]))], vec![]),
            "NUMA node 64: distances has 3 entries, expected one per NUMA node (65)"
        );
        // The plain constructor still refuses them.
        assert!(
            Machine::new(vec![node(64, None)], vec![], BTreeMap::new())
                .unwrap_err()
                .to_string()
                .starts_with("NUMA node id 64 is too large")
        );
    }
}
