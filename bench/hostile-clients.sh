#!/usr/bin/env bash
# Load and fault test (not part of scripts/test; loopback only, bounded):
# hostile clients and faults against topoalign's daemons (issue 32, part
# 8). Every daemon runs as a real process:
#
# - the agent (Unix socket, and TCP with a token), the extender (the
#   example fleet), and the follower (`agent --follow-kubelet`, Unix socket
#   and --follow-listen) of a kubelet played by `topoalign
#   kubelet-stand-in` (its checkpoint files and PodResources socket);
# - with the e2e suite's control plane binaries (e2e/build-tools.sh: etcd
#   and the real kube-apiserver, built once and cached), the follower also
#   publishes its NodeResourceTopology object to that API server, and a
#   second extender reads it (--nrt-from-cluster).
#
# Each daemon's TCP port gets, for DURATION seconds, N slow clients
# (request headers sent one byte a second, reopened when the header
# timeout — 5 s here — closes them) and M floods (requests back to back:
# wrong-token ones on the agent, /filter on the extender, /v1/state on the
# follower). Meanwhile honest clients ask as usual — admit and release on
# the agent's socket, a token-carrying list on its TCP port, /filter on
# the extenders, /v1/state on the follower's socket and port — and every
# answer is checked against the same request's answer before the attack
# (the baseline, same run); latencies are printed beside the baseline's
# (the ratio). Then the faults: the kubelet's PodResources socket vanishes
# (the stand-in stops and removes it) and comes back (restarted from its
# files, a pod added); the API server is killed (SIGKILL) while the
# follower is attacked and the kubelet changes, and restarted. At the end
# the agent's allocations must be exactly the honest client's (none: it
# releases each). A table says what held; exit status 1 when anything
# did not.
#
#   bench/hostile-clients.sh                 # N=2000 slow, M=8 floods, 10 s
#   N=300 M=4 DURATION=5 bench/hostile-clients.sh
#   PROFILE=release bench/hostile-clients.sh
#   TOPOALIGN_BIN=target/debug/topoalign bench/hostile-clients.sh  # no build
#   NO_APISERVER=1 bench/hostile-clients.sh  # without the control plane
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
cd "$root"
N=${N:-2000}
M=${M:-8}
DURATION=${DURATION:-10}
profile=${PROFILE:-debug}
if [ -n "${TOPOALIGN_BIN:-}" ]; then
    bin=$TOPOALIGN_BIN
else
    if [ "$profile" = release ]; then
        nice cargo build -q --release -p topoalign
    else
        nice cargo build -q -p topoalign
    fi
    bin="${CARGO_TARGET_DIR:-$root/target}/$profile/topoalign"
fi
etcd=""
apiserver=""
if [ -z "${NO_APISERVER:-}" ] && tools=$("$root/e2e/build-tools.sh" 2>"${TMPDIR:-/tmp}/hostile-build-tools.$$.log"); then
    etcd=$(sed -n 's/^TOPOALIGN_E2E_ETCD=//p' <<<"$tools")
    apiserver=$(sed -n 's/^TOPOALIGN_E2E_KUBE_APISERVER=//p' <<<"$tools")
else
    echo "no control plane: the API server restart is not run (e2e/build-tools.sh needs Go; or NO_APISERVER was set)" >&2
fi
rm -f "${TMPDIR:-/tmp}/hostile-build-tools.$$.log"
work=$(mktemp -d)
# The daemons' logs are kept when something did not hold.
held=0
trap 'if [ "$held" = 1 ]; then rm -rf "$work"; else echo "logs: $work" >&2; fi' EXIT
# The slow clients need descriptors: as many as the hard limit allows.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
nice python3 "$here/hostile_clients.py" "$bin" "$work" "$N" "$M" "$DURATION" "$etcd" "$apiserver"
held=1
