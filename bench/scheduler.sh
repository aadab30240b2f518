#!/usr/bin/env bash
# Benchmark (not part of scripts/test): three schedulers on simulated nodes
# (`topoalign simulate-nodes`, examples/nodes/two-numa.yaml,
# single-numa-node), on the same fleet in the same run: the stock
# kube-scheduler's default profile, the scheduler-plugins scheduler's
# NodeResourceTopologyMatch profile (reading the NRT objects the simulated
# nodes publish, through its cache resynced every 5 s as its README deploys
# it on large clusters), and the stock kube-scheduler with `topoalign extender`
# (deploy/'s configuration called by kube-scheduler directly: with
# bindVerb, then without it so kube-scheduler binds as in the baseline).
# Two workloads: Guaranteed 1-CPU pods (fit anywhere: throughput), then
# the mix of the e2e's TestSchedulersOnSimulatedNodes
# (e2e/testdata/workload.yaml, 2- and 5-CPU pods) repeated to fill the
# fleet, where a NUMA-blind placement fails admission. Printed: pods/s of
# each run (pods bound or found unschedulable, per second from the
# scheduler's start), the time the extender's filter calls take by
# kube-scheduler's own metrics and by the extender's, beside the baseline
# measured in the same run; at the end one table of every run: pods/s,
# admitted, failed admission with the kubelet's reasons
# (TopologyAffinityError ...), unschedulable, pending. Fleet sizes run one
# after another in one control plane (the end-to-end suite's; e2e/run.sh
# builds what is missing). docs/performance.md has the figures.
#
# Sizes: TOPOALIGN_BENCH_NODES, comma-separated fleet sizes (default
# 1000,5000); TOPOALIGN_BENCH_PODS, 1-CPU pods per run (default 1000);
# TOPOALIGN_BENCH_MIX, copies of the workload mix (default: a fleet's size
# / 4 rounded up, which fills it as the workload fills the e2e's 4 nodes);
# TOPOALIGN_BENCH_NRT_QUIET, seconds without a binding that end a
# NodeResourceTopologyMatch run once every pod had a first verdict (default
# 340: its cache's pessimism leaves pods unschedulable until the
# scheduler's 5-minute flush retries them; they count as "bound later");
# TOPOALIGN_BENCH_NRT_PASSTHROUGH=1 also runs the plugin without its cache
# (every candidate node's NRT object read from the API server per pod:
# about 0.5 pods/s on 50 nodes).
#
#   bench/scheduler.sh                      # 1,000 nodes, then 5,000; 1,000 1-CPU pods; the mix fills each fleet
#   TOPOALIGN_BENCH_NODES=1000 bench/scheduler.sh                      # one size
#   TOPOALIGN_BENCH_NODES=200,400 TOPOALIGN_BENCH_PODS=400 bench/scheduler.sh
#   TOPOALIGN_BENCH_MIX=50 bench/scheduler.sh    # the mix 50 times (800 pods) instead of filling the fleet
#   TOPOALIGN_BENCH_BEFORE=/tmp/topoalign-old bench/scheduler.sh   # that build's extender too, first
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# Timing a debug build would measure the compiler's checks, not the extender.
echo "bench: building topoalign (cargo build --release -p topoalign)" >&2
(cd "$root" && cargo build -q --release -p topoalign)
export TOPOALIGN_BIN=${CARGO_TARGET_DIR:-$root/target}/release/topoalign
exec "$root/e2e/run.sh" -tags bench -run '^TestBenchSchedulerThroughput$' -timeout 4h -v
