//! `topoalign explain` on a pod whose plain `example.com/gpu: 1` DRA serves
//! (a DeviceClass's `extendedResourceName`, KEP-5004), run as a user runs
//! it on examples/dra/extended-node.yaml (a pod holds all of NUMA 0's CPUs,
//! so the kubelet can pin the new pod only to NUMA 1, while first-fit DRA
//! takes gpu-0, the first GPU, on NUMA 0). The explicit-claim fix is
//! applied to the scenario — its new ResourceClaimTemplate added, the pod
//! changed as it says — and replayed through `topoalign replay`,
//! independently of the code that found it: no MISALIGNED line.

mod agent_support;
mod common;

use agent_support::run_in_repo as run;
use common::{replay_text, yaml_file};
use serde_json::{Value, json};

const NODE: &str = "examples/dra/extended-node.yaml";
const POD: &str = "examples/dra/extended-train.yaml";

/// `topoalign replay -o text` of the example node with `templates` added
/// and `pod` added last.
fn replay_with(templates: &[Value], pod: &Value) -> String {
    let mut scenario = yaml_file(NODE);
    let dra = scenario["dra"].as_object_mut().expect("a dra block");
    let list = dra.entry("resourceClaimTemplates").or_insert_with(|| json!([]));
    list.as_array_mut().expect("a list").extend(templates.iter().cloned());
    scenario["events"]
        .as_array_mut()
        .expect("events")
        .push(json!({ "add": pod }));
    replay_text(&scenario)
}

#[test]
fn the_text_names_the_resource_its_gpu_and_both_numa_nodes() {
    let (status, stdout, stderr) = run(&["explain", "--node", NODE, POD]);
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.contains("kubelet CPUs and memory: NUMA 1"), "{stdout}");
    assert!(
        stdout.contains(
            "extended-resources/container-0-request-1 (example.com/gpu of container trainer): \
             gpu.example.com/node-1/gpu-0 on NUMA 0  MISALIGNED"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("kind: ResourceClaimTemplate\n"), "{stdout}");
    assert!(stdout.contains("resourceClaimTemplateName: train-devices"), "{stdout}");
    assert!(
        stdout.contains(r#"device.attributes["resource.kubernetes.io"].numaNode == 1"#),
        "{stdout}"
    );
}

#[test]
fn the_explicit_claim_fix_aligns_when_replayed() {
    let (status, stdout, stderr) = run(&["explain", "--node", NODE, POD, "-o", "json"]);
    assert_eq!(status, 0, "{stderr}");
    let document: Value = serde_json::from_str(&stdout).expect("JSON");
    let dra = &document["results"][0]["dra"];
    assert_eq!(dra["kubeletNumaNodes"], json!([1]), "{dra:#}");
    assert_eq!(
        dra["requests"][0]["serves"],
        json!([{"container": "trainer", "resource": "example.com/gpu"}])
    );
    assert_eq!(dra["misaligned"][0]["numaNode"], 0, "{dra:#}");
    // As given, the replay splits the pod.
    let before = replay_with(&[], &yaml_file(POD));
    assert!(before.contains("MISALIGNED ml/train"), "{before}");
    let fixes = dra["fixes"].as_array().expect("fixes");
    let explicit = fixes
        .iter()
        .find(|f| f["kind"] == "explicitClaim")
        .unwrap_or_else(|| panic!("an explicit-claim fix: {fixes:#?}"));
    let after = replay_with(&[explicit["changed"].clone()], &explicit["pod"]);
    assert!(!after.contains("MISALIGNED"), "still split when replayed:\n{after}");
    assert!(after.contains("gpu-1"), "{after}");
    // Moving the running pod is offered too.
    assert!(fixes.iter().any(|f| f["remove"] == json!(["ml/batch"])), "{fixes:#?}");
}
