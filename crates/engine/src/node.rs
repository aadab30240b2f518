//! [`Node`]: one node's managers wired together in the kubelet's order —
//! start-up, the admission chain for a pod, container start, deletion.
//!
//! Owns: the order of calls (which provider is asked first, when a
//! rejected pod's leftovers are released, when containers "start"), the
//! mapping of allocation failures to the kubelet's reasons, the set of
//! active pods. Must not touch: what any single manager decides — that is
//! each manager's crate — nor any I/O.

use std::collections::BTreeMap;
use std::sync::Arc;

use topoalign_cpu_manager::{CpuAllocateError, CpuManager, CpuManagerConfig};
use topoalign_device_manager::DeviceManager;
use topoalign_memory_manager::{MemoryAllocateFailure, MemoryManager, MemoryManagerConfig, MemoryPodAllocateError};
use topoalign_model::{CpuSet, Machine, Pod, ProviderHints, ResourceList, TopologyHint};
use topoalign_topology_manager::{MergeStrategy, TopologyManager, TopologyPolicyName, TopologyScope};

use crate::decision::{
    ContainerPlacement, Decision, KubeletPanic, MergeRecord, MergeTrace, PanicSite, Provider, Rejection, RejectionStage,
};
use crate::fit::{self, FitAllocatable, FitUsage, NodeResources, PodRequests};
use crate::reservation::node_allocatable_reservation;
use crate::{KubeletCrash, NodeConfig, ReservationOverrun, StartHazard, StartupError};

mod resize;
mod restart;
mod snapshot;
mod trial;
mod usage;

pub use resize::{Deletion, PendingReason, ResizeDecision, ResizeError, ResizeOutcome};
pub use snapshot::{NodeSnapshot, RestoreError, SnapshotView};
pub use trial::TrialAdmission;
pub use usage::{NumaUsage, ResourceUsage, UsageReader};

/// A started node: machine, configuration, the managers' state and the
/// pods it holds.
#[derive(Clone, Debug)]
pub struct Node {
    // The parts admission never changes are shared between clones: the
    // extender clones a node for every trial admission.
    machine: Arc<Machine>,
    config: Arc<NodeConfig>,
    resources: Arc<NodeResources>,
    /// `resources.allocatable` as the fit check reads it.
    fit_allocatable: Arc<FitAllocatable>,
    topology: TopologyManager,
    devices: DeviceManager,
    cpus: CpuManager,
    memory: MemoryManager,
    /// Admitted pods in admission order, by uid.
    active: Vec<Pod>,
    /// What `active` requests together, as the fit check counts it; changes
    /// with `active` only (see `set_active`, `admit`, `remove`).
    fit_usage: FitUsage,
    /// Desired sizes, conditions and the queue of pending resizes (1.34+).
    resizes: resize::PendingResizes,
    /// Set by the admission under way when the kubelet would crash in it
    /// (see [`KubeletPanic`]); taken into its decision.
    kubelet_panic: Option<KubeletPanic>,
}

/// The node's allocation state, as the kubelet's checkpoint files hold it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeState {
    /// The shared CPU pool (`defaultCpuSet`).
    pub default_cpu_set: CpuSet,
    /// `namespace/name` → container → exclusive CPUs.
    pub cpu_assignments: BTreeMap<String, BTreeMap<String, CpuSet>>,
    /// `namespace/name` → container → NUMA nodes of its pinned memory.
    pub memory_assignments: BTreeMap<String, BTreeMap<String, Vec<usize>>>,
    /// `namespace/name` → the pod's CPUs, for pods managed at the pod level
    /// (`PodLevelResourceManagers`; the checkpoint's `podEntries`).
    pub pod_cpu_assignments: BTreeMap<String, CpuSet>,
    /// `namespace/name` → NUMA nodes of the pod's memory, likewise.
    pub pod_memory_assignments: BTreeMap<String, Vec<usize>>,
}

impl Node {
    /// Starts a node the way the kubelet's container manager does: topology
    /// manager, device manager, CPU manager, memory manager, then the node
    /// allocatable check — the first failure is the kubelet's start-up error.
    ///
    /// # Errors
    /// [`StartupError`] with the kubelet's text.
    pub fn start(machine: Machine, config: NodeConfig) -> Result<Node, StartupError> {
        let topology = TopologyManager::start(
            &machine,
            config.topology_policy,
            config.topology_scope,
            &config.topology_options,
            &config.feature_gates,
            config.kubelet_version,
        )?;
        let devices = DeviceManager::new(&machine, config.kubelet_version);
        let resources = fit::node_resources(&machine, &config);
        let reservation = node_allocatable_reservation(&resources.capacity, &config);
        let cpus = CpuManager::start(
            &machine,
            &CpuManagerConfig {
                policy: config.cpu_policy,
                options: config.cpu_options.clone(),
                reserved_system_cpus: config.reserved_system_cpus.clone(),
                reserved_cpu: reservation.get("cpu").copied(),
                feature_gates: config.feature_gates,
                kubelet_version: config.kubelet_version,
                topology_policy_is_single_numa_node: config.topology_policy == TopologyPolicyName::SingleNumaNode,
            },
        )?;
        let memory = MemoryManager::start(&machine, &memory_manager_config(&config, reservation.clone()))?;
        fit::validate_node_allocatable(&resources, &reservation)?;
        Ok(Node {
            machine: Arc::new(machine),
            config: Arc::new(config),
            fit_allocatable: Arc::new(FitAllocatable::of(&resources)),
            resources: Arc::new(resources),
            topology,
            devices,
            cpus,
            memory,
            active: Vec::new(),
            fit_usage: FitUsage::default(),
            resizes: resize::PendingResizes::default(),
            kubelet_panic: None,
        })
    }

    /// What the kubelet starts with on this node although its answers are
    /// dangerous (a NUMA node reserving more memory than it has, NUMA ids
    /// past 63 that crash it later: [`StartHazard`]): the
    /// warnings to show beside every answer. The node decides as the
    /// kubelet does all the same.
    pub fn start_hazards(&self) -> Vec<StartHazard> {
        let reservation = node_allocatable_reservation(&self.resources.capacity, &self.config);
        topoalign_memory_manager::reservation_overruns(&self.machine, &memory_manager_config(&self.config, reservation))
            .into_iter()
            .map(|overrun| ReservationOverrun {
                node: self.machine.numa_label(overrun.node),
                ..overrun
            })
            .map(StartHazard::from)
            .chain(KubeletCrash::of(&self.machine, &self.config).map(StartHazard::from))
            .collect()
    }

    /// The machine.
    pub fn machine(&self) -> &Machine {
        &self.machine
    }

    /// The configuration it was started with.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// Node capacity and allocatable.
    pub fn resources(&self) -> &NodeResources {
        &self.resources
    }

    /// Chooses the topology manager's merge algorithm (benchmarks,
    /// cross-checks); decisions are the same either way.
    pub fn set_merge_strategy(&mut self, strategy: MergeStrategy) {
        self.topology.set_merge_strategy(strategy);
    }

    /// The admitted pods, in admission order.
    pub fn pods(&self) -> &[Pod] {
        &self.active
    }

    /// This node without its pods: the managers' state and usage copied,
    /// the parts admission never changes shared, the admitted pods left out
    /// (admission never reads them: they only feed `pods`, `state` and
    /// removals). What a trial admission ([`Node::try_admit`]) works on —
    /// the one place that says what such a copy holds, so a new field of
    /// `Node` is decided here (the literal lists every field).
    fn trial_copy(&self) -> Node {
        Node {
            machine: self.machine.clone(),
            config: self.config.clone(),
            resources: self.resources.clone(),
            fit_allocatable: self.fit_allocatable.clone(),
            topology: self.topology.clone(),
            devices: self.devices.clone(),
            cpus: self.cpus.clone(),
            memory: self.memory.clone(),
            active: Vec::new(),
            fit_usage: self.fit_usage.clone(),
            // Resizes pending on the node's pods: a trial keeps no pods.
            resizes: Default::default(),
            kubelet_panic: None,
        }
    }

    /// Runs the kubelet's admission chain for `pod`: the topology manager
    /// (hints, merge, allocation by each provider), then the resource-fit
    /// check. An admitted pod's containers are then started in order; a
    /// rejected pod leaves nothing behind.
    pub fn admit(&mut self, pod: Pod) -> Decision {
        self.admit_then(pod, Containers::Start)
    }

    /// [`Node::admit`], then `containers` (started, or already running).
    fn admit_then(&mut self, pod: Pod, containers: Containers) -> Decision {
        let pod = self.as_admitted(pod);
        let mut trace = MergeTrace {
            policy: self.topology.policy(),
            scope: self.topology.scope(),
            merges: Vec::new(),
        };
        // A NUMA id past 63: any policy but `none` merges masks the kubelet
        // could not build, and it crashes before deciding anything.
        let policy = self.topology.policy();
        self.kubelet_panic = self
            .machine
            .numa_id_past_masks()
            .filter(|_| policy != TopologyPolicyName::None)
            .map(|numa_id| KubeletPanic {
                release: self.config.kubelet_version,
                numa_id,
                site: PanicSite::TopologyManager(policy),
            });
        // The kubelet adds the pod to its pod manager before admitting it,
        // so it already counts as active (and may reuse its own resources).
        let outcome = match self.kubelet_panic {
            Some(_) => Err(panic_rejection(RejectionStage::TopologyPolicy)),
            None => self.align(&pod, &mut trace).and_then(|()| self.check_fit(&pod)),
        };
        let requests = match outcome {
            Ok(requests) => requests,
            Err(rejection) => {
                self.release(&pod.uid);
                let kubelet_panic = self.kubelet_panic.take();
                return Decision {
                    pod: pod.key(),
                    qos: pod.qos,
                    rejection: Some(match &kubelet_panic {
                        Some(panic) => Rejection {
                            message: panic.to_string(),
                            ..rejection
                        },
                        None => rejection,
                    }),
                    containers: Vec::new(),
                    trace,
                    kubelet_panic,
                };
            }
        };
        let containers = self.placements(&pod, containers);
        let decision = Decision {
            pod: pod.key(),
            qos: pod.qos,
            rejection: None,
            containers,
            trace,
            kubelet_panic: None,
        };
        self.fit_usage.add_on(&requests, &self.fit_allocatable);
        self.active.push(pod);
        decision
    }

    /// [`Node::admit`] under another topology manager policy for this one
    /// pod (same scope and options); the node's own policy is back in force
    /// afterwards. For front ends that let one request ask for stricter (or
    /// looser) alignment than the node's default; the decision is the one a
    /// kubelet started with `policy` would make in this state.
    ///
    /// # Errors
    /// [`StartupError`] when a kubelet with `policy` and this node's options
    /// would not start (nothing is admitted then).
    pub fn admit_with_topology_policy(
        &mut self,
        pod: Pod,
        policy: TopologyPolicyName,
    ) -> Result<Decision, StartupError> {
        if policy == self.topology.policy() {
            return Ok(self.admit(pod));
        }
        let other = TopologyManager::start(
            &self.machine,
            policy,
            self.config.topology_scope,
            &self.config.topology_options,
            &self.config.feature_gates,
            self.config.kubelet_version,
        )?;
        let own = std::mem::replace(&mut self.topology, other);
        let decision = self.admit(pod);
        self.topology = own;
        Ok(decision)
    }

    /// `pod` with its pod-level resources as this node's release and gates
    /// read them (see `pod_level`).
    fn as_admitted(&self, pod: Pod) -> Pod {
        crate::pod_level::as_admitted(pod, &self.config.feature_gates, self.config.kubelet_version)
    }

    /// Deletes the pod with `uid`, releasing everything it holds. Returns
    /// whether such a pod was admitted. Pending resizes are not retried:
    /// [`Node::delete`] does that, as the kubelet does.
    pub fn remove(&mut self, uid: &str) -> bool {
        let before = self.active.len();
        let usage = &mut self.fit_usage;
        self.active.retain(|p| {
            let keep = p.uid != uid;
            if !keep {
                usage.remove(p);
            }
            keep
        });
        self.release(uid);
        self.resizes.forget(uid);
        self.active.len() != before
    }

    /// The shared CPU pool (`defaultCpuSet`; empty under the CPU manager's
    /// `none` policy). Cheaper than [`Node::state`].
    pub fn default_cpu_set(&self) -> CpuSet {
        self.cpus.default_cpu_set()
    }

    /// The CPUs the CPU manager never hands out exclusively (empty under
    /// its `none` policy).
    pub fn reserved_cpus(&self) -> CpuSet {
        self.cpus.reserved_cpus()
    }

    /// Device ids in use per device-plugin resource, ascending.
    pub fn devices_in_use(&self) -> BTreeMap<String, Vec<String>> {
        self.machine
            .devices()
            .keys()
            .map(|resource| (resource.clone(), self.devices.devices_in_use(resource)))
            .collect()
    }

    /// The allocation state, keyed by `namespace/name`.
    pub fn state(&self) -> NodeState {
        NodeState {
            default_cpu_set: self.cpus.default_cpu_set(),
            cpu_assignments: self.by_pod_key(self.cpus.assignments()),
            memory_assignments: self.by_pod_key(self.memory.assignments()),
            pod_cpu_assignments: self.by_pod_key(self.cpus.pod_assignments()),
            pod_memory_assignments: self.by_pod_key(self.memory.pod_assignments()),
        }
    }

    /// Re-keys a per-uid map by `namespace/name`; entries of pods that are
    /// not admitted are dropped (the kubelet's stale-state collection).
    fn by_pod_key<V>(&self, by_uid: BTreeMap<String, V>) -> BTreeMap<String, V> {
        by_uid
            .into_iter()
            .filter_map(|(uid, value)| self.active.iter().find(|p| p.uid == uid).map(|p| (p.key(), value)))
            .collect()
    }

    /// The topology manager's part of admission: merge and allocate, per
    /// container or per pod as the scope says.
    fn align(&mut self, pod: &Pod, trace: &mut MergeTrace) -> Result<(), Rejection> {
        if self.topology.policy() == TopologyPolicyName::None {
            // The kubelet's none scope asks for no hints; providers allocate
            // with the empty hint.
            for (container, _) in pod.all_containers() {
                self.allocate(pod, container, TopologyHint::any(false))?;
            }
            return Ok(());
        }
        // `PodLevelResourceManagers` with pod-level resources: the pod
        // scope allocates once for the whole pod, and a refusal says so.
        let pod_level = self
            .config
            .feature_gates
            .pod_level_managers(self.config.kubelet_version)
            && pod.uses_pod_level_resources();
        match self.topology.scope() {
            TopologyScope::Container => {
                for (container, _) in pod.all_containers() {
                    let hints = vec![
                        (Provider::Device, self.devices.container_hints(pod, container)),
                        (Provider::Cpu, self.cpus.container_hints(pod, container)),
                        (Provider::Memory, self.memory.container_hints(pod, container)),
                    ];
                    let refusal = pod_level.then_some(
                        "Pod Scope pod with pod-level resources failed admission with a container-level topology manager",
                    );
                    let best = self.merge(Some(container.name.clone()), hints, refusal, trace)?;
                    self.allocate(pod, container, best)?;
                }
            }
            TopologyScope::Pod => {
                let hints = vec![
                    (Provider::Device, self.devices.pod_hints(pod)),
                    (Provider::Cpu, self.cpus.pod_hints(pod)),
                    (Provider::Memory, self.memory.pod_hints(pod)),
                ];
                let refusal = pod_level.then_some(
                    "Pod Scope pod with pod-level resources failed admission under pod-scope topology manager",
                );
                let best = self.merge(None, hints, refusal, trace)?;
                if pod_level {
                    self.allocate_pod(pod, best)?;
                } else {
                    for (container, _) in pod.all_containers() {
                        self.allocate(pod, container, best)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Each provider allocates for the whole pod (kubelet `AllocatePod`):
    /// the device manager does nothing there, the CPU and memory managers
    /// give the pod its CPUs and memory and divide them.
    fn allocate_pod(&mut self, pod: &Pod, hint: TopologyHint) -> Result<(), Rejection> {
        self.cpus.allocate_pod(pod, hint).map_err(cpu_rejection)?;
        self.memory.allocate_pod(pod, hint).map_err(|e| match e {
            MemoryPodAllocateError::EmptyPodSharedPool(message) => Rejection {
                reason: "EmptyPodSharedPoolError".to_string(),
                message,
                stage: RejectionStage::Allocation(Provider::Memory),
            },
            MemoryPodAllocateError::Other(error) => unexpected(Provider::Memory, error.to_string()),
        })?;
        Ok(())
    }

    /// Merges one set of provider hints, records it, and rejects the pod
    /// when the policy does not admit the result.
    fn merge(
        &self,
        container: Option<String>,
        hints: Vec<(Provider, ProviderHints)>,
        pod_level_refusal: Option<&str>,
        trace: &mut MergeTrace,
    ) -> Result<TopologyHint, Rejection> {
        let decision = self.topology.decide(hints.iter().map(|(_, h)| h));
        trace.merges.push(MergeRecord {
            container,
            hints,
            best: decision.best,
            admitted: decision.admit,
        });
        if decision.admit {
            Ok(decision.best)
        } else {
            Err(Rejection {
                reason: "TopologyAffinityError".to_string(),
                message: pod_level_refusal
                    .unwrap_or("Resources cannot be allocated with Topology locality")
                    .to_string(),
                stage: RejectionStage::TopologyPolicy,
            })
        }
    }

    /// Each provider allocates for the container, in registration order.
    fn allocate(
        &mut self,
        pod: &Pod,
        container: &topoalign_model::Container,
        hint: TopologyHint,
    ) -> Result<(), Rejection> {
        self.devices
            .allocate(pod, container, hint)
            .map_err(|e| unexpected(Provider::Device, e.to_string()))?;
        self.cpus.allocate(pod, container, hint).map_err(cpu_rejection)?;
        match self.memory.allocate(pod, container, hint) {
            Ok(()) => Ok(()),
            Err(MemoryAllocateFailure::Error(error)) => Err(unexpected(Provider::Memory, error.to_string())),
            Err(MemoryAllocateFailure::KubeletPanic { numa_id }) => {
                self.kubelet_panic = Some(KubeletPanic {
                    release: self.config.kubelet_version,
                    numa_id,
                    site: PanicSite::MemoryDefaultHint {
                        container: container.name.clone(),
                    },
                });
                Err(panic_rejection(RejectionStage::Allocation(Provider::Memory)))
            }
        }
    }

    /// The predicate admit handler's resource-fit check against the other
    /// admitted pods; the pod's requests, for the usage once it is admitted.
    fn check_fit<'a>(&self, pod: &'a Pod) -> Result<PodRequests<'a>, Rejection> {
        let requests = PodRequests::of(pod);
        fit::check_fit_with(&self.fit_allocatable, pod, &requests, &self.fit_usage)
            .map(|()| requests)
            .map_err(|failure| Rejection {
                reason: failure.reason,
                message: failure.message,
                stage: RejectionStage::ResourceFit,
            })
    }

    /// What each container is given, in order (the kubelet's
    /// `PreCreateContainer`), each started (registered with the CPU and
    /// memory managers, whose `AddContainer` lets an app container take over
    /// its finished init containers' memory) unless it runs already.
    fn placements(&mut self, pod: &Pod, containers: Containers) -> Vec<ContainerPlacement> {
        let mut placements = Vec::new();
        for (container, init) in pod.all_containers() {
            placements.push(ContainerPlacement {
                name: container.name.clone(),
                init,
                // An empty assignment (a CPU amount whose Go int64 views
                // wrap to no whole CPUs) is reported as no exclusive CPUs.
                cpus: self
                    .cpus
                    .container_cpus(&pod.uid, &container.name)
                    .filter(|cpus| !cpus.is_empty()),
                memory_numa: self.memory.container_numa_nodes(&pod.uid, &container.name),
                devices: self.devices.container_devices(&pod.uid, &container.name),
            });
            if containers == Containers::Start {
                self.cpus.add_container(pod, container);
                self.memory.add_container(pod, container);
            }
        }
        placements
    }

    /// Replaces the admitted pods (a restored snapshot), with their usage.
    fn set_active(&mut self, pods: Vec<Pod>) {
        self.fit_usage = FitUsage::of(&pods);
        self.active = pods;
    }

    /// Drops every manager's state for a pod.
    fn release(&mut self, uid: &str) {
        self.devices.remove_pod(uid);
        self.cpus.remove_pod(uid);
        self.memory.remove_pod(uid);
    }
}

/// The rejection a crashing admission carries (its message is the
/// [`KubeletPanic`]'s, set when the decision is made).
fn panic_rejection(stage: RejectionStage) -> Rejection {
    Rejection {
        reason: KubeletPanic::REASON.to_string(),
        message: String::new(),
        stage,
    }
}

/// An allocation failure the kubelet does not name (`UnexpectedAdmissionError`).
fn unexpected(provider: Provider, error: String) -> Rejection {
    Rejection {
        reason: "UnexpectedAdmissionError".to_string(),
        message: format!("Allocate failed due to {error}, which is unexpected"),
        stage: RejectionStage::Allocation(provider),
    }
}

/// The CPU manager's allocation failure as the kubelet's admission result.
fn cpu_rejection(error: CpuAllocateError) -> Rejection {
    let named = |reason: &str, message: String| Rejection {
        reason: reason.to_string(),
        message,
        stage: RejectionStage::Allocation(Provider::Cpu),
    };
    match error {
        CpuAllocateError::SmtAlignment(message) => named("SMTAlignmentError", message),
        CpuAllocateError::EmptyPodSharedPool(message) => named("EmptyPodSharedPoolError", message),
        CpuAllocateError::Other(error) => unexpected(Provider::Cpu, error),
    }
}

/// What happens to an admitted pod's containers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Containers {
    /// They start, in order (a pod newly admitted).
    Start,
    /// They run already (a pod admitted again after a kubelet restart): the
    /// runtime starts nothing, so no manager hears of them again.
    Running,
}

/// The memory manager's configuration of a node (`reservation`: the
/// node-allocatable reservation `reservedMemory` must add up to).
fn memory_manager_config(config: &NodeConfig, reservation: ResourceList) -> MemoryManagerConfig {
    MemoryManagerConfig {
        policy: config.memory_policy,
        reserved_memory: config.reserved_memory.clone(),
        node_allocatable_reservation: reservation,
        kubelet_version: config.kubelet_version,
        pod_level_managers: config.feature_gates.pod_level_managers(config.kubelet_version),
    }
}
