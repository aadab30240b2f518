//! [`Registry`]: the devices the device plugins registered, per resource,
//! with each device's NUMA affinity.
//!
//! Owns the kubelet's `allDevices` / `healthyDevices` view. Every device of
//! the machine is registered and healthy before the first pod (the
//! conformance oracle's plugins connect and list their devices at start), so
//! "healthy" and "registered" are the same set here. Must not hold any
//! allocation state.

use std::collections::BTreeMap;
use std::sync::Arc;

use topoalign_model::{Machine, NumaMask};

/// The devices of one resource: id → NUMA affinity (`None` = the device
/// reports no `TopologyInfo`). Ids (and resource names, in [`Registry`])
/// are shared strings: every record of a device given to a container
/// holds the registry's id, so recording one copies no text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ResourceDevices {
    devices: BTreeMap<Arc<str>, Option<NumaMask>>,
    /// The affinities of the devices that report one, in id order: read by
    /// every hint list, so derived once.
    affinities: Vec<NumaMask>,
}

impl ResourceDevices {
    fn new(devices: BTreeMap<Arc<str>, Option<NumaMask>>) -> ResourceDevices {
        let affinities = devices.values().filter_map(|affinity| *affinity).collect();
        ResourceDevices { devices, affinities }
    }

    pub(crate) fn has_topology_alignment(&self) -> bool {
        !self.affinities.is_empty()
    }

    /// The affinities of the devices that report one, in id order.
    pub(crate) fn affinities(&self) -> &[NumaMask] {
        &self.affinities
    }

    /// Whether `id` is a device of this resource.
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.devices.contains_key(id)
    }

    /// The registry's shared copy of `id`, if it is a device of this
    /// resource.
    pub(crate) fn interned(&self, id: &str) -> Option<&Arc<str>> {
        self.devices.get_key_value(id).map(|(id, _)| id)
    }

    pub(crate) fn affinity(&self, id: &str) -> Option<NumaMask> {
        self.devices.get(id).copied().flatten()
    }

    /// Every device id, ascending.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &Arc<str>> {
        self.devices.keys()
    }

    /// Every device with its affinity.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Arc<str>, Option<NumaMask>)> {
        self.devices.iter().map(|(id, mask)| (id, *mask))
    }

    /// Whether the resource has no devices at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.devices.is_empty()
    }
}

/// Every registered device-plugin resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Registry {
    resources: BTreeMap<Arc<str>, ResourceDevices>,
}

impl Registry {
    /// Registers every device of the machine as healthy.
    pub(crate) fn from_machine(machine: &Machine) -> Registry {
        let resources = machine
            .devices()
            .iter()
            .map(|(resource, devices)| {
                let devices = devices
                    .iter()
                    .map(|device| {
                        // A device on a node past 63 (a machine wider than
                        // masks, which never computes hints) keeps `Some`:
                        // it has topology, which orders allocation.
                        let affinity = (!device.numa.is_empty())
                            .then(|| NumaMask::from_maskable_nodes(device.numa.iter().copied()));
                        (Arc::from(device.id.as_str()), affinity)
                    })
                    .collect();
                (Arc::from(resource.as_str()), ResourceDevices::new(devices))
            })
            .collect();
        Registry { resources }
    }

    /// The devices of `resource`, if it is a device-plugin resource (the
    /// kubelet's `isDevicePluginResource`: a plugin registered it).
    pub(crate) fn resource(&self, resource: &str) -> Option<&ResourceDevices> {
        self.resources.get(resource)
    }

    /// [`Registry::resource`] with the registry's shared copy of the name.
    pub(crate) fn resource_named(&self, resource: &str) -> Option<(&Arc<str>, &ResourceDevices)> {
        self.resources.get_key_value(resource)
    }

    /// Every resource name with its devices (the tests' view).
    #[cfg(test)]
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&Arc<str>, &ResourceDevices)> {
        self.resources.iter()
    }
}
