//! A cluster made of API objects as the API server returns them: Nodes,
//! NodeResourceTopology objects written by `topoalign_nrt::build` from an
//! engine node (as the follower and the simulated kubelets publish them),
//! and pods. Every expectation about admission is checked against the
//! engine again, never written down from its answers.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node as K8sNode, Pod as K8sPod};
use serde_json::json;
use topoalign_cluster::{ClusterFix, NodeSource, Objects, PodState, TopologyObject, Verdict, build};
use topoalign_engine::Node;
use topoalign_nrt::{BuildOptions, NodeSpec};

/// examples/nodes/two-numa.yaml: two NUMA nodes of 8 CPUs, CPU 0 reserved,
/// single-numa-node.
fn spec() -> NodeSpec {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/nodes/two-numa.yaml"
    ))
    .expect("examples/nodes/two-numa.yaml");
    let scenario = topoalign_scenario::Scenario::parse(&text).expect("scenario");
    NodeSpec {
        topology: scenario.topology,
        kubelet: scenario.kubelet,
    }
}

fn k8s_node(name: &str) -> K8sNode {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .expect("node")
}

/// A Guaranteed pod of `cpus` CPUs and 2Gi, at `priority`, in `phase`
/// (with `reason`) on `node`.
fn pod(name: &str, cpus: u32, priority: i32, node: Option<&str>, phase: &str, reason: Option<&str>) -> K8sPod {
    let resources = json!({"cpu": cpus.to_string(), "memory": "2Gi"});
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": {
            "nodeName": node,
            "priority": priority,
            "containers": [{"name": "app", "image": "pause", "resources": {"requests": resources, "limits": resources}}],
        },
        "status": {"phase": phase, "reason": reason},
    }))
    .expect("pod")
}

/// The engine node of `spec` after admitting `pods` (each must be admitted).
fn node_holding(spec: &NodeSpec, pods: &[&K8sPod]) -> Node {
    let mut node = topoalign_nrt::start_node(spec).expect("start");
    for pod in pods {
        let uid = pod.metadata.uid.clone().unwrap_or_default();
        let decision = node.admit(topoalign_k8s::pod_from_k8s(pod, &uid).expect("pod"));
        assert!(decision.admitted(), "setup: {decision:?}");
    }
    node
}

fn exact_object(name: &str, spec: &NodeSpec, node: &Node) -> TopologyObject {
    TopologyObject {
        name: name.to_owned(),
        object: Ok(topoalign_nrt::build(
            name,
            node,
            BuildOptions {
                exact_state: Some(spec),
            },
        )),
        updated: None,
    }
}

fn now() -> Timestamp {
    Timestamp::UNIX_EPOCH
}

#[test]
fn each_node_says_how_its_state_is_known() {
    let spec = spec();
    let empty = topoalign_nrt::start_node(&spec).expect("start");
    let mut approximate = topoalign_nrt::build(
        "b",
        &empty,
        BuildOptions {
            exact_state: Some(&spec),
        },
    );
    approximate.attributes.retain(|a| !a.name.starts_with("topoalign.io/"));
    let objects = Objects {
        nodes: ["a", "b", "c", "d", "e"].map(k8s_node).to_vec(),
        topologies: vec![
            exact_object("a", &spec, &empty),
            TopologyObject {
                name: "b".into(),
                object: Ok(approximate),
                updated: None,
            },
            TopologyObject {
                name: "c".into(),
                object: Ok(topoalign_nrt::unknown("c", "the checkpoints and PodResources disagree")),
                updated: None,
            },
            TopologyObject {
                name: "e".into(),
                object: Err(topoalign_cluster::UnreadableObject::new(
                    "e",
                    serde_json::from_str::<topoalign_nrt::NodeResourceTopology>("1").expect_err("not an object"),
                )),
                updated: None,
            },
        ],
        pods: Vec::new(),
        ..Objects::default()
    };
    let snapshot = build(objects, now());
    let kinds: Vec<(&str, &str)> = snapshot
        .nodes
        .iter()
        .map(|n| {
            let kind = match &n.source {
                NodeSource::Exact(_) => "exact",
                NodeSource::Approximate(_) => "approximate",
                NodeSource::Unknown { .. } => "unknown",
                NodeSource::Missing => "missing",
                NodeSource::Unreadable { .. } => "unreadable",
            };
            (n.name.as_str(), kind)
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("a", "exact"),
            ("b", "approximate"),
            ("c", "unknown"),
            ("d", "missing"),
            ("e", "unreadable")
        ]
    );
    assert!(snapshot.nodes[2].source_words().contains("disagree"));
    assert!(snapshot.nodes.iter().all(|n| n.ready));
}

#[test]
fn an_exact_state_behind_the_api_server_is_stale_and_holdings_carry_priorities() {
    let spec = spec();
    let a = pod("a", 4, 100, Some("n"), "Running", None);
    let late = pod("late", 2, 0, Some("n"), "Running", None);
    let gone = pod("gone", 2, 0, Some("n"), "Running", None);
    // The object holds a and gone; the API server has a and late.
    let node = node_holding(&spec, &[&a, &gone]);
    let objects = Objects {
        nodes: vec![k8s_node("n")],
        topologies: vec![exact_object("n", &spec, &node)],
        pods: vec![a.clone(), late],
        ..Objects::default()
    };
    let snapshot = build(objects, now());
    let n = &snapshot.nodes[0];
    assert_eq!(n.stale.len(), 2, "{:?}", n.stale);
    assert!(
        n.stale[0].contains("ns/late") && n.stale[1].contains("ns/gone"),
        "{:?}",
        n.stale
    );
    let held: Vec<(&str, i32)> = n.holdings.iter().map(|h| (h.pod.as_str(), h.priority)).collect();
    assert_eq!(held, [("ns/a", 100), ("ns/gone", 0)]);
    let cpus = n.holdings[0].containers[0].cpus.as_ref().expect("exclusive CPUs");
    assert_eq!(cpus.len(), 4);
    assert_eq!(
        n.holdings[0].numa.len(),
        1,
        "a single-numa-node pod sits on one NUMA node"
    );
}

/// The first node full but for one CPU per NUMA node, the second empty:
/// a 2-CPU pod Failed on the first goes to the second as it is.
#[test]
fn a_pod_rejected_by_admission_is_sent_to_a_node_that_admits_it() {
    let spec = spec();
    let fill_a = pod("fill-a", 7, 0, Some("one"), "Running", None);
    let fill_b = pod("fill-b", 7, 0, Some("one"), "Running", None);
    let want = pod("want", 2, 0, Some("one"), "Failed", Some("TopologyAffinityError"));
    let one = node_holding(&spec, &[&fill_a, &fill_b]);
    let two = node_holding(&spec, &[]);
    let objects = Objects {
        nodes: vec![k8s_node("one"), k8s_node("two")],
        topologies: vec![exact_object("one", &spec, &one), exact_object("two", &spec, &two)],
        pods: vec![fill_a, fill_b, want.clone()],
        ..Objects::default()
    };
    let snapshot = build(objects, now());
    let asked = snapshot.pod("ns", "want").expect("pod");
    assert_eq!(
        asked.state,
        PodState::Rejected {
            reason: "TopologyAffinityError".into()
        }
    );
    let answer = topoalign_cluster::explain_pod(&snapshot, asked);
    let model = asked.pod.as_ref().expect("readable");
    // Each verdict is the engine's on that node.
    for verdict in &answer.nodes {
        let engine = &snapshot
            .node(&verdict.node)
            .and_then(|n| n.exact())
            .expect("exact")
            .node;
        let admitted = engine.try_admit(model).decision.admitted();
        assert_eq!(
            matches!(verdict.verdict, Verdict::Admitted { .. }),
            admitted,
            "{}",
            verdict.node
        );
        if let Verdict::Rejected { explanation, line } = &verdict.verdict {
            assert!(line.starts_with("TopologyAffinityError"), "{line}");
            assert!(!explanation.summary.is_empty());
        }
    }
    let Some(ClusterFix::Node { node, .. }) = &answer.fix else {
        panic!("{:?}", answer.fix)
    };
    assert_eq!(node, "two");
    assert!(answer.fix.as_ref().expect("fix").words().contains("spec.nodeName: two"));
}

/// Every node full: the fewest evictions, never of a pod of higher
/// priority than the pod's, verified by admitting it without them.
#[test]
fn with_every_node_full_the_fewest_evictions_of_lower_priority_pods() {
    let spec = spec();
    // Node one: two high-priority pods; node two: two low-priority ones.
    let hi_a = pod("hi-a", 7, 1000, Some("one"), "Running", None);
    let hi_b = pod("hi-b", 7, 1000, Some("one"), "Running", None);
    let lo_a = pod("lo-a", 7, 10, Some("two"), "Running", None);
    let lo_b = pod("lo-b", 7, 10, Some("two"), "Running", None);
    let big = pod("big", 7, 500, None, "Pending", None);
    let one = node_holding(&spec, &[&hi_a, &hi_b]);
    let two = node_holding(&spec, &[&lo_a, &lo_b]);
    let objects = Objects {
        nodes: vec![k8s_node("one"), k8s_node("two")],
        topologies: vec![exact_object("one", &spec, &one), exact_object("two", &spec, &two)],
        pods: vec![hi_a, hi_b, lo_a, lo_b, big],
        ..Objects::default()
    };
    let snapshot = build(objects, now());
    let asked = snapshot.pod("ns", "big").expect("pod");
    assert_eq!(asked.state, PodState::Unscheduled);
    let answer = topoalign_cluster::explain_pod(&snapshot, asked);
    assert!(
        answer
            .nodes
            .iter()
            .all(|v| matches!(v.verdict, Verdict::Rejected { .. }))
    );
    let Some(ClusterFix::Evict { node, evict, .. }) = &answer.fix else {
        panic!("{:?}", answer.fix)
    };
    assert_eq!(node, "two", "the high-priority pods are never evicted for it");
    assert_eq!(evict.len(), 1);
    assert!(evict.iter().all(|e| e.priority <= asked.priority));
    // Re-checked here: without the evicted pod the node admits it.
    let mut engine = snapshot
        .node("two")
        .and_then(|n| n.exact())
        .expect("exact")
        .node
        .clone();
    let uid = snapshot
        .node("two")
        .expect("two")
        .holdings
        .iter()
        .find(|h| h.pod == evict[0].pod)
        .expect("held")
        .uid
        .clone();
    assert!(engine.remove(&uid));
    assert!(engine.admit(asked.pod.clone().expect("readable")).admitted());
}

/// The answer's rule is priority *at most* the pod's, not kube-scheduler
/// preemption's (and `topoalign defrag`'s) *strictly lower*: a person
/// acts on it, and in a cluster without PriorityClasses every pod is 0,
/// where strictly lower would never propose an eviction. A lower-priority
/// set is still preferred to a set of peers of the same size.
#[test]
fn evictions_may_take_pods_of_the_same_priority_but_lower_ones_first() {
    let spec = spec();
    let answer_with = |held: [(&str, i32); 2]| {
        let held = held.map(|(name, priority)| pod(name, 7, priority, Some("one"), "Running", None));
        let big = pod("big", 7, 0, None, "Pending", None);
        let one = node_holding(&spec, &[&held[0], &held[1]]);
        let [a, b] = held;
        let objects = Objects {
            nodes: vec![k8s_node("one")],
            topologies: vec![exact_object("one", &spec, &one)],
            pods: vec![a, b, big],
            ..Objects::default()
        };
        let snapshot = build(objects, now());
        let asked = snapshot.pod("ns", "big").expect("pod");
        topoalign_cluster::explain_pod(&snapshot, asked).fix
    };
    // Only peers (no PriorityClasses): one of them, the first by name.
    let Some(ClusterFix::Evict { evict, .. }) = answer_with([("peer-a", 0), ("peer-b", 0)]) else {
        panic!("an eviction of a pod of the same priority")
    };
    let evicted: Vec<(&str, i32)> = evict.iter().map(|e| (e.pod.as_str(), e.priority)).collect();
    assert_eq!(evicted, [("ns/peer-a", 0)]);
    // A peer and a lower pod: the lower one.
    let Some(ClusterFix::Evict { evict, .. }) = answer_with([("peer", 0), ("low", -5)]) else {
        panic!("an eviction")
    };
    let evicted: Vec<(&str, i32)> = evict.iter().map(|e| (e.pod.as_str(), e.priority)).collect();
    assert_eq!(evicted, [("ns/low", -5)]);
    // A more important pod is never proposed.
    let fix = answer_with([("hi-a", 10), ("hi-b", 10)]);
    assert!(!matches!(fix, Some(ClusterFix::Evict { .. })), "{fix:?}");
}

#[test]
fn free_capacity_no_waiting_pod_can_use_is_stranded() {
    let spec = spec();
    let fill_a = pod("fill-a", 7, 0, Some("one"), "Running", None);
    let fill_b = pod("fill-b", 7, 0, Some("one"), "Running", None);
    let want = pod("want", 2, 0, None, "Pending", None);
    let one = node_holding(&spec, &[&fill_a, &fill_b]);
    let two = node_holding(&spec, &[]);
    let objects = Objects {
        nodes: vec![k8s_node("one"), k8s_node("two")],
        topologies: vec![exact_object("one", &spec, &one), exact_object("two", &spec, &two)],
        pods: vec![fill_a, fill_b, want],
        ..Objects::default()
    };
    let snapshot = build(objects, now());
    let views = topoalign_cluster::nodes_view(&snapshot);
    assert_eq!(views[0].stranded_for, ["ns/want"]);
    assert!(views[0].numa.iter().any(|n| n.stranded), "its free CPUs are stranded");
    assert!(views[1].stranded_for.is_empty(), "the empty node admits the pod");
    let holders: Vec<&str> = views[0]
        .numa
        .iter()
        .flat_map(|n| n.held.iter().map(|h| h.pod.as_str()))
        .collect();
    assert_eq!(holders.len(), 2, "{holders:?}");
    // Free per NUMA node is the simulator's (fleet::stranded::node_free),
    // here the engine's exclusive CPUs left (the node's requests do not cap
    // them).
    for (view, usage) in views[0].numa.iter().zip(one.numa_usage()) {
        assert_eq!(view.free.get("cpu"), Some(&usage.available("cpu").to_string()));
    }
}

/// The cluster's DRA objects as the API server lists them: a GPU DeviceClass
/// and, per node named, a slice of two GPUs (`gpu-0` on NUMA 0, `gpu-1` on
/// NUMA 1); `held` are `(claim, node, device, pod uid)` of allocated claims
/// reserved for that pod, `pending` unallocated claims of one GPU.
fn dra_objects(
    nodes: &[&str],
    held: &[(&str, &str, &str, &str)],
    pending: &[&str],
) -> topoalign_scenario::dra::DraSpec {
    let class = json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]},
    });
    let slices = nodes.iter().map(|node| {
        json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": format!("{node}-gpus")},
            "spec": {
                "driver": "gpu.example.com", "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": "gpu-0", "attributes": {"resource.kubernetes.io/numaNode": {"int": 0}}},
                    {"name": "gpu-1", "attributes": {"resource.kubernetes.io/numaNode": {"int": 1}}},
                ],
            },
        })
    });
    let request =
        json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}});
    let claims = held
        .iter()
        .map(|(name, node, device, uid)| {
            json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": request,
                "status": {
                    "allocation": {"devices": {"results": [
                        {"request": "gpu", "driver": "gpu.example.com", "pool": node, "device": device},
                    ]}},
                    "reservedFor": [{"resource": "pods", "name": uid.trim_start_matches("uid-"), "uid": uid}],
                },
            })
        })
        .chain(pending.iter().map(|name| {
            json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": request,
            })
        }));
    let list = json!({"kind": "List", "items": std::iter::once(class).chain(slices).chain(claims).collect::<Vec<_>>()});
    dra_spec(&list)
}

/// The DRA objects of a `List` manifest, every one of them read.
fn dra_spec(list: &serde_json::Value) -> topoalign_scenario::dra::DraSpec {
    let (spec, skipped) = topoalign_scenario::dra::DraSpec::from_manifests(&list.to_string()).expect("DRA objects");
    assert!(skipped.is_empty(), "{skipped:?}");
    spec
}

/// `pod` with `spec.resourceClaims` naming the claim `claim` (as `gpu`).
fn with_claim(mut pod: K8sPod, claim: &str) -> K8sPod {
    let mut value = serde_json::to_value(&pod).expect("pod");
    value["spec"]["resourceClaims"] = json!([{"name": "gpu", "resourceClaimName": claim}]);
    value["spec"]["containers"][0]["resources"]["claims"] = json!([{"name": "gpu"}]);
    pod = serde_json::from_value(value).expect("pod with a claim");
    pod
}

/// Per NUMA node: the free DRA devices (fleet::stranded's count, under the
/// driver's name), the ones a claim holds under the pod it is reserved
/// for, and on a stranded node the free ones stranded too.
#[test]
fn nodes_show_dra_devices_free_held_by_whom_and_stranded() {
    let spec = spec();
    let fill_a = pod("fill-a", 7, 0, Some("one"), "Running", None);
    let fill_b = pod("fill-b", 7, 0, Some("one"), "Running", None);
    let want = pod("want", 2, 0, None, "Pending", None);
    let one = node_holding(&spec, &[&fill_a, &fill_b]);
    let objects = Objects {
        nodes: vec![k8s_node("one")],
        topologies: vec![exact_object("one", &spec, &one)],
        pods: vec![fill_a, fill_b, want],
        dra: dra_objects(&["one"], &[("fill-a-gpu", "one", "gpu-0", "uid-fill-a")], &[]),
    };
    let snapshot = build(objects, now());
    let node = snapshot.node("one").expect("one");
    assert_eq!(node.dra.slices.len(), 1);
    assert_eq!(node.dra.held.len(), 1);
    assert_eq!(
        node.dra.held[0].pods,
        [("ns/fill-a".to_owned(), "uid-fill-a".to_owned())]
    );
    let views = topoalign_cluster::nodes_view(&snapshot);
    let numa = |n: usize| views[0].numa.iter().find(|v| v.numa == n).expect("NUMA node");
    // gpu-0 is held by fill-a's claim, gpu-1 is free.
    assert_eq!(numa(0).free.get("gpu.example.com"), None);
    assert_eq!(numa(1).free.get("gpu.example.com").map(String::as_str), Some("1"));
    let holder = numa(0)
        .held
        .iter()
        .find(|h| h.pod == "ns/fill-a")
        .expect("fill-a on NUMA 0");
    assert_eq!(holder.dra_devices, ["gpu.example.com/one/gpu-0 (claim ns/fill-a-gpu)"]);
    assert!(numa(1).held.iter().all(|h| h.dra_devices.is_empty()));
    // The node is stranded for `want`: its free GPU is stranded with it.
    assert_eq!(views[0].stranded_for, ["ns/want"]);
    assert!(numa(1).stranded);
}

/// A node without a NodeResourceTopology object still shows its DRA
/// devices; a claim reserved for no pod shows as such.
#[test]
fn dra_devices_show_without_an_nrt_object() {
    let objects = Objects {
        nodes: vec![k8s_node("bare")],
        dra: dra_objects(&["bare"], &[("loose", "bare", "gpu-1", "")], &[]),
        ..Objects::default()
    };
    let mut objects = objects;
    for claim in &mut objects.dra.resource_claims {
        claim.status.as_mut().expect("status").reserved_for = None;
    }
    let snapshot = build(objects, now());
    let views = topoalign_cluster::nodes_view(&snapshot);
    let numa: Vec<(usize, Option<&str>, Vec<&str>)> = views[0]
        .numa
        .iter()
        .map(|v| {
            (
                v.numa,
                v.free.get("gpu.example.com").map(String::as_str),
                v.held.iter().map(|h| h.pod.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(numa, [(0, Some("1"), vec![]), (1, None, vec!["(no pod) ns/loose"])]);
}

/// An admin-access claim's device is not held (the allocator's rule): it
/// shows free, never also under the admin pod.
#[test]
fn an_admin_access_claim_holds_nothing() {
    let mut objects = Objects {
        nodes: vec![k8s_node("one")],
        dra: dra_objects(&["one"], &[("watcher", "one", "gpu-1", "uid-watcher")], &[]),
        ..Objects::default()
    };
    for claim in &mut objects.dra.resource_claims {
        let allocation = claim
            .status
            .as_mut()
            .and_then(|s| s.allocation.as_mut())
            .expect("allocated");
        for result in allocation
            .devices
            .as_mut()
            .and_then(|d| d.results.as_mut())
            .expect("results")
        {
            result.admin_access = Some(true);
        }
    }
    let snapshot = build(objects, now());
    assert!(snapshot.node("one").expect("one").dra.held.is_empty());
    let views = topoalign_cluster::nodes_view(&snapshot);
    let gpu_1 = views[0].numa.iter().find(|v| v.numa == 1).expect("NUMA 1");
    assert_eq!(gpu_1.free.get("gpu.example.com").map(String::as_str), Some("1"));
    assert!(
        gpu_1.held.is_empty(),
        "{:?}",
        gpu_1.held.iter().map(|h| &h.pod).collect::<Vec<_>>()
    );
}

/// `explain pod/NAME` on a pod with a claim: per node, the devices the DRA
/// allocator gives it there beside the kubelet's NUMA nodes; a node where
/// they share a NUMA node is the fix before one where they do not.
#[test]
fn a_pod_with_a_claim_is_told_per_node_where_dra_puts_its_devices() {
    let spec = spec();
    let want = with_claim(pod("want", 2, 0, None, "Pending", None), "want-gpu");
    let empty = topoalign_nrt::start_node(&spec).expect("start");
    // On `a`, gpu-0 is held by another claim: DRA can only give gpu-1
    // (NUMA 1). On `b` both are free.
    let objects = Objects {
        nodes: vec![k8s_node("a"), k8s_node("b")],
        topologies: vec![exact_object("a", &spec, &empty), exact_object("b", &spec, &empty)],
        pods: vec![want],
        dra: dra_objects(&["a", "b"], &[("other", "a", "gpu-0", "uid-other")], &["want-gpu"]),
    };
    let snapshot = build(objects, now());
    let asked = snapshot.pod("ns", "want").expect("pod");
    let answer = topoalign_cluster::explain_pod(&snapshot, asked);
    assert!(answer.notes.is_empty(), "{:?}", answer.notes);
    let model = asked.pod.as_ref().expect("readable");
    let pinned = topoalign_scenario::dra::pinned_numa_nodes(&empty.try_admit(model).decision.containers, |cpu| {
        empty.machine().cpu(cpu).map(|c| c.numa)
    });
    let mut aligned_nodes = Vec::new();
    for verdict in &answer.nodes {
        let Some(topoalign_cluster::DraVerdict::Explained(dra)) = &verdict.dra else {
            panic!("{}: {:?}", verdict.node, verdict.dra)
        };
        assert_eq!(dra.outcome, "allocated", "{}", verdict.node);
        let devices: Vec<(&str, Option<i64>)> = dra
            .requests
            .iter()
            .flat_map(|r| r.devices.iter().map(|d| (d.device.as_str(), d.numa_node)))
            .collect();
        if verdict.node == "a" {
            assert_eq!(devices, [("gpu-1", Some(1))], "gpu-0 is taken on a");
        }
        assert_eq!(dra.kubelet_numa_nodes, pinned.iter().copied().collect::<Vec<_>>());
        let off = devices
            .iter()
            .any(|(_, numa)| numa.is_some_and(|n| !pinned.contains(&usize::try_from(n).expect("NUMA id"))));
        assert_eq!(!dra.misaligned.is_empty(), off, "{}", verdict.node);
        if !off {
            aligned_nodes.push(verdict.node.clone());
        }
    }
    let Some(ClusterFix::Node { node, .. }) = &answer.fix else {
        panic!("{:?}", answer.fix)
    };
    if !aligned_nodes.is_empty() {
        assert!(aligned_nodes.contains(node), "{node} is not one of {aligned_nodes:?}");
    }
}

/// A device a driver offers to every node (`allNodes: true`: a
/// network-attached one, on no NUMA node) is listed on each node, and a pod
/// claiming it is told on each node that DRA allocates it there, aligned
/// (a device on no NUMA node is never misaligned).
#[test]
fn a_device_offered_to_all_nodes_serves_every_node() {
    let spec = spec();
    let empty = topoalign_nrt::start_node(&spec).expect("start");
    let mut dra = dra_objects(&["a", "b"], &[], &[]);
    let fabric = json!({"kind": "List", "items": [
        {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": "fabric.example.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == \"net.example.com\""}}]},
        },
        {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "fabric"},
            "spec": {
                "driver": "net.example.com", "allNodes": true,
                "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "vf-0"}],
            },
        },
        {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "want-vf", "namespace": "ns"},
            "spec": {"devices": {"requests": [{"name": "vf", "exactly": {"deviceClassName": "fabric.example.com"}}]}},
        },
    ]});
    let more = dra_spec(&fabric);
    dra.device_classes.extend(more.device_classes);
    dra.resource_slices.extend(more.resource_slices);
    dra.resource_claims.extend(more.resource_claims);
    let objects = Objects {
        nodes: vec![k8s_node("a"), k8s_node("b")],
        topologies: vec![exact_object("a", &spec, &empty), exact_object("b", &spec, &empty)],
        pods: vec![with_claim(pod("want", 2, 0, None, "Pending", None), "want-vf")],
        dra,
    };
    let snapshot = build(objects, now());
    for name in ["a", "b"] {
        let devices = snapshot.node(name).expect("node").dra.devices();
        let vf = devices
            .iter()
            .find(|d| d.address() == "net.example.com/fabric/vf-0")
            .unwrap_or_else(|| panic!("{name} lists the fabric's device"));
        assert_eq!(vf.numa, None);
    }
    let answer = topoalign_cluster::explain_pod(&snapshot, snapshot.pod("ns", "want").expect("pod"));
    assert_eq!(answer.nodes.len(), 2);
    for verdict in &answer.nodes {
        let Some(topoalign_cluster::DraVerdict::Explained(dra)) = &verdict.dra else {
            panic!("{}: {:?}", verdict.node, verdict.dra)
        };
        assert_eq!(dra.outcome, "allocated", "{}", verdict.node);
        let devices: Vec<(&str, Option<i64>)> = dra
            .requests
            .iter()
            .flat_map(|r| r.devices.iter().map(|d| (d.device.as_str(), d.numa_node)))
            .collect();
        assert_eq!(devices, [("vf-0", None)], "{}", verdict.node);
        assert!(dra.misaligned.is_empty(), "{}: {:?}", verdict.node, dra.misaligned);
    }
}
