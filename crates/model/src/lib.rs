//! The vocabulary of topoalign: plain data types that every other crate speaks.
//!
//! This crate owns the shapes of things — a [`CpuSet`], a [`NumaMask`], the
//! [`Machine`] as discovered, a [`Pod`] as the engine sees it, a
//! [`TopologyHint`] — and the few pure operations that define them (set
//! algebra, the kubelet's list syntax, mask ordering). It must not contain
//! policy: no admission logic, no allocation, no parsing of Kubernetes or
//! scenario documents, and no I/O of any kind.

mod bytes;
mod cpuset;
mod feature_gates;
mod hint;
mod kubelet_version;
mod machine;
mod names;
mod numa_mask;
mod option_maturity;
mod quantity;
pub mod resource_name;
mod uniform;
mod workload;

pub use bytes::human_bytes;
pub use cpuset::{CpuSet, CpuSetParseError};
pub use feature_gates::FeatureGates;
pub use hint::{
    HintRule, ProviderHints, ResourceHints, SharedHintRule, TopologyHint, classified_preferred_single_nodes,
    upward_closed_has_hint_between,
};
pub use kubelet_version::{KubeletVersion, KubeletVersionError};
pub use machine::{Cpu, Device, MAX_NUMA_NODE_ID, Machine, MachineError, NumaNode};
pub use names::UnknownName;
pub use numa_mask::{MAX_NUMA_NODES, NumaMask};
pub use option_maturity::{OptionMaturity, OptionsOf, go_parse_bool};
pub use quantity::{GoForm, Quantity, QuantityFormat};
pub use resource_name::hugepage_resource_name;
pub use uniform::UniformMachine;
pub use workload::{
    Container, FlatMap, Pod, PodResources, PodShape, QosClass, ResourceList, ResourceName, add_resource, add_resources,
    fold_amounts,
};
