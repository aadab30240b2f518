//! [`run`]: the follower as a daemon — the loop, the pod watcher (or pods
//! file), the read-only API on a Unix socket and/or TCP (each under its
//! own limits, `topoalign-serve`), and the NodeResourceTopology delivery
//! of every status change.
//!
//! What is published is the follower's status, except that a gather that
//! failed because this process ran short of descriptors or memory — its
//! own trouble under load, not the kubelet's state — keeps the last known
//! state published, with its age and why it is not fresher, for at most
//! [`HOLD_LIMIT`] ([`publish_held`]). Disagreeing or unreachable sources
//! still make the state unknown at once.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use topoalign_engine::Node;
use topoalign_nrt::NodeSpec;
use topoalign_nrt_publisher::pipeline;
use topoalign_serve::{ListenerLimits, Listeners};

use crate::api::{Published, STATUS_WAIT, Shared, router};
use crate::follower::{FollowConfig, State, Status, Trigger, follow};
use crate::metrics::Metrics;
use crate::object_of;
use crate::sources::{PodSource, PodStore, watch_pods};
use crate::verify::{EventSink, Verdicts, VerifyConfig, verify_loop};

/// Everything the daemon needs.
pub struct RunConfig {
    /// The started, empty node of this machine and kubelet configuration.
    pub base: Node,
    pub root_dir: PathBuf,
    pub pod_resources_socket: PathBuf,
    /// The node's pods from this file instead of the API server.
    pub pods_file: Option<PathBuf>,
    /// The Kubernetes node name (pods' `spec.nodeName`, the NRT object's name).
    pub node_name: String,
    pub resync: Duration,
    /// The read-only API's Unix socket.
    pub socket: Option<PathBuf>,
    /// The read-only API on TCP (no token: nothing here changes anything).
    pub listen: Option<SocketAddr>,
    /// NodeResourceTopology delivery, and the exact-state spec to include.
    pub publish: Option<(pipeline::Plan, Option<NodeSpec>)>,
    /// What each listener of the API allows its clients.
    pub limits: ListenerLimits,
    /// Verify the running containers' placement this often (`None`: off).
    pub verify: Option<VerifyConfig>,
    /// Post a Kubernetes Event on a pod when a container's verdict turns
    /// drifted, misaligned or memory-spilled (needs `verify`).
    pub events: bool,
}

/// How long the last known state stays published while gathers fail for
/// want of this process's own resources; then the state is unknown.
pub const HOLD_LIMIT: Duration = Duration::from_secs(120);

/// Whether a gather failed for want of this process's own resources
/// (descriptors, memory) rather than because of the kubelet's sources.
pub fn own_exhaustion(reason: &str) -> bool {
    // EMFILE, ENFILE, ENOMEM as std::io::Error shows them.
    ["(os error 24)", "(os error 23)", "(os error 12)"]
        .iter()
        .any(|code| reason.contains(code))
}

/// The status to publish after `status`, given the last one published:
/// the follower's, except for a gather that failed of [`own_exhaustion`]
/// after a known state confirmed less than `hold` ago, which keeps that
/// state (with the reason it is held).
pub fn publish_held(previous: &Published, status: Status, now: Instant, hold: Duration) -> Published {
    if let crate::follower::State::Unknown(unknown) = &status.state
        && own_exhaustion(&unknown.reason)
        && let known @ crate::follower::State::Known { .. } = &previous.status.state
        && let Some(confirmed_at) = previous.confirmed_at
        && now.saturating_duration_since(confirmed_at) <= hold
    {
        return Published {
            status: Status {
                generation: status.generation,
                state: known.clone(),
            },
            confirmed_at: Some(confirmed_at),
            held: Some(unknown.reason.clone()),
        };
    }
    Published::fresh(status, now)
}

/// Runs until `shutdown`.
///
/// # Errors
/// Binding a listener, connecting to the API server (for the pods or for
/// publishing).
pub async fn run(
    config: RunConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let trigger = Trigger::default();
    let mut tasks = tokio::task::JoinSet::new();
    let needs_client = config.pods_file.is_none() || (config.events && config.verify.is_some());
    let client = if needs_client {
        Some(kube::Client::try_default().await.map_err(|e| {
            io::Error::other(format!(
                "no Kubernetes client configuration for the node's pods or events: {e}"
            ))
        })?)
    } else {
        None
    };
    let pods = match (&config.pods_file, &client) {
        (Some(path), _) => PodSource::File(path.clone()),
        (None, None) => return Err(io::Error::other("no Kubernetes client for the node's pods")),
        (None, Some(client)) => {
            let client = client.clone();
            let store = PodStore::default();
            let poke = trigger.clone();
            tasks.spawn(watch_pods(client, config.node_name.clone(), store.clone(), move || {
                poke.poke()
            }));
            PodSource::Api(store)
        }
    };
    let (status_tx, status_rx) = watch::channel(Status {
        generation: 0,
        state: State::Starting,
    });
    let metrics = Arc::new(Metrics::default());
    let (published_tx, published_rx) = watch::channel(Published::fresh(status_rx.borrow().clone(), Instant::now()));
    tasks.spawn({
        let mut changes = status_rx.clone();
        async move {
            while changes.changed().await.is_ok() {
                let status = changes.borrow_and_update().clone();
                let next = publish_held(&published_tx.borrow(), status, Instant::now(), HOLD_LIMIT);
                if let Some(reason) = &next.held {
                    tracing::warn!(%reason, "a gather failed for want of this process's resources: the last known state stays published");
                }
                published_tx.send_replace(next);
            }
        }
    });
    // Within the listener's deadline (30 s by default, less when the
    // deadline is short).
    let status_wait = STATUS_WAIT.min(
        config
            .limits
            .tcp
            .request_timeout
            .min(config.limits.socket.request_timeout)
            / 2,
    );
    let verdicts = match config.verify {
        None => None,
        Some(verify) => {
            let (verdicts_tx, verdicts_rx) = watch::channel(Verdicts::default());
            let events = match (&client, config.events) {
                (Some(client), true) => Some(EventSink::new(client.clone(), &config.node_name)),
                _ => None,
            };
            tasks.spawn(verify_loop(
                published_rx.clone(),
                verify,
                metrics.clone(),
                verdicts_tx,
                events,
            ));
            Some(verdicts_rx)
        }
    };
    let shared = Shared {
        status: published_rx.clone(),
        metrics: metrics.clone(),
        status_wait,
        verdicts,
    };
    let on_socket = config.socket.as_deref().map(|path| (path, router(shared.clone())));
    let on_tcp = config.listen.map(|address| (address, router(shared.clone())));
    let serving = Listeners::bind(on_socket, on_tcp)
        .await?
        .serve("the read-only API", &config.limits);
    let publishing = match config.publish {
        None => None,
        Some((plan, spec)) => {
            let name = plan.node_name.clone();
            let (publishing, send) = pipeline::start_objects(plan)
                .await
                .map_err(|e| io::Error::other(format!("NodeResourceTopology: {e}")))?;
            let mut changes = published_rx.clone();
            tasks.spawn(async move {
                loop {
                    let object = object_of(&name, &changes.borrow_and_update().status, spec.as_ref());
                    if let Some(object) = object {
                        send(object);
                    }
                    if changes.changed().await.is_err() {
                        break;
                    }
                }
            });
            Some(publishing)
        }
    };
    let follow_config = FollowConfig {
        root_dir: config.root_dir,
        socket: config.pod_resources_socket,
        pods,
        resync: config.resync,
    };
    let follower = tokio::spawn(follow(
        config.base,
        follow_config,
        trigger,
        status_tx,
        metrics,
        serving.stopping(),
    ));
    shutdown.await;
    serving.stop().await;
    let _ = follower.await;
    tasks.abort_all();
    if let Some(publishing) = publishing {
        publishing.finish(Duration::from_secs(5)).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::Unknown;
    use crate::follower::State;

    fn known(generation: u64) -> Status {
        Status {
            generation,
            state: State::Known {
                node: Arc::new(
                    Node::start(
                        topoalign_model::UniformMachine::new(1, 2).build().expect("a machine"),
                        topoalign_engine::NodeConfig::default(),
                    )
                    .expect("a node"),
                ),
                containers: Arc::default(),
                dynamic_devices: Arc::default(),
            },
        }
    }

    fn unknown(generation: u64, reason: &str) -> Status {
        Status {
            generation,
            state: State::Unknown(Unknown::new("checkpoint", reason)),
        }
    }

    #[test]
    fn only_the_followers_own_exhaustion_holds_the_last_known_state() {
        let start = Instant::now();
        let hold = Duration::from_secs(120);
        let first = Published::fresh(known(1), start);
        let emfile = "/var/lib/kubelet/cpu_manager_state: cannot be read: Too many open files (os error 24)";
        let later = start + Duration::from_secs(5);
        let held = publish_held(&first, unknown(2, emfile), later, hold);
        assert!(matches!(held.status.state, State::Known { .. }));
        assert_eq!((held.status.generation, held.confirmed_at), (2, Some(start)));
        assert_eq!(held.held.as_deref(), Some(emfile));
        // Still held on the next failure, from the same confirmation.
        let again = publish_held(&held, unknown(3, emfile), later, hold);
        assert_eq!(again.confirmed_at, Some(start));
        // Past the hold limit: unknown.
        let late = publish_held(&held, unknown(4, emfile), start + hold + Duration::from_secs(1), hold);
        assert!(matches!(late.status.state, State::Unknown(_)));
        // The kubelet's trouble (a refused socket, a disagreement): unknown at once.
        let refused = "cannot connect to the kubelet's PodResources API: Connection refused (os error 111)";
        let gone = publish_held(&first, unknown(2, refused), later, hold);
        assert!(matches!(gone.status.state, State::Unknown(_)));
        assert_eq!((gone.confirmed_at, gone.held), (None, None));
        // Never from nothing known.
        let starting = Published::fresh(
            Status {
                generation: 0,
                state: State::Starting,
            },
            start,
        );
        assert!(matches!(
            publish_held(&starting, unknown(1, emfile), later, hold).status.state,
            State::Unknown(_)
        ));
    }
}
