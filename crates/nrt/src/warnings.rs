//! What a node's kubelet starts with although its answers there are
//! dangerous — the warnings every front end of a node's NRT side shows
//! once per node (the agent's start-up log, `topoalign nrt`, the
//! extender's log and `/healthz`). A warning, never a different verdict:
//! the node is published and judged as its kubelet would judge it.
//!
//! Owns: the texts. Must not touch: decisions (the engine's).

use topoalign_engine::{MemoryPolicyName, Node, TopologyPolicyName};

/// The crash every pod (or every Guaranteed pod) meets on `node`'s
/// kubelet: the machine has a NUMA id of 64 or more, which the kubelet's
/// 64-bit NUMA masks cannot hold. Under a topology manager policy other
/// than `none` every admission (and every re-admission after a restart)
/// panics; under `none` the Static memory manager's default hint for a
/// container of a Guaranteed pod does. `None` where the kubelet runs
/// every pod (no such id, or policy `none` without the Static memory
/// manager).
pub fn crash_warning(node: &Node) -> Option<String> {
    let machine = node.machine();
    let numa_id = machine.numa_id_past_masks()?;
    let config = node.config();
    let release = config.kubelet_version;
    let ids = machine
        .numa_labels()
        .unwrap_or_default()
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let which = match (config.topology_policy, config.memory_policy) {
        (TopologyPolicyName::None, MemoryPolicyName::None) => return None,
        (TopologyPolicyName::None, MemoryPolicyName::Static) => format!(
            "with topology manager policy none and memory manager policy Static, the v{release} kubelet crashes (a Go \
             panic) admitting any Guaranteed pod (the memory manager's default hint), and again at every restart \
             while one runs"
        ),
        (policy, _) => format!(
            "with topology manager policy {}, the v{release} kubelet crashes (a Go panic) admitting any pod, and \
             again at every restart while one runs; only topology manager policy none runs on this machine",
            policy.as_str()
        ),
    };
    Some(format!(
        "NUMA node id {numa_id} (NUMA nodes {ids}) does not fit the kubelet's 64-bit NUMA masks: {which}"
    ))
}

/// Every warning for `node`: its start hazards
/// ([`Node::start_hazards`]), then [`crash_warning`].
pub fn warnings(node: &Node) -> Vec<String> {
    node.start_hazards()
        .iter()
        .map(ToString::to_string)
        .chain(crash_warning(node))
        .collect()
}
