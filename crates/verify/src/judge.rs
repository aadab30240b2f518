//! The judgement: facts in, a [`Report`] out.
//!
//! The checks, in the order their findings are listed (the first sets the
//! [`Verdict`]):
//! 1. **drifted** — the CPUs the process may run on are not within the
//!    decided ones (or, in the cgroup the decision made, the cpuset is not
//!    exactly them; or a shared-pool workload runs outside the pool); the
//!    memory nodes it may allocate on are not within the pinned ones;
//! 2. **misaligned** — under `single-numa-node` every resource (exclusive
//!    CPUs, pinned memory, devices) must be on one and the same NUMA node,
//!    under `restricted` within the NUMA nodes of the decision; devices it
//!    can see that were not decided for it, or decided ones it cannot see;
//! 3. **memory spilled** — its own resident memory (anonymous and huge
//!    pages; not shared file pages) on NUMA nodes other than the pinned
//!    ones.
//!
//! A process nothing was decided for is **not placed**: the report says
//! where it runs and nothing is wrong with it.

use std::collections::BTreeMap;

use serde::Serialize;
use topoalign_model::{CpuSet, human_bytes};
use topoalign_topology_manager::TopologyPolicyName;

use crate::facts::{Applied, AppliedDevices, Decided, DecidedCpus, DeviceSource, NodeSet, NumaLayout, nodes_text};

/// What a report is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Subject {
    /// One process (`--pid`).
    Process { pid: u32, command: String },
    /// A Kubernetes container and its processes.
    #[serde(rename_all = "camelCase")]
    Container {
        namespace: String,
        pod: String,
        container: String,
        pids: Vec<u32>,
    },
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Subject::Process { pid, command } => write!(f, "pid {pid} ({command})"),
            Subject::Container {
                namespace,
                pod,
                container,
                ..
            } => write!(f, "{namespace}/{pod} {container}"),
        }
    }
}

/// The verdict on one process or container.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Everything decided is applied and the policy's promise is kept.
    Aligned,
    /// Nothing was decided for it; the report says where it runs.
    NotPlaced,
    /// Its CPUs or memory nodes changed since admission.
    Drifted,
    /// A resource is on a NUMA node the policy did not promise, or it sees
    /// devices other than its own.
    Misaligned,
    /// Some of its own memory is on NUMA nodes it was not pinned to.
    MemorySpilled,
}

impl Verdict {
    /// How it is written (`memory-spilled`).
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Aligned => "aligned",
            Verdict::NotPlaced => "not-placed",
            Verdict::Drifted => "drifted",
            Verdict::Misaligned => "misaligned",
            Verdict::MemorySpilled => "memory-spilled",
        }
    }

    /// Whether the placement is not kept (a non-zero exit).
    pub fn is_failure(self) -> bool {
        matches!(self, Verdict::Drifted | Verdict::Misaligned | Verdict::MemorySpilled)
    }
}

/// One thing that is not as decided or promised.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Finding {
    /// `resource` (`cpu`, `cpuset` — the decision's cgroup —, `memory`)
    /// is applied as `applied` where `decided` was decided (list syntax).
    Drifted {
        resource: String,
        decided: String,
        applied: String,
    },
    /// `resource` is on NUMA `nodes`; the policy promised `promised`.
    #[serde(rename_all = "camelCase")]
    Misaligned {
        resource: String,
        #[serde(serialize_with = "node_list")]
        nodes: NodeSet,
        #[serde(serialize_with = "node_list")]
        promised: NodeSet,
        policy: String,
    },
    /// Devices it can see that were not decided for it (`unexpected`),
    /// and decided ones it cannot see (`missing`).
    Devices {
        unexpected: Vec<String>,
        missing: Vec<String>,
    },
    /// `bytes` of its own memory on nodes outside `allowed`, per node.
    #[serde(rename_all = "camelCase")]
    MemorySpilled {
        bytes: u64,
        by_node: BTreeMap<usize, u64>,
        #[serde(serialize_with = "node_list")]
        allowed: NodeSet,
    },
}

impl Finding {
    fn verdict(&self) -> Verdict {
        match self {
            Finding::Drifted { .. } => Verdict::Drifted,
            Finding::Misaligned { .. } | Finding::Devices { .. } => Verdict::Misaligned,
            Finding::MemorySpilled { .. } => Verdict::MemorySpilled,
        }
    }
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Finding::Drifted {
                resource,
                decided,
                applied,
            } => {
                let what = match resource.as_str() {
                    "cpu" => "CPUs",
                    "cpuset" => "its cgroup's cpuset",
                    "memory" => "memory nodes",
                    other => other,
                };
                write!(f, "drifted: {what} {applied}, decided {decided}")
            }
            Finding::Misaligned {
                resource,
                nodes,
                promised,
                policy,
            } => write!(
                f,
                "misaligned: {resource} on NUMA {}, {policy} promised NUMA {}",
                nodes_text(nodes),
                nodes_text(promised)
            ),
            Finding::Devices { unexpected, missing } => {
                write!(f, "misaligned: devices")?;
                if !unexpected.is_empty() {
                    write!(f, " not its own visible: {}", unexpected.join(","))?;
                }
                if !missing.is_empty() {
                    if !unexpected.is_empty() {
                        write!(f, ";")?;
                    }
                    write!(f, " decided but not visible: {}", missing.join(","))?;
                }
                Ok(())
            }
            Finding::MemorySpilled {
                bytes,
                by_node,
                allowed,
            } => {
                write!(f, "memory spilled: {} on NUMA ", human_bytes(*bytes))?;
                let nodes: Vec<String> = by_node
                    .iter()
                    .map(|(node, bytes)| format!("{node} ({})", human_bytes(*bytes)))
                    .collect();
                write!(f, "{}, pinned to NUMA {}", nodes.join(", "), nodes_text(allowed))
            }
        }
    }
}

/// Where the process runs, in NUMA terms (derived from [`Applied`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    pub cpus: CpuSet,
    #[serde(serialize_with = "node_list")]
    pub cpu_nodes: NodeSet,
    /// The nodes it may allocate memory on.
    #[serde(serialize_with = "node_list")]
    pub memory_nodes: NodeSet,
    /// Its own resident memory (anonymous and huge pages) per node.
    pub own_memory: BTreeMap<usize, u64>,
    /// Per device resource, the NUMA nodes of the devices it sees (where
    /// known).
    pub device_nodes: BTreeMap<String, NodeSet>,
}

/// The judgement on one process or container.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub subject: Subject,
    pub verdict: Verdict,
    pub findings: Vec<Finding>,
    /// Things worth knowing that are not wrong.
    pub notes: Vec<String>,
    pub placement: Placement,
    pub decided: Option<Decided>,
    pub applied: Applied,
}

/// Judges `applied` against `decided` (and the policy it names) on a
/// machine of `layout`.
pub fn judge(subject: Subject, layout: &NumaLayout, applied: Applied, decided: Option<Decided>) -> Report {
    let placement = placement_of(layout, &applied, decided.as_ref());
    let mut findings = Vec::new();
    let mut notes = Vec::new();
    match &decided {
        None => {
            notes.push(format!(
                "nothing decided its placement: it may run on CPUs {} (NUMA {}) and allocate memory on NUMA {}",
                applied.cpus,
                nodes_text(&placement.cpu_nodes),
                nodes_text(&placement.memory_nodes)
            ));
        }
        Some(decided) => {
            check_drift(&applied, decided, &mut findings, &mut notes);
            check_devices(&applied, decided, &mut findings, &mut notes);
            check_promise(layout, &placement, decided, &mut findings, &mut notes);
            check_memory(&applied, &placement, decided, &mut findings, &mut notes);
            if decided.not_enforced {
                notes.push(format!("{} recorded this placement without enforcing it", decided.by));
            }
        }
    }
    let verdict = match (
        &decided,
        findings.iter().map(Finding::verdict).min_by_key(|v| severity(*v)),
    ) {
        (None, _) => Verdict::NotPlaced,
        (Some(_), None) => Verdict::Aligned,
        (Some(_), Some(worst)) => worst,
    };
    Report {
        subject,
        verdict,
        findings,
        notes,
        placement,
        decided,
        applied,
    }
}

/// Lower is more telling: drift names the cause, misalignment the effect.
fn severity(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Drifted => 0,
        Verdict::Misaligned => 1,
        Verdict::MemorySpilled => 2,
        Verdict::Aligned | Verdict::NotPlaced => 3,
    }
}

fn placement_of(layout: &NumaLayout, applied: &Applied, decided: Option<&Decided>) -> Placement {
    let mut device_nodes: BTreeMap<String, NodeSet> = BTreeMap::new();
    if let AppliedDevices::Listed { devices, .. } = &applied.devices {
        for device in devices {
            let resource = decided
                .and_then(|d| d.devices.iter().find(|decided| decided.id == device.id))
                .map_or("devices", |d| d.resource.as_str());
            let entry = device_nodes.entry(resource.to_string()).or_default();
            if let Some(numa) = &device.numa {
                entry.extend(numa);
            }
        }
    }
    device_nodes.retain(|_, nodes| !nodes.is_empty());
    Placement {
        cpus: applied.cpus.clone(),
        cpu_nodes: layout.nodes_of(&applied.cpus),
        memory_nodes: applied.memory_nodes(),
        own_memory: applied.memory.as_ref().map(|m| m.own()).unwrap_or_default(),
        device_nodes,
    }
}

fn check_drift(applied: &Applied, decided: &Decided, findings: &mut Vec<Finding>, notes: &mut Vec<String>) {
    let drifted = |resource: &str, decided: String, applied: String| Finding::Drifted {
        resource: resource.to_string(),
        decided,
        applied,
    };
    match &decided.cpus {
        DecidedCpus::Exclusive { cpus } => {
            let in_its_cgroup = applied
                .cgroup
                .as_ref()
                .filter(|cgroup| decided.cgroup.as_deref() == Some(cgroup.path.as_str()));
            if !applied.cpus.is_subset(cpus) {
                findings.push(drifted("cpu", cpus.to_string(), applied.cpus.to_string()));
            } else if let Some(cgroup_cpus) = in_its_cgroup.and_then(|c| c.cpus.as_ref())
                && cgroup_cpus != cpus
            {
                findings.push(drifted("cpuset", cpus.to_string(), cgroup_cpus.to_string()));
            } else if &applied.cpus != cpus {
                notes.push(format!(
                    "its threads use CPUs {} of its {}: it narrowed its own affinity",
                    applied.cpus, cpus
                ));
            }
        }
        DecidedCpus::Shared { pool: Some(pool) } => {
            if !applied.cpus.is_subset(pool) {
                findings.push(drifted("cpu", pool.to_string(), applied.cpus.to_string()));
            }
        }
        DecidedCpus::Shared { pool: None } => {
            notes.push(format!(
                "it runs on the shared CPU pool ({} now), which changes as exclusive CPUs are given and taken back",
                applied.cpus
            ));
        }
    }
    if let Some(pinned) = &decided.memory_nodes {
        let nodes = applied.memory_nodes();
        if !nodes.is_subset(pinned) {
            findings.push(drifted("memory", nodes_text(pinned), nodes_text(&nodes)));
        }
    }
}

fn check_devices(applied: &Applied, decided: &Decided, findings: &mut Vec<Finding>, notes: &mut Vec<String>) {
    match &applied.devices {
        AppliedDevices::Listed {
            source: DeviceSource::Environment(variable),
            all,
            devices,
        } => {
            if *all {
                notes.push(format!("{variable}=all: it can see every device"));
                return;
            }
            let unexpected: Vec<String> = devices
                .iter()
                .filter(|v| !decided.devices.iter().any(|d| d.id == v.id))
                .map(|v| v.id.clone())
                .collect();
            // Only devices of the kind the variable names can be missing
            // from it: a GPU variable says nothing about NICs.
            let missing: Vec<String> = decided
                .devices
                .iter()
                .filter(|d| is_gpu_resource(&d.resource) && !devices.iter().any(|v| v.id == d.id))
                .map(|d| d.id.clone())
                .collect();
            if !unexpected.is_empty() || !missing.is_empty() {
                findings.push(Finding::Devices { unexpected, missing });
            }
        }
        AppliedDevices::Listed {
            source: DeviceSource::DeviceCgroup(_),
            all: true,
            ..
        } if !decided.devices.is_empty() => {
            notes.push("its device cgroup lets it open every device".to_string());
        }
        AppliedDevices::Unreadable { reason } if !decided.devices.is_empty() => {
            notes.push(format!("which devices it can open is not known: {reason}"));
        }
        _ => {}
    }
}

/// GPU resources, whose ids the visibility variables list.
fn is_gpu_resource(resource: &str) -> bool {
    resource == "nvidia.com/gpu" || resource.starts_with("nvidia.com/mig-")
}

fn check_promise(
    layout: &NumaLayout,
    placement: &Placement,
    decided: &Decided,
    findings: &mut Vec<Finding>,
    notes: &mut Vec<String>,
) {
    let Some(policy) = decided.policy else {
        return;
    };
    if !matches!(
        policy,
        TopologyPolicyName::SingleNumaNode | TopologyPolicyName::Restricted
    ) {
        notes.push(format!("the {} policy promises no alignment", policy.as_str()));
        return;
    }
    // The resources the topology manager aligns, as the kernel applies
    // them: exclusive CPUs (shared-pool CPUs have no hints), pinned memory,
    // devices.
    let mut applied: Vec<(String, NodeSet)> = Vec::new();
    let mut promised = NodeSet::new();
    if let DecidedCpus::Exclusive { cpus } = &decided.cpus {
        applied.push(("cpu".to_string(), placement.cpu_nodes.clone()));
        promised.extend(layout.nodes_of(cpus));
    }
    if let Some(pinned) = &decided.memory_nodes {
        applied.push(("memory".to_string(), placement.memory_nodes.clone()));
        promised.extend(pinned);
    }
    for device in &decided.devices {
        promised.extend(device.numa.iter().flatten());
    }
    for (resource, nodes) in &placement.device_nodes {
        applied.push((resource.clone(), nodes.clone()));
    }
    if promised.is_empty() {
        return;
    }
    if policy == TopologyPolicyName::SingleNumaNode && promised.len() > 1 {
        // The decision itself spans nodes: each resource is held to the
        // node of the CPUs (else the lowest decided node) so that every
        // resource elsewhere is named.
        let anchor = applied
            .iter()
            .find(|(r, n)| r == "cpu" && n.len() == 1)
            .and_then(|(_, n)| n.first().copied())
            .or_else(|| promised.first().copied());
        promised = anchor.into_iter().collect();
    }
    let before = findings.len();
    for (resource, nodes) in applied {
        let kept = match policy {
            TopologyPolicyName::SingleNumaNode => nodes == promised,
            _ => nodes.is_subset(&promised),
        };
        if !kept && !nodes.is_empty() {
            findings.push(Finding::Misaligned {
                resource,
                nodes,
                promised: promised.clone(),
                policy: policy.as_str().to_string(),
            });
        }
    }
    if findings.len() == before {
        notes.push(format!(
            "{} promised NUMA {}: kept",
            policy.as_str(),
            nodes_text(&promised)
        ));
    }
}

fn check_memory(
    applied: &Applied,
    placement: &Placement,
    decided: &Decided,
    findings: &mut Vec<Finding>,
    notes: &mut Vec<String>,
) {
    let Some(memory) = &applied.memory else {
        notes.push("its memory per NUMA node could not be read (numa_maps)".to_string());
        return;
    };
    let own = memory.own();
    match &decided.memory_nodes {
        Some(pinned) => {
            let by_node: BTreeMap<usize, u64> = own
                .into_iter()
                .filter(|(node, bytes)| !pinned.contains(node) && *bytes > 0)
                .collect();
            let bytes: u64 = by_node.values().sum();
            if bytes > 0 {
                findings.push(Finding::MemorySpilled {
                    bytes,
                    by_node,
                    allowed: pinned.clone(),
                });
            }
        }
        None => {
            let remote: u64 = own
                .iter()
                .filter(|(node, _)| !placement.cpu_nodes.contains(node))
                .map(|(_, bytes)| bytes)
                .sum();
            if remote > 0 {
                notes.push(format!(
                    "its memory is not pinned: {} of it is on NUMA nodes other than its CPUs'",
                    human_bytes(remote)
                ));
            }
        }
    }
}

/// A node's verdicts counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Summary {
    pub total: usize,
    pub aligned: usize,
    pub not_placed: usize,
    pub drifted: usize,
    pub misaligned: usize,
    pub memory_spilled: usize,
    /// Own memory on NUMA nodes other than the pinned ones, summed.
    pub spilled_bytes: u64,
}

impl Summary {
    /// Counts `reports`.
    pub fn of(reports: &[Report]) -> Summary {
        let mut summary = Summary {
            total: reports.len(),
            ..Summary::default()
        };
        for report in reports {
            match report.verdict {
                Verdict::Aligned => summary.aligned += 1,
                Verdict::NotPlaced => summary.not_placed += 1,
                Verdict::Drifted => summary.drifted += 1,
                Verdict::Misaligned => summary.misaligned += 1,
                Verdict::MemorySpilled => summary.memory_spilled += 1,
            }
            for finding in &report.findings {
                if let Finding::MemorySpilled { bytes, .. } = finding {
                    summary.spilled_bytes += bytes;
                }
            }
        }
        summary
    }

    /// Whether every placement is kept (nothing drifted, misaligned or
    /// spilled).
    pub fn all_kept(&self) -> bool {
        self.drifted + self.misaligned + self.memory_spilled == 0
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} checked: {} aligned, {} drifted, {} misaligned, {} memory spilled",
            self.total, self.aligned, self.drifted, self.misaligned, self.memory_spilled
        )?;
        if self.spilled_bytes > 0 {
            write!(f, " ({} in all)", human_bytes(self.spilled_bytes))?;
        }
        if self.not_placed > 0 {
            write!(f, ", {} not placed", self.not_placed)?;
        }
        Ok(())
    }
}

fn node_list<S: serde::Serializer>(nodes: &NodeSet, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.collect_str(&nodes_text(nodes))
}
