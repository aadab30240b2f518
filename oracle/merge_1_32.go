//go:build k8s_1_32 || k8s_1_33 || k8s_1_34

package main

// Policy.Merge as of v1.32-v1.34: no logger argument.

import "k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"

func policyMerge(p topologymanager.Policy, hints []map[string][]topologymanager.TopologyHint) (topologymanager.TopologyHint, bool) {
	return p.Merge(hints)
}
