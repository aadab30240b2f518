//go:build k8s_1_32 || k8s_1_33 || k8s_1_34 || k8s_1_35

package main

// v1.32-v1.35 decide a resize in unexported code: (*Kubelet).canResizePod
// (pkg/kubelet/kubelet.go, 1.32 and 1.33) and (*allocation.manager).canResizePod
// (1.34, 1.35, reached only through the allocation manager's pending-resize
// queue, whose admit decision is that unexported canResizePod rather than
// admit handlers the harness could register). The harness does not call
// them: a scenario with a resize event of an admitted pod is a harness
// failure here, and the engine is checked against vectors derived from
// reading that code (oracle/README.md).

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
)

type resizeState struct{}

func (n *node) setupResize(*kubeletconfig.KubeletConfiguration) {}

func (n *node) recordAllocation(*v1.Pod) {}

func (n *node) forgetAllocation(*v1.Pod) {}

func (n *node) resizeUpdate(int, *podEntry, *v1.Pod) (map[string]any, error) {
	return nil, fmt.Errorf("resize events: the v%s kubelet decides them in unexported code the harness does not call (oracle/README.md)", kubeletMinor)
}

// retryAfterRemoval: no resize was ever pending here.
func (n *node) retryAfterRemoval() []string { return nil }
