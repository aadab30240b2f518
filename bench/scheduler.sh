#!/usr/bin/env bash
# Benchmark (not part of scripts/test): pods per second bound by the stock
# kube-scheduler on simulated nodes (`topoalign simulate-nodes`), without
# and with `topoalign extender` (deploy/'s configuration called by
# kube-scheduler directly: with bindVerb, then without it so kube-scheduler
# binds as in the baseline), and the time the filter calls take by
# kube-scheduler's own metrics and by the extender's; printed beside the
# baseline measured in the same run. Uses the end-to-end suite's control
# plane (e2e/run.sh builds what is missing).
#
#   bench/scheduler.sh                                   # 1,000 nodes, 1,000 pods
#   TOPOALIGN_BENCH_NODES=200 TOPOALIGN_BENCH_PODS=400 bench/scheduler.sh
#   TOPOALIGN_BENCH_BEFORE=/tmp/topoalign-old bench/scheduler.sh   # that build's extender too, first
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# Timing a debug build would measure the compiler's checks, not the extender.
echo "bench: building topoalign (cargo build --release -p topoalign)" >&2
(cd "$root" && cargo build -q --release -p topoalign)
export TOPOALIGN_BIN=${CARGO_TARGET_DIR:-$root/target}/release/topoalign
exec "$root/e2e/run.sh" -tags bench -run '^TestBenchSchedulerThroughput$' -timeout 40m -v
