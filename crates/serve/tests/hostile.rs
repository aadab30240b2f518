//! Hostile clients against real sockets: slow headers, floods of
//! connections, clients that give up, requests past their deadline.
//! Waits are on events (a counter reaching a value, a socket closing),
//! each bounded; nothing asserts how long anything took.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpStream, UnixStream};
use tokio::sync::Semaphore;
use topoalign_serve::{Limits, ListenerLimits, Listeners, Serving, StatsSnapshot};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// The longest any wait for an event may take before the test fails.
const BOUND: Duration = Duration::from_secs(30);

/// Waits until `ready` holds, polling; fails after [`BOUND`].
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

/// Sends one request, reads the whole answer (the connection is closed
/// after it).
async fn ask(mut stream: impl AsyncRead + AsyncWrite + Unpin, path: &str) -> std::io::Result<String> {
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    Ok(answer)
}

fn tight(max_connections: usize, max_in_flight: usize) -> Limits {
    Limits {
        max_connections,
        max_in_flight,
        ..Limits::default()
    }
}

async fn serve(dir: &Path, app: Router, limits: ListenerLimits) -> std::io::Result<(Serving, std::net::SocketAddr)> {
    let socket = dir.join("api.sock");
    let listeners = Listeners::bind(Some((&socket, app.clone())), Some((([127, 0, 0, 1], 0).into(), app))).await?;
    let address = listeners
        .tcp_address()
        .ok_or_else(|| std::io::Error::other("no TCP address"))?;
    Ok((listeners.serve("a test API", &limits), address))
}

fn hello() -> Router {
    Router::new().route("/hello", get(|| async { "hello" }))
}

/// `n` connections that each sent the first bytes of a request's headers
/// and nothing more.
async fn slow_clients(address: std::net::SocketAddr, n: usize) -> std::io::Result<Vec<TcpStream>> {
    let mut slow = Vec::with_capacity(n);
    for _ in 0..n {
        let mut stream = TcpStream::connect(address).await?;
        stream.write_all(b"GET /hello HTTP/1.1\r\nHo").await?;
        slow.push(stream);
    }
    Ok(slow)
}

fn stats(serving: &Serving, tcp: bool) -> StatsSnapshot {
    let stats = if tcp {
        serving.tcp_stats()
    } else {
        serving.socket_stats()
    };
    stats.map(|s| s.snapshot()).unwrap_or_default()
}

/// Raises this test process's open-file limit (it holds both ends of
/// every connection); fails when the hard limit cannot hold `needed`.
fn room_for(needed: u64) -> Result<(), String> {
    let soft = topoalign_serve::raise_open_file_limit();
    if soft < needed {
        return Err(format!(
            "this test needs {needed} open files and the hard limit allows {soft} (ulimit -Hn)"
        ));
    }
    Ok(())
}

/// 2,000 connections trickling their headers: 1,000 fill the TCP
/// listener's cap, the other 1,000 wait in the kernel's accept queue (the
/// listener's backlog is `somaxconn`, not std's 128: their handshakes
/// complete); the Unix socket, with its own cap, answers all the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_unix_socket_serves_while_tcp_is_flooded_with_slow_headers() -> TestResult {
    room_for(4_500)?;
    assert!(
        topoalign_serve::listen_backlog() >= 1_000,
        "net.core.somaxconn is below 1000: the kernel cannot queue the flood"
    );
    let dir = tempfile::tempdir()?;
    let limits = ListenerLimits {
        socket: tight(8, 4),
        tcp: tight(1_000, 4),
    };
    let (serving, address) = serve(dir.path(), hello(), limits).await?;
    let slow = bounded("2,000 connections", slow_clients(address, 2_000)).await??;
    until("the TCP cap to fill", || {
        stats(&serving, true).connections_open == 1_000
    })
    .await?;
    let answer = bounded(
        "the Unix socket's answer",
        ask(UnixStream::connect(dir.path().join("api.sock")).await?, "/hello"),
    )
    .await??;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("hello"), "{answer}");
    // The flood still holds every TCP slot: nothing was dropped to serve it.
    assert_eq!(stats(&serving, true).connections_open, 1_000);
    drop(slow);
    serving.stop().await;
    Ok(())
}

/// Below the cap (the default, 4,096), an honest TCP client is answered
/// beside 2,000 slow ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_honest_tcp_client_is_answered_beside_slow_ones() -> TestResult {
    room_for(4_500)?;
    let dir = tempfile::tempdir()?;
    let limits = ListenerLimits {
        socket: tight(8, 4),
        tcp: tight(Limits::default().max_connections, 4),
    };
    let (serving, address) = serve(dir.path(), hello(), limits).await?;
    let slow = bounded("2,000 connections", slow_clients(address, 2_000)).await??;
    until("the slow clients to be accepted", || {
        stats(&serving, true).connections_open == 2_000
    })
    .await?;
    let answer = bounded("the TCP answer", ask(TcpStream::connect(address).await?, "/hello")).await??;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    drop(slow);
    serving.stop().await;
    Ok(())
}

/// A connection that never finishes its headers is closed by the header
/// read timeout (and an idle kept-alive one too), freeing its slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_read_timeout_closes_a_slow_connection() -> TestResult {
    let dir = tempfile::tempdir()?;
    let limits = Limits {
        header_read_timeout: Duration::from_millis(200),
        ..tight(4, 4)
    };
    let (serving, address) = serve(
        dir.path(),
        hello(),
        ListenerLimits {
            socket: limits,
            tcp: limits,
        },
    )
    .await?;
    let mut slow = TcpStream::connect(address).await?;
    slow.write_all(b"GET /hello HTTP/1.1\r\nHo").await?;
    let mut idle = TcpStream::connect(address).await?;
    // Closed: the read ends (EOF, or a 408 then EOF), it never hangs.
    let mut rest = Vec::new();
    bounded("the slow connection to be closed", slow.read_to_end(&mut rest)).await??;
    bounded("the idle connection to be closed", idle.read_to_end(&mut rest)).await??;
    until("the slots to be freed", || stats(&serving, true).connections_open == 0).await?;
    serving.stop().await;
    Ok(())
}

/// A handler that holds its in-flight slot until `release` gets a permit,
/// and counts its runs.
fn gated(release: Arc<Semaphore>, runs: Arc<AtomicUsize>) -> Router {
    Router::new().route(
        "/work",
        get(move || {
            let release = release.clone();
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                let _ = release.acquire().await.map(|p| p.forget());
                "done"
            }
        }),
    )
}

/// A request waiting for an in-flight slot whose client disconnects is
/// dropped: its handler never runs, even once the slot frees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_client_gave_up_is_never_run() -> TestResult {
    let dir = tempfile::tempdir()?;
    let release = Arc::new(Semaphore::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let limits = ListenerLimits {
        socket: tight(8, 1),
        tcp: tight(8, 1),
    };
    let (serving, _) = serve(dir.path(), gated(release.clone(), runs.clone()), limits).await?;
    let socket = dir.path().join("api.sock");
    // A takes the one slot and holds it.
    let first = tokio::spawn(ask(UnixStream::connect(&socket).await?, "/work"));
    until("the first request to run", || runs.load(Ordering::SeqCst) == 1).await?;
    // B waits for the slot, then gives up.
    let mut second = UnixStream::connect(&socket).await?;
    second.write_all(b"GET /work HTTP/1.1\r\nHost: t\r\n\r\n").await?;
    until("the second request to queue", || stats(&serving, false).queued == 1).await?;
    drop(second);
    until("the second request to be dropped", || {
        stats(&serving, false).cancelled == 1
    })
    .await?;
    // The slot frees: A finishes; B's handler never ran.
    release.add_permits(1);
    let answer = bounded("the first answer", first).await???;
    assert!(answer.ends_with("done"), "{answer}");
    // C, still connected when the slot frees, is run: the gate works.
    release.add_permits(1);
    let third = bounded("the third answer", ask(UnixStream::connect(&socket).await?, "/work")).await??;
    assert!(third.ends_with("done"), "{third}");
    assert_eq!(runs.load(Ordering::SeqCst), 2, "the abandoned request ran");
    serving.stop().await;
    Ok(())
}

/// A request past its deadline gets 503 with a reason, and its work is
/// dropped.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_past_its_deadline_gets_503() -> TestResult {
    let dir = tempfile::tempdir()?;
    let release = Arc::new(Semaphore::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let limits = Limits {
        request_timeout: Duration::from_millis(100),
        ..tight(8, 1)
    };
    let (serving, address) = serve(
        dir.path(),
        gated(release, runs),
        ListenerLimits {
            socket: limits,
            tcp: limits,
        },
    )
    .await?;
    let answer = bounded("the answer", ask(TcpStream::connect(address).await?, "/work")).await??;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("deadline"), "{answer}");
    let after = stats(&serving, true);
    assert_eq!((after.cancelled, after.timed_out, after.in_flight), (1, 1, 0));
    serving.stop().await;
    Ok(())
}
