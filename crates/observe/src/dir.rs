//! [`KubeletDir`]: where a kubelet keeps what [`crate::observe`] reads.

use std::path::{Path, PathBuf};

use topoalign_files::Links;
use topoalign_k8s::checkpoint::{CPU_MANAGER_STATE, DEVICE_CHECKPOINT, MEMORY_MANAGER_STATE};

use crate::status::{CheckpointFile, CheckpointFiles, FileContent};

/// The kubelet's default root directory (`--root-dir`).
pub const DEFAULT_ROOT: &str = "/var/lib/kubelet";

/// Where a kubelet serves the PodResources API, under its root directory.
pub const SOCKET_IN_ROOT: &str = "pod-resources/kubelet.sock";

/// The KubeletConfiguration file found in a root directory, first match:
/// `config.yaml` (what kubeadm writes, `/var/lib/kubelet/config.yaml`),
/// then `kubelet-config.yaml` (a copy of a directory made by hand).
pub const CONFIG_FILES: [&str; 2] = ["config.yaml", "kubelet-config.yaml"];

/// The largest checkpoint file read: a node of 1,024 CPUs running its
/// maximum of pods writes well under a MiB.
pub const MAX_CHECKPOINT_BYTES: u64 = 64 << 20;

/// A kubelet's root directory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ObserveError {
    /// Not a directory, or one holding none of a kubelet's files.
    #[error("{}: {why}", path.display())]
    NotKubeletDir { path: PathBuf, why: String },
    /// A file that is there but cannot be used (a FIFO, a directory, no
    /// permission).
    #[error("{}: {source}", path.display())]
    File { path: PathBuf, source: std::io::Error },
}

/// A kubelet's root directory and its PodResources socket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KubeletDir {
    root: PathBuf,
    socket: PathBuf,
    socket_given: bool,
}

impl KubeletDir {
    /// The directory `root`, its PodResources socket `socket` (default:
    /// [`SOCKET_IN_ROOT`] under it).
    pub fn new(root: PathBuf, socket: Option<PathBuf>) -> KubeletDir {
        let socket_given = socket.is_some();
        let socket = socket.unwrap_or_else(|| root.join(SOCKET_IN_ROOT));
        KubeletDir {
            root,
            socket,
            socket_given,
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The PodResources socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Whether the socket was named (rather than the root's default).
    pub fn socket_given(&self) -> bool {
        self.socket_given
    }

    /// Refuses a directory that holds no kubelet state at all: reading it
    /// as a kubelet that starts with empty state would answer for a node
    /// that was never looked at (a running kubelet always writes
    /// `cpu_manager_state`).
    ///
    /// # Errors
    /// [`ObserveError::NotKubeletDir`].
    pub fn check(&self) -> Result<(), ObserveError> {
        let not = |why: String| ObserveError::NotKubeletDir {
            path: self.root.clone(),
            why,
        };
        if !self.root.is_dir() {
            return Err(not("not a directory".to_owned()));
        }
        let mut known = vec![CPU_MANAGER_STATE, MEMORY_MANAGER_STATE];
        known.extend(CONFIG_FILES);
        if !known.iter().any(|name| self.root.join(name).symlink_metadata().is_ok()) {
            return Err(not(format!(
                "no kubelet state here (none of {}); give the kubelet's root directory, {DEFAULT_ROOT} on most nodes",
                known.join(", ")
            )));
        }
        Ok(())
    }

    /// The KubeletConfiguration file in the directory ([`CONFIG_FILES`]),
    /// if there is one; it must be a regular file (checked without
    /// blocking).
    ///
    /// # Errors
    /// [`ObserveError::File`] for a file that is something else or cannot
    /// be opened.
    pub fn config_file(&self) -> Result<Option<PathBuf>, ObserveError> {
        for name in CONFIG_FILES {
            let path = self.root.join(name);
            match topoalign_files::open_regular(&path, Links::Follow) {
                Ok(_) => return Ok(Some(path)),
                Err(error) if topoalign_files::is_absent(&error) => {}
                Err(source) => return Err(ObserveError::File { path, source }),
            }
        }
        Ok(None)
    }

    /// Whether the PodResources socket is there; what is there must be a
    /// socket.
    ///
    /// # Errors
    /// [`ObserveError::File`] naming what is there instead.
    pub fn socket_present(&self) -> Result<bool, ObserveError> {
        topoalign_files::check_socket(&self.socket).map_err(|source| ObserveError::File {
            path: self.socket.clone(),
            source,
        })
    }

    /// Where the kubelet keeps a checkpoint file (`CPU_MANAGER_STATE`,
    /// `MEMORY_MANAGER_STATE`, `DEVICE_CHECKPOINT`).
    pub fn checkpoint_path(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// The three checkpoint files as found now: their bytes, absent, or
    /// why they cannot be read (a FIFO or device where the file should be
    /// is refused at once, without blocking).
    pub fn read_checkpoints(&self) -> CheckpointFiles {
        CheckpointFiles {
            cpu: self.read_checkpoint(CPU_MANAGER_STATE),
            memory: self.read_checkpoint(MEMORY_MANAGER_STATE),
            devices: self.read_checkpoint(DEVICE_CHECKPOINT),
        }
    }

    fn read_checkpoint(&self, name: &str) -> CheckpointFile {
        let path = self.checkpoint_path(name);
        let content = match topoalign_files::read_regular_if_present(&path, MAX_CHECKPOINT_BYTES, Links::Follow) {
            Ok(Some(bytes)) => FileContent::Bytes(bytes),
            Ok(None) => FileContent::Absent,
            Err(error) => FileContent::Unreadable(error.to_string()),
        };
        CheckpointFile {
            path: path.display().to_string(),
            content,
        }
    }
}
