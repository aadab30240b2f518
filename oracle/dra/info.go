//go:build k8s_1_34 || k8s_1_35 || k8s_1_36 || k8s_1_37

package main

import (
	"context"
	"path"
	"reflect"
	"runtime/debug"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"
)

// info is what `oracle-dra info` prints: what decides in this release.
type info struct {
	Release string `json:"release"`
	// Modules: the versions of k8s.io/kubernetes and
	// k8s.io/dynamic-resource-allocation this binary is built from.
	Modules map[string]string `json:"modules"`
	// Allocator: the implementation structured.NewAllocator picks for
	// Features ("stable", "incubating" or "experimental").
	Allocator   string              `json:"allocator"`
	Features    structured.Features `json:"features"`
	CELFeatures cel.Features        `json:"celFeatures"`
	// Gates: the default of every DRA feature gate of the release
	// (DynamicResourceAllocation and DRA*).
	Gates map[string]bool `json:"gates"`
}

func releaseInfo() info {
	features := allocatorFeatures()
	out := info{
		Release:     release,
		Modules:     map[string]string{},
		Allocator:   allocatorVariant(features),
		Features:    features,
		CELFeatures: celFeatures(),
		Gates:       map[string]bool{},
	}
	if build, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range build.Deps {
			if dep.Path == "k8s.io/kubernetes" || dep.Path == "k8s.io/dynamic-resource-allocation" {
				version := dep.Version
				if dep.Replace != nil {
					version = dep.Replace.Version
				}
				out.Modules[dep.Path] = version
			}
		}
	}
	for name := range utilfeature.DefaultMutableFeatureGate.GetAll() {
		if name == "DynamicResourceAllocation" || strings.HasPrefix(string(name), "DRA") {
			out.Gates[string(name)] = utilfeature.DefaultFeatureGate.Enabled(name)
		}
	}
	return out
}

// allocatorVariant names the package of the allocator NewAllocator returns.
func allocatorVariant(features structured.Features) string {
	allocator, err := structured.NewAllocator(context.Background(), features,
		structured.AllocatedState{
			AllocatedDevices:         sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
		},
		classLister{}, []*resourceapi.ResourceSlice{}, celCache)
	if err != nil {
		return "none: " + err.Error()
	}
	t := reflect.TypeOf(allocator)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return path.Base(t.PkgPath())
}
