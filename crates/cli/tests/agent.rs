//! `topoalign agent` as a real process on a Unix socket in a temporary
//! directory, driven over HTTP: the API, concurrent clients under an
//! invariant checker, `kill -9` under load, damaged state, the TCP token,
//! holders that exit.

mod agent_support;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use agent_support::{
    AgentProcess, TEST_TOKEN, TcpAgent, TestResult, check_agent, check_invariants, wait_with_deadline,
};
use serde_json::json;
use topoalign_agent::wire::Allocation;
use topoalign_agent::{Client, ClientError};

/// A small deterministic generator (xorshift64*), so a failing run can be
/// repeated from its printed seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
    }
}

fn seed() -> u64 {
    let seed = std::env::var("TOPOALIGN_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| u64::from(std::process::id()));
    eprintln!("seed {seed} (set TOPOALIGN_TEST_SEED to repeat)");
    seed
}

#[test]
fn admit_list_show_and_release_over_the_socket() -> TestResult {
    let dir = tempfile::tempdir()?;
    let mut agent = AgentProcess::start_test_node(dir.path(), &[])?;
    let meta = std::fs::metadata(&agent.socket)?;
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "the socket must be private");
    let client = agent.client();

    // A plain request: two whole CPUs and memory make it Guaranteed.
    let web = client.admit(&json!({"name": "web", "cpus": 2, "memory": "1Gi"}))?;
    assert!(web.admitted, "{web:?}");
    let web = web.allocation.ok_or("no allocation")?;
    assert_eq!((web.id.as_str(), web.name.as_str()), ("a1", "topoalign/web"));
    assert!(web.exclusive);
    assert_eq!(web.cpus.len(), 2);
    assert_eq!(web.memory_numa.as_ref().map(Vec::len), Some(1));
    assert_eq!(web.enforcement, "none", "--node implies --no-enforce");

    // A Pod manifest in YAML, with a GPU; its init container comes first.
    let manifest = "\
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: ml}
spec:
  initContainers:
  - name: fetch
    resources: {limits: {cpu: '1', memory: 256Mi}}
  containers:
  - name: trainer
    resources: {limits: {cpu: '4', memory: 2Gi, nvidia.com/gpu: '1'}}
";
    let response = client.send(
        "POST",
        "/v1/allocations",
        Some(("application/yaml", manifest.as_bytes())),
        &[],
    )?;
    assert_eq!(response.status, 201, "{}", response.text());
    let train: topoalign_agent::wire::AdmitResponse = serde_json::from_slice(&response.body)?;
    let train = train.allocation.ok_or("no allocation")?;
    assert_eq!(train.name, "ml/train");
    assert_eq!(
        train.containers.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["fetch", "trainer"]
    );
    assert_eq!(train.devices.get("nvidia.com/gpu").map(Vec::len), Some(1));

    // Rejected: the explanation says why; nothing changes.
    let too_big = client.admit(&json!({"cpus": 40, "memory": "1Gi", "policy": "single-numa-node"}))?;
    assert!(!too_big.admitted);
    assert_eq!(too_big.reason.as_deref(), Some("TopologyAffinityError"));
    assert!(
        too_big.explanation.summary.contains("Free now: NUMA 0:"),
        "{}",
        too_big.explanation.summary
    );
    // Clashing names, bad bodies, unknown things: JSON errors with a message.
    for (method, path, body, status, says) in [
        (
            "POST",
            "/v1/allocations",
            r#"{"name": "web", "cpus": 1}"#,
            409,
            "already allocated (id a1)",
        ),
        ("POST", "/v1/allocations", "{not json", 400, "not valid JSON"),
        (
            "POST",
            "/v1/allocations",
            r#"{"cpus": 1, "pid": 999999999}"#,
            400,
            "process 999999999 does not exist",
        ),
        (
            "POST",
            "/v1/allocations?colour=red",
            r#"{"cpus": 1}"#,
            400,
            "bad query string",
        ),
        ("GET", "/v1/allocations/a99", "", 404, "no allocation a99"),
        ("DELETE", "/v1/allocations/a99", "", 404, "no allocation a99"),
        ("GET", "/v2/things", "", 404, "no endpoint /v2/things"),
        ("PUT", "/v1/allocations", "{}", 405, "PUT is not allowed"),
    ] {
        let response = client.send(method, path, Some(("application/json", body.as_bytes())), &[])?;
        assert_eq!(response.status, status, "{method} {path}: {}", response.text());
        let error: topoalign_agent::wire::ErrorBody = serde_json::from_slice(&response.body)?;
        assert!(error.error.contains(says), "{method} {path}: {}", error.error);
    }
    let huge = vec![b' '; 2 << 20];
    let response = client.send("POST", "/v1/allocations", Some(("application/json", &huge)), &[])?;
    assert_eq!(response.status, 413, "{}", response.text());

    let listed = check_agent(&client)?;
    assert_eq!(listed.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(), ["a1", "a2"]);
    let shown: Allocation = client.call("GET", "/v1/allocations/a2", None)?;
    assert_eq!(shown, train);
    let topology = client.topology()?;
    assert_eq!(topology.numa_nodes.len(), 2);
    assert_eq!(
        (topology.cpu_policy.as_str(), topology.memory_policy.as_str()),
        ("static", "Static")
    );
    let metrics = String::from_utf8(client.send("GET", "/metrics", None, &[])?.body)?;
    for name in [
        "topoalign_topology_manager_admission_requests_total 3",
        "topoalign_topology_manager_admission_errors_total{reason=\"TopologyAffinityError\"} 1",
        "topoalign_topology_manager_admission_duration_seconds_count 3",
        "topoalign_cpu_manager_pinning_requests_total",
        "topoalign_memory_manager_pinning_requests_total",
        "topoalign_numa_allocated{numa_node=\"0\",resource=\"cpu\"}",
        "topoalign_numa_capacity{numa_node=\"1\",resource=\"nvidia.com/gpu\"} 2",
        "topoalign_numa_unpaired{numa_node=\"0\",resource=\"cpu\"}",
    ] {
        assert!(metrics.contains(name), "{name} missing from\n{metrics}");
    }

    let released = client.release("a1")?;
    assert_eq!(released.name, "topoalign/web");
    assert!(matches!(
        client.release("a1"),
        Err(ClientError::Status { status: 404, .. })
    ));

    // SIGTERM: a clean exit that removes the socket; the state stays.
    let status = agent.terminate()?;
    assert!(status.success(), "{status}: {}", agent.log_text());
    assert!(!agent.socket.exists());
    drop(agent);
    let agent = AgentProcess::start_test_node(dir.path(), &[])?;
    let after = agent.client().allocations()?;
    assert_eq!(after, vec![train]);
    let health = agent.client().health()?;
    assert!(
        health.recovery.iter().any(|n| n.contains("recovered 1 allocations")),
        "{health:?}"
    );
    Ok(())
}

/// What one client thread believes.
#[derive(Default)]
struct Belief {
    /// Acknowledged and not released: name → allocation.
    held: BTreeMap<String, Allocation>,
    /// Acknowledged releases.
    released: BTreeSet<String>,
    /// A request sent without an answer (the agent died): admit of a name,
    /// or release of an id.
    in_flight: Option<InFlight>,
    next: usize,
}

#[derive(Clone, Debug)]
enum InFlight {
    Admit(String),
    Release(String, String),
}

/// Random admissions and releases by client `thread`, each followed by the
/// invariant check, until `ops` are done or the agent dies (`dying` tells
/// a death from a bug). Each step is reported on `steps`.
fn client_thread(
    client: &Client,
    thread: usize,
    rng: &mut Rng,
    belief: &mut Belief,
    ops: usize,
    dying: &AtomicBool,
    steps: &mpsc::Sender<()>,
) -> Result<(), String> {
    let gone = |error: ClientError| -> Result<(), String> {
        match error {
            ClientError::Connect { .. } | ClientError::Protocol(_) if dying.load(Ordering::SeqCst) => Ok(()),
            other => Err(format!("thread {thread}: {other}")),
        }
    };
    for _ in 0..ops {
        let release = !belief.held.is_empty() && rng.below(3) == 0;
        if release {
            let index = rng.below(belief.held.len() as u64) as usize;
            let (name, allocation) = belief
                .held
                .iter()
                .nth(index)
                .map(|(n, a)| (n.clone(), a.clone()))
                .ok_or("no held allocation")?;
            belief.in_flight = Some(InFlight::Release(allocation.id.clone(), name.clone()));
            match client.release(&allocation.id) {
                Ok(released) => {
                    if released.id != allocation.id {
                        return Err(format!("released {} instead of {}", released.id, allocation.id));
                    }
                    belief.held.remove(&name);
                    belief.released.insert(allocation.id);
                }
                Err(error) => return gone(error),
            }
        } else {
            let name = format!("t{thread}-{}", belief.next);
            belief.next += 1;
            let cpus = 1 + rng.below(3);
            let mut request = json!({
                "name": name,
                "cpus": cpus,
                "memory": format!("{}Mi", 256 * (1 + rng.below(4))),
            });
            if rng.below(4) == 0 {
                request["devices"] = json!({"nvidia.com/gpu": 1});
            }
            belief.in_flight = Some(InFlight::Admit(name.clone()));
            match client.admit(&request) {
                Ok(answer) if answer.admitted => {
                    let allocation = answer.allocation.ok_or("admitted without an allocation")?;
                    let got = &allocation.cpus;
                    if !allocation.exclusive || got.len() as u64 != cpus {
                        return Err(format!("asked for {cpus} exclusive CPUs, got {allocation:?}"));
                    }
                    belief.held.insert(name, allocation);
                }
                Ok(_) => {} // the node is full: fine
                Err(error) => return gone(error),
            }
        }
        belief.in_flight = None;
        let view = client.allocations().and_then(|a| Ok((a, client.topology()?)));
        match view {
            Ok((allocations, topology)) => {
                check_invariants(&allocations, &topology).map_err(|v| format!("thread {thread}: {v}"))?;
            }
            Err(error) => return gone(error),
        }
        let _ = steps.send(());
    }
    Ok(())
}

#[test]
fn concurrent_clients_never_over_allocate() -> TestResult {
    let dir = tempfile::tempdir()?;
    let agent = AgentProcess::start_test_node(dir.path(), &[])?;
    let seed = seed();
    let dying = AtomicBool::new(false);
    let (steps, _received) = mpsc::channel();
    let beliefs: Vec<Belief> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..6)
            .map(|thread| {
                let client = agent.client();
                let (dying, steps) = (&dying, steps.clone());
                scope.spawn(move || {
                    let mut rng = Rng::new(seed + thread as u64);
                    let mut belief = Belief::default();
                    client_thread(&client, thread, &mut rng, &mut belief, 20, dying, &steps).map(|()| belief)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| "a client thread panicked".to_string())
                    .and_then(|r| r)
            })
            .collect::<Result<_, String>>()
    })?;
    let client = agent.client();
    let listed = check_agent(&client)?;
    let believed: BTreeSet<&str> = beliefs
        .iter()
        .flat_map(|b| b.held.values())
        .map(|a| a.id.as_str())
        .collect();
    let actual: BTreeSet<&str> = listed.iter().map(|a| a.id.as_str()).collect();
    assert_eq!(actual, believed);
    for allocation in &listed {
        client.release(&allocation.id)?;
    }
    let topology = client.topology()?;
    for node in &topology.numa_nodes {
        for (resource, usage) in &node.resources {
            assert_eq!(
                usage.allocated.unwrap_or(0),
                0,
                "NUMA {} {resource} still allocated",
                node.id
            );
        }
    }
    Ok(())
}

#[test]
fn kill_minus_nine_under_load_loses_nothing_duplicates_nothing_leaks_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let seed = seed();
    let mut rng = Rng::new(seed);
    let mut beliefs: Vec<Belief> = (0..4).map(|_| Belief::default()).collect();
    let mut agent = AgentProcess::start_test_node(dir.path(), &[])?;
    for round in 0..6 {
        let kill_after = 3 + rng.below(25);
        let dying = Arc::new(AtomicBool::new(false));
        let (steps, step_done) = mpsc::channel();
        let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = beliefs
                .iter_mut()
                .enumerate()
                .map(|(thread, belief)| {
                    let client = agent.client();
                    let (dying, steps) = (dying.clone(), steps.clone());
                    let thread_seed = seed ^ ((round * 16 + thread) as u64);
                    scope.spawn(move || {
                        let mut rng = Rng::new(thread_seed);
                        client_thread(&client, thread, &mut rng, belief, 60, &dying, &steps)
                    })
                })
                .collect();
            drop(steps);
            // Kill after a random number of completed steps, mid-traffic.
            for _ in 0..kill_after {
                if step_done.recv_timeout(Duration::from_secs(60)).is_err() {
                    break;
                }
            }
            dying.store(true, Ordering::SeqCst);
            agent.kill();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err("a client thread panicked".into())))
                .collect()
        });
        for result in results {
            result?;
        }

        agent = AgentProcess::start_test_node(dir.path(), &[])?;
        let client = agent.client();
        let listed = check_agent(&client)?;
        let listed_ids: BTreeSet<String> = listed.iter().map(|a| a.id.clone()).collect();
        // Plain requests live in namespace `topoalign`; beliefs use the bare name.
        let mut unaccounted: BTreeMap<String, Allocation> = listed
            .into_iter()
            .map(|a| (a.name.trim_start_matches("topoalign/").to_string(), a))
            .collect();
        for (thread, belief) in beliefs.iter_mut().enumerate() {
            for (name, allocation) in &belief.held {
                let recovered = unaccounted.remove(name);
                if let Some(InFlight::Release(id, _)) = &belief.in_flight
                    && *id == allocation.id
                {
                    continue; // a release in flight: either outcome is right
                }
                assert_eq!(
                    recovered.as_ref(),
                    Some(allocation),
                    "round {round}, thread {thread}: acknowledged allocation {name} lost or changed"
                );
            }
            match belief.in_flight.take() {
                Some(InFlight::Admit(name)) => {
                    // Committed before the kill but never acknowledged: the
                    // client finds it by name and now holds it.
                    if let Some(allocation) = unaccounted.remove(&name) {
                        belief.held.insert(name, allocation);
                    }
                }
                Some(InFlight::Release(id, name)) if !listed_ids.contains(&id) => {
                    belief.held.remove(&name);
                    belief.released.insert(id);
                }
                Some(InFlight::Release(..)) | None => {}
            }
            for id in &belief.released {
                assert!(!listed_ids.contains(id), "round {round}: released {id} came back");
            }
        }
        assert!(unaccounted.is_empty(), "round {round}: leaked {unaccounted:?}");
        let health = client.health()?;
        eprintln!("round {round}: killed after {kill_after} steps; {:?}", health.recovery);
    }
    // Release everything: the node is empty again.
    let client = agent.client();
    for allocation in client.allocations()? {
        client.release(&allocation.id)?;
    }
    assert!(check_agent(&client)?.is_empty());
    Ok(())
}

#[test]
fn a_damaged_state_file_stops_the_agent_with_a_report() -> TestResult {
    for damage in ["flip", "truncate"] {
        let dir = tempfile::tempdir()?;
        let mut agent = AgentProcess::start_test_node(dir.path(), &[])?;
        let client = agent.client();
        client.admit(&json!({"name": "kept", "cpus": 2, "memory": "1Gi"}))?;
        client.admit(&json!({"name": "later", "cpus": 1, "memory": "1Gi"}))?;
        agent.kill();
        let journal = agent.state_dir.join("journal");
        let mut bytes = std::fs::read(&journal)?;
        match damage {
            "flip" => {
                let at = bytes.len() - 20;
                bytes[at] ^= 0x55;
            }
            _ => bytes.truncate(bytes.len() - 30),
        }
        std::fs::write(&journal, &bytes)?;
        let node = agent_support::write_test_node(dir.path())?;
        let output = std::process::Command::new(agent_support::binary())
            .args(["agent", "--node"])
            .arg(&node)
            .arg("--socket")
            .arg(&agent.socket)
            .arg("--state-dir")
            .arg(&agent.state_dir)
            .output()?;
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{damage}: {stderr}");
        assert!(stderr.contains("is damaged at byte"), "{damage}: {stderr}");
        assert!(
            stderr.contains(if damage == "flip" {
                "checksum mismatch"
            } else {
                "truncated"
            }),
            "{damage}: {stderr}"
        );
        assert!(
            stderr.contains("a1 (kept: main: CPUs"),
            "{damage}: what survives: {stderr}"
        );
        assert!(stderr.contains("cannot be read"), "{damage}: what is lost: {stderr}");
        assert!(
            stderr.contains(&format!("move {}", journal.display())),
            "{damage}: {stderr}"
        );
        assert!(
            std::os::unix::net::UnixStream::connect(&agent.socket).is_err(),
            "{damage}: it must not serve"
        );
        assert_eq!(std::fs::read(&journal)?, bytes, "{damage}: the evidence is kept");
    }
    Ok(())
}

#[test]
fn tcp_needs_the_bearer_token() -> TestResult {
    let dir = tempfile::tempdir()?;
    let tcp_agent = TcpAgent::start(dir.path(), &[])?;
    let (agent, token, token_file) = (&tcp_agent.agent, TEST_TOKEN, &tcp_agent.token_file);
    let tcp = |token: Option<&str>| tcp_agent.tcp(token);
    for (client, says) in [
        (tcp(None), "needs `Authorization: Bearer <token>`"),
        (tcp(Some("not-the-token")), "wrong bearer token"),
    ] {
        for (method, path) in [
            ("GET", "/v1/allocations"),
            ("POST", "/v1/allocations"),
            ("GET", "/healthz"),
        ] {
            let response = client.send(method, path, Some(("application/json", br#"{"cpus": 1}"#)), &[])?;
            assert_eq!(response.status, 401, "{method} {path}: {}", response.text());
            assert!(response.text().contains(says), "{}", response.text());
        }
    }
    assert!(agent.client().allocations()?.is_empty(), "nothing was admitted");
    let answer = tcp(Some(token)).admit(&json!({"cpus": 1, "memory": "256Mi"}))?;
    assert!(answer.admitted);
    // The scheme is case-insensitive (RFC 9110).
    for scheme in ["bearer", "BEARER"] {
        let authorization = format!("{scheme} {token}");
        let response = tcp(None).send("GET", "/v1/allocations", None, &[("Authorization", &authorization)])?;
        assert_eq!(response.status, 200, "{scheme}: {}", response.text());
    }
    assert_eq!(agent.client().allocations()?.len(), 1, "the socket sees it too");

    // A token file that is too short is refused before anything starts.
    std::fs::write(token_file, "short")?;
    let output = std::process::Command::new(agent_support::binary())
        .args(["agent", "--no-enforce", "--listen", "127.0.0.1:1", "--token-file"])
        .arg(token_file)
        .args(["--node", dir.path().join("node.yaml").to_str().unwrap_or_default()])
        .output()?;
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("at least 16 characters"));
    Ok(())
}

#[test]
fn an_allocation_is_released_when_its_process_exits() -> TestResult {
    let dir = tempfile::tempdir()?;
    let agent = AgentProcess::start_test_node(dir.path(), &[])?;
    let client = agent.client();
    let mut holder = std::process::Command::new("sleep").arg("600").spawn()?;
    let answer = client.admit(&json!({"name": "held", "cpus": 1, "memory": "256Mi", "pid": holder.id()}))?;
    let allocation = answer.allocation.ok_or("not admitted")?;
    assert_eq!(allocation.pid, Some(holder.id()));
    let unheld = client.admit(&json!({"name": "free", "cpus": 1, "memory": "256Mi"}))?;
    assert!(unheld.admitted);

    assert!(client.reconcile()?.is_empty(), "the holder still runs");
    holder.kill()?;
    wait_with_deadline(&mut holder, Duration::from_secs(10))?;
    let released = client.reconcile()?;
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].id, allocation.id);
    assert!(released[0].reason.contains("exited"), "{:?}", released[0]);
    let left: Vec<String> = client.allocations()?.into_iter().map(|a| a.name).collect();
    assert_eq!(
        left,
        ["topoalign/free"],
        "allocations without a pid stay until released"
    );

    // A holder that exits while the agent is down is found at start-up.
    let mut holder = std::process::Command::new("sleep").arg("600").spawn()?;
    let answer = client.admit(&json!({"name": "held-2", "cpus": 1, "memory": "256Mi", "pid": holder.id()}))?;
    let id = answer.allocation.ok_or("not admitted")?.id;
    let mut agent = agent;
    agent.kill();
    holder.kill()?;
    wait_with_deadline(&mut holder, Duration::from_secs(10))?;
    let agent = AgentProcess::start_test_node(dir.path(), &[])?;
    let health = agent.client().health()?;
    assert!(
        health
            .recovery
            .iter()
            .any(|n| n.contains(&format!("released {id} (topoalign/held-2): holder process"))),
        "{health:?}"
    );
    let left: Vec<String> = agent.client().allocations()?.into_iter().map(|a| a.name).collect();
    assert_eq!(left, ["topoalign/free"]);
    Ok(())
}

#[test]
fn a_second_agent_on_the_same_state_or_socket_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let _agent = AgentProcess::start_test_node(dir.path(), &[])?;
    let node = dir.path().join("node.yaml");
    let other = tempfile::tempdir()?;
    for (socket, state, says) in [
        (
            dir.path().join("other.sock"),
            dir.path().join("state"),
            "is in use by agent pid",
        ),
        (
            dir.path().join("agent.sock"),
            other.path().join("state"),
            "another agent is serving on",
        ),
    ] {
        let output = std::process::Command::new(agent_support::binary())
            .args(["agent", "--node"])
            .arg(&node)
            .arg("--socket")
            .arg(&socket)
            .arg("--state-dir")
            .arg(&state)
            .output()?;
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{stderr}");
    }
    assert!(Path::new(&dir.path().join("agent.sock")).exists());
    Ok(())
}
