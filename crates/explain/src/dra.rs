//! A pod's devices from Dynamic Resource Allocation beside the kubelet's
//! decision for its CPUs and memory: per claim request, the devices the
//! scheduler's DRA allocator will pick and their NUMA nodes next to the NUMA
//! nodes the kubelet pins; every misalignment; why a request cannot be
//! satisfied; what the claim's constraints do (and do not) imply about
//! locality; and fixes — a `matchAttribute` constraint, CEL selectors naming
//! the kubelet's NUMA node, running pods removed first — each checked by
//! running the allocator (and, where the pod's node changes, the kubelet)
//! again, offered only when it aligns.
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

use k8s_openapi::api::core::v1::Pod as KubePod;
use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, Device, DeviceAttribute, DeviceClaim, DeviceConstraint, DeviceSelector, ResourceClaim,
    ResourceSlice,
};
use serde::Serialize;
use serde_json::Value;
use topoalign_dra::selector::{DeviceView, Release, SelectorEnv};
use topoalign_dra::{AllocationCase, Outcome};
use topoalign_engine::Decision;
use topoalign_scenario::dra::{ClaimSource, DraError, DraState, PodDevices, ResolvedClaim, pinned_numa_nodes};

use crate::Situation;
use crate::fixes::{Change, apply};

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
    pub devices: Vec<PlacedDevice>,
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
/// claims.
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
    if resolved.is_empty() {
        return Ok(None);
    }
    let machine = situation.node.machine();
    let kubelet: Vec<usize> = if decision.admitted() {
        pinned_numa_nodes(&decision.containers, |cpu| machine.cpu(cpu).map(|c| c.numa))
            .into_iter()
            .collect()
    } else {
        Vec::new()
    };
    let devices = state.clone().admit(pod)?.unwrap_or_else(|| PodDevices {
        pod: String::new(),
        outcome: "allocated".to_owned(),
        message: None,
        claims: Vec::new(),
    });
    let requests = request_devices(&resolved, &devices, state, &kubelet);
    let misaligned = misalignments(&requests, &kubelet);
    let unsatisfiable = if devices.outcome == "allocated" {
        Vec::new()
    } else {
        why_unsatisfiable(state, &resolved)
    };
    let lint = lint(state, &resolved, &kubelet);
    let fixes = if misaligned.is_empty() {
        Vec::new()
    } else {
        let mut fixes = Vec::new();
        fixes.extend(constraint_fixes(state, pod, &resolved, &kubelet));
        fixes.extend(selector_fix(state, pod, &resolved, &kubelet));
        fixes.extend(removal_fixes(situation, state, pod));
        fixes
    };
    let summary = summary(
        decision.admitted(),
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

/// Per request of each claim, the devices `devices` gives it.
fn request_devices(
    resolved: &[ResolvedClaim],
    devices: &PodDevices,
    state: &DraState,
    kubelet: &[usize],
) -> Vec<RequestDevices> {
    let mut out = Vec::new();
    for claim in resolved {
        let given = devices.claims.iter().find(|c| c.claim == claim.key);
        for request in request_names(&claim.claim) {
            let placed = given
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
                .collect();
            out.push(RequestDevices {
                claim: claim.name.clone(),
                resource_claim: claim.key.clone(),
                request,
                devices: placed,
            });
        }
    }
    out
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

/// The devices of the slices serving the node (by name, to all nodes, or
/// by a node selector — taken as serving it), newest generation per pool.
fn visible_devices(state: &DraState) -> Vec<Visible<'_>> {
    let node = state.scheduler_node();
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let slices = &state.spec().resource_slices;
    let mut newest: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for slice in slices {
        let entry = newest
            .entry((slice.spec.driver.as_str(), slice.spec.pool.name.as_str()))
            .or_insert(slice.spec.pool.generation);
        *entry = (*entry).max(slice.spec.pool.generation);
    }
    let serves = |slice: &ResourceSlice| {
        slice.spec.node_name.as_deref() == Some(node_name)
            || slice.spec.all_nodes == Some(true)
            || slice.spec.node_selector.is_some()
            || slice.spec.per_device_node_selection == Some(true)
    };
    slices
        .iter()
        .filter(|s| serves(s))
        .filter(|s| newest.get(&(s.spec.driver.as_str(), s.spec.pool.name.as_str())) == Some(&s.spec.pool.generation))
        .flat_map(|s| {
            s.spec.devices.iter().flatten().map(move |device| Visible {
                driver: &s.spec.driver,
                pool: &s.spec.pool.name,
                device,
            })
        })
        .filter(|v| v.device.node_name.as_deref().is_none_or(|n| n == node_name))
        .collect()
}

/// `driver/pool/device` of every device an allocated claim holds.
fn taken(state: &DraState) -> BTreeSet<(String, String, String)> {
    state
        .allocated_claims()
        .iter()
        .filter_map(|c| {
            c.status
                .as_ref()?
                .allocation
                .as_ref()?
                .devices
                .as_ref()?
                .results
                .clone()
        })
        .flatten()
        .map(|r| (r.driver, r.pool, r.device))
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
    taken: &BTreeSet<(String, String, String)>,
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
                        if taken.contains(&(
                            visible.driver.to_owned(),
                            visible.pool.to_owned(),
                            visible.device.name.clone(),
                        )) && visible.device.allow_multiple_allocations != Some(true) =>
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
    let taken = taken(state);
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
            let reasons: Vec<String> = alternatives(request)
                .iter()
                .map(|(name, asked)| match &env {
                    Some(env) => device_reasons(state, env, name, asked, &taken),
                    None => format!("{name}: {text}"),
                })
                .collect();
            problems.push(RequestProblem {
                claim: claim.name.clone(),
                request: request.name.clone(),
                reason: format!("{} (the allocator: {text})", reasons.join("; ")),
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

/// The requests a constraint applies to (all of the claim's when it names
/// none).
fn constrained_requests(constraint: &DeviceConstraint, devices: &DeviceClaim) -> Vec<String> {
    match constraint.requests.as_deref() {
        Some(names) if !names.is_empty() => names.to_vec(),
        _ => devices.requests.iter().flatten().map(|r| r.name.clone()).collect(),
    }
}

/// A request's devices counted by how they fare.
fn device_reasons(
    state: &DraState,
    env: &SelectorEnv,
    name: &str,
    asked: &Asked<'_>,
    taken: &BTreeSet<(String, String, String)>,
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
    taken: &BTreeSet<(String, String, String)>,
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
    let requests = request_devices(&resolved, &devices, changed, kubelet);
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
            remove: Vec::new(),
            requests,
            kubelet_numa_nodes: kubelet.to_vec(),
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
        let kubelet: Vec<usize> = pinned_numa_nodes(&decision.containers, |cpu| machine.cpu(cpu).map(|c| c.numa))
            .into_iter()
            .collect();
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
        return format!(
            "The kubelet refuses the pod, so nothing is pinned to align with; DRA would allocate {}.",
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
        .map(|m| format!("{}/{} {} on NUMA {}", m.claim, m.request, m.device, m.numa_node))
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
