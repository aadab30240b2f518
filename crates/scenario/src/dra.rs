//! Dynamic Resource Allocation in a scenario: the `dra:` block (the node as
//! the scheduler sees it, DeviceClasses, ResourceSlices, ResourceClaims and
//! ResourceClaimTemplates), and what the scheduler's DRA allocator gives each
//! pod that references claims (`spec.resourceClaims`), beside what the
//! kubelet decides for its CPUs and memory.
//!
//! The kubelet's Topology Manager never sees these devices (claims are
//! prepared after admission), so the kubelet's answer in the result
//! document is unchanged by this block; the devices are reported next to
//! it, each with its NUMA node, and whether they share the NUMA node of the
//! CPUs and memory the kubelet pinned.
//!
//! Owns: reading the block, resolving a pod's claims (a template makes a
//! claim `<pod>-<claim>` in the pod's namespace, deleted with the pod; a
//! named claim is shared, allocated once and freed when no pod holds it),
//! calling `topoalign_dra`, and a device's NUMA node from its attributes.
//! Must not touch the kubelet's decision.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{
    AllocationResult, Device, DeviceClass, ResourceClaim, ResourceClaimStatus, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};
use topoalign_dra::{AllocationCase, Outcome};

/// The `dra:` block.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DraSpec {
    /// The node as the scheduler sees it (its name and labels decide which
    /// slices serve it); default: a node named `node` without labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<Node>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_classes: Vec<DeviceClass>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_slices: Vec<ResourceSlice>,
    /// Claims pods name with `resourceClaimName` (shared between pods).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_claims: Vec<ResourceClaim>,
    /// Templates pods name with `resourceClaimTemplateName` (a claim per
    /// pod).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resource_claim_templates: Vec<ResourceClaimTemplate>,
}

/// What DRA gave one pod.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodDevices {
    /// `namespace/name`.
    pub pod: String,
    /// `allocated`, `unschedulable` (no allocation on this node: the
    /// scheduler would not place the pod here) or `error` (the claims or
    /// classes are wrong: the scheduler stops).
    pub outcome: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<ClaimDevices>,
}

/// One claim's devices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimDevices {
    /// The pod's name for the claim (`spec.resourceClaims[].name`).
    pub name: String,
    /// The ResourceClaim (`namespace/name`).
    pub claim: String,
    pub devices: Vec<AllocatedDevice>,
}

/// One allocated device and where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AllocatedDevice {
    pub request: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// From the device's `resource.kubernetes.io/numaNode` (or its driver's
    /// `numaNode`) attribute; absent when the device publishes neither.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<i64>,
}

/// Why a pod's claims cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DraError {
    #[error("spec.resourceClaims[{index}]: {message}")]
    Claim { index: usize, message: String },
}

/// The claims of the scenario as the replay goes: which are allocated, and
/// which pods hold them.
#[derive(Debug)]
pub struct DraState {
    spec: DraSpec,
    release: String,
    /// Allocated claims by `namespace/name`, with the pods holding them.
    allocated: BTreeMap<String, (ResourceClaim, BTreeSet<String>)>,
}

/// `namespace/name` of an object.
fn key_of(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    )
}

impl DraState {
    /// The block, for a kubelet (and scheduler) of `release` ("1.34").
    pub fn new(spec: DraSpec, release: &str) -> DraState {
        DraState {
            spec,
            release: release.to_owned(),
            allocated: BTreeMap::new(),
        }
    }

    /// Allocates the claims of a pod added to the node (`None` when the
    /// pod references none).
    ///
    /// # Errors
    /// [`DraError`] when a claim or template the pod names is not in the
    /// block.
    pub fn admit(&mut self, pod: &k8s_openapi::api::core::v1::Pod) -> Result<Option<PodDevices>, DraError> {
        let references = pod
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.as_deref())
            .unwrap_or_default();
        if references.is_empty() {
            return Ok(None);
        }
        let pod_key = key_of(&pod.metadata);
        let namespace = pod
            .metadata
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("default");
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        // (pod's name for it, claim key, claim).
        let mut claims: Vec<(String, String, ResourceClaim)> = Vec::new();
        for (index, reference) in references.iter().enumerate() {
            let claim = match (&reference.resource_claim_name, &reference.resource_claim_template_name) {
                (Some(name), _) => self
                    .spec
                    .resource_claims
                    .iter()
                    .find(|c| {
                        c.metadata.name.as_deref() == Some(name)
                            && key_of(&c.metadata).starts_with(&format!("{namespace}/"))
                    })
                    .cloned()
                    .ok_or_else(|| DraError::Claim {
                        index,
                        message: format!("no ResourceClaim {namespace}/{name} in the dra block"),
                    })?,
                (None, Some(template)) => {
                    let found = self
                        .spec
                        .resource_claim_templates
                        .iter()
                        .find(|t| {
                            t.metadata.name.as_deref() == Some(template)
                                && key_of(&t.metadata).starts_with(&format!("{namespace}/"))
                        })
                        .ok_or_else(|| DraError::Claim {
                            index,
                            message: format!("no ResourceClaimTemplate {namespace}/{template} in the dra block"),
                        })?;
                    ResourceClaim {
                        metadata: ObjectMeta {
                            name: Some(format!("{pod_name}-{}", reference.name)),
                            namespace: Some(namespace.to_owned()),
                            ..ObjectMeta::default()
                        },
                        spec: found.spec.as_ref().and_then(|s| s.spec.clone()),
                        status: None,
                    }
                }
                (None, None) => {
                    return Err(DraError::Claim {
                        index,
                        message: "names neither resourceClaimName nor resourceClaimTemplateName".to_owned(),
                    });
                }
            };
            claims.push((reference.name.clone(), key_of(&claim.metadata), claim));
        }
        let pending: Vec<ResourceClaim> = claims
            .iter()
            .filter(|(_, key, _)| !self.allocated.contains_key(key))
            .map(|(_, _, claim)| claim.clone())
            .collect();
        let outcome = if pending.is_empty() {
            Outcome::Allocated {
                allocations: Vec::new(),
            }
        } else {
            topoalign_dra::allocate(&AllocationCase {
                release: self.release.clone(),
                node: self.node(),
                device_classes: self.spec.device_classes.clone(),
                resource_slices: self.spec.resource_slices.clone(),
                allocated_claims: self.allocated.values().map(|(claim, _)| claim.clone()).collect(),
                claims: pending.clone(),
            })
        };
        let mut result = PodDevices {
            pod: pod_key.clone(),
            outcome: String::new(),
            message: None,
            claims: Vec::new(),
        };
        match outcome {
            Outcome::Allocated { allocations } => {
                result.outcome = "allocated".to_owned();
                for (mut claim, allocation) in pending.into_iter().zip(allocations) {
                    claim.status = Some(ResourceClaimStatus {
                        allocation: Some(allocation),
                        ..Default::default()
                    });
                    self.allocated.insert(key_of(&claim.metadata), (claim, BTreeSet::new()));
                }
                for (name, key, _) in &claims {
                    let Some((claim, holders)) = self.allocated.get_mut(key) else {
                        continue;
                    };
                    holders.insert(pod_key.clone());
                    let devices = devices_of(claim, &self.spec.resource_slices);
                    result.claims.push(ClaimDevices {
                        name: name.clone(),
                        claim: key.clone(),
                        devices,
                    });
                }
            }
            Outcome::Unschedulable { message } => {
                result.outcome = "unschedulable".to_owned();
                result.message = Some(if message.is_empty() {
                    "cannot allocate all claims on this node".to_owned()
                } else {
                    message
                });
            }
            Outcome::Error { message } => {
                result.outcome = "error".to_owned();
                result.message = Some(message);
            }
        }
        Ok(Some(result))
    }

    /// A pod left the node: claims no pod holds any more are freed.
    pub fn remove(&mut self, pod_key: &str) {
        self.allocated.retain(|_, (_, holders)| {
            holders.remove(pod_key);
            !holders.is_empty()
        });
    }

    fn node(&self) -> Node {
        self.spec.node.clone().unwrap_or_else(|| Node {
            metadata: ObjectMeta {
                name: Some("node".to_owned()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        })
    }
}

/// The devices of an allocated claim, each with its NUMA node.
fn devices_of(claim: &ResourceClaim, slices: &[ResourceSlice]) -> Vec<AllocatedDevice> {
    let results = claim
        .status
        .as_ref()
        .and_then(|s| s.allocation.as_ref())
        .and_then(|a: &AllocationResult| a.devices.as_ref())
        .and_then(|d| d.results.as_deref())
        .unwrap_or_default();
    results
        .iter()
        .map(|r| AllocatedDevice {
            request: r.request.clone(),
            driver: r.driver.clone(),
            pool: r.pool.clone(),
            device: r.device.clone(),
            numa_node: find_device(slices, &r.driver, &r.pool, &r.device).and_then(|d| numa_node(d, &r.driver)),
        })
        .collect()
}

fn find_device<'a>(slices: &'a [ResourceSlice], driver: &str, pool: &str, name: &str) -> Option<&'a Device> {
    // The newest generation of the pool holds the device the allocator saw.
    slices
        .iter()
        .filter(|s| s.spec.driver == driver && s.spec.pool.name == pool)
        .max_by_key(|s| s.spec.pool.generation)
        .map(|newest| newest.spec.pool.generation)
        .and_then(|generation| {
            slices
                .iter()
                .filter(|s| s.spec.driver == driver && s.spec.pool.name == pool && s.spec.pool.generation == generation)
                .flat_map(|s| s.spec.devices.iter().flatten())
                .find(|d| d.name == name)
        })
}

/// The standard `resource.kubernetes.io/numaNode`, else the driver's own
/// `numaNode` (a single value; a list attribute names several nodes and
/// gives none).
pub fn numa_node(device: &Device, driver: &str) -> Option<i64> {
    let attributes = device.attributes.as_ref()?;
    attributes
        .get("resource.kubernetes.io/numaNode")
        .or_else(|| attributes.get("numaNode"))
        .or_else(|| attributes.get(&format!("{driver}/numaNode")))
        .and_then(|a| a.int)
}

/// The devices of an allocated claim (its `status.allocation`), each with
/// its NUMA node as [`numa_node`] reads it from `slices` (the newest
/// generation of the device's pool).
pub fn claim_devices(claim: &ResourceClaim, slices: &[ResourceSlice]) -> Vec<AllocatedDevice> {
    devices_of(claim, slices)
}

/// The alignment rule: the devices DRA gave a pod (`devices`, allocated)
/// that sit on a NUMA node the kubelet did not pin the pod's CPUs and
/// memory to (`kubelet`), as `claim/request: device on NUMA node N`;
/// `None` when nothing is pinned or nothing was allocated. A device that
/// says no NUMA node is never counted.
pub fn misaligned_devices(devices: &PodDevices, kubelet: &BTreeSet<usize>) -> Option<Vec<String>> {
    (!kubelet.is_empty() && devices.outcome == "allocated").then(|| {
        devices
            .claims
            .iter()
            .flat_map(|claim| claim.devices.iter().map(move |d| (claim, d)))
            .filter_map(|(claim, d)| {
                let node = d.numa_node?;
                let on_kubelet = usize::try_from(node).is_ok_and(|n| kubelet.contains(&n));
                (!on_kubelet).then(|| format!("{}/{}: {} on NUMA node {node}", claim.name, d.request, d.device))
            })
            .collect::<Vec<_>>()
    })
}

/// What DRA gave the pod of one `add` event, and whether its devices share
/// the NUMA nodes of the CPUs and memory the kubelet pinned.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DraEventResult {
    pub event: usize,
    #[serde(flatten)]
    pub devices: PodDevices,
    /// The NUMA nodes of the pod's exclusive CPUs and pinned memory, as the
    /// kubelet decided; empty when it pinned nothing (or refused the pod).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub kubelet_numa_nodes: Vec<usize>,
    /// Devices on a NUMA node the kubelet's CPUs and memory are not on
    /// (`claim/request: device on node N`); absent when nothing is pinned,
    /// or no device says where it is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub misaligned: Option<Vec<String>>,
}

/// The pods' DRA allocations over a scenario's events: `adds[i]` is the pod
/// of event `i` (an `add`), `deletes[i]` the `namespace/name` an event
/// deletes; `containers[i]` what the kubelet pinned for the pod of event
/// `i`, `cpu_numa` a CPU's NUMA node.
///
/// # Errors
/// The event (`events[i].add.spec.resourceClaims[j]`) whose claims the
/// block lacks.
pub fn walk<'p>(
    spec: &DraSpec,
    release: &str,
    events: impl IntoIterator<Item = DraEventInput<'p>>,
    cpu_numa: impl Fn(u32) -> Option<usize>,
) -> Result<Vec<DraEventResult>, (usize, DraError)> {
    let mut state = DraState::new(spec.clone(), release);
    let mut out = Vec::new();
    for (index, event) in events.into_iter().enumerate() {
        match event {
            DraEventInput::Add { pod, placements } => {
                let Some(devices) = state.admit(pod).map_err(|e| (index, e))? else {
                    continue;
                };
                let mut kubelet: BTreeSet<usize> = BTreeSet::new();
                for placement in placements {
                    kubelet.extend(placement.cpus.iter().flat_map(|cpus| cpus.iter()).filter_map(&cpu_numa));
                    kubelet.extend(placement.memory_numa.iter().flatten().copied());
                }
                let misaligned = misaligned_devices(&devices, &kubelet);
                out.push(DraEventResult {
                    event: index,
                    devices,
                    kubelet_numa_nodes: kubelet.into_iter().collect(),
                    misaligned,
                });
            }
            DraEventInput::Delete { pod } => state.remove(pod),
            DraEventInput::Other => {}
        }
    }
    Ok(out)
}

/// One scenario event as [`walk`] reads it.
pub enum DraEventInput<'p> {
    /// An `add`: the pod, and what the kubelet pinned for its containers
    /// (none when it refused the pod).
    Add {
        pod: &'p k8s_openapi::api::core::v1::Pod,
        placements: &'p [topoalign_engine::ContainerPlacement],
    },
    /// A `delete` of `namespace/name`.
    Delete { pod: &'p str },
    /// Anything else.
    Other,
}
