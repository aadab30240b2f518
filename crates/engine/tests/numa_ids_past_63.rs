//! A node on a machine with NUMA ids past 63 (numbered anew by
//! `Machine::with_numa_labels`): where the kubelet crashes, the decision
//! says so (`Decision::kubelet_panic`) and is not an admission; elsewhere
//! it decides on the indices. What the real kubelet does is in
//! docs/kubelet-versions.md ("NUMA node ids of 64 or more") and the
//! `hand-numa-id-64-*` vectors.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use topoalign_engine::{
    CpuPolicyName, KubeletPanic, MemoryPolicyName, Node, NodeConfig, PanicSite, Provider, RejectionStage,
    ReservedMemory, TopologyPolicyName,
};
use topoalign_model::{Container, KubeletVersion, Machine, Pod, QosClass, Quantity, UniformMachine};

/// NUMA nodes `ids`, 4 CPUs and 4Gi each.
fn machine(ids: [usize; 2]) -> Machine {
    uniform(&ids).build().unwrap()
}

/// NUMA nodes `ids` (in id order), 4 CPUs of their own socket and 4Gi
/// each.
fn uniform(ids: &[usize]) -> UniformMachine {
    UniformMachine::new(ids.len(), 4)
        .sockets(ids.len())
        .memory_per_numa(4 << 30)
        .numa_ids(ids.iter().copied())
}

/// 72 NUMA nodes, ids 0-71, a GPU on every NUMA node from 60 on (the
/// first ones past the masks).
fn wide_machine() -> Machine {
    let ids: Vec<usize> = (0..72).collect();
    (60..72)
        .fold(uniform(&ids), |machine, numa| {
            machine.device(GPU, &format!("gpu{numa}"), &[numa])
        })
        .build()
        .unwrap()
}

const GPU: &str = "example.com/gpu";

fn config(topology: TopologyPolicyName, memory: MemoryPolicyName) -> NodeConfig {
    NodeConfig {
        topology_policy: topology,
        cpu_policy: CpuPolicyName::Static,
        reserved_system_cpus: Some([0u32].into_iter().collect()),
        system_reserved: [("cpu".to_owned(), Quantity::from_units(1))].into_iter().collect(),
        memory_policy: memory,
        reserved_memory: vec![ReservedMemory {
            // The configuration names the machine's own id.
            numa_node: 64,
            limits: [("memory".to_owned(), Quantity::from_units(100 << 20))]
                .into_iter()
                .collect(),
        }],
        hard_eviction: [("memory".to_owned(), Quantity::from_units(100 << 20))]
            .into_iter()
            .collect(),
        kubelet_version: KubeletVersion::V1_35,
        ..NodeConfig::default()
    }
}

fn guaranteed(name: &str, cpus: i64) -> Pod {
    let resources: topoalign_model::ResourceList = [
        ("cpu".to_owned(), Quantity::from_units(cpus.into())),
        ("memory".to_owned(), Quantity::from_units(1 << 30)),
    ]
    .into_iter()
    .collect();
    Pod {
        namespace: "default".into(),
        name: name.to_owned(),
        uid: name.to_owned(),
        qos: QosClass::Guaranteed,
        init_containers: Vec::new(),
        containers: vec![Container {
            name: "app".into(),
            requests: resources.clone(),
            limits: resources,
            restartable: false,
        }],
        overhead: Default::default(),
        pod_resources: None,
    }
}

#[test]
fn the_static_memory_manager_s_default_hint_is_where_the_kubelet_crashes() {
    let mut node = Node::start(
        machine([0, 64]),
        config(TopologyPolicyName::None, MemoryPolicyName::Static),
    )
    .unwrap();
    let decision = node.admit(guaranteed("g", 2));
    assert_eq!(
        decision.kubelet_panic,
        Some(KubeletPanic {
            release: KubeletVersion::V1_35,
            numa_id: 64,
            site: PanicSite::MemoryDefaultHint {
                container: "app".into()
            },
        })
    );
    let rejection = decision.rejection.unwrap();
    assert_eq!(rejection.reason, KubeletPanic::REASON);
    assert_eq!(rejection.stage, RejectionStage::Allocation(Provider::Memory));
    assert!(
        rejection
            .message
            .starts_with("the v1.35 kubelet panics admitting this pod")
    );
    // Nothing stays allocated; the next decision is its own.
    assert!(node.state().cpu_assignments.is_empty());
    let mut node = Node::start(
        machine([0, 64]),
        config(TopologyPolicyName::None, MemoryPolicyName::None),
    )
    .unwrap();
    let decision = node.admit(guaranteed("g", 2));
    assert_eq!(decision.kubelet_panic, None);
    assert!(decision.admitted());
}

#[test]
fn other_policies_crash_before_any_hint() {
    for policy in [
        TopologyPolicyName::BestEffort,
        TopologyPolicyName::Restricted,
        TopologyPolicyName::SingleNumaNode,
    ] {
        let mut node = Node::start(machine([0, 64]), config(policy, MemoryPolicyName::None)).unwrap();
        let decision = node.admit(guaranteed("g", 1));
        assert_eq!(decision.kubelet_panic.unwrap().site, PanicSite::TopologyManager(policy));
        assert!(decision.trace.merges.is_empty());
        assert_eq!(decision.rejection.unwrap().stage, RejectionStage::TopologyPolicy);
    }
}

#[test]
fn machines_with_ids_below_64_never_crash() {
    for policy in [TopologyPolicyName::None, TopologyPolicyName::Restricted] {
        let mut config = config(policy, MemoryPolicyName::Static);
        config.reserved_memory[0].numa_node = 1;
        let mut node = Node::start(machine([0, 1]), config).unwrap();
        let decision = node.admit(guaranteed("g", 2));
        assert_eq!(decision.kubelet_panic, None);
        assert!(decision.admitted(), "{policy:?}: {:?}", decision.rejection);
    }
}

/// `pod` asking for `gpus` GPUs too (requests and limits).
fn with_gpus(mut pod: Pod, gpus: i64) -> Pod {
    let container = &mut pod.containers[0];
    for list in [&mut container.requests, &mut container.limits] {
        list.insert(GPU.to_owned(), Quantity::from_units(gpus.into()));
    }
    pod
}

/// `pod` made Burstable: its requests kept, its limits dropped.
fn burstable(mut pod: Pod) -> Pod {
    pod.qos = QosClass::Burstable;
    let gpus = pod.containers[0].limits.get(GPU).cloned();
    pod.containers[0].limits = gpus.map(|n| (GPU.to_owned(), n)).into_iter().collect();
    pod
}

/// More than 64 NUMA nodes: the kubelet runs them under topology policy
/// none, where no mask is built (the vectors `hand-numa-nodes-72-*` hold
/// its answers); the engine runs every manager there without building a
/// mask of a node past 63, and says where the kubelet crashes.
#[test]
fn more_than_64_nodes_run_under_none_with_every_manager() {
    for cpu in [CpuPolicyName::None, CpuPolicyName::Static] {
        for memory in [MemoryPolicyName::None, MemoryPolicyName::Static] {
            let mut config = config(TopologyPolicyName::None, memory);
            config.cpu_policy = cpu;
            if cpu == CpuPolicyName::None {
                config.reserved_system_cpus = None;
            }
            let mut node = Node::start(wide_machine(), config).unwrap();
            let label = format!("cpu {cpu:?}, memory {memory:?}");
            // Burstable and BestEffort pods never reach a mask.
            let decision = node.admit(burstable(with_gpus(guaranteed("b", 2), 3)));
            assert!(decision.admitted(), "{label}: {:?}", decision.rejection);
            let decision = node.admit(guaranteed("g", 260));
            if memory == MemoryPolicyName::Static {
                let panic = decision.kubelet_panic.expect(&label);
                assert_eq!(panic.numa_id, 64, "{label}");
                assert_eq!(
                    panic.site,
                    PanicSite::MemoryDefaultHint {
                        container: "app".into()
                    }
                );
            } else {
                assert!(decision.admitted(), "{label}: {:?}", decision.rejection);
                // Exclusive CPUs reach nodes past 63 when the static
                // policy holds them.
                let state = node.state();
                if cpu == CpuPolicyName::Static {
                    let cpus = &state.cpu_assignments["default/g"]["app"];
                    assert_eq!(cpus.len(), 260, "{label}");
                    assert!(cpus.iter().any(|id| id >= 4 * 64), "{label}: {cpus}");
                }
            }
            // The node's state survives a restart over its own snapshot.
            let snapshot = node.snapshot();
            let pods = node.pods().len();
            let (restarted, decisions) = node.restarted(snapshot).unwrap();
            assert_eq!(restarted.pods().len(), pods, "{label}");
            assert!(decisions.iter().all(|d| d.admitted()), "{label}");
        }
    }
}

#[test]
fn more_than_64_nodes_under_other_policies_refuse_to_start_or_crash() {
    for policy in [
        TopologyPolicyName::BestEffort,
        TopologyPolicyName::Restricted,
        TopologyPolicyName::SingleNumaNode,
    ] {
        let error = Node::start(wide_machine(), config(policy, MemoryPolicyName::None)).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("unsupported on machines with more than 8 NUMA Nodes"),
            "{error}"
        );
        let mut config = config(policy, MemoryPolicyName::None);
        config
            .topology_options
            .insert("max-allowable-numa-nodes".into(), "100".into());
        let mut node = Node::start(wide_machine(), config).unwrap();
        let decision = node.admit(guaranteed("g", 1));
        assert_eq!(decision.kubelet_panic.unwrap().site, PanicSite::TopologyManager(policy));
        assert!(decision.trace.merges.is_empty());
    }
}

/// Devices inferred for running pods without the device manager's record
/// (diagnose without `kubelet_internal_checkpoint`): under topology policy
/// none the kubelet allocates with no affinity, so the inference does too
/// and finds the devices the node itself allocated — on a wide machine
/// without building a mask.
#[test]
fn devices_are_inferred_without_affinity_under_none() {
    // Two nodes: the GPUs first in id order are on node 1, the pod's CPUs
    // on node 0 (aligning the GPUs to them would take gpu-c and gpu-d).
    let small = uniform(&[0, 1])
        .device(GPU, "gpu-a", &[1])
        .device(GPU, "gpu-b", &[1])
        .device(GPU, "gpu-c", &[0])
        .device(GPU, "gpu-d", &[0])
        .build()
        .unwrap();
    // 72 nodes: a first pod fills nodes 0-63 (CPU 0 is reserved), so the
    // GPU pod's CPUs are on node 64.
    for (machine, filler) in [(small, None), (wide_machine(), Some(255))] {
        let mut config = config(TopologyPolicyName::None, MemoryPolicyName::None);
        config.reserved_memory.clear();
        config.hard_eviction.clear();
        let mut node = Node::start(machine.clone(), config.clone()).unwrap();
        if let Some(cpus) = filler {
            assert!(node.admit(guaranteed("filler", cpus)).admitted());
        }
        assert!(node.admit(with_gpus(guaranteed("g", 2), 2)).admitted());
        let held = node.devices_in_use();
        let mut snapshot = node.snapshot();
        snapshot.devices = Default::default();
        let mut restored = Node::start(machine, config).unwrap().restored(snapshot).unwrap();
        assert!(
            restored.devices_in_use().values().all(Vec::is_empty),
            "{:?}",
            restored.devices_in_use()
        );
        assert_eq!(restored.infer_device_assignments(), Vec::<String>::new());
        assert_eq!(restored.devices_in_use(), held);
    }
}
