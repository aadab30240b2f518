//go:build k8s_1_34 || k8s_1_35

package main

// v1.34 and v1.35: DRAExtendedResource is alpha and off by default; the
// plugin's preFilterExtendedResources returns at once when the scheduler's
// feature (filled from the gate) is off, so the pod's extended resources
// are left to NodeResourcesFit and the case is decided as one without a pod.

import (
	"fmt"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	kubefeatures "k8s.io/kubernetes/pkg/features"
)

// decidePod: handled is false when the gate is off (decide goes on without
// the pod).
func decidePod(c *allocationCase) (outcome, bool) {
	if !utilfeature.DefaultFeatureGate.Enabled(kubefeatures.DRAExtendedResource) {
		return outcome{}, false
	}
	return oracleError(fmt.Sprintf("DRAExtendedResource is on: the v%s harness runs it only off (its default)", release)), true
}
