//! The follower's loop: gather and rebuild whenever a source may have
//! changed — a checkpoint file written (inotify through `notify`), the
//! pod watcher's update — and at least every resync period (the
//! PodResources API has no change notification), publishing the latest
//! [`Status`] on a `watch` channel. A disagreement makes the status
//! unknown at once (logged, counted); the next agreeing gather makes it
//! known again.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::{Notify, watch};
use topoalign_engine::Node;

use crate::check::{Rebuilder, Unknown};
use crate::metrics::Metrics;
use crate::sources::{PodSource, Sources};

/// What the follower watches.
#[derive(Clone)]
pub struct FollowConfig {
    /// The kubelet's root directory (`/var/lib/kubelet`).
    pub root_dir: PathBuf,
    /// The PodResources socket.
    pub socket: PathBuf,
    pub pods: PodSource,
    /// The longest time between two gathers.
    pub resync: Duration,
}

/// The kubelet's state as the follower last saw it.
#[derive(Clone, Debug)]
pub enum State {
    /// No gather has finished yet.
    Starting,
    Known {
        node: Arc<Node>,
    },
    Unknown(Unknown),
}

/// The latest [`State`], numbered: the generation grows with every
/// gather, so a waiter can tell a fresh answer from an old one.
#[derive(Clone, Debug)]
pub struct Status {
    pub generation: u64,
    pub state: State,
}

/// Wakes the follower: call it when a source may have changed.
#[derive(Clone, Default)]
pub struct Trigger(Arc<Notify>);

impl Trigger {
    pub fn poke(&self) {
        self.0.notify_one();
    }
}

/// Runs the loop until `shutdown`, reporting on `status`.
pub async fn follow(
    base: Node,
    config: FollowConfig,
    trigger: Trigger,
    status: watch::Sender<Status>,
    metrics: Arc<Metrics>,
    shutdown: impl std::future::Future<Output = ()>,
) {
    // inotify on the root and device-plugins directories (the kubelet
    // replaces its files by rename, which is an event in the directory).
    let watcher_trigger = trigger.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Reading the files is an event too (open, close): only changes
        // wake the loop, or it would wake itself forever.
        if event.is_ok_and(|e| !e.kind.is_access() && !e.kind.is_other()) {
            watcher_trigger.poke();
        }
    });
    let mut watched = Vec::new();
    if let Ok(watcher) = watcher.as_mut() {
        for dir in [config.root_dir.clone(), config.root_dir.join("device-plugins")] {
            match watcher.watch(&dir, RecursiveMode::NonRecursive) {
                Ok(()) => watched.push(dir),
                Err(error) => {
                    tracing::warn!(dir = %dir.display(), %error, "cannot watch; relying on the periodic resync")
                }
            }
        }
        if let PodSource::File(path) = &config.pods
            && let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty())
            && watcher.watch(parent, RecursiveMode::NonRecursive).is_ok()
        {
            watched.push(parent.to_path_buf());
        }
    }
    tracing::info!(watched = ?watched, resync = ?config.resync, "following the kubelet");
    tokio::pin!(shutdown);
    let mut generation = 0u64;
    let mut last: Option<Result<(), String>> = None;
    let mut sources = Sources::new(config.root_dir.clone(), config.socket.clone(), config.pods.clone());
    let mut rebuilder = Rebuilder::default();
    loop {
        let result = sources
            .gather()
            .await
            .and_then(|observation| rebuilder.rebuild(&base, &observation));
        generation += 1;
        let state = match result {
            Ok(rebuilt) => {
                if last.as_ref().is_none_or(Result::is_err) {
                    tracing::info!(pods = rebuilt.node.pods().len(), "the kubelet's state is known");
                }
                if !rebuilt.stale.is_empty() {
                    tracing::debug!(stale = ?rebuilt.stale, "state of pods nobody lists is released");
                }
                last = Some(Ok(()));
                metrics.known(&rebuilt.node);
                State::Known {
                    node: Arc::new(rebuilt.node),
                }
            }
            Err(unknown) => {
                if last.as_ref().and_then(|l| l.as_ref().err()) != Some(&unknown.reason) {
                    tracing::warn!(source = unknown.kind, reason = %unknown.reason, "the kubelet's state is unknown");
                    metrics.unknown(unknown.kind);
                }
                last = Some(Err(unknown.reason.clone()));
                State::Unknown(unknown)
            }
        };
        status.send_replace(Status { generation, state });
        tokio::select! {
            () = &mut shutdown => break,
            () = trigger.0.notified() => {}
            () = tokio::time::sleep(config.resync) => {}
        }
    }
    drop(watcher);
}
