//! A live cluster's Dynamic Resource Allocation devices: per node the
//! ResourceSlices published for it and the devices allocated claims hold
//! there, with the pods holding them ([`NodeDra`]); the free ones per NUMA
//! node as the fleet report counts them
//! (`topoalign_fleet::stranded::dra_free`); and, for a pod with claims,
//! the scheduler's allocator asked on one node ([`node_state`], through
//! `topoalign_scenario::dra::DraState` as `explain --dra` asks it).
//!
//! A node's slices are those whose `spec.nodeName` is the node: a device
//! that a slice offers to several nodes (`allNodes`, `nodeSelector`) is on
//! no node's NUMA node. A device's NUMA node is its
//! `resource.kubernetes.io/numaNode` attribute (or its driver's
//! `numaNode`), `topoalign_scenario::dra::numa_node`'s rule.
//!
//! Pure. Must not touch: allocation (`topoalign-dra`'s, asked through the
//! scenario crate), what is free or stranded (`topoalign-fleet`'s).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Node as K8sNode, Pod as K8sPod};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use topoalign_scenario::dra::{DraSpec, DraState};

/// One node's DRA devices.
#[derive(Clone, Debug, Default)]
pub struct NodeDra {
    /// The ResourceSlices whose `spec.nodeName` is this node (every
    /// generation; the newest of each pool counts).
    pub slices: Vec<ResourceSlice>,
    /// The allocated claims holding devices of these slices.
    pub claims: Vec<ResourceClaim>,
    /// Each device those claims hold here, by driver, pool and device.
    pub held: Vec<HeldDevice>,
}

/// A DRA device an allocated claim holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HeldDevice {
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// From its `numaNode` attribute; `None`: it says none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa: Option<usize>,
    /// The ResourceClaim (`namespace/name`).
    pub claim: String,
    /// The pods it is reserved for (`status.reservedFor`): `namespace/name`
    /// and uid. Empty: allocated, reserved for no pod (yet).
    pub pods: Vec<(String, String)>,
}

impl HeldDevice {
    /// `driver/pool/device`.
    pub fn address(&self) -> String {
        format!("{}/{}/{}", self.driver, self.pool, self.device)
    }
}

/// One device of a node's slices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeDevice {
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// From its `numaNode` attribute; `None`: it says none.
    pub numa: Option<usize>,
    /// The allocated claim holding it, if one does.
    pub held: Option<HeldDevice>,
}

impl NodeDevice {
    /// `driver/pool/device`.
    pub fn address(&self) -> String {
        format!("{}/{}/{}", self.driver, self.pool, self.device)
    }
}

impl NodeDra {
    /// Every device of the node's slices (the newest generation of each
    /// pool, as the allocator sees them), in slice order, each with the
    /// claim holding it.
    pub fn devices(&self) -> Vec<NodeDevice> {
        let newest = |driver: &str, pool: &str| {
            self.slices
                .iter()
                .filter(|s| s.spec.driver == driver && s.spec.pool.name == pool)
                .map(|s| s.spec.pool.generation)
                .max()
        };
        let mut out = Vec::new();
        for slice in &self.slices {
            let (driver, pool) = (slice.spec.driver.as_str(), slice.spec.pool.name.as_str());
            if newest(driver, pool) != Some(slice.spec.pool.generation) {
                continue;
            }
            for device in slice.spec.devices.iter().flatten() {
                out.push(NodeDevice {
                    driver: driver.to_owned(),
                    pool: pool.to_owned(),
                    device: device.name.clone(),
                    numa: topoalign_scenario::dra::numa_node(device, driver).and_then(|n| usize::try_from(n).ok()),
                    held: self
                        .held
                        .iter()
                        .find(|h| h.driver == driver && h.pool == pool && h.device == device.name)
                        .cloned(),
                });
            }
        }
        out
    }

    /// The node's DRA devices of `dra` (the cluster's objects).
    pub fn of(node: &str, dra: &DraSpec) -> NodeDra {
        let slices: Vec<ResourceSlice> = dra
            .resource_slices
            .iter()
            .filter(|s| s.spec.node_name.as_deref() == Some(node))
            .cloned()
            .collect();
        let pools: BTreeSet<(&str, &str)> = slices
            .iter()
            .map(|s| (s.spec.driver.as_str(), s.spec.pool.name.as_str()))
            .collect();
        let mut claims = Vec::new();
        let mut held = Vec::new();
        for claim in &dra.resource_claims {
            let here: Vec<_> = topoalign_scenario::dra::claim_devices(claim, &slices)
                .into_iter()
                .filter(|d| pools.contains(&(d.driver.as_str(), d.pool.as_str())))
                .collect();
            if here.is_empty() {
                continue;
            }
            // Shown as held only what the allocator counts as held (an
            // admin-access result holds nothing and stays free).
            let holds = topoalign_dra::held_devices(std::slice::from_ref(claim));
            let here: Vec<_> = here
                .into_iter()
                .filter(|d| {
                    holds.contains(&topoalign_dra::DeviceId {
                        driver: &d.driver,
                        pool: &d.pool,
                        device: &d.device,
                    })
                })
                .collect();
            let key = key_of(&claim.metadata);
            let namespace = key.split_once('/').map_or("default", |(ns, _)| ns);
            let pods: Vec<(String, String)> = claim
                .status
                .as_ref()
                .and_then(|s| s.reserved_for.as_deref())
                .unwrap_or_default()
                .iter()
                .filter(|r| r.resource == "pods" && r.api_group.as_deref().unwrap_or_default().is_empty())
                .map(|r| (format!("{namespace}/{}", r.name), r.uid.clone()))
                .collect();
            held.extend(here.into_iter().map(|d| HeldDevice {
                numa: d.numa_node.and_then(|n| usize::try_from(n).ok()),
                driver: d.driver,
                pool: d.pool,
                device: d.device,
                claim: key.clone(),
                pods: pods.clone(),
            }));
            claims.push(claim.clone());
        }
        NodeDra { slices, claims, held }
    }

    /// Whether the node publishes DRA devices.
    pub fn is_empty(&self) -> bool {
        self.slices.is_empty()
    }

    /// Free devices per NUMA node → driver → count
    /// (`topoalign_fleet::stranded::dra_free`).
    pub fn free(&self) -> BTreeMap<usize, BTreeMap<String, u64>> {
        topoalign_fleet::stranded::dra_free(&self.slices, &self.claims)
    }

    /// The devices per NUMA node → driver → count that the claims reserved
    /// for the pod of uid `uid` and no other pod hold here: what evicting
    /// it frees.
    pub fn held_only_by(&self, uid: &str) -> BTreeMap<usize, BTreeMap<String, u64>> {
        let mut out: BTreeMap<usize, BTreeMap<String, u64>> = BTreeMap::new();
        for device in &self.held {
            if let (Some(numa), [(_, only)]) = (device.numa, device.pods.as_slice())
                && only == uid
            {
                *out.entry(numa).or_default().entry(device.driver.clone()).or_default() += 1;
            }
        }
        out
    }
}

/// `namespace/name` of an object (`default` when it names no namespace).
pub(crate) fn key_of(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// Whether the pod manifest names ResourceClaims (`spec.resourceClaims`).
pub fn has_claims(manifest: &serde_json::Value) -> bool {
    manifest
        .pointer("/spec/resourceClaims")
        .and_then(|c| c.as_array())
        .is_some_and(|c| !c.is_empty())
}

/// The scheduler's DRA view of node `node` (its name and `labels`; the
/// device-plugin resources of `machine` in its allocatable) for a kubelet
/// and scheduler of `release`, with the cluster's allocated claims held —
/// except those of `pod`, which are asked afresh as if it were not placed
/// yet; and `pod` as the allocator reads it: a claim made from a template
/// is the one the resourceclaim controller created
/// (`status.resourceClaimStatuses`), once it exists.
pub fn node_state(
    dra: &DraSpec,
    node: &str,
    labels: &BTreeMap<String, String>,
    machine: &topoalign_model::Machine,
    release: &str,
    pod: &K8sPod,
) -> (DraState, K8sPod) {
    let pod = with_created_claims(pod);
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_owned());
    let own: BTreeSet<String> = pod
        .spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_deref())
        .unwrap_or_default()
        .iter()
        .filter_map(|r| r.resource_claim_name.as_ref())
        .map(|name| format!("{namespace}/{name}"))
        .collect();
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let mut spec = dra.clone();
    spec.node = Some(K8sNode {
        metadata: ObjectMeta {
            name: Some(node.to_owned()),
            labels: Some(labels.clone()),
            ..ObjectMeta::default()
        },
        ..K8sNode::default()
    });
    for claim in &mut spec.resource_claims {
        let Some(status) = claim.status.as_mut() else { continue };
        let reserved = status.reserved_for.as_deref().unwrap_or_default();
        // The pod's own claim, held by no other pod: allocated afresh.
        let only_this = reserved.iter().all(|r| r.uid == uid);
        if own.contains(&key_of(&claim.metadata)) && only_this {
            status.allocation = None;
            status.reserved_for = None;
        }
    }
    let spec = topoalign_scenario::dra::with_device_plugin_allocatable(&spec, machine);
    let mut state = DraState::new(spec, release);
    state.hold_allocated();
    (state, pod)
}

/// `pod` with each template reference that the resourceclaim controller
/// has made a claim for (`status.resourceClaimStatuses`) naming that claim.
fn with_created_claims(pod: &K8sPod) -> K8sPod {
    let mut pod = pod.clone();
    let created: BTreeMap<String, String> = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_deref())
        .unwrap_or_default()
        .iter()
        .filter_map(|s| Some((s.name.clone(), s.resource_claim_name.clone()?)))
        .collect();
    for reference in pod
        .spec
        .as_mut()
        .and_then(|s| s.resource_claims.as_mut())
        .into_iter()
        .flatten()
    {
        if reference.resource_claim_template_name.is_some()
            && let Some(name) = created.get(&reference.name)
        {
            reference.resource_claim_name = Some(name.clone());
            reference.resource_claim_template_name = None;
        }
    }
    pod
}

/// The devices per NUMA node → driver → count that the scheduler's DRA
/// allocator would give `pod` on `node` now (the cluster's allocated
/// claims held): `None` when the pod names no claim, the node's state is
/// not exact, its kubelet's release has no known allocator, or DRA cannot
/// allocate the claims there. Devices that say no NUMA node are left out.
pub fn wanted(
    snapshot: &crate::ClusterSnapshot,
    node: &crate::ClusterNode,
    pod: &crate::ClusterPod,
) -> Option<BTreeMap<usize, BTreeMap<String, u64>>> {
    if !has_claims(&pod.manifest) {
        return None;
    }
    let exact = node.exact()?;
    let release = exact.node.config().kubelet_version.to_string();
    if !topoalign_explain::dra::RELEASES.contains(&release.as_str()) {
        return None;
    }
    let kube_pod: K8sPod = serde_json::from_value(pod.manifest.clone()).ok()?;
    let (mut state, kube_pod) = node_state(
        &snapshot.dra,
        &node.name,
        &node.labels,
        exact.node.machine(),
        &release,
        &kube_pod,
    );
    let devices = state.admit(&kube_pod).ok()??;
    if devices.outcome != "allocated" {
        return None;
    }
    let mut out: BTreeMap<usize, BTreeMap<String, u64>> = BTreeMap::new();
    for device in devices.claims.iter().flat_map(|c| &c.devices) {
        if let Some(numa) = device.numa_node.and_then(|n| usize::try_from(n).ok()) {
            *out.entry(numa).or_default().entry(device.driver.clone()).or_default() += 1;
        }
    }
    Some(out)
}
