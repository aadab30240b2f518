//! Serving the agent's API: the Unix socket (mode 0600) and the optional
//! TCP listener (token required), each under its own limits, the
//! reconcile loop, and graceful shutdown.
//!
//! The listeners themselves — socket files, binding, connection caps,
//! deadlines, the order of shutdown — are `topoalign-serve`'s
//! ([`Listeners`], [`Serving`]), re-exported here for the agent's users.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use topoalign_serve::{ListenerLimits, Listeners, Serving, bind_unix_socket, termination_signal};

use crate::api::{SharedAgent, router, router_with_token};
use crate::node_agent::NodeAgent;

/// Where and how to serve.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// The Unix socket path.
    pub socket: Option<PathBuf>,
    /// A TCP address and the bearer token every request must carry.
    pub tcp: Option<(SocketAddr, String)>,
    /// How often allocations whose holder exited are released.
    pub reconcile_every: Duration,
    /// What each listener allows its clients (`topoalign-serve`).
    pub limits: ListenerLimits,
}

/// Serves `agent` until `shutdown` resolves, then finishes the requests in
/// flight and removes the socket file.
///
/// # Errors
/// Binding errors, and errors of the listeners.
pub async fn serve(
    agent: NodeAgent,
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let agent: SharedAgent = std::sync::Arc::new(std::sync::Mutex::new(agent));
    let on_socket = config.socket.as_deref().map(|path| (path, router(agent.clone())));
    // Every request on TCP must carry the bearer token.
    let on_tcp =
        (config.tcp.as_ref()).map(|(address, token)| (*address, router_with_token(agent.clone(), token.clone())));
    let mut serving = Listeners::bind(on_socket, on_tcp)
        .await?
        .serve("the API", &config.limits);

    let reconciler = {
        let agent = agent.clone();
        let stopping = serving.stopping();
        let every = config.reconcile_every;
        tokio::spawn(async move {
            tokio::pin!(stopping);
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticks.tick() => {}
                    () = &mut stopping => break,
                }
                let agent = agent.clone();
                let _ = tokio::task::spawn_blocking(move || {
                    if let Ok(mut agent) = agent.lock() {
                        agent.reconcile();
                    }
                })
                .await;
            }
        })
    };

    let failure = tokio::select! {
        () = shutdown => None,
        // A listener ended on its own: stop the rest.
        error = serving.failed() => Some(error),
    };
    serving.stop().await;
    let _ = reconciler.await;
    match failure {
        Some(error) => Err(error),
        None => {
            tracing::info!("stopped");
            Ok(())
        }
    }
}
