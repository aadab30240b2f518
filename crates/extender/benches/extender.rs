//! The target: one extender call over 5,000 nodes under 10 ms.
//!
//! A fleet of 5,000 nodes in three shapes, each node holding a few pods
//! (up to five, of three sizes, in node-dependent order: about a thousand
//! distinct node states). Measured: `filter` then `prioritize` for one pod
//! over all 5,000 node names —
//! - `warm`: a pod shape already asked about (the usual case: replicas of
//!   a Deployment), answers from the cache;
//! - `cold`: a pod shape never seen before, so the engine runs once per
//!   distinct node state.

use std::hint::black_box;
use std::time::Instant;

use criterion::{Criterion, criterion_group, criterion_main};
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

fn pod(name: &str, cpu: u32, memory_mi: u32) -> Pod {
    let manifest = json!({"metadata": {"name": name, "uid": name},
        "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": cpu.to_string(), "memory": format!("{memory_mi}Mi")}}}]}});
    Cluster::read_pod(&manifest).expect("valid pod")
}

fn cluster() -> (Cluster, Vec<String>) {
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
        threads: std::thread::available_parallelism().map_or(2, usize::from),
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

fn bench(c: &mut Criterion) {
    let (mut cluster, names) = cluster();
    let mut group = c.benchmark_group("extender 5000 nodes");
    group.sample_size(20);
    let asked = pod("web", 3, 6000);
    group.bench_function("filter + prioritize, warm", |b| {
        b.iter(|| {
            let now = Instant::now();
            let kept = cluster.filter(&asked, &names, now).expect("evaluated");
            black_box(cluster.prioritize(&asked, &kept.passed, now).expect("evaluated"));
        });
    });
    let mut fresh = 0u32;
    group.bench_function("filter + prioritize, cold", |b| {
        b.iter(|| {
            fresh += 1;
            let new_shape = pod(&format!("p{fresh}"), 3, 6000 + fresh);
            let now = Instant::now();
            let kept = cluster.filter(&new_shape, &names, now).expect("evaluated");
            black_box(cluster.prioritize(&new_shape, &kept.passed, now).expect("evaluated"));
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
