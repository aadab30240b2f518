//go:build k8s_1_33 || k8s_1_34 || k8s_1_35 || k8s_1_36 || k8s_1_37

package main

import (
	v1 "k8s.io/api/core/v1"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

// swaplessRuntime is the container runtime as the resize decision reads
// it (1.33+: whether a resize changes a swapping container's memory): no
// container may swap (the harness's node has no swap).
type swaplessRuntime struct{ kubecontainer.Runtime }

func (swaplessRuntime) GetContainerSwapBehavior(*v1.Pod, *v1.Container) kubetypes.SwapBehavior {
	return kubetypes.NoSwap
}
