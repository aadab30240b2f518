//! Named test machines, the ones the kubelet's own CPU manager tests use
//! (`policy_test.go`), written as rules instead of pages of literals.
//! Compiled for tests only.

use crate::topology::{CpuInfo, CpuTopology};

/// A machine of `cpus` CPUs where `f(cpu)` gives (core, socket, NUMA node,
/// uncore cache). Core ids are taken as given, like the kubelet's literals.
pub(crate) fn machine(cpus: u32, f: impl Fn(u32) -> (u32, u32, usize, u32)) -> CpuTopology {
    CpuTopology::from_cpu_infos((0..cpus).map(|cpu| {
        let (core, socket, numa, uncore_cache) = f(cpu);
        (
            cpu,
            CpuInfo {
                core,
                socket,
                numa,
                uncore_cache,
            },
        )
    }))
}

/// `topoSingleSocketHT`: 1 socket, 4 cores, siblings N and N+4.
pub(crate) fn single_socket_ht() -> CpuTopology {
    machine(8, |c| (c % 4, 0, 0, 0))
}

/// `topoDualSocketHT`: 2 sockets (= NUMA nodes), 6 cores, even cores on
/// socket 0, siblings N and N+6.
pub(crate) fn dual_socket_ht() -> CpuTopology {
    machine(12, |c| (c % 6, c % 2, (c % 2) as usize, 0))
}

/// `topoDualSocketNoHT`: 2 sockets of 4 single-thread cores.
pub(crate) fn dual_socket_no_ht() -> CpuTopology {
    machine(8, |c| (c, c / 4, (c / 4) as usize, 0))
}

/// `topoTripleSocketHT`: cores 0-2 on socket 1, 3-5 on socket 0, 6-8 on
/// socket 2; siblings adjacent; one NUMA node.
pub(crate) fn triple_socket_ht() -> CpuTopology {
    machine(18, |c| {
        let core = c / 2;
        let socket = [1, 0, 2][(core / 3) as usize];
        (core, socket, 0, 0)
    })
}

/// `topoDualSocketMultiNumaPerSocketHT` (dual Xeon Gold 6230): 2 sockets,
/// 4 NUMA nodes of 10 cores, siblings N and N+40.
pub(crate) fn dual_socket_multi_numa_per_socket_ht() -> CpuTopology {
    machine(80, |c| {
        let core = c % 40;
        let numa = core / 10;
        (core, numa / 2, numa as usize, 0)
    })
}

/// `fakeTopoMultiSocketDualSocketPerNumaHT`: the same machine with NUMA
/// nodes and sockets swapped (4 sockets, 2 NUMA nodes).
pub(crate) fn fake_multi_socket_dual_socket_per_numa_ht() -> CpuTopology {
    machine(80, |c| {
        let core = c % 40;
        let socket = core / 10;
        (core, socket, (socket / 2) as usize, 0)
    })
}

/// `topoDualSocketMultiNumaPerSocketHTLarge` (dual EPYC 7742, NPS=4): 2
/// sockets, 8 NUMA nodes of 16 cores, siblings N and N+128.
pub(crate) fn dual_socket_multi_numa_per_socket_ht_large() -> CpuTopology {
    machine(256, |c| {
        let core = c % 128;
        let numa = core / 16;
        (core, numa / 4, numa as usize, 0)
    })
}

/// `topoUncoreSingleSocketNoSMT`: 16 cores, 4 uncore caches of 4.
pub(crate) fn uncore_single_socket_no_smt() -> CpuTopology {
    machine(16, |c| (c, 0, 0, c / 4))
}

/// `topoUncoreDualSocketNoSMT`: 2 sockets (= NUMA nodes) of 8 cores, 4
/// uncore caches of 4.
pub(crate) fn uncore_dual_socket_no_smt() -> CpuTopology {
    machine(16, |c| (c, c / 8, (c / 8) as usize, c / 4))
}

/// `topoUncoreSingleSocketMultiNuma`: 1 socket, 2 NUMA nodes of 8 cores, 4
/// uncore caches of 4.
pub(crate) fn uncore_single_socket_multi_numa() -> CpuTopology {
    machine(16, |c| (c, 0, (c / 8) as usize, c / 4))
}

/// `topoUncoreSingleSocketSMT`: 8 cores (siblings N and N+8), 2 uncore
/// caches of 4 cores.
pub(crate) fn uncore_single_socket_smt() -> CpuTopology {
    machine(16, |c| (c % 8, 0, 0, (c % 8) / 4))
}
