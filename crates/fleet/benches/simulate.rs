//! The target: simulate 5,000 nodes and 100,000 pods — every
//! policy, all three schedulers — in under a minute on 2 cores.
//!
//! A macro benchmark: one timed run (criterion's repeated sampling would
//! take many minutes), printed with the per-run counts. Run with
//! `cargo bench -p topoalign-fleet --bench simulate`; `SIM_NODES` and
//! `SIM_PODS` scale it.

use std::time::Instant;

use topoalign_fleet::{Fleet, Options, Workload, simulate};

fn topology(numa: u32, cores: u32, memory_gi: u32, gpus: u32) -> serde_json::Value {
    let mut cpus = Vec::new();
    for n in 0..numa {
        for c in 0..cores {
            for t in 0..2 {
                let core = n * cores + c;
                cpus.push(serde_json::json!({"id": t * numa * cores + core, "core": core, "socket": n / 2, "numa": n}));
            }
        }
    }
    let numa_nodes: Vec<_> = (0..numa)
        .map(|n| {
            let distances: Vec<u32> = (0..numa).map(|m| if m == n { 10 } else { 21 }).collect();
            serde_json::json!({"id": n, "memory": format!("{memory_gi}Gi"), "distances": distances})
        })
        .collect();
    let devices: Vec<_> = (0..numa)
        .flat_map(|n| (0..gpus).map(move |g| serde_json::json!({"id": format!("gpu{n}-{g}"), "numa": [n]})))
        .collect();
    let mut topology = serde_json::json!({"numaNodes": numa_nodes, "cpus": cpus});
    if gpus > 0 {
        topology["devices"] = serde_json::json!({"nvidia.com/gpu": devices});
    }
    topology
}

fn main() {
    let env = |name: &str, default: u32| std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default);
    let nodes = env("SIM_NODES", 5000);
    let pods = env("SIM_PODS", 100_000);
    let kubelet = serde_json::json!({
        "cpuManagerPolicy": "static",
        "memoryManagerPolicy": "Static",
        "reservedSystemCPUs": "0",
        "systemReserved": {"memory": "1Gi"},
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}],
    });
    let fleet = serde_json::json!({"nodes": [
        {"name": "gpu", "count": nodes / 5, "topology": topology(2, 16, 256, 4), "kubelet": kubelet},
        {"name": "std", "count": nodes * 3 / 5, "topology": topology(2, 24, 192, 0), "kubelet": kubelet},
        {"name": "big", "count": nodes / 5, "topology": topology(4, 16, 128, 0), "kubelet": kubelet},
    ]});
    let fleet = Fleet::parse(&fleet.to_string(), |_| Err("no files".into())).expect("fleet");
    let workload = format!(
        "generator:\n  pods: {pods}\n  seed: 42\n  sizes:\n    - {{weight: 6, cpu: \"2\", memory: 8Gi}}\n    - {{weight: 3, cpu: \"4\", memory: 16Gi}}\n    - {{weight: 2, cpu: \"8\", memory: 32Gi}}\n    - {{weight: 1, cpu: \"16\", memory: 64Gi}}\n    - {{weight: 2, cpu: 500m, memory: 1Gi}}\n  gpuShare: 0.1\n  guaranteedShare: 0.9\n  churn: 0.1\n"
    );
    let workload = Workload::parse(&workload).expect("workload");
    let threads = std::thread::available_parallelism().map_or(2, usize::from);
    let options = Options {
        threads,
        ..Options::default()
    };
    let start = Instant::now();
    let simulation = simulate(&fleet, &workload, &options, &|_| {}).expect("every entry starts");
    let elapsed = start.elapsed();
    for run in &simulation.report.runs {
        println!(
            "{:17} {:8} scheduled {:6} rejected {:6} unplaced {:6} stranded CPUs {:8.0}",
            run.policy, run.scheduler, run.scheduled, run.rejected_at_admission, run.unplaced, run.stranded_cpus
        );
    }
    println!(
        "simulate: {} nodes, {} pods ({} events), {} runs on {threads} threads: {:.1} s",
        fleet.node_count(),
        workload.adds(),
        workload.events.len(),
        simulation.report.runs.len(),
        elapsed.as_secs_f64()
    );
}
