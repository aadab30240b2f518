//! What a listener allows a client: [`Limits`], their command-line flags
//! ([`LimitArgs`], [`SocketLimitArgs`]) and defaults, and fitting the
//! connection caps to the process's open-file limit
//! ([`fit_to_descriptors`]).

use std::time::Duration;

use clap::builder::TypedValueParser as _;

/// What one listener allows. Every listener has its own: a flood on one
/// (TCP) cannot use up another's (the Unix socket).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A client must send a request's headers within this time after the
    /// server starts reading them — also the longest a kept-alive
    /// connection may sit idle — or its connection is closed (hyper's
    /// `header_read_timeout`).
    pub header_read_timeout: Duration,
    /// A request's whole body must arrive within this time after its
    /// headers, or reading it fails (tower-http's request body deadline).
    pub body_read_timeout: Duration,
    /// A request is answered within this time after its headers, waiting
    /// for an in-flight slot included, or it gets 503 and its work is
    /// dropped (tower-http's timeout).
    pub request_timeout: Duration,
    /// Connections open at once; further clients wait in the kernel's
    /// accept queue until one closes.
    pub max_connections: usize,
    /// Requests being worked on at once; further requests wait (within
    /// their deadline) for a slot (tower's concurrency limit).
    pub max_in_flight: usize,
}

/// `--header-timeout`'s default, seconds.
pub const DEFAULT_HEADER_TIMEOUT: u64 = 10;
/// `--body-timeout`'s default, seconds.
pub const DEFAULT_BODY_TIMEOUT: u64 = 30;
/// `--request-timeout`'s default, seconds: above the scheduler's extender
/// `httpTimeout` default (30 s) and the follower's 30-second status wait.
pub const DEFAULT_REQUEST_TIMEOUT: u64 = 60;
/// `--max-connections`' default (per TCP listener).
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;
/// `--max-in-flight`'s default (per TCP listener).
pub const DEFAULT_MAX_IN_FLIGHT: usize = 64;
/// `--socket-max-connections`' default (the Unix socket).
pub const DEFAULT_SOCKET_MAX_CONNECTIONS: usize = 256;
/// `--socket-max-in-flight`'s default (the Unix socket).
pub const DEFAULT_SOCKET_MAX_IN_FLIGHT: usize = 32;

impl Default for Limits {
    /// A TCP listener's defaults.
    fn default() -> Limits {
        Limits {
            header_read_timeout: Duration::from_secs(DEFAULT_HEADER_TIMEOUT),
            body_read_timeout: Duration::from_secs(DEFAULT_BODY_TIMEOUT),
            request_timeout: Duration::from_secs(DEFAULT_REQUEST_TIMEOUT),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }
}

impl Limits {
    /// The Unix socket's defaults: the same deadlines, smaller caps (its
    /// clients are local and few; its caps are its own, so it keeps
    /// serving while TCP is flooded).
    pub fn socket_default() -> Limits {
        Limits {
            max_connections: DEFAULT_SOCKET_MAX_CONNECTIONS,
            max_in_flight: DEFAULT_SOCKET_MAX_IN_FLIGHT,
            ..Limits::default()
        }
    }
}

/// The limits of an API's listeners: the Unix socket's and TCP's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenerLimits {
    pub socket: Limits,
    pub tcp: Limits,
}

impl Default for ListenerLimits {
    fn default() -> ListenerLimits {
        ListenerLimits {
            socket: Limits::socket_default(),
            tcp: Limits::default(),
        }
    }
}

/// The flags of every daemon's TCP listener (and the deadlines of its Unix
/// socket): flattened into `topoalign agent` and `topoalign extender`.
#[derive(Clone, Debug, clap::Args)]
pub struct LimitArgs {
    /// Seconds a client has to send a request's headers (also the longest
    /// an idle kept-alive connection is kept) before its connection is
    /// closed.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_HEADER_TIMEOUT,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_timeout: u64,
    /// Seconds a client has to send a request's body after its headers.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_BODY_TIMEOUT,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub body_timeout: u64,
    /// Seconds a request may take from its headers to its answer (waiting
    /// for a slot included); past it the client gets 503 and the work is
    /// dropped, never done for a client that is gone.
    #[arg(long, value_name = "SECONDS", default_value_t = DEFAULT_REQUEST_TIMEOUT,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub request_timeout: u64,
    /// Connections open at once on the TCP listener; more wait in the
    /// kernel's queue.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000).map(|n| n as usize))]
    pub max_connections: usize,
    /// Requests worked on at once on the TCP listener; more wait for a
    /// slot within their deadline.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_IN_FLIGHT,
          value_parser = clap::value_parser!(u64).range(1..=100_000).map(|n| n as usize))]
    pub max_in_flight: usize,
}

/// The Unix socket's own caps (the agent's and the follower's socket).
#[derive(Clone, Debug, clap::Args)]
pub struct SocketLimitArgs {
    /// Connections open at once on the Unix socket (its own cap: a flood
    /// on TCP does not use it up).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SOCKET_MAX_CONNECTIONS,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000).map(|n| n as usize))]
    pub socket_max_connections: usize,
    /// Requests worked on at once on the Unix socket.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SOCKET_MAX_IN_FLIGHT,
          value_parser = clap::value_parser!(u64).range(1..=100_000).map(|n| n as usize))]
    pub socket_max_in_flight: usize,
}

impl LimitArgs {
    /// The TCP listener's limits.
    pub fn tcp(&self) -> Limits {
        Limits {
            header_read_timeout: Duration::from_secs(self.header_timeout),
            body_read_timeout: Duration::from_secs(self.body_timeout),
            request_timeout: Duration::from_secs(self.request_timeout),
            max_connections: self.max_connections,
            max_in_flight: self.max_in_flight,
        }
    }

    /// Both listeners' limits: the deadlines from `self`, the Unix
    /// socket's caps from `socket`.
    pub fn with_socket(&self, socket: &SocketLimitArgs) -> ListenerLimits {
        let tcp = self.tcp();
        ListenerLimits {
            socket: Limits {
                max_connections: socket.socket_max_connections,
                max_in_flight: socket.socket_max_in_flight,
                ..tcp
            },
            tcp,
        }
    }
}

/// Descriptors kept for everything but the listeners' connections (state
/// files, the journal, the kubelet's sockets, the API server).
pub const RESERVED_DESCRIPTORS: u64 = 256;

/// The process's open-file limits: (soft, hard); `u64::MAX` is unlimited.
fn open_file_limits() -> (u64, u64) {
    rlimit::getrlimit(rlimit::Resource::NOFILE).unwrap_or((1024, 1024))
}

/// Raises the process's soft open-file limit (`ulimit -n`) to its hard
/// limit, as Go's runtime does at start: the default soft limit (often
/// 1024) is a compatibility setting for `select(2)`, which no daemon here
/// uses. Returns the soft limit in force afterwards (unchanged when it
/// cannot be raised).
pub fn raise_open_file_limit() -> u64 {
    // An unlimited hard limit still stops at the kernel's per-process
    // maximum (Linux: fs.nr_open); asking for more fails.
    let ceiling = std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()
        .and_then(|text| text.trim().parse::<u64>().ok())
        .unwrap_or(u64::MAX);
    match rlimit::increase_nofile_limit(ceiling) {
        Ok(soft) => soft,
        Err(error) => {
            tracing::debug!(%error, "cannot raise the open-file limit");
            open_file_limits().0
        }
    }
}

/// Makes room for the connection caps in `limits`: raises the soft
/// open-file limit to the hard one ([`raise_open_file_limit`]); where even
/// that is below the caps' sum plus [`RESERVED_DESCRIPTORS`], lowers the
/// caps in proportion so that accepting connections can never take the
/// descriptors the daemon needs for its own files and sockets. Returns
/// what was lowered, to be logged; `None` when everything fits. Every
/// daemon calls it at start.
pub fn fit_to_descriptors(limits: &mut [&mut Limits]) -> Option<String> {
    let wanted: u64 = limits.iter().map(|l| l.max_connections as u64).sum::<u64>() + RESERVED_DESCRIPTORS;
    let available = raise_open_file_limit();
    if available >= wanted {
        return None;
    }
    let room = available.saturating_sub(RESERVED_DESCRIPTORS).max(limits.len() as u64);
    let total = wanted - RESERVED_DESCRIPTORS;
    let mut lowered = Vec::new();
    for limit in limits.iter_mut() {
        let share = ((limit.max_connections as u64 * room) / total.max(1)).max(1);
        let share = usize::try_from(share).unwrap_or(usize::MAX);
        if share < limit.max_connections {
            lowered.push(format!("{} → {share}", limit.max_connections));
            limit.max_connections = share;
        }
    }
    let hard = open_file_limits().1;
    Some(format!(
        "the open-file limit is {available} (ulimit -n; hard limit {}): connection caps lowered to fit ({})",
        if hard == rlimit::INFINITY {
            "unlimited".to_owned()
        } else {
            hard.to_string()
        },
        lowered.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        limits: LimitArgs,
        #[command(flatten)]
        socket: SocketLimitArgs,
    }

    #[test]
    fn the_flags_default_to_the_documented_limits() -> Result<(), clap::Error> {
        let cli = Cli::try_parse_from(["x"])?;
        assert_eq!(cli.limits.with_socket(&cli.socket), ListenerLimits::default());
        let cli = Cli::try_parse_from(["x", "--max-connections", "7", "--socket-max-in-flight", "2"])?;
        let limits = cli.limits.with_socket(&cli.socket);
        assert_eq!(limits.tcp.max_connections, 7);
        assert_eq!(limits.socket.max_in_flight, 2);
        assert_eq!(limits.socket.max_connections, DEFAULT_SOCKET_MAX_CONNECTIONS);
        assert!(Cli::try_parse_from(["x", "--max-in-flight", "0"]).is_err());
        assert!(Cli::try_parse_from(["x", "--header-timeout", "0"]).is_err());
        Ok(())
    }

    #[test]
    fn the_soft_open_file_limit_is_raised_to_the_hard_one() {
        let soft = raise_open_file_limit();
        let (now, hard) = open_file_limits();
        assert_eq!(soft, now);
        // An unlimited hard limit: the soft one stops at fs.nr_open.
        if hard != rlimit::INFINITY {
            assert_eq!(soft, hard);
        }
    }

    #[test]
    fn caps_that_fit_the_open_file_limit_are_kept() {
        let mut small = Limits {
            max_connections: 4,
            ..Limits::default()
        };
        assert_eq!(fit_to_descriptors(&mut [&mut small]), None);
        assert_eq!(small.max_connections, 4);
    }
}
