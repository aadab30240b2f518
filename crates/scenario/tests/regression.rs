//! One test per bug found with hostile or mistaken scenarios, named after
//! what it reproduces (issue 13: "Resource bounds", "Validation").

use topoalign_scenario::{Replay, ResultDocument, Scenario, replay};

fn outcome(text: &str) -> Result<Replay, String> {
    Scenario::parse(text)
        .and_then(|s| replay(&s))
        .map_err(|e| e.to_string())
}

fn error_of(text: &str) -> String {
    match outcome(text) {
        Err(e) => e,
        Ok(other) => panic!("expected an error, got {other:?}"),
    }
}

fn completed(text: &str) -> ResultDocument {
    match outcome(text) {
        Ok(Replay::Completed(document)) => document,
        other => panic!("expected a replay, got {other:?}"),
    }
}

const TWO_NODES: &str = r#"topology:
  numaNodes:
    - {id: 0, memory: 8Gi}
    - {id: 1, memory: 8Gi}
  cpus:
    - {id: 0, core: 0, socket: 0, numa: 0}
    - {id: 1, core: 1, socket: 0, numa: 0}
    - {id: 2, core: 2, socket: 1, numa: 1}
    - {id: 3, core: 3, socket: 1, numa: 1}
kubelet: {cpuManagerPolicy: static, reservedSystemCPUs: "0"}
"#;

const GUARANTEED: &str =
    "{metadata: {name: web}, spec: {containers: [{name: app, resources: {limits: {cpu: '1', memory: 1Gi}}}]}}";

/// The same namespace/name added twice used to lose the first pod's CPUs
/// from the final state (both answered to one name).
#[test]
fn same_pod_name_added_twice_is_refused_naming_both_events() {
    let text = format!("{TWO_NODES}events:\n  - add: {GUARANTEED}\n  - add: {GUARANTEED}\n");
    assert_eq!(
        error_of(&text),
        "events[1].add.metadata.name: pod default/web is already on the node (added by events[0]); delete it \
         first: the API server holds one pod per namespace/name"
    );
    // After a delete, the name is free again.
    let text = format!("{TWO_NODES}events:\n  - add: {GUARANTEED}\n  - delete: web\n  - add: {GUARANTEED}\n");
    let document = completed(&text);
    assert_eq!(document.final_state.cpu_assignments.len(), 1);
}

/// A CPU id near `u32::MAX` sized a bit set of 512 MiB per CPU set.
#[test]
fn cpu_id_near_u32_max_is_refused_naming_the_field() {
    let text = TWO_NODES.replace("{id: 3, core: 3", "{id: 4294967295, core: 3");
    assert_eq!(
        error_of(&text),
        "topology.cpus[3].id: CPU id 4294967295 is larger than 16383, the largest a Linux machine can have"
    );
}

/// Huge page pools larger than the node's memory left a negative rest that
/// the kubelet's uint64 arithmetic turns into exabytes.
#[test]
fn hugepages_larger_than_the_node_memory_are_refused() {
    let text = TWO_NODES.replace("{id: 1, memory: 8Gi}", "{id: 1, memory: 8Gi, hugepages-1Gi: 16Gi}");
    assert_eq!(
        error_of(&text),
        "topology.numaNodes[1].hugepages-1Gi: the huge page pools (16Gi) are larger than the node's memory (8Gi), \
         which includes them"
    );
}

/// A NUMA node with `memory: 0` and memory reserved on it: the kubelet
/// starts (its `uint64` arithmetic wraps around to about 16 EiB free), so
/// the replay completes as the kubelet's would — never stricter — and the
/// hazard travels beside the answer as a warning. (Refusing to start here
/// was a conformance bug; the decisions themselves are the oracle's,
/// vector `hand-reserved-memory-overrun` of every release.)
#[test]
fn memory_reserved_on_a_node_without_memory_starts_with_a_warning() {
    let text = TWO_NODES.replace("{id: 1, memory: 8Gi}", "{id: 1, memory: 0}").replace(
        "kubelet: {cpuManagerPolicy: static, reservedSystemCPUs: \"0\"}",
        "kubelet:\n  memoryManagerPolicy: Static\n  systemReserved: {memory: 924Mi}\n  \
         reservedMemory: [{numaNode: 1, limits: {memory: 1Gi}}]",
    );
    let document = completed(&text);
    assert_eq!(document.warnings.len(), 1, "{:?}", document.warnings);
    assert!(
        document.warnings[0].contains("NUMA node 1 reserves 1073741824 bytes of memory but has only 0"),
        "{:?}",
        document.warnings
    );
    let json = serde_json::to_value(&document).expect("serialises");
    assert!(
        json.get("warnings").is_none(),
        "the document is the kubelet's answer only: {json}"
    );
}

/// A configuration without overruns carries no warning.
#[test]
fn a_reservation_that_fits_carries_no_warning() {
    let text = TWO_NODES.replace(
        "kubelet: {cpuManagerPolicy: static, reservedSystemCPUs: \"0\"}",
        "kubelet:\n  memoryManagerPolicy: Static\n  systemReserved: {memory: 924Mi}\n  \
         reservedMemory: [{numaNode: 1, limits: {memory: 1Gi}}]",
    );
    assert!(completed(&text).warnings.is_empty());
}

/// Distance rows for sparse NUMA ids (0 and 2) written one value per node
/// were refused with a confusing length error.
#[test]
fn sparse_numa_ids_take_distance_rows_per_node_or_per_id() {
    let sparse = |rows: (&str, &str)| {
        format!(
            "topology:\n  numaNodes:\n    - {{id: 0, memory: 8Gi, distances: {}}}\n    - {{id: 2, memory: 8Gi, distances: {}}}\n  \
             cpus:\n    - {{id: 0, core: 0, socket: 0, numa: 0}}\n    - {{id: 1, core: 1, socket: 1, numa: 2}}\n",
            rows.0, rows.1
        )
    };
    let per_node = Scenario::parse(&sparse(("[10, 21]", "[21, 10]"))).expect("parses");
    let per_id = Scenario::parse(&sparse(("[10, 0, 21]", "[21, 0, 10]"))).expect("parses");
    let machine = per_node.topology.to_machine().expect("per node");
    assert_eq!(machine, per_id.topology.to_machine().expect("per id"));
    assert_eq!(
        machine.numa_node(2).and_then(|n| n.distances.clone()),
        Some(vec![21, 0, 10])
    );
    let error = error_of(&sparse(("[10, 21, 30, 40]", "[21, 10]")));
    assert!(
        error.starts_with(
            "topology.numaNodes[0].distances: 4 values; give one per NUMA node in id order (2 values for ids 0, 2)"
        ),
        "{error}"
    );
}

/// A device resource named `cpu` stood beside the kubelet's own cpu.
#[test]
fn device_resource_named_cpu_is_refused() {
    for name in ["cpu", "memory", "hugepages-2Mi", "kubernetes.io/foo", "x/\u{1b}[31m"] {
        let text = TWO_NODES.replace(
            "kubelet:",
            &format!(
                "  devices:\n    {}: [{{id: d0, numa: [0]}}]\nkubelet:",
                serde_json::to_string(name).unwrap()
            ),
        );
        let error = error_of(&text);
        assert!(
            error.starts_with(&format!("topology.devices.{name:?}: not a device-plugin resource name")),
            "{name}: {error}"
        );
    }
}

/// A `delete:` key with terminal escapes reached the result and the
/// terminal as written.
#[test]
fn delete_key_that_is_no_pod_name_is_refused() {
    let text = format!("{TWO_NODES}events:\n  - delete: \"web\\e[2J\"\n");
    let error = error_of(&text);
    assert!(
        error.starts_with("events[0].delete: \"default/web\\u{1b}[2J\" is not a pod's namespace/name"),
        "{error}"
    );
}

/// Deep nesting in a scenario is refused before the YAML parser's
/// quadratic work.
#[test]
fn deeply_nested_scenario_is_refused_before_parsing() {
    let text = format!("{TWO_NODES}events: {}", "[".repeat(200_000));
    assert!(error_of(&text).contains("nested more than 128 levels deep"));
}

/// A pod with thousands of init containers cost more than n² (2,000:
/// seconds; 8,000: ten minutes of one agent request): each manager looked
/// every container up among the init containers by name. Now linear: this
/// replays at once.
#[test]
fn thousands_of_init_containers_are_admitted_in_linear_time() {
    let init: Vec<String> = (0..8_000)
        .map(|i| format!("{{name: init{i}, resources: {{limits: {{cpu: '1', memory: 1Gi, example.com/nic: '1'}}}}}}"))
        .collect();
    let text = format!(
        "topology:\n  numaNodes:\n    - {{id: 0, memory: 8Gi}}\n    - {{id: 1, memory: 8Gi}}\n  cpus:\n\
         \x20   - {{id: 0, core: 0, socket: 0, numa: 0}}\n    - {{id: 1, core: 1, socket: 0, numa: 0}}\n\
         \x20   - {{id: 2, core: 2, socket: 1, numa: 1}}\n    - {{id: 3, core: 3, socket: 1, numa: 1}}\n\
         \x20 devices:\n    example.com/nic: [{{id: nic0, numa: [1]}}]\n\
         kubelet: {{cpuManagerPolicy: static, reservedSystemCPUs: '0', memoryManagerPolicy: Static,\n\
         \x20 reservedMemory: [{{numaNode: 0, limits: {{memory: 1124Mi}}}}], kubeReserved: {{memory: 1Gi}},\n\
         \x20 topologyManagerPolicy: single-numa-node}}\n\
         events:\n  - add: {{metadata: {{name: many}}, spec: {{initContainers: [{}],\n\
         \x20     containers: [{{name: app, resources: {{limits: {{cpu: '1', memory: 1Gi, example.com/nic: '1'}}}}}}]}}}}\n",
        init.join(", ")
    );
    let document = completed(&text);
    let result = &document.results[0];
    assert_eq!(result.admitted, Some(true), "{result:?}");
    let containers = result.containers.as_ref().expect("placements");
    assert_eq!(containers.len(), 8_001);
    // Every init container and the app container reuse the same CPU.
    assert!(
        containers
            .iter()
            .all(|c| c.cpus.as_ref().map(ToString::to_string).as_deref() == Some("2")),
        "{:?}",
        &containers[..2]
    );
}

/// A deferred resize waits in the kubelet's queue from 1.34 (issue 12): a
/// delete that frees room retries it and the delete's result lists it; a
/// 1.33 kubelet has no queue.
#[test]
fn deferred_resize_is_retried_by_a_delete_from_1_34() {
    let scenario = |version: &str| {
        format!(
            "topology:\n  numaNodes: [{{id: 0, memory: 8Gi}}]\n  cpus:\n    - {{id: 0, core: 0, socket: 0, numa: 0}}\n    \
             - {{id: 1, core: 1, socket: 0, numa: 0}}\n    - {{id: 2, core: 2, socket: 0, numa: 0}}\n    \
             - {{id: 3, core: 3, socket: 0, numa: 0}}\nkubelet: {{kubeletVersion: '{version}'}}\nevents:\n  \
             - add: {{metadata: {{name: a}}, spec: {{containers: [{{name: app, resources: {{requests: {{cpu: '1'}}}}}}]}}}}\n  \
             - add: {{metadata: {{name: b}}, spec: {{containers: [{{name: app, resources: {{requests: {{cpu: '2'}}}}}}]}}}}\n  \
             - resize: {{pod: a, containers: [{{name: app, resources: {{requests: {{cpu: '3'}}}}}}]}}\n  \
             - delete: default/b\n"
        )
    };
    for version in ["1.34", "1.35", "1.36", "1.37"] {
        let document = completed(&scenario(version));
        assert_eq!(document.results[2].reason.as_deref(), Some("Deferred"), "{version}");
        assert_eq!(
            document.results[3].accepted_pending,
            vec!["default/a".to_string()],
            "{version}"
        );
    }
    let document = completed(&scenario("1.33"));
    assert_eq!(document.results[2].reason.as_deref(), Some("Deferred"));
    assert!(document.results[3].accepted_pending.is_empty());
}

/// `spec.priority` orders pending resizes; anything but a 32-bit integer
/// is refused naming the field (by the pod's reading, before the replay's
/// own check of it).
#[test]
fn spec_priority_that_is_no_integer_is_refused_naming_the_field() {
    let text = format!(
        "{TWO_NODES}events:\n  - add: {{metadata: {{name: web}}, spec: {{priority: high, containers: [{{name: app}}]}}}}\n"
    );
    assert_eq!(
        error_of(&text),
        "events[0].add.spec.priority: invalid type: string \"high\", expected i32"
    );
}

/// A resize of a Guaranteed pod whose init container ran to completion,
/// under the `Static` memory policy (difftest 1.36 seed 15, issue 12): up
/// to 1.36 the topology manager admits the resized pod again and the
/// memory manager, which dropped the init container's blocks when the app
/// container started, allocates them afresh — refused when the app
/// container took the room (`Deferred`), kept by the pod when it fits. The
/// engine used to re-check only held CPUs and applied the first. 1.37's
/// managers skip a resize.
#[test]
fn resize_allocates_a_completed_init_containers_memory_again_up_to_1_36() {
    let pod = |name: &str, init: &str, app: &str| {
        format!(
            "  - add: {{metadata: {{name: {name}}}, spec: {{initContainers: [{{name: init0, resources: {{limits: {init}}}}}], \
             containers: [{{name: app0, resources: {{limits: {app}}}}}]}}}}\n"
        )
    };
    let resize = |name: &str, cpu: &str| {
        format!(
            "  - resize: {{pod: {name}, containers: [{{name: app0, resources: {{requests: {{cpu: '{cpu}'}}, limits: {{cpu: '{cpu}'}}}}}}]}}\n"
        )
    };
    let scenario = |version: &str| {
        format!(
            "topology:\n  numaNodes: [{{id: 0, memory: 8Gi}}, {{id: 1, memory: 8Gi}}]\n  cpus:\n    \
             - {{id: 0, core: 0, socket: 0, numa: 0}}\n    - {{id: 1, core: 1, socket: 0, numa: 0}}\n    \
             - {{id: 2, core: 2, socket: 0, numa: 0}}\n    - {{id: 3, core: 3, socket: 0, numa: 0}}\n    \
             - {{id: 4, core: 4, socket: 0, numa: 0}}\n    - {{id: 5, core: 5, socket: 0, numa: 1}}\n\
             kubelet:\n  kubeletVersion: '{version}'\n  memoryManagerPolicy: Static\n  evictionHard: {{memory.available: 200Mi}}\n  \
             systemReserved: {{memory: 256Mi}}\n  kubeReserved: {{memory: 512Mi}}\n  reservedMemory:\n    \
             - {{numaNode: 0, limits: {{memory: 484Mi}}}}\n    - {{numaNode: 1, limits: {{memory: 484Mi}}}}\n\
             events:\n{}{}  - delete: default/p1\n{}{}",
            pod("p1", "{cpu: '5', memory: 8448Mi}", "{cpu: '6', memory: 8704Mi}"),
            resize("p1", "4"),
            pod("p2", "{cpu: '1', memory: 1Gi}", "{cpu: '1', memory: 2Gi}"),
            resize("p2", "2"),
        )
    };
    for version in ["1.34", "1.35", "1.36"] {
        let document = completed(&scenario(version));
        assert_eq!(document.results[1].resized, Some(false), "{version}");
        assert_eq!(document.results[1].reason.as_deref(), Some("Deferred"), "{version}");
        assert_eq!(
            document.results[1].message.as_deref(),
            Some(
                "Allocate failed due to [memorymanager] failed to get the default NUMA affinity, \
                 no NUMA nodes with enough memory is available, which is unexpected"
            ),
            "{version}"
        );
        assert_eq!(document.results[4].resized, Some(true), "{version}");
        assert_eq!(
            document.final_state.memory_assignments["default/p2"]
                .keys()
                .collect::<Vec<_>>(),
            ["app0", "init0"],
            "{version}"
        );
    }
    let document = completed(&scenario("1.37"));
    assert_eq!(document.results[1].resized, Some(true));
    assert_eq!(
        document.final_state.memory_assignments["default/p2"]
            .keys()
            .collect::<Vec<_>>(),
        ["app0"]
    );
}
