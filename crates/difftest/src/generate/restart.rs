//! Kubelet restarts in generated scenarios (`restart` events,
//! docs/scenario.md): now and then one or two are put between the events,
//! some with kubelet fields changed — the topology manager's policy or
//! scope, the CPU or memory manager's policy (a changed manager policy is
//! the kubelet's crash loop), or the configuration unchanged. Never after a
//! `resize` (not modelled). Drawn from a random stream of their own, so a
//! seed the step leaves alone names the scenario it named before. On the
//! wide profile's machines the memory manager never becomes Static (the
//! kubelet would crash at the first Guaranteed container it readmits):
//! the scope changes instead.

use serde_json::{Map, Value, json};
use topoalign_scenario::{EventSpec, RestartSpec, Scenario};

use super::Profile;
use crate::rng::Rng;

/// Puts restart events into `scenario` (tags `restart`, `restart-config`).
pub(super) fn add_restarts(rng: &mut Rng, profile: Profile, scenario: &mut Scenario, tags: &mut Vec<String>) {
    if !rng.chance(15) {
        return;
    }
    // Where a restart may go: after the first add, before the first resize.
    let first_add = scenario.events.iter().position(|e| e.add.is_some());
    let first_resize = scenario
        .events
        .iter()
        .position(|e| e.resize.is_some())
        .unwrap_or(scenario.events.len());
    let Some(first_add) = first_add else {
        return;
    };
    if first_add >= first_resize {
        return;
    }
    let count = if rng.chance(25) { 2 } else { 1 };
    // Positions after which to restart, in [first_add, first_resize).
    let mut after: Vec<usize> = (0..count).map(|_| rng.urange(first_add, first_resize - 1)).collect();
    after.sort_unstable();
    after.dedup();
    for &position in after.iter().rev() {
        let kubelet = if rng.chance(40) {
            tags.push("restart-config".into());
            changed_fields(rng, profile, &scenario.kubelet)
        } else {
            Map::new()
        };
        scenario.events.insert(
            position + 1,
            EventSpec {
                restart: Some(RestartSpec { kubelet }),
                ..EventSpec::default()
            },
        );
    }
    tags.push("restart".into());
}

/// One or two kubelet fields that differ from `kubelet`'s.
fn changed_fields(rng: &mut Rng, profile: Profile, kubelet: &Value) -> Map<String, Value> {
    let mut fields = Map::new();
    let current = |name: &str| kubelet.get(name).and_then(Value::as_str).map(str::to_owned);
    for _ in 0..rng.urange(1, 2) {
        match rng.below(4) {
            0 => {
                let policies = ["none", "best-effort", "restricted", "single-numa-node"];
                let now = current("topologyManagerPolicy").unwrap_or_else(|| "none".into());
                let others: Vec<&str> = policies.iter().copied().filter(|p| *p != now).collect();
                fields.insert("topologyManagerPolicy".into(), json!(rng.pick(&others)));
            }
            choice @ (1 | 3) if choice == 1 || profile == Profile::Wide => {
                let now = current("topologyManagerScope").unwrap_or_else(|| "container".into());
                let other = if now == "pod" { "container" } else { "pod" };
                fields.insert("topologyManagerScope".into(), json!(other));
            }
            2 => {
                let now = current("cpuManagerPolicy").unwrap_or_else(|| "none".into());
                let other = if now == "static" { "none" } else { "static" };
                fields.insert("cpuManagerPolicy".into(), json!(other));
            }
            _ => {
                let now = current("memoryManagerPolicy").unwrap_or_else(|| "None".into());
                let other = if now == "Static" { "None" } else { "Static" };
                fields.insert("memoryManagerPolicy".into(), json!(other));
            }
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use crate::generate::generate;
    use crate::release::RELEASES;

    /// Restarts come, some with changed fields, never after a resize, and
    /// the engine's reader takes every one.
    #[test]
    fn restarts_come_never_after_a_resize_and_read_back() {
        let (mut with, mut changed) = (0, 0);
        for release in RELEASES {
            for seed in 0..300u64 {
                let g = generate(seed, release);
                let events = &g.scenario.events;
                let Some(first) = events.iter().position(|e| e.restart.is_some()) else {
                    continue;
                };
                with += 1;
                changed += usize::from(g.tags.iter().any(|t| t == "restart-config"));
                assert!(events[..first].iter().all(|e| e.resize.is_none()), "seed {seed}");
                assert!(events[..first].iter().any(|e| e.add.is_some()), "seed {seed}");
                let text = serde_json::to_string(&g.scenario).expect("serialises");
                // Other steps may make a scenario the API server refuses
                // (a respelled huge amount); a restart never may.
                if let Err(e) = topoalign_scenario::Scenario::parse(&text).and_then(|s| topoalign_scenario::replay(&s))
                {
                    assert!(!e.to_string().contains("restart"), "seed {seed} {release:?}: {e}");
                }
            }
        }
        assert!(
            with > 50 && changed > 10,
            "{with} scenarios with restarts, {changed} with changed fields"
        );
    }
}
