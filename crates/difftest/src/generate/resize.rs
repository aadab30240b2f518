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
use topoalign_scenario::Scenario;

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
/// answer such a resize: docs/kubelet-versions.md), and not the pod scope
/// with the `Static` memory policy (the pod's CPU hints, which depend on
/// that status, would place an init container's memory allocated again). A Guaranteed pod's
/// resize then passes `canResizePod` and the managers keep what it holds.
/// From a random stream of its own (fork 8).
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
        || (kubelet.pod_scope && kubelet.static_memory)
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
}
