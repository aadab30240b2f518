//go:build k8s_1_34

package main

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/status"
)

// newAllocationManager: 1.34's manager reads the node config and absolute
// allocatable from the container manager.
func newAllocationManager(nodeConfig cm.NodeConfig, allocatable v1.ResourceList, s status.Manager,
	sync func(*v1.Pod), active func() []*v1.Pod, byUID func(types.UID) (*v1.Pod, bool),
	ready config.SourcesReady) allocation.Manager {
	containers := resizeContainerManager{config: nodeConfig, allocatable: allocatable}
	return allocation.NewInMemoryManager(containers, s, sync, active, byUID, ready)
}

func (c resizeContainerManager) GetNodeAllocatableAbsolute() v1.ResourceList { return c.allocatable }

// podLevelResizeRecorded: 1.34's recordContainerResizeOperations looks at
// the containers only.
const podLevelResizeRecorded = false

// The status manager's resize-condition setters as 1.34 declares them.

func (s *resizeStatus) SetPodResizePendingCondition(uid types.UID, reason, message string, generation int64) {
	s.setPending(uid, reason, message, generation)
}

func (s *resizeStatus) SetPodResizeInProgressCondition(uid types.UID, reason, message string, generation int64) {
	s.setInProgress(uid, reason, message, generation)
}

func (s *resizeStatus) ClearPodResizeInProgressCondition(uid types.UID) bool {
	_, cleared := s.clearInProgress(uid)
	return cleared
}

// resizeModelled refuses the resizes whose answer would be the harness's
// rather than the kubelet's: with InPlacePodVerticalScalingExclusiveCPUs
// (...ExclusiveMemory) on, canResizePod lets a Guaranteed pod's changed
// CPU (memory) request under the static CPU (Static memory) policy reach
// the admit handlers, where 1.34's CPU and memory managers size what the
// container holds by its status's allocatedResources (policy_static.go,
// guaranteedCPUs and getRequestedResources) — a status the kubelet writes
// and the harness's pods do not carry. The test is canResizePod's
// (guaranteedPodResourceResizeRequired: a resizable container's request
// differs from its allocation).
func (n *node) resizeModelled(i int, pod *v1.Pod) error {
	if v1qos.GetPodQOS(pod) != v1.PodQOSGuaranteed {
		return nil
	}
	for _, c := range []struct {
		gate     featuregate.Feature
		static   bool
		resource v1.ResourceName
	}{
		{features.InPlacePodVerticalScalingExclusiveCPUs, n.config.CPUManagerPolicy == "static", v1.ResourceCPU},
		{features.InPlacePodVerticalScalingExclusiveMemory, n.config.MemoryManagerPolicy == "Static", v1.ResourceMemory},
	} {
		if !c.static || !utilfeature.DefaultFeatureGate.Enabled(c.gate) {
			continue
		}
		for container, kind := range podutil.ContainerIter(&pod.Spec, podutil.InitContainers|podutil.Containers) {
			if !allocation.IsResizableContainer(container, kind) {
				continue
			}
			held, _ := n.resize.alloc.GetContainerResourceAllocation(pod.UID, container.Name)
			if !container.Resources.Requests[c.resource].Equal(held.Requests[c.resource]) {
				return fmt.Errorf("events[%d].resize: not modelled: with %s on, the v1.34 kubelet sizes the %s a Guaranteed pod's container holds by its status's allocatedResources, which the harness's pods do not carry",
					i, c.gate, c.resource)
			}
		}
	}
	return nil
}
