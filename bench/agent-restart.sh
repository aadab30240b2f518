#!/usr/bin/env bash
# Benchmark (not part of scripts/test): the agent's restart time
# (Ledger::open: read the journal, restore the snapshot, replay the records
# after it) after 10^5 admit + release pairs, beside the time after 10^2 in
# the same run (issue 32; target: under 1 s after 10^5, and near the 10^2
# figure — restart independent of history). Release build of
# crates/agent/examples/restart.rs; the state directory is on tmpfs so the
# history's 4 fdatasyncs per pair do not dominate the run.
#
#   bench/agent-restart.sh            # 100,000 pairs
#   bench/agent-restart.sh 1000000    # another count
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
pairs=${1:-100000}
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
cd "$root"
nice cargo run --release -q -p topoalign-agent --example restart -- --pairs "$pairs"
