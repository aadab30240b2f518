//! An API's listeners: the Unix socket (mode 0600) and TCP, bound
//! together, served each under its own [`Limits`], stopped in order.
//!
//! Owns: socket files — refusing to take over a socket another process
//! answers on, removing stale ones, and creating the new one under a
//! temporary name, `chmod 0600`, then renaming it into place so that it is
//! never reachable with looser permissions —, binding every listener
//! before any serves ([`Listeners`]), and the order of shutdown
//! ([`Serving`]: stop accepting, finish requests in flight, remove the
//! socket).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::watch;

use crate::connections::{Stats, serve_listener, stats_for};
use crate::limits::ListenerLimits;

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
    // std listens with a backlog of 128; listening again sets the larger
    // one (Linux updates the backlog of a listening socket).
    socket2::SockRef::from(&listener)
        .listen(i32::try_from(listen_backlog()).unwrap_or(i32::MAX))
        .map_err(|e| with_path(e, "cannot listen on"))?;
    Ok(listener)
}

/// The backlog every listener is given: the kernel's maximum
/// (`net.core.somaxconn`, 4096 by default since Linux 5.4), as Go's
/// runtime does, instead of the 128 of std and tokio. Connections beyond
/// a listener's cap wait in this queue; past it, the kernel drops their
/// handshakes and the clients retry after a second or more.
pub fn listen_backlog() -> u32 {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|text| text.trim().parse::<u32>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(4096)
        .min(65535)
}

/// A TCP listener on the first of `address`' addresses that can be
/// listened on, with `SO_REUSEADDR` (as tokio's `bind`) and the backlog of
/// [`listen_backlog`].
///
/// # Errors
/// The last address' error (or the resolver's), with the address in the
/// message.
pub async fn bind_tcp(address: &str) -> io::Result<tokio::net::TcpListener> {
    let with_address = |e: io::Error| io::Error::new(e.kind(), format!("cannot listen on {address}: {e}"));
    let mut last = None;
    for candidate in tokio::net::lookup_host(address).await.map_err(with_address)? {
        match bind_tcp_address(candidate) {
            Ok(listener) => return Ok(listener),
            Err(error) => last = Some(error),
        }
    }
    Err(with_address(last.unwrap_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, "the address resolves to nothing")
    })))
}

/// [`bind_tcp`] on one address.
fn bind_tcp_address(address: SocketAddr) -> io::Result<tokio::net::TcpListener> {
    let socket = if address.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(listen_backlog())
}

/// An API's listeners, each with the router it serves, every one bound
/// before any of them serves: a client that finds one answering finds them
/// all, and a listener that cannot be bound leaves no socket file behind.
/// The agent's API and the follower's read-only API are both served
/// through it.
#[derive(Debug)]
pub struct Listeners {
    socket: Option<(SocketFile, tokio::net::UnixListener, axum::Router)>,
    tcp: Option<(tokio::net::TcpListener, axum::Router)>,
}

/// A socket file this process created: removed when dropped. A path
/// [`bind_unix_socket`] refused (another agent's socket, or not a socket)
/// never becomes one, so it is never removed.
#[derive(Debug)]
struct SocketFile(PathBuf);

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
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
                let listener = bind_unix_socket(path)?;
                let file = SocketFile(path.to_path_buf());
                listener.set_nonblocking(true)?;
                Some((file, tokio::net::UnixListener::from_std(listener)?, app))
            }
        };
        let tcp = match tcp {
            None => None,
            Some((address, app)) => {
                let listener = bind_tcp_address(address)
                    .map_err(|e| io::Error::new(e.kind(), format!("cannot listen on {address}: {e}")))?;
                Some((listener, app))
            }
        };
        Ok(Listeners { socket, tcp })
    }

    /// The TCP listener's address, when there is one (port 0 resolved).
    pub fn tcp_address(&self) -> Option<SocketAddr> {
        self.tcp.as_ref().and_then(|(listener, _)| listener.local_addr().ok())
    }

    /// Starts serving each listener's router under its limits; logs each
    /// as serving `what`.
    pub fn serve(self, what: &str, limits: &ListenerLimits) -> Serving {
        let (asked_to_stop, _) = watch::channel(false);
        let mut serving = Serving {
            servers: tokio::task::JoinSet::new(),
            asked_to_stop,
            socket: None,
            socket_stats: None,
            tcp_stats: None,
        };
        if let Some((file, listener, app)) = self.socket {
            tracing::info!(socket = %file.0.display(), limits = ?limits.socket, "serving {what} on the Unix socket (mode 0600)");
            let stats = stats_for(limits.socket);
            let stopping = serving.asked_to_stop.subscribe();
            (serving.servers).spawn(serve_listener(listener, app, stats.clone(), stopping));
            serving.socket = Some(file);
            serving.socket_stats = Some(stats);
        }
        if let Some((listener, app)) = self.tcp {
            let address = listener.local_addr().map_or_else(|e| e.to_string(), |a| a.to_string());
            tracing::info!(%address, limits = ?limits.tcp, "serving {what} on TCP");
            let stats = stats_for(limits.tcp);
            let stopping = serving.asked_to_stop.subscribe();
            (serving.servers).spawn(serve_listener(listener, app, stats.clone(), stopping));
            serving.tcp_stats = Some(stats);
        }
        serving
    }
}

/// An API being served: the one place that knows how it stops — stop
/// accepting, finish the requests in flight, remove the socket file (also
/// when dropped without [`Serving::stop`]).
#[derive(Debug)]
pub struct Serving {
    servers: tokio::task::JoinSet<io::Result<()>>,
    asked_to_stop: watch::Sender<bool>,
    socket: Option<SocketFile>,
    socket_stats: Option<Arc<Stats>>,
    tcp_stats: Option<Arc<Stats>>,
}

impl Serving {
    /// The Unix socket's counters, when it is served.
    pub fn socket_stats(&self) -> Option<Arc<Stats>> {
        self.socket_stats.clone()
    }

    /// The TCP listener's counters, when it is served.
    pub fn tcp_stats(&self) -> Option<Arc<Stats>> {
        self.tcp_stats.clone()
    }

    /// Resolves once the API is asked to stop: for the tasks that end with
    /// it (the agent's reconcile loop, the follower).
    pub fn stopping(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut asked = self.asked_to_stop.subscribe();
        async move {
            let _ = asked.wait_for(|stop| *stop).await;
        }
    }

    /// Resolves only when a listener ends on its own, which is an error;
    /// never when there are no listeners.
    pub async fn failed(&mut self) -> io::Error {
        match self.servers.join_next().await {
            None => std::future::pending().await,
            Some(Ok(Ok(()))) => io::Error::other("a listener stopped unexpectedly"),
            Some(Ok(Err(error))) => error,
            Some(Err(error)) => io::Error::other(error),
        }
    }

    /// Stops accepting, lets the requests in flight finish, removes the
    /// socket file.
    pub async fn stop(mut self) {
        self.asked_to_stop.send_replace(true);
        while let Some(result) = self.servers.join_next().await {
            if let Ok(Err(error)) = result {
                tracing::warn!(%error, "listener error during shutdown");
            }
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

    /// Whether `future` is ready at its first poll.
    async fn ready_now(future: impl Future<Output = ()>) -> bool {
        tokio::select! {
            biased;
            () = future => true,
            () = std::future::ready(()) => false,
        }
    }

    /// An empty API served on the Unix socket `path` alone.
    async fn serving_on(path: &Path) -> io::Result<Serving> {
        Ok(Listeners::bind(Some((path, axum::Router::new())), None)
            .await?
            .serve("a test API", &ListenerLimits::default()))
    }

    #[tokio::test]
    async fn stopping_ends_the_tasks_that_wait_for_it_and_removes_the_socket() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("agent.sock");
        let serving = serving_on(&path).await?;
        assert!(!ready_now(serving.stopping()).await, "stopping before being asked to");
        let stopping = serving.stopping();
        serving.stop().await;
        assert!(ready_now(stopping).await, "still waiting after stop");
        assert!(!path.exists(), "the socket file was left behind");
        Ok(())
    }

    /// An error return after the listeners started (the follower's
    /// publisher failing to start, say) drops `Serving` without `stop`.
    #[tokio::test]
    async fn dropping_the_served_api_removes_the_socket() -> io::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("agent.sock");
        let serving = serving_on(&path).await?;
        std::os::unix::net::UnixStream::connect(&path)?;
        drop(serving);
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
