//! The Static policy (kubelet `policy_static.go` plus the manager glue that
//! drives it): pins the memory and huge pages of Guaranteed pods' containers
//! to NUMA nodes.
//!
//! Owns: the machine state, the memory blocks of every container, and the
//! reusable init-container memory; hint entry points, `Allocate`,
//! `RemoveContainer` and `AddContainer`'s release of finished init
//! containers. Must not touch: other managers' state or the topology
//! manager's choice (the affinity is passed in).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use topoalign_model::{Container, KubeletVersion, Machine, NumaMask, Pod, QosClass, TopologyHint};

use crate::hints::{self, HintMap, MemoryHintRule};
use crate::init_reuse::ReusableMemory;
use crate::machine_state::{Block, MachineState, SystemReserved};
use crate::requests::{Requested, UnrepresentableRequest, container_requests, pod_requests};

mod pod_level;
pub(crate) use pod_level::PodAllocateError;
mod restore;

/// Why `Allocate` fails; the texts are the kubelet's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AllocateError {
    #[error(transparent)]
    Unrepresentable(#[from] UnrepresentableRequest),
    #[error("[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available")]
    NoDefaultAffinity,
    #[error("[memorymanager] failed to find the default preferred hint")]
    DefaultNotPreferred,
    #[error("[memorymanager] failed to find NUMA nodes to extend the current topology hint")]
    CannotExtend,
    #[error("[memorymanager] failed to find the extended preferred hint")]
    ExtendedNotPreferred,
    #[error("[memorymanager] preferred hint violates NUMA node allocation")]
    ViolatesNumaAllocation,
    /// Not an error the kubelet returns: it panics (see
    /// [`crate::MemoryAllocateFailure::KubeletPanic`]).
    #[error("the kubelet panics computing the default hint: NUMA node id {0} does not fit its NUMA masks")]
    NumaIdPastMasks(usize),
}

/// One pod's containers with memory blocks, in the order they were
/// allocated (init containers, then app containers), found by name in
/// constant time once there are more than a few: a pod may have thousands
/// of init containers, and every container start looks up the blocks of
/// those before it.
#[derive(Clone, Debug, Default)]
struct PodBlocks {
    /// Allocation order; `None` where a container's blocks were removed.
    slots: Vec<Option<(String, Vec<Block>)>>,
    /// Container name → its slot, once the pod has more than
    /// [`PodBlocks::LISTED`] slots; fewer are searched in place (no hashing,
    /// no second copy of each name).
    index: Option<HashMap<String, usize>>,
    /// Slots holding blocks.
    live: usize,
    /// The walks over a container's earlier init containers (taking over
    /// their memory, freeing it) skip the leading ones with nothing left to
    /// take or free, so a pod with thousands of init containers costs time
    /// linear in their number, not quadratic.
    drained: InitCursor,
    freed: InitCursor,
}

/// The two walks over a container's earlier init containers.
#[derive(Clone, Copy)]
enum Walk {
    /// Taking over their memory (`shrink_init_container_blocks`).
    TakeOver,
    /// Freeing it when the container starts (`add_container`).
    Free,
}

/// How many of a pod's first init containers a walk may skip, and their
/// names.
#[derive(Clone, Debug, Default)]
struct InitCursor {
    passed: usize,
    names: HashSet<String>,
}

impl InitCursor {
    /// Where a walk over the init containers before `container` may start,
    /// advancing past those `done` says need no look (never past
    /// `container`: later ones may not be allocated yet). `None` when
    /// `container` is itself among the skipped: nothing before it needs a
    /// look.
    fn start(
        &mut self,
        inits: &[Container],
        container: &Container,
        done: impl Fn(&Container) -> bool,
    ) -> Option<usize> {
        if self.names.contains(&container.name) {
            return None;
        }
        while let Some(init) = inits.get(self.passed) {
            if init.name == container.name || !done(init) {
                break;
            }
            self.names.insert(init.name.clone());
            self.passed += 1;
        }
        Some(self.passed)
    }
}

impl PodBlocks {
    /// Slots up to which a name is found by a walk rather than an index.
    const LISTED: usize = 8;

    fn slot(&self, container: &str) -> Option<usize> {
        match &self.index {
            Some(index) => index.get(container).copied(),
            None => self
                .slots
                .iter()
                .position(|slot| slot.as_ref().is_some_and(|(name, _)| name == container)),
        }
    }

    fn get(&self, container: &str) -> Option<&Vec<Block>> {
        let slot = self.slots[self.slot(container)?].as_ref()?;
        Some(&slot.1)
    }

    fn get_mut(&mut self, container: &str) -> Option<&mut Vec<Block>> {
        let index = self.slot(container)?;
        let slot = self.slots[index].as_mut()?;
        Some(&mut slot.1)
    }

    fn set(&mut self, container: &str, blocks: Vec<Block>) {
        match self.slot(container).and_then(|i| self.slots[i].as_mut()) {
            Some((_, existing)) => *existing = blocks,
            None => {
                if let Some(index) = &mut self.index {
                    index.insert(container.to_string(), self.slots.len());
                }
                self.slots.push(Some((container.to_string(), blocks)));
                self.live += 1;
                if self.index.is_none() && self.slots.len() > Self::LISTED {
                    let index = self
                        .slots
                        .iter()
                        .enumerate()
                        .filter_map(|(i, slot)| slot.as_ref().map(|(name, _)| (name.clone(), i)))
                        .collect();
                    self.index = Some(index);
                }
            }
        }
    }

    fn remove(&mut self, container: &str) -> Option<Vec<Block>> {
        let slot = self.slot(container)?;
        if let Some(index) = &mut self.index {
            index.remove(container);
        }
        let (_, blocks) = self.slots[slot].take()?;
        self.live -= 1;
        Some(blocks)
    }

    fn is_empty(&self) -> bool {
        self.live == 0
    }

    fn iter(&self) -> impl Iterator<Item = (&String, &Vec<Block>)> {
        self.slots.iter().flatten().map(|(name, blocks)| (name, blocks))
    }
}

impl FromIterator<(String, Vec<Block>)> for PodBlocks {
    fn from_iter<I: IntoIterator<Item = (String, Vec<Block>)>>(containers: I) -> Self {
        let containers = containers.into_iter();
        let mut pod = PodBlocks::default();
        // Room for the containers known to come only: a restored node keeps
        // one of these per pod, of one or two containers mostly.
        pod.slots.reserve_exact(containers.size_hint().0);
        for (name, blocks) in containers {
            pod.set(&name, blocks);
        }
        pod
    }
}

/// The Static policy and its state.
#[derive(Clone, Debug)]
pub(crate) struct StaticPolicy {
    machine: MachineState,
    /// Pod uid → its containers' blocks. Each pod's record is shared
    /// between clones of the state and copied on its first change (see
    /// [`Arc::make_mut`]): a trial admission clones the state to admit one
    /// pod, and copying every other pod's record would cost more than the
    /// admission.
    blocks: BTreeMap<String, Arc<PodBlocks>>,
    reusable: ReusableMemory,
    /// From 1.34 a pod whose pod-level resources are read (see
    /// [`Pod::pod_resources`]) gets no pinned memory and no memory hints:
    /// "pod-level resources are not supported by the static Memory manager
    /// policy". Before, it is treated as any other pod of its QoS class.
    leaves_pod_level_pods_alone: bool,
    /// `PodLevelResourceManagers` on (1.36+): a pod with pod-level
    /// resources is managed as a whole (see `pod_level`).
    pod_level_managers: bool,
    /// From 1.37 `Allocate` leaves a container that requests no memory
    /// alone before looking at hints.
    skips_containers_without_requests: bool,
    /// Pod-level assignments (`podEntries`): pod uid → the blocks reserved
    /// for the whole pod.
    pod_blocks: BTreeMap<String, Vec<Block>>,
    /// The machine's smallest NUMA id past 63 ([`Machine::numa_id_past_masks`]):
    /// the kubelet's default hint enumerates a mask of every NUMA node and
    /// crashes on it.
    numa_id_past_masks: Option<usize>,
}

impl StaticPolicy {
    /// The policy with nothing allocated, as the kubelet of `version` runs it.
    pub fn new(
        machine: &Machine,
        system_reserved: &SystemReserved,
        version: KubeletVersion,
        pod_level_managers: bool,
    ) -> Self {
        StaticPolicy {
            machine: MachineState::new(machine, system_reserved),
            blocks: BTreeMap::new(),
            reusable: ReusableMemory::default(),
            leaves_pod_level_pods_alone: version.at_least(KubeletVersion::V1_34),
            pod_level_managers,
            skips_containers_without_requests: version.at_least(KubeletVersion::V1_37),
            pod_blocks: BTreeMap::new(),
            numa_id_past_masks: machine.numa_id_past_masks(),
        }
    }

    /// Whether the policy leaves `pod` alone: it uses pod-level resources
    /// and the release skips such pods.
    fn leaves_alone(&self, pod: &Pod) -> bool {
        self.leaves_pod_level_pods_alone && pod.uses_pod_level_resources() && !self.pod_level_managers
    }

    /// Whether `pod` is managed at the pod level (`PodLevelResourceManagers`
    /// on and the pod has pod-level resources).
    fn manages_pod_level(&self, pod: &Pod) -> bool {
        self.pod_level_managers && pod.uses_pod_level_resources()
    }

    /// `getContainerRequestedResources` as this policy reads it: in a pod
    /// managed at the pod level only a container Guaranteed by itself
    /// requests memory of its own.
    fn container_requests<'a>(
        &self,
        pod: &Pod,
        container: &'a Container,
    ) -> Result<Requested<'a>, UnrepresentableRequest> {
        if self.manages_pod_level(pod) && !container.is_equivalent_guaranteed() {
            return Ok(Requested::new());
        }
        container_requests(container)
    }

    /// The container's blocks; `None` when it has none (the kubelet's nil).
    pub fn blocks(&self, pod_uid: &str, container: &str) -> Option<&[Block]> {
        self.blocks
            .get(pod_uid)?
            .get(container)
            .map(Vec::as_slice)
            .filter(|blocks| !blocks.is_empty())
    }

    /// Every pod uid → container name → blocks.
    pub fn all_blocks(&self) -> impl Iterator<Item = (&str, &str, &[Block])> {
        self.blocks.iter().flat_map(|(uid, containers)| {
            containers
                .iter()
                .map(move |(name, blocks)| (uid.as_str(), name.as_str(), blocks.as_slice()))
        })
    }

    pub fn machine_state(&self) -> &MachineState {
        &self.machine
    }

    fn set_blocks(&mut self, pod_uid: &str, container: &str, blocks: Vec<Block>) {
        // The uid is copied only for a pod new to the state.
        if let Some(pod) = self.blocks.get_mut(pod_uid) {
            Arc::make_mut(pod).set(container, blocks);
            return;
        }
        Arc::make_mut(self.blocks.entry(pod_uid.to_string()).or_default()).set(container, blocks);
    }

    /// Container-scope hints (kubelet `GetTopologyHints`); `None` is the
    /// kubelet's nil map.
    pub fn container_hints(&self, pod: &Pod, container: &Container) -> Option<HintMap> {
        if pod.qos != QosClass::Guaranteed {
            return None;
        }
        let requested = self.container_requests(pod, container).ok()?;
        if self.leaves_alone(pod) {
            return None;
        }
        if let Some(blocks) = self.blocks(&pod.uid, &container.name) {
            // Already allocated (the kubelet's restart path): the same hints.
            return hints::regenerate(blocks, &requested);
        }
        Some(hints::calculate(&self.machine, &self.reusable, &pod.uid, &requested))
    }

    /// Pod-scope hints (kubelet `GetPodTopologyHints`).
    pub fn pod_hints(&self, pod: &Pod) -> Option<HintMap> {
        if pod.qos != QosClass::Guaranteed {
            return None;
        }
        if self.manages_pod_level(pod) {
            return self.pod_level_hints(pod);
        }
        let requested = pod_requests(pod).ok()?;
        if self.leaves_alone(pod) {
            return None;
        }
        self.pod_hints_for(pod, &requested)
    }

    /// Pod-scope hints for `requested` (the pod's sum, or its pod-level
    /// amounts): regenerated from the blocks a container of the pod
    /// already holds, else calculated from what is free.
    fn pod_hints_for(&self, pod: &Pod, requested: &Requested) -> Option<HintMap> {
        let allocated = pod
            .all_containers()
            .find_map(|(container, _)| self.blocks(&pod.uid, &container.name));
        if let Some(blocks) = allocated {
            return hints::regenerate(blocks, requested);
        }
        Some(hints::calculate(&self.machine, &self.reusable, &pod.uid, requested))
    }

    /// Pins the container's memory on the topology manager's `affinity`,
    /// widened if it cannot hold the request (kubelet `Allocate`).
    ///
    /// # Errors
    /// [`AllocateError`] as the kubelet's `Allocate` fails; the state is
    /// unchanged then.
    pub fn allocate(&mut self, pod: &Pod, container: &Container, affinity: TopologyHint) -> Result<(), AllocateError> {
        if pod.qos != QosClass::Guaranteed || self.leaves_alone(pod) {
            return Ok(());
        }
        if let Some(blocks) = self.blocks(&pod.uid, &container.name) {
            let blocks = blocks.to_vec();
            self.reusable.record(pod, container, &blocks);
            return Ok(());
        }

        let requested = self.container_requests(pod, container)?;
        if requested.is_empty() && self.skips_containers_without_requests {
            return Ok(());
        }
        let mut chosen = affinity;
        if chosen.affinity.is_none() {
            let default = self.default_hint(&pod.uid, &requested)?;
            if !default.preferred && chosen.preferred {
                return Err(AllocateError::DefaultNotPreferred);
            }
            chosen = default;
        }
        // Set by the topology manager or by the default hint just above.
        let Some(mut mask) = chosen.affinity else {
            return Err(AllocateError::NoDefaultAffinity);
        };

        // Under `restricted` the merged affinity can be narrower than the
        // memory hint it came from; widen it back to a mask that holds the
        // request.
        if !self.machine.covers(mask, &requested) {
            let extended = self.extended_hint(&pod.uid, &requested, mask)?;
            if !extended.preferred && chosen.preferred {
                return Err(AllocateError::ExtendedNotPreferred);
            }
            mask = extended.affinity.unwrap_or(mask);
        }

        if self.machine.violates_group_rule(mask) {
            return Err(AllocateError::ViolatesNumaAllocation);
        }

        let mut blocks = Vec::with_capacity(requested.len());
        for (resource, &size) in &requested {
            blocks.push(Block {
                affinity: mask,
                resource: (*resource).to_owned(),
                size,
            });
            let reusable = self.reusable.get(&pod.uid, mask, resource);
            self.machine.reserve(mask, resource, size.saturating_sub(reusable));
        }
        self.reusable.record(pod, container, &blocks);
        // The shrink touches only earlier init containers' blocks (names
        // are unique in a pod), so it may come first and the blocks move
        // into the state uncopied.
        self.shrink_init_container_blocks(pod, container, &blocks);
        self.set_blocks(&pod.uid, &container.name, blocks);
        Ok(())
    }

    /// The hint used when the topology manager gave no affinity (kubelet
    /// `getDefaultHint`): the best memory hint of the current state.
    fn default_hint(&self, pod_uid: &str, requested: &Requested) -> Result<TopologyHint, AllocateError> {
        // `calculateHints` walks `IterateBitMasks` over every NUMA id; the
        // mask of an id past 63 is nil (`NewBitMask`'s error discarded) and
        // its first use panics, whatever was requested.
        if let Some(id) = self.numa_id_past_masks {
            return Err(AllocateError::NumaIdPastMasks(id));
        }
        // Nothing requested gives no hints at all, so no default either: a
        // container without memory of a pod that is Guaranteed by its
        // pod-level resources (1.32 and 1.33 with `PodLevelResources` on).
        if requested.is_empty() {
            return Err(AllocateError::NoDefaultAffinity);
        }
        MemoryHintRule::new(&self.machine, &self.reusable, pod_uid, requested)
            .and_then(|rule| rule.best(NumaMask::EMPTY))
            .ok_or(AllocateError::NoDefaultAffinity)
    }

    /// The best memory hint that contains `mask` (kubelet
    /// `extendTopologyManagerHint`).
    fn extended_hint(
        &self,
        pod_uid: &str,
        requested: &Requested,
        mask: NumaMask,
    ) -> Result<TopologyHint, AllocateError> {
        MemoryHintRule::new(&self.machine, &self.reusable, pod_uid, requested)
            .and_then(|rule| rule.best(mask))
            .ok_or(AllocateError::CannotExtend)
    }

    /// Records that `container` took over memory of the pod's earlier
    /// regular init containers on the same mask (kubelet
    /// `updateInitContainersMemoryBlocks`): their blocks shrink by the
    /// container's block size, so the pod's blocks still add up to what the
    /// machine state holds for it.
    fn shrink_init_container_blocks(&mut self, pod: &Pod, container: &Container, container_blocks: &[Block]) {
        let Some(skip) = self.skippable_inits(pod, container, Walk::TakeOver) else {
            return;
        };
        for container_block in container_blocks {
            let mut left = container_block.size;
            for init in &pod.init_containers[skip..] {
                if init.name == container.name || left == 0 {
                    break;
                }
                if init.restartable {
                    continue;
                }
                let Some(init_blocks) = self
                    .blocks
                    .get_mut(&pod.uid)
                    .and_then(|p| Arc::make_mut(p).get_mut(&init.name))
                else {
                    continue;
                };
                for init_block in init_blocks.iter_mut() {
                    if init_block.size == 0
                        || init_block.resource != container_block.resource
                        || init_block.affinity != container_block.affinity
                    {
                        continue;
                    }
                    let taken = init_block.size.min(left);
                    init_block.size -= taken;
                    left -= taken;
                }
            }
        }
    }

    /// Frees the container's blocks (kubelet `RemoveContainer`).
    pub fn remove_container(&mut self, pod_uid: &str, container: &str) {
        if self.pod_blocks.contains_key(pod_uid) {
            self.remove_pod_level_container(pod_uid, container);
            return;
        }
        let Some(containers) = self.blocks.get_mut(pod_uid) else {
            return;
        };
        let Some(blocks) = Arc::make_mut(containers).remove(container) else {
            return;
        };
        if containers.is_empty() {
            self.blocks.remove(pod_uid);
        }
        for block in &blocks {
            self.machine.release(block);
        }
    }

    /// The container started (kubelet `AddContainer`): the pod's regular
    /// init containers before it have finished, so their memory is freed.
    pub fn add_container(&mut self, pod: &Pod, container: &Container) {
        let Some(skip) = self.skippable_inits(pod, container, Walk::Free) else {
            return;
        };
        for init in &pod.init_containers[skip..] {
            if init.name == container.name {
                break;
            }
            // Sidecars keep running for the pod's whole life.
            if init.restartable {
                continue;
            }
            self.remove_container(&pod.uid, &init.name);
        }
    }

    /// Where `walk` over the init containers before `container` may start;
    /// `None` to skip it (also when the pod holds no blocks: nothing to do).
    fn skippable_inits(&mut self, pod: &Pod, container: &Container, walk: Walk) -> Option<usize> {
        let blocks = Arc::make_mut(self.blocks.get_mut(&pod.uid)?);
        let mut cursor = std::mem::take(match walk {
            Walk::TakeOver => &mut blocks.drained,
            Walk::Free => &mut blocks.freed,
        });
        let start = cursor.start(&pod.init_containers, container, |init| {
            // Sidecars give and free no memory.
            init.restartable
                || match walk {
                    Walk::TakeOver => blocks
                        .get(&init.name)
                        .is_none_or(|list| list.iter().all(|b| b.size == 0)),
                    Walk::Free => blocks.get(&init.name).is_none(),
                }
        });
        *match walk {
            Walk::TakeOver => &mut blocks.drained,
            Walk::Free => &mut blocks.freed,
        } = cursor;
        start
    }

    /// Frees everything the pod holds, container by container in
    /// allocation order.
    pub fn remove_pod(&mut self, pod_uid: &str) {
        let names: Vec<String> = self
            .blocks
            .get(pod_uid)
            .map(|containers| containers.iter().map(|(name, _)| name.clone()).collect())
            .unwrap_or_default();
        for name in names {
            self.remove_container(pod_uid, &name);
        }
    }
}

#[cfg(test)]
mod tests {
    //! The kubelet's `policy_static_test.go` tables (Allocate, init
    //! containers, RemoveContainer), written against our fixtures.

    use super::*;
    use crate::machine_state::MEMORY;
    use crate::machine_state::fixture::*;
    use crate::requests::fixture::{container, pod, sidecar};
    use topoalign_model::{QosClass, ResourceHints};

    impl StaticPolicy {
        /// A policy whose state is given outright, as the kubelet's tests
        /// set theirs.
        fn with_state(machine: MachineState, blocks: Vec<(&str, &str, Vec<Block>)>) -> Self {
            let mut policy = StaticPolicy {
                machine,
                blocks: BTreeMap::new(),
                reusable: ReusableMemory::default(),
                leaves_pod_level_pods_alone: true,
                pod_level_managers: false,
                skips_containers_without_requests: false,
                pod_blocks: BTreeMap::new(),
                numa_id_past_masks: None,
            };
            for (pod_uid, container, container_blocks) in blocks {
                policy.set_blocks(pod_uid, container, container_blocks);
            }
            policy
        }

        fn sizes(&self, pod_uid: &str, container: &str) -> Vec<(String, u64)> {
            self.blocks(pod_uid, container)
                .unwrap_or_default()
                .iter()
                .map(|b| (b.resource.clone(), b.size))
                .collect()
        }
    }

    fn m(nodes: &[usize]) -> NumaMask {
        NumaMask::from_nodes(nodes.iter().copied())
    }

    fn block(nodes: &[usize], resource: &str, size: u64) -> Block {
        Block {
            affinity: m(nodes),
            resource: resource.to_string(),
            size,
        }
    }

    const NO_AFFINITY: TopologyHint = TopologyHint::any(false);

    /// The kubelet tests' `requirementsGuaranteed`: 1Gi memory + 1Gi of 1Gi pages.
    fn guaranteed(uid: &str, name: &str) -> Pod {
        pod(
            uid,
            vec![],
            vec![container(name, &[("cpu", 1), (MEMORY, GB), (HUGEPAGES_1GI, GB)])],
        )
    }

    fn one_node(memory_free: u64, hugepages_free: u64, assignments: i64) -> MachineState {
        machine_state(vec![node(
            0,
            &[(MEMORY, 1536 * MB, memory_free), (HUGEPAGES_1GI, GB, hugepages_free)],
            &[0],
            assignments,
        )])
    }

    /// Three nodes where node 0 carries a single-node allocation and 1, 2
    /// are too small alone (kubelet "default hint has preferred false").
    fn node0_busy_others_small() -> MachineState {
        machine_state(vec![
            node(0, &[(MEMORY, GB, 512 * MB), (HUGEPAGES_1GI, GB, GB)], &[0], 1),
            node(1, &[(MEMORY, 512 * MB, 512 * MB), (HUGEPAGES_1GI, GB, GB)], &[1], 0),
            node(2, &[(MEMORY, 512 * MB, 512 * MB), (HUGEPAGES_1GI, GB, GB)], &[2], 0),
        ])
    }

    #[test]
    fn allocate_rejections_carry_the_kubelet_texts() {
        struct Case {
            name: &'static str,
            state: MachineState,
            affinity: TopologyHint,
            error: &'static str,
        }
        let cases = [
            Case {
                name: "no affinity and no node with enough memory",
                state: one_node(512 * MB, 0, 2),
                affinity: NO_AFFINITY,
                error: "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available",
            },
            Case {
                name: "preferred empty affinity but the default hint is not preferred",
                state: node0_busy_others_small(),
                affinity: TopologyHint::any(true),
                error: "[memorymanager] failed to find the default preferred hint",
            },
            Case {
                name: "affinity too small and no hint contains it",
                state: machine_state(vec![
                    node(0, &[(MEMORY, 512 * MB, 512 * MB), (HUGEPAGES_1GI, GB, GB)], &[0], 0),
                    node(1, &[(MEMORY, 1536 * MB, 512 * MB), (HUGEPAGES_1GI, GB, GB)], &[1, 2], 1),
                    node(2, &[(MEMORY, 1536 * MB, 512 * MB), (HUGEPAGES_1GI, GB, GB)], &[1, 2], 1),
                ]),
                affinity: TopologyHint::new(m(&[0]), false),
                error: "[memorymanager] failed to find NUMA nodes to extend the current topology hint",
            },
            Case {
                name: "preferred affinity whose extension is not preferred",
                state: node0_busy_others_small(),
                affinity: TopologyHint::new(m(&[1]), true),
                error: "[memorymanager] failed to find the extended preferred hint",
            },
            Case {
                name: "multi-node affinity over a node with single-node allocations",
                state: machine_state(vec![
                    node(0, &[(MEMORY, 2 * GB, GB), (HUGEPAGES_1GI, 2 * GB, 2 * GB)], &[0], 1),
                    node(1, &[(MEMORY, 2 * GB, 2 * GB), (HUGEPAGES_1GI, 2 * GB, 2 * GB)], &[1], 0),
                ]),
                affinity: TopologyHint::new(m(&[0, 1]), false),
                error: "[memorymanager] preferred hint violates NUMA node allocation",
            },
        ];
        for case in cases {
            let mut policy = StaticPolicy::with_state(case.state.clone(), vec![]);
            let p = guaranteed("pod2", "container2");
            let error = policy
                .allocate(&p, &p.containers[0], case.affinity)
                .expect_err(case.name);
            assert_eq!(error.to_string(), case.error, "{}", case.name);
            assert_eq!(policy.machine, case.state, "{}: state must not change", case.name);
        }
    }

    #[test]
    fn non_guaranteed_pods_and_known_containers_change_nothing() {
        let state = one_node(512 * MB, GB, 1);
        let mut policy = StaticPolicy::with_state(
            state.clone(),
            vec![("pod1", "container1", vec![block(&[0], MEMORY, GB)])],
        );
        let mut burstable = guaranteed("pod2", "c");
        burstable.qos = QosClass::Burstable;
        policy
            .allocate(&burstable, &burstable.containers[0], NO_AFFINITY)
            .expect("skipped");
        let known = guaranteed("pod1", "container1");
        policy
            .allocate(&known, &known.containers[0], NO_AFFINITY)
            .expect("skipped");
        assert_eq!(policy.machine, state);
        assert_eq!(policy.sizes("pod1", "container1"), [(MEMORY.to_string(), GB)]);
        assert!(policy.blocks("pod2", "c").is_none());
        assert!(policy.container_hints(&burstable, &burstable.containers[0]).is_none());
    }

    #[test]
    fn no_affinity_uses_the_default_hint() {
        let mut policy = StaticPolicy::with_state(one_node(1536 * MB, GB, 0), vec![]);
        let p = guaranteed("pod1", "container1");
        policy.allocate(&p, &p.containers[0], NO_AFFINITY).expect("fits");
        assert_eq!(
            policy.blocks("pod1", "container1"),
            Some(&[block(&[0], HUGEPAGES_1GI, GB), block(&[0], MEMORY, GB)][..])
        );
        assert_eq!(free_of(&policy.machine, MEMORY), [512 * MB]);
        assert_eq!(free_of(&policy.machine, HUGEPAGES_1GI), [0]);
        assert_eq!(policy.machine.assignments(0), 2);
    }

    #[test]
    fn memory_from_multiple_nodes_fills_the_lowest_first() {
        let nodes = (0..4)
            .map(|n| node(n, &[(MEMORY, 512 * MB, 512 * MB), (HUGEPAGES_1GI, GB, GB)], &[n], 0))
            .collect();
        let mut policy = StaticPolicy::with_state(machine_state(nodes), vec![]);
        let p = guaranteed("pod1", "container1");
        policy
            .allocate(&p, &p.containers[0], TopologyHint::any(true))
            .expect("fits two nodes");
        assert_eq!(
            policy.blocks("pod1", "container1").map(|b| b[0].affinity),
            Some(m(&[0, 1]))
        );
        assert_eq!(free_of(&policy.machine, MEMORY), [0, 0, 512 * MB, 512 * MB]);
        assert_eq!(free_of(&policy.machine, HUGEPAGES_1GI), [0, GB, GB, GB]);
        let groups: Vec<NumaMask> = (0..4).map(|n| policy.machine.cells(n)).collect();
        assert_eq!(groups, [m(&[0, 1]), m(&[0, 1]), m(&[2]), m(&[3])]);
        assert_eq!(policy.machine.assignments(1), 2);
    }

    #[test]
    fn a_narrow_restricted_affinity_is_extended_to_a_hint_containing_it() {
        let nodes = (0..3)
            .map(|n| node(n, &[(MEMORY, 512 * MB, 512 * MB), (HUGEPAGES_1GI, GB, GB)], &[n], 0))
            .collect();
        let mut policy = StaticPolicy::with_state(machine_state(nodes), vec![]);
        let p = guaranteed("pod1", "container1");
        policy
            .allocate(&p, &p.containers[0], TopologyHint::new(m(&[1]), true))
            .expect("extended");
        assert_eq!(
            policy.blocks("pod1", "container1").map(|b| b[0].affinity),
            Some(m(&[0, 1]))
        );
    }

    /// The kubelet's `TestStaticPolicyAllocateWithInitContainers`: one node
    /// of 7680Mi memory and 8Gi of 1Gi pages; containers ask for equal
    /// memory and huge pages; all allocated with no affinity.
    #[test]
    fn init_container_memory_is_reused_by_later_containers() {
        /// Sizes in Gi.
        struct Case {
            init: &'static [u64],
            apps: &'static [u64],
            init_blocks_after: &'static [u64],
            reserved: u64,
        }
        let case = |init, apps, init_blocks_after, reserved| Case {
            init,
            apps,
            init_blocks_after,
            reserved,
        };
        let cases = [
            case(&[1, 2], &[3, 4], &[0, 0], 7),
            case(&[4, 3], &[2, 1], &[0, 1], 4),
            case(&[7, 4], &[4, 3], &[0, 0], 7),
            case(&[7, 4], &[5, 2], &[0, 0], 7),
        ];
        for Case {
            init: init_sizes,
            apps: app_sizes,
            init_blocks_after: expected_init,
            reserved: expected_reserved,
        } in cases
        {
            let requests = |gi: u64| [("cpu", 1), (MEMORY, gi * GB), (HUGEPAGES_1GI, gi * GB)];
            let init: Vec<Container> = init_sizes
                .iter()
                .enumerate()
                .map(|(i, &gi)| container(&format!("initContainer{}", i + 1), &requests(gi)))
                .collect();
            let apps: Vec<Container> = app_sizes
                .iter()
                .enumerate()
                .map(|(i, &gi)| container(&format!("container{}", i + 1), &requests(gi)))
                .collect();
            let p = pod("pod1", init, apps);
            let state = machine_state(vec![node(
                0,
                &[(MEMORY, 7680 * MB, 7680 * MB), (HUGEPAGES_1GI, 8 * GB, 8 * GB)],
                &[0],
                0,
            )]);
            let mut policy = StaticPolicy::with_state(state, vec![]);
            // Reusable memory of another pod is forgotten on the first
            // allocation (kubelet: `initContainersReusableMemory{"pod0": ...}`).
            let other = pod("pod0", vec![container("init", &[])], vec![]);
            policy
                .reusable
                .record(&other, &other.init_containers[0], &[block(&[0], MEMORY, 8 * GB)]);
            for (c, _) in p.all_containers() {
                policy.allocate(&p, c, NO_AFFINITY).expect("fits");
            }
            let case = format!("init {init_sizes:?} apps {app_sizes:?}");
            for (i, &gi) in expected_init.iter().enumerate() {
                let sizes = policy.sizes("pod1", &format!("initContainer{}", i + 1));
                assert_eq!(
                    sizes,
                    [(HUGEPAGES_1GI.to_string(), gi * GB), (MEMORY.to_string(), gi * GB)],
                    "{case}"
                );
            }
            for (i, &gi) in app_sizes.iter().enumerate() {
                let sizes = policy.sizes("pod1", &format!("container{}", i + 1));
                assert_eq!(sizes[1], (MEMORY.to_string(), gi * GB), "{case}");
            }
            assert_eq!(policy.reusable.get("pod0", m(&[0]), MEMORY), 0, "{case}");
            let memory = policy.machine.table(0, MEMORY);
            assert_eq!(memory.reserved, expected_reserved * GB, "{case}");
            assert_eq!(memory.free, 7680 * MB - expected_reserved * GB, "{case}");
            assert_eq!(
                policy.machine.table(0, HUGEPAGES_1GI).reserved,
                expected_reserved * GB,
                "{case}"
            );
            assert_eq!(policy.machine.assignments(0), 8, "{case}");
        }
    }

    #[test]
    fn sidecar_memory_is_never_reused() {
        let p = pod(
            "pod1",
            vec![
                sidecar("sidecar", &[(MEMORY, GB)]),
                container("init", &[(MEMORY, 2 * GB)]),
            ],
            vec![container("app", &[(MEMORY, 2 * GB)])],
        );
        let state = machine_state(vec![node(0, &[(MEMORY, 8 * GB, 8 * GB)], &[0], 0)]);
        let mut policy = StaticPolicy::with_state(state, vec![]);
        for (c, _) in p.all_containers() {
            policy.allocate(&p, c, NO_AFFINITY).expect("fits");
        }
        // sidecar 1 + init 2 + app 2 reusing the init's 2.
        assert_eq!(policy.machine.table(0, MEMORY).reserved, 3 * GB);
        assert_eq!(policy.sizes("pod1", "sidecar"), [(MEMORY.to_string(), GB)]);
        assert_eq!(policy.sizes("pod1", "init"), [(MEMORY.to_string(), 0)]);
        // Starting the app frees the finished init container but keeps the sidecar.
        policy.add_container(&p, &p.containers[0]);
        assert!(policy.blocks("pod1", "init").is_none());
        assert!(policy.blocks("pod1", "sidecar").is_some());
        assert_eq!(policy.machine.table(0, MEMORY).reserved, 3 * GB);
        assert_eq!(policy.machine.assignments(0), 2);
    }

    #[test]
    fn removing_containers_restores_the_machine_state() {
        // kubelet: "should delete the container assignment and update the
        // machine state" and its cross-NUMA twin.
        let single = machine_state(vec![node(
            0,
            &[(MEMORY, 1536 * MB, 512 * MB), (HUGEPAGES_1GI, GB, 0)],
            &[0],
            2,
        )]);
        let cross = machine_state(vec![
            node(0, &[(MEMORY, 512 * MB, 0), (HUGEPAGES_1GI, GB, 0)], &[0, 1], 2),
            node(1, &[(MEMORY, 512 * MB, 0), (HUGEPAGES_1GI, GB, GB)], &[0, 1], 2),
        ]);
        for (state, nodes) in [(single, &[0][..]), (cross, &[0, 1][..])] {
            let blocks = vec![block(nodes, MEMORY, GB), block(nodes, HUGEPAGES_1GI, GB)];
            let mut policy = StaticPolicy::with_state(state.clone(), vec![("pod1", "container1", blocks)]);
            policy.remove_pod("pod1");
            assert!(policy.blocks.is_empty());
            for (&id, node_state) in &policy.machine.nodes {
                assert_eq!(node_state.assignments, 0);
                assert_eq!(node_state.cells, m(&[id]));
                for table in node_state.memory.values() {
                    assert_eq!((table.free, table.reserved), (table.allocatable, 0));
                }
            }
        }
    }

    #[test]
    fn pod_hints_come_from_the_pod_sum_or_from_existing_blocks() {
        let p = pod(
            "pod1",
            vec![container("init", &[(MEMORY, 3 * GB)])],
            vec![container("a", &[(MEMORY, GB)]), container("b", &[(MEMORY, GB)])],
        );
        let state = machine_state(vec![
            node(0, &[(MEMORY, 2 * GB, 2 * GB)], &[0], 0),
            node(1, &[(MEMORY, 4 * GB, 4 * GB)], &[1], 0),
        ]);
        let mut policy = StaticPolicy::with_state(state, vec![]);
        let hints = policy.pod_hints(&p).expect("guaranteed");
        assert_eq!(
            hints.get(MEMORY).and_then(ResourceHints::to_list),
            Some(vec![
                TopologyHint::new(m(&[1]), true),
                TopologyHint::new(m(&[0, 1]), false)
            ])
        );
        let pod_hint = TopologyHint::new(m(&[1]), true);
        for (c, _) in p.all_containers() {
            policy.allocate(&p, c, pod_hint).expect("fits");
        }
        // The pod asks for 3Gi, but "init"'s block shrank by what "a" and
        // "b" took over (3 → 2 → 1Gi), so it no longer matches the request:
        // the kubelet then gives no preference.
        assert_eq!(policy.sizes("pod1", "init"), [(MEMORY.to_string(), GB)]);
        assert!(policy.pod_hints(&p).is_none());
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn assert_tables_consistent(policy: &StaticPolicy) {
            for state in policy.machine.nodes.values() {
                for table in state.memory.values() {
                    assert_eq!(table.free + table.reserved, table.allocatable);
                }
                assert!(state.assignments >= 0);
            }
        }

        proptest! {
            /// With the default affinity (topology policy `none`), whatever
            /// is admitted, started and removed in any order, every table
            /// stays consistent and removing every pod restores the empty
            /// state exactly.
            #[test]
            fn removing_every_pod_restores_the_initial_state(
                node_gi in prop::collection::vec(1u64..8, 1..5),
                pods in prop::collection::vec((prop::option::of(1u64..6), 1u64..10), 1..8),
                removal_seed in any::<u64>(),
            ) {
                let nodes = node_gi
                    .iter()
                    .enumerate()
                    .map(|(id, &gi)| node(id, &[(MEMORY, gi * GB, gi * GB)], &[id], 0))
                    .collect();
                let initial = machine_state(nodes);
                let mut policy = StaticPolicy::with_state(initial.clone(), vec![]);
                let mut uids = Vec::new();
                for (i, &(init_gi, app_gi)) in pods.iter().enumerate() {
                    let init: Vec<Container> =
                        init_gi.map(|gi| container("init", &[(MEMORY, gi * GB)])).into_iter().collect();
                    let p = pod(&format!("p{i}"), init, vec![container("app", &[(MEMORY, app_gi * GB)])]);
                    let admitted = p
                        .all_containers()
                        .all(|(c, _)| policy.allocate(&p, c, NO_AFFINITY).is_ok());
                    assert_tables_consistent(&policy);
                    if admitted {
                        for (c, _) in p.all_containers() {
                            policy.add_container(&p, c);
                        }
                        uids.push(p.uid.clone());
                    } else {
                        policy.remove_pod(&p.uid);
                    }
                    assert_tables_consistent(&policy);
                }
                let mut seed = removal_seed;
                while !uids.is_empty() {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let uid = uids.remove((seed >> 33) as usize % uids.len());
                    policy.remove_pod(&uid);
                    assert_tables_consistent(&policy);
                }
                prop_assert!(policy.blocks.is_empty());
                prop_assert_eq!(&policy.machine, &initial);
            }
        }
    }
}
