//go:build k8s_1_36

package main

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubelet/config"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/status"
)

func newAllocationManager(s status.Manager, sync func(*v1.Pod), active func() []*v1.Pod,
	byUID func(types.UID) (*v1.Pod, bool), ready config.SourcesReady, recorder record.EventRecorderLogger) allocation.Manager {
	return allocation.NewInMemoryManager(s, sync, active, byUID, ready, recorder)
}

func newResizeHandler(c cm.ContainerManager, r kubecontainer.Runtime, a allocation.Manager) lifecycle.PodAdmitHandler {
	return allocation.NewPodResizesAdmitHandler(c, r, a, klog.Background())
}
