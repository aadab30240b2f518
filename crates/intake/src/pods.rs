//! [`read_pods`]: the pods of several manifest files, in order.

use std::collections::HashMap;
use std::path::PathBuf;

use topoalign_k8s::{ManifestOptions, ManifestPod, PodLevelField, read_manifests};
use topoalign_scenario::DROPPED_POD_LEVEL;

use crate::{IntakeError, invalid, read_text};

/// The pods of some files, and notes for people about documents that hold
/// none.
#[derive(Clone, Debug, Default)]
pub struct Pods {
    pub pods: Vec<ManifestPod>,
    /// `file: document 3: Service default/web has no pod template`.
    pub skipped: Vec<String>,
    /// A warning per pod-level `spec.resources` dropped as the node's
    /// cluster drops it (`PodLevelResources` off: 1.32 and 1.33 by
    /// default), as `replay` warns: `file: document 2: spec.resources:
    /// ignored: ...`.
    pub notes: Vec<String>,
}

/// Every pod of every file, in order: Pods, `v1 List`s and workloads by
/// their template (`replicas` pods each, or as many as the workload says).
/// Pods without a UID get `<uid_prefix>-<file index>-<n>`. `pod_level`:
/// whether the node's cluster keeps pod-level `spec.resources`
/// ([`PodLevelField::of_kubelet`] of the node's kubelet fields); dropped,
/// the field is only decoded, left out, and noted ([`Pods::notes`]), as
/// `replay` does.
///
/// # Errors
/// [`IntakeError`] naming the file: unreadable, malformed, without pods,
/// or holding a `namespace/name` an earlier file (or document) holds too.
pub fn read_pods(
    paths: &[PathBuf],
    replicas: Option<u32>,
    uid_prefix: &str,
    pod_level: PodLevelField,
) -> Result<Pods, IntakeError> {
    let mut read = Pods::default();
    let mut files_of: HashMap<String, usize> = HashMap::new();
    for (index, path) in paths.iter().enumerate() {
        let text = read_text(path)?;
        let options = ManifestOptions {
            replicas,
            uid_prefix: format!("{uid_prefix}-{index}-"),
            pod_level,
        };
        let manifests = read_manifests(&text, &options).map_err(|e| invalid(path, e))?;
        read.skipped.extend(
            manifests
                .skipped
                .iter()
                .map(|note| format!("{}: {note}", path.display())),
        );
        read.notes.extend(
            manifests
                .dropped_pod_level
                .iter()
                .map(|field| format!("{}: {field}: {DROPPED_POD_LEVEL}", path.display())),
        );
        if manifests.pods.is_empty() {
            return Err(invalid(path, "no pods in this file"));
        }
        for pod in &manifests.pods {
            if let Some(&earlier) = files_of.get(&pod.pod.key()) {
                return Err(invalid(
                    path,
                    format!(
                        "{}: {} is also in {}: the API server holds one pod per namespace/name",
                        pod.origin,
                        pod.pod.key(),
                        paths[earlier].display()
                    ),
                ));
            }
        }
        files_of.extend(manifests.pods.iter().map(|pod| (pod.pod.key(), index)));
        if read.pods.len() + manifests.pods.len() > topoalign_k8s::MAX_PODS {
            return Err(invalid(
                path,
                format!("more than {} pods in all", topoalign_k8s::MAX_PODS),
            ));
        }
        read.pods.extend(manifests.pods);
    }
    Ok(read)
}
