//go:build k8s_1_36

package main

import fwk "k8s.io/kube-scheduler/framework"

// PodGroups: v1.36's SharedDRAManager also lists PodGroups (no case has
// any; the plugin asks only for pods in a group).
func (m *draManager) PodGroups() fwk.PodGroupLister { return nil }
