//go:build k8s_1_32

package main

// kubeletMinor is the Kubernetes release whose kubelet code this build runs
// (k8s.io/kubernetes v1.32.10).
const kubeletMinor = "1.32"
