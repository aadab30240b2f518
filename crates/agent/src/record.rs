//! What the journal's records say: the payloads the ledger writes and
//! replays (JSON, one per record).
//!
//! An admission records the manifest exactly as admitted (with its uid),
//! the policy override, the holding process, and the placement the engine
//! gave — replaying the manifest must give the same placement, and recovery
//! checks that it does.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One journal record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "camelCase")]
pub enum Record {
    /// The first record of every journal: which node the state is for.
    Start {
        /// A checksum of the machine and configuration.
        fingerprint: String,
        /// For people: policies and size.
        node: String,
    },
    Admit(AdmitRecord),
    Release {
        id: String,
        reason: String,
    },
    /// The whole live state at a compaction, right after the start record
    /// of a new epoch: the engine's state in the kubelet checkpoints'
    /// shape, restored on recovery as a restarting kubelet restores its
    /// checkpoints, and the held allocations. Released history is gone.
    Snapshot {
        state: topoalign_nrt::StateRecord,
        held: Vec<AdmitRecord>,
    },
}

/// An acknowledged admission.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmitRecord {
    pub id: String,
    /// The `v1.Pod` manifest admitted, `metadata.uid` = `id`.
    pub pod: Value,
    /// Topology policy override, as named in the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<Holder>,
    /// What the engine gave each container.
    pub placements: Vec<Placement>,
}

/// The process holding an allocation (see `topoalign_enforce::process`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Holder {
    pub pid: u32,
    pub start_time: u64,
    pub boot_id: String,
}

impl From<topoalign_enforce::ProcessIdentity> for Holder {
    fn from(p: topoalign_enforce::ProcessIdentity) -> Holder {
        Holder {
            pid: p.pid,
            start_time: p.start_time,
            boot_id: p.boot_id,
        }
    }
}

impl From<&Holder> for topoalign_enforce::ProcessIdentity {
    fn from(h: &Holder) -> topoalign_enforce::ProcessIdentity {
        topoalign_enforce::ProcessIdentity {
            pid: h.pid,
            start_time: h.start_time,
            boot_id: h.boot_id.clone(),
        }
    }
}

/// One container's placement, recorded exactly as the API shows it: the
/// engine's [`ContainerPlacement`](topoalign_engine::ContainerPlacement)
/// (a change to its wire shape is a change to the journal format too).
pub use topoalign_engine::ContainerPlacement as Placement;
