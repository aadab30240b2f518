package suite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"topoalign/e2e/controlplane"
)

// churnPod is a random pod: Guaranteed (1-4 CPUs, memory, sometimes 1Gi
// huge pages, a GPU or a NIC, sometimes an init container and a sidecar)
// or Burstable.
func churnPod(rng *rand.Rand, ns, name string) *corev1.Pod {
	guaranteed := rng.IntN(100) < 75
	container := func(name string) corev1.Container {
		c := corev1.Container{Name: name, Image: "registry.k8s.io/pause:3.10"}
		if !guaranteed {
			c.Resources.Requests = corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(strconv.Itoa(100*(1+rng.IntN(5))) + "m"),
				corev1.ResourceMemory: resource.MustParse("128Mi"),
			}
			return c
		}
		r := corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(strconv.Itoa(1 + rng.IntN(4))),
			corev1.ResourceMemory: resource.MustParse(strconv.Itoa(256*(1+rng.IntN(8))) + "Mi"),
		}
		if rng.IntN(100) < 20 {
			r["hugepages-1Gi"] = resource.MustParse("1Gi")
		}
		switch n := rng.IntN(100); {
		case n < 15:
			r["nvidia.com/gpu"] = resource.MustParse("1")
		case n < 30:
			r["example.com/nic"] = resource.MustParse("1")
		}
		c.Resources.Requests, c.Resources.Limits = r, r
		return c
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{container("app")}},
	}
	if rng.IntN(100) < 20 {
		p.Spec.InitContainers = append(p.Spec.InitContainers, container("setup"))
	}
	if rng.IntN(100) < 15 {
		sidecar := container("sidecar")
		always := corev1.ContainerRestartPolicyAlways
		sidecar.RestartPolicy = &always
		p.Spec.InitContainers = append(p.Spec.InitContainers, sidecar)
	}
	return p
}

// extenderFilter starts `topoalign extender` on the NRT objects of nodes
// as the API server stores them now (written to a file: loaded before
// it serves, so its first answer is on exactly these objects), asks its
// /filter about pod and stops it. It returns the nodes passed and the
// nodes failed with their reasons.
func extenderFilter(t *testing.T, ctx context.Context, c *clients, fleet []*followed, pod *corev1.Pod) ([]string, map[string]string) {
	t.Helper()
	var nodes []string
	for _, f := range fleet {
		nodes = append(nodes, f.name)
	}
	// One listing in which every node's object carries its kubelet's
	// state now: a follower may say unknown for a moment between two
	// gathers (a source slow to answer on a loaded machine), and the
	// extender would pass that node.
	var list *unstructured.UnstructuredList
	eventually(t, ctx, "one listing with every node's exact state", func() (bool, string) {
		var err error
		list, err = c.dynamic.Resource(nrtGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		list.Items = slices.DeleteFunc(list.Items, func(o unstructured.Unstructured) bool { return !slices.Contains(nodes, o.GetName()) })
		if len(list.Items) != len(nodes) {
			return false, fmt.Sprintf("%d NRT objects of %d nodes", len(list.Items), len(nodes))
		}
		for _, object := range list.Items {
			f := fleet[slices.Index(nodes, object.GetName())]
			state, ok := nrtAttribute(&object, "topoalign.io/state")
			if !ok {
				reason, _ := nrtAttribute(&object, "topoalign.io/state-unknown")
				return false, f.name + ": unknown: " + reason
			}
			var got any
			if err := json.Unmarshal([]byte(state), &got); err != nil || !reflect.DeepEqual(plainValue(got), plainValue(f.state)) {
				return false, f.name + ": not the kubelet's state yet"
			}
		}
		return true, ""
	})
	data, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	objects := filepath.Join(dir, "nrt.json")
	if err := os.WriteFile(objects, data, 0o600); err != nil {
		t.Fatal(err)
	}
	ports, err := controlplane.FreePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	address := "127.0.0.1:" + strconv.Itoa(ports[0])
	p, err := controlplane.StartProcess("topoalign-extender", topoalign,
		[]string{"extender", "--nrt", objects, "--listen", address, "--threads", "1"}, nil, filepath.Join(dir, "extender.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			t.Logf("extender log:\n%s", controlplane.Tail(p.Log, 20))
		}
		if err := p.Stop(); err != nil {
			t.Error(err)
		}
	}()
	url := "http://" + address
	extenderKnows(t, ctx, p, url, "the extender serves the "+strconv.Itoa(len(nodes))+" nodes", func(known int) bool { return known == len(nodes) })
	body, err := json.Marshal(map[string]any{"Pod": pod, "NodeNames": nodes})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url+"/filter", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var result struct {
		NodeNames                  []string
		FailedNodes                map[string]string
		FailedAndUnresolvableNodes map[string]string
		Error                      string
	}
	if err := json.NewDecoder(resp.Body).Decode(&result); err != nil || resp.StatusCode != 200 || result.Error != "" {
		t.Fatalf("/filter: HTTP %d, %v, %+v", resp.StatusCode, err, result)
	}
	failed := map[string]string{}
	for n, why := range result.FailedNodes {
		failed[n] = why
	}
	for n, why := range result.FailedAndUnresolvableNodes {
		failed[n] = why
	}
	for _, n := range nodes {
		if _, f := failed[n]; f == slices.Contains(result.NodeNames, n) {
			t.Fatalf("/filter: node %s neither passed nor failed, or both: %+v", n, result)
		}
	}
	return result.NodeNames, failed
}

// A churned fleet of followed nodes, and the extender fed their published
// NRT objects: for every candidate pod and every node, the extender's
// filter answer is what that node's kubelet (the stand-in) then really
// does with the pod. Each round churns (deletes through the API server and
// the kubelet), asks the extender about a random pod on the objects as
// stored, then offers the pod to every node's kubelet: a failed node must
// reject it; a passed node must admit it — on one passed node it stays,
// bound through the API server as the scheduler would bind it, on the
// others it is removed again and the kubelet's state must come back as it
// was. All nodes are followed and published again before the next round.
func TestExtenderAnswersAChurnedFleetAsItsKubeletsAdmit(t *testing.T) {
	ctx := testContext(t, 10*time.Minute)
	c := admin(t)
	kubeconfig := followerKubeconfig(t, ctx, c)
	const ns = "e2e-churned-fleet"
	namespace(t, ctx, c, ns)
	var fleet []*followed
	var names []string
	for i := range 3 {
		f := followNode(t, ctx, c, kubeconfig, "e2e-churned-"+strconv.Itoa(i), ns)
		fleet = append(fleet, f)
		names = append(names, f.name)
	}
	rng := rand.New(rand.NewPCG(10, 2026))
	running := map[*followed][]*corev1.Pod{}
	const rounds = 40
	var admitted, rejected, placed, deleted int
	for round := range rounds {
		// Churn: a delete in about a third of the rounds.
		if rng.IntN(100) < 35 {
			f := fleet[rng.IntN(len(fleet))]
			if pods := running[f]; len(pods) > 0 {
				i := rng.IntN(len(pods))
				f.remove(pods[i])
				running[f] = slices.Delete(pods, i, i+1)
				deleted++
			}
		}
		candidate := churnPod(rng, ns, fmt.Sprintf("r%03d", round))
		candidate.UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", round))
		passed, failed := extenderFilter(t, ctx, c, fleet, candidate)

		var stay *followed
		if len(passed) > 0 {
			chosen := passed[rng.IntN(len(passed))]
			stay = fleet[slices.Index(names, chosen)]
		}
		for i, f := range fleet {
			if f == stay {
				continue
			}
			judge := candidate.DeepCopy()
			judge.Name = fmt.Sprintf("judge-r%03d-%d", round, i)
			judge.UID = types.UID(fmt.Sprintf("00000000-0000-0000-%04d-%012d", i+1, round))
			judge.CreationTimestamp = metav1.Now()
			judge.Spec.NodeName = f.name
			before := f.state
			line := f.offer(judge)
			if why, fails := failed[f.name]; fails {
				if line["event"] != "rejected" {
					t.Fatalf("round %d: the extender failed %s (%s) but its kubelet admits %s: %v", round, f.name, why, compact(candidate.Spec), line["event"])
				}
				rejected++
				continue
			}
			if line["event"] != "admitted" {
				t.Fatalf("round %d: the extender passed %s but its kubelet rejects %s: %v %v", round, f.name, compact(candidate.Spec), line["reason"], line["message"])
			}
			admitted++
			f.forget(string(judge.UID))
			if !reflect.DeepEqual(plainValue(f.state), plainValue(before)) {
				t.Fatalf("round %d: %s: admitting and removing %s did not give the kubelet's state back:\n%s\nwas\n%s", round, f.name, judge.Name, compact(f.state), compact(before))
			}
		}
		if stay != nil {
			candidate.Spec.NodeName = stay.name
			created := stay.create(candidate)
			if line := stay.offer(created); line["event"] != "admitted" {
				t.Fatalf("round %d: the extender passed %s but its kubelet rejects %s: %v %v", round, stay.name, compact(candidate.Spec), line["reason"], line["message"])
			}
			running[stay] = append(running[stay], created)
			admitted++
			placed++
		}
		for _, f := range fleet {
			f.published(fmt.Sprintf("round %d", round))
			f.alive()
		}
	}
	t.Logf("%d rounds on %d followed nodes: %d pods placed, %d deleted; %d node answers checked against the kubelets: %d admitted, %d rejected, 0 disagreements",
		rounds, len(fleet), placed, deleted, admitted+rejected, admitted, rejected)
	if rejected < rounds/4 || placed < rounds/4 {
		t.Errorf("a churn worth the name needs rejections and placements: %d rejected, %d placed in %d rounds", rejected, placed, rounds)
	}
}
