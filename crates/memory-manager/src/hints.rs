//! Topology hints of the Static policy (kubelet `calculateHints`,
//! `regenerateHints`, `findBestHint`).
//!
//! Owns: which NUMA masks can hold a request and which of them are
//! preferred, and the choice of the best hint among a list. Must not touch:
//! the state (everything here is read-only).
//!
//! The rules, for every non-empty mask of all NUMA nodes in the kubelet's
//! `IterateBitMasks` order (by size, then lexicographically):
//! 1. the mask's *allocatable* memory must cover every request — the
//!    smallest such mask size is `minAffinitySize`;
//! 2. a single node that belongs to a multi-node group cannot serve a
//!    single-node hint; a node already holding allocations can join a
//!    multi-node hint only if it is in exactly that group already;
//! 3. the mask's *free* memory (plus what the pod's init containers left on
//!    exactly this mask) must cover every request.
//!
//! A mask passing all three is a hint for every requested resource,
//! preferred when its size equals `minAffinitySize`.

use std::collections::BTreeMap;

use topoalign_model::{MAX_NUMA_NODES, NumaMask, ProviderHints, ResourceHints, TopologyHint};

use crate::init_reuse::ReusableMemory;
use crate::machine_state::{Block, MachineState};
use crate::requests::Requested;

/// Hints per resource name, as the kubelet's `map[string][]TopologyHint`.
pub(crate) type HintMap = BTreeMap<String, Vec<TopologyHint>>;

/// The hints for `requested` on the current state (kubelet
/// `calculateHints`). Empty when no mask can hold the request.
pub(crate) fn calculate(
    state: &MachineState,
    reusable: &ReusableMemory,
    pod_uid: &str,
    requested: &Requested,
) -> HintMap {
    let all_nodes = state.numa_mask();
    let columns: Vec<ResourceColumns> = requested
        .iter()
        .map(|(resource, &size)| ResourceColumns::new(state, resource, size))
        .collect();
    let mut min_affinity_size = all_nodes.count();
    let mut fitting = Vec::new();

    for mask in NumaMask::subsets_by_size(all_nodes) {
        if !columns.iter().all(|c| c.allocatable_on(mask) >= c.size) {
            continue;
        }
        min_affinity_size = min_affinity_size.min(mask.count());

        if !group_rule_allows(state, mask) {
            continue;
        }

        let free_covers = columns
            .iter()
            .all(|c| c.free_on(mask).wrapping_add(reusable.get(pod_uid, mask, c.resource)) >= c.size);
        if free_covers {
            fitting.push(mask);
        }
    }

    let hints: Vec<TopologyHint> = fitting
        .into_iter()
        .map(|mask| TopologyHint::new(mask, mask.count() == min_affinity_size))
        .collect();
    if hints.is_empty() {
        return HintMap::new();
    }
    requested
        .keys()
        .map(|resource| (resource.clone(), hints.clone()))
        .collect()
}

/// One requested resource's allocatable and free bytes per NUMA id, read
/// once so the mask loop (2^N masks) only adds numbers.
struct ResourceColumns<'a> {
    resource: &'a str,
    size: u64,
    allocatable: [u64; MAX_NUMA_NODES],
    free: [u64; MAX_NUMA_NODES],
}

impl<'a> ResourceColumns<'a> {
    fn new(state: &MachineState, resource: &'a str, size: u64) -> Self {
        let mut columns = ResourceColumns {
            resource,
            size,
            allocatable: [0; MAX_NUMA_NODES],
            free: [0; MAX_NUMA_NODES],
        };
        for node in state.numa_mask().nodes() {
            let table = state.table(node, resource);
            columns.allocatable[node] = table.allocatable;
            columns.free[node] = table.free;
        }
        columns
    }

    /// Go `uint64` sums, wrapping like the kubelet's.
    fn allocatable_on(&self, mask: NumaMask) -> u64 {
        mask.nodes()
            .fold(0u64, |sum, node| sum.wrapping_add(self.allocatable[node]))
    }

    fn free_on(&self, mask: NumaMask) -> u64 {
        mask.nodes().fold(0u64, |sum, node| sum.wrapping_add(self.free[node]))
    }
}

/// Rule 2 of the module doc, as `calculateHints` applies it.
fn group_rule_allows(state: &MachineState, mask: NumaMask) -> bool {
    if mask.count() == 1 {
        let node = mask.nodes().next().unwrap_or_default();
        return state.cells(node).count() <= 1;
    }
    mask.nodes()
        .all(|node| state.assignments(node) <= 0 || (state.cells(node).count() != 1 && state.cells(node) == mask))
}

/// The hints of a container that already has memory (kubelet
/// `regenerateHints`): its blocks' masks, preferred. `None` ("no
/// preference") when the blocks do not match the request exactly.
pub(crate) fn regenerate(blocks: &[Block], requested: &Requested) -> Option<HintMap> {
    if blocks.len() != requested.len() {
        return None;
    }
    let mut hints: HintMap = requested.keys().map(|r| (r.clone(), Vec::new())).collect();
    for block in blocks {
        if requested.get(&block.resource) != Some(&block.size) {
            return None;
        }
        hints
            .entry(block.resource.clone())
            .or_default()
            .push(TopologyHint::new(block.affinity, true));
    }
    Some(hints)
}

/// The best hint of a list (kubelet `findBestHint`): preferred beats not
/// preferred; among equals the narrower mask wins (fewer nodes, then the
/// lower-numbered ones); among identical masks the first. `None` for an
/// empty list.
pub(crate) fn best(hints: &[TopologyHint]) -> Option<TopologyHint> {
    let mut best: Option<(NumaMask, bool)> = None;
    for hint in hints {
        let Some(mask) = hint.affinity else { continue };
        best = match best {
            None => Some((mask, hint.preferred)),
            Some((best_mask, best_preferred)) => {
                let better = (hint.preferred && !best_preferred)
                    || (hint.preferred == best_preferred && mask.is_narrower_than(best_mask));
                if better {
                    Some((mask, hint.preferred))
                } else {
                    Some((best_mask, best_preferred))
                }
            }
        };
    }
    best.map(|(mask, preferred)| TopologyHint::new(mask, preferred))
}

/// The provider answer for the topology manager: `None` (the kubelet's nil
/// map) and an empty map both mean no preference; an empty list for a
/// resource means it cannot be placed.
pub(crate) fn to_provider_hints(hints: Option<HintMap>) -> ProviderHints {
    let Some(hints) = hints else {
        return ProviderHints::no_preference();
    };
    ProviderHints {
        by_resource: hints
            .into_iter()
            .map(|(resource, list)| (resource, ResourceHints::from_list(list)))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine_state::fixture::*;
    use crate::machine_state::{MEMORY, MachineState};

    fn m(nodes: &[usize]) -> NumaMask {
        NumaMask::from_nodes(nodes.iter().copied())
    }

    fn hint(nodes: &[usize], preferred: bool) -> TopologyHint {
        TopologyHint::new(m(nodes), preferred)
    }

    fn requested(entries: &[(&str, u64)]) -> Requested {
        entries.iter().map(|&(r, v)| (r.to_string(), v)).collect()
    }

    fn hints_for(state: &MachineState, req: &Requested) -> HintMap {
        calculate(state, &ReusableMemory::default(), "pod2", req)
    }

    /// kubelet: "should calculate new topology hints, when the container
    /// does not exist under assignments".
    #[test]
    fn a_group_without_free_huge_pages_is_skipped_and_wider_masks_are_not_preferred() {
        let state = machine_state(vec![
            node(0, &[(MEMORY, 1536 * MB, 0), (HUGEPAGES_1GI, GB, 0)], &[0, 1], 2),
            node(1, &[(MEMORY, 1536 * MB, GB), (HUGEPAGES_1GI, GB, 0)], &[0, 1], 2),
            node(2, &[(MEMORY, 1536 * MB, 1536 * MB), (HUGEPAGES_1GI, GB, GB)], &[2], 0),
            node(3, &[(MEMORY, 1536 * MB, 1536 * MB), (HUGEPAGES_1GI, GB, GB)], &[3], 0),
        ]);
        let expected = vec![hint(&[2], true), hint(&[3], true), hint(&[2, 3], false)];
        let hints = hints_for(&state, &requested(&[(MEMORY, GB), (HUGEPAGES_1GI, GB)]));
        assert_eq!(hints.get(MEMORY), Some(&expected));
        assert_eq!(hints.get(HUGEPAGES_1GI), Some(&expected));
    }

    /// kubelet: "should not return preferred hints with multiple NUMA nodes
    /// for the pod with resources satisfied by a single NUMA node".
    #[test]
    fn a_group_hint_is_not_preferred_when_one_node_could_hold_the_request() {
        let state = machine_state(vec![
            node(0, &[(MEMORY, 1536 * MB, 0), (HUGEPAGES_2MI, 20 * MB, 0)], &[0, 1], 2),
            node(
                1,
                &[(MEMORY, 1536 * MB, GB), (HUGEPAGES_2MI, 20 * MB, 16 * MB)],
                &[0, 1],
                2,
            ),
        ]);
        let hints = hints_for(&state, &requested(&[(MEMORY, GB), (HUGEPAGES_2MI, 16 * MB)]));
        assert_eq!(hints.get(MEMORY), Some(&vec![hint(&[0, 1], false)]));
        assert_eq!(hints.get(HUGEPAGES_2MI), Some(&vec![hint(&[0, 1], false)]));
    }

    #[test]
    fn nodes_with_single_node_allocations_never_join_a_group() {
        // 0008-like fragmentation: each node has single-node allocations,
        // neither can hold the request alone, so nothing fits at all.
        let state = machine_state(vec![
            node(0, &[(MEMORY, 30 * GB, 20 * GB)], &[0], 1),
            node(1, &[(MEMORY, 30 * GB, 15 * GB)], &[1], 1),
        ]);
        assert_eq!(
            hints_for(&state, &requested(&[(MEMORY, 18 * GB)])).get(MEMORY),
            Some(&vec![hint(&[0], true)])
        );
        assert!(hints_for(&state, &requested(&[(MEMORY, 25 * GB)])).is_empty());
    }

    #[test]
    fn cpu_less_and_empty_nodes_take_part_in_the_masks() {
        let state = machine_state(vec![
            node(0, &[(MEMORY, 4 * GB, 4 * GB)], &[0], 0),
            node(1, &[(MEMORY, 0, 0)], &[1], 0),
            node(2, &[(MEMORY, 4 * GB, 4 * GB)], &[2], 0),
        ]);
        let hints = hints_for(&state, &requested(&[(MEMORY, 6 * GB)]));
        assert_eq!(
            hints.get(MEMORY),
            Some(&vec![hint(&[0, 2], true), hint(&[0, 1, 2], false)])
        );
    }

    #[test]
    fn init_container_memory_on_the_same_mask_counts_as_free() {
        let state = machine_state(vec![node(0, &[(MEMORY, 4 * GB, GB)], &[0], 1)]);
        let mut reuse = ReusableMemory::default();
        let p = crate::requests::fixture::pod(
            "p",
            vec![crate::requests::fixture::container("init", &[])],
            vec![crate::requests::fixture::container("app", &[])],
        );
        let init_block = Block {
            affinity: m(&[0]),
            resource: MEMORY.to_string(),
            size: 3 * GB,
        };
        reuse.record(&p, &p.init_containers[0], &[init_block]);
        let req = requested(&[(MEMORY, 4 * GB)]);
        assert_eq!(
            calculate(&state, &reuse, "p", &req).get(MEMORY),
            Some(&vec![hint(&[0], true)])
        );
        assert!(calculate(&state, &reuse, "other", &req).is_empty());
    }

    #[test]
    fn regenerated_hints_need_blocks_matching_the_request() {
        let block = |r: &str, size| Block {
            affinity: m(&[0]),
            resource: r.to_string(),
            size,
        };
        let req = requested(&[(MEMORY, GB), (HUGEPAGES_1GI, GB)]);
        let both = [block(MEMORY, GB), block(HUGEPAGES_1GI, GB)];
        let regenerated = regenerate(&both, &req).expect("matching blocks");
        assert_eq!(regenerated.get(HUGEPAGES_1GI), Some(&vec![hint(&[0], true)]));
        // kubelet: number of blocks, resource and size must all match.
        assert_eq!(regenerate(&both[..1], &req), None);
        assert_eq!(regenerate(&[block(MEMORY, GB), block(HUGEPAGES_2MI, GB)], &req), None);
        assert_eq!(
            regenerate(&[block(MEMORY, 512 * MB), block(HUGEPAGES_1GI, GB)], &req),
            None
        );
    }

    #[test]
    fn best_hint_prefers_preferred_then_narrower() {
        let list = [
            hint(&[0, 1], false),
            hint(&[1, 2], true),
            hint(&[0, 2], true),
            hint(&[2], false),
        ];
        assert_eq!(best(&list), Some(hint(&[0, 2], true)));
        assert_eq!(best(&[hint(&[1], false), hint(&[0], false)]), Some(hint(&[0], false)));
        assert_eq!(best(&[]), None);
    }

    #[test]
    fn no_hints_is_no_preference_and_an_empty_list_is_impossible() {
        assert!(to_provider_hints(None).is_empty());
        assert!(to_provider_hints(Some(HintMap::new())).is_empty());
        let impossible = to_provider_hints(Some([(MEMORY.to_string(), Vec::new())].into()));
        assert_eq!(impossible.by_resource.get(MEMORY), Some(&ResourceHints::Impossible));
    }
}
