//go:build k8s_1_37

package main

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubelet/config"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/metrics"
	"k8s.io/kubernetes/pkg/kubelet/status"
)

func newAllocationManager(s status.Manager, sync func(*v1.Pod), active func() []*v1.Pod,
	byUID func(types.UID) (*v1.Pod, bool), ready config.SourcesReady, recorder record.EventRecorderLogger) allocation.Manager {
	return allocation.NewInMemoryManager(klog.Background(), s, func(_ context.Context, pod *v1.Pod) { sync(pod) },
		active, byUID, ready, recorder)
}

func newResizeHandler(c cm.ContainerManager, r kubecontainer.Runtime, a allocation.Manager) lifecycle.PodAdmitHandler {
	return allocation.NewPodResizesAdmitHandler(c, r, a)
}

func setAllocatedResources(a allocation.Manager, pod *v1.Pod) error {
	return a.SetAllocatedResources(klog.Background(), pod)
}

func removeAllocation(a allocation.Manager, uid types.UID) { a.RemovePod(klog.Background(), uid) }

func pushPendingResize(a allocation.Manager, uid types.UID) {
	a.PushPendingResize(klog.Background(), uid)
}

func retryPendingResizes(a allocation.Manager, trigger string) {
	a.RetryPendingResizes(context.Background(), trigger)
}

func (s *resizeStatus) ClearPodResizePendingCondition(uid types.UID, _ metrics.DeferredResizeResolution) {
	clearPending(s, uid)
}
