//! The benchmark's cluster, shared by `benches/extender.rs` and
//! `examples/filter_once.rs`: 5,000 nodes in three shapes, each node
//! holding up to five pods of three sizes in node-dependent order (about a
//! thousand distinct node states).

use std::time::{Duration, Instant};

use serde_json::json;
use topoalign_extender::{Cluster, ExtenderConfig};
use topoalign_model::Pod;

fn topology(numa: u32, cores: u32, memory_gi: u32, gpus: u32) -> serde_json::Value {
    let mut cpus = Vec::new();
    for n in 0..numa {
        for c in 0..cores {
            for t in 0..2 {
                let core = n * cores + c;
                cpus.push(json!({"id": t * numa * cores + core, "core": core, "socket": n / 2, "numa": n}));
            }
        }
    }
    let numa_nodes: Vec<_> = (0..numa)
        .map(|n| json!({"id": n, "memory": format!("{memory_gi}Gi")}))
        .collect();
    let devices: Vec<_> = (0..numa)
        .flat_map(|n| (0..gpus).map(move |g| json!({"id": format!("gpu{n}-{g}"), "numa": [n]})))
        .collect();
    json!({"numaNodes": numa_nodes, "cpus": cpus, "devices": {"nvidia.com/gpu": devices}})
}

pub fn pod(name: &str, cpu: u32, memory_mi: u32) -> Pod {
    let manifest = json!({"metadata": {"name": name, "uid": name},
        "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": cpu.to_string(), "memory": format!("{memory_mi}Mi")}}}]}});
    Cluster::read_pod(&manifest).expect("valid pod")
}

/// The cluster (engine work on `threads` worker threads) and its node names.
pub fn cluster(threads: usize) -> (Cluster, Vec<String>) {
    let kubelet = json!({
        "topologyManagerPolicy": "single-numa-node",
        "cpuManagerPolicy": "static",
        "memoryManagerPolicy": "Static",
        "reservedSystemCPUs": "0",
        "systemReserved": {"memory": "1Gi"},
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}],
    });
    let fleet = json!({"nodes": [
        {"name": "gpu", "count": 1000, "topology": topology(2, 16, 256, 4), "kubelet": kubelet},
        {"name": "std", "count": 3000, "topology": topology(2, 24, 192, 0), "kubelet": kubelet},
        {"name": "big", "count": 1000, "topology": topology(4, 16, 128, 0), "kubelet": kubelet},
    ]});
    let fleet = topoalign_fleet::Fleet::parse(&fleet.to_string(), |_| Err("no files".into())).expect("fleet");
    let config = ExtenderConfig {
        assume_on_prioritize: false,
        // The pods laid on the nodes below are assumptions: they must not
        // expire while a benchmark runs (or valgrind runs the example), or
        // the nodes would empty out and the "about a thousand states"
        // would become three.
        assume_timeout: Duration::from_secs(24 * 3600),
        threads,
        ..ExtenderConfig::default()
    };
    let mut cluster = Cluster::from_fleet(&fleet, config).expect("starts");
    let names: Vec<String> = fleet.node_names().into_iter().map(|(n, _)| n).collect();
    let sizes = [(2, 4096), (4, 8192), (6, 16384)];
    let now = Instant::now();
    for (i, name) in names.iter().enumerate() {
        let mut x = i;
        for k in 0..(i % 6) {
            let (cpu, memory) = sizes[x % 3];
            x /= 3;
            cluster.assume(&pod(&format!("{name}-{k}"), cpu, memory), name, now);
        }
    }
    (cluster, names)
}
