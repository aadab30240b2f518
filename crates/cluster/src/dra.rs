//! A live cluster's Dynamic Resource Allocation devices: per node the
//! ResourceSlices published for it and the devices allocated claims hold
//! there, with the pods holding them ([`NodeDra`]); the free ones per NUMA
//! node as the fleet report counts them
//! (`topoalign_fleet::stranded::dra_free`); and, for a pod with claims,
//! the scheduler's allocator asked on one node ([`node_state`], through
//! `topoalign_scenario::dra::DraState` as `explain --dra` asks it).
//!
//! A node's slices are those the scheduler's allocator gathers for it
//! (`topoalign_dra::nodesel`, the one rule): its own (`spec.nodeName`),
//! and those offered to several nodes (`allNodes: true`, a `nodeSelector`
//! its labels or name match; with `perDeviceNodeSelection`, only the
//! devices that select it) — network-attached devices every node it
//! selects may be given. A device's NUMA node is its
//! `resource.kubernetes.io/numaNode` attribute (or its driver's
//! `numaNode`), `topoalign_scenario::dra::numa_node`'s rule, wherever its
//! slice is published: a device offered to several nodes normally says
//! none, and is then counted on no NUMA node (listed, never stranded).
//! A slice whose selector the scheduler cannot parse serves no node here
//! (the allocator itself refuses every node then).
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
    /// The ResourceSlices serving this node: its own and those offered to
    /// it with others (`allNodes`, `nodeSelector`; per device, only the
    /// devices for it); every generation, the newest of each pool counts.
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

    /// The DRA devices of `dra` (the cluster's objects) that serve `node`
    /// (its name and labels): the slices the allocator gathers for it
    /// (`topoalign_dra::nodesel`).
    pub fn of(node: &K8sNode, dra: &DraSpec) -> NodeDra {
        let slices: Vec<ResourceSlice> = dra
            .resource_slices
            .iter()
            .filter(|s| topoalign_dra::nodesel::slice_serves(s, node) == Ok(Some(true)))
            .map(|s| {
                let mut slice = s.clone();
                if let Some(devices) = slice.spec.devices.as_mut() {
                    devices.retain(|d| topoalign_dra::nodesel::device_serves(s, d, node) == Ok(true));
                }
                slice
            })
            .collect();
        // A claim's device is here when its pool serves the node, or — a
        // pool whose devices select nodes one by one — the device does.
        let pools: BTreeSet<(&str, &str)> = slices
            .iter()
            .filter(|s| s.spec.per_device_node_selection != Some(true))
            .map(|s| (s.spec.driver.as_str(), s.spec.pool.name.as_str()))
            .collect();
        let devices: BTreeSet<(&str, &str, &str)> = slices
            .iter()
            .flat_map(|s| {
                s.spec
                    .devices
                    .iter()
                    .flatten()
                    .map(|d| (s.spec.driver.as_str(), s.spec.pool.name.as_str(), d.name.as_str()))
            })
            .collect();
        let mut claims = Vec::new();
        let mut held = Vec::new();
        for claim in &dra.resource_claims {
            let here: Vec<_> = topoalign_scenario::dra::claim_devices(claim, &slices)
                .into_iter()
                .filter(|d| {
                    pools.contains(&(d.driver.as_str(), d.pool.as_str()))
                        || devices.contains(&(d.driver.as_str(), d.pool.as_str(), d.device.as_str()))
                })
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

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// A Node as the API server returns it.
    fn node(name: &str, labels: Value) -> K8sNode {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels},
        }))
        .expect("a Node")
    }

    /// `node-a` (rack r1, 4 NICs) and `node-b` (rack r2, no NIC label).
    fn nodes() -> (K8sNode, K8sNode) {
        (
            node(
                "node-a",
                json!({"kubernetes.io/hostname": "node-a", "topology.example.com/rack": "r1", "example.com/nics": "4"}),
            ),
            node(
                "node-b",
                json!({"kubernetes.io/hostname": "node-b", "topology.example.com/rack": "r2"}),
            ),
        )
    }

    /// A resource.k8s.io/v1 ResourceSlice of `driver`, pool `pool` (one
    /// slice, generation 1), with `selection` (`nodeName`, `allNodes`,
    /// `nodeSelector` or `perDeviceNodeSelection`) and `devices`.
    fn slice(name: &str, driver: &str, pool: &str, selection: Value, devices: Value) -> Value {
        let mut spec = json!({
            "driver": driver,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        });
        for (key, value) in selection.as_object().expect("selection fields") {
            spec[key] = value.clone();
        }
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec})
    }

    fn numa(n: i64) -> Value {
        json!({"resource.kubernetes.io/numaNode": {"int": n}})
    }

    /// Node-local GPUs on each node, and devices offered to several nodes:
    /// a fabric of virtual functions to all nodes (vf-1 says NUMA node 1),
    /// rack r1's storage by label, a pool for node-b by `metadata.name`,
    /// NIC-rich nodes by a second term (`Gt`, `DoesNotExist`), partitions
    /// chosen per device, and a slice whose selector cannot be parsed.
    fn slices() -> Vec<Value> {
        let selector = |terms: Value| json!({"nodeSelector": {"nodeSelectorTerms": terms}});
        vec![
            slice(
                "node-a-gpus",
                "gpu.example.com",
                "node-a",
                json!({"nodeName": "node-a"}),
                json!([{"name": "gpu-0", "attributes": numa(0)}, {"name": "gpu-1", "attributes": numa(1)}]),
            ),
            slice(
                "node-b-gpus",
                "gpu.example.com",
                "node-b",
                json!({"nodeName": "node-b"}),
                json!([{"name": "gpu-0", "attributes": numa(0)}]),
            ),
            slice(
                "fabric",
                "net.example.com",
                "fabric",
                json!({"allNodes": true}),
                json!([{"name": "vf-0"}, {"name": "vf-1", "attributes": numa(1)}]),
            ),
            slice(
                "rack-r1-storage",
                "storage.example.com",
                "rack-r1",
                selector(json!([{"matchExpressions": [
                    {"key": "topology.example.com/rack", "operator": "In", "values": ["r1"]},
                ]}])),
                json!([{"name": "vol-0"}]),
            ),
            slice(
                "for-node-b",
                "storage.example.com",
                "b-only",
                selector(json!([{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": ["node-b"]},
                ]}])),
                json!([{"name": "vol-b"}]),
            ),
            slice(
                "nic-rich",
                "offload.example.com",
                "offload",
                selector(json!([
                    {"matchExpressions": [{"key": "topology.example.com/rack", "operator": "In", "values": ["r9"]}]},
                    {"matchExpressions": [
                        {"key": "example.com/nics", "operator": "Gt", "values": ["2"]},
                        {"key": "example.com/drain", "operator": "DoesNotExist"},
                    ]},
                ])),
                json!([{"name": "dpu-0"}]),
            ),
            slice(
                "partitions",
                "mig.example.com",
                "shared",
                json!({"perDeviceNodeSelection": true}),
                json!([
                    {"name": "part-a", "nodeName": "node-a"},
                    {"name": "part-any", "allNodes": true},
                    {"name": "part-not-r1", "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "topology.example.com/rack", "operator": "NotIn", "values": ["r1"]},
                    ]}]}},
                ]),
            ),
        ]
    }

    /// A slice no scheduler can match: `Gt` needs an integer.
    fn unparsable() -> Value {
        slice(
            "broken",
            "odd.example.com",
            "odd",
            json!({"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "example.com/nics", "operator": "Gt", "values": ["many"]},
            ]}]}}),
            json!([{"name": "odd-0"}]),
        )
    }

    /// The objects of `items` as the cluster reader lists them.
    fn spec(items: Vec<Value>) -> DraSpec {
        let list = json!({"apiVersion": "v1", "kind": "List", "items": items});
        let (spec, skipped) = DraSpec::from_manifests(&list.to_string()).expect("DRA objects");
        assert!(skipped.is_empty(), "{skipped:?}");
        spec
    }

    fn addresses(dra: &NodeDra) -> Vec<String> {
        let mut out: Vec<String> = dra.devices().iter().map(NodeDevice::address).collect();
        out.sort();
        out
    }

    #[test]
    fn a_node_has_its_own_slices_and_those_offered_to_it() {
        let (a, b) = nodes();
        let mut items = slices();
        items.push(unparsable());
        let dra = spec(items);
        assert_eq!(
            addresses(&NodeDra::of(&a, &dra)),
            [
                "gpu.example.com/node-a/gpu-0",
                "gpu.example.com/node-a/gpu-1",
                "mig.example.com/shared/part-a",
                "mig.example.com/shared/part-any",
                "net.example.com/fabric/vf-0",
                "net.example.com/fabric/vf-1",
                "offload.example.com/offload/dpu-0",
                "storage.example.com/rack-r1/vol-0",
            ]
        );
        assert_eq!(
            addresses(&NodeDra::of(&b, &dra)),
            [
                "gpu.example.com/node-b/gpu-0",
                "mig.example.com/shared/part-any",
                "mig.example.com/shared/part-not-r1",
                "net.example.com/fabric/vf-0",
                "net.example.com/fabric/vf-1",
                "storage.example.com/b-only/vol-b",
            ]
        );
        // A node without labels: the fabric, the partition for all nodes
        // and the one for nodes outside rack r1 (`NotIn` matches a missing
        // label).
        let bare = NodeDra::of(&node("node-c", json!({})), &dra);
        assert_eq!(
            addresses(&bare),
            [
                "mig.example.com/shared/part-any",
                "mig.example.com/shared/part-not-r1",
                "net.example.com/fabric/vf-0",
                "net.example.com/fabric/vf-1",
            ]
        );
        assert!(!bare.is_empty());
    }

    /// A shared device's NUMA node is what its attribute says — usually
    /// none: it is listed but counted free on no NUMA node.
    #[test]
    fn a_shared_device_is_on_the_numa_node_its_attribute_names_or_none() {
        let (a, _) = nodes();
        let node_dra = NodeDra::of(&a, &spec(slices()));
        let numa_of = |address: &str| {
            node_dra
                .devices()
                .into_iter()
                .find(|d| d.address() == address)
                .unwrap_or_else(|| panic!("{address} on node-a"))
                .numa
        };
        assert_eq!(numa_of("net.example.com/fabric/vf-0"), None);
        assert_eq!(numa_of("net.example.com/fabric/vf-1"), Some(1));
        assert_eq!(numa_of("storage.example.com/rack-r1/vol-0"), None);
        let free = node_dra.free();
        assert_eq!(
            free,
            BTreeMap::from([
                (0, BTreeMap::from([("gpu.example.com".to_owned(), 1)])),
                (
                    1,
                    BTreeMap::from([("gpu.example.com".to_owned(), 1), ("net.example.com".to_owned(), 1)])
                ),
            ])
        );
    }

    /// An allocated claim holding a shared device holds it on every node
    /// the device serves (the allocator counts it taken everywhere); a
    /// partition chosen for another node is not held here.
    #[test]
    fn a_claim_on_a_shared_device_holds_it_on_every_node_it_serves() {
        let (a, b) = nodes();
        let claim = |name: &str, pod: &str, driver: &str, pool: &str, device: &str| {
            json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "ml"},
                "spec": {"devices": {"requests": [{"name": "dev", "exactly": {"deviceClassName": "any"}}]}},
                "status": {
                    "allocation": {"devices": {"results": [
                        {"request": "dev", "driver": driver, "pool": pool, "device": device},
                    ]}},
                    "reservedFor": [{"resource": "pods", "name": pod, "uid": format!("uid-{pod}")}],
                },
            })
        };
        let mut items = slices();
        items.push(claim("fabric-vf", "on-b", "net.example.com", "fabric", "vf-1"));
        items.push(claim(
            "partition",
            "other-b",
            "mig.example.com",
            "shared",
            "part-not-r1",
        ));
        let dra = spec(items);
        let on_a = NodeDra::of(&a, &dra);
        let [vf] = on_a.held.as_slice() else {
            panic!("{:?}", on_a.held)
        };
        assert_eq!(
            (vf.address().as_str(), vf.numa, &vf.claim),
            ("net.example.com/fabric/vf-1", Some(1), &"ml/fabric-vf".to_owned())
        );
        assert_eq!(vf.pods, [("ml/on-b".to_owned(), "uid-on-b".to_owned())]);
        // vf-1 is no longer free on NUMA node 1.
        assert_eq!(on_a.free().get(&1).and_then(|d| d.get("net.example.com")), None);
        let on_b = NodeDra::of(&b, &dra);
        let mut held_b: Vec<String> = on_b.held.iter().map(HeldDevice::address).collect();
        held_b.sort();
        assert_eq!(
            held_b,
            ["mig.example.com/shared/part-not-r1", "net.example.com/fabric/vf-1"]
        );
    }

    /// The judge: the scheduler's allocator asked for every device of a
    /// class matching all (`allocationMode: All`) on each node gives
    /// exactly the devices [`NodeDra::of`] lists there.
    #[test]
    fn the_allocator_offers_each_node_exactly_the_devices_listed() {
        let (a, b) = nodes();
        let mut items = slices();
        items.push(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "any"},
            "spec": {},
        }));
        items.push(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "everything", "namespace": "ml"},
            "spec": {"devices": {"requests": [
                {"name": "all", "exactly": {"deviceClassName": "any", "allocationMode": "All"}},
            ]}},
        }));
        let dra = spec(items);
        let pod: K8sPod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "probe", "namespace": "ml", "uid": "uid-probe"},
            "spec": {
                "resourceClaims": [{"name": "all", "resourceClaimName": "everything"}],
                "containers": [{"name": "c", "image": "pause", "resources": {"claims": [{"name": "all"}]}}],
            },
        }))
        .expect("a Pod");
        for node in [a, b, node("node-c", json!({}))] {
            let mut spec = dra.clone();
            spec.node = Some(node.clone());
            let mut state = DraState::new(spec, "1.37");
            let devices = state.admit(&pod).expect("claims read").expect("the pod has a claim");
            assert_eq!(devices.outcome, "allocated", "{devices:?}");
            let mut given: Vec<String> = devices
                .claims
                .iter()
                .flat_map(|c| &c.devices)
                .map(|d| format!("{}/{}/{}", d.driver, d.pool, d.device))
                .collect();
            given.sort();
            assert_eq!(given, addresses(&NodeDra::of(&node, &dra)), "{:?}", node.metadata.name);
        }
    }
}
