//! Every rejection reason the engine produces, taken from the real
//! kubelet's conformance vectors (`testdata/conformance*`), comes with at
//! least one fix, and every fix admits the pod when it is replayed.
//!
//! The default test takes the first few rejections of each reason in each
//! vector set (every reason the vectors hold is covered), chosen from the
//! kubelet's expected results so that only the scenarios holding them are
//! replayed, and every rejection of the scenarios in [`HARD`] and of the
//! machines with NUMA ids past 63 (read as `explain` reads them, with their
//! ids kept as labels: `Machine::with_numa_labels`); the ignored
//! one takes them all
//! (`cargo test -p topoalign-explain --test every_rejection -- --ignored`,
//! about five minutes).

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use topoalign_explain::{Situation, explain, fixes};
use topoalign_scenario::Scenario;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// The vector sets: each release's and the large machines'.
fn vector_sets() -> Vec<PathBuf> {
    let mut sets: Vec<PathBuf> = std::fs::read_dir(testdata().join("conformance"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.join("scenarios").is_dir())
        .collect();
    sets.push(testdata().join("conformance-large"));
    sets.sort();
    sets
}

/// Scenarios whose rejections once went without a fix, each of its own
/// kind: every rejection in them is checked by the default test.
const HARD: &[&str] = &[
    // Two 2-CPU containers on a node with one allocatable CPU: only a
    // larger node admits.
    "1.32/scenarios/1314.json",
    // Every CPU reserved (`reservedSystemCPUs: 0-3` of 4).
    "1.32/scenarios/1557.json",
    // SMTAlignmentError for 1 and 3 CPUs with the node's cores taken.
    "1.32/scenarios/1506.json",
    // OutOfcpu on a node whose allocatable CPU is 1.
    "1.32/scenarios/1092.json",
    // A pod too large in CPUs and memory at once (UnexpectedAdmissionError).
    "1.32/scenarios/1020.json",
    // Pod-level resources (`spec.resources`) beyond the node.
    "1.34/scenarios/gen-5128.json",
    // Memory manager cannot extend the hint; OutOfmemory from several
    // containers.
    "1.34/scenarios/gen-5008.json",
];

/// One rejection without a checked fix: where, and why not.
#[derive(Debug)]
struct Unanswered {
    scenario: String,
    event: usize,
    reason: String,
    problem: String,
}

/// The rejections of `set` to explain, chosen from the real kubelet's
/// expected results (`expected/<name>.json`) before anything is replayed:
/// scenario files in order, events in order, at most `per_reason` of each
/// reason when given (every rejection of the scenarios in [`HARD`]), with
/// how many rejections of each reason the set holds. Each chosen
/// scenario is then replayed only up to its last chosen event, so the
/// sample costs what it explains, not what the set holds.
fn chosen(
    set: &Path,
    per_reason: Option<usize>,
) -> (BTreeMap<PathBuf, BTreeMap<usize, String>>, BTreeMap<String, usize>) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(set.join("scenarios"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    let mut chosen: BTreeMap<PathBuf, BTreeMap<usize, String>> = BTreeMap::new();
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    let mut held: BTreeMap<String, usize> = BTreeMap::new();
    for file in files {
        let expected = set.join("expected").join(file.file_name().unwrap());
        let expected: Value = serde_json::from_str(&std::fs::read_to_string(&expected).unwrap()).unwrap();
        // A configuration the kubelet refuses (`error`): no pod is judged.
        let Some(results) = expected.get("results").and_then(Value::as_array) else {
            continue;
        };
        // Resizes are not admissions: their refusals (`Infeasible`,
        // `Deferred`) get no fixes, and the replay below only adds and
        // deletes. Scenarios holding resize events are left out.
        if results.iter().any(|result| result.get("resized").is_some()) {
            continue;
        }
        // Machines with NUMA ids past 63 (`hand-numa-id-64-*`, read with
        // their ids kept as labels) are few and of their own kind: every
        // rejection in them is checked.
        let scenario = Scenario::parse(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let past_masks = scenario.topology.numa_nodes.iter().any(|n| n.id >= 64);
        let hard = past_masks || HARD.iter().any(|h| file.ends_with(h));
        for result in results {
            // A restart re-admits the running pods (replay's work): the
            // sweep below replays adds and deletes only, so the
            // rejections after one are left out (`hand-numa-nodes-72-*`).
            if result.get("restarted").is_some() {
                break;
            }
            let Some(reason) = result.get("reason").and_then(Value::as_str) else {
                continue; // admitted, or a deletion
            };
            *held.entry(reason.to_owned()).or_default() += 1;
            let count = taken.entry(reason.to_owned()).or_default();
            if !hard && per_reason.is_some_and(|most| *count >= most) {
                continue;
            }
            *count += 1;
            let event = usize::try_from(result["event"].as_u64().unwrap()).unwrap();
            chosen.entry(file.clone()).or_default().insert(event, reason.to_owned());
        }
    }
    (chosen, held)
}

/// Explains the chosen rejections of `set` (see [`chosen`]) and returns
/// how many of each reason were explained, those left without a fix that
/// admits, and how many were on machines numbered anew (NUMA ids past 63).
fn sweep(set: &Path, per_reason: Option<usize>) -> (BTreeMap<String, usize>, Vec<Unanswered>, usize) {
    let (chosen, held) = chosen(set, per_reason);
    let mut labelled = 0;
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut unanswered = Vec::new();
    for (file, events) in chosen {
        let scenario = Scenario::parse(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let machine = scenario.topology.to_machine_with_numa_labels().unwrap();
        let mut node = topoalign_k8s::start_node(machine, &scenario.kubelet).unwrap();
        let last = *events.keys().next_back().unwrap();
        let mut added: Vec<(String, String)> = Vec::new();
        for (index, event) in scenario.events.iter().enumerate().take(last + 1) {
            if let Some(key) = &event.delete {
                if let Some(position) = added.iter().rposition(|(k, _)| k == key) {
                    let (_, uid) = added.remove(position);
                    node.remove(&uid);
                }
                continue;
            }
            let manifest = event.add.clone().unwrap();
            let pod = topoalign_k8s::pod_from_value(&manifest, &format!("topoalign-event-{index}")).unwrap();
            let before = node.clone();
            let decision = node.admit(pod.clone());
            if decision.admitted() {
                added.push((pod.key(), pod.uid.clone()));
            }
            let Some(expected_reason) = events.get(&index) else {
                continue;
            };
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let reason = decision.rejection.as_ref().map(|r| r.reason.clone());
            assert_eq!(
                reason.as_deref(),
                Some(expected_reason.as_str()),
                "{name} event {index}: the engine disagrees with the kubelet (scripts/difftest says where)"
            );
            let reason = expected_reason.clone();
            *seen.entry(reason.clone()).or_default() += 1;
            labelled += usize::from(before.machine().numa_labels().is_some());
            let situation = Situation {
                node: &before,
                kubelet: &scenario.kubelet,
                manifest: &manifest,
                pod: &pod,
            };
            let explanation = explain(&situation, &decision);
            let mut problem = String::new();
            if explanation.fixes.is_empty() {
                problem = format!("no fix ({})", explanation.summary);
            }
            for fix in &explanation.fixes {
                match fixes::apply(&situation, &fix.change) {
                    Ok(replayed) if replayed.admitted() => {}
                    other => problem = format!("fix does not admit: {}: {other:?}", fix.description),
                }
            }
            if !problem.is_empty() {
                unanswered.push(Unanswered {
                    scenario: name,
                    event: index,
                    reason,
                    problem,
                });
            }
        }
    }
    // Every reason the set holds is explained at least once.
    assert_eq!(
        seen.keys().collect::<Vec<_>>(),
        held.keys().collect::<Vec<_>>(),
        "{}: reasons explained vs reasons the vectors hold",
        set.display()
    );
    (seen, unanswered, labelled)
}

fn check(per_reason: Option<usize>) {
    let mut all_unanswered = Vec::new();
    let mut all_labelled = 0;
    for set in vector_sets() {
        let (seen, unanswered, labelled) = sweep(&set, per_reason);
        eprintln!(
            "{}: {seen:?}, {} without a fix, {labelled} on machines with NUMA ids past 63",
            set.display(),
            unanswered.len()
        );
        all_unanswered.extend(unanswered);
        all_labelled += labelled;
    }
    // The vectors `hand-numa-id-64-*` hold rejections: they are explained.
    assert!(
        all_labelled > 0,
        "no rejection on a machine with NUMA ids past 63 was explained"
    );
    assert!(
        all_unanswered.is_empty(),
        "{} rejections without a checked fix:\n{}",
        all_unanswered.len(),
        all_unanswered
            .iter()
            .map(|u| format!("{} event {} {}: {}", u.scenario, u.event, u.reason, u.problem))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn every_rejection_reason_of_the_vectors_gets_a_fix_that_admits() {
    check(Some(8));
}

#[test]
#[ignore = "slow: every rejection of every vector (minutes); the default test samples each reason"]
fn every_rejection_of_the_vectors_gets_a_fix_that_admits() {
    check(None);
}
