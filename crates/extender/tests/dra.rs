//! `--dra-align`: pods whose GPUs come from DRA pass only nodes where the
//! scheduler's first-fit allocator and the kubelet's CPU placement meet.
//!
//! The node: 4 NUMA nodes of 4 cores × 2 threads, single-numa-node, static
//! CPU manager, CPU 31 reserved; a DRA driver publishes one GPU per NUMA
//! node, `gpu-<n>` on NUMA node n, in that order. Pods take 6 CPUs: one
//! per NUMA node. A node whose NUMA node 0 runs a CPU-only pod pins the
//! next pod's CPUs elsewhere, while first-fit still gives it `gpu-0`.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use topoalign_extender::dra::{Dra, DraObjects, PodClaims};
use topoalign_extender::{Cluster, ExtenderConfig};

fn fleet(count: u32) -> topoalign_fleet::Fleet {
    let cpus: Vec<Value> = (0..32)
        .map(|id| {
            let core = id % 16;
            json!({"id": id, "core": core, "socket": core / 8, "numa": core / 4})
        })
        .collect();
    let numa: Vec<Value> = (0..4).map(|id| json!({"id": id, "memory": "16Gi"})).collect();
    let text = json!({"nodes": [{"name": "gpu", "count": count,
        "topology": {"numaNodes": numa, "cpus": cpus},
        "kubelet": {"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static", "reservedSystemCPUs": "31"}}]});
    topoalign_fleet::Fleet::parse(&text.to_string(), |_| Err("no files".into())).unwrap()
}

const DRIVER: &str = "gpu.example.com";

fn slice(node: &str) -> Value {
    let devices: Vec<Value> = (0..4)
        .map(|n| json!({"name": format!("gpu-{n}"), "attributes": {"resource.kubernetes.io/numaNode": {"int": n}}}))
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices}})
}

fn claim(name: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}})
}

fn objects(nodes: &[&str], claims: &[&str]) -> DraObjects {
    let mut items = vec![json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu"},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}})];
    items.extend(nodes.iter().map(|n| slice(n)));
    items.extend(claims.iter().map(|c| claim(c)));
    let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap();
    DraObjects::from_manifests(&text).unwrap()
}

/// A Guaranteed 6-CPU pod in `ml`; with `claim`, it takes the GPU of that
/// ResourceClaim.
fn manifest(name: &str, claim: Option<&str>) -> Value {
    let mut manifest = json!({"metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "6", "memory": "1Gi"}}}]}});
    if let Some(claim) = claim {
        manifest["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": claim}]);
        manifest["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
    }
    manifest
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// Two nodes, `gpu-0`'s NUMA node 0 taken by a CPU-only pod.
fn cluster(choose_in_filter: bool, claims: &[&str]) -> (Cluster, Instant) {
    let config = ExtenderConfig {
        choose_in_filter,
        assume_on_prioritize: false,
        assume_timeout: Duration::from_secs(30),
        ..ExtenderConfig::default()
    };
    let mut cluster = Cluster::from_fleet(&fleet(2), config).unwrap();
    let mut dra = Dra::new("1.37", Duration::from_secs(30)).unwrap();
    dra.sync(objects(&["gpu-0", "gpu-1"], claims));
    cluster.enable_dra(dra);
    let now = Instant::now();
    let busy = Cluster::read_pod(&manifest("busy", None)).unwrap();
    cluster.assume(&busy, "gpu-0", now);
    (cluster, now)
}

fn filter(
    cluster: &mut Cluster,
    manifest: &Value,
    candidates: &[&str],
    now: Instant,
) -> topoalign_extender::FilterOutcome {
    let pod = Cluster::read_pod(manifest).unwrap();
    let claims = PodClaims::of_manifest(manifest).unwrap();
    cluster
        .filter_with(&pod, claims.as_ref(), names(candidates), now)
        .unwrap()
}

#[test]
fn a_node_where_first_fit_misses_the_pinned_cpus_fails_naming_both_numa_nodes() {
    let (mut cluster, now) = cluster(false, &["train-gpu"]);
    let outcome = filter(
        &mut cluster,
        &manifest("train", Some("train-gpu")),
        &["gpu-0", "gpu-1"],
        now,
    );
    assert_eq!(outcome.passed, names(&["gpu-1"]));
    let reason = &outcome.failed["gpu-0"];
    // NUMA node 0's CPUs are the busy pod's: the kubelet pins elsewhere,
    // while first-fit takes the first GPU, on NUMA node 0.
    assert!(reason.contains("gpu-0 on NUMA node 0"), "{reason}");
    assert!(
        reason.contains("the kubelet pins the pod's CPUs and memory on NUMA node"),
        "{reason}"
    );
    assert!(!reason.ends_with("NUMA node 0"), "{reason}");
}

#[test]
fn without_dra_align_or_claims_nothing_changes() {
    let (mut cluster, now) = cluster(false, &["train-gpu"]);
    let outcome = filter(&mut cluster, &manifest("cpu-only", None), &["gpu-0", "gpu-1"], now);
    assert_eq!(outcome.passed, names(&["gpu-0", "gpu-1"]));
    let config = ExtenderConfig::default();
    let mut plain = Cluster::from_fleet(&fleet(2), config).unwrap();
    let busy = Cluster::read_pod(&manifest("busy", None)).unwrap();
    plain.assume(&busy, "gpu-0", now);
    let manifest = manifest("train", Some("train-gpu"));
    let pod = Cluster::read_pod(&manifest).unwrap();
    let claims = PodClaims::of_manifest(&manifest).unwrap();
    let outcome = plain
        .filter_with(&pod, claims.as_ref(), names(&["gpu-0", "gpu-1"]), now)
        .unwrap();
    assert_eq!(
        outcome.passed,
        names(&["gpu-0", "gpu-1"]),
        "--dra-align is off by default"
    );
}

#[test]
fn choose_in_filter_chooses_an_aligned_node_and_counts_the_devices_it_assumed() {
    let (mut cluster, now) = cluster(true, &["a-gpu", "b-gpu"]);
    let first = filter(&mut cluster, &manifest("a", Some("a-gpu")), &["gpu-0", "gpu-1"], now);
    assert_eq!(first.passed, names(&["gpu-1"]));
    assert_eq!(
        cluster
            .dra_mut()
            .unwrap()
            .assumptions()
            .get("ml/a-gpu")
            .map(String::as_str),
        Some("gpu-1")
    );
    // On gpu-1 the first pod holds NUMA node 0's CPUs and (assumed) gpu-0:
    // the next pod's CPUs and first-fit GPU both move to NUMA node 1. Were
    // the assumed GPU not counted, first-fit would give gpu-0 again and no
    // node would pass.
    let second = filter(&mut cluster, &manifest("b", Some("b-gpu")), &["gpu-0", "gpu-1"], now);
    assert_eq!(second.passed, names(&["gpu-1"]), "{second:?}");
    assert!(second.failed.contains_key("gpu-0"));
}

#[test]
fn an_allocation_the_cluster_shows_replaces_the_assumed_one() {
    let (mut cluster, now) = cluster(true, &["a-gpu"]);
    filter(&mut cluster, &manifest("a", Some("a-gpu")), &["gpu-0", "gpu-1"], now);
    let mut listed = objects(&["gpu-0", "gpu-1"], &["a-gpu"]);
    let allocation =
        json!({"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "gpu-1", "device": "gpu-0"}]}});
    listed.resource_claims[0].status = Some(serde_json::from_value(json!({"allocation": allocation})).unwrap());
    cluster.dra_mut().unwrap().sync(listed);
    assert!(cluster.dra_mut().unwrap().assumptions().is_empty());
}

#[test]
fn a_claim_not_created_yet_is_not_decidable() {
    let (mut cluster, now) = cluster(false, &[]);
    let mut pod = manifest("t", None);
    pod["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]);
    let outcome = filter(&mut cluster, &pod, &["gpu-0", "gpu-1", "unknown"], now);
    assert_eq!(outcome.passed, names(&["unknown"]), "an unknown node passes through");
    for node in ["gpu-0", "gpu-1"] {
        assert!(outcome.failed[node].contains("not created yet"), "{:?}", outcome.failed);
    }
    // The controller's name for it, not seen yet by the extender.
    pod["status"] = json!({"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "t-gpu-x7k2p"}]});
    let outcome = filter(&mut cluster, &pod, &["gpu-1"], now);
    assert!(
        outcome.failed["gpu-1"].contains("ml/t-gpu-x7k2p"),
        "{:?}",
        outcome.failed
    );
}

#[test]
fn a_template_claim_is_found_by_the_name_in_the_pod_status() {
    let (mut cluster, now) = cluster(false, &["t-gpu-x7k2p"]);
    let mut pod = manifest("t", None);
    pod["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]);
    pod["status"] = json!({"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "t-gpu-x7k2p"}]});
    let outcome = filter(&mut cluster, &pod, &["gpu-0", "gpu-1"], now);
    assert_eq!(outcome.passed, names(&["gpu-1"]), "{outcome:?}");
}

#[test]
fn prioritize_scores_a_misaligned_node_zero() {
    let (mut cluster, now) = cluster(false, &["train-gpu"]);
    let manifest = manifest("train", Some("train-gpu"));
    let pod = Cluster::read_pod(&manifest).unwrap();
    let claims = PodClaims::of_manifest(&manifest).unwrap();
    let scores = cluster
        .prioritize_with(&pod, claims.as_ref(), names(&["gpu-0", "gpu-1"]), now)
        .unwrap();
    assert_eq!(scores[0], ("gpu-0".to_string(), 0));
    assert!(scores[1].1 > 0, "{scores:?}");
}

#[test]
fn judge_passes_when_nothing_is_pinned() {
    let mut dra = Dra::new("1.37", Duration::from_secs(30)).unwrap();
    dra.sync(objects(&["gpu-0"], &["c"]));
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(manifest("p", Some("c"))).unwrap();
    let claims = PodClaims::of_pod(&pod).unwrap();
    let judgement = dra.judge(&claims, "gpu-0", &BTreeSet::new());
    assert_eq!(judgement.verdict, Ok(()));
    let devices = judgement.devices.unwrap();
    assert_eq!(devices.claims[0].devices[0].numa_node, Some(0));
    assert!(Dra::new("1.20", Duration::from_secs(1)).is_err());
}
