//! Restart time of the durable ledger against its history (issue 32): the
//! time [`Ledger::open`] takes after 10² admit + release pairs and after
//! 10⁵, in the same run, with a few allocations held throughout (so the
//! journal compacts into snapshots rather than starting empty). Restart
//! reads a snapshot plus the records after it, so the two should be
//! alike; target: under 1 s after 10⁵.
//!
//! `cargo run --release -p topoalign-agent --example restart [-- --pairs N]`
//! (`bench/agent-restart` runs it). The state directory is on tmpfs
//! (`/dev/shm`, else `$TMPDIR`): the bench measures replay, not the
//! disk's `fdatasync` — 4 per pair, which on a disk would make 10⁵ pairs
//! take minutes.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use topoalign_agent::Ledger;
use topoalign_agent::request::{AdmitOptions, Workload, read_body};
use topoalign_engine::NodeConfig;
use topoalign_model::{Machine, UniformMachine};

/// 2 NUMA nodes × 8 cores × 2 threads, 32Gi each.
fn machine() -> Machine {
    UniformMachine::new(2, 8)
        .threads_per_core(2)
        .sockets(2)
        .memory_per_numa(32 << 30)
        .remote_distance(21)
        .build()
        .expect("a valid machine")
}

fn config(machine: &Machine) -> NodeConfig {
    let kubelet = json!({
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0,16",
        "topologyManagerPolicy": "single-numa-node",
    });
    topoalign_k8s::node_config_from_value(&kubelet, machine).expect("a valid configuration")
}

fn workload(body: &str) -> Workload {
    read_body(body.as_bytes(), false, &AdmitOptions::default()).expect("a valid request")
}

/// Runs `pairs` admit + release pairs behind three held allocations, then
/// times the restart: (restart time, records replayed, journal bytes,
/// time the history took).
fn history_then_restart(dir: &Path, pairs: u64) -> (Duration, u64, u64, Duration) {
    let machine = machine();
    let config = config(&machine);
    let (mut ledger, _) = Ledger::open(dir, machine.clone(), config.clone()).expect("a ledger");
    for name in ["held-a", "held-b", "held-c"] {
        let body = format!(r#"{{"name": "{name}", "cpus": 2, "memory": "2Gi"}}"#);
        ledger.admit(&workload(&body), None).expect("admitted");
    }
    let short = workload(r#"{"cpus": 4, "memory": "4Gi"}"#);
    let started = Instant::now();
    for _ in 0..pairs {
        let id = ledger.admit(&short, None).expect("admitted").id.expect("an id");
        ledger.release(&id, "bench").expect("released");
    }
    let history = started.elapsed();
    let state = ledger.node().state();
    let journal = ledger.journal_path().to_path_buf();
    drop(ledger);
    let bytes = std::fs::metadata(&journal).map(|m| m.len()).unwrap_or(0);
    let started = Instant::now();
    let (recovered, recovery) = Ledger::open(dir, machine, config).expect("a restart");
    let restart = started.elapsed();
    assert_eq!(recovered.node().state(), state, "the restart recovers the same state");
    assert_eq!(recovered.held().len(), 3);
    (restart, recovery.records, bytes, history)
}

fn main() {
    let pairs: u64 = std::env::args()
        .skip_while(|a| a != "--pairs")
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let base = if Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    println!(
        "agent restart (Ledger::open) after admit + release pairs, 3 allocations held; state on {}",
        base.display()
    );
    let mut baseline = None;
    for n in [100, pairs] {
        let dir = tempfile::tempdir_in(&base).expect("a temporary directory");
        let (restart, records, bytes, history) = history_then_restart(dir.path(), n);
        let ratio = baseline.map_or(1.0, |b: Duration| restart.as_secs_f64() / b.as_secs_f64());
        baseline.get_or_insert(restart);
        println!(
            "  {n:>9} pairs: restart {:>9.3} ms ({records} records replayed, journal {bytes} bytes), {ratio:.2}x \
             the 100-pair restart   [history took {:.1} s]",
            restart.as_secs_f64() * 1e3,
            history.as_secs_f64()
        );
    }
    println!("  target: under 1 s after 100000 pairs; independent of history (ratio near 1)");
}
