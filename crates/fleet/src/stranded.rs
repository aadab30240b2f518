//! Free and stranded capacity of one engine node, per NUMA zone — the
//! simulator's rule (docs/simulate.md, "Free and stranded capacity") for
//! callers that hold engine nodes rather than the simulator's classes
//! (`topoalign defrag`).
//!
//! - A node's free CPU (millicores) and memory (bytes) is the smaller of
//!   its zones' NRT `available` sum and its allocatable minus its pods'
//!   requests, apportioned to the zones in proportion to their own free
//!   amounts ([`crate::sim`]'s `capacity::Free`: the same arithmetic, so
//!   the zones add up to the node); devices are each zone's free devices:
//!   the device plugin's, and where the node's DRA slices are known
//!   ([`dra_free`], [`NodeFree::add_dra`]) its DRA devices no claim holds,
//!   each on the NUMA node its `numaNode` attribute names, counted under
//!   its driver's name.
//! - Its free capacity is **stranded** when some of the failed pods are
//!   ones an empty node of its shape would admit, and the node admits none
//!   of them now ([`is_stranded`]).
//!
//! The simulator's end-of-run analysis (`sim/run.rs`) uses the same
//! functions on its classes' zones (`zones_free`).
//!
//! Owns: those two definitions for one node. Must not touch: decisions
//! (the engine's), the simulator's classes.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceSlice};
use topoalign_engine::{Node, NumaUsage};
use topoalign_model::{Machine, Pod, resource_name};

use crate::sim::capacity::Free;

/// One NUMA zone's free capacity.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ZoneFree {
    pub numa: usize,
    pub milli_cpu: u64,
    pub memory_bytes: u64,
    /// Device-plugin resource (or DRA driver, [`NodeFree::add_dra`]) →
    /// free devices on this zone.
    pub devices: BTreeMap<String, u64>,
}

/// A node's free capacity: the zones add up to the node's CPU and memory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeFree {
    pub milli_cpu: u64,
    pub memory_bytes: u64,
    pub zones: Vec<ZoneFree>,
}

fn to_u64(amount: i128) -> u64 {
    u64::try_from(amount).unwrap_or(if amount < 0 { 0 } else { u64::MAX })
}

/// `node`'s free capacity per NUMA zone (see the module docs).
pub fn node_free(node: &Node) -> NodeFree {
    let usage = node.numa_usage();
    let allocatable = &node.resources().allocatable;
    let mut requested: BTreeMap<String, i128> = BTreeMap::new();
    for pod in node.pods() {
        for (resource, amount) in topoalign_engine::fit::pod_request_totals(pod).iter() {
            let value = if resource.as_str() == "cpu" {
                amount.milli()
            } else {
                amount.value()
            };
            *requested.entry(resource.clone()).or_default() += value;
        }
    }
    let node_wide = |resource: &str| {
        let total = allocatable
            .get(resource)
            .map_or(0, |q| if resource == "cpu" { q.milli() } else { q.value() });
        to_u64(total - requested.get(resource).copied().unwrap_or(0))
    };
    zones_free(&usage, node_wide("cpu"), node_wide("memory")).free
}

/// A node's free capacity with the CPU and memory arithmetic behind it
/// (the simulator's fragmentation reads the largest blocks).
pub(crate) struct Capacity {
    pub cpu: Free,
    pub memory: Free,
    pub free: NodeFree,
}

/// The free capacity of a node whose zones are `zones` (the engine's
/// `numa_usage`) and whose node-wide free CPU (millicores) and memory
/// (bytes) are `node_milli_cpu` and `node_memory` (allocatable minus the
/// pods' requests).
pub(crate) fn zones_free(zones: &[NumaUsage], node_milli_cpu: u64, node_memory: u64) -> Capacity {
    let zone_cpu: Vec<u64> = zones.iter().map(|z| to_u64(z.available("cpu").milli())).collect();
    let zone_memory: Vec<u64> = zones.iter().map(|z| to_u64(z.available("memory").value())).collect();
    let cpu = Free::new(&zone_cpu, node_milli_cpu);
    let memory = Free::new(&zone_memory, node_memory);
    let zones = zones
        .iter()
        .enumerate()
        .map(|(i, zone)| ZoneFree {
            numa: zone.numa,
            milli_cpu: cpu.zones[i],
            memory_bytes: memory.zones[i],
            devices: zone
                .resources
                .iter()
                .filter(|(resource, _)| resource_name::is_extended(resource))
                .map(|(resource, amounts)| (resource.clone(), to_u64(amounts.available.value())))
                .collect(),
        })
        .collect();
    let free = NodeFree {
        milli_cpu: cpu.total,
        memory_bytes: memory.total,
        zones,
    };
    Capacity { cpu, memory, free }
}

/// Free DRA devices per NUMA node → driver → count: the devices of
/// `slices` (a node's; the newest generation of each pool) that no claim
/// of `allocated` holds ([`topoalign_dra::held_devices`]: its
/// `status.allocation` names it, not for admin access), each on the NUMA node its
/// `resource.kubernetes.io/numaNode` (or driver `numaNode`) attribute
/// names ([`topoalign_scenario::dra::numa_node`]). A device that names no
/// NUMA node is on none and not counted.
pub fn dra_free(slices: &[ResourceSlice], allocated: &[ResourceClaim]) -> BTreeMap<usize, BTreeMap<String, u64>> {
    let held = topoalign_dra::held_devices(allocated);
    let newest = |driver: &str, pool: &str| {
        slices
            .iter()
            .filter(|s| s.spec.driver == driver && s.spec.pool.name == pool)
            .map(|s| s.spec.pool.generation)
            .max()
    };
    let mut free: BTreeMap<usize, BTreeMap<String, u64>> = BTreeMap::new();
    for slice in slices {
        let (driver, pool) = (slice.spec.driver.as_str(), slice.spec.pool.name.as_str());
        if newest(driver, pool) != Some(slice.spec.pool.generation) {
            continue;
        }
        for device in slice.spec.devices.iter().flatten() {
            let Some(numa) = topoalign_scenario::dra::numa_node(device, driver).and_then(|n| usize::try_from(n).ok())
            else {
                continue;
            };
            let id = topoalign_dra::DeviceId {
                driver,
                pool,
                device: &device.name,
            };
            if !held.contains(&id) {
                *free.entry(numa).or_default().entry(driver.to_owned()).or_default() += 1;
            }
        }
    }
    free
}

impl NodeFree {
    /// Adds the node's free DRA devices ([`dra_free`]) to its zones'
    /// devices, under each driver's name; a NUMA node the node has no zone
    /// for is left out. `machine` is the machine these zones are of: `free`
    /// is keyed by the NUMA ids the devices' attributes name (the machine's
    /// own), the zones by the engine's indices, so each zone takes the
    /// devices on its own id ([`Machine::numa_label`]; the same number
    /// unless the machine has NUMA ids past 63).
    pub fn add_dra(&mut self, free: &BTreeMap<usize, BTreeMap<String, u64>>, machine: &Machine) {
        for zone in &mut self.zones {
            for (driver, count) in free.get(&machine.numa_label(zone.numa)).into_iter().flatten() {
                *zone.devices.entry(driver.clone()).or_default() += count;
            }
        }
    }
}

/// Whether `node`'s free capacity is stranded for `failed` pods: some of
/// them would be admitted by `empty` (an empty node of its shape), and
/// `node` admits none of them now. With no such pod nothing is stranded.
pub fn is_stranded(node: &Node, empty: &Node, failed: &[Pod]) -> bool {
    let mut wanted = failed
        .iter()
        .filter(|pod| empty.try_admit(pod).decision.admitted())
        .peekable();
    wanted.peek().is_some() && wanted.all(|pod| !node.try_admit(pod).decision.admitted())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dra::fixtures::two_gpus;

    fn claim(devices: &[&str]) -> ResourceClaim {
        let results: Vec<_> = devices
            .iter()
            .map(|d| serde_json::json!({"request": "gpu", "driver": "gpu.example.com", "pool": "n-0", "device": d}))
            .collect();
        serde_json::from_value(serde_json::json!({"metadata": {"name": "c", "namespace": "ml"},
            "status": {"allocation": {"devices": {"results": results}}}}))
        .expect("claim")
    }

    #[test]
    fn dra_devices_no_claim_holds_are_free_on_their_numa_node() {
        let slices = crate::dra::resource_slices("n-0", &two_gpus());
        let gpus = |n: u64| BTreeMap::from([("gpu.example.com".to_owned(), n)]);
        assert_eq!(dra_free(&slices, &[]), BTreeMap::from([(0, gpus(1)), (1, gpus(1))]));
        assert_eq!(dra_free(&slices, &[claim(&["gpu-0"])]), BTreeMap::from([(1, gpus(1))]));
        assert!(dra_free(&slices, &[claim(&["gpu-0", "gpu-1"])]).is_empty());
        // An older generation of the pool is not what the allocator sees.
        let mut old = slices[0].clone();
        old.spec.pool.generation = 0;
        old.metadata.name = Some("old".into());
        let with_old: Vec<_> = slices.iter().cloned().chain([old]).collect();
        assert_eq!(dra_free(&with_old, &[]), dra_free(&slices, &[]));
        // A device naming no NUMA node is counted nowhere.
        let mut unplaced = slices.clone();
        for device in unplaced[0].spec.devices.iter_mut().flatten() {
            device.attributes = None;
        }
        assert!(dra_free(&unplaced, &[]).is_empty());
    }

    #[test]
    fn dra_devices_join_their_zones_devices() {
        let mut free = NodeFree {
            milli_cpu: 0,
            memory_bytes: 0,
            zones: (0..2)
                .map(|numa| ZoneFree {
                    numa,
                    devices: BTreeMap::from([("example.com/nic".to_owned(), 1)]),
                    ..ZoneFree::default()
                })
                .collect(),
        };
        let slices = crate::dra::resource_slices("n-0", &two_gpus());
        let machine = topoalign_model::UniformMachine::new(2, 1).build().expect("a machine");
        free.add_dra(&dra_free(&slices, &[claim(&["gpu-1"])]), &machine);
        assert_eq!(
            free.zones[0].devices,
            BTreeMap::from([("example.com/nic".to_owned(), 1), ("gpu.example.com".to_owned(), 1)])
        );
        assert_eq!(
            free.zones[1].devices,
            BTreeMap::from([("example.com/nic".to_owned(), 1)])
        );
    }

    #[test]
    fn dra_devices_join_the_zone_of_their_own_numa_id_on_a_labelled_machine() {
        // NUMA ids {0, 64}: the engine's zones are 0 and 1, the slices name 0 and 64.
        let machine = topoalign_model::UniformMachine::new(2, 1)
            .numa_ids([0, 64])
            .build()
            .expect("machine");
        assert_eq!(machine.numa_label(1), 64);
        let mut slices = crate::dra::resource_slices("n-0", &two_gpus());
        for device in slices[0].spec.devices.iter_mut().flatten() {
            for attribute in device.attributes.iter_mut().flat_map(|a| a.values_mut()) {
                if attribute.int == Some(1) {
                    attribute.int = Some(64);
                }
            }
        }
        let devices = dra_free(&slices, &[claim(&["gpu-0"])]);
        let gpus = BTreeMap::from([("gpu.example.com".to_owned(), 1)]);
        assert_eq!(devices, BTreeMap::from([(64, gpus.clone())]));
        let zones = || NodeFree {
            milli_cpu: 0,
            memory_bytes: 0,
            zones: (0..2)
                .map(|numa| ZoneFree {
                    numa,
                    ..ZoneFree::default()
                })
                .collect(),
        };
        let mut free = zones();
        free.add_dra(&devices, &machine);
        assert_eq!(free.zones[0].devices, BTreeMap::new());
        assert_eq!(free.zones[1].devices, gpus);
    }
}
