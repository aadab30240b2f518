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
    /// The NUMA nodes' own ids, in increasing order (node `i` of this
    /// builder is the one of the `i`-th id); `None`: `0..numa_nodes`.
    pub numa_ids: Option<Vec<usize>>,
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
            numa_ids: None,
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

    /// NUMA nodes with the ids `ids` (any order; Linux numbers them up to
    /// [`MAX_NUMA_NODE_ID`](crate::MAX_NUMA_NODE_ID)), as many as there
    /// are ids — the count given to [`UniformMachine::new`] is replaced.
    /// The machine is built by [`Machine::with_numa_labels`]: with an id
    /// past 63 its nodes are numbered `0..n` in id order and keep the ids
    /// as labels ([`Machine::numa_label`]), otherwise the ids are its own.
    ///
    /// Everything else this builder takes names NUMA nodes by their place
    /// in id order (`0..n`): [`UniformMachine::device`],
    /// [`UniformMachine::memory_on`], [`UniformMachine::hugepages_on`] and
    /// the rows of [`UniformMachine::distances`] (whose entries are as
    /// [`Machine::with_numa_labels`] reads them: one per id up to the
    /// largest, or with an id past 63 one per node). Cores are laid out
    /// node by node in id order; [`UniformMachine::remote_distance`]'s
    /// rows have one entry per id up to the largest (the remote distance
    /// where no node has the id).
    pub fn numa_ids(self, ids: impl IntoIterator<Item = usize>) -> Self {
        let mut ids: Vec<usize> = ids.into_iter().collect();
        ids.sort_unstable();
        UniformMachine {
            numa_nodes: ids.len(),
            numa_ids: Some(ids),
            ..self
        }
    }

    /// The id of the builder's NUMA node `index` (its place in id order).
    fn numa_id(&self, index: usize) -> usize {
        match &self.numa_ids {
            Some(ids) => ids[index],
            None => index,
        }
    }

    /// The machine.
    ///
    /// # Errors
    /// [`MachineError`] where the shape makes no machine (no NUMA nodes,
    /// more than the engine supports; with [`UniformMachine::numa_ids`],
    /// an id past [`MAX_NUMA_NODE_ID`](crate::MAX_NUMA_NODE_ID) or given
    /// twice, a placed device on a node past the last).
    pub fn build(&self) -> Result<Machine, MachineError> {
        let numa_per_socket = self.numa_nodes.div_ceil(self.sockets.max(1)).max(1);
        // Distances by id: one entry per id up to the largest.
        let row_length = (0..self.numa_nodes).map(|i| self.numa_id(i) + 1).max().unwrap_or(0);
        let numa_nodes = (0..self.numa_nodes)
            .map(|id| NumaNode {
                id: self.numa_id(id),
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
                        (0..row_length)
                            .map(|other| if other == self.numa_id(id) { 10 } else { remote })
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
                    numa: self.numa_id(numa),
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
                    numa: vec![self.numa_id(n / per_numa)],
                }));
        }
        for (resource, device) in &self.placed_devices {
            let mut device = device.clone();
            if self.numa_ids.is_some() {
                if let Some(&numa) = device.numa.iter().find(|&&n| n >= self.numa_nodes) {
                    return Err(MachineError::DeviceOnUnknownNumaNode {
                        resource: resource.clone(),
                        id: device.id,
                        numa,
                    });
                }
                device.numa = device.numa.iter().map(|&n| self.numa_id(n)).collect();
            }
            devices.entry(resource.clone()).or_default().push(device);
        }
        match self.numa_ids {
            Some(_) => Machine::with_numa_labels(numa_nodes, cpus, devices),
            None => Machine::new(numa_nodes, cpus, devices),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::UniformMachine;
    use crate::CpuSet;
    use crate::machine::{Cpu, Device, Machine, MachineError, NumaNode};

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

    #[test]
    fn numa_ids_past_63_label_the_nodes_numbered_in_id_order() {
        let machine = UniformMachine::new(2, 2)
            .remote_distance(21)
            .devices("example.com/gpu", "gpu", 1)
            .device("example.com/nic", "nic0", &[1])
            .memory_on(1, 2 << 30)
            .numa_ids([64, 0])
            .build()
            .expect("a machine");
        // The same machine written out by hand, with the ids themselves.
        let node = |id, memory, distances: &[u64]| NumaNode {
            id,
            memory,
            hugepages: BTreeMap::new(),
            distances: Some(distances.to_vec()),
        };
        let cpu = |id: u32, numa| Cpu {
            id,
            core: id,
            socket: 0,
            numa,
            uncore_cache: None,
        };
        let device = |id: &str, numa| Device {
            id: id.to_owned(),
            numa: vec![numa],
        };
        let by_hand = Machine::with_numa_labels(
            vec![node(0, 1 << 30, &[10, 21]), node(64, 2 << 30, &[21, 10])],
            vec![cpu(0, 0), cpu(1, 0), cpu(2, 64), cpu(3, 64)],
            BTreeMap::from([
                (
                    "example.com/gpu".to_owned(),
                    vec![device("gpu0", 0), device("gpu1", 64)],
                ),
                ("example.com/nic".to_owned(), vec![device("nic0", 64)]),
            ]),
        )
        .expect("a machine");
        assert_eq!(machine, by_hand);
        assert_eq!(machine.numa_labels(), Some(&[0, 64][..]));
        assert_eq!((machine.numa_label(1), machine.numa_id_of_label(64)), (64, Some(1)));
        let nodes = machine.numa_nodes();
        assert_eq!(nodes.iter().map(|n| n.id).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(nodes[1].distances.as_deref(), Some(&[21, 10][..]));
        assert_eq!(nodes[1].memory, 2 << 30);
        assert_eq!(machine.numa_cpus(1), CpuSet::parse("2-3").expect("a CPU list"));
        let gpus: Vec<(&str, &[usize])> = machine.devices()["example.com/gpu"]
            .iter()
            .map(|d| (d.id.as_str(), &d.numa[..]))
            .collect();
        assert_eq!(gpus, [("gpu0", &[0][..]), ("gpu1", &[1])]);
        assert_eq!(machine.devices()["example.com/nic"][0].numa, [1]);
        // Distance rows given one per node, in id order.
        let rows = UniformMachine::new(2, 1)
            .distances(vec![vec![10, 32], vec![32, 10]])
            .numa_ids([0, 64])
            .build()
            .expect("a machine");
        assert_eq!(rows.numa_nodes()[1].distances.as_deref(), Some(&[32, 10][..]));
    }

    #[test]
    fn numa_ids_below_64_are_the_machines_own() {
        let plain = UniformMachine::new(2, 2)
            .remote_distance(21)
            .build()
            .expect("a machine");
        let same = UniformMachine::new(2, 2).remote_distance(21).numa_ids([0, 1]).build();
        assert_eq!(same.as_ref(), Ok(&plain));
        // Sparse ids below 64 are kept, distance rows indexed by id.
        let sparse = UniformMachine::new(2, 1)
            .remote_distance(21)
            .device("example.com/nic", "nic0", &[1])
            .numa_ids([0, 5])
            .build()
            .expect("a machine");
        assert_eq!(sparse.numa_labels(), None);
        assert_eq!(sparse.numa_nodes().iter().map(|n| n.id).collect::<Vec<_>>(), [0, 5]);
        assert_eq!(
            sparse.numa_nodes()[1].distances.as_deref(),
            Some(&[21, 21, 21, 21, 21, 10][..])
        );
        assert_eq!(sparse.cpus()[1].numa, 5);
        assert_eq!(sparse.devices()["example.com/nic"][0].numa, [5]);
    }

    #[test]
    fn more_than_64_nodes_with_ids_up_to_1023() {
        let ids: Vec<usize> = (0..72).map(|n| n * 14 + 15).collect();
        let machine = UniformMachine::new(1, 2)
            .sockets(2)
            .remote_distance(32)
            .device("example.com/cxl", "mem0", &[71])
            .numa_ids(ids.iter().rev().copied())
            .build()
            .expect("a machine");
        assert_eq!(machine.numa_nodes().len(), 72);
        assert_eq!(machine.numa_labels(), Some(&ids[..]));
        assert_eq!(machine.numa_label(71), 1009);
        let row = machine.numa_nodes()[70].distances.clone().expect("distances");
        assert_eq!((row.len(), row[70], row[71]), (72, 10, 32));
        // Cores node by node in id order; the second half on socket 1.
        let cpu = &machine.cpus()[143];
        assert_eq!((cpu.core, cpu.numa, cpu.socket), (143, 71, 1));
        assert_eq!(machine.devices()["example.com/cxl"][0].numa, [71]);

        let every: Vec<usize> = (0..=crate::MAX_NUMA_NODE_ID).collect();
        let all = UniformMachine::new(1, 1)
            .numa_ids(every.clone())
            .build()
            .expect("a machine");
        assert_eq!(all.numa_nodes().len(), 1024);
        assert_eq!(all.numa_labels(), Some(&every[..]));
        assert_eq!(all.cpus()[1023].numa, 1023);
    }

    #[test]
    fn numa_ids_the_machine_cannot_have_are_errors() {
        let past = UniformMachine::new(1, 1).numa_ids([0, 1024]).build();
        assert_eq!(past, Err(MachineError::NumaIdPastLinux { id: 1024 }));
        let twice = UniformMachine::new(1, 1).numa_ids([0, 64, 64]).build();
        assert_eq!(twice, Err(MachineError::DuplicateNumaNode(64)));
        let past_the_last = UniformMachine::new(1, 1)
            .device("example.com/nic", "nic0", &[2])
            .numa_ids([0, 64])
            .build();
        assert_eq!(
            past_the_last,
            Err(MachineError::DeviceOnUnknownNumaNode {
                resource: "example.com/nic".to_owned(),
                id: "nic0".to_owned(),
                numa: 2
            })
        );
    }
}
