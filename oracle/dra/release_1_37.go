//go:build k8s_1_37

package main

// release is the Kubernetes release whose scheduler code this build runs
// (k8s.io/kubernetes v1.37.2, k8s.io/dynamic-resource-allocation v0.37.2).
const release = "1.37"
