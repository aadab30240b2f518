//! One test per bug a person (or a hostile input) found in the agent,
//! named after what it reproduces (issue 13).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use serde_json::json;
use topoalign_agent::api::{SharedAgent, router};
use topoalign_agent::request::{AdmitOptions, Workload, read_body};
use topoalign_agent::server::bind_unix_socket;
use topoalign_agent::{Client, Endpoint};

use common::{TestResult, open_agent};

/// Issue 13: a pod with thousands of init containers took minutes of one
/// admission, "during which every other request waits". Readers now answer
/// from the last committed state: here an admission is held in progress —
/// the agent's lock taken, inside its change listener — while GET
/// /healthz, /v1/topology, /v1/allocations, /v1/allocations/{id} and
/// /metrics are answered.
#[test]
fn reads_are_answered_while_an_admission_holds_the_agent() -> TestResult {
    let dir = tempfile::tempdir()?;
    let (mut agent, _lock) = open_agent(dir.path(), "single-numa-node")?;

    // The hook: once armed, the listener (called with the agent locked,
    // after each change) says it has been entered and waits to be let go.
    let armed = Arc::new(AtomicBool::new(false));
    let (entered_tx, entered_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let go_rx = Mutex::new(go_rx);
    {
        let armed = Arc::clone(&armed);
        agent.on_change(move |_| {
            if armed.load(Ordering::SeqCst) {
                let _ = entered_tx.send(());
                let _ = go_rx.lock().map(|rx| rx.recv());
            }
        });
    }
    let shared: SharedAgent = Arc::new(Mutex::new(agent));

    let socket = dir.path().join("agent.sock");
    let listener = bind_unix_socket(&socket)?;
    listener.set_nonblocking(true)?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let app = router(Arc::clone(&shared));
    let server = std::thread::spawn(move || -> std::io::Result<()> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        runtime.block_on(async move {
            let listener = tokio::net::UnixListener::from_std(listener)?;
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stop_rx.await;
                })
                .await
        })
    });
    let client = Client::new(Endpoint::Unix(socket.clone()));

    let first = client.admit(&json!({"name": "first", "cpus": 2, "memory": "1Gi"}))?;
    let first = first.allocation.ok_or("the first pod is not admitted")?;

    armed.store(true, Ordering::SeqCst);
    let admitting = {
        let client = client.clone();
        std::thread::spawn(move || client.admit(&json!({"name": "second", "cpus": 2, "memory": "1Gi"})))
    };
    entered_rx.recv()?;
    assert!(
        shared.try_lock().is_err(),
        "the admission must be in progress, holding the agent"
    );

    let health = client.health()?;
    let listed = client.allocations()?;
    assert_eq!(health.allocations, listed.len(), "one committed state: {listed:?}");
    assert!(listed.iter().any(|a| a.id == first.id), "{listed:?}");
    let shown: topoalign_agent::wire::Allocation =
        client.call("GET", &format!("/v1/allocations/{}", first.id), None)?;
    assert_eq!(shown, first);
    let topology = client.topology()?;
    assert_eq!(topology.numa_nodes.len(), 2);
    let metrics = client.send("GET", "/metrics", None, &[])?;
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .text()
            .contains("topoalign_topology_manager_admission_requests_total"),
        "{}",
        metrics.text()
    );
    assert!(shared.try_lock().is_err(), "the admission is still in progress");

    armed.store(false, Ordering::SeqCst);
    go_tx.send(())?;
    let second = admitting.join().map_err(|_| "the admitting thread panicked")??;
    assert!(second.admitted, "{second:?}");
    let listed = client.allocations()?;
    assert_eq!(listed.len(), 2, "{listed:?}");
    assert_eq!(client.health()?.allocations, 2);

    let _ = stop_tx.send(());
    server.join().map_err(|_| "the server thread panicked")??;
    Ok(())
}

/// A rejection's explanation (topoalign-explain's fix search admits the
/// pod again on copies of the node, which can take long) is made after
/// the agent is released: the API server holds the agent only for
/// `admit_unexplained`. What is explained is the node as the rejected
/// request saw it, even when other admissions changed the agent since —
/// and the result is the one `admit` gives, which explains at once.
#[test]
fn a_rejection_is_explained_without_holding_the_agent() -> TestResult {
    let too_big = plain(r#"{"name": "too-big", "cpus": 5, "memory": "1Gi"}"#)?;
    let small = plain(r#"{"name": "small", "cpus": 1, "memory": "1Gi"}"#)?;

    let dir = tempfile::tempdir()?;
    let (mut agent, _lock) = open_agent(dir.path(), "single-numa-node")?;
    agent.admit(&small)?;
    let explained_at_once = agent.admit(&too_big)?;
    assert!(!explained_at_once.admitted, "{explained_at_once:?}");
    assert!(
        !explained_at_once.explanation.fixes.is_empty(),
        "a rejection on this node offers fixes: {explained_at_once:?}"
    );

    let other = tempfile::tempdir()?;
    let (mut agent, _lock) = open_agent(other.path(), "single-numa-node")?;
    agent.admit(&small)?;
    let unexplained = agent.admit_unexplained(&too_big)?;
    // The agent is free again (`unexplained` borrows nothing from it) and
    // changes before the explanation is made.
    let later = agent.admit(&plain(r#"{"name": "later", "cpus": 1, "memory": "1Gi"}"#)?)?;
    assert!(later.admitted, "{later:?}");
    let explained_later = unexplained.explain();

    // Made on the node as the request saw it ("Free now: ..." included).
    assert_eq!(
        serde_json::to_value(&explained_later.explanation)?,
        serde_json::to_value(&explained_at_once.explanation)?
    );
    assert_eq!(explained_later.reason, explained_at_once.reason);
    assert_eq!(explained_later.message, explained_at_once.message);
    Ok(())
}

fn plain(body: &str) -> Result<Workload, Box<dyn std::error::Error>> {
    Ok(read_body(body.as_bytes(), false, &AdmitOptions::default())?)
}
