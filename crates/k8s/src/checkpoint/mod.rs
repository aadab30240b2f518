//! The kubelet's checkpoint files for the CPU and memory managers
//! (`/var/lib/kubelet/cpu_manager_state`, `memory_manager_state`): reading
//! them as the kubelet v1.32 does — Go `encoding/json` decoding, the
//! checksum checked the kubelet's way — and turning them into the engine's
//! restore state.
//!
//! The checksum is FNV-32a over the `go-spew` printing (`%#v`, sorted map
//! keys, methods off) of the checkpoint struct with its checksum set to 0
//! (`checkpointmanager/checksum` over `hashutil.DeepHashObject`); [`spew`]
//! prints our copies of those structs byte for byte as Go would.
//!
//! Owns: the file formats ([`CpuCheckpoint`], [`MemoryCheckpoint`]), their
//! checksums, [`CheckpointError`] with the kubelet's texts, and the
//! conversion to [`CpuManagerState`] / [`MemoryManagerState`]. Must not
//! touch: files (callers pass the bytes) or the managers' own start-up
//! checks (`validateState` is the managers' [`restore`]).
//!
//! [`restore`]: topoalign_engine::Node::restore
//! [`CpuManagerState`]: topoalign_engine::CpuManagerState
//! [`MemoryManagerState`]: topoalign_engine::MemoryManagerState

mod cpu;
mod go_json;
mod memory;
mod spew;

pub use cpu::CpuCheckpoint;
pub use memory::{BlockEntry, MemoryCheckpoint, NumaNodeEntry};
pub use spew::fnv32a;

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

/// `checksum.Verify`: the stored checksum must be the content's.
fn verify_checksum(stored: u64, computed: u32) -> Result<(), CheckpointError> {
    let computed = u64::from(computed);
    if computed == stored {
        Ok(())
    } else {
        Err(CheckpointError::Corrupt { stored, computed })
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
