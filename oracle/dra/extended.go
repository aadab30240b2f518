//go:build k8s_1_34 || k8s_1_35 || k8s_1_36 || k8s_1_37

package main

// Cases with a pod: DRA-backed extended resources (KEP-5004, feature
// DRAExtendedResource). A pod's plain extended-resource request (e.g.
// example.com/gpu: 1) on a node without that allocatable can be served by a
// DeviceClass (spec.extendedResourceName, or the implicit
// deviceclass.resource.kubernetes.io/<class>); the DynamicResources plugin
// then builds a special claim for the pod and allocates it after the pod's
// own claims. decidePod (per release: extended_off.go, extended_on.go)
// answers such a case.

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
)

// extendedResourceClaim is what the plugin's Filter prepared for the node:
// the special claim's requests, the container → request mappings PreBind
// writes to pod.status.extendedResourceClaimStatus, and the allocation.
type extendedResourceClaim struct {
	Requests        []resourceapi.DeviceRequest           `json:"requests"`
	RequestMappings []v1.ContainerExtendedResourceRequest `json:"requestMappings"`
	Allocation      resourceapi.AllocationResult          `json:"allocation"`
}
