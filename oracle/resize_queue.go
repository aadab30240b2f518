//go:build k8s_1_34 || k8s_1_35 || k8s_1_36 || k8s_1_37

package main

// v1.34+: the kubelet's allocation manager decides and retries resizes. It
// is built as the kubelet builds it (allocation.NewInMemoryManager: the
// same manager without a checkpoint file) with the harness's callbacks —
// the active pods and the pod by UID as the pod manager holds them (the
// API server's desired pods), a pod sync that records which pods it was
// asked to sync, config sources always ready — and a status manager
// stand-in (resizeStatus) holding the PodResizePending/InProgress
// conditions as the real one does. The admit handlers its decision runs
// are registered on it with AddPodAdmitHandlers in the kubelet's order;
// what it decides before them differs by release (resize_1_34.go: 1.34 and
// 1.35 decide in the manager's own canResizePod; resize_1_36.go: from 1.36
// allocation.NewPodResizesAdmitHandler comes first). A resize event is
// HandlePodUpdates's resize part (PushPendingResize, then
// RetryPendingResizes with TriggerReasonPodUpdated); a delete is
// HandlePodRemoves's (the allocation dropped, then RetryPendingResizes with
// TriggerReasonPodsRemoved). The queue, its order (sortPendingResizes) and
// every decision are the allocation manager's.

import (
	"time"

	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	podutil "k8s.io/kubernetes/pkg/api/v1/pod"
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/kubelet/allocation"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm"
	"k8s.io/kubernetes/pkg/kubelet/status"
)

type resizeState struct {
	alloc  allocation.Manager
	status *resizeStatus
	// synced is every pod the allocation manager asked to sync during the
	// current retry, in its order (the queue's).
	synced []types.UID
}

// resizeNodeConfig is the part of the container manager's NodeConfig the
// resize decision reads: the CPU and memory manager policies.
func resizeNodeConfig(kc *kubeletconfig.KubeletConfiguration) cm.NodeConfig {
	return cm.NodeConfig{
		CPUManagerPolicy:    kc.CPUManagerPolicy,
		MemoryManagerPolicy: kc.MemoryManagerPolicy,
		CgroupVersion:       2,
	}
}

// alwaysReady is the kubelet's config sources, all seen.
type alwaysReady struct{}

func (alwaysReady) AddSource(string) {}
func (alwaysReady) AllReady() bool   { return true }

// inPlaceResize is the InPlacePodVerticalScaling gate every resize step of
// the kubelet asks first (beta in 1.34, where a configuration can turn it
// off; GA and locked on from 1.35).
func inPlaceResize() bool {
	return utilfeature.DefaultFeatureGate.Enabled(features.InPlacePodVerticalScaling)
}

// resizeUpdate is the resize part of the kubelet's HandlePodUpdates
// (kubelet.go, a few lines copied: the calls it makes are the allocation
// manager's): a pod whose resizable resources changed and differ from its
// allocation is queued and every pending resize retried; one that changed
// back to its allocation has its pending condition cleared. The event's
// answer is the pod's state afterwards: its allocation, or its
// PodResizePending condition.
//
// With InPlacePodVerticalScaling off (1.34) HandlePodUpdates looks at no
// resize: the pod manager holds the desired pod and, the kubelet having
// recorded no allocation (AddPod records one only with the gate on),
// getAllocatedPods hands it as it is to every later admission — the
// desired sizes are what the kubelet counts.
func (n *node) resizeUpdate(i int, e *podEntry, old *v1.Pod) (map[string]any, error) {
	pod := e.desired
	var accepted []string
	switch {
	case !inPlaceResize():
		n.allocated(e)
	case resizeOperations(old, pod):
		if _, updated := n.resize.alloc.UpdatePodFromAllocation(pod); updated {
			if err := n.resizeModelled(i, pod); err != nil {
				return nil, err
			}
			pushPendingResize(n.resize.alloc, pod.UID)
			accepted = n.retryPendingResizes(allocation.TriggerReasonPodUpdated)
		} else {
			clearPending(n.resize.status, pod.UID)
		}
	}
	result := map[string]any{"event": i, "pod": e.key}
	if _, updated := n.resize.alloc.UpdatePodFromAllocation(pod); !updated {
		result["resized"] = true
	} else {
		result["resized"] = false
		if c := n.resize.status.conditions[pod.UID].pending; c != nil {
			result["reason"] = c.Reason
			result["message"] = c.Message
		}
	}
	others := []string{}
	for _, key := range accepted {
		if key != e.key {
			others = append(others, key)
		}
	}
	return withAccepted(result, others), nil
}

// resizeOperations is the kubelet's recordResizeOperations (kubelet.go,
// unexported; without its metrics): whether a resizable container's cpu or
// memory request or limit changed (recordContainerResizeOperations:
// resizeOperationForResources compares the quantities, an absent one
// being zero) or, from 1.35, the pod-level resources
// (recordPodLevelResourceResizeOperations: Semantic.DeepEqual).
func resizeOperations(old, pod *v1.Pod) bool {
	const both = podutil.InitContainers | podutil.Containers
	for before, kind := range podutil.ContainerIter(&old.Spec, both) {
		if !allocation.IsResizableContainer(before, kind) {
			continue
		}
		var after *v1.Container
		for c, k := range podutil.ContainerIter(&pod.Spec, both) {
			if allocation.IsResizableContainer(c, k) && c.Name == before.Name && k == kind {
				after = c
			}
		}
		was, now := before.Resources, after.Resources
		if now.Requests.Memory().Cmp(*was.Requests.Memory()) != 0 ||
			now.Limits.Memory().Cmp(*was.Limits.Memory()) != 0 ||
			now.Requests.Cpu().Cmp(*was.Requests.Cpu()) != 0 ||
			now.Limits.Cpu().Cmp(*was.Limits.Cpu()) != 0 {
			return true
		}
	}
	return podLevelResizeRecorded && !apiequality.Semantic.DeepEqual(old.Spec.Resources, pod.Spec.Resources)
}

// retryAfterRemoval is the end of HandlePodRemoves: every pending resize
// retried once the pod is gone (deletePod has dropped its allocation and
// taken it off the pod manager).
func (n *node) retryAfterRemoval() []string {
	if !inPlaceResize() {
		return nil
	}
	return n.retryPendingResizes(allocation.TriggerReasonPodsRemoved)
}

// retryPendingResizes runs the allocation manager's RetryPendingResizes and
// returns the pods (namespace/name) whose resize it allocated, in its
// order: those it synced whose allocation differed from their desired pod
// before and equals it now. Each becomes the allocated pod later
// admissions count.
func (n *node) retryPendingResizes(trigger string) []string {
	pending := map[types.UID]bool{}
	for _, e := range n.live {
		if _, updated := n.resize.alloc.UpdatePodFromAllocation(e.current()); updated {
			pending[e.pod.UID] = true
		}
	}
	n.resize.synced = nil
	retryPendingResizes(n.resize.alloc, trigger)
	accepted := []string{}
	for _, uid := range n.resize.synced {
		e := n.entryByUID(uid)
		if e == nil || !pending[uid] {
			continue
		}
		if _, updated := n.resize.alloc.UpdatePodFromAllocation(e.desired); updated {
			continue
		}
		pending[uid] = false
		accepted = append(accepted, e.key)
		n.allocated(e)
	}
	return accepted
}

// recordAllocation is the end of the allocation manager's AddPod: the
// admitted pod's resources become its allocation (with the gate on).
func (n *node) recordAllocation(pod *v1.Pod) {
	if inPlaceResize() {
		_ = setAllocatedResources(n.resize.alloc, pod)
	}
}

func (n *node) forgetAllocation(pod *v1.Pod) { removeAllocation(n.resize.alloc, pod.UID) }

// resizeStatus stands in for the status manager where the allocation
// manager reads and writes resize conditions (GetPodResizeConditions,
// Set/ClearPodResizePendingCondition, Set/ClearPodResizeInProgressCondition,
// IsPodResizeDeferred/Infeasible; every other method is absent; the
// release's signatures in resize_api_1_34.go and resize_status_1_35.go). It
// keeps the conditions as pkg/kubelet/status does (copied, without
// metrics): from 1.36 a pending reason other than Infeasible is recorded as
// Deferred (pendingReasonsNormalized), and a condition's
// LastTransitionTime changes only with its reason. Its clock is logical —
// one tick per condition written — so that "pending longest" in
// sortPendingResizes does not depend on the machine's clock.
type resizeStatus struct {
	status.Manager
	conditions map[types.UID]resizeConditions
	tick       int64
}

type resizeConditions struct{ pending, inProgress *v1.PodCondition }

func newResizeStatus() *resizeStatus {
	return &resizeStatus{conditions: map[types.UID]resizeConditions{}}
}

func (s *resizeStatus) condition(kind v1.PodConditionType, old *v1.PodCondition, reason, message string, generation int64) *v1.PodCondition {
	s.tick++
	now := metav1.NewTime(time.Unix(0, s.tick))
	transition := now
	if old != nil && old.Reason == reason {
		transition = old.LastTransitionTime
	}
	return &v1.PodCondition{Type: kind, Status: v1.ConditionTrue, LastProbeTime: now, LastTransitionTime: transition,
		ObservedGeneration: generation, Reason: reason, Message: message}
}

func (s *resizeStatus) GetPodResizeConditions(uid types.UID) []*v1.PodCondition {
	var out []*v1.PodCondition
	for _, c := range []*v1.PodCondition{s.conditions[uid].pending, s.conditions[uid].inProgress} {
		if c != nil {
			out = append(out, c)
		}
	}
	return out
}

// setPending is SetPodResizePendingCondition; it reports whether the
// reason or generation changed (the 1.35+ return value).
func (s *resizeStatus) setPending(uid types.UID, reason, message string, generation int64) bool {
	c := s.conditions[uid]
	previous := c.pending
	if pendingReasonsNormalized && reason != v1.PodReasonInfeasible {
		reason = v1.PodReasonDeferred
	}
	c.pending = s.condition(v1.PodResizePending, previous, reason, message, generation)
	s.conditions[uid] = c
	return previous == nil || previous.Reason != reason || previous.ObservedGeneration != generation
}

// setInProgress is SetPodResizeInProgressCondition: an existing condition
// keeps its generation, and its reason and message unless new ones are
// given. It returns the generation and whether the condition changed (the
// 1.35+ return values).
func (s *resizeStatus) setInProgress(uid types.UID, reason, message string, generation int64) (int64, bool) {
	c := s.conditions[uid]
	previous := c.inProgress
	if previous != nil {
		if reason == "" && message == "" {
			reason, message = previous.Reason, previous.Message
		}
		generation = previous.ObservedGeneration
	}
	c.inProgress = s.condition(v1.PodResizeInProgress, previous, reason, message, generation)
	s.conditions[uid] = c
	changed := previous == nil || previous.Reason != reason || previous.Message != message
	return generation, changed
}

// clearInProgress is ClearPodResizeInProgressCondition: the cleared
// condition's generation and whether there was one.
func (s *resizeStatus) clearInProgress(uid types.UID) (int64, bool) {
	c := s.conditions[uid]
	if c.inProgress == nil {
		return 0, false
	}
	generation := c.inProgress.ObservedGeneration
	c.inProgress = nil
	s.conditions[uid] = c
	return generation, true
}

func (s *resizeStatus) IsPodResizeDeferred(uid types.UID) bool {
	c := s.conditions[uid].pending
	return c != nil && c.Reason == v1.PodReasonDeferred
}

func (s *resizeStatus) IsPodResizeInfeasible(uid types.UID) bool {
	c := s.conditions[uid].pending
	return c != nil && c.Reason == v1.PodReasonInfeasible
}

// clearPending is ClearPodResizePendingCondition (resize_api_<v>.go gives
// it the release's signature).
func clearPending(s *resizeStatus, uid types.UID) {
	c := s.conditions[uid]
	c.pending = nil
	s.conditions[uid] = c
}
