//! Wire messages to plain data and back. Reading checks every id against
//! the bounds in the crate root and names the field that is off
//! (`pod_resources[2].containers[0].cpu_ids[3]`); a field's path is
//! written only when it is off.

use std::collections::BTreeMap;
use std::fmt;

use topoalign_model::CpuSet;

use crate::v1;
use crate::{
    Allocatable, ContainerAllocation, DeviceGroup, DynamicDevice, MAX_CPU_ID, MAX_NUMA_ID, MemoryBlock, PodAllocation,
};

/// A field that is off: its path and what is wrong.
pub(crate) struct Invalid {
    pub field: String,
    pub message: String,
}

fn invalid(field: String, message: impl Into<String>) -> Invalid {
    Invalid {
        field,
        message: message.into(),
    }
}

/// Where a field sits: a path of names and indices, written out only for
/// an error (an answer holds hundreds of fields that are all right).
#[derive(Clone, Copy)]
pub(crate) enum At<'a> {
    /// The answer's top-level field (`""`: the answer itself).
    Root(&'a str),
    /// `parent.name[index]`.
    Item(&'a At<'a>, &'a str, usize),
}

impl<'a> At<'a> {
    pub(crate) fn item(&'a self, name: &'a str, index: usize) -> At<'a> {
        At::Item(self, name, index)
    }

    /// The path with `.field` after it.
    fn field(&self, field: &str) -> String {
        format!("{self}.{field}")
    }
}

impl fmt::Display for At<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            At::Root(name) => f.write_str(name),
            At::Item(At::Root(""), name, index) => write!(f, "{name}[{index}]"),
            At::Item(parent, name, index) => write!(f, "{parent}.{name}[{index}]"),
        }
    }
}

fn cpus(ids: &[i64], at: &At<'_>) -> Result<CpuSet, Invalid> {
    ids.iter()
        .enumerate()
        .map(|(i, &id)| {
            u32::try_from(id).ok().filter(|&id| id <= MAX_CPU_ID).ok_or_else(|| {
                invalid(
                    at.field(&format!("cpu_ids[{i}]")),
                    format!("{id} is not a CPU id (0..={MAX_CPU_ID})"),
                )
            })
        })
        .collect()
}

fn numa(topology: Option<&v1::TopologyInfo>, at: &At<'_>) -> Result<Vec<usize>, Invalid> {
    let mut nodes = topology
        .map(|t| t.nodes.as_slice())
        .unwrap_or_default()
        .iter()
        .enumerate()
        .map(|(i, node)| {
            usize::try_from(node.id)
                .ok()
                .filter(|&id| id <= MAX_NUMA_ID)
                .ok_or_else(|| {
                    invalid(
                        at.field(&format!("topology.nodes[{i}].ID")),
                        format!("{} is not a NUMA node id (0..={MAX_NUMA_ID})", node.id),
                    )
                })
        })
        .collect::<Result<Vec<_>, _>>()?;
    nodes.sort_unstable();
    nodes.dedup();
    Ok(nodes)
}

fn memory(blocks: &[v1::ContainerMemory], at: &At<'_>) -> Result<Vec<MemoryBlock>, Invalid> {
    blocks
        .iter()
        .enumerate()
        .map(|(i, block)| {
            let at = at.item("memory", i);
            if block.memory_type.is_empty() {
                return Err(invalid(at.field("memory_type"), "empty"));
            }
            Ok(MemoryBlock {
                resource: block.memory_type.clone(),
                size: block.size,
                numa: numa(block.topology.as_ref(), &at)?,
            })
        })
        .collect()
}

fn devices(groups: &[v1::ContainerDevices], at: &At<'_>) -> Result<BTreeMap<String, Vec<DeviceGroup>>, Invalid> {
    let mut by_resource: BTreeMap<String, Vec<DeviceGroup>> = BTreeMap::new();
    for (i, group) in groups.iter().enumerate() {
        let at = at.item("devices", i);
        if group.resource_name.is_empty() {
            return Err(invalid(at.field("resource_name"), "empty"));
        }
        by_resource
            .entry(group.resource_name.clone())
            .or_default()
            .push(DeviceGroup {
                ids: group.device_ids.clone(),
                numa: numa(group.topology.as_ref(), &at)?,
            });
    }
    Ok(by_resource)
}

/// Each claim's devices, one entry per device (a resource of another
/// kind than a device, with no device name, is left out).
fn dynamic(resources: &[v1::DynamicResource]) -> Vec<DynamicDevice> {
    resources
        .iter()
        .flat_map(|claim| {
            claim
                .claim_resources
                .iter()
                .filter(|r| !r.device_name.is_empty())
                .map(|r| DynamicDevice {
                    claim_namespace: claim.claim_namespace.clone(),
                    claim_name: claim.claim_name.clone(),
                    driver: r.driver_name.clone(),
                    pool: r.pool_name.clone(),
                    device: r.device_name.clone(),
                })
        })
        .collect()
}

/// `devices` as the kubelet sends them: one `DynamicResource` per claim,
/// in the order first seen.
fn wire_dynamic(devices: &[DynamicDevice]) -> Vec<v1::DynamicResource> {
    let mut claims: Vec<v1::DynamicResource> = Vec::new();
    for device in devices {
        let resource = v1::ClaimResource {
            cdi_devices: Vec::new(),
            driver_name: device.driver.clone(),
            pool_name: device.pool.clone(),
            device_name: device.device.clone(),
            share_id: None,
        };
        match claims
            .iter_mut()
            .find(|c| c.claim_name == device.claim_name && c.claim_namespace == device.claim_namespace)
        {
            Some(claim) => claim.claim_resources.push(resource),
            None => claims.push(v1::DynamicResource {
                claim_name: device.claim_name.clone(),
                claim_namespace: device.claim_namespace.clone(),
                claim_resources: vec![resource],
            }),
        }
    }
    claims
}

pub(crate) fn pod(pod: &v1::PodResources, at: &At<'_>) -> Result<PodAllocation, Invalid> {
    let containers = pod
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let at = at.item("containers", i);
            Ok(ContainerAllocation {
                name: c.name.clone(),
                cpus: cpus(&c.cpu_ids, &at)?,
                memory: memory(&c.memory, &at)?,
                devices: devices(&c.devices, &at)?,
                dynamic: dynamic(&c.dynamic_resources),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PodAllocation {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        containers,
    })
}

pub(crate) fn allocatable(answer: &v1::AllocatableResourcesResponse) -> Result<Allocatable, Invalid> {
    let at = At::Root("allocatable");
    Ok(Allocatable {
        cpus: cpus(&answer.cpu_ids, &at)?,
        memory: memory(&answer.memory, &at)?,
        devices: devices(&answer.devices, &at)?,
    })
}

fn topology(numa: &[usize]) -> Option<v1::TopologyInfo> {
    // Ids were bounded on the way in; a usize that does not fit an i64
    // cannot come from one.
    let nodes = numa
        .iter()
        .map(|&id| v1::NumaNode {
            id: i64::try_from(id).unwrap_or(i64::MAX),
        })
        .collect();
    Some(v1::TopologyInfo { nodes })
}

fn wire_memory(blocks: &[MemoryBlock]) -> Vec<v1::ContainerMemory> {
    blocks
        .iter()
        .map(|b| v1::ContainerMemory {
            memory_type: b.resource.clone(),
            size: b.size,
            topology: topology(&b.numa),
        })
        .collect()
}

fn wire_devices(devices: &BTreeMap<String, Vec<DeviceGroup>>) -> Vec<v1::ContainerDevices> {
    devices
        .iter()
        .flat_map(|(resource, groups)| {
            groups.iter().map(move |g| v1::ContainerDevices {
                resource_name: resource.clone(),
                device_ids: g.ids.clone(),
                // The kubelet sends no topology for a device without one.
                topology: if g.numa.is_empty() { None } else { topology(&g.numa) },
            })
        })
        .collect()
}

fn wire_cpus(cpus: &CpuSet) -> Vec<i64> {
    cpus.iter().map(i64::from).collect()
}

pub(crate) fn wire_pod(pod: &PodAllocation) -> v1::PodResources {
    v1::PodResources {
        name: pod.name.clone(),
        namespace: pod.namespace.clone(),
        containers: pod
            .containers
            .iter()
            .map(|c| v1::ContainerResources {
                name: c.name.clone(),
                devices: wire_devices(&c.devices),
                cpu_ids: wire_cpus(&c.cpus),
                memory: wire_memory(&c.memory),
                dynamic_resources: wire_dynamic(&c.dynamic),
            })
            .collect(),
        cpu_ids: Vec::new(),
        memory: Vec::new(),
    }
}

pub(crate) fn wire_allocatable(allocatable: &Allocatable) -> v1::AllocatableResourcesResponse {
    v1::AllocatableResourcesResponse {
        devices: wire_devices(&allocatable.devices),
        cpu_ids: wire_cpus(&allocatable.cpus),
        memory: wire_memory(&allocatable.memory),
    }
}
