//! One simulation run: a workload placed over the fleet by one scheduler
//! under one topology-manager policy and scope.
//!
//! The three schedulers share everything but their filter:
//! - every one keeps only nodes where the pod fits the node's allocatable
//!   next to what the node already holds (kube-scheduler
//!   `NodeResourcesFit`: cpu, memory, pods, huge pages, extended
//!   resources);
//! - `unaware` stops there (the default kube-scheduler);
//! - `nrt` adds the NodeResourceTopologyMatch filter on the node's NRT zones
//!   ([`super::nrt_filter`]);
//! - `exact` adds the engine itself: the node's exact state admits the pod
//!   (the extender's filter).
//!
//! With devices from DRA (the fleet's `dra:` block), a pod that takes
//! claims also passes only nodes where the scheduler's DRA allocator finds
//! its devices (the DynamicResources filter, every scheduler), and under
//! `exact` only nodes where those devices share the NUMA nodes the kubelet
//! pins its CPUs and memory to (the extender's `--dra-align`). An admitted
//! pod's devices are allocated on its node; one whose devices miss the
//! kubelet's NUMA nodes is counted misaligned (`draMisaligned`).
//!
//! Among the nodes left, the highest score wins ([`Scoring`]); ties go to
//! the node that comes first in the fleet. The chosen node's kubelet (the
//! engine) then admits or rejects the pod. A rejected pod is counted and
//! not retried; a pod no node passes is "unplaced".
//!
//! Owns: the event loop, node choice, the end-of-run capacity analysis.

use std::collections::{BTreeMap, BTreeSet};

use topoalign_engine::{Node, TopologyPolicyName, TopologyScope};
use topoalign_model::ResourceList;

use std::ops::Bound::{Excluded, Unbounded};

use super::capacity::FragmentationSum;
use super::classes::{ClassEvent, ClassId, ClassTable, LiveRow, OrderKey, Outcome};
use super::nrt_filter;
use super::shapes::{CPU, MEMORY, Shapes};
use crate::report::{DraMisalignedPod, Fragmentation, PodOutcome, RunReport, ZoneCapacity};
use crate::workload::{Event, Workload};
use crate::{Scheduler, Scoring};

/// A node group as one run sees it.
pub(crate) struct GroupSetup {
    pub root: Node,
    /// The scheduler's DRA side of an empty node, when the fleet publishes
    /// devices through DRA.
    pub dra: Option<topoalign_scenario::dra::DraState>,
    pub allocatable: Vec<i64>,
    pub allocatable_list: ResourceList,
    pub policy: TopologyPolicyName,
    pub scope: TopologyScope,
}

pub(crate) struct RunInput<'a> {
    pub groups: Vec<GroupSetup>,
    /// Node index → group index.
    pub node_groups: &'a [u32],
    /// Node index → name.
    pub node_names: &'a [String],
    pub shapes: &'a Shapes,
    pub resources: usize,
    pub workload: &'a Workload,
    pub scheduler: Scheduler,
    pub scoring: Scoring,
    pub keep_logs: bool,
}

/// What happened, plus the per-node event logs when asked.
pub(crate) struct RunOutput {
    pub report: RunReport,
    pub logs: Option<Vec<Vec<Event>>>,
}

struct Run<'a> {
    input: &'a RunInput<'a>,
    table: ClassTable,
    node_class: Vec<ClassId>,
    node_pods: Vec<Vec<u32>>,
    placed: Vec<Option<u32>>,
    logs: Option<Vec<Vec<Event>>>,
    /// Per requirement: classes the filter turned down and
    /// [`ClassTable::drop_candidate`] took out of its fitting set (they had
    /// room, and keep it while they live).
    dropped: Vec<Vec<ClassId>>,
}

pub(crate) fn run(input: RunInput<'_>, progress: &(dyn Fn(u64) + Sync)) -> RunOutput {
    let allocatable = input.groups.iter().map(|g| g.allocatable.clone()).collect();
    let emptiest_first = input.scoring == Scoring::LeastAllocated;
    let requirements = input.shapes.requirements.clone();
    let mut table = ClassTable::new(input.resources, allocatable, emptiest_first, requirements);
    let mut roots = Vec::new();
    for (g, group) in input.groups.iter().enumerate() {
        let g = u32::try_from(g).unwrap_or(u32::MAX);
        let members = input
            .node_groups
            .iter()
            .enumerate()
            .filter(|&(_, &ng)| ng == g)
            .map(|(n, _)| u32::try_from(n).unwrap_or(u32::MAX));
        roots.push(table.add_root(g, group.root.clone(), group.dra.clone(), members));
    }
    let nodes = input.node_groups.len();
    let mut run = Run {
        input: &input,
        table,
        node_class: input.node_groups.iter().map(|&g| roots[g as usize]).collect(),
        node_pods: vec![Vec::new(); nodes],
        placed: vec![None; input.workload.pods.len()],
        logs: input.keep_logs.then(|| vec![Vec::new(); nodes]),
        dropped: vec![Vec::new(); input.shapes.requirements.len()],
    };
    let mut report = RunReport::default();
    let mut reasons: BTreeMap<u32, usize> = BTreeMap::new();
    // (pod, reason id) in workload order.
    let mut rejected: Vec<(u32, u32)> = Vec::new();
    let mut unplaced: Vec<(u32, Unplaced)> = Vec::new();
    let mut failed_shapes: BTreeSet<u32> = BTreeSet::new();
    let mut pending = 0u64;
    for &event in &input.workload.events {
        match event {
            Event::Add(pod) => {
                let shape = input.shapes.of_pod[pod as usize];
                match run.choose(shape) {
                    None => {
                        report.unplaced += 1;
                        unplaced.push((pod, run.why_unplaced(shape)));
                        failed_shapes.insert(shape);
                    }
                    Some(node) => {
                        if let Some(logs) = &mut run.logs {
                            logs[node as usize].push(event);
                        }
                        let from = run.node_class[node as usize];
                        match run.table.transition(from, ClassEvent::Add(shape), input.shapes, true) {
                            Outcome::Moved(to) => {
                                run.table.move_member(node, from, to);
                                run.node_class[node as usize] = to;
                                run.node_pods[node as usize].push(pod);
                                run.placed[pod as usize] = Some(node);
                                report.scheduled += 1;
                                if let Some(added) = &run.table.classes[to as usize].dra_added {
                                    report.dra_pods += 1;
                                    if !added.misaligned.is_empty() {
                                        report.dra_misaligned += 1;
                                        report.dra_misaligned_pods.push(DraMisalignedPod {
                                            pod: input.workload.pods[pod as usize].key(),
                                            node: input.node_names.get(node as usize).cloned().unwrap_or_default(),
                                            kubelet_numa_nodes: added.kubelet_numa_nodes.clone(),
                                            devices: added.misaligned.clone(),
                                        });
                                    }
                                }
                            }
                            Outcome::Rejected(reason) => {
                                report.rejected_at_admission += 1;
                                *reasons.entry(reason).or_default() += 1;
                                rejected.push((pod, reason));
                                failed_shapes.insert(shape);
                            }
                        }
                    }
                }
            }
            Event::Delete(pod) => {
                report.deleted += 1;
                if let Some(node) = run.placed[pod as usize].take() {
                    let pods = &mut run.node_pods[node as usize];
                    if let Some(at) = pods.iter().position(|&p| p == pod) {
                        pods.remove(at);
                        if let Some(logs) = &mut run.logs {
                            logs[node as usize].push(event);
                        }
                        let from = run.node_class[node as usize];
                        let at = u32::try_from(at).unwrap_or(u32::MAX);
                        if let Outcome::Moved(to) =
                            run.table.transition(from, ClassEvent::Remove(at), input.shapes, true)
                        {
                            run.table.move_member(node, from, to);
                            run.node_class[node as usize] = to;
                        }
                    }
                }
            }
        }
        pending += 1;
        if pending == 1024 {
            progress(pending);
            pending = 0;
        }
    }
    progress(pending);
    report.rejection_reasons = reasons
        .into_iter()
        .map(|(id, count)| (run.table.reasons[id as usize].clone(), count))
        .collect();
    let pods = &input.workload.pods;
    report.rejected_pods = rejected
        .into_iter()
        .map(|(pod, reason)| PodOutcome {
            pod: pods[pod as usize].key(),
            reason: run.table.reasons[reason as usize].clone(),
        })
        .collect();
    for (pod, why) in unplaced {
        let reason = why.reason(
            input.scheduler,
            input.shapes.shapes[input.shapes.of_pod[pod as usize] as usize]
                .dra
                .is_some(),
        );
        *report.unplaced_reasons.entry(reason.to_string()).or_default() += 1;
        report.unplaced_pods.push(PodOutcome {
            pod: pods[pod as usize].key(),
            reason: reason.to_string(),
        });
    }
    run.capacity_report(&failed_shapes, &mut report);
    RunOutput { report, logs: run.logs }
}

impl Run<'_> {
    /// Whether a pod of `shape` fits class `c`'s allocatable next to what
    /// it holds (the scheduler's `NodeResourcesFit`).
    fn fits(&self, c: ClassId, shape: u32) -> bool {
        let class = &self.table.classes[c as usize];
        let allocatable = &self.input.groups[class.group as usize].allocatable;
        self.input.shapes.shapes[shape as usize]
            .request
            .iter()
            .all(|&(r, amount)| class.used[r].saturating_add(amount) <= allocatable.get(r).copied().unwrap_or(0))
    }

    /// The scheduler's filter beyond the resource fit, cached per class.
    fn passes_filter(&mut self, c: ClassId, shape: u32) -> bool {
        if let Some(verdict) = self.table.classes[c as usize].verdict(shape) {
            return verdict;
        }
        let dra = self.input.shapes.shapes[shape as usize].dra.is_some();
        let verdict = match self.input.scheduler {
            // Every scheduler runs the DynamicResources filter: the node's
            // DRA allocator must find the pod's devices.
            Scheduler::Unaware => !dra || self.table.dra_allocates(c, shape, self.input.shapes),
            Scheduler::Nrt if dra && !self.table.dra_allocates(c, shape, self.input.shapes) => false,
            // topoalign's extender with `--dra-align`: the engine admits
            // the pod and its devices share the kubelet's NUMA nodes. The
            // node is copied (`leaving` false): a node refused for its
            // devices stays in its class.
            Scheduler::Exact if dra => match self
                .table
                .transition(c, ClassEvent::Add(shape), self.input.shapes, false)
            {
                Outcome::Moved(to) => {
                    let to = &self.table.classes[to as usize];
                    match &to.dra_added {
                        Some(added) => added.allocated && added.refusal.is_none(),
                        // Nothing for DRA to allocate here (device plugins
                        // serve the pod's extended resources): the node
                        // needs a DRA side only for claims.
                        None => to.dra.is_some(),
                    }
                }
                Outcome::Rejected(_) => false,
            },
            Scheduler::Nrt => {
                let group = &self.input.groups[self.table.classes[c as usize].group as usize];
                let (policy, scope) = (group.policy, group.scope);
                let pod = &self.input.shapes.shapes[shape as usize].template;
                let zones = self.table.zones(c).to_vec();
                nrt_filter::admits(policy, scope, &zones, &group.allocatable_list, pod)
            }
            // Asked only of the class whose first member is about to be
            // chosen if it passes, so that member is the one leaving.
            Scheduler::Exact => matches!(
                self.table
                    .transition(c, ClassEvent::Add(shape), self.input.shapes, true),
                Outcome::Moved(_)
            ),
        };
        self.table.classes[c as usize].verdicts.push((shape, verdict));
        verdict
    }

    /// The node the scheduler binds a pod of `shape` to, if any: the
    /// best-ranked class that fits and passes the filter. Each group keeps
    /// the classes with room for the pod's cpu and memory in preference
    /// order, in which the pod's rank only falls; the groups' heads are
    /// merged, and the walk stops at the first class that passes.
    fn choose(&mut self, shape: u32) -> Option<u32> {
        let s = &self.input.shapes.shapes[shape as usize];
        let q = s.requirement;
        let (pod_cpu, pod_memory) = (s.nonzero_cpu, s.nonzero_memory);
        let scoring = self.input.scoring;
        let groups = self.table.fitting.len();
        // Per group: the last key offered and turned down.
        let mut after: Vec<Option<OrderKey>> = vec![None; groups];
        loop {
            let mut best: Option<(Rank, OrderKey)> = None;
            let mut best_group = 0;
            for (g, last) in after.iter().enumerate() {
                let set = &self.table.fitting[g][q];
                let mut walk = match last {
                    None => set.range(..),
                    Some(last) => set.range((Excluded(*last), Unbounded)),
                };
                let head = walk.find(|key| self.table.classes[key.2 as usize].verdict(shape) != Some(false));
                let Some(&key) = head else { continue };
                let Some(row) = self.table.row(key.2) else { continue };
                let rank = Rank::of(row, pod_cpu, pod_memory, scoring);
                if best.is_none_or(|(b, _)| rank > b) {
                    best = Some((rank, key));
                    best_group = g;
                }
            }
            let (_, key) = best?;
            if self.passes_filter(key.2, shape) {
                return Some(self.table.classes[key.2 as usize].first_member());
            }
            if self.input.shapes.one_per_shape {
                self.table.drop_candidate(key.2, q);
                self.dropped[q].push(key.2);
            } else {
                after[best_group] = Some(key);
            }
        }
    }

    /// Whether an empty node of `group` admits a pod of `shape`.
    fn empty_node_admits(&self, group: usize, shape: u32) -> bool {
        let setup = &self.input.groups[group];
        let template = &self.input.shapes.shapes[shape as usize];
        let fits = template
            .request
            .iter()
            .all(|&(r, amount)| amount <= setup.allocatable.get(r).copied().unwrap_or(0));
        fits && setup.root.clone().admit(template.template.clone()).admitted()
    }

    /// Why no node took a pod of `shape`: no node had room for its
    /// requests, or some had and the scheduler's filter turned them all
    /// down.
    ///
    /// The live classes with room for the pod are in its fitting sets, or
    /// were taken out of them by the filter.
    fn why_unplaced(&mut self, shape: u32) -> Unplaced {
        let q = self.input.shapes.shapes[shape as usize].requirement;
        let table = &self.table;
        self.dropped[q].retain(|&c| table.row(c).is_some());
        let room = !self.dropped[q].is_empty() || table.fitting.iter().any(|sets| !sets[q].is_empty());
        if room { Unplaced::Filtered } else { Unplaced::NoRoom }
    }

    /// Free and stranded capacity and fragmentation at the end of the run.
    ///
    /// Free capacity per node and zone: [`crate::stranded`]'s (each zone's
    /// NRT `available`, apportioned so the zones add up to the node's free
    /// total, which is capped by its allocatable minus its requests; the
    /// zone's free devices, DRA devices no claim holds among them, under
    /// their driver's name). A node's free capacity is *stranded* when some pods
    /// failed (rejected or unplaced) that an empty node of its shape would
    /// admit, and the engine admits none of them on it now. Fragmentation:
    /// [`FragmentationSum`]. Sums are kept in integers (millicores, bytes,
    /// devices), so per-zone figures add up to the totals.
    fn capacity_report(&mut self, failed: &BTreeSet<u32>, report: &mut RunReport) {
        // Smallest first: a node that admits any failed shape most likely
        // admits the smallest, which ends the check early.
        let mut failed: Vec<u32> = failed.iter().copied().collect();
        failed.sort_by_key(|&s| {
            let shape = &self.input.shapes.shapes[s as usize];
            (shape.nonzero_cpu, shape.nonzero_memory)
        });
        let empty_blocks: Vec<(u64, u64)> = self
            .input
            .groups
            .iter()
            .map(|group| {
                let empty = capacity(
                    &group.root.numa_usage(),
                    &group.allocatable,
                    &vec![0; group.allocatable.len()],
                );
                (empty.cpu.largest_block, empty.memory.largest_block)
            })
            .collect();
        let mut sums = Sums::default();
        let mut cpu_fragmentation = FragmentationSum::default();
        let mut memory_fragmentation = FragmentationSum::default();
        let live: Vec<ClassId> = self.table.live.iter().map(|row| row.class).collect();
        let mut empty_admits: std::collections::HashMap<(usize, u32), bool> = std::collections::HashMap::new();
        for c in live {
            let members = self.table.classes[c as usize].members.len() as u64;
            let group = self.table.classes[c as usize].group as usize;
            // The failed shapes an empty node of this shape would admit:
            // the ones this node's free capacity was wanted for.
            let wanted: Vec<u32> = failed
                .iter()
                .copied()
                .filter(|&s| {
                    *empty_admits
                        .entry((group, s))
                        .or_insert_with(|| self.empty_node_admits(group, s))
                })
                .collect();
            let stranded = !wanted.is_empty()
                && wanted
                    .iter()
                    .all(|&s| !self.fits(c, s) || !self.table.would_admit(c, s, self.input.shapes));
            let used = self.table.classes[c as usize].used.clone();
            let zones = self.table.zones(c).to_vec();
            let mut free = capacity(&zones, &self.input.groups[group].allocatable, &used);
            // The class's DRA side: its first node's slices and the claims
            // its pods hold (every member publishes the same devices).
            if let Some(dra) = self.table.classes[c as usize].dra.as_deref() {
                let devices = crate::stranded::dra_free(&dra.spec().resource_slices, &dra.allocated_claims());
                free.free.add_dra(&devices, self.input.groups[group].root.machine());
            }
            let (cpu, memory) = (&free.cpu, &free.memory);
            sums.free_milli_cpu += u128::from(cpu.total) * u128::from(members);
            sums.free_memory += u128::from(memory.total) * u128::from(members);
            cpu_fragmentation.add(cpu, empty_blocks[group].0, members);
            memory_fragmentation.add(memory, empty_blocks[group].1, members);
            if !stranded {
                continue;
            }
            sums.stranded_milli_cpu += u128::from(cpu.total) * u128::from(members);
            sums.stranded_memory += u128::from(memory.total) * u128::from(members);
            let machine = self.input.groups[group].root.machine();
            for zone in &free.free.zones {
                // Zones are named by the machine's own NUMA ids (the NRT
                // side's `node-<id>`), summed over nodes by that id: ids
                // below 64 in one dense list as always, larger ones (a
                // machine numbered anew) after them, only where present.
                let numa = machine.numa_label(zone.numa);
                let entry = if numa < topoalign_model::MAX_NUMA_NODES {
                    if sums.zones.len() <= numa {
                        sums.zones.resize_with(numa + 1, ZoneSums::default);
                    }
                    &mut sums.zones[numa]
                } else {
                    sums.zones_past_masks.entry(numa).or_default()
                };
                entry.milli_cpu += u128::from(zone.milli_cpu) * u128::from(members);
                entry.memory += u128::from(zone.memory_bytes) * u128::from(members);
                for (resource, &count) in &zone.devices {
                    let free = u128::from(count) * u128::from(members);
                    *entry.devices.entry(resource.clone()).or_default() += free;
                    *sums.stranded_devices.entry(resource.clone()).or_default() += free;
                }
            }
        }
        let cpus = |milli: u128| milli as f64 / 1000.0;
        report.free_cpus = cpus(sums.free_milli_cpu);
        report.free_memory_bytes = sums.free_memory as f64;
        report.stranded_cpus = cpus(sums.stranded_milli_cpu);
        report.stranded_memory_bytes = sums.stranded_memory as f64;
        report.stranded_devices = sums.stranded_devices.into_iter().map(|(r, n)| (r, n as f64)).collect();
        report.stranded_by_zone = sums
            .zones
            .into_iter()
            .enumerate()
            .chain(sums.zones_past_masks)
            .map(|(numa, zone)| ZoneCapacity {
                zone: topoalign_nrt::zone_name(numa),
                cpus: cpus(zone.milli_cpu),
                memory_bytes: zone.memory as f64,
                devices: zone.devices.into_iter().map(|(r, n)| (r, n as f64)).collect(),
            })
            .collect();
        report.fragmentation = Fragmentation {
            cpu: cpu_fragmentation.ratio(),
            memory: memory_fragmentation.ratio(),
        };
    }
}

/// Why a pod was never placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unplaced {
    /// No node had room for its requests (`NodeResourcesFit`).
    NoRoom,
    /// Nodes had room, the scheduler's filter refused them all.
    Filtered,
}

impl Unplaced {
    /// The report's words (table and JSON alike); `dra`: the pod takes
    /// DRA claims.
    fn reason(self, scheduler: Scheduler, dra: bool) -> &'static str {
        match (self, scheduler) {
            (Unplaced::Filtered, Scheduler::Unaware) if dra => crate::report::UNPLACED_DRA,
            (Unplaced::Filtered, Scheduler::Nrt) if dra => crate::report::UNPLACED_NRT_DRA,
            (Unplaced::Filtered, Scheduler::Exact) if dra => crate::report::UNPLACED_EXACT_DRA,
            (Unplaced::NoRoom, _) | (Unplaced::Filtered, Scheduler::Unaware) => crate::report::UNPLACED_NO_ROOM,
            (Unplaced::Filtered, Scheduler::Nrt) => crate::report::UNPLACED_NRT,
            (Unplaced::Filtered, Scheduler::Exact) => crate::report::UNPLACED_EXACT,
        }
    }
}

/// End-of-run sums, in millicores, bytes and devices.
#[derive(Default)]
struct Sums {
    free_milli_cpu: u128,
    free_memory: u128,
    stranded_milli_cpu: u128,
    stranded_memory: u128,
    stranded_devices: BTreeMap<String, u128>,
    /// By NUMA id below 64 (dense, as before labels existed).
    zones: Vec<ZoneSums>,
    /// By NUMA id of 64 or more (machines numbered anew).
    zones_past_masks: BTreeMap<usize, ZoneSums>,
}

#[derive(Default)]
struct ZoneSums {
    milli_cpu: u128,
    memory: u128,
    devices: BTreeMap<String, u128>,
}

/// A node's free capacity ([`crate::stranded`]'s arithmetic, the one
/// definition): its zones' NRT `available`, CPU and memory capped by its
/// allocatable minus its requests (the class's resource vectors).
fn capacity(zones: &[topoalign_engine::NumaUsage], allocatable: &[i64], used: &[i64]) -> crate::stranded::Capacity {
    let node = |r: usize| {
        let free = allocatable.get(r).copied().unwrap_or(0) - used.get(r).copied().unwrap_or(0);
        u64::try_from(free).unwrap_or(0)
    };
    crate::stranded::zones_free(zones, node(CPU), node(MEMORY))
}

/// A candidate's rank. The score is the kube-scheduler's
/// `NodeResourcesFit` formula on cpu and memory (weights 1, the pod's
/// non-zero requests added) without its integer rounding: least allocated
/// `50 · Σ (allocatable − requested) / allocatable`, most allocated
/// `50 · Σ requested / allocatable`. The kube-scheduler picks at random
/// among nodes of equal rounded score; here the unrounded score decides,
/// then the node that comes first in the fleet.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
struct Rank {
    score: f64,
    first_member: std::cmp::Reverse<u32>,
}

impl Rank {
    fn of(row: &LiveRow, pod_cpu: i64, pod_memory: i64, scoring: Scoring) -> Rank {
        let share = |request: i64, capacity: i64| {
            if capacity <= 0 {
                0.0
            } else {
                request as f64 / capacity as f64
            }
        };
        let pod = share(pod_cpu, row.allocatable_cpu) + share(pod_memory, row.allocatable_memory);
        let free_after = row.free_fraction - pod;
        let score = match scoring {
            Scoring::LeastAllocated => 50.0 * free_after,
            Scoring::MostAllocated => 50.0 * (2.0 - free_after),
        };
        Rank {
            score,
            first_member: std::cmp::Reverse(row.first_member),
        }
    }
}
