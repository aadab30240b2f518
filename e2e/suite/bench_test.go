//go:build bench

package suite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
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
// ready).
//
// Beside them, on the same fleet, the scheduler-plugins scheduler's
// NodeResourceTopologyMatch profile (as TestSchedulersOnSimulatedNodes
// starts it, reading the NRT objects the simulated nodes publish), and,
// for every scheduler, what became of its pods: bound and admitted,
// refused by the simulated kubelet (with the kubelet's reason), found
// unschedulable. The 1-CPU pods fit anywhere, so a second workload is
// run through the three schedulers (default profile, NodeResourceTopologyMatch,
// the extender with deploy/'s bindVerb): the mix of
// TestSchedulersOnSimulatedNodes (e2e/testdata/workload.yaml, 2- and
// 5-CPU Guaranteed pods, 4 per node's worth), repeated to fill the fleet
// as it fills the e2e's 4 nodes — where a NUMA-blind placement fails
// admission. Every run ends with a table of all of it.
//
// Sizes: $TOPOALIGN_BENCH_NODES, comma-separated fleet sizes run one
// after another (default "1000,5000"); $TOPOALIGN_BENCH_PODS, 1-CPU pods
// per run (default 1000); $TOPOALIGN_BENCH_MIX, copies of the workload
// per run (default: the fleet's size / 4, rounded up).
func TestBenchSchedulerThroughput(t *testing.T) {
	sizes := envInts(t, "TOPOALIGN_BENCH_NODES", []int{1000, 5000})
	pods := envInt(t, "TOPOALIGN_BENCH_PODS", 1000)
	ctx := testContext(t, 230*time.Minute)
	c := admin(t)
	c.applyFile(t, ctx, "topoalign-rbac.yaml")
	grantSchedulerNRT(t, ctx, c)
	var rows []benchRow
	for _, nodes := range sizes {
		ok := t.Run(fmt.Sprintf("%d-nodes", nodes), func(t *testing.T) {
			benchFleet(t, ctx, c, nodes, pods, func(row benchRow) { rows = append(rows, row) })
		})
		if !ok {
			break
		}
	}
	printBenchTable(rows)
}

// benchFleet starts nodes simulated nodes, runs the 1-CPU pods and then
// the workload mix through the schedulers, printing the figures of each
// run as it ends and handing each run's row to add.
func benchFleet(t *testing.T, ctx context.Context, c *clients, nodes, pods int, add func(benchRow)) {
	copies := envInt(t, "TOPOALIGN_BENCH_MIX", (nodes+3)/4)
	group := fmt.Sprintf("bench-%d", nodes)
	fleet := filepath.Join(t.TempDir(), "fleet.yaml")
	text := fmt.Sprintf("nodes:\n  - name: %s\n    count: %d\n    scenario: %s\n", group, nodes, filepath.Join(repo, "examples", "nodes", "two-numa.yaml"))
	if err := os.WriteFile(fleet, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	names := simulatedNodes(t, ctx, c, fleet, group, nodes, "--quiet")
	fmt.Fprintf(os.Stderr, "bench: %d simulated nodes ready in %.1fs\n", nodes, time.Since(started).Seconds())
	row := func(workload, scheduler string, r benchResult) {
		add(benchRow{nodes: nodes, workload: workload, scheduler: scheduler, result: r})
	}
	single := fmt.Sprintf("%d 1-CPU", pods)
	onePod := func(namespace, schedulerName string) []*corev1.Pod {
		list := make([]*corev1.Pod, 0, pods)
		for i := range pods {
			pod := guaranteedPod(namespace, "pod-"+strconv.Itoa(i), 1, "256Mi")
			pod.Spec.SchedulerName = schedulerName
			list = append(list, pod)
		}
		return list
	}

	// Without the extender: the stock scheduler, default profile.
	defaultConfig := filepath.Join(t.TempDir(), "default.yaml")
	text = fmt.Sprintf("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nleaderElection: {leaderElect: false}\nclientConnection: {kubeconfig: %q}\nprofiles:\n  - schedulerName: bench-default\n",
		cp.SchedulerKubeconfig("bench-default"))
	if err := os.WriteFile(defaultConfig, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	startDefault := func() *controlplane.Process {
		scheduler, err := cp.StartScheduler(ctx, "bench-default", bins.Scheduler, defaultConfig)
		if err != nil {
			t.Fatal(err)
		}
		return scheduler
	}
	// The plugin as its README deploys it on large clusters (its cache,
	// resynced every 5 s); without the cache it reads every candidate
	// node's NRT object from the API server per pod, which is 0.5 pods/s on
	// 50 nodes (docs/performance.md) — $TOPOALIGN_BENCH_NRT_PASSTHROUGH=1
	// runs it too.
	// A pod its cache found unschedulable may be bound after a resync,
	// once an event or the scheduler's periodic flush of unschedulable
	// pods (every pod that waited 5 minutes, checked every 30 s) moves it
	// back to the queue: such a run ends when no pod has been bound for
	// $TOPOALIGN_BENCH_NRT_QUIET seconds (default 340: the flush's
	// period, its check, and 10 s).
	type nrtRun struct {
		label string
		start func() *controlplane.Process
		quiet time.Duration
	}
	quiet := time.Duration(envInt(t, "TOPOALIGN_BENCH_NRT_QUIET", 340)) * time.Second
	nrtRuns := []nrtRun{{"NodeResourceTopologyMatch", func() *controlplane.Process { return startNRTPluginCached(t, ctx, "bench-nrt", 5) }, quiet}}
	if os.Getenv("TOPOALIGN_BENCH_NRT_PASSTHROUGH") == "1" {
		nrtRuns = append(nrtRuns, nrtRun{"NRT match, no cache", func() *controlplane.Process { return startNRTPluginScheduler(t, ctx, "bench-nrt-passthrough") }, 0})
	}
	baseline := benchRun(t, ctx, c, "bench-default", onePod("bench-default", "bench-default"), names, startDefault)
	row(single, "default profile", baseline)

	// With it: deploy/'s configuration, bindVerb, the scheduler calling
	// the extender itself. $TOPOALIGN_BENCH_BEFORE names another topoalign
	// binary (an earlier build) to measure first, in the same run.
	fmt.Fprintf(os.Stderr, "\nbench: %d pods on %d simulated nodes (examples/nodes/two-numa.yaml), kube-scheduler %s\n", pods, nodes, "v1.37.2")
	fmt.Fprintf(os.Stderr, "  without the extender: %6.1f pods/s (%.1fs)\n", float64(pods)/baseline.elapsed.Seconds(), baseline.elapsed.Seconds())
	base := algorithmParts(baseline.metrics)
	base.print("without", pods)
	for _, run := range nrtRuns {
		nrt := benchRunSettled(t, ctx, c, "bench-nrt", onePod("bench-nrt", nrtPluginProfile), names, run.start, run.quiet)
		row(single, run.label, nrt)
		fmt.Fprintf(os.Stderr, "  scheduler-plugins, %s: %6.1f pods/s (%.1fs) = %.0f%% of the baseline\n",
			run.label, nrt.perSecond(), nrt.elapsed.Seconds(), 100*baseline.elapsed.Seconds()/nrt.elapsed.Seconds())
	}
	if before := os.Getenv("TOPOALIGN_BENCH_BEFORE"); before != "" {
		r := benchExtender(t, ctx, c, "before ("+before+")", before, true, names, baseline.elapsed, base, onePod)
		row(single, "extender, before", r)
	}
	row(single, "topoalign extender", benchExtender(t, ctx, c, "this build", topoalign, true, names, baseline.elapsed, base, onePod))
	// The extender's bind creates Bindings concurrently, which alone can
	// make the run faster than the baseline; without bindVerb kube-scheduler
	// binds as in the baseline, so the difference is the filter calls'.
	row(single, "extender, filter only", benchExtender(t, ctx, c, "this build, filter only (kube-scheduler binds)", topoalign, false, names, baseline.elapsed, base, onePod))
	benchFilterClient(t, ctx, c, pods, names)

	// The workload mix, where NUMA alignment decides admission.
	mixPods := func(namespace, schedulerName string) []*corev1.Pod {
		return workloadCopies(t, namespace, schedulerName, copies)
	}
	mix := fmt.Sprintf("%d mixed", len(mixPods("", "")))
	fmt.Fprintf(os.Stderr, "\nbench: the workload of TestSchedulersOnSimulatedNodes (e2e/testdata/workload.yaml) %d times: %s pods on %d simulated nodes\n", copies, mix, nodes)
	var mixBaseline benchResult
	type mixRun struct {
		label, namespace, schedulerName string
		start                           func() *controlplane.Process
		quiet                           time.Duration
	}
	mixRuns := []mixRun{{"default profile", "bench-default-mix", "bench-default", startDefault, 0}}
	for _, run := range nrtRuns {
		mixRuns = append(mixRuns, mixRun{run.label, "bench-nrt-mix", nrtPluginProfile, run.start, run.quiet})
	}
	for _, s := range mixRuns {
		r := benchRunSettled(t, ctx, c, s.namespace, mixPods(s.namespace, s.schedulerName), names, s.start, s.quiet)
		fmt.Fprintf(os.Stderr, "  %s: %6.1f pods/s (%.1fs), %s\n", s.label, r.perSecond(), r.elapsed.Seconds(), r.outcomeText())
		row(mix, s.label, r)
		if s.schedulerName == "bench-default" {
			mixBaseline = r
		}
	}
	mixBase := algorithmParts(mixBaseline.metrics)
	mixBase.print("without", mixBaseline.pods)
	r := benchExtender(t, ctx, c, "this build", topoalign, true, names, mixBaseline.elapsed, mixBase, mixPods)
	row(mix, "topoalign extender", r)
}

// workloadCopies is workloadPods (TestSchedulersOnSimulatedNodes'
// workload) copies times over, each pod's name suffixed with its copy,
// in the workload's order scaled up: every copy's first pod, then every
// copy's second, ... (all the 2-CPU pods before the 5-CPU ones, as the
// Deployments' replicas times copies would be created).
func workloadCopies(t *testing.T, namespace, schedulerName string, copies int) []*corev1.Pod {
	t.Helper()
	template := workloadPods(t, namespace, schedulerName)
	pods := make([]*corev1.Pod, 0, len(template)*copies)
	for _, pod := range template {
		for k := range copies {
			copied := pod.DeepCopy()
			copied.Name = fmt.Sprintf("%s-c%d", pod.Name, k)
			pods = append(pods, copied)
		}
	}
	return pods
}

// benchRow is one run of the table: a fleet size, a workload, a
// scheduler and what it did.
type benchRow struct {
	nodes               int
	workload, scheduler string
	result              benchResult
}

// printBenchTable prints every run's pods per second and its pods'
// outcomes, one line each.
func printBenchTable(rows []benchRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(os.Stderr, "\nbench: schedulers on simulated nodes (examples/nodes/two-numa.yaml, single-numa-node), every run of this benchmark\n")
	fmt.Fprintf(os.Stderr, "  %6s  %-12s  %-26s  %8s  %-12s  %9s  %-34s  %13s  %7s\n",
		"nodes", "pods", "scheduler", "pods/s", "bound later", "admitted", "failed admission (kubelet reason)", "unschedulable", "pending")
	for _, row := range rows {
		counts := row.result.counts
		fmt.Fprintf(os.Stderr, "  %6d  %-12s  %-26s  %8.1f  %-12s  %9d  %-34s  %13d  %7d\n",
			row.nodes, row.workload, row.scheduler, row.result.perSecond(), row.result.lateText(), counts["Running"], failureText(counts),
			counts[corev1.PodReasonUnschedulable], row.result.pods-counts["Running"]-failedAdmission(counts)-counts[corev1.PodReasonUnschedulable])
	}
	fmt.Fprintf(os.Stderr, "  (pods/s: pods decided — bound, or found unschedulable — per second from the scheduler's start; bound later: found unschedulable first, bound after a retry, and by when; the outcomes once every bound pod was admitted or refused)\n")
}

// failureText is the number of pods refused at admission and the
// kubelet's reasons, "0" when none.
func failureText(counts map[string]int) string {
	failed := failedAdmission(counts)
	if failed == 0 {
		return "0"
	}
	var reasons []string
	for outcome, n := range counts {
		if reason, ok := strings.CutPrefix(outcome, "Failed: "); ok {
			reasons = append(reasons, fmt.Sprintf("%s %d", reason, n))
		}
	}
	slices.Sort(reasons)
	return fmt.Sprintf("%d (%s)", failed, strings.Join(reasons, ", "))
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

// benchExtender runs the pods build makes through kube-scheduler with
// the extender of binary (its bindVerb configured when bind) and prints
// its figures beside the baseline's (the default profile's run of the same
// pods).
func benchExtender(t *testing.T, ctx context.Context, c *clients, label, binary string, bind bool, names []string, baseline time.Duration, base algorithmTimes, build func(namespace, schedulerName string) []*corev1.Pod) benchResult {
	t.Helper()
	args, name := []string{"--choose-in-filter"}, "bench-filter"
	if bind {
		args, name = append(args, "--create-bindings"), "bench-extender"
	}
	url, extender := startExtenderBinary(t, ctx, c, binary, len(names), args...)
	config := adaptSchedulerConfigWith(t, filepath.Join(repo, "deploy", "kube-scheduler-extender.yaml"), name, url, bind,
		map[string]string{"- schedulerName:": "- schedulerName: " + name})
	before, own := extenderMetrics(ctx, url)
	pods := build(name, name)
	namespace := name
	if len(pods) > 0 {
		namespace = pods[0].Namespace
	}
	result := benchRun(t, ctx, c, namespace, pods, names, func() *controlplane.Process {
		scheduler, err := cp.StartScheduler(ctx, name, bins.Scheduler, config)
		if err != nil {
			t.Fatal(err)
		}
		return scheduler
	})
	after, _ := extenderMetrics(ctx, url)
	stop(t, extender)

	with := result.elapsed
	ms := func(seconds float64, n int) float64 { return 1000 * seconds / float64(max(n, 1)) }
	fmt.Fprintf(os.Stderr, "  with the extender, %s: %6.1f pods/s (%.1fs) = %.0f%% of the baseline, %s\n",
		label, result.perSecond(), with.Seconds(), 100*baseline.Seconds()/with.Seconds(), result.outcomeText())
	ext := algorithmParts(result.metrics)
	ext.print("with", len(pods))
	// The rest with the extender, less the rest without it: the filter
	// call as the scheduler waits for it (its JSON both ways included).
	extenderSeconds := max(ext.rest()-float64(ext.attempts)*base.rest()/float64(max(base.attempts, 1)), 0)
	fmt.Fprintf(os.Stderr, "    the extender's filter call by kube-scheduler's clock: %.2f ms per attempt, %.1fs in all = %.0f%% of the run with it, %.0f%% of its scheduling algorithm (target < 20%%)\n",
		ms(extenderSeconds, ext.attempts), extenderSeconds, 100*extenderSeconds/with.Seconds(), 100*extenderSeconds/max(ext.algorithm, 1e-9))
	if !own {
		fmt.Fprintf(os.Stderr, "    (this extender has no /metrics: its own time is not known)\n")
		return result
	}
	filters, filtered := after.calls["filter"]-before.calls["filter"], after.seconds["filter"]-before.seconds["filter"]
	fmt.Fprintf(os.Stderr, "    by the extender's clock (its /metrics): %d filter calls, %.2f ms each, %.1fs in all = %.0f%% of the run with it\n",
		filters, ms(filtered, filters), filtered, 100*filtered/with.Seconds())
	binds, bound := after.calls["bind"]-before.calls["bind"], after.seconds["bind"]-before.seconds["bind"]
	if binds == 0 {
		return result
	}
	fmt.Fprintf(os.Stderr, "    extender bind calls (the Binding created through the API server, concurrent): %d, %.1f ms each on average\n", binds, ms(bound, binds))
	return result
}

// algorithmTimes: sums over one kube-scheduler's run, in seconds, from
// its metrics.
type algorithmTimes struct {
	attempts  int
	algorithm float64 // scheduling_algorithm_duration_seconds
	framework float64 // the extension points within it
	filter    float64 // Filter
	score     float64 // PreScore + Score
}

// rest is the algorithm's time outside the framework: extenders, the
// snapshot and the choice among scored nodes.
func (p algorithmTimes) rest() float64 { return p.algorithm - p.framework }

func (p algorithmTimes) print(run string, pods int) {
	ms := func(seconds float64) float64 { return 1000 * seconds / float64(max(p.attempts, 1)) }
	fmt.Fprintf(os.Stderr, "    kube-scheduler %s it: %d attempts for %d pods, algorithm %.2f ms each = framework %.2f ms (filter %.2f, score %.2f) + the rest %.2f ms\n",
		run, p.attempts, pods, ms(p.algorithm), ms(p.framework), ms(p.filter), ms(p.score), ms(p.rest()))
}

func algorithmParts(metrics string) algorithmTimes {
	point := func(name string) float64 {
		return metricSum(metrics, "scheduler_framework_extension_point_duration_seconds_sum", `extension_point="`+name+`"`)
	}
	p := algorithmTimes{
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

// benchResult is one scheduler's run of a set of pods.
type benchResult struct {
	pods    int
	elapsed time.Duration  // from the scheduler's start to the last pod decided
	metrics string         // the scheduler's /metrics then
	counts  map[string]int // outcomes (podOutcome) once every bound pod was admitted or refused
	// Pods found unschedulable first and bound later (benchRunSettled),
	// and the time from the scheduler's start to the last of them.
	late      int
	lateUntil time.Duration
}

// lateText says how many pods were bound after the first verdict on
// every pod, and by when; "—" when none.
func (r benchResult) lateText() string {
	if r.late == 0 {
		return "—"
	}
	return fmt.Sprintf("%d by %.0fs", r.late, r.lateUntil.Seconds())
}

// perSecond is the pods decided (bound, or found unschedulable) per
// second.
func (r benchResult) perSecond() float64 { return float64(r.pods) / max(r.elapsed.Seconds(), 1e-9) }

func (r benchResult) outcomeText() string {
	text := fmt.Sprintf("%d admitted, %s failed admission, %d unschedulable", r.counts["Running"], failureText(r.counts), r.counts[corev1.PodReasonUnschedulable])
	if r.late > 0 {
		text += fmt.Sprintf(" (%s found unschedulable first, bound later)", r.lateText())
	}
	return text
}

// benchRun creates pods in namespace (not yet scheduled), starts their
// scheduler, and measures the time from its start to the last pod
// decided (bound, or found unschedulable), reading the scheduler's
// metrics then; stops it, waits until the simulated kubelets admitted or
// refused every bound pod and counts the outcomes; then removes the pods
// and waits for the nodes (their NRT objects) to be empty again.
func benchRun(t *testing.T, ctx context.Context, c *clients, namespace string, pods []*corev1.Pod, nodes []string, start func() *controlplane.Process) benchResult {
	t.Helper()
	return benchRunSettled(t, ctx, c, namespace, pods, nodes, start, 0)
}

// benchRunSettled is benchRun for a scheduler whose first verdict on a pod
// may not be its last: once every pod is bound or was found
// unschedulable, it goes on until no pod has been bound for quiet (a
// scheduler with scheduler-plugins' over-reserving cache finds pods
// unschedulable until the cache resyncs, then binds them when an event
// moves them back to its queue), counting the pods bound late and when
// the last was; pods/s stays the first verdicts'.
func benchRunSettled(t *testing.T, ctx context.Context, c *clients, namespace string, pods []*corev1.Pod, nodes []string, start func() *controlplane.Process, quiet time.Duration) benchResult {
	t.Helper()
	createNamespace(t, ctx, c, namespace)
	for _, pod := range pods {
		if _, err := c.kube.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scheduler := start()
	started := time.Now()
	podsCounted(t, ctx, c, namespace, "every pod bound or unschedulable", len(pods), func(pod *corev1.Pod) bool {
		return pod.Spec.NodeName != "" || podOutcome(pod) == corev1.PodReasonUnschedulable
	})
	result := benchResult{pods: len(pods), elapsed: time.Since(started)}
	if quiet > 0 {
		last, late := lastBindingBeforeQuiet(t, ctx, c, namespace, len(pods), quiet)
		if late > 0 {
			result.late, result.lateUntil = late, last.Sub(started)
		}
	}
	metrics, err := controlplane.Metrics(ctx, scheduler.URL)
	if err != nil {
		t.Fatal(err)
	}
	result.metrics = metrics
	stop(t, scheduler)
	// settled's test, pod by pod (settled itself looks at every pod on
	// each event: quadratic in thousands of pods).
	final := podsCounted(t, ctx, c, namespace, "every pod admitted, refused or unschedulable", len(pods), func(pod *corev1.Pod) bool {
		outcome := podOutcome(pod)
		return outcome != "Pending" && outcome != corev1.PodReasonSchedulerError
	})
	result.counts = outcomes(final)
	// What the kubelets said of the pods they refused, a few of them: the
	// table has only their number.
	refused := 0
	for _, pod := range final {
		if pod.Status.Phase != corev1.PodFailed {
			continue
		}
		if refused++; refused <= 5 {
			fmt.Fprintf(os.Stderr, "bench: %s/%s refused by %s: %s: %s\n", namespace, pod.Name, pod.Spec.NodeName, pod.Status.Reason, pod.Status.Message)
		}
	}
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
	nrtEmptyAgain(t, ctx, c, nodes)
	return result
}

// lastBindingBeforeQuiet watches the pods of namespace until all n are
// bound or none has been bound for quiet, and returns when the last
// binding it saw was seen (the zero time when it saw none) and how many it
// saw.
func lastBindingBeforeQuiet(t *testing.T, ctx context.Context, c *clients, namespace string, n int, quiet time.Duration) (time.Time, int) {
	t.Helper()
	list, err := c.kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bound := map[string]bool{}
	for _, pod := range list.Items {
		if pod.Spec.NodeName != "" {
			bound[pod.Name] = true
		}
	}
	watcher, err := c.kube.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	var last time.Time
	seen := 0
	timer := time.NewTimer(quiet)
	defer timer.Stop()
	for len(bound) < n {
		select {
		case <-ctx.Done():
			t.Fatalf("pods of %s: %d of %d bound when the bench's time ran out", namespace, len(bound), n)
		case <-timer.C:
			return last, seen
		case event, open := <-watcher.ResultChan():
			if !open {
				t.Fatalf("pods of %s: the watch ended", namespace)
			}
			pod, isPod := event.Object.(*corev1.Pod)
			if !isPod || pod.Spec.NodeName == "" || bound[pod.Name] {
				continue
			}
			bound[pod.Name] = true
			last = time.Now()
			seen++
			timer.Reset(quiet)
		}
	}
	return last, seen
}

// podsCounted watches the pods of namespace until n of them, each by its
// latest state, satisfy done (or ctx ends), and returns the latest state
// of every pod. Each event costs one call of done, whatever the number of
// pods.
func podsCounted(t *testing.T, ctx context.Context, c *clients, namespace, what string, n int, done func(*corev1.Pod) bool) map[string]*corev1.Pod {
	t.Helper()
	lw := podsListWatch(ctx, c, namespace)
	pods, ok, count := map[string]*corev1.Pod{}, map[string]bool{}, 0
	update := func(pod *corev1.Pod, deleted bool) {
		if ok[pod.Name] {
			count--
		}
		delete(pods, pod.Name)
		delete(ok, pod.Name)
		if deleted {
			return
		}
		pods[pod.Name] = pod
		if done(pod) {
			ok[pod.Name] = true
			count++
		}
	}
	synced := func(store cache.Store) (bool, error) {
		for _, object := range store.List() {
			if pod, isPod := object.(*corev1.Pod); isPod {
				update(pod, false)
			}
		}
		return count >= n, nil
	}
	_, err := watchtools.UntilWithSync(ctx, lw, &corev1.Pod{}, synced, func(event watch.Event) (bool, error) {
		if pod, isPod := event.Object.(*corev1.Pod); isPod {
			update(pod, event.Type == watch.Deleted)
		}
		return count >= n, nil
	})
	if err != nil {
		t.Fatalf("%s: not reached (%v); %d of %d pods there; outcomes %v", what, err, count, n, outcomes(pods))
	}
	return pods
}

// envInts reads a comma-separated list of positive numbers.
func envInts(t *testing.T, name string, fallback []int) []int {
	t.Helper()
	text := os.Getenv(name)
	if text == "" {
		return fallback
	}
	var list []int
	for _, field := range strings.Split(text, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n <= 0 {
			t.Fatalf("$%s: %q is not a comma-separated list of positive numbers", name, text)
		}
		list = append(list, n)
	}
	return list
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
