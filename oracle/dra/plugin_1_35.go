//go:build k8s_1_35 || k8s_1_36 || k8s_1_37

package main

// v1.35 and later: the plugin's exported AllocatorFeatures fills
// structured.Features from feature.Features, and Filter tells
// ErrFailedAllocationOnNode (this node only) from other errors.

import (
	"errors"

	resourceapi "k8s.io/api/resource/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/dynamicresources"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/feature"
)

// schedulerFeatures: what the scheduler gives its plugins, from the
// release's default feature gates.
func schedulerFeatures() feature.Features {
	return feature.NewSchedulerFeaturesFromGates(utilfeature.DefaultFeatureGate)
}

// allocatorFeatures: the plugin's own function, as PreFilter calls it.
func allocatorFeatures() structured.Features {
	return dynamicresources.AllocatorFeatures(schedulerFeatures())
}

// classify is Filter's reading of Allocate's answer (the time-out cases
// aside): ErrFailedAllocationOnNode makes the pod unschedulable on this
// node with the error's text, any other error aborts scheduling
// (statusError), fewer results than claims is "cannot allocate all claims".
func classify(results []resourceapi.AllocationResult, err error, claims int) outcome {
	switch {
	case errors.Is(err, structured.ErrFailedAllocationOnNode):
		return unschedulable(err.Error())
	case err != nil:
		return schedulingError(err.Error())
	}
	if len(results) != claims {
		return unschedulable("cannot allocate all claims")
	}
	return allocated(results)
}
