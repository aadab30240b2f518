//! The allocator against the real one: every case of `testdata/dra/cases`,
//! run as each release, must get that release's outcome as the real
//! allocator gave it (`testdata/dra/<release>/<case>.json`, printed by
//! `oracle-dra`, oracle/dra/vectors.sh) — or, where 1.34/1.35 depend on the
//! order of pools and slices, one of the `alternatives` it lists.
//!
//! Outcomes are compared as the API's JSON (devices, requests, configs,
//! node selectors); an `unschedulable` or `error` outcome must be matched
//! in kind, its message is shown but not compared.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use topoalign_dra::features::RELEASES;
use topoalign_dra::{AllocationCase, Outcome, allocate};

fn dra_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/dra")
}

/// An expected file: the outcome and the other answers the release can give.
#[derive(Deserialize)]
struct Expected {
    #[serde(flatten)]
    outcome: Outcome,
    #[serde(default)]
    alternatives: Vec<Outcome>,
}

fn same(ours: &Outcome, theirs: &Outcome) -> bool {
    match (ours, theirs) {
        (Outcome::Allocated { allocations: a }, Outcome::Allocated { allocations: b }) => {
            serde_json::to_value(a).ok() == serde_json::to_value(b).ok()
        }
        (Outcome::Unschedulable { .. }, Outcome::Unschedulable { .. })
        | (Outcome::Error { .. }, Outcome::Error { .. }) => true,
        _ => false,
    }
}

fn read_case(path: &Path) -> AllocationCase {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn every_case_gets_each_releases_real_outcome() {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dra_dir().join("cases"))
        .expect("testdata/dra/cases")
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 30, "only {} DRA cases found", cases.len());
    let mut failures = Vec::new();
    let mut checked = 0;
    for release in RELEASES {
        for path in &cases {
            let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            let expected_path = dra_dir().join(release).join(format!("{name}.json"));
            let text =
                std::fs::read_to_string(&expected_path).unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
            let expected: Expected =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", expected_path.display()));
            let mut case = read_case(path);
            case.release = release.to_owned();
            let ours = allocate(&case);
            checked += 1;
            let accepted = std::iter::once(&expected.outcome).chain(&expected.alternatives);
            if !accepted.clone().any(|theirs| same(&ours, theirs)) {
                failures.push(format!(
                    "{release}/{name}:\n  ours:     {}\n  expected: {}",
                    serde_json::to_string(&ours).unwrap_or_default(),
                    serde_json::to_string(&expected.outcome).unwrap_or_default()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {checked} DRA vectors differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
