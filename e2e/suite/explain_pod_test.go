package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"topoalign/e2e/controlplane"
)

// The answer of `topoalign explain pod/NAME -o json` (the fields read here).
type podAnswer struct {
	Pod    string `json:"pod"`
	Status string `json:"status"`
	Nodes  []struct {
		Node    string `json:"node"`
		State   string `json:"state"`
		Verdict string `json:"verdict"`
		Line    string `json:"line"`
	} `json:"nodes"`
	Fix *struct {
		Kind  string `json:"kind"`
		Node  string `json:"node"`
		Evict []struct {
			Pod string `json:"pod"`
		} `json:"evict"`
	} `json:"fix"`
}

// The answer of `topoalign nodes -o json` (the fields read here).
type nodesAnswer struct {
	Nodes []struct {
		Node        string   `json:"node"`
		State       string   `json:"state"`
		StrandedFor []string `json:"strandedFor"`
		Numa        []struct {
			Numa     int               `json:"numa"`
			Free     map[string]string `json:"free"`
			Stranded bool              `json:"stranded"`
			Held     []struct {
				Pod  string `json:"pod"`
				Cpus string `json:"cpus"`
			} `json:"held"`
		} `json:"numa"`
	} `json:"nodes"`
}

// kubectlPlugin runs `kubectl topoalign ARGS…` with a real kubectl (built
// by e2e/build-tools.sh at the suite's Kubernetes release) finding
// `kubectl-topoalign` — a symbolic link to the binary under test — on
// its PATH, as `ln -s $(which topoalign) ~/.local/bin/kubectl-topoalign`
// installs it; the kubeconfig comes from $KUBECONFIG, as kubectl's own.
func kubectlPlugin(t *testing.T, ctx context.Context, kubeconfig string, args ...string) result {
	t.Helper()
	kubectl := os.Getenv("TOPOALIGN_E2E_KUBECTL")
	if kubectl == "" {
		t.Fatal("$TOPOALIGN_E2E_KUBECTL is not set: run e2e/run.sh (e2e/build-tools.sh builds kubectl)")
	}
	bin := t.TempDir()
	if err := os.Symlink(topoalign, filepath.Join(bin, "kubectl-topoalign")); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, kubectl, append([]string{"topoalign"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
	controlplane.DieWithParent(cmd)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if exit, ok := err.(*exec.ExitError); ok {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("kubectl topoalign %s: %v", strings.Join(args, " "), err)
	}
	return result{stdout.String(), stderr.String(), code}
}

// A pod Failed with TopologyAffinityError on a simulated node: `kubectl
// topoalign explain pod/NAME` names a node that admits it, and the pod
// recreated there as the answer says runs. Then, with every node full,
// the answer is the fewest evictions; carried out, the pod runs too.
// `kubectl topoalign nodes` shows who holds the CPUs and the first node's
// free CPUs stranded while the pod waits.
func TestExplainPod(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c := admin(t)
	names := simulatedNodes(t, ctx, c, "e2e/testdata/explain-fleet.yaml", "e2e-explain", 2)
	first, second := names[0], names[1]
	kubeconfig := kubeconfigFor(t, "admin", cp.AdminToken)
	ns := "e2e-explain-pod"
	namespace(t, ctx, c, ns)

	// create binds a Guaranteed pod of cpus CPUs to node by name and waits
	// for its simulated kubelet's decision.
	create := func(name, node string, cpus int) *corev1.Pod {
		t.Helper()
		pod := guaranteedPod(ns, name, cpus, "2Gi")
		pod.Spec.NodeName = node
		if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods := podsUntil(t, ctx, c, ns, name+" decided", func(pods map[string]*corev1.Pod) bool {
			return pods[name] != nil && podOutcome(pods[name]) != "Pending"
		})
		return pods[name]
	}
	held := func(node string, want int) {
		t.Helper()
		eventually(t, ctx, node+"'s NRT object holds its running pods", func() (bool, string) {
			pods, err := nrtPods(ctx, c, node)
			return err == nil && len(pods) == want, strings.Join(pods, ",")
		})
	}
	explain := func(name string) podAnswer {
		t.Helper()
		r := kubectlPlugin(t, ctx, kubeconfig, "explain", "pod/"+name, "-n", ns, "-o", "json")
		if r.code != 0 {
			t.Fatalf("kubectl topoalign explain pod/%s: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
		}
		var answer podAnswer
		if err := json.Unmarshal([]byte(r.stdout), &answer); err != nil {
			t.Fatalf("explain pod/%s: %v\n%s", name, err, r.stdout)
		}
		return answer
	}
	recreateOn := func(name, node string, cpus int) {
		t.Helper()
		zero := int64(0)
		if err := c.kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		podsUntil(t, ctx, c, ns, name+" deleted", func(pods map[string]*corev1.Pod) bool { return pods[name] == nil })
		if pod := create(name, node, cpus); pod.Status.Phase != corev1.PodRunning {
			t.Fatalf("%s recreated on %s as the answer says: %s, want Running", name, node, podOutcomeOrNil(pod))
		}
	}

	// The first node full up to a CPU per NUMA node; the 2-CPU pod bound
	// there is refused by its single-numa-node kubelet.
	for _, name := range []string{"fill-a", "fill-b"} {
		if pod := create(name, first, 7); pod.Status.Phase != corev1.PodRunning {
			t.Fatalf("%s: %s", name, podOutcomeOrNil(pod))
		}
	}
	want := create("want", first, 2)
	if want.Status.Phase != corev1.PodFailed || want.Status.Reason != "TopologyAffinityError" {
		t.Fatalf("want: %s, want Failed with TopologyAffinityError", podOutcomeOrNil(want))
	}
	held(first, 2)
	held(second, 0)

	answer := explain("want")
	t.Logf("explain pod/want: %+v", answer)
	if !strings.Contains(answer.Status, "TopologyAffinityError") {
		t.Errorf("status %q does not say the kubelet's reason", answer.Status)
	}
	verdicts := map[string]string{}
	for _, node := range answer.Nodes {
		verdicts[node.Node] = node.Verdict
		if node.State != "exact" {
			t.Errorf("%s: state %q, want exact (the simulated kubelet publishes its exact state)", node.Node, node.State)
		}
		if node.Node == first && !strings.Contains(node.Line, "TopologyAffinityError") {
			t.Errorf("%s: line %q does not give the kubelet's refusal", first, node.Line)
		}
	}
	if verdicts[first] != "rejected" || verdicts[second] != "admitted" {
		t.Errorf("verdicts %v: want %s rejected, %s admitted", verdicts, first, second)
	}
	if answer.Fix == nil || answer.Fix.Kind != "node" || answer.Fix.Node != second {
		t.Fatalf("fix %+v: want node %s as it is", answer.Fix, second)
	}

	// The same answer for people names the node and the fix.
	text := kubectlPlugin(t, ctx, kubeconfig, "explain", "pod/want", "-n", ns)
	if text.code != 0 || !strings.Contains(text.stdout, "fix: "+second+" admits it as it is") {
		t.Errorf("text answer (exit %d):\n%s%s", text.code, text.stdout, text.stderr)
	}

	// While the pod waits, the first node's free CPUs are stranded for
	// it; the second's are not (it admits the pod).
	nodesOut := kubectlPlugin(t, ctx, kubeconfig, "nodes", "-o", "json")
	if nodesOut.code != 0 {
		t.Fatalf("kubectl topoalign nodes: exit %d\n%s%s", nodesOut.code, nodesOut.stdout, nodesOut.stderr)
	}
	var view nodesAnswer
	if err := json.Unmarshal([]byte(nodesOut.stdout), &view); err != nil {
		t.Fatalf("nodes: %v\n%s", err, nodesOut.stdout)
	}
	for _, node := range view.Nodes {
		switch node.Node {
		case first:
			if len(node.StrandedFor) != 1 || node.StrandedFor[0] != ns+"/want" {
				t.Errorf("%s: stranded for %v, want [%s/want]", first, node.StrandedFor, ns)
			}
			holders := map[string]bool{}
			for _, numa := range node.Numa {
				for _, h := range numa.Held {
					holders[h.Pod] = h.Cpus != ""
				}
			}
			if !holders[ns+"/fill-a"] || !holders[ns+"/fill-b"] {
				t.Errorf("%s: holders %v, want fill-a and fill-b with their CPUs", first, holders)
			}
		case second:
			if len(node.StrandedFor) != 0 {
				t.Errorf("%s: stranded for %v, want none", second, node.StrandedFor)
			}
		}
	}

	// Following the advice: recreated on the named node, it runs.
	recreateOn("want", answer.Fix.Node, 2)
	held(second, 1)

	// Every node full: the second node's 2-CPU pod took NUMA room there;
	// fill it like the first. A 7-CPU pod then fits no NUMA node anywhere.
	if pod := create("fill-c", second, 7); pod.Status.Phase != corev1.PodRunning {
		t.Fatalf("fill-c: %s", podOutcomeOrNil(pod))
	}
	held(second, 2)
	big := create("big", first, 7)
	if big.Status.Phase != corev1.PodFailed || big.Status.Reason != "TopologyAffinityError" {
		t.Fatalf("big: %s, want Failed with TopologyAffinityError", podOutcomeOrNil(big))
	}
	answer = explain("big")
	t.Logf("explain pod/big: %+v", answer)
	for _, node := range answer.Nodes {
		if node.Verdict != "rejected" {
			t.Errorf("%s: %s, want rejected (no NUMA node has 7 CPUs free)", node.Node, node.Verdict)
		}
	}
	if answer.Fix == nil || answer.Fix.Kind != "evict" || len(answer.Fix.Evict) != 1 {
		t.Fatalf("fix %+v: want one eviction", answer.Fix)
	}
	// Following the advice: evict, then recreate on that node; it runs.
	victim := strings.TrimPrefix(answer.Fix.Evict[0].Pod, ns+"/")
	zero := int64(0)
	if err := c.kube.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("evicting %s: %v", victim, err)
	}
	podsUntil(t, ctx, c, ns, victim+" deleted", func(pods map[string]*corev1.Pod) bool { return pods[victim] == nil })
	held(answer.Fix.Node, 1)
	recreateOn("big", answer.Fix.Node, 7)
}

// explainDRAFleet: one node of two NUMA nodes (CPUs 0-3 and 4-7, CPU 7
// reserved), single-numa-node, a GPU on each NUMA node published through
// DRA by simulate-nodes (its dra: block, with the driver's DeviceClass).
const explainDRAFleet = `nodes:
  - name: e2e-explain-dra
    count: 1
    topology:
      numaNodes:
        - {id: 0, memory: 16Gi, distances: [10, 21]}
        - {id: 1, memory: 16Gi, distances: [21, 10]}
      cpus:
        - {id: 0, core: 0, socket: 0, numa: 0}
        - {id: 1, core: 1, socket: 0, numa: 0}
        - {id: 2, core: 2, socket: 0, numa: 0}
        - {id: 3, core: 3, socket: 0, numa: 0}
        - {id: 4, core: 4, socket: 1, numa: 1}
        - {id: 5, core: 5, socket: 1, numa: 1}
        - {id: 6, core: 6, socket: 1, numa: 1}
        - {id: 7, core: 7, socket: 1, numa: 1}
      devices:
        example.com/gpu:
          - {id: gpu0, numa: [0]}
          - {id: gpu1, numa: [1]}
    kubelet:
      topologyManagerPolicy: single-numa-node
      cpuManagerPolicy: static
      reservedSystemCPUs: "7"
dra:
  drivers: [example.com/gpu=gpu.explain.example.com]
  deviceClasses:
    - metadata: {name: gpu.explain.example.com}
      spec:
        selectors: [{cel: {expression: 'device.driver == "gpu.explain.example.com"'}}]
`

// The DRA side of `explain pod/NAME -o json` and `nodes -o json` (the
// fields read here).
type draPodAnswer struct {
	Nodes []struct {
		Node string `json:"node"`
		Dra  *struct {
			Kind             string `json:"kind"`
			Why              string `json:"why"`
			Outcome          string `json:"outcome"`
			KubeletNumaNodes []int  `json:"kubeletNumaNodes"`
			Requests         []struct {
				Devices []struct {
					Driver   string `json:"driver"`
					NumaNode *int   `json:"numaNode"`
				} `json:"devices"`
			} `json:"requests"`
			Misaligned []struct {
				Device string `json:"device"`
			} `json:"misaligned"`
		} `json:"dra"`
	} `json:"nodes"`
}

// A pod with a ResourceClaim on a node whose GPUs come from DRA (real
// ResourceSlices and DeviceClass, published by simulate-nodes): `kubectl
// topoalign explain pod/NAME` says which GPU the DRA allocator would give
// it and its NUMA node beside the kubelet's, misaligned exactly when they
// differ; `kubectl topoalign nodes` counts a free GPU per NUMA node.
func TestExplainPodDRA(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c := admin(t)
	const driver = "gpu.explain.example.com"
	fleet := filepath.Join(t.TempDir(), "explain-dra-fleet.yaml")
	if err := os.WriteFile(fleet, []byte(explainDRAFleet), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		background := context.Background()
		slices, err := c.kube.ResourceV1().ResourceSlices().List(background, metav1.ListOptions{})
		if err == nil {
			for _, slice := range slices.Items {
				if slice.Spec.Driver == driver {
					_ = c.kube.ResourceV1().ResourceSlices().Delete(background, slice.Name, metav1.DeleteOptions{})
				}
			}
		}
		_ = c.kube.ResourceV1().DeviceClasses().Delete(background, driver, metav1.DeleteOptions{})
	})
	node := simulatedNodes(t, ctx, c, fleet, "e2e-explain-dra", 1)[0]
	eventually(t, ctx, node+"'s GPU ResourceSlice and DeviceClass", func() (bool, string) {
		slices, err := c.kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		devices := 0
		for _, slice := range slices.Items {
			if slice.Spec.Driver == driver && slice.Spec.NodeName != nil && *slice.Spec.NodeName == node {
				devices += len(slice.Spec.Devices)
			}
		}
		_, err = c.kube.ResourceV1().DeviceClasses().Get(ctx, driver, metav1.GetOptions{})
		return devices == 2 && err == nil, fmt.Sprintf("%d devices, class: %v", devices, err)
	})
	kubeconfig := kubeconfigFor(t, "admin", cp.AdminToken)
	ns := "e2e-explain-dra"
	namespace(t, ctx, c, ns)
	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "want-gpu"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: driver}},
		}}},
	}
	if _, err := c.kube.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No scheduler serves it: the pod stays unscheduled, its claim
	// unallocated.
	pod := guaranteedPod(ns, "want", 2, "1Gi")
	pod.Spec.SchedulerName = "e2e-nobody"
	name := "want-gpu"
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &name}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	r := kubectlPlugin(t, ctx, kubeconfig, "explain", "pod/want", "-n", ns, "-o", "json")
	if r.code != 0 {
		t.Fatalf("kubectl topoalign explain pod/want: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var answer draPodAnswer
	if err := json.Unmarshal([]byte(r.stdout), &answer); err != nil {
		t.Fatalf("explain pod/want: %v\n%s", err, r.stdout)
	}
	found := false
	for _, verdict := range answer.Nodes {
		if verdict.Node != node {
			continue
		}
		found = true
		dra := verdict.Dra
		if dra == nil || dra.Kind != "explained" || dra.Outcome != "allocated" {
			t.Fatalf("%s: DRA %+v, want the allocator's devices\n%s", node, dra, r.stdout)
		}
		if len(dra.KubeletNumaNodes) != 1 {
			t.Errorf("%s: kubelet NUMA nodes %v, want one (single-numa-node, 2 CPUs)", node, dra.KubeletNumaNodes)
		}
		if len(dra.Requests) != 1 || len(dra.Requests[0].Devices) != 1 {
			t.Fatalf("%s: requests %+v, want one GPU", node, dra.Requests)
		}
		gpu := dra.Requests[0].Devices[0]
		if gpu.Driver != driver || gpu.NumaNode == nil {
			t.Fatalf("%s: GPU %+v, want one of %s with its NUMA node", node, gpu, driver)
		}
		aligned := len(dra.KubeletNumaNodes) == 1 && dra.KubeletNumaNodes[0] == *gpu.NumaNode
		if aligned != (len(dra.Misaligned) == 0) {
			t.Errorf("%s: GPU on NUMA %d, kubelet on %v, misaligned %+v", node, *gpu.NumaNode, dra.KubeletNumaNodes, dra.Misaligned)
		}
	}
	if !found {
		t.Fatalf("no verdict for %s:\n%s", node, r.stdout)
	}
	text := kubectlPlugin(t, ctx, kubeconfig, "explain", "pod/want", "-n", ns)
	if text.code != 0 || !strings.Contains(text.stdout, "DRA (the kube-scheduler") {
		t.Errorf("text answer (exit %d) without its DRA block:\n%s%s", text.code, text.stdout, text.stderr)
	}

	out := kubectlPlugin(t, ctx, kubeconfig, "nodes", "-o", "json")
	if out.code != 0 {
		t.Fatalf("kubectl topoalign nodes: exit %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	var view nodesAnswer
	if err := json.Unmarshal([]byte(out.stdout), &view); err != nil {
		t.Fatalf("nodes: %v\n%s", err, out.stdout)
	}
	for _, n := range view.Nodes {
		if n.Node != node {
			continue
		}
		free := map[int]string{}
		for _, numa := range n.Numa {
			free[numa.Numa] = numa.Free[driver]
		}
		if free[0] != "1" || free[1] != "1" {
			t.Errorf("%s: free %s per NUMA node %v, want 1 on each (no claim allocated)", node, driver, free)
		}
	}
}
