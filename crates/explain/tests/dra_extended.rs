//! `topoalign_explain::dra` on DRA-backed extended resources (KEP-5004): a
//! pod asking for a plain `example.com/gpu: 1` that a DeviceClass serves
//! (`extendedResourceName`) on a node whose allocatable lacks it.
//!
//! The node: 2 NUMA nodes (= sockets) of 4 cores × 2 threads, CPUs 0 and 8
//! reserved, so NUMA 0 has 6 CPUs for pods and NUMA 1 has 8; single-numa-node,
//! static CPU and memory managers; kubelet and scheduler 1.37. gpu-0 and
//! nic-0 are on NUMA 0, gpu-1 and nic-1 on NUMA 1, listed in that order.
//! Each case's expectations follow from its layout: the scheduler's
//! allocator is first-fit in slice order and knows nothing of CPUs; the
//! kubelet pins a pod to the lowest NUMA node with room. Every fix offered
//! is replayed here again through `topoalign_scenario::replay` (the
//! `replay` command's path, not explain's), with the fix's objects.

mod common;

use serde_json::{Value, json};
use topoalign_explain::dra::{DraExplanation, DraFixKind};
use topoalign_scenario::{Replay, Scenario, replay};

/// Classes serving example.com/gpu and example.com/nic; the slices.
const DEVICES: &str = r#"
  node: {metadata: {name: node-1}}
  deviceClasses:
    - metadata: {name: gpu}
      spec:
        extendedResourceName: example.com/gpu
        selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
    - metadata: {name: nic}
      spec:
        extendedResourceName: example.com/nic
        selectors: [{cel: {expression: 'device.driver == "nic.example.com"'}}]
  resourceSlices:
    - metadata: {name: gpus}
      spec:
        driver: gpu.example.com
        nodeName: node-1
        pool: {name: p, generation: 1, resourceSliceCount: 1}
        devices:
          - {name: gpu-0, attributes: {resource.kubernetes.io/numaNode: {int: 0}}}
          - {name: gpu-1, attributes: {resource.kubernetes.io/numaNode: {int: 1}}}
    - metadata: {name: nics}
      spec:
        driver: nic.example.com
        nodeName: node-1
        pool: {name: p, generation: 1, resourceSliceCount: 1}
        devices:
          - {name: nic-0, attributes: {resource.kubernetes.io/numaNode: {int: 0}}}
          - {name: nic-1, attributes: {resource.kubernetes.io/numaNode: {int: 1}}}
  resourceClaimTemplates:
    - metadata: {name: one-gpu, namespace: ml}
      spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu}}]}}}
    - metadata: {name: all-gpus, namespace: ml}
      spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu, allocationMode: All}}]}}}
"#;

/// A pod in namespace ml with `cpus` exclusive CPUs and 8Gi, and `claims`
/// (a `resourceClaims` list, may be empty).
fn hog(cpus: u32, claims: &str) -> Value {
    serde_yaml_ng::from_str(&format!(
        r#"
metadata: {{name: hog, namespace: ml}}
spec:
  resourceClaims: [{claims}]
  containers:
    - name: c
      resources: {{limits: {{cpu: "{cpus}", memory: 8Gi}}}}
"#
    ))
    .expect("a pod")
}

/// The pod explained: 4 CPUs, 16Gi and `extra` extended resources.
fn train(extra: &str) -> Value {
    serde_yaml_ng::from_str(&format!(
        r#"
apiVersion: v1
kind: Pod
metadata: {{name: train, namespace: ml}}
spec:
  containers:
    - name: c
      resources: {{limits: {{cpu: "4", memory: 16Gi, {extra}}}}}
"#
    ))
    .expect("a pod")
}

/// A scenario of `release`: the node, the DRA block (with
/// `extra_templates` added, then `edit` applied) and the `events` (pods
/// added).
fn scenario_with(release: &str, extra_templates: &[Value], events: &[Value], edit: &dyn Fn(&mut Value)) -> Scenario {
    let mut dra: Value = serde_yaml_ng::from_str(DEVICES).expect("the dra block");
    if let Some(list) = dra["resourceClaimTemplates"].as_array_mut() {
        list.extend(extra_templates.iter().cloned());
    }
    edit(&mut dra);
    let text = format!(
        "{}dra: {}\nevents: {}\n",
        common::node().replace("\"1.37\"", &format!("\"{release}\"")),
        serde_json::to_string(&dra).expect("JSON"),
        serde_json::to_string(&events.iter().map(|pod| json!({"add": pod})).collect::<Vec<_>>()).expect("JSON"),
    );
    Scenario::parse(&text).unwrap_or_else(|e| panic!("scenario: {e}"))
}

fn scenario(release: &str, extra_templates: &[Value], events: &[Value]) -> Scenario {
    scenario_with(release, extra_templates, events, &|_| {})
}

/// The explanation of `pod` on the node after `events`, as `topoalign
/// explain` gives it.
fn explain(release: &str, events: &[Value], pod: &Value) -> Option<DraExplanation> {
    explain_with(release, events, pod, &|_| {})
}

/// [`explain`] with the DRA block changed by `edit`.
fn explain_with(release: &str, events: &[Value], pod: &Value, edit: &dyn Fn(&mut Value)) -> Option<DraExplanation> {
    let scenario = scenario_with(release, &[], events, edit);
    common::explain_first(&scenario, release, &serde_json::to_string(pod).expect("JSON"))
        .unwrap_or_else(|e| panic!("explained: {e}"))
}

/// `replay` of `events` then `pod`, with `templates` added: the pod's
/// kubelet NUMA nodes, its devices (request, device, NUMA node) and
/// whether replay calls them misaligned.
fn replayed(events: &[Value], templates: &[Value], pod: &Value) -> (Vec<usize>, Vec<(String, String, i64)>, bool) {
    let mut all = events.to_vec();
    all.push(pod.clone());
    let Replay::Completed(document) = replay(&scenario("1.37", templates, &all)).expect("replays") else {
        panic!("the kubelet refused to start");
    };
    let last = document.dra.last().expect("the pod's DRA result");
    assert_eq!(last.event, all.len() - 1, "{last:?}");
    assert_eq!(last.devices.outcome, "allocated", "{last:?}");
    let devices = last
        .devices
        .claims
        .iter()
        .flat_map(|c| {
            c.devices.iter().map(move |d| {
                (
                    format!("{}/{}", c.name, d.request),
                    d.device.clone(),
                    d.numa_node.unwrap_or(-1),
                )
            })
        })
        .collect();
    let misaligned = last.misaligned.as_ref().is_some_and(|m| !m.is_empty());
    (last.kubelet_numa_nodes.clone(), devices, misaligned)
}

/// Every fix replayed: the pod changed as the fix says (and its template
/// added), or the pods it removes left out: aligned, on the fix's NUMA nodes.
fn check_fixes_by_replay(events: &[Value], pod: &Value, explanation: &DraExplanation) {
    for fix in &explanation.fixes {
        let (events, templates, pod) = match fix.kind {
            DraFixKind::RemovePods => {
                let kept: Vec<Value> = events
                    .iter()
                    .filter(|p| {
                        !fix.remove
                            .contains(&format!("ml/{}", p["metadata"]["name"].as_str().unwrap_or_default()))
                    })
                    .cloned()
                    .collect();
                (kept, Vec::new(), pod.clone())
            }
            DraFixKind::ExplicitClaim => (
                events.to_vec(),
                vec![fix.changed.clone().expect("the new template")],
                fix.pod.clone().expect("the changed pod"),
            ),
            _ => (events.to_vec(), Vec::new(), fix.pod.clone().expect("the changed pod")),
        };
        let (kubelet, devices, misaligned) = replayed(&events, &templates, &pod);
        assert_eq!(kubelet, fix.kubelet_numa_nodes, "{}", fix.description);
        assert!(!misaligned, "{}: {devices:?}", fix.description);
        assert!(!devices.is_empty(), "{}", fix.description);
        for (_, _, numa) in &devices {
            assert!(
                usize::try_from(*numa).is_ok_and(|n| kubelet.contains(&n)),
                "{}: {devices:?}",
                fix.description
            );
        }
    }
}

/// The hog holds NUMA 0's 6 CPUs: the kubelet pins the pod to NUMA 1, and
/// DRA serves its example.com/gpu with the first GPU, gpu-0 on NUMA 0.
#[test]
fn a_misaligned_extended_resource_names_both_sides_and_a_claim_of_its_own_aligns_it() {
    let events = [hog(6, "")];
    let pod = train("example.com/gpu: \"1\"");
    let explanation = explain("1.37", &events, &pod).expect("DRA serves the pod's GPU");
    assert_eq!(explanation.kubelet_numa_nodes, vec![1]);
    assert_eq!(explanation.requests.len(), 1);
    let request = &explanation.requests[0];
    assert_eq!(request.claim, "extended-resources");
    assert_eq!(request.resource_claim, "ml/train-extended-resources");
    // The container's requests sorted: cpu, example.com/gpu, memory.
    assert_eq!(request.request, "container-0-request-1");
    assert_eq!(request.serves.len(), 1);
    assert_eq!(
        (
            request.serves[0].container.as_str(),
            request.serves[0].resource.as_str()
        ),
        ("c", "example.com/gpu")
    );
    assert_eq!(request.devices.len(), 1);
    assert_eq!(
        (
            request.devices[0].device.as_str(),
            request.devices[0].numa_node,
            request.devices[0].aligned
        ),
        ("gpu-0", Some(0), Some(false))
    );
    assert_eq!(explanation.misaligned.len(), 1);
    assert_eq!(explanation.misaligned[0].claim, "extended-resources");
    assert!(
        explanation.summary.contains("NUMA 1") && explanation.summary.contains("NUMA 0"),
        "{}",
        explanation.summary
    );
    assert!(
        explanation
            .lint
            .iter()
            .any(|w| w.claim == "extended-resources" && w.message.contains("the kubelet's NUMA 1")),
        "{:?}",
        explanation.lint
    );
    // NUMA 0 has no CPU left, so no smaller CPU request moves the pod
    // there; a claim with a selector on NUMA 1 and moving the hog do.
    let kinds: Vec<DraFixKind> = explanation.fixes.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, vec![DraFixKind::ExplicitClaim, DraFixKind::RemovePods]);
    let explicit = &explanation.fixes[0];
    let template = explicit.changed.as_ref().expect("the template");
    assert_eq!(
        template["metadata"],
        json!({"name": "train-devices", "namespace": "ml"})
    );
    assert_eq!(
        template["spec"]["spec"]["devices"]["requests"],
        json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu", "selectors": [
            {"cel": {"expression": "device.attributes[\"resource.kubernetes.io\"].numaNode == 1"}}]}}])
    );
    let changed = explicit.pod.as_ref().expect("the changed pod");
    let container = &changed["spec"]["containers"][0]["resources"];
    assert!(container["limits"].get("example.com/gpu").is_none(), "{container}");
    assert_eq!(container["claims"], json!([{"name": "devices", "request": "gpu"}]));
    assert_eq!(
        changed["spec"]["resourceClaims"],
        json!([{"name": "devices", "resourceClaimTemplateName": "train-devices"}])
    );
    assert_eq!(explicit.kubelet_numa_nodes, vec![1]);
    // The YAML shown is the template, then the pod's part.
    let yaml = explicit.yaml.as_deref().expect("YAML");
    let documents: Vec<&str> = yaml.split("---\n").collect();
    assert_eq!(documents.len(), 2, "{yaml}");
    let shown: Value = serde_yaml_ng::from_str(documents[0]).expect("the template as YAML");
    assert_eq!(&shown, template);
    assert_eq!(explanation.fixes[1].remove, vec!["ml/hog".to_owned()]);
    check_fixes_by_replay(&events, &pod, &explanation);
}

/// The hog takes 4 of NUMA 0's 6 CPUs: the pod's 4 go to NUMA 1, its GPU is
/// gpu-0 on NUMA 0; with 2 CPUs it fits NUMA 0, beside gpu-0.
#[test]
fn fewer_cpus_move_the_pod_to_its_devices() {
    let events = [hog(4, "")];
    let pod = train("example.com/gpu: \"1\"");
    let explanation = explain("1.37", &events, &pod).expect("DRA serves the pod's GPU");
    assert_eq!(explanation.kubelet_numa_nodes, vec![1]);
    let kinds: Vec<DraFixKind> = explanation.fixes.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        vec![
            DraFixKind::ExplicitClaim,
            DraFixKind::CpuRequest,
            DraFixKind::RemovePods
        ]
    );
    let cpu = &explanation.fixes[1];
    assert_eq!(cpu.kubelet_numa_nodes, vec![0]);
    let limits = &cpu.pod.as_ref().expect("the changed pod")["spec"]["containers"][0]["resources"]["limits"];
    assert_eq!(limits["cpu"], "2", "3 CPUs do not fit NUMA 0's 2: {limits}");
    assert_eq!(limits["example.com/gpu"], "1");
    assert!(cpu.description.contains("2 CPUs instead of 4"), "{}", cpu.description);
    check_fixes_by_replay(&events, &pod, &explanation);
}

/// Two resources: the hog holds gpu-0 (a claim) and NUMA 0's CPUs, so the
/// kubelet pins NUMA 1; DRA gives gpu-1 (NUMA 1) and nic-0 (NUMA 0). A claim
/// of the pod's own aligns them with selectors, or with matchAttribute
/// across gpu and nic (gpu-1 first, then the NIC beside it).
#[test]
fn two_extended_resources_get_a_selector_or_a_match_attribute() {
    let events = [hog(6, "{name: g, resourceClaimTemplateName: one-gpu}")];
    let pod = train("example.com/gpu: \"1\", example.com/nic: \"1\"");
    let explanation = explain("1.37", &events, &pod).expect("DRA serves the pod's devices");
    let by_request: Vec<(String, String, String, Option<i64>)> = explanation
        .requests
        .iter()
        .flat_map(|r| {
            r.devices.iter().map(move |d| {
                (
                    r.request.clone(),
                    r.serves[0].resource.clone(),
                    d.device.clone(),
                    d.numa_node,
                )
            })
        })
        .collect();
    assert_eq!(
        by_request,
        vec![
            (
                "container-0-request-1".into(),
                "example.com/gpu".into(),
                "gpu-1".into(),
                Some(1)
            ),
            (
                "container-0-request-2".into(),
                "example.com/nic".into(),
                "nic-0".into(),
                Some(0)
            ),
        ]
    );
    assert_eq!(explanation.misaligned.len(), 1);
    let kinds: Vec<DraFixKind> = explanation.fixes.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        vec![
            DraFixKind::ExplicitClaim,
            DraFixKind::ExplicitClaim,
            DraFixKind::RemovePods
        ]
    );
    let matched = explanation.fixes[1].changed.as_ref().expect("the template");
    assert_eq!(
        matched["spec"]["spec"]["devices"],
        json!({
            "requests": [
                {"name": "gpu", "exactly": {"deviceClassName": "gpu"}},
                {"name": "nic", "exactly": {"deviceClassName": "nic"}}
            ],
            "constraints": [{"matchAttribute": "resource.kubernetes.io/numaNode"}]
        })
    );
    check_fixes_by_replay(&events, &pod, &explanation);
}

/// The hog's claim holds both GPUs: the special claim gets none, and the
/// reason names the resource, the container and who holds the GPUs.
#[test]
fn an_extended_resource_without_devices_says_why() {
    let events = [hog(2, "{name: g, resourceClaimTemplateName: all-gpus}")];
    let pod = train("example.com/gpu: \"1\"");
    let explanation = explain("1.37", &events, &pod).expect("DRA would serve the pod's GPU");
    assert_eq!(explanation.outcome, "unschedulable");
    assert_eq!(explanation.unsatisfiable.len(), 1, "{:?}", explanation.unsatisfiable);
    let problem = &explanation.unsatisfiable[0];
    assert_eq!(
        (problem.claim.as_str(), problem.request.as_str()),
        ("extended-resources", "container-0-request-1")
    );
    for words in [
        "example.com/gpu of container c",
        "gpu.example.com/gpu-0",
        "gpu.example.com/gpu-1",
        "0 free",
    ] {
        assert!(problem.reason.contains(words), "{words}: {}", problem.reason);
    }
    assert!(explanation.fixes.is_empty());
}

/// Nothing for DRA: 1.35 leaves extended resources to device plugins, no
/// class serves example.com/other, and a node whose allocatable lists
/// example.com/gpu (a device plugin advertises it) keeps it from DRA.
#[test]
fn nothing_to_explain_when_dra_does_not_serve_the_resource() {
    let pod = train("example.com/gpu: \"1\"");
    assert!(explain("1.37", &[], &pod).is_some(), "the other cases' premise");
    assert_eq!(explain("1.35", &[], &pod), None);
    assert_eq!(explain("1.37", &[], &train("example.com/other: \"1\"")), None);
    let advertised = |dra: &mut Value| dra["node"]["status"] = json!({"allocatable": {"example.com/gpu": "2"}});
    assert_eq!(explain_with("1.37", &[], &pod, &advertised), None);
}
