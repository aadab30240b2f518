//! Serving the API: the Unix socket (mode 0600), the optional TCP listener
//! (token required), the reconcile loop, and graceful shutdown.
//!
//! Owns: socket files — refusing to take over a socket another agent
//! answers on, removing stale ones, and creating the new one under a
//! temporary name, `chmod 0600`, then renaming it into place so that it is
//! never reachable with looser permissions —, binding every listener
//! before any serves ([`Listeners`], the follower's too), and the order of
//! shutdown (stop accepting, finish requests in flight, remove the socket).

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

/// An API's listeners, each with the router it serves, every one bound
/// before any of them serves: a client that finds one answering finds them
/// all, and a listener that cannot be bound leaves no socket file behind.
/// The agent's API and the follower's read-only API are both served
/// through it.
#[derive(Debug)]
pub struct Listeners {
    socket: Option<(PathBuf, tokio::net::UnixListener, axum::Router)>,
    tcp: Option<(tokio::net::TcpListener, axum::Router)>,
}

impl Listeners {
    /// Binds the Unix socket ([`bind_unix_socket`]) and the TCP listener
    /// that are asked for.
    ///
    /// # Errors
    /// Those of [`bind_unix_socket`]; a TCP address that cannot be listened
    /// on, named in the message.
    pub async fn bind(
        socket: Option<(&Path, axum::Router)>,
        tcp: Option<(SocketAddr, axum::Router)>,
    ) -> io::Result<Listeners> {
        let socket = match socket {
            None => None,
            Some((path, app)) => {
                // A refusal leaves the path alone (it may be another
                // agent's socket); past it, the socket is ours to remove.
                let listener = bind_unix_socket(path)?;
                let listener = listener
                    .set_nonblocking(true)
                    .and_then(|()| tokio::net::UnixListener::from_std(listener))
                    .inspect_err(|_| remove_socket(Some(path)))?;
                Some((path.to_path_buf(), listener, app))
            }
        };
        let tcp = match tcp {
            None => None,
            Some((address, app)) => match tokio::net::TcpListener::bind(address).await {
                Ok(listener) => Some((listener, app)),
                Err(e) => {
                    remove_socket(socket.as_ref().map(|(path, ..)| path.as_path()));
                    return Err(io::Error::new(e.kind(), format!("cannot listen on {address}: {e}")));
                }
            },
        };
        Ok(Listeners { socket, tcp })
    }

    /// Serves each listener's router as a task of `servers` until `stop`
    /// turns true; logs each as serving `what`.
    pub fn serve(self, servers: &mut tokio::task::JoinSet<io::Result<()>>, what: &str, stop: &watch::Receiver<bool>) {
        let stopped = |mut rx: watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|stop| *stop).await;
        };
        if let Some((path, listener, app)) = self.socket {
            tracing::info!(socket = %path.display(), "serving {what} on the Unix socket (mode 0600)");
            let stop = stopped(stop.clone());
            servers.spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stop).await });
        }
        if let Some((listener, app)) = self.tcp {
            match listener.local_addr() {
                Ok(address) => tracing::info!(%address, "serving {what} on TCP"),
                Err(error) => tracing::info!(%error, "serving {what} on TCP"),
            }
            let stop = stopped(stop.clone());
            servers.spawn(async move { axum::serve(listener, app).with_graceful_shutdown(stop).await });
        }
    }
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
    let on_socket = config.socket.as_deref().map(|path| (path, router(agent.clone())));
    // Every request on TCP must carry the bearer token.
    let on_tcp =
        (config.tcp.as_ref()).map(|(address, token)| (*address, router_with_token(agent.clone(), token.clone())));
    let listeners = Listeners::bind(on_socket, on_tcp).await?;
    let mut servers = tokio::task::JoinSet::new();
    listeners.serve(&mut servers, "the API", &stop_rx);

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

    /// Once `Listeners::bind` returns, every listener takes connections
    /// (the kernel queues them before anything serves): a client that saw
    /// one answer never finds another one refusing.
    #[tokio::test]
    async fn every_listener_is_bound_before_any_serves() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("agent.sock");
        let app = axum::Router::new;
        let listeners = Listeners::bind(Some((&path, app())), Some((([127, 0, 0, 1], 0).into(), app()))).await?;
        let address = listeners
            .tcp
            .as_ref()
            .map(|(listener, _)| listener.local_addr())
            .transpose()?;
        let address = address.ok_or_else(|| io::Error::other("no TCP listener"))?;
        std::os::unix::net::UnixStream::connect(&path)?;
        std::net::TcpStream::connect(address)?;
        Ok(())
    }

    #[tokio::test]
    async fn a_tcp_address_in_use_leaves_no_socket_behind() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("agent.sock");
        let taken = std::net::TcpListener::bind("127.0.0.1:0")?;
        let address = taken.local_addr()?;
        let app = axum::Router::new;
        let error = Listeners::bind(Some((&path, app())), Some((address, app())))
            .await
            .err()
            .ok_or_else(|| io::Error::other("bound an address in use"))?;
        assert_eq!(error.kind(), io::ErrorKind::AddrInUse);
        assert!(
            error.to_string().contains(&format!("cannot listen on {address}")),
            "{error}"
        );
        assert!(!path.exists(), "the socket file was left behind");
        Ok(())
    }

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
