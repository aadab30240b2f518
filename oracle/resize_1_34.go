//go:build k8s_1_34 || k8s_1_35

package main

// v1.34, v1.35: the allocation manager decides a resize in its own
// handlePodResourcesResize and canResizePod (unexported, run by
// RetryPendingResizes): static pods and swap are Infeasible; a Guaranteed
// pod's changed CPU request under the static CPU policy, or memory request
// under the Static memory policy, is Infeasible unless the
// InPlacePodVerticalScalingExclusive* gate is on; a pod asking for more CPU
// or memory than the node's absolute allocatable is Infeasible; then
// canAdmitPod runs the admit handlers registered on the manager — the
// kubelet registers all of its own, here the topology manager and the
// predicate handler in its order — and their refusal is Deferred with
// their message. The manager reads the node config and absolute
// allocatable (1.34 from the container manager, 1.35 given to its
// constructor: resize_api_<v>.go) and the container runtime's swap
// behaviour (SetContainerRuntime). The rest is resize_queue.go.

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
)

// pendingReasonsNormalized: the status manager records the reason it is
// given (Infeasible or Deferred, the only ones canResizePod returns).
const pendingReasonsNormalized = false

func (n *node) setupResize(kc *kubeletconfig.KubeletConfiguration) {
	n.resize.status = newResizeStatus()
	sync := func(pod *v1.Pod) { n.resize.synced = append(n.resize.synced, pod.UID) }
	n.resize.alloc = newAllocationManager(resizeNodeConfig(kc), nodeAllocatableAbsolute(kc, n.machine),
		n.resize.status, sync, n.podManagerActivePods, n.podManagerPod, alwaysReady{})
	n.resize.alloc.SetContainerRuntime(swaplessRuntime{})
	n.resize.alloc.AddPodAdmitHandlers(n.admitHandlers)
}

// nodeAllocatableAbsolute is the container manager's
// GetNodeAllocatableAbsolute (pkg/kubelet/cm
// getNodeAllocatableAbsoluteImpl, unexported; copied): its capacity
// (cadvisor.CapacityFromMachineInfo, as NewContainerManager takes it) less
// systemReserved and kubeReserved, never below zero; eviction thresholds
// are not subtracted. The reservations are those cmd/kubelet's run() gives
// the container manager, as startNode computes them (with
// reservedSystemCPUs set its size is the cpu reservation, in
// systemReserved); startNode has validated them.
func nodeAllocatableAbsolute(kc *kubeletconfig.KubeletConfiguration, machine *machineInfoT) v1.ResourceList {
	kubeReservedMap := copyMap(kc.KubeReserved)
	systemReservedMap := copyMap(kc.SystemReserved)
	if reserved, err := getReservedCPUs(machine, kc.ReservedSystemCPUs); err == nil && reserved.Size() > 0 {
		delete(kubeReservedMap, "cpu")
		if systemReservedMap == nil {
			systemReservedMap = map[string]string{}
		}
		systemReservedMap["cpu"] = fmt.Sprint(reserved.Size())
	}
	kubeReserved, _ := parseResourceList(kubeReservedMap)
	systemReserved, _ := parseResourceList(systemReservedMap)
	result := v1.ResourceList{}
	for name, capacity := range cadvisor.CapacityFromMachineInfo(machine) {
		value := capacity.DeepCopy()
		if systemReserved != nil {
			value.Sub(systemReserved[name])
		}
		if kubeReserved != nil {
			value.Sub(kubeReserved[name])
		}
		if value.Sign() < 0 {
			value.Set(0)
		}
		result[name] = value
	}
	return result
}
