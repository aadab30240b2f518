package main

// oracle bench: what one admission costs in the real kubelet code, on the
// node and pod of the engine's admission bench
// (crates/engine/benches/common/mod.rs), so that bench/speed.sh can print
// the two side by side from one run (issue #29).
//
//	oracle bench [--policy P,...] [--numa 1,2,4,8,16] [--time 2s] [--limit 120s]
//
// The node: N NUMA nodes, each with 4 cores × 2 threads (CPU i on core
// i mod 4N; a NUMA node is a socket), 16Gi and one GPU (nvidia.com/gpu,
// gpu<n> on NUMA n, served by the harness's device plugin); distances 10
// local, 20 remote. The kubelet: static CPU and memory managers, pod
// scope, the given topology manager policy, systemReserved cpu 1 and
// memory 1Gi, evictionHard memory.available 100Mi, reservedMemory 1124Mi
// on NUMA 0, topologyManagerPolicyOptions max-allowable-numa-nodes
// max(N, 8). The pod: one Guaranteed container asking 2 CPUs, 1Gi and one
// GPU.
//
// Timed: the harness's admission of the pod (addPod), which is what the
// kubelet does for a pod it adds — the admit handlers (the topology
// manager's Admit: hints from the device, CPU and memory managers, the
// merge under the policy, then allocation by each manager, the device
// plugin's GetPreferredAllocation and Allocate over gRPC and the
// checkpoint writes included; the resource-fit handler), the allocation
// recorded, the container started in the CPU, memory and topology
// managers. Untimed: removing the container, deactivating the pod and the
// managers' stale-state collection, after which the node must be exactly
// as it started (checked after every admission: CPU sets and assignments,
// the memory manager's table and assignments, the pod's devices).
//
// Each case runs in a process of its own (the bench re-executes itself
// with --case) that is killed when it runs past --limit: the kubelet's
// permutation merge under restricted and best-effort grows with the cube of
// 2^N (one hint list per manager) and takes minutes or more per admission
// from about 10 NUMA nodes, and it cannot be interrupted from inside. Such
// a case prints "timeout" instead of a figure.
//
// Output: comment lines (#) saying what ran, then TSV with a header:
// policy, numa_nodes, ns_per_admission (or "timeout" / "error"),
// iterations, note. A case's first admission is a warm-up unless it alone
// takes the whole --time budget, in which case it is the figure.

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
)

const (
	benchCoresPerNUMA = 4
	benchGPU          = "nvidia.com/gpu"
	benchPodUID       = "bench-uid"
)

func benchCommand(args []string) int {
	fs := flag.NewFlagSet("oracle bench", flag.ContinueOnError)
	policies := fs.String("policy", "single-numa-node,restricted,best-effort", "topology manager policies, comma-separated")
	numaList := fs.String("numa", "1,2,4,8,16", "NUMA node counts, comma-separated")
	budget := fs.Duration("time", 2*time.Second, "measuring time per case (at least one admission)")
	limit := fs.Duration("limit", 120*time.Second, "wall-clock limit per case (start-up included); past it the case is \"timeout\"")
	oneCase := fs.String("case", "", "run one case POLICY/N in this process (used by the bench itself)")
	profile := fs.String("cpuprofile", "", "with --case: write a Go CPU profile of the measured admissions to this file")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		fs.Usage()
		return 2
	}
	if *oneCase != "" {
		return benchCaseCommand(*oneCase, *budget, *profile)
	}
	var numas []int
	for _, f := range strings.Split(*numaList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 64 {
			fmt.Fprintf(os.Stderr, "oracle bench: --numa: %q is not a NUMA node count (1-64)\n", f)
			return 2
		}
		numas = append(numas, n)
	}
	var names []string
	for _, p := range strings.Split(*policies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			names = append(names, p)
		}
	}
	if len(names) == 0 || *budget <= 0 || *limit <= 0 {
		fmt.Fprintln(os.Stderr, "oracle bench: --policy, --time and --limit must not be empty or zero")
		return 2
	}

	fmt.Printf("# oracle bench: one pod-scope admission through the real v%s kubelet code (%s), %s, GOMAXPROCS %d\n",
		kubeletMinor, kubernetesModule(), runtime.Version(), runtime.GOMAXPROCS(0))
	fmt.Println("# node: N NUMA nodes × (4 cores × 2 threads, 16Gi, 1 GPU); static CPU and memory managers; systemReserved cpu 1, memory 1Gi; evictionHard memory.available 100Mi; reservedMemory 1124Mi on NUMA 0")
	fmt.Println("# pod: 1 Guaranteed container, 2 CPUs, 1Gi, 1 nvidia.com/gpu")
	fmt.Println("# timed: the admit handlers (topology manager Admit with the device, CPU and memory managers' hints and allocation, device plugin gRPC and checkpoint writes included; resource fit) and the container's start; removal untimed, the node checked empty after each admission")
	if maxNUMAOptionIsBeta() {
		fmt.Printf("# max-allowable-numa-nodes: max(N, 8) in topologyManagerPolicyOptions at every N (the kubelet refuses more than 8 NUMA nodes without it); a beta option in v%s, so featureGates TopologyManagerPolicyBetaOptions: true (its default) is set too\n", kubeletMinor)
	} else {
		fmt.Printf("# max-allowable-numa-nodes: max(N, 8) in topologyManagerPolicyOptions at every N (the kubelet refuses more than 8 NUMA nodes without it); a stable option in v%s (no feature gate)\n", kubeletMinor)
	}
	fmt.Printf("# per case: warm-up admission, then admissions for %s (one only, if the warm-up took that long); killed after %s (\"timeout\")\n", *budget, *limit)
	fmt.Println("policy\tnuma_nodes\tns_per_admission\titerations\tnote")

	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "oracle bench:", err)
		return 1
	}
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM)
	failed := false
	for _, policy := range names {
		for _, numa := range numas {
			row, err := runBenchCase(exe, policy, numa, *budget, *limit, interrupted)
			if errors.Is(err, errInterrupted) {
				fmt.Fprintln(os.Stderr, "oracle bench: interrupted")
				return 130
			}
			if err != nil {
				failed = true
				row = fmt.Sprintf("error\t0\t%s", oneLine(err.Error()))
				fmt.Fprintf(os.Stderr, "oracle bench: %s at %d NUMA nodes: %v\n", policy, numa, err)
			}
			fmt.Printf("%s\t%d\t%s\n", policy, numa, row)
		}
	}
	if failed {
		return 1
	}
	return 0
}

var errInterrupted = errors.New("interrupted")

// runBenchCase runs one case in a child process (its own process group, so
// that the child and its re-execution in the mount namespace die together)
// and returns the row's "ns<TAB>iterations<TAB>note".
func runBenchCase(exe, policy string, numa int, budget, limit time.Duration, interrupted <-chan os.Signal) (string, error) {
	cmd := exec.Command(exe, "bench", "--case", fmt.Sprintf("%s/%d", policy, numa), "--time", budget.String())
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, namespaceEnv+"=") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	kill := func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	select {
	case err := <-done:
		if err != nil {
			msg := strings.TrimSpace(stderr.String())
			if msg == "" {
				msg = err.Error()
			}
			return "", errors.New(msg)
		}
	case <-timer.C:
		kill()
		return fmt.Sprintf("timeout\t0\tno result within %s", limit), nil
	case <-interrupted:
		kill()
		return "", errInterrupted
	}
	var ns, iterations int64
	if _, err := fmt.Sscanf(stdout.String(), "%d\t%d", &ns, &iterations); err != nil {
		return "", fmt.Errorf("unreadable case output %q: %v", stdout.String(), err)
	}
	return fmt.Sprintf("%d\t%d\t", ns, iterations), nil
}

// benchCaseCommand measures one case in this process and prints
// "ns<TAB>iterations".
func benchCaseCommand(spec string, budget time.Duration, profile string) int {
	policy, numaText, ok := strings.Cut(spec, "/")
	numa, err := strconv.Atoi(numaText)
	if !ok || err != nil || numa < 1 {
		fmt.Fprintf(os.Stderr, "oracle bench: --case %q: want POLICY/N\n", spec)
		return 2
	}
	if profile != "" {
		// Resolved before the mount namespace hides anything.
		if profile, err = filepath.Abs(profile); err != nil {
			fmt.Fprintln(os.Stderr, "oracle bench:", err)
			return 1
		}
	}
	if err := inNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, "oracle bench:", err)
		return 1
	}
	klog.SetLogger(logr.Discard())
	perAdmission, iterations, err := benchCase(policy, numa, budget, profile)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("%d\t%d\n", perAdmission.Nanoseconds(), iterations)
	return 0
}

// benchCase starts the node and times admissions of the pod until budget
// is spent: the mean time per admission and how many were timed.
func benchCase(policy string, numa int, budget time.Duration, profile string) (time.Duration, int, error) {
	s, nodes := benchScenario(numa)
	if err := s.checkCPUs(nodes); err != nil {
		return 0, 0, err
	}
	tmp, err := os.MkdirTemp("", "oracle-bench-")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(tmp)
	section, err := benchKubelet(policy, numa)
	if err != nil {
		return 0, 0, err
	}
	kc, err := loadConfig(section, tmp)
	if err != nil {
		return 0, 0, fmt.Errorf("the kubelet does not start: %v", err)
	}
	n, err := startNode(kc, machineInfo(s, nodes), s.Topology.Devices, nil)
	if n != nil {
		defer n.stop()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("the kubelet does not start: %v", err)
	}
	pod := benchPod()
	defaultPods(map[int]*v1.Pod{0: pod})
	empty, err := benchState(n)
	if err != nil {
		return 0, 0, err
	}

	admitOnce := func() (time.Duration, error) {
		e := &podEntry{pod: pod, key: pod.Namespace + "/" + pod.Name}
		n.live = map[string]*podEntry{e.key: e}
		start := time.Now()
		r := n.addPod(0, e)
		took := time.Since(start)
		if r["admitted"] != true {
			return 0, fmt.Errorf("the kubelet refused the bench pod: %v: %v", r["reason"], r["message"])
		}
		n.deletePod(1, e.key, n.live)
		after, err := benchState(n)
		if err != nil {
			return 0, err
		}
		if after != empty {
			return 0, fmt.Errorf("the node is not empty after the pod's removal:\n got  %s\n want %s", after, empty)
		}
		return took, nil
	}

	first, err := admitOnce()
	if err != nil {
		return 0, 0, err
	}
	if profile != "" {
		f, err := os.Create(profile)
		if err != nil {
			return 0, 0, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return 0, 0, err
		}
		defer pprof.StopCPUProfile()
	}
	if first >= budget {
		return first, 1, nil
	}
	var total time.Duration
	iterations := 0
	for total < budget {
		took, err := admitOnce()
		if err != nil {
			return 0, 0, err
		}
		total += took
		iterations++
	}
	return total / time.Duration(iterations), iterations, nil
}

// benchState is everything an admission of the bench pod changes, after
// the managers' stale-state collection: the CPU manager's default set and
// assignments, the memory manager's assignments and table, the pod's
// devices.
func benchState(n *node) (string, error) {
	final := n.final(map[string]string{})
	final["memoryTable"] = n.memory.State().GetMachineState()
	final["podDevices"] = n.devices.GetDevices(benchPodUID, "app")
	data, err := json.Marshal(final)
	return string(data), err
}

// benchScenario is the engine bench's machine (benches/common/mod.rs
// machine()) as the harness's topology.
func benchScenario(numa int) (*scenario, []numaNode) {
	s := &scenario{Topology: topologySpec{Devices: map[string][]device{}}}
	nodes := make([]numaNode, numa)
	for id := range nodes {
		distances := make([]uint64, numa)
		for o := range distances {
			distances[o] = 20
			if o == id {
				distances[o] = 10
			}
		}
		nodes[id] = numaNode{ID: id, Memory: 16 << 30, HugePages: map[int64]int64{}, Distances: distances}
		s.Topology.Devices[benchGPU] = append(s.Topology.Devices[benchGPU], device{ID: fmt.Sprintf("gpu%d", id), NUMA: []int{id}})
	}
	cores := numa * benchCoresPerNUMA
	for id := 0; id < 2*cores; id++ {
		core := id % cores
		node := core / benchCoresPerNUMA
		s.Topology.CPUs = append(s.Topology.CPUs, cpu{ID: intPtr(id), Core: intPtr(core), Socket: intPtr(node), NUMA: intPtr(node)})
	}
	return s, nodes
}

func intPtr(v int) *int { return &v }

// benchKubelet is the engine bench's configuration (benches/common/mod.rs
// config()) as a KubeletConfiguration section.
func benchKubelet(policy string, numa int) (map[string]json.RawMessage, error) {
	section := map[string]any{
		"cpuManagerPolicy":             "static",
		"memoryManagerPolicy":          "Static",
		"topologyManagerPolicy":        policy,
		"topologyManagerScope":         "pod",
		"topologyManagerPolicyOptions": map[string]string{topologymanager.MaxAllowableNUMANodes: strconv.Itoa(max(numa, 8))},
		"systemReserved":               map[string]string{"cpu": "1", "memory": "1Gi"},
		"evictionHard":                 map[string]string{"memory.available": "100Mi"},
		"reservedMemory": []any{map[string]any{
			"numaNode": 0,
			"limits":   map[string]string{"memory": "1124Mi"},
		}},
	}
	if maxNUMAOptionIsBeta() {
		section["featureGates"] = map[string]bool{string(features.TopologyManagerPolicyBetaOptions): true}
	}
	out := map[string]json.RawMessage{}
	for k, v := range section {
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		out[k] = raw
	}
	return out, nil
}

// benchPod is the engine bench's pod (benches/common/mod.rs pod()).
func benchPod() *v1.Pod {
	resources := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("2"),
		v1.ResourceMemory: resource.MustParse("1Gi"),
		benchGPU:          resource.MustParse("1"),
	}
	pod := &v1.Pod{}
	pod.Namespace, pod.Name, pod.UID = "default", "bench", benchPodUID
	pod.Spec.Containers = []v1.Container{{
		Name:      "app",
		Resources: v1.ResourceRequirements{Requests: resources, Limits: resources.DeepCopy()},
	}}
	return pod
}

// maxNUMAOptionIsBeta asks the release's topology manager whether
// max-allowable-numa-nodes needs TopologyManagerPolicyBetaOptions, on a
// copy of the feature gates with that gate off.
func maxNUMAOptionIsBeta() bool {
	saved, savedReadOnly := utilfeature.DefaultMutableFeatureGate, utilfeature.DefaultFeatureGate
	defer func() { utilfeature.DefaultMutableFeatureGate, utilfeature.DefaultFeatureGate = saved, savedReadOnly }()
	gates := saved.DeepCopy()
	if err := gates.SetFromMap(map[string]bool{string(features.TopologyManagerPolicyBetaOptions): false}); err != nil {
		return true
	}
	utilfeature.DefaultMutableFeatureGate, utilfeature.DefaultFeatureGate = gates, gates
	return topologymanager.CheckPolicyOptionAvailable(topologymanager.MaxAllowableNUMANodes) != nil
}

// kubernetesModule is the k8s.io/kubernetes module this binary was built
// with, as the build recorded it.
func kubernetesModule() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/kubernetes" {
				return dep.Path + " " + dep.Version
			}
		}
	}
	return "k8s.io/kubernetes"
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
