//! What the engine answers for one pod: [`Decision`] (admitted or not, with
//! the kubelet's reason and message), the placement of every container, and
//! the [`MergeTrace`] of how it was reached.

use std::collections::BTreeMap;

use topoalign_model::{CpuSet, KubeletVersion, Machine, ProviderHints, QosClass, TopologyHint};
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
    /// The kubelet does not answer: it crashes admitting the pod. `rejection`
    /// then holds the same text (reason `KubeletPanic`), for readers that
    /// look no further; a replay stops there.
    pub kubelet_panic: Option<KubeletPanic>,
}

/// The kubelet crashes (a Go panic in its code) where the engine would
/// decide: NUMA node ids of 64 or more, which the kubelet's 64-bit NUMA
/// masks cannot hold (`bitmask.NewBitMask` fails with "bit number must be
/// in range 0-63"; its callers discard the error and use the nil mask).
/// Display is the explanation.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the v{release} kubelet panics admitting this pod: NUMA node id {numa_id} does not fit its 64-bit NUMA masks \
     (bitmask.NewBitMask: \"bit number must be in range 0-63\", the error discarded), and {site}"
)]
pub struct KubeletPanic {
    pub release: KubeletVersion,
    /// The machine's smallest NUMA id of 64 or more.
    pub numa_id: usize,
    pub site: PanicSite,
}

/// Where the kubelet meets the mask it could not build.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PanicSite {
    /// Every admission under a topology manager policy other than `none`:
    /// the providers' hints and the hint merge (`bitmask.And`) use masks of
    /// every NUMA node.
    #[error(
        "topology manager policy {0} builds masks of every NUMA node for every pod (a hint provider or the hint \
         merge dereferences the nil one); only policy none runs on this machine"
    )]
    TopologyManager(TopologyPolicyName),
    /// Under policy `none`, the Static memory manager's default hint for a
    /// container of a Guaranteed pod (`getDefaultHint`, `calculateHints`).
    #[error(
        "with topology manager policy none the Static memory manager computes a default hint for container \
         {container:?} over masks of every NUMA node (getDefaultHint, calculateHints) and dereferences the nil one"
    )]
    MemoryDefaultHint { container: String },
}

impl KubeletPanic {
    /// The `reason` of the [`Rejection`] a crashing admission carries.
    pub const REASON: &'static str = "KubeletPanic";
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

impl ContainerPlacement {
    /// This placement with its memory NUMA nodes named by the machine's own
    /// ids ([`Machine::numa_label`]; the engine's are indices): what a
    /// reader prints or sends.
    pub fn with_numa_labels(&self, machine: &Machine) -> ContainerPlacement {
        ContainerPlacement {
            memory_numa: self
                .memory_numa
                .as_ref()
                .map(|nodes| nodes.iter().map(|&node| machine.numa_label(node)).collect()),
            ..self.clone()
        }
    }
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
