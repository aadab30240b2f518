//! The judgement, table-driven: a machine of two NUMA nodes (CPUs 0-3 on
//! node 0, 4-7 on node 1), a placement decided, what the kernel applies,
//! and the verdict with its findings in words.

use std::collections::BTreeMap;

use topoalign_model::CpuSet;
use topoalign_topology_manager::TopologyPolicyName;
use topoalign_topology_manager::TopologyPolicyName::{BestEffort, Restricted, SingleNumaNode};
use topoalign_verify::{
    Applied, AppliedDevices, CgroupCpuset, Decided, DecidedCpus, DecidedDevice, DeviceSource, MemoryByNode, NodeSet,
    NumaLayout, Subject, Summary, Verdict, VisibleDevice, judge,
};

const MIB: u64 = 1024 * 1024;

fn layout() -> NumaLayout {
    NumaLayout::new([(0, cpus("0-3")), (1, cpus("4-7"))])
}

fn cpus(list: &str) -> CpuSet {
    CpuSet::parse(list).unwrap_or_default()
}

fn nodes(list: &[usize]) -> NodeSet {
    list.iter().copied().collect()
}

/// A process confined to `cpus`, memory nodes `mems`, `own` bytes per node
/// of anonymous memory.
fn applied(cpu_list: &str, mems: &[usize], own: &[(usize, u64)]) -> Applied {
    Applied {
        cgroup: None,
        cpus: cpus(cpu_list),
        mems_allowed: nodes(mems),
        memory_bind: None,
        memory: Some(MemoryByNode {
            anonymous: own.iter().copied().collect(),
            ..MemoryByNode::default()
        }),
        devices: AppliedDevices::Unknown,
    }
}

fn exclusive(cpu_list: &str, mems: Option<&[usize]>, policy: TopologyPolicyName) -> Decided {
    Decided {
        by: "test".into(),
        cpus: DecidedCpus::Exclusive { cpus: cpus(cpu_list) },
        memory_nodes: mems.map(nodes),
        devices: Vec::new(),
        cgroup: None,
        policy: Some(policy),
        not_enforced: false,
    }
}

fn gpu(id: &str, node: usize) -> DecidedDevice {
    DecidedDevice {
        resource: "nvidia.com/gpu".into(),
        id: id.into(),
        numa: Some(nodes(&[node])),
    }
}

fn visible(ids: &[(&str, usize)]) -> AppliedDevices {
    AppliedDevices::Listed {
        source: DeviceSource::Environment("NVIDIA_VISIBLE_DEVICES".into()),
        all: false,
        devices: ids
            .iter()
            .map(|(id, node)| VisibleDevice {
                id: (*id).into(),
                numa: Some(nodes(&[*node])),
            })
            .collect(),
    }
}

fn subject() -> Subject {
    Subject::Process {
        pid: 42,
        command: "job".into(),
    }
}

/// (name, what is applied, what was decided, expected verdict, expected
/// findings in words).
type Case = (&'static str, Applied, Option<Decided>, Verdict, Vec<&'static str>);

#[test]
fn verdicts() {
    let with_cgroup = |mut a: Applied, path: &str, cgroup_cpus: &str| {
        a.cgroup = Some(CgroupCpuset {
            version: "cgroup-v2".into(),
            path: path.into(),
            cpus: Some(cpus(cgroup_cpus)),
            mems: None,
        });
        a
    };
    let in_cgroup = |mut d: Decided, path: &str| {
        d.cgroup = Some(path.into());
        d
    };
    let with_devices = |mut a: Applied, devices: AppliedDevices| {
        a.devices = devices;
        a
    };
    let deciding_gpus = |mut d: Decided, gpus: Vec<DecidedDevice>| {
        d.devices = gpus;
        d
    };
    let shared = |pool: Option<&str>| Decided {
        by: "test".into(),
        cpus: DecidedCpus::Shared { pool: pool.map(cpus) },
        memory_nodes: None,
        devices: Vec::new(),
        cgroup: None,
        policy: Some(SingleNumaNode),
        not_enforced: false,
    };
    let cases: Vec<Case> = vec![
        (
            "pinned as decided",
            applied("1-2", &[0], &[(0, 64 * MIB)]),
            Some(exclusive("1-2", Some(&[0]), SingleNumaNode)),
            Verdict::Aligned,
            vec![],
        ),
        (
            "nothing decided",
            applied("0-7", &[0, 1], &[(0, MIB), (1, MIB)]),
            None,
            Verdict::NotPlaced,
            vec![],
        ),
        (
            "CPUs moved by someone else",
            applied("5", &[0], &[(0, MIB)]),
            Some(exclusive("1", Some(&[0]), BestEffort)),
            Verdict::Drifted,
            vec!["drifted: CPUs 5, decided 1"],
        ),
        (
            "CPUs moved to the other node under single-numa-node: drift and its effect",
            applied("5", &[0], &[(0, MIB)]),
            Some(exclusive("1", Some(&[0]), SingleNumaNode)),
            Verdict::Drifted,
            vec![
                "drifted: CPUs 5, decided 1",
                "misaligned: cpu on NUMA 1, single-numa-node promised NUMA 0",
            ],
        ),
        (
            "its cgroup's cpuset narrowed by someone else",
            with_cgroup(applied("1", &[0], &[]), "/sys/fs/cgroup/x", "1"),
            Some(in_cgroup(exclusive("1-2", None, BestEffort), "/sys/fs/cgroup/x")),
            Verdict::Drifted,
            vec!["drifted: its cgroup's cpuset 1, decided 1-2"],
        ),
        (
            "a thread narrowed its own affinity: not drift",
            applied("1", &[0], &[]),
            Some(exclusive("1-2", None, BestEffort)),
            Verdict::Aligned,
            vec![],
        ),
        (
            "memory nodes widened",
            applied("1", &[0, 1], &[(0, MIB)]),
            Some(exclusive("1", Some(&[0]), BestEffort)),
            Verdict::Drifted,
            vec!["drifted: memory nodes 0-1, decided 0"],
        ),
        (
            "memory first touched on the other node",
            applied("1", &[0], &[(0, 10 * MIB), (1, 3 * MIB)]),
            Some(exclusive("1", Some(&[0]), SingleNumaNode)),
            Verdict::MemorySpilled,
            vec!["memory spilled: 3.0 MiB on NUMA 1 (3.0 MiB), pinned to NUMA 0"],
        ),
        (
            "memory not pinned: remote memory is a note, not a spill",
            applied("1", &[0, 1], &[(1, 3 * MIB)]),
            Some(exclusive("1", None, SingleNumaNode)),
            Verdict::Aligned,
            vec![],
        ),
        (
            "a GPU on the other node than the CPUs (the sidecar case)",
            with_devices(applied("1", &[0], &[]), visible(&[("GPU-1a", 1)])),
            Some(deciding_gpus(
                exclusive("1", Some(&[0]), SingleNumaNode),
                vec![gpu("GPU-1a", 1)],
            )),
            Verdict::Misaligned,
            // The decision spans two nodes; each resource is held to the
            // CPUs' node, so the one elsewhere is named.
            vec!["misaligned: nvidia.com/gpu on NUMA 1, single-numa-node promised NUMA 0"],
        ),
        (
            "restricted: resources within the decided nodes are aligned",
            with_devices(applied("1,4", &[0, 1], &[]), visible(&[("GPU-1a", 1)])),
            Some(deciding_gpus(
                exclusive("1,4", Some(&[0, 1]), Restricted),
                vec![gpu("GPU-1a", 1)],
            )),
            Verdict::Aligned,
            vec![],
        ),
        (
            "sees a GPU that is not its own",
            with_devices(applied("1", &[0], &[]), visible(&[("GPU-0a", 0), ("GPU-0b", 0)])),
            Some(deciding_gpus(exclusive("1", None, BestEffort), vec![gpu("GPU-0a", 0)])),
            Verdict::Misaligned,
            vec!["misaligned: devices not its own visible: GPU-0b"],
        ),
        (
            "shared pool, current pool known, outside it",
            applied("0-2", &[0], &[]),
            Some(shared(Some("0,2-3"))),
            Verdict::Drifted,
            vec!["drifted: CPUs 0-2, decided 0,2-3"],
        ),
        (
            "shared pool, pool not known: nothing to hold it to",
            applied("0-7", &[0, 1], &[(1, MIB)]),
            Some(shared(None)),
            Verdict::Aligned,
            vec![],
        ),
    ];
    for (name, applied, decided, verdict, findings) in cases {
        let report = judge(subject(), &layout(), applied, decided);
        let words: Vec<String> = report.findings.iter().map(ToString::to_string).collect();
        assert_eq!(
            (report.verdict, words),
            (verdict, findings.iter().map(ToString::to_string).collect()),
            "{name}"
        );
    }
}

#[test]
fn a_process_nothing_decided_says_where_it_runs() {
    let report = judge(subject(), &layout(), applied("4-5", &[1], &[]), None);
    assert_eq!(report.verdict, Verdict::NotPlaced);
    assert_eq!(report.placement.cpu_nodes, nodes(&[1]));
    assert!(
        report.notes.iter().any(|n| n.contains("CPUs 4-5 (NUMA 1)")),
        "{:?}",
        report.notes
    );
}

#[test]
fn a_bind_policy_narrows_the_memory_nodes() {
    // Affinity enforcement: the cpuset allows both nodes, MPOL_BIND one.
    let mut bound = applied("1", &[0, 1], &[(0, MIB)]);
    bound.memory_bind = Some(nodes(&[0]));
    let report = judge(
        subject(),
        &layout(),
        bound,
        Some(exclusive("1", Some(&[0]), SingleNumaNode)),
    );
    assert_eq!(report.verdict, Verdict::Aligned, "{:?}", report.findings);
    assert_eq!(report.placement.memory_nodes, nodes(&[0]));
}

#[test]
fn file_pages_do_not_spill() {
    let mut shared_libraries = applied("1", &[0], &[(0, MIB)]);
    if let Some(memory) = shared_libraries.memory.as_mut() {
        memory.file = BTreeMap::from([(1, 40 * MIB)]);
    }
    let report = judge(
        subject(),
        &layout(),
        shared_libraries,
        Some(exclusive("1", Some(&[0]), SingleNumaNode)),
    );
    assert_eq!(report.verdict, Verdict::Aligned);
}

#[test]
fn the_summary_counts_verdicts_and_spilled_bytes() {
    let reports = vec![
        judge(
            subject(),
            &layout(),
            applied("1", &[0], &[]),
            Some(exclusive("1", Some(&[0]), SingleNumaNode)),
        ),
        judge(
            subject(),
            &layout(),
            applied("1", &[0], &[(1, 2 * MIB)]),
            Some(exclusive("1", Some(&[0]), SingleNumaNode)),
        ),
        judge(
            subject(),
            &layout(),
            applied("5", &[0], &[]),
            Some(exclusive("1", None, BestEffort)),
        ),
        judge(subject(), &layout(), applied("0-7", &[0, 1], &[]), None),
    ];
    let summary = Summary::of(&reports);
    assert_eq!(
        (
            summary.total,
            summary.aligned,
            summary.memory_spilled,
            summary.drifted,
            summary.not_placed
        ),
        (4, 1, 1, 1, 1)
    );
    assert_eq!(summary.spilled_bytes, 2 * MIB);
    assert!(!summary.all_kept());
    assert_eq!(
        summary.to_string(),
        "4 checked: 1 aligned, 1 drifted, 0 misaligned, 1 memory spilled (2.0 MiB in all), 1 not placed"
    );
    assert!(Summary::of(&reports[..1]).all_kept());
    assert!(Summary::of(&reports[3..]).all_kept());
}

#[test]
fn reports_are_json_with_list_syntax() -> Result<(), serde_json::Error> {
    let report = judge(
        subject(),
        &layout(),
        applied("1", &[0], &[(1, MIB)]),
        Some(exclusive("1", Some(&[0]), SingleNumaNode)),
    );
    let json = serde_json::to_value(&report)?;
    assert_eq!(json["verdict"], "memory-spilled");
    assert_eq!(json["findings"][0]["kind"], "memorySpilled");
    assert_eq!(json["findings"][0]["allowed"], "0");
    assert_eq!(json["placement"]["cpus"], "1");
    assert_eq!(json["decided"]["policy"], "single-numa-node");
    assert_eq!(json["subject"]["kind"], "process");
    Ok(())
}
