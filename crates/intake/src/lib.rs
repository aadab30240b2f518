//! One way in: every front end reads its inputs here and starts its engine
//! nodes here, so a node file, a kubelet configuration or a fleet file means
//! the same to every command.
//!
//! - [`read_node_file`]: the machine of a node file — a sysfs tree or
//!   capture archive, an hwloc XML export, or a scenario (whose `kubelet:`
//!   block and events come along) — or of this machine; [`read_topology`]:
//!   the same files as discovery's richer machine, for `topology`;
//! - [`read_kubelet_config`]: a KubeletConfiguration file's fields;
//! - [`start`]: the node a command works on — machine, kubelet
//!   configuration (a file, a scenario's block, a fallback, single-field
//!   [`Overrides`]), started with [`topoalign_k8s::start_node`] and, for a
//!   scenario, its events replayed as the pods already running;
//! - [`read_pods`]: pod manifests, in order, from several files;
//! - [`read_fleet`]: a fleet file and the scenarios it names.
//!
//! Every error is an [`IntakeError`] naming the file and, where there is
//! one, the field; a configuration the kubelet would refuse carries the
//! kubelet's own text. Owns: reading and resolving files. Must not touch:
//! decisions (the engine), printing (the front ends).

mod fleet;
mod node;
mod pods;

use std::path::{Path, PathBuf};

pub use fleet::read_fleet;
pub use node::{
    Events, NodeFile, NodeFileKind, NodeInputs, Overrides, StartedNode, WithoutConfig, read_kubelet_config,
    read_node_file, read_topology, start,
};
pub use pods::{Pods, read_pods};

/// Why an input could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum IntakeError {
    /// A file (or standard input, `-`) that cannot be read.
    #[error("cannot read {}: {source}", shown(path))]
    Read { path: PathBuf, source: std::io::Error },
    /// A file whose content is not what it must be.
    #[error("{}: {message}", shown(path))]
    Invalid { path: PathBuf, message: String },
    /// A machine that cannot be read (the path is in the message).
    #[error(transparent)]
    Machine(#[from] topoalign_discovery::DiscoveryError),
    /// This machine cannot be read.
    #[error("cannot read this machine ({0}); give the node with --node FILE")]
    Local(topoalign_discovery::DiscoveryError),
    /// KubeletConfiguration fields that do not decode; `origin` says where
    /// they came from.
    #[error("{origin}: {error}")]
    Kubelet {
        origin: String,
        error: topoalign_k8s::ConfigError,
    },
    /// The kubelet would refuse to start with this configuration on this
    /// machine; the text is the kubelet's.
    #[error("the kubelet would refuse to start: {0}")]
    Refused(String),
    /// A single-field override that does not parse.
    #[error("{flag} {value:?}: {expected}")]
    Override {
        flag: &'static str,
        value: String,
        expected: &'static str,
    },
}

fn shown(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "standard input".to_owned()
    } else {
        path.display().to_string()
    }
}

/// The text of `path`; `-` reads standard input.
///
/// # Errors
/// [`IntakeError::Read`].
pub fn read_text(path: &Path) -> Result<String, IntakeError> {
    let read = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    };
    read.map_err(|source| IntakeError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// An [`IntakeError::Invalid`] about `path`.
fn invalid(path: &Path, message: impl ToString) -> IntakeError {
    IntakeError::Invalid {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}
