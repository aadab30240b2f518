//go:build k8s_1_35

package main

// kubeletMinor is the Kubernetes release whose kubelet code this build runs
// (k8s.io/kubernetes v1.35.4).
const kubeletMinor = "1.35"
