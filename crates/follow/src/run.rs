//! [`run`]: the follower as a daemon — the loop, the pod watcher (or pods
//! file), the read-only API on a Unix socket and/or TCP, and the
//! NodeResourceTopology delivery of every status change.

use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use topoalign_agent::Listeners;
use topoalign_engine::Node;
use topoalign_nrt::NodeSpec;
use topoalign_nrt_publisher::pipeline;

use crate::api::{Shared, router};
use crate::follower::{FollowConfig, State, Status, Trigger, follow};
use crate::metrics::Metrics;
use crate::object_of;
use crate::sources::{PodSource, PodStore, watch_pods};

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
    let pods = match &config.pods_file {
        Some(path) => PodSource::File(path.clone()),
        None => {
            let client = kube::Client::try_default().await.map_err(|e| {
                io::Error::other(format!("no Kubernetes client configuration for the node's pods: {e}"))
            })?;
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
    let shared = Shared {
        status: status_rx.clone(),
        metrics: metrics.clone(),
    };
    let on_socket = config.socket.as_deref().map(|path| (path, router(shared.clone())));
    let on_tcp = config.listen.map(|address| (address, router(shared.clone())));
    let serving = Listeners::bind(on_socket, on_tcp).await?.serve("the read-only API");
    let publishing = match config.publish {
        None => None,
        Some((plan, spec)) => {
            let name = plan.node_name.clone();
            let (publishing, send) = pipeline::start_objects(plan)
                .await
                .map_err(|e| io::Error::other(format!("NodeResourceTopology: {e}")))?;
            let mut changes = status_rx.clone();
            tasks.spawn(async move {
                loop {
                    let object = object_of(&name, &changes.borrow_and_update(), spec.as_ref());
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
