//go:build k8s_1_35 || k8s_1_36 || k8s_1_37

package main

// The status manager's resize-condition setters as 1.35+ declare them
// (1.34: resize_api_1_34.go), and what else 1.35 changed on the resize
// path.

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podLevelResizeRecorded: recordResizeOperations also looks at the
// pod-level resources (recordPodLevelResourceResizeOperations, 1.35+).
const podLevelResizeRecorded = true

func (s *resizeStatus) SetPodResizePendingCondition(uid types.UID, reason, message string, generation int64) bool {
	return s.setPending(uid, reason, message, generation)
}

func (s *resizeStatus) SetPodResizeInProgressCondition(uid types.UID, reason, message string, generation int64) (int64, bool) {
	return s.setInProgress(uid, reason, message, generation)
}

func (s *resizeStatus) ClearPodResizeInProgressCondition(uid types.UID) (int64, bool) {
	return s.clearInProgress(uid)
}

// resizeModelled: from 1.35 the harness models every resize the kubelet
// decides (1.34: resize_api_1_34.go).
func (n *node) resizeModelled(int, *v1.Pod) error { return nil }
