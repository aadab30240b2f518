//! The workload as the engine sees it: a pod's identity, QoS class and the
//! defaulted requests and limits of each container.
//!
//! Building one from a Kubernetes manifest (defaulting requests to limits,
//! computing the QoS class) is the `topoalign-k8s` crate's job.

use std::collections::BTreeMap;

use crate::Quantity;

/// A resource name: `cpu`, `memory`, `hugepages-1Gi`, `nvidia.com/gpu`, ...
pub type ResourceName = String;

/// Amounts per resource name.
pub type ResourceList = BTreeMap<ResourceName, Quantity>;

/// Kubernetes QoS class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QosClass {
    Guaranteed,
    Burstable,
    BestEffort,
}

impl QosClass {
    /// The name Kubernetes prints.
    pub fn as_str(self) -> &'static str {
        match self {
            QosClass::Guaranteed => "Guaranteed",
            QosClass::Burstable => "Burstable",
            QosClass::BestEffort => "BestEffort",
        }
    }
}

/// One container with its requests already defaulted from its limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    pub name: String,
    pub requests: ResourceList,
    pub limits: ResourceList,
    /// An init container with `restartPolicy: Always` (a sidecar): it keeps
    /// running for the pod's whole life.
    pub restartable: bool,
}

impl Container {
    /// The request for `resource`, zero when absent.
    pub fn request(&self, resource: &str) -> Quantity {
        self.requests.get(resource).copied().unwrap_or_default()
    }

    /// The limit for `resource`, zero when absent.
    pub fn limit(&self, resource: &str) -> Quantity {
        self.limits.get(resource).copied().unwrap_or_default()
    }
}

/// A pod: identity, QoS class, init containers then app containers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub qos: QosClass,
    pub init_containers: Vec<Container>,
    pub containers: Vec<Container>,
    /// `spec.overhead`, added to the pod's requests by the resource-fit check.
    pub overhead: ResourceList,
}

impl Pod {
    /// `namespace/name`, the key the results and state use.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Init containers then app containers, in spec order, each with whether
    /// it is an init container — the order the kubelet admits and starts them.
    pub fn all_containers(&self) -> impl Iterator<Item = (&Container, bool)> {
        self.init_containers
            .iter()
            .map(|c| (c, true))
            .chain(self.containers.iter().map(|c| (c, false)))
    }
}
