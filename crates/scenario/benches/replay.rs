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

mod common;

use std::hint::black_box;
use std::time::Instant;

use common::{PODS, document, scenario};
use topoalign_scenario::{ReplayInput, Scenario, replay};

const RUNS: usize = 7;

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
