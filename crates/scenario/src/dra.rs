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
use topoalign_dra::AllocationCase;
use topoalign_dra::extended::{self, ExtendedResourceClaim, PodCase, PodOutcome};

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

/// A pod's claim, resolved ([`DraState::resolve`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedClaim {
    /// The pod's name for it (`spec.resourceClaims[].name`).
    pub name: String,
    /// `namespace/name` of the ResourceClaim.
    pub key: String,
    pub claim: ResourceClaim,
    pub source: ClaimSource,
}

/// Where a pod's claim comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimSource {
    /// The ResourceClaim `namespace/name` the pod names.
    Claim(String),
    /// The ResourceClaimTemplate `namespace/name` the claim is made from.
    Template(String),
}

/// The claims of the scenario as the replay goes: which are allocated, and
/// which pods hold them.
#[derive(Clone, Debug)]
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
        let extended = extended::pod_uses_classes(&self.release, pod, &self.spec.device_classes);
        if references.is_empty() && !extended {
            return Ok(None);
        }
        let pod_key = key_of(&pod.metadata);
        let claims: Vec<(String, String, ResourceClaim)> = self
            .resolve(pod)?
            .into_iter()
            .map(|r| (r.name, r.key, r.claim))
            .collect();
        let pending: Vec<ResourceClaim> = claims
            .iter()
            .filter(|(_, key, _)| !self.allocated.contains_key(key))
            .map(|(_, _, claim)| claim.clone())
            .collect();
        let outcome = if extended {
            // The scheduler's DynamicResources plugin serves the pod's
            // extended resources with a special claim, allocated after the
            // pod's own.
            topoalign_dra::allocate_pod(&PodCase {
                release: self.release.clone(),
                node: self.node(),
                device_classes: self.spec.device_classes.clone(),
                resource_slices: self.spec.resource_slices.clone(),
                allocated_claims: self.allocated.values().map(|(claim, _)| claim.clone()).collect(),
                claims: pending.clone(),
                pod: pod.clone(),
            })
        } else if pending.is_empty() {
            PodOutcome::Allocated {
                allocations: Vec::new(),
                extended_resource_claim: None,
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
            .into()
        };
        if references.is_empty()
            && matches!(
                outcome,
                PodOutcome::Allocated {
                    extended_resource_claim: None,
                    ..
                }
            )
        {
            // Device plugins serve the pod's extended resources on this node.
            return Ok(None);
        }
        let mut result = PodDevices {
            pod: pod_key.clone(),
            outcome: String::new(),
            message: None,
            claims: Vec::new(),
        };
        match outcome {
            PodOutcome::Allocated {
                allocations,
                extended_resource_claim,
            } => {
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
                if let Some(special) = extended_resource_claim {
                    let claim = special_claim(pod, special);
                    let key = key_of(&claim.metadata);
                    let devices = devices_of(&claim, &self.spec.resource_slices);
                    self.allocated
                        .insert(key.clone(), (claim, BTreeSet::from([pod_key.clone()])));
                    result.claims.push(ClaimDevices {
                        name: EXTENDED_RESOURCES.to_owned(),
                        claim: key,
                        devices,
                    });
                }
            }
            PodOutcome::Unschedulable { message } => {
                result.outcome = "unschedulable".to_owned();
                result.message = Some(if message.is_empty() {
                    "cannot allocate all claims on this node".to_owned()
                } else {
                    message
                });
            }
            PodOutcome::Error { message } => {
                result.outcome = "error".to_owned();
                result.message = Some(message);
            }
        }
        Ok(Some(result))
    }

    /// The claims a pod references, resolved as [`DraState::admit`] does:
    /// a template gives the claim `<pod>-<claim>` in the pod's namespace,
    /// a name gives the block's claim.
    ///
    /// # Errors
    /// [`DraError`] when a claim or template the pod names is not in the
    /// block.
    pub fn resolve(&self, pod: &k8s_openapi::api::core::v1::Pod) -> Result<Vec<ResolvedClaim>, DraError> {
        let references = pod
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.as_deref())
            .unwrap_or_default();
        let namespace = pod
            .metadata
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("default");
        let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
        let mut claims = Vec::new();
        for (index, reference) in references.iter().enumerate() {
            let (claim, source) = match (&reference.resource_claim_name, &reference.resource_claim_template_name) {
                (Some(name), _) => {
                    let claim = self
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
                        })?;
                    let source = ClaimSource::Claim(key_of(&claim.metadata));
                    (claim, source)
                }
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
                    let claim = ResourceClaim {
                        metadata: ObjectMeta {
                            name: Some(format!("{pod_name}-{}", reference.name)),
                            namespace: Some(namespace.to_owned()),
                            ..ObjectMeta::default()
                        },
                        spec: found.spec.as_ref().and_then(|s| s.spec.clone()),
                        status: None,
                    };
                    (claim, ClaimSource::Template(key_of(&found.metadata)))
                }
                (None, None) => {
                    return Err(DraError::Claim {
                        index,
                        message: "names neither resourceClaimName nor resourceClaimTemplateName".to_owned(),
                    });
                }
            };
            claims.push(ResolvedClaim {
                name: reference.name.clone(),
                key: key_of(&claim.metadata),
                claim,
                source,
            });
        }
        Ok(claims)
    }

    /// The block.
    pub fn spec(&self) -> &DraSpec {
        &self.spec
    }

    /// The block, to change (a counterfactual: the claims allocated stay).
    pub fn spec_mut(&mut self) -> &mut DraSpec {
        &mut self.spec
    }

    /// The release whose allocator decides ("1.37").
    pub fn release(&self) -> &str {
        &self.release
    }

    /// The node as the scheduler sees it.
    pub fn scheduler_node(&self) -> Node {
        self.node()
    }

    /// The claims allocated now (with `status.allocation`), in key order.
    pub fn allocated_claims(&self) -> Vec<ResourceClaim> {
        self.allocated.values().map(|(claim, _)| claim.clone()).collect()
    }

    /// Whether the claim `namespace/name` is allocated now.
    pub fn is_allocated(&self, key: &str) -> bool {
        self.allocated.contains_key(key)
    }

    /// Takes the block's claims that carry `status.allocation` as
    /// allocated already (a live cluster's claims, `kubectl get
    /// resourceclaims -o yaml`), held until the end.
    pub fn hold_allocated(&mut self) {
        for claim in &self.spec.resource_claims {
            let allocated = claim.status.as_ref().is_some_and(|s| s.allocation.is_some());
            if allocated {
                let key = key_of(&claim.metadata);
                self.allocated.insert(
                    key.clone(),
                    (claim.clone(), BTreeSet::from([format!("(allocated) {key}")])),
                );
            }
        }
    }

    /// A pod left the node: claims no pod holds any more are freed.
    pub fn remove(&mut self, pod_key: &str) {
        self.allocated.retain(|_, (_, holders)| {
            holders.remove(pod_key);
            !holders.is_empty()
        });
    }

    fn node(&self) -> Node {
        self.spec.node.clone().unwrap_or_else(default_node)
    }
}

/// The name a pod's [`ClaimDevices`] gives the claim the scheduler made
/// for its DRA-backed extended resources.
pub const EXTENDED_RESOURCES: &str = "extended-resources";

/// The special claim as the API server holds it once the scheduler's
/// PreBind created it: `<pod>-extended-resources` (the real name has a
/// random suffix) in the pod's namespace, owned by the pod, allocated.
fn special_claim(pod: &k8s_openapi::api::core::v1::Pod, special: ExtendedResourceClaim) -> ResourceClaim {
    let namespace = pod
        .metadata
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or("default");
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}-{EXTENDED_RESOURCES}",
                pod.metadata.name.as_deref().unwrap_or_default()
            )),
            namespace: Some(namespace.to_owned()),
            annotations: Some(BTreeMap::from([(
                extended::SPECIAL_CLAIM_ANNOTATION.to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(k8s_openapi::api::resource::v1::ResourceClaimSpec {
            devices: Some(k8s_openapi::api::resource::v1::DeviceClaim {
                requests: Some(special.requests),
                ..Default::default()
            }),
        }),
        status: Some(ResourceClaimStatus {
            allocation: Some(special.allocation),
            ..Default::default()
        }),
    }
}

/// The scenario's node as the scheduler sees it, with the device-plugin
/// resources of the machine in its allocatable (the kubelet advertises one
/// per device) unless the block's node lists the resource itself: a
/// resource a device plugin serves is not DRA's.
pub fn with_device_plugin_allocatable(spec: &DraSpec, machine: &topoalign_model::Machine) -> DraSpec {
    let mut spec = spec.clone();
    if machine.devices().is_empty() {
        return spec;
    }
    let node = spec.node.get_or_insert_with(default_node);
    topoalign_dra::extended::advertise_device_plugins(
        node,
        machine
            .devices()
            .iter()
            .map(|(resource, devices)| (resource.as_str(), devices.len())),
    );
    spec
}

fn default_node() -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("node".to_owned()),
            ..ObjectMeta::default()
        },
        ..Node::default()
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

/// The NUMA nodes of the exclusive CPUs and pinned memory of a pod's
/// containers, as the kubelet placed them (`cpu_numa`: a CPU's NUMA node);
/// empty when it pinned nothing.
pub fn pinned_numa_nodes(
    placements: &[topoalign_engine::ContainerPlacement],
    cpu_numa: impl Fn(u32) -> Option<usize>,
) -> BTreeSet<usize> {
    let mut nodes = BTreeSet::new();
    for placement in placements {
        nodes.extend(placement.cpus.iter().flat_map(|cpus| cpus.iter()).filter_map(&cpu_numa));
        nodes.extend(placement.memory_numa.iter().flatten().copied());
    }
    nodes
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
                let kubelet = pinned_numa_nodes(placements, &cpu_numa);
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

/// Why a file of DRA manifests cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    #[error("document {document}: {message}")]
    Document { document: usize, message: String },
    #[error("document {document}: {kind} {name}: {path}: {message}")]
    Field {
        document: usize,
        kind: String,
        name: String,
        path: String,
        message: String,
    },
}

impl DraSpec {
    /// The block made of Kubernetes manifests — `DeviceClass`,
    /// `ResourceSlice`, `ResourceClaim` (with `status.allocation` when
    /// allocated already), `ResourceClaimTemplate`, one `Node`, and `List`s
    /// of them (`kubectl get deviceclasses,resourceslices,resourceclaims
    /// -A -o yaml`) — in YAML documents or JSON. Other kinds are skipped
    /// and returned by kind and name.
    ///
    /// # Errors
    /// [`ManifestError`] naming the document (1-based), the object and the
    /// field.
    pub fn from_manifests(text: &str) -> Result<(DraSpec, Vec<String>), ManifestError> {
        let mut spec = DraSpec::default();
        let mut skipped = Vec::new();
        for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            let document_number = index + 1;
            let value = serde_json::Value::deserialize(document).map_err(|e| ManifestError::Document {
                document: document_number,
                message: e.to_string(),
            })?;
            let mut objects = vec![value];
            while let Some(value) = objects.pop() {
                if value.is_null() {
                    continue;
                }
                let kind = value
                    .get("kind")
                    .and_then(|k| k.as_str())
                    .unwrap_or_default()
                    .to_owned();
                let name = value
                    .pointer("/metadata/name")
                    .and_then(|n| n.as_str())
                    .unwrap_or_default()
                    .to_owned();
                fn read<T: serde::de::DeserializeOwned>(
                    value: serde_json::Value,
                    document: usize,
                    kind: &str,
                    name: &str,
                ) -> Result<T, ManifestError> {
                    serde_path_to_error::deserialize(value).map_err(|e| ManifestError::Field {
                        document,
                        kind: kind.to_owned(),
                        name: name.to_owned(),
                        path: e.path().to_string(),
                        message: e.inner().to_string(),
                    })
                }
                match kind.as_str() {
                    "List"
                    | "DeviceClassList"
                    | "ResourceSliceList"
                    | "ResourceClaimList"
                    | "ResourceClaimTemplateList" => {
                        let items = value
                            .get("items")
                            .and_then(|i| i.as_array())
                            .cloned()
                            .unwrap_or_default();
                        objects.extend(items.into_iter().rev());
                    }
                    "DeviceClass" => spec.device_classes.push(read(value, document_number, &kind, &name)?),
                    "ResourceSlice" => spec.resource_slices.push(read(value, document_number, &kind, &name)?),
                    "ResourceClaim" => spec.resource_claims.push(read(value, document_number, &kind, &name)?),
                    "ResourceClaimTemplate" => {
                        spec.resource_claim_templates
                            .push(read(value, document_number, &kind, &name)?);
                    }
                    "Node" if spec.node.is_none() => spec.node = Some(read(value, document_number, &kind, &name)?),
                    "" => {
                        return Err(ManifestError::Document {
                            document: document_number,
                            message: "an object without kind".to_owned(),
                        });
                    }
                    _ => skipped.push(format!("document {document_number}: {kind} {name}")),
                }
            }
        }
        Ok((spec, skipped))
    }

    /// This block with `other`'s objects added after its own (`other`'s
    /// node when this one names none).
    pub fn extend(&mut self, other: DraSpec) {
        if self.node.is_none() {
            self.node = other.node;
        }
        self.device_classes.extend(other.device_classes);
        self.resource_slices.extend(other.resource_slices);
        self.resource_claims.extend(other.resource_claims);
        self.resource_claim_templates.extend(other.resource_claim_templates);
    }
}
