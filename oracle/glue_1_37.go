//go:build k8s_1_37

package main

// cmd/kubelet start-up glue that changed in v1.37.

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/kubernetes/pkg/kubelet/stats/pidlimit"
)

// parseResourceList is cmd/kubelet/app/server.go parseResourceList (copied):
// from v1.37 a cpu quantity (kubeReserved, systemReserved) is rounded to
// whole millicores, half up, after being rounded up to whole microcores:
// "1500u" reserves 2m, "400u" nothing at all.
func parseResourceList(m map[string]string) (v1.ResourceList, error) {
	if len(m) == 0 {
		return nil, nil
	}
	rl := make(v1.ResourceList)
	for k, v := range m {
		switch v1.ResourceName(k) {
		// CPU, memory, local storage, and PID resources are supported.
		case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage, pidlimit.PIDs:
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("failed to parse quantity %q for %q resource: %w", v, k, err)
			}
			if q.Sign() == -1 {
				return nil, fmt.Errorf("resource quantity for %q cannot be negative: %v", k, v)
			}
			if v1.ResourceName(k) == v1.ResourceCPU {
				q.SetMilli((q.ScaledValue(resource.Micro) + 500) / 1000)
			}
			rl[v1.ResourceName(k)] = q
		default:
			return nil, fmt.Errorf("cannot reserve %q resource", k)
		}
	}
	return rl, nil
}
