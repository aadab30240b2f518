//! A machine with NUMA ids of 64 and more (issue #29): its NRT object
//! names its zones by the machine's own ids (`node-64`, as the
//! resource-topology-exporter names the cell), its exact state carries
//! them as the kubelet's checkpoints do, and the node rebuilt from the
//! object is the node. Every expectation is derived from the same node
//! numbered 0..n ({0, 1}), its ids mapped — never written by hand from
//! the engine's output.

#![allow(clippy::unwrap_used)] // a panic is how a test reports failure

use serde_json::{Value, json};
use topoalign_engine::{KubeletCrash, StartHazard};
use topoalign_model::UniformMachine;
use topoalign_nrt::exact::{NODE_SPEC_ATTRIBUTE, STATE_ATTRIBUTE};
use topoalign_nrt::{BuildOptions, NodeResourceTopology, NodeSpec, RestoreError, build, restore, start_node};
use topoalign_scenario::TopologySpec;

/// Two NUMA nodes of 4 cores × 2 threads and 16Gi (2Gi of it 2Mi huge
/// pages) each, a NIC on each; the second NUMA node's id is `second`.
fn topology(second: usize) -> TopologySpec {
    let machine = UniformMachine::new(2, 4)
        .threads_per_core(2)
        .sockets(2)
        .memory_per_numa(16 << 30)
        .hugepages_per_numa(2 << 20, 2 << 30)
        .remote_distance(21)
        .device("example.com/nic", "nic0", &[0])
        .device("example.com/nic", "nic1", &[1])
        .numa_ids([0, second])
        .build()
        .unwrap();
    TopologySpec::from_machine(&machine)
}

/// `spec` with NUMA id `from` written `to` (nodes, CPUs, devices).
fn relabel(spec: &TopologySpec, from: usize, to: usize) -> TopologySpec {
    let map = |id: usize| if id == from { to } else { id };
    let mut spec = spec.clone();
    for node in &mut spec.numa_nodes {
        node.id = map(node.id);
    }
    for cpu in &mut spec.cpus {
        cpu.numa = map(cpu.numa);
    }
    for device in spec.devices.values_mut().flatten() {
        device.numa = device.numa.iter().map(|&n| map(n)).collect();
    }
    spec
}

/// The kubelet block: topology policy `policy`, static CPU manager,
/// memory manager `memory` (reserving on NUMA 0 only).
fn kubelet(policy: &str, memory: &str) -> Value {
    let mut kubelet = json!({"topologyManagerPolicy": policy, "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0", "systemReserved": {"memory": "1Gi"}, "memoryManagerPolicy": memory});
    if memory == "Static" {
        kubelet["reservedMemory"] = json!([{"numaNode": 0, "limits": {"memory": "1124Mi"}}]);
    }
    kubelet
}

fn spec(second: usize, policy: &str, memory: &str) -> NodeSpec {
    NodeSpec {
        topology: topology(second),
        kubelet: kubelet(policy, memory),
    }
}

/// A pod of one container: Guaranteed (`limits`) or Burstable (requests
/// only).
fn pod(name: &str, cpu: &str, nic: bool, guaranteed: bool) -> topoalign_model::Pod {
    let mut amounts = json!({"cpu": cpu, "memory": "1Gi"});
    let resources = match (guaranteed, nic) {
        (true, nic) => {
            if nic {
                amounts["example.com/nic"] = json!("1");
            }
            json!({"limits": amounts})
        }
        // An extended resource is asked by its limit.
        (false, true) => json!({"requests": amounts, "limits": {"example.com/nic": "1"}}),
        (false, false) => json!({"requests": amounts}),
    };
    topoalign_k8s::pod_from_value(
        &json!({"metadata": {"name": name, "namespace": "team"},
                "spec": {"containers": [{"name": "app", "resources": resources}]}}),
        &format!("uid-{name}"),
    )
    .unwrap()
}

/// The pods each node is given: with the Static memory manager only
/// Burstable ones (under policy none the kubelet crashes on a Guaranteed
/// pod there).
fn pods(memory: &str) -> Vec<topoalign_model::Pod> {
    let guaranteed = memory != "Static";
    vec![
        pod("a", "2", true, guaranteed),
        pod("b", "3", false, guaranteed),
        pod("c", "1", true, guaranteed),
        pod("d", "500m", false, false),
    ]
}

/// The object of node `w` of `spec` after `pods`, through JSON as it
/// travels, and the node.
fn object_after(spec: &NodeSpec, pods: &[topoalign_model::Pod]) -> (NodeResourceTopology, topoalign_engine::Node) {
    let mut node = start_node(spec).unwrap();
    for pod in pods {
        let decision = node.admit(pod.clone());
        assert!(decision.admitted(), "{}: {:?}", pod.name, decision.rejection);
    }
    let object = build(
        "w",
        &node,
        BuildOptions {
            exact_state: Some(spec),
        },
    );
    let object = serde_json::from_str(&serde_json::to_string(&object).unwrap()).unwrap();
    (object, node)
}

/// The object as JSON, its JSON-text attributes (spec, state) parsed.
fn parsed(object: &NodeResourceTopology) -> Value {
    let mut value = serde_json::to_value(object).unwrap();
    for attribute in value["attributes"].as_array_mut().unwrap() {
        if let Ok(inner) = serde_json::from_str::<Value>(attribute["value"].as_str().unwrap()) {
            attribute["value"] = inner;
        }
    }
    value
}

/// [`parsed`] with every NUMA id 1 written 64 where an object carries
/// NUMA ids: zone and cost names, the node spec's topology, the memory
/// manager's machine state keys, cells and blocks.
fn relabel_object(object: &NodeResourceTopology) -> Value {
    let mut value = parsed(object);
    for zone in value["zones"].as_array_mut().unwrap() {
        if zone["name"] == "node-1" {
            zone["name"] = json!("node-64");
        }
        for cost in zone
            .get_mut("costs")
            .and_then(Value::as_array_mut)
            .into_iter()
            .flatten()
        {
            if cost["name"] == "node-1" {
                cost["name"] = json!("node-64");
            }
        }
    }
    for attribute in value["attributes"].as_array_mut().unwrap() {
        let name = attribute["name"].as_str().unwrap().to_owned();
        if name == NODE_SPEC_ATTRIBUTE {
            let mut spec: NodeSpec = serde_json::from_value(attribute["value"].take()).unwrap();
            spec.topology = relabel(&spec.topology, 1, 64);
            attribute["value"] = serde_json::to_value(&spec).unwrap();
        } else if name == STATE_ATTRIBUTE
            && let Some(memory) = attribute["value"].get_mut("memory")
        {
            relabel_memory(memory);
        }
    }
    value
}

fn relabel_memory(memory: &mut Value) {
    let ids = |list: &mut Value| {
        for id in list.as_array_mut().unwrap() {
            if *id == 1 {
                *id = json!(64);
            }
        }
    };
    let Some(machine_state) = memory.get_mut("machineState").and_then(Value::as_object_mut) else {
        return;
    };
    let relabelled: serde_json::Map<String, Value> = std::mem::take(machine_state)
        .into_iter()
        .map(|(key, mut node)| {
            ids(&mut node["cells"]);
            (if key == "1" { "64".to_owned() } else { key }, node)
        })
        .collect();
    *machine_state = relabelled;
    let entries = memory.get_mut("entries").and_then(Value::as_object_mut);
    for containers in entries.into_iter().flat_map(|m| m.values_mut()) {
        for blocks in containers.as_object_mut().unwrap().values_mut() {
            for block in blocks.as_array_mut().unwrap() {
                ids(&mut block["numaAffinity"]);
            }
        }
    }
}

/// The object of a node on {0, 64} is the object of the same node on
/// {0, 1} with 1 written 64 — zone names, costs, the spec, the memory
/// manager's machine state — and restores to the same node.
#[test]
fn the_object_on_0_64_is_the_object_on_0_1_with_its_ids_and_round_trips() {
    for (policy, memory) in [("none", "Static"), ("none", "None"), ("single-numa-node", "None")] {
        let at = format!("{policy}/{memory}");
        // The kubelet crashes on any pod under single-numa-node there: an
        // empty node (as it starts) is all it runs.
        let pods = if policy == "none" { pods(memory) } else { Vec::new() };
        let (dense, dense_node) = object_after(&spec(1, policy, memory), &pods);
        let (sparse, sparse_node) = object_after(&spec(64, policy, memory), &pods);

        let zones: Vec<&str> = sparse.zones.iter().map(|z| z.name.as_str()).collect();
        assert_eq!(zones, ["node-0", "node-64"], "{at}");
        assert_eq!(parsed(&sparse), relabel_object(&dense), "{at}");
        let costs: Vec<&str> = sparse.zones[1].costs.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(costs, ["node-0", "node-64"], "{at}");
        if memory == "Static" {
            let state: Value = serde_json::from_str(sparse.attribute(STATE_ATTRIBUTE).unwrap()).unwrap();
            let keys: Vec<&String> = state["memory"]["machineState"].as_object().unwrap().keys().collect();
            assert_eq!(keys, ["0", "64"], "{at}");
            assert_eq!(state["memory"]["machineState"]["64"]["cells"], json!([64]), "{at}");
        }

        let rebuilt = restore(&sparse).unwrap();
        assert_eq!(rebuilt.node.machine().numa_labels(), Some(&[0, 64][..]), "{at}");
        assert_eq!(rebuilt.node.state(), sparse_node.state(), "{at}");
        assert_eq!(rebuilt.node.devices_in_use(), sparse_node.devices_in_use(), "{at}");
        assert_eq!(
            rebuilt.pods.iter().map(|p| p.uid.as_str()).collect::<Vec<_>>(),
            pods.iter().map(|p| p.uid.as_str()).collect::<Vec<_>>(),
            "{at}"
        );
        // Rebuilt again, it writes the same object.
        let again = build(
            "w",
            &rebuilt.node,
            BuildOptions {
                exact_state: Some(&topoalign_nrt::read_spec(&sparse).unwrap()),
            },
        );
        assert_eq!(again, sparse, "{at}");
        // On the engine's indices the two nodes are one.
        assert_eq!(dense_node.state(), sparse_node.state(), "{at}");
    }
}

/// The machine's own ids in the node spec the agent and `topoalign nrt`
/// write (`topology_spec`), and the node started from it is the machine.
#[test]
fn the_topology_spec_of_a_relabelled_machine_carries_its_ids() {
    let spec = spec(64, "none", "None");
    let node = start_node(&spec).unwrap();
    let written = topoalign_nrt::topology_spec(node.machine());
    let ids: Vec<usize> = written.numa_nodes.iter().map(|n| n.id).collect();
    assert_eq!(ids, [0, 64]);
    let cpu_numa: std::collections::BTreeSet<usize> = written.cpus.iter().map(|c| c.numa).collect();
    assert_eq!(cpu_numa.into_iter().collect::<Vec<_>>(), [0, 64]);
    assert_eq!(written.devices["example.com/nic"][1].numa, [64]);
    let again = start_node(&NodeSpec {
        topology: written,
        kubelet: spec.kubelet.clone(),
    })
    .unwrap();
    assert_eq!(again.machine(), node.machine());
}

/// A NUMA id of the state the machine lacks is an error naming the
/// attribute and the field, not a guess.
#[test]
fn a_numa_id_the_machine_lacks_is_an_error_naming_the_field() {
    let (object, _) = object_after(&spec(64, "none", "Static"), &pods("Static"));
    let state = object.attribute(STATE_ATTRIBUTE).unwrap().to_owned();
    for (from, to, field) in [
        ("\"64\":{", "\"65\":{", "memory.machineState.65"),
        ("\"cells\":[64]", "\"cells\":[63]", "memory.machineState.64.cells"),
    ] {
        assert!(state.contains(from), "{state}");
        let mut bad = object.clone();
        for attribute in &mut bad.attributes {
            if attribute.name == STATE_ATTRIBUTE {
                attribute.value = state.replace(from, to);
            }
        }
        match restore(&bad) {
            Err(RestoreError::Malformed { attribute, message }) => {
                assert_eq!(attribute, STATE_ATTRIBUTE);
                assert!(message.starts_with(&format!("{field}: ")), "{message}");
                assert!(
                    message.contains("is not on this machine (its NUMA nodes: 0, 64)"),
                    "{message}"
                );
            }
            other => panic!("{to}: {other:?}"),
        }
    }
}

/// Memory blocks (held by a restarted kubelet's checkpoint, or another
/// writer's) read back through the machine's ids: `numaAffinity` [64] is
/// the machine's second node; [65] an error naming the block.
#[test]
fn memory_blocks_read_the_machines_own_ids() {
    let node = start_node(&spec(64, "none", "Static")).unwrap();
    let state = |affinity: &str| {
        format!(
            r#"{{"pods": [], "cpu": {{"defaultCpuSet": "0-15"}}, "memory": {{"machineState": {{}},
                "entries": {{"uid-x": {{"app": [{{"numaAffinity": {affinity}, "type": "memory", "size": 1}}]}}}},
                "podEntries": {{"uid-y": [{{"numaAffinity": {affinity}, "type": "memory", "size": 2}}]}}}}}}"#
        )
    };
    let read = |text: &str| -> Result<topoalign_engine::NodeSnapshot, topoalign_nrt::StateError> {
        let view: topoalign_nrt::StateView<'_> = serde_json::from_str(text).unwrap();
        view.to_snapshot_on(node.machine())
    };
    let snapshot = read(&state("[0, 64]")).unwrap();
    let memory = snapshot.memory.unwrap();
    assert_eq!(memory.assignments["uid-x"]["app"][0].numa_affinity, [0, 1]);
    assert_eq!(memory.pod_assignments["uid-y"][0].numa_affinity, [0, 1]);
    let error = read(&state("[65]")).unwrap_err();
    assert_eq!(error.at, "memory.entries.uid-x.app[0].numaAffinity");
    // A machine numbered 0..n reads the ids as written, as before.
    let dense = start_node(&spec(1, "none", "Static")).unwrap();
    let text = state("[0, 1]");
    let view: topoalign_nrt::StateView<'_> = serde_json::from_str(&text).unwrap();
    assert_eq!(view.to_snapshot_on(dense.machine()), view.to_snapshot());
}

/// Zone names carry the machine's own ids; a reader holding the machine
/// maps them to its indices.
#[test]
fn zone_names_map_to_the_machines_indices() {
    let node = start_node(&spec(64, "none", "None")).unwrap();
    let machine = node.machine();
    assert_eq!(topoalign_nrt::numa_of_zone("node-64"), Some(64));
    assert_eq!(topoalign_nrt::zone_numa_index(machine, "node-64"), Some(1));
    assert_eq!(topoalign_nrt::zone_numa_index(machine, "node-0"), Some(0));
    assert_eq!(topoalign_nrt::zone_numa_index(machine, "node-1"), None);
    assert_eq!(topoalign_nrt::zone_numa_index(machine, "socket-0"), None);
    let dense = start_node(&spec(1, "none", "None")).unwrap();
    assert_eq!(topoalign_nrt::zone_numa_index(dense.machine(), "node-1"), Some(1));
}

/// The warning beside a node whose kubelet crashes on pods: under any
/// topology policy but none, every pod; under none with the Static memory
/// manager, every Guaranteed pod; none without it runs everything. The
/// warning agrees with the engine's decisions.
#[test]
fn the_crash_warning_is_given_where_the_kubelet_crashes() {
    let burstable = pod("b", "1", false, false);
    let guaranteed = pod("g", "1", false, true);
    for (policy, memory, crashes_on_burstable, crashes_on_guaranteed) in [
        ("none", "None", false, false),
        ("none", "Static", false, true),
        ("single-numa-node", "None", true, true),
        ("best-effort", "Static", true, true),
        ("restricted", "None", true, true),
    ] {
        let at = format!("{policy}/{memory}");
        let node = start_node(&spec(64, policy, memory)).unwrap();
        assert_eq!(
            node.try_admit(&burstable).decision.kubelet_panic.is_some(),
            crashes_on_burstable,
            "{at}"
        );
        assert_eq!(
            node.try_admit(&guaranteed).decision.kubelet_panic.is_some(),
            crashes_on_guaranteed,
            "{at}"
        );
        let crashes: Vec<KubeletCrash> = node
            .start_hazards()
            .into_iter()
            .filter_map(|hazard| match hazard {
                StartHazard::KubeletCrash(crash) => Some(crash),
                StartHazard::ReservationOverrun(_) => None,
            })
            .collect();
        assert_eq!(crashes.len(), usize::from(crashes_on_guaranteed), "{at}");
        if let Some(crash) = crashes.first() {
            assert_eq!(crash.numa_ids, [64], "{at}");
            let warning = crash.to_string();
            assert!(warning.starts_with("NUMA node id(s) 64 do not fit"), "{warning}");
            let says = if crashes_on_burstable {
                "at its first pod admission"
            } else {
                "at the first container of a Guaranteed pod"
            };
            assert!(warning.contains(says), "{warning}");
            assert!(warning.contains(&format!("policy {policy}")), "{warning}");
            assert_eq!(topoalign_nrt::warnings::warnings(&node), [warning], "{at}");
        } else {
            assert_eq!(topoalign_nrt::warnings::warnings(&node), Vec::<String>::new(), "{at}");
        }
        // The same configuration on {0, 1}: no warning.
        let dense = start_node(&spec(1, policy, memory)).unwrap();
        assert_eq!(topoalign_nrt::warnings::warnings(&dense), Vec::<String>::new(), "{at}");
    }
}

/// A `hand-numa-nodes-72-*` vector of release 1.37 (72 NUMA nodes, ids
/// 0-71): the scenario and the oracle's (the real kubelet's) answer.
fn wide_vector(name: &str) -> (topoalign_scenario::Scenario, Value) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/conformance/1.37");
    let read = |kind: &str| std::fs::read_to_string(root.join(kind).join(format!("hand-numa-nodes-72-{name}.json")));
    let scenario = topoalign_scenario::Scenario::parse(&read("scenarios").unwrap()).unwrap();
    let expected = serde_json::from_str(&read("expected").unwrap()).unwrap();
    (scenario, expected)
}

/// The device ids the oracle's kubelet holds after the vector's last
/// event: admissions add a pod's devices, deletions drop them, a restart
/// keeps the pods it admits again.
fn oracle_held_devices(expected: &Value) -> std::collections::BTreeSet<String> {
    let devices = |pod: &Value| -> Vec<String> {
        pod["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("devices")?.as_object())
            .flat_map(|by_resource| by_resource.values())
            .flat_map(|ids| ids.as_array().unwrap().iter().map(|id| id.as_str().unwrap().to_owned()))
            .collect()
    };
    let mut pods: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::new();
    for result in expected["results"].as_array().unwrap() {
        let key = result["pod"].as_str().unwrap_or_default().to_owned();
        if let Some(again) = result.get("pods").and_then(Value::as_array) {
            pods = again
                .iter()
                .filter(|pod| pod["admitted"] == true)
                .map(|pod| (pod["pod"].as_str().unwrap().to_owned(), devices(pod)))
                .collect();
        } else if result["deleted"] == true {
            pods.remove(&key);
        } else if result["admitted"] == true {
            pods.insert(key, devices(result));
        }
    }
    pods.into_values().flatten().collect()
}

/// A machine of 72 NUMA nodes (ids 0-71, past the kubelet's 64-bit masks)
/// under topology policy none, which its kubelet runs: after the vector's
/// events (a restart among them) the object has a zone `node-<id>` for
/// every one of the 72 nodes, costs from the scenario's distances, and
/// per zone the CPUs and GPUs the real kubelet left free (the oracle's
/// final shared pool and held devices, never the engine's answer); it
/// restores to the same node. With the Static memory manager the warning
/// says the kubelet crashes at the first Guaranteed pod that reaches it.
#[test]
fn a_machine_of_72_numa_nodes_under_none_is_published_as_its_kubelet_runs_it() {
    use topoalign_model::CpuSet;
    for name in ["memory-none", "static-memory", "cpu-none"] {
        let (scenario, expected) = wide_vector(name);
        let spec = NodeSpec {
            topology: scenario.topology.clone(),
            kubelet: scenario.kubelet.clone(),
        };
        let mut node = start_node(&spec).unwrap();
        topoalign_scenario::play_events(&mut node, &spec.kubelet, &scenario).unwrap();
        let object = build(
            "wide",
            &node,
            BuildOptions {
                exact_state: Some(&spec),
            },
        );
        let object: NodeResourceTopology = serde_json::from_str(&serde_json::to_string(&object).unwrap()).unwrap();

        let topology = &spec.topology;
        assert_eq!(topology.numa_nodes.len(), 72);
        let names: Vec<String> = topology.numa_nodes.iter().map(|n| format!("node-{}", n.id)).collect();
        assert_eq!(
            object.zones.iter().map(|z| z.name.clone()).collect::<Vec<_>>(),
            names,
            "{name}"
        );

        let static_cpus = spec.kubelet["cpuManagerPolicy"] == "static";
        let reserved = CpuSet::parse(spec.kubelet["reservedSystemCPUs"].as_str().unwrap_or("")).unwrap();
        let shared = CpuSet::parse(expected["final"]["defaultCpuSet"].as_str().unwrap()).unwrap();
        let held = oracle_held_devices(&expected);
        let gpus = &topology.devices["example.com/gpu"];
        let mut free_gpus = 0;
        for (zone, numa) in object.zones.iter().zip(&topology.numa_nodes) {
            let at = format!("{name}: {}", zone.name);
            let resource = |resource: &str| zone.resources.iter().find(|r| r.name == resource);
            let cpus: Vec<u32> = topology
                .cpus
                .iter()
                .filter(|c| c.numa == numa.id)
                .map(|c| c.id)
                .collect();
            let cpu = resource("cpu").unwrap();
            assert_eq!(cpu.capacity, cpus.len().to_string(), "{at}");
            if static_cpus {
                let free = cpus
                    .iter()
                    .filter(|&&c| shared.contains(c) && !reserved.contains(c))
                    .count();
                assert_eq!(cpu.available, free.to_string(), "{at}");
            }
            let here: Vec<&str> = gpus
                .iter()
                .filter(|d| d.numa.contains(&numa.id))
                .map(|d| d.id.as_str())
                .collect();
            match resource("example.com/gpu") {
                Some(gpu) => {
                    assert_eq!(gpu.capacity, here.len().to_string(), "{at}");
                    let free = here.iter().filter(|id| !held.contains(**id)).count();
                    assert_eq!(gpu.available, free.to_string(), "{at}");
                    free_gpus += free;
                }
                None => assert!(here.is_empty(), "{at}"),
            }
            let distances = numa.distances.as_ref().unwrap();
            let costs: Vec<(String, i64)> = zone.costs.iter().map(|c| (c.name.clone(), c.value)).collect();
            let expected_costs: Vec<(String, i64)> = names
                .iter()
                .cloned()
                .zip(distances.iter().map(|&d| i64::try_from(d).unwrap()))
                .collect();
            assert_eq!(costs, expected_costs, "{at}");
        }
        // Something was held and something is free past 63.
        assert!(!held.is_empty() || name == "cpu-none", "{name}");
        assert!(free_gpus > 0, "{name}");

        // The node rebuilt from the object is the node.
        let restored = restore(&object).unwrap();
        assert_eq!(
            parsed(&build(
                "wide",
                &restored.node,
                BuildOptions {
                    exact_state: Some(&spec)
                }
            )),
            parsed(&object),
            "{name}"
        );

        let warnings = topoalign_nrt::warnings::warnings(&node);
        let crashes: Vec<KubeletCrash> = node
            .start_hazards()
            .into_iter()
            .filter_map(|hazard| match hazard {
                StartHazard::KubeletCrash(crash) => Some(crash),
                StartHazard::ReservationOverrun(_) => None,
            })
            .collect();
        if name == "static-memory" {
            assert_eq!(crashes.len(), 1, "{warnings:?}");
            assert_eq!(crashes[0].numa_ids, (64..72).collect::<Vec<_>>());
            assert_eq!(crashes[0].at, topoalign_engine::CrashPoint::FirstGuaranteedContainer);
            assert!(warnings.contains(&crashes[0].to_string()), "{warnings:?}");
        } else {
            assert!(crashes.is_empty() && warnings.is_empty(), "{name}: {warnings:?}");
        }
    }
}

/// Under any other topology policy the kubelet refuses to start on 72
/// NUMA nodes (`max-allowable-numa-nodes`, 8 by default: the oracle's
/// answer for the best-effort vector); with the option raised it starts
/// and crashes at its first admission, which the warning says.
#[test]
fn under_another_policy_a_machine_of_72_numa_nodes_is_refused_or_warned_about() {
    let (scenario, expected) = wide_vector("best-effort");
    let mut spec = NodeSpec {
        topology: scenario.topology.clone(),
        kubelet: scenario.kubelet.clone(),
    };
    let error = start_node(&spec).unwrap_err().to_string();
    let refusal = expected["error"].as_str().unwrap();
    assert!(error.contains(refusal), "{error} / oracle: {refusal}");

    spec.kubelet["topologyManagerPolicyOptions"] = json!({"max-allowable-numa-nodes": "72"});
    let node = start_node(&spec).unwrap();
    let decision = node.try_admit(&pod("g", "2", false, true)).decision;
    assert!(decision.kubelet_panic.is_some(), "{decision:?}");
    let warnings = topoalign_nrt::warnings::warnings(&node);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("NUMA node id(s) 64, 65, 66, 67, 68, 69, 70, 71 do not fit")
            && warnings[0].contains("at its first pod admission")
            && warnings[0].contains("policy best-effort"),
        "{warnings:?}"
    );
    // Published all the same, every node named by its own id.
    let object = build(
        "wide",
        &node,
        BuildOptions {
            exact_state: Some(&spec),
        },
    );
    assert_eq!(object.zones.len(), 72);
    assert_eq!(object.zones[71].name, "node-71");
    restore(&object).unwrap();
}
