//! [`read_pods`]: the pods of several manifest files, in order.

use std::path::PathBuf;

use topoalign_k8s::{ManifestOptions, ManifestPod, read_manifests};

use crate::{IntakeError, invalid, read_text};

/// The pods of some files, and notes for people about documents that hold
/// none.
#[derive(Clone, Debug, Default)]
pub struct Pods {
    pub pods: Vec<ManifestPod>,
    /// `file: document 3: Service default/web has no pod template`.
    pub skipped: Vec<String>,
}

/// Every pod of every file, in order: Pods, `v1 List`s and workloads by
/// their template (`replicas` pods each). Pods without a UID get
/// `<uid_prefix>-<file index>-<n>`.
///
/// # Errors
/// [`IntakeError`] naming the file: unreadable, malformed, or without pods.
pub fn read_pods(paths: &[PathBuf], replicas: u32, uid_prefix: &str) -> Result<Pods, IntakeError> {
    let mut read = Pods::default();
    for (index, path) in paths.iter().enumerate() {
        let text = read_text(path)?;
        let options = ManifestOptions {
            replicas,
            uid_prefix: format!("{uid_prefix}-{index}-"),
        };
        let manifests = read_manifests(&text, &options).map_err(|e| invalid(path, e))?;
        read.skipped.extend(
            manifests
                .skipped
                .iter()
                .map(|note| format!("{}: {note}", path.display())),
        );
        if manifests.pods.is_empty() {
            return Err(invalid(path, "no pods in this file"));
        }
        read.pods.extend(manifests.pods);
    }
    Ok(read)
}
