//! Pod-level `spec.resources` where the `PodLevelResources` gate is off
//! (1.32 and 1.33 by default): the API server drops the field before
//! validation and the kubelet never sees it. The vectors
//! `testdata/conformance/1.32|1.33/hand-pod-level-dropped` hold the real
//! kubelet's answers (the conformance test replays them); here, that the
//! replay says so beside the answer, by both ways of reading a scenario,
//! and that a scenario turning the gate on still validates the field.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::path::{Path, PathBuf};

use topoalign_scenario::{Replay, ReplayInput, Scenario, replay};

fn vector(release: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/conformance")
        .join(release)
        .join("scenarios/hand-pod-level-dropped.json")
}

fn warnings(outcome: Replay) -> Vec<String> {
    match outcome {
        Replay::Completed(document) => document.warnings,
        Replay::Refused(text) => panic!("the kubelet refused to start: {text}"),
    }
}

#[test]
fn a_dropped_field_is_a_warning_naming_the_pod() {
    for release in ["1.32", "1.33"] {
        let text = std::fs::read_to_string(vector(release)).unwrap();
        let through_value = warnings(replay(&Scenario::parse(&text).unwrap()).unwrap());
        let direct = warnings(ReplayInput::parse(&text).unwrap().replay().unwrap());
        assert_eq!(through_value, direct, "{release}");
        let dropped: Vec<&String> = direct.iter().filter(|w| w.contains("PodLevelResources")).collect();
        assert_eq!(dropped.len(), 4, "{release}: {direct:?}");
        for (event, warning) in dropped.iter().enumerate() {
            assert!(
                warning.starts_with(&format!("events[{event}].add.spec.resources: ignored")),
                "{warning}"
            );
        }
    }
}

#[test]
fn with_the_gate_on_the_field_is_validated() {
    let text = std::fs::read_to_string(vector("1.32")).unwrap();
    let mut scenario: serde_json::Value = serde_json::from_str(&text).unwrap();
    scenario["kubelet"]["featureGates"] = serde_json::json!({"PodLevelResources": true});
    let error = replay(&Scenario::parse(&scenario.to_string()).unwrap()).unwrap_err();
    assert!(
        error.to_string().contains("events[0].add.spec.resources.requests"),
        "{error}"
    );
}
