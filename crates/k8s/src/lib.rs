//! Kubernetes formats for topoalign: quantities, Pod manifests, and the
//! KubeletConfiguration with the kubelet's own start-up checks.
//!
//! Owns the edge between Kubernetes documents and the engine's types:
//! - [`parse_quantity`]: Kubernetes quantity strings, exactly
//!   ([`quantity`]);
//! - [`pod_from_value`] / [`pod_from_yaml`] / [`pod_from_k8s`]: a `v1.Pod`
//!   to the engine's [`Pod`](topoalign_model::Pod), defaulted, with its QoS
//!   class ([`pod`]);
//! - [`KubeletConfiguration`] and [`node_config`]: a v1beta1 configuration
//!   to the engine's [`NodeConfig`](topoalign_engine::NodeConfig) through
//!   the kubelet's start-up steps, refusing what the kubelet refuses with
//!   its exact text ([`kubelet_config`], [`validation`], [`startup`]);
//! - [`read_manifests`]: pods from multi-document streams, `v1 List`s and
//!   workload templates ([`manifests`]);
//! - [`go_yaml`]: YAML read as Kubernetes reads it (YAML 1.1 through
//!   `sigs.k8s.io/yaml`), for every file a kubelet, `kubectl` or the API
//!   server would read;
//! - [`CpuCheckpoint`] / [`MemoryCheckpoint`] / [`DeviceCheckpoint`]: the
//!   kubelet's checkpoint files in every release's layout, checksum
//!   verified the kubelet's way ([`checkpoint`]).
//!
//! Pure: no files, clock or environment; callers read documents and pass
//! text or values. Must not touch: admission and allocation (the engine's).

pub mod checkpoint;
mod cpu_list;
pub mod defaulting;
mod eviction;
mod feature_gates;
mod go;
pub mod go_yaml;
pub mod kubelet_config;
pub mod manifests;
pub mod nesting;
pub mod pod;
pub mod quantity;
pub mod restart;
pub mod startup;
pub mod text;
pub mod validation;

pub use checkpoint::{CheckpointError, CheckpointKind, CpuCheckpoint, DeviceCheckpoint, MemoryCheckpoint};
pub use cpu_list::{CpuList, CpuListError, ReservedCpusError, parse_cpu_list, reserved_cpus};
pub use eviction::{EvictionError, Threshold, ThresholdValue, hard_eviction_reservation, parse_hard_thresholds};
pub use feature_gates::{GateError, GateProblem, GateSet};
pub use kubelet_config::{
    ConfigError, KubeletConfiguration, KubeletVersionValueError, MemoryReservation, MemorySwap, apply_kubelet_version,
    file_fields, parse_kubelet_version, unknown_field_warnings,
};
pub use manifests::{
    MAX_PODS, ManifestError, ManifestOptions, ManifestPod, Manifests, Skipped, own_replicas, read_manifests,
};
pub use nesting::{MAX_NESTING, NestingError, check_nesting, prepare as prepare_text};
pub use pod::{
    PodError, PodLevelField, PodProblem, is_valid_pod_key, pod_from_k8s, pod_from_k8s_created, pod_from_value,
    pod_from_value_created, pod_from_yaml,
};
pub use quantity::{QuantityError, go_string, parse_quantity, parse_quantity_field};
pub use restart::restart_node;
pub use startup::{KubeletConfigError, node_config, node_config_from_value, start_node};
pub use validation::{ValidationError, validate};
