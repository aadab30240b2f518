//go:build k8s_1_36 || k8s_1_37

package main

import "k8s.io/dynamic-resource-allocation/cel"

// celFeatures: New's cel.NewCache(10, cel.Features{...}); list-type
// attributes are known to CEL from v1.36.
func celFeatures() cel.Features {
	fts := schedulerFeatures()
	return cel.Features{
		EnableConsumableCapacity: fts.EnableDRAConsumableCapacity,
		EnableListTypeAttributes: fts.EnableDRAListTypeAttributes,
	}
}
