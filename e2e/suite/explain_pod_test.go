package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
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
