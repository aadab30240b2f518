//! Every conformance vector in testdata/conformance/<release> (and the
//! large-machine sample in testdata/conformance-large, v1.32's) replayed
//! through the engine as that kubelet release and compared with the real
//! kubelet's answer. The release comes from the directory: the vectors'
//! scenarios need not say it (those of 1.32 do not).
//!
//! `TOPOALIGN_VECTORS=0001,1112` limits a run to some vectors;
//! `TOPOALIGN_SHOW=N` prints the first N mismatches in full.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use topoalign_model::KubeletVersion;
use topoalign_scenario::{MergeStrategy, Replay, Scenario, replay_with};

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// What we answer for one scenario file, as `version`, as a JSON document.
fn answer(text: &str, strategy: MergeStrategy, version: KubeletVersion) -> Value {
    let mut scenario = match Scenario::parse(text) {
        Ok(scenario) => scenario,
        Err(invalid) => return json!({ "error": format!("invalid scenario: {invalid}") }),
    };
    if let Err(error) = topoalign_k8s::apply_kubelet_version(&mut scenario.kubelet, version) {
        return json!({ "error": format!("invalid scenario: kubelet.{error}") });
    }
    match replay_with(&scenario, strategy) {
        Ok(Replay::Completed(doc)) => serde_json::to_value(doc).expect("result documents serialise"),
        Ok(Replay::Refused(error)) => json!({ "error": error }),
        Err(invalid) => json!({ "error": format!("invalid scenario: {invalid}") }),
    }
}

/// Whether `ours` matches `expected`, accepting the alternative texts the
/// kubelet itself produced for some vectors (Go map order).
fn matches(ours: &Value, expected: &Value, alternatives: Option<&Value>) -> bool {
    if ours == expected {
        return true;
    }
    let Some(alternatives) = alternatives.and_then(Value::as_object) else {
        return false;
    };
    let mut patched = expected.clone();
    for (place, texts) in alternatives {
        let candidates: Vec<&Value> = texts.as_array().map(|a| a.iter().collect()).unwrap_or_default();
        let pointer = text_pointer(place);
        let slot = pointer.as_deref().and_then(|p| patched.pointer_mut(p));
        let ours_text = pointer.as_deref().and_then(|p| ours.pointer(p));
        if let (Some(slot), Some(ours_text)) = (slot, ours_text)
            && candidates.contains(&ours_text)
        {
            *slot = ours_text.clone();
        }
    }
    ours == &patched
}

/// The JSON pointer of a text named in `alternativeTexts`: `"error"` or
/// `"event N message"`.
fn text_pointer(place: &str) -> Option<String> {
    if place == "error" {
        return Some("/error".into());
    }
    let event: usize = place.strip_prefix("event ")?.strip_suffix(" message")?.parse().ok()?;
    Some(format!("/results/{event}/message"))
}

/// A short description of the first difference.
fn first_difference(ours: &Value, expected: &Value) -> String {
    if let (Some(a), Some(b)) = (
        ours.get("results").and_then(Value::as_array),
        expected.get("results").and_then(Value::as_array),
    ) {
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            if x != y {
                return format!("event {i}:\n      ours:     {x}\n      expected: {y}");
            }
        }
        if a.len() != b.len() {
            return format!("{} results, expected {}", a.len(), b.len());
        }
        return format!(
            "final:\n      ours:     {}\n      expected: {}",
            ours["final"], expected["final"]
        );
    }
    format!("\n      ours:     {ours}\n      expected: {expected}")
}

fn run_set(set: &str, strategy: MergeStrategy, version: KubeletVersion) -> (usize, Vec<(String, String)>) {
    let dir = testdata().join(set);
    // index.json lists the kubelet's alternative texts; a set without any
    // may leave it out.
    let index: BTreeMap<String, Value> = match std::fs::read_to_string(dir.join("index.json")) {
        Ok(text) => serde_json::from_str(&text).expect("index.json"),
        Err(_) => BTreeMap::new(),
    };
    let only: Option<Vec<String>> = std::env::var("TOPOALIGN_VECTORS")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let mut names: Vec<String> = std::fs::read_dir(dir.join("scenarios"))
        .expect("scenarios dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .map(|n| n.trim_end_matches(".json").to_string())
        .filter(|n| only.as_ref().is_none_or(|o| o.contains(n)))
        .collect();
    names.sort();
    let mut failures = Vec::new();
    for name in &names {
        let text = std::fs::read_to_string(dir.join("scenarios").join(format!("{name}.json"))).expect("scenario");
        let expected: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("expected").join(format!("{name}.json"))).expect("expected"),
        )
        .expect("expected json");
        let ours = std::panic::catch_unwind(|| answer(&text, strategy, version)).unwrap_or_else(|panic| {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()));
            json!({ "panic": what })
        });
        let alternatives = index.get(name).and_then(|i| i.get("alternativeTexts"));
        if !matches(&ours, &expected, alternatives) {
            failures.push((name.clone(), first_difference(&ours, &expected)));
        }
    }
    (names.len(), failures)
}

fn check(set: &str, strategy: MergeStrategy, version: KubeletVersion) {
    let (total, failures) = run_set(set, strategy, version);
    let show: usize = std::env::var("TOPOALIGN_SHOW")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(15);
    for (name, diff) in failures.iter().take(show) {
        eprintln!("MISMATCH {set}/{name}: {diff}");
    }
    eprintln!("{set}: {} of {total} vectors match", total - failures.len());
    let names: Vec<&str> = failures.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        failures.is_empty(),
        "{} mismatching vectors in {set}: {names:?}",
        failures.len()
    );
}

/// Every release directory under testdata/conformance, with its release.
fn release_sets() -> Vec<(String, KubeletVersion)> {
    let mut sets: Vec<(String, KubeletVersion)> = std::fs::read_dir(testdata().join("conformance"))
        .expect("testdata/conformance")
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .map(|name| {
            let version = KubeletVersion::parse(&name)
                .unwrap_or_else(|e| panic!("testdata/conformance/{name} names no supported release: {e}"));
            (format!("conformance/{name}"), version)
        })
        .collect();
    sets.sort();
    sets
}

#[test]
fn public_conformance_vectors() {
    check("conformance/1.32", MergeStrategy::Fast, KubeletVersion::V1_32);
}

/// The vectors of every later release, each replayed as its release.
#[test]
fn conformance_vectors_of_every_release() {
    let sets = release_sets();
    assert!(sets.len() > 1, "only {sets:?}: the later releases' vectors are missing");
    for (set, version) in sets.into_iter().filter(|(_, v)| *v != KubeletVersion::V1_32) {
        check(&set, MergeStrategy::Fast, version);
    }
}

#[test]
fn large_machine_vectors() {
    check("conformance-large", MergeStrategy::Fast, KubeletVersion::V1_32);
}

/// The candidate search that large machines use, held to every vector.
#[test]
fn public_conformance_vectors_through_the_search_merge() {
    for (set, version) in release_sets() {
        check(&set, MergeStrategy::CandidateSearch, version);
    }
}

/// The judge's leniency is itself tested: an alternative text the kubelet
/// also produced is accepted, any other text is not.
#[test]
fn alternative_texts_are_accepted_and_nothing_else() {
    let expected = json!({"results": [{"event": 0, "message": "first"}], "final": {}});
    let alternatives = json!({"event 0 message": ["first", "second"]});
    let ours = |text: &str| json!({"results": [{"event": 0, "message": text}], "final": {}});
    assert!(matches(&ours("second"), &expected, Some(&alternatives)));
    assert!(!matches(&ours("third"), &expected, Some(&alternatives)));
    assert!(!matches(&ours("second"), &expected, None));
    let refused = json!({"error": "a"});
    assert!(matches(
        &json!({"error": "b"}),
        &refused,
        Some(&json!({"error": ["a", "b"]}))
    ));
}
