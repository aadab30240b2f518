//go:build k8s_1_33

package main

// kubeletMinor is the Kubernetes release whose kubelet code this build runs
// (k8s.io/kubernetes v1.33.13).
const kubeletMinor = "1.33"
