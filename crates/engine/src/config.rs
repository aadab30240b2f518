//! [`NodeConfig`]: everything the engine needs to start a node, already
//! read from a KubeletConfiguration (by `topoalign-k8s`) and checked the way
//! the kubelet's configuration validation checks it. What remains to check
//! needs the machine or a manager's own knowledge and happens in
//! [`Node::start`](crate::Node::start), in the kubelet's order.

use std::collections::BTreeMap;

pub use topoalign_cpu_manager::CpuPolicyName;
pub use topoalign_memory_manager::{MemoryPolicyName, ReservedMemory};
pub use topoalign_topology_manager::{TopologyPolicyName, TopologyScope};

use topoalign_model::{CpuSet, FeatureGates, KubeletVersion, ResourceList};

/// A node's kubelet configuration, as the engine needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    pub topology_policy: TopologyPolicyName,
    pub topology_scope: TopologyScope,
    /// `topologyManagerPolicyOptions` as written; parsed at start.
    pub topology_options: BTreeMap<String, String>,
    pub cpu_policy: CpuPolicyName,
    /// `cpuManagerPolicyOptions` as written; parsed at start.
    pub cpu_options: BTreeMap<String, String>,
    /// `reservedSystemCPUs`, parsed and checked against the machine.
    pub reserved_system_cpus: Option<CpuSet>,
    pub memory_policy: MemoryPolicyName,
    pub reserved_memory: Vec<ReservedMemory>,
    /// `systemReserved` (with `cpu` replaced by the size of
    /// `reservedSystemCPUs` when that is set).
    pub system_reserved: ResourceList,
    /// `kubeReserved` (without `cpu` when `reservedSystemCPUs` is set).
    pub kube_reserved: ResourceList,
    /// What the hard eviction thresholds reserve, per resource (the
    /// kubelet's `hardEvictionReservation`: `memory.available` → `memory`).
    pub hard_eviction: ResourceList,
    /// `maxPods`.
    pub max_pods: u32,
    pub feature_gates: FeatureGates,
    /// The kubelet release whose decisions to reproduce.
    pub kubelet_version: KubeletVersion,
}

impl Default for NodeConfig {
    /// The kubelet's defaults: policies `none` / `container` / `none` /
    /// `None`, nothing reserved, `maxPods: 110`, the newest supported
    /// kubelet release, eviction `memory.available:
    /// 100Mi` is *not* applied here (that default belongs to the
    /// configuration loader).
    fn default() -> Self {
        NodeConfig {
            topology_policy: TopologyPolicyName::None,
            topology_scope: TopologyScope::Container,
            topology_options: BTreeMap::new(),
            cpu_policy: CpuPolicyName::None,
            cpu_options: BTreeMap::new(),
            reserved_system_cpus: None,
            memory_policy: MemoryPolicyName::None,
            reserved_memory: Vec::new(),
            system_reserved: ResourceList::new(),
            kube_reserved: ResourceList::new(),
            hard_eviction: ResourceList::new(),
            max_pods: 110,
            feature_gates: FeatureGates::default(),
            kubelet_version: KubeletVersion::default(),
        }
    }
}
