#!/usr/bin/env python3
"""Writes the captured hosts under testdata/verify (v1/ and v2/): the files
`topoalign verify --root` reads — proc/self/mountinfo, proc/PID/{status,
comm,cgroup,numa_maps,environ,task/*/status}, the cgroup directories — for
the machine of node.yaml (CPUs 0-3 on NUMA 0, 4-7 on NUMA 1; GPU-0a on
NUMA 0, GPU-1a on NUMA 1). Each process is described by what it is meant
to show; crates/cli/tests/verify.rs holds the verdicts. Run it from this
directory to write them again."""

import os
import shutil

def write(path, text, binary=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb" if binary else "w") as f:
        f.write(text)

def status(pid, comm, cpus, mems):
    return (f"Name:\t{comm}\nState:\tS (sleeping)\nTgid:\t{pid}\nPid:\t{pid}\n"
            f"Cpus_allowed_list:\t{cpus}\nMems_allowed_list:\t{mems}\n")

def numa_maps(anon_by_node, file_by_node=None, policy="default"):
    lines = [f"55d0a0000000 {policy} file=/usr/bin/job mapped=3 "
             + " ".join(f"N{n}={p}" for n, p in (file_by_node or {0: 3}).items())
             + " kernelpagesize_kB=4"]
    lines.append(f"55d0a1000000 {policy} heap anon={sum(anon_by_node.values())} dirty={sum(anon_by_node.values())} "
                 + " ".join(f"N{n}={p}" for n, p in anon_by_node.items()) + " kernelpagesize_kB=4")
    lines.append(f"7ffc00000000 {policy} stack anon=3 dirty=3 N{min(anon_by_node)}=3 kernelpagesize_kB=4")
    return "\n".join(lines) + "\n"

def environ(pairs):
    return b"".join(f"{k}={v}".encode() + b"\0" for k, v in [("PATH", "/usr/bin:/bin")] + pairs)

def record(alloc, cpus, mems, policy, cgroup, enforcement, devices=None):
    pairs = [("TOPOALIGN_ALLOCATION", alloc), ("TOPOALIGN_CPUS", cpus), ("TOPOALIGN_EXCLUSIVE", "1"),
             ("TOPOALIGN_MEMS", mems), ("TOPOALIGN_POLICY", policy),
             ("TOPOALIGN_ENFORCEMENT", enforcement), ("TOPOALIGN_CGROUP", cgroup)]
    if devices:
        pairs.append(("TOPOALIGN_DEVICES", "nvidia.com/gpu=" + ",".join(devices)))
    return pairs

def process(root, pid, comm, cgroup_lines, cpus, mems, maps, env, threads=None):
    d = f"{root}/proc/{pid}"
    write(f"{d}/status", status(pid, comm, cpus, mems))
    write(f"{d}/comm", comm + "\n")
    write(f"{d}/cgroup", "".join(line + "\n" for line in cgroup_lines))
    write(f"{d}/numa_maps", maps)
    write(f"{d}/environ", environ(env), binary=True)
    for tid, tcpus in (threads or {}).items():
        write(f"{d}/task/{tid}/status", status(tid, comm, tcpus, mems))

def cpuset_v2(root, path, cpus, mems, pids):
    d = f"{root}/sys/fs/cgroup{path}"
    write(f"{d}/cpuset.cpus.effective", cpus + "\n")
    write(f"{d}/cpuset.mems.effective", mems + "\n")
    write(f"{d}/cgroup.procs", "".join(f"{p}\n" for p in pids))

def v2(root):
    write(f"{root}/proc/self/mountinfo",
          "25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
          "31 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n")
    cpuset_v2(root, "", "0-7", "0-1", [])
    # 100: pinned as decided, GPU on the same node: aligned. Its shared
    # library pages on NUMA 1 are page cache, not spilled memory.
    cg = "/sys/fs/cgroup/topoalign/alloc-a1"
    process(root, 100, "train", ["0::/topoalign/alloc-a1"], "2-3", "0",
            numa_maps({0: 2560}, {0: 3, 1: 500}),
            record("a1", "2-3", "0", "single-numa-node", cg, "cgroup-v2", ["GPU-0a"])
            + [("NVIDIA_VISIBLE_DEVICES", "GPU-0a"), ("CUDA_VISIBLE_DEVICES", "GPU-0a")],
            threads={100: "2-3", 101: "3"})
    cpuset_v2(root, "/topoalign/alloc-a1", "2-3", "0", [100])
    # 200: CPUs and memory on NUMA 1, its GPU on NUMA 0 (the sidecar case):
    # misaligned under single-numa-node.
    cg = "/sys/fs/cgroup/topoalign/alloc-a2"
    process(root, 200, "sidecar", ["0::/topoalign/alloc-a2"], "4-5", "1", numa_maps({1: 256}),
            record("a2", "4-5", "1", "single-numa-node", cg, "cgroup-v2", ["GPU-0a"])
            + [("NVIDIA_VISIBLE_DEVICES", "GPU-0a")])
    cpuset_v2(root, "/topoalign/alloc-a2", "4-5", "1", [200])
    # 300: decided CPU 6; something widened its cgroup to 6-7: drifted.
    cg = "/sys/fs/cgroup/topoalign/alloc-a3"
    process(root, 300, "worker", ["0::/topoalign/alloc-a3"], "6-7", "1", numa_maps({1: 256}),
            record("a3", "6", "1", "single-numa-node", cg, "cgroup-v2"), threads={300: "6-7", 301: "7"})
    cpuset_v2(root, "/topoalign/alloc-a3", "6-7", "1", [300])
    # 400: memory pinned to NUMA 0, 10 MiB of its heap on NUMA 1 (touched
    # before it was confined): memory spilled.
    cg = "/sys/fs/cgroup/topoalign/alloc-a4"
    process(root, 400, "db", ["0::/topoalign/alloc-a4"], "1", "0", numa_maps({0: 1000, 1: 2560}),
            record("a4", "1", "0", "single-numa-node", cg, "cgroup-v2"))
    cpuset_v2(root, "/topoalign/alloc-a4", "1", "0", [400])
    # 500: an ordinary process; its cgroup has no cpuset files (the
    # controller is not enabled there), so the root's apply: not placed.
    process(root, 500, "bash", ["0::/user.slice/session-1.scope"], "0-7", "0-1", numa_maps({0: 100, 1: 50}), [])
    write(f"{root}/sys/fs/cgroup/user.slice/session-1.scope/cgroup.procs", "500\n")

def v1(root):
    write(f"{root}/proc/self/mountinfo",
          "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
          "34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset\n"
          "36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices\n"
          "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n")
    cs = f"{root}/sys/fs/cgroup/cpuset"
    write(f"{cs}/cpuset.cpus", "0-7\n")
    write(f"{cs}/cpuset.mems", "0-1\n")
    write(f"{cs}/cpuset.effective_cpus", "0-7\n")
    write(f"{cs}/cpuset.effective_mems", "0-1\n")
    dv = f"{root}/sys/fs/cgroup/devices"
    write(f"{dv}/devices.list", "a *:* rwm\n")
    # 100: a run child pinned as decided under cgroup v1: aligned.
    cg = "/sys/fs/cgroup/cpuset/topoalign/alloc-a1"
    process(root, 100, "train", ["5:devices:/", "3:cpuset:/topoalign/alloc-a1", "0::/"], "0-1", "0",
            numa_maps({0: 4096}), record("a1", "0-1", "0", "restricted", cg, "cgroup-v1"))
    write(f"{cs}/topoalign/alloc-a1/cpuset.cpus", "0-1\n")
    write(f"{cs}/topoalign/alloc-a1/cpuset.mems", "0\n")
    write(f"{cs}/topoalign/alloc-a1/cpuset.effective_cpus", "0-1\n")
    write(f"{cs}/topoalign/alloc-a1/cpuset.effective_mems", "0\n")
    # 200: a container given GPU-0a that sees GPU-1a too: misaligned.
    path = "/kubepods/pod5e1f/4b2c"
    cg = f"/sys/fs/cgroup/cpuset{path}"
    process(root, 200, "inference", [f"5:devices:{path}", f"3:cpuset:{path}", "0::/"], "2-3", "0",
            numa_maps({0: 2048}),
            record("a2", "2-3", "0", "single-numa-node", cg, "cgroup-v1", ["GPU-0a"])
            + [("NVIDIA_VISIBLE_DEVICES", "GPU-0a,GPU-1a")])
    write(f"{cs}{path}/cpuset.cpus", "2-3\n")
    write(f"{cs}{path}/cpuset.mems", "0\n")
    write(f"{cs}{path}/cpuset.effective_cpus", "2-3\n")
    write(f"{cs}{path}/cpuset.effective_mems", "0\n")
    write(f"{dv}{path}/devices.list", "c 1:3 rwm\nc 195:0 rw\nc 195:1 rw\n")
    # 300: a container nothing decided here; its device cgroup lets it open
    # an InfiniBand device whose PCI function is on NUMA 1.
    path = "/kubepods/besteffort/pod77aa/9d0e"
    process(root, 300, "nginx", [f"5:devices:{path}", f"3:cpuset:{path}", "0::/"], "0-7", "0-1",
            numa_maps({0: 300}), [])
    write(f"{cs}{path}/cpuset.effective_cpus", "0-7\n")
    write(f"{cs}{path}/cpuset.effective_mems", "0-1\n")
    write(f"{dv}{path}/devices.list", "c 1:3 rwm\nc 231:192 rw\n")
    write(f"{root}/sys/dev/char/231:192/device/numa_node", "1\n")

STATE = "../kubelet-state/layouts"

def kubelet(root, driver="systemd"):
    """A node whose kubelet (systemd cgroup driver, cgroup v2) wrote the
    v1.32 checkpoints of ../kubelet-state/layouts/1.32, copied as they
    are (their checksums are the kubelet's): kubelet/var/lib/kubelet holds
    them, the configuration and the node's pods with the containers'
    statuses; kubelet/node.yaml is that scenario's machine (CPUs 0-7 and
    8-15 its siblings; 0-3,8-11 on NUMA 0; gpu0, nic0 on NUMA 0; gpu1, nic1
    on NUMA 1). The verdicts are in crates/cli/tests/verify.rs.

    With driver="cgroupfs" (kubelet-cgroupfs/): the same node, containers
    and verdicts under the cgroupfs driver's layout
    (kubepods/<qos>/pod<uid>/<id>) on a cgroup v1 cpuset hierarchy."""
    import json
    import yaml
    kd = f"{root}/var/lib/kubelet"
    for name in ["cpu_manager_state", "memory_manager_state", "device-plugins/kubelet_internal_checkpoint"]:
        os.makedirs(os.path.dirname(f"{kd}/{name}"), exist_ok=True)
        shutil.copyfile(f"{STATE}/1.32/{name}", f"{kd}/{name}")
    shutil.copyfile(f"{STATE}/kubelet-config.yaml", f"{kd}/config.yaml")
    with open(f"{STATE}/1.32/scenario.json") as f:
        topology = json.load(f)["topology"]
    write(f"{root}/node.yaml", "# The machine of ../../kubelet-state/layouts/1.32/scenario.json.\n"
          + yaml.safe_dump({"topology": topology}, sort_keys=False))
    with open(f"{STATE}/pods.yaml") as f:
        pods = yaml.safe_load(f)
    ids = {("train", "setup"): None, ("train", "log"): "a10c", ("train", "app"): "a11c",
           ("web", "web"): "b20c", ("db", "db"): "c30c", ("gpu2", "g"): "d50c"}
    for pod in pods["items"]:
        name = pod["metadata"]["name"]
        def status(c):
            cid = ids[(name, c["name"])]
            if cid is None:
                return {"name": c["name"], "containerID": "containerd://" + "f" * 60 + "01",
                        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
            return {"name": c["name"], "containerID": "containerd://" + cid * 16, "state": {"running": {}}}
        pod["status"] = {"phase": "Running",
                         "containerStatuses": [status(c) for c in pod["spec"]["containers"]]}
        if pod["spec"].get("initContainers"):
            pod["status"]["initContainerStatuses"] = [status(c) for c in pod["spec"]["initContainers"]]
    write(f"{kd}/pods.yaml", yaml.safe_dump(pods, sort_keys=False))
    # The kubelet's log links, one per container it started (the completed
    # init container's too): /var/log/containers/<pod>_<ns>_<container>-<id>.log
    # -> /var/log/pods/<ns>_<pod>_<uid>/<container>/0.log. verify
    # --containers finds ids and UIDs there when it has no pods file.
    os.makedirs(f"{root}/var/log/containers", exist_ok=True)
    for pod in pods["items"]:
        meta = pod["metadata"]
        for c in pod["status"].get("initContainerStatuses", []) + pod["status"]["containerStatuses"]:
            cid = c["containerID"].split("://")[1]
            os.symlink(f"/var/log/pods/{meta['namespace']}_{meta['name']}_{meta['uid']}/{c['name']}/0.log",
                       f"{root}/var/log/containers/{meta['name']}_{meta['namespace']}_{c['name']}-{cid}.log")
    if driver == "systemd":
        write(f"{root}/proc/self/mountinfo",
              "25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
              "31 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n")
        cpuset_v2(root, "", "0-15", "0-1", [])
    else:
        write(f"{root}/proc/self/mountinfo",
              "25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
              "31 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755\n"
              "35 31 0:30 / /sys/fs/cgroup/cpuset rw,nosuid,nodev,noexec,relatime shared:13 - cgroup cgroup rw,cpuset\n")
        write(f"{root}/sys/fs/cgroup/cpuset/cpuset.effective_cpus", "0-15\n")
        write(f"{root}/sys/fs/cgroup/cpuset/cpuset.effective_mems", "0-1\n")
    def container(pid, comm, uid, qos, cid, cpus, mems, maps, env, extra=()):
        pids = [pid] + [p for p, _ in extra]
        if driver == "systemd":
            slice_ = "kubepods.slice" if qos == "" else f"kubepods.slice/kubepods-{qos}.slice"
            prefix = "kubepods" if qos == "" else f"kubepods-{qos}"
            path = f"/{slice_}/{prefix}-pod{uid.replace('-', '_')}.slice/cri-containerd-{cid * 16}.scope"
            lines = [f"0::{path}"]
            cpuset_v2(root, path, cpus, mems, pids)
        else:
            path = "/kubepods" + ("" if qos == "" else f"/{qos}") + f"/pod{uid}/{cid * 16}"
            lines = [f"4:cpuset:{path}", f"2:cpu,cpuacct:{path}", "0::/"]
            d = f"{root}/sys/fs/cgroup/cpuset{path}"
            write(f"{d}/cpuset.effective_cpus", cpus + "\n")
            write(f"{d}/cpuset.effective_mems", mems + "\n")
            write(f"{d}/cgroup.procs", "".join(f"{p}\n" for p in pids))
        for p, c in [(pid, comm)] + list(extra):
            process(root, p, c, lines, cpus, mems, maps, env)
    uid = "00000000-0000-0000-0000-0000000000"
    # ml/train app: CPUs 2,10 and memory on NUMA 0 as the checkpoints say,
    # its GPU gpu0 (NUMA 0) the only one it sees; a shell beside it: aligned.
    container(1001, "train", uid + "01", "", "a11c", "2,10", "0", numa_maps({0: 2048}),
              [("NVIDIA_VISIBLE_DEVICES", "gpu0")], extra=[(1002, "sh")])
    # ml/train log (a sidecar): CPU 1, memory on NUMA 0: aligned. Its init
    # container setup completed: nothing to check.
    container(1010, "log", uid + "01", "", "a10c", "1", "0", numa_maps({0: 64}), [])
    # default/web (Burstable): the shared pool, memory pinned to NUMA 0: aligned.
    container(1020, "web", uid + "02", "burstable", "b20c", "0,5-8,12-15", "0", numa_maps({0: 256}), [])
    # default/db: decided CPUs 3,11; its cpuset was widened to 3-4,11
    # (CPU 4 is on NUMA 1) behind the kubelet's back: drifted.
    container(1030, "db", uid + "03", "", "c30c", "3-4,11", "0", numa_maps({0: 512}), [])
    # default/gpu2 g: CPU 4 and memory on NUMA 1 as decided with gpu1, but
    # it sees gpu0 (NUMA 0), not its own GPU: misaligned.
    container(1050, "g", uid + "05", "", "d50c", "4", "1", numa_maps({1: 512}),
              [("NVIDIA_VISIBLE_DEVICES", "gpu0")])
    # Not a container: left alone.
    if driver == "systemd":
        process(root, 500, "bash", ["0::/user.slice/session-1.scope"], "0-15", "0-1", numa_maps({0: 100}), [])
        write(f"{root}/sys/fs/cgroup/user.slice/session-1.scope/cgroup.procs", "500\n")
    else:
        process(root, 500, "bash", ["4:cpuset:/", "0::/user.slice/session-1.scope"], "0-15", "0-1",
                numa_maps({0: 100}), [])

for name, build in [("v1", v1), ("v2", v2), ("kubelet", kubelet),
                    ("kubelet-cgroupfs", lambda root: kubelet(root, "cgroupfs"))]:
    shutil.rmtree(name, ignore_errors=True)
    build(name)
