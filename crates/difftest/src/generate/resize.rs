//! In-place resizes for the releases whose pod stream draws none (1.32 to
//! 1.35): their oracles replay a resize through the kubelet's own code
//! (oracle/README.md) since after the pod stream was written, so their
//! resizes come from a step of their own random stream (fork 6), put
//! between the pod stream's events, and a seed's base scenario stays the
//! one it named before. The resizes themselves are the pod stream's
//! (`pods::resize`, `pods::pending_resizes`): now and then one of a live
//! pod after an event, or — in some scenarios instead of the pod stream's
//! events — a node filled with small pods whose resizes wait. Where
//! `InPlacePodVerticalScaling` can be set (1.32 alpha and off, 1.33/1.34
//! beta and on), it is set against its default now and then: off, the
//! kubelet does not look at a resize and counts the desired sizes.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use topoalign_scenario::{EventSpec, Scenario};

use super::kubelet::KubeletFacts;
use super::machine::MachineFacts;
use super::pods;
use crate::release::Release;
use crate::rng::Rng;

/// Puts resize events into `scenario` (tags `resize`, `resize-pending`, ...)
/// when `kubelet` asks for resizes the pod stream did not draw. The pod
/// stream's tags are `tags[pod_tags..]`, dropped when its events are.
pub(super) fn add_resizes(
    rng: &mut Rng,
    release: Release,
    scenario: &mut Scenario,
    machine: &MachineFacts,
    kubelet: &KubeletFacts,
    pod_tags: usize,
    tags: &mut Vec<String>,
) {
    if !kubelet.resize_events || kubelet.resize_in_pod_stream {
        return;
    }
    if rng.chance(15) {
        tags.truncate(pod_tags);
        scenario.events = pods::pending_resizes(rng, machine, tags);
    } else {
        // The API server's pod of each name, as resizes leave it, and the
        // names on the node (admitted or not: the generator cannot tell).
        let mut desired: BTreeMap<String, Value> = BTreeMap::new();
        let mut live: Vec<String> = Vec::new();
        let mut events = Vec::with_capacity(scenario.events.len());
        for event in std::mem::take(&mut scenario.events) {
            if let Some(pod) = &event.add {
                let key = pod_key(pod);
                desired.insert(key.clone(), pod.clone());
                live.push(key);
            }
            if let Some(key) = &event.delete {
                live.retain(|k| k != key);
            }
            events.push(event);
            if live.is_empty() || !rng.chance(14) {
                continue;
            }
            let key = live[rng.urange(0, live.len() - 1)].clone();
            if let Some(resize) = desired
                .get_mut(&key)
                .and_then(|pod| pods::resize(rng, &key, pod, machine, kubelet, tags))
            {
                events.push(resize);
            }
        }
        scenario.events = events;
    }
    if !scenario.events.iter().any(|e| e.resize.is_some()) {
        return;
    }
    let gate = match release.0 {
        32 if rng.chance(50) => Some(true),
        33 | 34 if rng.chance(25) => Some(false),
        _ => None,
    };
    if let Some(value) = gate
        && let Some(kubelet) = scenario.kubelet.as_object_mut()
    {
        let gates = kubelet.entry("featureGates").or_insert_with(|| json!({}));
        if let Some(gates) = gates.as_object_mut() {
            gates.insert("InPlacePodVerticalScaling".into(), json!(value));
            tags.push(format!("gate:InPlacePodVerticalScaling={value}"));
        }
    }
}

/// 1.32/1.33: turns `InPlacePodVerticalScalingExclusiveCPUs` on now and
/// then in a scenario with resizes that the kubelet looks at, where the
/// answer does not depend on the container status a scenario does not
/// carry: the `none` and `best-effort` topology policies, without
/// `full-pcpus-only` (elsewhere the engine and the oracle both refuse to
/// answer such a resize: docs/kubelet-versions.md). A Guaranteed pod's
/// resize then passes `canResizePod` and the managers keep what it holds
/// (under the pod scope with the `Static` memory policy they also allocate
/// an init container's memory again, where the status decides: such
/// resizes go, [`drop_init_memory_by_status`]). From a random stream of its
/// own (fork 8).
pub(super) fn add_exclusive_cpus_gate(
    rng: &mut Rng,
    release: Release,
    scenario: &mut Scenario,
    kubelet: &KubeletFacts,
    tags: &mut Vec<String>,
) {
    if !matches!(release.0, 32 | 33)
        || !scenario.events.iter().any(|e| e.resize.is_some())
        || !matches!(kubelet.topology_policy, "none" | "best-effort" | "default")
        || kubelet.full_pcpus_only
        || !rng.chance(40)
    {
        return;
    }
    let Some(gates) = scenario
        .kubelet
        .as_object_mut()
        .map(|k| k.entry("featureGates").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let in_place = gates
        .get("InPlacePodVerticalScaling")
        .and_then(Value::as_bool)
        .unwrap_or(release.0 >= 33);
    if !in_place || gates.contains_key("InPlacePodVerticalScalingExclusiveCPUs") {
        return;
    }
    gates.insert("InPlacePodVerticalScalingExclusiveCPUs".into(), json!(true));
    tags.push("gate:InPlacePodVerticalScalingExclusiveCPUs=true".into());
}

/// 1.32/1.33 with `InPlacePodVerticalScaling` on: now and then a resize of
/// a sidecar's CPU request right after its pod's admission (tag
/// `resize-sidecar`). 1.32 keeps an allocation for app containers only, so
/// a sidecar's new sizes are taken unchecked (never compared, judged or
/// reverted) and count in every later fit check; 1.33 compares and judges
/// them like an app container's (vectors `resize-sidecar-unchecked`; the
/// rule difftest's big-machine ledger found at seed 1,000,755). The pod
/// stream's resizes pick a sidecar seldom (5 of 142 1.32 scenarios with
/// resizes, seeds 1-300, none with the gate on). The new request: 2 to 4
/// times the old, whole CPUs now and then, or beyond the node; limits
/// move with it where they equal it (a Guaranteed pod stays one), and a
/// resource with another limit is left. Pods with pod-level resources are
/// left. From a random stream of its own (fork 9): a seed's other events
/// stay.
pub(super) fn add_sidecar_resizes(
    rng: &mut Rng,
    release: Release,
    scenario: &mut Scenario,
    machine: &MachineFacts,
    kubelet: &KubeletFacts,
    tags: &mut Vec<String>,
) {
    if !matches!(release.0, 32 | 33) || !kubelet.resize_events || kubelet.resize_in_pod_stream {
        return;
    }
    let in_place = scenario
        .kubelet
        .get("featureGates")
        .and_then(|g| g.get("InPlacePodVerticalScaling"))
        .and_then(Value::as_bool)
        .unwrap_or(release.0 >= 33);
    if !in_place || !rng.chance(70) {
        return;
    }
    let total_cpus: u64 = machine.cpus_per_numa.iter().map(|c| c.len() as u64).sum();
    let mut events = Vec::with_capacity(scenario.events.len() + 1);
    let mut added = 0;
    for event in std::mem::take(&mut scenario.events) {
        let resize = event.add.as_ref().and_then(|pod| {
            if added >= 2 || pod.get("spec").and_then(|s| s.get("resources")).is_some() || !rng.chance(75) {
                return None;
            }
            sidecar_resize(rng, pod, total_cpus)
        });
        events.push(event);
        if let Some(resize) = resize {
            events.push(resize);
            added += 1;
        }
    }
    scenario.events = events;
    if added > 0 {
        tags.push("resize".into());
        tags.push("resize-sidecar".into());
    }
}

/// A resize of the CPU request of one of `pod`'s sidecars, if it has one
/// that asks for CPU.
fn sidecar_resize(rng: &mut Rng, pod: &Value, total_cpus: u64) -> Option<EventSpec> {
    let sidecars: Vec<&Value> = pod
        .get("spec")?
        .get("initContainers")?
        .as_array()?
        .iter()
        .filter(|c| c.get("restartPolicy").and_then(Value::as_str) == Some("Always"))
        .collect();
    if sidecars.is_empty() {
        return None;
    }
    let sidecar = *rng.pick(&sidecars);
    let resources = sidecar.get("resources");
    let part = |name: &str| resources.and_then(|r| r.get(name)).and_then(|l| l.get("cpu"));
    let limit = part("limits").cloned();
    let request = part("requests").cloned().or_else(|| limit.clone())?;
    let old_milli = u64::try_from(topoalign_k8s::parse_quantity(request.as_str()?).ok()?.milli())
        .ok()?
        .max(1);
    let milli = if rng.chance(15) {
        (total_cpus + 1) * 1000
    } else if rng.chance(40) {
        (old_milli.div_ceil(1000) + rng.range(1, 2)) * 1000
    } else {
        old_milli * rng.range(2, 4)
    };
    let amount = if milli % 1000 == 0 {
        json!((milli / 1000).to_string())
    } else {
        json!(format!("{milli}m"))
    };
    let mut change = serde_json::Map::new();
    change.insert("requests".into(), json!({ "cpu": amount }));
    match limit {
        Some(limit) if limit == request => {
            change.insert("limits".into(), json!({ "cpu": amount }));
        }
        Some(_) => return None,
        None => {}
    }
    let name = sidecar.get("name")?.as_str()?;
    let spec = json!({"pod": pod_key(pod), "containers": [{"name": name, "resources": change}]});
    Some(EventSpec {
        resize: Some(serde_json::from_value(spec).ok()?),
        ..EventSpec::default()
    })
}

/// 1.32/1.33: drops the resizes whose answer the container status a
/// scenario does not carry decides, which the engine refuses to answer
/// (`ResizeError::NotReproduced`, crates/engine/src/node/resize.rs,
/// `init_memory_by_status`): under the `Static` memory policy and the pod
/// scope of an aligning topology policy on more than one NUMA node, a
/// resize that reaches the managers (1.32: `InPlacePodVerticalScaling` on
/// and, under the static CPU policy, `InPlacePodVerticalScalingExclusiveCPUs`
/// on; 1.33: that gate on) of a pod with an init container that runs to
/// completion, whose memory the memory manager allocates again on NUMA
/// nodes the app containers' status decides. On 1.33 only a pod whose
/// resizes name memory (or CPU, under the static CPU policy) loses them,
/// as the engine refuses only those. Draws nothing: a seed's other events
/// stay. Without a resize left, the `resize*` tags go.
pub(super) fn drop_init_memory_by_status(
    release: Release,
    scenario: &mut Scenario,
    machine: &MachineFacts,
    kubelet: &KubeletFacts,
    tags: &mut Vec<String>,
) {
    if !matches!(release.0, 32 | 33)
        || !kubelet.static_memory
        || !kubelet.pod_scope
        || matches!(kubelet.topology_policy, "none" | "default")
        || machine.numa < 2
    {
        return;
    }
    let gate = |name: &str| {
        scenario
            .kubelet
            .get("featureGates")
            .and_then(|g| g.get(name))
            .and_then(Value::as_bool)
    };
    let in_place = gate("InPlacePodVerticalScaling").unwrap_or(release.0 >= 33);
    let exclusive = gate("InPlacePodVerticalScalingExclusiveCPUs").unwrap_or(false);
    let reaches = in_place && exclusive || (release.0 == 32 && in_place && !kubelet.static_cpu);
    if !reaches {
        return;
    }
    // Pods (namespace/name) with an init container that runs to completion.
    let mut with_init = Vec::new();
    for event in &scenario.events {
        if let Some(pod) = &event.add
            && pod
                .get("spec")
                .and_then(|s| s.get("initContainers"))
                .and_then(Value::as_array)
                .is_some_and(|list| {
                    list.iter()
                        .any(|c| c.get("restartPolicy").and_then(Value::as_str) != Some("Always"))
                })
        {
            with_init.push(pod_key(pod));
        }
    }
    let key_of = |name: &str| {
        if name.contains('/') {
            name.to_string()
        } else {
            format!("default/{name}")
        }
    };
    let mut dropped: Vec<String> = Vec::new();
    for event in &scenario.events {
        let Some(resize) = &event.resize else { continue };
        let key = key_of(&resize.pod);
        if !with_init.contains(&key) || dropped.contains(&key) {
            continue;
        }
        let counted = release.0 == 32
            || resize.containers.iter().any(|c| {
                let names = |resource: &str| {
                    c.resources.requests.contains_key(resource) || c.resources.limits.contains_key(resource)
                };
                names("memory") || (kubelet.static_cpu && names("cpu"))
            });
        if counted {
            dropped.push(key);
        }
    }
    if dropped.is_empty() {
        return;
    }
    scenario
        .events
        .retain(|e| e.resize.as_ref().is_none_or(|r| !dropped.contains(&key_of(&r.pod))));
    if !scenario.events.iter().any(|e| e.resize.is_some()) {
        tags.retain(|t| !t.starts_with("resize"));
    }
    tags.push("resize-init-memory-by-status-dropped".into());
}

/// Now and then (a fifth of the scenarios with resizes, every release)
/// the amounts of resize events written finer than a thousandth (tag
/// `resize-sub-milli`): each `cpu` or `memory` amount of a resize, with
/// probability one half, lowered by 1 to 999,999 billionths and spelled
/// with the suffix `n` (`2` as `1999999500n`), as a decimal (`1.9999995`)
/// or with the suffix `u` (`1999999.5u`). A resize is a PATCH, and the API
/// server defaults the patched pod: `SetDefaults_ResourceList` rounds each
/// amount up to a thousandth (`RoundUp(-3)`), the amount it was, so the
/// kubelet decides the resize the scenario had — but an equal request and
/// limit lowered by different amounts are unequal until then (a Guaranteed
/// pod stays one only through the defaulting), and the amount's Go form
/// changes (an `int64Amount` of scale −9 becomes one of scale −3; past
/// `int64` billionths an `inf.Dec`). Amounts that are no whole number of
/// thousandths, or below one, are left. From a random stream of its own
/// (fork 10): a seed's other events stay.
pub(super) fn sub_milli_amounts(rng: &mut Rng, scenario: &mut Scenario, tags: &mut Vec<String>) {
    if !scenario.events.iter().any(|e| e.resize.is_some()) || !rng.chance(20) {
        return;
    }
    let mut changed = false;
    for resize in scenario.events.iter_mut().filter_map(|e| e.resize.as_mut()) {
        for container in &mut resize.containers {
            for list in [&mut container.resources.requests, &mut container.resources.limits] {
                for value in list.values_mut() {
                    if rng.chance(50)
                        && let Some(text) = sub_milli(rng, value)
                    {
                        *value = json!(text);
                        changed = true;
                    }
                }
            }
        }
    }
    if changed {
        tags.push("resize-sub-milli".into());
    }
}

/// `value`, a whole number of thousandths (at least one), lowered by less
/// than a thousandth and spelled finer (see [`sub_milli_amounts`]).
fn sub_milli(rng: &mut Rng, value: &Value) -> Option<String> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => return None,
    };
    let quantity = topoalign_k8s::parse_quantity(&text).ok()?;
    if !quantity.is_whole_milli() || quantity.milli() < 1 {
        return None;
    }
    let nano = quantity.nano() - i128::from(rng.range(1, 999_999));
    let decimal = |units: i128, fraction: i128, digits: usize, suffix: &str| {
        let fraction = format!("{fraction:0digits$}");
        let fraction = fraction.trim_end_matches('0');
        if fraction.is_empty() {
            format!("{units}{suffix}")
        } else {
            format!("{units}.{fraction}{suffix}")
        }
    };
    Some(match rng.below(3) {
        0 => format!("{nano}n"),
        1 => decimal(nano / 1_000_000_000, nano % 1_000_000_000, 9, ""),
        _ => decimal(nano / 1000, nano % 1000, 3, "u"),
    })
}

/// `namespace/name` of a pod manifest (the pod stream names every pod).
fn pod_key(pod: &Value) -> String {
    let meta = pod.get("metadata");
    let namespace = meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    let name = meta.and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or("");
    format!("{namespace}/{name}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::generate::{LaterSteps, Profile, generate_with};
    use crate::release::Release;

    /// 1.32-1.35 scenarios carry resizes now (the pending kind too, and
    /// the gate set against its default where it can be), and only
    /// resizes were added to the pod stream's events.
    #[test]
    fn older_releases_get_resizes_from_their_own_stream() {
        for release in [Release(32), Release(33), Release(34), Release(35)] {
            let mut counts = BTreeMap::<&str, u32>::new();
            for seed in 0..300 {
                let with = generate_with(seed, release, LaterSteps::Resizes, Profile::Standard);
                let without = generate_with(seed, release, LaterSteps::None, Profile::Standard);
                let has = |tag: &str| with.tags.iter().any(|t| t == tag);
                for tag in [
                    "resize",
                    "resize-pending",
                    "gate:InPlacePodVerticalScaling=true",
                    "gate:InPlacePodVerticalScaling=false",
                ] {
                    if has(tag) {
                        *counts.entry(tag).or_default() += 1;
                    }
                }
                assert!(
                    !without.tags.iter().any(|t| t.starts_with("resize")),
                    "seed {seed} {release:?}: the pod stream drew a resize"
                );
                let resizes = with.scenario.events.iter().filter(|e| e.resize.is_some()).count();
                assert_eq!(resizes > 0, has("resize"), "seed {seed} {release:?}");
                if !has("resize-pending") {
                    let others: Vec<String> = with
                        .scenario
                        .events
                        .iter()
                        .filter(|e| e.resize.is_none())
                        .map(|e| serde_json::to_string(e).expect("serialises"))
                        .collect();
                    let base: Vec<String> = without
                        .scenario
                        .events
                        .iter()
                        .map(|e| serde_json::to_string(e).expect("serialises"))
                        .collect();
                    assert_eq!(others, base, "seed {seed} {release:?}");
                }
            }
            assert!(
                counts.get("resize").copied().unwrap_or(0) > 60,
                "{release:?}: {counts:?}"
            );
            assert!(
                counts.get("resize-pending").copied().unwrap_or(0) > 20,
                "{release:?}: {counts:?}"
            );
            let gate_set = counts.get("gate:InPlacePodVerticalScaling=true").copied().unwrap_or(0)
                + counts.get("gate:InPlacePodVerticalScaling=false").copied().unwrap_or(0);
            assert_eq!(gate_set > 0, release.0 <= 34, "{release:?}: {counts:?}");
        }
    }
    /// 1.32/1.33 scenarios resize sidecars with `InPlacePodVerticalScaling`
    /// on (the 1.32 rule: taken unchecked), and none of them is a resize the
    /// engine refuses as depending on the container status (the init
    /// container's memory allocated again under the pod scope: dropped).
    #[test]
    fn sidecar_resizes_and_nothing_the_engine_cannot_answer() {
        for release in [Release(32), Release(33)] {
            let mut sidecar = 0;
            let mut gate_with_pod_scope_static_memory = 0;
            for seed in 1..=300 {
                let generated = crate::generate::generate(seed, release);
                let has = |tag: &str| generated.tags.iter().any(|t| t == tag);
                if has("resize-sidecar") {
                    sidecar += 1;
                }
                if has("gate:InPlacePodVerticalScalingExclusiveCPUs=true") && has("scope:pod") && has("memory:Static") {
                    gate_with_pod_scope_static_memory += 1;
                }
                if let Err(error) = topoalign_scenario::replay(&generated.scenario) {
                    assert!(
                        !error.to_string().contains("not reproduced"),
                        "seed {seed} {release:?}: {error}"
                    );
                }
            }
            eprintln!(
                "{release:?}: {sidecar} of 300 scenarios resize a sidecar, {gate_with_pod_scope_static_memory} turn the exclusive-CPU gate on under the pod scope and the Static memory policy"
            );
            assert!(sidecar >= 10, "{release:?}: {sidecar} scenarios resize a sidecar");
            assert!(
                gate_with_pod_scope_static_memory > 0,
                "{release:?}: the exclusive-CPU gate never meets the pod scope and the Static memory policy"
            );
        }
    }
}
