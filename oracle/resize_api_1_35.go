//go:build k8s_1_35

package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/status"
)

// newAllocationManager: 1.35's manager takes the node config and absolute
// allocatable themselves, and an event recorder.
func newAllocationManager(nodeConfig cm.NodeConfig, allocatable v1.ResourceList, s status.Manager,
	sync func(*v1.Pod), active func() []*v1.Pod, byUID func(types.UID) (*v1.Pod, bool),
	ready config.SourcesReady) allocation.Manager {
	return allocation.NewInMemoryManager(nodeConfig, allocatable, s, sync, active, byUID, ready, &record.FakeRecorder{})
}
