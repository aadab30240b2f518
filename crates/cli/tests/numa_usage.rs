//! One node, four views of what each NUMA node has: the agent's
//! `GET /v1/topology`, the NodeResourceTopology object the same agent
//! writes (`--nrt-file`), `topoalign diagnose` on the kubelet's checkpoint
//! of the same state, and the explanation `diagnose` gives of a pod on it.
//! The KubeletConfiguration reserves CPUs by count (`systemReserved` and
//! `kubeReserved` `cpu`, no `reservedSystemCPUs`), so the CPU manager picks
//! the reserved CPUs itself, and the memory manager is `None` with a huge
//! page pool on NUMA 0: every view must show the same per-NUMA numbers,
//! all read from the engine's `Node::numa_usage`.

mod agent_support;

use agent_support::{AgentProcess, TestResult, binary, eventually, read_nrt_object, test_node};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use topoalign_model::CpuSet;
use topoalign_nrt::NodeResourceTopology;

/// Per NUMA node: (capacity, allocatable, allocated, available) CPUs.
type CpuCounts = BTreeMap<usize, (u64, u64, u64, u64)>;

/// (capacity, allocatable, available) of `resource` in zone `node-<numa>`.
fn zone_amounts(object: &NodeResourceTopology, numa: usize, resource: &str) -> Option<(String, String, String)> {
    let zone = object.zones.iter().find(|z| z.name == format!("node-{numa}"))?;
    let info = zone.resources.iter().find(|r| r.name == resource)?;
    Some((info.capacity.clone(), info.allocatable.clone(), info.available.clone()))
}

fn count(text: &str) -> Result<u64, String> {
    text.parse().map_err(|e| format!("{text:?}: {e}"))
}

#[test]
fn every_view_shows_the_same_numa_numbers_when_cpus_are_reserved_by_count() -> TestResult {
    let dir = tempfile::tempdir()?;
    // The agent tests' machine (2 NUMA nodes × 4 cores × 2 threads, CPUs
    // n and n+8 siblings) with a 2Gi huge page pool on NUMA 0; 2 CPUs
    // reserved by count: the static policy takes one whole core, CPUs 0
    // and 8, on NUMA 0.
    let mut scenario: Value = serde_yaml_ng::from_str(&test_node())?;
    scenario["topology"]["numaNodes"][0]["hugepages-1Gi"] = json!("2Gi");
    scenario["kubelet"] = json!({
        "topologyManagerPolicy": "single-numa-node",
        "cpuManagerPolicy": "static",
        "memoryManagerPolicy": "None",
        "systemReserved": {"cpu": "1", "memory": "1Gi"},
        "kubeReserved": {"cpu": "1"},
    });
    let node = dir.path().join("node.json");
    std::fs::write(&node, scenario.to_string())?;
    let nrt_file = dir.path().join("nrt.yaml");
    let node_arg = node.to_str().ok_or("path")?;
    let nrt_arg = nrt_file.to_str().ok_or("path")?;
    let agent = AgentProcess::start(
        dir.path(),
        &["--node", node_arg, "--nrt-file", nrt_arg, "--nrt-interval", "100"],
    )?;
    let client = agent.client();
    let web = client.admit(&json!({"name": "web", "cpus": 2, "memory": "1Gi"}))?;
    let web = web.allocation.ok_or("admitted")?;
    let web_cpus = web.cpus.clone();

    // The agent's API.
    let topology = client.topology()?;
    let mut from_agent = CpuCounts::new();
    let mut agent_memory = BTreeMap::new();
    for numa in &topology.numa_nodes {
        let cpu = numa.resources.get("cpu").ok_or("cpu listed")?;
        let allocated = cpu.allocated.ok_or("CPUs are placed under the static policy")?;
        from_agent.insert(
            numa.id,
            (cpu.capacity, cpu.allocatable, allocated, cpu.allocatable - allocated),
        );
        for (resource, usage) in &numa.resources {
            if resource == "memory" || resource.starts_with("hugepages-") {
                assert_eq!(usage.allocated, None, "memory is not placed under None");
                agent_memory.insert((numa.id, resource.clone()), (usage.capacity, usage.allocatable));
            }
        }
    }
    // CPUs 0 and 8 are reserved: NUMA 0 may give 6 of its 8.
    assert_eq!(from_agent[&0].1, 6, "{from_agent:?}");
    assert_eq!(from_agent[&1].1, 8, "{from_agent:?}");
    assert_eq!(from_agent.values().map(|c| c.2).sum::<u64>(), 2, "{from_agent:?}");

    // The NRT object the same agent writes, once it shows the admission.
    let object = eventually("the admission in the NRT file", &agent, || {
        read_nrt_object(&nrt_file).filter(|o| {
            topoalign_nrt::restore(o)
                .ok()
                .is_some_and(|restored| restored.pods.len() == 1)
        })
    })?;
    let mut from_nrt = CpuCounts::new();
    for &numa in from_agent.keys() {
        let (capacity, allocatable, available) = zone_amounts(&object, numa, "cpu").ok_or("cpu zone")?;
        let (capacity, allocatable, available) = (count(&capacity)?, count(&allocatable)?, count(&available)?);
        from_nrt.insert(numa, (capacity, allocatable, allocatable - available, available));
    }
    assert_eq!(from_nrt, from_agent, "NRT zones and /v1/topology");
    for ((numa, resource), (capacity, allocatable)) in &agent_memory {
        let (zone_capacity, zone_allocatable, zone_available) =
            zone_amounts(&object, *numa, resource).ok_or(format!("{resource} in zone {numa}"))?;
        let bytes = |text: &str| topoalign_k8s::parse_quantity(text).map(|q| q.value());
        assert_eq!(
            (
                bytes(&zone_capacity)?,
                bytes(&zone_allocatable)?,
                bytes(&zone_available)?
            ),
            (
                i128::from(*capacity),
                i128::from(*allocatable),
                i128::from(*allocatable)
            ),
            "NUMA {numa} {resource}"
        );
    }
    // The pool counts in NUMA 0's memory capacity but not in what it may give.
    assert_eq!(agent_memory[&(0, "memory".to_owned())], (8 << 30, 6 << 30));
    assert_eq!(agent_memory[&(0, "hugepages-1Gi".to_owned())], (2 << 30, 2 << 30));

    // The kubelet's checkpoint of the same state, read by `diagnose`, with
    // a probe pod explained on it.
    let kubelet_dir = dir.path().join("kubelet");
    std::fs::create_dir_all(&kubelet_dir)?;
    let container = web.containers.first().ok_or("a container")?.name.clone();
    let checkpoint = json!({
        "policyName": "static",
        "defaultCpuSet": topology.shared_cpus.to_string(),
        "entries": {web.id.clone(): {container.clone(): web.cpus.clone()}},
        "checksum": 0
    });
    std::fs::write(kubelet_dir.join("cpu_manager_state"), checkpoint.to_string())?;
    let (namespace, name) = web.name.split_once('/').ok_or("namespace/name")?;
    let running = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": web.id},
        "spec": {"containers": [{"name": container, "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}
    });
    std::fs::write(kubelet_dir.join("pods.yaml"), serde_json::to_string(&running)?)?;
    let probe = dir.path().join("probe.yaml");
    std::fs::write(
        &probe,
        r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
            "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}"#,
    )?;
    let output = std::process::Command::new(binary())
        .arg("diagnose")
        .arg("--kubelet-dir")
        .arg(&kubelet_dir)
        .arg("--node")
        .arg(&node)
        .arg(&probe)
        .args(["-o", "json"])
        .output()?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let diagnosis: Value = serde_json::from_slice(&output.stdout)?;
    assert_eq!(diagnosis["restart"]["ok"], true, "{}", diagnosis["restart"]);
    let table = &diagnosis["results"][0]["explanation"]["resources"]["numa"];
    let mut from_diagnose = CpuCounts::new();
    let mut from_explain = BTreeMap::new();
    for numa in diagnosis["numa"].as_array().ok_or("numa map")? {
        let id = numa["node"].as_u64().ok_or("node id")? as usize;
        let cpus = CpuSet::parse(numa["cpus"].as_str().ok_or("cpus")?)?;
        let reserved = CpuSet::parse(numa["reserved"].as_str().ok_or("reserved")?)?;
        let mut exclusive = CpuSet::new();
        for held in numa["exclusive"].as_object().ok_or("exclusive")?.values() {
            exclusive = exclusive.union(&CpuSet::parse(held.as_str().ok_or("cpu list")?)?);
        }
        let allocatable = (cpus.len() - reserved.len()) as u64;
        let allocated = exclusive.len() as u64;
        from_diagnose.insert(id, (cpus.len() as u64, allocatable, allocated, allocatable - allocated));
        let row = table
            .as_array()
            .ok_or("explanation table")?
            .iter()
            .find(|row| row["node"] == id)
            .ok_or("a row per NUMA node")?;
        from_explain.insert(id, count(row["resources"]["cpu"]["free"].as_str().ok_or("free CPUs")?)?);
    }
    assert_eq!(from_diagnose, from_agent, "diagnose and /v1/topology");
    let available: BTreeMap<usize, u64> = from_agent.iter().map(|(&numa, c)| (numa, c.3)).collect();
    assert_eq!(from_explain, available, "explain's free CPUs and /v1/topology");
    // And the exclusive CPUs are the agent's.
    let held: CpuSet = diagnosis["numa"]
        .as_array()
        .ok_or("numa map")?
        .iter()
        .flat_map(|numa| numa["exclusive"].as_object().into_iter().flat_map(|m| m.values()))
        .filter_map(|cpus| CpuSet::parse(cpus.as_str()?).ok())
        .fold(CpuSet::new(), |all, cpus| all.union(&cpus));
    assert_eq!(held, web_cpus);
    Ok(())
}
