//go:build k8s_1_36 || k8s_1_37

package main

// v1.36+: a resize runs the allocation manager's admit handlers with the
// resize operation: allocation.NewPodResizesAdmitHandler first, then the
// kubelet's other handlers (here the topology manager and the predicate
// handler). The handler and the allocation manager are the kubelet's own;
// the harness supplies the container manager's node config and a runtime
// without swap, and copies the allocation manager's unexported
// handlePodResourcesResize/canAdmitPod loop (a few lines) in decideResize.

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	kubetypes "k8s.io/kubernetes/pkg/kubelet/types"
)

type resizeState struct {
	alloc   allocation.Manager
	handler lifecycle.PodAdmitHandler
}

// resizeContainerManager is the container manager as the resize handler
// reads it: the node config only (every other method is absent).
type resizeContainerManager struct {
	cm.ContainerManager
	config cm.NodeConfig
}

func (c resizeContainerManager) GetNodeConfig() cm.NodeConfig { return c.config }

// swaplessRuntime is the container runtime as the resize handler reads it:
// no container may swap (the harness's node has no swap).
type swaplessRuntime struct{ kubecontainer.Runtime }

func (swaplessRuntime) GetContainerSwapBehavior(*v1.Pod, *v1.Container) kubetypes.SwapBehavior {
	return kubetypes.NoSwap
}

func (n *node) setupResize(kc *kubeletconfig.KubeletConfiguration) {
	containers := resizeContainerManager{config: cm.NodeConfig{
		CPUManagerPolicy:    kc.CPUManagerPolicy,
		MemoryManagerPolicy: kc.MemoryManagerPolicy,
		CgroupVersion:       2,
	}}
	n.resize.alloc = newAllocationManager()
	n.resize.handler = newResizeHandler(containers, swaplessRuntime{}, n.resize.alloc)
}

// decideResize is handlePodResourcesResize and canAdmitPod of the
// allocation manager (copied): nothing to do when the desired resources are
// the allocated ones; otherwise every admit handler with the resize
// operation, the first refusal deciding; admitted, the allocation is
// checkpointed.
func (n *node) decideResize(desired *v1.Pod, others []*v1.Pod) (bool, string, string, error) {
	if _, updated := n.resize.alloc.UpdatePodFromAllocation(desired); !updated {
		return true, "", "", nil
	}
	for _, h := range append([]lifecycle.PodAdmitHandler{n.resize.handler}, n.admitHandlers...) {
		if r := admitResize(h, desired, others); !r.Admit {
			return false, r.Reason, r.Message, nil
		}
	}
	return true, "", "", setAllocatedResources(n.resize.alloc, desired)
}
