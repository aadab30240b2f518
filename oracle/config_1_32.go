//go:build k8s_1_32

package main

// Start-up glue of cmd/kubelet that changed after v1.32.

import (
	"fmt"

	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/kubernetes/pkg/features"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
)

// applyEvictionHardDefault is the tail of cmd/kubelet/app/server.go
// loadConfigFile (copied): v1.32 has no merging of evictionHard with the
// defaults.
func applyEvictionHardDefault(kc *kubeletconfig.KubeletConfiguration) {
	// EvictionHard may be nil if it was not set in kubelet's config file.
	// EvictionHard can have OS-specific fields, which is why there's no default value for it.
	// See: https://github.com/kubernetes/kubernetes/pull/110263
	if kc.EvictionHard == nil {
		kc.EvictionHard = eviction.DefaultEvictionHard
	}
}

// cpuPolicyOptions is the feature-gate check of cmd/kubelet's run() for the
// CPU manager policy options (copied; later releases dropped it).
func cpuPolicyOptions(kc *kubeletconfig.KubeletConfiguration) (map[string]string, error) {
	var cpuManagerPolicyOptions map[string]string
	if utilfeature.DefaultFeatureGate.Enabled(features.CPUManagerPolicyOptions) {
		cpuManagerPolicyOptions = kc.CPUManagerPolicyOptions
	} else if kc.CPUManagerPolicyOptions != nil {
		return nil, fmt.Errorf("CPU Manager policy options %v require feature gates %q, %q enabled",
			kc.CPUManagerPolicyOptions, features.CPUManager, features.CPUManagerPolicyOptions)
	}
	return cpuManagerPolicyOptions, nil
}
