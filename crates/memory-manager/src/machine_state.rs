//! The Static policy's memory table: per NUMA node and per memory resource
//! (`memory`, `hugepages-<size>`), how much there is, how much the system
//! keeps, how much pods hold and how much is free; plus each node's
//! multi-NUMA group (the kubelet's `state.NUMANodeMap`).
//!
//! Owns: building the table from the machine and the `reservedMemory`
//! reservation (`getDefaultMachineState`), taking memory for a block
//! (`updateMachineState`) and giving it back (`RemoveContainer`). Must not
//! touch: which pod holds what (that is [`crate::policy_static`]) or hint
//! generation.
//!
//! Sizes are bytes in `u64` with wrapping arithmetic on purpose: the kubelet
//! computes them as Go `uint64`, so a reservation larger than a pool wraps
//! around instead of failing, and exactness means doing the same.

use std::collections::BTreeMap;

use topoalign_model::{Machine, NumaMask, hugepage_resource_name};

/// The regular memory resource name.
pub(crate) const MEMORY: &str = "memory";

/// Huge page sizes every NUMA node reports, empty or not (cAdvisor on
/// x86-64 lists both pools on every node; the conformance oracle does too).
const ALWAYS_REPORTED_HUGEPAGE_SIZES: [u64; 2] = [2 << 20, 1 << 30];

pub(crate) use topoalign_model::resource_name::is_hugepages as is_hugepage_resource;

/// The reservation per NUMA node and resource, in bytes (kubelet
/// `systemReservedMemory`, built from `reservedMemory`).
pub(crate) type SystemReserved = BTreeMap<usize, BTreeMap<String, u64>>;

/// One resource on one NUMA node, in bytes (kubelet `state.MemoryTable`);
/// the checkpoint records it as it is (public as
/// [`crate::MemoryTableState`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryTable {
    pub total: u64,
    pub system_reserved: u64,
    pub allocatable: u64,
    pub reserved: u64,
    pub free: u64,
}

impl MemoryTable {
    fn new(total: u64, system_reserved: u64, allocatable: u64) -> Self {
        MemoryTable {
            total,
            system_reserved,
            allocatable,
            reserved: 0,
            free: allocatable,
        }
    }
}

/// One NUMA node (kubelet `state.NUMANodeState`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NumaNodeState {
    pub memory: BTreeMap<String, MemoryTable>,
    /// Blocks (one per container and resource) currently placed on the node.
    pub assignments: i64,
    /// The nodes this node's allocations span (kubelet `Cells`): just the
    /// node itself, or the multi-NUMA group it belongs to. Empty for a
    /// node past 63 on a machine wider than masks
    /// (`Machine::fits_numa_masks`): such a node stays alone in its group,
    /// as every allocation there crashes the kubelet first. Read it as ids
    /// with [`NumaNodeState::cell_ids`].
    pub cells: NumaMask,
}

impl NumaNodeState {
    /// The group of node `id` when it is alone (see `cells`).
    pub fn alone(id: usize) -> NumaMask {
        NumaMask::from_maskable_nodes([id])
    }

    /// The group of this node, `id`, as NUMA ids (ascending).
    pub fn cell_ids(&self, id: usize) -> Vec<usize> {
        if self.cells.is_empty() {
            vec![id]
        } else {
            self.cells.nodes().collect()
        }
    }

    /// The `cells` of node `id` for a group read as ids; `None` for a group
    /// a mask cannot hold (a node past 63 sharing its group).
    pub fn cells_of_ids(id: usize, ids: &[usize]) -> Option<NumaMask> {
        if ids == [id] {
            return Some(NumaNodeState::alone(id));
        }
        ids.iter()
            .all(|&n| n < topoalign_model::MAX_NUMA_NODES)
            .then(|| NumaMask::from_nodes(ids.iter().copied()))
    }
}

/// One piece of a container's pinned memory (kubelet `state.Block`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub affinity: NumaMask,
    pub resource: String,
    pub size: u64,
}

/// Every NUMA node's table, keyed by NUMA id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MachineState {
    pub nodes: BTreeMap<usize, NumaNodeState>,
}

impl MachineState {
    /// The table of a machine with nothing allocated (kubelet
    /// `getDefaultMachineState`): regular memory allocatable is the node's
    /// memory minus its reservation minus its huge page pools; each huge
    /// page pool's allocatable is the pool minus its reservation.
    pub fn new(machine: &Machine, system_reserved: &SystemReserved) -> Self {
        let mut sizes: Vec<u64> = ALWAYS_REPORTED_HUGEPAGE_SIZES.to_vec();
        sizes.extend(machine.hugepage_sizes());
        sizes.sort_unstable();
        sizes.dedup();

        let nodes = machine
            .numa_nodes()
            .iter()
            .map(|node| {
                let reserved_on_node = system_reserved.get(&node.id);
                let reserved_for = |resource: &str| {
                    reserved_on_node
                        .and_then(|by_resource| by_resource.get(resource))
                        .copied()
                        .unwrap_or(0)
                };
                let mut memory = BTreeMap::new();
                let mut hugepages_total = 0u64;
                for &page_size in &sizes {
                    // cAdvisor reports whole pages, so a pool that is not a
                    // multiple of its page size counts its whole pages only.
                    let pool = node.hugepages.get(&page_size).copied().unwrap_or(0);
                    let total = pool.checked_div(page_size).map_or(0, |pages| pages * page_size);
                    let name = hugepage_resource_name(page_size);
                    let reserved = reserved_for(&name);
                    memory.insert(name, MemoryTable::new(total, reserved, total.wrapping_sub(reserved)));
                    hugepages_total = hugepages_total.wrapping_add(total);
                }
                // A huge page size that only the reservation names: an empty
                // pool, reserved anyway (the kubelet would list it the same
                // way once cAdvisor reports the size).
                if let Some(by_resource) = reserved_on_node {
                    for (name, &reserved) in by_resource {
                        if is_hugepage_resource(name) && !memory.contains_key(name) {
                            memory.insert(name.clone(), MemoryTable::new(0, reserved, 0u64.wrapping_sub(reserved)));
                        }
                    }
                }
                let reserved = reserved_for(MEMORY);
                let allocatable = node.memory.wrapping_sub(reserved).wrapping_sub(hugepages_total);
                memory.insert(MEMORY.to_string(), MemoryTable::new(node.memory, reserved, allocatable));
                let state = NumaNodeState {
                    memory,
                    assignments: 0,
                    cells: NumaNodeState::alone(node.id),
                };
                (node.id, state)
            })
            .collect();
        MachineState { nodes }
    }

    /// All NUMA node ids as a mask.
    pub fn numa_mask(&self) -> NumaMask {
        NumaMask::from_nodes(self.nodes.keys().copied())
    }

    /// The table of `resource` on `node`; a resource the node does not
    /// list reads as empty.
    pub fn table(&self, node: usize, resource: &str) -> MemoryTable {
        self.nodes
            .get(&node)
            .and_then(|n| n.memory.get(resource))
            .copied()
            .unwrap_or_default()
    }

    /// Sum of `field` of `resource` over the nodes of `mask` (Go `uint64`
    /// sum, wrapping).
    pub fn sum(&self, mask: NumaMask, resource: &str, field: fn(&MemoryTable) -> u64) -> u64 {
        mask.nodes()
            .map(|node| field(&self.table(node, resource)))
            .fold(0u64, u64::wrapping_add)
    }

    /// The node's group, or an empty mask for a node the machine lacks.
    pub fn cells(&self, node: usize) -> NumaMask {
        self.nodes.get(&node).map_or(NumaMask::EMPTY, |n| n.cells)
    }

    /// How many blocks sit on the node.
    pub fn assignments(&self, node: usize) -> i64 {
        self.nodes.get(&node).map_or(0, |n| n.assignments)
    }

    /// Whether the free memory on `mask` covers every request (kubelet
    /// `isAffinitySatisfyRequest`; init-container memory the pod could
    /// re-use is deliberately not counted, as in the kubelet).
    pub fn covers(&self, mask: NumaMask, requested: &BTreeMap<&str, u64>) -> bool {
        requested
            .iter()
            .all(|(resource, &size)| self.sum(mask, resource, |t| t.free) >= size)
    }

    /// Whether a multi-node `mask` mixes with allocations it may not join
    /// (kubelet `isAffinityViolatingNUMAAllocations`): a node that already
    /// serves single-node allocations, or a node of a different group. A
    /// single-node mask never violates the rule here.
    pub fn violates_group_rule(&self, mask: NumaMask) -> bool {
        if mask.count() == 1 {
            return false;
        }
        mask.nodes()
            .any(|node| self.assignments(node) != 0 && (self.cells(node).count() == 1 || self.cells(node) != mask))
    }

    /// Takes `size` bytes of `resource` for a block on `mask` (kubelet
    /// `updateMachineState`): every node of the mask counts one more
    /// assignment and joins the mask's group; the bytes come from the
    /// nodes' free memory in ascending node order. Whatever the nodes cannot
    /// supply is silently dropped, as in the kubelet.
    pub fn reserve(&mut self, mask: NumaMask, resource: &str, mut size: u64) {
        for node in mask.nodes() {
            let Some(state) = self.nodes.get_mut(&node) else {
                continue;
            };
            state.assignments += 1;
            state.cells = mask;
            if size == 0 {
                continue;
            }
            let Some(table) = state.memory.get_mut(resource) else {
                continue;
            };
            if table.free == 0 {
                continue;
            }
            if table.free >= size {
                table.reserved = table.reserved.wrapping_add(size);
                table.free -= size;
                size = 0;
            } else {
                size -= table.free;
                table.reserved = table.reserved.wrapping_add(table.free);
                table.free = 0;
            }
        }
    }

    /// Gives a block back (kubelet `RemoveContainer`'s loop): every node of
    /// the block's mask counts one assignment less and leaves its group when
    /// none remain; the bytes return to the nodes' free memory in ascending
    /// node order, each node giving back at most what it holds reserved.
    pub fn release(&mut self, block: &Block) {
        let mut size = block.size;
        for node in block.affinity.nodes() {
            let Some(state) = self.nodes.get_mut(&node) else {
                continue;
            };
            state.assignments -= 1;
            if state.assignments == 0 {
                state.cells = NumaNodeState::alone(node);
            }
            if size == 0 {
                continue;
            }
            let Some(table) = state.memory.get_mut(&block.resource) else {
                continue;
            };
            if table.reserved == 0 {
                continue;
            }
            if table.reserved < size {
                size -= table.reserved;
                table.free = table.free.wrapping_add(table.reserved);
                table.reserved = 0;
            } else {
                table.free = table.free.wrapping_add(size);
                table.reserved -= size;
                size = 0;
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod fixture {
    //! A compact way to write a machine state the way the kubelet's tests
    //! spell theirs out: per node, `(allocatable, free)` per resource, the
    //! group and the assignment count.

    use super::*;

    pub const MB: u64 = 1 << 20;
    pub const GB: u64 = 1 << 30;
    pub const HUGEPAGES_1GI: &str = "hugepages-1Gi";
    pub const HUGEPAGES_2MI: &str = "hugepages-2Mi";

    /// One node: `resources` are `(name, allocatable, free)`.
    pub fn node(
        id: usize,
        resources: &[(&str, u64, u64)],
        cells: &[usize],
        assignments: i64,
    ) -> (usize, NumaNodeState) {
        let memory = resources
            .iter()
            .map(|&(name, allocatable, free)| {
                let table = MemoryTable {
                    total: allocatable,
                    system_reserved: 0,
                    allocatable,
                    reserved: allocatable - free,
                    free,
                };
                (name.to_string(), table)
            })
            .collect();
        let state = NumaNodeState {
            memory,
            assignments,
            cells: NumaMask::from_nodes(cells.iter().copied()),
        };
        (id, state)
    }

    pub fn machine_state(nodes: Vec<(usize, NumaNodeState)>) -> MachineState {
        MachineState {
            nodes: nodes.into_iter().collect(),
        }
    }

    /// `(free)` of one resource per node, in node order.
    pub fn free_of(state: &MachineState, resource: &str) -> Vec<u64> {
        state.nodes.keys().map(|&n| state.table(n, resource).free).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::fixture::*;
    use super::*;
    use topoalign_model::UniformMachine;

    #[test]
    fn default_state_subtracts_reservation_and_huge_pages_from_regular_memory() {
        // The kubelet's "should fill the state with default values": 3Gi
        // node with one 1Gi page, 512Mi reserved.
        let m = UniformMachine::new(1, 0)
            .memory_per_numa(3 * GB)
            .hugepages_per_numa(GB, GB)
            .build()
            .expect("a machine");
        let reserved: SystemReserved = [(0, [(MEMORY.to_string(), 512 * MB)].into())].into();
        let state = MachineState::new(&m, &reserved);
        let memory = state.table(0, MEMORY);
        assert_eq!(
            memory,
            MemoryTable {
                total: 3 * GB,
                system_reserved: 512 * MB,
                allocatable: 1536 * MB,
                reserved: 0,
                free: 1536 * MB
            }
        );
        assert_eq!(state.table(0, HUGEPAGES_1GI).allocatable, GB);
        assert_eq!(state.cells(0), NumaMask::single(0));
    }

    #[test]
    fn both_common_huge_page_pools_are_listed_even_when_empty() {
        let m = UniformMachine::new(2, 0)
            .memory_per_numa(GB)
            .hugepages_on(1, 64 << 10, 4 << 20)
            .build()
            .expect("a machine");
        let state = MachineState::new(&m, &SystemReserved::new());
        for node in [0, 1] {
            let names: Vec<&str> = state.nodes[&node].memory.keys().map(String::as_str).collect();
            assert_eq!(names, ["hugepages-1Gi", "hugepages-2Mi", "hugepages-64Ki", "memory"]);
        }
        assert_eq!(state.table(1, "hugepages-64Ki").allocatable, 4 << 20);
        assert_eq!(state.table(0, "hugepages-64Ki").allocatable, 0);
        assert_eq!(state.table(1, MEMORY).allocatable, GB - (4 << 20));
    }

    #[test]
    fn reserve_fills_nodes_in_ascending_order_and_release_gives_back() {
        let mut state = machine_state(vec![
            node(0, &[(MEMORY, 512 * MB, 512 * MB)], &[0], 0),
            node(1, &[(MEMORY, 512 * MB, 512 * MB)], &[1], 0),
        ]);
        let mask = NumaMask::from_nodes([0, 1]);
        state.reserve(mask, MEMORY, 768 * MB);
        assert_eq!(free_of(&state, MEMORY), [0, 256 * MB]);
        assert_eq!(state.cells(0), mask);
        assert_eq!(state.assignments(1), 1);
        state.release(&Block {
            affinity: mask,
            resource: MEMORY.to_string(),
            size: 768 * MB,
        });
        assert_eq!(free_of(&state, MEMORY), [512 * MB, 512 * MB]);
        assert_eq!(state.cells(0), NumaMask::single(0));
        assert_eq!(state.cells(1), NumaMask::single(1));
    }

    #[test]
    fn group_rule_allows_the_same_group_only() {
        let state = machine_state(vec![
            node(0, &[(MEMORY, GB, 0)], &[0, 1], 1),
            node(1, &[(MEMORY, GB, 0)], &[0, 1], 1),
            node(2, &[(MEMORY, GB, 0)], &[2], 1),
            node(3, &[(MEMORY, GB, GB)], &[3], 0),
        ]);
        let m = |nodes: &[usize]| NumaMask::from_nodes(nodes.iter().copied());
        assert!(!state.violates_group_rule(m(&[0, 1])));
        assert!(state.violates_group_rule(m(&[0, 1, 3])));
        assert!(state.violates_group_rule(m(&[2, 3])));
        assert!(!state.violates_group_rule(m(&[0])));
        assert!(!state.violates_group_rule(m(&[3])));
    }
}
