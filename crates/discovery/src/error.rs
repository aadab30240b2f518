//! [`DiscoveryError`]: why a machine could not be read. Every variant names
//! the path (file, directory, or `archive:member`) a person has to look at.

use std::path::PathBuf;

use crate::parse::ParseError;

/// Why a machine could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// A file or directory that exists (or must exist) could not be read.
    #[error("cannot read {path}: {error}")]
    Io { path: PathBuf, error: std::io::Error },
    /// The root holds no Linux sysfs tree.
    #[error("{path}: not a Linux sysfs tree or capture: {detail}")]
    NotSysfs { path: PathBuf, detail: String },
    /// A sysfs tree with files missing that the kernel always writes.
    #[error("{path}: truncated sysfs tree: {detail}")]
    Truncated { path: PathBuf, detail: String },
    /// A file whose text is not what the kernel or hwloc writes there.
    #[error("{path}: {error}")]
    Parse { path: PathBuf, error: ParseError },
    /// A capture archive that cannot be unpacked.
    #[error("{path}: cannot unpack the capture: {detail}")]
    Archive { path: PathBuf, detail: String },
    /// An XML file that is not an hwloc topology, or not XML at all.
    #[error("{path}: not an hwloc XML topology: {detail}")]
    NotHwloc { path: PathBuf, detail: String },
    /// An hwloc topology with an object it cannot have.
    #[error("{path}: malformed hwloc topology: {detail}")]
    BadHwloc { path: PathBuf, detail: String },
    /// A scenario whose `topology:` block cannot be read.
    #[error("{path}: {detail}")]
    Scenario { path: PathBuf, detail: String },
}

impl DiscoveryError {
    /// The path the error is about.
    pub fn path(&self) -> &std::path::Path {
        match self {
            DiscoveryError::Io { path, .. }
            | DiscoveryError::NotSysfs { path, .. }
            | DiscoveryError::Truncated { path, .. }
            | DiscoveryError::Parse { path, .. }
            | DiscoveryError::Archive { path, .. }
            | DiscoveryError::NotHwloc { path, .. }
            | DiscoveryError::BadHwloc { path, .. }
            | DiscoveryError::Scenario { path, .. } => path,
        }
    }
}
