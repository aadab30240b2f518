//! What the journal's records say: the payloads the ledger writes and
//! replays (JSON, one per record).
//!
//! An admission records the manifest exactly as admitted (with its uid),
//! the policy override (typed, in the kubelet's spelling), the holding process, and the placement the engine
//! gave — replaying the manifest must give the same placement, and recovery
//! checks that it does.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use topoalign_engine::ContainerPlacement;
use topoalign_engine::TopologyPolicyName;

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
    /// The state is a `topoalign_nrt::StateRecord` as written, kept as
    /// JSON and read through `topoalign_nrt::StateView` (the one reading
    /// of that format).
    Snapshot {
        state: serde_json::Value,
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
    /// Topology policy override, as the request named it (written in the
    /// kubelet's spelling, as before it was typed).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "policy_name")]
    pub policy: Option<TopologyPolicyName>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<Holder>,
    /// What the engine gave each container, recorded exactly as the API
    /// shows it (a change to [`ContainerPlacement`]'s wire shape is a
    /// change to the journal format too).
    pub placements: Vec<ContainerPlacement>,
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

/// A policy override on the wire: the kubelet's spelling, read back
/// through `FromStr` (an unknown name is a read error naming it).
mod policy_name {
    use serde::{Deserialize, Deserializer, Serializer};
    use topoalign_engine::TopologyPolicyName;

    #[allow(clippy::ref_option)] // serde's `with` passes the field by reference
    pub(super) fn serialize<S: Serializer>(policy: &Option<TopologyPolicyName>, s: S) -> Result<S::Ok, S::Error> {
        match policy {
            Some(policy) => s.serialize_some(policy.as_str()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TopologyPolicyName>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|name| name.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use topoalign_model::CpuSet;

    use super::*;

    /// An admission as journals written before placements were typed hold
    /// it (CPU lists as text): it still reads, to the same placement, and
    /// writes back byte for byte.
    #[test]
    fn a_journal_record_of_before_reads_and_writes_back_unchanged() {
        let written = r#"{"op":"admit","id":"a1","pod":{"metadata":{"uid":"a1"}},"policy":"single-numa-node","placements":[{"name":"init","init":true,"cpus":null,"memoryNuma":null},{"name":"app","init":false,"cpus":"2-5,8","memoryNuma":[0],"devices":{"nvidia.com/gpu":["gpu0"]}}]}"#;
        let record: Record = serde_json::from_str(written).unwrap();
        let Record::Admit(admit) = &record else {
            panic!("an admission: {record:?}");
        };
        assert_eq!(admit.policy, Some(TopologyPolicyName::SingleNumaNode));
        assert_eq!(
            admit.placements[1],
            ContainerPlacement {
                name: "app".into(),
                init: false,
                cpus: Some(CpuSet::parse("2-5,8").unwrap()),
                memory_numa: Some(vec![0]),
                devices: BTreeMap::from([("nvidia.com/gpu".to_owned(), vec!["gpu0".to_owned()])]),
            }
        );
        assert_eq!(serde_json::to_string(&record).unwrap(), written);
    }

    /// A policy override that is no policy is a read error naming it.
    #[test]
    fn a_record_whose_policy_is_unknown_is_refused() {
        let error = serde_json::from_str::<Record>(
            r#"{"op":"admit","id":"a1","pod":{},"policy":"Restricted","placements":[]}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(
            error.contains(r#"unknown topology manager policy "Restricted""#),
            "{error}"
        );
    }

    /// A CPU list that does not read is an error naming it, never an empty
    /// set that would replay as "no exclusive CPUs".
    #[test]
    fn a_placement_whose_cpus_do_not_read_is_refused() {
        let error =
            serde_json::from_str::<ContainerPlacement>(r#"{"name":"app","init":false,"cpus":"5-2","memoryNuma":null}"#)
                .unwrap_err()
                .to_string();
        assert!(error.contains(r#"CPU list "5-2""#), "{error}");
    }
}
