//! CPU topology hints: the NUMA node sets that could hold a request of `n`
//! exclusive CPUs (the kubelet's `generateCPUTopologyHints`).
//!
//! Owns: which masks qualify and which are preferred. A mask qualifies when
//! every reusable CPU (CPUs of the pod's init containers, or already
//! assigned to the pod) lies inside it and, counting those, it holds `n`
//! available CPUs. Preferred masks are those with the fewest NUMA nodes
//! that could hold `n` CPUs *on an empty machine*; with `align-by-socket`
//! also those spanning the fewest sockets that could.
//! Must not touch: state; callers pass the free and reusable sets.

use topoalign_model::{CpuSet, NumaMask, TopologyHint};

use crate::CpuTopology;

/// Hints for `request` CPUs, in `NumaMask::subsets_by_size` order over the
/// NUMA nodes that have CPUs. Empty when no mask can hold the request.
pub fn generate_cpu_topology_hints(
    topology: &CpuTopology,
    available: &CpuSet,
    reusable: &CpuSet,
    request: i64,
    align_by_socket: bool,
) -> Vec<TopologyHint> {
    let numa_nodes = topology.numa_mask();
    let numa_of = |cpu: u32| topology.cpu(cpu).map_or(0, |info| info.numa);
    let mut min_affinity_size = numa_nodes.count();
    let mut hints = Vec::new();
    for mask in NumaMask::subsets_by_size(numa_nodes) {
        // The preference is measured on the whole machine, not on what is
        // free, and before any qualification test.
        if topology.cpus_in_numa_nodes(mask).len() as i64 >= request && mask.count() < min_affinity_size {
            min_affinity_size = mask.count();
        }
        if !reusable.iter().all(|cpu| mask.contains(numa_of(cpu))) {
            continue;
        }
        let matching = reusable.len() + available.iter().filter(|&cpu| mask.contains(numa_of(cpu))).count();
        if (matching as i64) < request {
            continue;
        }
        hints.push(TopologyHint::new(mask, false));
    }
    for hint in &mut hints {
        let Some(mask) = hint.affinity else { continue };
        hint.preferred = (align_by_socket && is_socket_aligned(topology, mask, min_affinity_size))
            || mask.count() == min_affinity_size;
    }
    hints
}

/// `isHintSocketAligned`: whether the mask's NUMA nodes span exactly as many
/// sockets as the narrowest NUMA fit would need.
fn is_socket_aligned(topology: &CpuTopology, mask: NumaMask, min_affinity_size: u32) -> bool {
    let numa_per_socket = topology
        .num_numa_nodes()
        .checked_div(topology.num_sockets())
        .unwrap_or(0);
    if numa_per_socket == 0 {
        return false;
    }
    let min_sockets = (min_affinity_size as usize).div_ceil(numa_per_socket);
    topology.sockets_in_numa_nodes(mask).len() == min_sockets
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machines::*;

    fn set(text: &str) -> CpuSet {
        CpuSet::parse(text).unwrap()
    }

    fn hints(topology: &CpuTopology, available: &str, reusable: &str, request: i64, by_socket: bool) -> Vec<String> {
        generate_cpu_topology_hints(topology, &set(available), &set(reusable), request, by_socket)
            .into_iter()
            .map(|h| {
                format!(
                    "{}{}",
                    h.affinity.unwrap_or_default(),
                    if h.preferred { "+" } else { "" }
                )
            })
            .collect()
    }

    /// (name, machine, available, reusable, request, align-by-socket, expected).
    type HintCase<'a> = (&'a str, &'a CpuTopology, &'a str, &'a str, i64, bool, &'a [&'a str]);

    #[test]
    fn hints_follow_the_kubelet_table() {
        let dual = dual_socket_ht();
        // (machine, available, reusable, request, align-by-socket, expected; "+" = preferred)
        let cases: &[HintCase<'_>] = &[
            (
                "1 CPU fits each node",
                &dual,
                "0-11",
                "",
                1,
                false,
                &["{0}+", "{1}+", "{0,1}"],
            ),
            (
                "6 CPUs fit one whole node",
                &dual,
                "0-11",
                "",
                6,
                false,
                &["{0}+", "{1}+", "{0,1}"],
            ),
            ("node 0 partly used", &dual, "1-11", "", 6, false, &["{1}+", "{0,1}"]),
            ("7 CPUs need both nodes", &dual, "0-11", "", 7, false, &["{0,1}+"]),
            ("13 CPUs never fit", &dual, "0-11", "", 13, false, &[]),
            (
                "node 0 nearly full: only node 1, or both",
                &dual,
                "1,3,5,7,9,11,0",
                "",
                4,
                false,
                &["{1}+", "{0,1}"],
            ),
            (
                "reusable CPUs pin the mask",
                &dual,
                "1-5,7-11",
                "0,6",
                2,
                false,
                &["{0}+", "{0,1}"],
            ),
            (
                "reusable CPUs count toward the request",
                &dual,
                "",
                "0,6",
                2,
                false,
                &["{0}+", "{0,1}"],
            ),
        ];
        for (name, topology, available, reusable, request, by_socket, expected) in cases {
            assert_eq!(
                hints(topology, available, reusable, *request, *by_socket),
                *expected,
                "{name}"
            );
        }
    }

    #[test]
    fn align_by_socket_prefers_masks_within_the_fewest_sockets() {
        let multi = dual_socket_multi_numa_per_socket_ht();
        let got = hints(&multi, "0-79", "", 30, true);
        // 30 CPUs need two NUMA nodes (20 each); one socket holds two nodes,
        // so pairs on one socket ({0,1} and {2,3}) are preferred, and so is
        // any pair by the NUMA-count rule.
        assert!(got.contains(&"{0,1}+".to_string()));
        assert!(got.contains(&"{0,2}+".to_string()), "two-node masks are minimal anyway");
        assert!(got.contains(&"{0,1,2}".to_string()));
        let got = hints(&multi, "0-79", "", 10, true);
        assert!(got.contains(&"{0,1}+".to_string()), "one socket: socket-aligned");
        assert!(got.contains(&"{0,2}".to_string()), "two sockets: not preferred");
    }
}
