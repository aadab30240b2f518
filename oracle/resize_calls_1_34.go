//go:build k8s_1_34 || k8s_1_35 || k8s_1_36

package main

// The allocation manager's calls and the status manager's
// ClearPodResizePendingCondition as 1.34–1.36 declare them (1.37 adds
// loggers and contexts: resize_api_1_37.go).

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
)

func setAllocatedResources(a allocation.Manager, pod *v1.Pod) error {
	return a.SetAllocatedResources(pod)
}

func removeAllocation(a allocation.Manager, uid types.UID) { a.RemovePod(uid) }

func pushPendingResize(a allocation.Manager, uid types.UID) { a.PushPendingResize(uid) }

func retryPendingResizes(a allocation.Manager, trigger string) { a.RetryPendingResizes(trigger) }

func (s *resizeStatus) ClearPodResizePendingCondition(uid types.UID) { clearPending(s, uid) }
