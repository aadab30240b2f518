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

use topoalign_model::{
    CpuSet, HintRule, MAX_NUMA_NODES, NumaMask, TopologyHint, classified_preferred_single_nodes,
    upward_closed_has_hint_between,
};

use crate::CpuTopology;
use crate::topology::Level;

/// The CPU hint list as a rule: which NUMA masks can hold `request` CPUs.
///
/// Qualifying masks are upward closed (adding a node never loses CPUs), so
/// membership is a sum over the mask's nodes and the narrowest mask is found
/// greedily; nothing enumerates the 2^n masks unless the list is asked for.
#[derive(Clone, PartialEq, Eq)]
pub struct CpuHintRule {
    /// NUMA nodes with CPUs: the kubelet's `CPUDetails.NUMANodes()`.
    universe: NumaMask,
    /// Available CPUs per NUMA id.
    available: [u32; MAX_NUMA_NODES],
    /// CPUs the pod may reuse (its init containers'), and their nodes: a
    /// mask must hold all of them.
    reusable: u32,
    reusable_nodes: NumaMask,
    request: u64,
    /// The fewest NUMA nodes that could hold the request on an empty
    /// machine (`minAffinitySize`).
    min_affinity_size: u32,
    /// With `align-by-socket`: the NUMA nodes of each socket, and how many
    /// sockets the narrowest fit spans.
    socket_alignment: Option<SocketAlignment>,
}

impl std::fmt::Debug for CpuHintRule {
    /// Only the nodes of the universe, not 64 counters.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let available: Vec<(usize, u32)> = self.universe.nodes().map(|n| (n, self.available[n])).collect();
        f.debug_struct("CpuHintRule")
            .field("request", &self.request)
            .field("available_per_numa", &available)
            .field("reusable", &self.reusable)
            .field("reusable_nodes", &self.reusable_nodes)
            .field("min_affinity_size", &self.min_affinity_size)
            .field("socket_alignment", &self.socket_alignment)
            .finish()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct SocketAlignment {
    sockets: Vec<NumaMask>,
    min_sockets: usize,
}

impl CpuHintRule {
    /// The rule for `request` CPUs given the available and reusable CPUs.
    pub fn new(
        topology: &CpuTopology,
        available: &CpuSet,
        reusable: &CpuSet,
        request: i64,
        align_by_socket: bool,
    ) -> CpuHintRule {
        let universe = topology.numa_mask();
        let numa_of = |cpu: u32| topology.cpu(cpu).map_or(0, |info| info.numa);
        // Counted per NUMA node's CPUs (a few words each), not per CPU; a
        // CPU the topology does not know counts on node 0.
        let mut per_node = [0u32; MAX_NUMA_NODES];
        for (node, cpus) in topology.groups(Level::Numa) {
            per_node[*node as usize] = available.intersection_len(cpus) as u32;
        }
        if !available.is_subset(topology.all_cpus()) {
            per_node[0] += available.difference(topology.all_cpus()).len() as u32;
        }
        let reusable_nodes = NumaMask::from_nodes(reusable.iter().map(numa_of));
        let request = u64::try_from(request).unwrap_or(0);
        // minAffinitySize is measured on the whole machine: the largest
        // nodes first reach the request with the fewest nodes.
        let min_affinity_size = fewest_reaching(topology.numa_sizes_descending(), request).unwrap_or(universe.count());
        let socket_alignment = align_by_socket.then(|| {
            let numa_per_socket = topology
                .num_numa_nodes()
                .checked_div(topology.num_sockets())
                .unwrap_or(0);
            let sockets: Vec<NumaMask> = topology
                .sockets_in_numa_nodes(universe)
                .into_iter()
                .map(|socket| {
                    NumaMask::from_nodes(
                        universe
                            .nodes()
                            .filter(|&n| topology.sockets_in_numa_nodes(NumaMask::single(n)).contains(&socket)),
                    )
                })
                .collect();
            // `isHintSocketAligned` answers false when sockets outnumber
            // NUMA nodes (no whole NUMA node per socket).
            let min_sockets = if numa_per_socket == 0 {
                usize::MAX
            } else {
                (min_affinity_size as usize).div_ceil(numa_per_socket)
            };
            SocketAlignment { sockets, min_sockets }
        });
        CpuHintRule {
            universe,
            available: per_node,
            reusable: reusable.len() as u32,
            reusable_nodes,
            request,
            min_affinity_size,
            socket_alignment,
        }
    }

    fn holds(&self, mask: NumaMask) -> bool {
        self.reusable_nodes.is_subset_of(mask)
            && u64::from(self.reusable) + mask.nodes().map(|n| u64::from(self.available[n])).sum::<u64>()
                >= self.request
    }

    fn preferred(&self, mask: NumaMask) -> bool {
        let socket_aligned = self.socket_alignment.as_ref().is_some_and(|alignment| {
            alignment
                .sockets
                .iter()
                .filter(|socket| socket.intersects(mask))
                .count()
                == alignment.min_sockets
        });
        socket_aligned || mask.count() == self.min_affinity_size
    }
}

impl HintRule for CpuHintRule {
    fn universe(&self) -> NumaMask {
        self.universe
    }

    fn classify(&self, mask: NumaMask) -> Option<bool> {
        self.holds(mask).then(|| self.preferred(mask))
    }

    fn has_hint_between(&self, must: NumaMask, within: NumaMask) -> bool {
        upward_closed_has_hint_between(self, must, within)
    }

    fn preferred_count(&self) -> Option<u32> {
        self.socket_alignment.is_none().then_some(self.min_affinity_size)
    }

    fn preferred_single_nodes(&self, within: NumaMask) -> NumaMask {
        if self.socket_alignment.is_some() {
            return classified_preferred_single_nodes(self, within);
        }
        // A single node is preferred when it is the narrowest size, holds
        // every reusable CPU and, with them, the request.
        if self.min_affinity_size != 1 || self.reusable_nodes.count() > 1 {
            return NumaMask::EMPTY;
        }
        let nodes = (self.universe & within).nodes().filter(|&n| {
            self.reusable_nodes.is_subset_of(NumaMask::single(n))
                && u64::from(self.reusable) + u64::from(self.available[n]) >= self.request
        });
        NumaMask::from_nodes(nodes)
    }

    fn narrowest_count(&self) -> Option<u32> {
        // The reusable CPUs' nodes are compulsory; then the fullest nodes.
        let base = u64::from(self.reusable)
            + self
                .reusable_nodes
                .nodes()
                .map(|n| u64::from(self.available[n]))
                .sum::<u64>();
        // On the stack: at most one count per NUMA node.
        let mut counts = [0u64; MAX_NUMA_NODES];
        let mut len = 0;
        for n in self.universe.without(self.reusable_nodes).nodes() {
            counts[len] = u64::from(self.available[n]);
            len += 1;
        }
        let others = &mut counts[..len];
        others.sort_unstable_by(|a, b| b.cmp(a));
        let extra = if base >= self.request {
            Some(0)
        } else {
            fewest_reaching(others, self.request - base)
        }?;
        let count = self.reusable_nodes.count() + extra;
        (count >= 1 && self.reusable_nodes.is_subset_of(self.universe)).then_some(count)
    }
}

/// How many of `descending` (largest first) it takes to reach `target`.
fn fewest_reaching(descending: &[u64], target: u64) -> Option<u32> {
    let mut sum = 0;
    for (i, value) in descending.iter().enumerate() {
        if sum >= target {
            return Some(i as u32);
        }
        sum += value;
    }
    (sum >= target).then_some(descending.len() as u32)
}

/// Hints for `request` CPUs as the kubelet lists them, in
/// `NumaMask::subsets_by_size` order over the NUMA nodes that have CPUs.
/// Empty when no mask can hold the request.
pub fn generate_cpu_topology_hints(
    topology: &CpuTopology,
    available: &CpuSet,
    reusable: &CpuSet,
    request: i64,
    align_by_socket: bool,
) -> Vec<TopologyHint> {
    CpuHintRule::new(topology, available, reusable, request, align_by_socket).to_list()
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

#[cfg(test)]
mod rule_properties {
    use proptest::prelude::*;
    use topoalign_model::{CpuSet, HintRule, NumaMask};

    use super::CpuHintRule;
    use crate::machines::*;

    proptest! {
        /// The greedy narrowest count is the one enumeration finds, and the
        /// list only ever holds masks the rule accepts.
        #[test]
        fn narrowest_count_matches_enumeration(
            free in proptest::collection::vec(any::<bool>(), 80),
            reuse in proptest::collection::vec(any::<bool>(), 80),
            request in 1i64..60,
            by_socket in any::<bool>(),
        ) {
            let topology = dual_socket_multi_numa_per_socket_ht();
            let cpus: Vec<u32> = topology.all_cpus().iter().collect();
            let available: CpuSet = cpus.iter().zip(&free).filter(|(_, f)| **f).map(|(c, _)| *c).collect();
            let reusable: CpuSet =
                cpus.iter().zip(&reuse).filter(|(c, r)| **r && !available.contains(**c)).map(|(c, _)| *c).collect();
            let rule = CpuHintRule::new(&topology, &available, &reusable, request, by_socket);
            let enumerated = NumaMask::subsets_by_size(rule.universe())
                .filter(|m| rule.classify(*m).is_some())
                .map(NumaMask::count)
                .min();
            prop_assert_eq!(rule.narrowest_count(), enumerated);
            // The preferred single nodes, read off the per-node counts, are
            // the ones `classify` prefers.
            for within in [rule.universe(), NumaMask::from_bits(0b1010_0101)] {
                prop_assert_eq!(
                    rule.preferred_single_nodes(within),
                    topoalign_model::classified_preferred_single_nodes(&rule, within)
                );
            }
        }
    }
}
