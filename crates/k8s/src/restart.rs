//! A kubelet restart: a new process, started with its (possibly changed)
//! configuration on the same machine, over the checkpoint files the old
//! process wrote.
//!
//! Owns: the round trip of the old node's state through those files —
//! written in the layout the old release (and its gates) writes, read back
//! as the new process's managers read them, with their checks (a changed
//! CPU or memory policy is the kubelet's own refusal: the crash loop users
//! meet). Must not touch: what the managers do with the restored state and
//! the order pods come back in ([`Node::restarted`]).

use topoalign_engine::{Decision, MemoryPolicyName, Node, NodeSnapshot};
use topoalign_model::KubeletVersion;

use crate::checkpoint::{CheckpointError, CheckpointKind, CpuCheckpoint, DeviceCheckpoint, MemoryCheckpoint};
use crate::kubelet_config::ConfigError;
use crate::startup::start_node;

/// The kubelet's root directory, as the kubelet names its files in errors.
const ROOT_DIR: &str = "/var/lib/kubelet";

/// `old`'s kubelet restarted with `kubelet` (a KubeletConfiguration as
/// [`start_node`] takes it; the release is the old one's): the new node
/// and the decision for each pod `old` held, admitted again in admission
/// order.
///
/// # Errors
/// [`ConfigError::Refused`] with the kubelet's text when the new process
/// does not start — its configuration refused, or its managers refusing
/// the files the old one wrote; [`ConfigError::Invalid`] for a
/// configuration that does not decode.
pub fn restart_node(old: &Node, kubelet: &serde_json::Value) -> Result<(Node, Vec<Decision>), ConfigError> {
    let fresh = start_node(old.machine().clone(), kubelet)?;
    let snapshot = through_files(old, &fresh).map_err(ConfigError::Refused)?;
    fresh
        .restarted(snapshot)
        .map_err(|refusal| ConfigError::Refused(refusal.to_string()))
}

/// `old`'s state as `fresh`'s managers read it back from the files `old`'s
/// kubelet wrote; `Err` with the kubelet's start-up text when they refuse.
fn through_files(old: &Node, fresh: &Node) -> Result<NodeSnapshot, String> {
    let written = old.snapshot();
    let (cpu_layout, memory_layout) = layouts(old);
    let (before, after) = (old.config(), fresh.config());
    let unwritable = |kind: CheckpointKind, error: CheckpointError| {
        format!(
            "the {} state cannot be written as the kubelet writes it: {error}",
            kind.file_name()
        )
    };
    let refused = |kind: CheckpointKind, error: CheckpointError| {
        error.kubelet_start_text(kind, &format!("{ROOT_DIR}/{}", kind.file_name()))
    };

    let cpu_file = CpuCheckpoint::of_state(before.cpu_policy.as_str(), &written.cpu, cpu_layout)
        .to_bytes()
        .map_err(|e| unwritable(CheckpointKind::Cpu, e))?;
    let cpu = CpuCheckpoint::parse(&cpu_file)
        .and_then(|file| file.to_state(after.cpu_policy.as_str()))
        .map_err(|e| refused(CheckpointKind::Cpu, e))?;

    let memory_file = MemoryCheckpoint::of_state(
        before.memory_policy.as_str(),
        &written
            .memory
            .clone()
            .unwrap_or_default()
            .with_numa_labels(old.machine()),
        memory_layout,
    )
    .to_bytes()
    .map_err(|e| unwritable(CheckpointKind::Memory, e))?;
    let memory = MemoryCheckpoint::parse(&memory_file)
        .and_then(|file| file.to_state(after.memory_policy.as_str()))
        .map_err(|e| refused(CheckpointKind::Memory, e))?
        .with_numa_indices(fresh.machine());
    let memory = (after.memory_policy == MemoryPolicyName::Static).then_some(memory);

    let device_file = DeviceCheckpoint::of_assignments(&written.devices, old.machine()).to_bytes();
    let devices = DeviceCheckpoint::parse(&device_file)
        .map_err(|e| format!("the device manager's checkpoint does not read back: {e}"))?
        .assignments();

    Ok(NodeSnapshot {
        pods: written.pods,
        cpu,
        memory,
        devices,
    })
}

/// The CPU and memory checkpoint layouts `node`'s kubelet writes: v4/v3
/// from v1.37, v3/v2 in v1.36 with `PodLevelResourceManagers`, v2/v1
/// before.
fn layouts(node: &Node) -> (u8, u8) {
    let config = node.config();
    if config.kubelet_version.at_least(KubeletVersion::V1_37) {
        (4, 3)
    } else if config.feature_gates.pod_level_managers(config.kubelet_version) {
        (3, 2)
    } else {
        (2, 1)
    }
}
