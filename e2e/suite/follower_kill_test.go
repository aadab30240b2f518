package suite

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// publications are the versions of one NRT object stored from some
// moment on: the exact states and the unknown reasons they carried.
type publications struct {
	mu      sync.Mutex
	known   []any
	unknown []string
	// failure ends the watch early (compaction, etcd gone).
	failure string
	stop    func()
	done    chan struct{}
}

// recordPublications watches what etcd stores for the NRT object name
// from now on. Straight from etcd, not through the API server: etcd stays
// up while the API server is killed, so its watch sees every version
// stored, where a watch through a restarted API server could not resume
// (its watch cache starts afresh and answers "too old resource version").
func recordPublications(t *testing.T, ctx context.Context, name string) *publications {
	t.Helper()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{cp.EtcdURL}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	key := "/registry/topology.node.k8s.io/noderesourcetopologies/" + name
	now, err := client.Get(ctx, key)
	if err != nil {
		t.Fatalf("etcd: %v", err)
	}
	if now.Count != 1 {
		t.Fatalf("etcd: %s: %d values, want 1", key, now.Count)
	}
	ctx, cancel := context.WithCancel(ctx)
	events := client.Watch(ctx, key, clientv3.WithRev(now.Header.Revision+1))
	p := &publications{done: make(chan struct{})}
	p.stop = sync.OnceFunc(func() {
		cancel()
		<-p.done
		client.Close()
	})
	t.Cleanup(p.stop)
	go func() {
		defer close(p.done)
		for response := range events {
			if err := response.Err(); err != nil {
				p.mu.Lock()
				p.failure = err.Error()
				p.mu.Unlock()
				return
			}
			for _, event := range response.Events {
				if event.Type != clientv3.EventTypePut {
					continue
				}
				object := &unstructured.Unstructured{}
				p.mu.Lock()
				if err := object.UnmarshalJSON(event.Kv.Value); err != nil {
					p.known = append(p.known, "undecodable: "+err.Error())
				} else if state, ok := nrtAttribute(object, "topoalign.io/state"); ok {
					var value any
					if err := json.Unmarshal([]byte(state), &value); err != nil {
						p.known = append(p.known, "undecodable: "+err.Error())
					} else {
						p.known = append(p.known, plainValue(value))
					}
				} else {
					reason, _ := nrtAttribute(object, "topoalign.io/state-unknown")
					p.unknown = append(p.unknown, reason)
				}
				p.mu.Unlock()
			}
		}
	}()
	return p
}

// finish stops the recording and returns what was stored.
func (p *publications) finish(t *testing.T) ([]any, []string) {
	t.Helper()
	p.stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failure != "" {
		t.Fatalf("the etcd watch ended early: %s", p.failure)
	}
	return p.known, p.unknown
}

// healthUntil polls the follower's /healthz until holds accepts it.
func (f *followed) healthUntil(what string, holds func(map[string]any) bool) map[string]any {
	f.t.Helper()
	var found map[string]any
	eventually(f.t, f.ctx, f.name+": "+what, func() (bool, string) {
		f.alive()
		code, body, err := f.get("/healthz")
		if err != nil {
			return false, err.Error()
		}
		if code != 200 {
			return false, fmt.Sprintf("HTTP %d %v", code, body)
		}
		found = body
		return holds(body), compact(body)
	})
	return found
}

// statusAfter is the follower's first status newer than generation (its
// /v1/status long-poll answers as soon as one exists).
func (f *followed) statusAfter(generation float64) map[string]any {
	f.t.Helper()
	code, body, err := f.get(fmt.Sprintf("/v1/status?after=%d", int64(generation)))
	if err != nil || code != 200 {
		f.t.Fatalf("%s: /v1/status: HTTP %d %v %v", f.name, code, body, err)
	}
	if got, _ := body["generation"].(float64); got <= generation {
		f.t.Fatalf("%s: no status newer than generation %v within the long-poll: %v", f.name, generation, body)
	}
	return body
}

// The API server killed (SIGKILL; etcd stays) under a running follower:
// the follower says the state is unknown because its pods are no longer
// listed, keeps serving its API and never exits; the kubelet meanwhile
// admits a pod bound before the kill. Once the API server is back, the
// published object converges to exactly the kubelet's state, and
// following goes on. Every version stored from before the kill to the end
// carries either "unknown" or a state the kubelet really had.
func TestFollowerThroughAnAPIServerKill(t *testing.T) {
	ctx := testContext(t, 5*time.Minute)
	c := admin(t)
	kubeconfig := followerKubeconfig(t, ctx, c)
	const ns = "e2e-follower-kill"
	namespace(t, ctx, c, ns)
	f := followNode(t, ctx, c, kubeconfig, "e2e-followed-through-a-kill", ns)

	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	a := f.add(f.pod("k1-a", 2, "1Gi", gpu))
	f.add(f.pod("k2-b", 1, "512Mi", nil))
	f.published("before the kill")
	record := recordPublications(t, ctx, f.name)

	// Bound before the kill; the kubelet admits it while the API server
	// is down.
	pending := f.create(f.pod("k3-c", 2, "1Gi", nil))
	f.healthUntil("k3-c bound and not admitted yet: unknown", func(h map[string]any) bool {
		reason, _ := h["reason"].(string)
		return h["state"] == "unknown" && strings.Contains(reason, ns+"/k3-c")
	})

	cp.KillAPIServer()
	up := false
	t.Cleanup(func() {
		// The other tests share this API server.
		if !up {
			if err := cp.RestartAPIServer(context.Background()); err != nil {
				t.Errorf("restarting the API server: %v", err)
			}
		}
	})
	if line := f.offer(pending); line["event"] != "admitted" {
		t.Fatalf("k3-c: %v", line)
	}
	reachedWhileDown := f.state
	health := f.healthUntil("the API server gone: unknown, its pods not listed", func(h map[string]any) bool {
		reason, _ := h["reason"].(string)
		return h["state"] == "unknown" && h["source"] == "pods" && strings.Contains(reason, "not listed from the API server")
	})
	// It keeps gathering and serving, and never claims a state while the
	// pods cannot be listed.
	generation, _ := health["generation"].(float64)
	for range 3 {
		status := f.statusAfter(generation)
		if status["state"] != "unknown" {
			t.Fatalf("a status while the API server is down: %v", compact(status))
		}
		generation, _ = status["generation"].(float64)
	}
	if code, body, err := f.get("/v1/state"); err != nil || code != 503 {
		t.Fatalf("/v1/state while the API server is down: HTTP %d %v %v, want 503", code, body, err)
	}
	f.alive()

	if err := cp.RestartAPIServer(ctx); err != nil {
		t.Fatalf("restarting the API server: %v", err)
	}
	up = true
	f.published("the state the kubelet reached while the API server was down")
	f.alive()
	f.remove(a)
	f.add(f.pod("k4-d", 1, "256Mi", nil))
	f.alive()

	known, unknown := record.finish(t)
	sawReached := false
	for _, state := range known {
		if reflect.DeepEqual(state, plainValue(reachedWhileDown)) {
			sawReached = true
		}
		if !containsValue(f.states, state) {
			t.Errorf("a published state the kubelet never had: %s", compact(state))
		}
	}
	if !sawReached {
		t.Errorf("the state reached while the API server was down was never published; published: %d states, unknown: %q", len(known), unknown)
	}
	t.Logf("versions stored from before the kill to the end: %d exact states (all the kubelet's), %d unknown: %q", len(known), len(unknown), unknown)
}

func containsValue(values []any, value any) bool {
	for _, v := range values {
		if reflect.DeepEqual(v, value) {
			return true
		}
	}
	return false
}
