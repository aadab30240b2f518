//! What a kubelet's `GetAllocatableResources` must answer for a node — its
//! machine and kubelet configuration — ([`allocatable_of`]), and how a
//! served answer differs from it ([`allocatable_differences`]): the one
//! check `diagnose` and the follower make.
//!
//! The kubelet answers from its managers as they started (`pkg/kubelet/
//! apis/podresources`, `cm/`): the CPU manager's allocatable CPUs (every
//! CPU but the reserved ones under the `static` policy, none under
//! `none`), the memory manager's allocatable memory (one block per NUMA
//! node and resource its machine state leaves allocatable, none under the
//! `None` policy), and every healthy device the device plugins registered,
//! each with its NUMA nodes.

use std::collections::BTreeMap;
use std::fmt;

use topoalign_engine::{CpuPolicyName, Node};
use topoalign_model::CpuSet;

use crate::{Allocatable, DeviceGroup, Field, MemoryBlock};

/// The answer a kubelet running `node`'s machine and configuration gives
/// to `GetAllocatableResources` (the pods `node` holds do not change it).
/// NUMA nodes are the machine's own ids, as the kubelet reports them
/// (`Machine::numa_label`: 64 on a machine {0, 64}, not the engine's 1).
pub fn allocatable_of(node: &Node) -> Allocatable {
    let machine = node.machine();
    let cpus = match node.config().cpu_policy {
        CpuPolicyName::None => CpuSet::default(),
        CpuPolicyName::Static => machine.cpu_set().difference(&node.reserved_cpus()),
    };
    let memory = node
        .snapshot()
        .memory
        .map(|state| {
            state
                .machine_state
                .iter()
                .flat_map(|(&numa, node)| {
                    node.memory
                        .iter()
                        .filter(|(_, table)| table.allocatable > 0)
                        .map(move |(resource, table)| MemoryBlock {
                            resource: resource.clone(),
                            size: table.allocatable,
                            numa: vec![machine.numa_label(numa)],
                        })
                })
                .collect()
        })
        .unwrap_or_default();
    let devices = machine
        .devices()
        .iter()
        .map(|(resource, list)| {
            let groups = list
                .iter()
                .map(|d| DeviceGroup {
                    ids: vec![d.id.clone()],
                    numa: d.numa.iter().map(|&n| machine.numa_label(n)).collect(),
                })
                .collect();
            (resource.clone(), groups)
        })
        .collect();
    Allocatable { cpus, memory, devices }
}

/// One way a served `GetAllocatableResources` answer differs from the
/// expected one, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AllocatableDifference {
    /// [`Field::Cpus`], [`Field::Memory`] or [`Field::Devices`].
    pub field: Field,
    /// What differs (`CPUs 0-1 are served but not allocatable here
    /// (reserved, or not on this machine)`).
    pub what: String,
}

impl fmt::Display for AllocatableDifference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field.wire_name(), self.what)
    }
}

/// Every way `served` (a kubelet's `GetAllocatableResources`) differs from
/// `expected` ([`allocatable_of`] the node): CPUs served and not
/// allocatable here or the other way round; per memory resource and NUMA
/// node, the bytes; per device resource, ids on one side only and ids
/// whose NUMA nodes differ. Blocks and devices compare in any order and
/// grouping. Empty when they agree.
pub fn allocatable_differences(served: &Allocatable, expected: &Allocatable) -> Vec<AllocatableDifference> {
    let mut found = Vec::new();
    if served == expected {
        return found;
    }
    let mut differ = |field: Field, what: String| found.push(AllocatableDifference { field, what });
    let extra = served.cpus.difference(&expected.cpus);
    if !extra.is_empty() {
        differ(
            Field::Cpus,
            format!("CPUs {extra} are served but are not allocatable here (reserved, or not on this machine)"),
        );
    }
    let missing = expected.cpus.difference(&served.cpus);
    if !missing.is_empty() {
        differ(
            Field::Cpus,
            format!("CPUs {missing} are allocatable here but not served"),
        );
    }

    let blocks = |list: &[MemoryBlock]| {
        let mut bytes: BTreeMap<(String, Vec<usize>), u64> = BTreeMap::new();
        for block in list {
            *bytes.entry((block.resource.clone(), block.numa.clone())).or_default() += block.size;
        }
        bytes
    };
    let (served_memory, expected_memory) = (blocks(&served.memory), blocks(&expected.memory));
    let mut keys: Vec<&(String, Vec<usize>)> = served_memory.keys().chain(expected_memory.keys()).collect();
    keys.sort();
    keys.dedup();
    for key @ (resource, numa) in keys {
        let (s, e) = (served_memory.get(key), expected_memory.get(key));
        if s != e {
            let bytes = |n: Option<&u64>| n.map_or_else(|| "none".to_owned(), |n| format!("{n} bytes"));
            let numa: Vec<String> = numa.iter().map(ToString::to_string).collect();
            differ(
                Field::Memory,
                format!(
                    "{resource} on NUMA {}: {} served, {} allocatable here",
                    numa.join(","),
                    bytes(s),
                    bytes(e)
                ),
            );
        }
    }

    let devices = |map: &BTreeMap<String, Vec<DeviceGroup>>| {
        let mut ids: BTreeMap<(String, String), Vec<usize>> = BTreeMap::new();
        for (resource, groups) in map {
            for group in groups {
                for id in &group.ids {
                    ids.insert((resource.clone(), id.clone()), group.numa.clone());
                }
            }
        }
        ids
    };
    let (served_devices, expected_devices) = (devices(&served.devices), devices(&expected.devices));
    let mut resources: Vec<&str> = served_devices
        .keys()
        .chain(expected_devices.keys())
        .map(|(r, _)| r.as_str())
        .collect();
    resources.dedup();
    resources.sort_unstable();
    resources.dedup();
    for resource in resources {
        let ids = |map: &BTreeMap<(String, String), Vec<usize>>, other: &BTreeMap<(String, String), Vec<usize>>| {
            map.keys()
                .filter(|(r, id)| r == resource && !other.contains_key(&(r.clone(), id.clone())))
                .map(|(_, id)| id.as_str())
                .collect::<Vec<_>>()
                .join(",")
        };
        let extra = ids(&served_devices, &expected_devices);
        if !extra.is_empty() {
            differ(
                Field::Devices,
                format!("{resource} devices {extra} are served but this node's device list lacks them"),
            );
        }
        let missing = ids(&expected_devices, &served_devices);
        if !missing.is_empty() {
            differ(
                Field::Devices,
                format!(
                    "{resource} devices {missing} are on this node's device list but not served (unhealthy, or not registered)"
                ),
            );
        }
        for ((r, id), numa) in &served_devices {
            if r == resource
                && let Some(expected) = expected_devices.get(&(r.clone(), id.clone()))
                && expected != numa
            {
                let words = |n: &[usize]| {
                    if n.is_empty() {
                        "no NUMA node".to_owned()
                    } else {
                        let n: Vec<String> = n.iter().map(ToString::to_string).collect();
                        format!("NUMA {}", n.join(","))
                    }
                };
                differ(
                    Field::Devices,
                    format!(
                        "{resource} device {id} is served on {}, on {} here",
                        words(numa),
                        words(expected)
                    ),
                );
            }
        }
    }
    found
}
