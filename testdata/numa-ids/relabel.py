#!/usr/bin/env python3
"""Numbering a conformance vector's NUMA nodes anew: id i becomes 64 + 60*i
(0 -> 64, 1 -> 124, ..., 15 -> 964), so that every id is past the
kubelet's 64-bit NUMA masks and the order of the ids is kept.

    relabel.py scenario SCENARIO.json   > RELABELLED.json
    relabel.py expected EXPECTED.json   > RELABELLED-EXPECTED.json

`scenario`: the topology's ids, CPUs' and devices' NUMA nodes and the
reservedMemory NUMA nodes (of `kubelet:` and of restart events) are
renumbered; distance rows (one entry per node, in id order) stay. Exit
status 3 for a vector this does
not apply to (a dra: block; a reservedMemory id that names no node and
equals a new id, or is null or absent: node 0; an id past 15, whose new
id would pass 1023). `expected`: the memory NUMA ids of a result document
renumbered the same way (compact JSON, keys sorted). crates/scenario's
test numa_ids_relabelled.rs does the same in Rust.
"""
import json
import sys


def label(i):
    return 64 + 60 * i


def relabel_reserved(kubelet, ids, labels):
    reserved = kubelet.get("reservedMemory") if isinstance(kubelet, dict) else None
    if not isinstance(reserved, list):
        return
    for r in reserved:
        if not isinstance(r, dict):
            continue
        n = r.get("numaNode")
        if not isinstance(n, int) or isinstance(n, bool):
            # null or absent is NUMA node 0, which no longer exists.
            sys.exit(3)
        if n in ids:
            r["numaNode"] = label(n)
        elif n in labels:
            sys.exit(3)


def scenario(s):
    if s.get("dra") is not None:
        sys.exit(3)
    topo = s["topology"]
    ids = {n["id"] for n in topo["numaNodes"]}
    if max(ids, default=0) > 15:
        # Its new ids would pass 1023, which Linux does not number.
        sys.exit(3)
    labels = {label(i) for i in ids}
    for n in topo["numaNodes"]:
        n["id"] = label(n["id"])
    for c in topo.get("cpus") or []:
        c["numa"] = label(c["numa"])
    for devices in (topo.get("devices") or {}).values():
        for d in devices:
            if d.get("numa"):
                d["numa"] = [label(x) for x in d["numa"]]
    relabel_reserved(s.get("kubelet"), ids, labels)
    for e in s.get("events") or []:
        if isinstance(e, dict) and isinstance(e.get("restart"), dict):
            relabel_reserved(e["restart"].get("kubelet"), ids, labels)
    json.dump(s, sys.stdout, indent=1)


def containers(list_):
    for c in list_ or []:
        if isinstance(c.get("memoryNuma"), list):
            c["memoryNuma"] = [label(x) for x in c["memoryNuma"]]


def expected(d):
    for r in d.get("results") or []:
        containers(r.get("containers"))
        for p in r.get("pods") or []:
            containers(p.get("containers"))
    final = d.get("final") or {}
    for pod in (final.get("memoryAssignments") or {}).values():
        for name in pod:
            pod[name] = [label(x) for x in pod[name]]
    for name, nodes in (final.get("podMemoryAssignments") or {}).items():
        final["podMemoryAssignments"][name] = [label(x) for x in nodes]
    json.dump(d, sys.stdout, sort_keys=True, separators=(",", ":"))


kind, path = sys.argv[1], sys.argv[2]
{"scenario": scenario, "expected": expected}[kind](json.load(open(path)))
