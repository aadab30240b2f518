//! Every rejection reason the engine produces, taken from the real
//! kubelet's conformance vectors (`testdata/conformance*`), comes with at
//! least one fix, and every fix admits the pod when it is replayed.
//!
//! The default test takes the first few rejections of each reason in each
//! vector set (every reason the vectors hold is covered) and every
//! rejection of the scenarios in [`HARD`]; the ignored one takes them all
//! (`cargo test -p topoalign-explain --test every_rejection -- --ignored`,
//! about five minutes).

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

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

/// Explains the rejections of every scenario of `set` — at most
/// `per_reason` of each reason when given — and returns how many of each
/// reason were explained and those left without a fix that admits.
fn sweep(set: &Path, per_reason: Option<usize>) -> (BTreeMap<String, usize>, Vec<Unanswered>) {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut unanswered = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(set.join("scenarios"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    for file in files {
        let scenario = Scenario::parse(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let machine = scenario.topology.to_machine().unwrap();
        let Ok(mut node) = topoalign_k8s::start_node(machine, &scenario.kubelet) else {
            continue; // a configuration the kubelet refuses: no pod is judged
        };
        let mut added: Vec<(String, String)> = Vec::new();
        for (index, event) in scenario.events.iter().enumerate() {
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
                continue;
            }
            let reason = decision.rejection.as_ref().unwrap().reason.clone();
            let count = seen.entry(reason.clone()).or_default();
            let hard = HARD.iter().any(|h| file.ends_with(h));
            if !hard && per_reason.is_some_and(|most| *count >= most) {
                continue;
            }
            *count += 1;
            let situation = Situation {
                node: &before,
                kubelet: &scenario.kubelet,
                manifest: &manifest,
                pod: &pod,
            };
            let explanation = explain(&situation, &decision);
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
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
    (seen, unanswered)
}

fn check(per_reason: Option<usize>) {
    let mut all_unanswered = Vec::new();
    for set in vector_sets() {
        let (seen, unanswered) = sweep(&set, per_reason);
        eprintln!("{}: {seen:?}, {} without a fix", set.display(), unanswered.len());
        all_unanswered.extend(unanswered);
    }
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
