//! `topoalign replay`'s work per event: reading the scenario text, the
//! engine's admissions and deletions, the result document written as the
//! command writes it (pretty JSON).
//!
//! A generated scenario on a 2-NUMA-node machine (2 × 16 cores, SMT;
//! static CPU manager, Static memory manager, single-numa-node): 2,000 pods
//! of a few shapes (guaranteed, burstable, best-effort), each added and
//! deleted eight adds later, so the node stays partly full. Measured side
//! by side in one run: the reading through `serde_json::Value`
//! ([`Scenario::parse`] then [`replay`]) and the direct reading
//! ([`ReplayInput`]); both must print the same document.
//!
//! Prints microseconds per event (an add or a delete) and per pod (its add
//! and its delete), the best of several runs; not a timed test.

use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;

use topoalign_scenario::{Replay, ReplayInput, Scenario, replay};

const PODS: usize = 2_000;
const KEPT: usize = 8;
const RUNS: usize = 7;

fn scenario() -> String {
    let mut cpus = Vec::new();
    for numa in 0..2 {
        for core in 0..16 {
            for thread in 0..2 {
                let core_id = numa * 16 + core;
                cpus.push(format!(
                    r#"{{"id": {}, "core": {core_id}, "socket": {numa}, "numa": {numa}}}"#,
                    thread * 32 + core_id
                ));
            }
        }
    }
    let mut events = Vec::new();
    let shapes = [("2", "4Gi"), ("4", "8Gi"), ("1", "1Gi"), ("500m", "1Gi"), ("", "")];
    for i in 0..PODS {
        let (cpu, memory) = shapes[i % shapes.len()];
        let resources = if cpu.is_empty() {
            "{}".to_string()
        } else if i % 10 == 3 {
            format!(r#"{{"requests": {{"cpu": "{cpu}", "memory": "{memory}"}}}}"#)
        } else {
            format!(r#"{{"limits": {{"cpu": "{cpu}", "memory": "{memory}"}}}}"#)
        };
        events.push(format!(
            r#"{{"add": {{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "pod-{i}", "namespace": "bench", "uid": "uid-{i}", "labels": {{"app": "bench"}}}},
              "spec": {{"containers": [{{"name": "app", "image": "registry.example/app:1", "resources": {resources}}}]}}}}}}"#
        ));
        if i >= KEPT {
            events.push(format!(r#"{{"delete": "bench/pod-{}"}}"#, i - KEPT));
        }
    }
    let mut text = String::new();
    let _ = write!(
        text,
        r#"{{"topology": {{"numaNodes": [{{"id": 0, "memory": "64Gi"}}, {{"id": 1, "memory": "64Gi"}}], "cpus": [{}]}},
  "kubelet": {{"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static", "memoryManagerPolicy": "Static",
    "reservedSystemCPUs": "0", "systemReserved": {{"memory": "1Gi"}}, "reservedMemory": [{{"numaNode": 0, "limits": {{"memory": "1124Mi"}}}}]}},
  "events": [{}]}}"#,
        cpus.join(", "),
        events.join(",\n")
    );
    text
}

fn document(replayed: Replay) -> String {
    match replayed {
        Replay::Completed(document) => serde_json::to_string_pretty(&document).expect("serializes") + "\n",
        Replay::Refused(error) => panic!("the kubelet refused the bench scenario: {error}"),
    }
}

/// The best of `RUNS` runs of `work`, in seconds, and its last output.
fn best(work: impl Fn() -> String) -> (f64, String) {
    let mut best = f64::INFINITY;
    let mut out = String::new();
    for _ in 0..RUNS {
        let start = Instant::now();
        out = black_box(work());
        best = best.min(start.elapsed().as_secs_f64());
    }
    (best, out)
}

fn main() {
    let text = scenario();
    let events = Scenario::parse(&text).expect("valid scenario").events.len();
    let through_value = || document(replay(&Scenario::parse(&text).expect("valid")).expect("replays"));
    let direct = || document(ReplayInput::parse(&text).expect("valid").replay().expect("replays"));
    let (slow, slow_out) = best(through_value);
    let (fast, fast_out) = best(direct);
    assert!(slow_out == fast_out, "the two readings print different documents");
    println!("replay, 2 NUMA nodes, {PODS} pods, {events} events (best of {RUNS} runs):");
    for (name, seconds) in [("through serde_json::Value", slow), ("direct (ReplayInput)", fast)] {
        println!(
            "  {name:<28} {:>7.2} µs per event, {:>7.2} µs per pod (add + delete)   target ≤ 15 µs per event",
            seconds * 1e6 / events as f64,
            seconds * 1e6 / PODS as f64
        );
    }
}
