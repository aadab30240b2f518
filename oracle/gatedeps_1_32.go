//go:build k8s_1_32 || k8s_1_33 || k8s_1_34

package main

import "k8s.io/component-base/featuregate"

// Before v1.35 the feature gate registry knows no dependencies between
// gates (component-base has no AddDependencies): nothing is refused for them.
func gateDependencies(featuregate.MutableVersionedFeatureGate) map[featuregate.Feature][]featuregate.Feature {
	return nil
}
