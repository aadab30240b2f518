//! The follower's work per kubelet change — one gather of the kubelet's
//! sources, the rebuild, the NRT object with its exact state — on
//! `bench/follower.sh`'s node (`topoalign_simnodes::bench`: 256 CPUs, 8
//! NUMA nodes, 200 pods after 100 changes), for valgrind's callgrind:
//! instruction counts repeat from run to run, where wall-clock time on a
//! shared machine does not.
//!
//! Each round is one kubelet change (a pod deleted, then one added, in
//! turn; made outside the measured part) and the follower's work after
//! it, so that what the follower keeps from the last gather (the parsed
//! sources whose bytes did not change) saves only what a real change
//! leaves unchanged. `follow_once N unchanged` gathers N times with no
//! change in between (a resync).
//!
//! ```text
//! cargo build --release -p topoalign-follow --example follow_once
//! valgrind --tool=callgrind --toggle-collect='follow_once::measured' \
//!     target/release/examples/follow_once 10
//! ```
//!
//! A kubelet stand-in (`topoalign_simnodes::stand_in`) writes the
//! checkpoint files (v1.37 layouts) and the pods file in a temporary
//! directory and serves the PodResources API on a Unix socket from a
//! runtime on another thread (its work is not the follower's, and not
//! counted under the toggle). Only [`measured`] is counted.

use std::hint::black_box;
use std::process::ExitCode;
use std::time::Instant;

use topoalign_engine::Node;
use topoalign_follow::{PodSource, Rebuilder, Sources};
use topoalign_nrt::{BuildOptions, NodeSpec};
use topoalign_simnodes::bench;
use topoalign_simnodes::stand_in::{Change, DieAtWrite, Layout, Paths, StandIn};

/// One gather (on the connection `sources` keeps, as the follower
/// does), rebuild and object; the attribute bytes.
#[inline(never)]
fn measured(
    runtime: &tokio::runtime::Runtime,
    sources: &mut Sources,
    rebuilder: &mut Rebuilder,
    base: &Node,
    spec: &NodeSpec,
) -> Result<usize, String> {
    let observation = runtime.block_on(sources.gather()).map_err(|e| e.to_string())?;
    let rebuilt = rebuilder.rebuild(base, &observation).map_err(|e| e.to_string())?;
    let object = topoalign_nrt::build(
        "bench",
        &rebuilt.node,
        BuildOptions {
            exact_state: Some(spec),
        },
    );
    Ok(object.attributes.iter().map(|a| a.value.len()).sum::<usize>())
}

fn run(rounds: usize, unchanged: bool) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let spec: NodeSpec = serde_json::from_value(bench::node()).map_err(|e| e.to_string())?;
    let base = topoalign_nrt::start_node(&spec).map_err(|e| e.to_string())?;
    let root = dir.path().join("kubelet");
    let pods_file = dir.path().join("pods.json");
    let socket = dir.path().join("kubelet.sock");
    let paths = Paths {
        root_dir: root.clone(),
        pods_file: pods_file.clone(),
    };
    let (mut stand_in, _) =
        StandIn::start(base.clone(), Layout::V1_37, paths, DieAtWrite(None)).map_err(|e| e.to_string())?;
    let add = |stand_in: &mut StandIn, index: usize| -> Result<bool, String> {
        let pod = serde_json::from_value(bench::pod(index)).map_err(|e| e.to_string())?;
        let change = stand_in.add(pod).map_err(|e| e.to_string())?;
        Ok(matches!(change, Change::Admitted { .. }))
    };
    let (mut running, mut next) = (Vec::new(), 1);
    while running.len() < 200 {
        if add(&mut stand_in, next)? {
            running.push(bench::uid(next));
        }
        next += 1;
    }
    for i in 0..100 {
        if i % 2 == 0 {
            let uid = running.remove((i * 7919) % running.len());
            stand_in.delete(&uid).map_err(|e| e.to_string())?;
        } else {
            if add(&mut stand_in, next)? {
                running.push(bench::uid(next));
            }
            next += 1;
        }
    }
    // The kubelet's side, on its own thread.
    let server = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    let listener = {
        let _entered = server.enter();
        tokio::net::UnixListener::bind(&socket).map_err(|e| e.to_string())?
    };
    let answers = stand_in.answers();
    server.spawn(topoalign_podresources::serve(
        listener,
        move || answers.lock().map(|a| a.clone()).unwrap_or_default(),
        std::future::pending(),
    ));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    // The follower keeps its connection: the first gather opens it.
    let mut sources = Sources::new(root, socket, PodSource::File(pods_file));
    let mut rebuilder = Rebuilder::default();
    measured(&runtime, &mut sources, &mut rebuilder, &base, &spec)?;
    let (mut took, mut bytes) = (std::time::Duration::ZERO, 0);
    for round in 0..rounds {
        // The kubelet's change, not measured: a pod deleted, then one added
        // (none with `unchanged`: the gathers of a resync).
        if !unchanged && round % 2 == 0 {
            let uid = running.remove((round * 7919) % running.len());
            stand_in.delete(&uid).map_err(|e| e.to_string())?;
        } else if !unchanged {
            while !add(&mut stand_in, next)? {
                next += 1;
            }
            running.push(bench::uid(next));
            next += 1;
        }
        let started = Instant::now();
        bytes += black_box(measured(&runtime, &mut sources, &mut rebuilder, &base, &spec)?);
        took += started.elapsed();
    }
    println!(
        "follow_once: {rounds} changes, each gathered + rebuilt + published, in {took:.2?} ({:.2?} each; state and \
         spec {} bytes)",
        took / u32::try_from(rounds.max(1)).unwrap_or(u32::MAX),
        bytes / rounds.max(1)
    );
    drop(sources);
    drop(runtime);
    server.shutdown_background();
    Ok(())
}

fn main() -> ExitCode {
    let Some(rounds) = std::env::args().nth(1).map_or(Some(10), |n| n.parse::<usize>().ok()) else {
        eprintln!("usage: follow_once [rounds] [unchanged]");
        return ExitCode::from(2);
    };
    let unchanged = std::env::args().nth(2).is_some_and(|a| a == "unchanged");
    match run(rounds, unchanged) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("follow_once: {e}");
            ExitCode::FAILURE
        }
    }
}
