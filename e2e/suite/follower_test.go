package suite

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
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
	// Killed with the test binary: an aborted run leaves no stand-in
	// serving a socket in a deleted directory.
	controlplane.DieWithParent(cmd)
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

// followed is one node as the follower tests run it: a stand-in kubelet
// (checkpoint files in v1.37's layout, the PodResources socket) and
// `topoalign agent --follow-kubelet` beside it, its pods from the real API
// server through a watcher on spec.nodeName, publishing the node's NRT
// object through the follower's service account with server-side apply.
type followed struct {
	t        *testing.T
	ctx      context.Context
	c        *clients
	name, ns string
	kubelet  *standIn
	follower *controlplane.Process
	// api is the follower's read-only API (/healthz, /v1/status) on its
	// Unix socket.
	api *http.Client
	// state is the stand-in's state record now; states every state it
	// has had (a published exact state must be one of them).
	state  any
	states []any
}

// followerKubeconfig installs the CRD and the follower's RBAC
// (deploy/topoalign-follower.yaml) and returns a kubeconfig carrying a
// token of the follower's service account.
func followerKubeconfig(t *testing.T, ctx context.Context, c *clients) string {
	t.Helper()
	c.installCRD(t, ctx)
	c.applyFile(t, ctx, "topoalign-follower.yaml")
	return kubeconfigFor(t, "topoalign-follower", c.serviceAccountToken(t, ctx, "kube-system", "topoalign-follower"))
}

// followerScenario is the machine and kubelet the followed nodes'
// stand-in runs.
func followerScenario() string {
	return filepath.Join(repo, "testdata/kubelet-state/layouts/1.32/scenario.json")
}

// followNode starts the stand-in and the follower of node (pods in
// namespace ns) and waits until the empty node is published.
func followNode(t *testing.T, ctx context.Context, c *clients, kubeconfig, node, ns string) *followed {
	t.Helper()
	return followNodeIn(t, ctx, c, kubeconfig, node, ns, t.TempDir())
}

// followNodeIn is followNode with the stand-in's and the follower's files
// in dir, the follower given extra arguments.
func followNodeIn(t *testing.T, ctx context.Context, c *clients, kubeconfig, node, ns, dir string, extra ...string) *followed {
	t.Helper()
	c.deleteNRT(t, ctx, node)
	t.Cleanup(func() { c.deleteNRT(t, context.Background(), node) })
	scenario := followerScenario()
	kubelet, ready := startStandIn(t, dir, scenario)
	socket := filepath.Join(dir, "follower.sock")
	args := append([]string{
		"agent", "--follow-kubelet",
		"--node", scenario,
		"--kubelet-dir", filepath.Join(dir, "kubelet"),
		"--pod-resources", filepath.Join(dir, "kubelet/pod-resources/kubelet.sock"),
		"--socket", socket,
		"--state-dir", filepath.Join(dir, "state"),
		"--nrt-publish", "--nrt-node-name", node, "--nrt-interval", "100",
		"--resync-interval", "1",
	}, extra...)
	follower, err := controlplane.StartProcess("topoalign-follower "+node, topoalign, args,
		[]string{"KUBECONFIG=" + kubeconfig, "RUST_LOG=info"}, filepath.Join(dir, "follower.log"))
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, follower)
	f := &followed{
		t: t, ctx: ctx, c: c, name: node, ns: ns, kubelet: kubelet, follower: follower,
		api: &http.Client{
			Timeout: 40 * time.Second,
			Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", socket)
			}},
		},
	}
	f.record(ready["state"])
	f.published("the empty node published")
	return f
}

func (f *followed) record(state any) {
	f.state = state
	f.states = append(f.states, plainValue(state))
}

// published waits until the node's NRT object carries the stand-in's
// state now.
func (f *followed) published(what string) *unstructured.Unstructured {
	f.t.Helper()
	return nrtStateUntil(f.t, f.ctx, f.c, f.name, f.name+": "+what, f.state)
}

// alive fails the test if the follower has exited.
func (f *followed) alive() {
	f.t.Helper()
	if exited, err := f.follower.Exited(); exited {
		f.t.Fatalf("the follower of %s exited (%v); its log:\n%s", f.name, err, controlplane.Tail(f.follower.Log, 30))
	}
}

// get reads one JSON answer of the follower's read-only API.
func (f *followed) get(path string) (int, map[string]any, error) {
	resp, err := f.api.Get("http://follower" + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return resp.StatusCode, nil, err
	}
	return resp.StatusCode, body, nil
}

// pod is a Guaranteed pod of one container bound to the node (as the
// scheduler binds it).
func (f *followed) pod(name string, cpus int64, memory string, extra corev1.ResourceList) *corev1.Pod {
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(cpus, resource.DecimalSI),
		corev1.ResourceMemory: resource.MustParse(memory),
	}
	for k, v := range extra {
		resources[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName: f.name,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: resources, Limits: resources},
			}},
		},
	}
}

// create stores p, bound to the node, in the API server.
func (f *followed) create(p *corev1.Pod) *corev1.Pod {
	f.t.Helper()
	p.Spec.NodeName = f.name
	created, err := f.c.kube.CoreV1().Pods(f.ns).Create(f.ctx, p, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	return created
}

// offer lets the stand-in kubelet admit p and returns its answer line
// (event "admitted" or "rejected", the state after it).
func (f *followed) offer(p *corev1.Pod) map[string]any {
	f.t.Helper()
	object, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		f.t.Fatal(err)
	}
	object["apiVersion"], object["kind"] = "v1", "Pod"
	line := f.kubelet.send(f.t, map[string]any{"add": object})
	if line["event"] != "admitted" && line["event"] != "rejected" {
		f.t.Fatalf("%s on %s: %v", p.Name, f.name, line)
	}
	f.record(line["state"])
	return line
}

// forget lets the stand-in kubelet remove the pod uid.
func (f *followed) forget(uid string) {
	f.t.Helper()
	line := f.kubelet.send(f.t, map[string]any{"delete": uid})
	if line["event"] != "deleted" {
		f.t.Fatalf("%s on %s: %v", uid, f.name, line)
	}
	f.record(line["state"])
}

// add binds the pod through the API server (as the scheduler would),
// lets the kubelet admit that very object and waits until it is
// published.
func (f *followed) add(p *corev1.Pod) *corev1.Pod {
	f.t.Helper()
	created := f.create(p)
	if line := f.offer(created); line["event"] != "admitted" {
		f.t.Fatalf("%s on %s: %v", p.Name, f.name, line)
	}
	f.published(p.Name + " admitted and published")
	return created
}

// remove deletes the pod from the API server, then from the kubelet, and
// waits until that is published.
func (f *followed) remove(p *corev1.Pod) {
	f.t.Helper()
	zero := int64(0)
	if err := f.c.kube.CoreV1().Pods(f.ns).Delete(f.ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		f.t.Fatal(err)
	}
	f.forget(string(p.UID))
	f.published(p.Name + " deleted and published")
}

// The follower beside a kubelet: after every add and delete, the stored
// object's exact state is the stand-in's state, read back equal.
func TestFollower(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c := admin(t)
	kubeconfig := followerKubeconfig(t, ctx, c)
	const ns = "e2e-follower"
	namespace(t, ctx, c, ns)
	f := followNode(t, ctx, c, kubeconfig, "e2e-followed-node", ns)

	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	nic := corev1.ResourceList{"example.com/nic": resource.MustParse("1")}
	huge := corev1.ResourceList{"hugepages-1Gi": resource.MustParse("1Gi")}
	a := f.add(f.pod("p1-a", 2, "1Gi", gpu))
	b := f.add(f.pod("p2-b", 1, "512Mi", nil))
	f.add(f.pod("p3-c", 2, "1Gi", huge))
	f.remove(a)
	f.add(f.pod("p4-d", 1, "256Mi", nic))
	f.remove(b)
	f.add(f.pod("p5-e", 3, "2Gi", gpu))
}
