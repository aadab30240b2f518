//! `topoalign explain` on pods that take devices from Dynamic Resource
//! Allocation, run as a user runs it: the example of examples/dra (a GPU
//! and a NIC claimed together while the kubelet can pin the pod's CPUs and
//! memory only to NUMA 1) names the NUMA nodes of both sides, and every
//! claim change it offers is applied to the scenario and replayed through
//! `topoalign replay` — independently of the code that found it — with no
//! MISALIGNED line; the same objects given as Kubernetes manifests with
//! `--dra` give the same answer; malformed manifests are named by file,
//! document and field.

mod agent_support;
mod common;

use agent_support::run_in_repo as run;
use common::{replay_text, yaml_file};
use serde_json::Value;

const NODE: &str = "examples/dra/node.yaml";
const POD: &str = "examples/dra/train.yaml";

fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temp dir")
}

/// The example's explanation document (`-o json`) for the pod.
fn explained(extra: &[&str]) -> Value {
    let mut args = vec!["explain", "--node", NODE, POD, "-o", "json"];
    args.extend_from_slice(extra);
    let (status, stdout, stderr) = run(&args);
    assert_eq!(status, 0, "{stderr}");
    let document: Value = serde_json::from_str(&stdout).expect("JSON");
    document["results"][0].clone()
}

/// `topoalign replay -o text` of the example node with the pod added and
/// the DRA block's object of the same kind and name replaced by `changed`.
fn replay_with(changed: Option<&Value>) -> String {
    let mut scenario = yaml_file(NODE);
    if let Some(changed) = changed {
        let name = changed["metadata"]["name"].clone();
        let list = if changed.pointer("/spec/spec").is_some() {
            "resourceClaimTemplates"
        } else {
            "resourceClaims"
        };
        let objects = scenario["dra"][list].as_array_mut().expect("objects of that kind");
        let slot = objects
            .iter_mut()
            .find(|o| o["metadata"]["name"] == name)
            .expect("the changed object is in the scenario");
        *slot = changed.clone();
    }
    let pod = yaml_file(POD);
    scenario["events"]
        .as_array_mut()
        .expect("events")
        .push(serde_json::json!({ "add": pod }));
    replay_text(&scenario)
}

#[test]
fn the_text_names_both_numa_nodes_and_the_constraint() {
    let (status, stdout, stderr) = run(&["explain", "--node", NODE, POD]);
    assert_eq!(status, 0, "{stderr}");
    assert!(stdout.contains("kubelet CPUs and memory: NUMA 1"), "{stdout}");
    assert!(
        stdout.contains("devices/nic: nic.example.com/node-1/nic-0 on NUMA 0  MISALIGNED"),
        "{stdout}"
    );
    assert!(
        stdout.contains("devices/gpu: gpu.example.com/node-1/gpu-1 on NUMA 1\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("matchAttribute: resource.kubernetes.io/numaNode"),
        "{stdout}"
    );
    assert!(
        stdout.contains("# ResourceClaimTemplate ml/gpu-and-nic: add under spec.spec.devices:"),
        "{stdout}"
    );
}

#[test]
fn every_claim_fix_offered_aligns_when_replayed() {
    let result = explained(&[]);
    let dra = &result["dra"];
    assert_eq!(dra["kubeletNumaNodes"], serde_json::json!([1]), "{dra:#}");
    let misaligned = dra["misaligned"].as_array().expect("misaligned");
    assert_eq!(misaligned.len(), 1, "{dra:#}");
    assert_eq!(misaligned[0]["numaNode"], 0);
    // As given, the replay splits the pod (the test can see a split).
    let before = replay_with(None);
    assert!(before.contains("MISALIGNED ml/train"), "{before}");
    let fixes = dra["fixes"].as_array().expect("fixes");
    let kinds: Vec<&str> = fixes.iter().filter_map(|f| f["kind"].as_str()).collect();
    assert!(kinds.contains(&"constraint"), "{kinds:?}");
    let mut replayed = 0;
    for fix in fixes {
        let Some(changed) = fix.get("changed") else {
            continue;
        };
        let after = replay_with(Some(changed));
        assert!(
            !after.contains("MISALIGNED"),
            "{}: still split when replayed:\n{after}",
            fix["description"]
        );
        replayed += 1;
    }
    assert!(replayed >= 2, "the constraint and the selector fix are replayed");
}

/// The same cluster as Kubernetes manifests: the running pod's GPU claim
/// allocated already (`status.allocation`), the node scenario without a
/// `dra:` block.
#[test]
fn manifests_with_dra_give_the_same_answer() {
    let dir = temp_dir();
    let mut node = yaml_file(NODE);
    let block = node
        .as_object_mut()
        .expect("scenario")
        .remove("dra")
        .expect("dra block");
    // The running pod keeps its CPUs; its claim comes from the manifests.
    node["events"][0]["add"]["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("resourceClaims");
    let node_path = dir.path().join("node.json");
    std::fs::write(&node_path, node.to_string()).expect("write");
    let mut documents = Vec::new();
    let mut push = |kind: &str, mut object: Value| {
        object["apiVersion"] = Value::from(if kind == "Node" { "v1" } else { "resource.k8s.io/v1" });
        object["kind"] = Value::from(kind);
        documents.push(serde_yaml_ng::to_string(&object).expect("YAML"));
    };
    push("Node", block["node"].clone());
    for class in block["deviceClasses"].as_array().expect("classes") {
        push("DeviceClass", class.clone());
    }
    for template in block["resourceClaimTemplates"].as_array().expect("templates") {
        push("ResourceClaimTemplate", template.clone());
    }
    push(
        "ResourceClaim",
        serde_json::json!({
            "metadata": {"name": "infer-gpu", "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-0"}
            ]}}}
        }),
    );
    // The slices as a List, as `kubectl get resourceslices -o yaml` prints.
    let slices: Vec<Value> = block["resourceSlices"]
        .as_array()
        .expect("slices")
        .iter()
        .map(|s| {
            let mut s = s.clone();
            s["apiVersion"] = Value::from("resource.k8s.io/v1");
            s["kind"] = Value::from("ResourceSlice");
            s
        })
        .collect();
    documents.push(
        serde_yaml_ng::to_string(&serde_json::json!({"apiVersion": "v1", "kind": "List", "items": slices}))
            .expect("YAML"),
    );
    let dra_path = dir.path().join("cluster.yaml");
    std::fs::write(&dra_path, documents.join("---\n")).expect("write");
    let (status, stdout, stderr) = run(&[
        "explain",
        "--node",
        node_path.to_str().expect("path"),
        "--dra",
        dra_path.to_str().expect("path"),
        POD,
        "-o",
        "json",
    ]);
    assert_eq!(status, 0, "{stderr}");
    let document: Value = serde_json::from_str(&stdout).expect("JSON");
    let from_manifests = &document["results"][0]["dra"];
    let from_block = &explained(&[])["dra"];
    for field in ["kubeletNumaNodes", "requests", "misaligned"] {
        assert_eq!(from_manifests[field], from_block[field], "{field}");
    }
    let kinds = |dra: &Value| -> Vec<Value> {
        dra["fixes"]
            .as_array()
            .expect("fixes")
            .iter()
            .map(|f| f["kind"].clone())
            .collect()
    };
    // Removing the running pod frees its CPUs but not the claim the
    // manifests hold, so that fix may differ; the claim fixes do not.
    assert!(kinds(from_manifests).contains(&Value::from("constraint")));
    assert!(kinds(from_manifests).contains(&Value::from("selector")));
}

#[test]
fn malformed_manifests_are_named_by_file_document_and_field() {
    let dir = temp_dir();
    let path = dir.path().join("bad.yaml");
    std::fs::write(
        &path,
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: ok}\n---\napiVersion: \
         resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: broken}\nspec: {driver: d, pool: {name: p, \
         generation: one}}\n",
    )
    .expect("write");
    let (status, _, stderr) = run(&["explain", "--node", NODE, "--dra", path.to_str().expect("path"), POD]);
    assert_eq!(status, 2, "{stderr}");
    assert!(
        stderr.contains("bad.yaml: document 2: ResourceSlice broken: spec.pool.generation"),
        "{stderr}"
    );
}
