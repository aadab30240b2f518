//! Stranded capacity counts DRA devices as it counts device-plugin ones:
//! on `examples/fleet/dra-fleet.yaml` (two nodes, a GPU per NUMA node,
//! 4 + 3 CPUs for pods under single-numa-node), five pods of 3 exclusive
//! CPUs and no devices: each node runs two (one per NUMA node) and the
//! fifth fits nowhere. Every node is then stranded for it (an empty node
//! admits it, the node has 1 CPU left on NUMA node 0) with both its GPUs
//! free, one on each NUMA node: 4 GPUs stranded, 2 per NUMA node — under
//! the DRA driver's name with the fleet's `dra:` block, under the
//! device-plugin resource without it.

use std::collections::BTreeMap;
use std::path::Path;

use topoalign_engine::TopologyPolicyName;
use topoalign_fleet::{Fleet, Options, RunReport, Scheduler, Workload, simulate};

const PODS: &str = "
apiVersion: apps/v1
kind: Deployment
metadata: {name: cpu, namespace: ml}
spec:
  replicas: 5
  template:
    spec:
      containers:
        - name: app
          image: registry.example.com/app:1
          resources:
            limits: {cpu: '3', memory: 1Gi}
";

fn example_fleet() -> Fleet {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fleet/dra-fleet.yaml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    Fleet::parse(&text, |path| Err(format!("no scenario files here: {path}"))).expect("the example parses")
}

fn run(fleet: &Fleet) -> RunReport {
    let workload = Workload::parse(PODS).expect("the workload parses");
    let options = Options {
        policies: vec![TopologyPolicyName::SingleNumaNode],
        schedulers: vec![Scheduler::Unaware],
        ..Options::default()
    };
    let simulation = simulate(fleet, &workload, &options, &|_| {}).expect("the nodes start");
    let [run] = <[RunReport; 1]>::try_from(simulation.report.runs).expect("one run");
    assert_eq!(
        (run.scheduled, run.unplaced),
        (4, 1),
        "two pods per node, the fifth nowhere"
    );
    run
}

/// Per NUMA zone, the stranded devices of `resource`.
fn by_zone(run: &RunReport, resource: &str) -> BTreeMap<String, f64> {
    run.stranded_by_zone
        .iter()
        .map(|zone| (zone.zone.clone(), zone.devices.get(resource).copied().unwrap_or(0.0)))
        .collect()
}

#[test]
fn free_dra_devices_of_stranded_nodes_are_stranded_per_numa_node() {
    let expected = BTreeMap::from([("node-0".to_owned(), 2.0), ("node-1".to_owned(), 2.0)]);

    let dra = run(&example_fleet());
    assert_eq!(dra.stranded_cpus, 2.0, "1 CPU on NUMA node 0 of each node");
    assert_eq!(dra.stranded_devices.get("gpu.example.com"), Some(&4.0));
    assert_eq!(
        dra.stranded_devices.get("example.com/gpu"),
        None,
        "the device plugin has none"
    );
    assert_eq!(by_zone(&dra, "gpu.example.com"), expected);

    let mut plugin = example_fleet();
    plugin.dra = None;
    let plugin = run(&plugin);
    assert_eq!(plugin.stranded_devices.get("example.com/gpu"), Some(&4.0));
    assert_eq!(by_zone(&plugin, "example.com/gpu"), expected);
    assert_eq!(plugin.stranded_cpus, dra.stranded_cpus);
}
