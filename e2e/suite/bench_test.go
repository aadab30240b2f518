//go:build bench

package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	schedulerapi "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	"topoalign/e2e/controlplane"
)

// Benchmark, not a test (build tag bench; bench/scheduler.sh runs it):
// pods per second bound by the stock kube-scheduler on simulated nodes,
// without and with `topoalign extender` (called directly, no proxy in
// between; with bindVerb, then without it: kube-scheduler binding as in
// the baseline, so that run's pods per second are the filter's cost
// alone), and the time the scheduler spent in the extender's filter
// calls. Both sides say it with their own clocks: kube-scheduler's
// scheduling_algorithm_duration_seconds less its framework's
// extension points (what remains is the extender's call, with the JSON
// both ways, plus what the baseline has there too), and the extender's
// own time per call from its /metrics (request headers read to answer
// ready). Sizes: $TOPOALIGN_BENCH_NODES (default 1000) and
// $TOPOALIGN_BENCH_PODS (default 1000).
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
	baseline, baseMetrics := benchRun(t, ctx, c, "bench-default", "bench-default", bins.Scheduler, config, pods, names)

	// With it: deploy/'s configuration, bindVerb, the scheduler calling
	// the extender itself. $TOPOALIGN_BENCH_BEFORE names another topoalign
	// binary (an earlier build) to measure first, in the same run.
	fmt.Fprintf(os.Stderr, "\nbench: %d pods on %d simulated nodes (examples/nodes/two-numa.yaml), kube-scheduler %s\n", pods, nodes, "v1.37.2")
	fmt.Fprintf(os.Stderr, "  without the extender: %6.1f pods/s (%.1fs)\n", float64(pods)/baseline.Seconds(), baseline.Seconds())
	base := algorithmParts(baseMetrics)
	base.print("without", pods)
	if before := os.Getenv("TOPOALIGN_BENCH_BEFORE"); before != "" {
		benchExtender(t, ctx, c, "before ("+before+")", before, true, pods, names, baseline, base)
	}
	benchExtender(t, ctx, c, "this build", topoalign, true, pods, names, baseline, base)
	// The extender's bind creates Bindings concurrently, which alone can
	// make the run faster than the baseline; without bindVerb kube-scheduler
	// binds as in the baseline, so the difference is the filter calls'.
	benchExtender(t, ctx, c, "this build, filter only (kube-scheduler binds)", topoalign, false, pods, names, baseline, base)
	benchFilterClient(t, ctx, c, pods, names)
}

// benchFilterClient calls the extender's filter the way kube-scheduler
// does — with kube-scheduler's own extender client (HTTPExtender of
// k8s.io/kubernetes, the configured verbs, node names only), one call
// after another — but with nothing else running: no scheduler, no
// Bindings for the API server and etcd to process. Its time per call,
// beside the extender's own, is what the HTTP exchange and Go's JSON both
// ways cost; what kube-scheduler's clock says beyond that in the runs
// above is waiting (for a core, on this machine).
func benchFilterClient(t *testing.T, ctx context.Context, c *clients, pods int, names []string) {
	t.Helper()
	url, extender := startExtenderBinary(t, ctx, c, topoalign, len(names), "--choose-in-filter")
	client, err := scheduler.NewHTTPExtender(&schedulerapi.Extender{
		URLPrefix:        url,
		FilterVerb:       "filter",
		PrioritizeVerb:   "prioritize",
		Weight:           5,
		NodeCacheCapable: true,
		HTTPTimeout:      metav1.Duration{Duration: 5 * time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	nodes := make([]fwk.NodeInfo, 0, len(names))
	for _, name := range names {
		info := framework.NewNodeInfo()
		info.SetNode(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		nodes = append(nodes, info)
	}
	before, own := extenderMetrics(ctx, url)
	started := time.Now()
	for i := range pods {
		pod := guaranteedPod("bench-client", "pod-"+strconv.Itoa(i), 1, "256Mi")
		pod.UID = types.UID(fmt.Sprintf("bench-client-%d", i))
		passed, _, _, err := client.Filter(pod, nodes)
		if err != nil {
			t.Fatalf("filter call %d: %v", i, err)
		}
		if len(passed) != 1 {
			t.Fatalf("filter call %d: %d nodes passed, want the 1 the extender chose", i, len(passed))
		}
	}
	elapsed := time.Since(started)
	after, _ := extenderMetrics(ctx, url)
	stop(t, extender)
	fmt.Fprintf(os.Stderr, "  kube-scheduler's extender client alone (HTTPExtender v1.37.2, nothing else running): %d filter calls over %d nodes, %.2f ms each\n",
		pods, len(names), 1000*elapsed.Seconds()/float64(pods))
	if own {
		filters, filtered := after.calls["filter"]-before.calls["filter"], after.seconds["filter"]-before.seconds["filter"]
		fmt.Fprintf(os.Stderr, "    of which the extender's own time: %.2f ms; the HTTP exchange and the JSON both ways: %.2f ms\n",
			1000*filtered/float64(max(filters, 1)), 1000*(elapsed.Seconds()-filtered)/float64(pods))
	}
}

// benchExtender runs the pods through kube-scheduler with the extender of
// binary (its bindVerb configured when bind) and prints its figures
// beside the baseline's.
func benchExtender(t *testing.T, ctx context.Context, c *clients, label, binary string, bind bool, pods int, names []string, baseline time.Duration, base schedulerParts) {
	t.Helper()
	args, name := []string{"--choose-in-filter"}, "bench-filter"
	if bind {
		args, name = append(args, "--create-bindings"), "bench-extender"
	}
	url, extender := startExtenderBinary(t, ctx, c, binary, len(names), args...)
	config := adaptSchedulerConfigWith(t, filepath.Join(repo, "deploy", "kube-scheduler-extender.yaml"), name, url, bind,
		map[string]string{"- schedulerName:": "- schedulerName: " + name})
	before, own := extenderMetrics(ctx, url)
	with, withMetrics := benchRun(t, ctx, c, name, name, bins.Scheduler, config, pods, names)
	after, _ := extenderMetrics(ctx, url)
	stop(t, extender)

	ms := func(seconds float64, n int) float64 { return 1000 * seconds / float64(max(n, 1)) }
	fmt.Fprintf(os.Stderr, "  with the extender, %s: %6.1f pods/s (%.1fs) = %.0f%% of the baseline\n", label, float64(pods)/with.Seconds(), with.Seconds(), 100*baseline.Seconds()/with.Seconds())
	ext := algorithmParts(withMetrics)
	ext.print("with", pods)
	// The rest with the extender, less the rest without it: the filter
	// call as the scheduler waits for it (its JSON both ways included).
	extenderSeconds := max(ext.rest()-float64(ext.attempts)*base.rest()/float64(max(base.attempts, 1)), 0)
	fmt.Fprintf(os.Stderr, "    the extender's filter call by kube-scheduler's clock: %.2f ms per attempt, %.1fs in all = %.0f%% of the run with it, %.0f%% of its scheduling algorithm (target < 20%%)\n",
		ms(extenderSeconds, ext.attempts), extenderSeconds, 100*extenderSeconds/with.Seconds(), 100*extenderSeconds/max(ext.algorithm, 1e-9))
	if !own {
		fmt.Fprintf(os.Stderr, "    (this extender has no /metrics: its own time is not known)\n")
		return
	}
	filters, filtered := after.calls["filter"]-before.calls["filter"], after.seconds["filter"]-before.seconds["filter"]
	fmt.Fprintf(os.Stderr, "    by the extender's clock (its /metrics): %d filter calls, %.2f ms each, %.1fs in all = %.0f%% of the run with it\n",
		filters, ms(filtered, filters), filtered, 100*filtered/with.Seconds())
	binds, bound := after.calls["bind"]-before.calls["bind"], after.seconds["bind"]-before.seconds["bind"]
	if binds == 0 {
		return
	}
	fmt.Fprintf(os.Stderr, "    extender bind calls (the Binding created through the API server, concurrent): %d, %.1f ms each on average\n", binds, ms(bound, binds))
}

// schedulerParts: sums over one kube-scheduler's run, in seconds, from
// its metrics.
type schedulerParts struct {
	attempts  int
	algorithm float64 // scheduling_algorithm_duration_seconds
	framework float64 // the extension points within it
	filter    float64 // Filter
	score     float64 // PreScore + Score
}

// rest is the algorithm's time outside the framework: extenders, the
// snapshot and the choice among scored nodes.
func (p schedulerParts) rest() float64 { return p.algorithm - p.framework }

func (p schedulerParts) print(run string, pods int) {
	ms := func(seconds float64) float64 { return 1000 * seconds / float64(max(p.attempts, 1)) }
	fmt.Fprintf(os.Stderr, "    kube-scheduler %s it: %d attempts for %d pods, algorithm %.2f ms each = framework %.2f ms (filter %.2f, score %.2f) + the rest %.2f ms\n",
		run, p.attempts, pods, ms(p.algorithm), ms(p.framework), ms(p.filter), ms(p.score), ms(p.rest()))
}

func algorithmParts(metrics string) schedulerParts {
	point := func(name string) float64 {
		return metricSum(metrics, "scheduler_framework_extension_point_duration_seconds_sum", `extension_point="`+name+`"`)
	}
	p := schedulerParts{
		attempts:  int(metricSum(metrics, "scheduler_scheduling_algorithm_duration_seconds_count", "")),
		algorithm: metricSum(metrics, "scheduler_scheduling_algorithm_duration_seconds_sum", ""),
		filter:    point("Filter"),
		score:     point("PreScore") + point("Score"),
	}
	p.framework = point("PreFilter") + p.filter + point("PostFilter") + p.score
	return p
}

// metricSum adds up the values of the series of name (Prometheus text)
// whose labels contain label ("" for all).
func metricSum(text, name, label string) float64 {
	total := 0.0
	for _, line := range strings.Split(text, "\n") {
		series, value, found := strings.Cut(line, " ")
		if !found || strings.HasPrefix(line, "#") {
			continue
		}
		metric, labels, _ := strings.Cut(series, "{")
		if metric != name || !strings.Contains(labels, label) {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			total += v
		}
	}
	return total
}

// extenderTimes: per verb, the calls and the extender's own seconds.
type extenderTimes struct {
	calls   map[string]int
	seconds map[string]float64
}

// extenderMetrics reads the extender's /metrics; false when it has none
// (an earlier build).
func extenderMetrics(ctx context.Context, url string) (extenderTimes, bool) {
	text, err := controlplane.Metrics(ctx, url)
	if err != nil {
		return extenderTimes{}, false
	}
	times := extenderTimes{calls: map[string]int{}, seconds: map[string]float64{}}
	for _, verb := range []string{"filter", "prioritize", "bind"} {
		label := `verb="` + verb + `"`
		times.calls[verb] = int(metricSum(text, "topoalign_extender_request_duration_seconds_count", label))
		times.seconds[verb] = metricSum(text, "topoalign_extender_request_duration_seconds_sum", label)
	}
	return times, true
}

// benchRun creates pods Guaranteed 1-CPU pods for schedulerName (not yet
// running), starts the scheduler, and returns the time from its start to
// the last pod bound, and the scheduler's metrics then; then removes the
// pods and waits for the nodes to be empty again.
func benchRun(t *testing.T, ctx context.Context, c *clients, namespace, schedulerName, binary, config string, pods int, nodes []string) (time.Duration, string) {
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
	metrics, err := controlplane.Metrics(ctx, scheduler.URL)
	if err != nil {
		t.Fatal(err)
	}
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
	return elapsed, metrics
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
