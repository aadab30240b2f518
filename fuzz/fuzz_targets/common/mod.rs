//! What several targets share: a small machine to start nodes on.

use std::collections::BTreeMap;

use topoalign_model::{Cpu, Machine, NumaNode};

/// 2 NUMA nodes (one socket each) × 2 cores × 2 threads, 4 GiB and 64 MiB
/// of 2 MiB huge pages each.
pub fn machine() -> Machine {
    let numa_nodes = (0..2)
        .map(|id| NumaNode {
            id,
            memory: 4 << 30,
            hugepages: BTreeMap::from([(2 << 20, 64 << 20)]),
            distances: Some(if id == 0 { vec![10, 20] } else { vec![20, 10] }),
        })
        .collect();
    // Core c has CPUs c and c + 4; cores 0–1 on NUMA 0, 2–3 on NUMA 1.
    let cpus = (0..8)
        .map(|id| Cpu {
            id,
            core: id % 4,
            socket: id % 4 / 2,
            numa: (id % 4 / 2) as usize,
            uncore_cache: None,
        })
        .collect();
    Machine::new(numa_nodes, cpus, BTreeMap::new()).expect("a valid machine")
}
