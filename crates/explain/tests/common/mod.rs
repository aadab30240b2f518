//! Shared by the DRA tests (dra.rs, dra_extended.rs): their node, and a
//! pod explained on it as `topoalign explain` asks.

use serde_json::json;
use topoalign_explain::dra::{DraExplanation, explain_all, running};
use topoalign_k8s::{ManifestOptions, read_manifests, start_node};
use topoalign_model::UniformMachine;
use topoalign_scenario::dra::with_device_plugin_allocatable;
use topoalign_scenario::{Scenario, TopologySpec, play_events};

/// The node, as a scenario's `topology` and `kubelet` (YAML): 2 NUMA nodes
/// (= sockets) of 4 cores × 2 threads (CPUs n and n+8 are siblings), 64Gi
/// each; kubelet 1.37, single-numa-node, static CPU and memory managers,
/// CPUs 0 and 8 reserved (so NUMA 0 has 6 CPUs for pods, NUMA 1 has 8).
pub fn node() -> String {
    let machine = UniformMachine::new(2, 4)
        .threads_per_core(2)
        .sockets(2)
        .memory_per_numa(64 << 30)
        .remote_distance(21)
        .build()
        .expect("a valid machine");
    let node = json!({
        "topology": TopologySpec::from_machine(&machine),
        "kubelet": {
            "kubeletVersion": "1.37",
            "topologyManagerPolicy": "single-numa-node",
            "cpuManagerPolicy": "static",
            "memoryManagerPolicy": "Static",
            "reservedSystemCPUs": "0,8",
            "systemReserved": {"memory": "1Gi"},
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]
        }
    });
    serde_yaml_ng::to_string(&node).expect("a YAML document")
}

/// The first pod of `pods` (manifests) explained on `scenario`'s node
/// after its events, against its `dra:` block (the machine's device-plugin
/// resources in the node's allocatable), with a kubelet and scheduler of
/// `release`. `Err`: what failed, in words.
pub fn explain_first(scenario: &Scenario, release: &str, pods: &str) -> Result<Option<DraExplanation>, String> {
    let machine = scenario.topology.to_machine().map_err(|e| e.to_string())?;
    let mut node = start_node(machine.clone(), &scenario.kubelet).map_err(|e| e.to_string())?;
    play_events(&mut node, &scenario.kubelet, scenario).map_err(|e| e.to_string())?;
    let spec = with_device_plugin_allocatable(scenario.dra.as_deref().ok_or("no dra block")?, &machine);
    let mut state = running(spec, release, &scenario.events).map_err(|(i, e)| format!("event {i}: {e}"))?;
    let pods = read_manifests(
        pods,
        &ManifestOptions {
            replicas: None,
            uid_prefix: "t-".to_owned(),
            ..ManifestOptions::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let mut all = explain_all(&node, &scenario.kubelet, &pods.pods, &mut state).map_err(|(_, e)| e.to_string())?;
    Ok(all.remove(0))
}
