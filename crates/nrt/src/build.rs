//! [`build`]: the NodeResourceTopology object of one node — zones from
//! the engine's [`Node::numa_usage`] (capacity, allocatable and available
//! per NUMA node and resource, as documented on `NumaUsage`; each zone
//! named by the machine's own NUMA id, `node-64` on a machine numbered
//! anew, as the resource-topology-exporter names the cell), costs from
//! the machine's distance matrix, the topology manager's policy and scope
//! as attributes (the names NodeResourceTopologyMatch reads), the
//! fingerprint of the pods the node holds (so scheduler-plugins' cache can
//! trust the object again, [`crate::pods_fingerprint`]), and, when
//! asked, topoalign's exact-state attributes (see [`crate::exact`]).

use topoalign_engine::{Node, TopologyPolicyName, TopologyScope};

use crate::exact::{NODE_SPEC_ATTRIBUTE, NodeSpec, STATE_ATTRIBUTE, state_json};
use crate::fingerprint::{
    FINGERPRINT_ATTRIBUTE, FINGERPRINT_METHOD_ALL, FINGERPRINT_METHOD_ATTRIBUTE, pods_fingerprint,
};
use crate::object::{
    API_VERSION, AttributeInfo, CostInfo, KIND, NodeResourceTopology, ObjectMeta, ResourceInfo, Zone, zone_name,
};

/// Attribute with the topology manager policy (`single-numa-node`, …).
pub const POLICY_ATTRIBUTE: &str = "topologyManagerPolicy";
/// Attribute with the topology manager scope (`container`, `pod`).
pub const SCOPE_ATTRIBUTE: &str = "topologyManagerScope";

/// What goes into an object besides the zones.
#[derive(Clone, Copy, Debug)]
pub struct BuildOptions<'a> {
    /// The node's machine and kubelet blocks: when given, the exact-state
    /// attributes are added so that an exact scheduler can rebuild the
    /// node.
    pub exact_state: Option<&'a NodeSpec>,
}

/// The NRT object of node `name`.
pub fn build(name: &str, node: &Node, options: BuildOptions<'_>) -> NodeResourceTopology {
    let machine = node.machine();
    let zones = node
        .numa_usage()
        .into_iter()
        .map(|zone| {
            let costs = machine
                .numa_node(zone.numa)
                .and_then(|n| n.distances.as_ref())
                .map(|row| {
                    machine
                        .numa_nodes()
                        .iter()
                        .filter_map(|other| {
                            let value = i64::try_from(*row.get(other.id)?).ok()?;
                            Some(CostInfo {
                                name: zone_name(machine.numa_label(other.id)),
                                value,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            Zone {
                name: zone_name(machine.numa_label(zone.numa)),
                zone_type: "Node".to_string(),
                parent: None,
                costs,
                attributes: Vec::new(),
                resources: zone
                    .resources
                    .iter()
                    .map(|(resource, amounts)| ResourceInfo {
                        name: resource.clone(),
                        capacity: amounts.capacity.to_string(),
                        allocatable: amounts.allocatable.to_string(),
                        available: amounts.available.to_string(),
                    })
                    .collect(),
            }
        })
        .collect();
    let config = node.config();
    let mut attributes = vec![
        AttributeInfo {
            name: POLICY_ATTRIBUTE.to_string(),
            value: config.topology_policy.as_str().to_string(),
        },
        AttributeInfo {
            name: SCOPE_ATTRIBUTE.to_string(),
            value: config.topology_scope.as_str().to_string(),
        },
        AttributeInfo {
            name: FINGERPRINT_ATTRIBUTE.to_string(),
            value: pods_fingerprint(
                node.pods()
                    .iter()
                    .map(|pod| (pod.namespace.as_str(), pod.name.as_str())),
            ),
        },
        AttributeInfo {
            name: FINGERPRINT_METHOD_ATTRIBUTE.to_string(),
            value: FINGERPRINT_METHOD_ALL.to_string(),
        },
    ];
    if let Some(spec) = options.exact_state {
        // Serializing plain data into a string cannot fail.
        let text = |value: serde_json::Result<String>| value.unwrap_or_default();
        attributes.push(AttributeInfo {
            name: NODE_SPEC_ATTRIBUTE.to_string(),
            value: text(serde_json::to_string(spec)),
        });
        attributes.push(AttributeInfo {
            name: STATE_ATTRIBUTE.to_string(),
            value: state_json(node),
        });
    }
    object(
        name,
        legacy_policy(config.topology_policy, config.topology_scope),
        zones,
        attributes,
    )
}

/// Attribute saying why a node's state is not known now (its publisher
/// follows a kubelet whose sources disagree): the object then carries no
/// zones, no policy and no exact state, so that no scheduler filters on a
/// guess — NodeResourceTopology consumers pass a node whose policy is
/// `None`, and topoalign's extender one without exact state.
pub const STATE_UNKNOWN_ATTRIBUTE: &str = "topoalign.io/state-unknown";

/// The object of node `name` whose state is unknown, saying why.
pub fn unknown(name: &str, reason: &str) -> NodeResourceTopology {
    let attributes = vec![AttributeInfo {
        name: STATE_UNKNOWN_ATTRIBUTE.to_string(),
        value: reason.to_string(),
    }];
    object(
        name,
        legacy_policy(TopologyPolicyName::None, TopologyScope::Container),
        Vec::new(),
        attributes,
    )
}

/// The object of node `name`, its one (deprecated) topology policy, zones
/// and attributes.
fn object(name: &str, policy: &str, zones: Vec<Zone>, attributes: Vec<AttributeInfo>) -> NodeResourceTopology {
    NodeResourceTopology {
        api_version: API_VERSION.to_string(),
        kind: KIND.to_string(),
        metadata: ObjectMeta {
            name: name.to_string(),
            ..ObjectMeta::default()
        },
        topology_policies: vec![policy.to_string()],
        zones,
        attributes,
    }
}

/// The deprecated `topologyPolicies` value for a policy and scope.
pub fn legacy_policy(policy: TopologyPolicyName, scope: TopologyScope) -> &'static str {
    match (policy, scope) {
        (TopologyPolicyName::None, _) => "None",
        (TopologyPolicyName::BestEffort, TopologyScope::Container) => "BestEffortContainerLevel",
        (TopologyPolicyName::BestEffort, TopologyScope::Pod) => "BestEffortPodLevel",
        (TopologyPolicyName::Restricted, TopologyScope::Container) => "RestrictedContainerLevel",
        (TopologyPolicyName::Restricted, TopologyScope::Pod) => "RestrictedPodLevel",
        (TopologyPolicyName::SingleNumaNode, TopologyScope::Container) => "SingleNUMANodeContainerLevel",
        (TopologyPolicyName::SingleNumaNode, TopologyScope::Pod) => "SingleNUMANodePodLevel",
    }
}
