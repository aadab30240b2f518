//! The extender's cluster model without HTTP: assumptions and their
//! timeout, NRT objects as the source of state, the scoring strategies.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

mod common;

use std::time::{Duration, Instant};

use serde_json::json;
use topoalign_extender::{Cluster, ExtenderConfig, Strategy};
use topoalign_model::Pod;

use common::spec;

fn fleet(count: u32) -> topoalign_fleet::Fleet {
    let spec = spec();
    let text = json!({"nodes": [{"name": "gpu", "count": count, "topology": spec.topology, "kubelet": spec.kubelet}]});
    topoalign_fleet::Fleet::parse(&text.to_string(), |_| Err("no files".into())).unwrap()
}

fn pod(name: &str, cpu: &str, gpus: u32) -> Pod {
    common::pod(name, &format!("uid-{name}"), cpu, gpus)
}

/// `worker-1`, the spec's node, running a 4-CPU pod with the GPU.
struct Worker {
    spec: topoalign_nrt::NodeSpec,
    node: topoalign_engine::Node,
}

impl Worker {
    fn running_a_gpu_pod() -> Worker {
        let spec = spec();
        let mut node = topoalign_nrt::start_node(&spec).unwrap();
        assert!(node.admit(pod("running", "4", 1)).admitted());
        Worker { spec, node }
    }

    /// Its NRT object, with topoalign's exact state or as another
    /// exporter writes it.
    fn object(&self, exact: bool) -> topoalign_nrt::NodeResourceTopology {
        let options = topoalign_nrt::BuildOptions {
            exact_state: exact.then_some(&self.spec),
        };
        topoalign_nrt::build("worker-1", &self.node, options)
    }
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[test]
fn an_assumed_pod_holds_its_resources_until_the_timeout() {
    let config = ExtenderConfig {
        assume_timeout: Duration::from_secs(30),
        ..ExtenderConfig::default()
    };
    let mut cluster = Cluster::from_fleet(&fleet(2), config).unwrap();
    let t0 = Instant::now();
    cluster.assume(&pod("a", "4", 1), "gpu-0", t0);
    let candidates = names(&["gpu-0", "gpu-1"]);
    let during = cluster
        .filter(&pod("b", "4", 1), candidates.clone(), t0 + Duration::from_secs(29))
        .unwrap();
    assert_eq!(during.passed, ["gpu-1"]);
    let after = cluster
        .filter(&pod("b", "4", 1), candidates.clone(), t0 + Duration::from_secs(31))
        .unwrap();
    assert_eq!(after.passed, ["gpu-0", "gpu-1"]);
    assert!(cluster.assumptions().is_empty());
}

#[test]
fn choosing_in_filter_passes_one_node_and_assumes_the_pod_there() {
    let config = ExtenderConfig {
        choose_in_filter: true,
        ..ExtenderConfig::default()
    };
    let mut cluster = Cluster::from_fleet(&fleet(3), config).unwrap();
    let now = Instant::now();
    cluster.assume(&pod("a", "4", 1), "gpu-0", now);
    let candidates = names(&["gpu-0", "gpu-1", "gpu-2"]);
    let outcome = cluster.filter(&pod("b", "2", 1), candidates.clone(), now).unwrap();
    assert_eq!(outcome.passed.len(), 1, "{outcome:?}");
    let chosen = outcome.passed[0].clone();
    // gpu-0 refuses b (a holds its GPU's NUMA node); of the two that
    // admit it, the one not chosen is in no field of the answer.
    assert_ne!(chosen, "gpu-0");
    assert!(outcome.failed.contains_key("gpu-0"), "{outcome:?}");
    let other = if chosen == "gpu-1" { "gpu-2" } else { "gpu-1" };
    assert_eq!(outcome.failed.len(), 1, "{outcome:?}");
    assert!(
        !outcome.failed.contains_key(other) && !outcome.unresolvable.contains_key(other),
        "{outcome:?}"
    );
    // It did admit the pod: asked without choosing, it passes.
    let plain = Cluster::from_fleet(&fleet(3), ExtenderConfig::default())
        .unwrap()
        .filter(&pod("b", "2", 1), names(&[other]), now)
        .unwrap();
    assert_eq!(plain.passed, [other], "{plain:?}");
    assert_eq!(
        cluster.assumptions().get("uid-b"),
        Some(&chosen),
        "{:?}",
        cluster.assumptions()
    );
}

#[test]
fn nrt_objects_carry_the_exact_state_and_confirm_assumptions() {
    let mut worker = Worker::running_a_gpu_pod();
    let t0 = Instant::now();
    let mut cluster = Cluster::new(ExtenderConfig::default());
    cluster.apply_nrt(&worker.object(true), t0).unwrap();
    // The node's GPU is in use: a GPU pod does not fit; a CPU pod does.
    let candidates = names(&["worker-1", "unknown"]);
    assert_eq!(
        cluster
            .filter(&pod("g", "2", 1), candidates.clone(), t0)
            .unwrap()
            .passed,
        ["unknown"]
    );
    assert_eq!(
        cluster
            .filter(&pod("c", "2", 0), candidates.clone(), t0)
            .unwrap()
            .passed,
        ["worker-1", "unknown"]
    );

    // Assume a pod the node has not reported yet (all 7 free CPUs of NUMA
    // 0): a newer NRT object without it keeps the reservation, one with it
    // confirms it; either way a 5-CPU pod no longer fits.
    assert!(
        cluster
            .filter(&pod("five", "5", 0), candidates.clone(), t0)
            .unwrap()
            .passed
            .contains(&"worker-1".to_string())
    );
    let assumed = pod("next", "7", 0);
    cluster.assume(&assumed, "worker-1", t0);
    cluster.apply_nrt(&worker.object(true), t0).unwrap();
    assert_eq!(
        cluster.assumptions().get("uid-next").map(String::as_str),
        Some("worker-1")
    );
    assert!(
        !cluster
            .filter(&pod("five", "5", 0), candidates.clone(), t0)
            .unwrap()
            .passed
            .contains(&"worker-1".to_string())
    );
    assert!(worker.node.admit(assumed).admitted());
    cluster.apply_nrt(&worker.object(true), t0).unwrap();
    assert!(cluster.assumptions().is_empty());
    assert!(
        !cluster
            .filter(&pod("five", "5", 0), candidates.clone(), t0)
            .unwrap()
            .passed
            .contains(&"worker-1".to_string())
    );

    // An NRT object from another exporter (no topoalign attributes): the
    // node is unknown and passes through.
    let plain = worker.object(false);
    cluster.apply_nrt(&plain, t0).unwrap();
    assert_eq!(cluster.len(), 0);
    assert_eq!(
        cluster
            .filter(&pod("g", "2", 1), candidates.clone(), t0)
            .unwrap()
            .passed,
        ["worker-1", "unknown"]
    );
}

#[test]
fn the_scoring_strategies_rank_a_fuller_and_an_emptier_node() {
    // gpu-0 holds 6 CPUs on NUMA 0 (reserved CPU 0 leaves 7 there).
    let score = |strategy: Strategy, pod: &Pod| {
        let config = ExtenderConfig {
            strategy,
            assume_on_prioritize: false,
            ..ExtenderConfig::default()
        };
        let mut cluster = Cluster::from_fleet(&fleet(2), config).unwrap();
        let now = Instant::now();
        cluster.assume(&pod_with_cpus(), "gpu-0", now);
        cluster.prioritize(pod, names(&["gpu-0", "gpu-1"]), now).unwrap()
    };
    fn pod_with_cpus() -> Pod {
        pod("holder", "6", 0)
    }
    let small = pod("small", "1", 0);
    let least = score(Strategy::LeastAllocated, &small);
    let most = score(Strategy::MostAllocated, &small);
    assert!(least[0].1 < least[1].1, "{least:?}");
    assert!(most[0].1 > most[1].1, "{most:?}");
    // One NUMA node used on a two-NUMA machine: the best LeastNUMANodes score.
    assert_eq!(
        score(Strategy::LeastNumaNodes, &small),
        [("gpu-0".to_string(), 10), ("gpu-1".to_string(), 10)]
    );
    let balanced = score(Strategy::BalancedAllocation, &small);
    assert!(balanced.iter().all(|(_, s)| (0..=10).contains(s)), "{balanced:?}");
    // A node that refuses scores 0.
    let too_big = score(Strategy::LeastAllocated, &pod("huge", "9", 0));
    assert_eq!(too_big, [("gpu-0".to_string(), 0), ("gpu-1".to_string(), 0)]);
}

/// A node the API server no longer lists (deleted, or its exporter gone)
/// leaves the cluster with the pods assumed on it; nodes of the fleet file
/// are not the listing's to remove.
#[test]
fn a_node_missing_from_the_next_listing_is_removed() {
    let spec = spec();
    let node = topoalign_nrt::start_node(&spec).unwrap();
    let options = topoalign_nrt::BuildOptions {
        exact_state: Some(&spec),
    };
    let object = |name: &str| topoalign_nrt::build(name, &node, options);
    let t0 = Instant::now();
    let mut cluster = Cluster::from_fleet(&fleet(2), ExtenderConfig::default()).unwrap();
    let first = cluster.sync_nrt(&[object("worker-1"), object("worker-2")], t0);
    assert_eq!(first, topoalign_extender::SyncReport::default());
    assert_eq!(cluster.len(), 4);
    cluster.assume(&pod("a", "2", 0), "worker-2", t0);
    assert_eq!(cluster.assumptions().len(), 1);

    let second = cluster.sync_nrt(&[object("worker-1")], t0);
    assert_eq!(second.removed, ["worker-2"]);
    assert!(second.errors.is_empty());
    assert!(cluster.assumptions().is_empty());
    assert_eq!(cluster.len(), 3, "the fleet's nodes stay");
    // worker-1 is known and refuses a pod larger than the machine; the
    // removed worker-2 passes through like any unknown node.
    let too_big = pod("huge", "20", 0);
    let outcome = cluster.filter(&too_big, names(&["worker-1", "worker-2"]), t0).unwrap();
    assert_eq!(outcome.passed, ["worker-2"]);
    assert!(outcome.unresolvable.contains_key("worker-1"), "{outcome:?}");
}

/// An object saying its state is unknown (the kubelet follower while its
/// sources disagree), another exporter's object and a damaged one: each
/// node passes through — never filtered on its last state — and the sync
/// says why, once per reason.
#[test]
fn unknown_and_unrestorable_objects_pass_with_the_reason() {
    let worker = Worker::running_a_gpu_pod();
    let t0 = Instant::now();
    let mut cluster = Cluster::new(ExtenderConfig::default());
    let known = worker.object(true);
    assert_eq!(cluster.sync_nrt(std::slice::from_ref(&known), t0), Default::default());
    let gpu_pod = pod("g", "2", 1);
    let candidates = names(&["worker-1"]);
    assert!(
        cluster
            .filter(&gpu_pod, candidates.clone(), t0)
            .unwrap()
            .passed
            .is_empty()
    );

    let unknown = topoalign_nrt::unknown("worker-1", "cpu_manager_state: unexpected end of JSON input");
    let report = cluster.sync_nrt(std::slice::from_ref(&unknown), t0);
    assert_eq!(
        report.passed,
        [(
            "worker-1".to_string(),
            "its exporter does not know its state: cpu_manager_state: unexpected end of JSON input".to_string()
        )]
    );
    assert_eq!(
        cluster.filter(&gpu_pod, candidates.clone(), t0).unwrap().passed,
        ["worker-1"]
    );
    // The same reason again is not news.
    assert_eq!(cluster.sync_nrt(std::slice::from_ref(&unknown), t0), Default::default());

    let mut damaged = known.clone();
    for attribute in &mut damaged.attributes {
        if attribute.name == topoalign_nrt::exact::STATE_ATTRIBUTE {
            attribute.value.truncate(attribute.value.len() / 2);
        }
    }
    let report = cluster.sync_nrt(std::slice::from_ref(&damaged), t0);
    assert_eq!(report.errors.len(), 1, "{report:?}");
    assert!(
        report.errors[0].to_string().contains("topoalign.io/state"),
        "{report:?}"
    );
    assert_eq!(
        cluster.filter(&gpu_pod, candidates.clone(), t0).unwrap().passed,
        ["worker-1"]
    );

    let plain = worker.object(false);
    let report = cluster.sync_nrt(std::slice::from_ref(&plain), t0);
    assert_eq!(report.passed.len(), 1, "{report:?}");
    assert!(report.passed[0].1.contains("another exporter"), "{report:?}");

    // Known again: filtered again.
    assert_eq!(cluster.sync_nrt(std::slice::from_ref(&known), t0), Default::default());
    assert!(
        cluster
            .filter(&gpu_pod, candidates.clone(), t0)
            .unwrap()
            .passed
            .is_empty()
    );
}

/// A pod asked about again (its bind failed, a Permit plugin sent it back)
/// on the node it is assumed on: that node is judged without the pod — its
/// own assumption does not block it — not by the cached answer of another
/// node in the same state holding another pod of the same shape, which
/// refused it.
#[test]
fn a_pod_asked_again_is_not_blocked_by_its_own_assumption() {
    let mut cluster = Cluster::from_fleet(&fleet(2), ExtenderConfig::default()).unwrap();
    let now = Instant::now();
    // gpu-1 holds another pod of the same shape: the GPU is taken there.
    cluster.assume(&pod("other", "4", 1), "gpu-1", now);
    let asked = pod("asked", "4", 1);
    let candidates = names(&["gpu-0", "gpu-1"]);
    let first = cluster.filter(&asked, candidates.clone(), now).unwrap();
    assert_eq!(first.passed, ["gpu-0"], "{first:?}");
    // prioritize assumes it on gpu-0: both nodes now hold one pod of this
    // shape, in the same place.
    cluster.prioritize(&asked, first.passed, now).unwrap();
    assert_eq!(
        cluster.assumptions().get("uid-asked").map(String::as_str),
        Some("gpu-0")
    );
    // Admitting the pod again on gpu-0 as it is would refuse it (the
    // engine does not take a uid it holds as a new pod); without it, it
    // admits.
    let mut gpu_0 = topoalign_nrt::start_node(&spec()).unwrap();
    assert!(gpu_0.admit(asked.clone()).admitted());
    assert!(!gpu_0.clone().admit(asked.clone()).admitted());
    gpu_0.remove(&asked.uid);
    assert!(gpu_0.admit(asked.clone()).admitted());
    let again = cluster.filter(&asked, candidates.clone(), now).unwrap();
    assert_eq!(again.passed, ["gpu-0"], "{again:?}");
    assert!(again.failed.contains_key("gpu-1"), "{again:?}");
    let scores = cluster.prioritize(&asked, candidates, now).unwrap();
    assert!(scores[0].1 > 0 && scores[1].1 == 0, "{scores:?}");
    // Another pod of that shape is refused on both (the cached answer for
    // gpu-1's state is right for it).
    let third = cluster
        .filter(&pod("third", "4", 1), names(&["gpu-0", "gpu-1"]), now)
        .unwrap();
    assert!(third.passed.is_empty(), "{third:?}");
}

/// A pod managed at the pod level (`PodLevelResourceManagers`) holds its
/// whole CPU set, shared part included: the node's usage — and so the
/// scores — count those CPUs as taken (they counted only containers'
/// exclusive CPUs, so such a node scored as if empty).
#[test]
fn pod_level_cpus_count_as_taken_in_scores() {
    let mut spec = spec();
    spec.kubelet["kubeletVersion"] = json!("1.36");
    spec.kubelet["featureGates"] = json!({"PodLevelResourceManagers": true});
    spec.kubelet["topologyManagerScope"] = json!("pod");
    let text = json!({"nodes": [{"name": "n", "count": 2, "topology": spec.topology, "kubelet": spec.kubelet}]});
    let fleet = topoalign_fleet::Fleet::parse(&text.to_string(), |_| Err("no files".into())).unwrap();
    // Six CPUs for the pod, its one container sharing them.
    let bubble = Cluster::read_pod(&json!({"metadata": {"name": "bubble", "uid": "uid-bubble"},
        "spec": {"resources": {"limits": {"cpu": "6", "memory": "2Gi"}}, "containers": [{"name": "app"}]}}))
    .unwrap();
    let mut node = topoalign_nrt::start_node(&spec).unwrap();
    let decision = node.admit(bubble.clone());
    assert!(decision.admitted(), "{decision:?}");
    let usage = node.numa_usage();
    let count = |f: fn(&topoalign_engine::ResourceUsage) -> topoalign_model::Quantity| -> i128 {
        usage.iter().map(|z| f(&z.resources["cpu"]).value()).sum()
    };
    assert_eq!(count(|r| r.allocated), 6, "{usage:?}");
    for zone in &usage {
        let free = zone.free_cpus.as_ref().unwrap().len();
        assert_eq!(zone.resources["cpu"].available.value(), free as i128, "{zone:?}");
    }

    let config = ExtenderConfig {
        assume_on_prioritize: false,
        ..ExtenderConfig::default()
    };
    let mut cluster = Cluster::from_fleet(&fleet, config).unwrap();
    let now = Instant::now();
    cluster.assume(&bubble, "n-0", now);
    assert_eq!(cluster.assumptions().len(), 1);
    // A burstable pod in the shared pool uses every zone: 9 of 15 CPUs
    // free on n-0 (memory is not placed: all free), 15 of 15 on n-1.
    let asked = Cluster::read_pod(&json!({"metadata": {"name": "small", "uid": "uid-small"},
        "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]}}))
    .unwrap();
    let scores = cluster.prioritize(&asked, names(&["n-0", "n-1"]), now).unwrap();
    assert_eq!(scores, [("n-0".to_owned(), 8), ("n-1".to_owned(), 10)]);
}

#[test]
fn pods_without_a_uid_are_told_apart_by_their_names() {
    let read = |name: &str| {
        Cluster::read_pod(&json!({"metadata": {"name": name, "namespace": "team"},
            "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}))
        .unwrap()
    };
    assert_eq!(read("a").uid, "team/a");
    assert_ne!(read("a").uid, read("b").uid);
}

#[test]
fn a_binding_waits_for_the_pods_assumed_before_it_on_its_node() {
    let config = ExtenderConfig {
        choose_in_filter: true,
        ..ExtenderConfig::default()
    };
    let mut cluster = Cluster::from_fleet(&fleet(2), config).unwrap();
    let now = Instant::now();
    // a then b on gpu-0 (the only candidate each), c on gpu-1.
    for (name, node) in [("a", "gpu-0"), ("b", "gpu-0"), ("c", "gpu-1")] {
        let outcome = cluster.filter(&pod(name, "1", 0), names(&[node]), now).unwrap();
        assert_eq!(outcome.passed, [node], "{name}: {outcome:?}");
    }
    assert!(!cluster.binding_waits_for_earlier("uid-a", "gpu-0"));
    assert!(cluster.binding_waits_for_earlier("uid-b", "gpu-0"));
    // Another node's pods never hold a Binding back.
    assert!(!cluster.binding_waits_for_earlier("uid-c", "gpu-1"));
    // Bound elsewhere than assumed: nothing to wait for on that node.
    assert!(!cluster.binding_waits_for_earlier("uid-b", "gpu-1"));
    cluster.bind("uid-a", "gpu-0", now).unwrap();
    assert!(!cluster.binding_waits_for_earlier("uid-b", "gpu-0"));

    // A refused Binding (binding_settled without bind) releases the wait
    // too: the scheduler retries that pod from its start.
    for (name, node) in [("d", "gpu-1"), ("e", "gpu-1")] {
        cluster.filter(&pod(name, "1", 0), names(&[node]), now).unwrap();
    }
    cluster.bind("uid-c", "gpu-1", now).unwrap();
    assert!(cluster.binding_waits_for_earlier("uid-e", "gpu-1"));
    cluster.binding_settled("uid-d");
    assert!(!cluster.binding_waits_for_earlier("uid-e", "gpu-1"));
}
