//! The replay check: the simulator's placements replayed node by node
//! through fresh engine nodes, with the workload's real pods.
//!
//! The simulator shares engine state between nodes ([`crate::sim`]'s
//! classes) and caches decisions; this check trusts none of that. For
//! every node it starts the node's kubelet anew and plays, in order, every
//! pod the scheduler bound to it and every deletion of those pods, and
//! counts the admissions the kubelet refuses. For the `exact` scheduler the
//! count must be zero; for the others it must equal the run's
//! `rejectedAtAdmission`.

use crate::fleet::Fleet;
use crate::sim::{RunKey, StartError, start_group_with_dra};
use crate::workload::{Event, Workload};

/// Admissions counted by the replay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayCounts {
    pub admitted: usize,
    pub rejected: usize,
}

/// A node the replay could not start (which the run itself would have
/// reported).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("replay check: node {node}: {error}")]
pub struct ReplayError {
    /// The node's name (`<entry>-<i>`).
    pub node: String,
    pub error: StartError,
}

/// Replays one run's per-node logs.
///
/// # Errors
/// [`ReplayError`] naming a node that would not start.
pub fn replay_check(
    fleet: &Fleet,
    workload: &Workload,
    key: &RunKey,
    logs: &[Vec<Event>],
) -> Result<ReplayCounts, ReplayError> {
    let names = fleet.node_names();
    let mut counts = ReplayCounts::default();
    for (n, log) in logs.iter().enumerate() {
        if log.is_empty() {
            continue;
        }
        let group = &fleet.groups[names[n].1];
        // The node as the run started it: without the devices its DRA
        // drivers publish (the device plugin no longer has them).
        let (mut node, _) =
            start_group_with_dra(group, fleet.dra.as_ref(), key.policy, key.scope).map_err(|error| ReplayError {
                node: names[n].0.clone(),
                error,
            })?;
        for &event in log {
            match event {
                Event::Add(p) => {
                    if node.admit(workload.pods[p as usize].clone()).admitted() {
                        counts.admitted += 1;
                    } else {
                        counts.rejected += 1;
                    }
                }
                Event::Delete(p) => {
                    node.remove(&workload.pods[p as usize].uid);
                }
            }
        }
    }
    Ok(counts)
}
