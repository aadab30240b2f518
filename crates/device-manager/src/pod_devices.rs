//! [`PodDevices`]: which devices each container of each pod holds (the
//! kubelet's `podDevices`), and what is therefore in use.
//!
//! Owns the allocation record only; choosing devices is `allocate.rs`'s
//! job. The kubelet keeps a separate `allocatedDevices` cache that is always
//! re-derived from this record before it is read in the flows we replay, so
//! here "in use" is simply computed from the record.

use std::collections::{BTreeMap, BTreeSet};

/// Device ids, ascending.
pub(crate) type DeviceSet = BTreeSet<String>;

/// Devices per resource name.
pub(crate) type DevicesByResource = BTreeMap<String, DeviceSet>;

/// pod uid → container name → resource → device ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PodDevices {
    by_pod: BTreeMap<String, BTreeMap<String, DevicesByResource>>,
}

impl PodDevices {
    /// Records (replacing any earlier record) the devices of one resource
    /// given to one container.
    pub(crate) fn insert(&mut self, pod_uid: &str, container: &str, resource: &str, devices: DeviceSet) {
        self.by_pod
            .entry(pod_uid.to_owned())
            .or_default()
            .entry(container.to_owned())
            .or_default()
            .insert(resource.to_owned(), devices);
    }

    /// Everything one container holds, per resource.
    pub(crate) fn container(&self, pod_uid: &str, container: &str) -> Option<&DevicesByResource> {
        self.by_pod.get(pod_uid)?.get(container)
    }

    /// The devices of `resource` one container holds; `None` when there is
    /// no record (the kubelet's nil set), which differs from a record of
    /// zero devices only in name: records are never empty.
    pub(crate) fn container_devices(&self, pod_uid: &str, container: &str, resource: &str) -> Option<&DeviceSet> {
        self.container(pod_uid, container)?.get(resource)
    }

    /// The devices of `resource` held by any container of the pod.
    pub(crate) fn pod_devices(&self, pod_uid: &str, resource: &str) -> DeviceSet {
        self.by_pod
            .get(pod_uid)
            .into_iter()
            .flat_map(|containers| containers.values())
            .filter_map(|resources| resources.get(resource))
            .flatten()
            .cloned()
            .collect()
    }

    /// The devices of `resource` held by any pod (the kubelet's
    /// `allocatedDevices[resource]`).
    pub(crate) fn in_use(&self, resource: &str) -> DeviceSet {
        self.by_pod
            .values()
            .flat_map(|containers| containers.values())
            .filter_map(|resources| resources.get(resource))
            .flatten()
            .cloned()
            .collect()
    }

    /// Every record: pod uid → container → resource → device ids.
    pub(crate) fn all(&self) -> BTreeMap<String, BTreeMap<String, BTreeMap<String, Vec<String>>>> {
        self.by_pod
            .iter()
            .map(|(uid, containers)| {
                let containers = containers
                    .iter()
                    .map(|(name, resources)| {
                        let resources = resources
                            .iter()
                            .map(|(resource, ids)| (resource.clone(), ids.iter().cloned().collect()))
                            .collect();
                        (name.clone(), resources)
                    })
                    .collect();
                (uid.clone(), containers)
            })
            .collect()
    }

    /// Forgets a pod.
    pub(crate) fn remove_pod(&mut self, pod_uid: &str) {
        self.by_pod.remove(pod_uid);
    }
}
