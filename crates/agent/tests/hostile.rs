//! Issue 32: an admission whose client gave up — it closed the connection,
//! or its deadline passed — while the request waited for the agent is
//! never made. Real Unix socket, the agent's own API to check; waits are
//! on events (the request's work handed over, the request dropped, the
//! work finished), each bounded, never on time.

mod common;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use topoalign_agent::api::{SharedAgent, router};
use topoalign_agent::{ListenerLimits, Listeners, Serving, StateLock};
use topoalign_serve::Limits;

use common::{TestResult, open_agent};

const BOUND: Duration = Duration::from_secs(30);

async fn until(what: &str, mut ready: impl FnMut() -> bool) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + BOUND;
    while !ready() {
        if tokio::time::Instant::now() > deadline {
            return Err(format!("gave up waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

async fn bounded<T>(what: &str, future: impl Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(BOUND, future)
        .await
        .map_err(|_| format!("gave up waiting for {what}"))
}

fn admission(name: &str) -> String {
    let body = json!({"name": name, "cpus": 2, "memory": "1Gi"}).to_string();
    format!(
        "POST /v1/allocations HTTP/1.1\r\nHost: agent\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn ask(socket: &std::path::Path, request: &str) -> std::io::Result<String> {
    let mut stream = UnixStream::connect(socket).await?;
    stream.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    Ok(answer)
}

/// The allocations' names, from the agent's API.
async fn allocated(socket: &std::path::Path) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let answer = ask(
        socket,
        "GET /v1/allocations HTTP/1.1\r\nHost: agent\r\nConnection: close\r\n\r\n",
    )
    .await?;
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b).ok_or("no body")?;
    let list: Vec<serde_json::Value> = serde_json::from_str(body)?;
    Ok(list
        .iter()
        .filter_map(|a| a["name"].as_str().map(str::to_owned))
        .collect())
}

struct Served {
    _dir: tempfile::TempDir,
    _lock: StateLock,
    agent: SharedAgent,
    serving: Serving,
    socket: std::path::PathBuf,
}

async fn served(limits: Limits) -> Result<Served, Box<dyn std::error::Error>> {
    let dir = tempfile::tempdir()?;
    let (agent, lock) = open_agent(dir.path(), "none")?;
    let agent: SharedAgent = Arc::new(Mutex::new(agent));
    let socket = dir.path().join("agent.sock");
    let serving = Listeners::bind(Some((&socket, router(agent.clone()))), None)
        .await?
        .serve(
            "a test agent",
            &ListenerLimits {
                socket: limits,
                tcp: limits,
            },
        );
    Ok(Served {
        _dir: dir,
        _lock: lock,
        agent,
        serving,
        socket,
    })
}

/// The client closes its connection while its admission waits for the
/// agent (held here by the test): the admission is not made — and one
/// whose client stays is.
// The test holds the agent's lock across awaits on purpose: it is what
// keeps the admission waiting; nothing the test awaits takes it.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_whose_client_went_away_is_not_made() -> TestResult {
    let served = served(Limits::socket_default()).await?;
    let idle = Arc::strong_count(&served.agent);
    let held = served.agent.lock().map_err(|_| "poisoned")?;
    let mut gone = UnixStream::connect(&served.socket).await?;
    gone.write_all(admission("gone").as_bytes()).await?;
    // The handler holds the agent (a clone of it): the request is read.
    // (Its body came with its headers, so its work goes to the agent's
    // thread, which waits for the agent; dropped while the body was still
    // being read, it would not be made either.)
    until("the admission to reach its handler", || {
        Arc::strong_count(&served.agent) > idle
    })
    .await?;
    drop(gone);
    let stats = served.serving.socket_stats().ok_or("no socket stats")?;
    until("the request to be dropped", || stats.snapshot().cancelled == 1).await?;
    drop(held);
    until("the abandoned work to end", || Arc::strong_count(&served.agent) == idle).await?;
    assert_eq!(allocated(&served.socket).await?, Vec::<String>::new());

    // The control: a client that waits gets its allocation.
    let answer = bounded("an admission", ask(&served.socket, &admission("kept"))).await??;
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    assert_eq!(allocated(&served.socket).await?, ["topoalign/kept"]);
    served.serving.stop().await;
    Ok(())
}

/// The deadline passes while the admission waits for the agent: the
/// client gets 503 and the admission is not made.
// The test holds the agent's lock across awaits on purpose: it is what
// keeps the admission waiting; nothing the test awaits takes it.
#[allow(clippy::await_holding_lock)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admission_past_its_deadline_is_not_made() -> TestResult {
    let limits = Limits {
        request_timeout: Duration::from_millis(200),
        ..Limits::socket_default()
    };
    let served = served(limits).await?;
    let idle = Arc::strong_count(&served.agent);
    let held = served.agent.lock().map_err(|_| "poisoned")?;
    let answer = bounded("the 503", ask(&served.socket, &admission("late"))).await??;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    drop(held);
    until("the abandoned work to end", || Arc::strong_count(&served.agent) == idle).await?;
    assert_eq!(allocated(&served.socket).await?, Vec::<String>::new());
    served.serving.stop().await;
    Ok(())
}
