package copied

// The inventory: every piece of kubelet code the harness copied (the
// kubelet keeps it unexported) or models (it cannot be called as it is), with
// where the kubelet has it and every adaptation the copy makes. copied_test.go
// checks each entry against every release's k8s.io/kubernetes source.
//
// What the harness supplies of its own, not taken from the kubelet (and so
// not listed here): the machine (machine.go, from the conformance README's
// "Interpretations"), the device plugins' GetPreferredAllocation rule and
// empty Allocate answers (plugins.go, the README's "Device choice"), the
// scenario reading, pod UIDs and the default namespace (scenario.go,
// replay.go), the event loop's container start order (all init containers,
// then all app containers, one PreStartContainer each), the stale-state
// trigger (collectStale: a hint request for an empty pod) and the desired
// pod of a resize (resize.go). notCopied below names those whose comments
// could be read as copies.

const (
	serverGo   = "cmd/kubelet/app/server.go"
	helpersGo  = "pkg/kubelet/cm/helpers.go"
	nodeCMGo   = "pkg/kubelet/cm/node_container_manager_linux.go"
	cmLinuxGo  = "pkg/kubelet/cm/container_manager_linux.go"
	cmGo       = "pkg/kubelet/cm/container_manager.go"
	lifecycle  = "pkg/kubelet/cm/internal_container_lifecycle.go"
	kubeletGo  = "pkg/kubelet/kubelet.go"
	statusGo   = "pkg/kubelet/status/status_manager.go"
	allocGo    = "pkg/kubelet/allocation/allocation_manager.go"
	fromV1_36  = "k8s_1_36 || k8s_1_37"
	fromV1_34  = "k8s_1_34 || k8s_1_35 || k8s_1_36 || k8s_1_37"
	v1_34_35   = "k8s_1_34 || k8s_1_35"
	onlyV1_34  = "k8s_1_34"
	fromV1_35  = "k8s_1_35 || k8s_1_36 || k8s_1_37"
	fromV1_33  = "k8s_1_33 || k8s_1_34 || k8s_1_35 || k8s_1_36 || k8s_1_37"
	onlyV1_32  = "k8s_1_32"
	onlyV1_33  = "k8s_1_33"
	onlyV1_37  = "k8s_1_37"
	toV1_36    = "k8s_1_32 || k8s_1_33 || k8s_1_34 || k8s_1_35 || k8s_1_36"
	cmReceiver = "cfg nodeConfig, capacity v1.ResourceList"
)

// containerManagerImpl as the copied methods read it: the receiver turned
// into the harness's parameters, its capacity field, its lock.
var cmReceiverAdapt = []rewrite{
	ReceiverToParams(cmReceiver),
	Replace("cm.capacity", "capacity"),
	// v1.36+ lock the container manager; the harness has no concurrent caller.
	DropStmt("cm.RLock()"),
	DropStmt("defer cm.RUnlock()"),
}

var checks = []check{
	// --- cmd/kubelet start-up (glue.go, config_1_3x.go, kubelet.go) ---
	{
		Name: "loadConfigFile", Harness: "loadConfigFile", Kind: verbatim,
		What:     "the kubelet's config-file loading; its evictionHard tail split out into applyEvictionHardDefault",
		Upstream: []loc{{serverGo, "loadConfigFile"}},
		Adapt: []rewrite{
			DropParam("ctx"), // v1.34+
			Replace("loader.Load()", "loadWith(loader)"),    // api_1_3x.go gives Load the release's signature
			Replace("loader.Load(ctx)", "loadWith(loader)"), // v1.34+
			Replace("kubeletconfiginternal.KubeletConfiguration", "kubeletconfig.KubeletConfiguration"),
			ReplaceStmt("if kc.EvictionHard == nil {", "applyEvictionHardDefault(kc)"),
		},
	},
	{
		Name: "applyEvictionHardDefault", Harness: "applyEvictionHardDefault", Kind: fragment,
		What:     "loadConfigFile's evictionHard defaulting (v1.33+: merged with the defaults under mergeDefaultEvictionSettings)",
		Upstream: []loc{{serverGo, "loadConfigFile"}},
		From:     "if kc.EvictionHard == nil {", Count: 1,
	},
	{
		Name: "getReservedCPUs", Harness: "getReservedCPUs", Kind: verbatim,
		What:     "reservedSystemCPUs parsed and checked against the machine's CPUs",
		Upstream: []loc{{serverGo, "getReservedCPUs"}},
		Adapt: []rewrite{
			DropParam("logger"), // v1.35+
			Replace("topology.Discover(machineInfo)", "discoverTopology(machineInfo)"),
			Replace("topology.Discover(logger, machineInfo)", "discoverTopology(machineInfo)"), // v1.35+
			Replace("*cadvisorapi.MachineInfo", "*machineInfoT"),
		},
	},
	{
		Name: "parseResourceList", Harness: "parseResourceList", Kind: verbatim,
		What:     "kubeReserved/systemReserved parsed into a ResourceList (v1.37: cpu rounded to whole millicores)",
		Upstream: []loc{{serverGo, "parseResourceList"}},
	},
	{
		Name: "cpuPolicyOptions", Harness: "cpuPolicyOptions", Kind: fragment, Releases: onlyV1_32,
		What:     "run()'s CPUManagerPolicyOptions feature-gate check (v1.32)",
		Upstream: []loc{{serverGo, "run"}},
		From:     "var cpuManagerPolicyOptions map[string]string", Count: 2,
		Adapt: []rewrite{Replace("s", "kc")},
		Own:   []rewrite{DropStmt("return cpuManagerPolicyOptions, nil"), ErrorOnly()},
	},
	{
		Name: "cpuPolicyOptions, no gate check", Harness: "cpuPolicyOptions", Kind: contains, Releases: fromV1_33,
		What:     "from v1.33 run() passes cpuManagerPolicyOptions on unchecked",
		Upstream: []loc{{serverGo, "run"}},
		Has:      []string{"CPUManagerPolicyOptions: s.CPUManagerPolicyOptions"},
		HasNot:   []string{"features.CPUManagerPolicyOptions"},
	},
	{
		Name: "topologyPolicyOptions", Harness: "topologyPolicyOptions", Kind: fragment,
		What:     "run()'s TopologyManagerPolicyOptions feature-gate check",
		Upstream: []loc{{serverGo, "run"}},
		From:     "var topologyManagerPolicyOptions map[string]string", Count: 2,
		Adapt: []rewrite{Replace("s", "kc")},
		Own:   []rewrite{DropStmt("return topologyManagerPolicyOptions, nil"), ErrorOnly()},
	},
	{
		Name: "startNode-reservations", Harness: "startNode", Kind: pinned,
		What: "run()'s reservedSystemCPUs override of systemReserved/kubeReserved cpu, the two parseResourceList calls and " +
			"the hard eviction thresholds, modelled in startNode on copies of the maps (the kubelet edits its options)",
		Upstream: []loc{{serverGo, "run"}},
		From:     "reservedSystemCPUs, err := getReservedCPUs(", Count: 9,
		Adapt: []rewrite{
			Replace("getReservedCPUs(logger, machineInfo, s.ReservedSystemCPUs)", "getReservedCPUs(machineInfo, s.ReservedSystemCPUs)"),
			DropCall("klog.InfoS"), DropCall("logger.Info"),
		},
	},
	{
		Name: "startNode-order", Harness: "startNode", Kind: order,
		What: "the order of run()'s reservation steps, NewContainerManager's manager construction and " +
			"(*containerManagerImpl).Start's manager starts and allocatable check",
		Upstream: []loc{{serverGo, "run"}, {cmLinuxGo, "NewContainerManager"}, {cmLinuxGo, "containerManagerImpl.Start"}},
		Pairs: []pair{
			{"getReservedCPUs", "getReservedCPUs"},
			{"parseResourceList", "parseResourceList"},
			{"eviction.ParseThresholdConfig", "eviction.ParseThresholdConfig"},
			{"cadvisor.CapacityFromMachineInfo", "cadvisor.CapacityFromMachineInfo"},
			{"newTopologyManager", "topologymanager.NewManager"},
			{"newDeviceManager", "devicemanager.NewManagerImpl"},
			{"addHintProvider", "cm.topologyManager.AddHintProvider"},
			{"newCPUManager", "cpumanager.NewManager"},
			{"newMemoryManager", "memorymanager.NewManager"},
			{"startCPUManager", "cm.cpuManager.Start"},
			{"startMemoryManager", "cm.memoryManager.Start"},
			{"validateNodeAllocatable", "cm.validateNodeAllocatable"},
			{"startDeviceManager", "cm.deviceManager.Start"},
		},
	},
	{
		Name: "startNode-texts", Harness: "startNode", Kind: contains,
		What:     "the start-up refusal texts startNode reproduces",
		Upstream: []loc{{cmLinuxGo, "containerManagerImpl.Start"}},
		Has:      []string{`"start cpu manager error: %w"`, `"start memory manager error: %w"`},
	},
	{
		Name: "startNode-admit-order", Harness: "startNode", Kind: order, KubeletOnly: true,
		What:     "NewMainKubelet's admit handlers that decide on resources: the topology manager, then the predicate handler",
		Upstream: []loc{{kubeletGo, "NewMainKubelet"}},
		Pairs: []pair{
			{"topology manager", "klet.containerManager.GetAllocateResourcesPodAdmitHandler"},
			{"predicate handler", "lifecycle.NewPredicateAdmitHandler"},
		},
	},
	{
		Name: "loadConfig-order", Harness: "loadConfig", Kind: order,
		What: "NewKubeletCommand's start-up: the config file loaded, its feature gates set, the configuration validated " +
			"(and the refusal texts loadConfig reproduces)",
		Upstream: []loc{{serverGo, "NewKubeletCommand"}},
		From:     "if len(kubeletFlags.KubeletConfigFile) > 0 {", To: "if err := kubeletconfigvalidation.ValidateKubeletConfiguration(",
		Pairs: []pair{
			{"loadConfigFileOrPanic", "loadConfigFile"},
			{"utilfeature.DefaultMutableFeatureGate.SetFromMap", "utilfeature.DefaultMutableFeatureGate.SetFromMap"},
			{"kubeletconfigvalidation.ValidateKubeletConfiguration", "kubeletconfigvalidation.ValidateKubeletConfiguration"},
		},
	},
	{
		Name: "loadConfig-texts", Harness: "loadConfig", Kind: contains,
		What:     "the refusal texts loadConfig reproduces",
		Upstream: []loc{{serverGo, "NewKubeletCommand"}},
		Has: []string{
			`"failed to load kubelet config file, path: %s, error: %w"`,
			`"failed to set feature gates from initial flags-based config: %w"`,
			`"failed to validate kubelet configuration, error: %w, path: %s"`,
		},
	},
	{
		Name: "logging-gates", Harness: "init", Kind: contains,
		What:     "the kubelet command registers the logging feature gates (gates.go init)",
		Upstream: []loc{{serverGo, ""}},
		Has:      []string{"logsapi.AddFeatureGates(utilfeature.DefaultMutableFeatureGate)"},
	},

	// --- pkg/kubelet/cm (glue.go, api_1_3x.go) ---
	{
		Name: "hardEvictionReservation", Harness: "hardEvictionReservation", Kind: verbatim,
		What:     "the memory and nodefs hard eviction thresholds as a reservation",
		Upstream: []loc{{helpersGo, "hardEvictionReservation"}},
	},
	{
		Name: "getNodeAllocatableReservation", Harness: "getNodeAllocatableReservation", Kind: verbatim,
		What:     "systemReserved + kubeReserved + hard eviction, per resource of capacity",
		Upstream: []loc{{nodeCMGo, "containerManagerImpl.GetNodeAllocatableReservation"}},
		Adapt: append([]rewrite{
			Replace("cm.HardEvictionThresholds", "cfg.HardEvictionThresholds"),
			Replace("cm.NodeConfig.SystemReserved", "cfg.SystemReserved"),
			Replace("cm.NodeConfig.KubeReserved", "cfg.KubeReserved"),
		}, cmReceiverAdapt...),
	},
	{
		Name: "validateNodeAllocatable", Harness: "validateNodeAllocatable", Kind: verbatim,
		What:     "the start-up refusal of a reservation above capacity",
		Upstream: []loc{{nodeCMGo, "containerManagerImpl.validateNodeAllocatable"}},
		Adapt: append([]rewrite{
			Replace("cm.GetNodeAllocatableReservation()", "getNodeAllocatableReservation(cfg, capacity)"),
		}, cmReceiverAdapt...),
	},
	{
		Name: "nodeConfig", Harness: "nodeConfig", Kind: fields,
		What:     "the parts of cm.NodeConfig the copied functions read",
		Upstream: []loc{{cmGo, "NodeAllocatableConfig"}},
	},
	{
		Name: "startContainer", Harness: "startContainer", Kind: order,
		What:     "PreStartContainer: the container registered with the CPU, memory and topology managers, in that order",
		Upstream: []loc{{lifecycle, "internalContainerLifecycleImpl.PreStartContainer"}},
		Pairs: []pair{
			{"n.cpu.AddContainer", "i.cpuManager.AddContainer"},
			{"n.memory.AddContainer", "i.memoryManager.AddContainer"},
			{"n.topology.AddContainer", "i.topologyManager.AddContainer"},
		},
	},

	// --- restart (restart.go) ---
	{
		Name: "readmit", Harness: "node.readmit", Kind: pinned,
		What: "HandlePodAdditions after a restart: the API server's pods added to the pod manager in creation order, " +
			"terminal ones skipped, each admitted with the pods added so far (the harness re-admits the pods it had admitted)",
		Upstream: []loc{{kubeletGo, "Kubelet.HandlePodAdditions"}},
	},

	// --- in-place resize, v1.32/v1.33 (resize_kubelet_1_3x.go; the real handlePodResourcesResize is called) ---
	{
		Name: "syncResizes-1.32", Harness: "syncResizes", Kind: contains, Releases: onlyV1_32,
		What:     "SyncPod's test before handlePodResourcesResize (v1.32: IsInPlacePodVerticalScalingAllowed)",
		Upstream: []loc{{kubeletGo, "Kubelet.SyncPod"}},
		Has:      []string{"if kuberuntime.IsInPlacePodVerticalScalingAllowed(pod) {", "pod, err = kl.handlePodResourcesResize(pod, podStatus)"},
	},
	{
		Name: "syncResizes-1.33", Harness: "syncResizes", Kind: contains, Releases: onlyV1_33,
		What:     "SyncPod's test before handlePodResourcesResize (v1.33: the InPlacePodVerticalScaling gate)",
		Upstream: []loc{{kubeletGo, "Kubelet.SyncPod"}},
		Has: []string{
			"if utilfeature.DefaultFeatureGate.Enabled(features.InPlacePodVerticalScaling) {",
			"pod, err = kl.handlePodResourcesResize(pod, podStatus)",
		},
	},
	{
		Name: "forgetAllocation-1.32", Harness: "node.forgetAllocation", Kind: contains, Releases: onlyV1_32,
		What:     "v1.32's HandlePodRemoves keeps the pod's allocation (the status manager's periodic cleanup drops it)",
		Upstream: []loc{{kubeletGo, "Kubelet.HandlePodRemoves"}},
		HasNot:   []string{"RemovePod(pod.UID)", "SetPodAllocation", "statusManager"},
	},
	{
		Name: "forgetAllocation-1.33", Harness: "node.forgetAllocation", Kind: contains, Releases: onlyV1_33,
		What:     "v1.33's HandlePodRemoves drops the pod's allocation",
		Upstream: []loc{{kubeletGo, "Kubelet.HandlePodRemoves"}},
		Has:      []string{"kl.allocationManager.RemovePod(pod.UID)"},
	},

	// --- in-place resize, v1.34+ (resize_queue.go, resize_1_3x.go) ---
	{
		Name: "setupResize-admit-order", Harness: "node.setupResize", Kind: order, Releases: fromV1_36, KubeletOnly: true,
		What:     "NewMainKubelet registers the resize admit handler before the others, through the allocation manager",
		Upstream: []loc{{kubeletGo, "NewMainKubelet"}},
		Pairs: []pair{
			{"resize handler", "allocation.NewPodResizesAdmitHandler"},
			{"topology manager", "klet.containerManager.GetAllocateResourcesPodAdmitHandler"},
			{"predicate handler", "lifecycle.NewPredicateAdmitHandler"},
			{"AddPodAdmitHandlers", "klet.allocationManager.AddPodAdmitHandlers"},
		},
	},
	{
		Name: "setupResize-admit-order-1.34", Harness: "node.setupResize", Kind: order, Releases: v1_34_35, KubeletOnly: true,
		What:     "NewMainKubelet registers its admit handlers on the allocation manager (v1.34, v1.35: no resize handler)",
		Upstream: []loc{{kubeletGo, "NewMainKubelet"}},
		Pairs: []pair{
			{"topology manager", "klet.containerManager.GetAllocateResourcesPodAdmitHandler"},
			{"predicate handler", "lifecycle.NewPredicateAdmitHandler"},
			{"AddPodAdmitHandlers", "klet.allocationManager.AddPodAdmitHandlers"},
		},
	},
	{
		Name: "nodeAllocatableAbsolute", Harness: "nodeAllocatableAbsolute", Kind: fragment, Releases: v1_34_35,
		What: "the container manager's GetNodeAllocatableAbsolute, which the v1.34/v1.35 resize decision reads: capacity less " +
			"systemReserved and kubeReserved, never below zero (the reservations recomputed as startNode does)",
		Upstream: []loc{{nodeCMGo, "containerManagerImpl.getNodeAllocatableAbsoluteImpl"}},
		From:     "result := make(v1.ResourceList)", Count: 3,
		HarnessFrom: "result := v1.ResourceList{}", HarnessCount: 3,
		Adapt: []rewrite{
			Replace("make(v1.ResourceList)", "v1.ResourceList{}"),
			Replace("capacity", "cadvisor.CapacityFromMachineInfo(machine)"),
			Replace("v", "capacity"),
			Replace("k", "name"),
			Replace("cm.NodeConfig.SystemReserved", "systemReserved"),
			Replace("cm.NodeConfig.KubeReserved", "kubeReserved"),
		},
	},
	{
		Name: "recordAllocation", Harness: "node.recordAllocation", Kind: pinned, Releases: fromV1_34,
		What: "the allocation manager's AddPod, through which the kubelet admits: the admit handlers on the allocated " +
			"pods, then (gate on) the admitted pod's allocation recorded; the harness runs the handlers itself (addPod)",
		Upstream: []loc{{allocGo, "manager.AddPod"}},
	},
	{
		Name: "resizeUpdate", Harness: "node.resizeUpdate", Kind: pinned, Releases: fromV1_34,
		What:     "HandlePodUpdates's resize part: queue a changed pod that differs from its allocation and retry, or clear its pending condition",
		Upstream: []loc{{kubeletGo, "Kubelet.HandlePodUpdates"}},
		From:     "if utilfeature.DefaultFeatureGate.Enabled(features.InPlacePodVerticalScaling) {\n\tif record", Count: 1,
	},
	{
		Name: "resizeOperations-1.34", Harness: "resizeOperations", Kind: pinned, Releases: onlyV1_34,
		What:     "v1.34's recordContainerResizeOperations without its metrics: did a resizable container's cpu/memory change (quantities compared)",
		Upstream: []loc{{kubeletGo, "recordContainerResizeOperations"}, {kubeletGo, "resizeOperationForResources"}},
	},
	{
		Name: "resizeOperations", Harness: "resizeOperations", Kind: pinned, Releases: fromV1_35,
		What: "recordResizeOperations without its metrics: did a resizable container's cpu/memory (quantities compared) or " +
			"the pod-level resources change",
		Upstream: []loc{
			{kubeletGo, "recordResizeOperations"}, {kubeletGo, "recordContainerResizeOperations"},
			{kubeletGo, "recordPodLevelResourceResizeOperations"}, {kubeletGo, "resizeOperationForResources"},
		},
	},
	{
		Name: "retryAfterRemoval", Harness: "node.retryAfterRemoval", Kind: contains, Releases: fromV1_34,
		What:     "HandlePodRemoves ends by retrying the pending resizes",
		Upstream: []loc{{kubeletGo, "Kubelet.HandlePodRemoves"}},
		Has:      []string{"kl.allocationManager.RetryPendingResizes(", "allocation.TriggerReasonPodsRemoved)"},
	},
	{
		Name: "resizeStatus", Harness: "resizeStatus", Kind: pinned, Releases: fromV1_34,
		What: "the status manager's resize conditions, kept by resizeStatus without metrics and on a logical clock",
		Upstream: []loc{
			{statusGo, "manager.GetPodResizeConditions"}, {statusGo, "manager.SetPodResizePendingCondition"},
			{statusGo, "manager.SetPodResizeInProgressCondition"}, {statusGo, "manager.ClearPodResizePendingCondition"},
			{statusGo, "manager.ClearPodResizeInProgressCondition"}, {statusGo, "manager.IsPodResizeDeferred"},
			{statusGo, "manager.IsPodResizeInfeasible"}, {statusGo, "updatedPodResizeCondition"},
		},
	},
}

// notCopied are harness declarations whose doc comments name kubelet code
// but which copy none: they call the real code, or are the harness's own.
var notCopied = map[string]string{
	"loadWith":                     "calls the real loader (api_1_3x.go)",
	"loadConfigFileOrPanic":        "harness: the loader's panic turned into a start-up refusal",
	"newPredicateAdmitHandler":     "calls the real lifecycle.NewPredicateAdmitHandler",
	"node.podManagerActivePods":    "harness: the replay's pods as the pod manager would list them (the kubelet's GetActivePods)",
	"node.podManagerPod":           "harness: the replay's pods by UID (the pod manager's GetPodByUID)",
	"alwaysReady":                  "harness: the kubelet's config sources, all seen",
	"clearPending":                 "part of resizeStatus (pinned with it)",
	"resizeStatus.setPending":      "part of resizeStatus (pinned with it)",
	"resizeStatus.setInProgress":   "part of resizeStatus (pinned with it)",
	"resizeStatus.clearInProgress": "part of resizeStatus (pinned with it)",
	"collectStale":                 "harness: a hint request for an empty pod triggers the managers' own stale-state collection",
	"removeContainer":              "harness: a deleted pod's containers removed through the real managers",
	"preferredAllocation":          "harness: the conformance README's device choice rule",
	"experimentalIgnoreEviction":   "the --experimental-allocatable-ignore-eviction flag's default (false)",
}
