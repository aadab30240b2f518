//! `device-plugins/kubelet_internal_checkpoint`: the device manager's
//! checkpoint (the same layout in v1.32–v1.37), read and checked as the
//! kubelet's device manager `readCheckpoint` reads it: every container's
//! device ids per NUMA node (`PodDeviceEntries`) and the devices each
//! plugin registered (`RegisteredDevices`).
//!
//! Unlike the CPU and memory managers, a kubelet that cannot read this
//! file goes on with no device record ("Continue after failing to read
//! checkpoint file"); what that means is the caller's to say.

use std::collections::BTreeMap;

use base64::Engine;
use serde_json::Value;
use topoalign_engine::DeviceAssignments;
use topoalign_model::Machine;

use super::CheckpointError;
use super::envelope::verify_checksum;
use super::go_json::{self, At, Writer};
use super::spew::{Spew, fnv32a};

/// The device checkpoint's path under the kubelet's root directory.
pub const DEVICE_CHECKPOINT: &str = "device-plugins/kubelet_internal_checkpoint";

/// A device manager checkpoint as the kubelet decodes it. `None` stands
/// for Go's nil (`null` or absent), which prints differently in the
/// checksum from an empty map or slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceCheckpoint {
    /// `Data.PodDeviceEntries`, in file order.
    pub entries: Option<Vec<DeviceEntry>>,
    /// `Data.RegisteredDevices`: resource → device ids.
    pub registered: Option<BTreeMap<String, Option<Vec<String>>>>,
    /// The checksum stored in the file.
    pub checksum: u64,
}

/// One `PodDevicesEntry`: the devices of one resource held by one
/// container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceEntry {
    pub pod_uid: String,
    pub container: String,
    pub resource: String,
    /// `DeviceIDs`: NUMA node (-1 for none) → device ids.
    pub device_ids: Option<BTreeMap<i64, Option<Vec<String>>>>,
    /// `AllocResp`: the plugin's serialized allocate response.
    pub alloc_resp: Option<Vec<u8>>,
}

impl DeviceCheckpoint {
    /// Reads the file's bytes and verifies the checksum.
    ///
    /// # Errors
    /// [`CheckpointError::Decode`] or [`CheckpointError::Corrupt`].
    pub fn parse(bytes: &[u8]) -> Result<DeviceCheckpoint, CheckpointError> {
        match decode_direct(bytes) {
            Some(checkpoint) if checkpoint.checksum == u64::from(checkpoint.computed_checksum()) => Ok(checkpoint),
            _ => Self::parse_tree(bytes),
        }
    }

    /// [`Self::parse`] through the generic tree, every file and every
    /// error: the reference the direct reading agrees with.
    pub(crate) fn parse_tree(bytes: &[u8]) -> Result<DeviceCheckpoint, CheckpointError> {
        let checkpoint = decode(&go_json::parse(bytes)?)?;
        verify_checksum(checkpoint.checksum, checkpoint.computed_checksum())?;
        Ok(checkpoint)
    }

    /// The checksum of the content, computed the kubelet's way (over the
    /// `Data` struct alone).
    pub fn computed_checksum(&self) -> u32 {
        let mut spew = Spew::default();
        spew.raw("(checkpoint.checkpointData){");
        spew.field("PodDeviceEntries", "[]checkpoint.PodDevicesEntry");
        spew.slice(self.entries.as_ref(), |s, entry| {
            s.raw("{");
            s.field("PodUID", "string").raw(&entry.pod_uid);
            s.field("ContainerName", "string").raw(&entry.container);
            s.field("ResourceName", "string").raw(&entry.resource);
            s.field("DeviceIDs", "checkpoint.DevicesPerNUMA");
            s.map(entry.device_ids.as_ref(), |s, numa, ids| {
                s.display(numa).raw(":");
                s.slice(ids.as_ref(), |s, id| {
                    s.raw(id);
                });
            });
            s.field("AllocResp", "[]uint8");
            s.slice(entry.alloc_resp.as_ref(), |s, byte| {
                s.display(byte);
            });
            s.raw("}");
        });
        spew.field("RegisteredDevices", "map[string][]string");
        spew.map(self.registered.as_ref(), |s, resource, ids| {
            s.raw(resource).raw(":");
            s.slice(ids.as_ref(), |s, id| {
                s.raw(id);
            });
        });
        spew.raw("}");
        fnv32a(spew.into_string().as_bytes())
    }

    /// The checkpoint a kubelet writes for `assignments` on `machine`:
    /// one entry per pod, container and resource (in that order; the
    /// kubelet's follows Go map order), each id under the NUMA nodes its
    /// device has (`-1` for none), an empty allocate response, and every
    /// device of the machine registered (ids sorted).
    pub fn of_assignments(assignments: &DeviceAssignments, machine: &Machine) -> DeviceCheckpoint {
        let devices = machine.devices();
        let mut entries = Vec::new();
        for (pod, containers) in assignments {
            for (container, resources) in containers {
                for (resource, ids) in resources {
                    let mut per_numa: BTreeMap<i64, Option<Vec<String>>> = BTreeMap::new();
                    for id in ids {
                        let numa = devices
                            .get(resource)
                            .and_then(|list| list.iter().find(|d| &d.id == id))
                            .map(|d| d.numa.clone())
                            .unwrap_or_default();
                        let keys: Vec<i64> = if numa.is_empty() {
                            vec![-1]
                        } else {
                            numa.iter()
                                .map(|&n| i64::try_from(machine.numa_label(n)).unwrap_or(i64::MAX))
                                .collect()
                        };
                        for key in keys {
                            per_numa
                                .entry(key)
                                .or_default()
                                .get_or_insert_with(Vec::new)
                                .push(id.clone());
                        }
                    }
                    entries.push(DeviceEntry {
                        pod_uid: pod.clone(),
                        container: container.clone(),
                        resource: resource.clone(),
                        device_ids: Some(per_numa),
                        alloc_resp: Some(Vec::new()),
                    });
                }
            }
        }
        let registered = devices
            .iter()
            .map(|(resource, list)| {
                let mut ids: Vec<String> = list.iter().map(|d| d.id.clone()).collect();
                ids.sort();
                (resource.clone(), Some(ids))
            })
            .collect();
        let mut checkpoint = DeviceCheckpoint {
            entries: Some(entries),
            registered: Some(registered),
            checksum: 0,
        };
        checkpoint.checksum = u64::from(checkpoint.computed_checksum());
        checkpoint
    }

    /// The file's bytes as the kubelet's `MarshalCheckpoint` writes them,
    /// the checksum computed afresh: byte for byte the kubelet's file for
    /// the same content in the same order.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut json = Writer::default();
        json.raw("{");
        json.key("Data").raw("{");
        json.key("PodDeviceEntries")
            .slice(self.entries.as_ref(), |json, entry| {
                json.raw("{");
                json.key("PodUID").string(&entry.pod_uid);
                json.key("ContainerName").string(&entry.container);
                json.key("ResourceName").string(&entry.resource);
                json.key("DeviceIDs").map(entry.device_ids.as_ref(), |json, ids| {
                    json.slice(ids.as_ref(), |json, id| {
                        json.string(id);
                    });
                });
                json.key("AllocResp");
                match &entry.alloc_resp {
                    None => json.raw("null"),
                    Some(bytes) => json.string(&base64::engine::general_purpose::STANDARD.encode(bytes)),
                };
                json.raw("}");
            });
        json.key("RegisteredDevices")
            .map(self.registered.as_ref(), |json, ids| {
                json.slice(ids.as_ref(), |json, id| {
                    json.string(id);
                });
            });
        json.raw("}");
        json.key("Checksum").number(self.computed_checksum());
        json.raw("}");
        json.into_string().into_bytes()
    }

    /// Who holds which devices: pod uid → container → resource → ids
    /// (sorted, each once), as the device manager restores it.
    pub fn assignments(&self) -> DeviceAssignments {
        let mut assignments = DeviceAssignments::new();
        for entry in self.entries.iter().flatten() {
            let ids: &mut Vec<String> = assignments
                .entry(entry.pod_uid.clone())
                .or_default()
                .entry(entry.container.clone())
                .or_default()
                .entry(entry.resource.clone())
                .or_default();
            ids.extend(
                entry
                    .device_ids
                    .iter()
                    .flatten()
                    .flat_map(|(_, ids)| ids.iter().flatten().cloned()),
            );
            ids.sort();
            ids.dedup();
        }
        assignments
    }

    /// The device ids the plugins registered, per resource.
    pub fn registered_devices(&self) -> BTreeMap<String, Vec<String>> {
        self.registered
            .iter()
            .flatten()
            .map(|(resource, ids)| {
                let mut ids: Vec<String> = ids.iter().flatten().cloned().collect();
                ids.sort();
                (resource.clone(), ids)
            })
            .collect()
    }
}

/// The file as a kubelet writes it, read straight into the checkpoint
/// without the generic tree: `Some` only where [`decode`] of its tree gives
/// the same checkpoint — exactly these names, each once, no `null` (which
/// [`decode`] takes as nil), every NUMA id spelled once; anything else is
/// left to [`decode`].
pub(super) fn decode_direct(bytes: &[u8]) -> Option<DeviceCheckpoint> {
    kubelet_object! {
        struct File {
            data: Data = "Data",
            checksum: u64 = "Checksum",
        }
    }
    kubelet_object! {
        struct Data {
            entries: Vec<Entry> = "PodDeviceEntries",
            registered: BTreeMap<String, Vec<String>> = "RegisteredDevices",
        }
    }
    kubelet_object! {
        struct Entry {
            pod_uid: String = "PodUID",
            container: String = "ContainerName",
            resource: String = "ResourceName",
            device_ids: BTreeMap<String, Vec<String>> = "DeviceIDs",
            alloc_resp: String = "AllocResp",
        }
    }
    let file: File = serde_json::from_slice(bytes).ok()?;
    let mut entries = Vec::with_capacity(file.data.entries.len());
    for entry in file.data.entries {
        let mut device_ids = BTreeMap::new();
        for (key, ids) in entry.device_ids {
            let numa = crate::go::parse_int64(&key).ok()?;
            if device_ids.insert(numa, Some(ids)).is_some() {
                return None;
            }
        }
        entries.push(DeviceEntry {
            pod_uid: entry.pod_uid,
            container: entry.container,
            resource: entry.resource,
            device_ids: Some(device_ids),
            alloc_resp: Some(
                base64::engine::general_purpose::STANDARD
                    .decode(entry.alloc_resp)
                    .ok()?,
            ),
        });
    }
    Some(DeviceCheckpoint {
        entries: Some(entries),
        registered: Some(
            file.data
                .registered
                .into_iter()
                .map(|(resource, ids)| (resource, Some(ids)))
                .collect(),
        ),
        checksum: file.checksum,
    })
}

fn at(path: &str) -> At<'_> {
    At {
        go_struct: "Data",
        path,
    }
}

fn decode(value: &Value) -> Result<DeviceCheckpoint, CheckpointError> {
    let Some(object) = go_json::top_object(value, "checkpoint.Data")? else {
        return Ok(DeviceCheckpoint {
            entries: None,
            registered: None,
            checksum: 0,
        });
    };
    let checksum = go_json::uint64(go_json::field(object, "Checksum"), at("Checksum"))?;
    let Some(Some(data)) = go_json::object(go_json::field(object, "Data"), at("Data"), "checkpoint.checkpointData")?
    else {
        return Ok(DeviceCheckpoint {
            entries: None,
            registered: None,
            checksum,
        });
    };
    let entries = go_json::array(
        go_json::field(data, "PodDeviceEntries"),
        at("Data.PodDeviceEntries"),
        "[]checkpoint.PodDevicesEntry",
    )?
    .map(|items| items.iter().map(decode_entry).collect::<Result<Vec<_>, _>>())
    .transpose()?;
    let registered = match go_json::object(
        go_json::field(data, "RegisteredDevices"),
        at("Data.RegisteredDevices"),
        "map[string][]string",
    )? {
        None | Some(None) => None,
        Some(Some(map)) => Some(
            map.iter()
                .map(|(resource, ids)| Ok((resource.clone(), strings(Some(ids), at("Data.RegisteredDevices"))?)))
                .collect::<Result<_, CheckpointError>>()?,
        ),
    };
    Ok(DeviceCheckpoint {
        entries,
        registered,
        checksum,
    })
}

fn decode_entry(item: &Value) -> Result<DeviceEntry, CheckpointError> {
    let at = |path| At {
        go_struct: "PodDevicesEntry",
        path,
    };
    let Some(Some(fields)) = go_json::object(Some(item), at("Data.PodDeviceEntries"), "checkpoint.PodDevicesEntry")?
    else {
        return Ok(DeviceEntry {
            pod_uid: String::new(),
            container: String::new(),
            resource: String::new(),
            device_ids: None,
            alloc_resp: None,
        });
    };
    let device_ids = match go_json::object(
        go_json::field(fields, "DeviceIDs"),
        at("Data.PodDeviceEntries.DeviceIDs"),
        "checkpoint.DevicesPerNUMA",
    )? {
        None | Some(None) => None,
        Some(Some(map)) => {
            let mut decoded = BTreeMap::new();
            for (key, ids) in map {
                let numa = crate::go::parse_int64(key).map_err(|_| {
                    CheckpointError::Decode(format!(
                        "json: cannot unmarshal number {key} into Go struct field PodDevicesEntry.Data.PodDeviceEntries.DeviceIDs of type int64"
                    ))
                })?;
                decoded.insert(numa, strings(Some(ids), at("Data.PodDeviceEntries.DeviceIDs"))?);
            }
            Some(decoded)
        }
    };
    let alloc_resp =
        match go_json::field(fields, "AllocResp") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => Some(base64::engine::general_purpose::STANDARD.decode(text).map_err(|e| {
                CheckpointError::Decode(format!("illegal base64 data in PodDevicesEntry.AllocResp: {e}"))
            })?),
            Some(other) => return Err(at("Data.PodDeviceEntries.AllocResp").type_error(other, "[]uint8")),
        };
    Ok(DeviceEntry {
        pod_uid: go_json::string(go_json::field(fields, "PodUID"), at("Data.PodDeviceEntries.PodUID"))?,
        container: go_json::string(
            go_json::field(fields, "ContainerName"),
            at("Data.PodDeviceEntries.ContainerName"),
        )?,
        resource: go_json::string(
            go_json::field(fields, "ResourceName"),
            at("Data.PodDeviceEntries.ResourceName"),
        )?,
        device_ids,
        alloc_resp,
    })
}

/// A Go `[]string`: `null` is nil.
fn strings(value: Option<&Value>, at: At<'_>) -> Result<Option<Vec<String>>, CheckpointError> {
    go_json::array(value, at, "[]string")?
        .map(|items| items.iter().map(|item| go_json::string(Some(item), at)).collect())
        .transpose()
}
