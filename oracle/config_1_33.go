//go:build k8s_1_33 || k8s_1_34 || k8s_1_35 || k8s_1_36 || k8s_1_37

package main

// Start-up glue of cmd/kubelet as of v1.33 (unchanged up to v1.37).

import (
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
)

// applyEvictionHardDefault is the tail of cmd/kubelet/app/server.go
// loadConfigFile (copied): from v1.33 a given evictionHard is merged with
// the defaults when mergeDefaultEvictionSettings is set.
func applyEvictionHardDefault(kc *kubeletconfig.KubeletConfiguration) {
	// EvictionHard may be nil if it was not set in kubelet's config file.
	// EvictionHard can have OS-specific fields, which is why there's no default value for it.
	// See: https://github.com/kubernetes/kubernetes/pull/110263
	if kc.EvictionHard == nil {
		kc.EvictionHard = eviction.DefaultEvictionHard
	} else if kc.MergeDefaultEvictionSettings {
		for k, v := range eviction.DefaultEvictionHard {
			if _, exists := kc.EvictionHard[k]; !exists {
				kc.EvictionHard[k] = v
			}
		}
	}
}

// cpuPolicyOptions: from v1.33 cmd/kubelet passes the CPU manager policy
// options on without a feature-gate check.
func cpuPolicyOptions(kc *kubeletconfig.KubeletConfiguration) (map[string]string, error) {
	return kc.CPUManagerPolicyOptions, nil
}
