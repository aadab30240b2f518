"""Hostile clients and faults against topoalign's daemons (issue 32, part 8).

Run by bench/hostile-clients.sh, which builds topoalign and finds the
control plane's binaries; see its header for what is measured. Loopback
only; every process this starts is killed at the end.

    python3 bench/hostile_clients.py BIN WORKDIR N M DURATION [ETCD KUBE_APISERVER]
"""

import asyncio
import json
import os
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import time
import urllib.request

BIN, WORK = sys.argv[1], sys.argv[2]
N, M, DURATION = int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
ETCD = sys.argv[6] if len(sys.argv) > 7 else ""
APISERVER = sys.argv[7] if len(sys.argv) > 7 else ""
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKEN = "0123456789abcdef0123456789abcdef"
NODE_NAME = "bench-node"
PROCESSES = {}
HELD = []  # (what, verdict, detail) rows of the final table


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(name, args, env=None, stdin=None, stdout=None):
    log = open(f"{WORK}/{name}.log", "ab")
    process = subprocess.Popen(args, stdin=stdin, stdout=stdout or log, stderr=log,
                               env={**os.environ, **(env or {})}, cwd=ROOT)
    PROCESSES[name] = process
    return process


def stop(name, sig=signal.SIGKILL):
    process = PROCESSES.pop(name, None)
    if process and process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def row(what, held, detail):
    HELD.append((what, "held" if held else "NOT HELD", detail))
    print(f"  {'held' if held else 'NOT HELD':8} {what}: {detail}", flush=True)


# ---------------------------------------------------------------- HTTP

async def connect(where):
    if isinstance(where, str):
        return await asyncio.open_unix_connection(where)
    return await asyncio.open_connection("127.0.0.1", where)


async def ask(where, method, path, body=None, headers=(), timeout=60):
    """One request on a new connection: (status, body bytes)."""
    async def go():
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
    return await asyncio.wait_for(go(), timeout)


WHY = {}  # what a probe last found wrong


async def until(what, probe, limit=120):
    end = time.monotonic() + limit
    WHY.clear()
    while time.monotonic() < end:
        try:
            value = await probe()
            if value:
                return value
        except (OSError, IndexError, ValueError, KeyError, asyncio.TimeoutError) as error:
            WHY["error"] = repr(error)
        await asyncio.sleep(0.1)
    raise SystemExit(f"gave up waiting for {what} ({WHY}); logs in {WORK}")


# ---------------------------------------------------------------- attackers

async def slow_client(port, stop_event):
    """Sends a request's headers one byte a second; reconnects when closed."""
    request = b"GET /healthz HTTP/1.1\r\nHost: t\r\nX-Slow: " + b"a" * 4000 + b"\r\n\r\n"
    while not stop_event.is_set():
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            for byte in request:
                if stop_event.is_set():
                    break
                writer.write(bytes([byte]))
                await writer.drain()
                await asyncio.sleep(1)
            writer.close()
        except OSError:
            await asyncio.sleep(0.2)


async def flood(port, method, path, body, stop_event, counts):
    while not stop_event.is_set():
        try:
            status, _ = await ask(port, method, path, body, (("Authorization", "Bearer wrong-token-wrong-token"),), 30)
            counts[status] = counts.get(status, 0) + 1
        except (OSError, IndexError, ValueError, asyncio.TimeoutError):
            counts["error"] = counts.get("error", 0) + 1
            await asyncio.sleep(0.01)


class Attack:
    """N slow clients and M floods on one port, while the block runs."""

    def __init__(self, port, method, path, body):
        self.port, self.method, self.path, self.body = port, method, path, body
        self.counts = {}

    async def __aenter__(self):
        self.stop = asyncio.Event()
        self.tasks = [asyncio.create_task(slow_client(self.port, self.stop)) for _ in range(N)]
        self.tasks += [asyncio.create_task(flood(self.port, self.method, self.path, self.body, self.stop, self.counts))
                       for _ in range(M)]
        await asyncio.sleep(1)  # let the slow clients connect
        return self

    async def __aexit__(self, *_):
        self.stop.set()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


# ---------------------------------------------------------------- honest clients

POD = {"metadata": {"name": "honest", "uid": "honest-uid"},
       "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "1", "memory": "1Gi"}}}]}}
AUTH = (("Authorization", f"Bearer {TOKEN}"),)


class Honest:
    """Honest requests, each checked against the answer expected of it."""

    def __init__(self, daemons, expected=None):
        self.daemons = daemons
        self.expected = expected or {}
        self.latencies = {}
        self.failures = {}
        self.wrong = {}
        self.live = set()
        self.n = 0

    def ops(self):
        d = self.daemons
        ops = {
            "agent unix: admit+release": None,
            "agent tcp: GET /v1/allocations": (d["agent_port"], "GET", "/v1/allocations", None, AUTH),
            "extender: POST /filter": (d["extender_port"], "POST", "/filter",
                                       {"Pod": POD, "NodeNames": ["gpu-0", "gpu-1", "cpu-0"]}, ()),
            "follower unix: GET /v1/state": (d["follower_socket"], "GET", "/v1/state", None, ()),
            "follower tcp: GET /v1/state": (d["follower_port"], "GET", "/v1/state", None, ()),
        }
        if d.get("cluster_extender_port"):
            ops["extender (NRT from the API server): POST /filter"] = (
                d["cluster_extender_port"], "POST", "/filter", {"Pod": POD, "NodeNames": [NODE_NAME]}, ())
        return ops

    async def once(self, name, op):
        start = time.perf_counter()
        try:
            if op is None:
                self.n += 1
                status, body = await ask(self.daemons["agent_socket"], "POST", "/v1/allocations",
                                         {"name": f"h{self.n}", "cpus": 1, "memory": "64Mi"})
                if status != 201:
                    raise RuntimeError(f"admit: {status} {body[:200]!r}")
                id = json.loads(body)["allocation"]["id"]
                self.live.add(id)
                status, body = await ask(self.daemons["agent_socket"], "DELETE", f"/v1/allocations/{id}")
                if status != 200:
                    raise RuntimeError(f"release: {status}")
                self.live.discard(id)
                answer = None
            else:
                where, method, path, body, headers = op
                status, answer = await ask(where, method, path, body, headers)
                if status != 200:
                    raise RuntimeError(f"{status} {answer[:200]!r}")
                answer = json.loads(answer)
            self.latencies.setdefault(name, []).append(time.perf_counter() - start)
            if name in self.expected and answer != self.expected[name] and "allocations" not in name:
                self.wrong[name] = self.wrong.get(name, 0) + 1
            self.expected.setdefault(name, answer)
        except Exception as error:  # noqa: BLE001 - counted and printed
            self.failures[name] = self.failures.get(name, 0) + 1
            if self.failures[name] <= 3:
                print(f"    {name}: failed: {error}", file=sys.stderr)

    async def run(self, seconds):
        end = time.monotonic() + seconds
        ops = self.ops()
        while time.monotonic() < end:
            for name, op in ops.items():
                await self.once(name, op)
            await asyncio.sleep(0.05)


def median_ms(values):
    return statistics.median(values) * 1000 if values else float("nan")


def summary(values):
    if not values:
        return "none answered"
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
    return f"median {median_ms(values):.1f} ms, p95 {p95 * 1000:.1f} ms, {len(values)} answered"


# ---------------------------------------------------------------- the daemons

def write_node():
    with open(f"{ROOT}/testdata/kubelet-state/layouts/1.32/scenario.json") as f:
        scenario = json.load(f)
    scenario.pop("events", None)
    with open(f"{WORK}/node.json", "w") as f:
        json.dump(scenario, f)
    return f"{WORK}/node.json"


class StandIn:
    """`topoalign kubelet-stand-in`: the kubelet's files and PodResources socket."""

    def __init__(self, node):
        self.node = node
        self.socket = f"{WORK}/kubelet/pod-resources/kubelet.sock"
        self.pods = f"{WORK}/pods.json"

    def start(self):
        self.process = start("stand-in", [BIN, "kubelet-stand-in", "--node", self.node, "--root-dir", f"{WORK}/kubelet",
                                          "--pod-resources-socket", self.socket, "--pods-file", self.pods,
                                          "--checkpoint-layout", "1.32"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.ready = self.line()
        self.state = self.ready["state"]
        return self.ready

    def line(self):
        return json.loads(self.process.stdout.readline())

    def add(self, index):
        pod = {"add": {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": f"p{index}", "namespace": "default",
                                    "uid": f"00000000-0000-0000-0000-{index:012}",
                                    "creationTimestamp": f"2026-01-01T00:00:{index % 60:02}Z"},
                       "spec": {"containers": [{"name": "app", "image": "x", "resources": {
                           "requests": {"cpu": "2", "memory": "512Mi"}, "limits": {"cpu": "2", "memory": "512Mi"}}}]}}}
        self.process.stdin.write((json.dumps(pod) + "\n").encode())
        self.process.stdin.flush()
        answer = self.line()
        self.state = answer["state"]
        return answer

    def vanish(self):
        """Input closed: it stops and removes its socket, as a kubelet going down."""
        self.process.stdin.close()
        self.process.wait(30)
        PROCESSES.pop("stand-in", None)


class ControlPlane:
    """etcd and the real kube-apiserver (the e2e suite's binaries), TLS with our own CA."""

    def __init__(self):
        self.dir = f"{WORK}/apiserver"
        os.makedirs(self.dir)
        d = self.dir
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=bench-ca",
                        "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.crt"], check=True, **quiet)
        subprocess.run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
                        "-keyout", f"{d}/server.key", "-out", f"{d}/server.csr"], check=True, **quiet)
        with open(f"{d}/san.ext", "w") as f:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        subprocess.run(["openssl", "x509", "-req", "-in", f"{d}/server.csr", "-CA", f"{d}/ca.crt", "-CAkey", f"{d}/ca.key",
                        "-CAcreateserial", "-days", "1", "-extfile", f"{d}/san.ext", "-out", f"{d}/server.crt"],
                       check=True, **quiet)
        subprocess.run(["openssl", "genrsa", "-out", f"{d}/sa.key", "2048"], check=True, **quiet)
        self.token = "bench-admin-token-0123456789"
        with open(f"{d}/tokens.csv", "w") as f:
            f.write(f'{self.token},admin,admin,"system:masters"\n')
        etcd_client, etcd_peer, self.port = free_port(), free_port(), free_port()
        start("etcd", [ETCD, "--name=bench", f"--data-dir={d}/etcd",
                       f"--listen-client-urls=http://127.0.0.1:{etcd_client}",
                       f"--advertise-client-urls=http://127.0.0.1:{etcd_client}",
                       f"--listen-peer-urls=http://127.0.0.1:{etcd_peer}",
                       f"--initial-advertise-peer-urls=http://127.0.0.1:{etcd_peer}",
                       f"--initial-cluster=bench=http://127.0.0.1:{etcd_peer}", "--unsafe-no-fsync", "--log-level=warn"])
        self.args = [APISERVER, f"--etcd-servers=http://127.0.0.1:{etcd_client}", "--bind-address=127.0.0.1",
                     "--advertise-address=127.0.0.1", f"--secure-port={self.port}", f"--cert-dir={d}/certs",
                     f"--tls-cert-file={d}/server.crt", f"--tls-private-key-file={d}/server.key",
                     f"--token-auth-file={d}/tokens.csv", "--authorization-mode=RBAC",
                     "--service-account-issuer=https://kubernetes.default.svc",
                     f"--service-account-key-file={d}/sa.key", f"--service-account-signing-key-file={d}/sa.key",
                     "--service-cluster-ip-range=10.0.0.0/24", "--endpoint-reconciler-type=none",
                     "--enable-priority-and-fairness=false", "--profiling=false"]
        self.kubeconfig = f"{d}/kubeconfig"
        with open(self.kubeconfig, "w") as f:
            json.dump({"apiVersion": "v1", "kind": "Config", "current-context": "bench",
                       "clusters": [{"name": "bench", "cluster": {"server": f"https://127.0.0.1:{self.port}",
                                                                  "certificate-authority": f"{d}/ca.crt"}}],
                       "users": [{"name": "admin", "user": {"token": self.token}}],
                       "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "admin"}}]}, f)
        self.tls = ssl.create_default_context(cafile=f"{d}/ca.crt")

    def request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"https://127.0.0.1:{self.port}{path}", data=data, method=method,
                                         headers={"Authorization": f"Bearer {self.token}",
                                                  "Content-Type": "application/json"})
        with urllib.request.urlopen(request, context=self.tls, timeout=10) as response:
            text = response.read()
            return text if path == "/readyz" else json.loads(text or b"null")

    def start_apiserver(self):
        start("kube-apiserver", self.args)

    async def ready(self):
        async def probe():
            return await asyncio.to_thread(self.request, "GET", "/readyz") == b"ok"
        await until("kube-apiserver ready", probe, 180)

    async def install_crd(self):
        import yaml  # PyYAML: the CRD manifest is YAML
        with open(f"{ROOT}/deploy/noderesourcetopology-crd.yaml") as f:
            crd = yaml.safe_load(f)
        await asyncio.to_thread(self.request, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
        # The version topoalign writes: the storage version (v1alpha2).
        version = next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))
        self.nrt_path = f"/apis/{group}/{version}/{plural}"

        async def established():
            return await asyncio.to_thread(self.request, "GET", self.nrt_path) is not None
        await until("the NRT CRD served", established, 60)

    async def published_state(self):
        """The exact state in the NRT object stored for NODE_NAME, or None."""
        obj = await asyncio.to_thread(self.request, "GET", f"{self.nrt_path}/{NODE_NAME}")
        for attribute in obj.get("attributes") or []:
            if attribute.get("name") == "topoalign.io/state":
                return json.loads(attribute["value"])
        return None


async def follower_state(socket_path):
    status, body = await ask(socket_path, "GET", "/v1/status")
    return json.loads(body)


# ---------------------------------------------------------------- the run

async def main():
    load = lambda: " ".join(open("/proc/loadavg").read().split()[:3])
    print(f"load: {load()}; N={N} slow clients, M={M} floods, {DURATION:.0f} s per daemon", flush=True)
    daemons = {"agent_port": free_port(), "extender_port": free_port(), "follower_port": free_port(),
               "agent_socket": f"{WORK}/agent.sock", "follower_socket": f"{WORK}/follower.sock"}
    with open(f"{WORK}/token", "w") as f:
        f.write(TOKEN + "\n")
    os.chmod(f"{WORK}/token", 0o600)
    # Header timeout 5 s: a slow client holds its connection that long.
    start("agent", [BIN, "agent", "--node", "examples/scenarios/two-socket-gpu.yaml", "--socket", daemons["agent_socket"],
                    "--state-dir", f"{WORK}/state", "--listen", f"127.0.0.1:{daemons['agent_port']}",
                    "--token-file", f"{WORK}/token", "--header-timeout", "5"])
    start("extender", [BIN, "extender", "--fleet", "examples/fleet/fleet.yaml",
                       "--listen", f"127.0.0.1:{daemons['extender_port']}", "--header-timeout", "5"])

    plane = None
    if ETCD and APISERVER:
        plane = ControlPlane()
        plane.start_apiserver()
        await plane.ready()
        await plane.install_crd()
        print("control plane: etcd and kube-apiserver up, NodeResourceTopology CRD installed", flush=True)
    else:
        print("control plane: not started (no etcd/kube-apiserver binaries; e2e/build-tools.sh builds them): "
              "the API server restart is not run", flush=True)

    node = write_node()
    stand_in = StandIn(node)
    stand_in.start()
    stand_in.add(1)
    follower_args = [BIN, "agent", "--follow-kubelet", "--node", node, "--kubelet-root-dir", f"{WORK}/kubelet",
                     "--pod-resources-socket", stand_in.socket, "--pods-file", stand_in.pods,
                     "--socket", daemons["follower_socket"], "--state-dir", f"{WORK}/follower-state",
                     "--follow-listen", f"127.0.0.1:{daemons['follower_port']}", "--header-timeout", "5",
                     "--resync-interval", "1"]
    env = {}
    if plane:
        follower_args += ["--nrt-publish", "--nrt-node-name", NODE_NAME, "--nrt-interval", "200"]
        env = {"KUBECONFIG": plane.kubeconfig}
    start("follower", follower_args, env=env)
    if plane:
        daemons["cluster_extender_port"] = free_port()
        start("cluster-extender", [BIN, "extender", "--nrt-from-cluster", "--nrt-poll", "1",
                                   "--listen", f"127.0.0.1:{daemons['cluster_extender_port']}"], env=env)

    async def all_ready():
        await ask(daemons["agent_socket"], "GET", "/healthz", timeout=2)
        await ask(daemons["extender_port"], "GET", "/healthz", timeout=2)
        status = await follower_state(daemons["follower_socket"])
        if status["state"] != "known" or status["record"] != stand_in.state:
            WHY["follower"] = status
            return False
        if plane:
            published = await plane.published_state()
            if published != stand_in.state:
                WHY["published"] = published
                return False
            # The extender has read the object: it answers for the node.
            status, body = await ask(daemons["cluster_extender_port"], "POST", "/filter",
                                     {"Pod": POD, "NodeNames": [NODE_NAME]}, timeout=5)
            WHY["cluster extender"] = (status, body[:300])
            return status == 200 and NODE_NAME in (json.loads(body).get("NodeNames") or [])
        return True
    await until("the daemons ready and the follower's state known (and published)", all_ready, 180)

    baseline = Honest(daemons)
    await baseline.run(3)
    print("\nbaseline (no attack):")
    for name in baseline.ops():
        print(f"  {name}: {summary(baseline.latencies.get(name, []))}")
    live = set(baseline.live)

    targets = [("agent TCP", daemons["agent_port"], "GET", "/v1/allocations", None),
               ("extender", daemons["extender_port"], "POST", "/filter", {"Pod": POD, "NodeNames": ["gpu-0"]}),
               ("follower TCP", daemons["follower_port"], "GET", "/v1/state", None)]
    for daemon, port, method, path, body in targets:
        async with Attack(port, method, path, body) as attack:
            under = Honest(daemons, dict(baseline.expected))
            under.n = 10_000 * (len(HELD) + 1)
            await under.run(DURATION)
        print(f"\n{N} slow clients + {M} floods on the {daemon} ({DURATION:.0f} s); flood answers: {attack.counts}")
        for name in under.ops():
            values = under.latencies.get(name, [])
            ratio = median_ms(values) / median_ms(baseline.latencies.get(name, [])) if values else float("nan")
            ok = values and not under.failures.get(name) and not under.wrong.get(name)
            row(f"{daemon} attacked / {name}", ok,
                f"{summary(values)}, {under.failures.get(name, 0)} failed, {under.wrong.get(name, 0)} wrong, "
                f"median x{ratio:.2f} the baseline")
        live |= under.live

    # The kubelet's PodResources socket vanishes (the stand-in stops and
    # removes it, as a kubelet going down), then comes back.
    print("\nthe kubelet's PodResources socket vanishes, then comes back:")
    before = stand_in.state
    stand_in.vanish()
    gone = os.path.exists(stand_in.socket) is False
    seen = []
    while len(seen) < 5:
        status = await follower_state(daemons["follower_socket"])
        seen.append(status)
        await asyncio.sleep(0.5)
    states = [s["state"] for s in seen]
    wrong = [s for s in seen if s["state"] == "known" and s.get("record") != before]
    row("follower while the socket is gone: answers, never a wrong state", gone and not wrong,
        f"socket removed: {gone}; states {states}; last: reason {seen[-1].get('reason')!r}, "
        f"held {seen[-1].get('held')!r}, ageSeconds {seen[-1].get('ageSeconds')}")
    if plane:
        async def published_unknown_or_same():
            obj = await asyncio.to_thread(plane.request, "GET", f"{plane.nrt_path}/{NODE_NAME}")
            names = [a.get("name") for a in obj.get("attributes") or []]
            return "topoalign.io/state-unknown" in names or await plane.published_state() == before
        row("NRT object while the socket is gone: the state or 'unknown', never a wrong one",
            await published_unknown_or_same(), "checked once after 2.5 s")
    ready = stand_in.start()
    stand_in.add(2)

    async def recovered():
        status = await follower_state(daemons["follower_socket"])
        return status["state"] == "known" and status["record"] == stand_in.state
    start_wait = time.monotonic()
    await until("the follower to know the state again", recovered, 120)
    row("follower after the socket came back: the kubelet's new state", True,
        f"restored {ready['restored']}, known again {time.monotonic() - start_wait:.1f} s after the restart")

    if plane:
        print("\nthe API server killed (SIGKILL) under attack on the follower, then restarted:")
        async with Attack(daemons["follower_port"], "GET", "/v1/state", None) as attack:
            stop("kube-apiserver")
            stand_in.add(3)  # the kubelet changes while the API server is down
            down = Honest(daemons, dict(baseline.expected))
            down.expected.pop("follower unix: GET /v1/state", None)
            down.expected.pop("follower tcp: GET /v1/state", None)
            down.expected.pop("extender (NRT from the API server): POST /filter", None)
            down.n = 900_000
            await down.run(min(DURATION, 5))
            status = await follower_state(daemons["follower_socket"])
            row("follower while the API server is down", status["state"] == "known" and status["record"] == stand_in.state
                and PROCESSES["follower"].poll() is None,
                f"alive, state {status['state']}, the kubelet's latest: {status.get('record') == stand_in.state}")
            for name in ("extender (NRT from the API server): POST /filter", "agent unix: admit+release"):
                values = down.latencies.get(name, [])
                row(f"API server down / {name}", values and not down.failures.get(name) and not down.wrong.get(name),
                    f"{summary(values)}, {down.failures.get(name, 0)} failed, {down.wrong.get(name, 0)} wrong")
            live |= down.live
            plane.start_apiserver()
            start_wait = time.monotonic()
            await plane.ready()

            async def converged():
                return await plane.published_state() == stand_in.state
            await until("the NRT object to show the kubelet's state again", converged, 120)
            row("NRT object after the API server came back (under attack)", PROCESSES["follower"].poll() is None,
                f"the kubelet's latest state published {time.monotonic() - start_wait:.1f} s after the restart")

    status, body = await ask(daemons["agent_socket"], "GET", "/v1/allocations")
    held = {a["id"] for a in json.loads(body)}
    row("agent allocations: exactly the honest client's (none)", held == live,
        f"the agent holds {len(held)}, the honest client {len(live)}"
        + ("" if held == live else f" (extra: {sorted(held - live)}, missing: {sorted(live - held)})"))

    print(f"\nload: {load()}")
    print("\n| what | verdict | detail |\n|---|---|---|")
    for what, verdict, detail in HELD:
        print(f"| {what} | {verdict} | {detail} |")
    return all(verdict == "held" for _, verdict, _ in HELD)


try:
    ok = asyncio.run(main())
finally:
    for name in list(PROCESSES):
        stop(name)
sys.exit(0 if ok else 1)
