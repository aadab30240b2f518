//go:build k8s_1_37

package main

// The kubelet's Go API as of v1.37 (loggers everywhere, admission operations): the
// calls whose signatures later releases changed.

import (
	"context"
	"time"

	cadvisorapi "github.com/google/cadvisor/lib/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/config"
	"k8s.io/kubernetes/pkg/kubelet/kubeletconfig/configfiles"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/kubernetes/pkg/kubelet/nodestatus"
	"k8s.io/utils/cpuset"
)

func newTopologyManager(topo []cadvisorapi.Node, policy, scope string, options map[string]string) (topologymanager.Manager, error) {
	return topologymanager.NewManager(klog.Background(), topo, policy, scope, options)
}

func newDeviceManager(topo []cadvisorapi.Node, store topologymanager.Store) (*devicemanager.ManagerImpl, error) {
	return devicemanager.NewManagerImpl(klog.Background(), topo, store)
}

func addHintProvider(tm topologymanager.Manager, p topologymanager.HintProvider) {
	tm.AddHintProvider(klog.Background(), p)
}

func newCPUManager(policy string, options map[string]string, period time.Duration, machine *cadvisorapi.MachineInfo, reserved cpuset.CPUSet, reservation v1.ResourceList, dir string, store topologymanager.Store) (cpumanager.Manager, error) {
	return cpumanager.NewManager(klog.Background(), policy, options, period, machine, reserved, reservation, dir, store)
}

func newMemoryManager(policy string, machine *cadvisorapi.MachineInfo, reservation v1.ResourceList, reserved []kubeletconfig.MemoryReservation, dir string, store topologymanager.Store) (memorymanager.Manager, error) {
	return memorymanager.NewManager(klog.Background(), policy, machine, reservation, reserved, dir, store)
}

func startCPUManager(m cpumanager.Manager, activePods func() []*v1.Pod, ready config.SourcesReady, initial containermap.ContainerMap) error {
	return m.Start(context.TODO(), activePods, ready, noStatus{}, noRuntime{}, initial)
}

func startMemoryManager(m memorymanager.Manager, activePods func() []*v1.Pod, ready config.SourcesReady, initial containermap.ContainerMap) error {
	return m.Start(context.TODO(), activePods, ready, noStatus{}, noRuntime{}, initial)
}

func startDeviceManager(m *devicemanager.ManagerImpl, activePods func() []*v1.Pod, ready config.SourcesReady, initial containermap.ContainerMap, running sets.Set[string]) error {
	return m.Start(klog.Background(), activePods, ready, initial, running)
}

func allocatableDevices(m *devicemanager.ManagerImpl) devicemanager.ResourceDeviceInstances {
	return m.GetAllocatableDevices(klog.Background())
}

func newPluginStub(devs []*pluginapi.Device, socket, name string) *plugin.Stub {
	return plugin.NewDevicePluginStub(klog.Background(), devs, socket, name, false, true)
}

func machineInfoSetter(maxPods, podsPerCore int, machine *cadvisorapi.MachineInfo, capacity v1.ResourceList, devices *devicemanager.ManagerImpl, reservation func() v1.ResourceList, localStorageCapacityIsolation bool) nodestatus.Setter {
	return nodestatus.MachineInfo("node", maxPods, podsPerCore,
		func() (*cadvisorapi.MachineInfo, error) { return machine, nil },
		func(klog.Logger, bool) v1.ResourceList { return capacity },
		devices.GetCapacity,
		reservation,
		func(string, string, string) {},
		func() *bool { return nil },
		localStorageCapacityIsolation)
}

// startContainer is what PreStartContainer does for resource management.
func startContainer(n *node, pod *v1.Pod, c *v1.Container, id string) {
	n.cpu.AddContainer(klog.Background(), pod, c, id)
	n.memory.AddContainer(klog.Background(), pod, c, id)
	n.topology.AddContainer(klog.Background(), pod, c, id)
}

// removeContainer removes a container from the CPU, memory and topology managers.
func removeContainer(n *node, id string) {
	_ = n.cpu.RemoveContainer(klog.Background(), id)
	_ = n.memory.RemoveContainer(klog.Background(), id)
	_ = n.topology.RemoveContainer(klog.Background(), id)
}

func memoryNUMANodes(n *node, pod *v1.Pod, c *v1.Container) sets.Set[int] {
	return n.memory.GetMemoryNUMANodes(klog.Background(), pod, c)
}

// collectStale runs the CPU and memory managers' stale-state collection, by
// the hint request for an empty pod that triggers it.
func collectStale(n *node) {
	n.cpu.GetPodTopologyHints(klog.Background(), &v1.Pod{}, lifecycle.AddOperation)
	n.memory.GetPodTopologyHints(klog.Background(), &v1.Pod{}, lifecycle.AddOperation)
	n.devices.UpdateAllocatedDevices(klog.Background())
}

// admit runs one admit handler for a pod being added.
func admit(h lifecycle.PodAdmitHandler, pod *v1.Pod, others []*v1.Pod) lifecycle.PodAdmitResult {
	return h.Admit(context.TODO(), &lifecycle.PodAdmitAttributes{Pod: pod, OtherPods: others, Operation: lifecycle.AddOperation})
}

// setPluginAnswers makes the stub answer with preferredAllocation and allocate.
func setPluginAnswers(stub *plugin.Stub, hasNUMA map[string]bool) {
	stub.SetGetPreferredAllocFunc(func(r *pluginapi.PreferredAllocationRequest, _ map[string]*pluginapi.Device) (*pluginapi.PreferredAllocationResponse, error) {
		return preferredAllocation(r, hasNUMA)
	})
	stub.SetAllocFunc(func(r *pluginapi.AllocateRequest, _ map[string]*pluginapi.Device) (*pluginapi.AllocateResponse, error) {
		return allocate(r)
	})
}

// loadWith runs the kubelet's config-file loader.
func loadWith(loader configfiles.Loader) (*kubeletconfig.KubeletConfiguration, error) {
	return loader.Load(context.TODO())
}

func startStub(stub *plugin.Stub) error { return stub.Start(context.TODO()) }

func registerStub(stub *plugin.Stub, kubeletSocket, name string) error {
	return stub.Register(context.TODO(), kubeletSocket, name, "")
}

func stopStub(stub *plugin.Stub) error { return stub.Stop(klog.Background()) }

func stopDeviceManager(m *devicemanager.ManagerImpl) error { return m.Stop(klog.Background()) }

func discoverTopology(machine *machineInfoT) (*topology.CPUTopology, error) {
	return topology.Discover(klog.Background(), machine)
}

// newPredicateAdmitHandler is the kubelet's resource-fit admit handler on the
// given Node, fed by the device manager.
func newPredicateAdmitHandler(node *v1.Node, devices *devicemanager.ManagerImpl) lifecycle.PodAdmitHandler {
	return lifecycle.NewPredicateAdmitHandler(func(context.Context, bool) (*v1.Node, error) { return node, nil },
		lifecycle.NewAdmissionFailureHandlerStub(), devices.UpdatePluginResources)
}
