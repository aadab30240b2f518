//go:build k8s_1_32 || k8s_1_33

package main

// v1.32, v1.33: the resizes whose answer the container status decides
// under the Static memory policy and the pod scope, which the harness
// refuses to answer (a harness failure naming the event), as topoalign
// does (crates/engine/src/node/resize.rs, Node::init_memory_by_status:
// ResizeError::NotReproduced). The same cases: the table
// testdata/resize-refusals.json, which TestResizeRefusals (this harness)
// and crates/scenario/tests/resize_refusals.rs (the engine) both replay.
//
// When canResizePod lets a Guaranteed pod's resize reach canAdmitPod, the
// topology manager admits the pod again and the memory manager allocates
// the memory of an init container that ran to completion (AddContainer of
// the next container dropped its blocks) afresh, on the NUMA nodes of the
// pod's merged hint. Under the pod scope of an aligning policy on more
// than one NUMA node, that hint comes from the CPU manager's
// podGuaranteedCPUs and the memory manager's getPodRequestedResources (and
// regenerateHints, which gives the held blocks' NUMA nodes only when the
// pod's total equals their size), which count an app container (1.33: and
// a sidecar) by its status's allocatedResources (guaranteedCPUs,
// getRequestedResources in policy_static.go): the spec's sizes before the
// kubelet writes the status; after, 1.32 without
// InPlacePodVerticalScalingAllocatedStatus (alpha, off) nothing, 1.33 (and
// 1.32 with it) the held sizes. The harness's pods carry no status. Where
// the readings can differ the harness answers nothing: on 1.32 always, on
// 1.33 when an app container or sidecar changes its memory request, or
// its CPU request under the static CPU policy.

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
)

// initMemoryGuard is the first admit handler of the resize's canAdmitPod
// (resize_1_32.go, setupResize): the point where the engine checks too,
// after canResizePod's own refusals and capacity check. It refuses the
// pod (so no manager allocates) and leaves the message for resizeUpdate,
// which answers the event with it as a harness failure.
type initMemoryGuard struct{ n *node }

func (g initMemoryGuard) Admit(attrs *lifecycle.PodAdmitAttributes) lifecycle.PodAdmitResult {
	if message := g.n.initMemoryByStatus(attrs.Pod); message != "" {
		g.n.resize.refusal = message
		return lifecycle.PodAdmitResult{Admit: false, Reason: "NotModelled", Message: message}
	}
	return lifecycle.PodAdmitResult{Admit: true}
}

// initMemoryByStatus is the refusal's message for the resized (desired)
// pod reaching the admit handlers, or "" when the harness's answer is the
// kubelet's whatever the status says (see the top of the file).
func (n *node) initMemoryByStatus(pod *v1.Pod) string {
	policy := n.config.TopologyManagerPolicy
	if v1qos.GetPodQOS(pod) != v1.PodQOSGuaranteed || n.config.MemoryManagerPolicy != "Static" ||
		policy == "none" || n.config.TopologyManagerScope != "pod" || len(n.machine.Topology) < 2 {
		return ""
	}
	init := ""
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			continue
		}
		if len(n.memory.State().GetMemoryBlocks(string(pod.UID), c.Name)) == 0 {
			init = c.Name
			break
		}
	}
	if init == "" {
		return ""
	}
	if kubeletMinor != "1.32" && !n.countedSizeChanged(pod) {
		return ""
	}
	return fmt.Sprintf("not modelled: the v%s kubelet under the Static memory policy and the pod scope of the %s topology manager policy allocates the memory of init container %q, which ran to completion, again on the NUMA nodes of the pod's merged hint, which the CPU and memory managers work out from the container status's allocatedResources, which the harness's pods do not carry",
		kubeletMinor, policy, init)
}

// countedSizeChanged: an app container or sidecar of the desired pod asks
// for another memory request than it holds, or another CPU request under
// the static CPU policy — the sizes the managers count by the status.
func (n *node) countedSizeChanged(pod *v1.Pod) bool {
	staticCPU := n.config.CPUManagerPolicy == "static"
	changed := func(c *v1.Container) bool {
		held, ok := n.heldResources(pod, c.Name)
		if !ok {
			return false
		}
		differs := func(name v1.ResourceName) bool {
			return !c.Resources.Requests[name].Equal(held.Requests[name])
		}
		return differs(v1.ResourceMemory) || (staticCPU && differs(v1.ResourceCPU))
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways && changed(c) {
			return true
		}
	}
	for i := range pod.Spec.Containers {
		if changed(&pod.Spec.Containers[i]) {
			return true
		}
	}
	return false
}
