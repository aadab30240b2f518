//! A node on a machine with NUMA ids past 63 (numbered anew by
//! `Machine::with_numa_labels`): where the kubelet crashes, the decision
//! says so (`Decision::kubelet_panic`) and is not an admission; elsewhere
//! it decides on the indices. What the real kubelet does is in
//! docs/kubelet-versions.md ("NUMA node ids of 64 or more") and the
//! `hand-numa-id-64-*` vectors.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::collections::BTreeMap;

use topoalign_engine::{
    CpuPolicyName, KubeletPanic, MemoryPolicyName, Node, NodeConfig, PanicSite, Provider, RejectionStage,
    ReservedMemory, TopologyPolicyName,
};
use topoalign_model::{Container, Cpu, KubeletVersion, Machine, NumaNode, Pod, QosClass, Quantity};

/// NUMA nodes `ids`, 4 CPUs and 4Gi each.
fn machine(ids: [usize; 2]) -> Machine {
    let nodes = ids
        .iter()
        .map(|&id| NumaNode {
            id,
            memory: 4 << 30,
            hugepages: BTreeMap::new(),
            distances: None,
        })
        .collect();
    let cpus = (0..8)
        .map(|cpu: u32| Cpu {
            id: cpu,
            core: cpu,
            socket: cpu / 4,
            numa: ids[cpu as usize / 4],
            uncore_cache: None,
        })
        .collect();
    Machine::with_numa_labels(nodes, cpus, BTreeMap::new()).unwrap()
}

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
