//! `verify_containers` on machines whose NUMA nodes are numbered anew (ids
//! past 63, or more than 64 nodes): the kernel names a container's NUMA
//! nodes by the machine's own ids (`Mems_allowed_list`, `cpuset.mems`,
//! `numa_maps`), and so must the layout and the devices it is judged
//! against. Each machine is checked against the machine renumbered
//! `0..n`: the same decision and the same processes (their ids mapped)
//! give the same report, ids mapped.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test reports failure

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};
use topoalign_engine::Node;
use topoalign_host::Host;
use topoalign_model::{Machine, UniformMachine};
use topoalign_observe::{RunningContainer, verify_containers};
use topoalign_verify::Report;

/// One container's process as the kernel shows it.
struct Process {
    pid: u32,
    uid: String,
    id: String,
    cpus: String,
    /// `Mems_allowed_list` and `cpuset.mems.effective`: kernel ids.
    mems: String,
    /// Anonymous pages per kernel NUMA id.
    pages: Vec<(usize, u64)>,
    visible: Option<String>,
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A host under `root` running `processes` in the systemd driver's
/// cgroup v2 layout.
fn fake_host(root: &Path, processes: &[Process]) -> Host {
    write(
        &root.join("proc/self/mountinfo"),
        "25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n\
         31 25 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n",
    );
    for p in processes {
        let cgroup = format!(
            "kubepods.slice/kubepods-pod{}.slice/cri-containerd-{}.scope",
            p.uid.replace('-', "_"),
            p.id
        );
        let dir = root.join("proc").join(p.pid.to_string());
        write(
            &dir.join("status"),
            &format!(
                "Name:\tapp\nState:\tS (sleeping)\nTgid:\t{0}\nPid:\t{0}\nCpus_allowed_list:\t{1}\nMems_allowed_list:\t{2}\n",
                p.pid, p.cpus, p.mems
            ),
        );
        write(&dir.join("comm"), "app\n");
        write(&dir.join("cgroup"), &format!("0::/{cgroup}\n"));
        let mut maps = String::new();
        for (i, (node, pages)) in p.pages.iter().enumerate() {
            maps.push_str(&format!(
                "7f00{i:08x} default anon={pages} dirty={pages} N{node}={pages} kernelpagesize_kB=4\n"
            ));
        }
        write(&dir.join("numa_maps"), &maps);
        let environ = p.visible.as_ref().map_or_else(
            || "PATH=/bin\0".to_owned(),
            |v| format!("PATH=/bin\0NVIDIA_VISIBLE_DEVICES={v}\0"),
        );
        write(&dir.join("environ"), &environ);
        let cgroup_dir = root.join("sys/fs/cgroup").join(&cgroup);
        write(&cgroup_dir.join("cpuset.cpus.effective"), &format!("{}\n", p.cpus));
        write(&cgroup_dir.join("cpuset.mems.effective"), &format!("{}\n", p.mems));
        write(&cgroup_dir.join("cgroup.procs"), &format!("{}\n", p.pid));
    }
    Host::under(root)
}

fn pod(name: &str, limits: &Value) -> topoalign_model::Pod {
    let manifest = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}")},
        "spec": {"containers": [{"name": "app", "image": "pause", "resources": {"limits": limits}}]},
    });
    topoalign_k8s::pod_from_value(&manifest, "unused").unwrap()
}

/// The kernel's view of `node`'s container `app` of `name`: its
/// exclusive CPUs, its memory on the nodes the kubelet decided (the
/// pinned ones, else its CPUs'), 100 pages there, its devices visible.
fn process(node: &Node, pid: u32, name: &str) -> Process {
    let machine = node.machine();
    let uid = format!("uid-{name}");
    let snapshot = node.snapshot();
    let cpus = snapshot.cpu.assignments[&uid]["app"].clone();
    let mut nodes: Vec<usize> = match snapshot.memory.as_ref().and_then(|m| m.assignments.get(&uid)) {
        Some(containers) => containers["app"].iter().flat_map(|b| b.numa_affinity.clone()).collect(),
        None => machine
            .cpus()
            .iter()
            .filter(|c| cpus.contains(c.id))
            .map(|c| c.numa)
            .collect(),
    };
    nodes.sort_unstable();
    nodes.dedup();
    let labels: Vec<usize> = nodes.iter().map(|&n| machine.numa_label(n)).collect();
    let visible: Vec<String> = snapshot
        .devices
        .get(&uid)
        .and_then(|c| c.get("app"))
        .into_iter()
        .flat_map(|r| r.values().flatten().cloned())
        .collect();
    Process {
        pid,
        uid,
        id: format!("c{pid:x}"),
        cpus: cpus.to_string(),
        mems: labels.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
        pages: labels.iter().map(|&l| (l, 100)).collect(),
        visible: (!visible.is_empty()).then(|| visible.join(",")),
    }
}

fn running(process: &Process, name: &str) -> RunningContainer {
    RunningContainer {
        namespace: "default".into(),
        pod: name.into(),
        uid: process.uid.clone(),
        container: "app".into(),
        id: Some(process.id.clone()),
    }
}

/// The reports of `names`' containers on `node`, their processes on a
/// fake host.
fn reports(node: &Node, names: &[&str]) -> Vec<Report> {
    let root = tempfile::tempdir().unwrap();
    let processes: Vec<Process> = (0..names.len())
        .map(|i| process(node, 1000 + u32::try_from(i).unwrap(), names[i]))
        .collect();
    let host = fake_host(root.path(), &processes);
    let containers: Vec<RunningContainer> = processes.iter().zip(names).map(|(p, n)| running(p, n)).collect();
    let verified = verify_containers(node, &containers, &host).unwrap();
    assert!(verified.not_found.is_empty(), "{:?}", verified.not_found);
    verified.reports
}

/// `report` (as JSON) with every NUMA id of `renumbered` written as
/// `labelled`'s: node lists, per-node maps and the ids in its notes.
fn mapped(report: &Report, renumbered: &Machine, labelled: &Machine) -> Value {
    let map: BTreeMap<usize, usize> = renumbered
        .numa_nodes()
        .iter()
        .map(|n| (renumbered.numa_label(n.id), labelled.numa_label(n.id)))
        .collect();
    let mut value = serde_json::to_value(report).unwrap();
    relabel(&mut value, &map, None);
    value
}

/// A node list as the report writes it (`0-1,4`), ids mapped.
fn map_list(text: &str, map: &BTreeMap<usize, usize>) -> String {
    let nodes = topoalign_model::CpuSet::parse(text).unwrap();
    let mapped: topoalign_verify::NodeSet = nodes.iter().map(|n| map[&(n as usize)]).collect();
    topoalign_verify::nodes_text(&mapped)
}

/// The NUMA ids in `value`: node lists (texts, or arrays of ids) under
/// `key`s that hold them, keys of per-node maps, and `NUMA <list>` in
/// texts.
fn relabel(value: &mut Value, map: &BTreeMap<usize, usize>, key: Option<&str>) {
    let nodes = key.is_some_and(|k| ["mems", "memsAllowed", "memoryBind", "numa"].contains(&k) || k.ends_with("Nodes"));
    match value {
        Value::String(text) if nodes => *text = map_list(text, map),
        Value::String(text) => *text = relabel_text(text, map),
        Value::Array(items) if nodes => {
            for item in items {
                let n = usize::try_from(item.as_u64().unwrap()).unwrap();
                *item = map[&n].into();
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| relabel(v, map, key)),
        Value::Object(fields) => {
            let by_node = key.is_some_and(|k| ["ownMemory", "anonymous", "hugePages", "file", "byNode"].contains(&k));
            let per_resource = key == Some("deviceNodes");
            let mut renamed = serde_json::Map::new();
            for (k, mut v) in std::mem::take(fields) {
                relabel(&mut v, map, Some(if per_resource { "numa" } else { &k }));
                let k = match k.parse::<usize>() {
                    Ok(n) if by_node => map[&n].to_string(),
                    _ => k,
                };
                renamed.insert(k, v);
            }
            *fields = renamed;
        }
        _ => {}
    }
}

/// `NUMA <list>` in a text, ids mapped.
fn relabel_text(text: &str, map: &BTreeMap<usize, usize>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("NUMA ") {
        out.push_str(&rest[..at + 5]);
        rest = &rest[at + 5..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == ',' || c == '-'))
            .unwrap_or(rest.len());
        let list = rest[..end].trim_end_matches([',', '-']);
        out.push_str(&map_list(list, map));
        rest = &rest[list.len()..];
    }
    out.push_str(rest);
    out
}

/// Two NUMA nodes of 4 CPUs with a GPU each; on `{0, 64}` the second is
/// the engine's node 1 and the kernel's 64. Under `single-numa-node` (the
/// kubelet crashes admitting there, but a node restored from its state is
/// judged), a container pinned to the second node — CPUs, memory, GPU —
/// is aligned on both machines, named 1 and 64.
#[test]
fn numa_64_is_judged_as_the_kernel_names_it() {
    let machine = |ids: [usize; 2]| {
        UniformMachine::new(2, 4)
            .memory_per_numa(4 << 30)
            .device("nvidia.com/gpu", "gpu0", &[0])
            .device("nvidia.com/gpu", "gpu1", &[1])
            .numa_ids(ids)
            .build()
            .unwrap()
    };
    let kubelet = |ids: [usize; 2]| {
        json!({
            "kubeletVersion": "1.32",
            "cpuManagerPolicy": "static",
            "reservedSystemCPUs": "0-3",
            "memoryManagerPolicy": "Static",
            "reservedMemory": ids.map(|id| json!({"numaNode": id, "limits": {"memory": "50Mi"}})),
            "topologyManagerPolicy": "single-numa-node",
        })
    };
    let (plain, wide) = (machine([0, 1]), machine([0, 64]));
    let mut renumbered = topoalign_k8s::start_node(plain.clone(), &kubelet([0, 1])).unwrap();
    let decision = renumbered.admit(pod("g", &json!({"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "1"})));
    assert!(decision.admitted(), "{decision:?}");
    let labelled = topoalign_k8s::start_node(wide.clone(), &kubelet([0, 64]))
        .unwrap()
        .restored(renumbered.snapshot())
        .unwrap();

    let expected = reports(&renumbered, &["g"]);
    let got = reports(&labelled, &["g"]);
    assert_eq!(expected.len(), 1);
    assert_eq!(expected[0].verdict.as_str(), "aligned", "{:?}", expected[0]);
    assert_eq!(expected[0].placement.cpu_nodes, [1].into());
    assert_eq!(got[0].placement.cpu_nodes, [64].into());
    assert_eq!(got[0].placement.device_nodes["nvidia.com/gpu"], [64].into());
    assert_eq!(
        serde_json::to_value(&got[0]).unwrap(),
        mapped(&expected[0], &plain, &wide)
    );
}

/// 72 NUMA nodes of 4 CPUs, one GPU on the 41st; once with ids 0-71, once
/// with ids 0-35 and 100-135. Under topology policy `none` (the one the
/// kubelet runs such a machine under) with the nodes' first 36 CPUs
/// reserved, a container's exclusive CPUs and its GPU are past the 36th
/// node: the same report on both, ids mapped — its memory on its CPUs'
/// node is not "on NUMA nodes other than its CPUs'".
#[test]
fn more_than_64_nodes_numbered_anew_are_judged_as_the_kernel_names_them() {
    let machine = |ids: Vec<usize>| {
        UniformMachine::new(72, 4)
            .device("nvidia.com/gpu", "gpu40", &[40])
            .numa_ids(ids)
            .build()
            .unwrap()
    };
    let kubelet = json!({
        "kubeletVersion": "1.37",
        "cpuManagerPolicy": "static",
        "reservedSystemCPUs": "0-143",
        "memoryManagerPolicy": "None",
        "topologyManagerPolicy": "none",
    });
    let plain = machine((0..72).collect());
    let wide = machine((0..36).chain(100..136).collect());
    assert!(!plain.fits_numa_masks() && !wide.fits_numa_masks());
    let mut renumbered = topoalign_k8s::start_node(plain.clone(), &kubelet).unwrap();
    for (name, limits) in [
        ("far", json!({"cpu": "4", "memory": "1Gi", "nvidia.com/gpu": "1"})),
        ("wide", json!({"cpu": "6", "memory": "1Gi"})),
    ] {
        let decision = renumbered.admit(pod(name, &limits));
        assert!(decision.admitted(), "{decision:?}");
    }
    let labelled = topoalign_k8s::start_node(wide.clone(), &kubelet)
        .unwrap()
        .restored(renumbered.snapshot())
        .unwrap();

    let expected = reports(&renumbered, &["far", "wide"]);
    let got = reports(&labelled, &["far", "wide"]);
    assert_eq!(got.len(), 2);
    for (got, expected) in got.iter().zip(&expected) {
        assert!(got.placement.cpu_nodes.iter().all(|&n| n >= 100), "{:?}", got.placement);
        assert!(
            !got.notes.iter().any(|n| n.contains("other than its CPUs'")),
            "{:?}",
            got.notes
        );
        assert_eq!(serde_json::to_value(got).unwrap(), mapped(expected, &plain, &wide));
    }
    assert_eq!(got[0].placement.device_nodes["nvidia.com/gpu"], [104].into());
}
