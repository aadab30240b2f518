//! One reading of a kubelet's state, for every command that looks at a
//! kubelet: `diagnose`, the follower (`agent --follow-kubelet`) and
//! `verify`.
//!
//! - [`KubeletDir`]: the kubelet's root directory (`/var/lib/kubelet`, or a
//!   copy of it): its checkpoint files, its `config.yaml`, its PodResources
//!   socket. Every file is read without blocking and only when it is a
//!   regular file (`topoalign-files`): a FIFO where a checkpoint should be
//!   is an error naming the path, never a hang.
//! - [`observe`] (or an [`Observer`], which keeps what it decoded for the
//!   next call): a pure function from the checkpoint files' bytes
//!   ([`CheckpointFiles`]), the PodResources answer
//!   ([`PodResourcesAnswer`]) and the node's pods ([`ListedPod`]) to the
//!   node the kubelet holds ([`Observed`]): each checkpoint judged as the
//!   kubelet release of the node reads it ([`CheckpointStatus`]), whether
//!   a kubelet restarting on them starts ([`Restart`]), the state restored
//!   into the engine, and where the PodResources answer disagrees.
//! - [`containers`]: proof of placement for the kubelet's running
//!   containers ([`verify_containers`]): each one's processes found by
//!   their cgroup (both cgroup drivers' layouts), read through
//!   `topoalign-host` and judged by `topoalign-verify` against the observed
//!   node — `verify --containers` and the follower's verdicts.
//!
//! # The rules
//!
//! One rule each, for every caller:
//!
//! - **Finished pods.** A pod whose `status.phase` is `Succeeded` or
//!   `Failed` is not active: the kubelet's `GetActivePods` leaves it out,
//!   so its PodResources `List` does not show it and its managers'
//!   `removeStaleState` releases what it held. It is not in the observed
//!   state; what it held counts as stale.
//! - **Stale UIDs.** With a pod list, state held under a UID that no
//!   active pod has is stale: the kubelet's start-up checks read it (a
//!   broken stale entry still stops a restart), then its stale-state
//!   collection releases it before the next admission. The observed state
//!   does not hold it; [`Observed::stale`] names the UIDs.
//! - **No pod list.** Without one, nothing can be called stale: every UID
//!   the state holds stands for an active pod, sized from what it holds
//!   ([`Observed::unnamed`]), and nothing is compared with the PodResources
//!   answer (its pods are named, the checkpoints' are UIDs).
//! - **Admission order.** The active pods are restored by creation time,
//!   then `namespace/name`, the order the kubelet admits them in after a
//!   restart.
//! - **Devices.** From the device manager's checkpoint when it is present
//!   and decodes; otherwise (the kubelet goes on without it) from the
//!   PodResources answer when there is one and a pod list to name its
//!   pods; otherwise inferred from the pods' requests and NUMA placement
//!   ([`DeviceSource`] says which).
//! - **Double assignments.** Two containers holding the same exclusive
//!   CPUs are reported ([`Observed::double_assignments`]) unless the
//!   kubelet itself writes them so: the CPUs of an init container (not a
//!   sidecar) are reused by the containers of its pod that start after it.
//!   Without a pod list, only holders in different pods are reported.
//!
//! Must not touch: decisions (the engine's), the checkpoint formats (the
//! k8s crate's), the PodResources protocol (the caller asks; this crate
//! takes the answer as plain data), printing.

pub mod containers;
mod dir;
mod observe;
mod status;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
#[cfg(test)]
mod tests;

pub use containers::{
    ContainerStatus, PodNames, RunningContainer, Verified, read_log_links, running_containers, verify_containers,
    verify_served,
};
pub use dir::{CONFIG_FILES, DEFAULT_ROOT, KubeletDir, MAX_CHECKPOINT_BYTES, ObserveError, SOCKET_IN_ROOT};
pub use observe::{
    Comparison, ContainerDynamicDevices, DeviceSource, DoubleAssignment, Inputs, ListedPod, Observed, Observer,
    PodResourcesAnswer, observe,
};
pub use status::{CheckpointFile, CheckpointFiles, CheckpointReport, CheckpointStatus, FileContent, Restart};
