//go:build k8s_1_35 || k8s_1_36 || k8s_1_37

package main

// Policy.Merge from v1.35: the logger is an argument.

import (
	"github.com/go-logr/logr"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
)

func policyMerge(p topologymanager.Policy, hints []map[string][]topologymanager.TopologyHint) (topologymanager.TopologyHint, bool) {
	return p.Merge(logr.Discard(), hints)
}
