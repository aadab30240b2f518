//! The follower's loop: gather and rebuild whenever a source may have
//! changed — a checkpoint file written (inotify through `notify`), the
//! pod watcher's update — and at least every resync period (the
//! PodResources API has no change notification), publishing the latest
//! [`Status`] on a `watch` channel. A disagreement makes the status
//! unknown at once (logged, counted) and is looked at again soon (50 ms,
//! doubling while it lasts, at most the resync period: a source without
//! change notification may be the one behind); the next agreeing gather
//! makes it known again.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use tokio::sync::{Notify, watch};
use topoalign_engine::Node;

use topoalign_observe::{ContainerDynamicDevices, RunningContainer};

use crate::check::{Rebuilder, Unknown, running_containers};
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
        /// The containers of the node's active pods that may have
        /// processes, with their runtime ids (what the verifier checks).
        containers: Arc<Vec<RunningContainer>>,
        /// The devices DRA allocated to each container (PodResources
        /// `dynamic_resources`).
        dynamic_devices: Arc<Vec<ContainerDynamicDevices>>,
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
    // Gathers in a row that found the sources disagreeing.
    let mut unsettled = 0u32;
    loop {
        // A gather ends on its own (files are read without blocking, the
        // kubelet's answer within its deadline); a shutdown still does not
        // wait for it.
        let gathered = tokio::select! {
            () = &mut shutdown => break,
            gathered = sources.gather() => gathered,
        };
        let result = gathered.and_then(|observation| {
            let rebuilt = rebuilder.rebuild(&base, &observation)?;
            Ok((rebuilt, running_containers(&observation.pods)))
        });
        generation += 1;
        let state = match result {
            Ok((rebuilt, containers)) => {
                if last.as_ref().is_none_or(Result::is_err) {
                    tracing::info!(pods = rebuilt.node.pods().len(), "the kubelet's state is known");
                }
                if !rebuilt.stale.is_empty() {
                    tracing::debug!(stale = ?rebuilt.stale, "state of pods nobody lists is released");
                }
                last = Some(Ok(()));
                unsettled = 0;
                metrics.known(&rebuilt.node);
                State::Known {
                    node: Arc::new(rebuilt.node),
                    containers: Arc::new(containers),
                    dynamic_devices: Arc::new(rebuilt.dynamic_devices),
                }
            }
            Err(unknown) => {
                if last.as_ref().and_then(|l| l.as_ref().err()) != Some(&unknown.reason) {
                    tracing::warn!(source = unknown.kind, reason = %unknown.reason, "the kubelet's state is unknown");
                    metrics.unknown(unknown.kind);
                }
                last = Some(Err(unknown.reason.clone()));
                unsettled = unsettled.saturating_add(1);
                State::Unknown(unknown)
            }
        };
        status.send_replace(Status { generation, state });
        tokio::select! {
            () = &mut shutdown => break,
            () = trigger.0.notified() => {}
            () = tokio::time::sleep(next_gather_after(unsettled, config.resync)) => {}
        }
    }
    drop(watcher);
}

/// How long the loop waits for a change before it gathers again, after
/// `unsettled` gathers in a row found the sources disagreeing: the resync
/// period when they agree; soon when they do not, since a source without
/// change notification (the PodResources API, the pod watcher's lag
/// behind a file already written) may be the one behind — 50 ms, doubling
/// with each further disagreement, never longer than the resync period.
fn next_gather_after(unsettled: u32, resync: Duration) -> Duration {
    if unsettled == 0 {
        return resync;
    }
    let backoff = Duration::from_millis(50).saturating_mul(1u32 << (unsettled - 1).min(16));
    backoff.min(resync)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disagreement_is_looked_at_again_soon_then_less_often() {
        let resync = Duration::from_secs(5);
        let waits: Vec<u128> = (0..9).map(|n| next_gather_after(n, resync).as_millis()).collect();
        assert_eq!(waits, [5000, 50, 100, 200, 400, 800, 1600, 3200, 5000]);
        assert_eq!(next_gather_after(u32::MAX, resync), resync);
        // A resync shorter than the first retry bounds it too.
        assert_eq!(
            next_gather_after(1, Duration::from_millis(20)),
            Duration::from_millis(20)
        );
    }
}
