//! Fleets and workloads for the tests, in the fleet file's own format.

#![allow(dead_code)] // each test file uses a different part

/// The `topology:` block of a machine: `numa` NUMA nodes (one socket
/// each), `cores` cores per NUMA node with 2 threads, `memory_gi` per NUMA
/// node, `gpus` GPUs per NUMA node.
pub fn topology(numa: u32, cores: u32, memory_gi: u32, gpus: u32) -> serde_json::Value {
    let mut cpus = Vec::new();
    let per_numa = cores * 2;
    for n in 0..numa {
        for c in 0..cores {
            for t in 0..2 {
                let core = n * cores + c;
                let id = t * numa * cores + core;
                cpus.push(serde_json::json!({"id": id, "core": core, "socket": n, "numa": n}));
            }
        }
    }
    let _ = per_numa;
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

/// A static-CPU, Static-memory kubelet reserving CPU 0's core and 1Gi on
/// NUMA 0.
pub fn kubelet() -> serde_json::Value {
    serde_json::json!({
        "cpuManagerPolicy": "static",
        "memoryManagerPolicy": "Static",
        "reservedSystemCPUs": "0",
        "systemReserved": {"memory": "1Gi"},
        "evictionHard": {"memory.available": "100Mi"},
        "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}],
        "topologyManagerScope": "container"
    })
}

/// A fleet with two shapes: `gpu` (2 NUMA × 8 cores, 64Gi, 2 GPUs each)
/// and `cpu` (4 NUMA × 4 cores, 32Gi each).
pub fn fleet_text(gpu_nodes: u32, cpu_nodes: u32) -> String {
    serde_json::json!({"nodes": [
        {"name": "gpu", "count": gpu_nodes, "topology": topology(2, 8, 64, 2), "kubelet": kubelet()},
        {"name": "cpu", "count": cpu_nodes, "topology": topology(4, 4, 32, 0), "kubelet": kubelet()},
    ]})
    .to_string()
}

pub fn generator(pods: u32, seed: u64, churn: f64) -> String {
    format!(
        r#"generator:
  pods: {pods}
  seed: {seed}
  sizes:
    - {{weight: 5, cpu: "2", memory: 4Gi}}
    - {{weight: 3, cpu: "4", memory: 12Gi}}
    - {{weight: 2, cpu: "6", memory: 24Gi}}
    - {{weight: 1, cpu: "10", memory: 40Gi}}
    - {{weight: 2, cpu: 1500m, memory: 2Gi}}
  gpuShare: 0.2
  gpus: 1
  guaranteedShare: 0.85
  churn: {churn}
"#
    )
}
