//! The kubelet state real kubelets wrote (`testdata/kubelet-state/layouts`:
//! v1.32.10, v1.36.3 and v1.37.2, from the oracle), for the tests of this
//! crate and of its callers (feature `test-support`).

use std::path::{Path, PathBuf};

use topoalign_engine::Node;
use topoalign_intake::{IntakeError, NodeInputs, Overrides};
use topoalign_model::Pod;

/// The layouts: a directory of checkpoint files per release, their node
/// (`1.32/scenario.json`), its `kubelet-config.yaml` and `pods.yaml`.
pub fn layouts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/kubelet-state/layouts")
}

/// The layouts' node as its kubelet runs it: the scenario's machine and
/// the KubeletConfiguration file, `overrides` laid over them.
///
/// # Errors
/// The [`IntakeError`] of a fixture that does not start a node.
pub fn layouts_node(overrides: &Overrides) -> Result<Node, IntakeError> {
    let scenario = layouts().join("1.32/scenario.json");
    let config = layouts().join("kubelet-config.yaml");
    Ok(topoalign_intake::start(&NodeInputs::new(Some(&scenario), Some(&config), overrides))?.node)
}

/// The pods of the layouts' `pods.yaml`.
///
/// # Errors
/// The file unread or not pod manifests.
pub fn layouts_pods() -> Result<Vec<Pod>, Box<dyn std::error::Error>> {
    let text = std::fs::read_to_string(layouts().join("pods.yaml"))?;
    let manifests = topoalign_k8s::read_manifests(&text, &topoalign_k8s::ManifestOptions::default())?;
    Ok(manifests.pods.into_iter().map(|p| p.pod).collect())
}
