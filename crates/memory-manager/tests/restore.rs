//! Restoring the memory manager from checkpointed state, as a restarting
//! kubelet does: a state taken from a running manager restores exactly; a
//! tampered one is refused with the kubelet's text.

use topoalign_memory_manager::{
    MemoryManager, MemoryManagerConfig, MemoryManagerState, MemoryPolicyName, MemoryRestoreError, ReservedMemory,
};
use topoalign_model::{Container, NumaMask, Pod, QosClass, Quantity, QuantityFormat, TopologyHint, UniformMachine};

const GI: u64 = 1 << 30;

fn binary(n: u64) -> Quantity {
    Quantity::from_units(i128::from(n)).with_format(QuantityFormat::BinarySI)
}

/// Two NUMA nodes of 4Gi, 1Gi reserved on node 0.
fn manager() -> MemoryManager {
    let machine = UniformMachine::new(2, 0)
        .memory_per_numa(4 * GI)
        .build()
        .expect("valid machine");
    let config = MemoryManagerConfig {
        kubelet_version: topoalign_model::KubeletVersion::V1_32,
        pod_level_managers: false,
        policy: MemoryPolicyName::Static,
        reserved_memory: vec![ReservedMemory {
            numa_node: 0,
            limits: [("memory".to_string(), binary(GI))].into_iter().collect(),
        }],
        node_allocatable_reservation: [("memory".to_string(), binary(GI))].into_iter().collect(),
    };
    MemoryManager::start(&machine, &config).expect("starts")
}

fn pod(uid: &str, memory: u64) -> Pod {
    let requests: topoalign_model::ResourceList = [
        ("cpu".to_string(), Quantity::from_units(1)),
        ("memory".to_string(), binary(memory)),
    ]
    .into_iter()
    .collect();
    Pod {
        namespace: "default".into(),
        name: uid.into(),
        uid: uid.into(),
        qos: QosClass::Guaranteed,
        init_containers: Vec::new(),
        containers: vec![Container {
            name: "app".into(),
            limits: requests.clone(),
            requests,
            restartable: false,
        }],
        overhead: Default::default(),
        pod_resources: None,
    }
}

/// A manager holding a 2Gi pod on node 1 and a 5Gi pod spanning both nodes
/// is impossible (groups), so: 2Gi on node 1 and 1Gi on node 0.
fn busy_manager() -> MemoryManager {
    let mut m = manager();
    for (uid, size, node) in [("a", 2 * GI, 1), ("b", GI, 0)] {
        let p = pod(uid, size);
        m.allocate(&p, &p.containers[0], TopologyHint::new(NumaMask::single(node), true))
            .expect("fits");
        m.add_container(&p, &p.containers[0]);
    }
    m
}

#[test]
fn a_checkpointed_state_restores_exactly() {
    let busy = busy_manager();
    let state = busy.state().expect("Static policy has state");
    assert_eq!(state.machine_state[&1].memory["memory"].free, 2 * GI);
    assert_eq!(state.machine_state[&0].memory["memory"].free, 2 * GI);
    let mut restored = manager();
    restored.restore(state.clone()).expect("consistent");
    assert_eq!(restored.state(), Some(state));
    assert_eq!(restored.container_numa_nodes("a", "app"), Some(vec![1]));
    assert_eq!(restored.free(), busy.free());
}

#[test]
fn an_empty_state_is_a_fresh_start() {
    let mut m = busy_manager();
    m.restore(MemoryManagerState::default()).expect("fresh");
    assert_eq!(m.state(), manager().state());
}

#[test]
fn tampered_states_are_refused_like_the_kubelet() {
    let state = busy_manager().state().expect("state");
    let tamper = |f: &dyn Fn(&mut MemoryManagerState)| {
        let mut s = state.clone();
        f(&mut s);
        let mut m = manager();
        let before = m.state();
        let error = m.restore(s).expect_err("refused");
        assert_eq!(m.state(), before, "a refused state changes nothing");
        error.to_string()
    };
    assert_eq!(
        tamper(&|s| s.machine_state.clear()),
        "[memorymanager] machine state can not be empty when it has memory assignments"
    );
    assert_eq!(
        tamper(&|s| s
            .machine_state
            .get_mut(&1)
            .expect("node 1")
            .memory
            .get_mut("memory")
            .expect("memory")
            .free -= 1),
        MemoryRestoreError::MachineStateDiffers.to_string()
    );
    assert_eq!(
        tamper(&|s| s.assignments.get_mut("a").expect("pod a").get_mut("app").expect("app")[0].numa_affinity = vec![2]),
        "[memorymanager] (pod: a, container: app) the memory assignment uses the NUMA that does not exist"
    );
    assert_eq!(
        tamper(
            &|s| s.assignments.get_mut("a").expect("pod a").get_mut("app").expect("app")[0].resource =
                "hugepages-4Mi".into()
        ),
        "[memorymanager] (pod: a, container: app) the memory assignment uses memory resource that does not exist"
    );
    assert_eq!(
        tamper(&|s| s.assignments.get_mut("b").expect("pod b").get_mut("app").expect("app")[0].size += 1),
        "[memorymanager] the expected machine state is different from the real one"
    );
}
