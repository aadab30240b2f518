#!/usr/bin/env bash
# Load test (not part of scripts/test; loopback only, bounded): hostile
# clients against the agent and the extender (issue 32, part 8). Each
# daemon runs as a real process; for DURATION seconds it gets N slow
# clients (connections that send their request headers one byte a second,
# reopened when the header timeout closes them) and M floods (clients
# sending requests back to back: wrong-token requests on the agent's TCP
# listener, filter requests on the extender). Meanwhile honest clients
# ask as usual — admissions and releases on the agent's Unix socket, a
# token-carrying request on its TCP listener, /filter on the extender —
# and their latencies are printed beside the same requests' latencies
# before the attack (the baseline, same run). At the end, the agent's
# allocations are checked: exactly the honest client's live ones (none:
# it releases each admission it gets).
#
#   bench/hostile-clients.sh                 # N=2000 slow, M=8 floods, 10 s
#   N=300 M=4 DURATION=5 bench/hostile-clients.sh
#   PROFILE=release bench/hostile-clients.sh
#
# Not covered yet: the follower's API (needs a kubelet stand-in), the
# kubelet's socket vanishing and the follower's API restarting.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
cd "$root"
N=${N:-2000}
M=${M:-8}
DURATION=${DURATION:-10}
profile=${PROFILE:-debug}
if [ "$profile" = release ]; then
    nice cargo build -q --release -p topoalign
else
    nice cargo build -q -p topoalign
fi
bin="$root/target/$profile/topoalign"
work=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
echo "load: $(cut -d' ' -f1-3 /proc/loadavg); build: $profile; N=$N slow clients, M=$M floods, ${DURATION}s per daemon"

agent_port=$(free_port)
extender_port=$(free_port)
token=0123456789abcdef0123456789abcdef
printf '%s\n' "$token" >"$work/token"
chmod 600 "$work/token"
# Header timeout 5 s: a slow client holds its connection that long.
"$bin" agent --node examples/scenarios/two-socket-gpu.yaml --socket "$work/agent.sock" \
    --state-dir "$work/state" --listen "127.0.0.1:$agent_port" --token-file "$work/token" \
    --header-timeout 5 >"$work/agent.log" 2>&1 &
pids+=($!)
"$bin" extender --fleet examples/fleet/fleet.yaml --listen "127.0.0.1:$extender_port" \
    --header-timeout 5 >"$work/extender.log" 2>&1 &
pids+=($!)

python3 - "$work" "$agent_port" "$extender_port" "$token" "$N" "$M" "$DURATION" <<'EOF'
import asyncio, json, statistics, sys, time

work, agent_port, extender_port, token = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
N, M, DURATION = int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7])
SOCKET = f"{work}/agent.sock"
POD = {"metadata": {"name": "honest", "uid": "honest-uid"},
       "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}

async def connect(where):
    if where == "unix":
        return await asyncio.open_unix_connection(SOCKET)
    return await asyncio.open_connection("127.0.0.1", where)

async def ask(where, method, path, body=None, headers=()):
    """One request on a new connection: (status, body); raises on failure."""
    reader, writer = await connect(where)
    data = json.dumps(body).encode() if body is not None else b""
    head = f"{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\nContent-Length: {len(data)}\r\n"
    head += "Content-Type: application/json\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    writer.write(head.encode() + data)
    await writer.drain()
    answer = await reader.read()
    writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]

async def wait_ready():
    for _ in range(400):
        try:
            await ask("unix", "GET", "/healthz")
            await ask(extender_port, "GET", "/healthz")
            return
        except (OSError, IndexError, ValueError):
            await asyncio.sleep(0.05)
    sys.exit("the daemons did not start")

AUTH = (("Authorization", f"Bearer {token}"),)
HONEST = {
    "agent unix: admit+release": None,  # special-cased
    "agent tcp: GET /v1/allocations": ("tcp-agent", "GET", "/v1/allocations", None, AUTH),
    "extender: POST /filter": (extender_port, "POST", "/filter", {"Pod": POD, "NodeNames": ["gpu-0", "gpu-1"]}, ()),
}

class Honest:
    def __init__(self):
        self.latencies = {name: [] for name in HONEST}
        self.failures = {name: 0 for name in HONEST}
        self.live = set()
        self.n = 0

    async def once(self, name):
        start = time.perf_counter()
        try:
            if HONEST[name] is None:
                self.n += 1
                status, body = await ask("unix", "POST", "/v1/allocations", {"name": f"h{self.n}", "cpus": 1, "memory": "64Mi"})
                if status != 201:
                    raise RuntimeError(f"admit: {status} {body[:200]!r}")
                id = json.loads(body)["allocation"]["id"]
                self.live.add(id)
                status, body = await ask("unix", "DELETE", f"/v1/allocations/{id}")
                if status != 200:
                    raise RuntimeError(f"release: {status}")
                self.live.discard(id)
            else:
                where, method, path, body, headers = HONEST[name]
                where = agent_port if where == "tcp-agent" else where
                status, answer = await ask(where, method, path, body, headers)
                if status != 200:
                    raise RuntimeError(f"{status} {answer[:200]!r}")
            self.latencies[name].append(time.perf_counter() - start)
        except Exception as error:  # noqa: BLE001 - counted and printed
            self.failures[name] += 1
            if self.failures[name] <= 3:
                print(f"  {name}: failed: {error}", file=sys.stderr)

    async def run(self, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for name in HONEST:
                await self.once(name)
            await asyncio.sleep(0.05)

async def slow_client(port, stop):
    """Sends a request's headers one byte a second; reconnects when closed."""
    request = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 4000 + b"\r\n\r\n"
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for byte in request:
                if stop.is_set():
                    break
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(1)
            writer.close()
        except OSError:
            await asyncio.sleep(0.2)

async def flood(port, method, path, body, stop, counts):
    while not stop.is_set():
        try:
            status, _ = await ask(port, method, path, body, (("Authorization", "Bearer wrong-token-wrong-token"),))
            counts[status] = counts.get(status, 0) + 1
        except (OSError, IndexError, ValueError):
            counts["error"] = counts.get("error", 0) + 1
            await asyncio.sleep(0.01)

def summary(values):
    if not values:
        return "none answered"
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
    return f"median {statistics.median(values) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms ({len(values)} answered)"

async def main():
    await wait_ready()
    baseline = Honest()
    await baseline.run(2)
    for daemon, port, method, path, body in [
        ("agent TCP", agent_port, "GET", "/v1/allocations", None),
        ("extender", extender_port, "POST", "/filter", {"Pod": POD, "NodeNames": ["gpu-0"]}),
    ]:
        stop = asyncio.Event()
        counts = {}
        attackers = [asyncio.create_task(slow_client(port, stop)) for _ in range(N)]
        attackers += [asyncio.create_task(flood(port, method, path, body, stop, counts)) for _ in range(M)]
        await asyncio.sleep(1)  # let the slow clients connect
        under = Honest()
        under.n = 10_000 + baseline.n
        await under.run(DURATION)
        stop.set()
        for task in attackers:
            task.cancel()
        await asyncio.gather(*attackers, return_exceptions=True)
        print(f"\n{N} slow clients + {M} floods on the {daemon} ({DURATION:.0f} s); flood answers: {counts}")
        for name in HONEST:
            ratio = ""
            if baseline.latencies[name] and under.latencies[name]:
                ratio = f"  x{statistics.median(under.latencies[name]) / statistics.median(baseline.latencies[name]):.1f} the baseline"
            held = "held" if under.failures[name] == 0 and under.latencies[name] else "NOT HELD"
            print(f"  {held:8} {name}: {summary(under.latencies[name])}, {under.failures[name]} failed{ratio}")
        baseline.live |= under.live
    print("\nbaseline (no attack):")
    for name in HONEST:
        print(f"  {name}: {summary(baseline.latencies[name])}")
    status, body = await ask("unix", "GET", "/v1/allocations")
    held = {a["id"] for a in json.loads(body)}
    verdict = "held" if held == baseline.live else "NOT HELD"
    print(f"\n{verdict}: the agent holds {len(held)} allocations, the honest client holds {len(baseline.live)}"
          + ("" if held == baseline.live else f" (extra: {sorted(held - baseline.live)}, missing: {sorted(baseline.live - held)})"))

asyncio.run(main())
EOF
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
