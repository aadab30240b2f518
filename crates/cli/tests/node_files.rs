//! One way in: every command that takes a node (`admit`, `agent --node`,
//! `run --standalone --node`) reads the same node files — here an hwloc
//! XML export (8 NUMA nodes × 2 CPUs) — through `topoalign-intake`.

mod agent_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use agent_support::{AgentProcess, TestResult, binary};
use topoalign_model::CpuSet;

fn hwloc_xml() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/topologies/hwloc-xml/hwloc-16amd64-4distances.xml")
}

fn path_arg(path: &Path) -> &str {
    path.to_str().unwrap_or_default()
}

const POD: &str = "
apiVersion: v1
kind: Pod
metadata: {name: two, uid: two-1}
spec:
  containers:
    - name: app
      resources: {limits: {cpu: '2', memory: 1Gi}}
";

#[test]
fn admit_takes_an_hwloc_node() -> TestResult {
    let dir = tempfile::tempdir()?;
    let pod = dir.path().join("pod.yaml");
    std::fs::write(&pod, POD)?;
    let xml = hwloc_xml();
    let output = Command::new(binary())
        .args(["admit", path_arg(&pod), "--node", path_arg(&xml)])
        .args(["--cpu-policy", "static", "--reserved-cpus", "0", "-o", "json"])
        .output()?;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let result = &document["results"][0];
    assert_eq!(result["admitted"], true, "{result}");
    let cpus = CpuSet::parse(result["containers"][0]["cpus"].as_str().ok_or("exclusive CPUs")?)?;
    assert_eq!(cpus.len(), 2);
    Ok(())
}

#[test]
fn the_agent_serves_an_hwloc_node() -> TestResult {
    let dir = tempfile::tempdir()?;
    let xml = hwloc_xml();
    let agent = AgentProcess::start(dir.path(), &["--node", path_arg(&xml)])?;
    let client = agent.client();
    let topology = client.topology()?;
    assert_eq!(topology.numa_nodes.len(), 8);
    // Without a configuration file: the agent's defaults.
    assert_eq!(topology.cpu_policy, "static");
    assert_eq!(topology.enforcement, "none", "--node implies --no-enforce");
    let answer = client.admit(&serde_json::json!({"cpus": 2, "memory": "1Gi"}))?;
    assert!(answer.admitted, "{answer:?}");
    Ok(())
}

#[test]
fn run_standalone_takes_an_hwloc_node() -> TestResult {
    let dir = tempfile::tempdir()?;
    let xml = hwloc_xml();
    let output = Command::new(binary())
        .args(["run", "--standalone", "--node", path_arg(&xml)])
        .args(["--state-dir", path_arg(&dir.path().join("state"))])
        .args(["--cpus", "2", "--memory", "64Mi", "--"])
        .args(["sh", "-c", "echo $TOPOALIGN_CPUS"])
        .output()?;
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let cpus = CpuSet::parse(String::from_utf8_lossy(&output.stdout).trim())?;
    assert_eq!(cpus.len(), 2);
    assert!(!cpus.contains(0), "the lowest CPU is reserved by the agent's defaults");
    Ok(())
}
