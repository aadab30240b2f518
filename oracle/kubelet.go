package main

// Start-up of one node: the kubelet's configuration loading, validation and
// container-manager construction, in the kubelet's order, each step through
// the kubelet's exported code. The managers run with their real Start: file
// checkpoints in the kubelet root directory, the CPU manager's reconcile
// loop, the device manager's gRPC registration server.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/featuregate"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/kubernetes/pkg/features"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletconfigvalidation "k8s.io/kubernetes/pkg/kubelet/apis/config/validation"
	"k8s.io/kubernetes/pkg/kubelet/cadvisor"
	"k8s.io/kubernetes/pkg/kubelet/cm/containermap"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/devicemanager"
	plugin "k8s.io/kubernetes/pkg/kubelet/cm/devicemanager/plugin/v1beta1"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/eviction"
	evictionapi "k8s.io/kubernetes/pkg/kubelet/eviction/api"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"sigs.k8s.io/yaml"
)

// kubeletRootDir is where the managers keep their checkpoints, the kubelet's
// default root directory; the replay runs in a private mount namespace with
// an empty tmpfs there (see namespace_linux.go).
const kubeletRootDir = "/var/lib/kubelet"

// cpuReconcilePeriod replaces cpuManagerReconcilePeriod: the loop's first
// pass runs at Start (the harness waits for it), later passes would only
// repeat the stale-state collection every hint request already does, at
// times that would race with the replay.
const cpuReconcilePeriod = 1000000 * time.Hour

// startupError is a configuration the kubelet refuses to start with.
type startupError struct{ msg string }

func (e *startupError) Error() string { return e.msg }

func refuse(err error) error { return &startupError{err.Error()} }

// node is a started kubelet's resource-management part.
type node struct {
	config   *kubeletconfig.KubeletConfiguration
	machine  *machineInfoT
	topology topologymanager.Manager
	cpu      cpumanager.Manager
	memory   memorymanager.Manager
	devices  *devicemanager.ManagerImpl
	plugins  []*plugin.Stub

	admitHandlers []lifecycle.PodAdmitHandler
	resize        resizeState // resize_<v>.go

	mu     sync.Mutex
	active []*v1.Pod // pods the kubelet considers active, in admission order

	// live is the replay's pods on the node by namespace/name (the pod
	// manager's view, read by the allocation manager's callbacks).
	live map[string]*podEntry

	// bootGates is the feature gates as the binary has them before any
	// configuration sets them: what a restarted process starts from.
	bootGates featuregate.MutableVersionedFeatureGate
}

// sourcesReady reports the kubelet's config sources as seen once the node
// is set up, so that the managers' stale-state collection sees the real
// active pods (and nothing before).
type sourcesReady struct{ ready atomic.Bool }

func (s *sourcesReady) AddSource(string) {}
func (s *sourcesReady) AllReady() bool   { return s.ready.Load() }

// noRuntime is the container runtime of the CPU and memory managers'
// reconcile loops; they never reach it because no pod has a status.
type noRuntime struct{}

func (noRuntime) UpdateContainerResources(context.Context, string, *runtimeapi.ContainerResources) error {
	return nil
}

// noStatus is the pod status provider: no container runs.
type noStatus struct{}

func (noStatus) GetPodStatus(types.UID) (v1.PodStatus, bool) { return v1.PodStatus{}, false }

// loadConfig writes the scenario's kubelet section as a KubeletConfiguration
// file and loads it with the kubelet's loader, then sets the feature gates
// and validates, as the kubelet command does.
func loadConfig(section map[string]json.RawMessage, dir string) (*kubeletconfig.KubeletConfiguration, error) {
	doc := map[string]any{}
	for k, v := range section {
		doc[k] = v
	}
	doc["apiVersion"] = "kubelet.config.k8s.io/v1beta1"
	doc["kind"] = "KubeletConfiguration"
	js, err := json.Marshal(doc)
	if err != nil {
		return nil, invalidf("kubelet: %v", err)
	}
	data, err := yaml.JSONToYAML(js)
	if err != nil {
		return nil, invalidf("kubelet: %v", err)
	}
	path := filepath.Join(dir, "kubelet-config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, err
	}
	kc, err := loadConfigFileOrPanic(path)
	var crash *startupError
	if errors.As(err, &crash) {
		return nil, crash
	}
	if err != nil {
		// The file name is the harness's; keep the text independent of it.
		msg := strings.ReplaceAll(err.Error(), path, "kubelet-config.yaml")
		return nil, &startupError{fmt.Sprintf("failed to load kubelet config file, path: kubelet-config.yaml, error: %s", msg)}
	}
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(kc.FeatureGates); err != nil {
		return nil, &startupError{fmt.Sprintf("failed to set feature gates from initial flags-based config: %v", err)}
	}
	if err := kubeletconfigvalidation.ValidateKubeletConfiguration(kc, utilfeature.DefaultFeatureGate); err != nil {
		// The kubelet appends ", path: <config dump>"; left out.
		return nil, &startupError{fmt.Sprintf("failed to validate kubelet configuration, error: %v", err)}
	}
	return kc, nil
}

// loadConfigFileOrPanic is loadConfigFile, with the kubelet's crash while
// loading turned into a start-up refusal: the v1beta1 defaulting panics on a
// feature gate the release does not know ("failed to merge global and
// in-flight KubeletConfiguration while setting defaults, error: unrecognized
// feature gate: X"), so the kubelet dies before anything starts. The text is
// the panic's, as Go prints it ("panic: ..."), without the stack.
func loadConfigFileOrPanic(path string) (kc *kubeletconfig.KubeletConfiguration, err error) {
	defer func() {
		if r := recover(); r != nil {
			kc, err = nil, &startupError{fmt.Sprintf("panic: %v", r)}
		}
	}()
	return loadConfigFile(path)
}

// startNode does what cmd/kubelet's run() and the container manager's
// constructor and Start do for resource management, in their order.
//
// running is the pods whose containers the container runtime holds when
// the kubelet starts (none at first; after a restart, the pods admitted
// before it): the container map and running set the container manager
// builds from the runtime (cm buildContainerMapAndRunningSetFromRuntime)
// and gives each manager's Start.
func startNode(kc *kubeletconfig.KubeletConfiguration, machine *machineInfoT, devices map[string][]device, running []*v1.Pod) (*node, error) {
	n := &node{config: kc, machine: machine}
	initialContainers, runningContainers := runtimeContainers(running)

	// cmd/kubelet/app/server.go run()
	reservedSystemCPUs, err := getReservedCPUs(machine, kc.ReservedSystemCPUs)
	if err != nil {
		return nil, refuse(err)
	}
	kubeReservedMap := copyMap(kc.KubeReserved)
	systemReservedMap := copyMap(kc.SystemReserved)
	if reservedSystemCPUs.Size() > 0 {
		if kubeReservedMap != nil {
			delete(kubeReservedMap, "cpu")
		}
		if systemReservedMap == nil {
			systemReservedMap = make(map[string]string)
		}
		systemReservedMap["cpu"] = fmt.Sprint(reservedSystemCPUs.Size())
	}
	kubeReserved, err := parseResourceList(kubeReservedMap)
	if err != nil {
		return nil, &startupError{fmt.Sprintf("--kube-reserved value failed to parse: %v", err)}
	}
	systemReserved, err := parseResourceList(systemReservedMap)
	if err != nil {
		return nil, &startupError{fmt.Sprintf("--system-reserved value failed to parse: %v", err)}
	}
	var hardEvictionThresholds []evictionapi.Threshold
	if !experimentalIgnoreEviction {
		hardEvictionThresholds, err = eviction.ParseThresholdConfig([]string{}, kc.EvictionHard, nil, nil, nil)
		if err != nil {
			return nil, refuse(err)
		}
	}
	cpuManagerPolicyOptions, err := cpuPolicyOptions(kc)
	if err != nil {
		return nil, refuse(err)
	}
	topologyManagerPolicyOptions, err := topologyPolicyOptions(kc)
	if err != nil {
		return nil, refuse(err)
	}
	cfg := nodeConfig{SystemReserved: systemReserved, KubeReserved: kubeReserved, HardEvictionThresholds: hardEvictionThresholds}

	// pkg/kubelet/cm NewContainerManager
	capacity := cadvisor.CapacityFromMachineInfo(machine)
	n.topology, err = newTopologyManager(machine.Topology, kc.TopologyManagerPolicy, kc.TopologyManagerScope, topologyManagerPolicyOptions)
	if err != nil {
		return nil, refuse(err)
	}
	n.devices, err = newDeviceManager(machine.Topology, n.topology)
	if err != nil {
		return nil, refuse(err)
	}
	addHintProvider(n.topology, n.devices)
	n.cpu, err = newCPUManager(kc.CPUManagerPolicy, cpuManagerPolicyOptions, cpuReconcilePeriod, machine, reservedSystemCPUs, getNodeAllocatableReservation(cfg, capacity), kubeletRootDir, n.topology)
	if err != nil {
		return nil, refuse(err)
	}
	addHintProvider(n.topology, n.cpu)
	n.memory, err = newMemoryManager(kc.MemoryManagerPolicy, machine, getNodeAllocatableReservation(cfg, capacity), kc.ReservedMemory, kubeletRootDir, n.topology)
	if err != nil {
		return nil, refuse(err)
	}
	addHintProvider(n.topology, n.memory)

	// pkg/kubelet/cm (*containerManagerImpl).Start
	ready := &sourcesReady{}
	firstCall := make(chan struct{})
	var once sync.Once
	activePods := func() []*v1.Pod {
		once.Do(func() { close(firstCall) })
		return n.activePods()
	}
	if err := startCPUManager(n.cpu, activePods, ready, initialContainers.Clone()); err != nil {
		return nil, &startupError{fmt.Sprintf("start cpu manager error: %v", err)}
	}
	if kc.CPUManagerPolicy == "static" {
		// The reconcile loop's first pass (started by Start) lists the
		// active pods once; after that it sleeps for cpuReconcilePeriod.
		<-firstCall
	}
	if err := startMemoryManager(n.memory, activePods, ready, initialContainers.Clone()); err != nil {
		return nil, &startupError{fmt.Sprintf("start memory manager error: %v", err)}
	}
	if err := validateNodeAllocatable(cfg, capacity); err != nil {
		return nil, refuse(err)
	}
	if err := startDeviceManager(n.devices, activePods, ready, initialContainers.Clone(), runningContainers); err != nil {
		return nil, fmt.Errorf("device manager: %v", err)
	}
	stubs, err := startPlugins(devices, pluginapi.KubeletSocket, func() map[string]int {
		out := map[string]int{}
		for res, devs := range allocatableDevices(n.devices) {
			out[res] = len(devs)
		}
		return out
	})
	n.plugins = stubs
	if err != nil {
		return n, err
	}

	// The Node object the resource-fit check reads, as the kubelet's node
	// status setter computes it.
	nodeObj := &v1.Node{}
	nodeObj.Name = "node"
	nodeObj.Labels = map[string]string{
		v1.LabelHostname:   "node",
		v1.LabelOSStable:   "linux",
		v1.LabelArchStable: "amd64",
	}
	setter := machineInfoSetter(int(kc.MaxPods), int(kc.PodsPerCore), machine, capacity, n.devices,
		func() v1.ResourceList { return getNodeAllocatableReservation(cfg, capacity) },
		kc.LocalStorageCapacityIsolation)
	if err := setter(context.Background(), nodeObj); err != nil {
		return n, err
	}

	// pkg/kubelet/kubelet.go NewMainKubelet: the admit handlers that decide
	// on resources, in the kubelet's order.
	n.admitHandlers = []lifecycle.PodAdmitHandler{
		n.topology,
		newPredicateAdmitHandler(nodeObj, n.devices),
	}
	n.setupResize(kc)
	ready.ready.Store(true)
	return n, nil
}

// runtimeContainers is what the container runtime lists for pods whose
// containers were started: every container (init containers stay, exited,
// until the pod goes) under its harness ID, and the running ones — the
// app containers and the restartable init containers (sidecars).
func runtimeContainers(pods []*v1.Pod) (containermap.ContainerMap, sets.Set[string]) {
	all := containermap.NewContainerMap()
	running := sets.New[string]()
	for _, pod := range pods {
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			id := containerID(pod, c)
			all.Add(string(pod.UID), c.Name, id)
			if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
				running.Insert(id)
			}
		}
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			id := containerID(pod, c)
			all.Add(string(pod.UID), c.Name, id)
			running.Insert(id)
		}
	}
	return all, running
}

// experimentalIgnoreEviction mirrors --experimental-allocatable-ignore-eviction
// (a flag, not a configuration field: always false here).
const experimentalIgnoreEviction = false

// topologyPolicyOptions is the feature-gate check of cmd/kubelet's run()
// for the topology manager policy options (copied).
func topologyPolicyOptions(kc *kubeletconfig.KubeletConfiguration) (map[string]string, error) {
	var topologyManagerPolicyOptions map[string]string
	if utilfeature.DefaultFeatureGate.Enabled(features.TopologyManagerPolicyOptions) {
		topologyManagerPolicyOptions = kc.TopologyManagerPolicyOptions
	} else if kc.TopologyManagerPolicyOptions != nil {
		return nil, fmt.Errorf("topology manager policy options %v require feature gates %q enabled",
			kc.TopologyManagerPolicyOptions, features.TopologyManagerPolicyOptions)
	}
	return topologyManagerPolicyOptions, nil
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (n *node) activePods() []*v1.Pod {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*v1.Pod(nil), n.active...)
}

// stop stops the device manager's registration server (which disconnects
// the plugins' endpoints) and the plugins: what a batch replay must end
// before the next scenario starts on the same socket paths.
func (n *node) stop() {
	if n.devices != nil {
		_ = stopDeviceManager(n.devices)
	}
	for _, p := range n.plugins {
		_ = stopStub(p)
	}
}
