//! Random machines: 1–16 NUMA nodes in 1–4 sockets, SMT or not, hybrid
//! cores (SMT performance cores beside single-thread efficiency cores),
//! offline CPUs (a machine where some ids are missing, some cores with one
//! thread left), uncore (L3) cache groups, SLIT distances, huge page pools
//! and device-plugin devices with and without NUMA affinity. The wide
//! profile's machines have 65–128 NUMA nodes, numbered as Linux may number
//! them (ids up to 1023): densely, sparsely, or with a block of CPU-less
//! nodes (CXL-like memory expanders with high ids, GPU-memory-like nodes
//! after the CPU nodes).

use std::collections::BTreeMap;

use serde_json::Value;
use topoalign_scenario::{CpuSpec, DeviceSpec, NumaNodeSpec, TopologySpec};

use super::Profile;
use crate::rng::Rng;

/// What the rest of the generator needs to know about the machine.
#[derive(Clone, Debug)]
pub struct MachineFacts {
    pub numa: usize,
    /// The scenario's id of each NUMA node, in id order (`0..numa` but on
    /// the wide profile's machines). Every other per-node list here is
    /// indexed by the node's place in this one.
    pub numa_ids: Vec<usize>,
    /// Online CPU ids per NUMA node, ascending.
    pub cpus_per_numa: Vec<Vec<u32>>,
    /// SMT siblings (other online threads of the same core) of each CPU.
    pub siblings: BTreeMap<u32, Vec<u32>>,
    pub memory_per_numa: Vec<u64>,
    /// Huge page pool bytes per page size name (`1Gi`, `2Mi`), per NUMA node.
    pub hugepages: BTreeMap<&'static str, Vec<u64>>,
    /// Device count per resource.
    pub devices: BTreeMap<String, usize>,
    pub has_distances: bool,
    pub smt: bool,
}

impl MachineFacts {
    pub fn min_cpus_per_numa(&self) -> usize {
        self.cpus_per_numa.iter().map(Vec::len).min().unwrap_or(0)
    }
}

const GI: u64 = 1 << 30;
const MI: u64 = 1 << 20;

/// How logical CPU ids are handed out.
#[derive(Clone, Copy, Debug)]
enum Numbering {
    /// First threads of every core, then second threads (Intel).
    ThreadMajor,
    /// Siblings adjacent (AMD).
    CoreMajor,
    /// Consecutive ids alternate NUMA nodes.
    NumaInterleaved,
    Shuffled,
}

/// One physical core before numbering.
struct Core {
    numa: usize,
    socket: u32,
    threads: usize,
    uncore: Option<u32>,
}

pub fn machine(rng: &mut Rng, profile: Profile, tags: &mut Vec<String>) -> (TopologySpec, MachineFacts) {
    let numa = match profile {
        Profile::Standard => *rng.weighted(&[
            (10, 1usize),
            (30, 2),
            (5, 3),
            (20, 4),
            (5, 6),
            (15, 8),
            (5, 12),
            (10, 16),
        ]),
        Profile::Big => *rng.weighted(&[(30, 9usize), (15, 10), (20, 12), (35, 16)]),
        Profile::Wide => rng.urange(65, 128),
    };
    let layout = match profile {
        Profile::Wide => wide_layout(rng, numa, tags),
        _ => NumaLayout {
            ids: (0..numa).collect(),
            cpu_nodes: numa,
        },
    };
    // The nodes with CPUs come first in id order; the rest hold memory only.
    let cpu_nodes = layout.cpu_nodes;
    // Sockets divide the NUMA nodes evenly, as on real machines; now and
    // then a NUMA node spans two sockets.
    let sockets = if numa == 1 && rng.chance(10) {
        2
    } else {
        let wanted = *rng.pick(&[1usize, 2, 2, 4]);
        (1..=wanted.min(cpu_nodes))
            .rev()
            .find(|s| cpu_nodes.is_multiple_of(*s))
            .unwrap_or(1)
    };
    let numa_per_socket = cpu_nodes.div_ceil(sockets);
    let max_cores = match numa {
        1..=2 => 8,
        3..=4 => 6,
        5..=8 => 4,
        9..=64 => 3,
        // Wide machines: few cores per node keep the scenarios cheap.
        _ => 2,
    };
    let cores_per_numa = rng.urange(1, max_cores);
    let threads = match profile {
        Profile::Wide => *rng.weighted(&[(40, 1usize), (60, 2)]),
        _ => *rng.weighted(&[(35, 1usize), (60, 2), (5, 4)]),
    };
    let smt = threads > 1;
    // Hybrid: the last cores of each NUMA node have a single thread.
    let efficiency_cores = if smt && cores_per_numa > 1 && rng.chance(12) {
        tags.push("hybrid".into());
        rng.urange(1, cores_per_numa - 1)
    } else {
        0
    };
    let uncore_kind = *rng.weighted(&[(30, "none"), (20, "socket"), (20, "numa"), (20, "group"), (10, "split")]);
    let group = rng.urange(2, 4);
    let mut cores = Vec::new();
    let mut next_uncore = 0u32;
    for node in 0..cpu_nodes {
        let socket = if numa == 1 && sockets == 2 {
            0
        } else {
            (node / numa_per_socket) as u32
        };
        for c in 0..cores_per_numa {
            let uncore = match uncore_kind {
                "none" => None,
                "socket" => Some(socket),
                "numa" => Some(node as u32),
                // CCX-like groups of a few cores inside the NUMA node.
                "group" => Some(next_uncore + (c / group) as u32),
                // A NUMA node whose cores are split over two caches unevenly.
                _ => Some(next_uncore + u32::from(c * 3 >= cores_per_numa * 2)),
            };
            let threads = if c >= cores_per_numa - efficiency_cores {
                1
            } else {
                threads
            };
            cores.push(Core {
                numa: node,
                socket,
                threads,
                uncore,
            });
        }
        next_uncore += match uncore_kind {
            "group" => cores_per_numa.div_ceil(group) as u32,
            _ => 2,
        };
    }
    if uncore_kind != "none" {
        tags.push(format!("uncore-{uncore_kind}"));
    }
    if numa == 1 && sockets == 2 {
        // One NUMA node, two sockets: the second half of the cores.
        let half = cores.len() / 2;
        for core in &mut cores[half..] {
            core.socket = 1;
        }
    }

    // (core index, thread) pairs in id order.
    let numbering = *rng.weighted(&[
        (35, Numbering::ThreadMajor),
        (35, Numbering::CoreMajor),
        (15, Numbering::NumaInterleaved),
        (15, Numbering::Shuffled),
    ]);
    let mut threads_list: Vec<(usize, usize)> = cores
        .iter()
        .enumerate()
        .flat_map(|(i, c)| (0..c.threads).map(move |t| (i, t)))
        .collect();
    match numbering {
        Numbering::ThreadMajor => threads_list.sort_by_key(|&(c, t)| (t, c)),
        Numbering::CoreMajor => {}
        Numbering::NumaInterleaved => {
            threads_list.sort_by_key(|&(c, t)| (t, c % cores_per_numa, cores[c].numa));
        }
        Numbering::Shuffled => rng.shuffle(&mut threads_list),
    }
    // Core ids: machine-wide unique, sometimes with gaps as sysfs has them.
    let core_stride = if rng.chance(20) { rng.range(2, 4) as u32 } else { 1 };
    let mut cpus: Vec<CpuSpec> = threads_list
        .iter()
        .enumerate()
        .map(|(id, &(c, _))| CpuSpec {
            id: id as u32,
            core: c as u32 * core_stride,
            socket: cores[c].socket,
            numa: cores[c].numa,
            uncore_cache: cores[c].uncore,
        })
        .collect();

    // Offline CPUs: gone from the list; their ids stay unused.
    if cpus.len() > 2 && rng.chance(12) {
        let offline = rng.urange(1, (cpus.len() / 4).clamp(1, 3));
        for _ in 0..offline {
            let at = rng.urange(0, cpus.len() - 1);
            let node = cpus[at].numa;
            // Never the last CPU of a NUMA node.
            if cpus.iter().filter(|c| c.numa == node).count() > 1 {
                cpus.remove(at);
            }
        }
        tags.push("offline-cpus".into());
    }

    let mut cpus_per_numa = vec![Vec::new(); numa];
    for c in &cpus {
        cpus_per_numa[c.numa].push(c.id);
    }
    for list in &mut cpus_per_numa {
        list.sort_unstable();
    }
    let mut siblings: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for c in &cpus {
        let mut sib: Vec<u32> = cpus
            .iter()
            .filter(|o| o.core == c.core && o.id != c.id)
            .map(|o| o.id)
            .collect();
        sib.sort_unstable();
        siblings.insert(c.id, sib);
    }

    // Memory, huge pages, distances.
    let base = *rng.pick(&[4u64, 8, 16, 16, 32, 64]) * GI;
    let uneven = rng.chance(10);
    let memory_per_numa: Vec<u64> = (0..numa)
        .map(|_| if uneven { *rng.pick(&[4u64, 8, 16]) * GI } else { base })
        .collect();
    let mut hugepages: BTreeMap<&'static str, Vec<u64>> = BTreeMap::new();
    let pools = match profile {
        Profile::Standard | Profile::Wide => *rng.weighted(&[(65, "none"), (15, "1Gi"), (10, "2Mi"), (10, "both")]),
        // Big machines: huge pages on most, to be aligned with the rest.
        Profile::Big => *rng.weighted(&[(15, "none"), (30, "1Gi"), (25, "2Mi"), (30, "both")]),
    };
    if pools == "1Gi" || pools == "both" {
        let some_nodes = rng.chance(25);
        let per: Vec<u64> = memory_per_numa
            .iter()
            .enumerate()
            .map(|(i, &m)| {
                if some_nodes && i % 2 == 1 {
                    0
                } else {
                    rng.range(1, (m / GI / 4).max(1)) * GI
                }
            })
            .collect();
        hugepages.insert("1Gi", per);
    }
    if pools == "2Mi" || pools == "both" {
        let per: Vec<u64> = (0..numa).map(|_| *rng.pick(&[64u64, 256, 512]) * MI).collect();
        hugepages.insert("2Mi", per);
    }
    if !hugepages.is_empty() {
        tags.push("hugepages".into());
    }
    let has_distances = rng.chance(55);
    let far = *rng.pick(&[20u64, 21, 32]);
    let near = *rng.pick(&[11u64, 12, 16]);
    let numa_nodes = (0..numa)
        .map(|id| {
            let mut other = BTreeMap::new();
            for (size, per) in &hugepages {
                if per[id] > 0 || rng.chance(50) {
                    other.insert(
                        format!("hugepages-{size}"),
                        Value::String(topoalign_scenario::byte_quantity(per[id])),
                    );
                }
            }
            let distances = has_distances.then(|| {
                (0..numa)
                    .map(|o| {
                        if o == id {
                            10
                        } else if o / numa_per_socket == id / numa_per_socket {
                            near
                        } else {
                            far
                        }
                    })
                    .collect()
            });
            NumaNodeSpec {
                id: layout.ids[id],
                memory: topoalign_scenario::byte_quantity(memory_per_numa[id]),
                distances,
                other,
            }
        })
        .collect();

    let mut devices = match profile {
        Profile::Wide => wide_devices(rng, numa, tags),
        _ => devices(rng, numa, profile, tags),
    };
    // Nodes named by their ids in the scenario.
    for cpu in &mut cpus {
        cpu.numa = layout.ids[cpu.numa];
    }
    for list in devices.values_mut() {
        for device in list {
            for node in &mut device.numa {
                *node = layout.ids[*node];
            }
        }
    }
    let facts = MachineFacts {
        numa,
        numa_ids: layout.ids,
        cpus_per_numa,
        siblings,
        memory_per_numa,
        hugepages,
        devices: devices.iter().map(|(name, list)| (name.clone(), list.len())).collect(),
        has_distances,
        smt,
    };
    tags.push(format!("numa-{numa}"));
    if smt {
        tags.push("smt".into());
    }
    (
        TopologySpec {
            numa_nodes,
            cpus,
            devices,
        },
        facts,
    )
}

/// How a machine numbers its NUMA nodes.
struct NumaLayout {
    /// Each node's id, ascending.
    ids: Vec<usize>,
    /// The first this many nodes have CPUs; the rest hold memory only.
    cpu_nodes: usize,
}

/// A wide machine's NUMA ids (tags `numa-wide`, `numa-ids:<kind>`,
/// `numa-cpuless`): `0..numa`; every `stride`-th id up to 1023; CPU nodes
/// `0..k` and a block of memory-only nodes with high ids (CXL memory
/// expanders); or CPU nodes `0..k` followed by CPU-less nodes (GPU memory,
/// as on POWER9 or Grace Hopper).
fn wide_layout(rng: &mut Rng, numa: usize, tags: &mut Vec<String>) -> NumaLayout {
    let kind = *rng.weighted(&[(40, "dense"), (20, "sparse"), (20, "cxl"), (20, "gpu-memory")]);
    let cpuless = match kind {
        "cxl" | "gpu-memory" => rng.urange(1, numa / 2),
        _ => 0,
    };
    let cpu_nodes = numa - cpuless;
    let ids: Vec<usize> = match kind {
        "sparse" => {
            let stride = rng.urange(2, MAX_NUMA_ID / (numa - 1));
            (0..numa).map(|i| i * stride).collect()
        }
        "cxl" => {
            let base = rng.urange(cpu_nodes.max(256), MAX_NUMA_ID + 1 - cpuless);
            (0..cpu_nodes).chain(base..base + cpuless).collect()
        }
        _ => (0..numa).collect(),
    };
    tags.push("numa-wide".into());
    tags.push(format!("numa-ids:{kind}"));
    if cpuless > 0 {
        tags.push("numa-cpuless".into());
    }
    NumaLayout { ids, cpu_nodes }
}

/// The largest NUMA id Linux gives (`MAX_NUMNODES` is 1024).
const MAX_NUMA_ID: usize = 1023;

/// A wide machine's devices (NUMA nodes by place in id order): GPUs on the
/// last nodes (the high ids, CPU-less on some machines), spread over the
/// machine, on two nodes at once, or without affinity; NICs on the last
/// nodes or without affinity.
fn wide_devices(rng: &mut Rng, numa: usize, tags: &mut Vec<String>) -> BTreeMap<String, Vec<DeviceSpec>> {
    let mut devices = BTreeMap::new();
    if rng.chance(75) {
        let count = rng.urange(1, 8);
        let layout = *rng.weighted(&[(40, "high"), (30, "spread"), (15, "multi"), (15, "none")]);
        let gpus = (0..count)
            .map(|g| {
                let mut affinity = match layout {
                    "high" => vec![numa - 1 - g],
                    "spread" => vec![g * numa / count],
                    "multi" => vec![numa - 2 - 2 * g, numa - 1 - 2 * g],
                    _ => Vec::new(),
                };
                affinity.sort_unstable();
                DeviceSpec {
                    id: format!("gpu{g}"),
                    numa: affinity,
                }
            })
            .collect();
        tags.push(format!("devices-{layout}"));
        devices.insert("nvidia.com/gpu".to_owned(), gpus);
    }
    if rng.chance(40) {
        let count = rng.urange(1, 4);
        let with_affinity = rng.chance(60);
        let nics = (0..count)
            .map(|n| DeviceSpec {
                id: format!("nic{n}"),
                numa: if with_affinity { vec![numa - 1 - n] } else { Vec::new() },
            })
            .collect();
        if !with_affinity {
            tags.push("devices-none".into());
        }
        devices.insert("example.com/nic".to_owned(), nics);
    }
    devices
}

/// Device-plugin resources: GPUs with NUMA affinity (on every node, on some
/// nodes only, or on two nodes at once), NICs mostly without affinity.
fn devices(rng: &mut Rng, numa: usize, profile: Profile, tags: &mut Vec<String>) -> BTreeMap<String, Vec<DeviceSpec>> {
    let mut devices = BTreeMap::new();
    if rng.chance(if profile == Profile::Big { 90 } else { 40 }) {
        let count = rng.urange(1, 8);
        let layout = *rng.weighted(&[(50, "spread"), (25, "subset"), (10, "multi"), (15, "none")]);
        let subset: Vec<usize> = (0..numa).filter(|n| n % 2 == 0).collect();
        let gpus = (0..count)
            .map(|g| {
                let mut affinity = match layout {
                    "spread" => vec![g % numa],
                    "subset" => vec![subset[g % subset.len()]],
                    "multi" => vec![(2 * g) % numa, (2 * g + 1) % numa],
                    _ => Vec::new(),
                };
                affinity.sort_unstable();
                affinity.dedup();
                DeviceSpec {
                    id: format!("gpu{g}"),
                    numa: affinity,
                }
            })
            .collect();
        tags.push(format!("devices-{layout}"));
        devices.insert("nvidia.com/gpu".to_owned(), gpus);
    }
    if rng.chance(25) {
        let count = rng.urange(1, 4);
        let with_affinity = rng.chance(30);
        let nics = (0..count)
            .map(|n| DeviceSpec {
                id: format!("nic{n}"),
                numa: if with_affinity {
                    vec![(numa - 1 + n) % numa]
                } else {
                    Vec::new()
                },
            })
            .collect();
        if !with_affinity {
            tags.push("devices-none".into());
        }
        devices.insert("example.com/nic".to_owned(), nics);
    }
    devices
}
