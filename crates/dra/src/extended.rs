//! DRA-backed extended resources (KEP-5004, feature `DRAExtendedResource`):
//! a pod's plain extended-resource request (`example.com/gpu: 1`) on a node
//! that does not advertise the resource, served by a DeviceClass instead of
//! a device plugin.
//!
//! The kube-scheduler's DynamicResources plugin does this, not the
//! allocator: it resolves resource names to DeviceClasses
//! ([`ClassResolver`]), decides per node which of the pod's resources DRA
//! must serve (those backed by a class with no allocatable on the node),
//! builds one special claim for the pod with one request per container
//! ([`special_requests`]) and allocates it after the pod's own claims, in the
//! same allocator run. [`allocate_pod`] is that whole decision for one node.
//!
//! | release | `DRAExtendedResource` by default |
//! |---|---|
//! | 1.34, 1.35 | off (alpha): the plugin leaves extended resources alone |
//! | 1.36 | on (beta) |
//! | 1.37 | on (GA, locked) |
//!
//! Checked against the real plugin (PreFilter, Filter, Reserve of
//! `pkg/scheduler/framework/plugins/dynamicresources`) by `oracle-dra` on the
//! `testdata/dra/cases` that carry a `pod`. Pure: no I/O.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{Container, ContainerExtendedResourceRequest, Node, Pod};
use k8s_openapi::api::resource::v1::{
    AllocationResult, DeviceClaim, DeviceClass, DeviceRequest, ExactDeviceRequest, ResourceClaim, ResourceClaimSpec,
    ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as ApiQuantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Serialize};

use crate::allocator::{allocate_with, quantity};
use crate::case::{AllocationCase, Outcome};
use crate::features::{Features, UnknownRelease, scheduler_defaults};

/// The implicit extended resource name of every DeviceClass:
/// `deviceclass.resource.kubernetes.io/<class name>`
/// (`resourceapi.ResourceDeviceClassPrefix`).
pub const DEVICE_CLASS_PREFIX: &str = "deviceclass.resource.kubernetes.io/";

/// The name the plugin gives the special claim while it lives only in memory
/// (the API server names it `<pod>-extended-resources-<random>` in PreBind).
pub const SPECIAL_CLAIM_NAME: &str = "<extended-resources>";

/// The annotation marking the special claim
/// (`resourceapi.ExtendedResourceClaimAnnotation`).
pub const SPECIAL_CLAIM_ANNOTATION: &str = "resource.kubernetes.io/extended-resource-claim";

/// `node` as the scheduler sees it when a device plugin serves
/// `resources` (name, device count) there: the kubelet advertises one unit
/// per device in `status.allocatable`, and a resource the node lists already
/// keeps its amount. A resource in the allocatable is not DRA's.
pub fn advertise_device_plugins<'a>(node: &mut Node, resources: impl IntoIterator<Item = (&'a str, usize)>) {
    let mut resources = resources.into_iter().peekable();
    if resources.peek().is_none() {
        return;
    }
    let allocatable = node
        .status
        .get_or_insert_with(Default::default)
        .allocatable
        .get_or_insert_with(Default::default);
    for (resource, devices) in resources {
        allocatable
            .entry(resource.to_owned())
            .or_insert_with(|| ApiQuantity(devices.to_string()));
    }
}

/// Whether the release's kube-scheduler and kubelet serve extended resources
/// through DRA by default (`DRAExtendedResource` in the release's
/// `pkg/features/kube_features.go`: alpha and off in 1.34/1.35, beta and on
/// in 1.36, GA in 1.37).
///
/// # Errors
/// A release this crate does not know.
pub fn enabled_by_default(release: &str) -> Result<bool, UnknownRelease> {
    match release {
        "1.34" | "1.35" => Ok(false),
        "1.36" | "1.37" => Ok(true),
        _ => Err(UnknownRelease(release.to_owned())),
    }
}

/// One node, the cluster's DRA objects and one pod whose plain
/// extended-resource requests DRA may serve: an [`AllocationCase`] plus the
/// pod. The pod's `spec.resourceClaims` are the case's `claims`, in order
/// (the pod's own entries are not read); the node's `status.allocatable`
/// says which extended resources device plugins serve there.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodCase {
    pub release: String,
    pub node: Node,
    #[serde(default)]
    pub device_classes: Vec<DeviceClass>,
    #[serde(default)]
    pub resource_slices: Vec<ResourceSlice>,
    #[serde(default)]
    pub allocated_claims: Vec<ResourceClaim>,
    /// The pod's own claims to allocate, in the pod's order.
    #[serde(default)]
    pub claims: Vec<ResourceClaim>,
    /// The pod (its containers' requests and limits, init containers and
    /// sidecars, overhead; namespace and name).
    pub pod: Pod,
}

/// The special claim the plugin built for the pod on this node and what the
/// allocator gave it.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExtendedResourceClaim {
    /// One ExactCount request per container and resource, sorted by name
    /// (`container-<i>-request-<j>`).
    pub requests: Vec<DeviceRequest>,
    /// Which request serves which container's resource: what PreBind writes
    /// to the pod's `status.extendedResourceClaimStatus.requestMappings`.
    #[serde(default)]
    pub request_mappings: Vec<ContainerExtendedResourceRequest>,
    pub allocation: AllocationResult,
}

/// What the DynamicResources plugin answered for the pod on the node.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum PodOutcome {
    /// One allocation per claim of the pod, in the claims' order, and the
    /// special claim when the plugin allocated one.
    Allocated {
        allocations: Vec<AllocationResult>,
        #[serde(default, rename = "extendedResourceClaim", skip_serializing_if = "Option::is_none")]
        extended_resource_claim: Option<ExtendedResourceClaim>,
    },
    /// Not on this node (`message`: the plugin's or the allocator's reason).
    Unschedulable {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
    },
    /// Scheduling stops (a class, claim or CEL problem).
    Error { message: String },
}

impl From<Outcome> for PodOutcome {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Allocated { allocations } => PodOutcome::Allocated {
                allocations,
                extended_resource_claim: None,
            },
            Outcome::Unschedulable { message } => PodOutcome::Unschedulable { message },
            Outcome::Error { message } => PodOutcome::Error { message },
        }
    }
}

/// Resource name → DeviceClass, as the scheduler's extended resource cache
/// (`dynamic-resource-allocation/deviceclass/extendedresourcecache`) holds
/// it after its informer delivered the classes in the API server's list
/// order (by name).
///
/// Every class maps its implicit name `deviceclass.resource.kubernetes.io/<class>`,
/// and its `spec.extendedResourceName` when set. When two classes name the
/// same resource, the one created later wins, then the lower name — and a
/// class that loses to one delivered before it maps nothing at all, not even
/// its implicit name (the cache returns before recording it).
#[derive(Debug, Default)]
pub struct ClassResolver<'a> {
    by_resource: BTreeMap<String, &'a DeviceClass>,
}

impl<'a> ClassResolver<'a> {
    pub fn new(classes: &'a [DeviceClass]) -> Self {
        let mut listed: Vec<&DeviceClass> = classes.iter().collect();
        listed.sort_by(|a, b| class_name(a).cmp(class_name(b)));
        let mut by_resource: BTreeMap<String, &'a DeviceClass> = BTreeMap::new();
        for class in listed {
            let explicit = class.spec.as_ref().and_then(|s| s.extended_resource_name.as_deref());
            if let Some(holder) = explicit.and_then(|name| by_resource.get(name)) {
                let newer = created_nanos(class).cmp(&created_nanos(holder));
                if newer.is_lt() || (newer.is_eq() && class_name(class) >= class_name(holder)) {
                    continue;
                }
            }
            if let Some(name) = explicit {
                by_resource.insert(name.to_owned(), class);
            }
            by_resource.insert(format!("{DEVICE_CLASS_PREFIX}{}", class_name(class)), class);
        }
        ClassResolver { by_resource }
    }

    /// The class serving `resource`, if any.
    pub fn get(&self, resource: &str) -> Option<&'a DeviceClass> {
        self.by_resource.get(resource).copied()
    }
}

fn class_name(class: &DeviceClass) -> &str {
    class.metadata.name.as_deref().unwrap_or_default()
}

/// A class's creation time in nanoseconds (Go's `UnixNano`); a class without
/// one is older than any with one (Go's zero time).
fn created_nanos(class: &DeviceClass) -> i128 {
    class
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(i128::MIN, |t| t.0.as_nanosecond())
}

/// `schedutil.IsDRAExtendedResourceName`: an extended resource name
/// (`example.com/gpu`: a qualified name outside `kubernetes.io/`) or a
/// class's implicit name.
pub fn is_dra_extended_resource_name(name: &str) -> bool {
    if name.starts_with(DEVICE_CLASS_PREFIX) {
        return true;
    }
    // Native: no '/' at all, or in the kubernetes.io/ namespace.
    if !name.contains('/') || name.contains("kubernetes.io/") || name.starts_with("requests.") {
        return false;
    }
    is_qualified_name(&format!("requests.{name}"))
}

/// apimachinery's `IsQualifiedName`: `[prefix/]name`, the prefix a DNS-1123
/// subdomain, the name at most 63 characters of `[A-Za-z0-9_.-]` starting
/// and ending alphanumeric.
fn is_qualified_name(text: &str) -> bool {
    let (prefix, name) = match text.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, text),
    };
    if name.contains('/') {
        return false;
    }
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.as_bytes().first().is_some_and(u8::is_ascii_alphanumeric)
        && name.as_bytes().last().is_some_and(u8::is_ascii_alphanumeric);
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && label.as_bytes().first().is_some_and(|b| b.is_ascii_alphanumeric())
                    && label.as_bytes().last().is_some_and(|b| b.is_ascii_alphanumeric())
            })
    });
    name_ok && prefix_ok
}

/// A container's requests as the API server stores them: a resource with a
/// limit and no request gets the limit as its request (`SetDefaults_Pod`).
fn container_requests(container: &Container) -> BTreeMap<&str, &ApiQuantity> {
    let resources = container.resources.as_ref();
    let mut requests: BTreeMap<&str, &ApiQuantity> = resources
        .and_then(|r| r.requests.as_ref())
        .into_iter()
        .flatten()
        .map(|(name, q)| (name.as_str(), q))
        .collect();
    for (name, q) in resources.and_then(|r| r.limits.as_ref()).into_iter().flatten() {
        requests.entry(name.as_str()).or_insert(q);
    }
    requests
}

/// Init containers, then containers: the index space of the request names.
fn all_containers(pod: &Pod) -> Vec<&Container> {
    let spec = pod.spec.as_ref();
    spec.and_then(|s| s.init_containers.as_ref())
        .into_iter()
        .flatten()
        .chain(spec.map(|s| s.containers.as_slice()).unwrap_or_default())
        .collect()
}

/// The extended resources the pod requests a non-zero amount of (any
/// container, init or not, or the pod's overhead), with the names that
/// qualify as DRA extended resources.
fn requested_resources(pod: &Pod) -> BTreeSet<&str> {
    let mut names = BTreeSet::new();
    for container in all_containers(pod) {
        for (name, q) in container_requests(container) {
            if !quantity(&q.0).is_zero() && is_dra_extended_resource_name(name) {
                names.insert(name);
            }
        }
    }
    let overhead = pod.spec.as_ref().and_then(|s| s.overhead.as_ref());
    for (name, q) in overhead.into_iter().flatten() {
        if !quantity(&q.0).is_zero() && is_dra_extended_resource_name(name) {
            names.insert(name.as_str());
        }
    }
    names
}

/// Whether the pod requests an extended resource some DeviceClass serves
/// (PreFilter's test for building the special claim at all); a release
/// with `DRAExtendedResource` off never does.
pub fn pod_uses_classes(release: &str, pod: &Pod, classes: &[DeviceClass]) -> bool {
    if !enabled_by_default(release).unwrap_or(false) {
        return false;
    }
    let resolver = ClassResolver::new(classes);
    requested_resources(pod).iter().any(|name| resolver.get(name).is_some())
}

/// A device request of the special claim: its name and count.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Slot {
    name: String,
    count: i64,
}

/// What one container asks of one resource: a request of its own for what
/// the `reusable` requests (of long-lived containers starting after it) do
/// not already cover, and the mappings to every request it uses.
fn container_slot(
    index: usize,
    container: &Container,
    resource: &str,
    reusable: &[Option<Slot>],
) -> (Option<Slot>, Vec<ContainerExtendedResourceRequest>) {
    let requests = container_requests(container);
    let Some(amount) = requests.get(resource).map(|q| quantity(&q.0)) else {
        return (None, Vec::new());
    };
    // Go's AsInt64: only a whole amount counts; 500m asks for nothing.
    let wanted = match i64::try_from(amount.milli() / 1000) {
        Ok(units) if amount.is_whole() && units != 0 => units,
        _ => return (None, Vec::new()),
    };
    let mapping = |request: &str| ContainerExtendedResourceRequest {
        container_name: container.name.clone(),
        resource_name: resource.to_owned(),
        request_name: request.to_owned(),
    };
    let mut mappings = Vec::new();
    let mut covered = 0i64;
    for slot in reusable.iter().flatten() {
        covered += slot.count;
        mappings.push(mapping(&slot.name));
        if covered >= wanted {
            return (None, mappings);
        }
    }
    // j: the resource's place among all the container's request names, sorted.
    let position = requests.keys().position(|name| *name == resource).unwrap_or_default();
    let name = format!("container-{index}-request-{position}");
    mappings.push(mapping(&name));
    (
        Some(Slot {
            name,
            count: wanted - covered,
        }),
        mappings,
    )
}

/// The special claim's requests and the container → request mappings for
/// the resources DRA serves on this node (`served`), as the plugin builds
/// them (`createRequestsAndMappings`):
///
/// - Containers are numbered over init containers followed by containers.
/// - A long-lived container (regular, or an init container with
///   `restartPolicy: Always`, a sidecar) gets its own request for its whole
///   amount.
/// - A run-to-completion init container first reuses the requests of the
///   long-lived containers at or after its index (they have not started
///   yet... or are sidecars it runs beside: the plugin counts them all), and
///   asks only for the rest; of all such init containers' requests only the
///   largest is kept (the first of equal ones), and every init container's
///   mapping points at it.
/// - Requests are sorted by name; mappings go per resource (sorted), the
///   long-lived containers' first.
pub fn special_requests(
    pod: &Pod,
    served: &BTreeSet<&str>,
    resolver: &ClassResolver<'_>,
) -> (Vec<DeviceRequest>, Vec<ContainerExtendedResourceRequest>) {
    let containers = all_containers(pod);
    let init_count = pod
        .spec
        .as_ref()
        .and_then(|s| s.init_containers.as_ref())
        .map_or(0, Vec::len);
    let short_lived = |i: usize, c: &Container| i < init_count && c.restart_policy.as_deref() != Some("Always");

    let mut requests: Vec<(Slot, &str)> = Vec::new();
    let mut mappings = Vec::new();
    for resource in served {
        let Some(class) = resolver.get(resource) else {
            continue;
        };
        let class = class_name(class);
        let mut long: Vec<Option<Slot>> = vec![None; containers.len()];
        let mut long_mappings = Vec::new();
        for (i, container) in containers.iter().enumerate() {
            if !short_lived(i, container) {
                let (slot, maps) = container_slot(i, container, resource, &[]);
                long[i] = slot;
                long_mappings.extend(maps);
            }
        }
        let mut largest: Option<Slot> = None;
        let mut short_names = BTreeSet::new();
        let mut short_mappings = Vec::new();
        for (i, container) in containers.iter().enumerate() {
            if short_lived(i, container) {
                let (slot, maps) = container_slot(i, container, resource, &long[i..]);
                if let Some(slot) = slot {
                    short_names.insert(slot.name.clone());
                    if largest.as_ref().is_none_or(|l| l.count < slot.count) {
                        largest = Some(slot);
                    }
                }
                short_mappings.extend(maps);
            }
        }
        if let Some(largest) = &largest
            && short_names.len() > 1
        {
            short_names.remove(&largest.name);
            for m in &mut short_mappings {
                if short_names.contains(&m.request_name) {
                    m.request_name.clone_from(&largest.name);
                }
            }
        }
        requests.extend(
            largest
                .into_iter()
                .chain(long.into_iter().flatten())
                .map(|s| (s, class)),
        );
        mappings.extend(long_mappings);
        mappings.extend(short_mappings);
    }
    requests.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    let requests = requests
        .into_iter()
        .map(|(slot, class)| DeviceRequest {
            name: slot.name,
            exactly: Some(ExactDeviceRequest {
                device_class_name: class.to_owned(),
                allocation_mode: Some("ExactCount".to_owned()),
                count: Some(slot.count),
                ..ExactDeviceRequest::default()
            }),
            ..DeviceRequest::default()
        })
        .collect();
    (requests, mappings)
}

/// Which of the pod's extended resources DRA serves on `node`: those backed
/// by a class with no allocatable there. `Err` names the first resource
/// neither allocatable on the node nor backed by a class (the plugin's
/// "cannot fit resource"). `Ok(None)`: no resource of the pod is backed by
/// a class at all (no special claim).
fn served_on_node<'p>(
    pod: &'p Pod,
    node: &Node,
    resolver: &ClassResolver<'_>,
) -> Result<Option<BTreeSet<&'p str>>, &'p str> {
    let requested = requested_resources(pod);
    if !requested.iter().any(|name| resolver.get(name).is_some()) {
        return Ok(None);
    }
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let mut served = BTreeSet::new();
    for name in requested {
        let on_node = allocatable.and_then(|a| a.get(name)).map(|q| quantity(&q.0).value());
        if resolver.get(name).is_some() && on_node.unwrap_or(0) == 0 {
            served.insert(name);
        } else if on_node.is_none() {
            return Err(name);
        }
    }
    Ok(Some(served))
}

/// The special claim's requests and the container → request mappings the
/// plugin builds for `pod` on `node` by default in `release` (the
/// requests [`allocate_pod`] allocates); `None` when it builds none, or
/// one without requests: the release leaves extended resources to device
/// plugins, no class serves one the pod requests, the node's allocatable
/// lists them all, or one is neither allocatable nor served (the node does
/// not fit).
pub fn planned_requests(
    release: &str,
    pod: &Pod,
    node: &Node,
    classes: &[DeviceClass],
) -> Option<(Vec<DeviceRequest>, Vec<ContainerExtendedResourceRequest>)> {
    if !enabled_by_default(release).unwrap_or(false) {
        return None;
    }
    let resolver = ClassResolver::new(classes);
    let served = served_on_node(pod, node, &resolver).ok()??;
    if served.is_empty() {
        return None;
    }
    Some(special_requests(pod, &served, &resolver))
}

/// The DynamicResources plugin's decision for the pod on the case's node, as
/// the case's release makes it by default.
pub fn allocate_pod(case: &PodCase) -> PodOutcome {
    let features = match scheduler_defaults(&case.release) {
        Ok(features) => features,
        Err(e) => return PodOutcome::Error { message: e.to_string() },
    };
    let enabled = enabled_by_default(&case.release).unwrap_or(false);
    allocate_pod_with(case, &features, enabled)
}

/// [`allocate_pod`] with the given allocator features and
/// `DRAExtendedResource` setting.
pub fn allocate_pod_with(case: &PodCase, features: &Features, extended_resources: bool) -> PodOutcome {
    let mut plain = AllocationCase {
        release: case.release.clone(),
        node: case.node.clone(),
        device_classes: case.device_classes.clone(),
        resource_slices: case.resource_slices.clone(),
        allocated_claims: case.allocated_claims.clone(),
        claims: case.claims.clone(),
    };
    let resolver = ClassResolver::new(&case.device_classes);
    let served = if extended_resources {
        served_on_node(&case.pod, &case.node, &resolver)
    } else {
        Ok(None)
    };
    let served = match served {
        Ok(None) => return allocate_with(&plain, features).into(),
        Ok(Some(served)) => served,
        Err(_) => {
            // PreFilter's checks of the pod's own claims come first.
            if let Some(refused) = crate::allocator::prefilter(&plain, features) {
                return refused.into();
            }
            return PodOutcome::Unschedulable {
                message: "cannot fit resource".to_owned(),
            };
        }
    };
    if served.is_empty() && case.claims.is_empty() {
        // Device plugins serve everything here; the plugin has nothing to do.
        return PodOutcome::Allocated {
            allocations: Vec::new(),
            extended_resource_claim: None,
        };
    }
    let (requests, request_mappings) = special_requests(&case.pod, &served, &resolver);
    plain.claims.push(special_claim(&case.pod, requests.clone()));
    match allocate_with(&plain, features) {
        Outcome::Allocated { mut allocations } => {
            let Some(allocation) = allocations.pop().filter(|_| allocations.len() == case.claims.len()) else {
                return PodOutcome::Unschedulable {
                    message: "cannot allocate all claims".to_owned(),
                };
            };
            PodOutcome::Allocated {
                allocations,
                extended_resource_claim: Some(ExtendedResourceClaim {
                    requests,
                    request_mappings,
                    allocation,
                }),
            }
        }
        other => other.into(),
    }
}

/// The in-memory claim of PreFilter, with the node's requests of Filter.
fn special_claim(pod: &Pod, requests: Vec<DeviceRequest>) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(SPECIAL_CLAIM_NAME.to_owned()),
            namespace: pod.metadata.namespace.clone(),
            annotations: Some(BTreeMap::from([(
                SPECIAL_CLAIM_ANNOTATION.to_owned(),
                "true".to_owned(),
            )])),
            ..ObjectMeta::default()
        },
        spec: Some(ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: (!requests.is_empty()).then_some(requests),
                ..DeviceClaim::default()
            }),
        }),
        status: None,
    }
}
