//! The kubelet's Device Manager, as a pure library: topology hints and
//! allocation for device-plugin resources (`nvidia.com/gpu`, SR-IOV VFs, ...).
//!
//! Owns: which devices each container holds, hint generation, device
//! choice (the conformance plugins' `GetPreferredAllocation` rule),
//! init-container device reuse. Must not touch: files, clocks, logging,
//! other managers' state.

use std::collections::BTreeMap;

use topoalign_model::{Container, Machine, Pod, ProviderHints, TopologyHint};

/// Why an allocation failed (kubelet: `UnexpectedAdmissionError`). Display
/// is the kubelet's text, e.g. `requested number of devices unavailable for
/// nvidia.com/gpu. Requested: 2, Available: 1`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DeviceAllocateError(pub String);

/// The device manager of one node.
#[derive(Clone, Debug)]
pub struct DeviceManager {
    _private: (),
}

impl DeviceManager {
    /// A manager with every device of the machine registered and healthy.
    pub fn new(_machine: &Machine) -> DeviceManager {
        todo!()
    }

    /// Hints for one container (container scope).
    pub fn container_hints(&mut self, _pod: &Pod, _container: &Container) -> ProviderHints {
        todo!()
    }

    /// Hints for the whole pod (pod scope).
    pub fn pod_hints(&mut self, _pod: &Pod) -> ProviderHints {
        todo!()
    }

    /// Allocates the container's devices.
    ///
    /// # Errors
    /// [`DeviceAllocateError`] as the kubelet's `Allocate` fails.
    pub fn allocate(
        &mut self,
        _pod: &Pod,
        _container: &Container,
        _affinity: TopologyHint,
    ) -> Result<(), DeviceAllocateError> {
        todo!()
    }

    /// Releases everything the pod holds.
    pub fn remove_pod(&mut self, _pod_uid: &str) {
        todo!()
    }

    /// Device ids per resource held by one container.
    pub fn container_devices(&self, _pod_uid: &str, _container: &str) -> BTreeMap<String, Vec<String>> {
        todo!()
    }
}
