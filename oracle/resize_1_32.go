//go:build k8s_1_32 || k8s_1_33

package main

// v1.32, v1.33: the kubelet decides a resize in its pod worker's SyncPod,
// which calls (*Kubelet).handlePodResourcesResize (pkg/kubelet/kubelet.go,
// unexported; canResizePod inside) for the pod being synced, with the gate
// on. The harness calls that method itself (a //go:linkname pull of the
// symbol, below) on a kubelet.Kubelet value holding what it reads, set
// into its unexported fields (reflect; release parts in
// resize_kubelet_<v>.go): the node name and a node lister answering the
// Node the admit handlers read (getNodeAnyWay: the API server's Node,
// allocatable and all), the container manager's node config, the pod manager's pods (GetActivePods) and pod workers that know
// of no terminated pod, the real status manager (status.NewManager: the
// resize status or conditions; in 1.32 also the allocation checkpoint),
// in 1.33 the real allocation manager (allocation.NewInMemoryManager),
// the admit handlers in the kubelet's order (canAdmitPod), a container
// runtime without swap, the crash-loop back-off the method resets, and an
// event recorder (1.32's messages are events).
//
// A resize event is HandlePodUpdates (the pod manager takes the desired
// pod) followed by the pod's sync: handlePodResourcesResize at once, for
// every resize event of the pod, whatever changed. A deferred resize is
// decided again at the pod's next sync only — the periodic resync, which a
// scenario without time has not; nothing else retries it (no queue before
// 1.34). With the gate off the sync does not look (1.32: it is alpha and
// off by default): the pod manager holds the desired pod and, no
// allocation recorded, getAllocatedPods hands it as it is to later
// admissions.

import (
	"fmt"
	"reflect"
	"strconv"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	clientset "k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	v1qos "k8s.io/kubernetes/pkg/apis/core/v1/helper/qos"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	kubecontainer "k8s.io/kubernetes/pkg/kubelet/container"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	kubepod "k8s.io/kubernetes/pkg/kubelet/pod"
)

// handlePodResourcesResize is (*Kubelet).handlePodResourcesResize, the
// method SyncPod calls (pulled by name: it is unexported).
//
//go:linkname handlePodResourcesResize k8s.io/kubernetes/pkg/kubelet.(*Kubelet).handlePodResourcesResize
func handlePodResourcesResize(kl *kubelet.Kubelet, pod *v1.Pod, podStatus *kubecontainer.PodStatus) (*v1.Pod, error)

type resizeState struct {
	kl     *kubelet.Kubelet
	events *resizeEvents
	// err is the failure setting up the kubelet value, if any.
	err error
	// refusal is initMemoryGuard's message for the resize being decided:
	// the harness answers nothing for it (resize_init_memory.go).
	refusal       string
	resizeRelease // resize_kubelet_<v>.go
}

func (n *node) setupResize(kc *kubeletconfig.KubeletConfiguration) {
	node, err := admissionNode(n)
	if err != nil {
		n.resize.err = err
		return
	}
	n.resize.events = &resizeEvents{message: map[types.UID]string{}}
	kl := new(kubelet.Kubelet)
	fields := map[string]any{
		"nodeName":         types.NodeName(node.Name),
		"kubeClient":       clientset.Interface(someClient{}),
		"nodeLister":       corelisters.NodeLister(nodeLister{node}),
		"podManager":       kubepod.Manager(podManagerPods{n: n}),
		"podWorkers":       kubelet.PodWorkers(livePodWorkers{}),
		"containerManager": cm.ContainerManager(resizeContainerManager{config: resizeNodeConfig(kc)}),
		"containerRuntime": resizeRuntime,
		// The guard first (resize_init_memory.go): it refuses, before the
		// topology manager allocates anything, the resizes whose answer the
		// container status decides.
		"admitHandlers": lifecycle.PodAdmitHandlers(append([]lifecycle.PodAdmitHandler{initMemoryGuard{n}},
			n.admitHandlers...)),
		"recorder": record.EventRecorder(n.resize.events),
		// The container back-off handlePodResourcesResize resets for a
		// resized container (its periods as NewMainKubelet's; nothing here
		// waits on it).
		backOffField: flowcontrol.NewBackOff(10*time.Second, 300*time.Second),
	}
	for name, value := range n.setupResizeRelease(kc) {
		fields[name] = value
	}
	for name, value := range fields {
		if err := setField(kl, name, value); err != nil {
			n.resize.err = err
			return
		}
	}
	n.resize.kl = kl
}

// setField sets the unexported field name of *target to value.
func setField(target any, name string, value any) error {
	f := reflect.ValueOf(target).Elem().FieldByName(name)
	if !f.IsValid() {
		return fmt.Errorf("resize: kubelet.Kubelet has no field %s", name)
	}
	v := reflect.ValueOf(value)
	if !v.Type().AssignableTo(f.Type()) {
		return fmt.Errorf("resize: kubelet.Kubelet.%s is a %s, not %s", name, f.Type(), v.Type())
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(v)
	return nil
}

// admissionNode is the Node the predicate admit handler reads (the
// kubelet's getNodeAnyWay, built by startNode), got from the handler.
func admissionNode(n *node) (*v1.Node, error) {
	for _, h := range n.admitHandlers {
		f := reflect.ValueOf(h)
		if f.Kind() != reflect.Pointer || f.Elem().Kind() != reflect.Struct {
			continue
		}
		get := f.Elem().FieldByName("getNodeAnyWayFunc")
		if !get.IsValid() {
			continue
		}
		get = reflect.NewAt(get.Type(), unsafe.Pointer(get.UnsafeAddr())).Elem()
		out := get.Call(nil)
		node, _ := out[0].Interface().(*v1.Node)
		if node == nil {
			return nil, fmt.Errorf("resize: the predicate admit handler has no Node")
		}
		return node, nil
	}
	return nil, fmt.Errorf("resize: no predicate admit handler")
}

// someClient is a kube client that is there (getNodeAnyWay asks the node
// lister only then); nothing calls it.
type someClient struct{ clientset.Interface }

// nodeLister lists the one Node.
type nodeLister struct{ node *v1.Node }

func (l nodeLister) List(labels.Selector) ([]*v1.Node, error) { return []*v1.Node{l.node}, nil }

func (l nodeLister) Get(name string) (*v1.Node, error) {
	if name != l.node.Name {
		return nil, fmt.Errorf("node %q not found", name)
	}
	return l.node, nil
}

// podManagerPods is the pod manager as GetActivePods reads it.
type podManagerPods struct {
	kubepod.Manager
	n *node
}

func (p podManagerPods) GetPods() []*v1.Pod { return p.n.podManagerActivePods() }

// livePodWorkers: no pod is terminating or terminated (a deleted pod has
// left the pod manager).
type livePodWorkers struct{ kubelet.PodWorkers }

func (livePodWorkers) IsPodKnownTerminated(types.UID) bool      { return false }
func (livePodWorkers) IsPodTerminationRequested(types.UID) bool { return false }

// resizeEvents is the event recorder: it keeps the message of each pod's
// last event (the message is the format, formatted, as the client's
// recorder makes it).
type resizeEvents struct{ message map[types.UID]string }

func (r *resizeEvents) Event(object runtime.Object, _, _, message string) {
	if pod, ok := object.(*v1.Pod); ok {
		r.message[pod.UID] = message
	}
}

func (r *resizeEvents) Eventf(object runtime.Object, kind, reason, format string, args ...any) {
	r.Event(object, kind, reason, fmt.Sprintf(format, args...))
}

func (r *resizeEvents) AnnotatedEventf(object runtime.Object, _ map[string]string, kind, reason, format string, args ...any) {
	r.Eventf(object, kind, reason, format, args...)
}

// resizeUpdate is HandlePodUpdates and the pod's sync (see the top of the
// file). The answer is the pod's state afterwards: its allocation, or the
// reason and message the kubelet recorded.
func (n *node) resizeUpdate(i int, e *podEntry, old *v1.Pod) (map[string]any, error) {
	if n.resize.err != nil {
		return nil, n.resize.err
	}
	pod := e.desired
	if syncResizes(pod) {
		if err := n.resizeModelled(i, pod); err != nil {
			return nil, err
		}
		// The runtime's status: no container reports resources (a resize
		// the kubelet allocates counts as actuated).
		status := &kubecontainer.PodStatus{ID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
		delete(n.resize.events.message, pod.UID)
		n.resize.refusal = ""
		if _, err := handlePodResourcesResize(n.resize.kl, pod, status); err != nil {
			return nil, fmt.Errorf("events[%d].resize: %v", i, err)
		}
		if n.resize.refusal != "" {
			return nil, fmt.Errorf("events[%d].resize: %s", i, n.resize.refusal)
		}
		if !n.allocationDiffers(pod) {
			n.allocated(e)
		}
	} else {
		n.allocated(e)
	}
	resized := !n.allocationDiffers(pod)
	result := map[string]any{"event": i, "pod": e.key, "resized": resized}
	if !resized {
		if reason, message := n.resizePending(pod); reason != "" {
			result["reason"] = reason
			result["message"] = message
		}
	}
	return result, nil
}

// retryAfterRemoval: before 1.34 a removal retries no resize.
func (n *node) retryAfterRemoval() []string { return nil }

// resizeModelled refuses the resizes whose answer would be the harness's
// rather than the kubelet's. When canResizePod lets a Guaranteed pod's
// resize reach canAdmitPod, the CPU and memory managers size what a
// container holds by its status's allocatedResources (policy_static.go,
// guaranteedCPUs and getRequestedResources) — a status the kubelet writes
// and the harness's pods do not carry, so they size it by the spec. Where
// the size changed, the CPU manager's hints for the CPUs the container
// holds become none that satisfy where the kubelet's regenerate them: under
// the restricted and single-numa-node policies the resize is refused
// instead of admitted. The harness refuses it: a changed CPU request of a
// Guaranteed pod under the static CPU policy with
// InPlacePodVerticalScalingExclusiveCPUs on (off, canResizePod refuses it
// first). A changed memory request under the Static memory policy (1.32
// never refuses it; 1.33 with that gate on) answers as the kubelet does:
// the memory manager's hints for held blocks of another size are no
// preference (regenerateHints), the kubelet's the held blocks' NUMA nodes,
// which the pod's other held resources were aligned with when it was
// admitted; Allocate keeps the held blocks either way. With the
// full-pcpus-only option the static policy's SMT checks run on that size
// too: any resize of such a pod is refused, as topoalign refuses it. (The
// init container's memory allocated again under the pod scope is refused
// where canResizePod lets the resize reach the admit handlers:
// resize_init_memory.go.)
func (n *node) resizeModelled(i int, pod *v1.Pod) error {
	policy := n.config.TopologyManagerPolicy
	if v1qos.GetPodQOS(pod) != v1.PodQOSGuaranteed || n.config.CPUManagerPolicy != "static" ||
		!utilfeature.DefaultFeatureGate.Enabled(features.InPlacePodVerticalScalingExclusiveCPUs) {
		return nil
	}
	if full, err := strconv.ParseBool(n.config.CPUManagerPolicyOptions["full-pcpus-only"]); err == nil && full &&
		n.allocationDiffers(pod) {
		return fmt.Errorf("events[%d].resize: not modelled: the v%s kubelet sizes the CPUs a Guaranteed pod's container holds by its status's allocatedResources, which the harness's pods do not carry (CPU manager policy option full-pcpus-only)",
			i, kubeletMinor)
	}
	if policy != "restricted" && policy != "single-numa-node" {
		return nil
	}
	for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
		held, ok := n.heldResources(pod, c.Name)
		if ok && !c.Resources.Requests[v1.ResourceCPU].Equal(held.Requests[v1.ResourceCPU]) {
			return fmt.Errorf("events[%d].resize: not modelled: the v%s kubelet sizes the CPUs a Guaranteed pod's container holds by its status's allocatedResources, which the harness's pods do not carry (topology manager policy %s)",
				i, kubeletMinor, policy)
		}
	}
	return nil
}
