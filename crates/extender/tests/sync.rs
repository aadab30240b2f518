//! A listing of NRT objects is taken exactly as if every object were
//! rebuilt: `sync_nrt` skips the objects whose state it already holds, and
//! its answers, scores and assumptions are those of a cluster that runs
//! `apply_nrt` on every object of every listing, whether the nodes were
//! rebuilt beforehand (`sync_rebuilt`, as the poller does without the
//! cluster's lock) or not. Checked on random runs of
//! assumptions (some moved, some expiring), nodes running pods (so their
//! objects change) and asks.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

mod common;

use std::time::{Duration, Instant};

use proptest::prelude::*;
use topoalign_extender::{Cluster, ExtenderConfig};
use topoalign_model::Pod;

use common::spec;

fn pod(uid: &str, cpus: u32, gpus: u32) -> Pod {
    common::pod(uid, uid, &cpus.to_string(), gpus)
}

#[derive(Clone, Debug)]
enum Step {
    /// The extender assumes a pod of this shape on a node (moving it when
    /// the uid is already assumed elsewhere).
    Assume {
        uid: usize,
        cpus: u32,
        gpus: u32,
        node: usize,
    },
    /// A node's kubelet runs a pod (one assumed there, or another): its
    /// object changes.
    Run {
        uid: usize,
        cpus: u32,
        gpus: u32,
        node: usize,
    },
    /// A node's kubelet deletes its oldest pod.
    Delete { node: usize },
    /// Time passes.
    Wait(u64),
    /// A listing of every node's object; with `prebuilt`, every node is
    /// rebuilt beforehand (as the poller does without the lock) and handed
    /// to `sync_rebuilt`.
    Sync { prebuilt: bool },
    /// filter and prioritize (which assumes the pod on the best node).
    Ask { cpus: u32, gpus: u32 },
}

fn step() -> impl Strategy<Value = Step> {
    let shape = (1u32..6, 0u32..2);
    prop_oneof![
        3 => (0usize..6, shape.clone(), 0usize..3)
            .prop_map(|(uid, (cpus, gpus), node)| Step::Assume { uid, cpus, gpus, node }),
        2 => (0usize..6, shape.clone(), 0usize..3).prop_map(|(uid, (cpus, gpus), node)| Step::Run { uid, cpus, gpus, node }),
        1 => (0usize..3).prop_map(|node| Step::Delete { node }),
        1 => (5u64..25).prop_map(Step::Wait),
        3 => any::<bool>().prop_map(|prebuilt| Step::Sync { prebuilt }),
        2 => shape.prop_map(|(cpus, gpus)| Step::Ask { cpus, gpus }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_listing_is_taken_as_if_every_object_were_rebuilt(steps in proptest::collection::vec(step(), 1..40)) {
        check(steps)?;
    }
}

/// Found by the property: a pod assumed on the node that already runs it
/// (same uid) is refused, and that refusal releases what the running pod
/// holds — the next listing must rebuild the node, not skip it.
#[test]
fn assuming_a_pod_the_node_runs_makes_the_next_listing_rebuild_it() {
    let steps = vec![
        Step::Run {
            uid: 4,
            cpus: 1,
            gpus: 0,
            node: 0,
        },
        Step::Sync { prebuilt: false },
        Step::Assume {
            uid: 4,
            cpus: 1,
            gpus: 1,
            node: 0,
        },
        Step::Sync { prebuilt: false },
        Step::Assume {
            uid: 4,
            cpus: 2,
            gpus: 0,
            node: 0,
        },
    ];
    check(steps).unwrap();
}

/// Runs `steps` on a cluster fed by `sync_nrt` / `sync_rebuilt` (on two
/// worker threads) and on one fed by `apply_nrt` for every object,
/// comparing every answer.
fn check(steps: Vec<Step>) -> Result<(), TestCaseError> {
    let spec = spec();
    let names: Vec<String> = (0..3).map(|i| format!("worker-{i}")).collect();
    let mut kubelets: Vec<topoalign_engine::Node> = (0..3).map(|_| topoalign_nrt::start_node(&spec).unwrap()).collect();
    let config = ExtenderConfig {
        assume_timeout: Duration::from_secs(30),
        ..ExtenderConfig::default()
    };
    // The synced cluster rebuilds a listing's objects on two worker
    // threads; the other applies them one by one.
    let mut synced = Cluster::new(ExtenderConfig {
        threads: 2,
        ..config.clone()
    });
    let mut rebuilt = Cluster::new(config);
    let objects = |kubelets: &[topoalign_engine::Node]| -> Vec<topoalign_nrt::NodeResourceTopology> {
        let options = topoalign_nrt::BuildOptions {
            exact_state: Some(&spec),
        };
        names
            .iter()
            .zip(kubelets)
            .map(|(name, node)| topoalign_nrt::build(name, node, options))
            .collect()
    };
    let mut now = Instant::now();
    let listing = objects(&kubelets);
    synced.sync_nrt(&listing, now);
    for object in &listing {
        rebuilt.apply_nrt(object, now).unwrap();
    }
    let mut asks = 0;
    for step in steps {
        match step {
            Step::Assume { uid, cpus, gpus, node } => {
                let p = pod(&format!("p{uid}"), cpus, gpus);
                synced.assume(&p, &names[node], now);
                rebuilt.assume(&p, &names[node], now);
            }
            Step::Run { uid, cpus, gpus, node } => {
                let uid = format!("p{uid}");
                if kubelets.iter().all(|k| k.pods().iter().all(|p| p.uid != uid)) {
                    kubelets[node].admit(pod(&uid, cpus, gpus));
                }
            }
            Step::Delete { node } => {
                if let Some(uid) = kubelets[node].pods().first().map(|p| p.uid.clone()) {
                    kubelets[node].remove(&uid);
                }
            }
            Step::Wait(seconds) => now += Duration::from_secs(seconds),
            Step::Sync { prebuilt } => {
                let listing = objects(&kubelets);
                let report = if prebuilt {
                    let rebuilt = listing.iter().map(|o| Some(Cluster::rebuild(o))).collect();
                    synced.sync_rebuilt(&listing, rebuilt, now)
                } else {
                    synced.sync_nrt(&listing, now)
                };
                prop_assert!(report.errors.is_empty(), "{:?}", report);
                for object in &listing {
                    rebuilt.apply_nrt(object, now).unwrap();
                }
            }
            Step::Ask { cpus, gpus } => {
                asks += 1;
                let p = pod(&format!("q{asks}"), cpus, gpus);
                let outcome = synced.filter(&p, names.clone(), now).unwrap();
                prop_assert_eq!(&outcome, &rebuilt.filter(&p, names.clone(), now).unwrap());
                let scores = synced.prioritize(&p, names.clone(), now).unwrap();
                prop_assert_eq!(&scores, &rebuilt.prioritize(&p, names.clone(), now).unwrap());
            }
        }
        prop_assert_eq!(synced.assumptions(), rebuilt.assumptions());
    }
    Ok(())
}
