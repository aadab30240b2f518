//! The devices allocated claims hold: the one definition that callers
//! outside the allocator (free and stranded DRA devices in `fleet`, taken
//! devices in `explain`) count with.
//!
//! A device is held when a result of an allocated claim's
//! `status.allocation` names it — except a result with `adminAccess`, which
//! holds nothing (the allocator's rule: an admin-access claim may take a
//! device that is in use, and does not keep others from it). Shares of a
//! device with consumable capacity count as holding it. Pure.

use std::collections::BTreeSet;

use k8s_openapi::api::resource::v1::ResourceClaim;

pub use crate::allocator::DeviceId;

/// Every device some claim of `claims` holds (see the module docs); claims
/// without `status.allocation` hold nothing.
pub fn held_devices(claims: &[ResourceClaim]) -> BTreeSet<DeviceId<'_>> {
    claims
        .iter()
        .filter_map(|claim| {
            claim
                .status
                .as_ref()?
                .allocation
                .as_ref()?
                .devices
                .as_ref()?
                .results
                .as_deref()
        })
        .flatten()
        .filter(|result| result.admin_access != Some(true))
        .map(|result| DeviceId {
            driver: &result.driver,
            pool: &result.pool,
            device: &result.device,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::features::scheduler_defaults;

    fn claim(results: serde_json::Value) -> ResourceClaim {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "ml"},
            "status": {"allocation": {"devices": {"results": results}}}
        }))
        .expect("claim")
    }

    fn id<'a>(driver: &'a str, pool: &'a str, device: &'a str) -> DeviceId<'a> {
        DeviceId { driver, pool, device }
    }

    /// Held, as the allocator's own bookkeeping (`InUse::holds`) has it,
    /// with consumable capacity on and off.
    #[test]
    fn held_devices_are_what_the_allocator_counts_in_use() {
        let claims = vec![
            claim(serde_json::json!([
                {"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": "gpu-0"},
                {"request": "gpu", "driver": "gpu.example.com", "pool": "p", "device": "gpu-1", "adminAccess": true},
                {"request": "nic", "driver": "nic.example.com", "pool": "p", "device": "nic-0",
                 "shareID": "8f1a3d4e-0000-4000-8000-000000000000", "consumedCapacity": {"bandwidth": "1Gi"}}
            ])),
            // Not allocated: holds nothing.
            serde_json::from_value(serde_json::json!({"metadata": {"name": "pending"}})).expect("claim"),
        ];
        let held = held_devices(&claims);
        assert_eq!(
            held,
            BTreeSet::from([id("gpu.example.com", "p", "gpu-0"), id("nic.example.com", "p", "nic-0")])
        );
        for release in crate::features::RELEASES {
            let features = scheduler_defaults(release).expect("a release");
            let in_use = crate::allocator::InUse::from_claims(&claims, &features);
            for device in ["gpu-0", "gpu-1", "gpu-2"] {
                let device = id("gpu.example.com", "p", device);
                assert_eq!(in_use.holds(&device), held.contains(&device), "{release} {device:?}");
            }
            let nic = id("nic.example.com", "p", "nic-0");
            assert_eq!(in_use.holds(&nic), held.contains(&nic), "{release}");
        }
    }
}
