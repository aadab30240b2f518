//go:build k8s_1_32 || k8s_1_33 || k8s_1_34 || k8s_1_35

package main

// Releases before v1.36 keep no pod-level ("bubble") CPU or memory
// assignments (PodLevelResourceManagers does not exist yet).

// podCPUAssignments is the CPU manager state's pod-level assignments by pod UID.
func podCPUAssignments(*node) map[string]string { return nil }

// podMemoryAssignments is the memory manager state's pod-level assignments:
// the NUMA nodes of each pod's memory blocks, by pod UID.
func podMemoryAssignments(*node) map[string][]int { return nil }
