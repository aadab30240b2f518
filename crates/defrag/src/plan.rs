//! The search for evictions, its bound, and the replay that checks it.
//!
//! Pending pods are planned one at a time in the scheduler's order
//! (priority, highest first; then input order). For each:
//!
//! 1. a node whose current state (the state planned so far) admits it as
//!    is, first in fleet order: no eviction;
//! 2. else the fewest evictions on one node. A pod may be a victim only if
//!    its priority is *lower* than the pending pod's (strictly, as
//!    kube-scheduler's preemption: the planner evicts by itself, and a
//!    peer evicted for a peer would only trade places — `topoalign
//!    explain pod`, advice for a person, also offers peers), it may be
//!    evicted at all, and every budget covering it has an eviction left.
//!    Per node:
//!    - *bound*: if evicting every such victim does not make the node
//!      admit the pod, the node is skipped (admission is taken to be
//!      monotone in evictions: freeing more never turns a yes into a no);
//!    - *greedy*: from that set, victims are put back one by one, highest
//!      priority first, while the node still admits the pod: an
//!      irreducible set, size `g`;
//!    - *exact*: sets of 1, 2, … `g` victims (over all nodes, lowest
//!      priorities first) are tried in turn; the first size with a success
//!      wins, ties broken by the highest victim priority, then the sum of
//!      priorities, then how many of the pending pods planned later would
//!      also fit on the node after it (so one eviction that frees room for
//!      two pods beats one that frees room for one), then fleet order.
//!      Failing that, the smallest greedy set wins.
//!
//!    Pods are planned one at a time: each gets the fewest evictions given
//!    the plan so far, and the look-ahead tie-break makes later pods reuse
//!    freed room; the total is not proven minimal across pods.
//!
//!    Every try costs one *trial*: the node rebuilt from its input state
//!    with the evictions planned so far and the candidate's removed, the
//!    pending pods planned there admitted again in order, then the pod
//!    tried. The exact search stops after [`Limits::max_trials`] trials in
//!    all (or sets larger than [`Limits::max_victims`]); the greedy set is
//!    then taken and the plan says it *gave up* proving it smallest.
//! 3. else no plan, with the reason.
//!
//! A trial rebuilds the node in the order the cluster will live it — every
//! eviction first, then the pending pods — so the plan already holds under
//! that order. [`verify`] checks it again from the input alone: each node
//! started from its input state, every planned victim removed, every
//! planned pod admitted in plan order by [`Node::admit`]; plus the priority
//! and budget rules counted from the plan's evictions.
//!
//! Owns: the search, the plan document. Must not touch: decisions (each is
//! the engine's), how the plan is carried out.

use std::collections::{BTreeMap, BTreeSet};

use itertools::Itertools as _;
use serde::Serialize;
use topoalign_engine::Node;
use topoalign_fleet::stranded::{is_stranded, node_free};
use topoalign_model::Pod;

use crate::input::{DraDevices, FleetState, PendingPod};

/// How far the search goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Trials (engine admissions on a rebuilt node) for the whole plan;
    /// past it, exact searches stop and greedy sets are taken.
    pub max_trials: u64,
    /// The largest victim set the exact search tries for one pod (greedy
    /// sets may be larger).
    pub max_victims: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_trials: 100_000,
            max_victims: 6,
        }
    }
}

/// The plan document.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// Per pending pod, in planning order.
    pub pods: Vec<PodPlan>,
    /// Every eviction, in the order they were planned.
    pub evictions: Vec<Eviction>,
    pub verification: Verification,
    pub search: Search,
    /// Capacity stranded for the pending pods now.
    pub stranded_before: Stranded,
    /// Capacity stranded, after the plan, for the pods it leaves pending.
    pub stranded_after: Stranded,
}

/// One pending pod's plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodPlan {
    /// `namespace/name`.
    pub pod: String,
    pub priority: i32,
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// What a pending pod gets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
pub enum Outcome {
    /// A node admits it as is.
    #[serde(rename_all = "camelCase")]
    FitsAsIs { node: String },
    /// A node admits it after these evictions (`namespace/name`).
    #[serde(rename_all = "camelCase")]
    AfterEvictions {
        node: String,
        evict: Vec<String>,
        /// Whether no smaller set was found to exist (false when the search
        /// gave up before trying every smaller size).
        proven_smallest: bool,
    },
    /// No plan.
    #[serde(rename_all = "camelCase")]
    NoPlan { reason: String },
}

/// One planned eviction.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Eviction {
    /// `namespace/name`.
    pub pod: String,
    pub uid: String,
    pub node: String,
    pub priority: i32,
    /// The pending pod it frees room for.
    pub for_pod: String,
}

/// The replay check ([`verify`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// Every planned pod admitted in the replay, and every rule held.
    pub verified: bool,
    pub evictions_replayed: usize,
    pub admitted: usize,
    /// Planned pods the replay's kubelet refused, and broken rules.
    pub problems: Vec<String>,
}

/// How the search went.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Search {
    pub trials: u64,
    pub max_trials: u64,
    pub max_victims: usize,
    /// The trial budget ran out: some sets are greedy, not proven smallest.
    pub gave_up: bool,
}

/// Stranded capacity (the simulator's rule: `topoalign_fleet::stranded`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stranded {
    pub cpus: f64,
    pub memory_bytes: u64,
    /// Device-plugin resource, or DRA driver (free DRA devices, counted
    /// under the driver's name) → devices.
    pub devices: BTreeMap<String, u64>,
    /// The nodes whose free capacity is stranded, per NUMA node.
    pub nodes: Vec<StrandedNode>,
}

/// One node's stranded capacity.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StrandedNode {
    pub node: String,
    pub cpus: f64,
    pub memory_bytes: u64,
    pub zones: Vec<StrandedZone>,
}

/// One NUMA node's stranded capacity.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StrandedZone {
    pub numa: usize,
    pub cpus: f64,
    pub memory_bytes: u64,
    pub devices: BTreeMap<String, u64>,
}

/// Plans evictions for `pending` on `state` (see the module docs).
pub fn plan(state: &FleetState, pending: &[PendingPod], limits: &Limits) -> Plan {
    let mut order: Vec<usize> = (0..pending.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(pending[i].priority));
    let mut planner = Planner {
        state,
        pending,
        limits,
        victims: vec![BTreeSet::new(); state.nodes.len()],
        placed: vec![Vec::new(); state.nodes.len()],
        budget_left: state.budgets.iter().map(|b| b.allowed).collect(),
        trials: 0,
        gave_up: false,
    };
    let mut pods = Vec::with_capacity(pending.len());
    let mut evictions = Vec::new();
    for (at, &i) in order.iter().enumerate() {
        let pod = &pending[i];
        let outcome = planner.plan_pod(i, &order[at + 1..]);
        if let Some((n, set, proven)) = outcome {
            let node = &state.nodes[n];
            for &v in &set {
                let victim = &node.pods[v];
                for &b in &victim.budgets {
                    planner.budget_left[b] -= 1;
                }
                evictions.push(Eviction {
                    pod: victim.key.clone(),
                    uid: victim.uid.clone(),
                    node: node.name.clone(),
                    priority: victim.priority,
                    for_pod: pod.pod.key(),
                });
            }
            planner.victims[n].extend(set.iter().copied());
            planner.placed[n].push(i);
            let outcome = if set.is_empty() {
                Outcome::FitsAsIs {
                    node: node.name.clone(),
                }
            } else {
                Outcome::AfterEvictions {
                    node: node.name.clone(),
                    evict: set.iter().map(|&v| node.pods[v].key.clone()).collect(),
                    proven_smallest: proven,
                }
            };
            pods.push(PodPlan {
                pod: pod.pod.key(),
                priority: pod.priority,
                outcome,
            });
        } else {
            pods.push(PodPlan {
                pod: pod.pod.key(),
                priority: pod.priority,
                outcome: Outcome::NoPlan {
                    reason: planner.why_not(i),
                },
            });
        }
    }

    // Stranded capacity before (for every pending pod) and after (for the
    // pods the plan leaves pending).
    let all: Vec<Pod> = pending.iter().map(|p| p.pod.clone()).collect();
    let before_nodes: Vec<Node> = state.nodes.iter().map(|n| n.node.clone()).collect();
    let dra_before: Vec<DraDevices> = state.nodes.iter().map(|n| n.dra.free.clone()).collect();
    let stranded_before = stranded(state, &before_nodes, &dra_before, &all);
    let left: Vec<Pod> = order
        .iter()
        .zip(&pods)
        .filter(|(_, p)| matches!(p.outcome, Outcome::NoPlan { .. }))
        .map(|(&i, _)| pending[i].pod.clone())
        .collect();
    let after_nodes: Vec<Node> = (0..state.nodes.len())
        .map(|n| planner.rebuild(n, &[]).unwrap_or_else(|| state.nodes[n].node.clone()))
        .collect();
    let dra_after: Vec<DraDevices> = state
        .nodes
        .iter()
        .enumerate()
        .map(|(n, node)| {
            let evicted = planner.victims[n].iter().map(|&v| node.pods[v].uid.as_str());
            let placed: Vec<String> = planner.placed[n].iter().map(|&p| pending[p].pod.key()).collect();
            node.dra.free_after(evicted, placed.iter().map(String::as_str))
        })
        .collect();
    let stranded_after = stranded(state, &after_nodes, &dra_after, &left);

    let verification = verify(state, pending, &pods, &evictions);
    Plan {
        pods,
        evictions,
        verification,
        search: Search {
            trials: planner.trials,
            max_trials: limits.max_trials,
            max_victims: limits.max_victims,
            gave_up: planner.gave_up,
        },
        stranded_before,
        stranded_after,
    }
}

struct Planner<'a> {
    state: &'a FleetState,
    pending: &'a [PendingPod],
    limits: &'a Limits,
    /// Per node: indices into its pods planned for eviction.
    victims: Vec<BTreeSet<usize>>,
    /// Per node: pending pods planned there, in plan order.
    placed: Vec<Vec<usize>>,
    budget_left: Vec<u32>,
    trials: u64,
    gave_up: bool,
}

/// See [`Planner::cost`].
type Cost = (i32, i64, std::cmp::Reverse<usize>, usize);

/// A candidate victim set: its cost, node and victims.
type Found = (Cost, usize, Vec<usize>);

impl Planner<'_> {
    /// Node `n` as the cluster would have it: its input state, the planned
    /// evictions and `extra` removed, the pending pods planned there
    /// admitted in order. `None` if one of those is refused.
    fn rebuild(&self, n: usize, extra: &[usize]) -> Option<Node> {
        let input = &self.state.nodes[n];
        let mut node = input.node.clone();
        for &v in self.victims[n].iter().chain(extra) {
            node.remove(&input.pods[v].uid);
        }
        for &p in &self.placed[n] {
            if !node.admit(self.pending[p].pod.clone()).admitted() {
                return None;
            }
        }
        Some(node)
    }

    /// One trial: does node `n` admit pending pod `p` with `extra` evicted?
    fn trial(&mut self, n: usize, extra: &[usize], p: usize) -> bool {
        self.trials += 1;
        self.rebuild(n, extra)
            .is_some_and(|node| node.try_admit(&self.pending[p].pod).decision.admitted())
    }

    /// The pods of node `n` that may be evicted for pending pod `p`,
    /// lowest priority first.
    fn candidates(&self, n: usize, p: usize) -> Vec<usize> {
        let priority = self.pending[p].priority;
        let node = &self.state.nodes[n];
        let mut list: Vec<usize> = node
            .pods
            .iter()
            .enumerate()
            .filter(|&(v, pod)| {
                !self.victims[n].contains(&v)
                    && pod.not_evictable.is_none()
                    && pod.priority < priority
                    && pod.budgets.iter().all(|&b| self.budget_left[b] > 0)
            })
            .map(|(v, _)| v)
            .collect();
        list.sort_by_key(|&v| (node.pods[v].priority, v));
        list
    }

    /// Whether evicting `set` of node `n` stays within every budget.
    fn within_budgets(&self, n: usize, set: &[usize]) -> bool {
        let mut used: BTreeMap<usize, u32> = BTreeMap::new();
        for &v in set {
            for &b in &self.state.nodes[n].pods[v].budgets {
                *used.entry(b).or_default() += 1;
            }
        }
        used.iter().all(|(&b, &count)| count <= self.budget_left[b])
    }

    /// A set's cost: its highest priority, the sum of its priorities,
    /// then (better first) how many later pending pods also fit after it
    /// (`also_fit`), then the node's place in the fleet.
    fn cost(&self, n: usize, set: &[usize], also_fit: usize) -> Cost {
        let pods = &self.state.nodes[n].pods;
        let max = set.iter().map(|&v| pods[v].priority).max().unwrap_or(i32::MIN);
        let sum = set.iter().map(|&v| i64::from(pods[v].priority)).sum();
        (max, sum, std::cmp::Reverse(also_fit), n)
    }

    /// How many of the pending pods not planned yet (`rest`) node `n`
    /// would also admit, in order, after `set` is evicted and `p` admitted:
    /// the tie-break between equally cheap sets. One trial.
    fn lookahead(&mut self, n: usize, set: &[usize], p: usize, rest: &[usize]) -> usize {
        self.trials += 1;
        let Some(mut node) = self.rebuild(n, set) else { return 0 };
        if !node.admit(self.pending[p].pod.clone()).admitted() {
            return 0;
        }
        rest.iter()
            .filter(|&&q| node.admit(self.pending[q].pod.clone()).admitted())
            .count()
    }

    /// The node and victims for pending pod `p` (`rest`: the pending pods
    /// planned after it), and whether the set is proven smallest; `None`
    /// when no node will do.
    fn plan_pod(&mut self, p: usize, rest: &[usize]) -> Option<(usize, Vec<usize>, bool)> {
        let nodes = self.state.nodes.len();
        for n in 0..nodes {
            if self.trial(n, &[], p) {
                return Some((n, Vec::new(), true));
            }
        }
        // Per node: candidates (if the bound passes) and a greedy set.
        let mut candidates: Vec<Option<Vec<usize>>> = vec![None; nodes];
        let mut greedy: Option<Found> = None;
        for (n, slot) in candidates.iter_mut().enumerate() {
            let all = self.candidates(n, p);
            if all.is_empty() || !self.trial(n, &all, p) {
                continue;
            }
            let mut set = all.clone();
            for &v in all.iter().rev() {
                let without: Vec<usize> = set.iter().copied().filter(|&x| x != v).collect();
                if self.trial(n, &without, p) {
                    set = without;
                }
            }
            if self.within_budgets(n, &set) {
                let key = self.cost(n, &set, 0);
                let better = greedy.as_ref().is_none_or(|(k, _, g)| (set.len(), key) < (g.len(), *k));
                if better {
                    greedy = Some((key, n, set));
                }
            }
            *slot = Some(all);
        }
        // Exact search over smaller sizes.
        let upper = greedy.as_ref().map_or(usize::MAX, |(_, _, g)| g.len());
        // Up to the greedy size itself: among sets of that size a cheaper
        // one, or one after which more later pods fit, may exist.
        let sizes = upper.min(self.limits.max_victims);
        let mut complete = upper.saturating_sub(1) <= self.limits.max_victims;
        'sizes: for k in 1..=sizes {
            let mut best: Option<Found> = None;
            for (n, slot) in candidates.iter().enumerate() {
                let Some(all) = slot else { continue };
                if all.len() < k {
                    continue;
                }
                // `all` is lowest priority first: lexicographic order
                // tries the cheapest sets first.
                for set in all.iter().copied().combinations(k) {
                    if self.trials >= self.limits.max_trials {
                        self.gave_up = true;
                        complete = false;
                        break 'sizes;
                    }
                    if self.within_budgets(n, &set) {
                        let cost = self.cost(n, &set, 0);
                        let worth = best.as_ref().is_none_or(|(b, _, _)| (cost.0, cost.1) <= (b.0, b.1));
                        if worth && self.trial(n, &set, p) {
                            let also_fit = self.lookahead(n, &set, p, rest);
                            let key = self.cost(n, &set, also_fit);
                            if best.as_ref().is_none_or(|(b, _, _)| key < *b) {
                                best = Some((key, n, set));
                            }
                        }
                    }
                }
            }
            if let Some((_, n, mut set)) = best {
                set.sort_unstable();
                return Some((n, set, true));
            }
        }
        greedy.map(|(_, n, mut set)| {
            set.sort_unstable();
            (n, set, complete)
        })
    }

    /// Why pending pod `p` got no plan.
    fn why_not(&self, p: usize) -> String {
        let pod = &self.pending[p].pod;
        let refusals: Vec<String> = self
            .state
            .nodes
            .iter()
            .map(|n| n.empty.try_admit(pod).decision)
            .filter_map(|d| d.rejection.map(|r| format!("{}: {}", r.reason, r.message)))
            .collect();
        if !self.state.nodes.is_empty() && refusals.len() == self.state.nodes.len() {
            let first = refusals.first().cloned().unwrap_or_default();
            return format!("no node would admit it even empty ({first})");
        }
        "no node admits it after evicting every pod of lower priority that may be evicted within its disruption budgets"
            .into()
    }
}

/// The replay check (see the module docs): from the input state alone,
/// every eviction, then every planned pod in plan order, through
/// [`Node::admit`]; and the priority and budget rules counted again.
pub fn verify(state: &FleetState, pending: &[PendingPod], pods: &[PodPlan], evictions: &[Eviction]) -> Verification {
    let mut result = Verification::default();
    let index: BTreeMap<&str, usize> = state
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let mut nodes: Vec<Node> = state.nodes.iter().map(|n| n.node.clone()).collect();
    let priorities: BTreeMap<String, i32> = pending.iter().map(|p| (p.pod.key(), p.priority)).collect();
    let mut budget_used = vec![0u32; state.budgets.len()];
    for eviction in evictions {
        let Some(&n) = index.get(eviction.node.as_str()) else {
            result.problems.push(format!(
                "eviction of {} on unknown node {}",
                eviction.pod, eviction.node
            ));
            continue;
        };
        let victim = state.nodes[n].pods.iter().find(|p| p.uid == eviction.uid);
        match victim {
            Some(victim) => {
                if victim.not_evictable.is_some() {
                    result.problems.push(format!("{} may not be evicted", eviction.pod));
                }
                if priorities.get(&eviction.for_pod).is_none_or(|&p| victim.priority >= p) {
                    result.problems.push(format!(
                        "{} (priority {}) evicted for {}, whose priority is not higher",
                        eviction.pod, victim.priority, eviction.for_pod
                    ));
                }
                for &b in &victim.budgets {
                    budget_used[b] += 1;
                }
            }
            None => result
                .problems
                .push(format!("{} is not on {}", eviction.pod, eviction.node)),
        }
        if nodes[n].remove(&eviction.uid) {
            result.evictions_replayed += 1;
        } else {
            result
                .problems
                .push(format!("{} was not running on {}", eviction.pod, eviction.node));
        }
    }
    for (b, &used) in budget_used.iter().enumerate() {
        if used > state.budgets[b].allowed {
            result.problems.push(format!(
                "{} evictions covered by PodDisruptionBudget {}, which allows {}",
                used, state.budgets[b].key, state.budgets[b].allowed
            ));
        }
    }
    let by_key: BTreeMap<String, &PendingPod> = pending.iter().map(|p| (p.pod.key(), p)).collect();
    for planned in pods {
        let node = match &planned.outcome {
            Outcome::FitsAsIs { node } | Outcome::AfterEvictions { node, .. } => node,
            Outcome::NoPlan { .. } => continue,
        };
        let (Some(&n), Some(pod)) = (index.get(node.as_str()), by_key.get(&planned.pod)) else {
            result
                .problems
                .push(format!("{} planned on unknown node {node}", planned.pod));
            continue;
        };
        let decision = nodes[n].admit(pod.pod.clone());
        match decision.rejection {
            None => result.admitted += 1,
            Some(r) => result.problems.push(format!(
                "{} refused on {node} in the replay: {}: {}",
                planned.pod, r.reason, r.message
            )),
        }
    }
    result.verified = result.problems.is_empty();
    result
}

/// Stranded capacity of `nodes` (the states of `state`'s nodes, whose free
/// DRA devices are `dra`) for `failed` pods.
fn stranded(state: &FleetState, nodes: &[Node], dra: &[DraDevices], failed: &[Pod]) -> Stranded {
    let mut total = Stranded::default();
    let mut milli_total: u64 = 0;
    for ((input, node), dra) in state.nodes.iter().zip(nodes).zip(dra) {
        if !is_stranded(node, &input.empty, failed) {
            continue;
        }
        let mut free = node_free(node);
        free.add_dra(dra, node.machine());
        milli_total += free.milli_cpu;
        total.memory_bytes += free.memory_bytes;
        let zones = free
            .zones
            .into_iter()
            .map(|z| {
                for (resource, &n) in &z.devices {
                    *total.devices.entry(resource.clone()).or_default() += n;
                }
                StrandedZone {
                    numa: z.numa,
                    cpus: z.milli_cpu as f64 / 1000.0,
                    memory_bytes: z.memory_bytes,
                    devices: z.devices,
                }
            })
            .collect();
        total.nodes.push(StrandedNode {
            node: input.name.clone(),
            cpus: free.milli_cpu as f64 / 1000.0,
            memory_bytes: free.memory_bytes,
            zones,
        });
    }
    total.cpus = milli_total as f64 / 1000.0;
    total
}
