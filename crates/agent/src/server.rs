//! Serving the API: the Unix socket (mode 0600), the optional TCP listener
//! (token required), the reconcile loop, and graceful shutdown.
//!
//! Owns: socket files — refusing to take over a socket another agent
//! answers on, removing stale ones, and creating the new one under a
//! temporary name, `chmod 0600`, then renaming it into place so that it is
//! never reachable with looser permissions — and the order of shutdown
//! (stop accepting, finish requests in flight, remove the socket).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::watch;

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
}

/// Binds the Unix socket at `path` with mode 0600 (see the module docs).
///
/// # Errors
/// `AddrInUse` when another process answers on `path`, or when `path` is
/// not a socket; other I/O errors with the path in the message.
pub fn bind_unix_socket(path: &Path) -> io::Result<std::os::unix::net::UnixListener> {
    let with_path = |e: io::Error, what: &str| io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()));
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&parent)
            .map_err(|e| with_path(e, "cannot create the directory of"))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("another agent is serving on {}; stop it first", path.display()),
                ));
            }
            std::fs::remove_file(path).map_err(|e| with_path(e, "cannot remove the stale socket"))?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!("{} exists and is not a socket; choose another --socket", path.display()),
            ));
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(with_path(e, "cannot inspect")),
    }
    // Bind inside a private (0700) directory next to the final path, make
    // the socket 0600, then move it into place: whatever the umask, nobody
    // else can reach it at any moment.
    let file_name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let private = parent.join(format!(".{file_name}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&private);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(|e| with_path(e, "cannot create a private directory next to"))?;
    let temporary = private.join("socket");
    let bound = std::os::unix::net::UnixListener::bind(&temporary)
        .map_err(|e| with_path(e, "cannot bind"))
        .and_then(|listener| {
            std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
                .and_then(|()| std::fs::rename(&temporary, path))
                .map_err(|e| with_path(e, "cannot install the socket"))?;
            Ok(listener)
        });
    let _ = std::fs::remove_dir_all(&private);
    let listener = bound?;
    Ok(listener)
}

/// Resolves when the process gets SIGTERM or SIGINT.
///
/// # Errors
/// When the signal handlers cannot be installed.
pub fn termination_signal() -> io::Result<impl Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => tracing::info!("SIGTERM: shutting down"),
            _ = interrupt.recv() => tracing::info!("SIGINT: shutting down"),
        }
    })
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
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };

    let mut servers = tokio::task::JoinSet::new();
    if let Some(path) = &config.socket {
        let listener = bind_unix_socket(path)?;
        listener.set_nonblocking(true)?;
        let listener = tokio::net::UnixListener::from_std(listener)?;
        tracing::info!(socket = %path.display(), "serving on the Unix socket (mode 0600)");
        let app = router(agent.clone());
        let stop = stopped(stop_rx.clone());
        servers.spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stop).await });
    }
    if let Some((address, token)) = &config.tcp {
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {address}: {e}")))?;
        tracing::info!(address = %listener.local_addr()?, "serving on TCP (bearer token required)");
        let app = router_with_token(agent.clone(), token.clone());
        let stop = stopped(stop_rx.clone());
        servers.spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stop).await });
    }

    let reconciler = {
        let agent = agent.clone();
        let mut stop = stop_rx.clone();
        let every = config.reconcile_every;
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = ticks.tick() => {}
                    _ = stop.wait_for(|s| *s) => break,
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

    tokio::select! {
        () = shutdown => {}
        Some(result) = servers.join_next() => {
            // A listener ended on its own: an error; stop the rest.
            let _ = stop_tx.send(true);
            remove_socket(config.socket.as_deref());
            return match result {
                Ok(Ok(())) => Err(io::Error::other("a listener stopped unexpectedly")),
                Ok(Err(e)) => Err(e),
                Err(e) => Err(io::Error::other(e)),
            };
        }
    }
    let _ = stop_tx.send(true);
    while let Some(result) = servers.join_next().await {
        if let Ok(Err(error)) = result {
            tracing::warn!(%error, "listener error during shutdown");
        }
    }
    let _ = reconciler.await;
    remove_socket(config.socket.as_deref());
    tracing::info!("stopped");
    Ok(())
}

fn remove_socket(path: Option<&Path>) {
    if let Some(path) = path {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_private_and_never_taken_from_a_live_agent() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("run/agent.sock");
        let listener = bind_unix_socket(&path)?;
        let meta = std::fs::metadata(&path)?;
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::metadata(path.parent().unwrap_or(dir.path()))?
                .permissions()
                .mode()
                & 0o777,
            0o700
        );
        let entries: Vec<_> = std::fs::read_dir(path.parent().unwrap_or(dir.path()))?
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        assert_eq!(entries, ["agent.sock"], "nothing else is left next to it");
        // Someone answers on it: refuse.
        let error = bind_unix_socket(&path).err();
        assert_eq!(error.map(|e| e.kind()), Some(io::ErrorKind::AddrInUse));
        // Stale (nobody listens): replaced.
        drop(listener);
        let _again = bind_unix_socket(&path)?;
        // Not a socket: refuse rather than delete someone's file.
        let file = dir.path().join("file");
        std::fs::write(&file, "keep me")?;
        assert!(bind_unix_socket(&file).is_err());
        assert_eq!(std::fs::read_to_string(&file)?, "keep me");
        Ok(())
    }
}
