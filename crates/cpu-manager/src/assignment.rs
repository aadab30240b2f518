//! The CPU allocator: which CPUs out of a free set satisfy a request of `n`
//! CPUs (the kubelet's `cpu_assignment.go`: `takeByTopologyNUMAPacked` and
//! `takeByTopologyNUMADistributed`, chosen by the static policy's
//! `takeByTopology`).
//!
//! Owns: the "packed" best fit (whole NUMA nodes / sockets, whole uncore
//! caches, whole cores, then single threads, each level ordered by how few
//! free CPUs it has, then by id), the spread ordering of
//! `distribute-cpus-across-cores`, and the balanced NUMA distribution of
//! `distribute-cpus-across-numa`.
//! Must not touch: the policy's state (the caller removes what it takes).
//!
//! Exactness notes — the kubelet's quirks are reproduced on purpose, because
//! its answers are the judge:
//! - Orderings are lists, not sets: when a socket spans NUMA nodes (or the
//!   other way round) a group can be listed twice and is then "taken" twice,
//!   counting its CPUs twice against the request.
//! - A core is "free" when its free CPUs number `CPUsPerCore` (a machine-wide
//!   ratio) and a socket when they number `CPUsPerSocket`; taking a free
//!   group takes *all* of its CPUs.
//! - The NUMA distribution remembers its best combination in a Go slice
//!   whose backing array later combinations overwrite; [`GoSlice`] models
//!   that aliasing so the combination actually used is the kubelet's.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use topoalign_model::CpuSet;

use crate::options::StaticPolicyOptions;
use crate::topology::{CpuTopology, Level};

/// How single CPUs are ordered once whole groups are taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuSortingStrategy {
    /// Fill a core before moving to the next (the default).
    Packed,
    /// Spread over cores, by CPU id within each socket
    /// (`distribute-cpus-across-cores`); whole cores are not taken first.
    Spread,
}

/// Why CPUs could not be taken. Display is the kubelet's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TakeError {
    #[error("not enough cpus available to satisfy request: requested={requested}, available={available}")]
    NotEnoughCpus { requested: i64, available: usize },
    #[error("failed to allocate cpus")]
    Failed,
    #[error("accounting error, not enough CPUs allocated, remaining: {0}")]
    TooFewAllocated(i64),
    #[error("accounting error, too many CPUs allocated, remaining: {0}")]
    TooManyAllocated(i64),
}

/// The static policy's `takeByTopology`: picks `count` CPUs out of
/// `available` following the policy options.
///
/// # Errors
/// [`TakeError`] when `available` cannot satisfy `count`.
pub fn take_by_topology(
    topology: &CpuTopology,
    options: &StaticPolicyOptions,
    available: &CpuSet,
    count: i64,
) -> Result<CpuSet, TakeError> {
    let strategy = if options.distribute_cpus_across_cores {
        CpuSortingStrategy::Spread
    } else {
        CpuSortingStrategy::Packed
    };
    if options.distribute_cpus_across_numa {
        let group_size = if options.full_pcpus_only {
            topology.cpus_per_core()
        } else {
            1
        };
        let by_socket = options.align_by_socket && options.distribution_aligns_by_socket;
        return take_numa_distributed(topology, available, count, group_size, strategy, by_socket);
    }
    take_numa_packed(
        topology,
        available,
        count,
        strategy,
        match options.prefer_align_by_uncore_cache {
            false => UncoreCaches::Ignored,
            true => UncoreCaches::Preferred {
                odd_partial: options.partial_uncore_takes_odd_requests,
            },
        },
    )
}

/// Whether the packed allocator takes whole and partial uncore caches before
/// cores, and whether a partial cache may satisfy an odd request (v1.34+).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UncoreCaches {
    Ignored,
    Preferred { odd_partial: bool },
}

/// Which of NUMA nodes and sockets is the larger unit on this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hierarchy {
    /// NUMA nodes hold whole sockets (or match them): `NumSockets >=
    /// NumNUMANodes` in the kubelet's test.
    NumaAboveSockets,
    /// Sockets hold several NUMA nodes.
    SocketsAboveNuma,
}

/// The kubelet's `cpuAccumulator`: the CPUs taken so far, the CPUs still
/// free, and how many are still needed.
struct Accumulator<'t> {
    topology: &'t CpuTopology,
    free: CpuSet,
    needed: i64,
    result: CpuSet,
    hierarchy: Hierarchy,
    strategy: CpuSortingStrategy,
    /// See [`StaticPolicyOptions::partial_uncore_takes_odd_requests`].
    partial_uncore_takes_odd_requests: bool,
}

impl<'t> Accumulator<'t> {
    fn new(topology: &'t CpuTopology, available: &CpuSet, count: i64, strategy: CpuSortingStrategy) -> Self {
        let hierarchy = if topology.num_sockets() >= topology.num_numa_nodes() {
            Hierarchy::NumaAboveSockets
        } else {
            Hierarchy::SocketsAboveNuma
        };
        Accumulator {
            topology,
            free: available.intersection(topology.all_cpus()),
            needed: count,
            result: CpuSet::new(),
            hierarchy,
            strategy,
            partial_uncore_takes_odd_requests: false,
        }
    }

    fn free_in(&self, level: Level, id: u32) -> usize {
        self.free.intersection_len(self.topology.group(level, id))
    }

    /// Distinct `child` ids of the free CPUs whose `parent` id is
    /// `parent_id` (all free CPUs when `parent` is `None`).
    /// Ascending. Walks only the free CPUs (of the parent group), not the
    /// machine.
    fn free_ids(&self, child: Level, parent: Option<(Level, u32)>) -> Vec<u32> {
        let mut ids = Vec::new();
        self.push_free_ids(child, parent, &mut ids);
        ids
    }

    /// [`Accumulator::free_ids`] appended to `out` (what `out` held before
    /// is left alone). Reads the topology's groups (and, under a parent,
    /// the child groups it shares CPUs with), which come ascending and
    /// distinct: a child is listed when it shares a free CPU with the
    /// parent.
    fn push_free_ids(&self, child: Level, parent: Option<(Level, u32)>, out: &mut Vec<u32>) {
        let groups = match parent {
            None => self.topology.groups(child),
            Some((level, id)) => self.topology.children(child, level, id),
        };
        out.reserve(groups.len());
        out.extend(
            groups
                .iter()
                .filter(|(_, cpus)| self.free.intersects(cpus))
                .map(|&(id, _)| id),
        );
    }

    /// The kubelet's `sort`: fewest free CPUs first, then lowest id.
    fn sorted_ids(&self, child: Level, parent: Option<(Level, u32)>) -> Vec<u32> {
        let mut ids = Vec::new();
        self.push_sorted_ids(child, parent, &mut ids);
        ids
    }

    /// [`Accumulator::sorted_ids`] appended to `out`.
    fn push_sorted_ids(&self, child: Level, parent: Option<(Level, u32)>, out: &mut Vec<u32>) {
        let start = out.len();
        self.push_free_ids(child, parent, out);
        // Ids are distinct, so an unstable sort gives the one order. Each
        // key (a group lookup and a count) is worked out once, on the stack
        // for up to `ON_STACK` groups, rather than twice per comparison.
        const ON_STACK: usize = 64;
        let ids = &mut out[start..];
        if ids.len() < 2 {
            return;
        }
        if ids.len() <= ON_STACK {
            let mut keyed = [(0usize, 0u32); ON_STACK];
            for (slot, &id) in keyed.iter_mut().zip(ids.iter()) {
                *slot = (self.free_in(child, id), id);
            }
            let keyed = &mut keyed[..ids.len()];
            keyed.sort_unstable();
            for (id, &(_, sorted)) in ids.iter_mut().zip(keyed.iter()) {
                *id = sorted;
            }
        } else {
            ids.sort_unstable_by_key(|&id| (self.free_in(child, id), id));
        }
    }

    /// For each parent in order, its children sorted: the partial orders the
    /// kubelet concatenates (a child under two parents appears twice).
    fn nested(&self, child: Level, parent: Level, parents: Vec<u32>) -> Vec<u32> {
        let mut children = Vec::new();
        for p in parents {
            self.push_sorted_ids(child, Some((parent, p)), &mut children);
        }
        children
    }

    /// The level whose order `level`'s order is nested in (each parent's
    /// children sorted, parents in their own order); `None`: `level` is
    /// sorted as a whole.
    fn parent_in_order(&self, level: Level) -> Option<Level> {
        match (level, self.hierarchy) {
            (Level::Numa, Hierarchy::NumaAboveSockets) | (Level::Socket, Hierarchy::SocketsAboveNuma) => None,
            (Level::Numa, Hierarchy::SocketsAboveNuma) => Some(Level::Socket),
            (Level::Socket, Hierarchy::NumaAboveSockets) => Some(Level::Numa),
            (Level::Core, Hierarchy::NumaAboveSockets) => Some(Level::Socket),
            (Level::Core, Hierarchy::SocketsAboveNuma) | (Level::UncoreCache, _) => Some(Level::Numa),
        }
    }

    fn sorted_numa_nodes(&self) -> Vec<u32> {
        self.sorted(Level::Numa)
    }

    fn sorted_sockets(&self) -> Vec<u32> {
        self.sorted(Level::Socket)
    }

    fn sorted_cores(&self) -> Vec<u32> {
        self.sorted(Level::Core)
    }

    fn sorted_uncore_caches(&self) -> Vec<u32> {
        self.sorted(Level::UncoreCache)
    }

    /// The groups of `level` in the kubelet's order.
    fn sorted(&self, level: Level) -> Vec<u32> {
        match self.parent_in_order(level) {
            None => self.sorted_ids(level, None),
            Some(parent) => self.nested(level, parent, self.sorted(parent)),
        }
    }

    /// The accumulator as it is now, for reading orders and free groups
    /// while this one takes.
    fn frozen(&self) -> Accumulator<'t> {
        Accumulator {
            topology: self.topology,
            free: self.free.clone(),
            needed: self.needed,
            result: CpuSet::new(),
            hierarchy: self.hierarchy,
            strategy: self.strategy,
            partial_uncore_takes_odd_requests: self.partial_uncore_takes_odd_requests,
        }
    }

    /// Single free CPUs in the order the strategy prefers.
    fn sorted_cpus(&self) -> Vec<u32> {
        let (level, groups) = match self.strategy {
            CpuSortingStrategy::Packed => (Level::Core, self.sorted_cores()),
            CpuSortingStrategy::Spread => (Level::Socket, self.sorted_sockets()),
        };
        groups
            .into_iter()
            .flat_map(|id| {
                self.topology
                    .group(level, id)
                    .iter()
                    .filter(|&cpu| self.free.contains(cpu))
            })
            .collect()
    }

    /// Whether every CPU of the group is free, by the kubelet's yardstick.
    fn is_free(&self, level: Level, id: u32) -> bool {
        let free = self.free_in(level, id);
        match level {
            Level::Numa | Level::UncoreCache => free == self.topology.group(level, id).len(),
            Level::Socket => free == self.topology.cpus_per_socket(),
            Level::Core => free == self.topology.cpus_per_core(),
        }
    }

    fn needs_at_least(&self, n: usize) -> bool {
        self.needed >= n as i64
    }

    fn is_satisfied(&self) -> bool {
        self.needed < 1
    }

    fn is_failed(&self) -> bool {
        self.needed > self.free.len() as i64
    }

    fn take(&mut self, cpus: &CpuSet) {
        self.result.union_with(cpus);
        self.free.difference_with(&self.result);
        self.needed -= cpus.len() as i64;
    }

    /// [`Accumulator::take`] of the one CPU `cpu`.
    fn take_one(&mut self, cpu: u32) {
        self.result.insert(cpu);
        self.free.remove(cpu);
        self.needed -= 1;
    }

    /// `takeFullNUMANodes` / `takeFullSockets` / `takeFullUncore` /
    /// `takeFullCores`: every free group (listed before taking any) whose
    /// size the request still covers.
    fn take_whole(&mut self, level: Level) {
        // Nothing to take when the request no longer covers even the
        // smallest group (it only shrinks while taking): skip listing the
        // groups in order, the costly part.
        let smallest = self.topology.smallest_group(level);
        if !self.needs_at_least(smallest) {
            return;
        }
        // The order and which groups are free are read before taking any
        // (`before`); the order is walked one parent's children at a time
        // and left as soon as the request no longer covers the smallest
        // group, after which the full list would give nothing more.
        let before = self.frozen();
        let topology = self.topology;
        let mut take = |id: u32| {
            if before.is_free(level, id) {
                let group = topology.group(level, id);
                if self.needs_at_least(group.len()) {
                    self.take(group);
                }
            }
            self.needs_at_least(smallest)
        };
        match before.parent_in_order(level) {
            None => {
                for id in before.sorted_ids(level, None) {
                    if !take(id) {
                        return;
                    }
                }
            }
            Some(parent) => {
                let mut children = Vec::new();
                for p in before.sorted(parent) {
                    children.clear();
                    before.push_sorted_ids(level, Some((parent, p)), &mut children);
                    for &id in &children {
                        if !take(id) {
                            return;
                        }
                    }
                }
            }
        }
    }

    /// `takePartialUncore`: the free CPUs of the lowest-numbered cores of
    /// `uncore` that have a free CPU, if they are exactly what is needed.
    fn take_partial_uncore(&mut self, uncore: u32) {
        let per_core = self.topology.cpus_per_core();
        if per_core == 0 {
            return;
        }
        let per_core = per_core as i64;
        let odd_on_smt = self.partial_uncore_takes_odd_requests && self.needed % 2 != 0 && per_core > 1;
        // v1.34 rounds the cores up, so that an odd request can fit.
        let cores_needed = if self.partial_uncore_takes_odd_requests {
            (self.needed + per_core - 1) / per_core
        } else {
            self.needed / per_core
        };
        let mut cores = self.free_ids(Level::Core, Some((Level::UncoreCache, uncore)));
        cores.truncate(usize::try_from(cores_needed).unwrap_or(0));
        let mut cpus = cores.iter().fold(CpuSet::new(), |acc, &core| {
            acc.union(&self.free.intersection(self.topology.group(Level::Core, core)))
        });
        // ...and leaves the highest of those CPUs out when there is one too many.
        if odd_on_smt
            && cpus.len() as i64 > self.needed
            && let Some(highest) = cpus.iter().last()
        {
            cpus.remove(highest);
        }
        if self.needed == cpus.len() as i64 {
            self.take(&cpus);
        }
    }

    /// `takeUncoreCache`: whole uncore caches while the request covers one,
    /// then a part of one cache that holds the whole rest.
    fn take_uncore_cache(&mut self) {
        let per_uncore = self.topology.cpus_per_uncore();
        for uncore in self.sorted_uncore_caches() {
            if self.needs_at_least(per_uncore) {
                self.take_whole(Level::UncoreCache);
            }
            if self.is_satisfied() {
                return;
            }
            self.take_partial_uncore(uncore);
            if self.is_satisfied() {
                return;
            }
        }
    }

    fn take_remaining_cpus(&mut self) {
        for cpu in self.sorted_cpus() {
            self.take_one(cpu);
            if self.is_satisfied() {
                return;
            }
        }
    }

    /// `rangeNUMANodesNeededToSatisfy`: the fewest and most NUMA nodes a
    /// distribution in groups of `group_size` could use.
    fn numa_node_range(&self, group_size: i64) -> (usize, usize) {
        let numa_nodes = self.topology.num_numa_nodes().max(1) as i64;
        let numa_available = self.free_ids(Level::Numa, None).len() as i64;
        let cpus = self.topology.num_cpus() as i64;
        let groups = (cpus - 1) / group_size + 1;
        let groups_per_numa = (groups - 1) / numa_nodes + 1;
        let groups_needed = (self.needed - 1) / group_size + 1;
        let min = (groups_needed - 1) / groups_per_numa + 1;
        let max = groups_needed.min(numa_available);
        (usize::try_from(min).unwrap_or(0), usize::try_from(max).unwrap_or(0))
    }
}

/// `takeByTopologyNUMAPacked`.
fn take_numa_packed(
    topology: &CpuTopology,
    available: &CpuSet,
    count: i64,
    strategy: CpuSortingStrategy,
    uncore_caches: UncoreCaches,
) -> Result<CpuSet, TakeError> {
    let mut acc = Accumulator::new(topology, available, count, strategy);
    let prefer_uncore_cache = match uncore_caches {
        UncoreCaches::Ignored => false,
        UncoreCaches::Preferred { odd_partial } => {
            acc.partial_uncore_takes_odd_requests = odd_partial;
            true
        }
    };
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    if acc.is_failed() {
        return Err(TakeError::NotEnoughCpus {
            requested: count,
            available: available.len(),
        });
    }
    let (first, second) = match acc.hierarchy {
        Hierarchy::NumaAboveSockets => (Level::Numa, Level::Socket),
        Hierarchy::SocketsAboveNuma => (Level::Socket, Level::Numa),
    };
    for level in [first, second] {
        acc.take_whole(level);
        if acc.is_satisfied() {
            return Ok(acc.result);
        }
    }
    if prefer_uncore_cache {
        acc.take_uncore_cache();
        if acc.is_satisfied() {
            return Ok(acc.result);
        }
    }
    if strategy == CpuSortingStrategy::Packed {
        acc.take_whole(Level::Core);
        if acc.is_satisfied() {
            return Ok(acc.result);
        }
    }
    acc.take_remaining_cpus();
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    Err(TakeError::Failed)
}

/// `takeByTopologyNUMADistributed`: spread `count` CPUs evenly (in groups of
/// `group_size`) over the fewest NUMA nodes that can hold them, choosing the
/// combination and the nodes taking the remainder by the lowest "balance"
/// (standard deviation of what stays free per node). `by_socket` (v1.37,
/// `align-by-socket`): combinations within one socket win over any other.
fn take_numa_distributed(
    topology: &CpuTopology,
    available: &CpuSet,
    count: i64,
    group_size: usize,
    strategy: CpuSortingStrategy,
    by_socket: bool,
) -> Result<CpuSet, TakeError> {
    // A group size of 0 only arises on a machine without cores, where the
    // kubelet would divide by zero; packing is the only meaningful answer.
    let g = group_size as i64;
    if g == 0 || count % g != 0 {
        return take_numa_packed(topology, available, count, strategy, UncoreCaches::Ignored);
    }
    let mut acc = Accumulator::new(topology, available, count, strategy);
    if acc.is_satisfied() {
        return Ok(acc.result);
    }
    if acc.is_failed() {
        return Err(TakeError::NotEnoughCpus {
            requested: count,
            available: available.len(),
        });
    }

    let numas = acc.sorted_numa_nodes();
    let (min_numas, max_numas) = acc.numa_node_range(g);
    for k in min_numas..=max_numas {
        let Some(best) = best_distribution(&acc, &numas, k, count, g, by_socket) else {
            continue;
        };
        let combo = best.combo.contents();
        // No node is asked for more whole groups than it has free (v1.37
        // writes this out; before, the choice above already ensured it).
        let distribution = capped_distribution(&acc, &combo, count / combo.len() as i64 / g * g, g);
        for &numa in &combo {
            let in_node = acc.free.intersection(topology.group(Level::Numa, numa));
            // The kubelet ignores this error: a short take surfaces below as
            // an accounting error.
            let cpus =
                take_numa_packed(topology, &in_node, distribution, strategy, UncoreCaches::Ignored).unwrap_or_default();
            acc.take(&cpus);
        }
        let remainder_nodes = best.remainder.map(|s| s.contents()).unwrap_or_default();
        let mut remainder = count - distribution * combo.len() as i64;
        while remainder > 0 {
            let before = remainder;
            for &numa in &remainder_nodes {
                if remainder == 0 {
                    break;
                }
                if (acc.free_in(Level::Numa, numa) as i64) < g {
                    continue;
                }
                let in_node = acc.free.intersection(topology.group(Level::Numa, numa));
                let cpus = take_numa_packed(topology, &in_node, g, strategy, UncoreCaches::Ignored).unwrap_or_default();
                acc.take(&cpus);
                remainder -= g;
            }
            // The kubelet would spin here forever; stop and report the
            // shortfall instead.
            if remainder == before {
                break;
            }
        }
        if acc.needed > 0 {
            return Err(TakeError::TooFewAllocated(acc.needed));
        }
        if acc.needed < 0 {
            return Err(TakeError::TooManyAllocated(acc.needed));
        }
        return Ok(acc.result);
    }
    take_numa_packed(topology, available, count, strategy, UncoreCaches::Ignored)
}

/// The combination of NUMA nodes (and the subset taking the remainder)
/// chosen for one combination size.
struct Distribution {
    combo: GoSlice,
    remainder: Option<GoSlice>,
}

/// `distribution` lowered to the free whole groups of the fullest-used node
/// of `combo`.
fn capped_distribution(acc: &Accumulator<'_>, combo: &[u32], distribution: i64, g: i64) -> i64 {
    combo
        .iter()
        .map(|&n| acc.free_in(Level::Numa, n) as i64 / g * g)
        .fold(distribution, i64::min)
}

/// One round of the distribution search over the `k`-combinations of
/// `numas`: the lowest balance wins, ties keep the first found, and a
/// perfect balance (0) stops the search. With `by_socket` (v1.37) a
/// combination within one socket beats any across sockets whatever the
/// balance, and only a perfect one within a socket stops the search.
fn best_distribution(
    acc: &Accumulator<'_>,
    numas: &[u32],
    k: usize,
    count: i64,
    g: i64,
    by_socket: bool,
) -> Option<Distribution> {
    let free_per_numa: BTreeMap<u32, i64> = numas.iter().map(|&n| (n, acc.free_in(Level::Numa, n) as i64)).collect();
    let mut best_balance = f64::MAX;
    let mut best_in_one_socket = false;
    let mut best: Option<Distribution> = None;
    iterate_combinations(numas, k, &mut |combo| {
        if best_balance == 0.0 && (!by_socket || best_in_one_socket) {
            return LoopControl::Break;
        }
        let nodes = combo.contents();
        let cpus = nodes.iter().fold(CpuSet::new(), |acc_set, &n| {
            acc_set.union(&acc.free.intersection(acc.topology.group(Level::Numa, n)))
        });
        if (cpus.len() as i64) < count {
            return LoopControl::Continue;
        }
        let groups: i64 = nodes.iter().map(|n| free_per_numa[n] / g).sum();
        if groups * g < count {
            return LoopControl::Continue;
        }
        let mut distribution = count / nodes.len() as i64 / g * g;
        if by_socket {
            distribution = capped_distribution(acc, &nodes, distribution, g);
        }
        if nodes.iter().any(|n| free_per_numa[n] < distribution) {
            return LoopControl::Continue;
        }
        let mut after = free_per_numa.clone();
        for n in &nodes {
            if let Some(free) = after.get_mut(n) {
                *free -= distribution;
            }
        }
        let remainder = count - distribution * nodes.len() as i64;
        let remainder_candidates: Vec<u32> = nodes.iter().copied().filter(|n| after[n] >= g).collect();

        let mut best_local_balance = f64::MAX;
        let mut best_local_remainder: Option<GoSlice> = None;
        if remainder == 0 {
            best_local_balance = standard_deviation(after.values());
        }
        if remainder > 0 {
            for size in (1..=remainder_candidates.len()).rev() {
                iterate_combinations(&remainder_candidates, size, &mut |subset| {
                    let members = subset.contents();
                    let mut left = remainder;
                    let mut spread = after.clone();
                    if members.iter().map(|n| spread[n]).sum::<i64>() < left {
                        return LoopControl::Continue;
                    }
                    while left > 0 {
                        let before = left;
                        for n in &members {
                            if left == 0 {
                                break;
                            }
                            let Some(free) = spread.get_mut(n) else { continue };
                            if *free < g {
                                continue;
                            }
                            *free -= g;
                            left -= g;
                        }
                        // The kubelet would loop forever on this subset;
                        // such a subset can never be its answer.
                        if left == before {
                            return LoopControl::Continue;
                        }
                    }
                    let balance = standard_deviation(spread.values());
                    if balance < best_local_balance {
                        best_local_balance = balance;
                        best_local_remainder = Some(subset.clone());
                    }
                    LoopControl::Continue
                });
            }
        }
        // The kubelet's AreNUMANodesInSameSocket takes the combination as
        // ids (no mask): on a machine of more than 64 NUMA nodes (policy
        // none) combinations hold nodes past 63.
        let ids: Vec<usize> = nodes.iter().map(|&n| n as usize).collect();
        let in_one_socket = by_socket && acc.topology.sockets_in_numa_ids(&ids).len() <= 1;
        let better = if by_socket && in_one_socket != best_in_one_socket {
            in_one_socket
        } else {
            best_local_balance < best_balance
        };
        if better {
            best_balance = best_local_balance;
            best_in_one_socket = in_one_socket;
            best = Some(Distribution {
                combo: combo.clone(),
                remainder: best_local_remainder.take(),
            });
        }
        LoopControl::Continue
    });
    best
}

/// Go's `math.Round(x*1000)/1000`.
fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The kubelet's `standardDeviation` (population, about a mean rounded to
/// three decimals, result rounded to three decimals).
fn standard_deviation<'a>(values: impl Iterator<Item = &'a i64> + Clone) -> f64 {
    let len = values.clone().count() as f64;
    let mean = round3(values.clone().map(|&x| x as f64).sum::<f64>() / len);
    let sum_sq: f64 = values.map(|&x| (x as f64 - mean) * (x as f64 - mean)).sum();
    round3((sum_sq / len).sqrt())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LoopControl {
    Continue,
    Break,
}

/// A Go `[]int` slice header: a length over a shared backing array whose
/// capacity grows by doubling. `append` writes in place while capacity
/// lasts, so slices kept from earlier iterations see later writes — which
/// is what the kubelet's `iterateCombinations` callers observe.
#[derive(Clone, Debug)]
struct GoSlice {
    array: Rc<RefCell<Vec<u32>>>,
    len: usize,
}

impl GoSlice {
    fn empty() -> GoSlice {
        GoSlice {
            array: Rc::new(RefCell::new(Vec::new())),
            len: 0,
        }
    }

    fn append(&self, value: u32) -> GoSlice {
        let capacity = self.array.borrow().len();
        if self.len < capacity {
            self.array.borrow_mut()[self.len] = value;
            return GoSlice {
                array: Rc::clone(&self.array),
                len: self.len + 1,
            };
        }
        // Go doubles small int slices (1, 2, 4, 8, ...), and these sizes
        // are exact allocation size classes.
        let mut grown = vec![0; (capacity * 2).max(1)];
        grown[..self.len].copy_from_slice(&self.array.borrow()[..self.len]);
        grown[self.len] = value;
        GoSlice {
            array: Rc::new(RefCell::new(grown)),
            len: self.len + 1,
        }
    }

    /// What the slice holds now.
    fn contents(&self) -> Vec<u32> {
        self.array.borrow()[..self.len].to_vec()
    }
}

/// The kubelet's `iterateCombinations`: every `k`-subset of positions of
/// `n`, in lexicographic order, built by appending to a shared Go slice.
fn iterate_combinations(n: &[u32], k: usize, f: &mut dyn FnMut(&GoSlice) -> LoopControl) {
    fn helper(
        n: &[u32],
        k: usize,
        start: usize,
        accum: &GoSlice,
        f: &mut dyn FnMut(&GoSlice) -> LoopControl,
    ) -> LoopControl {
        if k == 0 {
            return f(accum);
        }
        let Some(last) = n.len().checked_sub(k) else {
            return LoopControl::Continue;
        };
        for i in start..=last {
            if helper(n, k - 1, i + 1, &accum.append(n[i]), f) == LoopControl::Break {
                return LoopControl::Break;
            }
        }
        LoopControl::Continue
    }
    if k < 1 {
        return;
    }
    helper(n, k, 0, &GoSlice::empty(), f);
}

#[cfg(test)]
mod tests;
