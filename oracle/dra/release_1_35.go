//go:build k8s_1_35

package main

import "k8s.io/dynamic-resource-allocation/cel"

// release is the Kubernetes release whose scheduler code this build runs
// (k8s.io/kubernetes v1.35.4, k8s.io/dynamic-resource-allocation v0.35.4).
const release = "1.35"

// celFeatures: New's cel.NewCache(10, cel.Features{...}).
func celFeatures() cel.Features {
	return cel.Features{EnableConsumableCapacity: schedulerFeatures().EnableDRAConsumableCapacity}
}
