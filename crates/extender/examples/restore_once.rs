//! The extender restoring NRT objects with exact state, as it does at
//! start (`Cluster::sync_nrt`, the path of `--nrt-from-cluster`), for
//! valgrind's callgrind: instruction counts repeat from run to run, where
//! wall-clock time on a shared machine does not.
//!
//! ```text
//! cargo build --release -p topoalign-extender --example restore_once
//! valgrind --tool=callgrind --toggle-collect='restore_once::measured' \
//!     target/release/examples/restore_once 10
//! ```
//!
//! A second argument sets the worker threads the sync rebuilds on
//! (default 1: the instruction count of one thread's work; `time
//! restore_once 1000 2` shows the wall time on two cores).
//!
//! The objects (default 10) are `benches/followed`'s node — 256 CPUs, 8
//! NUMA nodes, 200 pods — under other names. Only [`measured`] is
//! counted under that toggle; building the objects is not. The allocator
//! is the binary's (jemalloc); the instruction count includes its work.

/// The `topoalign` binary's allocator (see `crates/cli/src/main.rs`):
/// what is measured here is what the extender runs on.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[path = "../benches/followed/mod.rs"]
mod followed;

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use topoalign_extender::{Cluster, ExtenderConfig};
use topoalign_nrt::NodeResourceTopology;

/// The cluster is given back, not dropped here: the extender keeps its
/// nodes, and dropping them is no part of its start.
#[inline(never)]
fn measured(objects: &[NodeResourceTopology], threads: usize) -> Cluster {
    let mut cluster = Cluster::new(ExtenderConfig {
        threads,
        ..ExtenderConfig::default()
    });
    let report = cluster.sync_nrt(objects, Instant::now());
    assert!(report.errors.is_empty() && report.passed.is_empty(), "{report:?}");
    cluster
}

fn main() -> ExitCode {
    let Some(count) = std::env::args().nth(1).map_or(Some(10), |n| n.parse::<usize>().ok()) else {
        eprintln!("usage: restore_once [objects [threads]]");
        return ExitCode::from(2);
    };
    let Some(threads) = std::env::args().nth(2).map_or(Some(1), |n| n.parse::<usize>().ok()) else {
        eprintln!("usage: restore_once [objects [threads]]");
        return ExitCode::from(2);
    };
    let object = followed::object("node", 200);
    let objects: Vec<NodeResourceTopology> = (0..count)
        .map(|i| {
            let mut copy = object.clone();
            copy.metadata.name = format!("node-{i:05}");
            copy
        })
        .collect();
    let started = Instant::now();
    let cluster = black_box(measured(&objects, threads));
    let took = started.elapsed();
    let restored = cluster.len();
    println!("restore_once: {restored} nodes restored on {threads} thread(s) in {took:.2?}");
    ExitCode::SUCCESS
}
