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
//! Among the nodes left, the highest score wins ([`Scoring`]); ties go to
//! the node that comes first in the fleet. The chosen node's kubelet (the
//! engine) then admits or rejects the pod. A rejected pod is counted and
//! not retried; a pod no node passes is "unplaced".
//!
//! Owns: the event loop, node choice, the end-of-run capacity analysis.

use std::collections::{BTreeMap, BTreeSet};

use topoalign_engine::{Node, TopologyPolicyName, TopologyScope};
use topoalign_model::ResourceList;

use super::classes::{ClassEvent, ClassId, ClassTable, Outcome};
use super::nrt_filter;
use super::shapes::{CPU, MEMORY, Shapes};
use crate::report::{Fragmentation, RunReport, ZoneCapacity};
use crate::workload::{Event, Workload};
use crate::{Scheduler, Scoring};

/// A node group as one run sees it.
pub(crate) struct GroupSetup {
    pub root: Node,
    pub allocatable: Vec<i64>,
    pub allocatable_list: ResourceList,
    pub policy: TopologyPolicyName,
    pub scope: TopologyScope,
}

pub(crate) struct RunInput<'a> {
    pub groups: Vec<GroupSetup>,
    /// Node index → group index.
    pub node_groups: &'a [u32],
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
}

pub(crate) fn run(input: RunInput<'_>, progress: &(dyn Fn(u64) + Sync)) -> RunOutput {
    let mut table = ClassTable::new(input.resources);
    let mut roots = Vec::new();
    for (g, group) in input.groups.iter().enumerate() {
        let g = u32::try_from(g).unwrap_or(u32::MAX);
        let members = input
            .node_groups
            .iter()
            .enumerate()
            .filter(|&(_, &ng)| ng == g)
            .map(|(n, _)| u32::try_from(n).unwrap_or(u32::MAX));
        roots.push(table.add_root(g, group.root.clone(), members));
    }
    let nodes = input.node_groups.len();
    let mut run = Run {
        input: &input,
        table,
        node_class: input.node_groups.iter().map(|&g| roots[g as usize]).collect(),
        node_pods: vec![Vec::new(); nodes],
        placed: vec![None; input.workload.pods.len()],
        logs: input.keep_logs.then(|| vec![Vec::new(); nodes]),
    };
    let mut report = RunReport::default();
    let mut reasons: BTreeMap<u32, usize> = BTreeMap::new();
    let mut failed_shapes: BTreeSet<u32> = BTreeSet::new();
    let mut pending = 0u64;
    for &event in &input.workload.events {
        match event {
            Event::Add(pod) => {
                let shape = input.shapes.of_pod[pod as usize];
                match run.choose(shape) {
                    None => {
                        report.unplaced += 1;
                        failed_shapes.insert(shape);
                    }
                    Some(node) => {
                        if let Some(logs) = &mut run.logs {
                            logs[node as usize].push(event);
                        }
                        let from = run.node_class[node as usize];
                        match run.table.transition(from, ClassEvent::Add(shape), input.shapes) {
                            Outcome::Moved(to) => {
                                run.table.move_member(node, from, to);
                                run.node_class[node as usize] = to;
                                run.node_pods[node as usize].push(pod);
                                run.placed[pod as usize] = Some(node);
                                report.scheduled += 1;
                            }
                            Outcome::Rejected(reason) => {
                                report.rejected_at_admission += 1;
                                *reasons.entry(reason).or_default() += 1;
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
                        if let Outcome::Moved(to) = run.table.transition(from, ClassEvent::Remove(at), input.shapes) {
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
            .all(|&(r, amount)| class.used[r] + amount <= allocatable.get(r).copied().unwrap_or(0))
    }

    fn score(&self, c: ClassId, shape: u32) -> i64 {
        let class = &self.table.classes[c as usize];
        let allocatable = &self.input.groups[class.group as usize].allocatable;
        let s = &self.input.shapes.shapes[shape as usize];
        let one = |capacity: i64, requested: i64| -> i64 {
            if capacity <= 0 {
                return 0;
            }
            let (capacity, requested) = (i128::from(capacity), i128::from(requested));
            let score = match self.input.scoring {
                Scoring::LeastAllocated if requested > capacity => 0,
                Scoring::LeastAllocated => (capacity - requested) * 100 / capacity,
                Scoring::MostAllocated => requested.min(capacity) * 100 / capacity,
            };
            i64::try_from(score).unwrap_or(0)
        };
        (one(allocatable[CPU], class.nonzero_cpu + s.nonzero_cpu)
            + one(allocatable[MEMORY], class.nonzero_memory + s.nonzero_memory))
            / 2
    }

    /// The scheduler's filter beyond the resource fit, cached per class.
    fn passes_filter(&mut self, c: ClassId, shape: u32) -> bool {
        if let Some(verdict) = self.table.classes[c as usize].verdict(shape) {
            return verdict;
        }
        let verdict = match self.input.scheduler {
            Scheduler::Unaware => true,
            Scheduler::Nrt => {
                let group = &self.input.groups[self.table.classes[c as usize].group as usize];
                let (policy, scope) = (group.policy, group.scope);
                let pod = &self.input.shapes.shapes[shape as usize].template;
                let zones = self.table.zones(c).to_vec();
                nrt_filter::admits(policy, scope, &zones, &group.allocatable_list, pod)
            }
            Scheduler::Exact => matches!(
                self.table.transition(c, ClassEvent::Add(shape), self.input.shapes),
                Outcome::Moved(_)
            ),
        };
        self.table.classes[c as usize].verdicts.push((shape, verdict));
        verdict
    }

    /// The node the scheduler binds a pod of `shape` to, if any.
    fn choose(&mut self, shape: u32) -> Option<u32> {
        let key = |run: &Run, c: ClassId| {
            (
                run.score(c, shape),
                std::cmp::Reverse(run.table.classes[c as usize].first_member()),
            )
        };
        // The common case: the best-scored class passes the filter.
        let mut best: Option<((i64, std::cmp::Reverse<u32>), ClassId)> = None;
        for &c in &self.table.live {
            if !self.fits(c, shape) || self.table.classes[c as usize].verdict(shape) == Some(false) {
                continue;
            }
            let k = key(self, c);
            if best.is_none_or(|(b, _)| k > b) {
                best = Some((k, c));
            }
        }
        let (_, first) = best?;
        if self.passes_filter(first, shape) {
            return Some(self.table.classes[first as usize].first_member());
        }
        // Otherwise walk every fitting class in score order.
        let mut candidates: Vec<((i64, std::cmp::Reverse<u32>), ClassId)> = self
            .table
            .live
            .iter()
            .filter(|&&c| {
                c != first && self.fits(c, shape) && self.table.classes[c as usize].verdict(shape) != Some(false)
            })
            .map(|&c| (key(self, c), c))
            .collect();
        candidates.sort_unstable_by_key(|c| std::cmp::Reverse(c.0));
        for (_, c) in candidates {
            if self.passes_filter(c, shape) {
                return Some(self.table.classes[c as usize].first_member());
            }
        }
        None
    }

    /// Free and stranded capacity and fragmentation at the end of the run.
    ///
    /// Free capacity per node: each NUMA zone's `available` (exclusive
    /// CPUs, the memory manager's free memory, free devices), with a node's
    /// CPU and memory totals capped at what its allocatable minus its
    /// requested totals leaves. A node's free capacity is *stranded* when
    /// some pods failed (rejected or unplaced) and the engine would admit
    /// none of their shapes on it. Fragmentation: the share of free CPUs
    /// (memory) outside each node's largest free zone.
    fn capacity_report(&mut self, failed: &BTreeSet<u32>, report: &mut RunReport) {
        let mut outside_cpu = 0.0;
        let mut outside_memory = 0.0;
        let mut free_cpu_total = 0.0;
        let mut free_memory_total = 0.0;
        let live = self.table.live.clone();
        for c in live {
            let members = self.table.classes[c as usize].members.len() as f64;
            let group = self.table.classes[c as usize].group as usize;
            let allocatable = &self.input.groups[group].allocatable;
            let used = self.table.classes[c as usize].used.clone();
            let node_cpu = (allocatable[CPU] - used[CPU]).max(0) as f64 / 1000.0;
            let node_memory = (allocatable[MEMORY] - used[MEMORY]).max(0) as f64;
            let stranded = !failed.is_empty()
                && failed
                    .iter()
                    .all(|&s| !self.fits(c, s) || !self.table.would_admit(c, s, self.input.shapes));
            let zones = self.table.zones(c).to_vec();
            let zone_cpu: Vec<f64> = zones
                .iter()
                .map(|z| z.available("cpu").milli() as f64 / 1000.0)
                .collect();
            let zone_memory: Vec<f64> = zones.iter().map(|z| z.available("memory").value() as f64).collect();
            let cpu = zone_cpu.iter().sum::<f64>().min(node_cpu);
            let memory = zone_memory.iter().sum::<f64>().min(node_memory);
            report.free_cpus += cpu * members;
            report.free_memory_bytes += memory * members;
            free_cpu_total += cpu * members;
            free_memory_total += memory * members;
            outside_cpu += (cpu - zone_cpu.iter().copied().fold(0.0, f64::max).min(cpu)) * members;
            outside_memory += (memory - zone_memory.iter().copied().fold(0.0, f64::max).min(memory)) * members;
            if !stranded {
                continue;
            }
            report.stranded_cpus += cpu * members;
            report.stranded_memory_bytes += memory * members;
            for zone in &zones {
                let numa = zone.numa;
                if report.stranded_by_zone.len() <= numa {
                    report.stranded_by_zone.resize_with(numa + 1, ZoneCapacity::default);
                }
                let entry = &mut report.stranded_by_zone[numa];
                entry.zone = topoalign_nrt::zone_name(numa);
                entry.cpus += zone.available("cpu").milli() as f64 / 1000.0 * members;
                entry.memory_bytes += zone.available("memory").value() as f64 * members;
                for (resource, amounts) in &zone.resources {
                    if resource.contains('/') {
                        let free = amounts.available.value() as f64 * members;
                        *entry.devices.entry(resource.clone()).or_default() += free;
                        *report.stranded_devices.entry(resource.clone()).or_default() += free;
                    }
                }
            }
        }
        report.fragmentation = Fragmentation {
            cpu: if free_cpu_total > 0.0 {
                outside_cpu / free_cpu_total
            } else {
                0.0
            },
            memory: if free_memory_total > 0.0 {
                outside_memory / free_memory_total
            } else {
                0.0
            },
        };
    }
}
