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
fn events_must_be_add_delete_resize_or_restart() {
    let both = format!("{NODE}events:\n  - {{delete: default/a, add: {{metadata: {{name: a}}}}}}\n");
    assert_eq!(
        error_of(&both),
        "events[0]: an event has exactly one of `add` (a Pod), `delete` (namespace/name), `resize` or `restart`"
    );
    let neither = format!("{NODE}events:\n  - {{}}\n");
    assert_eq!(
        error_of(&neither),
        "events[0]: an event has exactly one of `add` (a Pod), `delete` (namespace/name), `resize` or `restart`"
    );
}

/// A restart keeps the release, and is not modelled after a resize (the
/// allocation manager's checkpoint is not reproduced).
#[test]
fn a_restart_keeps_the_release_and_follows_no_resize() {
    let text = format!("{NODE}events:\n  - {{restart: {{kubelet: {{kubeletVersion: '1.33'}}}}}}\n");
    assert_eq!(
        error_of(&text),
        "events[0].restart.kubelet.kubeletVersion: a restart keeps the kubelet's release"
    );
    let text = format!(
        "{NODE}events:\n  - add: {{metadata: {{name: a}}, spec: {{containers: [{{name: c, resources: {{requests: \
         {{cpu: 1}}}}}}]}}}}\n  - resize: {{pod: a, containers: [{{name: c, resources: {{requests: {{cpu: 2}}}}}}]}}\n  \
         - restart: {{}}\n"
    );
    assert_eq!(
        error_of(&text),
        "events[2].restart: a restart after a resize (events[1]) is not modelled: the allocation manager's \
         checkpoint is not reproduced"
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

/// A scenario adding `web` (a Burstable app container and a sidecar, a
/// Guaranteed-shaped container, a regular init container) then resizing it
/// with `resize` (YAML flow mapping).
fn resizing(resize: &str) -> String {
    format!(
        "{NODE}events:\n  - add: {{metadata: {{name: web}}, spec: {{initContainers: [{{name: setup}}, \
         {{name: proxy, restartPolicy: Always, resources: {{requests: {{cpu: 100m}}}}}}], containers: \
         [{{name: app, resources: {{requests: {{cpu: 500m, memory: 1Gi}}, limits: {{memory: 2Gi}}}}}}]}}}}\n  \
         - resize: {resize}\n"
    )
}

#[test]
fn resize_events_are_checked_as_the_api_server_checks_a_resize() {
    let cases = [
        (
            "{pod: default/nobody, containers: [{name: app}]}",
            "events[1].resize.pod: pod default/nobody is not on the node (no add before this event, or deleted)",
        ),
        (
            "{pod: web, containers: []}",
            "events[1].resize.containers: a resize names at least one container",
        ),
        (
            "{pod: web, containers: [{name: setup, resources: {requests: {cpu: 1}}}]}",
            "events[1].resize.containers[0].name: default/web has no container or sidecar (restartPolicy: Always \
             init container) named \"setup\"; init containers that run to completion are not resized",
        ),
        (
            "{pod: web, containers: [{name: app, resources: {requests: {nvidia.com/gpu: 1}}}]}",
            "events[1].resize.containers[0].resources.requests.nvidia.com/gpu: only cpu and memory are resized in place",
        ),
        (
            "{pod: web, containers: [{name: app, resources: {requests: {memory: 3Gi}}}]}",
            "events[1].resize.containers[0].resources.requests.memory: must be less than or equal to the memory limit",
        ),
        (
            "{pod: web, containers: [{name: app, resources: {requests: {cpu: lots}}}]}",
            "events[1].resize.containers[0].resources.requests.cpu: \"lots\": ",
        ),
        (
            "{pod: web, containers: [{name: app}, {name: app}]}",
            "events[1].resize.containers[1].name: container \"app\" is named twice",
        ),
    ];
    for (resize, expected) in cases {
        let error = error_of(&resizing(resize));
        assert!(error.starts_with(expected), "{resize}: {error}");
    }
}

#[test]
fn a_resize_may_not_change_the_qos_class() {
    let text = format!(
        "{NODE}events:\n  - add: {{metadata: {{name: g}}, spec: {{containers: [{{name: app, resources: \
         {{limits: {{cpu: 1, memory: 1Gi}}}}}}]}}}}\n  - resize: {{pod: g, containers: [{{name: app, \
         resources: {{limits: {{cpu: 2}}}}}}]}}\n"
    );
    assert_eq!(
        error_of(&text),
        "events[1].resize.containers: the pod's QoS class would change from Guaranteed to Burstable; the API \
         server refuses that (Pod QoS is immutable)"
    );
}

#[test]
fn resizing_a_refused_pod_is_reported_not_fatal() {
    let text = format!(
        "{NODE}events:\n  - add: {{metadata: {{name: big}}, spec: {{containers: [{{name: app, resources: \
         {{requests: {{cpu: 64}}}}}}]}}}}\n  - resize: {{pod: big, containers: [{{name: app, resources: \
         {{requests: {{cpu: 1}}}}}}]}}\n"
    );
    let Ok(Replay::Completed(doc)) = Scenario::parse(&text).and_then(|s| replay(&s)) else {
        panic!("should replay")
    };
    assert_eq!(doc.results[0].admitted, Some(false));
    assert_eq!(doc.results[1].resized, Some(false));
    assert_eq!(doc.results[1].message.as_deref(), Some("pod not admitted"));
}

#[test]
fn a_1_34_resize_reaching_the_managers_exclusive_resize_is_an_error_not_an_answer() {
    // 1.34's managers size a held allocation by the container status, which
    // a scenario does not model (from 1.35 it is an answer: the
    // `resize-exclusive-*` vectors).
    let node = |gates: &str| {
        format!(
            "{NODE}kubelet: {{kubeletVersion: \"1.34\", cpuManagerPolicy: static, reservedSystemCPUs: \"0\", \
             featureGates: {{{gates}}}}}\nevents:\n  - add: {{metadata: {{name: g}}, spec: {{containers: [{{name: \
             app, resources: {{limits: {{cpu: 1, memory: 1Gi}}}}}}]}}}}\n  - resize: {{pod: g, containers: \
             [{{name: app, resources: {{requests: {{cpu: 2}}, limits: {{cpu: 2}}}}}}]}}\n"
        )
    };
    assert!(
        error_of(&node("InPlacePodVerticalScalingExclusiveCPUs: true")).starts_with(
            "events[1].resize: a resize of a Guaranteed pod's CPUs with InPlacePodVerticalScalingExclusiveCPUs on"
        ),
        "{}",
        error_of(&node("InPlacePodVerticalScalingExclusiveCPUs: true"))
    );
    // Without the gate the kubelet refuses it, in its own words.
    let Ok(Replay::Completed(doc)) = Scenario::parse(&node("")).and_then(|s| replay(&s)) else {
        panic!("should replay")
    };
    assert_eq!(doc.results[1].resized, Some(false));
    assert_eq!(doc.results[1].reason.as_deref(), Some("Infeasible"));
    assert_eq!(
        doc.results[1].message.as_deref(),
        Some("Resize is infeasible for Guaranteed Pods alongside CPU Manager policy \"static\"")
    );
}
