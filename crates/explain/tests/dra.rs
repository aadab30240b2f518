//! `topoalign_explain::dra`: the DRA side of a pod beside the kubelet's
//! decision, on a 2-NUMA node (NUMA 0: CPUs 1-3,9-11 free after the
//! reserved 0,8; NUMA 1: CPUs 4-7,12-15) with a GPU and a NIC per NUMA
//! node. Each case states the layout that makes its answer; the
//! expectations follow from the allocator being first-fit in slice order
//! and the kubelet preferring the lowest NUMA node that fits.

mod common;

use topoalign_explain::dra::{DraExplanation, DraFixKind};
use topoalign_scenario::Scenario;

/// Classes and slices: gpu-0/nic-0 on NUMA 0, gpu-1/nic-1 on NUMA 1
/// (`NUMA_VALUE_n` replaced by each device's attribute).
const DEVICES: &str = r#"
  node: {metadata: {name: node-1}}
  deviceClasses:
    - metadata: {name: gpu}
      spec: {selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]}
    - metadata: {name: nic}
      spec: {selectors: [{cel: {expression: 'device.driver == "nic.example.com"'}}]}
  resourceSlices:
    - metadata: {name: gpus}
      spec:
        driver: gpu.example.com
        nodeName: node-1
        pool: {name: p, generation: 1, resourceSliceCount: 1}
        devices:
          - {name: gpu-0, attributes: {GPU_0}}
          - {name: gpu-1, attributes: {GPU_1}}
    - metadata: {name: nics}
      spec:
        driver: nic.example.com
        nodeName: node-1
        pool: {name: p, generation: 1, resourceSliceCount: 1}
        devices:
          - {name: nic-0, attributes: {NIC_0}}
          - {name: nic-1, attributes: {NIC_1}}
"#;

const STD0: &str = "resource.kubernetes.io/numaNode: {int: 0}";
const STD1: &str = "resource.kubernetes.io/numaNode: {int: 1}";

/// A pod taking all of NUMA 0's free CPUs, with `claims` (a
/// `resourceClaims` list, may be empty).
fn cpu_hog(claims: &str) -> String {
    format!(
        r#"
  - add:
      metadata: {{name: hog, namespace: ml}}
      spec:
        resourceClaims: [{claims}]
        containers:
          - name: c
            resources: {{limits: {{cpu: "6", memory: 8Gi}}}}
"#
    )
}

/// The pod explained: 4 CPUs and 16Gi, its claims.
fn pod(claims: &str) -> String {
    format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: train, namespace: ml}}
spec:
  resourceClaims: [{claims}]
  containers:
    - name: c
      resources: {{limits: {{cpu: "4", memory: 16Gi}}}}
"#
    )
}

struct Case<'a> {
    /// Device attributes of gpu-0, gpu-1, nic-0, nic-1.
    attributes: [&'a str; 4],
    /// `resourceClaimTemplates:` and `resourceClaims:` entries of the block.
    claims: &'a str,
    events: String,
    pod: String,
}

fn run(case: &Case<'_>) -> Result<Option<DraExplanation>, String> {
    let devices = DEVICES
        .replace("GPU_0", case.attributes[0])
        .replace("GPU_1", case.attributes[1])
        .replace("NIC_0", case.attributes[2])
        .replace("NIC_1", case.attributes[3]);
    let events = if case.events.is_empty() { " []" } else { &case.events };
    let text = format!("{}dra:\n{devices}{}\nevents:{events}\n", common::node(), case.claims);
    let scenario = Scenario::parse(&text).map_err(|e| format!("scenario: {e}"))?;
    common::explain_first(&scenario, "1.37", &case.pod)
}

const GPU_AND_NIC: &str = r#"
  resourceClaimTemplates:
    - metadata: {name: one-gpu, namespace: ml}
      spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}}
    - metadata: {name: pair, namespace: ml}
      spec:
        spec:
          devices:
            requests:
              - {name: gpu, exactly: {deviceClassName: gpu}}
              - {name: nic, exactly: {deviceClassName: nic}}
"#;

const PAIR_MATCHED: &str = r#"
  resourceClaimTemplates:
    - metadata: {name: pair, namespace: ml}
      spec:
        spec:
          devices:
            requests:
              - {name: gpu, exactly: {deviceClassName: gpu}}
              - {name: nic, exactly: {deviceClassName: nic}}
            constraints:
              - {matchAttribute: resource.kubernetes.io/numaNode}
"#;

fn standard() -> [&'static str; 4] {
    [STD0, STD1, STD0, STD1]
}

fn device_of(explanation: &DraExplanation, request: &str) -> Vec<(String, Option<i64>)> {
    explanation
        .requests
        .iter()
        .filter(|r| r.request == request)
        .flat_map(|r| r.devices.iter().map(|d| (d.device.clone(), d.numa_node)))
        .collect()
}

/// The hog holds NUMA 0's CPUs and gpu-0: the kubelet pins the pod to NUMA
/// 1, DRA gives it gpu-1 (the only free GPU) and nic-0 (the first NIC).
#[test]
fn split_pair_is_flagged_and_each_fix_aligns() {
    let explanation = run(&Case {
        attributes: standard(),
        claims: GPU_AND_NIC,
        events: cpu_hog("{name: g, resourceClaimTemplateName: one-gpu}"),
        pod: pod("{name: devices, resourceClaimTemplateName: pair}"),
    })
    .unwrap()
    .expect("the pod has claims");
    assert_eq!(explanation.kubelet_numa_nodes, vec![1]);
    assert_eq!(device_of(&explanation, "gpu"), vec![("gpu-1".to_owned(), Some(1))]);
    assert_eq!(device_of(&explanation, "nic"), vec![("nic-0".to_owned(), Some(0))]);
    assert_eq!(explanation.misaligned.len(), 1);
    assert_eq!(explanation.misaligned[0].request, "nic");
    assert!(explanation.summary.contains("NUMA 1") && explanation.summary.contains("NUMA 0"));
    let kinds: Vec<DraFixKind> = explanation.fixes.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        vec![DraFixKind::Constraint, DraFixKind::Selector, DraFixKind::RemovePods]
    );
    let constraint = &explanation.fixes[0];
    let yaml = constraint.yaml.as_deref().unwrap();
    assert!(
        yaml.contains("matchAttribute: resource.kubernetes.io/numaNode"),
        "{yaml}"
    );
    assert_eq!(constraint.target.as_deref(), Some("ResourceClaimTemplate ml/pair"));
    let selector = &explanation.fixes[1];
    assert!(
        selector
            .yaml
            .as_deref()
            .unwrap()
            .contains(r#"device.attributes["resource.kubernetes.io"].numaNode == 1"#)
    );
    assert_eq!(explanation.fixes[2].remove, vec!["ml/hog".to_owned()]);
    // The snippets are YAML of the fields they name.
    let constraint_yaml: serde_json::Value = serde_yaml_ng::from_str(yaml).unwrap();
    assert_eq!(
        constraint_yaml,
        serde_json::json!({"constraints": [
            {"requests": ["gpu", "nic"], "matchAttribute": "resource.kubernetes.io/numaNode"}
        ]})
    );
    let selector_yaml: serde_json::Value = serde_yaml_ng::from_str(selector.yaml.as_deref().unwrap()).unwrap();
    let expression = r#"device.attributes["resource.kubernetes.io"].numaNode == 1"#;
    assert_eq!(
        selector_yaml,
        serde_json::json!({"requests": [
            {"name": "gpu", "exactly": {"selectors": [{"cel": {"expression": expression}}]}},
            {"name": "nic", "exactly": {"selectors": [{"cel": {"expression": expression}}]}},
        ]})
    );
    for fix in &explanation.fixes {
        for device in fix.requests.iter().flat_map(|r| &r.devices) {
            assert_eq!(device.aligned, Some(true), "{}: {device:?}", fix.description);
        }
    }
    // No constraint links the two requests.
    assert!(
        explanation
            .lint
            .iter()
            .any(|w| w.message.contains("links [gpu] and [nic]")),
        "{:?}",
        explanation.lint
    );
}

/// Nothing else holds devices: with matchAttribute on numaNode DRA takes
/// gpu-0 + nic-0 together, but the kubelet pins NUMA 1 (the hog holds NUMA
/// 0's CPUs): both misaligned; the constraint is there already, so only a
/// selector (or moving the hog) aligns.
#[test]
fn matched_pair_on_the_wrong_node_gets_a_selector() {
    let explanation = run(&Case {
        attributes: standard(),
        claims: PAIR_MATCHED,
        events: cpu_hog(""),
        pod: pod("{name: devices, resourceClaimTemplateName: pair}"),
    })
    .unwrap()
    .unwrap();
    assert_eq!(explanation.kubelet_numa_nodes, vec![1]);
    assert_eq!(explanation.misaligned.len(), 2);
    let kinds: Vec<DraFixKind> = explanation.fixes.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, vec![DraFixKind::Selector, DraFixKind::RemovePods]);
    assert!(
        explanation
            .lint
            .iter()
            .any(|w| w.message.contains("nothing ties them to the kubelet's NUMA 1")),
        "{:?}",
        explanation.lint
    );
}

/// No hog: the kubelet pins NUMA 0 and DRA's first devices are there.
#[test]
fn aligned_pod_has_no_fixes() {
    let explanation = run(&Case {
        attributes: standard(),
        claims: PAIR_MATCHED,
        events: String::new(),
        pod: pod("{name: devices, resourceClaimTemplateName: pair}"),
    })
    .unwrap()
    .unwrap();
    assert_eq!(explanation.kubelet_numa_nodes, vec![0]);
    assert!(explanation.misaligned.is_empty());
    assert!(explanation.fixes.is_empty());
    assert!(explanation.summary.starts_with("Aligned"), "{}", explanation.summary);
}

#[test]
fn unsatisfiable_requests_say_why() {
    struct Unsat {
        name: &'static str,
        claims: &'static str,
        events: String,
        /// (request, words the reason must hold).
        expected: (&'static str, &'static [&'static str]),
    }
    let cases = [
        Unsat {
            name: "a selector no device meets",
            claims: r#"
  resourceClaimTemplates:
    - metadata: {name: pair, namespace: ml}
      spec:
        spec:
          devices:
            requests:
              - {name: gpu, exactly: {deviceClassName: gpu, selectors: [{cel: {expression: 'device.attributes["resource.kubernetes.io"].numaNode == 7'}}]}}
              - {name: nic, exactly: {deviceClassName: nic}}
"#,
            events: String::new(),
            expected: ("gpu", &["2 fail the request's selectors", "0 free"]),
        },
        Unsat {
            name: "a class that does not exist",
            claims: r#"
  resourceClaimTemplates:
    - metadata: {name: pair, namespace: ml}
      spec:
        spec:
          devices:
            requests:
              - {name: fpga, exactly: {deviceClassName: fpga}}
"#,
            events: String::new(),
            expected: ("fpga", &["DeviceClass fpga does not exist"]),
        },
        Unsat {
            name: "all taken",
            claims: r#"
  resourceClaimTemplates:
    - metadata: {name: two-gpus, namespace: ml}
      spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, count: 2}}]}}}
    - metadata: {name: pair, namespace: ml}
      spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}}
"#,
            events: cpu_hog("{name: g, resourceClaimTemplateName: two-gpus}"),
            expected: ("gpu", &["gpu.example.com/gpu-0, gpu.example.com/gpu-1 taken", "0 free"]),
        },
        Unsat {
            name: "a constraint the free devices cannot meet",
            claims: r#"
  resourceClaimTemplates:
    - metadata: {name: gpu0-nic1, namespace: ml}
      spec:
        spec:
          devices:
            requests:
              - {name: gpu, exactly: {deviceClassName: gpu, selectors: [{cel: {expression: 'device.attributes["resource.kubernetes.io"].numaNode == 0'}}]}}
              - {name: nic, exactly: {deviceClassName: nic, selectors: [{cel: {expression: 'device.attributes["resource.kubernetes.io"].numaNode == 1'}}]}}
    - metadata: {name: pair, namespace: ml}
      spec:
        spec:
          devices:
            requests:
              - {name: gpu, exactly: {deviceClassName: gpu}}
              - {name: nic, exactly: {deviceClassName: nic}}
            constraints:
              - {matchAttribute: resource.kubernetes.io/numaNode}
"#,
            events: cpu_hog("{name: g, resourceClaimTemplateName: gpu0-nic1}"),
            expected: (
                "gpu, nic",
                &[
                    "matchAttribute resource.kubernetes.io/numaNode across gpu, nic cannot be met",
                    "gpu's free devices have 1",
                    "nic's free devices have 0",
                ],
            ),
        },
    ];
    for case in cases {
        let explanation = run(&Case {
            attributes: standard(),
            claims: case.claims,
            events: case.events.clone(),
            pod: pod("{name: devices, resourceClaimTemplateName: pair}"),
        })
        .unwrap_or_else(|e| panic!("{}: {e}", case.name))
        .unwrap();
        assert_ne!(explanation.outcome, "allocated", "{}", case.name);
        let problem = explanation
            .unsatisfiable
            .iter()
            .find(|p| p.request == case.expected.0)
            .unwrap_or_else(|| panic!("{}: {:?}", case.name, explanation.unsatisfiable));
        for words in case.expected.1 {
            assert!(
                problem.reason.contains(words),
                "{}: {words:?} not in {:?}",
                case.name,
                problem.reason
            );
        }
        assert!(explanation.summary.starts_with("DRA cannot allocate"), "{}", case.name);
    }
}

#[test]
fn lint_names_what_the_constraints_do_not_imply() {
    struct Lint {
        name: &'static str,
        attributes: [&'static str; 4],
        claims: &'static str,
        pod: String,
        words: &'static str,
    }
    let list = "resource.kubernetes.io/numaNode: {ints: [0, 1]}";
    let cases = [
        Lint {
            name: "a device without the attribute",
            attributes: [STD0, STD1, STD0, "other: {int: 1}"],
            claims: PAIR_MATCHED,
            pod: pod("{name: devices, resourceClaimTemplateName: pair}"),
            words: "1 of the 2 devices request nic may take lack resource.kubernetes.io/numaNode (nic-1)",
        },
        Lint {
            name: "a list-valued numaNode",
            attributes: [list, STD1, STD0, STD1],
            claims: PAIR_MATCHED,
            pod: pod("{name: devices, resourceClaimTemplateName: pair}"),
            words: "is a list on gpu-0",
        },
        Lint {
            name: "two claims",
            attributes: standard(),
            claims: GPU_AND_NIC,
            pod: pod("{name: a, resourceClaimTemplateName: one-gpu}, {name: b, resourceClaimTemplateName: one-gpu}"),
            words: "no constraint spans claims",
        },
    ];
    for case in cases {
        let explanation = run(&Case {
            attributes: case.attributes,
            claims: case.claims,
            events: String::new(),
            pod: case.pod.clone(),
        })
        .unwrap_or_else(|e| panic!("{}: {e}", case.name))
        .unwrap();
        assert!(
            explanation.lint.iter().any(|w| w.message.contains(case.words)),
            "{}: {:?}",
            case.name,
            explanation.lint
        );
    }
}

#[test]
fn pods_without_claims_and_unknown_templates() {
    let none = run(&Case {
        attributes: standard(),
        claims: GPU_AND_NIC,
        events: String::new(),
        pod: pod(""),
    })
    .unwrap();
    assert_eq!(none, None);
    let missing = run(&Case {
        attributes: standard(),
        claims: GPU_AND_NIC,
        events: String::new(),
        pod: pod("{name: devices, resourceClaimTemplateName: nowhere}"),
    })
    .unwrap_err();
    assert!(missing.contains("no ResourceClaimTemplate ml/nowhere"), "{missing}");
}

/// Two claims from one GPU template while the kubelet pins NUMA 1: one of
/// the two GPUs is on NUMA 0 whatever the claims say (one GPU per NUMA
/// node), and removing the CPU hog moves the kubelet to NUMA 0 with the
/// same split, so nothing aligns and nothing is offered.
#[test]
fn no_fix_is_offered_when_none_aligns() {
    let explanation = run(&Case {
        attributes: standard(),
        claims: GPU_AND_NIC,
        events: cpu_hog(""),
        pod: pod("{name: a, resourceClaimTemplateName: one-gpu}, {name: b, resourceClaimTemplateName: one-gpu}"),
    })
    .unwrap()
    .unwrap();
    assert_eq!(explanation.kubelet_numa_nodes, vec![1]);
    assert_eq!(explanation.misaligned.len(), 1, "{explanation:#?}");
    assert!(explanation.fixes.is_empty(), "{:#?}", explanation.fixes);
}
