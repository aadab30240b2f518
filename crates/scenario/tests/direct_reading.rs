//! [`ReplayInput`] (the scenario's pods deserialized once, straight into
//! the Kubernetes type, as `topoalign replay` reads them) answers exactly
//! as [`Scenario::parse`] then [`replay`]: the same result document or the
//! same error, for every conformance vector of every release set and for
//! malformed variants of one.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::path::Path;

use topoalign_scenario::{ReplayInput, Scenario, replay};

fn through_value(text: &str) -> String {
    match Scenario::parse(text).and_then(|s| replay(&s)) {
        Ok(replayed) => format!("{replayed:?}"),
        Err(e) => format!("error: {e}"),
    }
}

fn direct(text: &str) -> String {
    match ReplayInput::parse(text).and_then(ReplayInput::replay) {
        Ok(replayed) => format!("{replayed:?}"),
        Err(e) => format!("error: {e}"),
    }
}

fn scenario_files() -> Vec<std::path::PathBuf> {
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let mut files = Vec::new();
    for set in ["conformance", "conformance-large"] {
        let Ok(entries) = std::fs::read_dir(testdata.join(set)) else {
            continue;
        };
        for release in entries.filter_map(Result::ok) {
            let dir = release.path().join("scenarios");
            let Ok(scenarios) = std::fs::read_dir(&dir) else {
                continue;
            };
            files.extend(
                scenarios
                    .filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "json")),
            );
        }
    }
    files.sort();
    files
}

#[test]
fn every_conformance_vector_replays_the_same_either_way() {
    let files = scenario_files();
    assert!(files.len() > 100, "conformance vectors not found: {}", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        assert_eq!(direct(&text), through_value(&text), "{}", file.display());
    }
}

#[test]
fn malformed_scenarios_get_the_same_errors_either_way() {
    let file = scenario_files().into_iter().next().unwrap();
    let text = std::fs::read_to_string(&file).unwrap();
    let variants = [
        text.replacen("\"events\"", "\"evnets\"", 1),
        text.replacen("\"name\"", "\"name\": 7, \"x\"", 1),
        text.replacen("\"containers\"", "\"containers\": 3, \"y\"", 1),
        text.replacen(
            "\"containers\"",
            "\"initContainers\": [{\"name\": \"BAD NAME\"}], \"containers\"",
            1,
        ),
        text.replacen("\"numaNodes\"", "\"numaNodes\": [], \"z\"", 1),
        text.replacen("{", "{\"events\": [{\"delete\": \"a\"}], ", 1),
        format!("{text} trailing"),
        text.replacen("\"add\"", "\"delete\": \"default/x\", \"add\"", 1),
    ];
    for variant in variants {
        assert_eq!(direct(&variant), through_value(&variant), "{variant}");
    }
}
