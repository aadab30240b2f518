//! The allocator against the real one: every case of `testdata/dra/cases`,
//! run as each release, must get that release's outcome as the real
//! allocator gave it (`testdata/dra/<release>/<case>.json`, printed by
//! `oracle-dra`, oracle/dra/vectors.sh) — or, where 1.34/1.35 depend on the
//! order of pools and slices, one of the `alternatives` it lists.
//!
//! Cases with a `pod` are DRA-backed extended resources: the plugin's
//! decision ([`allocate_pod`]: the pod's claims and the special claim, its
//! requests and container mappings), against the real plugin's.
//!
//! Outcomes are compared as the API's JSON (devices, requests, configs,
//! node selectors, mappings); an `unschedulable` or `error` outcome must be
//! matched in kind, its message is shown but not compared.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use topoalign_dra::extended::{PodCase, PodOutcome, allocate_pod, planned_requests};
use topoalign_dra::features::RELEASES;
use topoalign_dra::{AllocationCase, allocate};

fn dra_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/dra")
}

/// An expected file: the outcome and the other answers the release can give
/// (a case with a pod has the pod's outcome, a superset of `Outcome`).
#[derive(Deserialize)]
struct Expected {
    #[serde(flatten)]
    outcome: PodOutcome,
    #[serde(default)]
    alternatives: Vec<PodOutcome>,
}

fn same(ours: &PodOutcome, theirs: &PodOutcome) -> bool {
    match (ours, theirs) {
        (
            PodOutcome::Allocated {
                allocations: a,
                extended_resource_claim: x,
            },
            PodOutcome::Allocated {
                allocations: b,
                extended_resource_claim: y,
            },
        ) => serde_json::to_value((a, x)).ok() == serde_json::to_value((b, y)).ok(),
        (PodOutcome::Unschedulable { .. }, PodOutcome::Unschedulable { .. })
        | (PodOutcome::Error { .. }, PodOutcome::Error { .. }) => true,
        _ => false,
    }
}

/// A case file: a plain allocation case, or one with a pod.
enum Case {
    Plain(Box<AllocationCase>),
    Pod(Box<PodCase>),
}

impl Case {
    fn run(&mut self, release: &str) -> PodOutcome {
        match self {
            Case::Plain(case) => {
                case.release = release.to_owned();
                allocate(case).into()
            }
            Case::Pod(case) => {
                case.release = release.to_owned();
                allocate_pod(case)
            }
        }
    }
}

fn read_case(path: &Path) -> Case {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let value: serde_yaml_ng::Value =
        serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if value.get("pod").is_some() {
        Case::Pod(serde_yaml_ng::from_value(value).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
    } else {
        Case::Plain(serde_yaml_ng::from_value(value).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
    }
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
            let ours = read_case(path).run(release);
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

/// [`planned_requests`] is the special claim the real plugin built:
/// wherever it allocated one (the release's expected outcome), the same
/// requests and container mappings (none for an empty one).
#[test]
fn planned_requests_are_the_real_special_claims() {
    let mut compared = 0;
    for release in RELEASES {
        for entry in std::fs::read_dir(dra_dir().join("cases")).expect("testdata/dra/cases") {
            let path = entry.expect("a directory entry").path();
            let (Some("yaml"), Case::Pod(case)) = (path.extension().and_then(|e| e.to_str()), read_case(&path)) else {
                continue;
            };
            let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            let text = std::fs::read_to_string(dra_dir().join(release).join(format!("{name}.json"))).expect("expected");
            let expected: Expected = serde_json::from_str(&text).expect("JSON");
            let PodOutcome::Allocated {
                extended_resource_claim: Some(theirs),
                ..
            } = expected.outcome
            else {
                continue;
            };
            // An empty special claim (the pod's own claims beside resources
            // device plugins serve) is none planned.
            let planned = planned_requests(release, &case.pod, &case.node, &case.device_classes).unwrap_or_default();
            assert_eq!(
                serde_json::to_value(&planned).ok(),
                serde_json::to_value((&theirs.requests, &theirs.request_mappings)).ok(),
                "{release}/{name}"
            );
            compared += 1;
        }
    }
    assert!(compared >= 10, "only {compared} special claims compared");
}
