//! The planner on small fleets whose answers follow from their
//! construction: nodes of two NUMA nodes with four allocatable CPUs each
//! (single-numa-node, static CPU manager), pods of whole CPUs.
//!
//! A 3-CPU pod fills most of one NUMA node, so two of them leave 1 + 1
//! CPUs: a 2-CPU pod fits the node's capacity but no NUMA node, and one
//! eviction frees a whole NUMA node. Each test first checks that the
//! state is the one described (CPUs free per NUMA node), so the expected
//! answer rests on the construction, not on the engine's choices.

use topoalign_defrag::plan::{Outcome, PodPlan, verify};
use topoalign_defrag::{Limits, Plan, parse_document, plan};

/// A fleet of `count` nodes: NUMA 0 = CPUs 0-4, NUMA 1 = CPUs 5-9, CPUs 0
/// and 5 reserved: four allocatable CPUs per NUMA node.
fn fleet(count: u32) -> String {
    let cpus: Vec<String> = (0..10)
        .map(|id| format!("{{id: {id}, core: {id}, socket: {s}, numa: {s}}}", s = id / 5))
        .collect();
    format!(
        "nodes:
  - name: n
    count: {count}
    topology:
      numaNodes:
        - {{id: 0, memory: 16Gi, distances: [10, 21]}}
        - {{id: 1, memory: 16Gi, distances: [21, 10]}}
      cpus: [{}]
    kubelet:
      topologyManagerPolicy: single-numa-node
      cpuManagerPolicy: static
      reservedSystemCPUs: \"0,5\"
",
        cpus.join(", ")
    )
}

/// A Guaranteed pod of `cpus` CPUs; `node` empty for a pending pod.
fn pod(name: &str, cpus: u32, priority: i32, node: &str, extra: &str) -> String {
    let node = if node.is_empty() {
        String::new()
    } else {
        format!("nodeName: {node}, ")
    };
    format!(
        "  - metadata: {{name: {name}, namespace: ns, labels: {{app: {name}}}{extra}}}
    spec: {{{node}priority: {priority}, containers: [{{name: c, resources: {{limits: {{cpu: \"{cpus}\", memory: 100Mi}}}}}}]}}
"
    )
}

fn document(nodes: u32, pods: &[String], budgets: &str) -> String {
    format!("{}pods:\n{}{budgets}", fleet(nodes), pods.concat())
}

fn run(text: &str, limits: &Limits) -> Plan {
    let (state, pending) = parse_document(text, |_| Err("no files".into())).expect("document");
    plan(&state, &pending, limits)
}

/// Free CPUs per NUMA node of each node, as the document leaves them.
fn free_cpus(text: &str) -> Vec<Vec<i128>> {
    let (state, _) = parse_document(text, |_| Err("no files".into())).expect("document");
    state
        .nodes
        .iter()
        .map(|n| n.node.numa_usage().iter().map(|z| z.available("cpu").value()).collect())
        .collect()
}

fn evictions(plan: &Plan) -> Vec<&str> {
    plan.evictions.iter().map(|e| e.pod.as_str()).collect()
}

fn outcome<'a>(plan: &'a Plan, pod: &str) -> &'a Outcome {
    &plan.pods.iter().find(|p| p.pod == pod).expect("planned").outcome
}

/// One fragmented node: a (3 CPUs) on NUMA 0, b (3 CPUs) on NUMA 1.
fn fragmented(a_priority: i32, b_priority: i32, pending: &[String], budgets: &str) -> String {
    let mut pods = vec![pod("a", 3, a_priority, "n-0", ""), pod("b", 3, b_priority, "n-0", "")];
    pods.extend(pending.iter().cloned());
    document(1, &pods, budgets)
}

#[test]
fn the_construction_is_as_described() {
    let text = fragmented(0, 0, &[], "");
    assert_eq!(free_cpus(&text), [[1, 1]]);
    assert_eq!(free_cpus(&document(1, &[], "")), [[4, 4]]);
}

#[test]
fn a_pod_that_fits_needs_no_eviction() {
    let text = document(1, &[pod("a", 3, 0, "n-0", ""), pod("p", 2, 10, "", "")], "");
    assert_eq!(free_cpus(&text)[0], [1, 4]);
    let plan = run(&text, &Limits::default());
    assert!(evictions(&plan).is_empty());
    assert_eq!(outcome(&plan, "ns/p"), &Outcome::FitsAsIs { node: "n-0".into() });
    assert!(plan.verification.verified, "{:?}", plan.verification);
}

/// Table: priorities of a and b, the pending pod's, and the evictions the
/// rules leave (lowest priority first; none when neither is lower).
#[test]
fn victims_have_lower_priority_and_the_lowest_goes() {
    let rows: [(i32, i32, i32, &[&str]); 5] = [
        (5, 1, 10, &["ns/b"]),
        (1, 5, 10, &["ns/a"]),
        (5, 10, 10, &["ns/a"]), // b's priority equals the pending pod's: never evicted
        (10, 10, 10, &[]),      // equal priority: nothing may go
        (20, 30, 10, &[]),      // higher priority: nothing may go
    ];
    for (a, b, p, expected) in rows {
        let text = fragmented(a, b, &[pod("p", 2, p, "", "")], "");
        let plan = run(&text, &Limits::default());
        assert_eq!(evictions(&plan), expected, "a {a}, b {b}, pending {p}");
        match outcome(&plan, "ns/p") {
            Outcome::AfterEvictions {
                node, proven_smallest, ..
            } => {
                assert_eq!(node, "n-0");
                assert!(proven_smallest);
            }
            Outcome::NoPlan { reason } => {
                assert!(expected.is_empty(), "a {a}, b {b}: {reason}");
                assert!(reason.contains("lower priority"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(plan.verification.verified, "{:?}", plan.verification);
        assert_eq!(plan.verification.admitted, usize::from(!expected.is_empty()));
    }
}

#[test]
fn disruption_budgets_protect_their_pods() {
    // a has the lower priority, but its budget allows no disruption.
    let budget = "disruptionBudgets:
  - metadata: {name: a, namespace: ns}
    spec: {minAvailable: 1, selector: {matchLabels: {app: a}}}
";
    let text = fragmented(1, 5, &[pod("p", 2, 10, "", "")], budget);
    let plan = run(&text, &Limits::default());
    assert_eq!(evictions(&plan), ["ns/b"]);
    // Both covered by budgets allowing nothing: no plan.
    let budgets = "disruptionBudgets:
  - metadata: {name: all, namespace: ns}
    spec: {maxUnavailable: 0}
";
    let plan = run(
        &fragmented(1, 5, &[pod("p", 2, 10, "", "")], budgets),
        &Limits::default(),
    );
    assert!(evictions(&plan).is_empty());
    assert!(matches!(outcome(&plan, "ns/p"), Outcome::NoPlan { .. }));
    // A budget in another namespace covers nothing here.
    let elsewhere = "disruptionBudgets:
  - metadata: {name: all, namespace: other}
    spec: {maxUnavailable: 0}
";
    let plan = run(
        &fragmented(1, 5, &[pod("p", 2, 10, "", "")], elsewhere),
        &Limits::default(),
    );
    assert_eq!(evictions(&plan), ["ns/a"]);
    // One budget over a and b allowing one eviction (2 pods, at most 1
    // unavailable): two pending pods that each need a NUMA node get one
    // eviction, not two.
    let one = "disruptionBudgets:
  - metadata: {name: one, namespace: ns}
    spec: {maxUnavailable: 1, selector: {matchExpressions: [{key: app, operator: In, values: [a, b]}]}}
";
    let pending = [pod("p", 3, 10, "", ""), pod("q", 3, 10, "", "")];
    let plan = run(&fragmented(1, 5, &pending, one), &Limits::default());
    assert_eq!(evictions(&plan), ["ns/a"]);
    assert!(matches!(outcome(&plan, "ns/q"), Outcome::NoPlan { .. }));
    assert!(plan.verification.verified, "{:?}", plan.verification);
}

#[test]
fn static_and_daemonset_pods_are_never_evicted() {
    let mirror = ", annotations: {kubernetes.io/config.mirror: x}";
    let daemon = ", ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: d, uid: u}]";
    for (a, b) in [(mirror, ""), (daemon, "")] {
        let pods = [
            pod("a", 3, 0, "n-0", a),
            pod("b", 3, 5, "n-0", b),
            pod("p", 2, 10, "", ""),
        ];
        let plan = run(&document(1, &pods, ""), &Limits::default());
        assert_eq!(evictions(&plan), ["ns/b"]);
    }
}

/// NUMA 0 holds c1 and c2 (2 CPUs each, full), NUMA 1 holds d (3 CPUs, 1
/// free). A 4-CPU pod needs a whole NUMA node: evicting d (one pod) would
/// do, but d's priority is the pending pod's; so c1 and c2 must both go.
fn two_needed() -> String {
    let pods = [
        pod("c1", 2, 0, "n-0", ""),
        pod("c2", 2, 0, "n-0", ""),
        pod("d", 3, 10, "n-0", ""),
        pod("p", 4, 10, "", ""),
    ];
    document(1, &pods, "")
}

#[test]
fn the_smallest_set_may_need_several_pods() {
    assert_eq!(free_cpus(&two_needed())[0], [0, 1]);
    let plan = run(&two_needed(), &Limits::default());
    assert_eq!(evictions(&plan), ["ns/c1", "ns/c2"]);
    assert!(matches!(
        outcome(&plan, "ns/p"),
        Outcome::AfterEvictions {
            proven_smallest: true,
            ..
        }
    ));
    assert!(!plan.search.gave_up);
    assert!(plan.verification.verified, "{:?}", plan.verification);
}

#[test]
fn a_search_out_of_trials_gives_the_greedy_set_and_says_so() {
    // The fit check, the bound and the greedy pass take 1 + 1 + 2 trials;
    // none is left to prove that no single eviction would do.
    let limits = Limits {
        max_trials: 4,
        ..Limits::default()
    };
    let plan = run(&two_needed(), &limits);
    assert_eq!(evictions(&plan), ["ns/c1", "ns/c2"]);
    assert!(plan.search.gave_up);
    assert!(matches!(
        outcome(&plan, "ns/p"),
        Outcome::AfterEvictions {
            proven_smallest: false,
            ..
        }
    ));
    assert!(plan.verification.verified);
}

#[test]
fn one_eviction_can_free_room_for_several_pending_pods() {
    // Two fragmented nodes; two pending 2-CPU pods fit together on the
    // NUMA node one eviction frees.
    let pods = [
        pod("a", 3, 0, "n-0", ""),
        pod("b", 3, 0, "n-0", ""),
        pod("c", 3, 0, "n-1", ""),
        pod("d", 3, 0, "n-1", ""),
        pod("p", 2, 10, "", ""),
        pod("q", 2, 10, "", ""),
    ];
    let text = document(2, &pods, "");
    assert_eq!(free_cpus(&text), [[1, 1], [1, 1]]);
    let plan = run(&text, &Limits::default());
    assert_eq!(evictions(&plan).len(), 1, "{:?}", plan.evictions);
    assert!(plan.pods.iter().all(|p| !matches!(p.outcome, Outcome::NoPlan { .. })));
    assert!(plan.verification.verified);
    assert_eq!(plan.verification.admitted, 2);
}

#[test]
fn higher_priority_pending_pods_are_planned_first() {
    // One eviction's worth of room (a 4-CPU NUMA node) and two 3-CPU
    // pending pods: the higher-priority one, listed second, gets it.
    let budget = "disruptionBudgets:
  - metadata: {name: one, namespace: ns}
    spec: {maxUnavailable: 1, selector: {matchExpressions: [{key: app, operator: In, values: [a, b]}]}}
";
    let pending = [pod("low", 3, 10, "", ""), pod("high", 3, 20, "", "")];
    let plan = run(&fragmented(1, 1, &pending, budget), &Limits::default());
    assert_eq!(plan.pods[0].pod, "ns/high");
    assert!(matches!(outcome(&plan, "ns/high"), Outcome::AfterEvictions { .. }));
    assert!(matches!(outcome(&plan, "ns/low"), Outcome::NoPlan { .. }));
}

#[test]
fn a_pod_no_empty_node_admits_says_so() {
    let plan = run(&fragmented(0, 0, &[pod("huge", 5, 10, "", "")], ""), &Limits::default());
    match outcome(&plan, "ns/huge") {
        Outcome::NoPlan { reason } => assert!(reason.contains("even empty"), "{reason}"),
        other => panic!("{other:?}"),
    }
    assert!(evictions(&plan).is_empty());
}

#[test]
fn stranded_capacity_before_and_after() {
    // 1 + 1 CPUs free, wanted by a 2-CPU pod an empty node would admit:
    // stranded, one CPU on each NUMA node. After the plan nothing waits.
    let text = fragmented(0, 0, &[pod("p", 2, 10, "", "")], "");
    let plan = run(&text, &Limits::default());
    let before = &plan.stranded_before;
    assert_eq!(before.cpus, 2.0);
    assert_eq!(before.nodes.len(), 1);
    let zones: Vec<f64> = before.nodes[0].zones.iter().map(|z| z.cpus).collect();
    assert_eq!(zones, [1.0, 1.0]);
    assert_eq!(plan.stranded_after.cpus, 0.0);
    assert!(plan.stranded_after.nodes.is_empty());
    // Nothing pending: nothing is stranded.
    let plan = run(&fragmented(0, 0, &[], ""), &Limits::default());
    assert!(plan.stranded_before.nodes.is_empty());
}

/// DRA devices (a live cluster's, `DraCounts`) join the stranded count:
/// a (priority 1, NUMA 0) alone holds two GPUs on NUMA 0, one GPU is free
/// on NUMA 1; pending p (2 CPUs) and q (3 CPUs), each wanting one GPU on
/// NUMA 0. Evicting a makes room for one of them; the other stays pending
/// (b, priority 100, is never evicted), so the node is stranded after
/// too, with a's two GPUs freed less the one the placed pod takes.
#[test]
fn stranded_dra_devices_before_and_after() {
    use std::collections::BTreeMap;
    let text = fragmented(1, 100, &[pod("p", 2, 10, "", ""), pod("q", 3, 10, "", "")], "");
    assert_eq!(free_cpus(&text), [[1, 1]]);
    let (mut state, pending) = parse_document(&text, |_| Err("no files".into())).expect("document");
    let gpus = |numa: usize, n: u64| BTreeMap::from([(numa, BTreeMap::from([("gpu.example.com".to_owned(), n)]))]);
    let a = state.nodes[0]
        .pods
        .iter()
        .find(|p| p.key == "ns/a")
        .expect("a")
        .uid
        .clone();
    state.nodes[0].dra = topoalign_defrag::DraCounts {
        free: gpus(1, 1),
        held_by: BTreeMap::from([(a, gpus(0, 2))]),
        wanted: BTreeMap::from([("ns/p".to_owned(), gpus(0, 1)), ("ns/q".to_owned(), gpus(0, 1))]),
    };
    let plan = plan(&state, &pending, &Limits::default());
    assert_eq!(evictions(&plan), ["ns/a"]);
    let placed = plan
        .pods
        .iter()
        .filter(|p| !matches!(p.outcome, Outcome::NoPlan { .. }))
        .count();
    assert_eq!(placed, 1, "{:?}", plan.pods);
    let gpus_of = |stranded: &topoalign_defrag::plan::Stranded| {
        let zones: Vec<(usize, u64)> = stranded
            .nodes
            .iter()
            .flat_map(|n| &n.zones)
            .map(|z| (z.numa, z.devices.get("gpu.example.com").copied().unwrap_or(0)))
            .collect();
        (stranded.devices.get("gpu.example.com").copied(), zones)
    };
    assert_eq!(gpus_of(&plan.stranded_before), (Some(1), vec![(0, 0), (1, 1)]));
    assert_eq!(gpus_of(&plan.stranded_after), (Some(2), vec![(0, 1), (1, 1)]));
}

#[test]
fn the_replay_refuses_a_plan_that_breaks_the_rules() {
    let text = fragmented(0, 20, &[pod("p", 2, 10, "", "")], "");
    let (state, pending) = parse_document(&text, |_| Err("no files".into())).unwrap();
    let good = plan(&state, &pending, &Limits::default());
    assert!(good.verification.verified);
    // The same pod placed without its eviction: the replay's kubelet
    // refuses it.
    let without = verify(&state, &pending, &good.pods, &[]);
    assert!(!without.verified);
    assert!(without.problems[0].contains("refused on n-0"), "{:?}", without.problems);
    // b (priority 20) evicted for p (priority 10): a broken rule.
    let mut wrong = good.evictions.clone();
    wrong[0].pod = "ns/b".into();
    wrong[0].uid = state.nodes[0].pods[1].uid.clone();
    let checked = verify(&state, &pending, &good.pods, &wrong);
    assert!(
        checked
            .problems
            .iter()
            .any(|p| p.contains("whose priority is not higher")),
        "{:?}",
        checked.problems
    );
    let _: &[PodPlan] = &good.pods;
}

#[test]
fn document_errors_name_the_field() {
    let cases = [
        (document(1, &[pod("a", 3, 0, "n-9", "")], ""), "pods[0].spec.nodeName"),
        (
            document(1, &[pod("a", 3, 0, "n-0", ""), pod("a", 1, 0, "", "")], ""),
            "pods[1].metadata.name",
        ),
        (
            document(
                1,
                &[
                    pod("a", 3, 0, "n-0", ""),
                    pod("b", 3, 0, "n-0", ""),
                    pod("c", 3, 0, "n-0", ""),
                ],
                "",
            ),
            "pods[2].spec.nodeName",
        ),
        (
            format!(
                "{}pods:\n  - metadata: {{name: x}}\n    spec: {{priorityClassName: nope, containers: [{{name: c}}]}}\n",
                fleet(1)
            ),
            "pods[0] (default/x).spec.priorityClassName",
        ),
        (
            format!(
                "{}disruptionBudgets:\n  - metadata: {{name: x}}\n    spec: {{minAvailable: lots}}\n",
                fleet(1)
            ),
            "disruptionBudgets[0].spec.minAvailable",
        ),
    ];
    for (text, path) in cases {
        let error = parse_document(&text, |_| Err("no files".into()))
            .unwrap_err()
            .to_string();
        assert!(error.starts_with(path), "{error} (wanted {path})");
    }
}

#[test]
fn between_equally_cheap_sets_the_one_that_frees_room_for_more_pods_wins() {
    // NUMA 0: c (2 CPUs, priority 50) and b (1 CPU); NUMA 1: a (3 CPUs).
    // Evicting b frees 2 CPUs on NUMA 0 (room for p only), evicting a frees
    // 4 on NUMA 1 (room for p and q): a, although b comes first.
    let pods = [
        pod("c", 2, 50, "n-0", ""),
        pod("b", 1, 0, "n-0", ""),
        pod("a", 3, 0, "n-0", ""),
        pod("p", 2, 10, "", ""),
        pod("q", 2, 10, "", ""),
    ];
    let text = document(1, &pods, "");
    assert_eq!(free_cpus(&text), [[1, 1]]);
    let plan = run(&text, &Limits::default());
    assert_eq!(evictions(&plan), ["ns/a"]);
    assert!(matches!(outcome(&plan, "ns/q"), Outcome::FitsAsIs { .. }));
    assert!(plan.verification.verified);
}
