//! The kubelet's Device Manager (v1.32), as a pure library: topology hints
//! and allocation for device-plugin resources (`nvidia.com/gpu`, SR-IOV
//! VFs, ...).
//!
//! Owns: which devices each container holds, hint generation, device
//! choice (the conformance plugins' `GetPreferredAllocation` rule),
//! init-container device reuse. Must not touch: files, clocks, logging,
//! other managers' state.
//!
//! Entry point: [`DeviceManager::new`] registers every device of the machine
//! as healthy (the plugins connect before the first pod). Then, per pod, the
//! engine asks [`DeviceManager::container_hints`] or
//! [`DeviceManager::pod_hints`], calls [`DeviceManager::allocate`] for each
//! container (init containers first) with the topology manager's hint, reads
//! [`DeviceManager::container_devices`], and calls
//! [`DeviceManager::remove_pod`] when the pod goes away or was rejected.
//!
//! Code map: `registry` (devices and their NUMA nodes), `requests` (how
//! many devices a container / pod asks for), `hints` (hint lists),
//! `allocate` (which devices to give), `pod_devices` (who holds what),
//! `restore` (a record of who holds what, restored).
//!
//! Orderings the kubelet leaves to Go map order are fixed here: resources
//! are handled in ascending name order (this decides which of several
//! failing resources an error names), and device choice follows the
//! conformance plugins' rule (see `allocate`).

mod allocate;
mod hints;
mod pod_devices;
mod registry;
mod requests;
mod restore;
#[cfg(test)]
mod testing;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::Arc;

use topoalign_model::{Container, KubeletVersion, Machine, NumaMask, Pod, ProviderHints, ResourceHints, TopologyHint};

use crate::pod_devices::{DeviceSet, DevicesByResource, PodDevices};
use crate::registry::{Registry, ResourceDevices};
use crate::requests::{container_device_requests, pod_device_requests};
pub use crate::restore::{
    ContainerDevicesView, DeviceAssignments, DeviceIdsView, DeviceRestoreError, DevicesView, PodDevicesView,
};

/// Why an allocation failed (kubelet: `UnexpectedAdmissionError`). Display
/// is the kubelet's text, e.g. `requested number of devices unavailable for
/// nvidia.com/gpu. Requested: 2, Available: 1`; the engine wraps it as
/// `Allocate failed due to {error}, which is unexpected`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DeviceAllocateError(pub String);

impl DeviceAllocateError {
    fn new(message: String) -> Self {
        DeviceAllocateError(message)
    }
}

/// The device manager of one node.
#[derive(Clone, Debug)]
pub struct DeviceManager {
    /// The machine's NUMA nodes, as cAdvisor reports them.
    numa_nodes: NumaMask,
    /// From 1.36 a resource's hints are built over the NUMA nodes that hold
    /// its devices only (`deviceNUMANodes`), not over every node.
    hints_over_device_nodes: bool,
    /// Never changes after start; shared between clones of the node.
    registry: Arc<Registry>,
    pod_devices: PodDevices,
    reusable: ReusableDevices,
}

/// The kubelet's `devicesToReuse`: devices of the current pod's finished
/// (non-restartable) init containers that its next containers may take
/// over. Only the pod that allocated last keeps an entry: the kubelet drops
/// every other pod's entry at the start of each `Allocate`.
#[derive(Clone, Debug, Default)]
struct ReusableDevices {
    pod_uid: Option<String>,
    by_resource: DevicesByResource,
}

impl ReusableDevices {
    fn for_pod(&self, pod_uid: &str, resource: &str) -> DeviceSet {
        if self.pod_uid.as_deref() == Some(pod_uid) {
            self.by_resource.get(resource).cloned().unwrap_or_default()
        } else {
            DeviceSet::new()
        }
    }
}

impl DeviceManager {
    /// A manager with every device of the machine registered and healthy,
    /// building hints the way the kubelet of `version` does.
    pub fn new(machine: &Machine, version: KubeletVersion) -> DeviceManager {
        DeviceManager {
            numa_nodes: machine.numa_mask(),
            hints_over_device_nodes: version.at_least(KubeletVersion::V1_36),
            registry: Arc::new(Registry::from_machine(machine)),
            pod_devices: PodDevices::default(),
            reusable: ReusableDevices::default(),
        }
    }

    /// Hints for one container (container scope; the kubelet's
    /// `GetTopologyHints`). Only device-plugin resources in the container's
    /// limits appear; a resource none of whose devices reports a NUMA node
    /// has no preference; a request that cannot be met gets
    /// [`ResourceHints::Impossible`].
    pub fn container_hints(&mut self, pod: &Pod, container: &Container) -> ProviderHints {
        let mut hints = ProviderHints::no_preference();
        for (resource, requested) in container_device_requests(&self.registry, container) {
            let Some(devices) = self.registry.resource(resource) else {
                continue;
            };
            let resource_hints = if !devices.has_topology_alignment() {
                ResourceHints::NoPreference
            } else if let Some(held) = self.pod_devices.container_devices(&pod.uid, &container.name, resource) {
                // Already allocated (a repeated admission): the same hints
                // again, as long as the request did not change.
                self.regenerate(devices, held, requested)
            } else {
                let reusable = self.reusable.for_pod(&pod.uid, resource);
                self.fresh_hints(resource, devices, &reusable, requested)
            };
            hints.by_resource.insert(resource.to_owned(), resource_hints);
        }
        hints
    }

    /// Hints for the whole pod (pod scope; the kubelet's
    /// `GetPodTopologyHints`): the pod's effective device limits (init
    /// containers, sidecars and app containers combined), without reuse.
    pub fn pod_hints(&mut self, pod: &Pod) -> ProviderHints {
        let mut hints = ProviderHints::no_preference();
        for (resource, requested) in pod_device_requests(&self.registry, pod) {
            let Some(devices) = self.registry.resource(resource) else {
                continue;
            };
            let held = self.pod_devices.pod_devices(&pod.uid, resource);
            let resource_hints = if !devices.has_topology_alignment() {
                ResourceHints::NoPreference
            } else if !held.is_empty() {
                self.regenerate(devices, &held, requested)
            } else {
                self.fresh_hints(resource, devices, &DeviceSet::new(), requested)
            };
            hints.by_resource.insert(resource.to_owned(), resource_hints);
        }
        hints
    }

    /// Allocates the container's devices (the kubelet's `Allocate`), in
    /// ascending resource order; devices of resources handled before a
    /// failing one stay recorded until [`DeviceManager::remove_pod`].
    ///
    /// A non-restartable init container's devices become reusable by the
    /// pod's later containers; an app container or a sidecar takes what it
    /// got out of the reusable set.
    ///
    /// # Errors
    /// [`DeviceAllocateError`] as the kubelet's `Allocate` fails.
    pub fn allocate(
        &mut self,
        pod: &Pod,
        container: &Container,
        affinity: TopologyHint,
    ) -> Result<(), DeviceAllocateError> {
        if self.reusable.pod_uid.as_deref() != Some(pod.uid.as_str()) {
            self.reusable = ReusableDevices {
                pod_uid: Some(pod.uid.clone()),
                by_resource: DevicesByResource::new(),
            };
        }
        self.allocate_container_resources(pod, container, affinity)?;

        // The kubelet recognises init containers by name, and reads
        // restartability from the pod's spec.
        let finished_init = pod.is_regular_init(container);
        let Some(held) = self.pod_devices.container(&pod.uid, &container.name) else {
            return Ok(());
        };
        for (resource, devices) in held {
            if finished_init {
                let reusable = self.reusable.by_resource.entry(resource.clone()).or_default();
                reusable.extend(devices.iter().cloned());
            } else if let Some(reusable) = self.reusable.by_resource.get_mut(resource) {
                // (No entry reads as an empty set: nothing to take out.)
                reusable.retain(|id| !devices.contains(id));
            }
        }
        Ok(())
    }

    /// Releases everything the pod holds.
    pub fn remove_pod(&mut self, pod_uid: &str) {
        self.pod_devices.remove_pod(pod_uid);
        if self.reusable.pod_uid.as_deref() == Some(pod_uid) {
            self.reusable = ReusableDevices::default();
        }
    }

    /// Device ids per resource held by one container, each list in
    /// ascending id (string) order.
    pub fn container_devices(&self, pod_uid: &str, container: &str) -> BTreeMap<String, Vec<String>> {
        // Inserted one by one in the record's (ascending) order: cheaper
        // for these few entries than `collect`, which buffers and sorts.
        let mut devices = BTreeMap::new();
        for (resource, ids) in self.pod_devices.container(pod_uid, container).into_iter().flatten() {
            devices.insert(resource.to_string(), ids.iter().map(|id| id.to_string()).collect());
        }
        devices
    }

    /// Whether the pod holds any device (the kubelet's `podDevices.hasPod`,
    /// which decides whether the resource-fit check sanitizes allocatable).
    /// Only the tests ask.
    #[cfg(test)]
    pub(crate) fn has_pod(&self, pod_uid: &str) -> bool {
        self.registry
            .iter()
            .any(|(resource, _)| !self.pod_devices.pod_devices(pod_uid, resource).is_empty())
    }

    /// Devices in use per device-plugin resource (the kubelet's
    /// `allocatedDevices`, as `sanitizeNodeAllocatable` reads it). Only the
    /// tests ask.
    #[cfg(test)]
    pub(crate) fn in_use_counts(&self) -> BTreeMap<String, usize> {
        self.registry
            .iter()
            .map(|(resource, _)| (resource.to_string(), self.pod_devices.in_use(resource).len()))
            .collect()
    }

    fn allocate_container_resources(
        &mut self,
        pod: &Pod,
        container: &Container,
        hint: TopologyHint,
    ) -> Result<(), DeviceAllocateError> {
        for (resource, required) in container_device_requests(&self.registry, container) {
            let Some((resource, devices)) = self.registry.resource_named(resource) else {
                continue;
            };
            let in_use = self.pod_devices.in_use_view(resource);
            let reusable = self.reusable.for_pod(&pod.uid, resource);
            let chosen = allocate::devices_to_allocate(&allocate::Request {
                pod_uid: &pod.uid,
                container: &container.name,
                resource,
                devices,
                required,
                already_held: self.pod_devices.container_devices(&pod.uid, &container.name, resource),
                reusable: &reusable,
                in_use,
                hint,
            })?;
            if !chosen.is_empty() {
                self.pod_devices.insert(&pod.uid, &container.name, resource, chosen);
            }
        }
        Ok(())
    }

    /// Hints for a request nothing is allocated to yet: impossible when
    /// the free devices and those reusable from the pod's init containers
    /// are too few together.
    fn fresh_hints(
        &self,
        resource: &str,
        devices: &ResourceDevices,
        reusable: &DeviceSet,
        requested: i128,
    ) -> ResourceHints {
        // The free devices are read in place (the registry's devices not in
        // use), not copied into a set.
        let in_use = self.pod_devices.in_use_view(resource);
        let available = devices.ids().filter(|id| !in_use.contains(id)).count();
        let reusable_not_available = reusable
            .iter()
            .filter(|id| !devices.contains(id) || in_use.contains(id))
            .count();
        let usable = available + reusable_not_available;
        if i128::try_from(usable).unwrap_or(i128::MAX) < requested {
            return ResourceHints::Impossible;
        }
        let free = devices
            .iter()
            .filter(|(id, _)| !in_use.contains(id))
            .filter_map(|(_, affinity)| affinity)
            .collect();
        ResourceHints::from_rule(hints::DeviceHintRule::new(
            self.hint_nodes(devices),
            devices,
            free,
            reusable,
            requested,
        ))
    }

    /// The NUMA nodes a resource's hints are drawn from: every node, or
    /// from 1.36 the nodes holding one of its devices (every node when none
    /// reports one).
    fn hint_nodes(&self, devices: &ResourceDevices) -> NumaMask {
        if !self.hints_over_device_nodes {
            return self.numa_nodes;
        }
        let held = devices
            .affinities()
            .iter()
            .fold(NumaMask::EMPTY, |acc, &affinity| acc | affinity)
            & self.numa_nodes;
        if held.is_empty() { self.numa_nodes } else { held }
    }

    fn regenerate(&self, devices: &ResourceDevices, held: &DeviceSet, requested: i128) -> ResourceHints {
        if count(held) != requested {
            return ResourceHints::Impossible;
        }
        let free = held.iter().filter_map(|id| devices.affinity(id)).collect();
        ResourceHints::from_rule(hints::DeviceHintRule::new(
            self.hint_nodes(devices),
            devices,
            free,
            &DeviceSet::new(),
            requested,
        ))
    }
}

fn count(set: &DeviceSet) -> i128 {
    i128::try_from(set.len()).unwrap_or(i128::MAX)
}
