//! The DRA feature gates the allocator follows, as each release's
//! kube-scheduler sets them by default (`structured.Features`, filled from the
//! scheduler's feature gates).
//!
//! The table is the real one: `oracle-dra features` (oracle/dra) prints each
//! release's `structured.Features` as the DynamicResources plugin fills it
//! from the release's default gates (`testdata/dra/<release>/features.json`),
//! and `tests/features.rs` holds [`scheduler_defaults`] to those files.
//!
//! | release | on by default | allocator variant |
//! |---|---|---|
//! | 1.34 | AdminAccess, PrioritizedList, DeviceStatus | experimental (DeviceStatus is beyond incubating's set) |
//! | 1.35 | AdminAccess, PrioritizedList | incubating |
//! | 1.36 | AdminAccess, PrioritizedList, PartitionableDevices, DeviceTaints, ConsumableCapacity, DeviceBindingAndStatus | incubating |
//! | 1.37 | as 1.36 | incubating |
//!
//! `structured.NewAllocator` picks the first of stable, incubating,
//! experimental whose supported features include every enabled one, so the
//! variant is a function of this table (`oracle-dra info` prints it).

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
    /// v1.34 only: `DRADeviceBindingConditions` (results carry a device's
    /// binding conditions). From v1.35 one field, `DeviceBindingAndStatus`.
    pub device_binding: bool,
    /// v1.35 and later: `DRADeviceBindingConditions` and
    /// `DRAResourceClaimDeviceStatus` both on (devices with binding
    /// conditions may be allocated, their conditions go into the result).
    pub device_binding_and_status: bool,
    /// v1.34 only: `DRAResourceClaimDeviceStatus`. A device with binding
    /// conditions may be allocated only with `device_binding` and this.
    pub device_status: bool,
    pub device_taints: bool,
    pub fractional_capacity_range: bool,
    /// v1.36's plugin never sets it (its CEL environment follows the
    /// `DRAListTypeAttributes` gate instead); off by default everywhere.
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
///
/// # Errors
/// [`UnknownRelease`] for a release other than 1.34–1.37.
pub fn scheduler_defaults(release: &str) -> Result<Features, UnknownRelease> {
    let common = Features {
        admin_access: true,
        prioritized_list: true,
        ..Features::default()
    };
    match release {
        // DRAResourceClaimDeviceStatus has been beta (on) since 1.33;
        // DRADeviceBindingConditions, DRAConsumableCapacity,
        // DRAPartitionableDevices and DRADeviceTaints are alpha.
        "1.34" => Ok(Features {
            device_status: true,
            ..common
        }),
        // The plugin ANDs binding conditions (alpha, off) with device status.
        "1.35" => Ok(common),
        // DRAConsumableCapacity, DRADeviceBindingConditions,
        // DRAPartitionableDevices and DRADeviceTaints beta (on);
        // DRAListTypeAttributes alpha. 1.37 adds DRADeviceCompatibilityGroups,
        // DRADerivedAttributes, DRAOptionalNodeOperations (alpha) and
        // DRAFractionalCapacityRange (beta, on only with
        // --min-compatibility-version 1.37, so off by default).
        "1.36" | "1.37" => Ok(Features {
            consumable_capacity: true,
            device_binding_and_status: true,
            device_taints: true,
            partitionable_devices: true,
            ..common
        }),
        _ => Err(UnknownRelease(release.to_owned())),
    }
}
