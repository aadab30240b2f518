//go:build k8s_1_35

package main

// release is the Kubernetes release whose dynamic-resource-allocation
// module this build runs.
const release = "1.35"
