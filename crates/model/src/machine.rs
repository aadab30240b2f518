//! [`Machine`]: the hardware a node offers, as discovered (sysfs, hwloc XML)
//! or described (a scenario's `topology:` block).
//!
//! The machine is immutable once built; [`Machine::new`] checks the
//! invariants every consumer relies on (unique ids, CPUs on existing NUMA
//! nodes, NUMA ids that fit a [`NumaMask`](crate::NumaMask)).

use std::collections::{BTreeMap, BTreeSet};

use crate::{CpuSet, MAX_NUMA_NODES, NumaMask};

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
}

/// A machine description that breaks an invariant.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MachineError {
    #[error("the machine has no NUMA nodes")]
    NoNumaNodes,
    #[error("NUMA node id {0} appears twice")]
    DuplicateNumaNode(usize),
    #[error("NUMA node id {id} is too large: at most {max} NUMA nodes (ids 0-{last}) are supported", max = MAX_NUMA_NODES, last = MAX_NUMA_NODES - 1)]
    NumaIdTooLarge { id: usize },
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
            if node.id >= MAX_NUMA_NODES {
                return Err(MachineError::NumaIdTooLarge { id: node.id });
            }
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
        })
    }

    /// NUMA nodes, ascending by id.
    pub fn numa_nodes(&self) -> &[NumaNode] {
        &self.numa_nodes
    }

    /// The NUMA node with `id`.
    pub fn numa_node(&self, id: usize) -> Option<&NumaNode> {
        self.numa_nodes.iter().find(|n| n.id == id)
    }

    /// Every NUMA node id as a mask.
    pub fn numa_mask(&self) -> NumaMask {
        NumaMask::from_nodes(self.numa_nodes.iter().map(|n| n.id))
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
}
