package main

// In-place resize events (docs/scenario.md, `resize`): the scenario's new
// cpu/memory sizes are written into a new copy of the API server's pod (the
// desired pod), and the release's kubelet code decides: 1.32 and 1.33 the
// Kubelet's own handlePodResourcesResize, as the pod's sync runs it
// (resize_1_32.go); from 1.34 the allocation manager, which queues a resize
// it defers and retries every pending one at each resize and delete
// (resize_queue.go; resize_1_34.go for 1.34/1.35, resize_1_36.go from
// 1.36). What this file supplies is the desired pod, the pod manager's
// view of the pods and the result's shape.

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/kubelet/cm"
)

// resizeEvent is a `resize` event.
type resizeEvent struct {
	Pod        string            `json:"pod"`
	Containers []resizeContainer `json:"containers"`
}

type resizeContainer struct {
	Name      string `json:"name"`
	Resources struct {
		Requests v1.ResourceList `json:"requests"`
		Limits   v1.ResourceList `json:"limits"`
	} `json:"resources"`
}

// resizeKey is the namespace/name a resize names (`name` alone: default).
func resizeKey(pod string) string {
	if strings.Contains(pod, "/") {
		return pod
	}
	return "default/" + pod
}

// checkResize checks a resize event against the pod it names (the API
// server's checks that matter here: existing containers or sidecars, cpu
// and memory only).
func checkResize(i int, r *resizeEvent, pod *v1.Pod) error {
	if len(r.Containers) == 0 {
		return invalidf("events[%d].resize.containers: a resize names at least one container", i)
	}
	for j, c := range r.Containers {
		if resizableContainer(pod, c.Name) == nil {
			return invalidf("events[%d].resize.containers[%d].name: no container or sidecar named %q", i, j, c.Name)
		}
		for _, list := range []v1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for name := range list {
				if name != v1.ResourceCPU && name != v1.ResourceMemory {
					return invalidf("events[%d].resize.containers[%d].resources: only cpu and memory are resized in place, not %s", i, j, name)
				}
			}
		}
	}
	return nil
}

// resizableContainer is the app container or sidecar (restartable init
// container) of pod named name, or nil.
func resizableContainer(pod *v1.Pod, name string) *v1.Container {
	for j := range pod.Spec.Containers {
		if pod.Spec.Containers[j].Name == name {
			return &pod.Spec.Containers[j]
		}
	}
	for j := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[j]
		if c.Name == name && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways {
			return c
		}
	}
	return nil
}

// applyResize writes the event's sizes into the desired pod, and defaults
// it as the API server does. A resize is a PATCH (1.33+: of the pod's
// resize subresource; 1.32: of the pod): the API server's patch handler
// decodes the patched object with defaulting (apiserver's
// handlers/patch.go: applyPatchToObject calls defaulter.Default, the JSON
// and merge patchers decode through the codec, which defaults), so the new
// sizes pass core/v1 SetDefaults_Pod (a limit without a request is also
// the request) and SetDefaults_ResourceList (every amount rounded up to a
// thousandth, RoundUp(-3)) before validation and before the kubelet sees
// them. The rest of the pod was defaulted when it was created: defaulting
// it again changes nothing there.
func applyResize(desired *v1.Pod, r *resizeEvent) {
	defer legacyscheme.Scheme.Default(desired)
	for _, c := range r.Containers {
		target := resizableContainer(desired, c.Name)
		for name, q := range c.Resources.Requests {
			if target.Resources.Requests == nil {
				target.Resources.Requests = v1.ResourceList{}
			}
			target.Resources.Requests[name] = q
		}
		for name, q := range c.Resources.Limits {
			if target.Resources.Limits == nil {
				target.Resources.Limits = v1.ResourceList{}
			}
			target.Resources.Limits[name] = q
		}
	}
}

// resizePod is the API server's side of a resize (the desired pod, a new
// object as the pod manager's UpdatePod receives it) and the kubelet's
// (resize_<v>.go: HandlePodUpdates's resize part and, from 1.36, the
// allocation manager's pending-resize queue).
func (n *node) resizePod(i int, r *resizeEvent, live map[string]*podEntry) (map[string]any, error) {
	key := resizeKey(r.Pod)
	e := live[key]
	old := e.current()
	e.desired = old.DeepCopy()
	applyResize(e.desired, r)
	if !e.admitted {
		return map[string]any{"event": i, "pod": key, "resized": false, "message": "pod not admitted"}, nil
	}
	return n.resizeUpdate(i, e, old)
}

// current is the pod as the pod manager holds it: the API server's latest
// (desired) pod.
func (e *podEntry) current() *v1.Pod {
	if e.desired != nil {
		return e.desired
	}
	return e.pod
}

// withAccepted adds to an event's result the pods whose pending resize the
// retry this event triggered accepted, in the order the kubelet accepted
// them (docs/scenario.md, `acceptedPending`); nothing when none was.
func withAccepted(result map[string]any, keys []string) map[string]any {
	if len(keys) > 0 {
		result["acceptedPending"] = keys
	}
	return result
}

// podManagerActivePods is the kubelet's GetActivePods as the resize code
// sees it: the admitted pods still on the node, in admission order, as the
// pod manager holds them (desired sizes; the kubelet reads their
// allocation itself).
func (n *node) podManagerActivePods() []*v1.Pod {
	pods := []*v1.Pod{}
	for _, p := range n.activePods() {
		if e := n.entryByUID(p.UID); e != nil {
			pods = append(pods, e.current())
		}
	}
	return pods
}

// podManagerPod is the pod manager's GetPodByUID.
func (n *node) podManagerPod(uid types.UID) (*v1.Pod, bool) {
	if e := n.entryByUID(uid); e != nil {
		return e.current(), true
	}
	return nil, false
}

func (n *node) entryByUID(uid types.UID) *podEntry {
	for _, e := range n.live {
		if e.pod.UID == uid {
			return e
		}
	}
	return nil
}

// allocated makes the desired pod the one the harness's later admissions
// count (the kubelet's getAllocatedPods).
func (n *node) allocated(e *podEntry) {
	n.mu.Lock()
	for j, p := range n.active {
		if p.UID == e.pod.UID {
			n.active[j] = e.desired
		}
	}
	n.mu.Unlock()
	e.pod = e.desired
}

// resizeContainerManager is the container manager as the resize decision
// reads it: the node config (and, in 1.34, the absolute allocatable:
// resize_api_1_34.go); every other method is absent.
type resizeContainerManager struct {
	cm.ContainerManager
	config      cm.NodeConfig
	allocatable v1.ResourceList
}

func (c resizeContainerManager) GetNodeConfig() cm.NodeConfig { return c.config }
