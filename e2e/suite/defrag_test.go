package suite

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// defragPlan is the part of `topoalign defrag -o json` the test reads.
type defragPlan struct {
	Pods []struct {
		Pod      string `json:"pod"`
		Priority int32  `json:"priority"`
		Outcome  string `json:"outcome"`
		Node     string `json:"node"`
	} `json:"pods"`
	Evictions []struct {
		Pod      string `json:"pod"`
		UID      string `json:"uid"`
		Node     string `json:"node"`
		Priority int32  `json:"priority"`
		ForPod   string `json:"forPod"`
	} `json:"evictions"`
	Verification struct {
		Verified bool `json:"verified"`
		Admitted int  `json:"admitted"`
	} `json:"verification"`
	Evicted *struct {
		Evicted []struct {
			Pod    string `json:"pod"`
			OK     bool   `json:"ok"`
			Result string `json:"result"`
		} `json:"evicted"`
		StillThere []string `json:"stillThere"`
	} `json:"evicted"`
}

// The defragmenter on the real control plane. Two simulated nodes
// (e2e/testdata/defrag-fleet.yaml: two NUMA nodes of 7 and 8 allocatable
// CPUs, single-numa-node) are fragmented by a batch workload: on each, a
// 6-CPU pod on each NUMA node (1 + 2 CPUs left). Two 4-CPU training pods
// of higher priority (their class's preemptionPolicy Never: the scheduler
// must not make room itself) stay Pending under kube-scheduler + the topoalign extender,
// which refuses every node. The batch pods' PodDisruptionBudget allows
// one disruption (its status written as the disruption controller would:
// no controller manager runs here).
//
// By construction the fewest evictions is one: a batch pod off a NUMA 1
// frees 8 CPUs there, room for both training pods. `topoalign defrag`
// plans it (verified by replay); `defrag --evict` carries it out through
// the Eviction API; the training pods then run, and exactly the planned
// pods are gone.
func TestDefrag(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c := admin(t)
	c.applyFile(t, ctx, "topoalign-rbac.yaml")
	nodes := simulatedNodes(t, ctx, c, "e2e/testdata/defrag-fleet.yaml", "e2e-defrag", 2)
	ns := "e2e-defrag"
	namespace(t, ctx, c, ns)

	// Priority classes (the Priority admission plugin resolves them).
	classes := map[string]int32{"e2e-defrag-batch": 0, "e2e-defrag-training": 1000}
	for name, value := range classes {
		class := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if value > 0 {
			// The training pods must not make room by preemption themselves.
			never := corev1.PreemptNever
			class.PreemptionPolicy = &never
		}
		if _, err := c.kube.SchedulingV1().PriorityClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = c.kube.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	withPriority := func(pod *corev1.Pod, class string) *corev1.Pod {
		value := classes[class]
		pod.Spec.PriorityClassName = class
		pod.Spec.Priority = &value
		return pod
	}

	// The batch workload, bound by name one pod at a time (the simulated
	// kubelet admits in binding order: NUMA 0, then NUMA 1).
	batch := map[string]string{} // name -> uid
	for i, node := range []string{nodes[0], nodes[0], nodes[1], nodes[1]} {
		pod := withPriority(guaranteedPod(ns, "batch-"+strconv.Itoa(i), 6, "4Gi"), "e2e-defrag-batch")
		pod.Labels = map[string]string{"app": "batch"}
		pod.Spec.NodeName = node
		created, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		batch[created.Name] = string(created.UID)
		podsUntil(t, ctx, c, ns, created.Name+" running", func(pods map[string]*corev1.Pod) bool {
			p, ok := pods[created.Name]
			if ok && podOutcome(p) != "Running" && podOutcome(p) != "Pending" {
				t.Fatalf("%s: %s (%s)", created.Name, podOutcome(p), p.Status.Message)
			}
			return ok && podOutcome(p) == "Running"
		})
	}

	// Its budget: at most one batch pod unavailable.
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "batch"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: &one,
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "batch"}},
		},
	}
	created, err := c.kube.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status = policyv1.PodDisruptionBudgetStatus{
		ObservedGeneration: created.Generation,
		DisruptionsAllowed: 1, CurrentHealthy: 4, DesiredHealthy: 3, ExpectedPods: 4,
	}
	if _, err := c.kube.PolicyV1().PodDisruptionBudgets(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The scheduler with the extender; the training pods stay Pending.
	url := startExtender(t, ctx, c, len(nodes), "--create-bindings", "--choose-in-filter")
	config := adaptSchedulerConfig(t, filepath.Join(repo, "deploy", "kube-scheduler-extender.yaml"), "kube-scheduler-defrag", url, true)
	scheduler, err := cp.StartScheduler(ctx, "kube-scheduler-defrag", bins.Scheduler, config)
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, scheduler)
	training := []string{"train-0", "train-1"}
	for _, name := range training {
		pod := withPriority(guaranteedPod(ns, name, 4, "8Gi"), "e2e-defrag-training")
		if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	podsUntil(t, ctx, c, ns, "the training pods unschedulable", func(pods map[string]*corev1.Pod) bool {
		for _, name := range training {
			if p, ok := pods[name]; !ok || podOutcome(p) != corev1.PodReasonUnschedulable {
				return false
			}
		}
		return true
	})

	kubeconfig := kubeconfigFor(t, "admin", cp.AdminToken)
	defrag := func(extra ...string) (defragPlan, result) {
		args := append([]string{"defrag", "--kubeconfig", kubeconfig, "-n", ns, "-o", "json"}, extra...)
		out := runTopoalign(t, ctx, nil, args...)
		var plan defragPlan
		if err := json.Unmarshal([]byte(out.stdout), &plan); err != nil {
			t.Fatalf("topoalign %v: exit %d, %v\nstdout: %s\nstderr: %s", args, out.code, err, out.stdout, out.stderr)
		}
		return plan, out
	}

	// The plan.
	plan, out := defrag()
	if out.code != 0 {
		t.Fatalf("defrag: exit %d\n%s\n%s", out.code, out.stdout, out.stderr)
	}
	table := runTopoalign(t, ctx, nil, "defrag", "--kubeconfig", kubeconfig, "-n", ns)
	t.Logf("the plan:\n%s", table.stdout)
	if len(plan.Evictions) != 1 {
		t.Fatalf("%d evictions planned, want 1 (one NUMA node freed holds both pods): %+v", len(plan.Evictions), plan.Evictions)
	}
	if !plan.Verification.Verified || plan.Verification.Admitted != len(training) {
		t.Fatalf("plan not verified: %+v", plan.Verification)
	}
	for _, e := range plan.Evictions {
		if batch[e.Pod[len(ns)+1:]] != e.UID || e.Priority != 0 {
			t.Errorf("planned eviction %+v is not one of the batch pods %v", e, batch)
		}
	}
	planned := plan.Evictions[0]

	// Carried out.
	done, out := defrag("--evict")
	if out.code != 0 {
		t.Fatalf("defrag --evict: exit %d\n%s\n%s", out.code, out.stdout, out.stderr)
	}
	if len(done.Evictions) != 1 || done.Evictions[0].UID != planned.UID {
		t.Fatalf("--evict planned %+v, the plan was %+v", done.Evictions, planned)
	}
	if done.Evicted == nil || len(done.Evicted.Evicted) != 1 || !done.Evicted.Evicted[0].OK || len(done.Evicted.StillThere) != 0 {
		t.Fatalf("evictions: %+v", done.Evicted)
	}

	// The training pods run; exactly the planned pod is gone.
	pods := podsUntil(t, ctx, c, ns, "the training pods running", func(pods map[string]*corev1.Pod) bool {
		for _, name := range training {
			p, ok := pods[name]
			if !ok {
				return false
			}
			if outcome := podOutcome(p); outcome != "Running" {
				if outcome != "Pending" && outcome != corev1.PodReasonUnschedulable {
					t.Fatalf("%s: %s (%s)", name, outcome, p.Status.Message)
				}
				return false
			}
		}
		return true
	})
	var gone, left []string
	for name, uid := range batch {
		p, ok := pods[name]
		switch {
		case !ok || string(p.UID) != uid:
			gone = append(gone, ns+"/"+name)
		case podOutcome(p) != "Running":
			t.Errorf("%s: %s", name, podOutcome(p))
		default:
			left = append(left, name)
		}
	}
	sort.Strings(left)
	if !slices.Equal(gone, []string{planned.Pod}) {
		t.Errorf("batch pods gone: %v, planned: %s", gone, planned.Pod)
	}
	placed := map[string]string{}
	for _, name := range training {
		placed[name] = pods[name].Spec.NodeName
	}
	t.Logf("evicted %s on %s; training pods running on %v; batch pods left: %v", planned.Pod, planned.Node, placed, left)
}
