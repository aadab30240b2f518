//! The manager end to end: start-up refusals with the kubelet's texts, and
//! hand-checked conformance vectors (CPU part only; the affinity passed in
//! is the one the topology manager chose in the vector).

use topoalign_model::{Cpu, NumaMask, NumaNode, QosClass, ResourceHints, UniformMachine};

use super::*;

/// Two NUMA nodes = two sockets of 4 cores, siblings N and N+8 (the
/// machine of vectors 0050 and 0001).
pub(crate) fn two_node_ht() -> Machine {
    UniformMachine::new(2, 4)
        .threads_per_core(2)
        .sockets(2)
        .memory_per_numa(32 << 30)
        .build()
        .unwrap()
}

/// A machine of `cpus` CPUs where `f(cpu)` gives (core, socket, NUMA node,
/// uncore cache), 32Gi per NUMA node: numberings [`UniformMachine`] does
/// not make.
pub(crate) fn machine_from(cpus: u32, f: impl Fn(u32) -> (u32, u32, usize, Option<u32>)) -> Machine {
    let cpus: Vec<Cpu> = (0..cpus)
        .map(|id| {
            let (core, socket, numa, uncore_cache) = f(id);
            Cpu {
                id,
                core,
                socket,
                numa,
                uncore_cache,
            }
        })
        .collect();
    let max_numa = cpus.iter().map(|c| c.numa).max().unwrap_or(0);
    let nodes = (0..=max_numa)
        .map(|id| NumaNode {
            id,
            memory: 32 << 30,
            hugepages: BTreeMap::new(),
            distances: None,
        })
        .collect();
    Machine::new(nodes, cpus, BTreeMap::new()).unwrap()
}

fn config(policy: CpuPolicyName, options: &[(&str, &str)]) -> CpuManagerConfig {
    CpuManagerConfig {
        policy,
        options: options.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        reserved_system_cpus: None,
        reserved_cpu: Some(Quantity::from_units(1)),
        feature_gates: FeatureGates {
            cpu_manager_policy_alpha_options: true,
            ..FeatureGates::default()
        },
        kubelet_version: topoalign_model::KubeletVersion::V1_32,
        topology_policy_is_single_numa_node: false,
    }
}

fn static_config() -> CpuManagerConfig {
    config(CpuPolicyName::Static, &[])
}

fn with_reserved(mut config: CpuManagerConfig, cpus: &str) -> CpuManagerConfig {
    let set = CpuSet::parse(cpus).unwrap();
    config.reserved_cpu = Some(Quantity::from_units(set.len() as i128));
    config.reserved_system_cpus = Some(set);
    config
}

fn container(name: &str, cpu_milli: i128) -> Container {
    let requests: topoalign_model::ResourceList = [("cpu".to_string(), Quantity::from_milli(cpu_milli))]
        .into_iter()
        .collect();
    Container {
        name: name.to_string(),
        limits: requests.clone(),
        requests,
        restartable: false,
    }
}

fn sidecar(name: &str, cpu_milli: i128) -> Container {
    Container {
        restartable: true,
        ..container(name, cpu_milli)
    }
}

fn pod(uid: &str, init: Vec<Container>, apps: Vec<Container>) -> Pod {
    Pod {
        namespace: "default".to_string(),
        name: uid.to_string(),
        uid: uid.to_string(),
        qos: QosClass::Guaranteed,
        init_containers: init,
        containers: apps,
        overhead: Default::default(),
        pod_resources: None,
    }
}

fn app_pod(uid: &str, cpus: i128) -> Pod {
    pod(uid, vec![], vec![container("app", cpus * 1000)])
}

fn start_error(machine: &Machine, config: &CpuManagerConfig) -> String {
    CpuManager::start(machine, config).unwrap_err().to_string()
}

fn any() -> TopologyHint {
    TopologyHint::any(false)
}

fn on(nodes: &[usize]) -> TopologyHint {
    TopologyHint::new(NumaMask::from_nodes(nodes.iter().copied()), true)
}

fn cpus_of(manager: &CpuManager, uid: &str, name: &str) -> String {
    manager
        .container_cpus(uid, name)
        .map_or_else(|| "none".to_string(), |c| c.to_string())
}

#[test]
fn start_refusals_use_the_kubelet_texts() {
    let m = two_node_ht();
    assert_eq!(
        start_error(&m, &config(CpuPolicyName::None, &[("full-pcpus-only", "true")])),
        "new none policy error: None policy: received unsupported options=map[full-pcpus-only:true]"
    );
    assert_eq!(
        start_error(&m, &config(CpuPolicyName::None, &[("b", "2"), ("a", "1")])),
        "new none policy error: None policy: received unsupported options=map[a:1 b:2]"
    );
    let mut no_reservation = static_config();
    no_reservation.reserved_cpu = None;
    assert_eq!(
        start_error(&m, &no_reservation),
        "[cpumanager] unable to determine reserved CPU resources for static policy"
    );
    let mut zero = static_config();
    zero.reserved_cpu = Some(Quantity::ZERO);
    assert_eq!(
        start_error(&m, &zero),
        "[cpumanager] the static policy requires systemreserved.cpu + kubereserved.cpu to be greater than zero"
    );
    let mut gated = config(CpuPolicyName::Static, &[("align-by-socket", "true")]);
    gated.feature_gates = FeatureGates::default();
    assert_eq!(
        start_error(&m, &gated),
        "new static policy error: CPU Manager Policy Alpha-level Options not enabled, but option \"align-by-socket\" provided"
    );
    let mut single_numa = config(CpuPolicyName::Static, &[("align-by-socket", "true")]);
    single_numa.topology_policy_is_single_numa_node = true;
    assert_eq!(
        start_error(&m, &single_numa),
        "new static policy error: Topolgy manager single-numa-node policy is incompatible with CPUManager align-by-socket policy option"
    );
    let mut mismatch = with_reserved(static_config(), "0-1");
    mismatch.reserved_cpu = Some(Quantity::from_units(3));
    assert_eq!(
        start_error(&m, &mismatch),
        "new static policy error: [cpumanager] unable to reserve the required amount of CPUs (size of 0-1 did not equal 3)"
    );
    let mut too_many = static_config();
    too_many.reserved_cpu = Some(Quantity::from_units(20));
    assert_eq!(
        start_error(&m, &too_many),
        "new static policy error: [cpumanager] unable to reserve the required amount of CPUs (size of  did not equal 20)"
    );
}

#[test]
fn the_none_policy_keeps_an_empty_state() {
    let mut manager = CpuManager::start(&two_node_ht(), &config(CpuPolicyName::None, &[])).unwrap();
    let p = app_pod("p", 4);
    assert!(manager.container_hints(&p, &p.containers[0]).is_empty());
    assert!(manager.pod_hints(&p).is_empty());
    manager.allocate(&p, &p.containers[0], any()).unwrap();
    assert_eq!(manager.default_cpu_set(), CpuSet::new());
    assert_eq!(manager.container_cpus("p", "app"), None);
    assert!(manager.assignments().is_empty());
    assert!(manager.topology().is_none());
}

#[test]
fn reservation_is_rounded_up_and_taken_by_topology() {
    let mut config = static_config();
    config.reserved_cpu = Some(Quantity::from_milli(1500));
    let mut manager = CpuManager::start(&two_node_ht(), &config).unwrap();
    assert_eq!(
        manager.default_cpu_set().to_string(),
        "0-15",
        "reserved CPUs stay in the shared pool"
    );
    // Two CPUs are reserved: the first whole core, 0 and 8.
    let all = app_pod("all", 14);
    manager.allocate(&all, &all.containers[0], any()).unwrap();
    assert_eq!(cpus_of(&manager, "all", "app"), "1-7,9-15");
    let one = app_pod("one", 1);
    assert_eq!(
        manager.allocate(&one, &one.containers[0], any()),
        Err(CpuAllocateError::Other(
            "not enough cpus available to satisfy request: requested=1, available=0".to_string()
        ))
    );
}

#[test]
fn strict_reservation_takes_reserved_cpus_out_of_the_shared_pool() {
    let config = with_reserved(
        config(CpuPolicyName::Static, &[("strict-cpu-reservation", "true")]),
        "0,8",
    );
    let mut manager = CpuManager::start(&two_node_ht(), &config).unwrap();
    assert_eq!(manager.default_cpu_set().to_string(), "1-7,9-15");
    let p = app_pod("p", 2);
    manager.allocate(&p, &p.containers[0], any()).unwrap();
    assert_eq!(cpus_of(&manager, "p", "app"), "1,9");
    manager.remove_pod("p");
    assert_eq!(manager.default_cpu_set().to_string(), "1-7,9-15");
}

/// Vector 0050: `full-pcpus-only` on SMT, CPUs 0 and 8 reserved.
#[test]
fn vector_0050_full_pcpus_only() {
    let config = with_reserved(config(CpuPolicyName::Static, &[("full-pcpus-only", "true")]), "0,8");
    let mut manager = CpuManager::start(&two_node_ht(), &config).unwrap();
    let odd = app_pod("odd", 3);
    assert_eq!(
        manager.allocate(&odd, &odd.containers[0], on(&[0])),
        Err(CpuAllocateError::SmtAlignment(
            "SMT Alignment Error: requested 3 cpus not multiple cpus per core = 2".to_string()
        ))
    );
    manager.remove_pod("odd");
    let even = app_pod("even", 4);
    let hints = manager.container_hints(&even, &even.containers[0]);
    assert_eq!(
        hints,
        ProviderHints::single(
            "cpu",
            ResourceHints::Hints(vec![
                TopologyHint::new(NumaMask::from_nodes([0]), true),
                TopologyHint::new(NumaMask::from_nodes([1]), true),
                TopologyHint::new(NumaMask::from_nodes([0, 1]), false),
            ])
        )
    );
    manager.allocate(&even, &even.containers[0], on(&[0])).unwrap();
    assert_eq!(cpus_of(&manager, "even", "app"), "1-2,9-10");
    assert_eq!(manager.default_cpu_set().to_string(), "0,3-8,11-15");
}

#[test]
fn full_pcpus_only_counts_reserved_siblings_as_taken() {
    // Only CPU 0 is reserved, but its sibling 8 cannot be part of a whole
    // free core either.
    let config = with_reserved(config(CpuPolicyName::Static, &[("full-pcpus-only", "true")]), "0");
    let mut manager = CpuManager::start(&two_node_ht(), &config).unwrap();
    let big = app_pod("big", 16);
    assert_eq!(
        manager.allocate(&big, &big.containers[0], any()),
        Err(CpuAllocateError::SmtAlignment(
            "SMT Alignment Error: not enough free physical CPUs: available physical CPUs = 14, requested CPUs = 16, CPUs per core = 2"
                .to_string()
        ))
    );
}

/// Vector 0023: two sockets of 12 cores (siblings N and N+24), CPUs 0 and
/// 24 reserved, the pod aligned to NUMA node 1 by its GPU.
#[test]
fn vector_0023_whole_cores_of_the_chosen_node() {
    let m = UniformMachine::new(2, 12)
        .threads_per_core(2)
        .sockets(2)
        .memory_per_numa(32 << 30)
        .build()
        .unwrap();
    let mut manager = CpuManager::start(&m, &with_reserved(static_config(), "0,24")).unwrap();
    let train = app_pod("train", 8);
    let hints = manager.pod_hints(&train);
    let Some(list) = hints.by_resource["cpu"].to_list() else {
        panic!("expected hints, got {hints:?}")
    };
    assert!(list.contains(&TopologyHint::new(NumaMask::from_nodes([1]), true)));
    manager.allocate(&train, &train.containers[0], on(&[1])).unwrap();
    assert_eq!(cpus_of(&manager, "train", "app"), "12-15,36-39");
    assert_eq!(manager.default_cpu_set().to_string(), "0-11,16-35,40-47");
}

/// Vector 1112: one socket, NUMA-interleaved numbering (node 0 = even
/// CPUs, siblings N and N+8), CPU 0 reserved by `systemReserved.cpu: 1`.
#[test]
fn vector_1112_numa_interleaved_numbering() {
    let m = machine_from(16, |c| {
        let numa = (c % 2) as usize;
        let core = (c % 8) / 2 + 4 * numa as u32;
        (core, 0, numa, None)
    });
    let mut manager = CpuManager::start(&m, &static_config()).unwrap();
    let p0 = app_pod("p0", 4);
    manager.allocate(&p0, &p0.containers[0], on(&[0])).unwrap();
    assert_eq!(cpus_of(&manager, "p0", "app"), "2,4,10,12");
    let p1 = app_pod("p1", 2);
    manager.allocate(&p1, &p1.containers[0], on(&[0])).unwrap();
    assert_eq!(cpus_of(&manager, "p1", "app"), "6,14");
    let p2 = pod("p2", vec![container("init0", 500)], vec![container("app", 4000)]);
    assert!(
        manager.container_hints(&p2, &p2.init_containers[0]).is_empty(),
        "500m is not exclusive"
    );
    manager.allocate(&p2, &p2.init_containers[0], on(&[0])).unwrap();
    assert_eq!(cpus_of(&manager, "p2", "init0"), "none");
    let hints = manager.container_hints(&p2, &p2.containers[0]);
    assert_eq!(
        hints.by_resource["cpu"],
        ResourceHints::Hints(vec![
            TopologyHint::new(NumaMask::from_nodes([1]), true),
            TopologyHint::new(NumaMask::from_nodes([0, 1]), false),
        ])
    );
    manager.allocate(&p2, &p2.containers[0], on(&[1])).unwrap();
    assert_eq!(cpus_of(&manager, "p2", "app"), "1,3,9,11");
    assert_eq!(manager.default_cpu_set().to_string(), "0,5,7-8,13,15");
}

#[test]
fn app_containers_reuse_init_container_cpus() {
    let mut manager = CpuManager::start(&two_node_ht(), &static_config()).unwrap();
    let p = pod("p", vec![container("init", 4000)], vec![container("app", 2000)]);
    assert_eq!(
        manager.pod_hints(&p).by_resource["cpu"],
        ResourceHints::Hints(vec![
            TopologyHint::new(NumaMask::from_nodes([0]), true),
            TopologyHint::new(NumaMask::from_nodes([1]), true),
            TopologyHint::new(NumaMask::from_nodes([0, 1]), false),
        ]),
        "the pod needs max(init 4, apps 2) CPUs"
    );
    manager.allocate(&p, &p.init_containers[0], any()).unwrap();
    assert_eq!(cpus_of(&manager, "p", "init"), "1-2,9-10");
    // The app's hints must include the init container's CPUs, all on node 0.
    assert_eq!(
        manager.container_hints(&p, &p.containers[0]).by_resource["cpu"],
        ResourceHints::Hints(vec![
            TopologyHint::new(NumaMask::from_nodes([0]), true),
            TopologyHint::new(NumaMask::from_nodes([0, 1]), false),
        ])
    );
    manager.allocate(&p, &p.containers[0], any()).unwrap();
    assert_eq!(
        cpus_of(&manager, "p", "app"),
        "1,9",
        "taken again from the init container"
    );
    assert_eq!(cpus_of(&manager, "p", "init"), "1-2,9-10", "kept until the pod goes");
    assert_eq!(manager.default_cpu_set().to_string(), "0,3-8,11-15");
    manager.remove_pod("p");
    assert_eq!(manager.default_cpu_set().to_string(), "0-15");
    assert!(manager.assignments().is_empty());
}

#[test]
fn sidecars_keep_their_cpus() {
    let mut manager = CpuManager::start(&two_node_ht(), &static_config()).unwrap();
    let p = pod("p", vec![sidecar("proxy", 2000)], vec![container("app", 2000)]);
    manager.allocate(&p, &p.init_containers[0], any()).unwrap();
    manager.allocate(&p, &p.containers[0], any()).unwrap();
    assert_eq!(cpus_of(&manager, "p", "proxy"), "1,9");
    assert_eq!(cpus_of(&manager, "p", "app"), "2,10");
}

#[test]
fn pod_cpus_count_sidecars_with_everything_after_them() {
    let p = pod(
        "p",
        vec![sidecar("proxy", 2000), container("setup", 3000)],
        vec![container("app", 2000)],
    );
    assert_eq!(
        policy_static::pod_guaranteed_cpus(&p),
        5,
        "sidecar 2 + setup 3 beats sidecar 2 + app 2"
    );
    let mut burstable = app_pod("b", 4);
    burstable.qos = QosClass::Burstable;
    assert_eq!(policy_static::pod_guaranteed_cpus(&burstable), 0);
    let fractional = pod("f", vec![], vec![container("app", 3500)]);
    assert_eq!(policy_static::pod_guaranteed_cpus(&fractional), 0);
}

/// `isIntegralCPUAmount` and `int(Value())` in Go's wrapped `int64`
/// (issue #29): each quantity built in the form Go's `ParseQuantity` gives
/// the text beside it, the expected answers printed by a Go program with
/// k8s.io/apimachinery v0.37.2 (`Value()*1000 == MilliValue()`, `Value()`).
#[test]
fn exclusive_cpus_of_huge_requests_wrap_as_go_counts_them() {
    use topoalign_model::{GoForm, Quantity};
    let dec = GoForm::Dec { scale: 9 };
    let table: [(&str, Quantity, i64); 10] = [
        // inf.Dec, capped at 2^63-1: both sides wrap to -1000.
        (
            "9Ei",
            Quantity::from_nano(i128::from(i64::MAX) * 1_000_000_000, dec),
            i64::MAX,
        ),
        (
            "10000000000000000000",
            Quantity::from_scaled_nano(1, 28, dec),
            -8_446_744_073_709_551_616,
        ),
        (
            "18446744073709551616",
            Quantity::from_nano(18_446_744_073_709_551_616_000_000_000, dec),
            0,
        ),
        (
            "1e19",
            Quantity::from_scaled_nano(1, 28, GoForm::Int64 { scale: 19 }),
            0,
        ),
        (
            "1e40",
            Quantity::from_scaled_nano(1, 49, GoForm::Int64 { scale: 40 }),
            0,
        ),
        (
            "98765432109876543210987654321",
            Quantity::from_scaled_nano(98_765_432_109_876_543_210_987_654_321, 9, dec),
            -2_078_932_182_037_327,
        ),
        // MilliValue() 8, Value() 0: not integral.
        (
            "8e2147483647",
            Quantity::from_scaled_nano(8, 2_147_483_656, GoForm::Int64 { scale: 2_147_483_647 }),
            0,
        ),
        ("1500m", Quantity::from_milli(1500), 0),
        ("2", Quantity::from_units(2), 2),
        (
            "0.9995",
            Quantity::from_scaled_nano(9995, 5, GoForm::Int64 { scale: -4 }),
            1,
        ),
    ];
    for (text, quantity, expected) in table {
        assert_eq!(policy_static::integral_cpus(quantity), expected, "{text}");
    }
    // Go's int sums wrap: two containers of 2^63-1 CPUs need -2, less
    // than no init container's 0, so `podGuaranteedCPUs` says 0; with a
    // third of 3 CPUs, 1.
    let mut huge = container("a", 1000);
    huge.requests.insert("cpu".to_owned(), table[0].1);
    let mut other = huge.clone();
    other.name = "b".to_owned();
    let p = pod("p", vec![], vec![huge.clone(), other.clone()]);
    assert_eq!(policy_static::pod_guaranteed_cpus(&p), 0);
    let p = pod("p", vec![], vec![huge, other, container("c", 3000)]);
    assert_eq!(policy_static::pod_guaranteed_cpus(&p), 1);
}

#[test]
fn allocated_containers_get_hints_for_what_they_hold() {
    let mut manager = CpuManager::start(&two_node_ht(), &static_config()).unwrap();
    let p = app_pod("p", 2);
    manager.allocate(&p, &p.containers[0], on(&[1])).unwrap();
    assert_eq!(cpus_of(&manager, "p", "app"), "4,12");
    assert_eq!(
        manager.container_hints(&p, &p.containers[0]).by_resource["cpu"],
        ResourceHints::Hints(vec![
            TopologyHint::new(NumaMask::from_nodes([1]), true),
            TopologyHint::new(NumaMask::from_nodes([0, 1]), false),
        ])
    );
    let resized = app_pod("p", 4);
    assert_eq!(
        manager.container_hints(&resized, &resized.containers[0]).by_resource["cpu"],
        ResourceHints::Impossible
    );
    // Allocating again keeps the existing CPUs.
    manager.allocate(&p, &p.containers[0], on(&[0])).unwrap();
    assert_eq!(cpus_of(&manager, "p", "app"), "4,12");
}

#[test]
fn a_request_no_mask_can_hold_is_impossible() {
    let mut manager = CpuManager::start(&two_node_ht(), &static_config()).unwrap();
    let p = app_pod("p", 16);
    assert_eq!(
        manager.container_hints(&p, &p.containers[0]),
        ProviderHints::single("cpu", ResourceHints::Impossible)
    );
}

#[test]
fn affinity_first_then_the_rest() {
    let mut manager = CpuManager::start(&two_node_ht(), &with_reserved(static_config(), "0,8")).unwrap();
    let p = app_pod("p", 10);
    manager.allocate(&p, &p.containers[0], on(&[0])).unwrap();
    // All six free CPUs of node 0, then two whole cores of node 1.
    assert_eq!(cpus_of(&manager, "p", "app"), "1-5,9-13");
}

#[test]
fn align_by_socket_widens_the_affinity_to_sockets() {
    // One socket holding both NUMA nodes (node 0 = CPUs 0-3, 8-11).
    let m = UniformMachine::new(2, 4)
        .threads_per_core(2)
        .memory_per_numa(32 << 30)
        .build()
        .unwrap();
    let p = app_pod("p", 8);
    let by_numa = with_reserved(static_config(), "0,8");
    let mut manager = CpuManager::start(&m, &by_numa).unwrap();
    manager.allocate(&p, &p.containers[0], on(&[0])).unwrap();
    assert_eq!(cpus_of(&manager, "p", "app"), "1-4,9-12", "node 0 first, then the rest");
    let by_socket = with_reserved(config(CpuPolicyName::Static, &[("align-by-socket", "true")]), "0,8");
    let mut manager = CpuManager::start(&m, &by_socket).unwrap();
    manager.allocate(&p, &p.containers[0], on(&[0])).unwrap();
    assert_eq!(
        cpus_of(&manager, "p", "app"),
        "4-7,12-15",
        "the whole socket: free node 1 fits"
    );
}

mod invariants {
    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    enum Op {
        /// A pod: init container CPUs (0 = none), app container CPUs, and
        /// the NUMA affinity (none, node 0 or node 1).
        Add {
            init: i128,
            apps: Vec<i128>,
            affinity: u8,
        },
        Remove(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0i128..4, proptest::collection::vec(1i128..7, 1..3), 0u8..3)
                .prop_map(|(init, apps, affinity)| Op::Add { init, apps, affinity }),
            1 => (0usize..8).prop_map(Op::Remove),
        ]
    }

    fn options() -> impl Strategy<Value = Vec<(&'static str, &'static str)>> {
        prop_oneof![
            Just(vec![]),
            Just(vec![("full-pcpus-only", "true")]),
            Just(vec![("distribute-cpus-across-numa", "true")]),
            Just(vec![("distribute-cpus-across-cores", "true")]),
            Just(vec![("prefer-align-cpus-by-uncorecache", "true")]),
            Just(vec![("strict-cpu-reservation", "true")]),
        ]
    }

    proptest! {
        /// No CPU is ever held by two pods or by a pod and the shared pool,
        /// nothing is lost, and releasing every pod restores the start.
        #[test]
        fn cpus_are_never_shared_or_lost(options in options(), ops in proptest::collection::vec(op(), 1..25)) {
            let mut manager = CpuManager::start(&two_node_ht(), &config(CpuPolicyName::Static, &options)).unwrap();
            let initial = manager.default_cpu_set();
            let mut live: Vec<String> = Vec::new();
            for (i, op) in ops.into_iter().enumerate() {
                match op {
                    Op::Add { init, apps, affinity } => {
                        let uid = format!("p{i}");
                        let inits = if init > 0 { vec![container("init", init * 1000)] } else { vec![] };
                        let apps = apps.iter().enumerate().map(|(j, c)| container(&format!("app{j}"), c * 1000)).collect();
                        let p = pod(&uid, inits, apps);
                        let hint = match affinity { 0 => super::any(), n => on(&[usize::from(n - 1)]) };
                        let ok = p.all_containers().all(|(c, _)| manager.allocate(&p, c, hint).is_ok());
                        if ok { live.push(uid) } else { manager.remove_pod(&uid) }
                    }
                    Op::Remove(n) if !live.is_empty() => {
                        let uid = live.remove(n % live.len());
                        manager.remove_pod(&uid);
                    }
                    Op::Remove(_) => {}
                }
                let shared = manager.default_cpu_set();
                let mut held = CpuSet::new();
                for (uid, containers) in manager.assignments() {
                    prop_assert!(live.contains(&uid));
                    let pod_cpus = containers.values().fold(CpuSet::new(), |acc, c| acc.union(c));
                    prop_assert_eq!(pod_cpus.intersection_len(&held), 0, "two pods share a CPU");
                    prop_assert_eq!(pod_cpus.intersection_len(&shared), 0, "exclusive CPU in the shared pool");
                    held = held.union(&pod_cpus);
                }
                prop_assert_eq!(held.union(&shared), initial.clone(), "a CPU went missing");
            }
            for uid in live {
                manager.remove_pod(&uid);
            }
            prop_assert_eq!(manager.default_cpu_set(), initial);
        }
    }
}
