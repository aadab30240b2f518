//! State classes: the simulator's way of holding thousands of engine nodes
//! cheaply.
//!
//! Two nodes of the same shape that have admitted pods of the same shapes
//! in the same order (and deleted the same positions) are in the same
//! engine state — the engine is deterministic and its decisions do not
//! depend on pod names, only on the pods' resources and on the order of
//! their uids, which grows with admission order in both. So nodes are
//! grouped into *classes*: one engine [`Node`] per class, shared by all its
//! member nodes, and every transition `(class, event) → outcome` is
//! computed once and cached. A class whose last member leaves drops its
//! engine node (its cached transitions stay); a node that later reaches it
//! again rebuilds it from the class it comes from.
//!
//! Inside a class's engine node the pods are canonical copies
//! (`sim/c<n>`, `n` from a counter of admission attempts: unique, as the
//! kubelet's uids are, and growing along every node's history), never the
//! workload's pods; the replay check
//! ([`crate::replay`]) replays the real pods node by node to prove the
//! grouping changed nothing.
//!
//! Owns: classes, members, transitions, the scheduler-visible totals of a
//! class. Must not touch: which node a scheduler picks.

use std::collections::{BTreeSet, HashMap};

use topoalign_engine::{Node, NumaUsage};
use topoalign_scenario::dra::DraState;

use super::shapes::{CPU, MEMORY, Shapes};

pub(crate) type ClassId = u32;

/// What happens to a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum ClassEvent {
    /// A pod of this shape arrives.
    Add(u32),
    /// The pod at this position (admission order) is deleted.
    Remove(u32),
}

/// The engine's answer to an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The node is now in this class.
    Moved(ClassId),
    /// The kubelet rejected the pod; the reason is an index into
    /// [`ClassTable::reasons`].
    Rejected(u32),
}

pub(crate) struct Class {
    pub group: u32,
    pub node: Option<Box<Node>>,
    pub members: BTreeSet<u32>,
    /// Scheduler-visible requested totals (the shapes' request vectors).
    pub used: Vec<i64>,
    pub nonzero_cpu: i64,
    pub nonzero_memory: i64,
    /// Shapes of the admitted pods, in admission order.
    pub pod_shapes: Vec<u32>,
    /// NRT zones of the engine node, computed on demand.
    pub zones: Option<Vec<NumaUsage>>,
    /// The run's filter verdicts for shapes on this class.
    pub verdicts: Vec<(u32, bool)>,
    /// The scheduler's DRA side of the node (the claims its pods hold),
    /// when the fleet publishes devices through DRA.
    pub dra: Option<Box<DraState>>,
    /// What DRA gave the pod whose admission made this class, when it
    /// takes claims.
    pub dra_added: Option<DraAdded>,
    live_at: Option<usize>,
}

/// What DRA gave the last pod added (on the class's first node's pools).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DraAdded {
    /// The allocator found devices for all its claims.
    pub allocated: bool,
    /// The NUMA nodes the kubelet pinned its CPUs and memory to.
    pub kubelet_numa_nodes: Vec<usize>,
    /// `claim/request: device on NUMA node N` for each device off those
    /// nodes (the one rule: `topoalign_scenario::dra::misaligned_devices`).
    pub misaligned: Vec<String>,
    /// The `--dra-align` verdict's words when misaligned (or why nothing
    /// was allocated).
    pub refusal: Option<String>,
}

/// A node's state: the kubelet's (the engine) and, with DRA, the
/// scheduler's DRA allocations.
type NodeState = (Node, Option<Box<DraState>>, Option<DraAdded>);

impl Class {
    pub fn verdict(&self, shape: u32) -> Option<bool> {
        self.verdicts.iter().find(|(s, _)| *s == shape).map(|&(_, v)| v)
    }

    /// The lowest node index in the class (the scheduler's tie-break).
    pub fn first_member(&self) -> u32 {
        self.members.first().copied().unwrap_or(u32::MAX)
    }
}

/// What a scheduler reads of a live class, packed together.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LiveRow {
    pub class: ClassId,
    pub group: u32,
    pub first_member: u32,
    /// Free fractions of cpu and memory after the class's non-zero
    /// requests, summed: the scheduler's preference (see `run::Rank`).
    pub free_fraction: f64,
    pub allocatable_cpu: i64,
    pub allocatable_memory: i64,
}

/// A live class's place in its group's preference order: smaller first.
pub(crate) type OrderKey = (i64, u32, ClassId);

/// Per group and per requirement (a shape's request vector), the live
/// classes with room for it, in preference order: a pod's candidates are
/// the head of one set, not a scan of the fleet.
type FittingSets = Vec<Vec<std::collections::BTreeSet<OrderKey>>>;

pub(crate) struct ClassTable {
    pub classes: Vec<Class>,
    /// Classes with at least one member.
    pub live: Vec<LiveRow>,
    /// `[group][requirement]`: see [`FittingSets`].
    pub fitting: FittingSets,
    requirements: Vec<Vec<(usize, i64)>>,
    /// Emptiest first (spread) or fullest first (bin-pack).
    emptiest_first: bool,
    /// Allocatable vector of each group.
    allocatable: Vec<Vec<i64>>,
    transitions: HashMap<(ClassId, ClassEvent), Outcome>,
    pub reasons: Vec<String>,
    reason_ids: HashMap<String, u32>,
    resources: usize,
    /// Admission attempts so far (canonical uids).
    next_uid: std::cell::Cell<u64>,
}

impl ClassTable {
    pub fn new(
        resources: usize,
        allocatable: Vec<Vec<i64>>,
        emptiest_first: bool,
        requirements: Vec<Vec<(usize, i64)>>,
    ) -> Self {
        ClassTable {
            classes: Vec::new(),
            live: Vec::new(),
            fitting: vec![vec![std::collections::BTreeSet::new(); requirements.len()]; allocatable.len()],
            requirements,
            emptiest_first,
            allocatable,
            transitions: HashMap::new(),
            reasons: Vec::new(),
            reason_ids: HashMap::new(),
            resources,
            next_uid: std::cell::Cell::new(0),
        }
    }

    /// A group's empty node (and its DRA side), with these members.
    pub fn add_root(
        &mut self,
        group: u32,
        node: Node,
        dra: Option<DraState>,
        members: impl IntoIterator<Item = u32>,
    ) -> ClassId {
        let id = self.push(Class {
            group,
            node: Some(Box::new(node)),
            members: members.into_iter().collect(),
            used: vec![0; self.resources],
            nonzero_cpu: 0,
            nonzero_memory: 0,
            pod_shapes: Vec::new(),
            zones: None,
            verdicts: Vec::new(),
            dra: dra.map(Box::new),
            dra_added: None,
            live_at: None,
        });
        if !self.classes[id as usize].members.is_empty() {
            self.mark_live(id);
        }
        id
    }

    fn push(&mut self, class: Class) -> ClassId {
        self.classes.push(class);
        u32::try_from(self.classes.len() - 1).unwrap_or(u32::MAX)
    }

    /// The class's key in its group's order.
    pub fn order_key(&self, row: &LiveRow) -> OrderKey {
        // Fixed point keeps equal states equal and orders the rest.
        let fixed = (row.free_fraction * 1e12) as i64;
        let key = if self.emptiest_first { -fixed } else { fixed };
        (key, row.first_member, row.class)
    }

    fn mark_live(&mut self, id: ClassId) {
        let at = self.live.len();
        let class = &mut self.classes[id as usize];
        if class.live_at.is_some() {
            return;
        }
        class.live_at = Some(at);
        let allocatable = &self.allocatable[class.group as usize];
        let of = |r: usize| allocatable.get(r).copied().unwrap_or(0);
        let fraction = |capacity: i64, requested: i64| {
            if capacity <= 0 {
                0.0
            } else {
                (capacity - requested) as f64 / capacity as f64
            }
        };
        let row = LiveRow {
            class: id,
            group: class.group,
            first_member: class.first_member(),
            free_fraction: fraction(of(CPU), class.nonzero_cpu) + fraction(of(MEMORY), class.nonzero_memory),
            allocatable_cpu: of(CPU),
            allocatable_memory: of(MEMORY),
        };
        self.live.push(row);
        self.index(&row, true);
    }

    /// Keeps a live class's first member (its tie-break) current.
    fn refresh_first_member(&mut self, id: ClassId) {
        let class = &self.classes[id as usize];
        let first = class.first_member();
        if let Some(at) = class.live_at
            && self.live[at].first_member != first
        {
            let row = self.live[at];
            self.index(&row, false);
            self.live[at].first_member = first;
            let row = self.live[at];
            self.index(&row, true);
        }
    }

    fn mark_dead(&mut self, id: ClassId) {
        let Some(at) = self.classes[id as usize].live_at.take() else {
            return;
        };
        let row = self.live.swap_remove(at);
        self.index(&row, false);
        if let Some(moved) = self.live.get(at) {
            self.classes[moved.class as usize].live_at = Some(at);
        }
        let class = &mut self.classes[id as usize];
        class.node = None;
        class.dra = None;
        class.zones = None;
    }

    /// Adds a row to (or removes it from) the fitting sets it belongs to.
    fn index(&mut self, row: &LiveRow, insert: bool) {
        let key = self.order_key(row);
        let class = &self.classes[row.class as usize];
        let allocatable = &self.allocatable[row.group as usize];
        let sets = &mut self.fitting[row.group as usize];
        for (q, request) in self.requirements.iter().enumerate() {
            let fits = request.iter().all(|&(r, amount)| {
                class.used.get(r).copied().unwrap_or(0).saturating_add(amount)
                    <= allocatable.get(r).copied().unwrap_or(0)
            });
            if fits {
                if insert {
                    sets[q].insert(key);
                } else {
                    sets[q].remove(&key);
                }
            }
        }
    }

    /// Drops a live class from one requirement's set (a filter turned it
    /// down for the only shape with that requirement).
    pub fn drop_candidate(&mut self, id: ClassId, requirement: usize) {
        if let Some(row) = self.row(id).copied() {
            let key = self.order_key(&row);
            self.fitting[row.group as usize][requirement].remove(&key);
        }
    }

    /// The live row of a live class.
    pub fn row(&self, id: ClassId) -> Option<&LiveRow> {
        self.classes[id as usize].live_at.map(|at| &self.live[at])
    }

    /// The engine's answer to `event` on a node of class `from` (which must
    /// have members, so its engine node exists). Cached.
    ///
    /// When the class's only member is the node the event happens to, and
    /// it will follow the outcome (`leaving`), the class's engine node is
    /// taken rather than copied: the class is about to die anyway. A
    /// rejected pod leaves the node as the kubelet leaves it — everything
    /// the pod was given released — and the node goes back.
    pub fn transition(&mut self, from: ClassId, event: ClassEvent, shapes: &Shapes, leaving: bool) -> Outcome {
        if let Some(&outcome) = self.transitions.get(&(from, event)) {
            if let Outcome::Moved(to) = outcome
                && self.classes[to as usize].node.is_none()
            {
                // Rebuild a dropped engine node the same way as before.
                if let Ok((node, dra, _)) = self.apply(from, event, shapes, leaving) {
                    self.classes[to as usize].node = Some(Box::new(node));
                    self.classes[to as usize].dra = dra;
                }
            }
            return outcome;
        }
        let outcome = match self.apply(from, event, shapes, leaving) {
            Ok((node, dra, dra_added)) => {
                let parent = &self.classes[from as usize];
                let mut used = parent.used.clone();
                let mut pod_shapes = parent.pod_shapes.clone();
                let (shape, sign) = match event {
                    ClassEvent::Add(shape) => {
                        pod_shapes.push(shape);
                        (shape, 1)
                    }
                    ClassEvent::Remove(at) => (pod_shapes.remove(at as usize), -1),
                };
                let shape = &shapes.shapes[shape as usize];
                for &(r, amount) in &shape.request {
                    used[r] += sign * amount;
                }
                let class = Class {
                    group: parent.group,
                    node: Some(Box::new(node)),
                    members: BTreeSet::new(),
                    used,
                    nonzero_cpu: parent.nonzero_cpu + sign * shape.nonzero_cpu,
                    nonzero_memory: parent.nonzero_memory + sign * shape.nonzero_memory,
                    pod_shapes,
                    zones: None,
                    verdicts: Vec::new(),
                    dra,
                    dra_added,
                    live_at: None,
                };
                Outcome::Moved(self.push(class))
            }
            Err(reason) => {
                let next = u32::try_from(self.reasons.len()).unwrap_or(u32::MAX);
                let id = *self.reason_ids.entry(reason.clone()).or_insert(next);
                if id == next {
                    self.reasons.push(reason);
                }
                Outcome::Rejected(id)
            }
        };
        self.transitions.insert((from, event), outcome);
        outcome
    }

    /// Whether the engine would admit a pod of `shape` on class `of`,
    /// without creating a class for the result (end-of-run analysis).
    pub fn would_admit(&mut self, of: ClassId, shape: u32, shapes: &Shapes) -> bool {
        match self.transitions.get(&(of, ClassEvent::Add(shape))) {
            Some(Outcome::Moved(_)) => true,
            Some(Outcome::Rejected(_)) => false,
            None => self.trial(of, shape, shapes),
        }
    }

    /// Whether the engine admits a pod of `shape` on a copy of `of`'s node.
    fn trial(&self, of: ClassId, shape: u32, shapes: &Shapes) -> bool {
        let class = &self.classes[of as usize];
        let Some(node) = class.node.as_deref() else {
            return false;
        };
        let mut node = node.clone();
        let uid = self.next_uid.get() + 1;
        self.next_uid.set(uid);
        node.admit(canonical_pod(uid, shape, shapes)).admitted()
    }

    /// Runs `event` on `from`'s engine node (and its DRA side): taken when
    /// `from` has this one member and it is `leaving`, a copy otherwise. A
    /// taken node that rejects the pod goes back to `from`.
    ///
    /// A pod that takes claims and is admitted gets its devices from the
    /// DRA allocator on the new state ([`DraAdded`]); a deleted pod frees
    /// them. A rejected pod leaves the DRA side as it was (its claims are
    /// deallocated when the pod fails).
    fn apply(&mut self, from: ClassId, event: ClassEvent, shapes: &Shapes, leaving: bool) -> Result<NodeState, String> {
        let class = &mut self.classes[from as usize];
        let take = leaving && class.members.len() == 1;
        let (mut node, mut dra) = match (take, class.node.take()) {
            (_, None) => {
                // A class with members always has its engine node.
                return Err("internal: class without engine state".into());
            }
            (true, Some(node)) => (*node, class.dra.take()),
            (false, Some(node)) => {
                let copy = (*node).clone();
                class.node = Some(node);
                (copy, class.dra.clone())
            }
        };
        let uid = self.next_uid.get() + 1;
        self.next_uid.set(uid);
        match event {
            ClassEvent::Add(shape) => {
                let pod = canonical_pod(uid, shape, shapes);
                let name = pod.name.clone();
                let decision = node.admit(pod);
                match &decision.rejection {
                    None => {
                        let added = match (&mut dra, &shapes.shapes[shape as usize].dra) {
                            (Some(state), Some(wants)) => dra_admit(state, wants, &name, &node, &decision),
                            _ => None,
                        };
                        Ok((node, dra, added))
                    }
                    Some(rejection) => {
                        if take {
                            class.node = Some(Box::new(node));
                            class.dra = dra;
                        }
                        // A kubelet that would crash admitting the pod
                        // (NUMA ids past its 64-bit masks) admits nothing:
                        // a failed admission whose reason says the crash
                        // and why, never a made-up kubelet reason.
                        Err(match &decision.kubelet_panic {
                            Some(panic) => format!("{}: {panic}", topoalign_engine::KubeletPanic::REASON),
                            None => rejection.reason.clone(),
                        })
                    }
                }
            }
            ClassEvent::Remove(at) => {
                let (uid, name) = node
                    .pods()
                    .get(at as usize)
                    .map(|p| (p.uid.clone(), p.name.clone()))
                    .unwrap_or_default();
                let wants = class
                    .pod_shapes
                    .get(at as usize)
                    .and_then(|&s| shapes.shapes[s as usize].dra.as_ref());
                if let (Some(state), Some(wants)) = (&mut dra, wants) {
                    state.remove(&wants.key(&name));
                }
                node.remove(&uid);
                Ok((node, dra, None))
            }
        }
    }

    /// Whether the scheduler's DRA allocator finds devices for a pod of
    /// `shape` on class `of` (the DynamicResources filter), on a copy of
    /// its DRA side. `true` for pods without claims.
    pub fn dra_allocates(&self, of: ClassId, shape: u32, shapes: &Shapes) -> bool {
        let Some(wants) = &shapes.shapes[shape as usize].dra else {
            return true;
        };
        let Some(state) = self.classes[of as usize].dra.as_deref() else {
            return false;
        };
        let mut state = state.clone();
        let uid = self.next_uid.get() + 1;
        self.next_uid.set(uid);
        let name = format!("c{uid:012}");
        match state.admit(&wants.k8s_pod(&name)) {
            Ok(Some(devices)) => devices.outcome == "allocated",
            // Device plugins serve the pod's extended resources here.
            Ok(None) => true,
            Err(_) => false,
        }
    }

    /// Moves node `member` from class `from` to class `to`.
    pub fn move_member(&mut self, member: u32, from: ClassId, to: ClassId) {
        if from == to {
            return;
        }
        self.classes[from as usize].members.remove(&member);
        self.classes[to as usize].members.insert(member);
        self.mark_live(to);
        self.refresh_first_member(to);
        if self.classes[from as usize].members.is_empty() {
            self.mark_dead(from);
        } else {
            self.refresh_first_member(from);
        }
    }

    /// The class's NRT zones (computed once while the class lives).
    pub fn zones(&mut self, id: ClassId) -> &[NumaUsage] {
        let class = &mut self.classes[id as usize];
        if class.zones.is_none() {
            class.zones = Some(class.node.as_deref().map(Node::numa_usage).unwrap_or_default());
        }
        class.zones.as_deref().unwrap_or_default()
    }
}

/// The class-internal copy of a pod of `shape`, admission attempt `n`.
///
/// Uids must never repeat: the kubelet keeps per-uid leftovers of a
/// rejected pod (the CPU manager's reusable init-container CPUs), harmless
/// only because no later pod has that uid. They must also grow along a
/// node's history as the workload's `sim-<index>` uids do, in case an order
/// by uid matters; a counter of attempts does both.
fn canonical_pod(n: u64, shape: u32, shapes: &Shapes) -> topoalign_model::Pod {
    let mut pod = shapes.shapes[shape as usize].template.clone();
    let uid = format!("c{n:012}");
    pod.namespace = "sim".into();
    pod.name.clone_from(&uid);
    pod.uid = uid;
    pod
}

/// Allocates the claims (and the special claim of DRA-backed extended
/// resources) of the pod just admitted as `name` on `node`, and judges its
/// devices against the NUMA nodes the kubelet pinned. `None` when DRA has
/// nothing to allocate (device plugins serve the pod's extended resources
/// on this node, or its release leaves them to them).
fn dra_admit(
    state: &mut DraState,
    wants: &super::shapes::DraPod,
    name: &str,
    node: &Node,
    decision: &topoalign_engine::Decision,
) -> Option<DraAdded> {
    // By the machine's own NUMA ids, as the DRA devices' attributes name
    // them (the same on a machine whose ids are all below 64).
    let machine = node.machine();
    let pinned: std::collections::BTreeSet<usize> =
        topoalign_scenario::dra::pinned_numa_nodes(&decision.containers, |cpu| machine.cpu(cpu).map(|c| c.numa))
            .into_iter()
            .map(|numa| machine.numa_label(numa))
            .collect();
    let devices = match state.admit(&wants.k8s_pod(name)) {
        Ok(Some(devices)) => devices,
        Ok(None) => return None,
        Err(error) => {
            return Some(DraAdded {
                allocated: false,
                kubelet_numa_nodes: pinned.into_iter().collect(),
                misaligned: Vec::new(),
                refusal: Some(format!("DRA: {error}")),
            });
        }
    };
    let allocated = devices.outcome == "allocated";
    let misaligned = topoalign_scenario::dra::misaligned_devices(&devices, &pinned).unwrap_or_default();
    let refusal = if allocated {
        crate::dra::alignment_verdict(&devices, &pinned).map(|m| m.to_string())
    } else {
        Some(format!(
            "DRA: the scheduler's allocator finds no devices here: {}",
            devices.message.unwrap_or_default()
        ))
    };
    Some(DraAdded {
        allocated,
        kubelet_numa_nodes: pinned.into_iter().collect(),
        misaligned,
        refusal,
    })
}
