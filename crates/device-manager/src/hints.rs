//! Topology hints for one device resource (the kubelet's
//! `generateDeviceTopologyHints`).
//!
//! Owns the hint list for a request size given which devices are free and
//! which must be reused. Deciding *which* request and which free set to ask
//! about (container or pod scope, already-allocated containers) is the
//! manager's job in `lib.rs`.

use topoalign_model::{NumaMask, TopologyHint};

use crate::pod_devices::DeviceSet;
use crate::registry::ResourceDevices;

/// Every NUMA node combination (in `IterateBitMasks` order) on which
/// `request` devices can be found among `available`, given that every
/// `reusable` device with a topology must lie on the combination too.
///
/// Preferred are the combinations whose size is minimal among those that
/// could hold the request *on an empty node* (counting every device of the
/// resource, allocated or not) — so a request that fits one node stays
/// "preferred on one node" only, even while that node's devices are busy.
pub(crate) fn device_hints(
    numa_nodes: NumaMask,
    devices: &ResourceDevices,
    available: &DeviceSet,
    reusable: &DeviceSet,
    request: i128,
) -> Vec<TopologyHint> {
    let all: Vec<Option<NumaMask>> = devices.iter().map(|(_, affinity)| affinity).collect();
    let free: Vec<Option<NumaMask>> = available.iter().map(|id| devices.affinity(id)).collect();
    // Reusable devices without a topology are skipped by the kubelet: they
    // neither restrict nor count towards a combination.
    let reused: Vec<NumaMask> = reusable.iter().filter_map(|id| devices.affinity(id)).collect();

    let on = |mask: NumaMask, affinity: &Option<NumaMask>| affinity.is_some_and(|a| a.intersects(mask));
    let count_on = |mask: NumaMask, set: &[Option<NumaMask>]| -> i128 {
        // At most one entry per device: the count always fits.
        i128::try_from(set.iter().filter(|a| on(mask, a)).count()).unwrap_or(i128::MAX)
    };

    let mut min_size = numa_nodes.count();
    let mut hints = Vec::new();
    for mask in NumaMask::subsets_by_size(numa_nodes) {
        if count_on(mask, &all) >= request && mask.count() < min_size {
            min_size = mask.count();
        }
        if !reused.iter().all(|a| a.intersects(mask)) {
            continue;
        }
        let reused_count = i128::try_from(reused.len()).unwrap_or(i128::MAX);
        if reused_count.saturating_add(count_on(mask, &free)) < request {
            continue;
        }
        hints.push(TopologyHint::new(mask, false));
    }
    for hint in &mut hints {
        hint.preferred = hint.affinity.is_some_and(|mask| mask.count() == min_size);
    }
    hints
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use crate::testing::{hints, machine};

    fn set(ids: &str) -> DeviceSet {
        ids.split_whitespace().map(str::to_owned).collect()
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
