//! The node agent's NodeResourceTopology delivery: after every durable
//! allocation change the agent calls the [`Listener`] [`start`] returns,
//! which builds the node's object and drops it into a `watch` channel
//! (never blocking the allocation); one task per destination (API server,
//! file or stdout) takes the latest object and delivers it through
//! [`run`](crate::run) — throttled, failures logged and retried, except a
//! refusal of the agent's identity (RBAC) before anything was delivered,
//! which stops that destination.
//!
//! Must not touch: the objects' contents (`topoalign-nrt`), the agent
//! (it only calls the listener).

use std::path::PathBuf;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use topoalign_engine::Node;
use topoalign_nrt::{BuildOptions, NodeResourceTopology, NodeSpec, build};

use crate::{Destination, FileSink, PublishError, Publisher, run};

/// What to produce and where to send it.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The object's name: the Kubernetes node name.
    pub node_name: String,
    /// With topoalign's exact-state attributes when given.
    pub exact_state: Option<NodeSpec>,
    /// Server-side apply to the API server of the default client
    /// configuration.
    pub publish: bool,
    /// Write to this file (`-`: standard output).
    pub file: Option<PathBuf>,
    /// At most one delivery per destination per this interval.
    pub interval: Duration,
}

/// What the agent calls with its node after every change.
pub type Listener = Box<dyn Fn(&Node) + Send + 'static>;

/// The running destination tasks.
pub struct Publishing {
    tasks: JoinSet<()>,
}

/// Connects (for `publish`) and starts one task per destination; the
/// returned listener feeds them.
///
/// # Errors
/// [`PublishError::Config`] when `publish` is asked for and there is no
/// Kubernetes client configuration.
pub async fn start(plan: Plan) -> Result<(Publishing, Listener), PublishError> {
    let name = plan.node_name.clone();
    let spec = plan.exact_state.clone();
    let (publishing, send) = start_objects(plan).await?;
    let listener = move |node: &Node| {
        send(build(
            &name,
            node,
            BuildOptions {
                exact_state: spec.as_ref(),
            },
        ));
    };
    Ok((publishing, Box::new(listener)))
}

/// What a caller that builds its own objects (the kubelet follower) calls
/// with each new object.
pub type ObjectListener = Box<dyn Fn(NodeResourceTopology) + Send + Sync + 'static>;

/// [`start`] for callers that build the objects themselves; `plan`'s
/// `exact_state` is not used.
///
/// # Errors
/// As [`start`].
pub async fn start_objects(plan: Plan) -> Result<(Publishing, ObjectListener), PublishError> {
    let publisher = if plan.publish {
        Some(Publisher::connect().await?)
    } else {
        None
    };
    let (latest, _) = watch::channel::<Option<NodeResourceTopology>>(None);
    let mut tasks = JoinSet::new();
    if let Some(publisher) = publisher {
        tracing::info!(node = %plan.node_name, "publishing NodeResourceTopology to the API server");
        tasks.spawn(deliver(publisher, "api-server", latest.subscribe(), plan.interval));
    }
    if let Some(path) = plan.file {
        tracing::info!(node = %plan.node_name, file = %path.display(), "writing NodeResourceTopology");
        tasks.spawn(deliver(FileSink::new(path), "file", latest.subscribe(), plan.interval));
    }
    let listener = move |object: NodeResourceTopology| {
        latest.send_replace(Some(object));
    };
    Ok((Publishing { tasks }, Box::new(listener)))
}

impl Publishing {
    /// Waits (at most `limit`) for the destinations to deliver the last
    /// state; call once the listener is dropped (with the agent holding
    /// it).
    pub async fn finish(mut self, limit: Duration) {
        let all = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(limit, all).await.is_err() {
            tracing::warn!("NodeResourceTopology: the last update was not delivered before shutdown");
        }
    }
}

/// Forwards the latest object to `run` until the listener is gone.
async fn deliver<D>(
    destination: D,
    label: &'static str,
    mut latest: watch::Receiver<Option<NodeResourceTopology>>,
    interval: Duration,
) where
    D: Destination + Send + 'static,
    D::Error: Send,
{
    let (updates, receiver) = mpsc::channel(1);
    let sender = tokio::spawn(run(destination, receiver, interval, move |error, last| {
        if last {
            tracing::error!(
                destination = label,
                %error,
                "NodeResourceTopology publishing stopped: retrying cannot succeed; allocations go on, restart the \
                 agent once this is fixed"
            );
        } else {
            tracing::warn!(destination = label, %error, "NodeResourceTopology update failed; will retry");
        }
    }));
    // The current value first (the listener sends one at installation),
    // then every change; `watch` keeps only the latest, so a slow
    // destination sees a coalesced stream.
    loop {
        let object = latest.borrow_and_update().clone();
        if let Some(object) = object
            && updates.send(object).await.is_err()
        {
            break;
        }
        if latest.changed().await.is_err() {
            break;
        }
    }
    drop(updates);
    if let Err(error) = sender.await {
        tracing::error!(destination = label, %error, "NodeResourceTopology delivery stopped");
    }
}

/// Where [`hostname`] reads the hostname, in order.
const HOSTNAME_FILES: [&str; 2] = ["/proc/sys/kernel/hostname", "/etc/hostname"];

/// Neither hostname file names this machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot read this machine's hostname ({}); give --nrt-node-name", HOSTNAME_FILES.join(", "))]
pub struct NoHostname;

/// This machine's hostname, lower-cased: the Kubernetes node name by
/// default.
///
/// # Errors
/// [`NoHostname`], asking for `--nrt-node-name`, when it cannot be read.
pub fn hostname() -> Result<String, NoHostname> {
    HOSTNAME_FILES
        .iter()
        .filter_map(|path| std::fs::read_to_string(path).ok())
        .map(|text| text.trim().to_lowercase())
        .find(|name| !name.is_empty())
        .ok_or(NoHostname)
}
