//! Exactly one `filter` + `prioritize` over the benchmark's 5,000 nodes
//! (`benches/common`), for valgrind's callgrind: instruction counts repeat
//! from run to run, where wall-clock time on a shared machine does not.
//!
//! ```text
//! cargo build --release -p topoalign-extender --example filter_once
//! valgrind --tool=callgrind --toggle-collect='filter_once::measured' \
//!     target/release/examples/filter_once cold
//! ```
//!
//! - `warm`: the pod's shape was asked about once before (answers cached);
//! - `cold`: a shape never seen, so one trial admission per distinct node
//!   state.
//!
//! Only [`measured`] is counted under that toggle; building the cluster
//! (and, for `warm`, the call that fills the cache) is not. The engine
//! work runs on the calling thread (one worker), so that callgrind counts
//! all of it.

#[path = "../benches/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use topoalign_extender::Cluster;
use topoalign_model::Pod;

/// The names are moved in, as the server takes them out of the request.
#[inline(never)]
fn measured(cluster: &mut Cluster, pod: &Pod, names: Vec<String>) -> usize {
    let now = Instant::now();
    let kept = cluster.filter(pod, names, now).expect("evaluated");
    let refused = kept.failed.len() + kept.unresolvable.len();
    let scores = cluster.prioritize(pod, kept.passed, now).expect("evaluated");
    refused + scores.len()
}

fn main() -> ExitCode {
    let warm = match std::env::args().nth(1).as_deref() {
        Some("warm") => true,
        Some("cold") => false,
        _ => {
            eprintln!("usage: filter_once <cold|warm>");
            return ExitCode::from(2);
        }
    };
    let (mut cluster, names) = common::cluster(1);
    let pod = common::pod("web", 3, 6000);
    if warm {
        black_box(unmeasured(&mut cluster, &pod, names.clone()));
    }
    let answered = black_box(measured(&mut cluster, &pod, names));
    println!("filter_once: {answered} nodes refused or scored");
    ExitCode::SUCCESS
}

/// The same call, outside the measured function (fills the cache).
fn unmeasured(cluster: &mut Cluster, pod: &Pod, names: Vec<String>) -> usize {
    let now = Instant::now();
    let kept = cluster.filter(pod, names, now).expect("evaluated");
    cluster.prioritize(pod, kept.passed, now).expect("evaluated").len()
}
