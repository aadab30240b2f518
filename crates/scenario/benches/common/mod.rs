//! The replay benchmark's scenario, shared by `benches/replay.rs` and
//! `examples/replay_events.rs` (the callgrind target): a 2-NUMA-node machine
//! (2 × 16 cores, SMT; static CPU manager, Static memory manager,
//! single-numa-node) and 2,000 pods of a few shapes (guaranteed, burstable,
//! best-effort), each added and deleted eight adds later, so the node stays
//! partly full.

use std::fmt::Write as _;

use topoalign_scenario::Replay;

pub const PODS: usize = 2_000;
const KEPT: usize = 8;
/// Every pod's add, and the deletes of all but the last `KEPT`.
#[allow(dead_code)] // read by the example only
pub const EVENTS: usize = 2 * PODS - KEPT;

pub fn scenario() -> String {
    let mut cpus = Vec::new();
    for numa in 0..2 {
        for core in 0..16 {
            for thread in 0..2 {
                let core_id = numa * 16 + core;
                cpus.push(format!(
                    r#"{{"id": {}, "core": {core_id}, "socket": {numa}, "numa": {numa}}}"#,
                    thread * 32 + core_id
                ));
            }
        }
    }
    let mut events = Vec::new();
    let shapes = [("2", "4Gi"), ("4", "8Gi"), ("1", "1Gi"), ("500m", "1Gi"), ("", "")];
    for i in 0..PODS {
        let (cpu, memory) = shapes[i % shapes.len()];
        let resources = if cpu.is_empty() {
            "{}".to_string()
        } else if i % 10 == 3 {
            format!(r#"{{"requests": {{"cpu": "{cpu}", "memory": "{memory}"}}}}"#)
        } else {
            format!(r#"{{"limits": {{"cpu": "{cpu}", "memory": "{memory}"}}}}"#)
        };
        events.push(format!(
            r#"{{"add": {{"apiVersion": "v1", "kind": "Pod", "metadata": {{"name": "pod-{i}", "namespace": "bench", "uid": "uid-{i}", "labels": {{"app": "bench"}}}},
              "spec": {{"containers": [{{"name": "app", "image": "registry.example/app:1", "resources": {resources}}}]}}}}}}"#
        ));
        if i >= KEPT {
            events.push(format!(r#"{{"delete": "bench/pod-{}"}}"#, i - KEPT));
        }
    }
    let mut text = String::new();
    let _ = write!(
        text,
        r#"{{"topology": {{"numaNodes": [{{"id": 0, "memory": "64Gi"}}, {{"id": 1, "memory": "64Gi"}}], "cpus": [{}]}},
  "kubelet": {{"topologyManagerPolicy": "single-numa-node", "cpuManagerPolicy": "static", "memoryManagerPolicy": "Static",
    "reservedSystemCPUs": "0", "systemReserved": {{"memory": "1Gi"}}, "reservedMemory": [{{"numaNode": 0, "limits": {{"memory": "1124Mi"}}}}]}},
  "events": [{}]}}"#,
        cpus.join(", "),
        events.join(",\n")
    );
    text
}

pub fn document(replayed: Replay) -> String {
    match replayed {
        Replay::Completed(document) => serde_json::to_string_pretty(&document).expect("serializes") + "\n",
        Replay::Refused(error) => panic!("the kubelet refused the bench scenario: {error}"),
    }
}
