//! The report's numbers add up: on random fleets and workloads (drawn
//! with the crate's own seeded generator), the stranded capacity per NUMA
//! zone sums to the stranded totals — CPUs, memory and devices — in every
//! run; fragmentation is a share, and 0 when nothing is placed.

mod common;

use topoalign_fleet::rng::Rng;
use topoalign_fleet::{Fleet, Options, RunReport, Workload, simulate};

/// How many random fleet × workload cases.
const CASES: u64 = 16;

fn pick<'a>(rng: &mut Rng, items: &[&'a str]) -> &'a str {
    items[usize::try_from(rng.below(items.len() as u64)).unwrap_or(0)]
}

fn between(rng: &mut Rng, low: u32, high: u32) -> u32 {
    low + u32::try_from(rng.below(u64::from(high - low + 1))).unwrap_or(0)
}

/// A kubelet block: static or none CPU manager, Static or None memory
/// manager, either scope.
fn kubelet(rng: &mut Rng) -> serde_json::Value {
    let mut kubelet = common::kubelet();
    if rng.below(3) == 0 {
        kubelet["cpuManagerPolicy"] = "none".into();
    }
    if rng.below(3) == 0 {
        let map = kubelet.as_object_mut().expect("a mapping");
        map.remove("memoryManagerPolicy");
        map.remove("reservedMemory");
    }
    kubelet["topologyManagerScope"] = pick(rng, &["container", "pod"]).into();
    kubelet
}

fn random_fleet(rng: &mut Rng) -> String {
    let groups = between(rng, 1, 3);
    let nodes: Vec<serde_json::Value> = (0..groups)
        .map(|g| {
            let topology = common::topology(
                between(rng, 1, 4),
                between(rng, 2, 6),
                between(rng, 8, 64),
                between(rng, 0, 2),
            );
            serde_json::json!({
                "name": format!("g{g}"),
                "count": between(rng, 1, 6),
                "topology": topology,
                "kubelet": kubelet(rng),
            })
        })
        .collect();
    serde_json::json!({ "nodes": nodes }).to_string()
}

fn random_workload(rng: &mut Rng) -> String {
    let sizes: Vec<String> = (0..between(rng, 1, 4))
        .map(|_| {
            format!(
                "    - {{weight: {}, cpu: \"{}\", memory: {}}}\n",
                between(rng, 1, 5),
                pick(rng, &["500m", "1", "1500m", "2", "3", "4", "6", "8"]),
                pick(rng, &["512Mi", "1Gi", "2Gi", "4Gi", "8Gi", "16Gi"]),
            )
        })
        .collect();
    format!(
        "generator:\n  pods: {}\n  seed: {}\n  sizes:\n{}  gpuShare: {}\n  guaranteedShare: {}\n  churn: {}\n",
        between(rng, 40, 160),
        rng.next_u64(),
        sizes.concat(),
        f64::from(between(rng, 0, 30)) / 100.0,
        f64::from(between(rng, 50, 100)) / 100.0,
        f64::from(between(rng, 0, 30)) / 100.0,
    )
}

fn run_all(fleet: &str, workload: &str) -> Vec<RunReport> {
    let fleet = Fleet::parse(fleet, |_| Err("no files".into())).expect("a valid fleet");
    let workload = Workload::parse(workload).expect("a valid workload");
    let options = Options {
        threads: 2,
        ..Options::default()
    };
    simulate(&fleet, &workload, &options, &|_| {})
        .expect("every entry starts")
        .report
        .runs
}

/// CPUs are reported in whole millicores.
fn milli(cpus: f64) -> i64 {
    (cpus * 1000.0).round() as i64
}

fn assert_adds_up(run: &RunReport, case: &str) {
    let at = format!("{case} {}/{}/{}", run.policy, run.scope, run.scheduler);
    let zone_cpus: i64 = run.stranded_by_zone.iter().map(|z| milli(z.cpus)).sum();
    assert_eq!(zone_cpus, milli(run.stranded_cpus), "CPUs, {at}: {run:?}");
    // Memory and devices are whole numbers far below 2^53: exact in f64.
    let zone_memory: f64 = run.stranded_by_zone.iter().map(|z| z.memory_bytes).sum();
    assert_eq!(zone_memory, run.stranded_memory_bytes, "memory, {at}: {run:?}");
    let mut zone_devices = std::collections::BTreeMap::<String, f64>::new();
    for zone in &run.stranded_by_zone {
        for (resource, n) in &zone.devices {
            *zone_devices.entry(resource.clone()).or_default() += n;
        }
    }
    assert_eq!(zone_devices, run.stranded_devices, "devices, {at}: {run:?}");
    // Stranded is part of free; fragmentation is a share.
    assert!(run.stranded_cpus <= run.free_cpus + 1e-9, "{at}: {run:?}");
    assert!(run.stranded_memory_bytes <= run.free_memory_bytes, "{at}: {run:?}");
    for share in [run.fragmentation.cpu, run.fragmentation.memory] {
        assert!((0.0..=1.0).contains(&share), "fragmentation {share}, {at}");
    }
    // Every pod is counted once, and named once where it failed.
    assert_eq!(run.rejected_pods.len(), run.rejected_at_admission, "{at}");
    assert_eq!(run.unplaced_pods.len(), run.unplaced, "{at}");
}

#[test]
fn stranded_capacity_per_zone_sums_to_the_totals_on_random_fleets() {
    let mut stranded_runs = 0;
    let mut zone_runs = 0;
    for case in 0..CASES {
        let mut rng = Rng::new(0x5EED_0000 + case);
        let fleet = random_fleet(&mut rng);
        let workload = random_workload(&mut rng);
        for run in run_all(&fleet, &workload) {
            assert_adds_up(&run, &format!("case {case}"));
            stranded_runs += usize::from(run.stranded_cpus > 0.0);
            zone_runs += usize::from(run.stranded_by_zone.len() > 1);
        }
    }
    // The property was exercised, not vacuously true.
    assert!(stranded_runs > 0 && zone_runs > 0, "{stranded_runs} {zone_runs}");
}

#[test]
fn the_example_workloads_add_up_too() {
    let fleet = common::fleet_text(4, 8);
    for (seed, churn) in [(1, 0.0), (2, 0.3)] {
        for run in run_all(&fleet, &common::generator(400, seed, churn)) {
            assert_adds_up(&run, &format!("generator {seed}"));
        }
    }
}

#[test]
fn nothing_placed_is_no_fragmentation() {
    let fleet = common::fleet_text(2, 3);
    for run in run_all(&fleet, "apiVersion: v1\nkind: List\nitems: []\n") {
        assert_eq!(run.scheduled, 0);
        assert_eq!((run.fragmentation.cpu, run.fragmentation.memory), (0.0, 0.0), "{run:?}");
        assert!(run.free_cpus > 0.0);
    }
}

#[test]
fn a_kubelet_that_would_not_start_is_an_error_naming_the_entry() {
    // More than 8 NUMA nodes: the topology manager refuses to start under
    // any policy but none.
    let fleet = serde_json::json!({"nodes": [
        {"name": "fine", "count": 2, "topology": common::topology(2, 2, 8, 0), "kubelet": common::kubelet()},
        {"name": "wide", "count": 1, "topology": common::topology(9, 1, 8, 0), "kubelet": common::kubelet()},
    ]})
    .to_string();
    let fleet = Fleet::parse(&fleet, |_| Err("no files".into())).expect("a valid fleet");
    let workload = Workload::parse(&common::generator(10, 1, 0.0)).expect("a valid workload");
    let options = Options {
        policies: vec![
            topoalign_engine::TopologyPolicyName::None,
            topoalign_engine::TopologyPolicyName::Restricted,
        ],
        ..Options::default()
    };
    let error = simulate(&fleet, &workload, &options, &|_| {}).err().expect("refused");
    assert_eq!(
        (error.entry, error.name.as_str(), error.policy.as_str()),
        (1, "wide", "restricted")
    );
    let text = error.to_string();
    assert!(
        text.starts_with(
            "nodes[1] (wide).kubelet: the kubelet would not start with topologyManagerPolicy restricted: "
        ),
        "{text}"
    );
}

#[test]
fn failed_pods_are_named_with_their_reason() {
    let fleet = common::fleet_text(1, 1);
    let pod = |name: &str, cpu: u32| {
        format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n    - name: c\n      resources: {{limits: {{cpu: \"{cpu}\", memory: 1Gi}}}}\n"
        )
    };
    // 20 CPUs: room on both nodes, but no NUMA node has 20; 100: no room.
    let workload = [pod("wide", 20), pod("huge", 100)].join("---\n");
    let fleet = Fleet::parse(&fleet, |_| Err("no files".into())).expect("a valid fleet");
    let workload = Workload::parse(&workload).expect("a valid workload");
    let options = Options {
        policies: vec![topoalign_engine::TopologyPolicyName::SingleNumaNode],
        ..Options::default()
    };
    let runs = simulate(&fleet, &workload, &options, &|_| {})
        .expect("runs")
        .report
        .runs;
    let outcome = |scheduler: &str| {
        let run = runs.iter().find(|r| r.scheduler == scheduler).expect("run");
        let named = |list: &[topoalign_fleet::PodOutcome]| {
            list.iter()
                .map(|p| format!("{}: {}", p.pod, p.reason))
                .collect::<Vec<_>>()
        };
        (named(&run.rejected_pods), named(&run.unplaced_pods))
    };
    let (rejected, unplaced) = outcome("unaware");
    assert_eq!(rejected, ["default/wide: TopologyAffinityError"]);
    assert_eq!(unplaced, ["default/huge: no node has room for its requests"]);
    let (rejected, unplaced) = outcome("exact");
    assert!(rejected.is_empty(), "{rejected:?}");
    assert_eq!(
        unplaced,
        [
            "default/wide: the kubelet would reject it on every node with room",
            "default/huge: no node has room for its requests"
        ]
    );
    let (_, unplaced) = outcome("nrt");
    assert_eq!(
        unplaced,
        [
            "default/wide: NodeResourceTopologyMatch refused every node with room",
            "default/huge: no node has room for its requests"
        ]
    );
}
