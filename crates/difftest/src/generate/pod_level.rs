//! Pod-level `spec.resources` where the API server drops it: with the
//! `PodLevelResources` gate off (1.32 and 1.33 by default, or switched
//! off later), `dropDisabledPodLevelResources` (pkg/api/pod/util.go)
//! removes the field when the pod is created, before validation, and every
//! reader in the kubelet checks the gate — the kubelet never sees it. Such
//! a field may then hold what pod-level validation would refuse (a request
//! above its limit, a name pod-level resources do not cover, a negative
//! amount, less than the containers ask) or a budget that, were it read,
//! would change the QoS class and the managers' answer: the answer must be
//! the one without it (tag `pod-level-dropped`). Drawn from a random
//! stream of its own (fork 7), so a seed the step leaves alone names the
//! scenario it named before.

use serde_json::{Map, Value, json};
use topoalign_scenario::Scenario;

use super::kubelet::KubeletFacts;
use super::machine::MachineFacts;
use crate::release::Release;
use crate::rng::Rng;

/// Writes a `spec.resources` into some pods of `scenario` when the
/// scenario's API server drops it.
pub(super) fn add_dropped(
    rng: &mut Rng,
    release: Release,
    scenario: &mut Scenario,
    machine: &MachineFacts,
    kubelet: &KubeletFacts,
    tags: &mut Vec<String>,
) {
    if kubelet.pod_level_resources || !rng.chance(35) {
        return;
    }
    let device = machine.devices.keys().next().cloned();
    let mut any = false;
    for event in &mut scenario.events {
        let Some(spec) = event.add.as_mut().and_then(|pod| pod.get_mut("spec")) else {
            continue;
        };
        if !rng.chance(30) {
            continue;
        }
        let Some(spec) = spec.as_object_mut() else {
            continue;
        };
        spec.insert("resources".into(), resources(rng, release, device.as_deref()));
        any = true;
    }
    if any {
        tags.push("pod-level-dropped".into());
    }
}

/// One `spec.resources` the gate-on API server would refuse or the
/// kubelet would read differently.
fn resources(rng: &mut Rng, release: Release, device: Option<&str>) -> Value {
    let mut requests = Map::new();
    let mut limits = Map::new();
    match rng.below(6) {
        // A request above its limit.
        0 => {
            requests.insert("cpu".into(), json!("4"));
            limits.insert("cpu".into(), json!("2"));
        }
        // Names pod-level resources do not cover (huge pages only from 1.33).
        1 => {
            limits.insert("ephemeral-storage".into(), json!("1Gi"));
            if let Some(device) = device {
                limits.insert(device.into(), json!("1"));
            }
            if release.0 < 33 || rng.chance(50) {
                limits.insert("hugepages-2Mi".into(), json!("4Mi"));
            }
        }
        // A negative amount.
        2 => {
            requests.insert("memory".into(), json!("-1Gi"));
        }
        // Less than any container asks.
        3 => {
            requests.insert("cpu".into(), json!("1m"));
            limits.insert("cpu".into(), json!("1m"));
            limits.insert("memory".into(), json!("1Mi"));
        }
        // A Guaranteed budget: were it read, the pod would be Guaranteed
        // by it (and, from 1.34, left in the shared pool).
        4 => {
            let cpu = rng.range(1, 8).to_string();
            let memory = format!("{}Mi", rng.range(1, 16) * 256);
            for list in [&mut requests, &mut limits] {
                list.insert("cpu".into(), json!(cpu));
                list.insert("memory".into(), json!(memory));
            }
        }
        // A Burstable budget.
        _ => {
            requests.insert("cpu".into(), json!(format!("{}m", rng.range(1, 40) * 100)));
        }
    }
    let mut resources = Map::new();
    if !requests.is_empty() {
        resources.insert("requests".into(), Value::Object(requests));
    }
    if !limits.is_empty() {
        resources.insert("limits".into(), Value::Object(limits));
    }
    Value::Object(resources)
}

#[cfg(test)]
mod tests {
    use crate::generate::{LaterSteps, Profile, generate_with};
    use crate::release::Release;

    /// 1.32 and 1.33 scenarios (the gate off by default) get dropped
    /// pod-level fields now and then; 1.34+ only where a scenario turns
    /// the gate off; and the step adds nothing but `spec.resources`.
    #[test]
    fn releases_with_the_gate_off_get_dropped_pod_level_resources() {
        for release in [Release(32), Release(33), Release(34), Release(37)] {
            let mut dropped = 0;
            for seed in 0..300 {
                let with = generate_with(seed, release, LaterSteps::All, Profile::Standard);
                if !with.tags.iter().any(|t| t == "pod-level-dropped") {
                    continue;
                }
                dropped += 1;
                let gate = with
                    .scenario
                    .kubelet
                    .pointer("/featureGates/PodLevelResources")
                    .and_then(serde_json::Value::as_bool);
                assert!(
                    !gate.unwrap_or(release.0 >= 34),
                    "seed {seed} {release:?}: the gate is on"
                );
            }
            if release.0 <= 33 {
                assert!(dropped > 20, "{release:?}: {dropped}");
            }
        }
    }
}
