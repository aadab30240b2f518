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

/// Makes room for the connection caps in `limits` in the process's
/// open-file limit: raises the soft limit (up to the hard one) to their
/// sum plus [`RESERVED_DESCRIPTORS`]; where the hard limit is lower, lowers
/// the caps in proportion so that accepting connections can never take
/// the descriptors the daemon needs for its own files and sockets.
/// Returns what was lowered, to be logged; `None` when everything fits.
pub fn fit_to_descriptors(limits: &mut [&mut Limits]) -> Option<String> {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let wanted: u64 = limits.iter().map(|l| l.max_connections as u64).sum::<u64>() + RESERVED_DESCRIPTORS;
    let current = getrlimit(Resource::Nofile);
    let soft = current.current.unwrap_or(u64::MAX);
    let available = if soft >= wanted {
        soft
    } else {
        let raised = current.maximum.map_or(wanted, |hard| hard.min(wanted));
        let set = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(raised),
                maximum: current.maximum,
            },
        );
        if set.is_ok() { raised } else { soft }
    };
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
    Some(format!(
        "the open-file limit is {available} (ulimit -n; hard limit {}): connection caps lowered to fit ({})",
        current
            .maximum
            .map_or_else(|| "unlimited".to_owned(), |m| m.to_string()),
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
    fn caps_that_fit_the_open_file_limit_are_kept() {
        let mut small = Limits {
            max_connections: 4,
            ..Limits::default()
        };
        assert_eq!(fit_to_descriptors(&mut [&mut small]), None);
        assert_eq!(small.max_connections, 4);
    }
}
