//go:build k8s_1_36

package main

// kubeletMinor is the Kubernetes release whose kubelet code this build runs
// (k8s.io/kubernetes v1.36.3).
const kubeletMinor = "1.36"
