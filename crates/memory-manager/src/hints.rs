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

use topoalign_model::{HintRule, MAX_NUMA_NODES, NumaMask, ProviderHints, ResourceHints, SharedHintRule, TopologyHint};

use crate::init_reuse::ReusableMemory;
use crate::machine_state::{Block, MachineState};
use crate::requests::Requested;

/// Hints per resource name, as the kubelet's `map[string][]TopologyHint`.
pub(crate) type HintMap = BTreeMap<String, ResourceHints>;

/// The Static policy's hint list as a rule (the same list serves every
/// requested resource). See the module doc for the three tests a mask must
/// pass; nothing here enumerates the 2^n masks unless asked to.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct MemoryHintRule {
    universe: NumaMask,
    columns: Vec<ResourceColumns>,
    /// Each node's group (itself when in no multi-node group).
    cells: [NumaMask; MAX_NUMA_NODES],
    /// Nodes holding at least one block.
    assigned: NumaMask,
    /// Masks on which the pod's init containers left reusable memory, with
    /// the amount per column.
    reuse: Vec<(NumaMask, Vec<u64>)>,
    min_affinity_size: u32,
}

impl std::fmt::Debug for MemoryHintRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let requests: Vec<(&str, u64)> = self.columns.iter().map(|c| (c.resource.as_str(), c.size)).collect();
        f.debug_struct("MemoryHintRule")
            .field("requests", &requests)
            .field("nodes", &self.universe)
            .field("assigned", &self.assigned)
            .field("min_affinity_size", &self.min_affinity_size)
            .finish_non_exhaustive()
    }
}

impl MemoryHintRule {
    /// The rule for `requested` on the current state (kubelet
    /// `calculateHints`). `None` when no mask can hold the request.
    pub(crate) fn new(
        state: &MachineState,
        reusable: &ReusableMemory,
        pod_uid: &str,
        requested: &Requested,
    ) -> Option<MemoryHintRule> {
        let universe = state.numa_mask();
        let columns: Vec<ResourceColumns> = requested
            .iter()
            .map(|(resource, &size)| ResourceColumns::new(state, resource, size))
            .collect();
        let mut cells = [NumaMask::EMPTY; MAX_NUMA_NODES];
        let mut assigned = NumaMask::EMPTY;
        // The universe is the state's nodes: walk them rather than look
        // each up.
        for (&node, numa) in &state.nodes {
            cells[node] = numa.cells;
            if numa.assignments > 0 {
                assigned = assigned | NumaMask::single(node);
            }
        }
        let reuse = reusable
            .masks(pod_uid)
            .into_iter()
            .map(|mask| {
                (
                    mask,
                    columns
                        .iter()
                        .map(|c| reusable.get(pod_uid, mask, &c.resource))
                        .collect(),
                )
            })
            .collect();
        let min_affinity_size = fewest_nodes(universe, |mask| {
            columns.iter().all(|c| c.allocatable_on(mask) >= c.size)
        })
        .unwrap_or(universe.count());
        let rule = MemoryHintRule {
            universe,
            columns,
            cells,
            assigned,
            reuse,
            min_affinity_size,
        };
        rule.narrowest_count().is_some().then_some(rule)
    }

    /// Rule 2 of the module doc, as `calculateHints` applies it.
    fn group_rule_allows(&self, mask: NumaMask) -> bool {
        if mask.count() == 1 {
            return mask.nodes().all(|node| self.cells[node].count() <= 1);
        }
        mask.nodes()
            .all(|node| !self.assigned.contains(node) || (self.cells[node].count() != 1 && self.cells[node] == mask))
    }

    fn reusable_on(&self, mask: NumaMask, column: usize) -> u64 {
        self.reuse
            .iter()
            .find(|(m, _)| *m == mask)
            .map_or(0, |(_, amounts)| amounts[column])
    }

    /// The best hint (kubelet `findBestHint`): preferred first, then the
    /// narrowest. `within_supersets_of`: only hints containing that mask
    /// (kubelet `extendTopologyManagerHint`).
    pub(crate) fn best(&self, containing: NumaMask) -> Option<TopologyHint> {
        let rest = self.universe.without(containing);
        let supersets_of_size = |size: u32| {
            let extra = size.checked_sub(containing.count());
            extra.into_iter().flat_map(move |extra| {
                // Adding disjoint nodes keeps the increasing value order.
                let pool = if extra == 0 {
                    None
                } else {
                    Some(NumaMask::subsets_of_size(rest, extra))
                };
                let base = (extra == 0).then_some(containing);
                base.into_iter()
                    .chain(pool.into_iter().flatten().map(move |add| add | containing))
            })
        };
        let preferred = supersets_of_size(self.min_affinity_size).find(|&m| self.classify(m) == Some(true));
        if let Some(mask) = preferred {
            return Some(TopologyHint::new(mask, true));
        }
        (containing.count().max(1)..=self.universe.count()).find_map(|size| {
            supersets_of_size(size).find_map(|m| self.classify(m).map(|preferred| TopologyHint::new(m, preferred)))
        })
    }
}

impl HintRule for MemoryHintRule {
    fn universe(&self) -> NumaMask {
        self.universe
    }

    fn classify(&self, mask: NumaMask) -> Option<bool> {
        let fits = !mask.is_empty()
            && mask.is_subset_of(self.universe)
            && self.columns.iter().all(|c| c.allocatable_on(mask) >= c.size)
            && self.group_rule_allows(mask)
            && self
                .columns
                .iter()
                .enumerate()
                .all(|(i, c)| c.free_on(mask).wrapping_add(self.reusable_on(mask, i)) >= c.size);
        fits.then(|| mask.count() == self.min_affinity_size)
    }

    /// Hints are single nodes, existing groups, masks with reusable init
    /// memory, and multi-node masks of unassigned nodes — the last upward
    /// closed, so only the widest needs testing.
    fn has_hint_between(&self, must: NumaMask, within: NumaMask) -> bool {
        let fits =
            |mask: NumaMask| must.is_subset_of(mask) && mask.is_subset_of(within) && self.classify(mask).is_some();
        let singles = (within & self.universe).nodes().map(NumaMask::single);
        let groups = self.assigned.nodes().map(|n| self.cells[n]).filter(|g| g.count() > 1);
        let reused = self.reuse.iter().map(|(m, _)| *m);
        let widest_unassigned = within.without(self.assigned) & self.universe;
        singles.chain(groups).chain(reused).any(fits) || (widest_unassigned.count() >= 2 && fits(widest_unassigned))
    }

    fn preferred_count(&self) -> Option<u32> {
        Some(self.min_affinity_size)
    }

    fn preferred_single_nodes(&self, within: NumaMask) -> NumaMask {
        if self.min_affinity_size != 1 {
            return NumaMask::EMPTY;
        }
        // `classify` of each single node, read off the columns directly.
        let nodes = (self.universe & within).nodes().filter(|&n| {
            let node = NumaMask::single(n);
            self.cells[n].count() <= 1
                && self.columns.iter().enumerate().all(|(i, c)| {
                    c.allocatable[n] >= c.size && c.free[n].wrapping_add(self.reusable_on(node, i)) >= c.size
                })
        });
        NumaMask::from_nodes(nodes)
    }
}

/// The fewest nodes of `universe` forming a mask that passes `fits`
/// (monotone: a wider mask passes whenever a narrower one does). Sizes are
/// tried upward; the first size's masks are tried in value order.
fn fewest_nodes(universe: NumaMask, fits: impl Fn(NumaMask) -> bool) -> Option<u32> {
    if !fits(universe) {
        return None;
    }
    (1..=universe.count()).find(|&size| NumaMask::subsets_of_size(universe, size).any(&fits))
}

/// The hints for `requested` on the current state (kubelet
/// `calculateHints`), one entry per requested resource sharing one rule.
/// Empty when no mask can hold the request.
pub(crate) fn calculate(
    state: &MachineState,
    reusable: &ReusableMemory,
    pod_uid: &str,
    requested: &Requested,
) -> HintMap {
    let Some(rule) = MemoryHintRule::new(state, reusable, pod_uid, requested) else {
        return HintMap::new();
    };
    let shared = SharedHintRule::new(rule);
    // Inserted one by one in the request's (ascending) order: cheaper for
    // these few entries than `collect`, which buffers and sorts.
    let mut hints = HintMap::new();
    for resource in requested.keys() {
        hints.insert((*resource).to_owned(), ResourceHints::Rule(shared.clone()));
    }
    hints
}

/// One requested resource's allocatable and free bytes per NUMA id, read
/// once so mask tests only add numbers.
#[derive(Clone, PartialEq, Eq)]
struct ResourceColumns {
    resource: String,
    size: u64,
    allocatable: [u64; MAX_NUMA_NODES],
    free: [u64; MAX_NUMA_NODES],
}

impl ResourceColumns {
    fn new(state: &MachineState, resource: &str, size: u64) -> Self {
        let mut columns = ResourceColumns {
            resource: resource.to_string(),
            size,
            allocatable: [0; MAX_NUMA_NODES],
            free: [0; MAX_NUMA_NODES],
        };
        // A node without the resource reads as empty: its columns stay 0.
        // Each node lists a handful of resources whose names mostly differ
        // in length from the one asked (`memory`, `hugepages-2Mi`): a walk
        // comparing lengths first reads fewer bytes than the tree's ordered
        // search.
        for (&node, numa) in &state.nodes {
            if let Some((_, table)) = numa.memory.iter().find(|(name, _)| name.as_str() == resource) {
                columns.allocatable[node] = table.allocatable;
                columns.free[node] = table.free;
            }
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

/// The hints of a container that already has memory (kubelet
/// `regenerateHints`): its blocks' masks, preferred. `None` ("no
/// preference") when the blocks do not match the request exactly.
pub(crate) fn regenerate(blocks: &[Block], requested: &Requested) -> Option<HintMap> {
    if blocks.len() != requested.len() {
        return None;
    }
    let mut lists: BTreeMap<String, Vec<TopologyHint>> =
        requested.keys().map(|r| ((*r).to_owned(), Vec::new())).collect();
    for block in blocks {
        if requested.get(block.resource.as_str()) != Some(&block.size) {
            return None;
        }
        lists
            .entry(block.resource.clone())
            .or_default()
            .push(TopologyHint::new(block.affinity, true));
    }
    Some(
        lists
            .into_iter()
            .map(|(resource, list)| (resource, ResourceHints::from_list(list)))
            .collect(),
    )
}

/// The provider answer for the topology manager: `None` (the kubelet's nil
/// map) and an empty map both mean no preference; an empty list for a
/// resource means it cannot be placed.
pub(crate) fn to_provider_hints(hints: Option<HintMap>) -> ProviderHints {
    let Some(hints) = hints else {
        return ProviderHints::no_preference();
    };
    ProviderHints { by_resource: hints }
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

    fn requested<'a>(entries: &[(&'a str, u64)]) -> Requested<'a> {
        entries.iter().copied().collect()
    }

    /// The explicit lists, as the kubelet's tables write them.
    fn hints_for(state: &MachineState, req: &Requested) -> BTreeMap<String, Vec<TopologyHint>> {
        calculate(state, &ReusableMemory::default(), "pod2", req)
            .into_iter()
            .map(|(resource, hints)| (resource, hints.to_list().unwrap_or_default()))
            .collect()
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
            calculate(&state, &reuse, "p", &req)
                .get(MEMORY)
                .and_then(ResourceHints::to_list),
            Some(vec![hint(&[0], true)])
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
        assert_eq!(
            regenerated.get(HUGEPAGES_1GI),
            Some(&ResourceHints::Hints(vec![hint(&[0], true)]))
        );
        // kubelet: number of blocks, resource and size must all match.
        assert_eq!(regenerate(&both[..1], &req), None);
        assert_eq!(regenerate(&[block(MEMORY, GB), block(HUGEPAGES_2MI, GB)], &req), None);
        assert_eq!(
            regenerate(&[block(MEMORY, 512 * MB), block(HUGEPAGES_1GI, GB)], &req),
            None
        );
    }

    /// kubelet `findBestHint` / `extendTopologyManagerHint`: preferred
    /// first, then the narrowest; extension only among supersets.
    #[test]
    fn best_hint_prefers_preferred_then_narrower() {
        let free = |id| node(id, &[(MEMORY, 4 * GB, 4 * GB)], &[id], 0);
        let state = machine_state(vec![free(0), free(1), free(2), free(3)]);
        let rule = MemoryHintRule::new(&state, &ReusableMemory::default(), "p", &requested(&[(MEMORY, 6 * GB)]))
            .expect("fits");
        assert_eq!(rule.best(NumaMask::EMPTY), Some(hint(&[0, 1], true)));
        assert_eq!(rule.best(m(&[2])), Some(hint(&[0, 2], true)));
        assert_eq!(rule.best(m(&[0, 1, 3])), Some(hint(&[0, 1, 3], false)));
        // Node 0 serves a single-node allocation: it cannot join a group.
        let busy = machine_state(vec![
            node(0, &[(MEMORY, 4 * GB, 4 * GB)], &[0], 1),
            free(1),
            free(2),
            free(3),
        ]);
        let rule =
            MemoryHintRule::new(&busy, &ReusableMemory::default(), "p", &requested(&[(MEMORY, 6 * GB)])).expect("fits");
        assert_eq!(rule.best(NumaMask::EMPTY), Some(hint(&[1, 2], true)));
        assert_eq!(rule.best(m(&[0])), None);
    }

    #[test]
    fn no_hints_is_no_preference_and_an_empty_list_is_impossible() {
        assert!(to_provider_hints(None).is_empty());
        assert!(to_provider_hints(Some(HintMap::new())).is_empty());
        let impossible = to_provider_hints(Some([(MEMORY.to_string(), ResourceHints::Impossible)].into()));
        assert_eq!(impossible.by_resource.get(MEMORY), Some(&ResourceHints::Impossible));
    }

    mod rule_properties {
        use proptest::prelude::*;
        use topoalign_model::{HintRule, NumaMask, TopologyHint};

        use super::*;

        /// Four nodes, each free or holding a single-node allocation or part
        /// of the {0,1} group.
        fn state() -> impl Strategy<Value = MachineState> {
            (proptest::collection::vec((1u64..6, 0u64..6, 0u8..3), 4)).prop_map(|nodes| {
                let group = nodes[0].2 == 2 && nodes[1].2 == 2;
                machine_state(
                    nodes
                        .iter()
                        .enumerate()
                        .map(|(id, &(allocatable, free, kind))| {
                            let free = free.min(allocatable);
                            let (cells, assignments): (Vec<usize>, i64) = match kind {
                                2 if group && id < 2 => (vec![0, 1], 1),
                                1 => (vec![id], 1),
                                _ => (vec![id], 0),
                            };
                            node(id, &[(MEMORY, allocatable * GB, free * GB)], &cells, assignments)
                        })
                        .collect(),
                )
            })
        }

        /// The kubelet's `findBestHint` over an explicit list.
        fn best_of(list: &[TopologyHint]) -> Option<TopologyHint> {
            list.iter()
                .copied()
                .min_by(|a, b| b.preferred.cmp(&a.preferred).then_with(|| a.affinity.cmp(&b.affinity)))
        }

        proptest! {
            #[test]
            fn rule_answers_match_its_list(state in state(), need in 1u64..12, must in 0u64..16, within in 0u64..16) {
                let Some(rule) = MemoryHintRule::new(&state, &ReusableMemory::default(), "p", &requested(&[(MEMORY, need * GB)])) else {
                    return Ok(());
                };
                let list = rule.to_list();
                let (must, within) = (NumaMask::from_bits(must), NumaMask::from_bits(within));
                let between = list.iter().any(|h| h.affinity.is_some_and(|a| must.is_subset_of(a) && a.is_subset_of(within)));
                prop_assert_eq!(rule.has_hint_between(must, within), between);
                let containing: Vec<TopologyHint> =
                    list.iter().copied().filter(|h| h.affinity.is_some_and(|a| must.is_subset_of(a))).collect();
                prop_assert_eq!(rule.best(must), best_of(&containing));
                prop_assert_eq!(rule.narrowest_count(), list.iter().filter_map(|h| h.affinity).map(NumaMask::count).min());
                let singles = NumaMask::from_nodes(
                    list.iter()
                        .filter(|h| h.preferred)
                        .filter_map(|h| h.affinity)
                        .filter(|a| a.count() == 1 && a.is_subset_of(within))
                        .flat_map(NumaMask::nodes),
                );
                prop_assert_eq!(rule.preferred_single_nodes(within), singles);
            }
        }
    }
}
