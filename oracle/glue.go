package main

// Small pieces of kubelet start-up glue that live in unexported code
// (cmd/kubelet/app/server.go and pkg/kubelet/cm) and so cannot be called from
// outside the kubelet. They are copied verbatim from the Kubernetes sources
// apart from the adaptations copied/table.go declares (receivers turned into
// parameters, contexts and loggers dropped); the decisions they feed are all
// made by exported kubelet code. Those identical in every supported release
// are here; a copy that differs between releases has a build-tagged file per
// version (glue_1_3x.go, config_1_3x.go). `go test ./copied` compares each
// with its releases' sources.

import (
	"fmt"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	"k8s.io/kubernetes/pkg/kubelet/kubeletconfig/configfiles"
	utilfs "k8s.io/kubernetes/pkg/util/filesystem"
	"k8s.io/utils/cpuset"
)

// loadConfigFile is cmd/kubelet/app/server.go loadConfigFile.
func loadConfigFile(name string) (*kubeletconfig.KubeletConfiguration, error) {
	const errFmt = "failed to load Kubelet config file %s, error %v"
	// compute absolute path based on current working dir
	kubeletConfigFile, err := filepath.Abs(name)
	if err != nil {
		return nil, fmt.Errorf(errFmt, name, err)
	}
	loader, err := configfiles.NewFsLoader(&utilfs.DefaultFs{}, kubeletConfigFile)
	if err != nil {
		return nil, fmt.Errorf(errFmt, name, err)
	}
	kc, err := loadWith(loader)
	if err != nil {
		return nil, fmt.Errorf(errFmt, name, err)
	}

	// The evictionHard defaulting that follows differs between releases.
	applyEvictionHardDefault(kc)
	return kc, err
}

// getReservedCPUs is cmd/kubelet/app/server.go getReservedCPUs.
func getReservedCPUs(machineInfo *machineInfoT, cpus string) (cpuset.CPUSet, error) {
	emptyCPUSet := cpuset.New()

	if cpus == "" {
		return emptyCPUSet, nil
	}

	topo, err := discoverTopology(machineInfo)
	if err != nil {
		return emptyCPUSet, fmt.Errorf("unable to discover CPU topology info: %s", err)
	}
	reservedCPUSet, err := cpuset.Parse(cpus)
	if err != nil {
		return emptyCPUSet, fmt.Errorf("unable to parse reserved-cpus list: %s", err)
	}
	allCPUSet := topo.CPUDetails.CPUs()
	if !reservedCPUSet.IsSubsetOf(allCPUSet) {
		return emptyCPUSet, fmt.Errorf("reserved-cpus: %s is not a subset of online-cpus: %s", cpus, allCPUSet.String())
	}
	return reservedCPUSet, nil
}

// hardEvictionReservation is pkg/kubelet/cm/helpers.go hardEvictionReservation.
func hardEvictionReservation(thresholds []evictionapi.Threshold, capacity v1.ResourceList) v1.ResourceList {
	if len(thresholds) == 0 {
		return nil
	}
	ret := v1.ResourceList{}
	for _, threshold := range thresholds {
		if threshold.Operator != evictionapi.OpLessThan {
			continue
		}
		switch threshold.Signal {
		case evictionapi.SignalMemoryAvailable:
			memoryCapacity := capacity[v1.ResourceMemory]
			value := evictionapi.GetThresholdQuantity(threshold.Value, &memoryCapacity)
			ret[v1.ResourceMemory] = *value
		case evictionapi.SignalNodeFsAvailable:
			storageCapacity := capacity[v1.ResourceEphemeralStorage]
			value := evictionapi.GetThresholdQuantity(threshold.Value, &storageCapacity)
			ret[v1.ResourceEphemeralStorage] = *value
		}
	}
	return ret
}

// nodeConfig holds the parts of cm.NodeConfig the copied functions read.
type nodeConfig struct {
	SystemReserved         v1.ResourceList
	KubeReserved           v1.ResourceList
	HardEvictionThresholds []evictionapi.Threshold
}

// getNodeAllocatableReservation is pkg/kubelet/cm
// (*containerManagerImpl).GetNodeAllocatableReservation.
func getNodeAllocatableReservation(cfg nodeConfig, capacity v1.ResourceList) v1.ResourceList {
	evictionReservation := hardEvictionReservation(cfg.HardEvictionThresholds, capacity)
	result := make(v1.ResourceList)
	for k := range capacity {
		value := resource.NewQuantity(0, resource.DecimalSI)
		if cfg.SystemReserved != nil {
			value.Add(cfg.SystemReserved[k])
		}
		if cfg.KubeReserved != nil {
			value.Add(cfg.KubeReserved[k])
		}
		if evictionReservation != nil {
			value.Add(evictionReservation[k])
		}
		if !value.IsZero() {
			result[k] = *value
		}
	}
	return result
}

// validateNodeAllocatable is pkg/kubelet/cm
// (*containerManagerImpl).validateNodeAllocatable.
func validateNodeAllocatable(cfg nodeConfig, capacity v1.ResourceList) error {
	var errors []string
	nar := getNodeAllocatableReservation(cfg, capacity)
	for k, v := range nar {
		value := capacity[k].DeepCopy()
		value.Sub(v)

		if value.Sign() < 0 {
			errors = append(errors, fmt.Sprintf("Resource %q has a reservation of %v but capacity of %v. Expected capacity >= reservation.", k, v, capacity[k]))
		}
	}

	if len(errors) > 0 {
		return fmt.Errorf("invalid Node Allocatable configuration. %s", strings.Join(errors, " "))
	}
	return nil
}
