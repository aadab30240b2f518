//! A pod's devices from Dynamic Resource Allocation beside the kubelet's
//! decision for its CPUs and memory: per claim request, the devices the
//! scheduler's DRA allocator will pick and their NUMA nodes next to the NUMA
//! nodes the kubelet pins; every misalignment; why a request cannot be
//! satisfied; what the claim's constraints do (and do not) imply about
//! locality; and fixes — a `matchAttribute` constraint, CEL selectors naming
//! the kubelet's NUMA node, fewer CPUs for the pod, running pods removed
//! first — each checked by running the allocator (and, where the pod or its
//! node changes, the kubelet) again, offered only when it aligns.
//!
//! DRA-backed extended resources (a plain `example.com/gpu: 1` a
//! DeviceClass serves, KEP-5004) come as the requests of the claim the
//! scheduler writes for the pod (`extended-resources/container-<i>-request-<j>`,
//! each naming the container and resource it serves). Nobody writes that
//! claim, so no constraint or selector can be added to it: the fix is the
//! pod asking for the devices with a ResourceClaimTemplate of its own
//! instead — with a selector naming the kubelet's NUMA node, or a
//! `matchAttribute` across its requests — checked like the others.
//!
//! Entry point: [`explain`]. The allocator is `topoalign_dra`'s, driven
//! through `topoalign_scenario::dra::DraState` (the claims of the pods
//! already running, the pod's claims resolved from templates), so the
//! answer is the one `topoalign replay` gives for the same scenario.
//!
//! The per-device reasons for an unsatisfiable request (class, selectors,
//! taken) are read here from the slices; whether a request, a constraint
//! or the claims together fail is the allocator's verdict, asked again with
//! the part removed. Must not touch: any decision, files, terminal output.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ContainerExtendedResourceRequest, Pod as KubePod};
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, Device, DeviceAttribute, DeviceClaim, DeviceConstraint, DeviceRequest, DeviceSelector,
    ResourceClaim, ResourceClaimSpec, ResourceClaimTemplate, ResourceSlice,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Serialize;
use serde_json::{Value, json};
use topoalign_dra::extended;
use topoalign_dra::selector::{DeviceView, Release, SelectorEnv};
use topoalign_dra::{AllocationCase, DeviceId, Outcome, held_devices};
use topoalign_engine::Decision;
use topoalign_model::Quantity;
use topoalign_scenario::dra::{
    ClaimDevices, ClaimSource, DraError, DraState, EXTENDED_RESOURCES, PodDevices, ResolvedClaim, pinned_numa_nodes,
};

use crate::Situation;
use crate::fixes::{Change, apply, with_largest_request};

/// The standard locality attributes (KEP-4381 `pcieRoot`, KEP-6072
/// `numaNode`), by their identifier; a driver's own attribute of the same
/// identifier counts too.
const NUMA_NODE: &str = "numaNode";
const PCIE_ROOT: &str = "pcieRoot";
const STANDARD_DOMAIN: &str = "resource.kubernetes.io";
/// Running pods tried one at a time for the removal fix, at most.
const REMOVAL_ATTEMPTS: usize = 32;
/// Removal fixes offered, at most.
const REMOVAL_FIXES: usize = 2;
/// Smaller CPU requests tried for the CPU fix, at most.
const CPU_ATTEMPTS: usize = 64;

/// The DRA side of one pod, beside the kubelet's.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DraExplanation {
    /// The scheduler release whose allocator decides.
    pub release: String,
    /// The NUMA nodes of the pod's exclusive CPUs and pinned memory; empty
    /// when the kubelet pins nothing (or refused the pod).
    pub kubelet_numa_nodes: Vec<usize>,
    /// `allocated`, `unschedulable` (not on this node) or `error` (the
    /// claims or classes are wrong everywhere).
    pub outcome: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Per claim request, the devices it gets.
    pub requests: Vec<RequestDevices>,
    /// Devices on a NUMA node the kubelet does not pin.
    pub misaligned: Vec<Misalignment>,
    /// Why each request that cannot be satisfied is not.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unsatisfiable: Vec<RequestProblem>,
    /// What the claims' constraints do not imply about locality.
    pub lint: Vec<LintWarning>,
    /// In one or two sentences.
    pub summary: String,
    /// Changes that align the devices with the kubelet, each checked.
    pub fixes: Vec<DraFix>,
}

/// One request of one claim and its devices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestDevices {
    /// The pod's name for the claim (`spec.resourceClaims[].name`).
    pub claim: String,
    /// The ResourceClaim, `namespace/name`.
    pub resource_claim: String,
    /// The request (`devices.requests[].name`).
    pub request: String,
    /// For a request of the scheduler's claim for DRA-backed extended
    /// resources (claim `extended-resources`): the containers' resources
    /// it serves.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub serves: Vec<ServedResource>,
    pub devices: Vec<PlacedDevice>,
}

/// An extended resource of a container that a request serves.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServedResource {
    pub container: String,
    pub resource: String,
}

/// One device and where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacedDevice {
    pub driver: String,
    pub pool: String,
    pub device: String,
    /// The subrequest that took it (`gpu/large`), for `firstAvailable`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subrequest: Option<String>,
    /// From `resource.kubernetes.io/numaNode` (or the driver's own);
    /// absent when the device publishes no single NUMA node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<i64>,
    /// On one of the kubelet's NUMA nodes; absent when either side is
    /// unknown (nothing pinned, no NUMA node published).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aligned: Option<bool>,
}

/// A device on a NUMA node the kubelet does not pin.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Misalignment {
    pub claim: String,
    pub request: String,
    /// `driver/pool/device`.
    pub device: String,
    pub numa_node: i64,
    pub kubelet_numa_nodes: Vec<usize>,
}

/// Why one request gets no device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestProblem {
    pub claim: String,
    /// The request, or empty when the claims fail only together.
    pub request: String,
    pub reason: String,
}

/// A locality the claim's constraints do not imply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LintWarning {
    pub claim: String,
    pub requests: Vec<String>,
    pub message: String,
}

/// What a fix changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DraFixKind {
    /// A `matchAttribute` constraint across the claim's requests.
    Constraint,
    /// A CEL selector on each request naming the kubelet's NUMA node.
    Selector,
    /// Running pods removed first (their CPUs, memory and claims freed).
    RemovePods,
    /// DRA-backed extended resources asked for with a ResourceClaimTemplate
    /// of the pod's own instead, which can carry a selector or constraint.
    ExplicitClaim,
    /// Fewer CPUs for the pod, so that the kubelet pins them where DRA's
    /// devices are.
    CpuRequest,
}

/// A change that puts every device on the kubelet's NUMA nodes, checked by
/// allocating again (and admitting again when the node changes).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DraFix {
    pub kind: DraFixKind,
    /// The change and its outcome, in words.
    pub description: String,
    /// The object changed (`ResourceClaimTemplate ml/gpu-and-nic`), for
    /// claim changes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Where the snippet goes in the object (`spec.spec.devices`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// The YAML to add there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub yaml: Option<String>,
    /// The whole changed object (ResourceClaimTemplate or ResourceClaim).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed: Option<Value>,
    /// The whole changed Pod manifest, for fixes that change the pod.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod: Option<Value>,
    /// `namespace/name` of the running pods to remove first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub remove: Vec<String>,
    /// The devices with the change, all on `kubeletNumaNodes`.
    pub requests: Vec<RequestDevices>,
    /// The kubelet's NUMA nodes with the change.
    pub kubelet_numa_nodes: Vec<usize>,
}

/// Explains the DRA side of `pod` (the Kubernetes Pod of
/// `situation.pod`), given the kubelet's `decision` for it on
/// `situation.node` and `state`, the claims as they are before the pod
/// (the running pods' claims allocated). `None` when the pod references no
/// claims and DRA serves none of its extended resources.
///
/// # Errors
/// [`DraError`] when a claim or template the pod names is not known.
pub fn explain(
    situation: &Situation<'_>,
    decision: &Decision,
    state: &DraState,
    pod: &KubePod,
) -> Result<Option<DraExplanation>, DraError> {
    let resolved = state.resolve(pod)?;
    let uses_classes = extended::pod_uses_classes(state.release(), pod, &state.spec().device_classes);
    if resolved.is_empty() && !uses_classes {
        return Ok(None);
    }
    let machine = situation.node.machine();
    let kubelet: Vec<usize> = if decision.admitted() {
        kubelet_numa_nodes(machine, decision)
    } else {
        Vec::new()
    };
    let devices = match state.clone().admit(pod)? {
        Some(devices) => devices,
        // Device plugins serve the pod's extended resources on this node.
        None if resolved.is_empty() => return Ok(None),
        None => PodDevices {
            pod: String::new(),
            outcome: "allocated".to_owned(),
            message: None,
            claims: Vec::new(),
        },
    };
    let special = special_claim(state, pod);
    let requests = request_devices(&resolved, special.as_ref(), &devices, state, &kubelet);
    let misaligned = misalignments(&requests, &kubelet);
    let unsatisfiable = if devices.outcome == "allocated" {
        Vec::new()
    } else {
        let mut problems = why_unsatisfiable(state, &resolved);
        problems.extend(
            special
                .as_ref()
                .map(|s| extended_unsatisfiable(state, s))
                .unwrap_or_default(),
        );
        problems
    };
    let mut lint = lint(state, &resolved, &kubelet);
    lint.extend(special.as_ref().and_then(|s| extended_lint(s, &kubelet)));
    let fixes = if misaligned.is_empty() {
        Vec::new()
    } else {
        let mut fixes = Vec::new();
        fixes.extend(constraint_fixes(state, pod, &resolved, &kubelet));
        fixes.extend(selector_fix(state, pod, &resolved, &kubelet));
        if let Some(special) = &special
            && misaligned.iter().any(|m| m.claim == EXTENDED_RESOURCES)
        {
            fixes.extend(explicit_claim_fixes(situation, state, pod, special, &kubelet));
        }
        fixes.extend(cpu_request_fix(situation, state, &requests));
        fixes.extend(removal_fixes(situation, state, pod));
        fixes
    };
    let summary = summary(
        decision.admitted(),
        decision.kubelet_panic.is_some(),
        &devices,
        &requests,
        &misaligned,
        &unsatisfiable,
        &kubelet,
    );
    Ok(Some(DraExplanation {
        release: state.release().to_owned(),
        kubelet_numa_nodes: kubelet,
        outcome: devices.outcome.clone(),
        message: devices.message.clone(),
        requests,
        misaligned,
        unsatisfiable,
        lint,
        summary,
        fixes,
    }))
}

/// The NUMA nodes of an admitted pod's exclusive CPUs and pinned memory,
/// as the machine names them ([`topoalign_model::Machine::numa_label`]):
/// the ids devices publish in their NUMA attribute, which every
/// comparison and selector here uses.
fn kubelet_numa_nodes(machine: &topoalign_model::Machine, decision: &Decision) -> Vec<usize> {
    pinned_numa_nodes(&decision.containers, |cpu| machine.cpu(cpu).map(|c| c.numa))
        .into_iter()
        .map(|node| machine.numa_label(node))
        .collect()
}

/// The claim requests' names, in order.
fn request_names(claim: &ResourceClaim) -> Vec<String> {
    device_claim(claim)
        .and_then(|d| d.requests.as_ref())
        .map(|requests| requests.iter().map(|r| r.name.clone()).collect())
        .unwrap_or_default()
}

fn device_claim(claim: &ResourceClaim) -> Option<&DeviceClaim> {
    claim.spec.as_ref().and_then(|s| s.devices.as_ref())
}

/// Per request of each claim (the scheduler's claim for extended
/// resources last), the devices `devices` gives it.
fn request_devices(
    resolved: &[ResolvedClaim],
    special: Option<&Special>,
    devices: &PodDevices,
    state: &DraState,
    kubelet: &[usize],
) -> Vec<RequestDevices> {
    let placed = |given: Option<&ClaimDevices>, request: &str| -> Vec<PlacedDevice> {
        given
            .into_iter()
            .flat_map(|c| c.devices.iter())
            .filter(|d| d.request == request || d.request.starts_with(&format!("{request}/")))
            .map(|d| {
                let numa_node = d.numa_node.or_else(|| {
                    find_device(state.spec().resource_slices.as_slice(), &d.driver, &d.pool, &d.device)
                        .and_then(|device| numa_attribute(device, &d.driver))
                        .and_then(|(_, value)| value.single())
                });
                PlacedDevice {
                    driver: d.driver.clone(),
                    pool: d.pool.clone(),
                    device: d.device.clone(),
                    subrequest: (d.request != request).then(|| d.request.clone()),
                    numa_node,
                    aligned: aligned(numa_node, kubelet),
                }
            })
            .collect()
    };
    let mut out = Vec::new();
    for claim in resolved {
        let given = devices
            .claims
            .iter()
            .find(|c| c.claim == claim.key && c.name == claim.name);
        for request in request_names(&claim.claim) {
            out.push(RequestDevices {
                claim: claim.name.clone(),
                resource_claim: claim.key.clone(),
                devices: placed(given, &request),
                request,
                serves: Vec::new(),
            });
        }
    }
    if let Some(special) = special {
        // The scheduler's claim comes after the pod's own.
        let given = devices.claims.iter().rev().find(|c| c.name == EXTENDED_RESOURCES);
        for request in &special.requests {
            out.push(RequestDevices {
                claim: EXTENDED_RESOURCES.to_owned(),
                resource_claim: given.map_or_else(|| special.key.clone(), |g| g.claim.clone()),
                request: request.name.clone(),
                serves: special
                    .mappings
                    .iter()
                    .filter(|m| m.request_name == request.name)
                    .map(|m| ServedResource {
                        container: m.container_name.clone(),
                        resource: m.resource_name.clone(),
                    })
                    .collect(),
                devices: placed(given, &request.name),
            });
        }
    }
    out
}

/// The claim the scheduler writes for the pod's DRA-backed extended
/// resources on this node, as it plans it: its key, requests and the
/// container resources each request serves.
struct Special {
    /// `namespace/<pod>-extended-resources`, as `replay` names it.
    key: String,
    requests: Vec<DeviceRequest>,
    mappings: Vec<ContainerExtendedResourceRequest>,
}

fn special_claim(state: &DraState, pod: &KubePod) -> Option<Special> {
    let (requests, mappings) = extended::planned_requests(
        state.release(),
        pod,
        &state.scheduler_node(),
        &state.spec().device_classes,
    )?;
    Some(Special {
        key: format!(
            "{}/{}-{EXTENDED_RESOURCES}",
            namespace_of(pod),
            pod.metadata.name.as_deref().unwrap_or_default()
        ),
        requests,
        mappings,
    })
}

fn namespace_of(pod: &KubePod) -> &str {
    pod.metadata
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
}

/// What a request of the scheduler's claim serves, in words:
/// `example.com/gpu of container trainer`.
fn served_text(special: &Special, request: &str) -> String {
    let served: Vec<String> = special
        .mappings
        .iter()
        .filter(|m| m.request_name == request)
        .map(|m| format!("{} of container {}", m.resource_name, m.container_name))
        .collect();
    served.join(", ")
}

fn aligned(numa_node: Option<i64>, kubelet: &[usize]) -> Option<bool> {
    let node = numa_node?;
    (!kubelet.is_empty()).then(|| usize::try_from(node).is_ok_and(|n| kubelet.contains(&n)))
}

fn misalignments(requests: &[RequestDevices], kubelet: &[usize]) -> Vec<Misalignment> {
    requests
        .iter()
        .flat_map(|r| r.devices.iter().map(move |d| (r, d)))
        .filter(|(_, d)| d.aligned == Some(false))
        .filter_map(|(r, d)| {
            Some(Misalignment {
                claim: r.claim.clone(),
                request: r.request.clone(),
                device: format!("{}/{}/{}", d.driver, d.pool, d.device),
                numa_node: d.numa_node?,
                kubelet_numa_nodes: kubelet.to_vec(),
            })
        })
        .collect()
}

/// Every device placed, and all on the kubelet's NUMA nodes.
fn all_aligned(requests: &[RequestDevices]) -> bool {
    requests.iter().all(|r| !r.devices.is_empty())
        && requests
            .iter()
            .flat_map(|r| &r.devices)
            .all(|d| d.aligned == Some(true))
}

/// A NUMA attribute's value: one node, or (KEP-6072's list form) several.
#[derive(Clone, Debug, PartialEq, Eq)]
enum NumaValue {
    One(i64),
    List(Vec<i64>),
}

impl NumaValue {
    fn single(self) -> Option<i64> {
        match self {
            NumaValue::One(n) => Some(n),
            NumaValue::List(_) => None,
        }
    }
}

/// The fully qualified name of an attribute key as the slice writes it
/// (a short name is in the driver's domain).
fn qualified(key: &str, driver: &str) -> String {
    if key.contains('/') {
        key.to_owned()
    } else {
        format!("{driver}/{key}")
    }
}

/// The device's attribute of fully qualified `name`.
fn attribute<'a>(device: &'a Device, driver: &str, name: &str) -> Option<&'a DeviceAttribute> {
    device
        .attributes
        .as_ref()?
        .iter()
        .find(|(key, _)| qualified(key, driver) == name)
        .map(|(_, value)| value)
}

/// The device's NUMA attribute (standard first, then the driver's own):
/// its fully qualified name and value.
fn numa_attribute(device: &Device, driver: &str) -> Option<(String, NumaValue)> {
    let standard = format!("{STANDARD_DOMAIN}/{NUMA_NODE}");
    let own = format!("{driver}/{NUMA_NODE}");
    for name in [standard, own] {
        if let Some(value) = attribute(device, driver, &name) {
            if let Some(n) = value.int {
                return Some((name, NumaValue::One(n)));
            }
            if let Some(list) = &value.ints {
                return Some((name, NumaValue::List(list.clone())));
            }
        }
    }
    None
}

/// The device `driver/pool/name` in the newest generation of its pool.
fn find_device<'a>(slices: &'a [ResourceSlice], driver: &str, pool: &str, name: &str) -> Option<&'a Device> {
    let generation = slices
        .iter()
        .filter(|s| s.spec.driver == driver && s.spec.pool.name == pool)
        .map(|s| s.spec.pool.generation)
        .max()?;
    slices
        .iter()
        .filter(|s| s.spec.driver == driver && s.spec.pool.name == pool && s.spec.pool.generation == generation)
        .flat_map(|s| s.spec.devices.iter().flatten())
        .find(|d| d.name == name)
}

/// A device the node sees: its driver, pool and the device.
struct Visible<'a> {
    driver: &'a str,
    pool: &'a str,
    device: &'a Device,
}

/// The devices of the slices serving the node, by the allocator's own rule
/// (`topoalign_dra::nodesel`: the slice's `nodeName`, `allNodes` or
/// `nodeSelector` matched against the node's name and labels, or with
/// `perDeviceNodeSelection` each device's own), newest generation per pool.
/// The node is the block's `node` (its name and labels); without one, a
/// node named `node` with no labels, which no label selector matches. A
/// slice or device whose selector is invalid is not visible (the
/// allocator fails on it).
fn visible_devices(state: &DraState) -> Vec<Visible<'_>> {
    visible_on(&state.spec().resource_slices, &state.scheduler_node())
}

/// [`visible_devices`] of `slices` for `node`.
fn visible_on<'a>(slices: &'a [ResourceSlice], node: &k8s_openapi::api::core::v1::Node) -> Vec<Visible<'a>> {
    let mut newest: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for slice in slices {
        let entry = newest
            .entry((slice.spec.driver.as_str(), slice.spec.pool.name.as_str()))
            .or_insert(slice.spec.pool.generation);
        *entry = (*entry).max(slice.spec.pool.generation);
    }
    slices
        .iter()
        .filter(|s| topoalign_dra::nodesel::slice_serves(s, node) == Ok(Some(true)))
        .filter(|s| newest.get(&(s.spec.driver.as_str(), s.spec.pool.name.as_str())) == Some(&s.spec.pool.generation))
        .flat_map(|s| {
            s.spec
                .devices
                .iter()
                .flatten()
                .filter(move |device| topoalign_dra::nodesel::device_serves(s, device, node) == Ok(true))
                .map(move |device| Visible {
                    driver: &s.spec.driver,
                    pool: &s.spec.pool.name,
                    device,
                })
        })
        .collect()
}

/// What a request (or subrequest) asks for.
struct Asked<'a> {
    class: &'a str,
    selectors: Vec<&'a str>,
    /// `None`: all matching devices.
    count: Option<i64>,
}

/// The request's alternatives: one for `exactly`, one per `firstAvailable`
/// subrequest (name, what it asks).
fn selector_texts(selectors: &Option<Vec<DeviceSelector>>) -> Vec<&str> {
    selectors
        .iter()
        .flatten()
        .filter_map(|s| s.cel.as_ref().map(|c| c.expression.as_str()))
        .collect()
}

fn alternatives(request: &k8s_openapi::api::resource::v1::DeviceRequest) -> Vec<(String, Asked<'_>)> {
    let count = |mode: &Option<String>, count: Option<i64>| -> Option<i64> {
        if mode.as_deref() == Some("All") {
            None
        } else {
            Some(count.unwrap_or(1))
        }
    };
    if let Some(exact) = &request.exactly {
        return vec![(
            request.name.clone(),
            Asked {
                class: &exact.device_class_name,
                selectors: selector_texts(&exact.selectors),
                count: count(&exact.allocation_mode, exact.count),
            },
        )];
    }
    request
        .first_available
        .iter()
        .flatten()
        .map(|sub| {
            (
                format!("{}/{}", request.name, sub.name),
                Asked {
                    class: &sub.device_class_name,
                    selectors: selector_texts(&sub.selectors),
                    count: count(&sub.allocation_mode, sub.count),
                },
            )
        })
        .collect()
}

/// How one device fares against one request.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Fit {
    NotOfClass,
    FailsSelector,
    SelectorError(String),
    Taken,
    Free,
}

/// The visible devices judged against `asked`; `Err` when its class does
/// not exist.
fn judge<'a>(
    state: &'a DraState,
    env: &SelectorEnv,
    asked: &Asked<'_>,
    taken: &BTreeSet<DeviceId<'_>>,
) -> Result<Vec<(Visible<'a>, Fit)>, String> {
    let class = state
        .spec()
        .device_classes
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(asked.class))
        .ok_or_else(|| format!("DeviceClass {} does not exist", asked.class))?;
    let class_selectors: Vec<&str> = class
        .spec
        .as_ref()
        .map(|spec| selector_texts(&spec.selectors))
        .unwrap_or_default();
    let empty_attributes = BTreeMap::new();
    let empty_capacity = BTreeMap::new();
    let passes = |expressions: &[&str], visible: &Visible<'_>| -> Result<bool, String> {
        let view = DeviceView {
            driver: visible.driver,
            attributes: visible.device.attributes.as_ref().unwrap_or(&empty_attributes),
            capacity: visible.device.capacity.as_ref().unwrap_or(&empty_capacity),
            allow_multiple_allocations: false,
        };
        for expression in expressions {
            let selector = env.compile(expression).map_err(|e| e.to_string())?;
            if !selector.matches(&view).map_err(|e| e.to_string())? {
                return Ok(false);
            }
        }
        Ok(true)
    };
    Ok(visible_devices(state)
        .into_iter()
        .map(|visible| {
            let fit = match passes(&class_selectors, &visible) {
                Ok(false) => Fit::NotOfClass,
                Err(e) => Fit::SelectorError(e),
                Ok(true) => match passes(&asked.selectors, &visible) {
                    Ok(false) => Fit::FailsSelector,
                    Err(e) => Fit::SelectorError(e),
                    Ok(true)
                        if taken.contains(&DeviceId {
                            driver: visible.driver,
                            pool: visible.pool,
                            device: &visible.device.name,
                        }) && visible.device.allow_multiple_allocations != Some(true) =>
                    {
                        Fit::Taken
                    }
                    Ok(true) => Fit::Free,
                },
            };
            (visible, fit)
        })
        .collect())
}

fn selector_env(state: &DraState) -> Option<SelectorEnv> {
    let release = Release::parse(state.release())?;
    let features = topoalign_dra::features::scheduler_defaults(state.release()).ok()?;
    Some(SelectorEnv::new(release, &features))
}

/// Allocates `claims` for the node of `state`, beside its allocated claims.
fn allocate(state: &DraState, claims: Vec<ResourceClaim>) -> Outcome {
    topoalign_dra::allocate(&AllocationCase {
        release: state.release().to_owned(),
        node: state.scheduler_node(),
        device_classes: state.spec().device_classes.clone(),
        resource_slices: state.spec().resource_slices.clone(),
        allocated_claims: state.allocated_claims(),
        claims,
    })
}

fn outcome_text(outcome: &Outcome) -> Option<String> {
    match outcome {
        Outcome::Allocated { .. } => None,
        Outcome::Unschedulable { message } if message.is_empty() => Some("no allocation fits on this node".to_owned()),
        Outcome::Unschedulable { message } | Outcome::Error { message } => Some(message.clone()),
    }
}

/// Per request, why the pod's claims get no devices: the allocator asked
/// again for each request alone, then each claim without one constraint,
/// then each claim alone.
fn why_unsatisfiable(state: &DraState, resolved: &[ResolvedClaim]) -> Vec<RequestProblem> {
    let pending: Vec<&ResolvedClaim> = resolved.iter().filter(|c| !state.is_allocated(&c.key)).collect();
    let env = selector_env(state);
    let allocated = state.allocated_claims();
    let taken = held_devices(&allocated);
    let mut problems = Vec::new();
    for claim in &pending {
        let Some(devices) = device_claim(&claim.claim) else {
            continue;
        };
        let mut alone_fail = false;
        for request in devices.requests.iter().flatten() {
            let mut only = claim.claim.clone();
            if let Some(d) = only.spec.as_mut().and_then(|s| s.devices.as_mut()) {
                d.requests = Some(vec![request.clone()]);
                d.constraints = None;
            }
            let outcome = allocate(state, vec![only]);
            let Some(text) = outcome_text(&outcome) else {
                continue;
            };
            alone_fail = true;
            problems.push(RequestProblem {
                claim: claim.name.clone(),
                request: request.name.clone(),
                reason: format!(
                    "{} (the allocator: {text})",
                    request_reasons(state, env.as_ref(), request, &text, &taken)
                ),
            });
        }
        if alone_fail {
            continue;
        }
        let constraints = devices.constraints.clone().unwrap_or_default();
        let mut blamed = false;
        for (index, constraint) in constraints.iter().enumerate() {
            let mut without = claim.claim.clone();
            if let Some(d) = without.spec.as_mut().and_then(|s| s.devices.as_mut()) {
                let mut rest = constraints.clone();
                rest.remove(index);
                d.constraints = Some(rest);
            }
            if outcome_text(&allocate(state, vec![without])).is_none() {
                blamed = true;
                problems.push(RequestProblem {
                    claim: claim.name.clone(),
                    request: constrained_requests(constraint, devices).join(", "),
                    reason: constraint_reason(state, env.as_ref(), &taken, constraint, devices),
                });
            }
        }
        if !blamed && let Some(text) = outcome_text(&allocate(state, vec![claim.claim.clone()])) {
            problems.push(RequestProblem {
                claim: claim.name.clone(),
                request: String::new(),
                reason: format!("each request fits alone, but not all together: {text}"),
            });
        }
    }
    if problems.is_empty() && pending.len() > 1 {
        problems.push(RequestProblem {
            claim: pending.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", "),
            request: String::new(),
            reason: "each claim fits alone, but the pod's claims together need more free devices than the node has"
                .to_owned(),
        });
    }
    problems
}

/// The scheduler's claim for extended resources with only `requests`,
/// as the allocator gets it.
fn special_claim_object(pod_namespace: Option<String>, requests: Vec<DeviceRequest>) -> ResourceClaim {
    ResourceClaim {
        metadata: ObjectMeta {
            name: Some(extended::SPECIAL_CLAIM_NAME.to_owned()),
            namespace: pod_namespace,
            ..ObjectMeta::default()
        },
        spec: Some(ResourceClaimSpec {
            devices: Some(DeviceClaim {
                requests: Some(requests),
                ..DeviceClaim::default()
            }),
        }),
        status: None,
    }
}

/// Per request of the scheduler's claim for extended resources, why it
/// gets no devices: the allocator asked again for it alone, then for all
/// of them.
fn extended_unsatisfiable(state: &DraState, special: &Special) -> Vec<RequestProblem> {
    let env = selector_env(state);
    let allocated = state.allocated_claims();
    let taken = held_devices(&allocated);
    let namespace = special.key.split_once('/').map(|(ns, _)| ns.to_owned());
    let mut problems = Vec::new();
    for request in &special.requests {
        let alone = special_claim_object(namespace.clone(), vec![request.clone()]);
        let Some(text) = outcome_text(&allocate(state, vec![alone])) else {
            continue;
        };
        problems.push(RequestProblem {
            claim: EXTENDED_RESOURCES.to_owned(),
            request: request.name.clone(),
            reason: format!(
                "for {}: {} (the allocator: {text})",
                served_text(special, &request.name),
                request_reasons(state, env.as_ref(), request, &text, &taken)
            ),
        });
    }
    if problems.is_empty()
        && special.requests.len() > 1
        && let Some(text) = outcome_text(&allocate(
            state,
            vec![special_claim_object(namespace, special.requests.clone())],
        ))
    {
        problems.push(RequestProblem {
            claim: EXTENDED_RESOURCES.to_owned(),
            request: String::new(),
            reason: format!("each extended resource fits alone, but not all together: {text}"),
        });
    }
    problems
}

/// The scheduler's claim for extended resources takes no constraint or
/// selector of the user's: nothing ties its devices to the kubelet's NUMA
/// nodes (or to each other).
fn extended_lint(special: &Special, kubelet: &[usize]) -> Option<LintWarning> {
    if special.requests.is_empty() {
        return None;
    }
    let names: Vec<String> = special.requests.iter().map(|r| r.name.clone()).collect();
    let resources: BTreeSet<&str> = special.mappings.iter().map(|m| m.resource_name.as_str()).collect();
    let resources: Vec<&str> = resources.into_iter().collect();
    let pinned = if kubelet.is_empty() {
        "a NUMA node".to_owned()
    } else {
        format!("the kubelet's NUMA {}", nodes_text(kubelet))
    };
    let tied = if names.len() == 1 {
        format!("its device to {pinned}")
    } else {
        format!("its devices to each other or to {pinned}")
    };
    Some(LintWarning {
        claim: EXTENDED_RESOURCES.to_owned(),
        requests: names.clone(),
        message: format!(
            "{} {} served through DRA by the claim the scheduler writes for the pod (DRA-backed extended \
             resources): it carries no constraint or selector, so nothing ties {tied}; the allocator takes \
             the first free devices. A ResourceClaim of the pod's own can say where.",
            resources.join(", "),
            if resources.len() == 1 { "is" } else { "are" },
        ),
    })
}

/// The requests a constraint applies to (all of the claim's when it names
/// none).
fn constrained_requests(constraint: &DeviceConstraint, devices: &DeviceClaim) -> Vec<String> {
    match constraint.requests.as_deref() {
        Some(names) if !names.is_empty() => names.to_vec(),
        _ => devices.requests.iter().flatten().map(|r| r.name.clone()).collect(),
    }
}

/// Why one request the allocator refused (`text`, its own words) gets
/// no devices: for each of its alternatives (the request itself, or each
/// subrequest) its devices counted by how they fare, `; `-separated; the
/// allocator's words alone when the selectors cannot be evaluated. The
/// one wording of a pod's claims and of the scheduler's claim for
/// extended resources.
fn request_reasons(
    state: &DraState,
    env: Option<&SelectorEnv>,
    request: &DeviceRequest,
    text: &str,
    taken: &BTreeSet<DeviceId<'_>>,
) -> String {
    let reasons: Vec<String> = alternatives(request)
        .iter()
        .map(|(name, asked)| match env {
            Some(env) => device_reasons(state, env, name, asked, taken),
            None => format!("{name}: {text}"),
        })
        .collect();
    reasons.join("; ")
}

/// A request's devices counted by how they fare.
fn device_reasons(
    state: &DraState,
    env: &SelectorEnv,
    name: &str,
    asked: &Asked<'_>,
    taken: &BTreeSet<DeviceId<'_>>,
) -> String {
    let judged = match judge(state, env, asked, taken) {
        Ok(judged) => judged,
        Err(missing) => return format!("{name}: {missing}"),
    };
    let count = |fit: &Fit| judged.iter().filter(|(_, f)| f == fit).count();
    let of_class = judged.len() - count(&Fit::NotOfClass);
    let mut parts = vec![format!(
        "{name} asks for {} of class {}: the node has {of_class} such device{}",
        asked.count.map_or_else(|| "all devices".to_owned(), |n| n.to_string()),
        asked.class,
        if of_class == 1 { "" } else { "s" }
    )];
    let failing = count(&Fit::FailsSelector);
    if failing > 0 {
        parts.push(format!(
            "{failing} fail{} the request's selectors ({})",
            if failing == 1 { "s" } else { "" },
            asked.selectors.join(" && ")
        ));
    }
    let taken_devices: Vec<String> = judged
        .iter()
        .filter(|(_, f)| *f == Fit::Taken)
        .map(|(v, _)| format!("{}/{}", v.driver, v.device.name))
        .collect();
    if !taken_devices.is_empty() {
        parts.push(format!("{} taken by other claims", taken_devices.join(", ")));
    }
    if let Some(error) = judged.iter().find_map(|(_, f)| match f {
        Fit::SelectorError(e) => Some(e),
        _ => None,
    }) {
        parts.push(error.clone());
    }
    parts.push(format!("{} free", count(&Fit::Free)));
    parts.join(", ")
}

/// Why a constraint cannot be met: the attribute's values on each
/// constrained request's free devices.
fn constraint_reason(
    state: &DraState,
    env: Option<&SelectorEnv>,
    taken: &BTreeSet<DeviceId<'_>>,
    constraint: &DeviceConstraint,
    devices: &DeviceClaim,
) -> String {
    let (kind, name) = match (&constraint.match_attribute, &constraint.distinct_attribute) {
        (Some(a), _) => ("matchAttribute", a.as_str()),
        (None, Some(a)) => ("distinctAttribute", a.as_str()),
        (None, None) => return "an empty constraint".to_owned(),
    };
    let names = constrained_requests(constraint, devices);
    let mut values = Vec::new();
    if let Some(env) = env {
        for request in devices.requests.iter().flatten().filter(|r| names.contains(&r.name)) {
            for (alternative, asked) in alternatives(request) {
                let Ok(judged) = judge(state, env, &asked, taken) else {
                    continue;
                };
                let mut seen = BTreeSet::new();
                let mut lacking = 0;
                for (visible, _) in judged.iter().filter(|(_, f)| *f == Fit::Free) {
                    match attribute(visible.device, visible.driver, name) {
                        Some(value) => {
                            seen.insert(attribute_text(value));
                        }
                        None => lacking += 1,
                    }
                }
                let mut text = format!(
                    "{alternative}'s free devices have {}",
                    if seen.is_empty() {
                        "none".to_owned()
                    } else {
                        seen.into_iter().collect::<Vec<_>>().join(", ")
                    }
                );
                if lacking > 0 {
                    text.push_str(&format!(" ({lacking} lack the attribute)"));
                }
                values.push(text);
            }
        }
    }
    format!(
        "{kind} {name} across {} cannot be met{}",
        names.join(", "),
        if values.is_empty() {
            String::new()
        } else {
            format!(": {}", values.join("; "))
        }
    )
}

fn attribute_text(value: &DeviceAttribute) -> String {
    if let Some(n) = value.int {
        return n.to_string();
    }
    if let Some(list) = &value.ints {
        return format!("{list:?}");
    }
    if let Some(s) = value.string.as_ref().or(value.version.as_ref()) {
        return s.clone();
    }
    if let Some(b) = value.bool {
        return b.to_string();
    }
    serde_json::to_string(value).unwrap_or_default()
}

/// The identifier of a fully qualified attribute name (`numaNode`).
fn identifier(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// Whether the claims' constraints imply that the devices share a NUMA
/// node with each other and with the kubelet's CPUs and memory.
fn lint(state: &DraState, resolved: &[ResolvedClaim], kubelet: &[usize]) -> Vec<LintWarning> {
    let env = selector_env(state);
    let taken = BTreeSet::new(); // what a request may take at all, taken or not
    let mut warnings = Vec::new();
    let with_devices: Vec<&ResolvedClaim> = resolved
        .iter()
        .filter(|c| !request_names(&c.claim).is_empty())
        .collect();
    if with_devices.len() > 1 {
        warnings.push(LintWarning {
            claim: with_devices
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            requests: Vec::new(),
            message: "the pod's claims are allocated independently: no constraint spans claims, so only selectors \
                      naming a NUMA node keep their devices together"
                .to_owned(),
        });
    }
    for claim in resolved {
        let Some(devices) = device_claim(&claim.claim) else {
            continue;
        };
        let names = request_names(&claim.claim);
        // Union-find over the requests, joined by locality constraints.
        let mut group: Vec<usize> = (0..names.len()).collect();
        fn root(group: &mut [usize], mut i: usize) -> usize {
            while group[i] != i {
                i = group[i];
            }
            i
        }
        let mut list_valued_links = 0;
        for constraint in devices.constraints.iter().flatten() {
            let Some(attribute) = &constraint.match_attribute else {
                continue;
            };
            if ![NUMA_NODE, PCIE_ROOT].contains(&identifier(attribute)) {
                continue;
            }
            let constrained = constrained_requests(constraint, devices);
            let indices: Vec<usize> = constrained
                .iter()
                .filter_map(|n| names.iter().position(|m| m == n))
                .collect();
            for pair in indices.windows(2) {
                let (a, b) = (root(&mut group, pair[0]), root(&mut group, pair[1]));
                group[a] = b;
            }
            // The devices each constrained request may take, and what they
            // publish of the attribute.
            let Some(env) = &env else { continue };
            let mut lists = Vec::new();
            for request in devices
                .requests
                .iter()
                .flatten()
                .filter(|r| constrained.contains(&r.name))
            {
                let mut lacking = Vec::new();
                let mut total = 0;
                for (_, asked) in alternatives(request) {
                    let Ok(judged) = judge(state, env, &asked, &taken) else {
                        continue;
                    };
                    for (visible, _) in judged.iter().filter(|(_, f)| *f == Fit::Free) {
                        total += 1;
                        match attribute_of(visible, attribute) {
                            None => lacking.push(visible.device.name.clone()),
                            Some(value) if value.ints.is_some() => lists.push(visible.device.name.clone()),
                            Some(_) => {}
                        }
                    }
                }
                if !lacking.is_empty() {
                    warnings.push(LintWarning {
                        claim: claim.name.clone(),
                        requests: vec![request.name.clone()],
                        message: format!(
                            "{} of the {total} devices request {} may take lack {attribute} ({}): matchAttribute \
                             rules them out",
                            lacking.len(),
                            request.name,
                            lacking.join(", ")
                        ),
                    });
                }
            }
            if !lists.is_empty() {
                list_valued_links += 1;
                lists.sort();
                lists.dedup();
                warnings.push(LintWarning {
                    claim: claim.name.clone(),
                    requests: constrained.clone(),
                    message: format!(
                        "{attribute} is a list on {} (KEP-6072: the same-socket NUMA nodes at minimum distance): \
                         matchAttribute is met when the lists share one node, which does not put the devices on the \
                         same NUMA node",
                        lists.join(", ")
                    ),
                });
            }
        }
        if list_valued_links > 1 {
            warnings.push(LintWarning {
                claim: claim.name.clone(),
                requests: names.clone(),
                message: "several matchAttribute constraints over list-valued attributes are not transitive: a \
                          shares a node with b and b with c does not make a share one with c"
                    .to_owned(),
            });
        }
        let mut groups: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (i, name) in names.iter().enumerate() {
            let r = root(&mut group, i);
            groups.entry(r).or_default().push(name.clone());
        }
        if groups.len() > 1 {
            let listed: Vec<String> = groups.values().map(|g| format!("[{}]", g.join(", "))).collect();
            warnings.push(LintWarning {
                claim: claim.name.clone(),
                requests: names.clone(),
                message: format!(
                    "no matchAttribute on {NUMA_NODE} or {PCIE_ROOT} links {}: each is allocated first-fit, on \
                     whatever NUMA node its first free device is",
                    listed.join(" and ")
                ),
            });
        } else if !names.is_empty() && !kubelet.is_empty() {
            let pinned = devices
                .requests
                .iter()
                .flatten()
                .flat_map(|r| alternatives(r).into_iter().flat_map(|(_, a)| a.selectors))
                .any(|s| s.contains(NUMA_NODE));
            if !pinned {
                warnings.push(LintWarning {
                    claim: claim.name.clone(),
                    requests: names.clone(),
                    message: format!(
                        "the constraints keep {} together, but nothing ties them to the kubelet's NUMA {}: no \
                         selector names a {NUMA_NODE}, and the allocator takes the first free set",
                        names.join(", "),
                        nodes_text(kubelet)
                    ),
                });
            }
        }
    }
    warnings
}

fn attribute_of<'a>(visible: &Visible<'a>, name: &str) -> Option<&'a DeviceAttribute> {
    attribute(visible.device, visible.driver, name)
}

fn nodes_text(nodes: &[usize]) -> String {
    crate::hints::nodes_text(nodes)
}

/// The object a claim comes from, and the path of its `devices` block.
fn target(claim: &ResolvedClaim) -> (String, &'static str) {
    match &claim.source {
        ClaimSource::Template(key) => (format!("ResourceClaimTemplate {key}"), "spec.spec.devices"),
        ClaimSource::Claim(key) => (format!("ResourceClaim {key}"), "spec.devices"),
    }
}

/// `state` with the claim's source object's `devices` changed by `change`;
/// the changed object too.
fn changed_state(
    state: &DraState,
    claim: &ResolvedClaim,
    change: impl FnOnce(&mut DeviceClaim),
) -> Option<(DraState, Value)> {
    let mut changed = state.clone();
    let spec = changed.spec_mut();
    let object = match &claim.source {
        ClaimSource::Template(key) => {
            let template = spec
                .resource_claim_templates
                .iter_mut()
                .find(|t| object_key(&t.metadata) == *key)?;
            let devices = template
                .spec
                .as_mut()?
                .spec
                .as_mut()?
                .devices
                .get_or_insert_with(DeviceClaim::default);
            change(devices);
            serde_json::to_value(&*template).ok()?
        }
        ClaimSource::Claim(key) => {
            let found = spec
                .resource_claims
                .iter_mut()
                .find(|c| object_key(&c.metadata) == *key)?;
            let devices = found.spec.as_mut()?.devices.get_or_insert_with(DeviceClaim::default);
            change(devices);
            serde_json::to_value(&*found).ok()?
        }
    };
    Some((changed, object))
}

fn object_key(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or("default"),
        meta.name.as_deref().unwrap_or_default()
    )
}

/// The pod's devices under `changed`, when they are all on the kubelet's
/// NUMA nodes.
fn aligned_devices(changed: &DraState, pod: &KubePod, kubelet: &[usize]) -> Option<Vec<RequestDevices>> {
    let resolved = changed.resolve(pod).ok()?;
    let devices = changed.clone().admit(pod).ok()??;
    if devices.outcome != "allocated" {
        return None;
    }
    let special = special_claim(changed, pod);
    let requests = request_devices(&resolved, special.as_ref(), &devices, changed, kubelet);
    all_aligned(&requests).then_some(requests)
}

/// `text` as a single-quoted YAML scalar.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The YAML of one selector list entry, indented by `indent`.
fn selector_yaml(indent: &str, expression: &str) -> String {
    format!(
        "{indent}selectors:\n{indent}- cel: {{expression: {}}}\n",
        quoted(expression)
    )
}

fn devices_text(requests: &[RequestDevices]) -> String {
    requests
        .iter()
        .flat_map(|r| {
            r.devices.iter().map(move |d| {
                format!(
                    "{}/{} {}{}",
                    r.claim,
                    r.request,
                    d.device,
                    d.numa_node.map(|n| format!(" (NUMA {n})")).unwrap_or_default()
                )
            })
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The pod's claims a change to their template or claim can move: those
/// not allocated yet, one per source object (two claims from one template
/// change together).
fn to_change<'a>(state: &DraState, resolved: &'a [ResolvedClaim]) -> Vec<&'a ResolvedClaim> {
    let mut seen: Vec<&ClaimSource> = Vec::new();
    let mut out = Vec::new();
    for claim in resolved.iter().filter(|c| !state.is_allocated(&c.key)) {
        if !seen.contains(&&claim.source) {
            seen.push(&claim.source);
            out.push(claim);
        }
    }
    out
}

/// (a) `matchAttribute` on the NUMA attribute the claim's devices publish,
/// across every request of a claim with several requests that has none.
fn constraint_fixes(state: &DraState, pod: &KubePod, resolved: &[ResolvedClaim], kubelet: &[usize]) -> Vec<DraFix> {
    let mut fixes = Vec::new();
    for claim in to_change(state, resolved) {
        let names = request_names(&claim.claim);
        if names.len() < 2 {
            continue;
        }
        let Some(attribute) = claim_numa_attribute(state, claim) else {
            continue;
        };
        let constraint = DeviceConstraint {
            requests: Some(names.clone()),
            match_attribute: Some(attribute.clone()),
            distinct_attribute: None,
        };
        let already = device_claim(&claim.claim)
            .and_then(|d| d.constraints.as_ref())
            .is_some_and(|c| c.iter().any(|c| c.match_attribute.as_deref() == Some(&attribute)));
        if already {
            continue;
        }
        let added = constraint.clone();
        let Some((changed, object)) = changed_state(state, claim, |devices| {
            devices.constraints.get_or_insert_with(Vec::new).push(added);
        }) else {
            continue;
        };
        let Some(requests) = aligned_devices(&changed, pod, kubelet) else {
            continue;
        };
        let (target, path) = target(claim);
        fixes.push(DraFix {
            kind: DraFixKind::Constraint,
            description: format!(
                "add a constraint to {target}: matchAttribute {attribute} across {}: DRA then allocates {}, on the \
                 kubelet's NUMA {}.",
                names.join(", "),
                devices_text(&requests),
                nodes_text(kubelet)
            ),
            target: Some(target),
            path: Some(path.to_owned()),
            yaml: Some(format!(
                "constraints:\n- requests: [{}]\n  matchAttribute: {attribute}\n",
                names.join(", ")
            )),
            changed: Some(object),
            pod: None,
            remove: Vec::new(),
            requests,
            kubelet_numa_nodes: kubelet.to_vec(),
        });
    }
    fixes
}

/// The NUMA attribute every request of the claim can be matched on: the
/// one its candidate devices publish (the standard one when they all do).
fn claim_numa_attribute(state: &DraState, claim: &ResolvedClaim) -> Option<String> {
    let env = selector_env(state)?;
    let devices = device_claim(&claim.claim)?;
    let mut names: Option<BTreeSet<String>> = None;
    for request in devices.requests.iter().flatten() {
        let mut published = BTreeSet::new();
        for (_, asked) in alternatives(request) {
            let judged = judge(state, &env, &asked, &BTreeSet::new()).ok()?;
            for (visible, _) in judged.iter().filter(|(_, f)| *f == Fit::Free) {
                if let Some((name, _)) = numa_attribute(visible.device, visible.driver) {
                    published.insert(name);
                }
            }
        }
        names = Some(match names {
            None => published,
            Some(before) => before.intersection(&published).cloned().collect(),
        });
    }
    let names = names?;
    let standard = format!("{STANDARD_DOMAIN}/{NUMA_NODE}");
    if names.contains(&standard) {
        Some(standard)
    } else {
        names.into_iter().next()
    }
}

/// The CEL selector naming NUMA node `node` in the attribute `name`
/// (`domain/numaNode`).
fn numa_selector(name: &str, node: usize) -> String {
    let (domain, id) = name.rsplit_once('/').unwrap_or((STANDARD_DOMAIN, name));
    format!("device.attributes[\"{domain}\"].{id} == {node}")
}

/// (b) A selector on every request of every claim not allocated yet,
/// naming one of the kubelet's NUMA nodes in the attribute the request's
/// devices publish.
fn selector_fix(state: &DraState, pod: &KubePod, resolved: &[ResolvedClaim], kubelet: &[usize]) -> Option<DraFix> {
    let env = selector_env(state)?;
    for &node in kubelet {
        let mut changed = state.clone();
        let mut snippets = Vec::new();
        let mut objects = Vec::new();
        for claim in to_change(state, resolved) {
            let Some(devices) = device_claim(&claim.claim) else {
                continue;
            };
            // Per request (and subrequest): the NUMA attribute its devices
            // publish.
            let mut expressions: BTreeMap<String, String> = BTreeMap::new();
            for request in devices.requests.iter().flatten() {
                for (name, asked) in alternatives(request) {
                    let Ok(judged) = judge(state, &env, &asked, &BTreeSet::new()) else {
                        continue;
                    };
                    if let Some((attribute, _)) = judged
                        .iter()
                        .filter(|(_, f)| *f == Fit::Free)
                        .find_map(|(v, _)| numa_attribute(v.device, v.driver))
                    {
                        expressions.insert(name, numa_selector(&attribute, node));
                    }
                }
            }
            if expressions.is_empty() {
                continue;
            }
            let add = |selectors: &mut Option<Vec<DeviceSelector>>, expression: &str| {
                selectors.get_or_insert_with(Vec::new).push(DeviceSelector {
                    cel: Some(CELDeviceSelector {
                        expression: expression.to_owned(),
                    }),
                });
            };
            let mut snippet = Vec::new();
            let Some((next, object)) = changed_state(&changed, claim, |devices| {
                for request in devices.requests.iter_mut().flatten() {
                    if let Some(exact) = request.exactly.as_mut()
                        && let Some(expression) = expressions.get(&request.name)
                    {
                        add(&mut exact.selectors, expression);
                        snippet.push(format!(
                            "- name: {}\n  exactly:\n{}",
                            request.name,
                            selector_yaml("    ", expression)
                        ));
                    }
                    let mut subs = String::new();
                    for sub in request.first_available.iter_mut().flatten() {
                        if let Some(expression) = expressions.get(&format!("{}/{}", request.name, sub.name)) {
                            add(&mut sub.selectors, expression);
                            subs.push_str(&format!(
                                "  - name: {}\n{}",
                                sub.name,
                                selector_yaml("    ", expression)
                            ));
                        }
                    }
                    if !subs.is_empty() {
                        snippet.push(format!("- name: {}\n  firstAvailable:\n{subs}", request.name));
                    }
                }
            }) else {
                continue;
            };
            changed = next;
            let (target, path) = target(claim);
            snippets.push((
                format!("{target}: add under {path}, to each request"),
                format!("requests:\n{}", snippet.concat()),
            ));
            objects.push((target, object));
        }
        if objects.is_empty() {
            return None;
        }
        let Some(requests) = aligned_devices(&changed, pod, kubelet) else {
            continue;
        };
        let targets: Vec<&str> = objects.iter().map(|(t, _)| t.as_str()).collect();
        return Some(DraFix {
            kind: DraFixKind::Selector,
            description: format!(
                "add a selector naming NUMA node {node} to each request of {}: DRA then allocates {}, on the \
                 kubelet's NUMA {}.",
                targets.join(", "),
                devices_text(&requests),
                nodes_text(kubelet)
            ),
            target: Some(targets.join(", ")),
            path: (objects.len() == 1).then(|| selector_path(&objects[0].1)),
            yaml: Some(if snippets.len() == 1 {
                snippets[0].1.clone()
            } else {
                snippets
                    .iter()
                    .map(|(header, yaml)| format!("# {header}\n{yaml}"))
                    .collect()
            }),
            changed: (objects.len() == 1).then(|| objects[0].1.clone()),
            pod: None,
            remove: Vec::new(),
            requests,
            kubelet_numa_nodes: kubelet.to_vec(),
        });
    }
    None
}

/// (d) For DRA-backed extended resources: the pod asks for the devices
/// with a ResourceClaimTemplate of its own instead (the scheduler's claim
/// takes no selector or constraint): one request per request of the
/// scheduler's claim (same class and count), named after its resource,
/// with a selector naming one of the kubelet's NUMA nodes — or, with
/// several requests, a `matchAttribute` on the NUMA attribute across
/// them; the containers reference the claim in place of the resource.
/// Each is checked: the changed pod admitted again (its NUMA nodes), the
/// template's claim allocated on the node.
fn explicit_claim_fixes(
    situation: &Situation<'_>,
    state: &DraState,
    pod: &KubePod,
    special: &Special,
    kubelet: &[usize],
) -> Vec<DraFix> {
    let Some(env) = selector_env(state) else {
        return Vec::new();
    };
    let naming = ExplicitNames::new(state, pod, special);
    // Per request: the NUMA attributes its class's devices publish.
    let mut published: Vec<BTreeSet<String>> = Vec::new();
    for request in &special.requests {
        let mut names = BTreeSet::new();
        for (_, asked) in alternatives(request) {
            let Ok(judged) = judge(state, &env, &asked, &BTreeSet::new()) else {
                continue;
            };
            for (visible, _) in judged.iter().filter(|(_, f)| *f == Fit::Free) {
                if let Some((name, _)) = numa_attribute(visible.device, visible.driver) {
                    names.insert(name);
                }
            }
        }
        published.push(names);
    }
    let standard = format!("{STANDARD_DOMAIN}/{NUMA_NODE}");
    let pick = |names: &BTreeSet<String>| {
        if names.contains(&standard) {
            Some(standard.clone())
        } else {
            names.iter().next().cloned()
        }
    };
    let mut fixes = Vec::new();
    // A selector on each request naming one of the kubelet's NUMA nodes.
    let attributes: Option<Vec<String>> = published.iter().map(pick).collect();
    if let Some(attributes) = attributes {
        for &node in kubelet {
            let selectors: Vec<String> = attributes.iter().map(|a| numa_selector(a, node)).collect();
            let what = format!("a selector naming NUMA node {node} on each request");
            if let Some(fix) = explicit_fix(situation, state, special, &naming, Some(&selectors), None, &what) {
                fixes.push(fix);
                break;
            }
        }
    }
    // A matchAttribute across the requests, on an attribute they all publish.
    if special.requests.len() > 1 {
        let common = published
            .iter()
            .skip(1)
            .fold(published.first().cloned().unwrap_or_default(), |all, names| {
                all.intersection(names).cloned().collect()
            });
        if let Some(attribute) = pick(&common) {
            let what = format!("matchAttribute {attribute} across its requests");
            fixes.extend(explicit_fix(
                situation,
                state,
                special,
                &naming,
                None,
                Some(&attribute),
                &what,
            ));
        }
    }
    fixes
}

/// The names an explicit claim for the extended resources gets: the pod's
/// claim, the template, and each request (by the scheduler's request
/// name), none taken already.
struct ExplicitNames {
    namespace: String,
    pod: String,
    claim: String,
    template: String,
    requests: BTreeMap<String, String>,
}

impl ExplicitNames {
    fn new(state: &DraState, pod: &KubePod, special: &Special) -> ExplicitNames {
        let namespace = namespace_of(pod).to_owned();
        let pod_name = pod.metadata.name.clone().unwrap_or_default();
        // The first of `name(1)`, `name(2)`, … not taken.
        let free = |name: &dyn Fn(usize) -> String, taken: &dyn Fn(&str) -> bool| {
            (1..).map(name).find(|name| !taken(name)).unwrap_or_default()
        };
        let pod_claims: Vec<String> = pod
            .spec
            .as_ref()
            .and_then(|s| s.resource_claims.as_ref())
            .into_iter()
            .flatten()
            .map(|c| c.name.clone())
            .collect();
        let claim = free(&|n| label_name("devices", "", n), &|name| {
            pod_claims.iter().any(|c| c == name)
        });
        let template = free(&|n| label_name(&pod_name, "-devices", n), &|name| {
            state
                .spec()
                .resource_claim_templates
                .iter()
                .any(|t| object_key(&t.metadata) == format!("{namespace}/{name}"))
        });
        let mut requests: BTreeMap<String, String> = BTreeMap::new();
        for request in &special.requests {
            let resource = special
                .mappings
                .iter()
                .find(|m| m.request_name == request.name)
                .map_or(request.name.as_str(), |m| m.resource_name.as_str());
            let base = resource.rsplit('/').next().unwrap_or(resource);
            let name = free(&|n| label_name(base, "", n), &|name| {
                requests.values().any(|n| n == name)
            });
            requests.insert(request.name.clone(), name);
        }
        ExplicitNames {
            namespace,
            pod: pod_name,
            claim,
            template,
            requests,
        }
    }
}

/// The longest DNS label (RFC 1123), as Kubernetes validates the names of
/// a pod's claims and of claim requests.
const DNS_LABEL_MAX: usize = 63;

/// `stem` then `tail` as a DNS label (`-{n}` after it from the second
/// candidate on): `stem` made a label ([`topoalign_dra::names::dns_label`])
/// and cut short so that the whole is at most [`DNS_LABEL_MAX`] long —
/// a long pod name still names its template (`<pod>-devices`), whose
/// tail is kept.
fn label_name(stem: &str, tail: &str, n: usize) -> String {
    let tail = if n == 1 { tail.to_owned() } else { format!("{tail}-{n}") };
    let stem = topoalign_dra::names::dns_label(stem);
    let room = DNS_LABEL_MAX.saturating_sub(tail.len());
    // `dns_label` leaves ASCII only: any byte is a character boundary.
    let cut = stem[..stem.len().min(room)].trim_end_matches('-');
    format!("{cut}{tail}")
}

/// One explicit-claim fix: the template (each request with `selectors[i]`,
/// or a `matchAttribute` on `attribute` across them), the pod changed to
/// use it, both checked.
fn explicit_fix(
    situation: &Situation<'_>,
    state: &DraState,
    special: &Special,
    naming: &ExplicitNames,
    selectors: Option<&[String]>,
    attribute: Option<&str>,
    what: &str,
) -> Option<DraFix> {
    let mut requests = Vec::new();
    for (i, request) in special.requests.iter().enumerate() {
        let exact = request.exactly.as_ref()?;
        let mut exactly = json!({"deviceClassName": exact.device_class_name});
        if let Some(count) = exact.count.filter(|&c| c != 1) {
            exactly["count"] = json!(count);
        }
        if let Some(selectors) = selectors {
            exactly["selectors"] = json!([{"cel": {"expression": selectors.get(i)?}}]);
        }
        requests.push(json!({"name": naming.requests.get(&request.name)?, "exactly": exactly}));
    }
    let mut devices = json!({"requests": requests});
    if let Some(attribute) = attribute {
        devices["constraints"] = json!([{"matchAttribute": attribute}]);
    }
    let template_json = json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": naming.template, "namespace": naming.namespace},
        "spec": {"spec": {"devices": devices}},
    });
    let template: ResourceClaimTemplate = serde_json::from_value(template_json.clone()).ok()?;
    let (manifest, pod_snippet) = manifest_with_claim(situation.manifest, special, naming);
    // The kubelet on the changed pod (it no longer asks for the resource).
    let decision = apply(situation, &Change::Pod(manifest.clone())).ok()?;
    if !decision.admitted() {
        return None;
    }
    let machine = situation.node.machine();
    let kubelet = kubelet_numa_nodes(machine, &decision);
    if kubelet.is_empty() {
        return None;
    }
    let mut changed = state.clone();
    changed.spec_mut().resource_claim_templates.push(template);
    let changed_pod: KubePod = serde_json::from_value(manifest.clone()).ok()?;
    let placed = aligned_devices(&changed, &changed_pod, &kubelet)?;
    let resources: BTreeSet<&str> = special.mappings.iter().map(|m| m.resource_name.as_str()).collect();
    let resources: Vec<&str> = resources.into_iter().collect();
    let target = format!(
        "ResourceClaimTemplate {}/{} (new) and Pod {}/{}",
        naming.namespace, naming.template, naming.namespace, naming.pod
    );
    let template_yaml = serde_yaml_ng::to_string(&template_json).ok()?;
    let pod_yaml = serde_yaml_ng::to_string(&pod_snippet).ok()?;
    Some(DraFix {
        kind: DraFixKind::ExplicitClaim,
        description: format!(
            "ask for {} with a ResourceClaim instead (the scheduler's own claim for an extended resource takes no \
             selector or constraint): a new ResourceClaimTemplate {}/{} with {what}, which the pod references in \
             place of the resource: DRA then allocates {}, on the kubelet's NUMA {}.",
            resources.join(", "),
            naming.namespace,
            naming.template,
            devices_text(&placed),
            nodes_text(&kubelet)
        ),
        target: Some(target),
        path: None,
        yaml: Some(format!(
            "{template_yaml}---\n# Pod {}/{}: remove {} from the containers' resources, and add:\n{pod_yaml}",
            naming.namespace,
            naming.pod,
            resources.join(", ")
        )),
        changed: Some(template_json),
        pod: Some(manifest),
        remove: Vec::new(),
        requests: placed,
        kubelet_numa_nodes: kubelet,
    })
}

/// The pod manifest asking for the devices through the claim `naming`
/// names instead of the extended resources, and what was added (the
/// snippet a person adds).
fn manifest_with_claim(manifest: &Value, special: &Special, naming: &ExplicitNames) -> (Value, Value) {
    let mut changed = manifest.clone();
    let mut snippet_containers: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    if let Some(spec) = changed.get_mut("spec").and_then(Value::as_object_mut) {
        for list in ["initContainers", "containers"] {
            let Some(Value::Array(containers)) = spec.get_mut(list) else {
                continue;
            };
            for container in containers.iter_mut() {
                let name = container
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let served: Vec<&ContainerExtendedResourceRequest> =
                    special.mappings.iter().filter(|m| m.container_name == name).collect();
                let Some(object) = container.as_object_mut().filter(|_| !served.is_empty()) else {
                    continue;
                };
                let Some(resources) = object.entry("resources").or_insert_with(|| json!({})).as_object_mut() else {
                    continue;
                };
                for field in ["requests", "limits"] {
                    if let Some(amounts) = resources.get_mut(field).and_then(Value::as_object_mut) {
                        for m in &served {
                            amounts.remove(&m.resource_name);
                        }
                    }
                }
                let mut added = Vec::new();
                if let Some(claims) = resources.entry("claims").or_insert_with(|| json!([])).as_array_mut() {
                    for m in &served {
                        let Some(request) = naming.requests.get(&m.request_name) else {
                            continue;
                        };
                        let entry = json!({"name": naming.claim, "request": request});
                        if !claims.contains(&entry) {
                            claims.push(entry.clone());
                            added.push(entry);
                        }
                    }
                }
                snippet_containers.entry(list).or_default().push(json!({
                    "name": name,
                    "resources": {"claims": added},
                }));
            }
        }
        let reference = json!({"name": naming.claim, "resourceClaimTemplateName": naming.template});
        if let Some(list) = spec.entry("resourceClaims").or_insert_with(|| json!([])).as_array_mut() {
            list.push(reference.clone());
        }
        let mut snippet = serde_json::Map::new();
        snippet.insert("resourceClaims".to_owned(), json!([reference]));
        for (list, containers) in snippet_containers {
            snippet.insert(list.to_owned(), Value::Array(containers));
        }
        return (changed, json!({"spec": snippet}));
    }
    (changed, json!({}))
}

/// (e) Fewer CPUs for the pod: when every device DRA gives it is on one
/// NUMA node, the largest CPU request (whole CPUs, below the pod's, for
/// the container asking the most) with which the kubelet pins the pod to
/// that node — DRA's choice does not depend on the CPUs, and is checked
/// again anyway.
fn cpu_request_fix(situation: &Situation<'_>, state: &DraState, requests: &[RequestDevices]) -> Option<DraFix> {
    let nodes: Option<BTreeSet<i64>> = requests.iter().flat_map(|r| &r.devices).map(|d| d.numa_node).collect();
    let nodes: Vec<i64> = nodes?.into_iter().collect();
    let [node] = nodes.as_slice() else {
        return None;
    };
    let node = usize::try_from(*node).ok()?;
    let current = situation
        .pod
        .all_containers()
        .map(|(c, _)| c.request("cpu"))
        .max()
        .filter(|q| !q.is_zero() && q.milli() % 1000 == 0)?;
    let cpus = current.milli() / 1000;
    let machine = situation.node.machine();
    for n in (1..cpus).rev().take(CPU_ATTEMPTS) {
        let (manifest, container) =
            with_largest_request(situation.manifest, situation.pod, "cpu", Quantity::from_units(n))?;
        let Ok(decision) = apply(situation, &Change::Pod(manifest.clone())) else {
            continue;
        };
        if !decision.admitted() {
            continue;
        }
        let kubelet = kubelet_numa_nodes(machine, &decision);
        if kubelet != [node] {
            continue;
        }
        let Ok(changed_pod) = serde_json::from_value::<KubePod>(manifest.clone()) else {
            return None;
        };
        let Some(placed) = aligned_devices(state, &changed_pod, &kubelet) else {
            continue;
        };
        return Some(DraFix {
            kind: DraFixKind::CpuRequest,
            description: format!(
                "give container {container} {n} CPU{} instead of {cpus}: the kubelet then pins the pod's CPUs and \
                 memory to NUMA {node}, where DRA allocates {}.",
                if n == 1 { "" } else { "s" },
                devices_text(&placed)
            ),
            target: None,
            path: None,
            yaml: None,
            changed: None,
            pod: Some(manifest),
            remove: Vec::new(),
            requests: placed,
            kubelet_numa_nodes: kubelet,
        });
    }
    None
}

/// Where the selectors go in a changed template or claim.
fn selector_path(object: &Value) -> String {
    if object.pointer("/spec/spec").is_some() {
        "spec.spec.devices (to each request)".to_owned()
    } else {
        "spec.devices (to each request)".to_owned()
    }
}

/// (c) A running pod removed first: its CPUs, memory and claims freed, the
/// pod admitted again and its claims allocated again.
fn removal_fixes(situation: &Situation<'_>, state: &DraState, pod: &KubePod) -> Vec<DraFix> {
    let machine = situation.node.machine();
    let mut fixes = Vec::new();
    for running in situation.node.pods().iter().take(REMOVAL_ATTEMPTS) {
        let key = running.key();
        let Ok(decision) = apply(situation, &Change::Remove(vec![key.clone()])) else {
            continue;
        };
        if !decision.admitted() {
            continue;
        }
        let kubelet = kubelet_numa_nodes(machine, &decision);
        if kubelet.is_empty() {
            continue;
        }
        let mut freed = state.clone();
        freed.remove(&key);
        let Some(requests) = aligned_devices(&freed, pod, &kubelet) else {
            continue;
        };
        fixes.push(DraFix {
            kind: DraFixKind::RemovePods,
            description: format!(
                "remove {key} first: the kubelet then pins NUMA {} and DRA allocates {}.",
                nodes_text(&kubelet),
                devices_text(&requests)
            ),
            target: None,
            path: None,
            yaml: None,
            changed: None,
            pod: None,
            remove: vec![key],
            requests,
            kubelet_numa_nodes: kubelet,
        });
        if fixes.len() == REMOVAL_FIXES {
            break;
        }
    }
    fixes
}

fn summary(
    admitted: bool,
    crashes: bool,
    devices: &PodDevices,
    requests: &[RequestDevices],
    misaligned: &[Misalignment],
    unsatisfiable: &[RequestProblem],
    kubelet: &[usize],
) -> String {
    if devices.outcome != "allocated" {
        let first = unsatisfiable
            .first()
            .map(|p| {
                if p.request.is_empty() {
                    format!(" {}: {}.", p.claim, p.reason)
                } else {
                    format!(" {}/{}: {}.", p.claim, p.request, p.reason)
                }
            })
            .unwrap_or_default();
        return format!(
            "DRA cannot allocate the pod's claims on this node ({}: {}).{first}",
            devices.outcome,
            devices.message.as_deref().unwrap_or("no allocation fits")
        );
    }
    if !admitted {
        // A kubelet that crashes admitting the pod (NUMA ids past 63,
        // `Decision::kubelet_panic`) refuses nothing: it stops.
        let kubelet = if crashes {
            "The kubelet crashes admitting the pod"
        } else {
            "The kubelet refuses the pod"
        };
        return format!(
            "{kubelet}, so nothing is pinned to align with; DRA would allocate {}.",
            devices_text(requests)
        );
    }
    if kubelet.is_empty() {
        return format!(
            "The kubelet pins no CPUs or memory for this pod, so any NUMA node is as good; DRA allocates {}.",
            devices_text(requests)
        );
    }
    if misaligned.is_empty() {
        let unknown = requests.iter().flat_map(|r| &r.devices).any(|d| d.numa_node.is_none());
        return if unknown {
            format!(
                "The kubelet pins CPUs and memory to NUMA {}; DRA allocates {}, and some of these devices publish no \
                 NUMA node, so alignment cannot be told.",
                nodes_text(kubelet),
                devices_text(requests)
            )
        } else {
            format!(
                "Aligned: the kubelet pins CPUs and memory to NUMA {}, and DRA allocates {}.",
                nodes_text(kubelet),
                devices_text(requests)
            )
        };
    }
    let split: Vec<String> = misaligned
        .iter()
        .map(|m| {
            let served: Vec<String> = requests
                .iter()
                .filter(|r| r.claim == m.claim && r.request == m.request)
                .flat_map(|r| &r.serves)
                .map(|s| format!("{} of container {}", s.resource, s.container))
                .collect();
            let served = if served.is_empty() {
                String::new()
            } else {
                format!(" ({})", served.join(", "))
            };
            format!("{}/{}{served} {} on NUMA {}", m.claim, m.request, m.device, m.numa_node)
        })
        .collect();
    format!(
        "Misaligned: the kubelet pins the pod's CPUs and memory to NUMA {}, but DRA allocates {}.",
        nodes_text(kubelet),
        split.join(", ")
    )
}

/// The claims of a scenario's running pods: each `add` allocates its pod's
/// claims (the scheduler allocates before the kubelet admits, so a pod the
/// kubelet refused holds them too, as in `replay`), each `delete` frees
/// them.
///
/// # Errors
/// The event's index and the claim the block lacks.
pub fn running(
    spec: topoalign_scenario::dra::DraSpec,
    release: &str,
    events: &[topoalign_scenario::EventSpec],
) -> Result<DraState, (usize, DraError)> {
    let mut state = DraState::new(spec, release);
    state.hold_allocated();
    for (index, event) in events.iter().enumerate() {
        match (&event.add, &event.delete) {
            (Some(manifest), None) => {
                if let Ok(pod) = serde_json::from_value::<KubePod>(manifest.clone()) {
                    state.admit(&pod).map_err(|e| (index, e))?;
                }
            }
            (None, Some(key)) => state.remove(&if key.contains('/') {
                key.clone()
            } else {
                format!("default/{key}")
            }),
            _ => {}
        }
    }
    Ok(state)
}

/// [`explain`] for each of `pods` in order, each on the node (and the
/// claims) as the previous ones left them; `node` is the node before the
/// first. `None` for a pod without claims.
///
/// # Errors
/// The pod's index and the claim the DRA objects lack.
pub fn explain_all(
    node: &topoalign_engine::Node,
    kubelet: &Value,
    pods: &[topoalign_k8s::ManifestPod],
    state: &mut DraState,
) -> Result<Vec<Option<DraExplanation>>, (usize, DraError)> {
    let mut node = node.clone();
    let mut out = Vec::with_capacity(pods.len());
    for (index, pod) in pods.iter().enumerate() {
        let before = node.clone();
        let decision = node.admit(pod.pod.clone());
        let Ok(kube) = serde_json::from_value::<KubePod>(pod.manifest.clone()) else {
            out.push(None);
            continue;
        };
        let situation = Situation {
            node: &before,
            kubelet,
            manifest: &pod.manifest,
            pod: &pod.pod,
        };
        out.push(explain(&situation, &decision, state, &kube).map_err(|e| (index, e))?);
        state.admit(&kube).map_err(|e| (index, e))?;
    }
    Ok(out)
}

/// The releases whose scheduler allocator `topoalign_dra` reproduces.
pub const RELEASES: [&str; 4] = topoalign_dra::features::RELEASES;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{DNS_LABEL_MAX, kubelet_numa_nodes, label_name, visible_on};

    /// A slice offered by a nodeSelector is visible on a node whose labels
    /// match it and not on one whose labels do not (the allocator's rule);
    /// a perDeviceNodeSelection device likewise, one by one.
    #[test]
    fn a_node_sees_the_slices_its_labels_select() {
        let slice = |name: &str, spec: serde_json::Value| -> k8s_openapi::api::resource::v1::ResourceSlice {
            let mut spec = spec;
            spec["driver"] = json!("gpu.example.com");
            spec["pool"] = json!({"name": name, "generation": 1, "resourceSliceCount": 1});
            serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("slice")
        };
        let selector = |value: &str| {
            json!({"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "rack", "operator": "In", "values": [value]}]}]})
        };
        let slices = vec![
            slice(
                "a",
                json!({"nodeSelector": selector("a"), "devices": [{"name": "gpu-a"}]}),
            ),
            slice(
                "b",
                json!({"nodeSelector": selector("b"), "devices": [{"name": "gpu-b"}]}),
            ),
            slice(
                "p",
                json!({"perDeviceNodeSelection": true, "devices": [
                    {"name": "gpu-pa", "nodeSelector": selector("a")},
                    {"name": "gpu-pb", "nodeSelector": selector("b")},
                    {"name": "gpu-all", "allNodes": true}]}),
            ),
        ];
        let node = |labels: serde_json::Value| -> k8s_openapi::api::core::v1::Node {
            serde_json::from_value(json!({"metadata": {"name": "node", "labels": labels}})).expect("node")
        };
        let seen = |node: &k8s_openapi::api::core::v1::Node| -> Vec<String> {
            visible_on(&slices, node)
                .iter()
                .map(|v| v.device.name.clone())
                .collect()
        };
        assert_eq!(seen(&node(json!({"rack": "a"}))), ["gpu-a", "gpu-pa", "gpu-all"]);
        assert_eq!(seen(&node(json!({"rack": "b"}))), ["gpu-b", "gpu-pb", "gpu-all"]);
        assert_eq!(seen(&node(json!({}))), ["gpu-all"]);
    }

    /// The kubelet's NUMA nodes, which DRA's device attributes and
    /// selectors are compared with, are the machine's ids: 64 on a machine
    /// numbered anew, as devices publish it.
    #[test]
    fn the_kubelets_numa_nodes_are_the_machines_ids() {
        let cpus: Vec<serde_json::Value> = (0..8)
            .map(|cpu| {
                let numa = [0, 64][cpu / 4];
                json!({"id": cpu, "core": cpu, "socket": cpu / 4, "numa": numa})
            })
            .collect();
        let scenario = json!({
            "topology": {"numaNodes": [{"id": 0, "memory": "4Gi"}, {"id": 64, "memory": "4Gi"}], "cpus": cpus},
            "kubelet": {},
            "events": [],
        });
        let machine = topoalign_scenario::Scenario::parse(&scenario.to_string())
            .and_then(|s| s.topology.to_machine_with_numa_labels())
            .expect("machine");
        let kubelet = json!({"cpuManagerPolicy": "static", "reservedSystemCPUs": "0", "topologyManagerPolicy": "none"});
        let mut node = topoalign_k8s::start_node(machine, &kubelet).expect("node");
        let pod = |name: &str, cpu: &str| {
            let amounts = json!({"cpu": cpu, "memory": "1Gi"});
            let manifest = json!({
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": amounts, "limits": amounts}}]},
            });
            topoalign_k8s::pod_from_value(&manifest, name).expect("pod")
        };
        // CPUs 1-3 on NUMA 0, then CPUs on NUMA 64.
        let first = node.admit(pod("a", "3"));
        assert_eq!(kubelet_numa_nodes(node.machine(), &first), [0]);
        let second = node.admit(pod("b", "2"));
        assert_eq!(kubelet_numa_nodes(node.machine(), &second), [64]);
    }

    /// Whether `name` is an RFC 1123 DNS label, as Kubernetes validates
    /// the names of a pod's claims and of claim requests.
    fn is_dns_label(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= DNS_LABEL_MAX
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !name.starts_with('-')
            && !name.ends_with('-')
    }

    #[test]
    fn names_for_an_explicit_claim_are_dns_labels_for_any_pod_name() {
        assert_eq!(label_name("web-0", "-devices", 1), "web-0-devices");
        assert_eq!(label_name("web-0", "-devices", 2), "web-0-devices-2");
        assert_eq!(label_name("devices", "", 3), "devices-3");
        assert_eq!(label_name("gpu", "", 1), "gpu");
        // A pod name may be a 253-character DNS subdomain with dots.
        let long = format!("{}.{}", "a".repeat(200), "b".repeat(52));
        for stem in [long.as_str(), "x".repeat(63).as_str(), "web.example-", "A_B"] {
            for n in [1, 2, 10, 1000] {
                let name = label_name(stem, "-devices", n);
                assert!(is_dns_label(&name), "{name:?}");
                assert!(name.ends_with(&if n == 1 {
                    "-devices".to_owned()
                } else {
                    format!("-devices-{n}")
                }));
            }
        }
        // Cut where a `-` falls at the end: the `-` goes too.
        let dashed = format!("{}-{}", "a".repeat(54), "b".repeat(10));
        assert_eq!(
            label_name(&dashed, "-devices", 1),
            format!("{}-devices", "a".repeat(54))
        );
    }
}
