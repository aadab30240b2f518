//go:build k8s_1_36 || k8s_1_37

package main

// v1.36+: the allocation manager's decision is its admit handlers, the
// kubelet registering allocation.NewPodResizesAdmitHandler (static pods,
// swap, a Guaranteed pod's exclusive CPUs or pinned memory under a static
// policy) before the other admit handlers (here the topology manager and
// the predicate handler), each run with the resize operation; a refusal
// other than Infeasible is recorded as Deferred. The rest is
// resize_queue.go.

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// pendingReasonsNormalized: the status manager records every pending
// reason but Infeasible as Deferred (pkg/kubelet/status, from 1.36).
const pendingReasonsNormalized = true

func (n *node) setupResize(kc *kubeletconfig.KubeletConfiguration) {
	containers := resizeContainerManager{config: resizeNodeConfig(kc)}
	n.resize.status = newResizeStatus()
	sync := func(pod *v1.Pod) { n.resize.synced = append(n.resize.synced, pod.UID) }
	n.resize.alloc = newAllocationManager(n.resize.status, sync, n.podManagerActivePods, n.podManagerPod,
		alwaysReady{}, &record.FakeRecorder{})
	handler := newResizeHandler(containers, swaplessRuntime{}, n.resize.alloc)
	n.resize.alloc.AddPodAdmitHandlers(append([]lifecycle.PodAdmitHandler{handler}, n.admitHandlers...))
}
