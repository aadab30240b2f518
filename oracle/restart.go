package main

// A kubelet restart (the scenario's `restart` event): the process ends and a
// new one starts over the same root directory, as after an upgrade, a crash
// or a configuration change.
//
// What the harness does, in the kubelet's order:
//  1. the old process ends: its device manager and plugins stop; its
//     checkpoint files stay in the root directory;
//  2. a new process: feature gates as at boot, the configuration (the
//     scenario's kubelet block with the event's fields laid over it) loaded
//     and validated, the container manager built and started by startNode —
//     each manager's Start reads its checkpoint and validates it
//     (a refusal there is the crash loop users meet after changing a
//     policy); the container runtime lists the containers of the pods
//     admitted before (cm buildContainerMapAndRunningSetFromRuntime);
//  3. the API server's pods arrive as one batch: HandlePodAdditions adds
//     them to the pod manager one by one, in creation order (the
//     scenario's order), and admits each that is not terminal — a pod the
//     kubelet had rejected is Failed and skipped — through the same admit
//     handlers as any pod, with the pods added so far as the active ones.
//     Containers that run already are not started again. A pod rejected
//     now is Failed: its containers stop and it is no longer active.
// Every decision is the kubelet's managers' own: what they restore, what
// their stale-state collection drops when the first admissions ask for
// hints (the pods not yet added), what they allocate again.

import (
	"encoding/json"
	"os"

	v1 "k8s.io/api/core/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// restart ends this kubelet and starts a new one with the event's
// configuration, then re-admits admitted (those still on the node, in
// admission order). It returns the new node, or nil when the kubelet does
// not start, and the event's result.
func (n *node) restart(i int, s *scenario, ev *restartEvent, admitted []*podEntry) (*node, map[string]any, error) {
	var running []*v1.Pod
	var entries []*podEntry
	for _, e := range admitted {
		if e.admitted && n.live[e.key] == e {
			running = append(running, e.pod)
			entries = append(entries, e)
		}
	}
	n.stop()

	// A new process: the feature gates as the binary has them at boot.
	gates := n.bootGates.DeepCopy()
	utilfeature.DefaultMutableFeatureGate = gates
	utilfeature.DefaultFeatureGate = gates

	section := map[string]json.RawMessage{}
	for k, v := range s.Kubelet {
		section[k] = v
	}
	for k, v := range ev.Kubelet {
		if string(v) == "null" {
			delete(section, k)
			continue
		}
		section[k] = v
	}
	dir, err := os.MkdirTemp("", "oracle-restart-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	refused := func(err error) (*node, map[string]any, error) {
		if exitStatus(err) != 0 {
			return nil, nil, err
		}
		return nil, map[string]any{"event": i, "restarted": false, "message": err.Error()}, nil
	}
	kc, err := loadConfig(section, dir)
	if err != nil {
		return refused(err)
	}
	next, err := startNode(kc, n.machine, s.Topology.Devices, running)
	if err != nil {
		if next != nil {
			next.stop()
		}
		return refused(err)
	}
	next.bootGates = n.bootGates

	pods := []any{}
	for _, e := range entries {
		pods = append(pods, next.readmit(e))
	}
	return next, map[string]any{"event": i, "restarted": true, "pods": pods}, nil
}

// readmit is HandlePodAdditions for a pod the kubelet had admitted before
// it restarted.
func (n *node) readmit(e *podEntry) map[string]any {
	pod := e.pod
	n.mu.Lock()
	others := append([]*v1.Pod(nil), n.active...)
	n.active = append(n.active, pod)
	n.mu.Unlock()
	for _, h := range n.admitHandlers {
		if r := admit(h, pod, others); !r.Admit {
			// Failed: the pod worker stops its containers.
			n.deactivate(pod)
			for _, c := range append(append([]v1.Container(nil), pod.Spec.InitContainers...), pod.Spec.Containers...) {
				removeContainer(n, containerID(pod, &c))
			}
			e.admitted = false
			return map[string]any{"pod": e.key, "admitted": false, "reason": r.Reason, "message": r.Message}
		}
	}
	n.recordAllocation(pod)
	return map[string]any{"pod": e.key, "admitted": true, "containers": n.placements(pod, false)}
}
