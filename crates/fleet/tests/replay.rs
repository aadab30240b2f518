//! The judge: the simulator's placements replayed node by node
//! through fresh engine nodes with the real pods. The exact scheduler must
//! cause zero admission failures; the other two must cause exactly the
//! failures the simulator counted (printed beside it).

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

mod common;

use topoalign_engine::{TopologyPolicyName, TopologyScope};
use topoalign_fleet::{Fleet, Options, Scheduler, Scoring, Workload, replay_check, simulate};

fn check(workload_text: &str, scopes: Option<Vec<TopologyScope>>, scoring: Scoring) {
    let fleet = Fleet::parse(&common::fleet_text(6, 6), |_| Err("no files".into())).unwrap();
    let workload = Workload::parse(workload_text).unwrap();
    let options = Options {
        scopes,
        scoring,
        threads: 2,
        keep_logs: true,
        ..Options::default()
    };
    let simulation = simulate(&fleet, &workload, &options, &|_| {}).expect("every entry starts");
    println!("policy             scope       scheduler  scheduled  rejected(sim)  rejected(replay)  unplaced");
    for ((run, key), logs) in simulation
        .report
        .runs
        .iter()
        .zip(&simulation.keys)
        .zip(&simulation.logs)
    {
        let logs = logs.as_ref().expect("logs were asked for");
        let replay = replay_check(&fleet, &workload, key, logs).unwrap();
        println!(
            "{:18} {:11} {:10} {:9}  {:13}  {:16}  {:8}",
            run.policy,
            run.scope,
            run.scheduler,
            run.scheduled,
            run.rejected_at_admission,
            replay.rejected,
            run.unplaced
        );
        assert_eq!(replay.rejected, run.rejected_at_admission, "{key:?}");
        assert_eq!(replay.admitted, run.scheduled, "{key:?}");
        if key.scheduler == Scheduler::Exact {
            assert_eq!(replay.rejected, 0, "{key:?}");
        }
        assert_eq!(
            run.scheduled + run.rejected_at_admission + run.unplaced,
            simulation.report.pods
        );
    }
    // The point of the exercise: under single-numa-node the unaware
    // scheduler sends pods to nodes that reject them.
    let unaware_snn = simulation
        .report
        .runs
        .iter()
        .find(|r| r.policy == "single-numa-node" && r.scheduler == "unaware")
        .unwrap();
    assert!(unaware_snn.rejected_at_admission > 0, "{unaware_snn:?}");
    let _ = TopologyPolicyName::SingleNumaNode;
}

#[test]
fn exact_placements_replay_without_a_single_admission_failure() {
    check(&common::generator(600, 1, 0.0), None, Scoring::LeastAllocated);
}

#[test]
fn with_churn_and_bin_packing_too() {
    check(&common::generator(900, 2, 0.4), None, Scoring::MostAllocated);
}

#[test]
fn under_both_scopes() {
    check(
        &common::generator(500, 3, 0.2),
        Some(vec![TopologyScope::Container, TopologyScope::Pod]),
        Scoring::LeastAllocated,
    );
}

/// Regression: canonical pods inside a class once took their uid from the
/// class's depth, so a pod admitted after a rejected trial on the same node
/// reused the rejected pod's uid — and with it the CPU manager's leftover
/// reusable init-container CPUs for that uid. The exact scheduler then
/// placed a pod the node's replay rejected. The example workload (init
/// containers, restricted policy, shuffled) showed it.
#[test]
fn a_pod_after_a_rejected_trial_does_not_inherit_its_leftovers() {
    let examples = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fleet");
    let read = |name: &str| std::fs::read_to_string(examples.join(name)).unwrap();
    let fleet = Fleet::parse(&read("fleet.yaml"), |p| {
        std::fs::read_to_string(examples.join(p)).map_err(|e| e.to_string())
    })
    .unwrap();
    let mut workload = Workload::parse(&read("workload.yaml")).unwrap();
    workload.shuffle(1);
    let options = Options {
        policies: vec![TopologyPolicyName::Restricted],
        keep_logs: true,
        ..Options::default()
    };
    let simulation = simulate(&fleet, &workload, &options, &|_| {}).expect("every entry starts");
    for ((run, key), logs) in simulation
        .report
        .runs
        .iter()
        .zip(&simulation.keys)
        .zip(&simulation.logs)
    {
        let replay = replay_check(&fleet, &workload, key, logs.as_ref().unwrap()).unwrap();
        assert_eq!(replay.rejected, run.rejected_at_admission, "{key:?}");
    }
}
