//go:build k8s_1_36

package main

// release is the Kubernetes release whose scheduler code this build runs
// (k8s.io/kubernetes v1.36.3, k8s.io/dynamic-resource-allocation v0.36.3).
const release = "1.36"
