//! Which devices each container holds, as the kubelet's device checkpoint
//! (`kubelet_internal_checkpoint`) records it, and restoring a manager from
//! such a record — plus the in-use view explanations read.
//!
//! Owns: [`DeviceAssignments`], [`DeviceManager::assignments`],
//! [`DeviceManager::restore`] and [`DeviceRestoreError`],
//! [`DeviceManager::devices_in_use`]. Must not touch: device choice or
//! hints.

use std::collections::BTreeMap;

use crate::DeviceManager;
use crate::pod_devices::PodDevices;

/// Pod uid → container name → resource → device ids.
pub type DeviceAssignments = BTreeMap<String, BTreeMap<String, BTreeMap<String, Vec<String>>>>;

/// A restored record that does not fit this node's devices.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceRestoreError {
    #[error("pod {pod}, container {container}: {resource} is not a device resource of this node")]
    UnknownResource {
        pod: String,
        container: String,
        resource: String,
    },
    #[error("pod {pod}, container {container}: {resource} has no device {id:?}")]
    UnknownDevice {
        pod: String,
        container: String,
        resource: String,
        id: String,
    },
    #[error("{resource} device {id:?} is held twice (pod {pod}, container {container})")]
    HeldTwice {
        pod: String,
        container: String,
        resource: String,
        id: String,
    },
}

impl DeviceManager {
    /// Every container's devices.
    pub fn assignments(&self) -> DeviceAssignments {
        self.pod_devices.all()
    }

    /// Replaces who holds which devices with a restored record (a kubelet
    /// restart re-reads its device checkpoint the same way). Reusable init
    /// container devices start empty.
    ///
    /// Within one pod a device may appear under several containers: the
    /// kubelet hands an init container's devices on to the pod's later
    /// containers. Two pods never share one.
    ///
    /// # Errors
    /// [`DeviceRestoreError`] for a resource or device this node does not
    /// have, or a device held by two pods; the manager is then unchanged.
    pub fn restore(&mut self, assignments: DeviceAssignments) -> Result<(), DeviceRestoreError> {
        let mut restored = PodDevices::default();
        let mut holder: BTreeMap<(&str, &str), &str> = BTreeMap::new();
        for (pod, containers) in &assignments {
            for (container, resources) in containers {
                for (resource, ids) in resources {
                    let Some((name, devices)) = self.registry.resource_named(resource) else {
                        return Err(DeviceRestoreError::UnknownResource {
                            pod: pod.clone(),
                            container: container.clone(),
                            resource: resource.clone(),
                        });
                    };
                    for id in ids {
                        if devices.interned(id).is_none() {
                            return Err(DeviceRestoreError::UnknownDevice {
                                pod: pod.clone(),
                                container: container.clone(),
                                resource: resource.clone(),
                                id: id.clone(),
                            });
                        }
                        let first = *holder.entry((resource.as_str(), id.as_str())).or_insert(pod.as_str());
                        if first != pod {
                            return Err(DeviceRestoreError::HeldTwice {
                                pod: pod.clone(),
                                container: container.clone(),
                                resource: resource.clone(),
                                id: id.clone(),
                            });
                        }
                    }
                    if !ids.is_empty() {
                        // Every id was found above: the registry's copies.
                        let ids = ids.iter().filter_map(|id| devices.interned(id)).cloned().collect();
                        restored.insert(pod, container, name, ids);
                    }
                }
            }
        }
        self.pod_devices = restored;
        self.reusable = Default::default();
        Ok(())
    }

    /// Whether some container holds device `id` of `resource`
    /// ([`DeviceManager::devices_in_use`] for one device, without the list).
    pub fn is_in_use(&self, resource: &str, id: &str) -> bool {
        self.pod_devices.in_use_view(resource).contains(id)
    }

    /// The devices of `resource` some container holds, ascending.
    pub fn devices_in_use(&self, resource: &str) -> Vec<String> {
        self.pod_devices
            .in_use(resource)
            .iter()
            .map(|id| id.to_string())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manager() -> DeviceManager {
        DeviceManager::new(
            &crate::testing::machine(2, &[("nvidia.com/gpu", "gpu0@0 gpu1@1")]),
            topoalign_model::KubeletVersion::V1_32,
        )
    }

    fn record(entries: &[(&str, &str, &str, &[&str])]) -> DeviceAssignments {
        let mut a = DeviceAssignments::new();
        for (pod, container, resource, ids) in entries {
            a.entry(pod.to_string())
                .or_default()
                .entry(container.to_string())
                .or_default()
                .insert(resource.to_string(), ids.iter().map(|s| s.to_string()).collect());
        }
        a
    }

    #[test]
    fn restores_and_reports_what_is_held() {
        let mut m = manager();
        let held = record(&[("p", "app", "nvidia.com/gpu", &["gpu1"])]);
        m.restore(held.clone()).expect("valid");
        assert_eq!(m.assignments(), held);
        assert_eq!(m.devices_in_use("nvidia.com/gpu"), ["gpu1"]);
        assert_eq!(m.container_devices("p", "app")["nvidia.com/gpu"], ["gpu1"]);
    }

    #[test]
    fn refuses_what_the_node_does_not_have() {
        let table = [
            (
                record(&[("p", "app", "example.com/nic", &["nic0"])]),
                "pod p, container app: example.com/nic is not a device resource of this node",
            ),
            (
                record(&[("p", "app", "nvidia.com/gpu", &["gpu7"])]),
                "pod p, container app: nvidia.com/gpu has no device \"gpu7\"",
            ),
            (
                record(&[
                    ("p", "a", "nvidia.com/gpu", &["gpu0"]),
                    ("q", "b", "nvidia.com/gpu", &["gpu0"]),
                ]),
                "nvidia.com/gpu device \"gpu0\" is held twice (pod q, container b)",
            ),
        ];
        // An init container's device handed on to an app container of the
        // same pod is one holder, not two.
        let mut m = manager();
        let handed_on = record(&[
            ("p", "init", "nvidia.com/gpu", &["gpu0"]),
            ("p", "app", "nvidia.com/gpu", &["gpu0"]),
        ]);
        m.restore(handed_on.clone()).expect("valid");
        assert_eq!(m.assignments(), handed_on);
        for (held, expected) in table {
            let mut m = manager();
            assert_eq!(m.restore(held).expect_err("refused").to_string(), expected);
            assert!(m.assignments().is_empty());
        }
    }
}
