//! What the agent's integration tests share: their machine and an agent
//! opened on it.

use serde_json::json;
use topoalign_agent::{NodeAgent, OpenOptions, Role, StateLock};
use topoalign_model::{Machine, UniformMachine};

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// 2 NUMA nodes × 4 single-thread cores, 4Gi each.
pub fn machine() -> Machine {
    UniformMachine::new(2, 4)
        .sockets(2)
        .memory_per_numa(4 << 30)
        .remote_distance(20)
        .build()
        .expect("a valid machine")
}

/// An agent on [`machine`] with its state in `dir`/state: static CPU
/// manager with CPU 0 reserved, the topology manager policy
/// `topology_policy`, its kubelet configuration known (so rejections offer
/// kubelet fixes).
pub fn open_agent(
    dir: &std::path::Path,
    topology_policy: &str,
) -> Result<(NodeAgent, StateLock), Box<dyn std::error::Error>> {
    let kubelet =
        json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0", "topologyManagerPolicy": topology_policy});
    let config = topoalign_k8s::node_config_from_value(&kubelet, &machine())?;
    let (mut agent, lock) = topoalign_agent::open(
        machine(),
        config,
        OpenOptions {
            state_dir: &dir.join("state"),
            role: Role::Agent,
            enforce: false,
            cgroups: false,
            cgroup_parent: "topoalign-test",
            procfs: topoalign_enforce::Procfs::default(),
        },
    )?;
    agent.set_kubelet_configuration(kubelet);
    Ok((agent, lock))
}
