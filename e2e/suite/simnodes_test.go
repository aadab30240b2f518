package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/k8stopologyawareschedwg/podfingerprint"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"topoalign/e2e/controlplane"
)

// The fragmenting fleet (e2e/testdata/fleet.yaml): four single-numa-node
// nodes of examples/nodes/two-numa.yaml.
const (
	simFleet = "e2e/testdata/fleet.yaml"
	simGroup = "e2e-sim"
	simNodes = 4
	// The annotation the simulated kubelets write on a running pod.
	containersAnnotation = "topoalign.io/containers"
)

// simulatedNodes starts `topoalign simulate-nodes` on fleet (as the admin:
// one process plays every node's kubelet) and waits until its nodes are
// Ready, untainted, heart-beating and their NRT objects published. At the
// end of the test it stops the process and removes the nodes, their Leases
// and NRT objects.
func simulatedNodes(t *testing.T, ctx context.Context, c *clients, fleet, group string, count int, extra ...string) []string {
	t.Helper()
	c.installCRD(t, ctx)
	var names []string
	for i := range count {
		names = append(names, fmt.Sprintf("%s-%d", group, i))
	}
	kubeconfig := kubeconfigFor(t, "admin", cp.AdminToken)
	if !filepath.IsAbs(fleet) {
		fleet = filepath.Join(repo, fleet)
	}
	args := append([]string{"simulate-nodes", "--fleet", fleet, "--kubeconfig", kubeconfig, "--nrt-interval", "200"}, extra...)
	p, err := controlplane.StartProcess("topoalign-simulate-nodes", topoalign, args, nil, filepath.Join(t.TempDir(), "simulate-nodes.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		background := context.Background()
		for _, name := range names {
			_ = c.kube.CoreV1().Nodes().Delete(background, name, metav1.DeleteOptions{})
			_ = c.kube.CoordinationV1().Leases("kube-node-lease").Delete(background, name, metav1.DeleteOptions{})
			c.deleteNRT(t, background, name)
		}
	})
	stopAtEnd(t, p)
	eventually(t, ctx, fmt.Sprintf("%d simulated nodes Ready, untainted, with Leases and NRT objects", count), func() (bool, string) {
		if exited, err := p.Exited(); exited {
			t.Fatalf("simulate-nodes exited (%v):\n%s", err, controlplane.Tail(p.Log, 30))
		}
		for _, name := range names {
			node, err := c.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			if len(node.Spec.Taints) != 0 || !nodeReady(node) {
				return false, fmt.Sprintf("%s: taints %v, conditions %v", name, node.Spec.Taints, node.Status.Conditions)
			}
			if _, err := c.kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{}); err != nil {
				return false, "lease: " + err.Error()
			}
			if _, err := c.getNRT(ctx, name); err != nil {
				return false, "NRT: " + err.Error()
			}
		}
		return true, ""
	})
	return names
}

func nodeReady(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
}

// podsListWatch lists and watches the pods of namespace.
func podsListWatch(ctx context.Context, c *clients, namespace string) *cache.ListWatch {
	return &cache.ListWatch{
		ListFunc: func(options metav1.ListOptions) (runtime.Object, error) {
			return c.kube.CoreV1().Pods(namespace).List(ctx, options)
		},
		WatchFunc: func(options metav1.ListOptions) (watch.Interface, error) {
			return c.kube.CoreV1().Pods(namespace).Watch(ctx, options)
		},
	}
}

// podsUntil watches the pods of namespace until done holds for the latest
// state of every pod (keyed by name), or ctx ends.
func podsUntil(t *testing.T, ctx context.Context, c *clients, namespace, what string, done func(map[string]*corev1.Pod) bool) map[string]*corev1.Pod {
	t.Helper()
	lw := podsListWatch(ctx, c, namespace)
	pods := map[string]*corev1.Pod{}
	// The listing may already satisfy done (no event follows then).
	synced := func(store cache.Store) (bool, error) {
		for _, object := range store.List() {
			if pod, ok := object.(*corev1.Pod); ok {
				pods[pod.Name] = pod
			}
		}
		return done(pods), nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, synced, func(event watch.Event) (bool, error) {
		if pod, ok := event.Object.(*corev1.Pod); ok {
			if event.Type == watch.Deleted {
				delete(pods, pod.Name)
			} else {
				pods[pod.Name] = pod
			}
		}
		return done(pods), nil
	})
	if err != nil {
		summary := map[string]string{}
		for name, pod := range pods {
			summary[name] = podOutcome(pod)
		}
		t.Fatalf("%s: not reached (%v); pods: %v", what, err, summary)
	}
	return pods
}

// podOutcome is where a pod stands: "Running", "Failed: <reason>",
// "Unschedulable", "SchedulerError" or "Pending".
func podOutcome(pod *corev1.Pod) string {
	switch pod.Status.Phase {
	case corev1.PodRunning:
		return "Running"
	case corev1.PodFailed:
		return "Failed: " + pod.Status.Reason
	}
	for _, condition := range pod.Status.Conditions {
		if condition.Type == corev1.PodScheduled && condition.Status == corev1.ConditionFalse && pod.Spec.NodeName == "" {
			return condition.Reason
		}
	}
	return "Pending"
}

// settled: every one of n pods ran, failed admission, or was found
// unschedulable.
func settled(n int) func(map[string]*corev1.Pod) bool {
	return func(pods map[string]*corev1.Pod) bool {
		if len(pods) != n {
			return false
		}
		for _, pod := range pods {
			if outcome := podOutcome(pod); outcome == "Pending" || outcome == corev1.PodReasonSchedulerError {
				return false
			}
		}
		return true
	}
}

// The simulated kubelets on their own (pods bound by name, no scheduler):
// nodes registered with the engine's capacity and allocatable, pods
// admitted in binding order with their CPUs in the annotation, the one
// that does not fit on a NUMA node Failed with the kubelet's reason and
// message, the NRT object following, and a deletion releasing its CPUs.
func TestSimulatedNodesAdmitExactly(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c := admin(t)
	names := simulatedNodes(t, ctx, c, "e2e/testdata/one-node-fleet.yaml", "e2e-sim-one", 1)
	node := names[0]
	n, err := c.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cpu := n.Status.Allocatable[corev1.ResourceCPU]; cpu.String() != "15" {
		t.Errorf("allocatable cpu %s, want 15 (16 CPUs, systemReserved 1)", cpu.String())
	}
	if n.Labels["topoalign.io/node-group"] != "e2e-sim-one" || n.Labels["kubernetes.io/hostname"] != node {
		t.Errorf("labels %v", n.Labels)
	}

	ns := "e2e-sim-admit"
	namespace(t, ctx, c, ns)
	create := func(name string, cpus int) {
		pod := guaranteedPod(ns, name, cpus, "2Gi")
		pod.Spec.NodeName = node
		if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// One at a time: binding order is creation order here.
		podsUntil(t, ctx, c, ns, name+" decided", func(pods map[string]*corev1.Pod) bool {
			return pods[name] != nil && podOutcome(pods[name]) != "Pending"
		})
	}
	create("first", 7)
	create("second", 7)
	create("third", 2) // 1 CPU left on each NUMA node: single-numa-node refuses
	pods := podsUntil(t, ctx, c, ns, "all decided", settled(3))
	for _, name := range []string{"first", "second"} {
		pod := pods[name]
		if pod.Status.Phase != corev1.PodRunning {
			t.Fatalf("%s: %s, want Running (%s)", name, podOutcome(pod), pod.Status.Message)
		}
		var containers []struct {
			Name       string `json:"name"`
			Cpus       string `json:"cpus"`
			MemoryNuma []int  `json:"memoryNuma"`
		}
		if err := json.Unmarshal([]byte(pod.Annotations[containersAnnotation]), &containers); err != nil || len(containers) != 1 {
			t.Fatalf("%s: annotation %q: %v", name, pod.Annotations[containersAnnotation], err)
		}
		if containers[0].Cpus == "" || len(containers[0].MemoryNuma) != 1 {
			t.Errorf("%s: want exclusive CPUs and memory on one NUMA node: %+v", name, containers[0])
		}
		if len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].State.Running == nil {
			t.Errorf("%s: container statuses %+v", name, pod.Status.ContainerStatuses)
		}
	}
	third := pods["third"]
	if third.Status.Phase != corev1.PodFailed || third.Status.Reason != "TopologyAffinityError" ||
		third.Status.Message != "Pod was rejected: Resources cannot be allocated with Topology locality" {
		t.Errorf("third: phase %s, reason %q, message %q; want Failed, the kubelet's TopologyAffinityError", third.Status.Phase, third.Status.Reason, third.Status.Message)
	}
	eventually(t, ctx, "the NRT object holds the two running pods", func() (bool, string) {
		pods, err := nrtPods(ctx, c, node)
		return err == nil && len(pods) == 2, fmt.Sprintf("%v %v", pods, err)
	})
	// Its pod fingerprint is what scheduler-plugins' cache computes (with
	// the podfingerprint library) over the pods running on the node.
	eventually(t, ctx, "the NRT object's pod fingerprint is the running pods'", func() (bool, string) {
		object, err := c.getNRT(ctx, node)
		if err != nil {
			return false, err.Error()
		}
		running, err := c.kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err != nil {
			return false, err.Error()
		}
		fingerprint := podfingerprint.NewFingerprint(len(running.Items))
		for _, pod := range running.Items {
			if pod.Status.Phase == corev1.PodRunning {
				fingerprint.Add(pod.Namespace, pod.Name)
			}
		}
		published := attributeValue(object.Object, podfingerprint.Attribute)
		method := attributeValue(object.Object, podfingerprint.AttributeMethod)
		return published == fingerprint.Sign() && method == podfingerprint.MethodAll,
			fmt.Sprintf("published %q (method %q), computed %q", published, method, fingerprint.Sign())
	})

	// A graceful deletion: the simulated kubelet "stops the containers",
	// removes the pod and frees its CPUs.
	if err := c.kube.CoreV1().Pods(ns).Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	podsUntil(t, ctx, c, ns, "first deleted", func(pods map[string]*corev1.Pod) bool { return pods["first"] == nil })
	create("fourth", 7)
	if pod, err := c.kube.CoreV1().Pods(ns).Get(ctx, "fourth", metav1.GetOptions{}); err != nil || pod.Status.Phase != corev1.PodRunning {
		t.Errorf("fourth after the deletion: %v %v", podOutcomeOrNil(pod), err)
	}
}

func podOutcomeOrNil(pod *corev1.Pod) string {
	if pod == nil {
		return "<none>"
	}
	return podOutcome(pod) + " " + pod.Status.Message
}

// nrtPods lists the pods in the exact-state attribute of node's NRT
// object.
func nrtPods(ctx context.Context, c *clients, node string) ([]string, error) {
	object, err := c.getNRT(ctx, node)
	if err != nil {
		return nil, err
	}
	text := attributeValue(object.Object, "topoalign.io/state")
	if text == "" {
		return nil, fmt.Errorf("%s: no topoalign.io/state attribute", node)
	}
	var state struct {
		Pods []struct {
			Name      string `json:"name"`
			Namespace string `json:"namespace"`
		} `json:"pods"`
	}
	if err := json.Unmarshal([]byte(text), &state); err != nil {
		return nil, err
	}
	var names []string
	for _, p := range state.Pods {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return names, nil
}

// attributeValue is the value of the NRT object's top-level attribute
// name ("" when it has none).
func attributeValue(object map[string]any, name string) string {
	attributes, _, _ := unstructuredList(object, "attributes")
	for _, a := range attributes {
		attribute, _ := a.(map[string]any)
		if attribute["name"] == name {
			value, _ := attribute["value"].(string)
			return value
		}
	}
	return ""
}

func unstructuredList(object map[string]any, field string) ([]any, bool, error) {
	list, ok := object[field].([]any)
	return list, ok, nil
}

// workloadPods expands the Deployments of e2e/testdata/workload.yaml into
// their pods, named <deployment>-<i>, as the ReplicaSet controller would
// create them once (no controller manager runs here, so a pod that fails
// admission is counted, not replaced).
func workloadPods(t *testing.T, namespace, schedulerName string) []*corev1.Pod {
	t.Helper()
	var pods []*corev1.Pod
	for _, object := range readManifests(t, filepath.Join(repo, "e2e", "testdata", "workload.yaml")) {
		var deployment appsv1.Deployment
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(object.Object, &deployment); err != nil {
			t.Fatal(err)
		}
		replicas := int32(1)
		if deployment.Spec.Replicas != nil {
			replicas = *deployment.Spec.Replicas
		}
		for i := range replicas {
			pod := &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: namespace, Name: fmt.Sprintf("%s-%d", deployment.Name, i),
					Labels: deployment.Spec.Template.Labels,
				},
				Spec: *deployment.Spec.Template.Spec.DeepCopy(),
			}
			pod.Spec.SchedulerName = schedulerName
			pods = append(pods, pod)
		}
	}
	return pods
}

// outcomes counts the pods of each outcome.
func outcomes(pods map[string]*corev1.Pod) map[string]int {
	counts := map[string]int{}
	for _, pod := range pods {
		counts[podOutcome(pod)]++
	}
	return counts
}

// failedAdmission is the number of pods a kubelet refused.
func failedAdmission(counts map[string]int) int {
	failed := 0
	for outcome, n := range counts {
		if strings.HasPrefix(outcome, "Failed") {
			failed += n
		}
	}
	return failed
}

// runWorkload creates the workload's pods for schedulerName in namespace,
// waits until each ran, failed admission or was found unschedulable,
// then deletes them and waits until the simulated nodes are empty again.
func runWorkload(t *testing.T, ctx context.Context, c *clients, namespace, schedulerName string, nodes []string) map[string]int {
	t.Helper()
	createNamespace(t, ctx, c, namespace)
	pods := workloadPods(t, namespace, schedulerName)
	for _, pod := range pods {
		if _, err := c.kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	final := podsUntil(t, ctx, c, namespace, "every pod of "+schedulerName+" decided", settled(len(pods)))
	counts := outcomes(final)
	zero := int64(0)
	if err := c.kube.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	podsUntil(t, ctx, c, namespace, "the pods of "+schedulerName+" gone", func(pods map[string]*corev1.Pod) bool { return len(pods) == 0 })
	nrtEmptyAgain(t, ctx, c, nodes)
	return counts
}

// createNamespace is namespace() without the cleanup (runWorkload removes
// its pods itself).
func createNamespace(t *testing.T, ctx context.Context, c *clients, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c.serviceAccountToken(t, ctx, name, "default")
}

// The same workload (Deployments of 2- and 5-CPU Guaranteed pods), on the
// same fragmenting fleet of simulated nodes, through three schedulers in
// turn: the stock kube-scheduler's default profile, the scheduler-plugins
// NodeResourceTopologyMatch profile, and the stock kube-scheduler with
// deploy/'s configuration calling `topoalign extender` (bindVerb, so every
// placement is the extender's record). The simulated kubelets admit
// exactly: with the extender no pod fails admission; the default profile,
// blind to NUMA nodes, loses some.
func TestSchedulersOnSimulatedNodes(t *testing.T) {
	ctx := testContext(t, 6*time.Minute)
	c := admin(t)
	grantSchedulerNRT(t, ctx, c)
	c.applyFile(t, ctx, "topoalign-rbac.yaml")
	nodes := simulatedNodes(t, ctx, c, simFleet, simGroup, simNodes)
	results := map[string]map[string]int{}

	// The stock kube-scheduler, default profile only.
	defaultConfig := filepath.Join(t.TempDir(), "default.yaml")
	text := fmt.Sprintf("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection: {leaderElect: false}\nclientConnection: {kubeconfig: %q}\nprofiles:\n  - schedulerName: e2e-default\n",
		cp.SchedulerKubeconfig("kube-scheduler-default"))
	if err := os.WriteFile(defaultConfig, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	scheduler, err := cp.StartScheduler(ctx, "kube-scheduler-default", bins.Scheduler, defaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	results["default profile"] = runWorkload(t, ctx, c, "e2e-sim-default", "e2e-default", nodes)
	stop(t, scheduler)

	scheduler = startNRTPluginScheduler(t, ctx, "scheduler-plugins-sim")
	results["NodeResourceTopologyMatch"] = runWorkload(t, ctx, c, "e2e-sim-nrt", nrtPluginProfile, nodes)
	stop(t, scheduler)

	url := startExtender(t, ctx, c, simNodes, "--create-bindings", "--choose-in-filter")
	config := adaptSchedulerConfig(t, filepath.Join(repo, "deploy", "kube-scheduler-extender.yaml"), "kube-scheduler-sim", url, true)
	scheduler, err = cp.StartScheduler(ctx, "kube-scheduler-sim", bins.Scheduler, config)
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, scheduler)
	results["topoalign extender"] = runWorkload(t, ctx, c, "e2e-sim-extender", "default-scheduler", nodes)

	pods := len(workloadPods(t, "", ""))
	fmt.Fprintf(os.Stderr, "\nsame workload (%d pods: e2e/testdata/workload.yaml), same fleet (%d simulated single-numa-node nodes: %s):\n", pods, simNodes, simFleet)
	fmt.Fprintf(os.Stderr, "  %-28s %8s %18s %14s\n", "scheduler", "running", "failed admission", "unschedulable")
	for _, name := range []string{"default profile", "NodeResourceTopologyMatch", "topoalign extender"} {
		counts := results[name]
		fmt.Fprintf(os.Stderr, "  %-28s %8d %18d %14d   %v\n", name, counts["Running"], failedAdmission(counts), counts[corev1.PodReasonUnschedulable], counts)
	}
	if failed := failedAdmission(results["topoalign extender"]); failed != 0 {
		t.Errorf("with the extender %d pods failed admission, want 0: %v", failed, results["topoalign extender"])
	}
	if results["topoalign extender"]["Running"] == 0 {
		t.Errorf("with the extender no pod ran: %v", results["topoalign extender"])
	}
	// The workload is built to fragment: a NUMA-blind scheduler must lose
	// pods on it, or this test shows nothing.
	if failedAdmission(results["default profile"]) == 0 {
		t.Errorf("the default profile lost no pod to admission: the workload does not fragment the fleet: %v", results["default profile"])
	}
}

// stop stops p now (a later phase needs its place), showing its log if
// the test failed.
func stop(t *testing.T, p *controlplane.Process) {
	t.Helper()
	if t.Failed() {
		t.Logf("%s log:\n%s", p.Name, controlplane.Tail(p.Log, 40))
	}
	if err := p.Stop(); err != nil {
		t.Error(err)
	}
}

// The extender down (nothing listens at its URL) or slow (it accepts the
// request and never answers within httpTimeout), with deploy/'s
// `ignorable` both ways: false (deploy/'s setting) leaves the pod Pending
// with a SchedulerError naming the extender; true schedules it without the
// extender, on the default plugins' verdict alone.
func TestExtenderDownOrSlow(t *testing.T) {
	ctx := testContext(t, 4*time.Minute)
	c := admin(t)
	nodes := simulatedNodes(t, ctx, c, "e2e/testdata/one-node-fleet.yaml", "e2e-sim-one", 1)

	ports, err := controlplane.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	down := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	hang := make(chan struct{})
	slow := newHangingServer(hang)
	t.Cleanup(func() { close(hang); slow.Close() })

	for _, extender := range []struct{ name, url string }{{"down", down}, {"slow", slow.URL}} {
		for _, ignorable := range []bool{false, true} {
			variant := fmt.Sprintf("%s-ignorable-%t", extender.name, ignorable)
			t.Run(variant, func(t *testing.T) {
				name := "kube-scheduler-" + variant
				config := adaptSchedulerConfigWith(t, filepath.Join(repo, "deploy", "kube-scheduler-extender.yaml"), name, extender.url, false, map[string]string{
					"ignorable:":       "ignorable: " + strconv.FormatBool(ignorable),
					"httpTimeout:":     "httpTimeout: 2s", // the slow case waits this long per attempt
					"- schedulerName:": "- schedulerName: e2e-" + variant,
				})
				scheduler, err := cp.StartScheduler(ctx, name, bins.Scheduler, config)
				if err != nil {
					t.Fatal(err)
				}
				defer stop(t, scheduler)
				ns := "e2e-" + variant
				namespace(t, ctx, c, ns)
				pod := guaranteedPod(ns, "pod", 2, "1Gi")
				pod.Spec.SchedulerName = "e2e-" + variant
				if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				final := podsUntil(t, ctx, c, ns, "the pod bound or refused by the scheduler", func(pods map[string]*corev1.Pod) bool {
					p := pods["pod"]
					return p != nil && (p.Spec.NodeName != "" || podOutcome(p) == corev1.PodReasonSchedulerError)
				})["pod"]
				if ignorable {
					if final.Spec.NodeName != nodes[0] {
						t.Errorf("ignorable extender %s: pod not bound (%s)", extender.name, podOutcomeOrNil(final))
					}
					return
				}
				if final.Spec.NodeName != "" {
					t.Fatalf("extender %s, not ignorable: the pod was bound to %s", extender.name, final.Spec.NodeName)
				}
				message := ""
				for _, condition := range final.Status.Conditions {
					if condition.Type == corev1.PodScheduled {
						message = condition.Message
					}
				}
				if !strings.Contains(message, "extender") && !strings.Contains(message, strings.TrimPrefix(extender.url, "http://")) {
					t.Errorf("extender %s, not ignorable: the SchedulerError does not name the extender: %q", extender.name, message)
				}
				t.Logf("extender %s, not ignorable: %s", extender.name, message)
			})
		}
	}
}

// newHangingServer accepts requests and answers none until hang is closed
// (or the client gives up): an extender slower than any timeout.
func newHangingServer(hang <-chan struct{}) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
}

// nrtEmptyAgain waits until every simulated node's NRT object lists no
// pod (after a run's pods are deleted).
func nrtEmptyAgain(t *testing.T, ctx context.Context, c *clients, nodes []string) {
	t.Helper()
	eventually(t, ctx, "the simulated nodes' NRT objects empty again", func() (bool, string) {
		for _, node := range nodes {
			if pods, err := nrtPods(ctx, c, node); err != nil || len(pods) != 0 {
				return false, fmt.Sprintf("%s: %v %v", node, pods, err)
			}
		}
		return true, ""
	})
}
