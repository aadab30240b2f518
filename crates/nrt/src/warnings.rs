//! What a node's kubelet starts with although its answers there are
//! dangerous — the warnings every front end of a node's NRT side shows
//! once per node (the agent's start-up log, `topoalign nrt`, the
//! extender's log and `/healthz`). A warning, never a different verdict:
//! the node is published and judged as its kubelet would judge it.
//!
//! Owns: which warnings a node's NRT side shows. Must not touch: their
//! texts or decisions (the engine's [`StartHazard`](topoalign_engine::StartHazard)s:
//! a NUMA node reserving more than it has; NUMA ids past 63, on which the
//! kubelet starts and crashes at its first admission, or under topology
//! policy none with the Static memory manager at the first Guaranteed pod).

use topoalign_engine::Node;

/// Every warning for `node`: its start hazards ([`Node::start_hazards`]).
pub fn warnings(node: &Node) -> Vec<String> {
    node.start_hazards().iter().map(ToString::to_string).collect()
}
