//! The kubelet's checkpoint files for the CPU, memory and device managers
//! (`/var/lib/kubelet/cpu_manager_state`, `memory_manager_state`,
//! `device-plugins/kubelet_internal_checkpoint`): reading them as the
//! kubelet does — Go `encoding/json` decoding, the checksum checked the
//! kubelet's way — and turning them into the engine's restore state; and
//! writing them as the kubelet does (`of_state` / `of_assignments`, then
//! `to_bytes`: Go's `json.Marshal` of the release's struct with its
//! checksums, byte for byte the kubelet's file for the same content).
//!
//! Layouts, by the release that writes them:
//!
//! - v1.32–v1.35, and v1.36 by default: the CPU checkpoint "v2" and the
//!   memory checkpoint "v1", one `checksum` over the struct;
//! - v1.36 with `PodLevelResourceManagers`: CPU "v3" and memory "v2", the
//!   same plus `podEntries` (in the checksum even when empty);
//! - v1.37: CPU "v4" and memory "v3", the old fields kept for older
//!   kubelets plus `data` (the checkpoint as a JSON string) and
//!   `dataChecksum`, the authoritative checksum, over that string.
//!
//! The struct checksum is FNV-32a over the `go-spew` printing (`%#v`,
//! sorted map keys, methods off) of the checkpoint struct with its
//! checksum set to 0 (`checkpointmanager/checksum` over
//! `hashutil.DeepHashObject`); [`spew`] prints our copies of those structs
//! byte for byte as Go would. The data checksum is the same hash over the
//! string's printing, `(string)` then the string. [`envelope`] owns both
//! checksums and the `data` layer for the CPU and memory checkpoints;
//! `print` the nil-or-list shape Go's JSON and spew printings share.
//!
//! Owns: the file formats ([`CpuCheckpoint`], [`MemoryCheckpoint`],
//! [`DeviceCheckpoint`]) both ways, their checksums, [`CheckpointError`] with the
//! kubelet's texts, and the conversion to [`CpuManagerState`] /
//! [`MemoryManagerState`] / device assignments. Must not touch: files
//! (callers pass and take the bytes; writing them atomically is theirs) or the managers' own start-up checks
//! (`validateState` is the managers' [`restore`]).
//!
//! [`restore`]: topoalign_engine::Node::restore
//! [`CpuManagerState`]: topoalign_engine::CpuManagerState
//! [`MemoryManagerState`]: topoalign_engine::MemoryManagerState

/// A struct read straight from a JSON object as a kubelet writes it, for
/// the direct readings: exactly the members named, each at most once (a
/// member marked `default` may be absent), and only from an object —
/// serde's derive would take a struct from an array too, which Go does
/// not. Any other input is an error, which leaves the file to the tree.
macro_rules! kubelet_object {
    ($(#[$meta:meta])* struct $name:ident { $($field:ident: $ty:ty = $key:literal $(($default:ident))?,)* }) => {
        $(#[$meta])*
        struct $name {
            $($field: $ty,)*
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct ObjectVisitor;
                impl<'de> serde::de::Visitor<'de> for ObjectVisitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                        f.write_str(concat!("a JSON object ", stringify!($name)))
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<$name, A::Error> {
                        $(let mut $field: Option<$ty> = None;)*
                        while let Some(key) = map.next_key::<crate::text::Text<'de>>()? {
                            match key.0.as_ref() {
                                $($key if $field.is_none() => $field = Some(map.next_value()?),)*
                                other => {
                                    return Err(<A::Error as serde::de::Error>::custom(format_args!(
                                        "member {other:?} unknown or repeated"
                                    )));
                                }
                            }
                        }
                        Ok($name {
                            $($field: kubelet_object!(@take A, $field, $key $(, $default)?),)*
                        })
                    }
                }
                deserializer.deserialize_map(ObjectVisitor)
            }
        }
    };
    (@take $a:ident, $field:ident, $key:literal) => {
        $field.ok_or_else(|| <$a::Error as serde::de::Error>::missing_field($key))?
    };
    (@take $a:ident, $field:ident, $key:literal, default) => {
        $field.unwrap_or_default()
    };
}

mod cpu;
mod device;
mod envelope;
mod go_json;
mod memory;
mod print;
mod spew;

pub use cpu::CpuCheckpoint;
pub use device::{DEVICE_CHECKPOINT, DeviceCheckpoint, DeviceEntry};
pub use memory::{BlockEntry, MemoryCheckpoint, NumaNodeEntry};
pub use spew::fnv32a;

use topoalign_model::{FeatureGates, KubeletVersion};

/// Which layouts a kubelet release reads from a CPU or memory checkpoint
/// file, whatever layout wrote it (a file left by a newer kubelet, after a
/// rollback; a copy diagnosed as an older release would read it).
///
/// - `data_layer` (v1.37): `data` with `dataChecksum` is authoritative
///   when set; the fields beside it are not read. Before v1.37 the
///   kubelet's structs have no such members and Go's decoder skips them:
///   the older fields (kept in the file for that reason) are all it reads,
///   verified by their own `checksum`.
/// - `pod_entries` (v1.36 with `PodLevelResourceManagers`, and v1.37): the
///   CPU v3 / memory v2 struct (`podEntries`, in its checksum) is tried
///   first. Without it the kubelet decodes only the CPU v2 / memory v1
///   struct and verifies that struct's checksum: a v1.36 file written with
///   the gate on (whose checksum covers `podEntries`) does not verify.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    pub data_layer: bool,
    pub pod_entries: bool,
}

impl Reading {
    /// What v1.37 reads: every layout ([`CpuCheckpoint::parse`]).
    pub const LATEST: Reading = Reading {
        data_layer: true,
        pod_entries: true,
    };

    /// What the kubelet of `version` with `gates` reads.
    pub fn of(version: KubeletVersion, gates: &FeatureGates) -> Reading {
        let data_layer = version.at_least(KubeletVersion::V1_37);
        Reading {
            data_layer,
            pod_entries: data_layer || gates.pod_level_managers(version),
        }
    }
}

/// The CPU manager's checkpoint file name in the kubelet's root directory.
pub const CPU_MANAGER_STATE: &str = "cpu_manager_state";
/// The memory manager's checkpoint file name.
pub const MEMORY_MANAGER_STATE: &str = "memory_manager_state";

/// Which manager a checkpoint belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CheckpointKind {
    Cpu,
    Memory,
}

impl CheckpointKind {
    /// The file name in the kubelet's root directory.
    pub fn file_name(self) -> &'static str {
        match self {
            CheckpointKind::Cpu => CPU_MANAGER_STATE,
            CheckpointKind::Memory => MEMORY_MANAGER_STATE,
        }
    }

    /// How the kubelet names the manager in its messages.
    fn manager(self) -> &'static str {
        match self {
            CheckpointKind::Cpu => "CPU manager",
            CheckpointKind::Memory => "memory manager",
        }
    }

    fn start_prefix(self) -> &'static str {
        match self {
            CheckpointKind::Cpu => "start cpu manager error",
            CheckpointKind::Memory => "start memory manager error",
        }
    }
}

/// Why the kubelet cannot restore its state from a checkpoint. Display is
/// the kubelet's inner text (what it puts after `could not restore state
/// from checkpoint: `); [`CheckpointError::kubelet_text`] gives the whole
/// message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// Not JSON the kubelet can decode into its checkpoint struct. The text
    /// is Go's where it matters most (`unexpected end of JSON input` for a
    /// cut file, `json: cannot unmarshal ...` for a wrong type); other
    /// syntax errors carry the JSON parser's description.
    #[error("{0}")]
    Decode(String),
    /// The stored checksum is not the checksum of the content
    /// (`CorruptCheckpointError`, whatever the mismatch).
    #[error("checkpoint is corrupted")]
    Corrupt { stored: u64, computed: u64 },
    /// The checkpoint was written under another policy.
    #[error("{}configured policy {} differs from state checkpoint policy {}",
        if *.kind == CheckpointKind::Memory { "[memorymanager] " } else { "" },
        crate::go::quote(.configured), crate::go::quote(.stored))]
    PolicyMismatch {
        kind: CheckpointKind,
        configured: String,
        stored: String,
    },
    /// `defaultCpuSet` is not a CPU list.
    #[error("could not parse default cpu set {}: {error}", crate::go::quote(.text))]
    DefaultCpuSet { text: String, error: String },
    /// A container's CPU list is not a CPU list.
    #[error("could not parse cpuset {} for container {} in pod {}: {error}",
        crate::go::quote(.text), crate::go::quote(.container), crate::go::quote(.pod))]
    ContainerCpuSet {
        pod: String,
        container: String,
        text: String,
        error: String,
    },
    /// A v1 (container id keyed) CPU checkpoint with entries: the kubelet
    /// maps container ids through the container runtime, which a file alone
    /// cannot.
    #[error(
        "error migrating v1 checkpoint state to v2 checkpoint state: containerID '{0}' not found in initial containers list"
    )]
    V1Entries(String),
    /// A CPU id or NUMA id no machine can have (far beyond any real one).
    #[error("{what} {id} is out of range")]
    OutOfRange { what: &'static str, id: i64 },
    /// Content a layout cannot hold: pod-level assignments (`podEntries`)
    /// in a layout older than v1.36's, container entries in a v1 CPU file.
    #[error("{0}")]
    Unsupported(String),
}

impl CheckpointError {
    /// What `NewCheckpointState` returns: `could not restore state from
    /// checkpoint: <error>, please drain this node and delete the CPU
    /// manager checkpoint file "<path>" before restarting Kubelet`.
    pub fn kubelet_text(&self, kind: CheckpointKind, path: &str) -> String {
        format!(
            "could not restore state from checkpoint: {self}, please drain this node and delete the {} checkpoint file {} before restarting Kubelet",
            kind.manager(),
            crate::go::quote(path)
        )
    }

    /// What a restarting kubelet fails `ContainerManager.Start` with.
    pub fn kubelet_start_text(&self, kind: CheckpointKind, path: &str) -> String {
        format!("{}: {}", kind.start_prefix(), self.kubelet_text(kind, path))
    }
}

/// A checkpoint is only restored under the policy that wrote it.
fn check_policy(kind: CheckpointKind, configured: &str, stored: &str) -> Result<(), CheckpointError> {
    if configured == stored {
        Ok(())
    } else {
        Err(CheckpointError::PolicyMismatch {
            kind,
            configured: configured.to_owned(),
            stored: stored.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests;
