//! Simulated nodes with devices from Dynamic Resource Allocation.
//!
//! A fleet node's device-plugin resource named with `--dra RESOURCE=DRIVER`
//! is published through DRA instead: its devices leave the kubelet's
//! device manager (the node no longer advertises the extended resource)
//! and become one ResourceSlice per driver and node (pool: the node's
//! name), each device carrying its NUMA node as the standard
//! `resource.kubernetes.io/numaNode` attribute.
//!
//! The scheduler allocates the claims (it writes `status.allocation`),
//! among them the special claim it makes for a pod's DRA-backed extended
//! resources (`status.extendedResourceClaimStatus`); the kubelet's part is
//! to prepare them after admission, which a simulated node has nothing to
//! do for. What it adds is the check the real kubelet
//! never makes: whether the devices a pod got share a NUMA node with the
//! CPUs and memory the engine pinned, by the one alignment rule
//! ([`topoalign_scenario::dra::misaligned_devices`]), written as the pod
//! condition [`ALIGNED_CONDITION`].
//!
//! Owns: the claim names of a pod, the alignment verdict. Splitting a node
//! spec's devices and the slices are `topoalign_fleet::dra`'s (re-exported
//! here). Pure.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Pod as K8sPod;
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use serde_json::{Value, json};
use topoalign_scenario::dra::{ClaimDevices, EXTENDED_RESOURCES, PodDevices, claim_devices, misaligned_devices};

/// The pod condition a simulated kubelet writes for a pod with claims:
/// `True` when its DRA devices share a NUMA node with its pinned CPUs and
/// memory, `False` when some do not (the message names them and the
/// kubelet's NUMA nodes), `Unknown` when it cannot tell.
pub const ALIGNED_CONDITION: &str = "topoalign.io/DRAAligned";

// The devices' split and their slices are the fleet's (`simulate` reads a
// fleet's DRA devices the same way).
pub use topoalign_fleet::dra::{DraDevices, DraResource, resource_slices, split_spec};

/// The ResourceClaims a pod uses, as `(its name for the claim, the
/// claim's name)`; a claim made from a template is named in
/// `status.resourceClaimStatuses` (`None` until the controller made it).
/// Last, the special claim the scheduler made for the pod's DRA-backed
/// extended resources (KEP-5004), named in
/// `status.extendedResourceClaimStatus`, as
/// [`EXTENDED_RESOURCES`]: the kubelet prepares it like the others.
pub fn claim_names(pod: &K8sPod) -> Vec<(String, Option<String>)> {
    let status = pod.status.as_ref();
    let statuses = status
        .and_then(|s| s.resource_claim_statuses.as_deref())
        .unwrap_or_default();
    let special = status
        .and_then(|s| s.extended_resource_claim_status.as_ref())
        .map(|s| (EXTENDED_RESOURCES.to_owned(), Some(s.resource_claim_name.clone())));
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|reference| {
            let name = reference.resource_claim_name.clone().or_else(|| {
                statuses
                    .iter()
                    .find(|s| s.name == reference.name)
                    .and_then(|s| s.resource_claim_name.clone())
            });
            (reference.name.clone(), name)
        })
        .chain(special)
        .collect()
}

/// Whether a pod's devices share a NUMA node with its pinned CPUs and
/// memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alignment {
    /// `Some(true)`: aligned (or nothing to align); `Some(false)`: some
    /// device is elsewhere; `None`: cannot tell (a claim missing or not
    /// allocated).
    pub aligned: Option<bool>,
    /// One line: the devices and NUMA nodes.
    pub message: String,
}

/// The verdict for a pod whose claims are `claims` (`(its name for the
/// claim, the claim as the API server has it)`, `None` when not found),
/// with the node's `slices`, the kubelet having pinned `pinned`.
pub fn alignment(
    pod: &str,
    claims: &[(String, Option<ResourceClaim>)],
    slices: &[ResourceSlice],
    pinned: &BTreeSet<usize>,
) -> Alignment {
    let mut devices = PodDevices {
        pod: pod.to_owned(),
        outcome: "allocated".to_owned(),
        message: None,
        claims: Vec::new(),
    };
    for (name, claim) in claims {
        let Some(claim) = claim else {
            return Alignment {
                aligned: None,
                message: format!("the ResourceClaim of {name} is not found"),
            };
        };
        if claim.status.as_ref().is_none_or(|s| s.allocation.is_none()) {
            return Alignment {
                aligned: None,
                message: format!(
                    "ResourceClaim {} is not allocated",
                    claim.metadata.name.as_deref().unwrap_or_default()
                ),
            };
        }
        devices.claims.push(ClaimDevices {
            name: name.clone(),
            claim: claim.metadata.name.clone().unwrap_or_default(),
            devices: claim_devices(claim, slices),
        });
    }
    let listed: Vec<String> = devices
        .claims
        .iter()
        .flat_map(|c| {
            c.devices.iter().map(move |d| match d.numa_node {
                Some(numa) => format!("{}/{}: {} on NUMA node {numa}", c.name, d.request, d.device),
                None => format!("{}/{}: {} (no NUMA node)", c.name, d.request, d.device),
            })
        })
        .collect();
    let kubelet = pinned.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    match misaligned_devices(&devices, pinned) {
        None => Alignment {
            aligned: Some(true),
            message: format!("{}; the kubelet pinned no CPUs or memory", listed.join(", ")),
        },
        Some(missing) if missing.is_empty() => Alignment {
            aligned: Some(true),
            message: format!("{}; CPUs and memory on NUMA node {kubelet}", listed.join(", ")),
        },
        Some(missing) => Alignment {
            aligned: Some(false),
            message: format!("{}; CPUs and memory on NUMA node {kubelet}", missing.join(", ")),
        },
    }
}

/// The strategic-merge patch of `pods/<name>/status` adding
/// [`ALIGNED_CONDITION`] at `now` (RFC 3339).
pub fn condition_patch(alignment: &Alignment, now: &str) -> Value {
    let (status, reason) = match alignment.aligned {
        Some(true) => ("True", "DevicesAligned"),
        Some(false) => ("False", "DevicesMisaligned"),
        None => ("Unknown", "ClaimsNotAllocated"),
    };
    json!({"status": {"conditions": [{
        "type": ALIGNED_CONDITION, "status": status, "reason": reason,
        "message": alignment.message, "lastTransitionTime": now,
    }]}})
}

#[cfg(test)]
mod tests {
    use super::*;

    use topoalign_fleet::dra::fixtures::two_gpus as devices;

    fn claim(device: &str) -> ResourceClaim {
        serde_json::from_value(json!({"metadata": {"name": "p-gpu", "namespace": "ml"},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "n-0", "device": device}]}}}}))
        .expect("claim")
    }

    #[test]
    fn alignment_names_the_device_and_the_kubelets_numa_node() {
        let slices = resource_slices("n-0", &devices());
        let claims = [("gpu".to_owned(), Some(claim("gpu-0")))];
        let misaligned = alignment("ml/p", &claims, &slices, &BTreeSet::from([1]));
        assert_eq!(misaligned.aligned, Some(false));
        assert!(
            misaligned.message.contains("gpu-0 on NUMA node 0"),
            "{}",
            misaligned.message
        );
        assert!(misaligned.message.ends_with("NUMA node 1"), "{}", misaligned.message);
        let aligned = alignment("ml/p", &claims, &slices, &BTreeSet::from([0]));
        assert_eq!(aligned.aligned, Some(true));
        let unknown = alignment("ml/p", &[("gpu".to_owned(), None)], &slices, &BTreeSet::from([0]));
        assert_eq!(unknown.aligned, None);
        assert_eq!(
            condition_patch(&misaligned, "t")["status"]["conditions"][0]["status"],
            "False"
        );
    }

    #[test]
    fn the_special_claim_of_extended_resources_is_prepared_like_the_others() {
        let pod: K8sPod = serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": [{"name": "app"}],
                "resourceClaims": [{"name": "nic", "resourceClaimTemplateName": "one-nic"}]},
            "status": {
                "resourceClaimStatuses": [{"name": "nic", "resourceClaimName": "p-nic-x7k2p"}],
                "extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-q9z8r",
                    "requestMappings": [{"containerName": "app", "resourceName": "example.com/gpu",
                        "requestName": "container-0-request-0"}]}}}))
        .expect("pod");
        assert_eq!(
            claim_names(&pod),
            vec![
                ("nic".to_owned(), Some("p-nic-x7k2p".to_owned())),
                (
                    EXTENDED_RESOURCES.to_owned(),
                    Some("p-extended-resources-q9z8r".to_owned())
                ),
            ]
        );
        let slices = resource_slices("n-0", &devices());
        let claims = [(EXTENDED_RESOURCES.to_owned(), Some(claim("gpu-0")))];
        let verdict = alignment("ml/p", &claims, &slices, &BTreeSet::from([1]));
        assert_eq!(verdict.aligned, Some(false));
        assert!(
            verdict.message.contains("extended-resources/gpu: gpu-0 on NUMA node 0"),
            "{}",
            verdict.message
        );
    }
}
