package main

// Device plugins for the scenario's devices: one in-process plugin per
// resource, the kubelet's own device-plugin stub
// (pkg/kubelet/cm/devicemanager/plugin/v1beta1.Stub) serving the real
// v1beta1 gRPC API on a Unix socket next to the kubelet's registration socket,
// registering through that socket like any plugin does. Only
// GetPreferredAllocation is ours: it makes the kubelet's otherwise random
// choice among equivalent devices deterministic (the rule of the conformance
// README, "Device choice").

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
)

// pluginDevices turns one resource of topology.devices into plugin devices.
func pluginDevices(devs []device) []*pluginapi.Device {
	out := make([]*pluginapi.Device, 0, len(devs))
	for _, d := range devs {
		pd := &pluginapi.Device{ID: d.ID, Health: pluginapi.Healthy}
		if len(d.NUMA) > 0 {
			pd.Topology = &pluginapi.TopologyInfo{}
			for _, n := range d.NUMA {
				pd.Topology.Nodes = append(pd.Topology.Nodes, &pluginapi.NUMANode{ID: int64(n)})
			}
		}
		out = append(out, pd)
	}
	return out
}

// preferredAllocation keeps the devices the kubelet must include, then adds
// the remaining available devices, those with a NUMA affinity first, each
// group in ascending device-id order.
func preferredAllocation(r *pluginapi.PreferredAllocationRequest, hasNUMA map[string]bool) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, req := range r.ContainerRequests {
		must := append([]string(nil), req.MustIncludeDeviceIDs...)
		sort.Strings(must)
		chosen := map[string]bool{}
		for _, id := range must {
			chosen[id] = true
		}
		var withNUMA, without []string
		for _, id := range req.AvailableDeviceIDs {
			if chosen[id] {
				continue
			}
			if hasNUMA[id] {
				withNUMA = append(withNUMA, id)
			} else {
				without = append(without, id)
			}
		}
		sort.Strings(withNUMA)
		sort.Strings(without)
		ids := append(append(must, withNUMA...), without...)
		if int(req.AllocationSize) < len(ids) {
			ids = ids[:req.AllocationSize]
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// allocate answers Allocate with an empty response per container: nothing
// to mount or set, which is all the device manager needs.
func allocate(r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	resp := &pluginapi.AllocateResponse{}
	for range r.ContainerRequests {
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{})
	}
	return resp, nil
}

// startPlugins starts and registers one plugin per resource with the
// kubelet's registration server at kubeletSocket, and waits until the device
// manager lists every device. allocatable reports the device manager's view.
func startPlugins(devices map[string][]device, kubeletSocket string, allocatable func() map[string]int) ([]*plugin.Stub, error) {
	names := make([]string, 0, len(devices))
	for name := range devices {
		names = append(names, name)
	}
	sort.Strings(names)
	var stubs []*plugin.Stub
	for i, name := range names {
		socket := filepath.Join(filepath.Dir(kubeletSocket), fmt.Sprintf("oracle-%d-%s.sock", i, strings.NewReplacer("/", "_", ".", "_").Replace(name)))
		stub := newPluginStub(pluginDevices(devices[name]), socket, name)
		hasNUMA := map[string]bool{}
		for _, d := range devices[name] {
			hasNUMA[d.ID] = len(d.NUMA) > 0
		}
		setPluginAnswers(stub, hasNUMA)
		if err := startStub(stub); err != nil {
			return stubs, fmt.Errorf("device plugin %s: %v", name, err)
		}
		stubs = append(stubs, stub)
		if err := registerStub(stub, kubeletSocket, name); err != nil {
			return stubs, fmt.Errorf("device plugin %s: register: %v", name, err)
		}
	}
	// Registration connects back to the plugin and reads its first
	// ListAndWatch answer asynchronously; the scenario's first event must see
	// every device.
	deadline := time.Now().Add(60 * time.Second)
	for {
		have := allocatable()
		ready := true
		for _, name := range names {
			if have[name] != len(devices[name]) {
				ready = false
			}
		}
		if ready {
			return stubs, nil
		}
		if time.Now().After(deadline) {
			return stubs, fmt.Errorf("device plugins did not register within 60s (device manager has %v)", have)
		}
		time.Sleep(time.Millisecond)
	}
}
