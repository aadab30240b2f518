//! One allocation case: the input the scheduler's DRA allocator sees for one
//! node and one pod, and its outcome. The same JSON is read by the Go oracle
//! (`oracle/dra`), which runs the real allocator on it, and by this crate, so
//! the two can be compared field for field.
//!
//! ```yaml
//! release: "1.37"              # the kube-scheduler release whose allocator decides
//! node: {metadata: {name: node-1, labels: {...}}}          # core/v1 Node
//! deviceClasses: [...]         # resource.k8s.io/v1 DeviceClass
//! resourceSlices: [...]        # resource.k8s.io/v1 ResourceSlice, every node's
//! allocatedClaims: [...]       # ResourceClaims with status.allocation: devices in use
//! claims: [...]                # the pod's ResourceClaims to allocate, in the pod's order
//! ```

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::resource::v1::{AllocationResult, DeviceClass, ResourceClaim, ResourceSlice};
use serde::{Deserialize, Serialize};

/// The allocator's input for one node and one pod.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllocationCase {
    /// The kube-scheduler release ("1.34" … "1.37"): its allocator and its
    /// default DRA feature gates.
    pub release: String,
    /// The node the claims are allocated for (its name and labels matter).
    pub node: Node,
    #[serde(default)]
    pub device_classes: Vec<DeviceClass>,
    #[serde(default)]
    pub resource_slices: Vec<ResourceSlice>,
    /// Claims already allocated (status.allocation set): their devices are in
    /// use, and their consumed counters and capacity are taken.
    #[serde(default)]
    pub allocated_claims: Vec<ResourceClaim>,
    /// The pod's claims to allocate together, in the pod's order.
    #[serde(default)]
    pub claims: Vec<ResourceClaim>,
}

/// What the allocator answered.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(tag = "result", rename_all = "camelCase")]
pub enum Outcome {
    /// One allocation per claim, in the claims' order.
    Allocated { allocations: Vec<AllocationResult> },
    /// The claims cannot all be allocated on this node (the allocator's nil
    /// result, or an error that affects only this node); `message` is the
    /// allocator's text where it gives one.
    Unschedulable {
        #[serde(default, skip_serializing_if = "String::is_empty")]
        message: String,
    },
    /// A problem with the input that stops scheduling everywhere (a CEL
    /// selector that does not compile or fails at runtime, a missing class).
    Error { message: String },
}
