//! Counterfactual fixes: the smallest changes that would admit a rejected
//! pod, each found — and so checked — by admitting the pod again on a copy
//! of the node with the change applied. Nothing here is guessed.
//!
//! Kinds of change, in the order they are offered:
//! 1. the pod asks for less: for each resource, the largest request that
//!    fits now (the others unchanged; CPUs in whole cores under
//!    `full-pcpus-only`, and the next whole number of cores up; a resource
//!    the node has none of, left out); when no
//!    single resource can be shrunk enough, the whole pod shrunk to what
//!    one NUMA node has free, else every resource of every container (and
//!    `spec.resources`) cut down together;
//! 2. the kubelet is configured differently: another topology manager scope,
//!    then `restricted` / `best-effort`, or without `full-pcpus-only`, or
//!    reserving fewer CPUs for the system (the new configuration is
//!    started and the node's state restored into it, as a restarted
//!    kubelet would);
//! 3. running pods go away first: the fewest whose removal makes room; when
//!    nothing above admits, pods removed and the pod shrunk together.
//!
//! Every search bisects or is bounded by what the node has, so an absurd
//! request costs a few dozen admissions, never one per unit asked for.
//!
//! Owns: the search and [`apply`], which re-checks any fix. Must not touch:
//! decisions (the engine's), files.

use itertools::Itertools as _;
use serde::Serialize;
use serde_json::{Map, Value, json};
use topoalign_engine::{Decision, KubeletPanic, MemoryPolicyName, Node, PanicSite, TopologyPolicyName, TopologyScope};
use topoalign_k8s::{KubeletConfiguration, PodError, node_config, pod_from_value};
use topoalign_model::{Machine, Pod, Quantity, QuantityFormat, go_parse_bool, resource_name};

use crate::hints::nodes_text;
use crate::report::numa_affinity;
use crate::requests::{largest_container_requests, pod_requests};
use crate::table::free_amount;
use crate::{EmptyNode, Situation, empty_node};

/// At most this many removal sets are tried (they grow combinatorially).
const REMOVAL_ATTEMPTS: usize = 2000;
/// At most this many pods are removed together.
const REMOVAL_SET_SIZE: usize = 3;
/// Removal fixes of the smallest size found, at most.
const REMOVAL_FIXES: usize = 3;

/// A change that admits the pod.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Fix {
    /// The change and its outcome, in words.
    pub description: String,
    #[serde(flatten)]
    pub change: Change,
    /// The outcome alone (`admitted, aligned to NUMA 1`), for front ends
    /// that word the change their own way.
    #[serde(skip)]
    pub outcome: String,
}

impl Fix {
    /// The fix `what` (the change in words) with the outcome `decision`
    /// (NUMA nodes named by the situation's machine).
    fn new(situation: &Situation<'_>, what: String, change: Change, decision: &Decision) -> Fix {
        let outcome = outcome(situation.node.machine(), decision);
        Fix {
            description: format!("{what}: {outcome}."),
            change,
            outcome,
        }
    }
}

/// Exactly one kind of change.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    /// The changed Pod manifest.
    Pod(Value),
    /// The changed KubeletConfiguration fields.
    Kubelet(Map<String, Value>),
    /// `namespace/name` of the pods to remove first.
    Remove(Vec<String>),
    /// Pods to remove first, then the changed Pod manifest: when neither
    /// change alone admits.
    RemoveThenPod { remove: Vec<String>, pod: Value },
    /// An empty node of a larger shape: each NUMA node `factor` times the
    /// CPUs, memory, huge pages and devices of this node's, the same
    /// kubelet configuration (a node too small for the pod); with `pod`,
    /// the changed Pod manifest (whole cores under `full-pcpus-only`).
    LargerNode {
        factor: u32,
        #[serde(skip_serializing_if = "Option::is_none")]
        pod: Option<Value>,
    },
}

/// Why a change could not be tried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FixError {
    #[error("the changed pod is invalid: {0}")]
    Pod(#[from] PodError),
    #[error("the changed kubelet configuration is invalid: {0}")]
    Kubelet(String),
    #[error("a kubelet with the changed configuration would not start: {0}")]
    Startup(String),
    #[error("no running pod {0}")]
    UnknownPod(String),
}

/// Admits the situation's pod again with `change` applied, on a copy of
/// the node; the node itself is untouched.
///
/// # Errors
/// [`FixError`] when the change cannot be applied at all.
pub fn apply(situation: &Situation<'_>, change: &Change) -> Result<Decision, FixError> {
    let node = situation.node;
    match change {
        Change::Pod(manifest) => {
            let pod = pod_from_value(manifest, &situation.pod.uid)?;
            Ok(node.clone().admit(pod))
        }
        Change::Kubelet(fields) => {
            let mut merged = situation.kubelet.as_object().cloned().unwrap_or_default();
            merged.extend(fields.clone());
            let config = KubeletConfiguration::from_value(&Value::Object(merged))
                .map_err(|e| FixError::Kubelet(e.to_string()))?;
            let config = node_config(&config, node.machine()).map_err(|e| FixError::Startup(e.to_string()))?;
            let mut restarted =
                Node::start(node.machine().clone(), config).map_err(|e| FixError::Startup(e.to_string()))?;
            restarted
                .restore(node.snapshot())
                .map_err(|e| FixError::Startup(e.to_string()))?;
            Ok(restarted.admit(situation.pod.clone()))
        }
        Change::Remove(keys) => Ok(without(node, keys)?.admit(situation.pod.clone())),
        Change::RemoveThenPod { remove, pod } => {
            let pod = pod_from_value(pod, &situation.pod.uid)?;
            Ok(without(node, remove)?.admit(pod))
        }
        Change::LargerNode { factor, pod } => {
            let pod = match pod {
                Some(manifest) => pod_from_value(manifest, &situation.pod.uid)?,
                None => situation.pod.clone(),
            };
            let machine = larger_machine(node.machine(), *factor).map_err(FixError::Startup)?;
            let mut larger =
                Node::start(machine, node.config().clone()).map_err(|e| FixError::Startup(e.to_string()))?;
            Ok(larger.admit(pod))
        }
    }
}

/// `machine` with each NUMA node `factor` times as large: its CPUs
/// repeated as new cores (ids after the last), its memory and huge pages
/// multiplied, each device repeated (`<id>-<copy>`). NUMA ids past 63
/// stay what they are (the machine is built again from its original ids,
/// [`Machine::with_numa_labels`]), so the larger node crashes the kubelet
/// where this one does.
///
/// # Errors
/// The machine's own error when the larger one would be no machine (CPU
/// ids past the kernel's limit).
fn larger_machine(machine: &Machine, factor: u32) -> Result<Machine, String> {
    let copies = factor.max(1);
    let next_id = machine.cpus().iter().map(|c| c.id).max().map_or(0, |m| m + 1);
    let next_core = machine.cpus().iter().map(|c| c.core).max().map_or(0, |m| m + 1);
    let mut cpus = Vec::with_capacity(machine.cpus().len() * copies as usize);
    for copy in 0..copies {
        for cpu in machine.cpus() {
            let shift = |base: u32, next: u32| next.checked_mul(copy).and_then(|offset| base.checked_add(offset));
            let (Some(id), Some(core)) = (shift(cpu.id, next_id), shift(cpu.core, next_core)) else {
                return Err(format!("a node {copies} times as large has too many CPUs"));
            };
            cpus.push(topoalign_model::Cpu {
                id,
                core,
                numa: machine.numa_label(cpu.numa),
                ..*cpu
            });
        }
    }
    let numa_nodes = machine
        .numa_nodes()
        .iter()
        .map(|numa| topoalign_model::NumaNode {
            id: machine.numa_label(numa.id),
            memory: numa.memory.saturating_mul(u64::from(copies)),
            hugepages: numa
                .hugepages
                .iter()
                .map(|(&size, &bytes)| (size, bytes.saturating_mul(u64::from(copies))))
                .collect(),
            ..numa.clone()
        })
        .collect();
    let devices = machine
        .devices()
        .iter()
        .map(|(resource, devices)| {
            let repeated = (0..copies)
                .flat_map(|copy| {
                    devices.iter().map(move |d| topoalign_model::Device {
                        id: if copy == 0 {
                            d.id.clone()
                        } else {
                            format!("{}-{copy}", d.id)
                        },
                        numa: d.numa.iter().map(|&n| machine.numa_label(n)).collect(),
                    })
                })
                .collect();
            (resource.clone(), repeated)
        })
        .collect();
    Machine::with_numa_labels(numa_nodes, cpus, devices).map_err(|e| e.to_string())
}

/// A copy of `node` without the running pods `keys` (`namespace/name`).
fn without(node: &Node, keys: &[String]) -> Result<Node, FixError> {
    let mut copy = node.clone();
    for key in keys {
        let uid = node
            .pods()
            .iter()
            .find(|p| p.key() == *key)
            .map(|p| p.uid.clone())
            .ok_or_else(|| FixError::UnknownPod(key.clone()))?;
        copy.remove(&uid);
    }
    Ok(copy)
}

/// Whether `change` admits the pod; the decision when it does.
fn admits(situation: &Situation<'_>, change: &Change) -> Option<Decision> {
    apply(situation, change).ok().filter(Decision::admitted)
}

fn outcome(machine: &Machine, decision: &Decision) -> String {
    match numa_affinity(machine, decision) {
        Some(nodes) => format!("admitted, aligned to NUMA {}", nodes_text(&nodes)),
        None => "admitted, without NUMA alignment".to_owned(),
    }
}

/// Every fix for a rejected pod, in the order of the module docs. Where
/// the kubelet would crash on the pod once it reached the memory manager
/// ([`crashes_on_guaranteed`]), every change that keeps it Guaranteed
/// crashes it too: the fixes are those of [`not_guaranteed_fixes`] and
/// memoryManagerPolicy None.
pub(crate) fn find(situation: &Situation<'_>, empty_node: &EmptyNode) -> Vec<Fix> {
    if crashes_on_guaranteed(situation) {
        let mut fixes: Vec<Fix> = memory_policy_none(situation).into_iter().collect();
        fixes.extend(not_guaranteed_fixes(situation));
        return fixes;
    }
    let mut fixes = shrink_each(situation);
    if fixes.is_empty() {
        fixes.extend(shrink_to_a_node(situation));
    }
    if fixes.is_empty() {
        fixes.extend(shrink_together(situation, &[]));
    }
    fixes.extend(kubelet_fixes(situation));
    if empty_node.admitted {
        fixes.extend(removal_fixes(situation));
    }
    if fixes.is_empty() {
        fixes.extend(remove_then_shrink(situation));
    }
    if fixes.is_empty() {
        fixes.extend(larger_pod_level(situation));
    }
    if fixes.is_empty() {
        fixes.extend(larger_node(situation));
    }
    fixes
}

/// Whether the kubelet crashes on this Guaranteed pod whenever it reaches
/// the memory manager: a NUMA id past 63, topology policy `none` and the
/// Static memory manager, whose default hint builds masks of every NUMA
/// node (`KubeletPanic`, `PanicSite::MemoryDefaultHint`).
fn crashes_on_guaranteed(situation: &Situation<'_>) -> bool {
    let config = situation.node.config();
    situation.node.machine().numa_id_past_masks().is_some()
        && config.topology_policy == TopologyPolicyName::None
        && config.memory_policy == MemoryPolicyName::Static
        && situation.pod.qos == topoalign_model::QosClass::Guaranteed
}

/// The fixes for a pod the kubelet crashes admitting ([`KubeletPanic`]):
/// the settings under which this kubelet runs at all. Under any topology
/// policy but `none` that is policy `none` (with memoryManagerPolicy None
/// where the Static memory manager would crash it next); under `none`,
/// memoryManagerPolicy None or the pod made not Guaranteed. Each is
/// replayed ([`apply`]) and offered only when the pod is then admitted.
pub fn panic_fixes(situation: &Situation<'_>, panic: &KubeletPanic) -> Vec<Fix> {
    match &panic.site {
        PanicSite::TopologyManager(_) => {
            let mut none = Map::new();
            none.insert("topologyManagerPolicy".into(), json!(TopologyPolicyName::None.as_str()));
            let mut with_memory_none = none.clone();
            with_memory_none.insert("memoryManagerPolicy".into(), json!(MemoryPolicyName::None.as_str()));
            [none, with_memory_none]
                .into_iter()
                .find_map(|fields| past_masks_kubelet_fix(situation, panic.numa_id, fields))
                .into_iter()
                .collect()
        }
        PanicSite::MemoryDefaultHint { .. } => {
            let mut fixes: Vec<Fix> = memory_policy_none(situation).into_iter().collect();
            fixes.extend(not_guaranteed_fixes(situation));
            fixes
        }
    }
}

/// memoryManagerPolicy None, when it alone admits the pod.
fn memory_policy_none(situation: &Situation<'_>) -> Option<Fix> {
    let numa_id = situation.node.machine().numa_id_past_masks()?;
    let mut fields = Map::new();
    fields.insert("memoryManagerPolicy".into(), json!(MemoryPolicyName::None.as_str()));
    past_masks_kubelet_fix(situation, numa_id, fields)
}

/// The kubelet configuration `fields`, when they admit the pod.
fn past_masks_kubelet_fix(situation: &Situation<'_>, numa_id: usize, fields: Map<String, Value>) -> Option<Fix> {
    let settings: Vec<String> = fields
        .iter()
        .map(|(field, value)| format!("{field}: {}", value.as_str().unwrap_or_default()))
        .collect();
    let change = Change::Kubelet(fields);
    let decision = admits(situation, &change)?;
    let what = format!(
        "Set {} in the kubelet configuration, the settings this kubelet runs with on a machine with NUMA node id \
         {numa_id} (applies at a kubelet restart)",
        settings.join(" and ")
    );
    Some(Fix::new(situation, what, change, &decision))
}

/// The pod made not Guaranteed — no memory limit in its first container
/// that has one (its request kept, or set to that limit), or none at the
/// pod level — so that the Static memory manager leaves it alone; with the
/// fixes that admit that pod when it alone does not (pod changes, pods
/// removed first, a larger node, each carrying the changed pod). Every
/// fix is replayed on the situation itself.
fn not_guaranteed_fixes(situation: &Situation<'_>) -> Vec<Fix> {
    let Some((manifest, place)) = not_guaranteed_manifest(situation) else {
        return Vec::new();
    };
    let Ok(pod) = pod_from_value(&manifest, &situation.pod.uid) else {
        return Vec::new();
    };
    if pod.qos == topoalign_model::QosClass::Guaranteed {
        return Vec::new();
    }
    let numa_id = situation.node.machine().numa_id_past_masks().unwrap_or_default();
    let made = format!(
        "Make it Burstable: no memory limit {place} (the Static memory manager crashes this kubelet admitting a \
         Guaranteed pod: NUMA node id {numa_id} does not fit its masks)"
    );
    let direct = Change::Pod(manifest.clone());
    if let Some(decision) = admits(situation, &direct) {
        return vec![Fix::new(situation, made, direct, &decision)];
    }
    let burstable = Situation {
        node: situation.node,
        kubelet: situation.kubelet,
        manifest: &manifest,
        pod: &pod,
    };
    let empty = empty_node(&burstable);
    find(&burstable, &empty)
        .into_iter()
        .filter_map(|fix| {
            let change = match fix.change {
                change @ (Change::Pod(_) | Change::RemoveThenPod { .. }) => change,
                Change::Remove(remove) => Change::RemoveThenPod {
                    remove,
                    pod: manifest.clone(),
                },
                Change::LargerNode { factor, pod } => Change::LargerNode {
                    factor,
                    pod: Some(pod.unwrap_or_else(|| manifest.clone())),
                },
                // A kubelet change was checked with the Burstable pod only.
                Change::Kubelet(_) => return None,
            };
            let decision = admits(situation, &change)?;
            let then = fix
                .description
                .strip_suffix(&format!(": {}.", fix.outcome))
                .unwrap_or(&fix.description)
                .to_owned();
            Some(Fix::new(
                situation,
                format!("{made}, and then: {then}"),
                change,
                &decision,
            ))
        })
        .collect()
}

/// The manifest without the memory limit that makes the pod Guaranteed:
/// the first container's (init containers first) that has one — its
/// request set to the limit when it had none, since a request defaults to
/// its limit — or else the pod level's (`spec.resources`); and where, in
/// words.
fn not_guaranteed_manifest(situation: &Situation<'_>) -> Option<(Value, String)> {
    let mut manifest = situation.manifest.clone();
    let mut places: Vec<(String, String)> = Vec::new();
    for list in ["initContainers", "containers"] {
        let containers = manifest.pointer(&format!("/spec/{list}")).and_then(Value::as_array);
        for (index, container) in containers.into_iter().flatten().enumerate() {
            let name = container.get("name").and_then(Value::as_str).unwrap_or_default();
            places.push((
                format!("/spec/{list}/{index}/resources"),
                format!("in container {name}"),
            ));
        }
    }
    places.push(("/spec/resources".to_owned(), "in spec.resources".to_owned()));
    for (pointer, place) in places {
        if manifest.pointer_mut(&pointer).is_some_and(without_memory_limit) {
            return Some((manifest, place));
        }
    }
    None
}

/// `resources` without its memory limit, the request kept (or set to the
/// limit); whether there was one.
fn without_memory_limit(resources: &mut Value) -> bool {
    let Some(limit) = resources.pointer("/limits/memory").cloned() else {
        return false;
    };
    if let Some(limits) = resources.get_mut("limits").and_then(Value::as_object_mut) {
        limits.remove("memory");
    }
    if resources.pointer("/requests/memory").is_none()
        && let Some(resources) = resources.as_object_mut()
        && let Some(requests) = resources.entry("requests").or_insert_with(|| json!({})).as_object_mut()
    {
        requests.insert("memory".into(), limit);
    }
    true
}

/// How many steps above the pod-level amount [`larger_pod_level`] tries.
const POD_LEVEL_STEPS: i128 = 4;

/// For a pod with pod-level resources (`spec.resources`) whose containers
/// that share the pod's CPUs or memory are left none (the kubelet's
/// `EmptyPodSharedPoolError` under `PodLevelResourceManagers`): the
/// smallest pod-level amount, a few steps above today's, that admits.
/// Shrinking never helps there — it is the pod's own total that is short.
fn larger_pod_level(situation: &Situation<'_>) -> Option<Fix> {
    let pod_resources = situation.pod.pod_resources.as_ref()?;
    for (resource, current) in pod_resources.requests.iter() {
        if resource != "cpu" && resource != "memory" {
            continue;
        }
        let unit = step(resource).value();
        let current_steps = current.value() / unit;
        for steps in current_steps + 1..=current_steps + POD_LEVEL_STEPS {
            let amount = amount_of(resource, steps);
            let change = Change::Pod(with_pod_level_amount(situation.manifest, resource, amount));
            if let Some(decision) = admits(situation, &change) {
                let what = format!(
                    "Ask for {resource}: {amount} instead of {current} at the pod level (spec.resources), so the \
                     containers that share the pod's {resource} keep some"
                );
                return Some(Fix::new(situation, what, change, &decision));
            }
        }
    }
    None
}

/// The manifest with the pod-level `resource` set to `amount` in
/// `spec.resources`' requests and limits (where each is given).
fn with_pod_level_amount(manifest: &Value, resource: &str, amount: Quantity) -> Value {
    let mut changed = manifest.clone();
    if let Some(resources) = changed
        .get_mut("spec")
        .and_then(|s| s.get_mut("resources"))
        .and_then(Value::as_object_mut)
    {
        for field in ["requests", "limits"] {
            if let Some(list) = resources.get_mut(field).and_then(Value::as_object_mut)
                && list.contains_key(resource)
            {
                list.insert(resource.to_owned(), json!(amount.to_string()));
            }
        }
    }
    changed
}

/// The largest factor [`larger_node`] tries.
const LARGEST_NODE_FACTOR: u32 = 16;

/// Kind 4, when nothing else admits: the pod needs a larger node — the
/// smallest of 2, 4, … [`LARGEST_NODE_FACTOR`] times this one (each NUMA
/// node that much larger) on which it is admitted.
fn larger_node(situation: &Situation<'_>) -> Option<Fix> {
    let rounded = whole_cores_manifest(situation);
    let mut factor = 2;
    while factor <= LARGEST_NODE_FACTOR {
        let change = Change::LargerNode {
            factor,
            pod: rounded.as_ref().map(|(manifest, _)| manifest.clone()),
        };
        if let Some(decision) = admits(situation, &change) {
            let also = rounded
                .as_ref()
                .map(|(_, changed)| format!(", asking for {}", changed.join(", ")))
                .unwrap_or_default();
            let what = format!(
                "Run it on an empty node {factor} times this one's size (each NUMA node with {factor}× the CPUs, \
                 memory, huge pages and devices; the same kubelet configuration){also}: this node is too small for it"
            );
            return Some(Fix::new(situation, what, change, &decision));
        }
        factor *= 2;
    }
    None
}

/// Where one container sits in the manifest and pod.
#[derive(Clone, Copy)]
struct Target {
    init: bool,
    index: usize,
}

impl Target {
    fn container(self, pod: &Pod) -> &topoalign_model::Container {
        if self.init {
            &pod.init_containers[self.index]
        } else {
            &pod.containers[self.index]
        }
    }

    fn name(self, pod: &Pod) -> &str {
        &self.container(pod).name
    }
}

/// The container asking for the most of `resource` (the first of equals).
fn largest_requester(pod: &Pod, resource: &str) -> Option<Target> {
    let targets = (0..pod.init_containers.len())
        .map(|index| Target { init: true, index })
        .chain((0..pod.containers.len()).map(|index| Target { init: false, index }));
    let mut best: Option<(Target, Quantity)> = None;
    for target in targets {
        let amount = target.container(pod).request(resource);
        if !amount.is_zero() && best.is_none_or(|(_, b)| amount > b) {
            best = Some((target, amount));
        }
    }
    best.map(|(t, _)| t)
}

/// The manifest with `resource` of the container asking for the most of it
/// set to `amount` (requests and limits, where each is given), and that
/// container's name; `None` when no container asks for it.
pub(crate) fn with_largest_request(
    manifest: &Value,
    pod: &Pod,
    resource: &str,
    amount: Quantity,
) -> Option<(Value, String)> {
    let target = largest_requester(pod, resource)?;
    Some((
        with_amount(manifest, pod, target, resource, amount),
        target.name(pod).to_owned(),
    ))
}

/// The manifest with `resource` of one container set to `amount` in its
/// requests and its limits (where each is given).
fn with_amount(manifest: &Value, pod: &Pod, target: Target, resource: &str, amount: Quantity) -> Value {
    let mut changed = manifest.clone();
    let list = if target.init { "initContainers" } else { "containers" };
    let had_limit = !target.container(pod).limit(resource).is_zero();
    if let Some(container) = changed
        .get_mut("spec")
        .and_then(|s| s.get_mut(list))
        .and_then(|l| l.get_mut(target.index))
        .and_then(Value::as_object_mut)
    {
        let resources = container
            .entry("resources")
            .or_insert_with(|| json!({}))
            .as_object_mut();
        if let Some(resources) = resources {
            for field in ["requests", "limits"] {
                let present = resources.get(field).and_then(|f| f.get(resource)).is_some();
                if (present || (field == "limits" && had_limit))
                    && let Some(map) = resources.entry(field).or_insert_with(|| json!({})).as_object_mut()
                {
                    map.insert(resource.to_owned(), json!(amount.to_string()));
                }
            }
        }
    }
    changed
}

/// The step a request of `resource` moves in: whole CPUs and devices, MiB
/// of memory, whole huge pages.
fn step(resource: &str) -> Quantity {
    if resource == "memory" {
        Quantity::from_units(1 << 20).with_format(QuantityFormat::BinarySI)
    } else if let Some(size) = resource.strip_prefix(resource_name::HUGEPAGES_PREFIX) {
        // A page size that is not a positive amount (`hugepages-0Gi`, which
        // no node has) steps in MiB like memory: a step is a divisor.
        topoalign_k8s::parse_quantity(size)
            .ok()
            .filter(|size| size.value() > 0)
            .unwrap_or(Quantity::from_units(1 << 20))
            .with_format(QuantityFormat::BinarySI)
    } else {
        Quantity::from_units(1)
    }
}

/// `steps` steps of `resource`, formatted the way people write it.
fn amount_of(resource: &str, steps: i128) -> Quantity {
    let step = step(resource);
    Quantity::from_units(step.value() * steps).with_format(step.format())
}

/// The most of `resource` the node could ever give one pod, in the
/// resource's own units (CPUs, bytes, devices): a search for a smaller
/// request never looks above it, so its cost follows the machine's size,
/// not the number a user wrote (`cpu: "1e30"`).
fn node_ceiling(node: &Node, resource: &str) -> i128 {
    let machine = node.machine();
    let count = |n: usize| i128::try_from(n).unwrap_or(i128::MAX);
    match resource {
        "cpu" => count(machine.cpus().len()),
        _ if resource_name::is_memory_like(resource) => node
            .numa_usage()
            .iter()
            .map(|usage| usage.get(resource).map_or(0, |r| r.capacity.value()))
            .sum(),
        _ => count(machine.devices().get(resource).map_or(0, Vec::len)),
    }
}

/// Kind 1: the largest request of each resource that fits now. Where whole
/// cores are required and a CPU count is not a whole number of cores, the
/// next multiple up as well.
fn shrink_each(situation: &Situation<'_>) -> Vec<Fix> {
    let pod = situation.pod;
    let mut fixes = Vec::new();
    // What the managers align, and whatever else the resource-fit check
    // counts (a Burstable pod's CPUs refused with OutOfcpu).
    let mut resources: Vec<String> = pod_requests(situation.node, pod).into_keys().collect();
    for (container, _) in pod.all_containers() {
        resources.extend(
            container
                .requests
                .iter()
                .filter(|(_, q)| !q.is_zero())
                .map(|(r, _)| r.clone()),
        );
    }
    resources.sort();
    resources.dedup();
    for resource in resources {
        let Some(target) = largest_requester(pod, &resource) else {
            continue;
        };
        let current = target.container(pod).request(&resource);
        let ceiling = node_ceiling(situation.node, &resource);
        if resource == "cpu" && !current.is_whole() {
            // Fractional CPUs are never pinned; only the resource-fit check
            // can refuse them, and it is monotonic in the amount.
            fixes.extend(shrink_fractional_cpu(situation, target, current, ceiling));
            continue;
        }
        if ceiling == 0 {
            // The node has none of it at all (huge pages of a size it does
            // not have, a device it lacks): no smaller amount fits, only
            // none.
            fixes.extend(leave_out(situation, &resource));
            continue;
        }
        let unit = step(&resource).value();
        let current_steps = current.value() / unit;
        let most = (current_steps - 1).min(ceiling / unit);
        let try_steps = |steps: i128| {
            let amount = amount_of(&resource, steps);
            let manifest = with_amount(situation.manifest, pod, target, &resource, amount);
            let change = Change::Pod(manifest);
            admits(situation, &change).map(|decision| (amount, change, decision))
        };
        // Bisection, so the trials grow with the logarithm of what the node
        // has. CPUs under full-pcpus-only move in whole cores (a count that
        // is not a multiple is refused whatever is free).
        let granule = if resource == "cpu" {
            i128::try_from(cpus_per_core(situation.node)).unwrap_or(1).max(1)
        } else {
            1
        };
        let found = largest_admitted_by_bisection(most / granule, |k| try_steps(k * granule));
        if let Some((amount, change, decision)) = found {
            let what = format!(
                "Ask for {resource}: {amount} instead of {current} in container {} (the largest that fits now)",
                target.name(pod)
            );
            fixes.push(Fix::new(situation, what, change, &decision));
        }
        if resource == "cpu" {
            fixes.extend(whole_cores(situation));
        }
    }
    fixes
}

/// For a resource the node has none of: the pod without it — every
/// container's and the pod level's requests and limits of it removed.
fn leave_out(situation: &Situation<'_>, resource: &str) -> Option<Fix> {
    let mut manifest = situation.manifest.clone();
    let spec = manifest.get_mut("spec")?;
    let mut resource_lists: Vec<&mut Value> = Vec::new();
    let Value::Object(spec) = spec else { return None };
    for (field, value) in spec.iter_mut() {
        match (field.as_str(), value) {
            ("containers" | "initContainers", Value::Array(containers)) => {
                resource_lists.extend(containers.iter_mut().filter_map(|c| c.get_mut("resources")));
            }
            ("resources", value) => resource_lists.push(value),
            _ => {}
        }
    }
    for resources in resource_lists {
        for field in ["requests", "limits"] {
            if let Some(list) = resources.get_mut(field).and_then(Value::as_object_mut) {
                list.remove(resource);
            }
        }
    }
    let change = Change::Pod(manifest);
    let decision = admits(situation, &change)?;
    let what = format!("Leave out {resource} (this node has none of it)");
    Some(Fix::new(situation, what, change, &decision))
}

/// With `full-pcpus-only` a CPU count must be a multiple of the CPUs per
/// core (`SMTAlignmentError`): every container's count rounded up to the
/// next multiple, when that fits.
fn whole_cores(situation: &Situation<'_>) -> Option<Fix> {
    let (manifest, changed) = whole_cores_manifest(situation)?;
    let per_core = cpus_per_core(situation.node);
    let change = Change::Pod(manifest);
    let decision = admits(situation, &change)?;
    let what = format!(
        "Ask for {} (full-pcpus-only hands out whole cores of {per_core} CPUs)",
        changed.join(", ")
    );
    Some(Fix::new(situation, what, change, &decision))
}

/// The manifest with every whole, exclusive CPU count that is not a
/// multiple of the CPUs per core (under `full-pcpus-only`) rounded up to
/// one, and the changes in words; `None` when there is none to round.
fn whole_cores_manifest(situation: &Situation<'_>) -> Option<(Value, Vec<String>)> {
    let pod = situation.pod;
    let per_core = i128::try_from(cpus_per_core(situation.node)).ok()?;
    if per_core < 2 || pod.qos != topoalign_model::QosClass::Guaranteed {
        return None;
    }
    let mut manifest = situation.manifest.clone();
    let mut changed = Vec::new();
    let targets = (0..pod.init_containers.len())
        .map(|index| Target { init: true, index })
        .chain((0..pod.containers.len()).map(|index| Target { init: false, index }));
    for target in targets {
        let current = target.container(pod).request("cpu");
        let cpus = current.value();
        if !current.is_whole() || cpus == 0 || cpus % per_core == 0 {
            continue;
        }
        let amount = Quantity::from_units(cpus + per_core - cpus % per_core);
        manifest = with_amount(&manifest, pod, target, "cpu", amount);
        changed.push(format!(
            "cpu: {amount} instead of {current} in container {}",
            target.name(pod)
        ));
    }
    (!changed.is_empty()).then_some((manifest, changed))
}

/// The largest fractional CPU request that fits now, to the milli-CPU.
fn shrink_fractional_cpu(situation: &Situation<'_>, target: Target, current: Quantity, ceiling: i128) -> Option<Fix> {
    let most = (current.milli() - 1).min(ceiling.saturating_mul(1000));
    let try_milli = |milli: i128| {
        let amount = Quantity::from_milli(milli).with_format(current.format());
        let manifest = with_amount(situation.manifest, situation.pod, target, "cpu", amount);
        let change = Change::Pod(manifest);
        admits(situation, &change).map(|decision| (amount, change, decision))
    };
    let (amount, change, decision) = largest_admitted_by_bisection(most, try_milli)?;
    let what = format!(
        "Ask for cpu: {amount} instead of {current} in container {} (the largest that fits now)",
        target.name(situation.pod)
    );
    Some(Fix::new(situation, what, change, &decision))
}

/// The largest `steps` in `1..=max` that admits, assuming that admitting
/// is monotonic in the amount (each candidate is admitted for real, so a
/// non-monotonic case finds a smaller fix, never a wrong one): at most
/// `2 + log2(max)` trials.
fn largest_admitted_by_bisection<T>(max: i128, try_steps: impl Fn(i128) -> Option<T>) -> Option<T> {
    if max < 1 {
        return None;
    }
    let mut best = try_steps(1)?;
    let (mut low, mut high) = (1, max);
    while low < high {
        let middle = low + (high - low + 1) / 2;
        match try_steps(middle) {
            Some(found) => {
                best = found;
                low = middle;
            }
            None => high = middle - 1,
        }
    }
    Some(best)
}

/// 1b. The whole pod shrunk to what one NUMA node has free: every resource
/// the node falls short of is cut by the shortfall, from the container
/// asking for the most of it.
fn shrink_to_a_node(situation: &Situation<'_>) -> Option<Fix> {
    let (node, pod) = (situation.node, situation.pod);
    let requested = match node.config().topology_scope {
        TopologyScope::Pod => pod_requests(node, pod),
        TopologyScope::Container => largest_container_requests(node, pod),
    };
    let per_core = i128::try_from(cpus_per_core(node)).unwrap_or(1).max(1);
    let mut best: Option<Shrunk> = None;
    for usage in node.numa_usage() {
        let mut manifest = situation.manifest.clone();
        let mut changes = Vec::new();
        let mut possible = true;
        for (resource, &wanted) in &requested {
            let available = free_amount(node, &usage, resource).map(|free| {
                if resource == "cpu" {
                    // Whole cores only.
                    Quantity::from_units(free.value() - free.value() % per_core)
                } else {
                    free
                }
            });
            let Some(available) = available else { continue };
            if available >= wanted {
                continue;
            }
            let Some(target) = largest_requester(pod, resource) else {
                continue;
            };
            let current = target.container(pod).request(resource);
            let unit = step(resource).value();
            let cut = current.value() - (wanted.value() - available.value());
            let steps = cut.div_euclid(unit);
            if steps < 1 {
                possible = false;
                break;
            }
            let amount = amount_of(resource, steps);
            manifest = with_amount(&manifest, pod, target, resource, amount);
            changes.push((resource.clone(), amount, current));
        }
        if !possible || changes.is_empty() {
            continue;
        }
        let change = Change::Pod(manifest);
        if let Some(decision) = admits(situation, &change) {
            let better = best
                .as_ref()
                .is_none_or(|previous| total(&changes) > total(&previous.changes));
            if better {
                best = Some(Shrunk {
                    changes,
                    change,
                    decision,
                    numa: usage.numa,
                });
            }
        }
    }
    let Shrunk {
        changes,
        change,
        decision,
        numa,
    } = best?;
    let listed: Vec<String> = changes
        .iter()
        .map(|(resource, amount, current)| format!("{resource}: {amount} instead of {current}"))
        .collect();
    let what = format!(
        "Shrink it to what NUMA {} has free ({})",
        node.machine().numa_label(numa),
        listed.join(", ")
    );
    Some(Fix::new(situation, what, change, &decision))
}

/// A pod shrunk to fit one NUMA node: (resource, new, old) amounts.
struct Shrunk {
    changes: Vec<(String, Quantity, Quantity)>,
    change: Change,
    decision: Decision,
    numa: usize,
}

/// How much a shrink keeps, compared resource by resource in name order.
fn total(changes: &[(String, Quantity, Quantity)]) -> Vec<Quantity> {
    changes.iter().map(|(_, amount, _)| *amount).collect()
}

/// Logical CPUs per physical core (1 without SMT); with `full-pcpus-only`
/// only whole cores can be handed out.
fn cpus_per_core(node: &Node) -> usize {
    let full_cores = node
        .config()
        .cpu_options
        .get("full-pcpus-only")
        .is_some_and(|v| go_parse_bool(v) == Some(true));
    if !full_cores {
        return 1;
    }
    let machine = node.machine();
    machine
        .cpus()
        .first()
        .map(|first| {
            machine
                .cpus()
                .iter()
                .filter(|c| c.core == first.core && c.numa == first.numa)
                .count()
        })
        .unwrap_or(1)
        .max(1)
}

/// The denominator of the scale [`shrink_together`] bisects on: each
/// resource is cut to `k / SCALE` of what every container (and
/// `spec.resources`) asks for.
const SCALE: i128 = 1024;

/// One resource the pod asks for, as [`shrink_together`] scales it.
struct Scaled {
    resource: String,
    /// The smallest amount and the step, in thousandths: whole cores of
    /// CPUs (whole CPUs when nothing needs cores), a milli-CPU for
    /// fractional CPUs, a MiB of memory or storage, one huge page, one
    /// device.
    step: i128,
    format: QuantityFormat,
}

/// Kind 1c: the whole pod cut down until it fits — every resource it asks
/// for, in every container and in `spec.resources`, scaled by one factor
/// per resource. The factors are found one resource after the other by
/// bisection (the others at their smallest), so a pod asking too much of
/// several resources at once, or from several containers, still gets a
/// checked answer in `O(resources · log SCALE)` admissions. With `remove`,
/// on the node without those pods ([`Change::RemoveThenPod`]).
fn shrink_together(situation: &Situation<'_>, remove: &[String]) -> Option<Fix> {
    let pod = situation.pod;
    let resources = scaled_resources(situation);
    if resources.is_empty() {
        return None;
    }
    let change_for = |factors: &[i128]| {
        let manifest = scaled_manifest(situation.manifest, &resources, factors);
        if remove.is_empty() {
            Change::Pod(manifest)
        } else {
            Change::RemoveThenPod {
                remove: remove.to_vec(),
                pod: manifest,
            }
        }
    };
    let mut factors = vec![1; resources.len()];
    let mut found = admits(situation, &change_for(&factors)).map(|decision| (change_for(&factors), decision))?;
    for index in 0..resources.len() {
        let best = largest_admitted_by_bisection(SCALE, |k| {
            let mut trial = factors.clone();
            trial[index] = k;
            let change = change_for(&trial);
            admits(situation, &change).map(|decision| (k, change, decision))
        });
        if let Some((k, change, decision)) = best {
            factors[index] = k;
            found = (change, decision);
        }
    }
    let (change, decision) = found;
    let manifest = match &change {
        Change::Pod(manifest) | Change::RemoveThenPod { pod: manifest, .. } => manifest,
        _ => return None,
    };
    let changed = pod_from_value(manifest, &pod.uid).ok()?;
    let mut listed = Vec::new();
    for (before, after) in pod.all_containers().zip(changed.all_containers()) {
        for Scaled { resource, .. } in &resources {
            let (old, new) = (before.0.request(resource), after.0.request(resource));
            if old != new {
                listed.push(format!(
                    "{resource}: {new} instead of {old} in container {}",
                    before.0.name
                ));
            }
        }
    }
    if let (Some(before), Some(after)) = (&pod.pod_resources, &changed.pod_resources) {
        for Scaled { resource, .. } in &resources {
            let old = before.requests.get(resource).copied().unwrap_or_default();
            let new = after.requests.get(resource).copied().unwrap_or_default();
            if old != new {
                listed.push(format!("{resource}: {new} instead of {old} in spec.resources"));
            }
        }
    }
    let what = if remove.is_empty() {
        format!("Shrink the pod to what fits now ({})", listed.join(", "))
    } else {
        format!(
            "Remove {} first, and shrink the pod ({})",
            listed_pods(remove),
            listed.join(", ")
        )
    };
    Some(Fix::new(situation, what, change, &decision))
}

/// The manifest with each of `resources` scaled by its factor (`k /
/// SCALE`, down to a whole step, never below one step) wherever it is
/// asked for: every container's requests and limits, and `spec.resources`.
fn scaled_manifest(manifest: &Value, resources: &[Scaled], factors: &[i128]) -> Value {
    let mut changed = manifest.clone();
    let scale = |list: &mut Value| {
        let Some(list) = list.as_object_mut() else { return };
        for (Scaled { resource, step, format }, &k) in resources.iter().zip(factors) {
            let Some(text) = list
                .get(resource)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| list.get(resource).filter(|v| v.is_number()).map(ToString::to_string))
            else {
                continue;
            };
            let Ok(amount) = topoalign_k8s::parse_quantity(&text) else {
                continue;
            };
            let milli = amount.milli();
            if milli <= 0 || (milli < *step && resource != "cpu") {
                continue;
            }
            let cut = (milli.saturating_mul(k) / SCALE / step).max(1) * step;
            let cut = if resource == "cpu" { cut } else { cut.min(milli) };
            list.insert(
                resource.clone(),
                json!(Quantity::from_milli(cut).with_format(*format).to_string()),
            );
        }
    };
    let Some(spec) = changed.get_mut("spec") else {
        return changed;
    };
    for list in ["initContainers", "containers"] {
        if let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) {
            for container in containers {
                if let Some(resources) = container.get_mut("resources") {
                    for field in ["requests", "limits"] {
                        if let Some(amounts) = resources.get_mut(field) {
                            scale(amounts);
                        }
                    }
                }
            }
        }
    }
    if let Some(resources) = spec.get_mut("resources") {
        for field in ["requests", "limits"] {
            if let Some(amounts) = resources.get_mut(field) {
                scale(amounts);
            }
        }
    }
    changed
}

/// What [`shrink_together`] scales: every resource the pod asks for.
fn scaled_resources(situation: &Situation<'_>) -> Vec<Scaled> {
    let pod = situation.pod;
    let per_core = i128::try_from(cpus_per_core(situation.node)).unwrap_or(1).max(1);
    let mut names: Vec<String> = pod
        .all_containers()
        .flat_map(|(c, _)| c.requests.iter().chain(&c.limits))
        .chain(
            pod.pod_resources
                .iter()
                .flat_map(|r| r.requests.iter().chain(&r.limits)),
        )
        .filter(|(_, q)| !q.is_zero())
        .map(|(r, _)| r.clone())
        .collect();
    names.sort();
    names.dedup();
    let whole_cpus = pod
        .all_containers()
        .flat_map(|(c, _)| [c.request("cpu"), c.limit("cpu")])
        .all(Quantity::is_whole);
    names
        .into_iter()
        .map(|resource| {
            let (step, format) = match resource.as_str() {
                "cpu" if whole_cpus => (1000 * per_core, QuantityFormat::DecimalSI),
                "cpu" => (1, QuantityFormat::DecimalSI),
                "memory" | "ephemeral-storage" => (1000 << 20, QuantityFormat::BinarySI),
                _ if resource_name::is_hugepages(&resource) => (step(&resource).milli(), QuantityFormat::BinarySI),
                _ => (1000, QuantityFormat::DecimalSI),
            };
            Scaled { resource, step, format }
        })
        .collect()
}

/// At most this many running pods are weighed one by one when looking for
/// the fewest to remove before a shrunk pod fits; the rest are removed.
const REMOVAL_WEIGHED: usize = 64;

/// Kind 3b: when nothing else admits, running pods removed — more than
/// [`removal_fixes`] tries together — and, where that is not enough, the
/// pod shrunk as well. The pods to remove are found by taking, one at a
/// time, each pod out of "remove them all" while the pod at its smallest
/// still fits (linear in the running pods); then the pod is grown back by
/// [`shrink_together`].
fn remove_then_shrink(situation: &Situation<'_>) -> Option<Fix> {
    let all: Vec<String> = situation.node.pods().iter().map(Pod::key).collect();
    if all.is_empty() {
        return None;
    }
    let smallest = shrink_together_smallest(situation).unwrap_or_else(|| situation.manifest.clone());
    let fits = |remove: &[String]| {
        admits(
            situation,
            &Change::RemoveThenPod {
                remove: remove.to_vec(),
                pod: smallest.clone(),
            },
        )
        .is_some()
    };
    if !fits(&all) {
        return None;
    }
    let mut remove = all.clone();
    for key in all.iter().take(REMOVAL_WEIGHED) {
        let kept: Vec<String> = remove.iter().filter(|k| *k != key).cloned().collect();
        if fits(&kept) {
            remove = kept;
        }
    }
    if remove.is_empty() {
        return None; // shrinking alone admits: kind 1 covers it
    }
    let unchanged = Change::Remove(remove.clone());
    if let Some(decision) = admits(situation, &unchanged) {
        return Some(Fix::new(
            situation,
            format!("Remove {} first", listed_pods(&remove)),
            unchanged,
            &decision,
        ));
    }
    shrink_together(situation, &remove)
}

/// `a, b and c`, or the first few and how many more.
fn listed_pods(keys: &[String]) -> String {
    const NAMED: usize = 5;
    match keys {
        [] => String::new(),
        [one] => one.clone(),
        _ if keys.len() > NAMED + 1 => format!("{} and {} more pods", keys[..NAMED].join(", "), keys.len() - NAMED),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The pod at its smallest, as [`shrink_together`] starts from.
fn shrink_together_smallest(situation: &Situation<'_>) -> Option<Value> {
    let resources = scaled_resources(situation);
    (!resources.is_empty()).then(|| scaled_manifest(situation.manifest, &resources, &vec![1; resources.len()]))
}

/// 2. Other topology manager settings that admit the pod.
fn kubelet_fixes(situation: &Situation<'_>) -> Vec<Fix> {
    let config = situation.node.config();
    let (policy, scope) = (config.topology_policy, config.topology_scope);
    let other_scope = match scope {
        TopologyScope::Container => TopologyScope::Pod,
        TopologyScope::Pod => TopologyScope::Container,
    };
    let mut candidates: Vec<(Option<TopologyPolicyName>, Option<TopologyScope>)> = Vec::new();
    if policy != TopologyPolicyName::None && situation.pod.init_containers.len() + situation.pod.containers.len() > 1 {
        candidates.push((None, Some(other_scope)));
    }
    for looser in [TopologyPolicyName::Restricted, TopologyPolicyName::BestEffort] {
        if looser != policy && policy != TopologyPolicyName::None {
            candidates.push((Some(looser), None));
        }
    }
    let mut fixes: Vec<Fix> = Vec::new();
    for (new_policy, new_scope) in candidates {
        let mut fields = Map::new();
        if let Some(p) = new_policy {
            fields.insert("topologyManagerPolicy".into(), json!(p.as_str()));
        }
        if let Some(s) = new_scope {
            fields.insert("topologyManagerScope".into(), json!(s.as_str()));
        }
        let change = Change::Kubelet(fields);
        if let Some(decision) = admits(situation, &change) {
            let setting = match (new_policy, new_scope) {
                (Some(p), _) => format!("topologyManagerPolicy: {}", p.as_str()),
                (None, Some(s)) => format!("topologyManagerScope: {}", s.as_str()),
                (None, None) => continue,
            };
            let what = format!(
                "Set {setting} in the kubelet configuration (applies at a kubelet restart; running pods keep their CPUs and memory)"
            );
            fixes.push(Fix::new(situation, what, change, &decision));
        }
    }
    fixes.extend(without_cpu_option(situation, "full-pcpus-only"));
    fixes.extend(fewer_reserved_cpus(situation));
    fixes
}

/// The node reserving fewer CPUs for the system (`reservedSystemCPUs`, or
/// the `cpu` of `systemReserved` and `kubeReserved`): the largest
/// reservation, in whole CPUs, that admits the pod — found by bisection,
/// each candidate a restarted kubelet with the node's state restored.
/// `reservedSystemCPUs` keeps its lowest CPUs; of the two quantities,
/// `systemReserved` gives way first. No reservation at all is tried last
/// (the static CPU manager policy refuses to start without one).
fn fewer_reserved_cpus(situation: &Situation<'_>) -> Option<Fix> {
    let config = situation.node.config();
    if let Some(reserved) = &config.reserved_system_cpus {
        let cpus = reserved.to_vec();
        let try_keep = |keep: i128| {
            let kept: topoalign_model::CpuSet = cpus.iter().copied().take(usize::try_from(keep).ok()?).collect();
            let mut fields = Map::new();
            fields.insert("reservedSystemCPUs".into(), json!(kept.to_string()));
            let change = Change::Kubelet(fields);
            admits(situation, &change).map(|decision| (kept, change, decision))
        };
        let most = i128::try_from(cpus.len()).ok()? - 1;
        let (kept, change, decision) = largest_admitted_by_bisection(most, try_keep).or_else(|| try_keep(0))?;
        let what = format!(
            "Reserve fewer CPUs for the system: reservedSystemCPUs: \"{kept}\" instead of \"{reserved}\" in the kubelet \
             configuration (applies at a kubelet restart; running pods keep their CPUs)"
        );
        return Some(Fix::new(situation, what, change, &decision));
    }
    let reserved_milli = |list: &topoalign_model::ResourceList| list.get("cpu").map_or(0, |q| q.milli().max(0));
    let (system, kube) = (
        reserved_milli(&config.system_reserved),
        reserved_milli(&config.kube_reserved),
    );
    let total = system.saturating_add(kube);
    if total <= 0 {
        return None;
    }
    let with_cpu = |field: &str, milli: i128| {
        let mut list = situation
            .kubelet
            .get(field)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        if milli > 0 {
            list.insert("cpu".into(), json!(Quantity::from_milli(milli).to_string()));
        } else {
            list.remove("cpu");
        }
        Value::Object(list)
    };
    // `cpus` whole CPUs in all: `kubeReserved` keeps what it can.
    let split = |cpus: i128| {
        let kept_kube = kube.min(cpus * 1000);
        (cpus * 1000 - kept_kube, kept_kube)
    };
    let try_cpus = |cpus: i128| {
        let (new_system, new_kube) = split(cpus);
        let mut fields = Map::new();
        if system > 0 {
            fields.insert("systemReserved".into(), with_cpu("systemReserved", new_system));
        }
        if kube > 0 {
            fields.insert("kubeReserved".into(), with_cpu("kubeReserved", new_kube));
        }
        let change = Change::Kubelet(fields);
        admits(situation, &change).map(|decision| (cpus, change, decision))
    };
    // Whole CPUs below what is reserved now (1500m: at most 1).
    let most = (total - 1) / 1000;
    let (cpus, change, decision) = largest_admitted_by_bisection(most, try_cpus).or_else(|| try_cpus(0))?;
    let (new_system, new_kube) = split(cpus);
    let mut listed = Vec::new();
    for (field, old, new) in [("systemReserved", system, new_system), ("kubeReserved", kube, new_kube)] {
        if old != new {
            listed.push(format!(
                "{field}.cpu: {} instead of {}",
                Quantity::from_milli(new),
                Quantity::from_milli(old)
            ));
        }
    }
    let what = format!(
        "Reserve fewer CPUs for the system: {} in the kubelet configuration (applies at a kubelet restart; running \
         pods keep their CPUs)",
        listed.join(", ")
    );
    Some(Fix::new(situation, what, change, &decision))
}

/// The node without one CPU manager policy option it has on.
fn without_cpu_option(situation: &Situation<'_>, option: &str) -> Option<Fix> {
    let options = &situation.node.config().cpu_options;
    if options.get(option).is_none_or(|v| go_parse_bool(v) != Some(true)) {
        return None;
    }
    let kept: Map<String, Value> = options
        .iter()
        .filter(|(name, _)| name.as_str() != option)
        .map(|(name, value)| (name.clone(), json!(value)))
        .collect();
    let mut fields = Map::new();
    fields.insert("cpuManagerPolicyOptions".into(), Value::Object(kept));
    let change = Change::Kubelet(fields);
    let decision = admits(situation, &change)?;
    let what = format!(
        "Turn off the CPU manager option {option} in the kubelet configuration (applies at a kubelet restart; running pods keep their CPUs)"
    );
    Some(Fix::new(situation, what, change, &decision))
}

/// 3. The fewest running pods whose removal makes room.
fn removal_fixes(situation: &Situation<'_>) -> Vec<Fix> {
    let pods: Vec<String> = situation.node.pods().iter().map(Pod::key).collect();
    let mut attempts = 0;
    for size in 1..=REMOVAL_SET_SIZE.min(pods.len()) {
        let mut fixes = Vec::new();
        for set in (0..pods.len()).combinations(size) {
            if attempts >= REMOVAL_ATTEMPTS || fixes.len() >= REMOVAL_FIXES {
                break;
            }
            attempts += 1;
            let keys: Vec<String> = set.iter().map(|&i| pods[i].clone()).collect();
            let change = Change::Remove(keys.clone());
            if let Some(decision) = admits(situation, &change) {
                fixes.push(Fix::new(
                    situation,
                    format!("Remove {} first", keys.join(" and ")),
                    change,
                    &decision,
                ));
            }
        }
        if !fixes.is_empty() {
            return fixes;
        }
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use itertools::Itertools as _;

    /// The removal search (and the cluster's and defrag's eviction
    /// searches) rely on itertools' order: lexicographic, so with pods
    /// sorted the earlier pods are tried first.
    #[test]
    fn combinations_in_order() {
        let all: Vec<Vec<usize>> = (0..4).combinations(2).collect();
        assert_eq!(all, [[0, 1], [0, 2], [0, 3], [1, 2], [1, 3], [2, 3]]);
        assert_eq!((0..2).combinations(3).count(), 0);
        assert_eq!((0..3).combinations(0).collect::<Vec<_>>(), [Vec::<usize>::new()]);
    }
}
