//! What the engine answers for one pod: [`Decision`] (admitted or not, with
//! the kubelet's reason and message), the placement of every container, and
//! the [`MergeTrace`] of how it was reached.

use std::collections::BTreeMap;

use topoalign_model::{CpuSet, ProviderHints, QosClass, TopologyHint};
use topoalign_topology_manager::{TopologyPolicyName, TopologyScope};

/// The engine's answer to one pod admission.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// `namespace/name`.
    pub pod: String,
    pub qos: QosClass,
    /// `None` when admitted.
    pub rejection: Option<Rejection>,
    /// One entry per container (init containers first), only when admitted.
    pub containers: Vec<ContainerPlacement>,
    pub trace: MergeTrace,
}

impl Decision {
    /// Whether the pod was admitted.
    pub fn admitted(&self) -> bool {
        self.rejection.is_none()
    }
}

/// Why the kubelet would refuse the pod, in its own words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// `TopologyAffinityError`, `SMTAlignmentError`,
    /// `UnexpectedAdmissionError`, `OutOfcpu`, ...
    pub reason: String,
    pub message: String,
    /// Which step of the admission chain refused.
    pub stage: RejectionStage,
}

/// The step of the kubelet's admission chain that refused a pod.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RejectionStage {
    /// The topology manager's policy found no acceptable alignment.
    TopologyPolicy,
    /// A hint provider failed to allocate after the policy admitted.
    Allocation(Provider),
    /// The node's allocatable resources do not fit the pod's requests.
    ResourceFit,
}

/// The kubelet's hint providers, in the order it registers them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Provider {
    Device,
    Cpu,
    Memory,
}

impl Provider {
    /// All providers in registration order (the order of hint collection
    /// and allocation).
    pub const ALL: [Provider; 3] = [Provider::Device, Provider::Cpu, Provider::Memory];

    /// A name for people.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Device => "device manager",
            Provider::Cpu => "CPU manager",
            Provider::Memory => "memory manager",
        }
    }
}

/// Where one admitted container's resources went: the one placement type
/// of topoalign. The replay result document, `explain`'s reports, the
/// agent's API and its journal all carry it as it is; with the `serde`
/// feature its wire shape is `{"name", "init", "cpus": "2-5" | null,
/// "memoryNuma": [0] | null, "devices": {…}}` (devices left out when there
/// are none), CPU sets in the kubelet's list syntax.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "camelCase"))]
pub struct ContainerPlacement {
    pub name: String,
    pub init: bool,
    /// Exclusive CPUs; `None` = the shared pool.
    pub cpus: Option<CpuSet>,
    /// NUMA nodes the memory is pinned to; `None` = not pinned.
    pub memory_numa: Option<Vec<usize>>,
    /// Device ids per resource.
    #[cfg_attr(feature = "serde", serde(default, skip_serializing_if = "BTreeMap::is_empty"))]
    pub devices: BTreeMap<String, Vec<String>>,
}

/// How a decision was reached: the policy in force and every merge made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeTrace {
    pub policy: TopologyPolicyName,
    pub scope: TopologyScope,
    /// One merge per container (container scope) or one for the pod (pod
    /// scope); empty under policy `none`, which never merges.
    pub merges: Vec<MergeRecord>,
}

/// One topology-manager merge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeRecord {
    /// The container merged for; `None` under the pod scope.
    pub container: Option<String>,
    /// What each provider said, in registration order.
    pub hints: Vec<(Provider, ProviderHints)>,
    /// The merged hint.
    pub best: TopologyHint,
    /// Whether the policy admitted it.
    pub admitted: bool,
}
