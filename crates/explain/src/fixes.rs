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
use topoalign_engine::{Decision, Node, TopologyPolicyName, TopologyScope};
use topoalign_k8s::{KubeletConfiguration, PodError, node_config, pod_from_value};
use topoalign_model::{Machine, Pod, Quantity, QuantityFormat, go_parse_bool, resource_name};

use crate::hints::nodes_text;
use crate::report::affinity;
use crate::requests::{largest_container_requests, pod_requests};
use crate::table::free_amount;
use crate::{EmptyNode, Situation};

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
    /// The fix `what` (the change in words) with the outcome `decision`.
    fn new(what: String, change: Change, decision: &Decision) -> Fix {
        let outcome = outcome(decision);
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
/// multiplied, each device repeated (`<id>-<copy>`).
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
            cpus.push(topoalign_model::Cpu { id, core, ..*cpu });
        }
    }
    let numa_nodes = machine
        .numa_nodes()
        .iter()
        .map(|numa| topoalign_model::NumaNode {
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
                        numa: d.numa.clone(),
                    })
                })
                .collect();
            (resource.clone(), repeated)
        })
        .collect();
    Machine::new(numa_nodes, cpus, devices).map_err(|e| e.to_string())
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

fn outcome(decision: &Decision) -> String {
    match affinity(decision) {
        Some(nodes) => format!("admitted, aligned to NUMA {}", nodes_text(&nodes)),
        None => "admitted, without NUMA alignment".to_owned(),
    }
}

/// Every fix for a rejected pod, in the order of the module docs.
pub(crate) fn find(situation: &Situation<'_>, empty_node: &EmptyNode) -> Vec<Fix> {
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
                return Some(Fix::new(what, change, &decision));
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
            return Some(Fix::new(what, change, &decision));
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
            fixes.push(Fix::new(what, change, &decision));
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
    Some(Fix::new(what, change, &decision))
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
    Some(Fix::new(what, change, &decision))
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
    Some(Fix::new(what, change, &decision))
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
    let what = format!("Shrink it to what NUMA {numa} has free ({})", listed.join(", "));
    Some(Fix::new(what, change, &decision))
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
    Some(Fix::new(what, change, &decision))
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
            fixes.push(Fix::new(what, change, &decision));
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
        return Some(Fix::new(what, change, &decision));
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
    Some(Fix::new(what, change, &decision))
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
    Some(Fix::new(what, change, &decision))
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
