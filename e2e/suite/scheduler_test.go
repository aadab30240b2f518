package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"topoalign/e2e/controlplane"
)

// extenderCall is one request kube-scheduler made to the extender, and
// the extender's answer.
type extenderCall struct {
	verb string
	pod  string // namespace/name
	// filter: the nodes that passed and those refused, with the reasons.
	passed  []string
	refused map[string]string
	// prioritize: the scores.
	scores map[string]int64
	// bind: the node.
	node  string
	error string
}

// recorder stands between kube-scheduler and the extender (its URL is the
// one adapted in the configuration), forwarding every request unchanged
// and recording request and answer.
type recorder struct {
	target string
	mu     sync.Mutex
	calls  []extenderCall
}

// forward sends req to target (same path, body and content type) and
// returns the request's body, the response and its body; on failure it
// answers w with the error and returns false.
func forward(w http.ResponseWriter, req *http.Request, target string) ([]byte, *http.Response, []byte, bool) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil, nil, nil, false
	}
	resp, err := http.Post(target+req.URL.Path, req.Header.Get("Content-Type"), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return nil, nil, nil, false
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return nil, nil, nil, false
	}
	return body, resp, answer, true
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, resp, answer, ok := forward(w, req, r.target)
	if !ok {
		return
	}
	call := extenderCall{verb: strings.TrimPrefix(req.URL.Path, "/")}
	switch call.verb {
	case "filter", "prioritize":
		var args extenderv1.ExtenderArgs
		if json.Unmarshal(body, &args) == nil && args.Pod != nil {
			call.pod = args.Pod.Namespace + "/" + args.Pod.Name
		}
		if call.verb == "filter" {
			var result extenderv1.ExtenderFilterResult
			if err := json.Unmarshal(answer, &result); err != nil {
				call.error = "undecodable answer: " + err.Error()
			} else {
				if result.NodeNames != nil {
					call.passed = *result.NodeNames
				}
				call.refused = result.FailedNodes
				for node, why := range result.FailedAndUnresolvableNodes {
					if call.refused == nil {
						call.refused = map[string]string{}
					}
					call.refused[node] = why
				}
				call.error = result.Error
			}
		} else {
			var scores extenderv1.HostPriorityList
			if err := json.Unmarshal(answer, &scores); err != nil {
				call.error = "undecodable answer: " + err.Error()
			}
			call.scores = map[string]int64{}
			for _, s := range scores {
				call.scores[s.Host] = s.Score
			}
		}
	case "bind":
		var args extenderv1.ExtenderBindingArgs
		_ = json.Unmarshal(body, &args)
		call.pod, call.node = args.PodNamespace+"/"+args.PodName, args.Node
		var result extenderv1.ExtenderBindingResult
		_ = json.Unmarshal(answer, &result)
		call.error = result.Error
	}
	r.mu.Lock()
	r.calls = append(r.calls, call)
	r.mu.Unlock()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

// of returns the calls of verb for pod.
func (r *recorder) of(verb, pod string) []extenderCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var calls []extenderCall
	for _, c := range r.calls {
		if c.verb == verb && c.pod == pod {
			calls = append(calls, c)
		}
	}
	return calls
}

// testNode is a Node of the test fleet: its name and the scenario whose
// machine and history it has.
type testNode struct{ name, scenario string }

// createNode registers a Node as its kubelet would: the machine of
// examples/nodes/two-numa.yaml and two-numa-fragmented.yaml (16 CPUs,
// 64Gi) in capacity, minus the reservations in allocatable, Ready.
func createNode(t *testing.T, ctx context.Context, c *clients, name string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	created, err := c.kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	now := metav1.Now()
	created.Status = corev1.NodeStatus{
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi"),
			corev1.ResourcePods: resource.MustParse("110"),
		},
		// One CPU and 1Gi reserved (two-numa.yaml's kubelet; the fragmented
		// node reserves more memory, which the 2Gi pods here never reach),
		// and the kubelet's 100Mi hard eviction threshold.
		Allocatable: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("15"), corev1.ResourceMemory: resource.MustParse("64412Mi"),
			corev1.ResourcePods: resource.MustParse("110"),
		},
		Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}},
	}
	updated, err := c.kube.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API server taints a new Node not-ready (TaintNodesByCondition);
	// the node lifecycle controller lifts the taint once the node is
	// Ready. No controller manager runs here: lift it as it would.
	updated.Spec.Taints = slices.DeleteFunc(updated.Spec.Taints, func(taint corev1.Taint) bool {
		return taint.Key == corev1.TaintNodeNotReady
	})
	if _, err := c.kube.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startExtender starts `topoalign extender` reading NRT objects from the
// API server with the extender's service account (deploy/'s RBAC), and
// waits until it knows at least nodes nodes.
func startExtender(t *testing.T, ctx context.Context, c *clients, nodes int, args ...string) string {
	t.Helper()
	url, _ := startExtenderBinary(t, ctx, c, topoalign, nodes, args...)
	return url
}

// startExtenderBinary is startExtender with the topoalign binary at
// binary; it returns the process too (stopped at the end of the test, or
// before by the caller).
func startExtenderBinary(t *testing.T, ctx context.Context, c *clients, binary string, nodes int, args ...string) (string, *controlplane.Process) {
	t.Helper()
	kubeconfig := kubeconfigFor(t, "topoalign-extender", c.serviceAccountToken(t, ctx, "kube-system", "topoalign-extender"))
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	address := "127.0.0.1:" + strconv.Itoa(ports[0])
	dir := t.TempDir()
	all := append([]string{"extender", "--nrt-from-cluster", "--nrt-poll", "1", "--listen", address,
		"--scoring", "LeastNUMANodes", "--assume-timeout", "600"}, args...)
	p, err := controlplane.StartProcess("topoalign-extender", binary, all, []string{"KUBECONFIG=" + kubeconfig}, filepath.Join(dir, "extender.log"))
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, p)
	url := "http://" + address
	extenderKnows(t, ctx, p, url, "the extender reads the "+strconv.Itoa(nodes)+" NRT objects", func(known int) bool { return known >= nodes })
	return url, p
}

// guaranteedPod asks for cpus exclusive CPUs and memory, requests equal
// to limits (Guaranteed QoS, so the kubelet's CPU, memory and topology
// managers apply).
func guaranteedPod(namespace, name string, cpus int, memory string) *corev1.Pod {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(strconv.Itoa(cpus)),
		corev1.ResourceMemory: resource.MustParse(memory),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: resources, Limits: resources},
		}}},
	}
}

// namespace creates a namespace with its default service account (no
// controller manager creates it here, and pods need it).
func namespace(t *testing.T, ctx context.Context, c *clients, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c.serviceAccountToken(t, ctx, name, "default")
	t.Cleanup(func() {
		pods, err := c.kube.CoreV1().Pods(name).List(context.Background(), metav1.ListOptions{})
		if err == nil {
			zero := int64(0)
			for _, p := range pods.Items {
				_ = c.kube.CoreV1().Pods(name).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
		}
	})
}

// The stock kube-scheduler with deploy/'s configuration (its extender URL
// pointed at a recorder in front of `topoalign extender`): for Guaranteed
// pods of 7 CPUs on two empty two-NUMA nodes and one fragmented node (4
// and 6 CPUs free on its NUMA nodes) whose kubelet (single-numa-node)
// would refuse them, the scheduler calls filter
// and prioritize, binds each pod to a node the extender passed, never to
// the fragmented one — although it has the most allocatable CPU left —
// and leaves the fifth pod Pending with the extender's reason. With
// `bindVerb` (and `--create-bindings`), the extender's /bind creates the
// Bindings.
// extenderKnows waits until the extender process p serving url says in
// /healthz that it knows a number of nodes for which holds is true; the
// test fails at once if the process exits.
func extenderKnows(t *testing.T, ctx context.Context, p *controlplane.Process, url, what string, holds func(known int) bool) {
	t.Helper()
	eventually(t, ctx, what, func() (bool, string) {
		if exited, err := p.Exited(); exited {
			t.Fatalf("the extender exited (%v):\n%s", err, controlplane.Tail(p.Log, 30))
		}
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var known int
		_, err = fmt.Sscanf(string(body), "ok: %d nodes", &known)
		return err == nil && holds(known), string(body)
	})
}

func TestKubeSchedulerCallsTheExtender(t *testing.T) {
	for _, bind := range []bool{false, true} {
		name := "filter-prioritize"
		if bind {
			name = "bind"
		}
		t.Run(name, func(t *testing.T) { schedulerCallsExtender(t, name, bind) })
	}
}

func schedulerCallsExtender(t *testing.T, variant string, bind bool) {
	ctx := testContext(t, 4*time.Minute)
	c := admin(t)
	publisher := []string{"KUBECONFIG=" + agentKubeconfig(t, ctx, c)}
	fragmented := "e2e-" + variant + "-fragmented"
	nodes := []testNode{
		{"e2e-" + variant + "-a", "examples/nodes/two-numa.yaml"},
		{"e2e-" + variant + "-b", "examples/nodes/two-numa.yaml"},
		{fragmented, "examples/nodes/two-numa-fragmented.yaml"},
	}
	for _, n := range nodes {
		createNode(t, ctx, c, n.name)
		out := runTopoalign(t, ctx, publisher, "nrt", n.scenario, "--name", n.name, "--publish")
		if out.code != 0 {
			t.Fatalf("publishing %s: exit %d: %s", n.name, out.code, out.stderr)
		}
		t.Cleanup(func() { c.deleteNRT(t, context.Background(), n.name) })
	}
	// Without bind the extender never learns the scheduler's choice, and
	// nothing here publishes the nodes' new states (no kubelet, no agent):
	// an assumption at prioritize would be a guess the scheduler's tie
	// breaking can contradict, so the extender judges the published
	// states alone. With bind it records each placement exactly.
	extenderArgs := []string{"--no-assume-on-prioritize"}
	if bind {
		extenderArgs = []string{"--create-bindings"}
	}
	rec := &recorder{target: startExtender(t, ctx, c, len(nodes), extenderArgs...)}
	proxy := httptest.NewServer(rec)
	t.Cleanup(proxy.Close)

	schedulerName := "kube-scheduler-" + variant
	config := adaptSchedulerConfig(t, filepath.Join(repo, "deploy", "kube-scheduler-extender.yaml"), schedulerName, proxy.URL, bind)
	scheduler, err := cp.StartScheduler(ctx, schedulerName, bins.Scheduler, config)
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, scheduler)

	ns := "e2e-" + variant
	namespace(t, ctx, c, ns)
	const fitting = 4 // two 7-CPU pods per empty node, one per NUMA node
	var names []string
	for i := range fitting + 1 {
		pod := guaranteedPod(ns, fmt.Sprintf("pod-%d", i), 7, "2Gi")
		if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		names = append(names, pod.Name)
	}

	// Every pod either bound or found unschedulable by the scheduler.
	placements := map[string]string{}
	unschedulable := map[string]string{}
	eventually(t, ctx, "every pod bound or marked unschedulable", func() (bool, string) {
		pods, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		clear(placements)
		clear(unschedulable)
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" {
				placements[p.Name] = p.Spec.NodeName
				continue
			}
			for _, condition := range p.Status.Conditions {
				if condition.Type == corev1.PodScheduled && condition.Status == corev1.ConditionFalse && condition.Reason == corev1.PodReasonUnschedulable {
					unschedulable[p.Name] = condition.Message
				}
			}
		}
		return len(placements)+len(unschedulable) == len(names), fmt.Sprintf("bound %v, unschedulable %v", placements, unschedulable)
	})
	t.Logf("placements: %v", placements)
	if bind {
		// The recorder notes a bind call when the extender's answer passes
		// back through it, which can be after the Binding it created shows
		// in the pod: wait for the answers of the bound pods.
		eventually(t, ctx, "the extender's bind answered for every bound pod", func() (bool, string) {
			for pod := range placements {
				if len(rec.of("bind", ns+"/"+pod)) == 0 {
					return false, "no bind answer recorded yet for " + pod
				}
			}
			return true, ""
		})
	}

	if len(placements) != fitting {
		t.Errorf("%d pods bound, want %d: %v (unschedulable: %v)", len(placements), fitting, placements, unschedulable)
	}
	perNode := map[string]int{}
	for pod, node := range placements {
		perNode[node]++
		key := ns + "/" + pod
		filters := rec.of("filter", key)
		if len(filters) == 0 {
			t.Errorf("%s bound to %s without a filter call to the extender", pod, node)
			continue
		}
		last := filters[len(filters)-1]
		if !slices.Contains(last.passed, node) {
			t.Errorf("%s bound to %s, which the extender's filter did not pass (passed %v, refused %v)", pod, node, last.passed, last.refused)
		}
		if why, ok := last.refused[fragmented]; !ok || !strings.Contains(why, "TopologyAffinityError") {
			t.Errorf("%s: the extender did not refuse %s with TopologyAffinityError (refused %v)", pod, fragmented, last.refused)
		}
		// kube-scheduler skips scoring when one node is feasible.
		if len(last.passed) > 1 && len(rec.of("prioritize", key)) == 0 {
			t.Errorf("%s: %d nodes passed the filter but the extender's prioritize was not called", pod, len(last.passed))
		}
		if bind {
			binds := rec.of("bind", key)
			if len(binds) != 1 || binds[0].node != node || binds[0].error != "" {
				t.Errorf("%s bound to %s; the extender's bind calls: %+v", pod, node, binds)
			}
		}
	}
	if perNode[fragmented] != 0 {
		t.Errorf("%d pods on %s, whose kubelet refuses them", perNode[fragmented], fragmented)
	}
	prioritized := 0
	for _, name := range names {
		prioritized += len(rec.of("prioritize", ns+"/"+name))
	}
	if prioritized == 0 {
		t.Error("the extender's prioritize was never called")
	}
	for pod, message := range unschedulable {
		if !strings.Contains(message, "TopologyAffinityError") {
			t.Errorf("%s unschedulable without the extender's reason: %q", pod, message)
		}
	}
	if !bind {
		for _, name := range names {
			if calls := rec.of("bind", ns+"/"+name); len(calls) != 0 {
				t.Errorf("bind called for %s without bindVerb: %+v", name, calls)
			}
		}
	}
}
