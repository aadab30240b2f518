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

use k8s_openapi::api::core::v1::{Node as K8sNode, Pod as K8sPod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimStatus, ResourceSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use topoalign_dra::{AllocationCase, Outcome};
use topoalign_fleet::dra::alignment_verdict;
use topoalign_scenario::dra::{ClaimDevices, DraSpec, ManifestError, PodDevices, claim_devices};

use crate::binder::ConnectError;
use crate::server::StateError;

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

/// What a pod asks of DRA: its claims, as the scheduler names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodClaims {
    /// `namespace/name`.
    pub pod: String,
    pub uid: String,
    namespace: String,
    references: Vec<Reference>,
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
    /// The claims of a pod manifest; `None` when it references none.
    ///
    /// # Errors
    /// [`InvalidPod`]: the field that cannot be read.
    pub fn of_manifest(manifest: &serde_json::Value) -> Result<Option<PodClaims>, InvalidPod> {
        let has_claims = manifest
            .pointer("/spec/resourceClaims")
            .and_then(|c| c.as_array())
            .is_some_and(|c| !c.is_empty());
        if !has_claims {
            return Ok(None);
        }
        let pod: K8sPod = serde_path_to_error::deserialize(manifest).map_err(|e| InvalidPod {
            path: e.path().to_string(),
            source: e.into_inner(),
        })?;
        Ok(PodClaims::of_pod(&pod))
    }

    /// The claims of a pod; `None` when it references none.
    pub fn of_pod(pod: &K8sPod) -> Option<PodClaims> {
        let references = pod.spec.as_ref()?.resource_claims.as_deref().unwrap_or_default();
        if references.is_empty() {
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
        })
    }
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
        self.assumed
            .retain(|key, _| claims.get(key).is_some_and(|claim| !is_allocated(claim)));
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

    /// The claims assumed allocated (`namespace/name` → node).
    pub fn assumptions(&self) -> BTreeMap<String, String> {
        self.assumed.iter().map(|(k, a)| (k.clone(), a.node.clone())).collect()
    }

    /// Whether `pod`'s devices on `node` and the NUMA nodes the kubelet
    /// pins its CPUs and memory to (`pinned`; empty: nothing pinned) meet.
    pub fn judge(&self, pod: &PodClaims, node: &str, pinned: &BTreeSet<usize>) -> Judgement {
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
        if claims.is_empty() {
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
        if !pending.is_empty() {
            let in_use: Vec<ResourceClaim> = self
                .claims
                .iter()
                .filter(|(key, claim)| is_allocated(claim) && !own.contains(key.as_str()))
                .map(|(_, claim)| claim.clone())
                .chain(
                    self.assumed
                        .iter()
                        .filter(|(key, a)| a.pod_uid != pod.uid && !own.contains(key.as_str()))
                        .map(|(_, a)| a.claim.clone()),
                )
                .collect();
            match self.allocate(node, in_use, pending.clone()) {
                Outcome::Allocated { allocations } => {
                    for (mut claim, allocation) in pending.into_iter().zip(allocations) {
                        claim.status = Some(ResourceClaimStatus {
                            allocation: Some(allocation),
                            ..claim.status.unwrap_or_default()
                        });
                        allocated.push(claim);
                    }
                }
                Outcome::Unschedulable { message } => {
                    let why = if message.is_empty() {
                        "cannot allocate all claims".to_owned()
                    } else {
                        message
                    };
                    return Judgement::refused(format!("DRA: the scheduler's allocator finds no devices here: {why}"));
                }
                Outcome::Error { message } => return Judgement::refused(format!("DRA: {message}")),
            }
        }
        let devices = PodDevices {
            pod: pod.pod.clone(),
            outcome: "allocated".to_owned(),
            message: None,
            claims: claims
                .iter()
                .map(|(name, key, claim)| {
                    let claim = allocated.iter().find(|c| key_of(&c.metadata) == *key).unwrap_or(claim);
                    ClaimDevices {
                        name: name.clone(),
                        claim: key.clone(),
                        devices: claim_devices(claim, &self.resource_slices),
                    }
                })
                .collect(),
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
        let case = cases.entry(node.to_owned()).or_insert_with(|| AllocationCase {
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
        });
        case.allocated_claims = in_use;
        case.claims = claims;
        let outcome = topoalign_dra::allocate(case);
        case.allocated_claims = Vec::new();
        case.claims = Vec::new();
        outcome
    }

    /// `pod` goes to `node` with `judgement`'s devices: they are in use
    /// until the claims show the scheduler's allocation.
    pub fn assume(&mut self, pod: &PodClaims, node: &str, judgement: &Judgement, now: Instant) {
        self.assumed.retain(|_, a| a.pod_uid != pod.uid);
        for claim in &judgement.allocated {
            self.assumed.insert(
                key_of(&claim.metadata),
                Assumed {
                    pod_uid: pod.uid.clone(),
                    node: node.to_owned(),
                    claim: claim.clone(),
                    since: now,
                },
            );
        }
    }

    /// The scheduler bound the pod `uid` to `node` (`pinned`: where the
    /// kubelet pins it there): its predicted devices are assumed there.
    pub fn bound(&mut self, uid: &str, node: &str, pinned: &BTreeSet<usize>, now: Instant) {
        let Some((pod, _)) = self.seen.get(uid).cloned() else {
            return;
        };
        if self.assumed.values().any(|a| a.pod_uid == uid && a.node == node) {
            return;
        }
        let judgement = self.judge(&pod, node, pinned);
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
