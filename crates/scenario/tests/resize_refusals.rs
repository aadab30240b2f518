//! In-place resizes on kubelet 1.32/1.33 whose answer depends on the
//! container status (`allocatedResources`), which a scenario does not
//! carry: topoalign answers them with an error naming the event
//! (`ResizeError::NotReproduced`), never an answer, and the oracle refuses
//! the same ones (a harness failure, "not modelled"). Both replay the one
//! table, testdata/resize-refusals.json (the oracle: `TestResizeRefusals`
//! in oracle/oracle_test.go, the 1.32 and 1.33 builds, oracle/test.sh), so
//! the two refusal rules are checked against each other through it.
//!
//! The cases: under the `Static` memory policy and the pod scope of an
//! aligning topology policy on more than one NUMA node, a Guaranteed pod's
//! resize that reaches the admit handlers has the memory manager allocate
//! the memory of an init container that ran to completion again, on the
//! NUMA nodes of the pod's merged hint, which the CPU and memory managers
//! work out from the app containers' status (1.32 whatever the resize
//! changes, 1.33 when a counted size changes); with
//! `InPlacePodVerticalScalingExclusiveCPUs` on, a changed CPU request under
//! `restricted`/`single-numa-node`, or the `full-pcpus-only` option. The
//! neighbours whose answer does not depend on the status are answered (the
//! container scope, the `none` policy, one NUMA node, 1.33 with nothing
//! counted changed); the conformance vectors the table starts from are the
//! oracle's answers for some of them.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::path::{Path, PathBuf};

use serde_json::Value;
use topoalign_scenario::{Replay, Scenario, replay};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// `value` with the JSON pointer `pointer` set to `new` (its parent must
/// exist).
fn set(value: &mut Value, pointer: &str, new: Value) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    match value
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("{pointer}: no {parent}"))
    {
        Value::Object(object) => {
            object.insert(key.to_owned(), new);
        }
        Value::Array(array) => array[key.parse::<usize>().unwrap()] = new,
        other => panic!("{pointer}: {parent} is {other}"),
    }
}

#[test]
fn the_table_of_status_dependent_resizes() {
    let table: Value =
        serde_json::from_str(&std::fs::read_to_string(testdata().join("resize-refusals.json")).unwrap()).unwrap();
    let cases = table["cases"].as_array().unwrap();
    assert!(cases.len() >= 20, "{} cases", cases.len());
    let (mut refused, mut answered) = (0, 0);
    for case in cases {
        let release = case["release"].as_str().unwrap();
        let what = format!("{release} {}", case["name"].as_str().unwrap());
        let base = testdata().join("conformance").join(case["base"].as_str().unwrap());
        let mut scenario: Value = serde_json::from_str(&std::fs::read_to_string(base).unwrap()).unwrap();
        assert_eq!(scenario["kubelet"]["kubeletVersion"], release, "{what}");
        for (pointer, new) in case["set"].as_object().unwrap() {
            set(&mut scenario, pointer, new.clone());
        }
        let outcome = replay(&Scenario::parse(&scenario.to_string()).unwrap()).map_err(|e| e.to_string());
        if case["refused"].as_bool().unwrap() {
            refused += 1;
            let error = outcome.map(|_| ()).unwrap_err();
            assert!(error.contains(".resize"), "{what}: {error}");
            assert!(error.contains("not reproduced"), "{what}: {error}");
            assert!(error.contains(&format!("kubelet {release}")), "{what}: {error}");
            assert!(error.contains("allocatedResources"), "{what}: {error}");
            if error.contains("Static memory policy") {
                assert!(error.contains("init container \"init0\""), "{what}: {error}");
            }
        } else {
            answered += 1;
            assert!(matches!(outcome, Ok(Replay::Completed(_))), "{what}: {outcome:?}");
        }
    }
    assert!(refused >= 8 && answered >= 8, "{refused} refused, {answered} answered");
}
