//! [`PodDevices`]: which devices each container of each pod holds (the
//! kubelet's `podDevices`), and what is therefore in use.
//!
//! Owns the allocation record only; choosing devices is `allocate.rs`'s
//! job. The kubelet keeps a separate `allocatedDevices` cache that is always
//! re-derived from this record before it is read in the flows we replay;
//! here it is kept beside the record as a count of the records holding each
//! device, updated on every change, so that asking what is in use costs the
//! machine's device count, not the pod's container count (a pod with
//! thousands of init containers asks once per container).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Device ids, ascending: the registry's shared strings (`registry`), so
/// that a record copies no text.
pub(crate) type DeviceSet = BTreeSet<Arc<str>>;

/// Devices per resource name (the registry's shared names).
pub(crate) type DevicesByResource = BTreeMap<Arc<str>, DeviceSet>;

/// The devices of one resource held by any pod, borrowed from the record
/// ([`PodDevices::in_use_view`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct InUse<'a>(Option<&'a BTreeMap<Arc<str>, usize>>);

impl InUse<'_> {
    pub(crate) fn contains(&self, id: &str) -> bool {
        self.0.is_some_and(|holders| holders.contains_key(id))
    }
}

/// pod uid → container name → resource → device ids.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PodDevices {
    /// Each pod's record is shared between clones and copied on its first
    /// change ([`Arc::make_mut`]): a trial admission clones the record to
    /// admit one pod.
    by_pod: BTreeMap<String, Arc<BTreeMap<String, DevicesByResource>>>,
    /// resource → device id → how many records above hold it; a device
    /// whose last record goes is removed, so the keys are what is in use.
    holders: BTreeMap<Arc<str>, BTreeMap<Arc<str>, usize>>,
}

/// Makes `map`'s entry for `key` (copying `key`) only when it is missing.
fn ensure_entry<V: Default>(map: &mut BTreeMap<String, V>, key: &str) {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), V::default());
    }
}

impl PodDevices {
    /// Records (replacing any earlier record) the devices of one resource
    /// given to one container.
    pub(crate) fn insert(&mut self, pod_uid: &str, container: &str, resource: &Arc<str>, devices: DeviceSet) {
        if !self.holders.contains_key(resource) {
            self.holders.insert(resource.clone(), BTreeMap::new());
        }
        if let Some(holders) = self.holders.get_mut(resource) {
            for id in &devices {
                match holders.get_mut(id) {
                    Some(count) => *count += 1,
                    None => {
                        holders.insert(id.clone(), 1);
                    }
                }
            }
        }
        ensure_entry(&mut self.by_pod, pod_uid);
        let Some(pod) = self.by_pod.get_mut(pod_uid) else {
            return;
        };
        let pod = Arc::make_mut(pod);
        ensure_entry(pod, container);
        let Some(held) = pod.get_mut(container) else {
            return;
        };
        let replaced = held.insert(resource.clone(), devices);
        if let Some(replaced) = replaced {
            self.release(resource, &replaced);
        }
    }

    /// One record of `devices` of `resource` fewer.
    fn release(&mut self, resource: &str, devices: &DeviceSet) {
        let Some(holders) = self.holders.get_mut(resource) else {
            return;
        };
        for id in devices {
            if let Some(count) = holders.get_mut(id) {
                *count -= 1;
                if *count == 0 {
                    holders.remove(id);
                }
            }
        }
        if holders.is_empty() {
            self.holders.remove(resource);
        }
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
        self.holders
            .get(resource)
            .map(|holders| holders.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// [`PodDevices::in_use`] borrowed, for asking about single devices
    /// without copying the set.
    pub(crate) fn in_use_view(&self, resource: &str) -> InUse<'_> {
        InUse(self.holders.get(resource))
    }

    /// Every record, borrowed: pod uid → container → resource → device ids.
    pub(crate) fn by_pod(&self) -> &BTreeMap<String, Arc<BTreeMap<String, DevicesByResource>>> {
        &self.by_pod
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
                            .map(|(resource, ids)| {
                                (resource.to_string(), ids.iter().map(|id| id.to_string()).collect())
                            })
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
        let Some(containers) = self.by_pod.remove(pod_uid) else {
            return;
        };
        for resources in containers.values() {
            for (resource, devices) in resources {
                self.release(resource, devices);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[&str]) -> DeviceSet {
        ids.iter().map(|id| Arc::from(*id)).collect()
    }

    /// What is in use, recomputed from the record alone.
    fn recomputed(devices: &PodDevices, resource: &str) -> DeviceSet {
        devices
            .all()
            .values()
            .flat_map(|containers| containers.values())
            .filter_map(|resources| resources.get(resource))
            .flatten()
            .map(|id| Arc::from(id.as_str()))
            .collect()
    }

    #[test]
    fn in_use_follows_every_insert_replacement_and_removal() {
        let mut devices = PodDevices::default();
        let (gpu, nic): (Arc<str>, Arc<str>) = ("gpu".into(), "nic".into());
        devices.insert("a", "init", &gpu, set(&["g0"]));
        devices.insert("a", "app", &gpu, set(&["g0", "g1"]));
        devices.insert("b", "app", &gpu, set(&["g2"]));
        devices.insert("b", "app", &nic, set(&["n0"]));
        assert_eq!(devices.in_use("gpu"), set(&["g0", "g1", "g2"]));
        // A replaced record gives up what it no longer names.
        devices.insert("a", "app", &gpu, set(&["g3"]));
        assert_eq!(devices.in_use("gpu"), recomputed(&devices, "gpu"));
        assert_eq!(devices.in_use("gpu"), set(&["g0", "g2", "g3"]));
        // g0 is still held by a's init container until a goes.
        devices.remove_pod("a");
        assert_eq!(devices.in_use("gpu"), set(&["g2"]));
        devices.remove_pod("b");
        assert_eq!(devices.in_use("gpu"), DeviceSet::new());
        assert_eq!(devices.in_use("nic"), DeviceSet::new());
        assert_eq!(devices, PodDevices::default());
    }
}
