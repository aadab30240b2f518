//! topoalign's node agent: it owns a node's allocations durably, makes
//! them real, and serves them.
//!
//! Code map:
//! - [`journal`]: the write-ahead journal file — checksummed records, a
//!   double-buffered commit header, damage found and described;
//! - [`record`]: what the records say; [`ledger`]: the engine node as the
//!   journal makes it, admission and release that are on disk before they
//!   are acknowledged, recovery that replays and verifies;
//! - [`request`]: the admission request (Pod manifest or plain request);
//! - [`enforcement`]: cgroups / affinity / none, over `topoalign-enforce`;
//! - [`node_agent`]: ledger + enforcement + liveness + metrics, the unit
//!   the server and `run --standalone` drive;
//! - [`usage`], [`metrics`]: per-NUMA usage (the engine's
//!   `Node::numa_usage` as the API's document), Prometheus; decisions in
//!   words come from `topoalign-explain`;
//! - [`api`], [`server`]: HTTP over the Unix socket (and TCP with a
//!   token), shutdown; [`wire`]: the JSON documents; [`client`]: a
//!   blocking client; [`state_lock`]: one owner per state directory.
//!
//! Must not touch: decisions (the engine's), Kubernetes formats (the k8s
//! crate's), system calls (`topoalign-enforce`'s). No `unsafe` here.

pub mod api;
pub mod client;
mod crc32;
pub mod enforcement;
mod fingerprint;
pub mod journal;
pub mod ledger;
pub mod metrics;
pub mod node_agent;
pub mod record;
pub mod request;
pub mod server;
pub mod state_lock;
pub mod usage;
pub mod wire;

use std::path::Path;

pub use client::{Client, ClientError, Endpoint};
pub use enforcement::Enforcement;
pub use ledger::{Ledger, LedgerError, Recovery};
pub use node_agent::{AgentError, NodeAgent, Unexplained};
pub use server::{ListenerLimits, Listeners, ServeConfig, Serving, serve, termination_signal};
pub use state_lock::{Role, StateLock};

use topoalign_enforce::Procfs;
use topoalign_engine::NodeConfig;
use topoalign_model::Machine;

/// How to open a node's state.
#[derive(Clone, Debug)]
pub struct OpenOptions<'a> {
    pub state_dir: &'a Path,
    pub role: Role,
    /// Enforce at all (false: `--no-enforce`).
    pub enforce: bool,
    /// Use cpuset cgroups where they are writable (false: always the
    /// affinity fallback).
    pub cgroups: bool,
    /// The cgroup under the cpuset hierarchy's root that holds the
    /// allocations' cgroups.
    pub cgroup_parent: &'a str,
    pub procfs: Procfs,
}

/// Why a node's state could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("{0}")]
    Lock(std::io::Error),
    #[error("{0}")]
    Ledger(#[from] LedgerError),
}

/// Locks the state directory, recovers the ledger, chooses enforcement
/// and reconciles: a [`NodeAgent`] ready to serve, and the lock to keep
/// for as long as it does.
///
/// # Errors
/// [`OpenError`]: the directory is taken, or the state cannot be
/// recovered (damage, a changed machine or configuration, I/O).
pub fn open(
    machine: Machine,
    config: NodeConfig,
    options: OpenOptions<'_>,
) -> Result<(NodeAgent, StateLock), OpenError> {
    let lock = StateLock::acquire(options.state_dir, options.role).map_err(OpenError::Lock)?;
    let (ledger, recovery) = Ledger::open(options.state_dir, machine, config)?;
    let enforcement = Enforcement::choose(options.enforce, options.cgroups, options.cgroup_parent, &options.procfs);
    Ok((NodeAgent::new(ledger, &recovery, enforcement, options.procfs), lock))
}
