//! Following a live kubelet: topoalign's node agent in
//! `--follow-kubelet` mode never allocates; it observes what the kubelet
//! allocated and publishes exactly that, or says it does not know.
//!
//! - [`sources`]: gathering one [`Observation`] — the checkpoint files
//!   (`cpu_manager_state`, `memory_manager_state`,
//!   `device-plugins/kubelet_internal_checkpoint`, every release's layout,
//!   parsed by `topoalign_k8s::checkpoint`), the PodResources API
//!   (`List`, `GetAllocatableResources`) and the node's pods (a kube-rs
//!   watcher on `spec.nodeName`, or a pods file);
//! - [`check`]: [`rebuild`], the sources checked against each other and
//!   restored into the engine node through `Node::restore` — the path
//!   `diagnose` and the NRT exact state use — or [`Unknown`] with the
//!   reason;
//! - [`follower`]: the loop (inotify through `notify`, the pod watcher's
//!   updates, a periodic resync) publishing the latest [`Status`];
//! - [`api`]: the read-only HTTP API (`/healthz`, `/metrics`,
//!   `/v1/topology`, `/v1/state`), refusing every allocation request;
//!   [`metrics`]: whether the state is known, and why not;
//! - [`verify`]: proof of placement for every running container of the
//!   known state (as `topoalign verify --containers`), exported as
//!   metrics, on `/v1/verdicts` and optionally as Events on the pods;
//! - [`run`]: all of it as the agent's daemon (`topoalign agent
//!   --follow-kubelet`).
//!
//! [`object_of`] turns a status into the NodeResourceTopology object to
//! publish: the exact state when known, an object carrying only the reason
//! when not — never a wrong state.
//!
//! Must not touch: decisions (the engine's), the checkpoint formats (the
//! k8s crate's), delivery (`topoalign-nrt-publisher`). Depends on neither
//! the agent nor `topoalign-enforce`: it observes, it never allocates or
//! writes to the kernel.

pub mod api;
pub mod check;
pub mod follower;
pub mod metrics;
pub mod run;
pub mod sources;
pub mod verify;

pub use check::{Observation, Rebuilder, Rebuilt, Unknown, rebuild};
pub use follower::{FollowConfig, State, Status, Trigger, follow};
pub use metrics::Metrics;
pub use sources::{PodSource, PodStore, Sources, gather, watch_pods};

use topoalign_nrt::{BuildOptions, NodeResourceTopology, NodeSpec};

/// The kubelet's default root directory.
pub const DEFAULT_ROOT_DIR: &str = "/var/lib/kubelet";

/// The object to publish for `status` (`None` before the first gather).
pub fn object_of(name: &str, status: &Status, spec: Option<&NodeSpec>) -> Option<NodeResourceTopology> {
    match &status.state {
        State::Starting => None,
        State::Known { node, .. } => Some(topoalign_nrt::build(name, node, BuildOptions { exact_state: spec })),
        State::Unknown(unknown) => Some(topoalign_nrt::unknown(name, &unknown.reason)),
    }
}
