//! `--dra-align`: devices from Dynamic Resource Allocation on the NUMA node
//! of the pod's CPUs and memory.
//!
//! The kubelet's Topology Manager never sees DRA devices (claims are
//! prepared after admission), and the scheduler's DRA allocator is
//! first-fit: on a given node it takes the first devices that match,
//! wherever the kubelet pins the pod's CPUs and memory. The only lever the
//! scheduler side has is the node. For a pod with claims, [`Dra::judge`]
//! predicts, per candidate node, the devices the scheduler's allocator will
//! pick there (`topoalign_dra`, with that node's slices and the claims
//! already allocated — the cluster's and those this extender assumed) and
//! compares their NUMA nodes with those the engine pinned the pod's CPUs
//! and memory to, by the one alignment rule
//! ([`topoalign_scenario::dra::misaligned_devices`]); a node where they
//! miss each other is refused with a line naming both.
//!
//! A pod's plain extended-resource request (`example.com/gpu: 1`) that a
//! DeviceClass serves through `spec.extendedResourceName` (KEP-5004, on by
//! default from 1.36) is judged the same way on a node whose allocatable,
//! as the scheduler sees it, lacks the resource: the scheduler allocates it
//! through a special claim after the pod's own
//! ([`topoalign_dra::allocate_pod`]), reported as claim
//! `extended-resources` and assumed as `<pod>-extended-resources` until the
//! cluster shows the pod's real one allocated. A pod the scheduler tries
//! again may still have its special claim of an earlier cycle (named in
//! `status.extendedResourceClaimStatus`, controlled by the pod): the
//! scheduler deletes it before it places the pod again, so its devices do
//! not count against the pod, and it does not confirm the new assumption.
//!
//! The node's allocatable is its listed Node object's, plus one per device
//! of each device-plugin resource the extender knows of the node's machine
//! (from the NRT object or the fleet) that the object does not list — as
//! `replay` counts them
//! (`topoalign_dra::extended::advertise_device_plugins`).
//!
//! A claim made from a template has the name the resourceclaim controller
//! gave it in `pod.status.resourceClaimStatuses`; until that entry exists,
//! or until the extender has seen the claim, the pod is not yet decidable
//! and every known node is refused saying so (the scheduler tries again).
//!
//! Owns: the cluster's DRA objects as last listed ([`DraObjects`]), the
//! allocations assumed for pods this extender placed, until the claims
//! show them or the assumption times out. Pure but for [`DraObjects::list`]
//! and [`poll`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Container, Node as K8sNode, Pod as K8sPod, PodSpec};
use k8s_openapi::api::resource::v1::{
    DeviceClaim, DeviceClass, ResourceClaim, ResourceClaimSpec, ResourceClaimStatus, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use topoalign_dra::extended::{
    ExtendedResourceClaim, SPECIAL_CLAIM_ANNOTATION, is_dra_extended_resource_name, pod_uses_classes,
};
use topoalign_dra::{AllocationCase, Outcome, PodCase, PodOutcome};
use topoalign_fleet::dra::alignment_verdict;
use topoalign_model::Machine;
use topoalign_scenario::dra::{ClaimDevices, DraSpec, EXTENDED_RESOURCES, ManifestError, PodDevices, claim_devices};

use crate::binder::ConnectError;
use crate::error::StateError;

/// The cluster's DRA objects, as one listing gives them.
#[derive(Clone, Debug, Default)]
pub struct DraObjects {
    /// Node objects (their names and labels decide which slices serve
    /// them); a node not listed is taken by its name alone.
    pub nodes: Vec<K8sNode>,
    pub device_classes: Vec<DeviceClass>,
    pub resource_slices: Vec<ResourceSlice>,
    /// Every ResourceClaim: allocated ones hold their devices.
    pub resource_claims: Vec<ResourceClaim>,
}

impl DraObjects {
    /// The objects of a manifest file (`kubectl get
    /// nodes,deviceclasses,resourceslices,resourceclaims -A -o yaml`, or
    /// YAML documents), read as `replay` reads a `dra:` block's manifests.
    ///
    /// # Errors
    /// [`ManifestError`]: the document, object and field that cannot be
    /// read.
    pub fn from_manifests(text: &str) -> Result<DraObjects, ManifestError> {
        let (spec, _skipped) = DraSpec::from_manifests(text)?;
        let DraSpec {
            node,
            device_classes,
            resource_slices,
            resource_claims,
            ..
        } = spec;
        Ok(DraObjects {
            nodes: node.into_iter().collect(),
            device_classes,
            resource_slices,
            resource_claims,
        })
    }

    /// Lists them from the API server.
    ///
    /// # Errors
    /// [`ListError`]: the first listing that fails, naming the kind.
    pub async fn list(client: &kube::Client) -> Result<DraObjects, ListError> {
        use kube::api::{Api, ListParams};
        let params = ListParams::default();
        let nodes: Api<K8sNode> = Api::all(client.clone());
        let classes: Api<DeviceClass> = Api::all(client.clone());
        let slices: Api<ResourceSlice> = Api::all(client.clone());
        let claims: Api<ResourceClaim> = Api::all(client.clone());
        let named = |kind: &'static str| move |source: kube::Error| ListError { kind, source };
        Ok(DraObjects {
            nodes: nodes.list(&params).await.map_err(named("Nodes"))?.items,
            device_classes: classes.list(&params).await.map_err(named("DeviceClasses"))?.items,
            resource_slices: slices.list(&params).await.map_err(named("ResourceSlices"))?.items,
            resource_claims: claims.list(&params).await.map_err(named("ResourceClaims"))?.items,
        })
    }
}

/// A listing of DRA objects the API server refused.
#[derive(Debug, thiserror::Error)]
#[error("cannot list {kind}: {source}")]
pub struct ListError {
    /// `Nodes`, `DeviceClasses`, `ResourceSlices` or `ResourceClaims`.
    pub kind: &'static str,
    #[source]
    pub source: kube::Error,
}

/// A pod manifest with claims that does not read as a Pod
/// ([`PodClaims::of_manifest`]).
#[derive(Debug, thiserror::Error)]
#[error("invalid pod: {path}: {source}")]
pub struct InvalidPod {
    /// The field, as `serde_path_to_error` names it.
    pub path: String,
    #[source]
    pub source: serde_json::Error,
}

/// A kube-scheduler release whose DRA allocator is not known ([`Dra::new`]).
#[derive(Debug, thiserror::Error)]
#[error("--dra-align: the scheduler release {release}: {source}")]
pub struct UnknownRelease {
    pub release: String,
    #[source]
    pub source: topoalign_dra::features::UnknownRelease,
}

/// What a pod asks of DRA: its claims, as the scheduler names them, and
/// its extended-resource requests a DeviceClass may serve.
#[derive(Clone, Debug, PartialEq)]
pub struct PodClaims {
    /// `namespace/name`.
    pub pod: String,
    pub uid: String,
    namespace: String,
    references: Vec<Reference>,
    /// The pod's name, namespace and containers' resources, when it
    /// requests an extended resource (`example.com/gpu`) a DeviceClass may
    /// serve ([`is_dra_extended_resource_name`]).
    extended: Option<Box<K8sPod>>,
    /// The special claim the scheduler made for the pod's extended
    /// resources in an earlier scheduling cycle, as the pod's
    /// `status.extendedResourceClaimStatus.resourceClaimName` names it.
    extended_claim: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Reference {
    /// `spec.resourceClaims[].name`.
    name: String,
    claim: ClaimName,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum ClaimName {
    /// The ResourceClaim's name (`resourceClaimName`, or the controller's
    /// entry in `status.resourceClaimStatuses`).
    Named(String),
    /// Made from this template; the controller has not said its name yet.
    NotYetCreated(String),
    /// The controller says no claim is needed.
    None,
}

impl PodClaims {
    /// The claims of a pod manifest; `None` when it references none and
    /// requests no extended resource a DeviceClass may serve.
    ///
    /// # Errors
    /// [`InvalidPod`]: the field that cannot be read.
    pub fn of_manifest(manifest: &serde_json::Value) -> Result<Option<PodClaims>, InvalidPod> {
        let has_claims = manifest
            .pointer("/spec/resourceClaims")
            .and_then(|c| c.as_array())
            .is_some_and(|c| !c.is_empty());
        if !has_claims && !manifest_requests_extended(manifest) {
            return Ok(None);
        }
        let pod: K8sPod = serde_path_to_error::deserialize(manifest).map_err(|e| InvalidPod {
            path: e.path().to_string(),
            source: e.into_inner(),
        })?;
        Ok(PodClaims::of_pod(&pod))
    }

    /// The claims of a pod; `None` when it references none and requests
    /// no extended resource a DeviceClass may serve.
    pub fn of_pod(pod: &K8sPod) -> Option<PodClaims> {
        let references = pod.spec.as_ref()?.resource_claims.as_deref().unwrap_or_default();
        let extended = extended_part(pod);
        if references.is_empty() && extended.is_none() {
            return None;
        }
        let namespace = pod
            .metadata
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("default")
            .to_owned();
        let statuses = pod
            .status
            .as_ref()
            .and_then(|s| s.resource_claim_statuses.as_deref())
            .unwrap_or_default();
        let references = references
            .iter()
            .map(|reference| {
                let claim = match (&reference.resource_claim_name, &reference.resource_claim_template_name) {
                    (Some(name), _) => ClaimName::Named(name.clone()),
                    (None, template) => match statuses.iter().find(|s| s.name == reference.name) {
                        Some(status) => match &status.resource_claim_name {
                            Some(name) => ClaimName::Named(name.clone()),
                            None => ClaimName::None,
                        },
                        None => ClaimName::NotYetCreated(template.clone().unwrap_or_default()),
                    },
                };
                Reference {
                    name: reference.name.clone(),
                    claim,
                }
            })
            .collect();
        Some(PodClaims {
            pod: format!("{namespace}/{}", pod.metadata.name.as_deref().unwrap_or_default()),
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            namespace,
            references,
            extended,
            extended_claim: pod
                .status
                .as_ref()
                .and_then(|s| s.extended_resource_claim_status.as_ref())
                .map(|s| s.resource_claim_name.clone())
                .filter(|name| !name.is_empty()),
        })
    }

    /// Whether `claim` (`key`: `namespace/name`) is the special claim the
    /// scheduler made for this pod's extended resources in an earlier
    /// cycle: annotated so, and controlled by the pod or named in its
    /// `status.extendedResourceClaimStatus`. The scheduler deletes it
    /// before it places the pod again (PreFilter finds it, Filter refuses
    /// every node, PostFilter deletes it), so it holds nothing against the
    /// pod; only a listing older than the deletion still shows it.
    fn is_own_special_claim(&self, key: &str, claim: &ResourceClaim) -> bool {
        is_special(claim)
            && ((!self.uid.is_empty() && owned_by(claim, &self.uid))
                || self
                    .extended_claim
                    .as_ref()
                    .is_some_and(|name| key == format!("{}/{name}", self.namespace)))
    }
}

/// Whether a container's `resources` (requests or limits) or the pod's
/// `overhead` in a manifest names an extended resource a DeviceClass may
/// serve — read from the JSON, so that other pods are not decoded twice.
fn manifest_requests_extended(manifest: &serde_json::Value) -> bool {
    let names = |map: Option<&serde_json::Value>| {
        map.and_then(serde_json::Value::as_object)
            .is_some_and(|m| m.keys().any(|name| is_dra_extended_resource_name(name)))
    };
    let mut containers = ["/spec/containers", "/spec/initContainers"]
        .into_iter()
        .filter_map(|path| manifest.pointer(path)?.as_array())
        .flatten();
    names(manifest.pointer("/spec/overhead"))
        || containers.any(|c| names(c.pointer("/resources/requests")) || names(c.pointer("/resources/limits")))
}

/// What the scheduler reads of a pod to serve its extended resources from
/// DRA (its name and namespace, containers' and init containers' names,
/// resources and restart policy, overhead); `None` when it requests no
/// extended resource a DeviceClass may serve.
fn extended_part(pod: &K8sPod) -> Option<Box<K8sPod>> {
    let spec = pod.spec.as_ref()?;
    let names_one = |resources: Option<&BTreeMap<String, Quantity>>| {
        resources.is_some_and(|r| r.keys().any(|name| is_dra_extended_resource_name(name)))
    };
    let mut containers = spec.containers.iter().chain(spec.init_containers.iter().flatten());
    let requests = containers.any(|c| {
        let resources = c.resources.as_ref();
        names_one(resources.and_then(|r| r.requests.as_ref())) || names_one(resources.and_then(|r| r.limits.as_ref()))
    });
    if !requests && !names_one(spec.overhead.as_ref()) {
        return None;
    }
    let slim = |c: &Container| Container {
        name: c.name.clone(),
        resources: c.resources.clone(),
        restart_policy: c.restart_policy.clone(),
        ..Container::default()
    };
    Some(Box::new(K8sPod {
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            containers: spec.containers.iter().map(slim).collect(),
            init_containers: spec.init_containers.as_ref().map(|c| c.iter().map(slim).collect()),
            overhead: spec.overhead.clone(),
            ..PodSpec::default()
        }),
        status: None,
    }))
}

/// An allocation this extender predicted for a pod it placed, held until
/// the claim shows an allocation (the scheduler wrote it) or the
/// assumption times out.
#[derive(Clone, Debug)]
struct Assumed {
    pod_uid: String,
    node: String,
    claim: ResourceClaim,
    since: Instant,
    /// For an assumed special claim: the pod's special claims of earlier
    /// cycles listed when it was assumed (`namespace/name`). They do not
    /// confirm it; only a new one does.
    earlier: BTreeSet<String>,
}

/// [`Dra::judge`]'s answer for one node.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    /// `Ok`: the devices and the kubelet's placement share a NUMA node (or
    /// there is nothing to align: nothing pinned, devices that say no NUMA
    /// node); `Err`: why the node is refused, in one line. A verdict, not
    /// an error: the line is what the scheduler shows for the node.
    pub verdict: Result<(), String>,
    /// The devices the allocator picks on the node, per claim.
    pub devices: Option<PodDevices>,
    /// The pod's claims not allocated yet, with the allocation predicted on
    /// the node (what to assume if the pod goes there).
    allocated: Vec<ResourceClaim>,
}

impl Judgement {
    fn refused(message: String) -> Judgement {
        Judgement {
            verdict: Err(message),
            devices: None,
            allocated: Vec::new(),
        }
    }
}

/// The allocator's input for one node (its classes and the slices that
/// can serve it), built once per listing and reused by every judgement on
/// the node; the claims are set per judgement.
type NodeCases = Arc<Mutex<HashMap<String, AllocationCase>>>;

/// The cluster's DRA side, for `--dra-align`.
#[derive(Clone, Debug)]
pub struct Dra {
    /// The kube-scheduler release whose allocator decides ("1.37").
    release: String,
    nodes: HashMap<String, K8sNode>,
    device_classes: Vec<DeviceClass>,
    resource_slices: Vec<ResourceSlice>,
    /// Per node, the allocator's input without claims; emptied by
    /// [`Dra::sync`]. (A clone of [`Dra`] shares it: same listing.)
    cases: NodeCases,
    /// By `namespace/name`.
    claims: BTreeMap<String, ResourceClaim>,
    /// By claim `namespace/name`.
    assumed: HashMap<String, Assumed>,
    /// Pods judged, by uid, for `bind` (which sends only names).
    seen: HashMap<String, (PodClaims, Instant)>,
    timeout: Duration,
}

/// `namespace/name` of an object.
fn key_of(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    )
}

fn is_allocated(claim: &ResourceClaim) -> bool {
    claim.status.as_ref().is_some_and(|s| s.allocation.is_some())
}

/// A claim the scheduler made for a pod's DRA-backed extended resources.
fn is_special(claim: &ResourceClaim) -> bool {
    claim
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.get(SPECIAL_CLAIM_ANNOTATION).is_some_and(|v| v == "true"))
}

fn owned_by(claim: &ResourceClaim, uid: &str) -> bool {
    claim
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|owner| owner.uid == uid)
}

/// The special claim as the extender assumes it: `<pod>-extended-resources`
/// in the pod's namespace (the real one has a random suffix), allocated.
fn special_claim(pod: &PodClaims, special: ExtendedResourceClaim) -> ResourceClaim {
    let name = pod.pod.rsplit_once('/').map_or(pod.pod.as_str(), |(_, name)| name);
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{EXTENDED_RESOURCES}")),
            namespace: Some(pod.namespace.clone()),
            annotations: Some(BTreeMap::from([(
                SPECIAL_CLAIM_ANNOTATION.to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(special.requests),
                ..DeviceClaim::default()
            }),
        }),
        status: Some(ResourceClaimStatus {
            allocation: Some(special.allocation),
            ..ResourceClaimStatus::default()
        }),
    }
}

impl Dra {
    /// No objects yet; `release` is the scheduler's ("1.34" … "1.37"),
    /// `timeout` how long an assumed allocation holds its devices.
    ///
    /// # Errors
    /// [`UnknownRelease`] when the allocator does not know the release.
    pub fn new(release: &str, timeout: Duration) -> Result<Dra, UnknownRelease> {
        topoalign_dra::features::scheduler_defaults(release).map_err(|source| UnknownRelease {
            release: release.to_owned(),
            source,
        })?;
        Ok(Dra {
            release: release.to_owned(),
            nodes: HashMap::new(),
            device_classes: Vec::new(),
            resource_slices: Vec::new(),
            cases: NodeCases::default(),
            claims: BTreeMap::new(),
            assumed: HashMap::new(),
            seen: HashMap::new(),
            timeout,
        })
    }

    /// A listing replaces the last; assumed allocations whose claims now
    /// show one (or are gone) are dropped.
    pub fn sync(&mut self, objects: DraObjects) {
        self.nodes = objects
            .nodes
            .into_iter()
            .filter_map(|n| Some((n.metadata.name.clone()?, n)))
            .collect();
        self.device_classes = objects.device_classes;
        self.resource_slices = objects.resource_slices;
        // A new listing: new per-node inputs, not shared with clones of the
        // old.
        self.cases = NodeCases::default();
        self.claims = objects
            .resource_claims
            .into_iter()
            .map(|c| (key_of(&c.metadata), c))
            .collect();
        let claims = &self.claims;
        self.assumed.retain(|key, assumed| {
            if is_special(&assumed.claim) {
                // The scheduler names the pod's real one
                // `<pod>-extended-resources-<random>`: found by its owner,
                // not one of an earlier cycle.
                !claims.iter().any(|(key, c)| {
                    is_special(c) && is_allocated(c) && owned_by(c, &assumed.pod_uid) && !assumed.earlier.contains(key)
                })
            } else {
                claims.get(key).is_some_and(|claim| !is_allocated(claim))
            }
        });
    }

    /// Drops assumptions and seen pods older than the timeout.
    pub fn expire(&mut self, now: Instant) {
        let timeout = self.timeout;
        self.assumed.retain(|_, a| now.duration_since(a.since) <= timeout);
        let kept_for = timeout.max(Duration::from_secs(60));
        self.seen.retain(|_, (_, at)| now.duration_since(*at) <= kept_for);
    }

    /// Remembers a pod judged now, for [`Dra::bound`].
    pub fn see(&mut self, pod: &PodClaims, now: Instant) {
        self.seen.insert(pod.uid.clone(), (pod.clone(), now));
    }

    /// The ResourceClaims of the last listing.
    pub fn claims_known(&self) -> usize {
        self.claims.len()
    }

    /// The DeviceClasses of the last listing.
    pub fn device_classes_known(&self) -> usize {
        self.device_classes.len()
    }

    /// The claims assumed allocated (`namespace/name` → node).
    pub fn assumptions(&self) -> BTreeMap<String, String> {
        self.assumed.iter().map(|(k, a)| (k.clone(), a.node.clone())).collect()
    }

    /// Whether `pod`'s devices on `node` and the NUMA nodes the kubelet
    /// pins its CPUs and memory to (`pinned`; empty: nothing pinned) meet.
    /// The node's device-plugin resources are its listed Node object's
    /// alone ([`Dra::judge_on`] adds those of its machine).
    pub fn judge(&self, pod: &PodClaims, node: &str, pinned: &BTreeSet<usize>) -> Judgement {
        self.judge_on(pod, node, None, pinned)
    }

    /// [`Dra::judge`] on a node whose machine (`machine`, as the extender
    /// knows it from its NRT object or the fleet) has device-plugin
    /// devices: the kubelet advertises one of its resource per device, so
    /// DRA does not serve that resource there.
    pub fn judge_on(
        &self,
        pod: &PodClaims,
        node: &str,
        machine: Option<&Machine>,
        pinned: &BTreeSet<usize>,
    ) -> Judgement {
        // The pod's claims: (pod's name for it, key, claim).
        let mut claims: Vec<(String, String, ResourceClaim)> = Vec::new();
        for reference in &pod.references {
            let name = match &reference.claim {
                ClaimName::None => continue,
                ClaimName::NotYetCreated(template) => {
                    return Judgement::refused(format!(
                        "DRA: the ResourceClaim of {} (from template {template}) is not created yet \
                         (no entry in status.resourceClaimStatuses): not yet decidable",
                        reference.name
                    ));
                }
                ClaimName::Named(name) => name,
            };
            let key = format!("{}/{name}", pod.namespace);
            let Some(claim) = self.claims.get(&key) else {
                return Judgement::refused(format!(
                    "DRA: the extender has not seen ResourceClaim {key} yet: not yet decidable"
                ));
            };
            claims.push((reference.name.clone(), key, claim.clone()));
        }
        // The pod's extended resources, when a DeviceClass serves one.
        let extended = pod
            .extended
            .as_deref()
            .filter(|p| pod_uses_classes(&self.release, p, &self.device_classes));
        if claims.is_empty() && extended.is_none() {
            return Judgement {
                verdict: Ok(()),
                devices: None,
                allocated: Vec::new(),
            };
        }
        let own: BTreeSet<&str> = claims.iter().map(|(_, key, _)| key.as_str()).collect();
        let pending: Vec<ResourceClaim> = claims
            .iter()
            .filter(|(_, _, claim)| !is_allocated(claim))
            .map(|(_, _, claim)| claim.clone())
            .collect();
        let mut allocated: Vec<ResourceClaim> = Vec::new();
        let mut special: Option<ResourceClaim> = None;
        if !pending.is_empty() || extended.is_some() {
            let in_use: Vec<ResourceClaim> = self
                .claims
                .iter()
                // The pod's own allocated claims hold their devices against
                // its pending ones and its special claim too, as the
                // scheduler's allocated-devices tracker counts every claim
                // — but for its special claim of an earlier cycle, which
                // the scheduler deletes before it places the pod again.
                .filter(|(key, claim)| is_allocated(claim) && !pod.is_own_special_claim(key, claim))
                .map(|(_, claim)| claim.clone())
                .chain(
                    self.assumed
                        .iter()
                        .filter(|(key, a)| a.pod_uid != pod.uid && !own.contains(key.as_str()))
                        .map(|(_, a)| a.claim.clone()),
                )
                .collect();
            let outcome = match extended {
                Some(manifest) => self.allocate_pod(node, machine, in_use, pending.clone(), manifest),
                None => self.allocate(node, in_use, pending.clone()).into(),
            };
            match outcome {
                PodOutcome::Allocated {
                    allocations,
                    extended_resource_claim,
                } => {
                    for (mut claim, allocation) in pending.into_iter().zip(allocations) {
                        claim.status = Some(ResourceClaimStatus {
                            allocation: Some(allocation),
                            ..claim.status.unwrap_or_default()
                        });
                        allocated.push(claim);
                    }
                    special = extended_resource_claim
                        .filter(|c| !c.requests.is_empty())
                        .map(|c| special_claim(pod, c));
                }
                PodOutcome::Unschedulable { message } => {
                    let why = if message.is_empty() {
                        "cannot allocate all claims".to_owned()
                    } else {
                        message
                    };
                    return Judgement::refused(format!("DRA: the scheduler's allocator finds no devices here: {why}"));
                }
                PodOutcome::Error { message } => return Judgement::refused(format!("DRA: {message}")),
            }
        }
        let mut listed: Vec<ClaimDevices> = claims
            .iter()
            .map(|(name, key, claim)| {
                let claim = allocated.iter().find(|c| key_of(&c.metadata) == *key).unwrap_or(claim);
                ClaimDevices {
                    name: name.clone(),
                    claim: key.clone(),
                    devices: claim_devices(claim, &self.resource_slices),
                }
            })
            .collect();
        if let Some(claim) = special {
            listed.push(ClaimDevices {
                name: EXTENDED_RESOURCES.to_owned(),
                claim: key_of(&claim.metadata),
                devices: claim_devices(&claim, &self.resource_slices),
            });
            allocated.push(claim);
        }
        let devices = PodDevices {
            pod: pod.pod.clone(),
            outcome: "allocated".to_owned(),
            message: None,
            claims: listed,
        };
        let verdict = alignment_verdict(&devices, pinned).map_or(Ok(()), |m| Err(m.to_string()));
        Judgement {
            verdict,
            devices: Some(devices),
            allocated,
        }
    }

    /// The scheduler's allocator on `node` for `claims`, `in_use` holding
    /// their devices. The node's classes and slices are copied once per
    /// listing (the first judgement on the node), not per judgement.
    fn allocate(&self, node: &str, in_use: Vec<ResourceClaim>, claims: Vec<ResourceClaim>) -> Outcome {
        let Ok(mut cases) = self.cases.lock() else {
            return Outcome::Error {
                message: "internal: the per-node cache lock is poisoned".to_owned(),
            };
        };
        let case = cases.entry(node.to_owned()).or_insert_with(|| self.node_case(node));
        case.allocated_claims = in_use;
        case.claims = claims;
        let outcome = topoalign_dra::allocate(case);
        case.allocated_claims = Vec::new();
        case.claims = Vec::new();
        outcome
    }

    /// The scheduler's DynamicResources plugin on `node` for a pod whose
    /// extended resources a DeviceClass serves (`pod`): its `claims`, then
    /// the special claim, `in_use` holding their devices; the node's
    /// allocatable counts `machine`'s device-plugin devices.
    fn allocate_pod(
        &self,
        node: &str,
        machine: Option<&Machine>,
        in_use: Vec<ResourceClaim>,
        claims: Vec<ResourceClaim>,
        pod: &K8sPod,
    ) -> PodOutcome {
        let Ok(mut cases) = self.cases.lock() else {
            return PodOutcome::Error {
                message: "internal: the per-node cache lock is poisoned".to_owned(),
            };
        };
        let case = cases.entry(node.to_owned()).or_insert_with(|| self.node_case(node));
        let mut k8s_node = case.node.clone();
        if let Some(machine) = machine {
            topoalign_dra::extended::advertise_device_plugins(
                &mut k8s_node,
                machine
                    .devices()
                    .iter()
                    .map(|(resource, devices)| (resource.as_str(), devices.len())),
            );
        }
        topoalign_dra::allocate_pod(&PodCase {
            release: self.release.clone(),
            node: k8s_node,
            device_classes: case.device_classes.clone(),
            resource_slices: case.resource_slices.clone(),
            allocated_claims: in_use,
            claims,
            pod: pod.clone(),
        })
    }

    /// The allocator's input on `node` without claims.
    fn node_case(&self, node: &str) -> AllocationCase {
        AllocationCase {
            release: self.release.clone(),
            node: self.node(node),
            device_classes: self.device_classes.clone(),
            // Slices of other nodes serve no pool here.
            resource_slices: self
                .resource_slices
                .iter()
                .filter(|s| s.spec.node_name.as_deref().is_none_or(|n| n == node))
                .cloned()
                .collect(),
            allocated_claims: Vec::new(),
            claims: Vec::new(),
        }
    }

    /// `pod` goes to `node` with `judgement`'s devices: they are in use
    /// until the claims show the scheduler's allocation.
    pub fn assume(&mut self, pod: &PodClaims, node: &str, judgement: &Judgement, now: Instant) {
        self.assumed.retain(|_, a| a.pod_uid != pod.uid);
        let earlier: BTreeSet<String> = self
            .claims
            .iter()
            .filter(|(key, claim)| pod.is_own_special_claim(key, claim))
            .map(|(key, _)| key.clone())
            .collect();
        for claim in &judgement.allocated {
            self.assumed.insert(
                key_of(&claim.metadata),
                Assumed {
                    pod_uid: pod.uid.clone(),
                    node: node.to_owned(),
                    claim: claim.clone(),
                    since: now,
                    earlier: if is_special(claim) {
                        earlier.clone()
                    } else {
                        BTreeSet::new()
                    },
                },
            );
        }
    }

    /// The scheduler bound the pod `uid` to `node` (`machine`: the node's,
    /// as [`Dra::judge_on`] takes it; `pinned`: where the kubelet pins it
    /// there): its predicted devices are assumed there.
    pub fn bound(&mut self, uid: &str, node: &str, machine: Option<&Machine>, pinned: &BTreeSet<usize>, now: Instant) {
        let Some((pod, _)) = self.seen.get(uid).cloned() else {
            return;
        };
        if self.assumed.values().any(|a| a.pod_uid == uid && a.node == node) {
            return;
        }
        let judgement = self.judge_on(&pod, node, machine, pinned);
        self.assume(&pod, node, &judgement, now);
    }

    fn node(&self, name: &str) -> K8sNode {
        self.nodes.get(name).cloned().unwrap_or_else(|| K8sNode {
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                ..ObjectMeta::default()
            },
            ..K8sNode::default()
        })
    }
}

/// A client with the default configuration (in-cluster, else the
/// kubeconfig), for [`poll`].
///
/// # Errors
/// [`ConnectError`] when neither is available.
pub async fn connect() -> Result<kube::Client, ConnectError> {
    crate::binder::default_client().await
}

/// Where [`poll`] puts each listing: the extender's shared cluster (its
/// [`Dra`], when `--dra-align` is on) implements it in `server`.
pub trait DraSink: Send + 'static {
    /// Replaces the last listing.
    ///
    /// # Errors
    /// [`StateError`] for the log (the next round tries again).
    fn sync_dra(&self, objects: DraObjects) -> Result<(), StateError>;
}

/// Lists the cluster's DRA objects every `every` into `sink`, until the
/// task is dropped; failures are told to `report` and the next round tries
/// again.
pub async fn poll(client: kube::Client, sink: impl DraSink, every: Duration, report: impl Fn(String)) {
    loop {
        match DraObjects::list(&client).await {
            Ok(objects) => {
                if let Err(error) = sink.sync_dra(objects) {
                    report(error.to_string());
                }
            }
            Err(error) => report(format!("--dra-align: {error}")),
        }
        tokio::time::sleep(every).await;
    }
}
