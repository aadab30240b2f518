//! The `static` policy (the kubelet's `policy_static.go` with its in-memory
//! state): the shared pool, the reserved CPUs, exclusive assignments per
//! container, and the CPUs init containers leave for the pod's app
//! containers to reuse.
//!
//! Owns: start-up of the policy (options, reserved CPUs), hints for a
//! container or a pod, `Allocate`, and release of a pod.
//! Must not touch: the choice of CPUs within a free set (that is
//! [`crate::assignment`]) or hint masks (that is [`crate::hints`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use topoalign_model::{
    Container, CpuSet, FeatureGates, FlatMap, KubeletVersion, NumaMask, Pod, ProviderHints, QosClass, Quantity,
    ResourceHints,
};

use crate::assignment::{TakeError, take_by_topology};
use crate::hints::CpuHintRule;
use crate::options::{PolicyOptionError, StaticPolicyOptions};
use crate::{CpuAllocateError, CpuTopology};

mod pod_level;
mod restore;

/// Why `NewStaticPolicy` fails. Display is the kubelet's text (the manager
/// prefixes `new static policy error: `).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StaticPolicyError {
    #[error(transparent)]
    Options(#[from] PolicyOptionError),
    #[error("[cpumanager] unable to reserve the required amount of CPUs (size of {reserved} did not equal {expected})")]
    ReservedSize { reserved: CpuSet, expected: i64 },
    #[error("[cpumanager] unable to build the reserved physical CPUs from the reserved set: unknown CPU ID: {0}")]
    UnknownReservedCpu(u32),
}

/// `full-pcpus-only` refusing a request (`SMTAlignmentError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum SmtAlignmentError {
    #[error("SMT Alignment Error: requested {requested} cpus not multiple cpus per core = {per_core}")]
    NotMultipleOfCore { requested: i64, per_core: i64 },
    #[error(
        "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = {available}, requested CPUs = {requested}, CPUs per core = {per_core}"
    )]
    NotEnoughPhysicalCpus {
        available: usize,
        requested: i64,
        per_core: i64,
    },
}

/// Exclusive CPUs per pod uid, then per container name.
/// Pod uid → container name → exclusive CPUs. Each pod's entry is shared
/// between clones of the state and copied on its first change
/// ([`Arc::make_mut`]): a trial admission clones the state to admit one pod.
type Assignments = BTreeMap<String, Arc<FlatMap<String, CpuSet>>>;

/// The static policy and its state.
#[derive(Clone, Debug)]
pub(crate) struct StaticPolicy {
    /// Immutable after start; shared between clones of the node (a clone
    /// per trial admission must stay cheap).
    topology: Arc<CpuTopology>,
    options: StaticPolicyOptions,
    /// Never handed out exclusively.
    reserved: CpuSet,
    /// The reserved CPUs with all their core siblings: what
    /// `full-pcpus-only` must not count as free cores.
    reserved_physical: CpuSet,
    /// The shared pool (`defaultCpuSet`).
    shared: CpuSet,
    assignments: Assignments,
    /// CPUs of the current pod's init containers that its app containers
    /// may take again (`cpusToReuse`; holds at most the last allocating pod).
    cpus_to_reuse: BTreeMap<String, CpuSet>,
    /// From 1.34 a pod whose pod-level resources are read (see
    /// [`Pod::pod_resources`]) gets no exclusive CPUs and no CPU hints:
    /// "pod-level resources are not supported by the static CPU manager
    /// policy". Before, its containers are treated as any others.
    leaves_pod_level_pods_shared: bool,
    /// `PodLevelResourceManagers` on (1.36+): a pod with pod-level
    /// resources is managed as a whole (see `pod_level`).
    pod_level_managers: bool,
    /// Up to 1.36 `Allocate` makes the `full-pcpus-only` checks before it
    /// looks for the container's CPUs in the state, so a container admitted
    /// again (a resize through the admit handlers) can be refused although
    /// the CPUs are its own; 1.37 looks first and keeps what is held.
    checks_smt_of_held_cpus: bool,
    /// Pod-level assignments ("bubbles", `podEntries` of the checkpoint):
    /// pod uid → the CPUs taken from the shared pool for the whole pod.
    pod_cpus: BTreeMap<String, CpuSet>,
}

impl StaticPolicy {
    /// `NewStaticPolicy` + `Start` on empty state.
    pub(crate) fn new(
        topology: CpuTopology,
        options: StaticPolicyOptions,
        topology_policy_is_single_numa_node: bool,
        num_reserved: i64,
        reserved_system_cpus: Option<&CpuSet>,
    ) -> Result<StaticPolicy, StaticPolicyError> {
        options.validate(&topology, topology_policy_is_single_numa_node)?;
        let reserved = match reserved_system_cpus {
            Some(cpus) if !cpus.is_empty() => cpus.clone(),
            // The lowest-numbered cores, by the allocator with the policy's
            // own options; a failure shows up as a size mismatch below.
            _ => take_by_topology(&topology, &options, topology.all_cpus(), num_reserved).unwrap_or_default(),
        };
        if reserved.len() as i64 != num_reserved {
            return Err(StaticPolicyError::ReservedSize {
                reserved,
                expected: num_reserved,
            });
        }
        let mut reserved_physical = CpuSet::new();
        for cpu in reserved.iter() {
            let info = topology.cpu(cpu).ok_or(StaticPolicyError::UnknownReservedCpu(cpu))?;
            reserved_physical = reserved_physical.union(topology.cpus_in_core(info.core));
        }
        let mut shared = topology.all_cpus().clone();
        if options.strict_cpu_reservation {
            shared = shared.difference(&reserved);
        }
        Ok(StaticPolicy {
            topology: Arc::new(topology),
            options,
            reserved,
            reserved_physical,
            shared,
            assignments: Assignments::new(),
            cpus_to_reuse: BTreeMap::new(),
            leaves_pod_level_pods_shared: false,
            pod_level_managers: false,
            checks_smt_of_held_cpus: true,
            pod_cpus: BTreeMap::new(),
        })
    }

    /// The policy as the kubelet of `version` runs it (the options aside).
    pub(crate) fn for_release(mut self, version: KubeletVersion, gates: &FeatureGates) -> StaticPolicy {
        self.leaves_pod_level_pods_shared = version.at_least(KubeletVersion::V1_34);
        self.pod_level_managers = gates.pod_level_managers(version);
        self.checks_smt_of_held_cpus = !version.at_least(KubeletVersion::V1_37);
        self
    }

    /// Whether the policy leaves `pod` alone: it uses pod-level resources
    /// and the release skips such pods.
    fn leaves_shared(&self, pod: &Pod) -> bool {
        self.leaves_pod_level_pods_shared && pod.uses_pod_level_resources() && !self.pod_level_managers
    }

    /// Whether `pod` is managed at the pod level (`PodLevelResourceManagers`
    /// on and the pod has pod-level resources).
    pub(crate) fn manages_pod_level(&self, pod: &Pod) -> bool {
        self.pod_level_managers && pod.uses_pod_level_resources()
    }

    /// `guaranteedCPUs` as this policy reads it: in a pod managed at the
    /// pod level only a container that is Guaranteed by itself counts.
    fn guaranteed(&self, pod: &Pod, container: &Container) -> i64 {
        if self.manages_pod_level(pod) && !container.is_equivalent_guaranteed() {
            return 0;
        }
        guaranteed_cpus(pod, container)
    }

    /// `podGuaranteedCPUs` as this policy reads it: a pod managed at the
    /// pod level needs its pod-level CPU request (whole CPUs, Guaranteed
    /// pods only).
    fn pod_guaranteed(&self, pod: &Pod) -> i64 {
        if self.manages_pod_level(pod) {
            return pod_level::pod_cpus(pod);
        }
        pod_guaranteed_cpus(pod)
    }

    /// The pod-level assignments: pod uid → CPUs.
    pub(crate) fn pod_assignments(&self) -> &BTreeMap<String, CpuSet> {
        &self.pod_cpus
    }

    pub(crate) fn topology(&self) -> &CpuTopology {
        &self.topology
    }

    pub(crate) fn shared(&self) -> &CpuSet {
        &self.shared
    }

    pub(crate) fn assignments(&self) -> &Assignments {
        &self.assignments
    }

    pub(crate) fn assignment(&self, pod_uid: &str, container: &str) -> Option<&CpuSet> {
        self.assignments.get(pod_uid)?.get(container)
    }

    /// `GetAvailableCPUs`: the shared pool without the reserved CPUs.
    fn available(&self) -> CpuSet {
        self.shared.difference(&self.reserved)
    }

    fn reusable(&self, pod_uid: &str) -> CpuSet {
        self.cpus_to_reuse.get(pod_uid).cloned().unwrap_or_default()
    }

    fn cpu_hints(&self, available: &CpuSet, reusable: &CpuSet, request: i64) -> ProviderHints {
        let rule = CpuHintRule::new(
            &self.topology,
            available,
            reusable,
            request,
            self.options.align_by_socket,
        );
        ProviderHints::single("cpu", ResourceHints::from_rule(rule))
    }

    /// `GetTopologyHints`.
    pub(crate) fn container_hints(&self, pod: &Pod, container: &Container) -> ProviderHints {
        let requested = self.guaranteed(pod, container);
        if requested == 0 || self.leaves_shared(pod) {
            return ProviderHints::no_preference();
        }
        if let Some(allocated) = self.assignment(&pod.uid, &container.name) {
            // Already allocated (the kubelet regenerates hints for them): a
            // size mismatch cannot be satisfied anywhere.
            if allocated.len() as i64 != requested {
                return ProviderHints::single("cpu", ResourceHints::Impossible);
            }
            return self.cpu_hints(allocated, &CpuSet::new(), requested);
        }
        self.cpu_hints(&self.available(), &self.reusable(&pod.uid), requested)
    }

    /// `GetPodTopologyHints`.
    pub(crate) fn pod_hints(&self, pod: &Pod) -> ProviderHints {
        let requested = self.pod_guaranteed(pod);
        if requested == 0 || self.leaves_shared(pod) {
            return ProviderHints::no_preference();
        }
        // An empty pod shared pool cannot be placed anywhere.
        if self.manages_pod_level(pod) && self.validate_pod_scope(pod).is_err() {
            return ProviderHints::single("cpu", ResourceHints::Impossible);
        }
        let mut assigned = CpuSet::new();
        for (container, _) in pod.all_containers() {
            if let Some(allocated) = self.assignment(&pod.uid, &container.name) {
                if allocated.len() as i64 != self.guaranteed(pod, container) {
                    return ProviderHints::single("cpu", ResourceHints::Impossible);
                }
                assigned = assigned.union(allocated);
            }
        }
        if assigned.len() as i64 == requested {
            return self.cpu_hints(&assigned, &CpuSet::new(), requested);
        }
        let reusable = self.reusable(&pod.uid).union(&assigned);
        self.cpu_hints(&self.available(), &reusable, requested)
    }

    /// `Allocate`: exclusive CPUs for a Guaranteed container with an integer
    /// CPU request, preferring the NUMA nodes of `affinity`.
    pub(crate) fn allocate(
        &mut self,
        pod: &Pod,
        container: &Container,
        affinity: Option<NumaMask>,
    ) -> Result<(), CpuAllocateError> {
        let requested = self.guaranteed(pod, container);
        if requested == 0 || self.leaves_shared(pod) {
            return Ok(());
        }
        let held = self.assignment(&pod.uid, &container.name).cloned();
        if self.options.full_pcpus_only && (held.is_none() || self.checks_smt_of_held_cpus) {
            self.check_smt_alignment(requested)
                .map_err(|e| CpuAllocateError::SmtAlignment(e.to_string()))?;
        }
        if let Some(cpus) = held {
            self.update_cpus_to_reuse(pod, container, &cpus);
            return Ok(());
        }
        let reusable = self.reusable(&pod.uid);
        let cpus = self
            .allocate_cpus(requested, affinity, &reusable)
            .map_err(|e| CpuAllocateError::Other(e.to_string()))?;
        Arc::make_mut(self.assignments.entry(pod.uid.clone()).or_default())
            .insert(container.name.clone(), cpus.clone());
        self.update_cpus_to_reuse(pod, container, &cpus);
        Ok(())
    }

    /// The `full-pcpus-only` checks, made before anything else (even for a
    /// container that already has CPUs).
    fn check_smt_alignment(&self, requested: i64) -> Result<(), SmtAlignmentError> {
        let per_core = self.topology.cpus_per_core() as i64;
        if per_core != 0 && requested % per_core != 0 {
            return Err(SmtAlignmentError::NotMultipleOfCore { requested, per_core });
        }
        // Reserved CPUs need not be whole cores; their siblings must not be
        // counted, or the allocator could be forced onto half cores.
        let available = self.shared.difference(&self.reserved_physical).len();
        if requested > available as i64 {
            return Err(SmtAlignmentError::NotEnoughPhysicalCpus {
                available,
                requested,
                per_core,
            });
        }
        Ok(())
    }

    /// `allocateCPUs`: first from the affinity's NUMA nodes (or sockets,
    /// with `align-by-socket`), then the rest from anywhere.
    fn allocate_cpus(
        &mut self,
        requested: i64,
        affinity: Option<NumaMask>,
        reusable: &CpuSet,
    ) -> Result<CpuSet, TakeError> {
        let allocatable = self.available().union(reusable);
        let mut result = CpuSet::new();
        if let Some(mask) = affinity {
            let aligned = self.aligned_cpus(mask, &allocatable);
            let count = requested.min(aligned.len() as i64);
            result = take_by_topology(&self.topology, &self.options, &aligned, count)?;
        }
        let rest = take_by_topology(
            &self.topology,
            &self.options,
            &allocatable.difference(&result),
            requested - result.len() as i64,
        )?;
        let result = result.union(&rest);
        self.shared = self.shared.difference(&result);
        Ok(result)
    }

    /// `getAlignedCPUs`.
    fn aligned_cpus(&self, mask: NumaMask, allocatable: &CpuSet) -> CpuSet {
        if self.options.align_by_socket {
            return self
                .topology
                .sockets_in_numa_nodes(mask)
                .into_iter()
                .fold(CpuSet::new(), |acc, socket| {
                    acc.union(&allocatable.intersection(self.topology.cpus_in_socket(socket)))
                });
        }
        allocatable.intersection(&self.topology.cpus_in_numa_nodes(mask))
    }

    /// `updateCPUsToReuse`: an init container (not a sidecar) offers its
    /// CPUs to the pod's later containers; any other container takes its
    /// CPUs out of the offer. Only the current pod's offer is kept.
    fn update_cpus_to_reuse(&mut self, pod: &Pod, container: &Container, cpus: &CpuSet) {
        self.cpus_to_reuse.retain(|uid, _| *uid == pod.uid);
        let is_plain_init = pod.is_regular_init(container);
        match self.cpus_to_reuse.get_mut(pod.uid.as_str()) {
            Some(offer) => {
                *offer = if is_plain_init {
                    offer.union(cpus)
                } else {
                    offer.difference(cpus)
                };
            }
            None if is_plain_init => {
                self.cpus_to_reuse.insert(pod.uid.clone(), cpus.clone());
            }
            // Taking CPUs out of no offer leaves none, which reads as the
            // empty offer: nothing to record (and no copy of the uid).
            None => {}
        }
    }

    /// Releases every CPU the pod holds back to the shared pool (the
    /// kubelet's `RemoveContainer` for each of its containers).
    pub(crate) fn remove_pod(&mut self, pod_uid: &str) {
        // A pod-level assignment: its containers' CPUs all lie inside it,
        // which goes back whole once the last container is gone.
        if let Some(bubble) = self.pod_cpus.remove(pod_uid) {
            self.assignments.remove(pod_uid);
            self.shared = self.shared.union(&bubble);
            return;
        }
        if let Some(containers) = self.assignments.remove(pod_uid) {
            for cpus in containers.values() {
                self.shared = self.shared.union(cpus);
            }
        }
    }
}

/// `guaranteedCPUs`: the exclusive CPUs a container gets — its CPU request
/// when the pod is Guaranteed and the request is a whole number, else 0.
pub(crate) fn guaranteed_cpus(pod: &Pod, container: &Container) -> i64 {
    if pod.qos != QosClass::Guaranteed {
        return 0;
    }
    integral_cpus(container.request("cpu"))
}

/// `isIntegralCPUAmount` and `int(cpuQuantity.Value())`: the whole CPUs of
/// `cpu`, or 0 when `Value()*1000 != MilliValue()` — in Go's `int64`
/// arithmetic, overflow included (`9Ei` is 2^63-1 CPUs: both sides wrap to
/// -1000), as every release 1.32-1.37 computes it.
pub(crate) fn integral_cpus(cpu: Quantity) -> i64 {
    let value = cpu.go_value();
    if value.wrapping_mul(1000) != cpu.go_milli_value() {
        return 0;
    }
    value
}

/// `podGuaranteedCPUs`: what the pod needs at its peak — the larger of the
/// biggest init container (plus the sidecars started before it) and the app
/// containers plus all sidecars.
pub(crate) fn pod_guaranteed_cpus(pod: &Pod) -> i64 {
    let mut by_init = 0;
    let mut by_sidecars = 0;
    for container in &pod.init_containers {
        // Go's `int` sums wrap.
        let cpus = guaranteed_cpus(pod, container);
        if container.restartable {
            by_sidecars = i64::wrapping_add(by_sidecars, cpus);
        } else if by_sidecars.wrapping_add(cpus) > by_init {
            by_init = by_sidecars.wrapping_add(cpus);
        }
    }
    let by_apps = pod
        .containers
        .iter()
        .fold(0_i64, |sum, c| sum.wrapping_add(guaranteed_cpus(pod, c)));
    by_init.max(by_apps.wrapping_add(by_sidecars))
}
