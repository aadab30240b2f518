#!/usr/bin/env bash
# Benchmark (not part of scripts/test): the kubelet follower's time per
# kubelet change on a 256-CPU, 8-NUMA node holding 200 pods, played by
# `topoalign kubelet-stand-in` — the lag from a change written to the
# follower knowing it, and the gather + rebuild + NRT object it costs —
# beside the baseline measured in the same run: rebuilding the node by
# admitting its 200 pods again. A release build
# (crates/cli/tests/follower_bench.rs, an ignored test).
#
#   bench/follower.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# Timing a debug build would measure the compiler's checks, not the follower.
cd "$root"
exec cargo test -q --release -p topoalign --test follower_bench -- --ignored --nocapture
