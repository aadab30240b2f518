package main

// The event loop: each add runs the kubelet's admission chain and, when
// admitted, starts the pod's containers the way kuberuntime does (what
// PreCreateContainer applies is recorded, then PreStartContainer registers the
// container with the CPU, memory and topology managers); each delete removes
// the pod's containers from those managers and makes the pod inactive, then
// retries the pending resizes (resize.go).

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/core/install" // core/v1 defaulting functions
	memorystate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
)

// podEntry is a pod added by the scenario.
type podEntry struct {
	pod      *v1.Pod
	key      string // namespace/name
	admitted bool
	desired  *v1.Pod // the API server's pod after resizes (nil before the first)
}

// decodePods reads every add event's pod up front, so that a malformed
// scenario is refused before any kubelet code runs. The k-th pod added gets
// the UID 00000000-0000-0000-0000-<k in 12 digits> unless it sets one.
func decodePods(s *scenario) (map[int]*v1.Pod, error) {
	pods := map[int]*v1.Pod{}
	live := map[string]*v1.Pod{}
	k := 0
	resized := false
	for i, ev := range s.Events {
		hasAdd := len(ev.Add) > 0 && string(ev.Add) != "null"
		parts := 0
		for _, has := range []bool{hasAdd, ev.Delete != nil, ev.Resize != nil, ev.Restart != nil} {
			if has {
				parts++
			}
		}
		switch {
		case parts != 1:
			return nil, invalidf("events[%d]: exactly one of add, delete, resize or restart", i)
		case ev.Restart != nil:
			if resized {
				// The allocation manager's checkpoint (allocated resources,
				// pending resizes) is not modelled across a restart.
				return nil, invalidf("events[%d].restart: a restart after a resize event is not modelled", i)
			}
			if _, ok := ev.Restart.Kubelet["kubeletVersion"]; ok {
				return nil, invalidf("events[%d].restart.kubelet.kubeletVersion: a restart keeps the kubelet's release", i)
			}
			continue
		case ev.Resize != nil:
			resized = true
			key := resizeKey(ev.Resize.Pod)
			if live[key] == nil {
				return nil, invalidf("events[%d].resize.pod: pod %s is not on the node", i, key)
			}
			if err := checkResize(i, ev.Resize, live[key]); err != nil {
				return nil, err
			}
			continue
		case ev.Delete != nil:
			if parts := strings.Split(*ev.Delete, "/"); len(parts) != 2 || parts[0] == "" || parts[1] == "" {
				return nil, invalidf("events[%d].delete: %q is not namespace/name", i, *ev.Delete)
			}
			delete(live, *ev.Delete)
			continue
		}
		pod := &v1.Pod{}
		if err := json.Unmarshal(ev.Add, pod); err != nil {
			return nil, invalidf("events[%d].add: %v", i, err)
		}
		if pod.Name == "" {
			return nil, invalidf("events[%d].add.metadata.name: missing", i)
		}
		if pod.Namespace == "" {
			pod.Namespace = "default"
		}
		if len(pod.Spec.Containers) == 0 {
			return nil, invalidf("events[%d].add.spec.containers: a pod has at least one container", i)
		}
		key := pod.Namespace + "/" + pod.Name
		if live[key] != nil {
			// A delete naming it would be ambiguous.
			return nil, invalidf("events[%d].add: pod %s is already on the node", i, key)
		}
		live[key] = pod
		names := map[string]bool{}
		for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
			if c.Name == "" || names[c.Name] {
				return nil, invalidf("events[%d].add: container name %q missing or used twice", i, c.Name)
			}
			names[c.Name] = true
		}
		k++
		if pod.UID == "" {
			pod.UID = types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", k))
		}
		pods[i] = pod
	}
	return pods, nil
}

// defaultPods runs the API server's defaulting (core/v1: requests default
// to limits, pod-level resources, ...) on every pod, once the scenario's
// feature gates are set: its one gate set stands for the API server's too.
// (The defaulting reads gates such as PodLevelResources and, in 1.37,
// PodLevelResourcesFixDefaulting; an API server without PodLevelResources
// would not even keep spec.resources, so defaulting under the release's
// default gates while the kubelet runs with others describes no cluster.)
func defaultPods(pods map[int]*v1.Pod) {
	for _, pod := range pods {
		legacyscheme.Scheme.Default(pod)
	}
}

// replay plays the events and returns the result document.
func (n *node) replay(s *scenario, pods map[int]*v1.Pod) (map[string]any, error) {
	live := map[string]*podEntry{} // namespace/name -> pod added and not deleted
	n.live = live
	byUID := map[string]string{} // UID -> namespace/name of every pod added
	results := []any{}
	var admitted []*podEntry // in admission order; a restart re-admits them in it
	for i, ev := range s.Events {
		if ev.Restart != nil {
			before := n.final(byUID)
			next, r, err := n.restart(i, s, ev.Restart, admitted)
			if err != nil {
				return nil, err
			}
			results = append(results, r)
			if next == nil {
				// The kubelet does not start: nothing after this runs, and
				// the state is what its files hold.
				return map[string]any{"results": results, "final": before}, nil
			}
			defer next.stop()
			n = next
			n.live = live
			continue
		}
		if ev.Delete != nil {
			results = append(results, n.deletePod(i, *ev.Delete, live))
			continue
		}
		if ev.Resize != nil {
			r, err := n.resizePod(i, ev.Resize, live)
			if err != nil {
				return nil, err
			}
			results = append(results, r)
			continue
		}
		pod := pods[i]
		key := pod.Namespace + "/" + pod.Name
		byUID[string(pod.UID)] = key
		entry := &podEntry{pod: pod, key: key}
		live[key] = entry
		results = append(results, n.addPod(i, entry))
		admitted = append(admitted, entry)
	}
	return map[string]any{"results": results, "final": n.final(byUID)}, nil
}

func (n *node) addPod(i int, e *podEntry) map[string]any {
	pod := e.pod
	n.mu.Lock()
	others := append([]*v1.Pod(nil), n.active...)
	// The kubelet adds the pod to its pod manager before admitting it, so
	// the pod being admitted is active for the managers.
	n.active = append(n.active, pod)
	n.mu.Unlock()

	for _, h := range n.admitHandlers {
		if r := admit(h, pod, others); !r.Admit {
			n.deactivate(pod)
			return map[string]any{"event": i, "pod": e.key, "admitted": false, "reason": r.Reason, "message": r.Message}
		}
	}
	e.admitted = true
	n.recordAllocation(pod)
	return map[string]any{"event": i, "pod": e.key, "admitted": true, "containers": n.placements(pod, true)}
}

// placements reads each container's CPUs, memory NUMA nodes and devices
// after admission, in the pod's order (init containers first), starting
// each (PreStartContainer) when start is set: a container that runs
// already (after a restart) is not started again.
func (n *node) placements(pod *v1.Pod, start bool) []any {
	containers := []any{}
	place := func(c *v1.Container, init bool) {
		uid := string(pod.UID)
		rec := map[string]any{"name": c.Name, "init": init, "cpus": nil, "memoryNuma": nil}
		if cpus := n.cpu.GetExclusiveCPUs(uid, c.Name); !cpus.IsEmpty() {
			rec["cpus"] = cpus.String()
		}
		if numa := memoryNUMANodes(n, pod, c); numa.Len() > 0 {
			ids := numa.UnsortedList()
			sort.Ints(ids)
			rec["memoryNuma"] = ids
		}
		if devs := n.devices.GetDevices(uid, c.Name); len(devs) > 0 {
			out := map[string][]string{}
			for res, instances := range devs {
				for id := range instances {
					out[res] = append(out[res], id)
				}
				sort.Strings(out[res])
			}
			rec["devices"] = out
		}
		containers = append(containers, rec)
		if start {
			startContainer(n, pod, c, containerID(pod, c))
		}
	}
	for j := range pod.Spec.InitContainers {
		place(&pod.Spec.InitContainers[j], true)
	}
	for j := range pod.Spec.Containers {
		place(&pod.Spec.Containers[j], false)
	}
	return containers
}

func (n *node) deletePod(i int, key string, live map[string]*podEntry) map[string]any {
	e, ok := live[key]
	if !ok {
		return map[string]any{"event": i, "pod": key, "deleted": false, "message": "pod not found"}
	}
	delete(live, key)
	if e.admitted {
		for _, c := range append(append([]v1.Container(nil), e.pod.Spec.InitContainers...), e.pod.Spec.Containers...) {
			removeContainer(n, containerID(e.pod, &c))
		}
		n.deactivate(e.pod)
		n.forgetAllocation(e.pod)
	}
	// HandlePodRemoves retries the pending resizes after any removal.
	return withAccepted(map[string]any{"event": i, "pod": key, "deleted": true}, n.retryAfterRemoval())
}

func containerID(pod *v1.Pod, c *v1.Container) string {
	return "oracle://" + string(pod.UID) + "/" + c.Name
}

func (n *node) deactivate(pod *v1.Pod) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for j, p := range n.active {
		if p.UID == pod.UID {
			n.active = append(n.active[:j], n.active[j+1:]...)
			return
		}
	}
}

// final collects the managers' stale state (their own collection, run by a
// hint request for an empty pod and the device manager's refresh) and reads
// the CPU and memory manager state.
func (n *node) final(byUID map[string]string) map[string]any {
	collectStale(n)

	name := func(uid string) string {
		if key, ok := byUID[uid]; ok {
			return key
		}
		return uid
	}
	cpuAssignments := map[string]map[string]string{}
	for uid, containers := range n.cpu.State().GetCPUAssignments() {
		out := map[string]string{}
		for c, set := range containers {
			out[c] = set.String()
		}
		cpuAssignments[name(uid)] = out
	}
	memoryAssignments := map[string]map[string][]int{}
	for uid, containers := range n.memory.State().GetMemoryAssignments() {
		out := map[string][]int{}
		for c, blocks := range containers {
			out[c] = blockNUMANodes(blocks)
		}
		memoryAssignments[name(uid)] = out
	}
	final := map[string]any{
		"defaultCpuSet":     n.cpu.State().GetDefaultCPUSet().String(),
		"cpuAssignments":    cpuAssignments,
		"memoryAssignments": memoryAssignments,
	}
	// Pod-level ("bubble") assignments, v1.36+ only: the keys appear only
	// when some pod has one, so earlier documents keep their shape.
	if pods := podCPUAssignments(n); len(pods) > 0 {
		byName := map[string]string{}
		for uid, set := range pods {
			byName[name(uid)] = set
		}
		final["podCpuAssignments"] = byName
	}
	if pods := podMemoryAssignments(n); len(pods) > 0 {
		byName := map[string][]int{}
		for uid, ids := range pods {
			byName[name(uid)] = ids
		}
		final["podMemoryAssignments"] = byName
	}
	return final
}

// blockNUMANodes is the sorted set of NUMA nodes of memory blocks.
func blockNUMANodes(blocks []memorystate.Block) []int {
	seen := map[int]bool{}
	ids := []int{}
	for _, b := range blocks {
		for _, id := range b.NUMAAffinity {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	sort.Ints(ids)
	return ids
}
