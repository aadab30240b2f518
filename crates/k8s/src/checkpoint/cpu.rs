//! `cpu_manager_state`: the CPU manager's checkpoint (formats v4 of v1.37,
//! v3 of v1.36 with pod-level resource managers, v2, and v1.32's fallback
//! to v1), read and checked as the kubelet's `stateCheckpoint.restoreState`
//! reads it.

use std::collections::BTreeMap;

use serde_json::Value;
use topoalign_engine::CpuManagerState;
use topoalign_model::CpuSet;

use super::go_json::{self, At};
use super::spew::{Spew, fnv32a};
use super::{CheckpointError, CheckpointKind, check_policy, data_checksum, data_layer, parse_data, verify_checksum};
use crate::cpu_list::parse_cpu_list;

/// A CPU manager checkpoint as the kubelet holds it after reading the file
/// (a v1 file already migrated to v2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuCheckpoint {
    /// Which format the file was in (1 to 4).
    pub version: u8,
    pub policy_name: String,
    pub default_cpu_set: String,
    /// Pod uid → container → CPU list; `None` for a file holding
    /// `"entries": null` (Go's nil map; it prints differently in the
    /// checksum). An inner `None` is a `null` container map.
    pub entries: Option<BTreeMap<String, Option<BTreeMap<String, String>>>>,
    /// `podEntries` (v3, v4): pod uid → the pod's CPU list, for pods whose
    /// CPUs the pod-level resource managers assigned.
    pub pod_entries: BTreeMap<String, String>,
    /// The authoritative checksum stored in the file (`dataChecksum` in
    /// v4, `checksum` otherwise).
    pub checksum: u64,
    /// v4: the `data` string the checksum covers.
    pub data: Option<String>,
}

impl CpuCheckpoint {
    /// Reads the file's bytes as the kubelet does: a v4 file (with `data`)
    /// by its data checksum and nothing else; otherwise first as a v1
    /// checkpoint, then as v3 or v2, each decoded and its checksum verified
    /// (a stored v2 checksum of 0 is accepted, for files of the old
    /// backend); the v2 error is the one reported.
    ///
    /// # Errors
    /// [`CheckpointError::Decode`], [`CheckpointError::Corrupt`],
    /// [`CheckpointError::V1Entries`] for a v1 file naming containers, or
    /// [`CheckpointError::Unsupported`] for v3 pod-level entries.
    pub fn parse(bytes: &[u8]) -> Result<CpuCheckpoint, CheckpointError> {
        let value = go_json::parse(bytes)?;
        if let Some(layer) = data_layer(&value, "state.CPUManagerCheckpoint")? {
            let mut checkpoint = decode_v2(&parse_data(&layer, "cpu manager")?)?;
            checkpoint.version = 4;
            checkpoint.checksum = layer.stored;
            checkpoint.data = Some(layer.data);
            return Ok(checkpoint);
        }
        if let Ok(v1) = decode_v1(&value) {
            return v1.migrate();
        }
        let mut checkpoint = decode_v2(&value)?;
        if checkpoint.checksum != 0 {
            checkpoint.version = 3;
            if u64::from(checkpoint.computed_checksum()) != checkpoint.checksum {
                checkpoint.version = 2;
                verify_checksum(checkpoint.checksum, checkpoint.computed_checksum())?;
            }
        }
        if checkpoint.version == 3 && !checkpoint.pod_entries.is_empty() {
            return Err(pod_entries_unsupported());
        }
        Ok(checkpoint)
    }

    /// The checksum of the content (checksum field taken as 0), computed
    /// the kubelet's way for the file's format.
    pub fn computed_checksum(&self) -> u32 {
        if let Some(data) = &self.data {
            return data_checksum(data);
        }
        let mut spew = Spew::default();
        spew.raw("(*state.CPUManagerCheckpoint){");
        spew.field("PolicyName", "string").raw(&self.policy_name);
        spew.field("DefaultCPUSet", "string").raw(&self.default_cpu_set);
        spew.field("Entries", "map[string]map[string]string");
        spew.map(self.entries.as_ref(), |s, pod, containers| {
            s.raw(pod).raw(":");
            s.map(containers.as_ref(), |s, container, cpus| {
                s.raw(container).raw(":").raw(cpus);
            });
        });
        if self.version == 3 {
            // Only an empty map is printed here: a pod entry prints the
            // kubelet's CPUSet struct, and parse refuses v3 files with any.
            spew.field("PodEntries", "state.PodCPUAssignments").raw("map[]");
        }
        spew.field("Checksum", "checksum.Checksum").raw("0}");
        fnv32a(spew.into_string().as_bytes())
    }

    /// The state the CPU manager restores with `configured_policy`
    /// (`cpuManagerPolicy`): the policy must be the checkpoint's, and every
    /// CPU list must parse.
    ///
    /// # Errors
    /// [`CheckpointError::PolicyMismatch`], [`CheckpointError::DefaultCpuSet`],
    /// [`CheckpointError::ContainerCpuSet`], with the kubelet's texts.
    pub fn to_state(&self, configured_policy: &str) -> Result<CpuManagerState, CheckpointError> {
        check_policy(CheckpointKind::Cpu, configured_policy, &self.policy_name)?;
        if !self.pod_entries.is_empty() {
            return Err(pod_entries_unsupported());
        }
        let default_cpu_set = cpu_set(&self.default_cpu_set).map_err(|error| CheckpointError::DefaultCpuSet {
            text: self.default_cpu_set.clone(),
            error,
        })?;
        let mut assignments = BTreeMap::new();
        for (pod, containers) in self.entries.iter().flatten() {
            let mut parsed = BTreeMap::new();
            for (container, text) in containers.iter().flatten() {
                let cpus = cpu_set(text).map_err(|error| CheckpointError::ContainerCpuSet {
                    pod: pod.clone(),
                    container: container.clone(),
                    text: text.clone(),
                    error,
                })?;
                parsed.insert(container.clone(), cpus);
            }
            assignments.insert(pod.clone(), parsed);
        }
        Ok(CpuManagerState {
            default_cpu_set,
            assignments,
        })
    }
}

fn pod_entries_unsupported() -> CheckpointError {
    CheckpointError::Unsupported(
        "podEntries: pod-level CPU assignments (PodLevelResourceManagers) cannot be restored by topoalign".to_owned(),
    )
}

/// `cpuset.Parse` into a set; ids beyond [`CpuSet::MAX_CPU_ID`] (the
/// kernel's limit) are refused, so a hostile `0-4000000000` costs nothing.
fn cpu_set(text: &str) -> Result<CpuSet, String> {
    let list = parse_cpu_list(text)?;
    let max = CpuSet::MAX_CPU_ID;
    list.to_cpu_set(i64::from(max))
        .ok_or_else(|| format!("CPU ids above {max} are not supported"))
}

/// The v1 format: entries keyed by container id.
struct V1 {
    policy_name: String,
    default_cpu_set: String,
    entries: Option<BTreeMap<String, String>>,
    checksum: u64,
}

impl V1 {
    fn computed_checksum(&self) -> u32 {
        // The kubelet prints the v1 struct, then renames its type to the v2
        // name before hashing.
        let mut spew = Spew::default();
        spew.raw("(*state.CPUManagerCheckpoint){");
        spew.field("PolicyName", "string").raw(&self.policy_name);
        spew.field("DefaultCPUSet", "string").raw(&self.default_cpu_set);
        spew.field("Entries", "map[string]string");
        spew.map(self.entries.as_ref(), |s, id, cpus| {
            s.raw(id).raw(":").raw(cpus);
        });
        spew.field("Checksum", "checksum.Checksum").raw("0}");
        fnv32a(spew.into_string().as_bytes())
    }

    /// `mustMigrateV1CheckpointToV2Checkpoint`: container ids would need
    /// the container runtime to become pod uids and names.
    fn migrate(self) -> Result<CpuCheckpoint, CheckpointError> {
        if let Some(id) = self.entries.iter().flatten().map(|(id, _)| id).next() {
            return Err(CheckpointError::V1Entries(id.clone()));
        }
        Ok(CpuCheckpoint {
            version: 1,
            policy_name: self.policy_name,
            default_cpu_set: self.default_cpu_set,
            entries: Some(BTreeMap::new()),
            pod_entries: BTreeMap::new(),
            checksum: self.checksum,
            data: None,
        })
    }
}

fn decode_v1(value: &Value) -> Result<V1, CheckpointError> {
    let at = |path| At {
        go_struct: "CPUManagerCheckpointV1",
        path,
    };
    let Some(object) = go_json::top_object(value, "state.CPUManagerCheckpointV1")? else {
        return Ok(V1 {
            policy_name: String::new(),
            default_cpu_set: String::new(),
            entries: Some(BTreeMap::new()),
            checksum: 0,
        });
    };
    let entries = match go_json::object(go_json::field(object, "entries"), at("entries"), "map[string]string")? {
        None => Some(BTreeMap::new()),
        Some(None) => None,
        Some(Some(map)) => Some(
            map.iter()
                .map(|(id, cpus)| Ok((id.clone(), go_json::string(Some(cpus), at("entries"))?)))
                .collect::<Result<_, CheckpointError>>()?,
        ),
    };
    let v1 = V1 {
        policy_name: go_json::string(go_json::field(object, "policyName"), at("policyName"))?,
        default_cpu_set: go_json::string(go_json::field(object, "defaultCpuSet"), at("defaultCpuSet"))?,
        entries,
        checksum: go_json::uint64(go_json::field(object, "checksum"), at("checksum"))?,
    };
    if v1.checksum != 0 {
        verify_checksum(v1.checksum, v1.computed_checksum())?;
    }
    Ok(v1)
}

fn decode_v2(value: &Value) -> Result<CpuCheckpoint, CheckpointError> {
    let at = |path| At {
        go_struct: "CPUManagerCheckpoint",
        path,
    };
    let Some(object) = go_json::top_object(value, "state.CPUManagerCheckpoint")? else {
        return Ok(CpuCheckpoint {
            version: 2,
            policy_name: String::new(),
            default_cpu_set: String::new(),
            entries: Some(BTreeMap::new()),
            pod_entries: BTreeMap::new(),
            checksum: 0,
            data: None,
        });
    };
    let entries = match go_json::object(
        go_json::field(object, "entries"),
        at("entries"),
        "map[string]map[string]string",
    )? {
        None => Some(BTreeMap::new()),
        Some(None) => None,
        Some(Some(pods)) => {
            let mut entries = BTreeMap::new();
            for (pod, containers) in pods {
                let containers = match go_json::object(Some(containers), at("entries"), "map[string]string")? {
                    Some(Some(map)) => Some(
                        map.iter()
                            .map(|(c, cpus)| Ok((c.clone(), go_json::string(Some(cpus), at("entries"))?)))
                            .collect::<Result<_, CheckpointError>>()?,
                    ),
                    _ => None,
                };
                entries.insert(pod.clone(), containers);
            }
            Some(entries)
        }
    };
    let mut pod_entries = BTreeMap::new();
    if let Some(Some(pods)) = go_json::object(
        go_json::field(object, "podEntries"),
        at("podEntries"),
        "state.PodCPUAssignments",
    )? {
        for (pod, entry) in pods {
            let cpus = match go_json::object(Some(entry), at("podEntries"), "state.PodEntry")? {
                Some(Some(fields)) => go_json::string(go_json::field(fields, "cpuSet"), at("podEntries.cpuSet"))?,
                _ => String::new(),
            };
            pod_entries.insert(pod.clone(), cpus);
        }
    }
    Ok(CpuCheckpoint {
        version: 2,
        policy_name: go_json::string(go_json::field(object, "policyName"), at("policyName"))?,
        default_cpu_set: go_json::string(go_json::field(object, "defaultCpuSet"), at("defaultCpuSet"))?,
        entries,
        pod_entries,
        checksum: go_json::uint64(go_json::field(object, "checksum"), at("checksum"))?,
        data: None,
    })
}
