#!/usr/bin/env python3
"""Writes the `hand-numa-nodes-72-*` scenarios into every release's
conformance directory (testdata/conformance/<release>/scenarios/) and, with
--expected ORACLE_DIR, the oracle's answers into expected/.

A machine of 72 NUMA nodes (ids 0-71, past the kubelet's 64-bit masks):
4 sockets of 18 nodes, 2 cores x 2 threads per node (288 CPUs), 8Gi per
node, SLIT distances (10 own, 12 same socket, 32 other socket), GPUs on
every fifth node and one without affinity. The kubelet runs such a machine
under topology policy none; any other policy refuses to start past
max-allowable-numa-nodes (8 by default). See README-numa-nodes-72.md.

Usage: make.py [--expected]   (oracles from oracle/build.sh, per release)
"""
import json
import os
import subprocess
import sys

RELEASES = ["1.32", "1.33", "1.34", "1.35", "1.36", "1.37"]
N = 72
SOCKETS = 4
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def topology():
    nodes = [
        {
            "id": i,
            "memory": "8Gi",
            "distances": [10 if j == i else 12 if j * SOCKETS // N == i * SOCKETS // N else 32 for j in range(N)],
        }
        for i in range(N)
    ]
    cpus = [
        {"id": i * 4 + t, "core": i * 2 + t // 2, "socket": i * SOCKETS // N, "numa": i}
        for i in range(N)
        for t in range(4)
    ]
    gpus = [{"id": f"gpu{i:02}", "numa": [i]} for i in range(0, N, 5)] + [{"id": "gpu-any"}]
    return {"numaNodes": nodes, "cpus": cpus, "devices": {"example.com/gpu": gpus}}


def pod(name, resources, containers=1, init=None):
    spec = {
        "containers": [
            {"name": f"app{k}", "image": "registry.k8s.io/pause:3.10", "resources": resources}
            for k in range(containers)
        ]
    }
    if init:
        spec["initContainers"] = [{"name": "init", "image": "registry.k8s.io/pause:3.10", "resources": init}]
    return {"add": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}}


def guaranteed(cpu, memory, gpus=0):
    limits = {"cpu": cpu, "memory": memory}
    if gpus:
        limits["example.com/gpu"] = str(gpus)
    return {"limits": limits}


def burstable(cpu, memory, gpus=0):
    out = {"requests": {"cpu": cpu, "memory": memory}}
    if gpus:
        out["requests"]["example.com/gpu"] = str(gpus)
        out["limits"] = {"example.com/gpu": str(gpus)}
    return out


def scenarios(release):
    base = {"kubeletVersion": release, "cpuManagerPolicy": "static", "reservedSystemCPUs": "0,4",
            "topologyManagerPolicy": "none"}
    memory_none = dict(base, memoryManagerPolicy="None")
    static_memory = dict(
        base,
        memoryManagerPolicy="Static",
        evictionHard={"memory.available": "100Mi"},
        reservedMemory=[{"numaNode": 0, "limits": {"memory": "50Mi"}}, {"numaNode": 70, "limits": {"memory": "50Mi"}}],
    )
    yield "memory-none", memory_none, [
        pod("g-gpus", guaranteed("6", "1Gi", 2)),
        pod("shared", burstable("500m", "256Mi")),
        pod("g-two", guaranteed("20", "2Gi"), containers=2),
        pod("g-init", guaranteed("3", "1Gi", 1), init=guaranteed("9", "1Gi")),
        pod("g-big", guaranteed("100", "1Gi")),
        {"delete": "default/g-two"},
        pod("g-after", guaranteed("30", "1Gi", 3)),
        {"restart": {}},
        pod("g-too-many-gpus", guaranteed("1", "1Gi", 20)),
        pod("g-too-many-cpus", guaranteed("300", "1Gi")),
        pod("g-last", guaranteed("2", "1Gi", 1)),
    ]
    yield "static-memory", static_memory, [
        pod("b-gpus", burstable("500m", "1Gi", 2)),
        pod("best-effort", {"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "1"}}),
        pod("g-too-many-gpus", guaranteed("1", "1Gi", 20)),
        pod("g-too-many-cpus", guaranteed("300", "1Gi")),
        {"restart": {}},
        pod("b-after", burstable("2", "2Gi", 1)),
        {"delete": "default/b-gpus"},
        pod("b-last", burstable("1", "1Gi", 3)),
    ]
    yield "best-effort", dict(memory_none, topologyManagerPolicy="best-effort"), [
        pod("g", guaranteed("2", "1Gi")),
    ]
    yield "cpu-none", dict(memory_none, cpuManagerPolicy="none", reservedSystemCPUs=None), [
        pod("g-gpus", guaranteed("6", "1Gi", 4)),
        pod("b", burstable("1", "1Gi", 1)),
    ]


def main():
    for release in RELEASES:
        directory = os.path.join(ROOT, "conformance", release)
        for name, kubelet, events in scenarios(release):
            kubelet = {k: v for k, v in kubelet.items() if v is not None}
            doc = {"topology": topology(), "kubelet": kubelet, "events": events}
            path = os.path.join(directory, "scenarios", f"hand-numa-nodes-72-{name}.json")
            with open(path, "w") as out:
                json.dump(doc, out)
                out.write("\n")
            if "--expected" in sys.argv:
                oracle = subprocess.run([os.path.join(ROOT, "..", "oracle", "build.sh"), release],
                                        check=True, capture_output=True, text=True).stdout.strip()
                answer = subprocess.run([oracle, "replay", path], capture_output=True, text=True)
                if answer.returncode != 0:
                    sys.exit(f"{path}: oracle exit {answer.returncode}: {answer.stderr[-2000:]}")
                with open(os.path.join(directory, "expected", f"hand-numa-nodes-72-{name}.json"), "w") as out:
                    out.write(answer.stdout)
            print(path)


if __name__ == "__main__":
    main()
