//go:build k8s_1_34

package main

// v1.34: the plugin keeps its feature flags in fields of its own (New) and
// fills structured.Features from them in PreFilter; the error classes of
// Filter have no ErrFailedAllocationOnNode yet (the allocator of v0.34 has
// none).

import (
	resourceapi "k8s.io/api/resource/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
)

// release is the Kubernetes release whose scheduler code this build runs
// (k8s.io/kubernetes v1.34.4, k8s.io/dynamic-resource-allocation v0.34.4).
const release = "1.34"

// allocatorFeatures: dynamicresources.go PreFilter, from the plugin's
// fields set in New from feature.NewSchedulerFeaturesFromGates.
func allocatorFeatures() structured.Features {
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	return structured.Features{
		AdminAccess:          fts.EnableDRAAdminAccess,
		PrioritizedList:      fts.EnableDRAPrioritizedList,
		PartitionableDevices: fts.EnablePartitionableDevices,
		DeviceTaints:         fts.EnableDRADeviceTaints,
		DeviceBinding:        fts.EnableDRADeviceBindingConditions,
		DeviceStatus:         fts.EnableDRAResourceClaimDeviceStatus,
		ConsumableCapacity:   fts.EnableConsumableCapacity,
	}
}

// celFeatures: New's cel.NewCache(10, cel.Features{...}).
func celFeatures() cel.Features {
	fts := feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
	return cel.Features{EnableConsumableCapacity: fts.EnableConsumableCapacity}
}

// classify is Filter's reading of Allocate's answer (the time-out cases
// aside): any error aborts scheduling (statusError), fewer results than
// claims is "cannot allocate all claims" (statusUnschedulable).
func classify(results []resourceapi.AllocationResult, err error, claims int) outcome {
	if err != nil {
		return schedulingError(err.Error())
	}
	if len(results) != claims {
		return unschedulable("cannot allocate all claims")
	}
	return allocated(results)
}
