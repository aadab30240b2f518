//go:build k8s_1_34 || k8s_1_35

package main

import dracel "k8s.io/dynamic-resource-allocation/cel"

// celFeatures are the compiler's features of 1.34 and 1.35: only
// consumable capacity (list-type attributes came in 1.36).
func celFeatures(f features) dracel.Features {
	return dracel.Features{EnableConsumableCapacity: f.ConsumableCapacity}
}
