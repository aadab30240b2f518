//! Serving topoalign's HTTP APIs — the agent's, the follower's, the
//! extender's — so that hostile clients cannot hold them down.
//!
//! - [`limits`]: what each listener allows ([`Limits`]: header, body and
//!   request deadlines, connection and in-flight caps), the flags that set
//!   them, raising the open-file limit to the hard one and fitting the
//!   caps to it;
//! - [`listeners`]: the Unix socket (mode 0600) and TCP bound together and
//!   served each under its own limits, so a flood on TCP leaves the Unix
//!   socket serving; every listener with the kernel's largest backlog
//!   (`somaxconn`), so that clients beyond a cap wait in the accept queue
//!   rather than in SYN retries; ordered shutdown;
//! - [`connections`]: one listener's accept loop and request stack —
//!   hyper's HTTP/1 with its header read timeout, tower's concurrency
//!   limit, tower-http's timeout and request body deadline —, where a
//!   request whose client went away or whose deadline passed is dropped,
//!   its work with it.
//!
//! Must not touch: what the APIs answer (their routers are given).

pub mod connections;
pub mod limits;
pub mod listeners;

pub use connections::{Stats, StatsSnapshot};
pub use limits::{LimitArgs, Limits, ListenerLimits, SocketLimitArgs, fit_to_descriptors, raise_open_file_limit};
pub use listeners::{Listeners, Serving, bind_tcp, bind_unix_socket, listen_backlog, termination_signal};

use std::future::Future;
use std::sync::Arc;

/// Serves `app` on one `listener` under `stats`' limits until `shutdown`
/// resolves; then stops accepting and lets the requests in flight finish.
///
/// # Errors
/// The listener's I/O error.
pub async fn serve<L: axum::serve::Listener>(
    listener: L,
    app: axum::Router,
    stats: Arc<Stats>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop, stopping) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        stop.send_replace(true);
    });
    connections::serve_listener(listener, app, stats, stopping).await
}
