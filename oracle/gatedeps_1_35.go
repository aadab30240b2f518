//go:build k8s_1_35 || k8s_1_36 || k8s_1_37

package main

import "k8s.io/component-base/featuregate"

// From v1.35 the feature gate registry records which gates a gate depends on
// (pkg/features: defaultKubernetesFeatureGateDependencies, plus the generic
// API server's); SetFromMap refuses a gate enabled while one it depends on is
// off ("X is enabled, but depends on features that are disabled: [Y]").
func gateDependencies(gate featuregate.MutableVersionedFeatureGate) map[featuregate.Feature][]featuregate.Feature {
	return gate.Dependencies()
}
