//! The kubelet's Topology Manager, as a pure library (work in progress).

/// `topologyManagerPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopologyPolicyName {
    None,
    BestEffort,
    Restricted,
    SingleNumaNode,
}

/// `topologyManagerScope`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TopologyScope {
    Container,
    Pod,
}
