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
//! (`sim/c<depth>`), never the workload's pods; the replay check
//! ([`crate::replay`]) replays the real pods node by node to prove the
//! grouping changed nothing.
//!
//! Owns: classes, members, transitions, the scheduler-visible totals of a
//! class. Must not touch: which node a scheduler picks.

use std::collections::{BTreeSet, HashMap};

use topoalign_engine::Node;
use topoalign_nrt::ZoneUsage;

use super::shapes::Shapes;

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
    /// Events since the group's empty node: the canonical uid counter.
    depth: u32,
    pub node: Option<Box<Node>>,
    pub members: BTreeSet<u32>,
    /// Scheduler-visible requested totals (the shapes' request vectors).
    pub used: Vec<i64>,
    pub nonzero_cpu: i64,
    pub nonzero_memory: i64,
    /// Shapes of the admitted pods, in admission order.
    pub pod_shapes: Vec<u32>,
    /// NRT zones of the engine node, computed on demand.
    pub zones: Option<Vec<ZoneUsage>>,
    /// The run's filter verdicts for shapes on this class.
    pub verdicts: Vec<(u32, bool)>,
    live_at: Option<usize>,
}

impl Class {
    pub fn verdict(&self, shape: u32) -> Option<bool> {
        self.verdicts.iter().find(|(s, _)| *s == shape).map(|&(_, v)| v)
    }

    /// The lowest node index in the class (the scheduler's tie-break).
    pub fn first_member(&self) -> u32 {
        self.members.first().copied().unwrap_or(u32::MAX)
    }
}

pub(crate) struct ClassTable {
    pub classes: Vec<Class>,
    /// Classes with at least one member.
    pub live: Vec<ClassId>,
    transitions: HashMap<(ClassId, ClassEvent), Outcome>,
    pub reasons: Vec<String>,
    reason_ids: HashMap<String, u32>,
    resources: usize,
}

impl ClassTable {
    pub fn new(resources: usize) -> Self {
        ClassTable {
            classes: Vec::new(),
            live: Vec::new(),
            transitions: HashMap::new(),
            reasons: Vec::new(),
            reason_ids: HashMap::new(),
            resources,
        }
    }

    /// A group's empty node, with these members.
    pub fn add_root(&mut self, group: u32, node: Node, members: impl IntoIterator<Item = u32>) -> ClassId {
        let id = self.push(Class {
            group,
            depth: 0,
            node: Some(Box::new(node)),
            members: members.into_iter().collect(),
            used: vec![0; self.resources],
            nonzero_cpu: 0,
            nonzero_memory: 0,
            pod_shapes: Vec::new(),
            zones: None,
            verdicts: Vec::new(),
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

    fn mark_live(&mut self, id: ClassId) {
        let class = &mut self.classes[id as usize];
        if class.live_at.is_none() {
            class.live_at = Some(self.live.len());
            self.live.push(id);
        }
    }

    fn mark_dead(&mut self, id: ClassId) {
        let Some(at) = self.classes[id as usize].live_at.take() else {
            return;
        };
        self.live.swap_remove(at);
        if let Some(&moved) = self.live.get(at) {
            self.classes[moved as usize].live_at = Some(at);
        }
        let class = &mut self.classes[id as usize];
        class.node = None;
        class.zones = None;
    }

    /// The engine's answer to `event` on a node of class `from` (which must
    /// have members, so its engine node exists). Cached.
    pub fn transition(&mut self, from: ClassId, event: ClassEvent, shapes: &Shapes) -> Outcome {
        if let Some(&outcome) = self.transitions.get(&(from, event)) {
            if let Outcome::Moved(to) = outcome
                && self.classes[to as usize].node.is_none()
            {
                // Rebuild a dropped engine node the same way as before.
                if let Ok(node) = self.apply(from, event, shapes) {
                    self.classes[to as usize].node = Some(Box::new(node));
                }
            }
            return outcome;
        }
        let outcome = match self.apply(from, event, shapes) {
            Ok(node) => {
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
                    depth: parent.depth + 1,
                    node: Some(Box::new(node)),
                    members: BTreeSet::new(),
                    used,
                    nonzero_cpu: parent.nonzero_cpu + sign * shape.nonzero_cpu,
                    nonzero_memory: parent.nonzero_memory + sign * shape.nonzero_memory,
                    pod_shapes,
                    zones: None,
                    verdicts: Vec::new(),
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
    pub fn would_admit(&self, of: ClassId, shape: u32, shapes: &Shapes) -> bool {
        match self.transitions.get(&(of, ClassEvent::Add(shape))) {
            Some(Outcome::Moved(_)) => true,
            Some(Outcome::Rejected(_)) => false,
            None => self.apply(of, ClassEvent::Add(shape), shapes).is_ok(),
        }
    }

    /// Runs `event` on a copy of `from`'s engine node.
    fn apply(&self, from: ClassId, event: ClassEvent, shapes: &Shapes) -> Result<Node, String> {
        let class = &self.classes[from as usize];
        let Some(node) = class.node.as_deref() else {
            // A class with members always has its engine node.
            return Err("internal: class without engine state".into());
        };
        let mut node = node.clone();
        match event {
            ClassEvent::Add(shape) => {
                let mut pod = shapes.shapes[shape as usize].template.clone();
                let uid = format!("c{:010}", class.depth + 1);
                pod.namespace = "sim".into();
                pod.name.clone_from(&uid);
                pod.uid = uid;
                let decision = node.admit(pod);
                match decision.rejection {
                    None => Ok(node),
                    Some(rejection) => Err(rejection.reason),
                }
            }
            ClassEvent::Remove(at) => {
                let uid = node.pods().get(at as usize).map(|p| p.uid.clone()).unwrap_or_default();
                node.remove(&uid);
                Ok(node)
            }
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
        if self.classes[from as usize].members.is_empty() {
            self.mark_dead(from);
        }
    }

    /// The class's NRT zones (computed once while the class lives).
    pub fn zones(&mut self, id: ClassId) -> &[ZoneUsage] {
        let class = &mut self.classes[id as usize];
        if class.zones.is_none() {
            class.zones = Some(class.node.as_deref().map(topoalign_nrt::zone_usage).unwrap_or_default());
        }
        class.zones.as_deref().unwrap_or_default()
    }
}
