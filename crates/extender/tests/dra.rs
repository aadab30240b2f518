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

/// A node group of `numa` NUMA nodes of 4 cores × 2 threads (core c's
/// threads are c and c + 4·`numa`; NUMA node = core / 4; two sockets),
/// 16Gi each, single-numa-node, static CPU manager, the last CPU
/// reserved; `devices`: its device-plugin devices.
fn group(name: &str, count: u32, numa: usize, devices: Option<Value>) -> Value {
    let cores = 4 * numa;
    let cpus: Vec<Value> = (0..2 * cores)
        .map(|id| {
            let core = id % cores;
            json!({"id": id, "core": core, "socket": core / (cores / 2), "numa": core / 4})
        })
        .collect();
    let numa_nodes: Vec<Value> = (0..numa).map(|id| json!({"id": id, "memory": "16Gi"})).collect();
    let mut topology = json!({"numaNodes": numa_nodes, "cpus": cpus});
    if let Some(devices) = devices {
        topology["devices"] = devices;
    }
    json!({"name": name, "count": count, "topology": topology,
        "kubelet": {"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static",
            "reservedSystemCPUs": (2 * cores - 1).to_string()}})
}

fn fleet_of(groups: Vec<Value>) -> topoalign_fleet::Fleet {
    let text = json!({ "nodes": groups });
    topoalign_fleet::Fleet::parse(&text.to_string(), |_| Err("no files".into())).unwrap()
}

/// `count` 4-NUMA nodes `gpu-<i>`.
fn fleet(count: u32) -> topoalign_fleet::Fleet {
    fleet_of(vec![group("gpu", count, 4, None)])
}

const DRIVER: &str = "gpu.example.com";

/// The driver's slice on `node`: `gpu-<n>` on NUMA node n, for n below
/// `gpus`, in that order.
fn slice(node: &str, gpus: i64) -> Value {
    let devices: Vec<Value> = (0..gpus)
        .map(|n| json!({"name": format!("gpu-{n}"), "attributes": {"resource.kubernetes.io/numaNode": {"int": n}}}))
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices}})
}

/// The DeviceClass `name` of the driver's devices; with `extended`, it
/// serves that extended resource too.
fn device_class(name: &str, extended: Option<&str>) -> Value {
    let mut class = json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": format!("device.driver == \"{DRIVER}\"")}}]}});
    if let Some(resource) = extended {
        class["spec"]["extendedResourceName"] = json!(resource);
    }
    class
}

/// `class`, the slices of `nodes` (`gpus` each) and `more` objects, as a
/// listing gives them.
fn listing(class: Value, nodes: &[&str], gpus: i64, more: Vec<Value>) -> DraObjects {
    let mut items = vec![class];
    items.extend(nodes.iter().map(|n| slice(n, gpus)));
    items.extend(more);
    let text = serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items})).unwrap();
    DraObjects::from_manifests(&text).unwrap()
}

fn claim(name: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}})
}

fn objects(nodes: &[&str], claims: &[&str]) -> DraObjects {
    listing(
        device_class("gpu", None),
        nodes,
        4,
        claims.iter().map(|c| claim(c)).collect(),
    )
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

/// The extender on `fleet` with the DRA objects `objects` (the allocator
/// of `release`), each of `busy` (a pod's manifest, its node) assumed.
fn extender(
    fleet: &topoalign_fleet::Fleet,
    release: &str,
    choose_in_filter: bool,
    objects: DraObjects,
    busy: &[(Value, &str)],
) -> (Cluster, Instant) {
    let config = ExtenderConfig {
        choose_in_filter,
        assume_on_prioritize: false,
        assume_timeout: Duration::from_secs(30),
        ..ExtenderConfig::default()
    };
    let mut cluster = Cluster::from_fleet(fleet, config).unwrap();
    let mut dra = Dra::new(release, Duration::from_secs(30)).unwrap();
    dra.sync(objects);
    cluster.enable_dra(dra);
    let now = Instant::now();
    for (manifest, node) in busy {
        cluster.assume(&Cluster::read_pod(manifest).unwrap(), node, now);
    }
    (cluster, now)
}

/// Two nodes, `gpu-0`'s NUMA node 0 taken by a CPU-only pod.
fn cluster(choose_in_filter: bool, claims: &[&str]) -> (Cluster, Instant) {
    extender(
        &fleet(2),
        "1.37",
        choose_in_filter,
        objects(&["gpu-0", "gpu-1"], claims),
        &[(manifest("busy", None), "gpu-0")],
    )
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

/// DRA-backed extended resources (KEP-5004, on by default from 1.36): a
/// pod's plain `example.com/gpu: 1`, served by the DeviceClass naming it in
/// `extendedResourceName` on a node whose allocatable lacks it.
///
/// The nodes: 2 NUMA nodes of 4 cores × 2 threads (CPUs 0-3 and 8-11 on
/// NUMA node 0, 4-7 and 12-15 on NUMA node 1), single-numa-node, static
/// CPU manager, CPU 15 reserved; `ext-0` and `ext-1` have no device plugin,
/// `plug-0` has one GPU per NUMA node from a device plugin. A driver
/// publishes `gpu-0` (NUMA node 0) and `gpu-1` (NUMA node 1) on every
/// node, in that order. A CPU-only 6-CPU pod sits on NUMA node 0 of
/// `ext-0` and `plug-0` (both NUMA nodes fit it; the kubelet takes the
/// lower), leaving 2 CPUs there, so a 6-CPU pod is pinned to NUMA node 1
/// there and to NUMA node 0 on the empty `ext-1`. The scheduler's
/// first-fit allocator gives the special claim `gpu-0` where nothing holds
/// it.
mod extended_resources {
    use super::*;

    const RESOURCE: &str = "example.com/gpu";

    fn fleet() -> topoalign_fleet::Fleet {
        let gpus = json!({RESOURCE: [{"id": "dp-gpu0", "numa": [0]}, {"id": "dp-gpu1", "numa": [1]}]});
        fleet_of(vec![group("ext", 2, 2, None), group("plug", 1, 2, Some(gpus))])
    }

    /// The class serving `example.com/gpu`, the slices of `nodes`, and
    /// `more` objects (a Node, claims).
    fn objects(nodes: &[&str], more: Vec<Value>) -> DraObjects {
        listing(device_class(DRIVER, Some(RESOURCE)), nodes, 2, more)
    }

    /// A Guaranteed 6-CPU pod in `ml` taking one `example.com/gpu`.
    fn manifest(name: &str) -> Value {
        json!({"metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}")},
            "spec": {"containers": [{"name": "app",
                "resources": {"limits": {"cpu": "6", "memory": "1Gi", RESOURCE: "1"}}}]}})
    }

    fn cluster(release: &str, choose_in_filter: bool, more: Vec<Value>) -> (Cluster, Instant) {
        extender(
            &fleet(),
            release,
            choose_in_filter,
            objects(&["ext-0", "ext-1", "plug-0"], more),
            &[
                (super::manifest("busy", None), "ext-0"),
                (super::manifest("busy-plug", None), "plug-0"),
            ],
        )
    }

    const CANDIDATES: [&str; 2] = ["ext-0", "ext-1"];

    #[test]
    fn the_node_passes_only_where_the_special_claims_device_meets_the_pinned_cpus() {
        let (mut cluster, now) = cluster("1.37", false, Vec::new());
        let outcome = filter(&mut cluster, &manifest("train"), &CANDIDATES, now);
        assert_eq!(outcome.passed, names(&["ext-1"]), "{outcome:?}");
        let reason = &outcome.failed["ext-0"];
        // The special claim's one request: container 0's, the resource the
        // second of its sorted request names (cpu, example.com/gpu, memory).
        assert!(
            reason.contains("extended-resources/container-0-request-1: gpu-0 on NUMA node 0"),
            "{reason}"
        );
        assert!(
            reason.ends_with("the kubelet pins the pod's CPUs and memory on NUMA node 1"),
            "{reason}"
        );
    }

    #[test]
    fn prioritize_scores_the_misaligned_node_zero() {
        let (mut cluster, now) = cluster("1.37", false, Vec::new());
        let manifest = manifest("train");
        let pod = Cluster::read_pod(&manifest).unwrap();
        let claims = PodClaims::of_manifest(&manifest).unwrap();
        assert!(claims.is_some(), "a pod with an extended resource is one DRA may serve");
        let scores = cluster
            .prioritize_with(&pod, claims.as_ref(), names(&CANDIDATES), now)
            .unwrap();
        assert_eq!(scores[0], ("ext-0".to_string(), 0));
        assert!(scores[1].1 > 0, "{scores:?}");
    }

    #[test]
    fn where_a_device_plugin_serves_the_resource_dra_does_not() {
        // plug-0's machine has device-plugin GPUs: the kubelet advertises
        // example.com/gpu there, so the scheduler leaves it to the device
        // manager (which aligns it with the CPUs) and DRA allocates nothing.
        let (mut machines, now) = cluster("1.37", false, Vec::new());
        let outcome = filter(&mut machines, &manifest("train"), &["ext-0", "plug-0"], now);
        assert_eq!(outcome.passed, names(&["plug-0"]), "{outcome:?}");
        // The same from the Node object's allocatable, as the API server
        // lists it.
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "ext-0"},
            "status": {"allocatable": {RESOURCE: "2"}}});
        let (mut listed, now) = cluster("1.37", false, vec![node]);
        let outcome = filter(&mut listed, &manifest("train"), &CANDIDATES, now);
        assert_eq!(outcome.passed, names(&CANDIDATES), "{outcome:?}");
    }

    #[test]
    fn release_1_35_leaves_extended_resources_to_device_plugins() {
        let (mut cluster, now) = cluster("1.35", false, Vec::new());
        let outcome = filter(&mut cluster, &manifest("train"), &CANDIDATES, now);
        assert_eq!(outcome.passed, names(&CANDIDATES), "DRAExtendedResource is off in 1.35");
    }

    #[test]
    fn choose_in_filter_assumes_the_special_claims_device() {
        let (mut cluster, now) = cluster("1.37", true, Vec::new());
        let first = filter(&mut cluster, &manifest("a"), &CANDIDATES, now);
        assert_eq!(first.passed, names(&["ext-1"]), "{first:?}");
        assert_eq!(
            cluster
                .dra_mut()
                .unwrap()
                .assumptions()
                .get("ml/a-extended-resources")
                .map(String::as_str),
            Some("ext-1")
        );
        // On ext-1, a holds NUMA node 0's CPUs and (assumed) gpu-0: the next
        // pod's CPUs go to NUMA node 1 and first-fit gives it gpu-1 there.
        // Were the assumed GPU not counted, it would get gpu-0 and no node
        // would pass.
        let second = filter(&mut cluster, &manifest("b"), &CANDIDATES, now);
        assert_eq!(second.passed, names(&["ext-1"]), "{second:?}");
        // A listing without the pod's real claim keeps the assumption.
        cluster
            .dra_mut()
            .unwrap()
            .sync(objects(&["ext-0", "ext-1", "plug-0"], Vec::new()));
        assert!(
            cluster
                .dra_mut()
                .unwrap()
                .assumptions()
                .contains_key("ml/a-extended-resources")
        );
        // The scheduler's claim for the pod, allocated: the assumption goes.
        let real = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "a-extended-resources-x7k2p", "namespace": "ml",
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": "uid-a", "controller": true}]},
            "spec": {"devices": {"requests": [{"name": "container-0-request-1",
                "exactly": {"deviceClassName": "gpu.example.com"}}]}},
            "status": {"allocation": {"devices": {"results": [{"request": "container-0-request-1",
                "driver": DRIVER, "pool": "ext-1", "device": "gpu-0"}]}}}});
        cluster
            .dra_mut()
            .unwrap()
            .sync(objects(&["ext-0", "ext-1", "plug-0"], vec![real]));
        let left = cluster.dra_mut().unwrap().assumptions();
        assert!(!left.contains_key("ml/a-extended-resources"), "{left:?}");
    }

    /// The special claim `name` the scheduler made for pod `pod` (uid
    /// `uid-<pod>`; `owned`: with the pod as its controller), allocated
    /// `gpu-0` of `node`.
    fn special(name: &str, pod: &str, owned: bool, node: &str) -> Value {
        let mut claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "ml",
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"}},
            "spec": {"devices": {"requests": [{"name": "container-0-request-1",
                "exactly": {"deviceClassName": DRIVER}}]}},
            "status": {"allocation": {"devices": {"results": [{"request": "container-0-request-1",
                "driver": DRIVER, "pool": node, "device": "gpu-0"}]}}}});
        if owned {
            claim["metadata"]["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": format!("uid-{pod}"), "controller": true}]);
        }
        claim
    }

    /// `manifest(name)` as the scheduler left it after a cycle whose
    /// binding failed: its special claim `claim` named in
    /// `status.extendedResourceClaimStatus`.
    fn retried(name: &str, claim: &str) -> Value {
        let mut pod = manifest(name);
        pod["status"] = json!({"extendedResourceClaimStatus": {"resourceClaimName": claim,
            "requestMappings": [{"containerName": "app", "resourceName": RESOURCE,
                "requestName": "container-0-request-1"}]}});
        pod
    }

    #[test]
    fn a_retried_pods_own_special_claim_holds_nothing_against_it() {
        // An earlier cycle gave a's special claim gpu-0 of ext-1, then the
        // binding failed. The scheduler deletes that claim before it
        // places a again (PreFilter finds it, Filter refuses every node,
        // PostFilter deletes it); the extender's listing may still show
        // it. On the empty ext-1 the kubelet pins NUMA node 0 and
        // first-fit gives gpu-0 again: aligned. Were the claim counted,
        // first-fit would give gpu-1 (NUMA node 1) and no node would pass.
        let earlier = "a-extended-resources-x7k2p";
        for (pod, owned) in [
            (retried("a", earlier), false), // named in the pod's status alone
            (manifest("a"), true),          // controlled by the pod alone
            (retried("a", earlier), true),  // both, as the scheduler leaves it
        ] {
            let (mut cluster, now) = cluster("1.37", false, vec![special(earlier, "a", owned, "ext-1")]);
            let outcome = filter(&mut cluster, &pod, &CANDIDATES, now);
            assert_eq!(outcome.passed, names(&["ext-1"]), "owned: {owned}, {outcome:?}");
        }
        // Another pod's special claim does hold gpu-0 of ext-1.
        let (mut cluster, now) = cluster(
            "1.37",
            false,
            vec![special("b-extended-resources-m4n5b", "b", true, "ext-1")],
        );
        let outcome = filter(&mut cluster, &retried("a", earlier), &CANDIDATES, now);
        assert!(outcome.passed.is_empty(), "{outcome:?}");
        assert!(
            outcome.failed["ext-1"].contains("gpu-1 on NUMA node 1"),
            "{:?}",
            outcome.failed
        );
    }

    #[test]
    fn a_retried_pods_earlier_special_claim_does_not_confirm_the_new_assumption() {
        let earlier = "a-extended-resources-x7k2p";
        let (mut cluster, now) = cluster("1.37", true, vec![special(earlier, "a", true, "ext-1")]);
        let outcome = filter(&mut cluster, &retried("a", earlier), &CANDIDATES, now);
        assert_eq!(outcome.passed, names(&["ext-1"]), "{outcome:?}");
        let assumed = |cluster: &mut Cluster| {
            cluster
                .dra_mut()
                .unwrap()
                .assumptions()
                .contains_key("ml/a-extended-resources")
        };
        assert!(assumed(&mut cluster));
        // A listing from before the scheduler deleted the earlier claim.
        let nodes = ["ext-0", "ext-1", "plug-0"];
        let stale = objects(&nodes, vec![special(earlier, "a", true, "ext-1")]);
        cluster.dra_mut().unwrap().sync(stale);
        assert!(assumed(&mut cluster), "the earlier claim confirmed the new assumption");
        // The scheduler's new claim for the pod, allocated.
        let new = objects(&nodes, vec![special("a-extended-resources-q9z8r", "a", true, "ext-1")]);
        cluster.dra_mut().unwrap().sync(new);
        assert!(!assumed(&mut cluster));
    }
}
