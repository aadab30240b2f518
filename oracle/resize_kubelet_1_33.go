//go:build k8s_1_33

package main

// v1.33: the allocation manager holds the allocation, the status manager
// the PodResizePending condition (reason and message).

import (
	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	"k8s.io/kubernetes/pkg/kubelet/status"
)

type resizeRelease struct {
	status status.Manager
	alloc  allocation.Manager
}

const backOffField = "crashLoopBackOff"

var resizeRuntime kubecontainer.Runtime = swaplessRuntime{}

// resizeNodeConfig is the part of the container manager's NodeConfig
// canResizePod reads: the CPU and memory manager policies.
func resizeNodeConfig(kc *kubeletconfig.KubeletConfiguration) cm.NodeConfig {
	return cm.NodeConfig{CPUManagerPolicy: kc.CPUManagerPolicy, MemoryManagerPolicy: kc.MemoryManagerPolicy}
}

// setupResizeRelease: the real status manager (without a client nothing
// syncs) and the real allocation manager, without a checkpoint file.
func (n *node) setupResizeRelease(*kubeletconfig.KubeletConfiguration) map[string]any {
	n.resize.status = status.NewManager(nil, kubepod.NewBasicPodManager(), nil, nil)
	n.resize.alloc = allocation.NewInMemoryManager()
	return map[string]any{"statusManager": n.resize.status, "allocationManager": n.resize.alloc}
}

// syncResizes is SyncPod's test before handlePodResourcesResize.
func syncResizes(*v1.Pod) bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.InPlacePodVerticalScaling)
}

func (n *node) allocationDiffers(pod *v1.Pod) bool {
	_, differs := n.resize.alloc.UpdatePodFromAllocation(pod)
	return differs
}

// resizePending is the pod's PodResizePending condition.
func (n *node) resizePending(pod *v1.Pod) (string, string) {
	for _, c := range n.resize.status.GetPodResizeConditions(pod.UID) {
		if c.Type == v1.PodResizePending {
			return c.Reason, c.Message
		}
	}
	return "", ""
}

// recordAllocation is HandlePodAdditions's SetAllocatedResources (with the
// gate on) after the pod is admitted.
func (n *node) recordAllocation(pod *v1.Pod) {
	if n.resize.alloc != nil && utilfeature.DefaultFeatureGate.Enabled(features.InPlacePodVerticalScaling) {
		_ = n.resize.alloc.SetAllocatedResources(pod)
	}
}

// forgetAllocation is HandlePodRemoves's RemovePod.
func (n *node) forgetAllocation(pod *v1.Pod) {
	if n.resize.alloc != nil {
		n.resize.alloc.RemovePod(pod.UID)
	}
}

// heldResources is the container's allocation.
func (n *node) heldResources(pod *v1.Pod, name string) (v1.ResourceRequirements, bool) {
	return n.resize.alloc.GetContainerResourceAllocation(pod.UID, name)
}
