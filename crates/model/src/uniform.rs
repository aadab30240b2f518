//! Machines described by their shape — so many NUMA nodes of so many cores
//! of so many threads — as tests, benchmarks and examples need them, built
//! in one place rather than by hand in each.

use std::collections::BTreeMap;

use crate::machine::{Cpu, Device, Machine, MachineError, NumaNode};

/// A machine whose NUMA nodes are all alike.
///
/// CPUs are numbered as Linux numbers them on x86: the first thread of
/// every core, then every core's second thread, so on a 2-thread machine
/// CPU `n` and CPU `n + cores` are siblings. Cores are numbered across the
/// machine and laid out NUMA node by NUMA node; NUMA nodes are split
/// evenly over the sockets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UniformMachine {
    pub numa_nodes: usize,
    pub cores_per_numa: u32,
    pub threads_per_core: u32,
    /// How many sockets share the NUMA nodes (1: all on socket 0).
    pub sockets: usize,
    /// Bytes of memory on each NUMA node.
    pub memory_per_numa: u64,
    /// The distance between two NUMA nodes (10 to itself); `None`: the
    /// machine reports no distances.
    pub remote_distance: Option<u64>,
    /// Device-plugin devices: `(resource, id prefix, devices per NUMA
    /// node)`; ids are the prefix and a number counted across the machine.
    pub devices: Vec<(String, String, usize)>,
    /// Huge page pools on every NUMA node: page size to bytes.
    pub hugepages_per_numa: BTreeMap<u64, u64>,
    /// Devices placed one by one: `(resource, device)`, after
    /// [`UniformMachine::devices`]'s.
    pub placed_devices: Vec<(String, Device)>,
    /// The distance matrix, a row per NUMA node; `None`: from
    /// [`UniformMachine::remote_distance`].
    pub distance_rows: Option<Vec<Vec<u64>>>,
    /// NUMA nodes whose memory differs from
    /// [`UniformMachine::memory_per_numa`]: node to bytes.
    pub memory_on: BTreeMap<usize, u64>,
    /// Huge page pools of single NUMA nodes, beside
    /// [`UniformMachine::hugepages_per_numa`]'s: node to page size to bytes.
    pub hugepages_on: BTreeMap<usize, BTreeMap<u64, u64>>,
}

impl UniformMachine {
    /// `numa_nodes` NUMA nodes of `cores_per_numa` single-thread cores and
    /// 1Gi each, on one socket, without distances or devices.
    pub fn new(numa_nodes: usize, cores_per_numa: u32) -> Self {
        UniformMachine {
            numa_nodes,
            cores_per_numa,
            threads_per_core: 1,
            sockets: 1,
            memory_per_numa: 1 << 30,
            remote_distance: None,
            devices: Vec::new(),
            hugepages_per_numa: BTreeMap::new(),
            placed_devices: Vec::new(),
            distance_rows: None,
            memory_on: BTreeMap::new(),
            hugepages_on: BTreeMap::new(),
        }
    }

    pub fn threads_per_core(self, threads_per_core: u32) -> Self {
        UniformMachine {
            threads_per_core,
            ..self
        }
    }

    pub fn sockets(self, sockets: usize) -> Self {
        UniformMachine { sockets, ..self }
    }

    pub fn memory_per_numa(self, memory_per_numa: u64) -> Self {
        UniformMachine {
            memory_per_numa,
            ..self
        }
    }

    pub fn remote_distance(self, distance: u64) -> Self {
        UniformMachine {
            remote_distance: Some(distance),
            ..self
        }
    }

    /// Adds `per_numa` devices of `resource` on every NUMA node, with ids
    /// `id_prefix0`, `id_prefix1`, … counted across the machine.
    pub fn devices(mut self, resource: &str, id_prefix: &str, per_numa: usize) -> Self {
        self.devices.push((resource.to_owned(), id_prefix.to_owned(), per_numa));
        self
    }

    /// A pool of `bytes` of huge pages of `page_size` on every NUMA node.
    pub fn hugepages_per_numa(mut self, page_size: u64, bytes: u64) -> Self {
        self.hugepages_per_numa.insert(page_size, bytes);
        self
    }

    /// One device of `resource` with affinity to the NUMA nodes `numa`
    /// (none: a device without affinity).
    pub fn device(mut self, resource: &str, id: &str, numa: &[usize]) -> Self {
        self.placed_devices.push((
            resource.to_owned(),
            Device {
                id: id.to_owned(),
                numa: numa.to_vec(),
            },
        ));
        self
    }

    /// The distances between NUMA nodes, a row per node (any shape; the
    /// machine checks it).
    pub fn distances(self, rows: Vec<Vec<u64>>) -> Self {
        UniformMachine {
            distance_rows: Some(rows),
            ..self
        }
    }

    /// `bytes` of memory on NUMA node `node` alone.
    pub fn memory_on(mut self, node: usize, bytes: u64) -> Self {
        self.memory_on.insert(node, bytes);
        self
    }

    /// A pool of `bytes` of huge pages of `page_size` on NUMA node `node`
    /// alone.
    pub fn hugepages_on(mut self, node: usize, page_size: u64, bytes: u64) -> Self {
        self.hugepages_on.entry(node).or_default().insert(page_size, bytes);
        self
    }

    /// The machine.
    ///
    /// # Errors
    /// [`MachineError`] where the shape makes no machine (no NUMA nodes,
    /// more than the engine supports).
    pub fn build(&self) -> Result<Machine, MachineError> {
        let numa_per_socket = self.numa_nodes.div_ceil(self.sockets.max(1)).max(1);
        let numa_nodes = (0..self.numa_nodes)
            .map(|id| NumaNode {
                id,
                memory: self.memory_on.get(&id).copied().unwrap_or(self.memory_per_numa),
                hugepages: self
                    .hugepages_per_numa
                    .iter()
                    .chain(self.hugepages_on.get(&id).into_iter().flatten())
                    .map(|(&size, &bytes)| (size, bytes))
                    .collect(),
                distances: match &self.distance_rows {
                    Some(rows) => rows.get(id).cloned(),
                    None => self.remote_distance.map(|remote| {
                        (0..self.numa_nodes)
                            .map(|other| if other == id { 10 } else { remote })
                            .collect()
                    }),
                },
            })
            .collect();
        let cores = self.numa_nodes as u32 * self.cores_per_numa;
        let cpus = (0..cores * self.threads_per_core)
            .map(|id| {
                let core = id % cores;
                let numa = (core / self.cores_per_numa.max(1)) as usize;
                Cpu {
                    id,
                    core,
                    socket: (numa / numa_per_socket) as u32,
                    numa,
                    uncore_cache: None,
                }
            })
            .collect();
        let mut devices: BTreeMap<String, Vec<Device>> = BTreeMap::new();
        for (resource, prefix, per_numa) in &self.devices {
            devices
                .entry(resource.clone())
                .or_default()
                .extend((0..self.numa_nodes * per_numa).map(|n| Device {
                    id: format!("{prefix}{n}"),
                    numa: vec![n / per_numa],
                }));
        }
        for (resource, device) in &self.placed_devices {
            devices.entry(resource.clone()).or_default().push(device.clone());
        }
        Machine::new(numa_nodes, cpus, devices)
    }
}

#[cfg(test)]
mod tests {
    use super::UniformMachine;
    use crate::CpuSet;

    #[test]
    fn siblings_are_numbered_as_linux_numbers_them() {
        let machine = UniformMachine::new(2, 4)
            .threads_per_core(2)
            .sockets(2)
            .build()
            .expect("a machine");
        assert_eq!(machine.cpus().len(), 16);
        let cpu = |id: u32| machine.cpus().iter().find(|c| c.id == id).expect("the CPU");
        // CPU 1 and CPU 9 are the two threads of core 1, on NUMA node 0.
        assert_eq!((cpu(1).core, cpu(9).core), (1, 1));
        assert_eq!((cpu(1).numa, cpu(9).numa), (0, 0));
        // Core 4 is NUMA node 1's first core, on the second socket.
        assert_eq!((cpu(4).core, cpu(4).numa, cpu(4).socket), (4, 1, 1));
        assert_eq!(machine.numa_cpus(1), CpuSet::parse("4-7,12-15").expect("a CPU list"));
    }

    #[test]
    fn distances_memory_and_devices_are_per_numa_node() {
        let machine = UniformMachine::new(3, 1)
            .memory_per_numa(4 << 30)
            .remote_distance(21)
            .devices("nvidia.com/gpu", "gpu", 2)
            .build()
            .expect("a machine");
        let nodes = machine.numa_nodes();
        assert_eq!(nodes[1].distances.as_deref(), Some(&[21, 10, 21][..]));
        assert!(nodes.iter().all(|n| n.memory == 4 << 30));
        let gpus = &machine.devices()["nvidia.com/gpu"];
        let placed: Vec<(&str, &[usize])> = gpus.iter().map(|d| (d.id.as_str(), &d.numa[..])).collect();
        assert_eq!(
            placed,
            [
                ("gpu0", &[0][..]),
                ("gpu1", &[0]),
                ("gpu2", &[1]),
                ("gpu3", &[1]),
                ("gpu4", &[2]),
                ("gpu5", &[2])
            ]
        );
    }

    #[test]
    fn huge_pages_placed_devices_and_a_distance_matrix() {
        let machine = UniformMachine::new(2, 2)
            .hugepages_per_numa(1 << 30, 2 << 30)
            .device("example.com/nic", "nic0", &[1])
            .device("example.com/nic", "floating", &[])
            .distances(vec![vec![10, 32], vec![32, 10]])
            .build()
            .expect("a machine");
        let nodes = machine.numa_nodes();
        assert!(nodes.iter().all(|n| n.hugepages == [(1 << 30, 2 << 30)].into()));
        assert_eq!(nodes[0].distances.as_deref(), Some(&[10, 32][..]));
        let nics: Vec<(&str, &[usize])> = machine.devices()["example.com/nic"]
            .iter()
            .map(|d| (d.id.as_str(), &d.numa[..]))
            .collect();
        assert_eq!(nics, [("nic0", &[1][..]), ("floating", &[])]);
    }

    #[test]
    fn single_nodes_can_differ_in_memory_and_huge_pages() {
        let machine = UniformMachine::new(3, 0)
            .memory_per_numa(8 << 30)
            .hugepages_per_numa(2 << 20, 1 << 30)
            .memory_on(1, 0)
            .hugepages_on(2, 1 << 30, 2 << 30)
            .hugepages_on(2, 2 << 20, 0)
            .build()
            .expect("a machine");
        let nodes = machine.numa_nodes();
        let memory: Vec<u64> = nodes.iter().map(|n| n.memory).collect();
        assert_eq!(memory, [8 << 30, 0, 8 << 30]);
        assert_eq!(nodes[0].hugepages, [(2 << 20, 1 << 30)].into());
        assert_eq!(nodes[2].hugepages, [(2 << 20, 0), (1 << 30, 2 << 30)].into());
    }

    #[test]
    fn a_shape_without_numa_nodes_is_no_machine() {
        assert!(UniformMachine::new(0, 4).build().is_err());
    }
}
