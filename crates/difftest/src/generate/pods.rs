//! Random pod events: Guaranteed pods with integer or fractional CPUs,
//! Burstable and BestEffort pods, init containers and sidecars (init
//! containers with `restartPolicy: Always`), pod-level resources
//! (`spec.resources`), huge pages and devices; deletes of earlier pods
//! (admitted or not) and of pods never added; in-place resizes of the
//! `cpu` and `memory` of app containers and sidecars (drawn here for 1.36+;
//! older releases get theirs from `resize.rs`), keeping the pod's QoS
//! class; now and then a node filled
//! with small pods, two or more of which then ask for more than is left
//! (pending resizes) before deletes or shrinking resizes free room, so that
//! the kubelet's retries and their order are judged. Every pod is one the API
//! server accepts (requests within limits, extended resources and huge
//! pages with requests equal to limits, pod-level resources covering the
//! containers'), so a refusal is the kubelet's.
//!
//! The kubelet merges hints by enumerating the cross product of every
//! provider's hints: 2^N − 1 NUMA masks per resource under best-effort
//! and restricted. Pods whose product would exceed the budget
//! ([`MERGE_BUDGET`], ten times it for big machines) are
//! made cheaper (no devices, no huge pages, then Burstable), or one
//! replay would take hours.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};
use topoalign_scenario::EventSpec;

use super::kubelet::KubeletFacts;
use super::machine::MachineFacts;
use crate::rng::Rng;

/// Most hint permutations one container (or pod, in pod scope) may cost
/// the kubelet's merge.
pub const MERGE_BUDGET: f64 = 2.0e7;

/// The budget of the big-machine profile ([`super::Profile::Big`]).
pub const BIG_MERGE_BUDGET: f64 = 2.0e8;

const MI: u64 = 1 << 20;

/// One container's resources: `limits` (Guaranteed), `requests` only, or
/// both, as Kubernetes quantity strings.
#[derive(Clone, Debug, Default)]
struct Resources {
    requests: Map<String, Value>,
    limits: Map<String, Value>,
}

impl Resources {
    fn to_json(&self) -> Option<Value> {
        let mut out = Map::new();
        if !self.requests.is_empty() {
            out.insert("requests".into(), Value::Object(self.requests.clone()));
        }
        if !self.limits.is_empty() {
            out.insert("limits".into(), Value::Object(self.limits.clone()));
        }
        (!out.is_empty()).then_some(Value::Object(out))
    }
}

/// The kind of pod, by QoS and shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    GuaranteedInteger,
    GuaranteedFractional,
    Burstable,
    BestEffort,
    PodLevel,
}

pub fn events(rng: &mut Rng, machine: &MachineFacts, kubelet: &KubeletFacts, tags: &mut Vec<String>) -> Vec<EventSpec> {
    if kubelet.resize_in_pod_stream && rng.chance(15) {
        return pending_resizes(rng, machine, tags);
    }
    let count = *rng.weighted(&[(10, 1usize), (15, 2), (20, 3), (20, 4), (15, 6), (10, 8), (10, 12)]);
    let mut added: Vec<String> = Vec::new();
    let mut live: Vec<String> = Vec::new();
    let mut events = Vec::new();
    let mut next = 0usize;
    // The API server's pod of each live name, as resizes leave it.
    let mut pods: BTreeMap<String, Value> = BTreeMap::new();
    for _ in 0..count {
        let roll = rng.below(100);
        if kubelet.resize_in_pod_stream
            && (20..34).contains(&roll)
            && !live.is_empty()
            && let Some(key) = Some(live[rng.urange(0, live.len() - 1)].clone())
            && let Some(event) = pods
                .get_mut(&key)
                .and_then(|pod| resize(rng, &key, pod, machine, kubelet, tags))
        {
            events.push(event);
            continue;
        }
        if roll < 18 && !added.is_empty() {
            // Delete an earlier pod, usually one still on the node.
            let key = if !live.is_empty() && rng.chance(85) {
                live.remove(rng.urange(0, live.len() - 1))
            } else {
                added[rng.urange(0, added.len() - 1)].clone()
            };
            live.retain(|k| k != &key);
            tags.push("delete".into());
            events.push(EventSpec {
                add: None,
                delete: Some(key),
                ..EventSpec::default()
            });
            continue;
        }
        if roll < 20 {
            tags.push("delete-unknown".into());
            events.push(EventSpec {
                add: None,
                delete: Some("default/never-added".into()),
                ..EventSpec::default()
            });
            continue;
        }
        // A name deleted earlier comes back now and then.
        let name = match added.iter().find(|k| !live.contains(k)) {
            Some(gone) if rng.chance(20) => gone.clone(),
            _ => {
                next += 1;
                format!("default/p{next}")
            }
        };
        let pod = pod(rng, &name, machine, kubelet, tags);
        pods.insert(name.clone(), pod.clone());
        if !added.contains(&name) {
            added.push(name.clone());
        }
        live.push(name);
        events.push(EventSpec {
            add: Some(pod),
            ..EventSpec::default()
        });
    }
    events
}

/// A `resize` of one app container or sidecar of `pod`, written into `pod`
/// too: new `cpu` and/or `memory` amounts — now and then far beyond the
/// node, or unchanged — that keep each resource's shape (request equal to
/// limit stays so, a request below its limit stays below, no resource is
/// added), so the QoS class stays. In a pod with pod-level resources the
/// containers stay within them, as the API server validates a resize
/// ([`within_pod_level`]); one that would not is not made.
pub(super) fn resize(
    rng: &mut Rng,
    key: &str,
    pod: &mut Value,
    machine: &MachineFacts,
    kubelet: &KubeletFacts,
    tags: &mut Vec<String>,
) -> Option<EventSpec> {
    let spec = pod.get_mut("spec")?;
    // An init container that ran to completion no longer holds pinned
    // memory; up to 1.36 the topology manager's admission of the resize
    // allocates it again (tagged: such scenarios are the ones that judge it).
    let runs_to_completion = spec
        .get("initContainers")
        .and_then(Value::as_array)
        .is_some_and(|list| {
            list.iter()
                .any(|c| c.get("restartPolicy").and_then(Value::as_str) != Some("Always"))
        });
    let init_static_memory = kubelet.static_memory && runs_to_completion && is_guaranteed(spec);
    let mut candidates: Vec<(&str, usize)> = Vec::new();
    for list in ["containers", "initContainers"] {
        for (i, c) in containers_in(spec, list) {
            if list == "containers" || c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
                candidates.push((list, i));
            }
        }
    }
    if candidates.is_empty() {
        return None;
    }
    let (list, index) = *rng.pick(&candidates);
    let container = spec.get_mut(list)?.get_mut(index)?;
    let name = container.get("name")?.as_str()?.to_string();
    let total_cpus: usize = machine.cpus_per_numa.iter().map(Vec::len).sum();
    let total_memory: u64 = machine.memory_per_numa.iter().sum();
    let unchanged = rng.chance(5);
    let beyond = rng.chance(10);
    let mut requests = Map::new();
    let mut limits = Map::new();
    for resource in ["cpu", "memory"] {
        // Each resource is resized now and then; memory always when CPU was
        // not, so that every resize changes something.
        let memory_is_the_last_chance = resource == "memory" && requests.is_empty() && limits.is_empty();
        if !rng.chance(60) && !memory_is_the_last_chance {
            continue;
        }
        let resources = container.get("resources");
        let old_limit = resources
            .and_then(|r| r.get("limits"))
            .and_then(|l| l.get(resource))
            .cloned();
        let old_request = resources
            .and_then(|r| r.get("requests"))
            .and_then(|l| l.get(resource))
            .cloned()
            .or_else(|| old_limit.clone());
        let Some(old_request) = old_request else { continue };
        let amount = |rng: &mut Rng| -> (u64, Value) {
            if resource == "cpu" {
                let milli = if beyond {
                    (total_cpus as u64 * 2 + 1) * 1000
                } else if rng.chance(60) {
                    rng.range(1, (total_cpus as u64 / 2).max(1)) * 1000
                } else {
                    rng.range(1, 40) * 100
                };
                let text = if milli % 1000 == 0 {
                    (milli / 1000).to_string()
                } else {
                    format!("{milli}m")
                };
                (milli, json!(text))
            } else {
                let mi = if beyond {
                    total_memory / MI * 2
                } else {
                    rng.range(1, 64) * 64
                };
                (mi, json!(format!("{mi}Mi")))
            }
        };
        match old_limit {
            _ if unchanged => {
                requests.insert(resource.into(), old_request.clone());
                if let Some(limit) = old_limit {
                    limits.insert(resource.into(), limit);
                }
            }
            Some(limit) if limit == old_request => {
                let (_, value) = amount(rng);
                requests.insert(resource.into(), value.clone());
                limits.insert(resource.into(), value);
            }
            Some(_) => {
                // Request strictly below the limit: both new.
                let (high, high_value) = amount(rng);
                if high < 2 {
                    continue;
                }
                let low = rng.range(1, high - 1);
                let low_value = match resource {
                    "cpu" => json!(format!("{low}m")),
                    _ => json!(format!("{low}Mi")),
                };
                requests.insert(resource.into(), low_value);
                limits.insert(resource.into(), high_value);
            }
            None => {
                requests.insert(resource.into(), amount(rng).1);
            }
        }
    }
    if requests.is_empty() && limits.is_empty() {
        return None;
    }
    let pod_level = spec.get("resources").is_some();
    if pod_level && !within_pod_level(spec, list, index, &requests, &limits) {
        return None;
    }
    let container = spec.get_mut(list)?.get_mut(index)?;
    // The desired pod keeps the new sizes for later resizes.
    let resources = container
        .as_object_mut()?
        .entry("resources")
        .or_insert_with(|| json!({}));
    for (name, list) in [("requests", &requests), ("limits", &limits)] {
        if list.is_empty() {
            continue;
        }
        let target = resources.as_object_mut()?.entry(name).or_insert_with(|| json!({}));
        for (resource, value) in list {
            target.as_object_mut()?.insert(resource.clone(), value.clone());
        }
    }
    tags.push("resize".into());
    if pod_level {
        tags.push("resize-pod-level".into());
    }
    if init_static_memory {
        tags.push("resize-init-static-memory".into());
    }
    if beyond {
        tags.push("resize-beyond".into());
    }
    let mut change = Map::new();
    if !requests.is_empty() {
        change.insert("requests".into(), Value::Object(requests));
    }
    if !limits.is_empty() {
        change.insert("limits".into(), Value::Object(limits));
    }
    let spec: topoalign_scenario::ResizeSpec = serde_json::from_value(json!({
        "pod": key,
        "containers": [{"name": name, "resources": change}],
    }))
    .ok()?;
    Some(EventSpec {
        resize: Some(spec),
        ..EventSpec::default()
    })
}

fn pod(rng: &mut Rng, key: &str, machine: &MachineFacts, kubelet: &KubeletFacts, tags: &mut Vec<String>) -> Value {
    let kind = *rng.weighted(&[
        (45, Kind::GuaranteedInteger),
        (10, Kind::GuaranteedFractional),
        (17, Kind::Burstable),
        (8, Kind::BestEffort),
        (if kubelet.pod_level_resources { 20 } else { 3 }, Kind::PodLevel),
    ]);
    // Try the full pod, then cheaper ones, until the merge is affordable.
    for cheapness in 0..3 {
        let kind = if cheapness == 2 && kind != Kind::BestEffort {
            Kind::Burstable
        } else {
            kind
        };
        let mut local = rng.clone();
        let (value, shape) = build_pod(&mut local, key, kind, cheapness > 0, machine, kubelet);
        if merge_cost(&shape, machine, kubelet) <= kubelet.merge_budget {
            *rng = local;
            if shape.aligns_everything() {
                tags.push("all-resources".into());
            }
            tags.extend(shape.tags);
            return value;
        }
    }
    // A BestEffort pod asks nothing and costs nothing.
    let (value, shape) = build_pod(rng, key, Kind::BestEffort, true, machine, kubelet);
    tags.extend(shape.tags);
    value
}

/// What the merge-cost estimate needs of a pod.
struct Shape {
    /// Per container (init and app): the resources the kubelet merges a
    /// hint list for.
    lists_per_container: Vec<Vec<String>>,
    tags: Vec<String>,
}

impl Shape {
    /// Whether one container has a hint list for CPU, memory, huge pages
    /// and a device at once (tag `all-resources`).
    fn aligns_everything(&self) -> bool {
        self.lists_per_container.iter().any(|lists| {
            let has = |f: &dyn Fn(&str) -> bool| lists.iter().any(|l| f(l));
            has(&|l| l == "cpu")
                && has(&|l| l == "memory")
                && has(&|l| l.starts_with("hugepages-"))
                && has(&|l| l.contains('/'))
        })
    }
}

fn build_pod(
    rng: &mut Rng,
    key: &str,
    kind: Kind,
    cheap: bool,
    machine: &MachineFacts,
    kubelet: &KubeletFacts,
) -> (Value, Shape) {
    let (namespace, name) = key.split_once('/').unwrap_or(("default", key));
    let mut tags = vec![format!("pod:{kind:?}")];
    let app_count = *rng.weighted(&[(60, 1usize), (28, 2), (12, 3)]);
    let init_count = *rng.weighted(&[(60, 0usize), (28, 1), (12, 2)]);
    let sidecar = rng.chance(15);
    let per_numa_cpus = machine.min_cpus_per_numa().max(1);
    let per_numa_memory = machine.memory_per_numa.iter().copied().min().unwrap_or(MI << 10);

    let mut lists_per_container = Vec::new();
    let mut containers = Vec::new();
    let mut init_containers = Vec::new();
    let mut container_requests_cpu = 0u64; // millicores
    let mut container_requests_memory = 0u64;
    // Devices an earlier init container of the pod held, per resource.
    let mut init_devices: BTreeMap<String, u64> = BTreeMap::new();
    let total = init_count + usize::from(sidecar) + app_count;
    for i in 0..total {
        let is_init = i < init_count;
        let is_sidecar = sidecar && i == init_count;
        let name = if is_init {
            format!("init{i}")
        } else if is_sidecar {
            "sidecar".to_owned()
        } else {
            format!("app{}", i - init_count - usize::from(sidecar))
        };
        let (mut resources, lists) = container_resources(
            rng,
            kind,
            cheap,
            machine,
            kubelet,
            per_numa_cpus,
            per_numa_memory,
            &mut tags,
        );
        // A container re-using an earlier init container's devices gets a
        // subset of them chosen in Go map order when it needs fewer than
        // there are (devicemanager devicesToAllocate; the plugin is not
        // asked): no answer to compare. It asks for none or at least as many.
        for (resource, earlier) in &init_devices {
            if let Some(n) = resources
                .limits
                .get(resource)
                .and_then(Value::as_str)
                .and_then(|n| n.parse::<u64>().ok())
                && n < *earlier
            {
                for part in [&mut resources.limits, &mut resources.requests] {
                    if part.contains_key(resource) {
                        part.insert(resource.clone(), json!(earlier.to_string()));
                    }
                }
            }
        }
        if is_init || is_sidecar {
            for (resource, n) in &resources.limits {
                if let Some(n) = n.as_str().and_then(|n| n.parse::<u64>().ok())
                    && resource.contains('/')
                {
                    let held = init_devices.entry(resource.clone()).or_insert(0);
                    *held = (*held).max(n);
                }
            }
        }
        // Summed over every container, init containers too: at least the
        // aggregate the API server checks pod-level requests against.
        container_requests_cpu += milli(resources.requests.get("cpu").or(resources.limits.get("cpu")));
        container_requests_memory += bytes(resources.requests.get("memory").or(resources.limits.get("memory")));
        lists_per_container.push(lists);
        let mut c = json!({"name": name, "image": "registry.k8s.io/pause:3.10"});
        if let Some(r) = resources.to_json() {
            c["resources"] = r;
        }
        if is_sidecar {
            c["restartPolicy"] = json!("Always");
            tags.push("sidecar".into());
            init_containers.push(c);
        } else if is_init {
            tags.push("init".into());
            init_containers.push(c);
        } else {
            containers.push(c);
        }
    }
    let mut spec = json!({"containers": containers});
    if !init_containers.is_empty() {
        spec["initContainers"] = json!(init_containers);
    }
    if kind == Kind::PodLevel {
        if kubelet.pod_level_managers {
            tags.push("pod-level-managers".into());
        }
        // Pod-level requests cover the containers' (API validation);
        // Guaranteed when requests equal limits.
        let cpu_milli = container_requests_cpu.max(1000) + *rng.pick(&[0u64, 0, 500, 1000, 2000]);
        let cpu_milli = if rng.chance(60) {
            cpu_milli.div_ceil(1000) * 1000
        } else {
            cpu_milli
        };
        let memory = container_requests_memory.max(256 * MI) + *rng.pick(&[0u64, 256, 1024]) * MI;
        let requests = json!({"cpu": cpu_text(cpu_milli), "memory": topoalign_scenario::byte_quantity(memory)});
        let limits = if rng.chance(70) {
            requests.clone()
        } else {
            json!({"cpu": cpu_text(cpu_milli + 1000), "memory": topoalign_scenario::byte_quantity(memory * 2)})
        };
        spec["resources"] = match *rng.weighted(&[(77, "both"), (15, "limits"), (8, "uncovered")]) {
            // Requests left to defaulting (the kubelet's before 1.37, the
            // API server's create step from 1.37).
            "limits" => {
                tags.push("pod-level-limits-only".into());
                json!({"limits": limits})
            }
            // Nothing pod-level management covers: QoS from the containers
            // from 1.37.
            "uncovered" => {
                tags.push("pod-level-uncovered".into());
                json!({"limits": {"ephemeral-storage": "1Gi"}})
            }
            _ => json!({"requests": requests, "limits": limits}),
        };
    }
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    });
    tags.sort();
    tags.dedup();
    (
        pod,
        Shape {
            lists_per_container,
            tags,
        },
    )
}

/// One container's resources and the number of hint lists it costs.
#[allow(clippy::too_many_arguments)] // one call site; a struct would only rename the list
fn container_resources(
    rng: &mut Rng,
    kind: Kind,
    cheap: bool,
    machine: &MachineFacts,
    kubelet: &KubeletFacts,
    per_numa_cpus: usize,
    per_numa_memory: u64,
    tags: &mut Vec<String>,
) -> (Resources, Vec<String>) {
    let mut r = Resources::default();
    let mut lists = Vec::new();
    let mut list = |on: bool, name: &str| {
        if on {
            lists.push(name.to_owned());
        }
    };
    // Integer CPUs up to a bit more than one NUMA node holds; odd counts
    // on SMT machines matter (full-pcpus-only, the uncore-cache option).
    let cpus = {
        let max = (per_numa_cpus * 3 / 2).max(2) as u64;
        let n = rng.range(1, max);
        if kubelet.full_pcpus_only && machine.smt && rng.chance(50) {
            n + n % 2
        } else {
            n
        }
    };
    let memory = {
        let max = (per_numa_memory * 5 / 4 / MI / 256).max(1);
        rng.range(1, max.min(64)) * 256 * MI
    };
    let memory_text = topoalign_scenario::byte_quantity(memory);
    match kind {
        Kind::GuaranteedInteger => {
            r.limits.insert("cpu".into(), json!(cpus.to_string()));
            r.limits.insert("memory".into(), json!(memory_text));
            list(kubelet.static_cpu, "cpu");
            list(kubelet.static_memory, "memory");
        }
        Kind::GuaranteedFractional => {
            let milli = *rng.pick(&[100u64, 250, 500, 1500, 2500]);
            r.limits.insert("cpu".into(), json!(format!("{milli}m")));
            r.limits.insert("memory".into(), json!(memory_text));
            list(kubelet.static_memory, "memory");
        }
        Kind::Burstable => {
            r.requests.insert("cpu".into(), json!(cpu_text(rng.range(1, 4) * 250)));
            if rng.chance(70) {
                r.requests.insert("memory".into(), json!(memory_text));
            }
            if rng.chance(30) {
                r.limits.insert("cpu".into(), json!(cpus.max(1).to_string()));
            }
        }
        Kind::BestEffort => {}
        Kind::PodLevel => {
            // Containers of a pod with pod-level resources may say nothing,
            // or ask for part of the pod's budget.
            if rng.chance(50) {
                r.requests.insert("cpu".into(), json!(cpu_text(rng.range(1, 4) * 250)));
                r.requests.insert("memory".into(), json!(memory_text));
            }
            // Counted as if the pod's budget were aligned (the managers of
            // some releases do).
            list(kubelet.static_cpu, "cpu");
            list(kubelet.static_memory, "memory");
        }
    }
    let guaranteed = matches!(kind, Kind::GuaranteedInteger | Kind::GuaranteedFractional);
    // Huge pages need cpu or memory beside them (API validation).
    if guaranteed && !cheap && rng.chance(if kubelet.rich_pods { 80 } else { 35 }) {
        for (size, per) in &machine.hugepages {
            let largest = per.iter().copied().max().unwrap_or(0);
            if largest == 0 || rng.chance(30) {
                continue;
            }
            let page = if *size == "1Gi" { 1u64 << 30 } else { 2 * MI };
            let pages = rng.range(1, (largest * 5 / 4 / page).clamp(1, 6));
            let amount = json!(topoalign_scenario::byte_quantity(pages * page));
            r.limits.insert(format!("hugepages-{size}"), amount.clone());
            if !r.requests.is_empty() {
                r.requests.insert(format!("hugepages-{size}"), amount);
            }
            list(kubelet.static_memory, &format!("hugepages-{size}"));
            tags.push("hugepages-request".into());
        }
    }
    // Devices: limits (requests default to them).
    if !cheap
        && rng.chance(if kubelet.rich_pods {
            80
        } else if kind == Kind::BestEffort {
            15
        } else {
            30
        })
    {
        for (resource, count) in &machine.devices {
            if rng.chance(40) {
                continue;
            }
            let n = rng.range(1, (*count as u64 + 1).min(4));
            r.limits.insert(resource.clone(), json!(n.to_string()));
            if !r.requests.is_empty() {
                r.requests.insert(resource.clone(), json!(n.to_string()));
            }
            list(true, resource);
            tags.push("device-request".into());
        }
    }
    (r, lists)
}

/// An upper bound on the hint permutations the kubelet's merge walks for
/// the worst container (or the pod, in pod scope).
fn merge_cost(shape: &Shape, machine: &MachineFacts, kubelet: &KubeletFacts) -> f64 {
    let per_list = match kubelet.topology_policy {
        "none" | "default" => return 0.0,
        "single-numa-node" => (machine.numa + 1) as f64,
        _ => 2f64.powi(machine.numa as i32) - 1.0,
    };
    // Pod scope merges one list per resource for the whole pod, container
    // scope one per resource of each container.
    let lists = if kubelet.pod_scope {
        let mut all: Vec<&String> = shape.lists_per_container.iter().flatten().collect();
        all.sort();
        all.dedup();
        all.len()
    } else {
        shape.lists_per_container.iter().map(Vec::len).max().unwrap_or(0)
    };
    per_list.powi(lists as i32)
}

fn cpu_text(milli: u64) -> String {
    if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{milli}m")
    }
}

/// Whether `spec`'s containers, the one at `index` of `list` with the new
/// `requests` and `limits`, stay within the pod-level resources as the API
/// server's validation asks: the containers' requests (all of them summed,
/// init containers too: stricter than the API server) at most the pod's
/// request, each container's limit at most the pod's limit.
fn within_pod_level(
    spec: &Value,
    list: &str,
    index: usize,
    requests: &Map<String, Value>,
    limits: &Map<String, Value>,
) -> bool {
    let pod = spec.get("resources");
    for resource in ["cpu", "memory"] {
        let amount = |v: Option<&Value>| if resource == "cpu" { milli(v) } else { bytes(v) };
        let pod_request = pod.and_then(|r| r.get("requests")).and_then(|r| r.get(resource));
        let pod_limit = pod.and_then(|r| r.get("limits")).and_then(|r| r.get(resource));
        let mut summed = 0u64;
        for name in ["initContainers", "containers"] {
            for (i, c) in containers_in(spec, name) {
                let resized = name == list && i == index;
                let of = |field: &str, new: &Map<String, Value>| {
                    if resized && let Some(v) = new.get(resource) {
                        return Some(v.clone());
                    }
                    c.get("resources")
                        .and_then(|r| r.get(field))
                        .and_then(|r| r.get(resource))
                        .cloned()
                };
                let limit = of("limits", limits);
                // An unset request defaults to the limit.
                let request = of("requests", requests).or_else(|| limit.clone());
                summed += amount(request.as_ref());
                if pod_limit.is_some() && limit.is_some() && amount(limit.as_ref()) > amount(pod_limit) {
                    return false;
                }
            }
        }
        if pod_request.or(pod_limit).is_some() && summed > amount(pod_request.or(pod_limit)) {
            return false;
        }
    }
    true
}

/// The containers of `spec`'s `list` (`containers`, `initContainers`),
/// numbered; none when the list is absent.
fn containers_in<'a>(spec: &'a Value, list: &str) -> impl Iterator<Item = (usize, &'a Value)> {
    spec.get(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
}

/// Millicores of a quantity this generator wrote (`"2"`, `"500m"`).
fn milli(v: Option<&Value>) -> u64 {
    let Some(text) = v.and_then(Value::as_str) else {
        return 0;
    };
    match text.strip_suffix('m') {
        Some(m) => m.parse().unwrap_or(0),
        None => text.parse::<u64>().unwrap_or(0) * 1000,
    }
}

/// Bytes of a quantity this generator wrote (`byte_quantity`'s units).
fn bytes(v: Option<&Value>) -> u64 {
    let Some(text) = v.and_then(Value::as_str) else {
        return 0;
    };
    for (suffix, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
        if let Some(n) = text.strip_suffix(suffix) {
            return n.parse::<u64>().unwrap_or(0) << shift;
        }
    }
    text.parse().unwrap_or(0)
}

/// A node filled with 3 to 7 small one-container pods (Burstable or
/// Guaranteed, `spec.priority` now and then), then 2 to 4 resizes that ask
/// for more CPU or memory than is left (deferred), then deletes, shrinking
/// resizes and further resizes in random order: what makes the kubelet
/// retry its pending resizes (`RetryPendingResizes`) and what its order
/// (`sortPendingResizes`: not increasing first, priority, Guaranteed, the
/// longest pending) decides.
pub(super) fn pending_resizes(rng: &mut Rng, machine: &MachineFacts, tags: &mut Vec<String>) -> Vec<EventSpec> {
    tags.push("resize".into());
    tags.push("resize-pending".into());
    let total_milli = machine.cpus_per_numa.iter().map(Vec::len).sum::<usize>() as u64 * 1000;
    let total_mi = machine.memory_per_numa.iter().sum::<u64>() / MI;
    let count = rng.range(3, 7);
    // Per pod: its name, whether Guaranteed, and its cpu (milli) and memory (Mi).
    let mut pods: Vec<(String, bool, u64, u64)> = Vec::new();
    let mut events = Vec::new();
    let share_milli = (total_milli / (count + 1)).max(100) / 100 * 100;
    let share_mi = (total_mi / (count + 2)).max(64);
    for i in 1..=count {
        let name = format!("default/p{i}");
        let guaranteed = rng.chance(30);
        let cpu = share_milli.saturating_sub(rng.below(3) * 100).max(100);
        let memory = share_mi.saturating_sub(rng.below(3) * 16).max(16);
        let mut spec = json!({
            "containers": [{"name": "app0", "image": "registry.k8s.io/pause:3.10",
                "resources": sized(guaranteed, cpu, memory)}],
        });
        if rng.chance(30) {
            spec["priority"] = json!(*rng.pick(&[-5i64, 0, 10, 1000]));
            tags.push("priority".into());
        }
        let (namespace, short) = name.split_once('/').unwrap_or(("default", &name));
        events.push(EventSpec {
            add: Some(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": short, "namespace": namespace}, "spec": spec})),
            ..EventSpec::default()
        });
        pods.push((name, guaranteed, cpu, memory));
    }
    let resize_of = |pod: &mut (String, bool, u64, u64), cpu: u64, memory: u64| {
        pod.2 = cpu;
        pod.3 = memory;
        let spec: Option<topoalign_scenario::ResizeSpec> = serde_json::from_value(json!({
            "pod": pod.0,
            "containers": [{"name": "app0", "resources": sized(pod.1, cpu, memory)}],
        }))
        .ok();
        spec.map(|spec| EventSpec {
            resize: Some(spec),
            ..EventSpec::default()
        })
    };
    let memory_too = rng.chance(30);
    let mut live: Vec<usize> = (0..pods.len()).collect();
    for _ in 0..rng.range(2, 4) {
        let i = *rng.pick(&live);
        let cpu = pods[i].2 + share_milli * rng.range(1, 3);
        let memory = if memory_too {
            pods[i].3 + share_mi * rng.range(1, 2)
        } else {
            pods[i].3
        };
        events.extend(resize_of(&mut pods[i], cpu, memory));
    }
    for _ in 0..rng.range(1, 4) {
        if live.is_empty() {
            break;
        }
        let at = rng.urange(0, live.len() - 1);
        let i = live[at];
        match rng.below(3) {
            0 => {
                tags.push("delete".into());
                live.remove(at);
                events.push(EventSpec {
                    delete: Some(pods[i].0.clone()),
                    ..EventSpec::default()
                });
            }
            1 => {
                let cpu = (pods[i].2 / 4).max(100) / 100 * 100;
                let memory = (pods[i].3 / 2).max(16);
                events.extend(resize_of(&mut pods[i], cpu, memory));
            }
            _ => {
                let cpu = pods[i].2 + 100 * rng.range(1, 10);
                let memory = pods[i].3;
                events.extend(resize_of(&mut pods[i], cpu, memory));
            }
        }
    }
    events
}

/// Whether every container of a pod `spec` has `cpu` and `memory` limits
/// and no other requests for them (Guaranteed, the QoS class whose memory
/// the `Static` memory policy pins).
fn is_guaranteed(spec: &Value) -> bool {
    ["containers", "initContainers"]
        .iter()
        .flat_map(|list| spec.get(*list).and_then(Value::as_array).into_iter().flatten())
        .all(|c| {
            let resources = c.get("resources");
            ["cpu", "memory"].iter().all(|r| {
                let limit = resources.and_then(|x| x.get("limits")).and_then(|l| l.get(*r));
                let request = resources.and_then(|x| x.get("requests")).and_then(|l| l.get(*r));
                limit.is_some() && (request.is_none() || request == limit)
            })
        })
}

/// One container's resources: `cpu` (millicores) and `memory` (Mi) as
/// limits equal to requests (Guaranteed) or as requests only.
fn sized(guaranteed: bool, cpu: u64, memory: u64) -> Value {
    let amounts = json!({"cpu": format!("{cpu}m"), "memory": format!("{memory}Mi")});
    if guaranteed {
        json!({"requests": amounts.clone(), "limits": amounts})
    } else {
        json!({"requests": amounts})
    }
}
