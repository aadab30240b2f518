//! Dynamic Resource Allocation in a replay (docs/scenario.md, "DRA"): the
//! devices the scheduler's allocator gives each pod's claims, beside the
//! kubelet's answer, with their NUMA nodes and whether they meet the CPUs
//! and memory the kubelet pinned. Which device the allocator takes is
//! checked against the real allocator in crates/dra (testdata/dra); here the
//! scenario plumbing: templates and shared claims, deletes, errors.

use topoalign_scenario::dra::DraEventResult;
use topoalign_scenario::{Replay, ReplayInput, ResultDocument, Scenario, replay};

/// Two NUMA nodes of two CPUs each; a static CPU manager, Static memory
/// manager and single-numa-node, so a Guaranteed pod is pinned to one node.
const NODE: &str = r#"topology:
  numaNodes:
    - {id: 0, memory: 8Gi}
    - {id: 1, memory: 8Gi}
  cpus:
    - {id: 0, core: 0, socket: 0, numa: 0}
    - {id: 1, core: 1, socket: 0, numa: 0}
    - {id: 2, core: 2, socket: 1, numa: 1}
    - {id: 3, core: 3, socket: 1, numa: 1}
kubelet:
  kubeletVersion: "1.37"
  cpuManagerPolicy: static
  memoryManagerPolicy: Static
  topologyManagerPolicy: single-numa-node
  reservedSystemCPUs: "0"
  systemReserved: {memory: 512Mi}
  reservedMemory: [{numaNode: 0, limits: {memory: 612Mi}}]
"#;

/// One GPU per NUMA node, published with the standard numaNode attribute;
/// a template for one GPU and a shared claim for one.
const DRA: &str = r#"dra:
  node: {metadata: {name: node-1}}
  deviceClasses:
    - metadata: {name: gpu}
      spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
  resourceSlices:
    - metadata: {name: node-1-gpus}
      spec:
        driver: gpu.example.com
        nodeName: node-1
        pool: {name: node-1, generation: 1, resourceSliceCount: 1}
        devices:
          - {name: gpu-0, attributes: {resource.kubernetes.io/numaNode: {int: 0}}}
          - {name: gpu-1, attributes: {resource.kubernetes.io/numaNode: {int: 1}}}
  resourceClaims:
    - metadata: {name: shared-gpu, namespace: default}
      spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}
  resourceClaimTemplates:
    - metadata: {name: one-gpu, namespace: default}
      spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}}
"#;

/// A Guaranteed pod of `cpus` CPUs with one claim.
fn pod(name: &str, cpus: u32, claim: &str) -> String {
    format!(
        "  - add:\n      metadata: {{name: {name}}}\n      spec:\n        resourceClaims: [{{name: gpu, {claim}}}]\n        \
         containers: [{{name: app, resources: {{limits: {{cpu: '{cpus}', memory: 1Gi}}, claims: [{{name: gpu}}]}}}}]\n"
    )
}

fn scenario(events: &str) -> String {
    format!("{NODE}{DRA}events:\n{events}")
}

fn completed(text: &str) -> ResultDocument {
    let scenario = Scenario::parse(text).unwrap_or_else(|e| panic!("{e}"));
    match replay(&scenario) {
        Ok(Replay::Completed(document)) => document,
        other => panic!("expected a replay, got {other:?}"),
    }
}

fn devices(result: &DraEventResult) -> Vec<(String, Option<i64>)> {
    result
        .devices
        .claims
        .iter()
        .flat_map(|c| c.devices.iter().map(|d| (d.device.clone(), d.numa_node)))
        .collect()
}

#[test]
fn a_pod_pinned_to_one_numa_node_gets_the_first_gpu_and_is_flagged_when_they_part() {
    // CPU 0 is reserved, so NUMA 0 has one free CPU: a 2-CPU pod can only be
    // pinned to NUMA 1, while the allocator's first fit gives it gpu-0.
    let document = completed(&scenario(&pod("big", 2, "resourceClaimTemplateName: one-gpu")));
    assert_eq!(document.results[0].admitted, Some(true));
    let dra = &document.dra[0];
    assert_eq!(
        (dra.event, dra.devices.pod.as_str(), dra.devices.outcome.as_str()),
        (0, "default/big", "allocated")
    );
    assert_eq!(devices(dra), vec![("gpu-0".to_owned(), Some(0))]);
    assert_eq!(dra.kubelet_numa_nodes, vec![1]);
    assert_eq!(
        dra.misaligned.as_deref(),
        Some(&["gpu/gpu: gpu-0 on NUMA node 0".to_owned()][..])
    );
    assert_eq!(
        dra.devices.claims[0].claim, "default/big-gpu",
        "a template makes <pod>-<claim>"
    );
}

#[test]
fn a_template_claim_is_freed_with_its_pod_and_a_shared_claim_with_its_last_pod() {
    let events = [
        pod("a", 1, "resourceClaimTemplateName: one-gpu"),
        pod("b", 1, "resourceClaimTemplateName: one-gpu"),
        // Both GPUs are held: no third.
        pod("c", 1, "resourceClaimTemplateName: one-gpu"),
        "  - delete: a\n".to_owned(),
        pod("d", 1, "resourceClaimName: shared-gpu"),
        pod("e", 1, "resourceClaimName: shared-gpu"),
        "  - delete: d\n".to_owned(),
        // e still holds the shared claim's GPU; b holds gpu-1.
        pod("f", 1, "resourceClaimTemplateName: one-gpu"),
        "  - delete: e\n".to_owned(),
        pod("g", 1, "resourceClaimTemplateName: one-gpu"),
    ]
    .concat();
    let document = completed(&scenario(&events));
    let by_pod = |name: &str| {
        document
            .dra
            .iter()
            .find(|r| r.devices.pod == format!("default/{name}"))
            .unwrap_or_else(|| panic!("no DRA result for {name}"))
    };
    assert_eq!(devices(by_pod("a")), vec![("gpu-0".to_owned(), Some(0))]);
    assert_eq!(devices(by_pod("b")), vec![("gpu-1".to_owned(), Some(1))]);
    assert_eq!(by_pod("c").devices.outcome, "unschedulable");
    assert!(devices(by_pod("c")).is_empty());
    // a's claim went with a: the shared claim takes gpu-0, and e shares it.
    assert_eq!(devices(by_pod("d")), vec![("gpu-0".to_owned(), Some(0))]);
    assert_eq!(devices(by_pod("e")), vec![("gpu-0".to_owned(), Some(0))]);
    assert_eq!(by_pod("e").devices.claims[0].claim, "default/shared-gpu");
    assert_eq!(
        by_pod("f").devices.outcome,
        "unschedulable",
        "e still holds the shared GPU"
    );
    assert_eq!(devices(by_pod("g")), vec![("gpu-0".to_owned(), Some(0))]);
}

#[test]
fn the_kubelets_answer_is_the_same_with_and_without_the_dra_block() {
    let events = [
        pod("a", 2, "resourceClaimTemplateName: one-gpu"),
        pod("b", 1, "resourceClaimName: shared-gpu"),
    ]
    .concat();
    let with = completed(&scenario(&events));
    let without = completed(&format!("{NODE}events:\n{events}"));
    assert!(without.dra.is_empty());
    assert_eq!(with.results, without.results);
    assert_eq!(with.final_state, without.final_state);
}

#[test]
fn json_text_with_a_dra_block_replays_as_the_parsed_scenario() {
    let text = scenario(&pod("a", 1, "resourceClaimTemplateName: one-gpu"));
    let scenario = Scenario::parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let json = serde_json::to_string(&scenario).unwrap_or_else(|e| panic!("{e}"));
    let through_input = match ReplayInput::parse(&json).and_then(ReplayInput::replay) {
        Ok(Replay::Completed(document)) => document,
        other => panic!("expected a replay, got {other:?}"),
    };
    assert_eq!(through_input, completed(&text));
    assert_eq!(through_input.dra.len(), 1);
}

#[test]
fn a_claim_the_block_lacks_is_an_error_naming_the_event_and_the_claim() {
    let text = scenario(&format!(
        "{}{}",
        pod("a", 1, "resourceClaimTemplateName: one-gpu"),
        pod("b", 1, "resourceClaimTemplateName: two-gpus")
    ));
    let error = Scenario::parse(&text)
        .and_then(|s| replay(&s))
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(error.contains("events[1].add.spec.resourceClaims[0]"), "{error}");
    assert!(error.contains("default/two-gpus"), "{error}");
}

#[test]
fn a_release_without_dra_allocation_is_an_error_naming_the_block() {
    let text = scenario(&pod("a", 1, "resourceClaimTemplateName: one-gpu")).replace("\"1.37\"", "\"1.33\"");
    let error = Scenario::parse(&text)
        .and_then(|s| replay(&s))
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(error.starts_with("dra:") || error.contains("dra"), "{error}");
    assert!(error.contains("1.34"), "{error}");
}
