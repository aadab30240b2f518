//! `topoalign agent` with NodeResourceTopology output, as a real process:
//! the object in a file (`--nrt-file`) and on a local HTTP server playing
//! the API server (`--nrt-publish`, the publisher's own test harness)
//! follows admissions and releases; an unreachable API server never holds
//! up an allocation.

mod agent_support;
#[path = "../../nrt-publisher/tests/fake_api/mod.rs"]
mod fake_api;

use std::path::Path;

use agent_support::{AgentProcess, TestResult, eventually, read_nrt_object};
use serde_json::json;
use topoalign_nrt::NodeResourceTopology;

fn pod_count(object: &NodeResourceTopology) -> Option<usize> {
    topoalign_nrt::restore(object).ok().map(|restored| restored.pods.len())
}

/// (allocatable, available) CPUs of zone `node-<numa>`.
fn cpus_of(object: &NodeResourceTopology, numa: usize) -> Option<(i64, i64)> {
    let zone = object.zones.iter().find(|z| z.name == format!("node-{numa}"))?;
    let cpu = zone.resources.iter().find(|r| r.name == "cpu")?;
    Some((cpu.allocatable.parse().ok()?, cpu.available.parse().ok()?))
}

fn validates(object: &NodeResourceTopology) -> Result<(), String> {
    let value = serde_json::to_value(object).map_err(|e| e.to_string())?;
    let problems = topoalign_nrt::schema::validate(&fake_api::crd_schema(), &value);
    problems.is_empty().then_some(()).ok_or(problems.join("; "))
}

#[test]
fn the_nrt_file_follows_admissions_and_releases() -> TestResult {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("nrt/worker-7.yaml");
    std::fs::create_dir_all(file.parent().ok_or("parent")?)?;
    let file_arg = file.to_str().ok_or("path")?;
    let agent = AgentProcess::start_test_node(
        dir.path(),
        &[
            "--nrt-file",
            file_arg,
            "--nrt-node-name",
            "worker-7",
            "--nrt-interval",
            "100",
        ],
    )?;
    let initial = eventually("the first object", &agent, || read_nrt_object(&file))?;
    validates(&initial)?;
    assert_eq!(initial.metadata.name, "worker-7");
    assert_eq!(pod_count(&initial), Some(0));
    for numa in [0, 1] {
        let (allocatable, available) = cpus_of(&initial, numa).ok_or("cpu listed")?;
        assert_eq!(allocatable, available, "nothing allocated on NUMA {numa}");
    }

    let client = agent.client();
    let web = client.admit(&json!({"name": "web", "cpus": 2, "memory": "1Gi"}))?;
    let web = web.allocation.ok_or("admitted")?;
    let numa = web
        .memory_numa
        .as_deref()
        .and_then(<[usize]>::first)
        .copied()
        .ok_or("pinned")?;
    let admitted = eventually("the admission in the file", &agent, || {
        read_nrt_object(&file).filter(|o| pod_count(o) == Some(1))
    })?;
    validates(&admitted)?;
    let (allocatable, available) = cpus_of(&admitted, numa).ok_or("cpu listed")?;
    assert_eq!(available, allocatable - 2, "two exclusive CPUs on NUMA {numa}");
    assert_eq!(cpus_of(&admitted, 1 - numa), cpus_of(&initial, 1 - numa));

    client.release(&web.id)?;
    let released = eventually("the release in the file", &agent, || {
        read_nrt_object(&file).filter(|o| pod_count(o) == Some(0))
    })?;
    assert_eq!(released, initial, "back to the empty node");
    // Replaced atomically: no temporary file is left beside it.
    let names: Vec<_> = std::fs::read_dir(file.parent().ok_or("parent")?)?
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, ["worker-7.yaml"]);
    Ok(())
}

fn kubeconfig(dir: &Path, server: &str) -> Result<String, std::io::Error> {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster: {{server: \"{server}\"}}\n\
             users:\n- name: agent\n  user: {{}}\ncontexts:\n- name: fake\n  context: {{cluster: fake, user: agent}}\n\
             current-context: fake\n"
        ),
    )?;
    Ok(path.display().to_string())
}

/// An agent on the test node publishing as `worker-7` every 100 ms to the
/// API server `kubeconfig` names.
fn publishing_agent(dir: &Path, kubeconfig: &str) -> Result<AgentProcess, Box<dyn std::error::Error>> {
    Ok(AgentProcess::start_with_env(
        dir,
        &[
            "--node",
            agent_support::write_test_node(dir)?.to_str().unwrap_or_default(),
            "--nrt-publish",
            "--nrt-node-name",
            "worker-7",
            "--nrt-interval",
            "100",
        ],
        &[("KUBECONFIG", kubeconfig)],
    )?)
}

#[test]
fn the_agent_applies_its_object_to_the_api_server_after_each_change() -> TestResult {
    let runtime = tokio::runtime::Runtime::new()?;
    let (server, url) = runtime.block_on(fake_api::serve());
    let dir = tempfile::tempdir()?;
    let config = kubeconfig(dir.path(), &url)?;
    let agent = publishing_agent(dir.path(), &config)?;
    let stored = |pods: usize| {
        let server = server.lock().ok()?;
        let object: NodeResourceTopology = serde_json::from_value(server.stored.get("worker-7")?.clone()).ok()?;
        (pod_count(&object) == Some(pods)).then_some(object)
    };
    eventually("the first apply", &agent, || stored(0))?;
    let client = agent.client();
    let web = client.admit(&json!({"name": "web", "cpus": 2, "memory": "1Gi"}))?;
    let web = web.allocation.ok_or("admitted")?;
    let admitted = eventually("the admission applied", &agent, || stored(1))?;
    validates(&admitted)?;
    client.release(&web.id)?;
    eventually("the release applied", &agent, || stored(0))?;

    let server = server.lock().map_err(|e| e.to_string())?;
    assert!(server.requests.len() >= 3, "{:?}", server.requests);
    for seen in &server.requests {
        assert_eq!(seen.method, axum::http::Method::PATCH);
        assert_eq!(seen.name, "worker-7");
        assert_eq!(seen.content_type, "application/apply-patch+yaml");
        assert!(seen.query.contains("fieldManager=topoalign"), "{}", seen.query);
        assert_eq!(seen.problems, Vec::<String>::new());
    }
    Ok(())
}

#[test]
fn an_unreachable_api_server_never_holds_up_an_allocation() -> TestResult {
    // A port nobody listens on.
    let url = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        format!("http://{}", listener.local_addr()?)
    };
    let dir = tempfile::tempdir()?;
    let config = kubeconfig(dir.path(), &url)?;
    let agent = publishing_agent(dir.path(), &config)?;
    let client = agent.client();
    for name in ["a", "b", "c"] {
        let response = client.admit(&json!({"name": name, "cpus": 1, "memory": "256Mi"}))?;
        assert!(response.admitted, "{response:?}");
    }
    // The failures are logged, and retried (more than one attempt).
    eventually("failures logged and retried", &agent, || {
        (agent.log_text().matches("NodeResourceTopology update failed").count() >= 2).then_some(())
    })?;
    assert_eq!(client.health()?.allocations, 3);
    Ok(())
}
