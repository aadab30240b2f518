package suite

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"topoalign/e2e/controlplane"
)

// standIn is a running `topoalign kubelet-stand-in`: a kubelet's
// checkpoint files, PodResources socket and pods file, driven by JSON
// lines on its stdin, answering one JSON line per change once its files
// are written.
type standIn struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  *bufio.Scanner
	stderr *os.File
}

func startStandIn(t *testing.T, dir, node string) (*standIn, map[string]any) {
	t.Helper()
	stderr, err := os.Create(filepath.Join(dir, "stand-in.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(topoalign, "kubelet-stand-in",
		"--node", node,
		"--root-dir", filepath.Join(dir, "kubelet"),
		"--pod-resources-socket", filepath.Join(dir, "kubelet/pod-resources/kubelet.sock"),
		"--pods-file", filepath.Join(dir, "pods.json"),
		"--checkpoint-layout", "1.37")
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	lines.Buffer(make([]byte, 1<<20), 64<<20)
	s := &standIn{cmd: cmd, stdin: stdin, lines: lines, stderr: stderr}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
		_ = stderr.Close()
	})
	ready := s.line(t)
	if ready["event"] != "ready" {
		t.Fatalf("the stand-in's first line: %v", ready)
	}
	return s, ready
}

func (s *standIn) line(t *testing.T) map[string]any {
	t.Helper()
	if !s.lines.Scan() {
		t.Fatalf("the stand-in ended (%v); its log:\n%s", s.lines.Err(), controlplane.Tail(s.stderr.Name(), 20))
	}
	var line map[string]any
	if err := json.Unmarshal(s.lines.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	return line
}

func (s *standIn) send(t *testing.T, input map[string]any) map[string]any {
	t.Helper()
	bytes, err := json.Marshal(input)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.stdin.Write(append(bytes, '\n')); err != nil {
		t.Fatal(err)
	}
	return s.line(t)
}

// nrtStateUntil watches the NRT object name until its exact-state
// attribute (topoalign.io/state) equals want, and returns the object.
func nrtStateUntil(t *testing.T, ctx context.Context, c *clients, name, what string, want any) *unstructured.Unstructured {
	t.Helper()
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	lw := &cache.ListWatch{
		ListFunc: func(options metav1.ListOptions) (runtime.Object, error) {
			options.FieldSelector = selector
			return c.dynamic.Resource(nrtGVR).List(ctx, options)
		},
		WatchFunc: func(options metav1.ListOptions) (watch.Interface, error) {
			options.FieldSelector = selector
			return c.dynamic.Resource(nrtGVR).Watch(ctx, options)
		},
	}
	var last string
	var found *unstructured.Unstructured
	holds := func(object *unstructured.Unstructured) bool {
		state, ok := nrtAttribute(object, "topoalign.io/state")
		if !ok {
			reason, _ := nrtAttribute(object, "topoalign.io/state-unknown")
			last = "no exact state; " + reason
			return false
		}
		var got any
		if err := json.Unmarshal([]byte(state), &got); err != nil {
			last = err.Error()
			return false
		}
		if !reflect.DeepEqual(plainValue(got), plainValue(want)) {
			last = "state " + compact(got)
			return false
		}
		found = object
		return true
	}
	synced := func(store cache.Store) (bool, error) {
		for _, object := range store.List() {
			if u, ok := object.(*unstructured.Unstructured); ok && holds(u) {
				return true, nil
			}
		}
		return false, nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &unstructured.Unstructured{}, synced, func(event watch.Event) (bool, error) {
		u, ok := event.Object.(*unstructured.Unstructured)
		return ok && event.Type != watch.Deleted && holds(u), nil
	})
	if err != nil {
		t.Fatalf("%s: not reached (%v); last: %s\nwant %s", what, err, last, compact(want))
	}
	return found
}

// nrtAttribute is the value of the object's top-level attribute name.
func nrtAttribute(object *unstructured.Unstructured, name string) (string, bool) {
	attributes, _, _ := unstructured.NestedSlice(object.Object, "attributes")
	for _, a := range attributes {
		a, _ := a.(map[string]any)
		if a["name"] == name {
			value, ok := a["value"].(string)
			return value, ok
		}
	}
	return "", false
}

// plainValue passes value through encoding/json, so numbers compare as
// numbers whichever decoder read them.
func plainValue(value any) any {
	bytes, _ := json.Marshal(value)
	var plain any
	_ = json.Unmarshal(bytes, &plain)
	return plain
}

// The follower beside a kubelet (the stand-in: checkpoint files in
// v1.37's layout, the PodResources socket), its pods from the real API
// server through a watcher on spec.nodeName, publishing through the
// follower's service account (deploy/topoalign-follower.yaml's RBAC) with
// server-side apply: after every add and delete, the stored object's
// exact state is the stand-in's state, read back equal.
func TestFollower(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c := admin(t)
	c.installCRD(t, ctx)
	c.applyFile(t, ctx, "topoalign-follower.yaml")
	kubeconfig := kubeconfigFor(t, "topoalign-follower", c.serviceAccountToken(t, ctx, "kube-system", "topoalign-follower"))
	const node, ns = "e2e-followed-node", "e2e-follower"
	namespace(t, ctx, c, ns)
	c.deleteNRT(t, ctx, node)
	t.Cleanup(func() { c.deleteNRT(t, context.Background(), node) })

	dir := t.TempDir()
	scenario := filepath.Join(repo, "testdata/kubelet-state/layouts/1.32/scenario.json")
	kubelet, ready := startStandIn(t, dir, scenario)
	follower, err := controlplane.StartProcess("topoalign-follower", topoalign, []string{
		"agent", "--follow-kubelet",
		"--node", scenario,
		"--kubelet-root-dir", filepath.Join(dir, "kubelet"),
		"--pod-resources-socket", filepath.Join(dir, "kubelet/pod-resources/kubelet.sock"),
		"--socket", filepath.Join(dir, "follower.sock"),
		"--state-dir", filepath.Join(dir, "state"),
		"--nrt-publish", "--nrt-node-name", node, "--nrt-interval", "100",
		"--resync-interval", "1",
	}, []string{"KUBECONFIG=" + kubeconfig, "RUST_LOG=info"}, filepath.Join(dir, "follower.log"))
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, follower)
	nrtStateUntil(t, ctx, c, node, "the empty node published", ready["state"])

	pod := func(name string, cpus int64, memory string, extra corev1.ResourceList) *corev1.Pod {
		resources := corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpus, resource.DecimalSI),
			corev1.ResourceMemory: resource.MustParse(memory),
		}
		for k, v := range extra {
			resources[k] = v
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{
				NodeName: node,
				Containers: []corev1.Container{{
					Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: resources, Limits: resources},
				}},
			},
		}
	}
	// add binds the pod through the API server (as the scheduler would),
	// then lets the kubelet admit that very object.
	add := func(p *corev1.Pod) *corev1.Pod {
		created, err := c.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		object, err := runtime.DefaultUnstructuredConverter.ToUnstructured(created)
		if err != nil {
			t.Fatal(err)
		}
		object["apiVersion"], object["kind"] = "v1", "Pod"
		line := kubelet.send(t, map[string]any{"add": object})
		if line["event"] != "admitted" {
			t.Fatalf("%s: %v", p.Name, line)
		}
		nrtStateUntil(t, ctx, c, node, p.Name+" admitted and published", line["state"])
		return created
	}
	remove := func(p *corev1.Pod) {
		zero := int64(0)
		if err := c.kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
		line := kubelet.send(t, map[string]any{"delete": string(p.UID)})
		if line["event"] != "deleted" {
			t.Fatalf("%s: %v", p.Name, line)
		}
		nrtStateUntil(t, ctx, c, node, p.Name+" deleted and published", line["state"])
	}

	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	nic := corev1.ResourceList{"example.com/nic": resource.MustParse("1")}
	huge := corev1.ResourceList{"hugepages-1Gi": resource.MustParse("1Gi")}
	a := add(pod("p1-a", 2, "1Gi", gpu))
	b := add(pod("p2-b", 1, "512Mi", nil))
	add(pod("p3-c", 2, "1Gi", huge))
	remove(a)
	add(pod("p4-d", 1, "256Mi", nic))
	remove(b)
	add(pod("p5-e", 3, "2Gi", gpu))
}
