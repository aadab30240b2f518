//! NodeResourceTopology (`topology.node.k8s.io/v1alpha2`) for topoalign:
//! the object's shape ([`object`]), the object of a node ([`build`]: its
//! zones are the engine's one read side, `Node::numa_usage`), and the
//! exact-state attributes that let a scheduler rebuild the node's engine
//! state ([`exact`]), and the pod-set fingerprint scheduler-plugins'
//! cache resyncs by ([`pods_fingerprint`]).
//!
//! Pure: no I/O, no clock. Publishing to an API server is the
//! `topoalign-nrt-publisher` crate's job. Must not touch: admission
//! decisions (the engine's).

mod build;
pub mod exact;
mod fingerprint;
pub mod object;
pub mod schema;
pub mod warnings;

pub use build::{
    BuildOptions, POLICY_ATTRIBUTE, SCOPE_ATTRIBUTE, STATE_UNKNOWN_ATTRIBUTE, build, legacy_policy, unknown,
};
pub use exact::{
    NodeSpec, PodRecord, RestoreError, Restored, ScenarioNodeError, StateError, StateRecord, StateView, read_spec,
    read_state, restore, restore_onto, scenario_node, start_node, topology_spec,
};
pub use fingerprint::{FINGERPRINT_ATTRIBUTE, FINGERPRINT_METHOD_ALL, FINGERPRINT_METHOD_ATTRIBUTE, pods_fingerprint};
pub use object::{
    AttributeInfo, CostInfo, NodeResourceTopology, ObjectMeta, ObjectsError, ResourceInfo, Zone, numa_of_zone,
    zone_name, zone_numa_index,
};
