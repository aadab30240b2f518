package suite

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"topoalign/e2e/controlplane"
)

// hostTree is a captured host as `topoalign verify --root` and the
// follower's --verify-root read it: DIR/proc (status, comm, cgroup,
// numa_maps, environ per process), DIR/proc/self/mountinfo naming a
// cgroup v2 mount at /sys/fs/cgroup, and the cgroup directories under
// DIR/sys/fs/cgroup — the layout of testdata/verify/make-trees.py's
// kubelet node (systemd cgroup driver).
type hostTree struct {
	t    *testing.T
	root string
	pid  int
}

func newHostTree(t *testing.T, root string) *hostTree {
	t.Helper()
	h := &hostTree{t: t, root: root, pid: 1000}
	h.write("proc/self/mountinfo",
		"25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"+
			"31 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n")
	h.write("sys/fs/cgroup/cpuset.cpus.effective", "0-15\n")
	h.write("sys/fs/cgroup/cpuset.mems.effective", "0-1\n")
	h.write("sys/fs/cgroup/cgroup.procs", "")
	return h
}

func (h *hostTree) write(path, text string) {
	h.t.Helper()
	full := filepath.Join(h.root, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(text), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

// container writes one process of container id of the Guaranteed pod
// uid, in its cgroup (kubepods.slice/kubepods-pod<uid>.slice/
// cri-containerd-<id>.scope) whose cpuset is cpus and mems, its memory
// on mems, its environment env (NAME=VALUE).
func (h *hostTree) container(uid, id, comm, cpus, mems string, env []string) {
	h.t.Helper()
	h.pid++
	pid := h.pid
	cgroup := fmt.Sprintf("/kubepods.slice/kubepods-pod%s.slice/cri-containerd-%s.scope", strings.ReplaceAll(uid, "-", "_"), id)
	h.write("sys/fs/cgroup"+cgroup+"/cpuset.cpus.effective", cpus+"\n")
	h.write("sys/fs/cgroup"+cgroup+"/cpuset.mems.effective", mems+"\n")
	h.write("sys/fs/cgroup"+cgroup+"/cgroup.procs", fmt.Sprintf("%d\n", pid))
	proc := fmt.Sprintf("proc/%d/", pid)
	h.write(proc+"status", fmt.Sprintf("Name:\t%s\nState:\tS (sleeping)\nTgid:\t%d\nPid:\t%d\nCpus_allowed_list:\t%s\nMems_allowed_list:\t%s\n",
		comm, pid, pid, cpus, mems))
	h.write(proc+"comm", comm+"\n")
	h.write(proc+"cgroup", "0::"+cgroup+"\n")
	node := strings.Split(strings.Split(mems, ",")[0], "-")[0]
	h.write(proc+"numa_maps", fmt.Sprintf("55d0a1000000 default heap anon=256 dirty=256 N%s=256 kernelpagesize_kB=4\n", node))
	h.write(proc+"environ", strings.Join(append([]string{"PATH=/usr/bin:/bin"}, env...), "\x00")+"\x00")
}

// stateEntry is what the stand-in kubelet's state says was decided for a
// pod's container: its CPUs (cpu_manager_state), its memory's NUMA nodes
// (memory_manager_state), its devices of resource (the device manager's
// checkpoint).
func stateEntry(t *testing.T, state any, uid, container, devices string) (cpus, mems string, ids []string) {
	t.Helper()
	var s struct {
		CPU struct {
			Entries map[string]map[string]string `json:"entries"`
		} `json:"cpu"`
		Memory struct {
			Entries map[string]map[string][]struct {
				NUMAAffinity []int `json:"numaAffinity"`
				Type         string
			} `json:"entries"`
		} `json:"memory"`
		Devices map[string]map[string]map[string][]string `json:"devices"`
	}
	bytes, err := json.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(bytes, &s); err != nil {
		t.Fatal(err)
	}
	cpus = s.CPU.Entries[uid][container]
	var nodes []string
	for _, block := range s.Memory.Entries[uid][container] {
		if block.Type == "memory" {
			for _, n := range block.NUMAAffinity {
				nodes = append(nodes, fmt.Sprint(n))
			}
		}
	}
	if cpus == "" || len(nodes) == 0 {
		t.Fatalf("the stand-in decided no exclusive CPUs or pinned memory for %s %s: %s", uid, container, compact(state))
	}
	return cpus, strings.Join(nodes, ","), s.Devices[uid][container][devices]
}

// scenarioDeviceNUMA is the NUMA node of each device of resource in the
// scenario's machine (its `topology.devices`).
func scenarioDeviceNUMA(t *testing.T, scenario, resource string) map[string]int {
	t.Helper()
	bytes, err := os.ReadFile(scenario)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Topology struct {
			Devices map[string][]struct {
				ID   string `json:"id"`
				NUMA []int  `json:"numa"`
			} `json:"devices"`
		} `json:"topology"`
	}
	if err := json.Unmarshal(bytes, &s); err != nil {
		t.Fatal(err)
	}
	numa := map[string]int{}
	for _, d := range s.Topology.Devices[resource] {
		if len(d.NUMA) == 1 {
			numa[d.ID] = d.NUMA[0]
		}
	}
	return numa
}

// running stores the pod's status as its kubelet would once its one
// container runs as id (containerd).
func (f *followed) running(p *corev1.Pod, id string) {
	f.t.Helper()
	current, err := f.c.kube.CoreV1().Pods(f.ns).Get(f.ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	now := metav1.NewTime(time.Now())
	started := true
	current.Status.Phase = corev1.PodRunning
	current.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name:        p.Spec.Containers[0].Name,
		Image:       p.Spec.Containers[0].Image,
		ContainerID: "containerd://" + id,
		Ready:       true,
		Started:     &started,
		State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
	}}
	if _, err := f.c.kube.CoreV1().Pods(f.ns).UpdateStatus(f.ctx, current, metav1.UpdateOptions{}); err != nil {
		f.t.Fatal(err)
	}
}

// The follower's Events against the real API server: `agent
// --follow-kubelet --events`, with the follower's service account of
// deploy/topoalign-follower.yaml, beside a stand-in kubelet, verifying a
// captured host (--verify-root) where one container sees a GPU that is
// not its own, on the other NUMA node. A Warning Event
// PlacementMisaligned appears on that pod, naming the NUMA nodes; none on
// the pod whose container runs as decided.
func TestFollowerEvents(t *testing.T) {
	ctx := testContext(t, 3*time.Minute)
	c := admin(t)
	kubeconfig := followerKubeconfig(t, ctx, c)
	const ns = "e2e-follower-events"
	const node = "e2e-events-node"
	namespace(t, ctx, c, ns)

	dir := t.TempDir()
	gpuNUMA := scenarioDeviceNUMA(t, followerScenario(), "nvidia.com/gpu")
	if len(gpuNUMA) != 2 || gpuNUMA["gpu0"] == gpuNUMA["gpu1"] {
		t.Fatalf("the scenario's machine should have gpu0 and gpu1 on two NUMA nodes: %v", gpuNUMA)
	}
	host := newHostTree(t, filepath.Join(dir, "host"))
	f := followNodeIn(t, ctx, c, kubeconfig, node, ns, dir,
		"--verify-interval", "1",
		"--verify-root", host.root,
		"--events",
	)

	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	aligned := f.add(f.pod("aligned", 2, "1Gi", nil))
	misaligned := f.add(f.pod("misaligned", 2, "1Gi", gpu))

	// The aligned container runs exactly as decided.
	cpus, mems, _ := stateEntry(t, f.state, string(aligned.UID), "app", "nvidia.com/gpu")
	alignedID := strings.Repeat("a1", 32)
	host.container(string(aligned.UID), alignedID, "app", cpus, mems, nil)
	// The misaligned one: its CPUs and memory as decided, but it sees the
	// other GPU (the sidecar case of kubernetes#123530).
	cpus, mems, gpus := stateEntry(t, f.state, string(misaligned.UID), "app", "nvidia.com/gpu")
	if len(gpus) != 1 {
		t.Fatalf("the stand-in gave the GPU pod %v", gpus)
	}
	decided := gpus[0]
	seen := "gpu0"
	if decided == "gpu0" {
		seen = "gpu1"
	}
	misalignedID := strings.Repeat("b2", 32)
	host.container(string(misaligned.UID), misalignedID, "app", cpus, mems, []string{"NVIDIA_VISIBLE_DEVICES=" + seen})
	// Only now do the containers have ids (their statuses), so every
	// verification that finds them reads complete files.
	f.running(aligned, alignedID)
	f.running(misaligned, misalignedID)

	// Both containers judged. Events are posted before the verification's
	// verdicts are published, so every Event of it is in the API server
	// by then.
	verdicts := map[string]string{}
	eventually(t, ctx, "both containers verified (GET /v1/verdicts)", func() (bool, string) {
		f.alive()
		code, body, err := f.get("/v1/verdicts")
		if err != nil {
			return false, err.Error()
		}
		if code != 200 {
			return false, fmt.Sprintf("HTTP %d %v", code, body)
		}
		reports, _ := body["reports"].([]any)
		for _, r := range reports {
			r, _ := r.(map[string]any)
			subject, _ := r["subject"].(map[string]any)
			if subject["namespace"] == ns {
				pod, _ := subject["pod"].(string)
				verdicts[pod], _ = r["verdict"].(string)
			}
		}
		return verdicts["aligned"] != "" && verdicts["misaligned"] != "", compact(body)
	})
	if verdicts["aligned"] != "aligned" || verdicts["misaligned"] != "misaligned" {
		t.Fatalf("verdicts %v, want aligned and misaligned", verdicts)
	}

	events, err := c.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var onMisaligned []corev1.Event
	for _, e := range events.Items {
		switch e.InvolvedObject.Name {
		case "aligned":
			t.Errorf("an Event on the aligned pod: %s %s: %s", e.Type, e.Reason, e.Message)
		case "misaligned":
			onMisaligned = append(onMisaligned, e)
		default:
			t.Errorf("an Event on %s/%s: %s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Type, e.Reason, e.Message)
		}
	}
	if len(onMisaligned) != 1 {
		t.Fatalf("want one Event on the misaligned pod, got %d: %+v", len(onMisaligned), onMisaligned)
	}
	e := onMisaligned[0]
	t.Logf("the Event on %s/misaligned: %s %s: %s", ns, e.Type, e.Reason, e.Message)
	object := e.InvolvedObject
	if object.Kind != "Pod" || object.APIVersion != "v1" || object.Namespace != ns || object.UID != misaligned.UID {
		t.Errorf("involvedObject %+v, want the pod %s/misaligned (uid %s)", object, ns, misaligned.UID)
	}
	if e.Type != corev1.EventTypeWarning || e.Reason != "PlacementMisaligned" {
		t.Errorf("type %q reason %q, want Warning PlacementMisaligned", e.Type, e.Reason)
	}
	if e.ReportingController != "topoalign-follower" || e.ReportingInstance != node {
		t.Errorf("reported by %q on %q, want topoalign-follower on %s", e.ReportingController, e.ReportingInstance, node)
	}
	// The NUMA nodes come from the scenario's machine: the GPU it sees is
	// on one, the policy promised the other (its decided GPU's).
	if !strings.HasPrefix(e.Message, "container app: misaligned: ") || strings.Contains(e.Message, "misaligned: misaligned") {
		t.Errorf("the Event's message %q should start with the container and what was found, once", e.Message)
	}
	for _, want := range []string{
		"not its own visible: " + seen,
		fmt.Sprintf("devices on NUMA %d", gpuNUMA[seen]),
		fmt.Sprintf("single-numa-node promised NUMA %d", gpuNUMA[decided]),
	} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("the Event's message %q does not say %q", e.Message, want)
		}
	}
	if log, err := os.ReadFile(f.follower.Log); err == nil && strings.Contains(string(log), "cannot post the event") {
		t.Errorf("the follower could not post an event:\n%s", controlplane.Tail(f.follower.Log, 20))
	}
}
