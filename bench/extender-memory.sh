#!/usr/bin/env bash
# Benchmark (not part of scripts/test): the extender's resident memory per
# request size (issue 32; target: peak RSS added by a request <= 2x the
# request's size). For each size, a fresh `topoalign extender` (the
# example fleet) gets one `/filter` with a full v1.NodeList (~10 KiB Node
# objects, names it does not manage, so every node passes and the whole
# list comes back — the largest answer); its peak RSS (VmHWM) is read
# after the answer, beside its RSS before the request, measured in the
# same run. Prints per size: request MiB, RSS before, peak, peak - before,
# and the ratio (peak - before) / request size.
#
#   bench/extender-memory.sh              # 1, 8, 32 MiB; the debug build
#   bench/extender-memory.sh 4 16 60      # other sizes (MiB, <= 64: the body limit)
#   PROFILE=release bench/extender-memory.sh
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
cd "$root"
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1 8 32)
profile=${PROFILE:-debug}
if [ "$profile" = release ]; then
    nice cargo build -q --release -p topoalign
else
    nice cargo build -q -p topoalign
fi
bin="$root/target/$profile/topoalign"
work=$(mktemp -d)
server=
cleanup() {
    [ -z "$server" ] || kill "$server" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); build: $profile"

# A request of about $1 MiB: the example's pod, a NodeList of padded Nodes.
make_request() {
    python3 - "$1" "$work/request.json" <<'EOF'
import json, sys
mib, out = float(sys.argv[1]), sys.argv[2]
pad = "x" * 9000  # ~10 KiB per Node, like a real one with its images list
def node(i):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": f"bench-{i}", "labels": {"kubernetes.io/hostname": f"bench-{i}"},
                         "annotations": {"bench/pad": pad}},
            "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                       "allocatable": {"cpu": "63", "memory": "250Gi", "pods": "110"}}}
per = len(json.dumps(node(0)))
count = max(1, int(mib * (1 << 20) / per))
pod = {"apiVersion": "v1", "kind": "Pod",
       "metadata": {"name": "bench", "namespace": "default", "uid": "bench-uid"},
       "spec": {"containers": [{"name": "c", "image": "pause",
                                "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}]}}
with open(out, "w") as f:
    json.dump({"Pod": pod, "Nodes": {"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                                      "items": [node(i) for i in range(count)]}, "NodeNames": None}, f)
EOF
}

kib() { awk -v k="$2" '$1 == k":" {print $2}' "/proc/$1/status"; }

printf '%-12s %-12s %-12s %-14s %s\n' "request" "RSS before" "peak RSS" "peak - before" "(peak - before) / request"
for size in "${sizes[@]}"; do
    make_request "$size"
    bytes=$(stat -c %s "$work/request.json")
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$bin" extender --fleet examples/fleet/fleet.yaml --listen "127.0.0.1:$port" >"$work/extender.log" 2>&1 &
    server=$!
    for _ in $(seq 200); do
        curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break
        sleep 0.05
    done
    # Warm: one small request, so that the runtime's and the engine's
    # first-use memory is in the baseline, not charged to the big one.
    curl -sf -XPOST -H 'Content-Type: application/json' \
        --data '{"Pod": {"metadata": {"name": "w", "uid": "w"}, "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}, "NodeNames": ["bench-0"]}' \
        "http://127.0.0.1:$port/filter" >/dev/null
    before=$(kib "$server" VmRSS)
    answer=$(curl -sf -XPOST -H 'Content-Type: application/json' --data-binary @"$work/request.json" \
        "http://127.0.0.1:$port/filter" | wc -c)
    peak=$(kib "$server" VmHWM)
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=
    [ "$answer" -gt $((bytes * 9 / 10)) ] || { echo "the answer ($answer bytes) is not the whole list" >&2; exit 1; }
    awk -v b="$bytes" -v r="$before" -v p="$peak" 'BEGIN {
        printf "%-12s %-12s %-12s %-14s %.2f\n", sprintf("%.1f MiB", b / 1048576), sprintf("%.1f MiB", r / 1024),
               sprintf("%.1f MiB", p / 1024), sprintf("%.1f MiB", (p - r) / 1024), (p - r) * 1024 / b }'
done
echo "target: (peak - before) / request <= 2 (issue 32)"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
