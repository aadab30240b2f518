//go:build k8s_1_36

package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

func newAllocationManager() allocation.Manager {
	return allocation.NewInMemoryManager(nil, func(*v1.Pod) {}, func() []*v1.Pod { return nil },
		func(types.UID) (*v1.Pod, bool) { return nil, false }, nil, nil)
}

func newResizeHandler(c cm.ContainerManager, r kubecontainer.Runtime, a allocation.Manager) lifecycle.PodAdmitHandler {
	return allocation.NewPodResizesAdmitHandler(c, r, a, klog.Background())
}

func admitResize(h lifecycle.PodAdmitHandler, pod *v1.Pod, others []*v1.Pod) lifecycle.PodAdmitResult {
	return h.Admit(&lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: others, Operation: lifecycle.ResizeOperation})
}

func setAllocatedResources(a allocation.Manager, pod *v1.Pod) error {
	return a.SetAllocatedResources(pod)
}

func (n *node) recordAllocation(pod *v1.Pod) { _ = n.resize.alloc.SetAllocatedResources(pod) }

func (n *node) forgetAllocation(pod *v1.Pod) { n.resize.alloc.RemovePod(pod.UID) }
