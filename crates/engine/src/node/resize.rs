//! In-place pod resize: whether the node's kubelet release takes a new
//! `cpu`/`memory` size for an admitted pod's containers, and the pod's
//! allocated resources when it does.
//!
//! Owns: the order of the kubelet's resize checks in each release and their
//! texts (v1.32/v1.33 `(*Kubelet).canResizePod` in `pkg/kubelet/kubelet.go`;
//! v1.34/v1.35 `(*allocation.manager).canResizePod`; v1.36+ the
//! `podResizesAdmitHandler` of `pkg/kubelet/allocation/handlers.go` followed
//! by the other admit handlers), and what an accepted resize changes: the
//! pod's requests as the resource-fit check counts them. Must not touch:
//! the managers' state — a resize that reaches them here never changes an
//! exclusive CPU set or pinned memory (see [`Node::resize`]).

use topoalign_cpu_manager::CpuPolicyName;
use topoalign_memory_manager::MemoryPolicyName;
use topoalign_model::{Container, KubeletVersion, Pod, QosClass, Quantity, ResourceList, TopologyHint};

use super::Node;
use crate::Rejection;
use crate::fit::{self, PodRequests};

/// The kubelet's answer to a resize of an admitted pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResizeOutcome {
    /// The new sizes are the pod's allocated resources now (also when they
    /// equal the old ones).
    Applied,
    /// `InPlacePodVerticalScaling` is off in a 1.32 or 1.33 kubelet: it never
    /// looks at the new sizes, sets no condition, and the pod keeps what it
    /// was given.
    Ignored,
    /// The kubelet's `PodResizePending` condition: reason `Infeasible` or
    /// `Deferred`, and its message. The pod keeps what it was given.
    Pending { reason: PendingReason, message: String },
}

/// The reason of a `PodResizePending` condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PendingReason {
    /// The kubelet will not take this size on this node.
    Infeasible,
    /// It does not fit now; the kubelet retries later (when a pod leaves,
    /// and every few minutes), which a replay does not model.
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
}

/// Why [`Node::resize`] gives no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResizeError {
    /// No admitted pod has this uid.
    #[error("no admitted pod has uid {0:?}")]
    NotAdmitted(String),
    /// The resize would reach a manager's own resize handling of exclusive
    /// CPUs or pinned memory (the `InPlacePodVerticalScalingExclusive*`
    /// gates), which is not reproduced.
    #[error("{0}")]
    NotReproduced(String),
}

impl Node {
    /// The kubelet's decision on resizing the admitted pod `desired.uid`
    /// to the `cpu` and `memory` requests and limits of `desired`'s
    /// containers (every other field of `desired` is ignored; the caller
    /// has checked that the QoS class stays). Applied, the pod's new
    /// requests are what later fit checks count; refused or ignored, the
    /// node is unchanged.
    ///
    /// Every resize the kubelet lets through to its admit handlers keeps the
    /// exclusive CPUs and pinned memory the pod holds: a Guaranteed pod
    /// changing its CPU (memory) request under the static CPU (`Static`
    /// memory) policy is refused first, and the managers regenerate the hints
    /// of an allocation they already hold. The topology manager therefore
    /// admits it again; the resource-fit check decides.
    ///
    /// # Errors
    /// [`ResizeError::NotAdmitted`]; [`ResizeError::NotReproduced`] when an
    /// `InPlacePodVerticalScalingExclusive*` gate lets a manager see a
    /// changed exclusive size.
    pub fn resize(&mut self, desired: &Pod) -> Result<ResizeDecision, ResizeError> {
        let index = self
            .active
            .iter()
            .position(|p| p.uid == desired.uid)
            .ok_or_else(|| ResizeError::NotAdmitted(desired.uid.clone()))?;
        // A copy: the CPU manager is asked again below while it is read.
        let allocated = &self.active[index].clone();
        let decision = |outcome| ResizeDecision {
            pod: allocated.key(),
            outcome,
        };
        let version = self.config.kubelet_version;
        let gates = self.config.feature_gates;
        let resized = with_sizes_of(allocated, desired);
        if !gates.in_place_resize(version) {
            // 1.32/1.33 call the resize handling only with the gate on;
            // 1.34 (the last release where it can be off) marks it.
            return Ok(decision(if version.at_least(KubeletVersion::V1_34) {
                infeasible("InPlacePodVerticalScaling is disabled")
            } else {
                ResizeOutcome::Ignored
            }));
        }
        if resized == *allocated {
            // Desired == allocated: nothing to allocate, no condition.
            return Ok(decision(ResizeOutcome::Applied));
        }
        if let Some(outcome) = self.guaranteed_refusal(allocated, &resized)? {
            return Ok(decision(outcome));
        }
        if !version.at_least(KubeletVersion::V1_36)
            && let Some(message) = self.beyond_allocatable(&resized)
        {
            return Ok(decision(infeasible(&message)));
        }
        // The other admit handlers: the topology manager admits again (see
        // above) — its CPU manager's `Allocate` of a container that holds
        // CPUs still makes 1.36's `full-pcpus-only` checks —, then the
        // resource fit against the other pods' allocation.
        if let Err(refused) = self.allocate_held_cpus_again(&resized) {
            return Ok(decision(ResizeOutcome::Pending {
                reason: PendingReason::Deferred,
                message: refused.message,
            }));
        }
        let mut others = self.fit_usage.clone();
        others.remove(allocated);
        let requests = PodRequests::of(&resized);
        if let Err(failure) = fit::check_fit_with(&self.fit_allocatable, &resized, &requests, &others) {
            return Ok(decision(ResizeOutcome::Pending {
                reason: PendingReason::Deferred,
                message: failure.message,
            }));
        }
        let key = allocated.key();
        others.add(&requests);
        self.fit_usage = others;
        self.active[index] = resized;
        Ok(ResizeDecision {
            pod: key,
            outcome: ResizeOutcome::Applied,
        })
    }

    /// The CPU manager's `Allocate` for each container of `pod` that holds
    /// exclusive CPUs, as the topology manager calls it when it admits the
    /// pod again: nothing is taken, but a release that checks
    /// `full-pcpus-only` before it looks at the held CPUs (up to 1.36) can
    /// refuse.
    fn allocate_held_cpus_again(&mut self, pod: &Pod) -> Result<(), Rejection> {
        for (container, _) in pod.all_containers() {
            if self.cpus.container_cpus(&pod.uid, &container.name).is_some() {
                self.cpus
                    .allocate(pod, container, TopologyHint::any(false))
                    .map_err(super::cpu_rejection)?;
            }
        }
        Ok(())
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
            // whatever the resize changes. With the gate on, the managers
            // size a held allocation by the container status's allocated
            // resources (or find none), so they admit it as it is.
            if gates.in_place_resize_exclusive_cpus {
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
        // gate on it reaches the managers (from 1.35 they size a held
        // allocation by the spec, and 1.37's CPU manager resizes exclusive
        // sets): not reproduced.
        if static_cpu && cpu_changed {
            if gates.in_place_resize_exclusive_cpus {
                return not_reproduced("InPlacePodVerticalScalingExclusiveCPUs", "CPUs");
            }
            return Ok(Some(infeasible(
                "Resize is infeasible for Guaranteed Pods alongside CPU Manager policy \"static\"",
            )));
        }
        // 1.34/1.35 also ask the `MemoryManager` gate, GA and locked on.
        if static_memory && memory_changed {
            if gates.in_place_resize_exclusive_memory {
                return not_reproduced("InPlacePodVerticalScalingExclusiveMemory", "memory");
            }
            return Ok(Some(infeasible(
                "Resize is infeasible for Guaranteed Pods alongside Memory Manager policy \"Static\"",
            )));
        }
        Ok(None)
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
        let cpu = (
            request_for_capacity(pod, "cpu", version).milli(),
            allocatable("cpu").milli(),
        );
        let memory = (
            request_for_capacity(pod, "memory", version).value(),
            allocatable("memory").value(),
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
