//! Reading nodes' NodeResourceTopology objects again and again (from the
//! API server, through whatever `list` the caller gives) into the shared
//! cluster: each listing replaces the last ([`Cluster::sync_rebuilt`]:
//! changed nodes rebuilt, vanished nodes removed). Rebuilding nodes runs
//! the engine, so it happens on a blocking thread, never on the async ones,
//! and outside the cluster's lock.

use std::fmt::Display;
use std::future::Future;
use std::time::{Duration, Instant};

use topoalign_nrt::NodeResourceTopology;

use crate::cluster::{Cluster, Rebuilt, SyncReport, WorkerPanic};
use crate::server::Shared;

/// Lists the objects every `every` and syncs the cluster with them, until
/// the task is dropped; failures (a listing, an object, a removal) are
/// told to `report` and the next round tries again.
pub async fn poll<L, F, E>(mut list: L, cluster: Shared, every: Duration, mut report: impl FnMut(String))
where
    L: FnMut() -> F,
    F: Future<Output = Result<Vec<NodeResourceTopology>, E>>,
    E: Display,
{
    loop {
        match list().await {
            Ok(objects) => match sync(&cluster, objects).await {
                Ok(synced) => {
                    for error in synced.errors {
                        report(error.to_string());
                    }
                    for (name, reason) in synced.passed {
                        report(format!("node {name} is passed through, its state unknown: {reason}"));
                    }
                    for (name, warning) in synced.hazards {
                        report(format!(
                            "node {name} (and every node of its kubelet configuration): warning: {warning}"
                        ));
                    }
                    for name in synced.removed {
                        report(format!("node {name} is no longer listed: removed"));
                    }
                }
                Err(error) => report(error.to_string()),
            },
            Err(error) => report(format!("cannot list NodeResourceTopology objects: {error}")),
        }
        tokio::time::sleep(every).await;
    }
}

/// One listing into the cluster, on a blocking thread. The nodes whose
/// objects changed are rebuilt without the cluster's lock (it is taken
/// only to see which changed, then to install them), so `filter` and
/// `prioritize` calls do not wait for the engine restoring node states.
///
/// # Errors
/// [`SyncError`] when the cluster's lock is poisoned or the work panicked.
pub async fn sync(cluster: &Shared, objects: Vec<NodeResourceTopology>) -> Result<SyncReport, SyncError> {
    let cluster = cluster.clone();
    tokio::task::spawn_blocking(move || {
        let poisoned = |_| SyncError::Poisoned;
        let (stale, starts, threads) = {
            let cluster = cluster.lock().map_err(poisoned)?;
            (
                cluster.stale(&objects, Instant::now()),
                cluster.starts(),
                cluster.threads(),
            )
        };
        let rebuilt: Vec<Option<Rebuilt>> =
            Cluster::rebuild_all(&objects, &stale, &starts, threads).map_err(SyncError::Rebuild)?;
        let mut cluster = cluster.lock().map_err(poisoned)?;
        Ok(cluster.sync_rebuilt(&objects, rebuilt, Instant::now()))
    })
    .await
    .map_err(SyncError::Task)?
}

/// Why a listing was not synced (a bug: the cluster keeps its last state
/// and the next round tries again).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("internal: state lock poisoned")]
    Poisoned,
    #[error("internal: rebuilding the NodeResourceTopology objects failed: {0}")]
    Rebuild(#[source] WorkerPanic),
    #[error("internal: syncing the NodeResourceTopology objects failed: {0}")]
    Task(#[source] tokio::task::JoinError),
}
