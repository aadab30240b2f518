//! Topology hints for one device resource (the kubelet's
//! `generateDeviceTopologyHints`).
//!
//! Owns the hint list for a request size given which devices are free and
//! which must be reused. Deciding *which* request and which free set to ask
//! about (container or pod scope, already-allocated containers) is the
//! manager's job in `lib.rs`.

use topoalign_model::{HintRule, MAX_NUMA_NODES, NumaMask, upward_closed_has_hint_between};

use crate::pod_devices::DeviceSet;
use crate::registry::ResourceDevices;

/// The hint list of one device resource as a rule: the NUMA node
/// combinations on which `request` devices can be found among the free
/// ones, given that every reusable device with a topology must lie on the
/// combination too.
///
/// Preferred are the combinations whose size is minimal among those that
/// could hold the request *on an empty node* (counting every device of the
/// resource, allocated or not) — so a request that fits one node stays
/// "preferred on one node" only, even while that node's devices are busy.
/// Combinations are upward closed: a wider mask never sees fewer devices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DeviceHintRule {
    universe: NumaMask,
    /// NUMA affinity of each free device with a topology.
    free: Vec<NumaMask>,
    /// NUMA affinity of each reusable device with a topology (devices
    /// without one are skipped by the kubelet: they neither restrict nor
    /// count).
    reused: Vec<NumaMask>,
    request: i128,
    min_size: u32,
    /// When every free affinity is a single node (the usual case): the
    /// free devices per node, so that a mask's count is a sum over its
    /// nodes (kept inline: no allocation). `None` otherwise.
    free_per_node: Option<[u32; MAX_NUMA_NODES]>,
}

impl DeviceHintRule {
    /// `free`: the affinities of the available devices that report one.
    pub(crate) fn new(
        numa_nodes: NumaMask,
        devices: &ResourceDevices,
        free: Vec<NumaMask>,
        reusable: &DeviceSet,
        request: i128,
    ) -> DeviceHintRule {
        let reused = reusable.iter().filter_map(|id| devices.affinity(id)).collect();
        let min_size =
            fewest_nodes_reaching(numa_nodes, devices.affinities(), &[], 0, request).unwrap_or(numa_nodes.count());
        DeviceHintRule::from_parts(numa_nodes, free, reused, request, min_size)
    }

    fn from_parts(
        universe: NumaMask,
        free: Vec<NumaMask>,
        reused: Vec<NumaMask>,
        request: i128,
        min_size: u32,
    ) -> DeviceHintRule {
        let free_per_node = if free.iter().all(|a| a.count() == 1) {
            Some(per_node(&free))
        } else {
            None
        };
        DeviceHintRule {
            universe,
            free,
            reused,
            request,
            min_size,
            free_per_node,
        }
    }

    /// Free devices whose affinity touches `mask`.
    fn free_on(&self, mask: NumaMask) -> i128 {
        match &self.free_per_node {
            None => count_on(mask, &self.free),
            Some(per_node) => mask.nodes().map(|n| i128::from(per_node[n])).sum(),
        }
    }
}

/// Devices per node, for affinities that are all single nodes.
fn per_node(affinities: &[NumaMask]) -> [u32; MAX_NUMA_NODES] {
    // `u32` counts (at most one per device): a quarter of the bytes to
    // clear and copy of `i128` ones.
    let mut counts = [0u32; MAX_NUMA_NODES];
    for affinity in affinities {
        if let Some(node) = affinity.nodes().next() {
            counts[node] = counts[node].saturating_add(1);
        }
    }
    counts
}

/// Devices whose affinity touches `mask`.
fn count_on(mask: NumaMask, affinities: &[NumaMask]) -> i128 {
    // At most one entry per device: the count always fits.
    i128::try_from(affinities.iter().filter(|a| a.intersects(mask)).count()).unwrap_or(i128::MAX)
}

/// The fewest nodes of `universe` touching every `required` affinity and
/// `need - base` of `devices`. Single-node affinities (the usual case) are
/// answered greedily; others by trying sizes upward.
fn fewest_nodes_reaching(
    universe: NumaMask,
    devices: &[NumaMask],
    required: &[NumaMask],
    base: i128,
    need: i128,
) -> Option<u32> {
    let fits = |mask: NumaMask| required.iter().all(|r| r.intersects(mask)) && base + count_on(mask, devices) >= need;
    let single_node = devices.iter().chain(required).all(|a| a.count() == 1);
    if !single_node {
        return (1..=universe.count()).find(|&size| NumaMask::subsets_of_size(universe, size).any(fits));
    }
    let forced = required.iter().fold(NumaMask::EMPTY, |acc, r| acc | *r) & universe;
    if required.iter().any(|r| !r.intersects(universe)) {
        return None;
    }
    // Every affinity is one node: a mask touches a device exactly when it
    // holds that node, so counting per node once answers every mask.
    let per_node = per_node(devices);
    let mut so_far = base + forced.nodes().map(|n| i128::from(per_node[n])).sum::<i128>();
    // On the stack: at most one count per NUMA node.
    let mut counts = [0u32; MAX_NUMA_NODES];
    let mut len = 0;
    for n in universe.without(forced).nodes() {
        counts[len] = per_node[n];
        len += 1;
    }
    let others = &mut counts[..len];
    others.sort_unstable_by(|a, b| b.cmp(a));
    let mut count = forced.count();
    for &extra in others.iter() {
        if so_far >= need && count >= 1 {
            break;
        }
        so_far += i128::from(extra);
        count += 1;
    }
    (so_far >= need && count >= 1).then_some(count)
}

impl HintRule for DeviceHintRule {
    fn universe(&self) -> NumaMask {
        self.universe
    }

    fn classify(&self, mask: NumaMask) -> Option<bool> {
        let reused_count = i128::try_from(self.reused.len()).unwrap_or(i128::MAX);
        let holds = self.reused.iter().all(|a| a.intersects(mask))
            && reused_count.saturating_add(self.free_on(mask)) >= self.request;
        holds.then(|| mask.count() == self.min_size)
    }

    fn has_hint_between(&self, must: NumaMask, within: NumaMask) -> bool {
        upward_closed_has_hint_between(self, must, within)
    }

    fn preferred_count(&self) -> Option<u32> {
        Some(self.min_size)
    }

    fn preferred_single_nodes(&self, within: NumaMask) -> NumaMask {
        if self.min_size != 1 {
            return NumaMask::EMPTY;
        }
        // `classify` of each single node, its sums over one node.
        let reused_count = i128::try_from(self.reused.len()).unwrap_or(i128::MAX);
        let nodes = (self.universe & within).nodes().filter(|&n| {
            let node = NumaMask::single(n);
            self.reused.iter().all(|a| a.intersects(node))
                && reused_count.saturating_add(self.free_on(node)) >= self.request
        });
        NumaMask::from_nodes(nodes)
    }

    fn narrowest_count(&self) -> Option<u32> {
        let base = i128::try_from(self.reused.len()).unwrap_or(i128::MAX);
        fewest_nodes_reaching(self.universe, &self.free, &self.reused, base, self.request)
    }
}

/// The kubelet's list for the same inputs (`generateDeviceTopologyHints`),
/// in `IterateBitMasks` order; empty when no combination holds the request.
#[cfg(test)]
pub(crate) fn device_hints(
    numa_nodes: NumaMask,
    devices: &ResourceDevices,
    available: &DeviceSet,
    reusable: &DeviceSet,
    request: i128,
) -> Vec<topoalign_model::TopologyHint> {
    let free = available.iter().filter_map(|id| devices.affinity(id)).collect();
    DeviceHintRule::new(numa_nodes, devices, free, reusable, request).to_list()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use crate::testing::{hints, machine};

    fn set(ids: &str) -> DeviceSet {
        ids.split_whitespace().map(std::sync::Arc::from).collect()
    }

    /// Cases from the kubelet's `TestGetTopologyHints` and hand-checked ones.
    #[test]
    fn hints_table() {
        struct Case {
            name: &'static str,
            numa_nodes: usize,
            devices: &'static str,
            available: &'static str,
            reusable: &'static str,
            request: i128,
            expected: &'static str,
        }
        let cases = [
            Case {
                name: "single request, one device per node",
                numa_nodes: 2,
                devices: "d0@0 d1@1",
                available: "d0 d1",
                reusable: "",
                request: 1,
                expected: "{0}* {1}* {0,1}",
            },
            Case {
                name: "request needs both nodes",
                numa_nodes: 2,
                devices: "d0@0 d1@1",
                available: "d0 d1",
                reusable: "",
                request: 2,
                expected: "{0,1}*",
            },
            Case {
                name: "busy node 0 keeps single-node preference on node 1 only",
                numa_nodes: 2,
                devices: "d0@0 d1@1",
                available: "d1",
                reusable: "",
                request: 1,
                expected: "{1}* {0,1}",
            },
            Case {
                name: "fits one node when empty, but node is busy: wider hint not preferred",
                numa_nodes: 2,
                devices: "d0@0 d1@0 d2@1 d3@1",
                available: "d0 d2",
                reusable: "",
                request: 2,
                expected: "{0,1}",
            },
            Case {
                name: "device on two nodes counts on both",
                numa_nodes: 2,
                devices: "d0@0,1",
                available: "d0",
                reusable: "",
                request: 1,
                expected: "{0}* {1}* {0,1}",
            },
            Case {
                name: "devices without topology never count towards a mask",
                numa_nodes: 2,
                devices: "d0@0 d1@-",
                available: "d0 d1",
                reusable: "",
                request: 2,
                expected: "",
            },
            Case {
                name: "reusable devices pin the mask",
                numa_nodes: 2,
                devices: "d0@0 d1@1 d2@1",
                available: "d0 d2",
                reusable: "d1",
                request: 1,
                expected: "{1}* {0,1}",
            },
            Case {
                name: "reusable devices on both nodes force the widest mask",
                numa_nodes: 2,
                devices: "d0@0 d1@1",
                available: "",
                reusable: "d0 d1",
                request: 1,
                expected: "{0,1}",
            },
            Case {
                name: "zero request: every mask, single nodes preferred",
                numa_nodes: 2,
                devices: "d0@0",
                available: "",
                reusable: "",
                request: 0,
                expected: "{0}* {1}* {0,1}",
            },
            Case {
                name: "three nodes, IterateBitMasks order",
                numa_nodes: 3,
                devices: "d0@0 d1@1 d2@2 d3@2",
                available: "d0 d1 d2 d3",
                reusable: "",
                request: 2,
                expected: "{2}* {0,1} {0,2} {1,2} {0,1,2}",
            },
        ];
        for case in cases {
            let machine = machine(case.numa_nodes, &[("r", case.devices)]);
            let registry = Registry::from_machine(&machine);
            let devices = registry.resource("r").expect("registered");
            let got = device_hints(
                machine.numa_mask(),
                devices,
                &set(case.available),
                &set(case.reusable),
                case.request,
            );
            assert_eq!(got, hints(case.expected), "{}", case.name);
        }
    }
}

#[cfg(test)]
mod rule_properties {
    use proptest::prelude::*;
    use topoalign_model::{HintRule, NumaMask};

    use super::{DeviceHintRule, fewest_nodes_reaching};

    fn affinity() -> impl Strategy<Value = NumaMask> {
        prop_oneof![
            4 => (0usize..6).prop_map(NumaMask::single),
            1 => (1u64..64).prop_map(NumaMask::from_bits),
        ]
    }

    proptest! {
        /// The narrowest count (greedy for single-node devices, a search
        /// otherwise) is the one enumeration finds.
        #[test]
        fn narrowest_count_matches_enumeration(
            free in proptest::collection::vec(affinity(), 0..8),
            reused in proptest::collection::vec(affinity(), 0..3),
            request in 0i128..8,
        ) {
            let universe = NumaMask::from_bits(0b11_1111);
            let min_size = fewest_nodes_reaching(universe, &free, &[], 0, request).unwrap_or(6);
            let rule = DeviceHintRule::from_parts(universe, free, reused, request, min_size);
            let enumerated = NumaMask::subsets_by_size(universe)
                .filter(|m| rule.classify(*m).is_some())
                .map(NumaMask::count)
                .min();
            prop_assert_eq!(rule.narrowest_count(), enumerated);
            // Counting per node (single-node devices) answers as counting
            // device by device does.
            let by_device = DeviceHintRule { free_per_node: None, ..rule.clone() };
            for mask in NumaMask::subsets_by_size(universe) {
                prop_assert_eq!(rule.classify(mask), by_device.classify(mask));
                // The preferred single nodes within any mask are the ones
                // `classify` prefers, either way of counting.
                let singles = topoalign_model::classified_preferred_single_nodes(&rule, mask);
                prop_assert_eq!(rule.preferred_single_nodes(mask), singles);
                prop_assert_eq!(by_device.preferred_single_nodes(mask), singles);
            }
        }
    }
}
