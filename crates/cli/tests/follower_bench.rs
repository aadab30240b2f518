//! A benchmark, not a test (ignored; `bench/follower.sh` runs it on a
//! release build): a 256-CPU, 8-NUMA node holding 200 pods, played by
//! `topoalign kubelet-stand-in`, followed by `topoalign agent
//! --follow-kubelet`. For each of 100 changes (a delete or an add) it
//! measures
//!
//! - `follower lag`: from the stand-in's line saying the change is written
//!   to the follower's status knowing exactly the new state (inotify,
//!   gather over the socket and files, rebuild, the long-poll's answer);
//! - `rebuild + object`: in this process, one gather of the same sources
//!   (on a kept connection, as the follower gathers),
//!   `topoalign_follow::rebuild` and the NRT object with its exact state —
//!   the work the follower does per change;
//! - the baseline, measured in the same run on the same state: rebuilding
//!   the node by admitting its 200 pods again on a fresh node (what the
//!   old history attribute cost its readers), and the ratio;
//! - the extender's start: 5,000 copies of the last object (other node
//!   names) restored into a `topoalign_extender::Cluster` through
//!   `sync_nrt`, the path of `--nrt-from-cluster`, beside re-admitting the
//!   pods of as many nodes (scaled from the per-node baseline).
//!
//! Sizes: `TOPOALIGN_BENCH_PODS` (200), `TOPOALIGN_BENCH_CHANGES` (100),
//! `TOPOALIGN_BENCH_OBJECTS` (5,000). The last lines set the two figures
//! beside the targets (under 5 ms; under 2 s on 2 cores), judged
//! only at full size on a release build. Progress goes to stderr; the
//! machine's load average is printed at the start and the end (other jobs
//! on the machine skew every figure).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // a benchmark's report

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use topoalign_agent::{Client, Endpoint};

mod agent_support;

/// The `topoalign` binary's allocator (`crates/cli/src/main.rs`): the
/// extender's start is measured in this process, and should be measured on
/// what the binary runs (the allocator decides much of its time).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// `topoalign_simnodes::bench`'s node (`examples/nodes/256-cpu-8-numa.yaml`).
fn node() -> Value {
    topoalign_simnodes::bench::node()
}

/// The stand-in's input adding `bench`'s pod `index`.
fn pod(index: usize) -> Value {
    json!({"add": topoalign_simnodes::bench::pod(index)})
}

fn size(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".to_owned())
}

/// How long to wait for the follower to know one change before giving up
/// with what it says (a benchmark that hangs measures nothing).
const SETTLE_LIMIT: Duration = Duration::from_secs(120);

/// Whether a figure meets its target, said only when the run can tell.
fn verdict(comparable: bool, met: bool) -> &'static str {
    match (comparable, met) {
        (false, _) => "(not judged)",
        (true, true) => "met",
        (true, false) => "NOT MET",
    }
}

fn median(values: &mut [Duration]) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn p90(values: &mut [Duration]) -> Duration {
    values.sort();
    values[values.len() * 9 / 10]
}

#[test]
#[ignore = "a benchmark: bench/follower.sh runs it on a release build"]
fn follower_resync_per_change() {
    let (pods, change_count, object_count) = (
        size("TOPOALIGN_BENCH_PODS", 200),
        size("TOPOALIGN_BENCH_CHANGES", 100),
        size("TOPOALIGN_BENCH_OBJECTS", 5000),
    );
    let load_at_start = load();
    eprintln!(
        "follower bench: {pods} pods, {change_count} changes, {object_count} objects; load average {load_at_start}"
    );
    let dir = tempfile::tempdir().unwrap();
    let node_path = dir.path().join("node.json");
    std::fs::write(&node_path, serde_json::to_vec(&node()).unwrap()).unwrap();
    let root = dir.path().join("kubelet");
    let socket = root.join("pod-resources/kubelet.sock");
    let pods_file = dir.path().join("pods.json");
    let binary = env!("CARGO_BIN_EXE_topoalign");
    let mut stand_in = agent_support::dies_with_test(&mut Command::new(binary))
        .arg("kubelet-stand-in")
        .arg("--node")
        .arg(&node_path)
        .arg("--root-dir")
        .arg(&root)
        .arg("--pod-resources-socket")
        .arg(&socket)
        .arg("--pods-file")
        .arg(&pods_file)
        .args(["--checkpoint-layout", "1.37"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = stand_in.stdin.take().unwrap();
    let mut output = BufReader::new(stand_in.stdout.take().unwrap());
    let mut read = || -> Value {
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    };
    read();
    let mut send = |change: &Value, read: &mut dyn FnMut() -> Value| -> Value {
        writeln!(input, "{change}").unwrap();
        input.flush().unwrap();
        read()
    };
    let mut state = Value::Null;
    let mut running = Vec::new();
    let mut next = 1;
    let filling = Instant::now();
    while running.len() < pods {
        let line = send(&pod(next), &mut read);
        if line["event"] == "admitted" {
            running.push(topoalign_simnodes::bench::uid(next));
            state = line["state"].clone();
        }
        next += 1;
        assert!(
            next < 4 * pods + 10,
            "the node refuses most pods: {} {}",
            line["reason"],
            line["message"]
        );
        if running.len().is_multiple_of(50) && line["event"] == "admitted" {
            eprintln!("  filled {} pods ({:.1?})", running.len(), filling.elapsed());
        }
    }

    let follower_socket = dir.path().join("follower.sock");
    let mut follower = agent_support::dies_with_test(&mut Command::new(binary))
        .args(["agent", "--follow-kubelet", "--log-format", "json"])
        .arg("--node")
        .arg(&node_path)
        .arg("--kubelet-root-dir")
        .arg(&root)
        .arg("--pod-resources-socket")
        .arg(&socket)
        .arg("--pods-file")
        .arg(&pods_file)
        .arg("--socket")
        .arg(&follower_socket)
        .arg("--state-dir")
        .arg(dir.path().join("state"))
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut log = BufReader::new(follower.stderr.take().unwrap());
    loop {
        let mut line = String::new();
        assert!(log.read_line(&mut line).unwrap() > 0, "the follower exited");
        if line.contains("serving the read-only API") {
            break;
        }
    }
    std::thread::spawn(move || for _ in log.lines() {});
    let client = Client::new(Endpoint::Unix(follower_socket));
    let mut generation = 0u64;
    let mut wait_for = |expected: &Value| {
        let since = Instant::now();
        loop {
            let status: Value = client
                .call("GET", &format!("/v1/status?after={generation}"), None)
                .unwrap();
            generation = status["generation"].as_u64().unwrap();
            if status["state"] == "known" && &status["record"] == expected {
                return;
            }
            assert!(
                since.elapsed() < SETTLE_LIMIT,
                "the follower did not reach the stand-in's state within {SETTLE_LIMIT:?}; it says {} {}",
                status["state"],
                status["reason"]
            );
        }
    };
    wait_for(&state);
    eprintln!("  the follower knows the {pods} pods; {change_count} changes follow");

    // In-process: the follower's per-change work, and the baseline.
    let started = topoalign_intake::start(&topoalign_intake::NodeInputs::new(
        Some(&node_path),
        None,
        &topoalign_intake::Overrides::default(),
    ))
    .unwrap();
    let base = started.node;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The follower's sources, the PodResources connection kept between
    // gathers as the follower keeps it.
    let mut sources = topoalign_follow::Sources::new(
        root.clone(),
        socket.clone(),
        topoalign_follow::PodSource::File(pods_file.clone()),
    );
    let spec = topoalign_nrt::NodeSpec {
        topology: topoalign_nrt::exact::topology_spec(base.machine()),
        kubelet: serde_json::to_value(&node()["kubelet"]).unwrap(),
    };

    let (mut lags, mut changes, mut rebuilds, mut readmissions) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut object_bytes = 0;
    let mut last_object = None;
    let measuring = Instant::now();
    for i in 0..change_count {
        if i > 0 && i.is_multiple_of(10) {
            eprintln!("  {i} changes ({:.1?})", measuring.elapsed());
        }
        let change = if i.is_multiple_of(2) {
            let uid = running.remove((i * 7919) % running.len());
            json!({"delete": uid})
        } else {
            running.push(topoalign_simnodes::bench::uid(next));
            next += 1;
            pod(next - 1)
        };
        let sent = Instant::now();
        let line = send(&change, &mut read);
        let written = Instant::now();
        assert!(matches!(line["event"].as_str(), Some("deleted" | "admitted")), "{line}");
        let expected = line["state"].clone();
        wait_for(&expected);
        lags.push(written.elapsed());
        changes.push(written - sent);

        let t = Instant::now();
        let observation = runtime.block_on(sources.gather()).unwrap();
        let rebuilt = topoalign_follow::rebuild(&base, &observation).unwrap();
        let object = topoalign_nrt::build(
            "bench",
            &rebuilt.node,
            topoalign_nrt::BuildOptions {
                exact_state: Some(&spec),
            },
        );
        rebuilds.push(t.elapsed());
        object_bytes = serde_json::to_vec(&object).unwrap().len();
        last_object = Some(object);
        assert_eq!(
            serde_json::to_value(topoalign_nrt::StateRecord::of(&rebuilt.node)).unwrap(),
            expected
        );

        let t = Instant::now();
        let record = <topoalign_nrt::StateView<'_> as serde::Deserialize>::deserialize(&expected).unwrap();
        let mut fresh = base.clone();
        for pod in &record.pods {
            let _ = fresh.admit(pod.to_pod().unwrap());
        }
        readmissions.push(t.elapsed());
        state = expected;
    }
    let _ = state;
    let (lag, change, rebuild, readmission) = (
        median(&mut lags),
        median(&mut changes),
        median(&mut rebuilds),
        median(&mut readmissions),
    );
    // The extender's start: as many objects as a large cluster's nodes.
    let object = serde_json::to_value(last_object.expect("at least one change")).unwrap();
    let objects: Vec<topoalign_nrt::NodeResourceTopology> = (0..object_count)
        .map(|i| {
            let mut copy = object.clone();
            copy["metadata"]["name"] = json!(format!("node-{i:05}"));
            serde_json::from_value(copy).unwrap()
        })
        .collect();
    eprintln!("  restoring {object_count} objects as the extender does at start");
    let t = Instant::now();
    // On the worker threads the extender starts with (`--threads`'
    // default: the machine's cores).
    let mut cluster = topoalign_extender::Cluster::new(topoalign_extender::ExtenderConfig {
        threads: std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        ..topoalign_extender::ExtenderConfig::default()
    });
    let report = cluster.sync_nrt(&objects, Instant::now());
    let restore_all = t.elapsed();
    assert!(
        report.errors.is_empty() && report.passed.is_empty(),
        "{:?}",
        report.errors
    );
    assert_eq!(cluster.len(), object_count);

    eprintln!(
        "follower bench: 256 CPUs, 8 NUMA nodes, {pods} pods, {change_count} changes, {} build (medians; p90 in \
         brackets)",
        if cfg!(debug_assertions) { "debug" } else { "release" }
    );
    eprintln!(
        "  stand-in change written        {change:>10.2?} [{:.2?}]",
        p90(&mut changes)
    );
    eprintln!("  follower lag after the write   {lag:>10.2?} [{:.2?}]", p90(&mut lags));
    eprintln!(
        "  gather + rebuild + NRT object  {rebuild:>10.2?} [{:.2?}]  (object {object_bytes} bytes)",
        p90(&mut rebuilds)
    );
    eprintln!(
        "  baseline: re-admit {pods} pods    {readmission:>10.2?} [{:.2?}]",
        p90(&mut readmissions)
    );
    eprintln!(
        "  ratio rebuild / re-admission   {:>10.2}",
        rebuild.as_secs_f64() / readmission.as_secs_f64()
    );
    let readmit_all = readmission.mul_f64(object_count as f64);
    eprintln!(
        "  extender start: restore {object_count} objects {restore_all:>10.2?}  (baseline: re-admitting their pods, \
         {object_count} x the median above = {readmit_all:.2?}; ratio {:.2})",
        restore_all.as_secs_f64() / readmit_all.as_secs_f64()
    );
    let full_size = pods >= 200 && object_count >= 5000;
    let release = !cfg!(debug_assertions);
    eprintln!(
        "  against the issue's targets ({}):",
        match (full_size, release) {
            (true, true) => "full size, release build",
            (false, _) => "REDUCED size: the targets are for 200 pods and 5,000 objects; not comparable",
            (true, false) => "DEBUG build: not comparable",
        }
    );
    eprintln!(
        "    rebuild + object after one change  {rebuild:>10.2?}  target < 5 ms    {}",
        verdict(full_size && release, rebuild < Duration::from_millis(5))
    );
    eprintln!(
        "    extender restores {object_count} objects     {restore_all:>10.2?}  target < 2 s    {}  ({} cores available)",
        verdict(full_size && release, restore_all < Duration::from_secs(2)),
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get)
    );
    eprintln!("  load average: {load_at_start} at the start, {} at the end", load());
    let _ = follower.kill();
    let _ = follower.wait();
    // The in-process gathers' connections live in this runtime: dropped,
    // they close, and the stand-in's server can stop at the end of its
    // input (the run hung here once, after printing every figure).
    drop(sources);
    drop(runtime);
    drop(input);
    let _ = stand_in.wait();
    assert!(Path::new(&root).is_dir());
}
