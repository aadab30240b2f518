//! The extender's answers — filter's verdicts and reasons, prioritize's
//! scores — are exactly those of a plain trial admission: the node's state
//! copied (without the pod asked about, where it is assumed), the pod
//! admitted by the engine, the placement scored. Checked on
//! random fleets (three policies, GPUs, a second machine shape), random
//! assumptions between the calls (so cached answers meet changed states;
//! some lay the sizes of another node's pods in reverse order, so that
//! nodes in different states hold the same free resources and share one
//! trial) and random pods (guaranteed, burstable, best-effort; with and without
//! GPUs; some shapes asked again).

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use std::collections::BTreeMap;
use std::time::Instant;

use proptest::prelude::*;
use serde_json::{Value, json};
use topoalign_engine::Node;
use topoalign_extender::scoring::score;
use topoalign_extender::{Cluster, ExtenderConfig, FilterOutcome, Strategy as Scoring};
use topoalign_model::Pod;

fn topology(numa: u32, cores: u32, gpus: u32) -> Value {
    let mut cpus = Vec::new();
    for n in 0..numa {
        for c in 0..cores {
            for t in 0..2 {
                let core = n * cores + c;
                cpus.push(json!({"id": t * numa * cores + core, "core": core, "socket": n, "numa": n}));
            }
        }
    }
    let numa_nodes: Vec<_> = (0..numa).map(|n| json!({"id": n, "memory": "8Gi"})).collect();
    let devices: Vec<_> = (0..numa)
        .flat_map(|n| (0..gpus).map(move |g| json!({"id": format!("gpu{n}-{g}"), "numa": [n]})))
        .collect();
    json!({"numaNodes": numa_nodes, "cpus": cpus, "devices": {"nvidia.com/gpu": devices}})
}

fn fleet(policies: [&str; 2], count: u32) -> topoalign_fleet::Fleet {
    let kubelet = |policy: &str| {
        json!({"topologyManagerPolicy": policy, "cpuManagerPolicy": "static", "memoryManagerPolicy": "Static",
            "reservedSystemCPUs": "0", "systemReserved": {"memory": "512Mi"},
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "612Mi"}}]})
    };
    let text = json!({"nodes": [
        {"name": "a", "count": count, "topology": topology(2, 3, 1), "kubelet": kubelet(policies[0])},
        {"name": "b", "count": count, "topology": topology(4, 2, 0), "kubelet": kubelet(policies[1])},
    ]});
    topoalign_fleet::Fleet::parse(&text.to_string(), |_| Err("no files".into())).unwrap()
}

/// A pod: CPU in millicores (0: best-effort), memory in MiB, GPUs, and
/// whether it asks by limits (guaranteed) or by requests (burstable).
#[derive(Clone, Copy, Debug)]
struct Shape {
    milli_cpu: u32,
    memory_mi: u32,
    gpus: u32,
    guaranteed: bool,
}

fn pod(name: &str, shape: Shape) -> Pod {
    let mut amounts = serde_json::Map::new();
    if shape.milli_cpu > 0 {
        amounts.insert("cpu".into(), json!(format!("{}m", shape.milli_cpu)));
        amounts.insert("memory".into(), json!(format!("{}Mi", shape.memory_mi)));
    }
    // Extended resources are asked by limits (requests default to them).
    let mut limits = serde_json::Map::new();
    if shape.gpus > 0 {
        limits.insert("nvidia.com/gpu".into(), json!(shape.gpus.to_string()));
    }
    let resources = if shape.guaranteed {
        limits.extend(amounts);
        json!({"limits": limits})
    } else {
        json!({"requests": amounts, "limits": limits})
    };
    let manifest = json!({"metadata": {"name": name, "uid": name},
        "spec": {"containers": [{"name": "app", "resources": resources}]}});
    Cluster::read_pod(&manifest).unwrap()
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        prop_oneof![Just(0u32), Just(500), Just(1000), Just(2000), Just(3000), Just(5000)],
        prop_oneof![Just(256u32), Just(1024), Just(3000), Just(7000)],
        prop_oneof![3 => Just(0u32), 1 => Just(1), 1 => Just(2)],
        any::<bool>(),
    )
        .prop_map(|(milli_cpu, memory_mi, gpus, guaranteed)| Shape {
            milli_cpu,
            memory_mi,
            gpus,
            guaranteed,
        })
}

/// One step: assume a pod on node `node % count`; assume on node `to`
/// pods of the sizes node `from` was given, in the reverse order (nodes in
/// other states that often hold the same free resources, which the
/// extender evaluates once); ask about a pod; or assume the pod asked
/// about with that shape on node `node % count` (moving it if it is
/// assumed elsewhere), so that asking again meets a node holding the very
/// pod asked about beside nodes holding others of its shape.
#[derive(Clone, Debug)]
enum Step {
    Assume(Shape, usize),
    Reversed { from: usize, to: usize },
    Ask(Shape),
    AssumeAsked(Shape, usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (shape(), any::<usize>()).prop_map(|(s, n)| Step::Assume(s, n)),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(from, to)| Step::Reversed { from, to }),
        2 => shape().prop_map(Step::Ask),
        1 => (shape(), any::<usize>()).prop_map(|(s, n)| Step::AssumeAsked(s, n)),
    ]
}

/// What a plain trial admission says for every node: filter's outcome and
/// each node's score (0 where refused).
fn reference(
    nodes: &[(String, Node)],
    empty: &[Node],
    groups: &[usize],
    asked: &Pod,
    strategy: Scoring,
) -> (FilterOutcome, Vec<(String, i64)>) {
    let mut outcome = FilterOutcome::default();
    let mut scores = Vec::new();
    for ((name, node), &group) in nodes.iter().zip(groups) {
        // A node holding the pod asked about is judged without it.
        let mut copy = node.clone();
        copy.remove(&asked.uid);
        let decision = copy.admit(asked.clone());
        if decision.rejection.is_none() {
            outcome.passed.push(name.clone());
            scores.push((name.clone(), score(&copy, &decision, asked).get(strategy)));
            continue;
        }
        scores.push((name.clone(), 0));
        let summary = topoalign_explain::words::refusal(&decision);
        let mut fresh = empty[group].clone();
        if fresh.admit(asked.clone()).rejection.is_none() {
            outcome.failed.insert(name.clone(), summary);
        } else {
            outcome
                .unresolvable
                .insert(name.clone(), format!("{summary} (even on an empty node)"));
        }
    }
    (outcome, scores)
}

fn policy() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("single-numa-node"),
        Just("restricted"),
        Just("best-effort"),
        Just("none")
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn answers_are_those_of_a_plain_trial_admission(
        policies in (policy(), policy()),
        count in 1u32..4,
        steps in proptest::collection::vec(step(), 1..24),
        strategy in prop_oneof![
            Just(Scoring::LeastAllocated),
            Just(Scoring::MostAllocated),
            Just(Scoring::BalancedAllocation),
            Just(Scoring::LeastNumaNodes),
        ],
    ) {
        let fleet = fleet([policies.0, policies.1], count);
        let config = ExtenderConfig { strategy, assume_on_prioritize: false, threads: 2, ..ExtenderConfig::default() };
        let mut cluster = Cluster::from_fleet(&fleet, config).unwrap();
        let empty: Vec<Node> = fleet.groups.iter().map(|g| topoalign_nrt::start_node(&g.spec).unwrap()).collect();
        let named = fleet.node_names();
        let groups: Vec<usize> = named.iter().map(|(_, g)| *g).collect();
        let names: Vec<String> = named.iter().map(|(n, _)| n.clone()).collect();
        let mut nodes: Vec<(String, Node)> = named.iter().map(|(n, g)| (n.clone(), empty[*g].clone())).collect();
        let now = Instant::now();
        let mut asked: BTreeMap<String, usize> = BTreeMap::new();
        // Asked pods assumed on a node: uid → the node's position.
        let mut placed: BTreeMap<String, usize> = BTreeMap::new();
        // The sizes given to each node, in order.
        let mut given: Vec<Vec<Shape>> = vec![Vec::new(); nodes.len()];
        for (i, step) in steps.into_iter().enumerate() {
            match step {
                Step::Assume(shape, n) => {
                    let p = pod(&format!("p{i}"), shape);
                    let at = n % nodes.len();
                    cluster.assume(&p, &nodes[at].0, now);
                    nodes[at].1.admit(p);
                    given[at].push(shape);
                }
                Step::Reversed { from, to } => {
                    let (from, to) = (from % nodes.len(), to % nodes.len());
                    let sizes: Vec<Shape> = given[from].iter().rev().copied().collect();
                    for (k, shape) in sizes.into_iter().enumerate() {
                        let p = pod(&format!("p{i}-{k}"), shape);
                        cluster.assume(&p, &nodes[to].0, now);
                        nodes[to].1.admit(p);
                        given[to].push(shape);
                    }
                }
                Step::AssumeAsked(shape, n) => {
                    let key = format!("{shape:?}");
                    let seen = asked.len();
                    let index = *asked.entry(key).or_insert(seen);
                    let p = pod(&format!("q{index}"), shape);
                    let at = n % nodes.len();
                    if placed.get(&p.uid) == Some(&at) {
                        continue;
                    }
                    if let Some(from) = placed.remove(&p.uid) {
                        nodes[from].1.remove(&p.uid);
                    }
                    cluster.assume(&p, &nodes[at].0, now);
                    if nodes[at].1.admit(p.clone()).admitted() {
                        placed.insert(p.uid.clone(), at);
                    }
                    given[at].push(shape);
                }
                Step::Ask(shape) => {
                    // Same shape, same name: the second ask is answered from the cache.
                    let key = format!("{shape:?}");
                    let seen = asked.len();
                    let index = *asked.entry(key).or_insert(seen);
                    let p = pod(&format!("q{index}"), shape);
                    let (expected, expected_scores) = reference(&nodes, &empty, &groups, &p, strategy);
                    let outcome = cluster.filter(&p, names.clone(), now).unwrap();
                    prop_assert_eq!(&outcome, &expected);
                    let scores = cluster.prioritize(&p, names.clone(), now).unwrap();
                    prop_assert_eq!(&scores, &expected_scores);
                }
            }
        }
    }
}
