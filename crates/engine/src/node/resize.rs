//! In-place pod resize: whether the node's kubelet release takes a new
//! `cpu`/`memory` size for an admitted pod's containers, and the pod's
//! allocated resources when it does.
//!
//! Owns: the order of the kubelet's resize checks in each release and their
//! texts (v1.32/v1.33 `(*Kubelet).canResizePod` in `pkg/kubelet/kubelet.go`;
//! v1.34/v1.35 `(*allocation.manager).canResizePod`; v1.36+ the
//! `podResizesAdmitHandler` of `pkg/kubelet/allocation/handlers.go` followed
//! by the other admit handlers), and what an accepted resize changes: the
//! pod's requests as the resource-fit check counts them; from 1.34 the
//! allocation manager's queue of pending (deferred) resizes, its order
//! (`sortPendingResizes`, sorted by Go's own algorithm: `go_sort`) and its
//! retries when a resize arrives or a pod leaves. Must not touch: the
//! managers' allocations beyond the topology manager's admission of the
//! resized pod — a resize that reaches them never changes an exclusive CPU
//! set or pinned memory the pod holds (see [`Node::resize`]).

mod go_sort;

use std::collections::HashMap;

use topoalign_cpu_manager::CpuPolicyName;
use topoalign_memory_manager::MemoryPolicyName;
use topoalign_model::{Container, KubeletVersion, Pod, QosClass, Quantity, ResourceList};
use topoalign_topology_manager::TopologyPolicyName;

use super::Node;
use crate::MergeTrace;
use crate::fit::{self, PodRequests};

/// The kubelet's answer to a resize of an admitted pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResizeOutcome {
    /// The new sizes are the pod's allocated resources now (also when they
    /// equal the old ones).
    Applied,
    /// `InPlacePodVerticalScaling` is off (1.32's default; 1.33 and 1.34
    /// can switch it off): the kubelet does not look at the resize — no
    /// check, no condition — and, keeping no allocation apart from the pod
    /// the API server holds, counts the desired sizes at every later
    /// admission. What the managers allocated at admission stays as it is.
    Unchecked,
    /// The kubelet's `PodResizePending` condition: reason `Infeasible` or
    /// `Deferred`, and its message. The pod keeps what it was given.
    Pending { reason: PendingReason, message: String },
}

/// The reason of a `PodResizePending` condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PendingReason {
    /// The kubelet will not take this size on this node.
    Infeasible,
    /// It does not fit now. From 1.34 the kubelet queues it and decides it
    /// again whenever a resize arrives or a pod leaves (see
    /// [`ResizeDecision::accepted_pending`]); before, only at the pod's next
    /// resize.
    Deferred,
}

impl PendingReason {
    /// `Infeasible` or `Deferred`, as the condition spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            PendingReason::Infeasible => "Infeasible",
            PendingReason::Deferred => "Deferred",
        }
    }
}

/// The engine's answer to one resize.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResizeDecision {
    /// `namespace/name`.
    pub pod: String,
    pub outcome: ResizeOutcome,
    /// Other pods (`namespace/name`) whose pending resize the retry this
    /// resize triggered accepted, in the kubelet's order (1.34+).
    pub accepted_pending: Vec<String>,
}

/// The allocation manager's resize state from 1.34 (`InPlacePodVerticalScaling`
/// on): the API server's pod of every pod resized, the status manager's
/// `PodResizePending` conditions, and the queue of pending resizes.
#[derive(Clone, Debug, Default)]
pub(crate) struct PendingResizes {
    /// uid → the latest desired pod and the pod's `spec.priority`.
    desired: HashMap<String, (Pod, i32)>,
    /// uid → the pod's `PodResizePending` condition.
    conditions: HashMap<String, Condition>,
    /// uids, in the order the next retry decides them.
    queue: Vec<String>,
    /// The status manager's clock, in conditions written.
    tick: u64,
}

/// A `PodResizePending` condition: its reason, message and the tick of its
/// `lastTransitionTime` (kept while the reason stays).
#[derive(Clone, Debug)]
struct Condition {
    reason: PendingReason,
    message: String,
    since: u64,
}

impl PendingResizes {
    /// Forgets a pod that left the node (the pod manager no longer finds
    /// it: the kubelet drops it from the queue at its next look).
    pub(crate) fn forget(&mut self, uid: &str) {
        if self.desired.is_empty() && self.conditions.is_empty() {
            return;
        }
        self.desired.remove(uid);
        self.conditions.remove(uid);
        self.queue.retain(|u| u != uid);
    }

    fn set_condition(&mut self, uid: &str, reason: PendingReason, message: String) {
        self.tick += 1;
        let since = match self.conditions.get(uid) {
            Some(old) if old.reason == reason => old.since,
            _ => self.tick,
        };
        self.conditions
            .insert(uid.to_string(), Condition { reason, message, since });
    }
}

/// What [`Node::delete`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Deletion {
    /// Whether such a pod was admitted.
    pub found: bool,
    /// Pods (`namespace/name`) whose pending resize the retry after the
    /// removal accepted, in the kubelet's order.
    pub accepted_pending: Vec<String>,
}

/// Why [`Node::resize`] gives no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResizeError {
    /// No admitted pod has this uid.
    #[error("no admitted pod has uid {0:?}")]
    NotAdmitted(String),
    /// A resize whose answer depends on the container status, which a
    /// scenario does not carry: 1.34 with an
    /// `InPlacePodVerticalScalingExclusive*` gate on and a changed exclusive
    /// size; 1.32/1.33 with `InPlacePodVerticalScalingExclusiveCPUs` on, a
    /// Guaranteed pod under the static CPU policy, and a changed CPU
    /// request under `restricted`/`single-numa-node` or `full-pcpus-only`;
    /// 1.32/1.33 under the `Static` memory policy and the pod scope, where
    /// the memory of an init container that ran to completion is allocated
    /// again on NUMA nodes the status decides (`Node::init_memory_by_status`).
    #[error("{0}")]
    NotReproduced(String),
}

impl Node {
    /// The kubelet's decision on resizing the admitted pod `desired.uid`
    /// to the `cpu` and `memory` requests and limits of `desired`'s
    /// containers (every other field of `desired` is ignored; the caller
    /// has checked that the QoS class stays), the pod's `spec.priority`
    /// taken as 0 ([`Node::resize_with_priority`]). Applied (or, with
    /// `InPlacePodVerticalScaling` off, taken unchecked), the pod's new
    /// requests are what later fit checks count; refused, the pod keeps its
    /// allocation — and from 1.34 a deferred resize stays
    /// queued, and other pods' pending resizes may be accepted by the retry
    /// (listed in [`ResizeDecision::accepted_pending`]).
    ///
    /// Every resize the kubelet lets through to its admit handlers keeps the
    /// exclusive CPUs and pinned memory the pod holds: a Guaranteed pod
    /// changing its CPU (memory) request under the static CPU (`Static`
    /// memory) policy is refused first. The topology manager then admits
    /// the resized pod as at its admission (up to 1.36): the managers
    /// regenerate the hints of an allocation they hold and leave it as it
    /// is (the CPU manager checks `full-pcpus-only` first and can still
    /// refuse), but allocate afresh what the pod no longer holds — under the
    /// `Static` memory policy the memory of an init container that ran to
    /// completion (the memory manager dropped it when the next container
    /// started), which can fail (`Deferred`) and, allocated, stays with the
    /// pod. From 1.37 the CPU, memory and device managers skip a resize
    /// (`lifecycle.ResizeOperation`): no hints, no allocation. Then the
    /// resource-fit check decides.
    ///
    /// # Errors
    /// [`ResizeError::NotAdmitted`]; [`ResizeError::NotReproduced`] where
    /// the answer depends on the container status a scenario does not carry
    /// (see the variant).
    pub fn resize(&mut self, desired: &Pod) -> Result<ResizeDecision, ResizeError> {
        self.resize_with_priority(desired, 0)
    }

    /// [`Node::resize`] of a pod whose `spec.priority` is `priority` (the
    /// order of pending resizes reads it).
    ///
    /// From 1.34 with `InPlacePodVerticalScaling` on, the kubelet's
    /// `HandlePodUpdates`: a resize that changes nothing the pod asked for
    /// before is not looked at; one back to the allocated sizes clears the
    /// pod's pending condition; any other queues the pod
    /// (`PushPendingResize`) and decides every pending resize again, in the
    /// queue's order (`RetryPendingResizes`). The answer is the pod's state
    /// afterwards, with the other pods the retry accepted.
    ///
    /// # Errors
    /// As [`Node::resize`].
    pub fn resize_with_priority(&mut self, desired: &Pod, priority: i32) -> Result<ResizeDecision, ResizeError> {
        let index = self
            .active
            .iter()
            .position(|p| p.uid == desired.uid)
            .ok_or_else(|| ResizeError::NotAdmitted(desired.uid.clone()))?;
        let version = self.config.kubelet_version;
        if !version.at_least(KubeletVersion::V1_34) || !self.config.feature_gates.in_place_resize(version) {
            if !version.at_least(KubeletVersion::V1_33) && self.config.feature_gates.in_place_resize(version) {
                self.adopt_init_sizes_unchecked(index, desired);
            }
            let allocated = self.active[index].clone();
            let resized = with_sizes_of(&allocated, desired);
            let outcome = self.decide(index, resized)?;
            return Ok(ResizeDecision {
                pod: allocated.key(),
                outcome,
                accepted_pending: Vec::new(),
            });
        }
        let allocated = &self.active[index];
        let key = allocated.key();
        let resized = with_sizes_of(allocated, desired);
        let before = match self.resizes.desired.get(&desired.uid) {
            Some((old, _)) => with_sizes_of(allocated, old),
            None => allocated.clone(),
        };
        // A refusal the kubelet's code would not reach as topoalign answers
        // it stops the replay before the pod is queued.
        self.guaranteed_refusal(allocated, &resized)?;
        let unchanged = resized == *allocated;
        self.resizes
            .desired
            .insert(desired.uid.clone(), (desired.clone(), priority));
        let mut accepted = Vec::new();
        if resized != before {
            if unchanged {
                self.resizes.conditions.remove(&desired.uid);
            } else {
                self.push_pending_resize(&desired.uid);
                accepted = self.retry_pending_resizes();
            }
        }
        let index = self
            .active
            .iter()
            .position(|p| p.uid == desired.uid)
            .ok_or_else(|| ResizeError::NotAdmitted(desired.uid.clone()))?;
        let outcome = if with_sizes_of(&self.active[index], desired) == self.active[index] {
            ResizeOutcome::Applied
        } else {
            match self.resizes.conditions.get(&desired.uid) {
                Some(condition) => ResizeOutcome::Pending {
                    reason: condition.reason,
                    message: condition.message.clone(),
                },
                None => ResizeOutcome::Pending {
                    reason: PendingReason::Deferred,
                    message: String::new(),
                },
            }
        };
        accepted.retain(|k| *k != key);
        Ok(ResizeDecision {
            pod: key,
            outcome,
            accepted_pending: accepted,
        })
    }

    /// Deletes the pod with `uid` ([`Node::remove`]), then, as the kubelet's
    /// `HandlePodRemoves` does, decides every pending resize again.
    pub fn delete(&mut self, uid: &str) -> Deletion {
        let found = self.remove(uid);
        let accepted_pending = if self.resizes.queue.is_empty() {
            Vec::new()
        } else {
            self.retry_pending_resizes()
        };
        Deletion {
            found,
            accepted_pending,
        }
    }

    /// `PushPendingResize`: queues `uid` unless it is queued already, then
    /// sorts the queue (`sortPendingResizes`) with Go's algorithm.
    fn push_pending_resize(&mut self, uid: &str) {
        if self.resizes.queue.iter().any(|u| u == uid) {
            return;
        }
        self.resizes.queue.push(uid.to_string());
        // What the comparator reads of each pod, worked out once.
        struct Key {
            uid: String,
            increasing: bool,
            priority: i32,
            guaranteed: bool,
            since: Option<u64>,
        }
        let version = self.config.kubelet_version;
        let mut keys: Vec<Key> = Vec::with_capacity(self.resizes.queue.len());
        for uid in &self.resizes.queue {
            let (Some(allocated), Some((desired, priority))) = (
                self.active.iter().find(|p| p.uid == *uid),
                self.resizes.desired.get(uid),
            ) else {
                continue;
            };
            let resized = with_sizes_of(allocated, desired);
            let increasing = resized != *allocated
                && ["memory", "cpu"]
                    .iter()
                    .any(|r| request_for_capacity(&resized, r, version) > request_for_capacity(allocated, r, version));
            keys.push(Key {
                uid: uid.clone(),
                increasing,
                priority: *priority,
                guaranteed: allocated.qos == QosClass::Guaranteed,
                since: self.resizes.conditions.get(uid).map(|c| c.since),
            });
        }
        // The kubelet's comparator, `a` before `b` when it returns -1; not
        // a strict order (a resize not increasing requests is before
        // anything, equal times are after each other).
        go_sort::sort_func(&mut keys, &mut |a: &Key, b: &Key| {
            if !a.increasing {
                return true;
            }
            if !b.increasing {
                return false;
            }
            if a.priority != b.priority {
                return a.priority > b.priority;
            }
            if a.guaranteed != b.guaranteed {
                return a.guaranteed;
            }
            match (a.since, b.since) {
                (None, _) => false,
                (_, None) => true,
                (Some(a), Some(b)) => a < b,
            }
        });
        self.resizes.queue = keys.into_iter().map(|k| k.uid).collect();
    }

    /// `RetryPendingResizes`: decides each queued resize in order against
    /// the allocation of the moment; an accepted one is the pod's
    /// allocation at once, a deferred one stays queued, an infeasible one
    /// leaves the queue with its condition. Returns the pods accepted.
    fn retry_pending_resizes(&mut self) -> Vec<String> {
        let queue = std::mem::take(&mut self.resizes.queue);
        let mut still_pending = Vec::new();
        let mut accepted = Vec::new();
        for uid in queue {
            let (Some(index), Some((desired, _))) = (
                self.active.iter().position(|p| p.uid == uid),
                self.resizes.desired.get(&uid),
            ) else {
                continue;
            };
            let resized = with_sizes_of(&self.active[index], desired);
            if resized == self.active[index] {
                self.resizes.conditions.remove(&uid);
                continue;
            }
            let key = resized.key();
            match self.decide(index, resized) {
                Ok(ResizeOutcome::Pending { reason, message }) => {
                    self.resizes.set_condition(&uid, reason, message);
                    if reason == PendingReason::Deferred {
                        still_pending.push(uid);
                    }
                }
                Ok(_) => {
                    self.resizes.conditions.remove(&uid);
                    accepted.push(key);
                }
                // Not reached (a queued resize passed the same check when it
                // arrived); the kubelet keeps a resize it failed to handle.
                Err(_) => still_pending.push(uid),
            }
        }
        self.resizes.queue = still_pending;
        accepted
    }

    /// The kubelet's decision on resizing the admitted pod at `index` to
    /// `resized`, against the allocation of the moment; applied when it
    /// fits.
    /// 1.32 keeps an allocation for app containers only
    /// (`updatePodFromAllocation` walks `Spec.Containers`): an init
    /// container's (a sidecar's) new sizes are never compared, checked or
    /// reverted — the pod as the kubelet counts it has them at once, and a
    /// resize of app containers is judged with them (v1.32.10
    /// status_manager.go; 1.33 walks init containers too).
    fn adopt_init_sizes_unchecked(&mut self, index: usize, desired: &Pod) {
        let allocated = &self.active[index];
        let mut adopted = allocated.clone();
        for container in &mut adopted.init_containers {
            if let Some(new) = desired.init_containers.iter().find(|c| c.name == container.name) {
                replace_sizes(&mut container.requests, &new.requests);
                replace_sizes(&mut container.limits, &new.limits);
            }
        }
        if adopted == *allocated {
            return;
        }
        let mut usage = self.fit_usage.clone();
        usage.remove(allocated);
        usage.add(&PodRequests::of(&adopted));
        self.fit_usage = usage;
        self.active[index] = adopted;
    }

    fn decide(&mut self, index: usize, resized: Pod) -> Result<ResizeOutcome, ResizeError> {
        // A copy: the CPU manager is asked again below while it is read.
        let allocated = &self.active[index].clone();
        let version = self.config.kubelet_version;
        let gates = self.config.feature_gates;
        if !gates.in_place_resize(version) {
            // Nothing looks at the resize: 1.32/1.33 call the resize
            // handling (`handlePodResourcesResize`) only with the gate on,
            // 1.34 (the last release where the gate can be off) skips it in
            // the allocation manager. None of them keeps an allocation apart
            // from the pod then: later admissions count the pod as the API
            // server holds it, the new sizes, unchecked (the real v1.32.10,
            // v1.33.13 and v1.34.4 code: vectors 1.3x/resize-gate-off*,
            // 1.32/resize-static-cpu). The managers keep what they hold.
            let mut usage = self.fit_usage.clone();
            usage.remove(allocated);
            usage.add(&PodRequests::of(&resized));
            self.fit_usage = usage;
            self.active[index] = resized;
            return Ok(ResizeOutcome::Unchecked);
        }
        if resized == *allocated {
            // Desired == allocated: nothing to allocate, no condition.
            return Ok(ResizeOutcome::Applied);
        }
        if let Some(outcome) = self.guaranteed_refusal(allocated, &resized)? {
            return Ok(outcome);
        }
        if !version.at_least(KubeletVersion::V1_36)
            && let Some(message) = self.beyond_allocatable(&resized)
        {
            return Ok(infeasible(&message));
        }
        if !version.at_least(KubeletVersion::V1_34) {
            self.init_memory_by_status(allocated, &resized)?;
        }
        // The other admit handlers: the topology manager admits the resized
        // pod again (see [`Node::resize`]; what it allocates stays, even
        // when a later handler defers), then the resource fit against the
        // other pods' allocation. From 1.37 the managers see the resize
        // operation and neither hint nor allocate: nothing to refuse.
        if !version.at_least(KubeletVersion::V1_37) {
            let mut trace = MergeTrace {
                policy: self.topology.policy(),
                scope: self.topology.scope(),
                merges: Vec::new(),
            };
            if let Err(refused) = self.align(&resized, &mut trace) {
                return Ok(ResizeOutcome::Pending {
                    reason: PendingReason::Deferred,
                    message: refused.message,
                });
            }
        }
        let mut others = self.fit_usage.clone();
        others.remove(allocated);
        let requests = PodRequests::of(&resized);
        if let Err(failure) = fit::check_fit_with(&self.fit_allocatable, &resized, &requests, &others) {
            return Ok(ResizeOutcome::Pending {
                reason: PendingReason::Deferred,
                message: failure.message,
            });
        }
        others.add(&requests);
        self.fit_usage = others;
        self.active[index] = resized;
        Ok(ResizeOutcome::Applied)
    }

    /// The refusal of a Guaranteed pod's resize under the static CPU or
    /// `Static` memory policy, as the release words it.
    fn guaranteed_refusal(&self, allocated: &Pod, resized: &Pod) -> Result<Option<ResizeOutcome>, ResizeError> {
        if allocated.qos != QosClass::Guaranteed {
            return Ok(None);
        }
        let version = self.config.kubelet_version;
        let gates = self.config.feature_gates;
        let static_cpu = self.config.cpu_policy == CpuPolicyName::Static;
        let static_memory = self.config.memory_policy == MemoryPolicyName::Static;
        let cpu_changed = request_changed(allocated, resized, "cpu");
        let memory_changed = request_changed(allocated, resized, "memory");
        let not_reproduced = |gate: &str, what: &str| {
            Err(ResizeError::NotReproduced(format!(
                "a resize of a Guaranteed pod's {what} with {gate} on reaches the kubelet's resize of \
                 exclusive resources, which topoalign does not reproduce"
            )))
        };
        if !version.at_least(KubeletVersion::V1_34) {
            // `canResizePod` in kubelet.go: both checks behind one gate, and
            // whatever the resize changes. With the gate on, the resize
            // reaches the admit handlers, where the CPU manager sizes what a
            // container holds by the container status's
            // `allocatedResources` (`guaranteedCPUs`, policy_static.go of
            // v1.32.10 and v1.33.13): the spec's request before the status
            // names the container, nothing (no exclusive CPUs asked) once
            // it does without `InPlacePodVerticalScalingAllocatedStatus`
            // (off), the held size with it. A scenario has no pod status, so
            // where those answers differ topoalign gives none: a changed CPU
            // request under `restricted` or `single-numa-node` (held CPUs of
            // another size are a hint nothing satisfies, or are not asked
            // for), and `full-pcpus-only` (its SMT checks run on that size).
            // Elsewhere every reading admits the pod as it is held.
            if gates.in_place_resize_exclusive_cpus {
                if static_cpu {
                    let aligning = matches!(
                        self.config.topology_policy,
                        TopologyPolicyName::Restricted | TopologyPolicyName::SingleNumaNode
                    );
                    let full_pcpus_only = self
                        .config
                        .cpu_options
                        .get("full-pcpus-only")
                        .is_some_and(|value| matches!(value.as_str(), "1" | "t" | "T" | "true" | "TRUE" | "True"));
                    if (aligning && cpu_changed) || full_pcpus_only {
                        let why = if aligning && cpu_changed {
                            format!(
                                "a changed CPU request under the {} topology manager policy",
                                self.config.topology_policy
                            )
                        } else {
                            "the full-pcpus-only CPU manager policy option".to_owned()
                        };
                        return Err(ResizeError::NotReproduced(format!(
                            "not reproduced: kubelet {version} with InPlacePodVerticalScalingExclusiveCPUs on \
                             sizes the exclusive CPUs a Guaranteed pod's container holds by the container \
                             status's allocatedResources (what the status says depends on \
                             InPlacePodVerticalScalingAllocatedStatus and on whether the kubelet has written \
                             it yet), which a scenario does not carry; with {why} the answer depends on it"
                        )));
                    }
                }
                return Ok(None);
            }
            if static_cpu {
                return Ok(Some(infeasible(
                    "Resize is infeasible for Guaranteed Pods alongside CPU Manager static policy",
                )));
            }
            // v1.32 compares the policy with "static", which the validated
            // configuration never holds ("Static"): no refusal there.
            if static_memory && version == KubeletVersion::V1_33 {
                return Ok(Some(infeasible(
                    "Resize is infeasible for Guaranteed Pods alongside Memory Manager static policy",
                )));
            }
            return Ok(None);
        }
        // From 1.34 only a changed size is refused. With an `Exclusive*`
        // gate on the resize reaches the admit handlers. 1.34's managers
        // size a held allocation by the container status's allocated
        // resources, which topoalign does not model: not reproduced. From
        // 1.35 they size it by the spec ([`Node::decide`]): a changed CPU
        // count is a hint nothing satisfies (a `TopologyAffinityError`
        // under `restricted` and `single-numa-node`), changed memory no
        // preference, and what they hold stays as it is; 1.37's managers
        // skip the resize operation altogether.
        let exclusive_reproduced = version.at_least(KubeletVersion::V1_35);
        if static_cpu && cpu_changed {
            if !gates.in_place_resize_exclusive_cpus {
                return Ok(Some(infeasible(
                    "Resize is infeasible for Guaranteed Pods alongside CPU Manager policy \"static\"",
                )));
            }
            if !exclusive_reproduced {
                return not_reproduced("InPlacePodVerticalScalingExclusiveCPUs", "CPUs");
            }
        }
        // 1.34/1.35 also ask the `MemoryManager` gate, GA and locked on.
        if static_memory && memory_changed {
            if !gates.in_place_resize_exclusive_memory {
                return Ok(Some(infeasible(
                    "Resize is infeasible for Guaranteed Pods alongside Memory Manager policy \"Static\"",
                )));
            }
            if !exclusive_reproduced {
                return not_reproduced("InPlacePodVerticalScalingExclusiveMemory", "memory");
            }
        }
        Ok(None)
    }

    /// 1.32/1.33, a Guaranteed pod's resize that reaches the admit handlers
    /// under the `Static` memory policy and the pod scope of an aligning
    /// topology policy, on a machine of more than one NUMA node: the memory
    /// manager allocates again the memory of an init container that ran to
    /// completion (it dropped the blocks when the next container started),
    /// on the NUMA nodes of the pod's merged hint. The CPU and memory
    /// managers count an app container (1.33: and a sidecar) by its
    /// status's `allocatedResources` there (`guaranteedCPUs`,
    /// `getRequestedResources` in policy_static.go of v1.32.10 and
    /// v1.33.13; the pod scope's `podGuaranteedCPUs` and
    /// `getPodRequestedResources` sum them, and `regenerateHints` gives the
    /// held blocks' NUMA nodes only when that sum equals their size) — a
    /// status a scenario does not carry. The spec's sizes count before the
    /// kubelet writes the status; once it has, 1.32 without
    /// `InPlacePodVerticalScalingAllocatedStatus` (alpha, off) counts
    /// nothing, 1.33 (and 1.32 with it) the held sizes. Where the readings
    /// can place (or fail to place) that memory differently topoalign
    /// answers [`ResizeError::NotReproduced`]: on 1.32 always (nothing
    /// against the spec's sizes), on 1.33 when an app container or a
    /// sidecar changes its memory request, or its CPU request under the
    /// static CPU policy. The container scope sizes an init container by its
    /// own spec and the `none` policy asks for no hints: answered.
    fn init_memory_by_status(&self, allocated: &Pod, resized: &Pod) -> Result<(), ResizeError> {
        let version = self.config.kubelet_version;
        let reallocated = allocated
            .init_containers
            .iter()
            .find(|c| !c.restartable && self.memory.container_numa_nodes(&allocated.uid, &c.name).is_none());
        let Some(init) = reallocated else {
            return Ok(());
        };
        if allocated.qos != QosClass::Guaranteed
            || self.config.memory_policy != MemoryPolicyName::Static
            || self.topology.policy() == TopologyPolicyName::None
            || self.topology.scope() != topoalign_topology_manager::TopologyScope::Pod
            || self.machine.numa_nodes().len() < 2
        {
            return Ok(());
        }
        let static_cpu = self.config.cpu_policy == CpuPolicyName::Static;
        let counted_changed = allocated
            .all_containers()
            .zip(resized.all_containers())
            .filter(|((old, init), _)| !init || old.restartable)
            .any(|((old, _), (new, _))| {
                old.request("memory") != new.request("memory")
                    || (static_cpu && old.request("cpu") != new.request("cpu"))
            });
        if version.at_least(KubeletVersion::V1_33) && !counted_changed {
            return Ok(());
        }
        let reading = if version.at_least(KubeletVersion::V1_33) {
            "the spec's sizes before the kubelet writes the status, the held sizes after"
        } else {
            "the spec's sizes before the kubelet writes the status, nothing after (without \
             InPlacePodVerticalScalingAllocatedStatus) or the held sizes (with it)"
        };
        Err(ResizeError::NotReproduced(format!(
            "not reproduced: kubelet {version} under the Static memory policy and the pod scope of the {} \
             topology manager policy allocates the memory of init container {:?}, which ran to completion, again \
             on the NUMA nodes of the pod's merged hint, which the CPU and memory managers work out from the \
             container status's allocatedResources ({reading}); a scenario does not carry that status",
            self.config.topology_policy, init.name
        )))
    }

    /// 1.32–1.35: a pod asking for more CPU or memory than the node has
    /// is infeasible (memory named first). 1.32/1.33 read the Node status's
    /// allocatable; 1.34/1.35 the container manager's
    /// `GetNodeAllocatableAbsolute` (capacity less `systemReserved` and
    /// `kubeReserved`, eviction thresholds not subtracted).
    fn beyond_allocatable(&self, pod: &Pod) -> Option<String> {
        let version = self.config.kubelet_version;
        let allocatable = |resource: &str| -> Quantity {
            if !version.at_least(KubeletVersion::V1_34) {
                return self.resources.allocatable.get(resource).copied().unwrap_or_default();
            }
            let mut left = self.resources.capacity.get(resource).copied().unwrap_or_default();
            for reserved in [&self.config.system_reserved, &self.config.kube_reserved] {
                if let Some(amount) = reserved.get(resource) {
                    left -= *amount;
                }
            }
            if left.is_negative() { Quantity::ZERO } else { left }
        };
        // `GetResourceRequest` and the allocatable's `MilliValue()` /
        // `Value()`: Go's int64 views, wrapped as Go wraps them.
        let cpu = (
            request_for_capacity(pod, "cpu", version).go_milli_value(),
            allocatable("cpu").go_milli_value(),
        );
        let memory = (
            request_for_capacity(pod, "memory", version).go_value(),
            allocatable("memory").go_value(),
        );
        let detail = if memory.0 > memory.1 {
            format!("memory, requested: {}, capacity: {}", memory.0, memory.1)
        } else if cpu.0 > cpu.1 {
            format!("cpu, requested: {}, capacity: {}", cpu.0, cpu.1)
        } else {
            return None;
        };
        Some(format!("Node didn't have enough capacity: {detail}"))
    }
}

fn infeasible(message: &str) -> ResizeOutcome {
    ResizeOutcome::Pending {
        reason: PendingReason::Infeasible,
        message: message.to_string(),
    }
}

/// `allocated` with the `cpu` and `memory` requests and limits of the
/// same-named containers of `desired`.
fn with_sizes_of(allocated: &Pod, desired: &Pod) -> Pod {
    let mut resized = allocated.clone();
    let desired_containers: Vec<&Container> = desired.init_containers.iter().chain(&desired.containers).collect();
    for container in resized.init_containers.iter_mut().chain(resized.containers.iter_mut()) {
        if let Some(new) = desired_containers.iter().find(|c| c.name == container.name) {
            replace_sizes(&mut container.requests, &new.requests);
            replace_sizes(&mut container.limits, &new.limits);
        }
    }
    resized
}

fn replace_sizes(list: &mut ResourceList, new: &ResourceList) {
    list.retain(|resource, _| !is_resizable(resource));
    for (resource, amount) in new {
        if is_resizable(resource) {
            list.insert(resource.clone(), *amount);
        }
    }
}

/// The resources an in-place resize changes.
pub(crate) fn is_resizable(resource: &str) -> bool {
    resource == "cpu" || resource == "memory"
}

/// Whether a container the release resizes in place (app containers and
/// sidecars; from 1.36, with `InPlacePodVerticalScalingInitContainers`,
/// every init container, none of which a scenario resizes) asks for another
/// amount of `resource` (`guaranteedPodResourceResizeRequired`).
fn request_changed(allocated: &Pod, resized: &Pod, resource: &str) -> bool {
    allocated
        .all_containers()
        .zip(resized.all_containers())
        .any(|((old, _), (new, _))| old.request(resource) != new.request(resource))
}

/// `GetResourceRequest` (pkg/api/v1/resource) of `resource` as `version`
/// counts it: before 1.34 the app containers summed, or the largest init
/// container (sidecars included) when larger; from 1.34 component-helpers'
/// `PodRequests` (sidecars summed; the pod-level request instead when the
/// pod has pod-level resources). The overhead is added to a non-zero total.
fn request_for_capacity(pod: &Pod, resource: &str, version: KubeletVersion) -> Quantity {
    let mut total = if !version.at_least(KubeletVersion::V1_34) {
        let mut sum = pod
            .containers
            .iter()
            .fold(Quantity::ZERO, |sum, c| sum + c.request(resource));
        for init in &pod.init_containers {
            if init.request(resource) > sum {
                sum = init.request(resource);
            }
        }
        sum
    } else if let Some(pod_level) = pod.pod_resources.as_ref().filter(|r| r.is_set()) {
        pod_level.requests.get(resource).copied().unwrap_or_default()
    } else {
        pod.aggregate_containers(|c| &c.requests, |name| name == resource)
            .get(resource)
            .copied()
            .unwrap_or_default()
    };
    if !total.is_zero()
        && let Some(overhead) = pod.overhead.get(resource)
    {
        total += *overhead;
    }
    total
}
