//! Malformed scenarios get errors that name the field and say what was
//! expected; nothing panics.

use topoalign_scenario::{Replay, Scenario, replay};

fn error_of(text: &str) -> String {
    match Scenario::parse(text).and_then(|s| replay(&s)) {
        Err(e) => e.to_string(),
        Ok(Replay::Refused(e)) => format!("refused: {e}"),
        Ok(Replay::Completed(_)) => "completed".into(),
    }
}

const NODE: &str = r#"topology:
  numaNodes:
    - {id: 0, memory: 8Gi}
  cpus:
    - {id: 0, core: 0, socket: 0, numa: 0}
    - {id: 1, core: 1, socket: 0, numa: 0}
"#;

#[test]
fn not_a_document() {
    assert!(
        error_of("[1, 2").starts_with("not a valid scenario document: YAML:"),
        "{}",
        error_of("[1, 2")
    );
    assert!(error_of("{\"topology\": ").starts_with("not a valid scenario document: JSON:"));
    assert_eq!(
        error_of("42"),
        "not a valid scenario document: a scenario must be a mapping with `topology` and `events`"
    );
}

#[test]
fn unknown_and_mistyped_fields_name_their_path() {
    let typo = NODE.replace("numaNodes", "numaNode");
    assert!(
        error_of(&typo).contains("unknown field `numaNode`"),
        "{}",
        error_of(&typo)
    );
    let bad_cpu = NODE.replace("core: 1,", "core: one,");
    assert!(
        error_of(&bad_cpu).starts_with("topology.cpus[1].core:"),
        "{}",
        error_of(&bad_cpu)
    );
    let extra = format!("{NODE}colour: blue\n");
    assert!(
        error_of(&extra).contains("unknown field `colour`"),
        "{}",
        error_of(&extra)
    );
}

#[test]
fn bad_quantities_and_huge_pages_name_their_path() {
    let memory = NODE.replace("memory: 8Gi", "memory: 8 Gi");
    assert!(
        error_of(&memory).starts_with("topology.numaNodes[0].memory:"),
        "{}",
        error_of(&memory)
    );
    let pool = NODE.replace("memory: 8Gi}", "memory: 8Gi, hugepages-1Gi: 3Mi}");
    assert_eq!(
        error_of(&pool),
        "topology.numaNodes[0].hugepages-1Gi: 3Mi is not a whole number of 1Gi pages"
    );
    let key = NODE.replace("memory: 8Gi}", "memory: 8Gi, hugepage-1Gi: 1Gi}");
    assert!(
        error_of(&key).starts_with("topology.numaNodes[0].hugepage-1Gi: unknown field"),
        "{}",
        error_of(&key)
    );
}

#[test]
fn broken_machines_are_refused() {
    let orphan = NODE.replace(
        "numa: 0}\n    - {id: 1",
        "numa: 0}\n    - {id: 1, core: 1, socket: 0, numa: 3}\n    - {id: 2",
    );
    assert_eq!(
        error_of(&orphan),
        "topology: CPU 1 is on NUMA node 3, which does not exist"
    );
    let twice = NODE.replace("{id: 1,", "{id: 0,");
    assert_eq!(error_of(&twice), "topology: CPU id 0 appears twice");
}

#[test]
fn events_must_be_add_or_delete() {
    let both = format!("{NODE}events:\n  - {{delete: default/a, add: {{metadata: {{name: a}}}}}}\n");
    assert_eq!(
        error_of(&both),
        "events[0]: an event has exactly one of `add` (a Pod) or `delete` (namespace/name)"
    );
    let neither = format!("{NODE}events:\n  - {{}}\n");
    assert_eq!(
        error_of(&neither),
        "events[0]: an event has exactly one of `add` (a Pod) or `delete` (namespace/name)"
    );
}

#[test]
fn deleting_an_unknown_pod_is_reported_not_fatal() {
    let text = format!("{NODE}events:\n  - {{delete: default/ghost}}\n");
    let Ok(Replay::Completed(doc)) = Scenario::parse(&text).and_then(|s| replay(&s)) else {
        panic!("should replay")
    };
    assert_eq!(doc.results[0].deleted, Some(false));
    assert_eq!(doc.results[0].message.as_deref(), Some("pod not found"));
}
