//! `Node::numa_usage`, the one read side of a node's state, on random
//! machines, configurations and pod sequences:
//! - it never counts a CPU, byte or device twice: per NUMA node and
//!   resource allocated + available = allocatable ≤ capacity; free CPU sets
//!   are disjoint from reserved and exclusively assigned CPUs and as large
//!   as what is available; free devices are not in use; summed over NUMA
//!   nodes, CPUs and pinned bytes match what the containers hold;
//! - `Node::usage_reader` reads the same numbers one NUMA node and one
//!   resource at a time;
//! - admitting a pod and removing it again gives `state()` and
//!   `numa_usage()` back exactly — except how pinned memory splits between
//!   the NUMA nodes of one multi-node memory group, which the kubelet does
//!   not keep either (see [`group_memory`]) — and removing a whole admitted
//!   sequence in any order gives the empty node back exactly — except the
//!   pinned bytes the kubelet's books keep when pinned-memory placements
//!   overlapped (see [`mixed_memory_groups`]).

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use topoalign_engine::{
    CpuPolicyName, MemoryPolicyName, Node, NodeConfig, NumaUsage, ReservedMemory, TopologyPolicyName, TopologyScope,
};
use topoalign_model::{Container, CpuSet, Pod, QosClass, Quantity, ResourceList, UniformMachine};

const GI: u64 = 1 << 30;
const MI: u64 = 1 << 20;
const GPU: &str = "example.com/gpu";

#[derive(Clone, Debug)]
struct Setup {
    numa: usize,
    cores_per_numa: usize,
    threads: usize,
    hugepages_1g: u64,
    /// NUMA affinity of each device (empty: none).
    gpus: Vec<Vec<usize>>,
    static_cpu: bool,
    /// Reserved CPUs by list (`reservedSystemCPUs`) rather than by count.
    reserved_by_list: bool,
    reserved_count: usize,
    static_memory: bool,
    policy: TopologyPolicyName,
    pod_scope: bool,
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        1usize..=4,
        1usize..=3,
        1usize..=2,
        0u64..=2,
        prop::collection::vec(prop::collection::btree_set(0usize..4, 0..=2), 0..=4),
        any::<bool>(),
        any::<bool>(),
        1usize..=3,
        any::<bool>(),
        prop::sample::select(vec![
            TopologyPolicyName::None,
            TopologyPolicyName::BestEffort,
            TopologyPolicyName::Restricted,
            TopologyPolicyName::SingleNumaNode,
        ]),
        any::<bool>(),
    )
        .prop_map(
            |(numa, cores, threads, hugepages_1g, gpus, static_cpu, by_list, reserved, static_memory, policy, pod)| {
                Setup {
                    numa,
                    cores_per_numa: cores,
                    threads,
                    hugepages_1g,
                    gpus: gpus
                        .into_iter()
                        .map(|nodes| nodes.into_iter().filter(|&n| n < numa).collect())
                        .collect(),
                    static_cpu,
                    reserved_by_list: by_list,
                    reserved_count: reserved,
                    static_memory,
                    policy,
                    pod_scope: pod,
                }
            },
        )
}

fn start(setup: &Setup) -> Node {
    let cpus_per_numa = setup.cores_per_numa * setup.threads;
    let total = setup.numa * cpus_per_numa;
    // Siblings are `core` and `core + cores`, as on x86 machines; the GPU
    // resource is registered even without devices.
    let mut shape = UniformMachine::new(setup.numa, u32::try_from(setup.cores_per_numa).expect("small"))
        .threads_per_core(u32::try_from(setup.threads).expect("small"))
        .memory_per_numa(8 * GI)
        .devices(GPU, "gpu", 0);
    if setup.hugepages_1g > 0 {
        shape = shape.hugepages_per_numa(GI, setup.hugepages_1g * GI);
    }
    for (i, numa) in setup.gpus.iter().enumerate() {
        shape = shape.device(GPU, &format!("gpu{i}"), numa);
    }
    let machine = shape.build().expect("valid machine");
    let reserved = setup.reserved_count.min(total);
    let mut config = NodeConfig {
        topology_policy: setup.policy,
        topology_scope: if setup.pod_scope {
            TopologyScope::Pod
        } else {
            TopologyScope::Container
        },
        cpu_policy: if setup.static_cpu {
            CpuPolicyName::Static
        } else {
            CpuPolicyName::None
        },
        memory_policy: if setup.static_memory {
            MemoryPolicyName::Static
        } else {
            MemoryPolicyName::None
        },
        ..NodeConfig::default()
    };
    config
        .system_reserved
        .insert("cpu".to_owned(), Quantity::from_units(reserved as i128));
    if setup.reserved_by_list {
        // The last CPUs, so that a list and a count pick different CPUs.
        let ids = (total - reserved..total).map(|c| u32::try_from(c).expect("small"));
        config.reserved_system_cpus = Some(CpuSet::from_iter(ids));
    }
    if setup.static_memory {
        config
            .system_reserved
            .insert("memory".to_owned(), Quantity::from_units(i128::from(256 * MI)));
        config.reserved_memory = vec![ReservedMemory {
            numa_node: 0,
            limits: ResourceList::from_iter([("memory".to_owned(), Quantity::from_units(i128::from(256 * MI)))]),
        }];
    }
    Node::start(machine, config).expect("a valid configuration starts")
}

#[derive(Clone, Debug)]
struct PodShape {
    guaranteed: bool,
    /// (cpus, memory in MiB, 1Gi huge pages, gpus) per app container.
    apps: Vec<(u32, u64, u64, u32)>,
    init: Option<(u32, u64, u64, u32)>,
}

fn container_shape() -> impl Strategy<Value = (u32, u64, u64, u32)> {
    (1u32..=4, 1u64..=6, 0u64..=1, 0u32..=1).prop_map(|(cpu, mem, hp, gpu)| (cpu, mem * 512, hp, gpu))
}

fn pod_shape() -> impl Strategy<Value = PodShape> {
    (
        prop::bool::weighted(0.8),
        prop::collection::vec(container_shape(), 1..=2),
        prop::option::weighted(0.3, container_shape()),
    )
        .prop_map(|(guaranteed, apps, init)| PodShape { guaranteed, apps, init })
}

fn pod(n: usize, shape: &PodShape) -> Pod {
    let container = |name: String, &(cpu, mem, hp, gpu): &(u32, u64, u64, u32)| {
        let mut requests = ResourceList::from_iter([
            ("cpu".to_owned(), Quantity::from_units(i128::from(cpu))),
            ("memory".to_owned(), Quantity::from_units(i128::from(mem * MI))),
        ]);
        if hp > 0 {
            requests.insert("hugepages-1Gi".to_owned(), Quantity::from_units(i128::from(hp * GI)));
        }
        if gpu > 0 {
            requests.insert(GPU.to_owned(), Quantity::from_units(i128::from(gpu)));
        }
        let mut limits = requests.clone();
        if !shape.guaranteed {
            // Burstable: a CPU limit above the request.
            limits.insert("cpu".to_owned(), Quantity::from_units(i128::from(cpu + 1)));
        }
        Container {
            name,
            requests,
            limits,
            restartable: false,
        }
    };
    Pod {
        namespace: "default".to_owned(),
        name: format!("p{n}"),
        uid: format!("uid-{n}"),
        qos: if shape.guaranteed {
            QosClass::Guaranteed
        } else {
            QosClass::Burstable
        },
        init_containers: shape.init.iter().map(|c| container("init".to_owned(), c)).collect(),
        containers: shape
            .apps
            .iter()
            .enumerate()
            .map(|(i, c)| container(format!("app{i}"), c))
            .collect(),
        overhead: ResourceList::new(),
        pod_resources: None,
    }
}

/// `Node::usage_reader` gives `usage`'s numbers: each entry of each NUMA
/// node's resources, and nothing for a name the node has no entry for.
fn check_reader(node: &Node, usage: &[NumaUsage]) -> Result<(), TestCaseError> {
    let reader = node.usage_reader();
    let mut names: BTreeSet<String> = ["cpu", "memory", "hugepages-2Mi", "hugepages-1Gi", "example.com/none"]
        .iter()
        .map(|name| (*name).to_owned())
        .collect();
    names.extend(node.machine().devices().keys().cloned());
    names.extend(usage.iter().flat_map(|zone| zone.resources.keys().cloned()));
    for (zone, numa) in usage.iter().zip(node.machine().numa_nodes()) {
        for name in &names {
            prop_assert_eq!(
                reader.resource(numa, name),
                zone.resources.get(name).copied(),
                "{}",
                name
            );
        }
    }
    Ok(())
}

/// Every number of `usage` is consistent with the node's state, and
/// [`check_reader`].
fn check_counts_once(node: &Node, usage: &[NumaUsage]) -> Result<(), TestCaseError> {
    check_reader(node, usage)?;
    let machine = node.machine();
    let state = node.state();
    let assigned = state
        .cpu_assignments
        .values()
        .flat_map(BTreeMap::values)
        .fold(CpuSet::new(), |all, cpus| all.union(cpus));
    let reserved = node.reserved_cpus();
    prop_assert_eq!(usage.len(), machine.numa_nodes().len());
    let mut seen_cpus = CpuSet::new();
    let mut allocated_by_resource: BTreeMap<String, Quantity> = BTreeMap::new();
    for numa in usage {
        for (resource, amounts) in &numa.resources {
            prop_assert_eq!(
                amounts.allocated + amounts.available,
                amounts.allocatable,
                "NUMA {} {}: {:?}",
                numa.numa,
                resource,
                amounts
            );
            prop_assert!(amounts.allocatable <= amounts.capacity, "NUMA {} {resource}", numa.numa);
            prop_assert!(!amounts.allocated.is_negative() && !amounts.available.is_negative());
            if !amounts.placed {
                prop_assert!(
                    amounts.allocated.is_zero(),
                    "NUMA {} {resource} is not placed",
                    numa.numa
                );
            }
            *allocated_by_resource.entry(resource.clone()).or_default() += amounts.allocated;
        }
        prop_assert_eq!(&numa.cpus, &machine.numa_cpus(numa.numa));
        prop_assert!(seen_cpus.intersection(&numa.cpus).is_empty(), "a CPU on two NUMA nodes");
        seen_cpus = seen_cpus.union(&numa.cpus);
        prop_assert_eq!(&numa.reserved_cpus, &numa.cpus.intersection(&reserved));
        let cpu = numa.get("cpu").expect("every NUMA node lists cpu");
        prop_assert_eq!(cpu.capacity, Quantity::from_units(numa.cpus.len() as i128));
        prop_assert_eq!(
            cpu.allocated,
            Quantity::from_units(numa.cpus.intersection(&assigned).difference(&reserved).len() as i128)
        );
        match &numa.free_cpus {
            Some(free) => {
                prop_assert!(free.difference(&numa.cpus).is_empty(), "free CPUs off the node");
                prop_assert!(
                    free.intersection(&numa.reserved_cpus).is_empty(),
                    "a reserved CPU is free"
                );
                prop_assert!(free.intersection(&assigned).is_empty(), "an assigned CPU is free");
                prop_assert_eq!(cpu.available, Quantity::from_units(free.len() as i128));
            }
            None => prop_assert_eq!(node.config().cpu_policy, CpuPolicyName::None),
        }
        let in_use = node.devices_in_use();
        for (resource, free) in &numa.free_devices {
            let unique: BTreeSet<&String> = free.iter().collect();
            prop_assert_eq!(unique.len(), free.len(), "a device listed twice");
            for id in free {
                prop_assert!(!in_use[resource].contains(id), "{resource} {id} is in use and free");
                let device = machine.devices()[resource].iter().find(|d| &d.id == id);
                prop_assert!(device.is_some_and(|d| d.numa.contains(&numa.numa)));
            }
            prop_assert_eq!(numa.available(resource), Quantity::from_units(free.len() as i128));
        }
    }
    prop_assert_eq!(seen_cpus, machine.cpu_set());
    // Summed over NUMA nodes, exclusive CPUs and pinned bytes are what the
    // containers hold.
    let cpus_total = allocated_by_resource.get("cpu").copied().unwrap_or_default();
    prop_assert_eq!(
        cpus_total,
        Quantity::from_units(assigned.difference(&reserved).len() as i128)
    );
    if let Some(memory) = node.snapshot().memory {
        let mut pinned: BTreeMap<String, u64> = BTreeMap::new();
        for block in memory.assignments.values().flat_map(BTreeMap::values).flatten() {
            *pinned.entry(block.resource.clone()).or_default() += block.size;
        }
        for (resource, bytes) in pinned {
            let counted = allocated_by_resource.get(&resource).copied().unwrap_or_default();
            prop_assert_eq!(counted, Quantity::from_units(i128::from(bytes)), "{}", resource);
        }
    }
    Ok(())
}

/// (memory group's NUMA nodes, resource) → (allocated, available), summed.
type PinnedPerGroup = BTreeMap<(Vec<usize>, String), (Quantity, Quantity)>;

/// Usage as admit-then-remove must give it back. The kubelet's memory
/// manager (and so the engine) keeps a multi-NUMA block's bytes per group,
/// not per node: `RemoveContainer` frees a block's bytes from the group's
/// nodes in ascending order, whichever node they were taken from. Admitting
/// a pod into a group that another pod's block spans and removing it again
/// can therefore move pinned bytes from one node of the group to another
/// (for example a 1 GiB huge page from node 1 to node 0) while every group's
/// total stays. So pinned memory is compared per group (the `cells` of the
/// memory manager's machine state) and everything else per node.
fn group_memory(node: &Node, usage: &[NumaUsage]) -> (Vec<NumaUsage>, PinnedPerGroup) {
    let Some(memory) = node.snapshot().memory else {
        return (usage.to_vec(), BTreeMap::new());
    };
    let mut per_node = usage.to_vec();
    let mut per_group = PinnedPerGroup::new();
    for numa in &mut per_node {
        let Some(state) = memory.machine_state.get(&numa.numa) else {
            continue;
        };
        for resource in state.memory.keys() {
            if let Some(used) = numa.resources.remove(resource) {
                let group = per_group.entry((state.cells.clone(), resource.clone())).or_default();
                group.0 += used.allocated;
                group.1 += used.available;
            }
        }
    }
    (per_node, per_group)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn admit_then_remove_restores_state_and_usage(
        setup in setup(),
        shapes in prop::collection::vec(pod_shape(), 1..=8),
        order in prop::collection::vec(any::<prop::sample::Index>(), 8),
    ) {
        let mut node = start(&setup);
        let empty_state = node.state();
        let empty_usage = node.numa_usage();
        check_counts_once(&node, &empty_usage)?;
        let mut admitted = Vec::new();
        let mut mixed_groups = false;
        for (n, shape) in shapes.iter().enumerate() {
            let before_state = node.state();
            let before_usage = node.numa_usage();
            let pod = pod(n, shape);
            let uid = pod.uid.clone();
            // Admit, remove: back where it was.
            let mut trial = node.clone();
            if trial.admit(pod.clone()).admitted() {
                check_counts_once(&trial, &trial.numa_usage())?;
                prop_assert!(trial.remove(&uid));
            }
            prop_assert_eq!(trial.state(), before_state);
            prop_assert_eq!(group_memory(&node, &trial.numa_usage()), group_memory(&node, &before_usage));
            if node.admit(pod).admitted() {
                admitted.push(uid);
                mixed_groups |= mixed_memory_groups(&node);
            }
        }
        // Remove everything, in some order: back to the empty node.
        let mut uids = admitted;
        for (i, pick) in order.iter().enumerate().take(uids.len()) {
            let j = i + pick.index(uids.len() - i);
            uids.swap(i, j);
        }
        for uid in &uids {
            prop_assert!(node.remove(uid));
            check_counts_once(&node, &node.numa_usage())?;
        }
        prop_assert_eq!(node.state(), empty_state);
        if mixed_groups {
            prop_assert_eq!(without_pinned(&node, node.numa_usage()), without_pinned(&node, empty_usage));
        } else {
            prop_assert_eq!(node.numa_usage(), empty_usage);
        }
    }
}

/// Whether two of the node's pinned-memory placements share a NUMA node
/// without being the same set of nodes (a block on NUMA 0 beside one on
/// NUMA 0 and 1), as the memory manager allows when the topology manager's
/// policy admits a hint it did not prefer.
///
/// The kubelet's `RemoveContainer` then frees each block's bytes from its
/// nodes in ascending order, capped by what each node holds, whichever
/// block those bytes were taken for: removing the wider block first can
/// free the narrower one's bytes, and removing the narrower one later finds
/// nothing left on its node to free, so the books keep bytes that no
/// container holds. The engine keeps those books as the kubelet does: the
/// vector `testdata/conformance/1.37/scenarios/hand-memory-release-order.json`
/// (the real kubelet's answer) shows a later pod placed around them.
fn mixed_memory_groups(node: &Node) -> bool {
    let state = node.state();
    let placements: BTreeSet<&Vec<usize>> = state
        .memory_assignments
        .values()
        .flat_map(BTreeMap::values)
        .chain(state.pod_memory_assignments.values())
        .collect();
    placements.iter().any(|a| {
        placements
            .iter()
            .any(|b| a != b && a.iter().any(|numa| b.contains(numa)))
    })
}

/// `usage` without the resources the memory manager pins (what
/// [`mixed_memory_groups`] lets the kubelet's books keep after every pod
/// is gone); CPUs, devices and everything unpinned stay.
fn without_pinned(node: &Node, mut usage: Vec<NumaUsage>) -> Vec<NumaUsage> {
    let Some(memory) = node.snapshot().memory else {
        return usage;
    };
    for numa in &mut usage {
        if let Some(state) = memory.machine_state.get(&numa.numa) {
            for resource in state.memory.keys() {
                numa.resources.remove(resource);
            }
        }
    }
    usage
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// `try_admit` (the extender's trial admission) decides exactly as
    /// `admit` on a copy of the node, reports the usage that admission
    /// leaves, and leaves the node as it was.
    #[test]
    fn a_trial_admission_is_a_real_admission_left_uncommitted(
        setup in setup(),
        shapes in prop::collection::vec(pod_shape(), 1..=8),
    ) {
        let mut node = start(&setup);
        for (n, shape) in shapes.iter().enumerate() {
            let pod = pod(n, shape);
            let before_state = node.state();
            let before_usage = node.numa_usage();
            let trial = node.try_admit(&pod);
            prop_assert_eq!(node.state(), before_state);
            prop_assert_eq!(node.numa_usage(), before_usage);
            let decision = node.admit(pod);
            prop_assert_eq!(&trial.decision, &decision);
            prop_assert_eq!(trial.numa_usage(), node.numa_usage());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// `trial_key` leaves out who holds what (the same sizes admitted under
    /// other names give the same key), and nodes whose keys are equal give
    /// a new pod the same trial admission: here the same sizes admitted in
    /// two orders (often placed alike, so the keys often meet), then any
    /// pod asked of both.
    #[test]
    fn equal_trial_keys_give_equal_trial_admissions(
        setup in setup(),
        shapes in prop::collection::vec(pod_shape(), 1..=6),
        asked in prop::collection::vec(pod_shape(), 1..=4),
    ) {
        let mut forward = start(&setup);
        let mut renamed = start(&setup);
        let mut backward = start(&setup);
        for (n, shape) in shapes.iter().enumerate() {
            forward.admit(pod(n, shape));
            renamed.admit(pod(n + 300, shape));
        }
        for (n, shape) in shapes.iter().enumerate().rev() {
            backward.admit(pod(n + 100, shape));
        }
        // Who holds what is not part of the key.
        prop_assert_eq!(forward.trial_key(), renamed.trial_key());
        if forward.trial_key() == backward.trial_key() {
            prop_assert_eq!(forward.numa_usage(), backward.numa_usage());
            for (n, shape) in asked.iter().enumerate() {
                let pod = pod(n + 200, shape);
                let (a, b) = (forward.try_admit(&pod), backward.try_admit(&pod));
                prop_assert_eq!(&a.decision, &b.decision);
                prop_assert_eq!(a.numa_usage(), b.numa_usage());
            }
        }
    }
}
