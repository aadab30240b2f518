//! The inputs of a judgement: the machine's NUMA layout, what the kernel
//! applies, what was decided.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use topoalign_model::CpuSet;
use topoalign_topology_manager::TopologyPolicyName;

/// NUMA node ids.
pub type NodeSet = BTreeSet<usize>;

/// A node set in the kernel's list syntax (`0-1,3`); empty for none.
pub fn nodes_text(nodes: &NodeSet) -> String {
    nodes
        .iter()
        .filter_map(|&n| u32::try_from(n).ok())
        .collect::<CpuSet>()
        .to_string()
}

/// The machine's NUMA nodes and the CPUs whose home each is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NumaLayout {
    cpus: BTreeMap<usize, CpuSet>,
}

impl NumaLayout {
    /// From (node id, its CPUs) pairs.
    pub fn new(nodes: impl IntoIterator<Item = (usize, CpuSet)>) -> NumaLayout {
        NumaLayout {
            cpus: nodes.into_iter().collect(),
        }
    }

    /// The NUMA nodes `cpus` belong to (CPUs of no known node add none).
    pub fn nodes_of(&self, cpus: &CpuSet) -> NodeSet {
        self.cpus
            .iter()
            .filter(|(_, home)| home.intersects(cpus))
            .map(|(&node, _)| node)
            .collect()
    }

    /// How many NUMA nodes the machine has.
    pub fn node_count(&self) -> usize {
        self.cpus.len()
    }
}

/// What the kernel applies to a process (or, summed, a container's
/// processes).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Applied {
    /// The cpuset cgroup the process is in, when it could be read.
    pub cgroup: Option<CgroupCpuset>,
    /// The CPUs its threads may run on: the union of their
    /// `Cpus_allowed_list` (affinity, already bounded by the cpuset).
    pub cpus: CpuSet,
    /// `Mems_allowed_list`: the memory nodes its cpuset allows.
    #[serde(serialize_with = "node_list")]
    pub mems_allowed: NodeSet,
    /// The nodes of an `MPOL_BIND` memory policy, when every mapping of
    /// the process is bound to the same ones (`numa_maps` says `bind:N`).
    #[serde(serialize_with = "optional_node_list")]
    pub memory_bind: Option<NodeSet>,
    /// Resident memory per NUMA node (`numa_maps`); `None` when it could
    /// not be read.
    pub memory: Option<MemoryByNode>,
    /// The devices it can open, as far as can be told.
    pub devices: AppliedDevices,
}

impl Applied {
    /// The memory nodes the process may allocate on: the cpuset's,
    /// narrowed by a bind policy.
    pub fn memory_nodes(&self) -> NodeSet {
        match &self.memory_bind {
            Some(bind) => self.mems_allowed.intersection(bind).copied().collect(),
            None => self.mems_allowed.clone(),
        }
    }
}

/// A process's cpuset cgroup.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CgroupCpuset {
    /// `cgroup-v1` or `cgroup-v2`.
    pub version: String,
    /// The cgroup's directory.
    pub path: String,
    /// `cpuset.cpus.effective` (v2) / `cpuset.effective_cpus` (v1).
    pub cpus: Option<CpuSet>,
    /// `cpuset.mems.effective` (v2) / `cpuset.effective_mems` (v1).
    #[serde(serialize_with = "optional_node_list")]
    pub mems: Option<NodeSet>,
}

/// Resident bytes per NUMA node, by kind of memory (`numa_maps`: pages ×
/// the mapping's page size).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryByNode {
    /// Anonymous memory (heap, stacks, written private mappings): what the
    /// process itself allocated.
    pub anonymous: BTreeMap<usize, u64>,
    /// Huge pages (hugetlbfs mappings).
    pub huge_pages: BTreeMap<usize, u64>,
    /// Page cache of mapped files: shared with every process that maps the
    /// file, placed by whoever read it first, so not counted as spilled.
    pub file: BTreeMap<usize, u64>,
}

impl MemoryByNode {
    /// Anonymous memory and huge pages per node: the process's own memory.
    pub fn own(&self) -> BTreeMap<usize, u64> {
        let mut own = self.anonymous.clone();
        for (&node, &bytes) in &self.huge_pages {
            *own.entry(node).or_default() += bytes;
        }
        own
    }

    /// Adds another process's memory (a container's processes).
    pub fn add(&mut self, other: &MemoryByNode) {
        for (mine, theirs) in [
            (&mut self.anonymous, &other.anonymous),
            (&mut self.huge_pages, &other.huge_pages),
            (&mut self.file, &other.file),
        ] {
            for (&node, &bytes) in theirs {
                *mine.entry(node).or_default() += bytes;
            }
        }
    }
}

/// The devices a process can open.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum AppliedDevices {
    /// Nothing says (no device cgroup rules, no visibility variable).
    #[default]
    Unknown,
    /// Not readable, and why (cgroup v2's device controller is an eBPF
    /// program the kernel does not show).
    Unreadable { reason: String },
    /// What a source lists.
    Listed {
        source: DeviceSource,
        /// Every device (`a *:* rwm`, `NVIDIA_VISIBLE_DEVICES=all`).
        all: bool,
        devices: Vec<VisibleDevice>,
    },
}

/// Where a list of visible devices comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind", content = "name")]
pub enum DeviceSource {
    /// A visibility variable in the process's environment
    /// (`NVIDIA_VISIBLE_DEVICES`, `CUDA_VISIBLE_DEVICES`): device ids as a
    /// device plugin or `topoalign run` names them.
    Environment(String),
    /// The v1 device cgroup's `devices.list`: `c 195:0` rules, whose ids
    /// are not a device plugin's.
    DeviceCgroup(String),
}

/// One device a process can see.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VisibleDevice {
    pub id: String,
    /// Its NUMA node(s), when known.
    #[serde(serialize_with = "optional_node_list")]
    pub numa: Option<NodeSet>,
}

/// What was decided for a process or container.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decided {
    /// Who decided, for people: `topoalign run allocation a1`, `kubelet
    /// checkpoints`.
    pub by: String,
    pub cpus: DecidedCpus,
    /// The NUMA nodes its memory was pinned to; `None`: not pinned.
    #[serde(serialize_with = "optional_node_list")]
    pub memory_nodes: Option<NodeSet>,
    pub devices: Vec<DecidedDevice>,
    /// The cgroup the decision made for it, when it made one: there its
    /// cpuset must be exactly the decided CPUs.
    pub cgroup: Option<String>,
    /// The topology manager policy it was admitted under.
    #[serde(serialize_with = "policy_name")]
    pub policy: Option<TopologyPolicyName>,
    /// The decision was recorded but not enforced (`run --no-enforce`).
    pub not_enforced: bool,
}

/// Decided CPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum DecidedCpus {
    /// Exclusive CPUs: exactly these, the workload's alone.
    Exclusive { cpus: CpuSet },
    /// The shared pool; `pool` is the pool as it is now when known (it
    /// changes as exclusive CPUs are given and taken back).
    Shared { pool: Option<CpuSet> },
}

/// One decided device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DecidedDevice {
    pub resource: String,
    pub id: String,
    #[serde(serialize_with = "optional_node_list")]
    pub numa: Option<NodeSet>,
}

fn node_list<S: serde::Serializer>(nodes: &NodeSet, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&nodes_text(nodes))
}

fn optional_node_list<S: serde::Serializer>(nodes: &Option<NodeSet>, serializer: S) -> Result<S::Ok, S::Error> {
    match nodes {
        Some(nodes) => serializer.collect_str(&nodes_text(nodes)),
        None => serializer.serialize_none(),
    }
}

fn policy_name<S: serde::Serializer>(policy: &Option<TopologyPolicyName>, serializer: S) -> Result<S::Ok, S::Error> {
    match policy {
        Some(policy) => serializer.serialize_str(policy.as_str()),
        None => serializer.serialize_none(),
    }
}
