//! What each checkpoint file says, judged as the kubelet reads it.

use topoalign_k8s::checkpoint::{CheckpointError, CheckpointKind};

/// One checkpoint file as found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointFile {
    /// The path as the kubelet would name it in its errors.
    pub path: String,
    pub content: FileContent,
}

/// What a checkpoint file holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileContent {
    /// There is no such file.
    Absent,
    /// The file exists but cannot be read (or is not a regular file); the
    /// error.
    Unreadable(String),
    /// The file's bytes.
    Bytes(Vec<u8>),
}

impl FileContent {
    /// The bytes, if the file was read.
    pub fn bytes(&self) -> Option<&[u8]> {
        match self {
            FileContent::Bytes(bytes) => Some(bytes),
            FileContent::Absent | FileContent::Unreadable(_) => None,
        }
    }
}

/// The three checkpoint files of a kubelet's root directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointFiles {
    /// `cpu_manager_state`.
    pub cpu: CheckpointFile,
    /// `memory_manager_state`.
    pub memory: CheckpointFile,
    /// `device-plugins/kubelet_internal_checkpoint`.
    pub devices: CheckpointFile,
}

/// What one CPU or memory checkpoint file says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CheckpointStatus {
    /// No file: a kubelet starting now begins with empty state.
    Absent,
    /// The file exists but cannot be read.
    Unreadable { error: String },
    /// Decoded, checksum verified, restorable. `stored` is 0 when the
    /// file records no checksum (an old CPU checkpoint; the kubelet then
    /// skips the check), and `computed` is the content's.
    Verified { policy: String, stored: u64, computed: u64 },
    /// The checksum does not match the content: changed after the kubelet
    /// wrote it (or written by a release whose layout this one verifies
    /// otherwise).
    Corrupt {
        stored: u64,
        computed: u64,
        kubelet_error: String,
    },
    /// Not a checkpoint the kubelet can decode (cut short, not JSON, a
    /// wrong type).
    Undecodable { problem: String, kubelet_error: String },
    /// Decoded and verified, but the kubelet refuses to restore it (another
    /// policy, CPUs or NUMA nodes this machine does not have).
    Refused {
        policy: String,
        stored: u64,
        computed: u64,
        problem: String,
        kubelet_error: String,
    },
}

impl CheckpointStatus {
    /// Whether a kubelet starting now can go on with this file (absent or
    /// verified).
    pub fn usable(&self) -> bool {
        matches!(self, CheckpointStatus::Absent | CheckpointStatus::Verified { .. })
    }

    /// What a restarting kubelet says about the file, if it refuses it.
    pub fn kubelet_error(&self) -> Option<&str> {
        match self {
            CheckpointStatus::Corrupt { kubelet_error, .. }
            | CheckpointStatus::Undecodable { kubelet_error, .. }
            | CheckpointStatus::Refused { kubelet_error, .. } => Some(kubelet_error),
            CheckpointStatus::Absent | CheckpointStatus::Unreadable { .. } | CheckpointStatus::Verified { .. } => None,
        }
    }

    /// What is wrong (or, for an absent file, what that means), in words.
    pub fn problem(&self) -> Option<String> {
        match self {
            CheckpointStatus::Absent => Some("absent: a kubelet starting now begins with empty state".to_owned()),
            CheckpointStatus::Unreadable { error } => Some(format!("cannot be read: {error}")),
            CheckpointStatus::Verified { .. } => None,
            CheckpointStatus::Corrupt { stored, computed, .. } => Some(format!(
                "checksum mismatch: the file records {stored}, its content hashes to {computed} — it was changed \
                 after the kubelet wrote it"
            )),
            CheckpointStatus::Undecodable { problem, .. } | CheckpointStatus::Refused { problem, .. } => {
                Some(problem.clone())
            }
        }
    }
}

/// One checkpoint file and what it says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointReport {
    pub file: String,
    pub status: CheckpointStatus,
}

impl CheckpointReport {
    /// Why a kubelet restarting on this file stops, if it does.
    pub fn restart_error(&self) -> Option<String> {
        match &self.status {
            CheckpointStatus::Unreadable { error } => Some(format!("{}: cannot be read: {error}", self.file)),
            other => other.kubelet_error().map(str::to_owned),
        }
    }
}

/// Whether a kubelet restarting with this state on this machine and
/// configuration would start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Restart {
    Starts,
    /// It would not; its first error.
    Fails {
        error: String,
    },
}

/// One checkpoint file decoded, verified and turned into the state the
/// kubelet's `restoreState` takes, or what is wrong with it.
pub(crate) fn judge<C, S>(
    file: &CheckpointFile,
    kind: CheckpointKind,
    parse: impl Fn(&[u8]) -> Result<C, CheckpointError>,
    describe: impl Fn(&C) -> (String, u64, u64),
    to_state: impl FnOnce(&C) -> Result<S, CheckpointError>,
) -> (CheckpointReport, Option<S>) {
    let report = |status| CheckpointReport {
        file: file.path.clone(),
        status,
    };
    let bytes = match &file.content {
        FileContent::Absent => return (report(CheckpointStatus::Absent), None),
        FileContent::Unreadable(error) => {
            return (report(CheckpointStatus::Unreadable { error: error.clone() }), None);
        }
        FileContent::Bytes(bytes) => bytes,
    };
    let checkpoint = match parse(bytes) {
        Ok(checkpoint) => checkpoint,
        Err(error) => {
            let kubelet_error = error.kubelet_start_text(kind, &file.path);
            let status = match error {
                CheckpointError::Corrupt { stored, computed } => CheckpointStatus::Corrupt {
                    stored,
                    computed,
                    kubelet_error,
                },
                CheckpointError::Decode(text) if text == "unexpected end of JSON input" => {
                    CheckpointStatus::Undecodable {
                        problem: format!("cut short ({} bytes): {text}", bytes.len()),
                        kubelet_error,
                    }
                }
                other => CheckpointStatus::Undecodable {
                    problem: other.to_string(),
                    kubelet_error,
                },
            };
            return (report(status), None);
        }
    };
    let (policy, stored, computed) = describe(&checkpoint);
    match to_state(&checkpoint) {
        Ok(state) => (
            report(CheckpointStatus::Verified {
                policy,
                stored,
                computed,
            }),
            Some(state),
        ),
        Err(error) => (
            report(CheckpointStatus::Refused {
                policy,
                stored,
                computed,
                problem: error.to_string(),
                kubelet_error: error.kubelet_start_text(kind, &file.path),
            }),
            None,
        ),
    }
}
