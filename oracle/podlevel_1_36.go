//go:build k8s_1_36 || k8s_1_37

package main

// From v1.36, with PodLevelResourceManagers, the CPU and memory managers
// keep a pod-level ("bubble") assignment beside the containers' for pods
// with pod-level resources; the result document shows it in `final`.

// podCPUAssignments is the CPU manager state's pod-level assignments by pod UID.
func podCPUAssignments(n *node) map[string]string {
	out := map[string]string{}
	for uid, entry := range n.cpu.State().GetPodCPUAssignments() {
		out[uid] = entry.CPUSet.String()
	}
	return out
}

// podMemoryAssignments is the memory manager state's pod-level assignments:
// the NUMA nodes of each pod's memory blocks, by pod UID.
func podMemoryAssignments(n *node) map[string][]int {
	out := map[string][]int{}
	for uid, entry := range n.memory.State().GetPodMemoryAssignments() {
		out[uid] = blockNUMANodes(entry.MemoryBlocks)
	}
	return out
}
