//go:build k8s_1_36 || k8s_1_37

package main

import dracel "k8s.io/dynamic-resource-allocation/cel"

// celFeatures are the compiler's features of 1.36 and later: consumable
// capacity and list-type attributes.
func celFeatures(f features) dracel.Features {
	return dracel.Features{
		EnableConsumableCapacity: f.ConsumableCapacity,
		EnableListTypeAttributes: f.ListTypeAttributes,
	}
}
