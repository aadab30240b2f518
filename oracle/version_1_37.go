//go:build k8s_1_37

package main

// kubeletMinor is the Kubernetes release whose kubelet code this build runs
// (k8s.io/kubernetes v1.37.2).
const kubeletMinor = "1.37"
