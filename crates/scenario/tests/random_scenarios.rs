//! Random scenarios in the shape of the conformance generator's (machines of
//! 1–8 NUMA nodes, SMT or not, huge pages, devices, every policy, scope and
//! option; pods of every kind, deletes). For each:
//! - the replay never panics;
//! - the three merge algorithms give the same result document;
//! - the final state is consistent: no CPU or device held by two pods, no
//!   exclusive CPU in the shared pool, nothing outside the machine.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::{Value, json};
use topoalign_model::CpuSet;
use topoalign_scenario::{MergeStrategy, Replay, Scenario, replay_with};

#[derive(Debug, Clone)]
struct Shape {
    numa: usize,
    sockets: usize,
    cores_per_numa: usize,
    threads: usize,
    interleave: bool,
    distances: bool,
    hugepages_1g: u64,
    gpus: usize,
    nics_without_numa: usize,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        1usize..=8,
        1usize..=4,
        1usize..=4,
        1usize..=2,
        any::<bool>(),
        any::<bool>(),
        0u64..=4,
        0usize..=4,
        0usize..=2,
    )
        .prop_map(
            |(numa, sockets, cores_per_numa, threads, interleave, distances, hugepages_1g, gpus, nics)| {
                // Sockets divide the NUMA nodes evenly, as real machines do.
                let sockets = (1..=sockets.min(numa)).rev().find(|s| numa % s == 0).unwrap_or(1);
                Shape {
                    numa,
                    sockets,
                    cores_per_numa,
                    threads,
                    interleave,
                    distances,
                    hugepages_1g,
                    gpus,
                    nics_without_numa: nics,
                }
            },
        )
}

fn topology(shape: &Shape) -> Value {
    let numa_per_socket = shape.numa / shape.sockets;
    let nodes: Vec<Value> = (0..shape.numa)
        .map(|id| {
            let mut node = json!({"id": id, "memory": "16Gi"});
            if shape.hugepages_1g > 0 {
                node["hugepages-1Gi"] = json!(format!("{}Gi", shape.hugepages_1g));
            }
            if shape.distances {
                let row: Vec<u64> = (0..shape.numa)
                    .map(|o| {
                        if o == id {
                            10
                        } else if o / numa_per_socket == id / numa_per_socket {
                            12
                        } else {
                            21
                        }
                    })
                    .collect();
                node["distances"] = json!(row);
            }
            node
        })
        .collect();
    let cores = shape.numa * shape.cores_per_numa;
    let mut cpus = Vec::new();
    for thread in 0..shape.threads {
        for core in 0..cores {
            let numa = core / shape.cores_per_numa;
            let id = if shape.interleave {
                core * shape.threads + thread
            } else {
                thread * cores + core
            };
            cpus.push(json!({"id": id, "core": core, "socket": numa / numa_per_socket, "numa": numa}));
        }
    }
    let mut devices = serde_json::Map::new();
    if shape.gpus > 0 {
        let gpus: Vec<Value> = (0..shape.gpus)
            .map(|g| json!({"id": format!("gpu{g}"), "numa": [g % shape.numa]}))
            .collect();
        devices.insert("nvidia.com/gpu".into(), json!(gpus));
    }
    if shape.nics_without_numa > 0 {
        let nics: Vec<Value> = (0..shape.nics_without_numa)
            .map(|n| json!({"id": format!("nic{n}"), "numa": []}))
            .collect();
        devices.insert("example.com/nic".into(), json!(nics));
    }
    json!({"numaNodes": nodes, "cpus": cpus, "devices": devices})
}

fn kubelet() -> impl Strategy<Value = Value> {
    let policy = prop_oneof![
        Just("none"),
        Just("best-effort"),
        Just("restricted"),
        Just("single-numa-node")
    ];
    let scope = prop_oneof![Just("container"), Just("pod")];
    let cpu_option = prop_oneof![
        Just(None),
        Just(Some("full-pcpus-only")),
        Just(Some("distribute-cpus-across-numa")),
        Just(Some("align-by-socket")),
        Just(Some("strict-cpu-reservation")),
        Just(Some("prefer-align-cpus-by-uncorecache")),
    ];
    (
        policy,
        scope,
        any::<bool>(),
        any::<bool>(),
        cpu_option,
        any::<bool>(),
        1u32..=2,
    )
        .prop_map(
            |(policy, scope, static_cpu, static_memory, option, closest, reserved)| {
                let mut k = json!({
                    "topologyManagerPolicy": policy,
                    "topologyManagerScope": scope,
                    "cpuManagerPolicy": if static_cpu { "static" } else { "none" },
                    "memoryManagerPolicy": if static_memory { "Static" } else { "None" },
                    "systemReserved": {"cpu": reserved.to_string(), "memory": "1Gi"},
                    "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": closest.to_string()},
                    "featureGates": {"CPUManagerPolicyAlphaOptions": true},
                });
                if static_memory {
                    k["reservedMemory"] = json!([{"numaNode": 0, "limits": {"memory": "1124Mi"}}]);
                }
                if let (Some(option), true) = (option, static_cpu) {
                    k["cpuManagerPolicyOptions"] = json!({ option: "true" });
                }
                k
            },
        )
}

fn container(name: &str, cpu: &str, memory_mi: u64, hugepages: u64, gpus: u64, nics: u64) -> Value {
    let mut limits = json!({"cpu": cpu, "memory": format!("{memory_mi}Mi")});
    if hugepages > 0 {
        limits["hugepages-1Gi"] = json!(format!("{hugepages}Gi"));
    }
    if gpus > 0 {
        limits["nvidia.com/gpu"] = json!(gpus.to_string());
    }
    if nics > 0 {
        limits["example.com/nic"] = json!(nics.to_string());
    }
    json!({"name": name, "resources": {"limits": limits}})
}

fn pod_event(index: usize) -> impl Strategy<Value = Value> {
    let cpu = prop_oneof![
        Just("1"),
        Just("2"),
        Just("3"),
        Just("4"),
        Just("6"),
        Just("500m"),
        Just("1500m")
    ];
    let app = (cpu.clone(), 64u64..20_000, 0u64..=1, 0u64..=2, 0u64..=1);
    let init = proptest::option::of((cpu, 64u64..4_000));
    (app, init, any::<bool>(), any::<bool>()).prop_map(move |((cpu, mem, huge, gpus, nics), init, burstable, two)| {
        let mut containers = vec![container("app", cpu, mem, huge, gpus, nics)];
        if two {
            containers.push(container("side", "1", 128, 0, 0, 0));
        }
        if burstable {
            // Requests below limits: Burstable.
            containers[0]["resources"]["requests"] = json!({"cpu": "100m", "memory": "64Mi"});
        }
        let mut spec = json!({"containers": containers});
        if let Some((cpu, mem)) = init {
            spec["initContainers"] = json!([container("init", cpu, mem, 0, 0, 0)]);
        }
        json!({"add": {"metadata": {"name": format!("p{index}")}, "spec": spec}})
    })
}

fn events() -> impl Strategy<Value = Vec<Value>> {
    proptest::collection::vec((0usize..12).prop_flat_map(pod_event), 1..10).prop_flat_map(|adds| {
        let n = adds.len();
        // One pod per name, as the API server holds them (a second add of a
        // name still on the node is refused).
        let adds: Vec<Value> = adds
            .into_iter()
            .enumerate()
            .map(|(i, mut add)| {
                let name = add["add"]["metadata"]["name"].as_str().unwrap_or("p").to_owned();
                add["add"]["metadata"]["name"] = json!(format!("{name}-{i}"));
                add
            })
            .collect();
        proptest::collection::vec(0usize..n, 0..3).prop_map(move |deletes| {
            let mut events = adds.clone();
            for (k, victim) in deletes.into_iter().enumerate() {
                let name = events[victim]["add"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or("p0")
                    .to_string();
                events.insert(
                    (victim + 1 + k).min(events.len()),
                    json!({"delete": format!("default/{name}")}),
                );
            }
            events
        })
    })
}

fn run(scenario: &Scenario, strategy: MergeStrategy) -> Value {
    match replay_with(scenario, strategy).expect("generated scenarios are well-formed") {
        Replay::Completed(doc) => serde_json::to_value(doc).expect("serialises"),
        Replay::Refused(error) => json!({ "error": error }),
    }
}

/// No CPU or device is held by two pods; exclusive CPUs are not in the
/// shared pool; everything lies within the machine.
fn check_final_state(doc: &Value, machine_cpus: &CpuSet) -> Result<(), String> {
    let Some(final_state) = doc.get("final") else {
        return Ok(());
    };
    let shared = CpuSet::parse(final_state["defaultCpuSet"].as_str().unwrap_or("")).map_err(|e| e.to_string())?;
    if !shared.is_subset(machine_cpus) {
        return Err(format!("shared pool {shared} outside the machine"));
    }
    let mut held_by: BTreeMap<u32, String> = BTreeMap::new();
    for (pod, containers) in final_state["cpuAssignments"].as_object().into_iter().flatten() {
        let mut pod_cpus = CpuSet::new();
        for cpus in containers
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(_, c)| c.as_str())
        {
            pod_cpus = pod_cpus.union(&CpuSet::parse(cpus).map_err(|e| e.to_string())?);
        }
        if !pod_cpus.is_subset(machine_cpus) || pod_cpus.intersection_len(&shared) > 0 {
            return Err(format!("{pod}: {pod_cpus} outside the machine or in the shared pool"));
        }
        for cpu in pod_cpus.iter() {
            if let Some(other) = held_by.insert(cpu, pod.clone()) {
                return Err(format!("CPU {cpu} held by {other} and {pod}"));
            }
        }
    }
    // Devices of pods still present (admitted and not deleted).
    let mut present: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for result in doc["results"].as_array().into_iter().flatten() {
        let pod = result["pod"].as_str().unwrap_or_default().to_string();
        if result["deleted"] == json!(true) {
            present.remove(&pod);
        } else if result["admitted"] == json!(true) {
            let mut devices = BTreeSet::new();
            for c in result["containers"].as_array().into_iter().flatten() {
                for (resource, ids) in c["devices"].as_object().into_iter().flatten() {
                    for id in ids.as_array().into_iter().flatten() {
                        devices.insert(format!("{resource}/{}", id.as_str().unwrap_or_default()));
                    }
                }
            }
            present.insert(pod, devices);
        }
    }
    let mut owner: BTreeMap<&String, &String> = BTreeMap::new();
    for (pod, devices) in &present {
        for device in devices {
            if let Some(other) = owner.insert(device, pod) {
                return Err(format!("device {device} held by {other} and {pod}"));
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn merges_agree_and_state_stays_consistent(shape in shape(), kubelet in kubelet(), events in events()) {
        let document = json!({"topology": topology(&shape), "kubelet": kubelet, "events": events});
        let scenario = Scenario::parse(&document.to_string()).expect("generated scenarios parse");
        let fast = run(&scenario, MergeStrategy::Fast);
        prop_assert_eq!(&fast, &run(&scenario, MergeStrategy::CandidateSearch));
        // The kubelet's fold is exponential: only on small machines.
        if shape.numa <= 4 {
            prop_assert_eq!(&fast, &run(&scenario, MergeStrategy::KubeletPermutations));
        }
        let machine_cpus: CpuSet = scenario.topology.cpus.iter().map(|c| c.id).collect();
        if let Err(problem) = check_final_state(&fast, &machine_cpus) {
            prop_assert!(false, "{}: {}", problem, document);
        }
    }
}
