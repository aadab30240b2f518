//go:build k8s_1_32

package main

// v1.32: the status manager holds the allocation (app containers only)
// and the resize status; the reason's message is the event the kubelet
// records.

import (
	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/kuberuntime"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
	"k8s.io/kubernetes/pkg/kubelet/status"
)

type resizeRelease struct{ status status.Manager }

const backOffField = "backOff"

// resizeRuntime: 1.32's resize reads nothing of the container runtime.
var resizeRuntime kubecontainer.Runtime = struct{ kubecontainer.Runtime }{}

// resizeNodeConfig is the part of the container manager's NodeConfig
// canResizePod reads: the CPU manager policy and the memory manager's
// (ExperimentalMemoryManagerPolicy, as cmd/kubelet fills it).
func resizeNodeConfig(kc *kubeletconfig.KubeletConfiguration) cm.NodeConfig {
	return cm.NodeConfig{CPUManagerPolicy: kc.CPUManagerPolicy, ExperimentalMemoryManagerPolicy: kc.MemoryManagerPolicy}
}

// setupResizeRelease: the real status manager, started as the kubelet
// starts it — its allocation checkpoint (pod_status_manager_state in the
// root directory, with the gate on); without a client nothing syncs.
func (n *node) setupResizeRelease(*kubeletconfig.KubeletConfiguration) map[string]any {
	m := status.NewManager(nil, kubepod.NewBasicPodManager(), nil, nil, kubeletRootDir)
	m.Start()
	n.resize.status = m
	return map[string]any{"statusManager": m}
}

// syncResizes is SyncPod's test before handlePodResourcesResize.
func syncResizes(pod *v1.Pod) bool { return kuberuntime.IsInPlacePodVerticalScalingAllowed(pod) }

func (n *node) allocationDiffers(pod *v1.Pod) bool {
	_, differs := n.resize.status.UpdatePodFromAllocation(pod)
	return differs
}

// resizePending is the pod's resize status when Deferred or Infeasible,
// with the message of the event that said so.
func (n *node) resizePending(pod *v1.Pod) (string, string) {
	switch s := n.resize.status.GetPodResizeStatus(pod.UID); s {
	case v1.PodResizeStatusDeferred, v1.PodResizeStatusInfeasible:
		return string(s), n.resize.events.message[pod.UID]
	}
	return "", ""
}

// recordAllocation is HandlePodAdditions's SetPodAllocation (with the gate
// on) after the pod is admitted.
func (n *node) recordAllocation(pod *v1.Pod) {
	if n.resize.status != nil && utilfeature.DefaultFeatureGate.Enabled(features.InPlacePodVerticalScaling) {
		_ = n.resize.status.SetPodAllocation(pod)
	}
}

// forgetAllocation: 1.32's HandlePodRemoves keeps the allocation (the
// periodic cleanup drops it; a UID is never reused here).
func (n *node) forgetAllocation(*v1.Pod) {}

// heldResources is the container's allocation (app containers only).
func (n *node) heldResources(pod *v1.Pod, name string) (v1.ResourceRequirements, bool) {
	return n.resize.status.GetContainerResourceAllocation(string(pod.UID), name)
}
