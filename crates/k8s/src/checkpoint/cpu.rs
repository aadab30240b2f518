//! `cpu_manager_state`: the CPU manager's checkpoint (formats v4 of v1.37,
//! v3 of v1.36 with pod-level resource managers, v2, and v1.32's fallback
//! to v1), read and checked as the kubelet's `stateCheckpoint.restoreState`
//! reads it.

use std::collections::BTreeMap;

use serde_json::Value;
use topoalign_engine::CpuManagerState;
use topoalign_model::CpuSet;

use super::envelope::{self, Enveloped, verify_checksum};
use super::go_json::{self, At, Writer};
use super::spew::{Spew, fnv32a};
use super::{CheckpointError, CheckpointKind, check_policy};
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
    /// `podEntries` (v3, v4): pod uid → the pod's CPUs, for pods whose
    /// CPUs the pod-level resource managers assigned. The kubelet parses
    /// them while decoding (its `PodEntry` holds a CPU set, not a string).
    pub pod_entries: BTreeMap<String, CpuSet>,
    /// The authoritative checksum stored in the file (`dataChecksum` in
    /// v4, `checksum` otherwise).
    pub checksum: u64,
    /// v4: the `data` string the checksum covers.
    pub data: Option<String>,
    /// `baselines` (v4, with `InPlacePodVerticalScalingExclusiveCPUs`):
    /// pod uid → container → the CPU list given at admission. Kept so the
    /// file is written back as read; the restore does not need it.
    pub baselines: BTreeMap<String, BTreeMap<String, String>>,
}

impl CpuCheckpoint {
    /// Reads the file's bytes as the kubelet does: a v4 file (with `data`)
    /// by its data checksum and nothing else; otherwise first as a v1
    /// checkpoint, then as v3 or v2, each decoded and its checksum verified
    /// (a stored v2 checksum of 0 is accepted, for files of the old
    /// backend); the v2 error is the one reported.
    ///
    /// # Errors
    /// [`CheckpointError::Decode`], [`CheckpointError::Corrupt`] or
    /// [`CheckpointError::V1Entries`] for a v1 file naming containers.
    pub fn parse(bytes: &[u8]) -> Result<CpuCheckpoint, CheckpointError> {
        envelope::read_data_layer_direct(bytes).map_or_else(|| Self::parse_tree(bytes), Ok)
    }

    /// Reads the file's bytes as the kubelet release `reading` describes
    /// reads them ([`Reading`]): [`Self::parse`] for v1.37; before, the
    /// `data` layer unread, and the v3 layout (`podEntries`) only in v1.36
    /// with `PodLevelResourceManagers` — otherwise the v2 struct's checksum
    /// is the one verified.
    ///
    /// # Errors
    /// As [`Self::parse`].
    ///
    /// [`Reading`]: super::Reading
    pub fn parse_for(bytes: &[u8], reading: super::Reading) -> Result<CpuCheckpoint, CheckpointError> {
        if reading.data_layer {
            return Self::parse(bytes);
        }
        let value = go_json::parse(bytes)?;
        if let Ok(v1) = decode_v1(&value) {
            return v1.migrate();
        }
        let mut checkpoint = decode_v2(&value)?;
        checkpoint.data = None;
        checkpoint.version = 2;
        if checkpoint.checksum != 0 {
            if reading.pod_entries {
                checkpoint.version = 3;
                if u64::from(checkpoint.computed_checksum()) != checkpoint.checksum {
                    checkpoint.version = 2;
                }
            }
            if checkpoint.version == 2 {
                verify_checksum(checkpoint.checksum, checkpoint.computed_checksum())?;
            }
        }
        if checkpoint.version == 2 {
            checkpoint.pod_entries.clear();
        }
        Ok(checkpoint)
    }

    /// [`Self::parse`] through the generic tree, every layout and every
    /// error: the reference the direct reading of the data layout agrees
    /// with.
    pub(crate) fn parse_tree(bytes: &[u8]) -> Result<CpuCheckpoint, CheckpointError> {
        let value = go_json::parse(bytes)?;
        if let Some(checkpoint) = envelope::read_data_layer(&value)? {
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
        if checkpoint.version == 2 {
            // A v2 struct has no pod entries: the kubelet's v2 decoding
            // drops them.
            checkpoint.pod_entries.clear();
        }
        Ok(checkpoint)
    }

    /// The checksum of the content (checksum field taken as 0), computed
    /// the kubelet's way for the file's format: for v4 the data checksum.
    pub fn computed_checksum(&self) -> u32 {
        envelope::computed_checksum(self.data.as_deref(), || Enveloped::struct_checksum(self))
    }

    /// The v1 struct of a migrated checkpoint: its container-id entries
    /// were empty (or migration would have failed).
    fn v1(&self) -> V1 {
        V1 {
            policy_name: self.policy_name.clone(),
            default_cpu_set: self.default_cpu_set.clone(),
            entries: self.entries.as_ref().map(|_| BTreeMap::new()),
            checksum: 0,
        }
    }

    /// The `checksum` field: FNV-32a over the printing of the v2 struct
    /// (the v3 struct with `pod_entries`; v4 writes the v2 one too), under
    /// the type name every release hashes, `state.CPUManagerCheckpoint`.
    fn v2_checksum(&self, with_pod_entries: bool) -> u32 {
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
        if with_pod_entries {
            // A pod entry holds the kubelet's `cpuset.CPUSet`, printed as
            // the struct it is: its map of CPU ids, in ascending order.
            spew.field("PodEntries", "state.PodCPUAssignments");
            spew.map(Some(&self.pod_entries), |s, pod, cpus| {
                s.raw(pod).raw(":{CPUSet:(cpuset.CPUSet){elems:(map[int]struct {})map[");
                for (i, cpu) in cpus.iter().enumerate() {
                    if i > 0 {
                        s.raw(" ");
                    }
                    s.display(cpu).raw(":{}");
                }
                s.raw("]}}");
            });
        }
        spew.field("Checksum", "checksum.Checksum").raw("0}");
        fnv32a(spew.into_string().as_bytes())
    }

    /// The checkpoint a kubelet writes for `state` under `policy_name`
    /// (`none`, `static`) in `version`'s layout (1.32's 2, 1.36's 3 with
    /// pod-level resource managers, 1.37's 4). Pod-level assignments are
    /// written in the layouts that have them (3 and 4) and left out of the
    /// others, as a kubelet without `PodLevelResourceManagers` leaves them.
    pub fn of_state(policy_name: &str, state: &CpuManagerState, version: u8) -> CpuCheckpoint {
        let entries = state
            .assignments
            .iter()
            .map(|(pod, containers)| {
                let containers = containers
                    .iter()
                    .map(|(name, cpus)| (name.clone(), cpus.to_string()))
                    .collect();
                (pod.clone(), Some(containers))
            })
            .collect();
        let checkpoint = CpuCheckpoint {
            version,
            policy_name: policy_name.to_owned(),
            default_cpu_set: state.default_cpu_set.to_string(),
            entries: Some(entries),
            pod_entries: if version >= 3 {
                state.pod_assignments.clone()
            } else {
                BTreeMap::new()
            },
            checksum: 0,
            data: None,
            baselines: BTreeMap::new(),
        };
        envelope::seal(checkpoint, CpuCheckpoint::computed_checksum)
    }

    /// The file's bytes as the kubelet's `MarshalCheckpoint` of
    /// `version`'s layout writes them, checksums computed afresh (v4: the
    /// `data` string made from the fields, then both checksums). Byte for
    /// byte the kubelet's file for the same content.
    ///
    /// # Errors
    /// [`CheckpointError::Unsupported`] for pod-level entries in a v1 or
    /// v2 file (which has no place for them), and for a v1 file with
    /// container entries.
    pub fn to_bytes(&self) -> Result<Vec<u8>, CheckpointError> {
        if !self.pod_entries.is_empty() && self.version < 3 {
            return Err(CheckpointError::Unsupported(format!(
                "podEntries: a v{} CPU checkpoint has no place for pod-level CPU assignments",
                self.version
            )));
        }
        let mut json = Writer::default();
        json.raw("{");
        json.key("policyName").string(&self.policy_name);
        json.key("defaultCpuSet").string(&self.default_cpu_set);
        if self.version == 1 {
            if self.entries.iter().flatten().next().is_some() {
                return Err(CheckpointError::Unsupported(
                    "a v1 CPU checkpoint keys entries by container id; topoalign writes v1 files without entries"
                        .to_owned(),
                ));
            }
            json.key("checksum").number(self.v1().computed_checksum()).raw("}");
            return Ok(json.into_string().into_bytes());
        }
        self.write_entries(&mut json);
        if self.version == 3 {
            self.write_pod_entries(&mut json);
        }
        Ok(envelope::close(self, json))
    }

    /// `podEntries` (omitted when empty), each `{"cpuSet":"..."}` with an
    /// empty set's `cpuSet` left out.
    fn write_pod_entries(&self, json: &mut Writer) {
        if !self.pod_entries.is_empty() {
            json.key("podEntries").map(Some(&self.pod_entries), |json, cpus| {
                json.raw("{");
                if !cpus.is_empty() {
                    json.key("cpuSet").string(&cpus.to_string());
                }
                json.raw("}");
            });
        }
    }

    /// `entries` (omitted when empty or nil, Go's `omitempty`).
    fn write_entries(&self, json: &mut Writer) {
        if let Some(entries) = self.entries.as_ref().filter(|e| !e.is_empty()) {
            json.key("entries").map(Some(entries), |json, containers| {
                json.map(containers.as_ref(), |json, cpus| {
                    json.string(cpus);
                });
            });
        }
    }
}

impl Enveloped for CpuCheckpoint {
    const GO_STRUCT: &'static str = "state.CPUManagerCheckpoint";
    const WHAT: &'static str = "cpu manager";
    const DATA_VERSION: u8 = 4;

    fn decode(value: &Value) -> Result<Self, CheckpointError> {
        decode_v2(value)
    }

    fn decode_direct(data: &str) -> Option<Self> {
        let data: CpuData = serde_json::from_str(data).ok()?;
        let mut pod_entries = BTreeMap::new();
        for (pod, entry) in data.pod_entries {
            pod_entries.insert(pod, cpu_set(&entry.cpu_set).ok()?);
        }
        Some(CpuCheckpoint {
            version: 2,
            policy_name: data.policy_name,
            default_cpu_set: data.default_cpu_set,
            entries: Some(data.entries),
            pod_entries,
            checksum: 0,
            data: None,
            baselines: data
                .baselines
                .into_iter()
                .map(|(pod, containers)| (pod, containers.into_iter().map(|(c, b)| (c, b.baseline)).collect()))
                .collect(),
        })
    }

    /// v1's own checksum; otherwise the v2 struct's (v3's with its pod
    /// entries).
    fn struct_checksum(&self) -> u32 {
        if self.version == 1 {
            self.v1().computed_checksum()
        } else {
            self.v2_checksum(self.version == 3)
        }
    }

    /// The v4 `data` string: `CPUManagerCheckpointData` as JSON.
    fn data_json(&self) -> String {
        let mut json = Writer::default();
        json.raw("{");
        json.key("policyName").string(&self.policy_name);
        json.key("defaultCpuSet").string(&self.default_cpu_set);
        self.write_entries(&mut json);
        self.write_pod_entries(&mut json);
        if !self.baselines.is_empty() {
            json.key("baselines").map(Some(&self.baselines), |json, containers| {
                json.map(Some(containers), |json, cpus| {
                    json.raw("{").key("baseline").string(cpus).raw("}");
                });
            });
        }
        json.raw("}");
        json.into_string()
    }

    fn version(&self) -> u8 {
        self.version
    }

    fn envelope_mut(&mut self) -> (&mut u8, &mut u64, &mut Option<String>) {
        (&mut self.version, &mut self.checksum, &mut self.data)
    }
}

impl CpuCheckpoint {
    /// The state the CPU manager restores with `configured_policy`
    /// (`cpuManagerPolicy`): the policy must be the checkpoint's, and every
    /// CPU list must parse. Pod-level entries are carried; the manager
    /// keeps them only with `PodLevelResourceManagers` on, as the kubelet.
    ///
    /// # Errors
    /// [`CheckpointError::PolicyMismatch`], [`CheckpointError::DefaultCpuSet`],
    /// [`CheckpointError::ContainerCpuSet`], with the kubelet's texts.
    pub fn to_state(&self, configured_policy: &str) -> Result<CpuManagerState, CheckpointError> {
        check_policy(CheckpointKind::Cpu, configured_policy, &self.policy_name)?;
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
            pod_assignments: self.pod_entries.clone(),
        })
    }
}

/// `cpuset.Parse` into a set; ids beyond [`CpuSet::MAX_CPU_ID`] (the
/// kernel's limit) are refused, so a hostile `0-4000000000` costs nothing.
fn cpu_set(text: &str) -> Result<CpuSet, String> {
    let list = parse_cpu_list(text).map_err(|e| e.to_string())?;
    let max = CpuSet::MAX_CPU_ID;
    list.to_cpu_set(i64::from(max))
        .ok_or_else(|| format!("CPU ids above {max} are not supported"))
}

kubelet_object! {
    /// The v4 `data` payload as a kubelet writes it, for
    /// [`Enveloped::decode_direct`]: a `null` only where [`decode_v2`]
    /// takes it as `None` too (a pod's container map).
    struct CpuData {
        policy_name: String = "policyName",
        default_cpu_set: String = "defaultCpuSet",
        entries: BTreeMap<String, Option<BTreeMap<String, String>>> = "entries" (default),
        pod_entries: BTreeMap<String, PodCpus> = "podEntries" (default),
        baselines: BTreeMap<String, BTreeMap<String, Baseline>> = "baselines" (default),
    }
}

kubelet_object! {
    struct PodCpus {
        cpu_set: String = "cpuSet" (default),
    }
}

kubelet_object! {
    struct Baseline {
        baseline: String = "baseline" (default),
    }
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
            baselines: BTreeMap::new(),
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
            baselines: BTreeMap::new(),
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
            let text = match go_json::object(Some(entry), at("podEntries"), "state.PodEntry")? {
                Some(Some(fields)) => go_json::string(go_json::field(fields, "cpuSet"), at("podEntries.cpuSet"))?,
                _ => String::new(),
            };
            // `PodEntry.UnmarshalJSON` parses the set while decoding.
            let cpus =
                cpu_set(&text).map_err(|error| CheckpointError::Decode(format!("failed to parse cpuset: {error}")))?;
            pod_entries.insert(pod.clone(), cpus);
        }
    }
    let mut baselines = BTreeMap::new();
    if let Some(Some(pods)) = go_json::object(
        go_json::field(object, "baselines"),
        at("baselines"),
        "map[string]map[string]state.ContainerCPUs",
    )? {
        for (pod, containers) in pods {
            let mut by_container = BTreeMap::new();
            if let Some(Some(containers)) =
                go_json::object(Some(containers), at("baselines"), "map[string]state.ContainerCPUs")?
            {
                for (container, entry) in containers {
                    let cpus = match go_json::object(Some(entry), at("baselines"), "state.ContainerCPUs")? {
                        Some(Some(fields)) => {
                            go_json::string(go_json::field(fields, "baseline"), at("baselines.baseline"))?
                        }
                        _ => String::new(),
                    };
                    by_container.insert(container.clone(), cpus);
                }
            }
            baselines.insert(pod.clone(), by_container);
        }
    }
    Ok(CpuCheckpoint {
        version: 2,
        baselines,
        policy_name: go_json::string(go_json::field(object, "policyName"), at("policyName"))?,
        default_cpu_set: go_json::string(go_json::field(object, "defaultCpuSet"), at("defaultCpuSet"))?,
        entries,
        pod_entries,
        checksum: go_json::uint64(go_json::field(object, "checksum"), at("checksum"))?,
        data: None,
    })
}
