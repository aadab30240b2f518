//! Hand-checked conformance vectors and start-up checks, through the public
//! API only, driven the way the engine's node drives the manager: hints,
//! then `allocate` with the affinity the topology manager chose (taken from
//! the vector's expected result), then `add_container` as containers start.

use std::collections::BTreeMap;

use topoalign_memory_manager::{
    MemoryManager, MemoryManagerConfig, MemoryManagerStartError, MemoryPolicyName, ReservedMemory,
};
use topoalign_model::{
    Container, Machine, NumaMask, Pod, ProviderHints, QosClass, Quantity, QuantityFormat, ResourceHints, ResourceList,
    TopologyHint, UniformMachine,
};

const MI: u64 = 1 << 20;
const GI: u64 = 1 << 30;

fn bytes(n: u64) -> Quantity {
    Quantity::from_units(i128::from(n))
}

/// `count` NUMA nodes of `memory` bytes each, without CPUs.
fn nodes(count: usize, memory: u64) -> UniformMachine {
    UniformMachine::new(count, 0).memory_per_numa(memory)
}

fn machine(shape: &UniformMachine) -> Machine {
    shape.build().expect("valid machine")
}

/// An amount written in binary notation (`1124Mi`), as manifests and
/// kubelet configurations write memory.
fn binary(n: u64) -> Quantity {
    bytes(n).with_format(QuantityFormat::BinarySI)
}

fn resources(entries: &[(&str, u64)]) -> ResourceList {
    entries.iter().map(|&(r, v)| (r.to_string(), binary(v))).collect()
}

fn reserved(numa_node: usize, entries: &[(&str, u64)]) -> ReservedMemory {
    ReservedMemory {
        numa_node,
        limits: resources(entries),
    }
}

fn static_config(reserved_memory: Vec<ReservedMemory>, node_allocatable: &[(&str, u64)]) -> MemoryManagerConfig {
    MemoryManagerConfig {
        kubelet_version: topoalign_model::KubeletVersion::V1_32,
        pod_level_managers: false,
        policy: MemoryPolicyName::Static,
        reserved_memory,
        node_allocatable_reservation: resources(node_allocatable),
    }
}

fn container(name: &str, memory: u64, hugepages_1gi: u64) -> Container {
    let mut requests = resources(&[("cpu", 2), ("memory", memory)]);
    if hugepages_1gi > 0 {
        requests.insert("hugepages-1Gi".to_string(), bytes(hugepages_1gi));
    }
    Container {
        name: name.to_string(),
        limits: requests.clone(),
        requests,
        restartable: false,
    }
}

fn pod(name: &str, init_containers: Vec<Container>, containers: Vec<Container>) -> Pod {
    Pod {
        namespace: "default".to_string(),
        name: name.to_string(),
        uid: format!("uid-{name}"),
        qos: QosClass::Guaranteed,
        init_containers,
        containers,
        overhead: ResourceList::new(),
        pod_resources: None,
    }
}

fn mask(nodes: &[usize]) -> NumaMask {
    NumaMask::from_nodes(nodes.iter().copied())
}

fn memory_hints(hints: &ProviderHints) -> Vec<(Vec<usize>, bool)> {
    match hints.by_resource.get("memory").and_then(ResourceHints::to_list) {
        Some(list) => list
            .iter()
            .map(|h| (h.affinity.map(|m| m.nodes().collect()).unwrap_or_default(), h.preferred))
            .collect(),
        None => panic!("expected memory hints, got {hints:?}"),
    }
}

/// Allocates every container of the pod on `affinity` and starts them.
fn admit_and_start(manager: &mut MemoryManager, pod: &Pod, affinity: TopologyHint) {
    for (c, _) in pod.all_containers() {
        manager.allocate(pod, c, affinity).expect("allocates");
    }
    for (c, _) in pod.all_containers() {
        manager.add_container(pod, c);
    }
}

/// The 2 × 32Gi machine of the hand-written vectors, 1124Mi reserved on
/// node 0 (systemReserved 1Gi + eviction 100Mi).
fn two_by_32gi(hugepages_1gi: u64) -> MemoryManager {
    let mut shape = nodes(2, 32 * GI);
    if hugepages_1gi > 0 {
        shape = shape.hugepages_per_numa(GI, hugepages_1gi);
    }
    let m = machine(&shape);
    let config = static_config(vec![reserved(0, &[("memory", 1124 * MI)])], &[("memory", 1124 * MI)]);
    MemoryManager::start(&m, &config).expect("valid reservation")
}

#[test]
fn vector_0002_a_pod_larger_than_any_node_gets_both() {
    let mut manager = two_by_32gi(0);
    let big = pod("big", vec![], vec![container("app", 40 * GI, 0)]);
    assert_eq!(memory_hints(&manager.pod_hints(&big)), [(vec![0, 1], true)]);
    assert_eq!(
        memory_hints(&manager.container_hints(&big, &big.containers[0])),
        [(vec![0, 1], true)]
    );
    admit_and_start(&mut manager, &big, TopologyHint::new(mask(&[0, 1]), true));
    assert_eq!(manager.container_numa_nodes("uid-big", "app"), Some(vec![0, 1]));
    // Node 0 is filled first: 32Gi − 1124Mi, then the rest from node 1.
    let free = manager.free();
    assert_eq!(free[&0]["memory"], bytes(0));
    assert_eq!(free[&1]["memory"], bytes(32 * GI - (40 * GI - (32 * GI - 1124 * MI))));
}

#[test]
fn vector_0008_fragmentation_leaves_a_single_node_hint_only() {
    let m = machine(&nodes(2, 32 * GI));
    let config = static_config(
        vec![reserved(0, &[("memory", GI)]), reserved(1, &[("memory", GI)])],
        &[("memory", 2 * GI)],
    );
    let mut manager = MemoryManager::start(&m, &config).expect("valid reservation");
    let x = pod("x", vec![], vec![container("app", GI, 0)]);
    admit_and_start(&mut manager, &x, TopologyHint::new(mask(&[0]), true));
    let fill_b = pod("fill-b", vec![], vec![container("app", 16 * GI, 0)]);
    admit_and_start(&mut manager, &fill_b, TopologyHint::new(mask(&[1]), true));
    manager.remove_pod("uid-x");
    let fill_a = pod("fill-a", vec![], vec![container("app", 11 * GI, 0)]);
    admit_and_start(&mut manager, &fill_a, TopologyHint::new(mask(&[0]), true));

    let want = pod("want", vec![], vec![container("app", 18 * GI, 0)]);
    assert_eq!(
        memory_hints(&manager.container_hints(&want, &want.containers[0])),
        [(vec![0], true)]
    );
    let assignments = manager.assignments();
    assert_eq!(assignments.keys().collect::<Vec<_>>(), ["uid-fill-a", "uid-fill-b"]);
    assert_eq!(assignments["uid-fill-a"]["app"], [0]);
}

#[test]
fn vector_0051_no_fitting_mask_means_no_preference_then_allocate_fails() {
    let mut manager = two_by_32gi(4 * GI);
    let hp = pod("hp", vec![], vec![container("app", 2 * GI, 3 * GI)]);
    let hints = manager.container_hints(&hp, &hp.containers[0]);
    assert_eq!(
        memory_hints(&hints),
        [(vec![0], true), (vec![1], true), (vec![0, 1], false)]
    );
    assert_eq!(hints.by_resource.get("hugepages-1Gi"), hints.by_resource.get("memory"));
    admit_and_start(&mut manager, &hp, TopologyHint::new(mask(&[0]), true));

    let hp2 = pod("hp2", vec![], vec![container("app", 2 * GI, 3 * GI)]);
    assert_eq!(
        memory_hints(&manager.container_hints(&hp2, &hp2.containers[0])),
        [(vec![1], true)]
    );
    admit_and_start(&mut manager, &hp2, TopologyHint::new(mask(&[1]), true));

    let hp3 = pod("hp3", vec![], vec![container("app", 2 * GI, 3 * GI)]);
    assert!(manager.container_hints(&hp3, &hp3.containers[0]).is_empty());
    let error = manager
        .allocate(&hp3, &hp3.containers[0], TopologyHint::new(mask(&[0]), true))
        .expect_err("1Gi of huge pages left per node");
    assert_eq!(
        error.to_string(),
        "[memorymanager] failed to find NUMA nodes to extend the current topology hint"
    );
    manager.remove_pod("uid-hp3");
    assert_eq!(manager.assignments().len(), 2);
    assert_eq!(manager.free()[&0]["hugepages-1Gi"], bytes(GI));
    assert_eq!(manager.free()[&0]["hugepages-2Mi"], bytes(0));
}

#[test]
fn vector_1112_init_container_memory_is_dropped_when_the_app_starts() {
    let m = machine(&nodes(2, 16 * GI));
    let config = static_config(vec![reserved(0, &[("memory", 1524 * MI)])], &[("memory", 1524 * MI)]);
    let mut manager = MemoryManager::start(&m, &config).expect("valid reservation");
    let p0 = pod("p0", vec![], vec![container("app", 512 * MI, 0)]);
    admit_and_start(&mut manager, &p0, TopologyHint::new(mask(&[0]), true));
    let p1 = pod("p1", vec![], vec![container("app", 1280 * MI, 0)]);
    admit_and_start(&mut manager, &p1, TopologyHint::new(mask(&[0]), true));

    let p2 = pod(
        "p2",
        vec![container("init0", 2944 * MI, 0)],
        vec![container("app", 256 * MI, 0)],
    );
    let init_hints = manager.container_hints(&p2, &p2.init_containers[0]);
    // No {0,1}: node 0 already serves single-node allocations.
    assert_eq!(memory_hints(&init_hints), [(vec![0], true), (vec![1], true)]);
    manager
        .allocate(&p2, &p2.init_containers[0], TopologyHint::new(mask(&[0]), true))
        .expect("init fits node 0");
    manager
        .allocate(&p2, &p2.containers[0], TopologyHint::new(mask(&[1]), true))
        .expect("app fits node 1");
    let node0_free_with_init = manager.free()[&0]["memory"];

    assert_eq!(manager.container_numa_nodes("uid-p2", "init0"), Some(vec![0]));
    manager.add_container(&p2, &p2.init_containers[0]);
    assert_eq!(manager.container_numa_nodes("uid-p2", "init0"), Some(vec![0]));
    assert_eq!(manager.container_numa_nodes("uid-p2", "app"), Some(vec![1]));
    manager.add_container(&p2, &p2.containers[0]);

    assert_eq!(manager.container_numa_nodes("uid-p2", "init0"), None);
    let p2_assignments: Vec<(String, Vec<usize>)> = manager.assignments()["uid-p2"].clone().into_iter().collect();
    assert_eq!(p2_assignments, [("app".to_string(), vec![1])]);
    assert_eq!(manager.free()[&0]["memory"], node0_free_with_init + bytes(2944 * MI));
    assert_eq!(
        manager.free()[&0]["memory"],
        bytes(16 * GI - 1524 * MI - 512 * MI - 1280 * MI)
    );
}

#[test]
fn topology_policy_none_allocates_on_the_default_hint() {
    let mut manager = two_by_32gi(0);
    let p = pod("p", vec![], vec![container("app", 8 * GI, 0)]);
    admit_and_start(&mut manager, &p, TopologyHint::any(false));
    assert_eq!(manager.container_numa_nodes("uid-p", "app"), Some(vec![0]));

    let too_big = pod("too-big", vec![], vec![container("app", 80 * GI, 0)]);
    let error = manager
        .allocate(&too_big, &too_big.containers[0], TopologyHint::any(false))
        .expect_err("more than the machine");
    assert_eq!(
        error.to_string(),
        "[memorymanager] failed to get the default NUMA affinity, no NUMA nodes with enough memory is available"
    );
}

#[test]
fn non_guaranteed_pods_are_not_pinned() {
    let mut manager = two_by_32gi(0);
    let mut p = pod("p", vec![], vec![container("app", GI, 0)]);
    p.qos = QosClass::Burstable;
    assert!(manager.container_hints(&p, &p.containers[0]).is_empty());
    assert!(manager.pod_hints(&p).is_empty());
    admit_and_start(&mut manager, &p, TopologyHint::new(mask(&[0]), true));
    assert_eq!(manager.container_numa_nodes("uid-p", "app"), None);
    assert!(manager.assignments().is_empty());
}

#[test]
fn the_none_policy_neither_hints_nor_pins_nor_checks_reservations() {
    let m = machine(&nodes(1, 32 * GI));
    let config = MemoryManagerConfig {
        kubelet_version: topoalign_model::KubeletVersion::V1_32,
        pod_level_managers: false,
        policy: MemoryPolicyName::None,
        reserved_memory: vec![reserved(7, &[("memory", GI)])],
        node_allocatable_reservation: resources(&[("memory", 100 * MI)]),
    };
    let mut manager = MemoryManager::start(&m, &config).expect("None checks nothing");
    let p = pod("p", vec![], vec![container("app", GI, 0)]);
    assert!(manager.container_hints(&p, &p.containers[0]).is_empty());
    assert!(manager.pod_hints(&p).is_empty());
    admit_and_start(&mut manager, &p, TopologyHint::new(mask(&[0]), true));
    assert_eq!(manager.container_numa_nodes("uid-p", "app"), None);
    assert!(manager.free().is_empty());
}

fn start_error(m: &Machine, config: &MemoryManagerConfig) -> String {
    match MemoryManager::start(m, config) {
        Err(MemoryManagerStartError::Kubelet(text)) => text,
        Ok(_) => panic!("expected a start-up error"),
    }
}

#[test]
fn start_up_checks_run_in_the_kubelet_order_with_its_texts() {
    let m = machine(&nodes(2, 32 * GI));
    let mismatch = |reserved: &str, resource: &str, node_allocatable: &str| {
        format!(
            "the total amount \"{reserved}\" of type \"{resource}\" is not equal to the value \"{node_allocatable}\" determined by Node Allocatable feature"
        )
    };
    /// reservedMemory, node-allocatable reservation, expected text.
    type Case = (Vec<ReservedMemory>, Vec<(&'static str, u64)>, String);
    let cases: Vec<Case> = vec![
        // 0041: a NUMA node the machine lacks, reported before any sum.
        (
            vec![reserved(5, &[("memory", 1124 * MI)]), reserved(9, &[("memory", GI)])],
            vec![("memory", 100 * MI)],
            "the reserved memory configuration references a NUMA node 5 that does not exist on this machine"
                .to_string(),
        ),
        // 0030: systemReserved 1Gi + eviction 100Mi, only 1Gi reserved.
        (
            vec![reserved(0, &[("memory", GI)])],
            vec![("memory", 1124 * MI)],
            mismatch("1Gi", "memory", "1124Mi"),
        ),
        // 0031: nothing reserved at all.
        (vec![], vec![("memory", 1124 * MI)], mismatch("0", "memory", "1124Mi")),
        // 1174: 4 × 768Mi printed canonically.
        (
            (0..2)
                .flat_map(|n| {
                    [
                        reserved(n, &[("memory", 768 * MI)]),
                        reserved(n, &[("memory", 768 * MI)]),
                    ]
                })
                .collect(),
            vec![("memory", 2 * GI)],
            mismatch("3Gi", "memory", "2Gi"),
        ),
        // Huge pages must match too; cpu in the node reservation is not a
        // memory type and is ignored.
        (
            vec![
                reserved(0, &[("memory", GI)]),
                reserved(1, &[("memory", GI), ("hugepages-1Gi", GI)]),
            ],
            vec![("cpu", 1), ("memory", 2 * GI)],
            mismatch("1Gi", "hugepages-1Gi", "0"),
        ),
        // Sums match but no regular memory is reserved anywhere.
        (
            vec![reserved(0, &[("hugepages-1Gi", GI)])],
            vec![("hugepages-1Gi", GI)],
            "[memorymanager] you should specify the system reserved memory".to_string(),
        ),
        (
            vec![],
            vec![],
            "[memorymanager] you should specify the system reserved memory".to_string(),
        ),
    ];
    for (reserved_memory, node_allocatable, expected) in cases {
        let config = static_config(reserved_memory, &node_allocatable);
        assert_eq!(start_error(&m, &config), expected);
    }
}

#[test]
fn the_sum_prints_in_the_notation_of_the_last_reservation_added() {
    // Go adds the running total to each new amount: `new.Add(total)`.
    let m = machine(&nodes(2, 32 * GI));
    let decimal = ReservedMemory {
        numa_node: 1,
        limits: [("memory".to_string(), bytes(GI))].into_iter().collect(),
    };
    let config = static_config(vec![reserved(0, &[("memory", GI)]), decimal], &[("memory", GI)]);
    assert_eq!(
        start_error(&m, &config),
        "the total amount \"2147483648\" of type \"memory\" is not equal to the value \"1Gi\" determined by Node Allocatable feature"
    );
}

#[test]
fn reservations_on_several_nodes_add_up() {
    let m = machine(&nodes(4, 256 * GI));
    let four = (0..4).map(|n| reserved(n, &[("memory", 768 * MI)])).collect::<Vec<_>>();
    let manager = MemoryManager::start(&m, &static_config(four, &[("memory", 3 * GI)])).expect("sums match");
    assert_eq!(manager.free()[&3]["memory"], bytes(256 * GI - 768 * MI));
}

/// A node reserving more than it has starts, as in the kubelet (whose
/// `uint64` arithmetic wraps), and is named as an overrun for a warning.
#[test]
fn reservations_larger_than_their_node_start_and_are_named_as_overruns() {
    // (machine, reservedMemory, the overruns expected: (node, resource,
    // reserved, available)).
    type Case = (
        UniformMachine,
        Vec<ReservedMemory>,
        Vec<(usize, &'static str, u64, u64)>,
    );
    let cases: Vec<Case> = vec![
        // Fits: memory net of the pools is 30Gi.
        (
            nodes(1, 32 * GI).hugepages_per_numa(GI, 2 * GI),
            vec![reserved(0, &[("memory", GI)])],
            vec![],
        ),
        // A node without memory.
        (
            nodes(2, 32 * GI).memory_on(1, 0),
            vec![reserved(0, &[("memory", GI)]), reserved(1, &[("memory", GI)])],
            vec![(1, "memory", GI, 0)],
        ),
        // Memory that the huge page pools take.
        (
            nodes(1, 4 * GI).hugepages_per_numa(GI, 4 * GI),
            vec![reserved(0, &[("memory", GI)])],
            vec![(0, "memory", GI, 0)],
        ),
        // More huge pages reserved than the pool holds, and a page size the
        // node has no pool of.
        (
            nodes(1, 32 * GI).hugepages_per_numa(GI, GI),
            vec![reserved(
                0,
                &[("memory", GI), ("hugepages-1Gi", 2 * GI), ("hugepages-2Mi", 4 * MI)],
            )],
            vec![(0, "hugepages-1Gi", 2 * GI, GI), (0, "hugepages-2Mi", 4 * MI, 0)],
        ),
    ];
    for (shape, reserved_memory, expected) in cases {
        let m = machine(&shape);
        let totals: BTreeMap<String, u64> =
            reserved_memory
                .iter()
                .flat_map(|r| &r.limits)
                .fold(BTreeMap::new(), |mut totals, (name, amount)| {
                    *totals.entry(name.clone()).or_default() += amount.value() as u64;
                    totals
                });
        let node_allocatable: Vec<(&str, u64)> = totals.iter().map(|(name, &n)| (name.as_str(), n)).collect();
        let config = static_config(reserved_memory, &node_allocatable);
        assert!(
            MemoryManager::start(&m, &config).is_ok(),
            "the kubelet starts: {shape:?}"
        );
        let found = topoalign_memory_manager::reservation_overruns(&m, &config);
        let overruns: Vec<(usize, &str, u64, u64)> = found
            .iter()
            .map(|o| (o.node, o.resource.as_str(), o.reserved, o.available))
            .collect();
        assert_eq!(overruns, expected, "{shape:?}");
    }
    // The None policy has no table to wrap.
    let m = machine(&nodes(1, 0));
    let mut config = static_config(vec![reserved(0, &[("memory", GI)])], &[("memory", GI)]);
    config.policy = MemoryPolicyName::None;
    assert!(topoalign_memory_manager::reservation_overruns(&m, &config).is_empty());
}
