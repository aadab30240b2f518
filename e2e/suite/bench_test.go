//go:build bench

package suite

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Benchmark, not a test (build tag bench; bench/scheduler.sh runs it):
// pods per second bound by the stock kube-scheduler on simulated nodes,
// without and with `topoalign extender`, and the share of the run the
// scheduler spent waiting for the extender. Sizes: $TOPOALIGN_BENCH_NODES
// (default 1000) and $TOPOALIGN_BENCH_PODS (default 1000).
func TestBenchSchedulerThroughput(t *testing.T) {
	nodes := envInt(t, "TOPOALIGN_BENCH_NODES", 1000)
	pods := envInt(t, "TOPOALIGN_BENCH_PODS", 1000)
	ctx := testContext(t, 30*time.Minute)
	c := admin(t)
	c.applyFile(t, ctx, "topoalign-rbac.yaml")
	fleet := filepath.Join(t.TempDir(), "fleet.yaml")
	text := fmt.Sprintf("nodes:\n  - name: bench\n    count: %d\n    scenario: %s\n", nodes, filepath.Join(repo, "examples", "nodes", "two-numa.yaml"))
	if err := os.WriteFile(fleet, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	names := simulatedNodes(t, ctx, c, fleet, "bench", nodes, "--quiet")
	fmt.Fprintf(os.Stderr, "bench: %d simulated nodes ready in %.1fs\n", nodes, time.Since(started).Seconds())

	// Without the extender: the stock scheduler, default profile.
	config := filepath.Join(t.TempDir(), "default.yaml")
	text = fmt.Sprintf("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection: {leaderElect: false}\nclientConnection: {kubeconfig: %q}\nprofiles:\n  - schedulerName: bench-default\n",
		cp.SchedulerKubeconfig("bench-default"))
	if err := os.WriteFile(config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	baseline := benchRun(t, ctx, c, "bench-default", "bench-default", bins.Scheduler, config, pods, names)

	// With it: deploy/'s configuration, bindVerb, through a timing proxy.
	timer := &timingProxy{target: startExtender(t, ctx, c, nodes, "--create-bindings", "--choose-in-filter")}
	proxy := httptest.NewServer(timer)
	t.Cleanup(proxy.Close)
	config = adaptSchedulerConfigWith(t, filepath.Join(repo, "deploy", "kube-scheduler-extender.yaml"), "bench-extender", proxy.URL, true,
		map[string]string{"- schedulerName:": "- schedulerName: bench-extender"})
	with := benchRun(t, ctx, c, "bench-extender", "bench-extender", bins.Scheduler, config, pods, names)

	timer.mu.Lock()
	filtered, filters, ownFilter := timer.total["/filter"], timer.calls["/filter"], timer.own["/filter"]
	bound, binds := timer.total["/bind"], timer.calls["/bind"]
	timer.mu.Unlock()
	rate := func(d time.Duration) float64 { return float64(pods) / d.Seconds() }
	fmt.Fprintf(os.Stderr, "\nbench: %d pods on %d simulated nodes (examples/nodes/two-numa.yaml), kube-scheduler %s\n", pods, nodes, "v1.37.2")
	fmt.Fprintf(os.Stderr, "  without the extender: %6.1f pods/s (%.1fs)\n", rate(baseline), baseline.Seconds())
	fmt.Fprintf(os.Stderr, "  with the extender:    %6.1f pods/s (%.1fs)  = %.0f%% of the baseline\n", rate(with), with.Seconds(), 100*baseline.Seconds()/with.Seconds())
	// Filter calls sit in the scheduling cycle (one pod at a time); bind
	// calls run in binding goroutines, overlapping the next pods' cycles.
	fmt.Fprintf(os.Stderr, "  extender filter calls: %d, %.1fs in all = %.0f%% of the run with it (target < 20%%)\n", filters, filtered.Seconds(), 100*filtered.Seconds()/with.Seconds())
	perCall := func(d time.Duration) float64 { return 1000 * d.Seconds() / float64(max(filters, 1)) }
	if ownFilter > 0 {
		fmt.Fprintf(os.Stderr, "  per filter call: %.2f ms through the proxy, of which %.2f ms in the extender (its Server-Timing: request headers read to answer ready)\n", perCall(filtered), perCall(ownFilter))
	} else {
		fmt.Fprintf(os.Stderr, "  per filter call: %.2f ms through the proxy (the extender sent no Server-Timing)\n", perCall(filtered))
	}
	fmt.Fprintf(os.Stderr, "  extender bind calls (the Binding created through the API server, concurrent): %d, %.0f ms each on average\n", binds, 1000*bound.Seconds()/float64(max(binds, 1)))
}

// benchRun creates pods Guaranteed 1-CPU pods for schedulerName (not yet
// running), starts the scheduler, and returns the time from its start to
// the last pod bound; then removes the pods and waits for the nodes to be
// empty again.
func benchRun(t *testing.T, ctx context.Context, c *clients, namespace, schedulerName, binary, config string, pods int, nodes []string) time.Duration {
	t.Helper()
	createNamespace(t, ctx, c, namespace)
	for i := range pods {
		pod := guaranteedPod(namespace, "pod-"+strconv.Itoa(i), 1, "256Mi")
		pod.Spec.SchedulerName = schedulerName
		if _, err := c.kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scheduler, err := cp.StartScheduler(ctx, schedulerName, binary, config)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	podsUntil(t, ctx, c, namespace, "every pod bound", func(all map[string]*corev1.Pod) bool {
		bound := 0
		for _, pod := range all {
			if pod.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == pods
	})
	elapsed := time.Since(start)
	stop(t, scheduler)
	zero := int64(0)
	// Deleting a thousand pods in one request can outlast the API
	// server's request timeout on a loaded machine; what it deleted stays
	// deleted, so the request is made again.
	for attempt := 1; ; attempt++ {
		err := c.kube.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{})
		if err == nil {
			break
		}
		if attempt == 5 {
			t.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "bench: deleting the pods (attempt %d): %v; again\n", attempt, err)
	}
	podsUntil(t, ctx, c, namespace, "the pods gone", func(all map[string]*corev1.Pod) bool { return len(all) == 0 })
	return elapsed
}

// timingProxy forwards the scheduler's extender calls and adds up how
// long each took.
type timingProxy struct {
	target string
	mu     sync.Mutex
	total  map[string]time.Duration // by path
	own    map[string]time.Duration // the extender's own part (its Server-Timing)
	calls  map[string]int
}

// serverTiming reads the extender's `Server-Timing: extender;dur=<ms>`
// header (0 when absent).
func serverTiming(header string) time.Duration {
	_, ms, found := strings.Cut(header, "extender;dur=")
	if !found {
		return 0
	}
	value, err := strconv.ParseFloat(strings.TrimSpace(ms), 64)
	if err != nil {
		return 0
	}
	return time.Duration(value * float64(time.Millisecond))
}

func (p *timingProxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	_, resp, answer, ok := forward(w, req, p.target)
	if !ok {
		return
	}
	p.mu.Lock()
	if p.total == nil {
		p.total, p.own, p.calls = map[string]time.Duration{}, map[string]time.Duration{}, map[string]int{}
	}
	p.total[req.URL.Path] += time.Since(start)
	p.own[req.URL.Path] += serverTiming(resp.Header.Get("Server-Timing"))
	p.calls[req.URL.Path]++
	p.mu.Unlock()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
}

func envInt(t *testing.T, name string, fallback int) int {
	t.Helper()
	text := os.Getenv(name)
	if text == "" {
		return fallback
	}
	n, err := strconv.Atoi(text)
	if err != nil || n <= 0 {
		t.Fatalf("$%s: %q is not a positive number", name, text)
	}
	return n
}
