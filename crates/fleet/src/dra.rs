//! Devices from Dynamic Resource Allocation in a fleet.
//!
//! A fleet node's device-plugin resource named as a DRA resource
//! (`RESOURCE=DRIVER`: the fleet file's `dra.drivers`, `simulate --dra`,
//! `simulate-nodes --dra`) is published through DRA instead: its devices
//! leave the kubelet's device manager (the node no longer advertises the
//! extended resource) and become one ResourceSlice per driver and node
//! (pool: the node's name), each device carrying its NUMA node as the
//! standard `resource.kubernetes.io/numaNode` attribute. The fleet file's
//! `dra:` block is a scenario's `dra:` block (docs/scenario.md:
//! `deviceClasses`, `resourceClaimTemplates`) with `drivers` beside it.
//!
//! The kubelet's Topology Manager never sees these devices; the scheduler's
//! DRA allocator (`topoalign_dra`, through
//! [`topoalign_scenario::dra::DraState`]) picks them first-fit on the node
//! it chose. [`alignment_verdict`] is the `--dra-align` rule in words, on
//! the one alignment rule
//! ([`topoalign_scenario::dra::misaligned_devices`]): the extender refuses
//! a node with it, and `simulate` counts a pod misaligned by it.
//!
//! Owns: splitting a node spec's devices, the slices of a node, the fleet's
//! `dra:` block, the alignment verdict's words. Pure.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::str::FromStr;

use k8s_openapi::api::core::v1::Node as K8sNode;
use k8s_openapi::api::resource::v1::{Device, DeviceAttribute, ResourcePool, ResourceSlice, ResourceSliceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use topoalign_nrt::NodeSpec;
use topoalign_scenario::DeviceSpec;
use topoalign_scenario::dra::{DraSpec, DraState, PodDevices, misaligned_devices};

use crate::fleet::{FleetError, NodeGroup};

/// A device-plugin resource published through DRA (`RESOURCE=DRIVER`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DraResource {
    /// The device-plugin resource name in the fleet (`nvidia.com/gpu`).
    pub resource: String,
    /// The DRA driver that publishes its devices (`gpu.example.com`).
    pub driver: String,
}

impl FromStr for DraResource {
    type Err = String;

    fn from_str(text: &str) -> Result<DraResource, String> {
        let (resource, driver) = text
            .split_once('=')
            .filter(|(r, d)| !r.is_empty() && !d.is_empty())
            .ok_or_else(|| format!("{text:?} is not RESOURCE=DRIVER (nvidia.com/gpu=gpu.example.com)"))?;
        Ok(DraResource {
            resource: resource.to_owned(),
            driver: driver.to_owned(),
        })
    }
}

/// One node's devices published through DRA: per driver, its devices.
pub type DraDevices = Vec<(String, Vec<DeviceSpec>)>;

/// `spec` without the devices of `resources` (the device plugin no longer
/// has them), and those devices by driver.
pub fn split_spec(spec: &NodeSpec, resources: &[DraResource]) -> (NodeSpec, DraDevices) {
    let mut spec = spec.clone();
    let mut devices: DraDevices = Vec::new();
    for resource in resources {
        let Some(taken) = spec.topology.devices.remove(&resource.resource) else {
            continue;
        };
        match devices.iter_mut().find(|(driver, _)| *driver == resource.driver) {
            Some((_, list)) => list.extend(taken),
            None => devices.push((resource.driver.clone(), taken)),
        }
    }
    (spec, devices)
}

/// The ResourceSlices of node `node`: one per driver, the pool named after
/// the node; a device on exactly one NUMA node says which.
pub fn resource_slices(node: &str, devices: &DraDevices) -> Vec<ResourceSlice> {
    devices
        .iter()
        .map(|(driver, list)| ResourceSlice {
            metadata: ObjectMeta {
                name: Some(format!("{node}-{}", topoalign_dra::names::dns_label(driver))),
                ..ObjectMeta::default()
            },
            spec: ResourceSliceSpec {
                driver: driver.clone(),
                node_name: Some(node.to_owned()),
                pool: ResourcePool {
                    name: node.to_owned(),
                    generation: 1,
                    resource_slice_count: 1,
                },
                devices: Some(
                    list.iter()
                        .map(|device| Device {
                            name: topoalign_dra::names::dns_label(&device.id),
                            attributes: match device.numa.as_slice() {
                                [numa] => Some(
                                    [(
                                        "resource.kubernetes.io/numaNode".to_owned(),
                                        DeviceAttribute {
                                            int: i64::try_from(*numa).ok(),
                                            ..DeviceAttribute::default()
                                        },
                                    )]
                                    .into(),
                                ),
                                _ => None,
                            },
                            ..Device::default()
                        })
                        .collect(),
                ),
                ..ResourceSliceSpec::default()
            },
        })
        .collect()
}

/// The fleet file's `dra:` block: which device-plugin resources its nodes
/// publish through DRA, and the cluster's DRA objects pods use.
///
/// ```yaml
/// dra:
///   drivers: [example.com/gpu=gpu.example.com, example.com/nic=nic.example.com]
///   deviceClasses: [...]            # as in a scenario's dra: block
///   resourceClaimTemplates: [...]   # pods name them in spec.resourceClaims
/// ```
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FleetDra {
    pub drivers: Vec<DraResource>,
    /// DeviceClasses and ResourceClaimTemplates (no node, slices or claims:
    /// the nodes publish the slices, and each pod's claims are made from
    /// templates).
    pub objects: DraSpec,
}

impl FleetDra {
    /// Reads the block.
    ///
    /// # Errors
    /// [`FleetError::Field`] naming the field (`dra.drivers[1]`,
    /// `dra.deviceClasses[0].spec...`).
    pub fn from_value(value: serde_json::Value) -> Result<FleetDra, FleetError> {
        let serde_json::Value::Object(mut map) = value else {
            return Err(field(
                "dra",
                "a mapping: drivers, deviceClasses, resourceClaimTemplates".into(),
            ));
        };
        let mut drivers = Vec::new();
        match map.remove("drivers") {
            None | Some(serde_json::Value::Null) => {}
            Some(serde_json::Value::Array(list)) => {
                for (i, item) in list.iter().enumerate() {
                    let resource = item
                        .as_str()
                        .ok_or_else(|| "a RESOURCE=DRIVER string".to_owned())
                        .and_then(DraResource::from_str)
                        .map_err(|e| field(&format!("dra.drivers[{i}]"), e))?;
                    if let Some(earlier) = drivers
                        .iter()
                        .position(|d: &DraResource| d.resource == resource.resource)
                    {
                        return Err(field(
                            &format!("dra.drivers[{i}]"),
                            format!(
                                "{} is named already (dra.drivers[{earlier}]): one driver per resource",
                                resource.resource
                            ),
                        ));
                    }
                    drivers.push(resource);
                }
            }
            Some(_) => {
                return Err(field(
                    "dra.drivers",
                    "a list of RESOURCE=DRIVER (nvidia.com/gpu=gpu.example.com)".into(),
                ));
            }
        }
        let objects: DraSpec = serde_path_to_error::deserialize(serde_json::Value::Object(map)).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." {
                "dra".to_owned()
            } else {
                format!("dra.{path}")
            };
            field(&path, e.into_inner().to_string())
        })?;
        if objects.node.is_some() {
            return Err(field(
                "dra.node",
                "a fleet's nodes are its entries; leave it out".into(),
            ));
        }
        if !objects.resource_slices.is_empty() {
            return Err(field(
                "dra.resourceSlices",
                "a fleet's slices come from its nodes' devices through `drivers`".into(),
            ));
        }
        if !objects.resource_claims.is_empty() {
            return Err(field(
                "dra.resourceClaims",
                "in a fleet every pod's claims are made from resourceClaimTemplates \
                 (a claim shared by name ties its pods to one node)"
                    .into(),
            ));
        }
        Ok(FleetDra { drivers, objects })
    }

    /// Adds a command's `--dra` drivers to the block's. A resource the
    /// block (or an earlier flag) names already is taken once when both
    /// name the same driver, and refused when they name different ones:
    /// neither the file nor the flag silently wins.
    ///
    /// # Errors
    /// [`DriverConflict`] naming the resource and both drivers.
    pub fn add_drivers(&mut self, drivers: &[DraResource]) -> Result<(), DriverConflict> {
        let from_file = self.drivers.len();
        for driver in drivers {
            match self.drivers.iter().position(|d| d.resource == driver.resource) {
                None => self.drivers.push(driver.clone()),
                Some(at) if self.drivers[at].driver == driver.driver => {}
                Some(at) => {
                    return Err(DriverConflict {
                        resource: driver.resource.clone(),
                        driver: driver.driver.clone(),
                        named: self.drivers[at].driver.clone(),
                        by: if at < from_file {
                            format!("the fleet's dra.drivers[{at}]")
                        } else {
                            "an earlier --dra".to_owned()
                        },
                    });
                }
            }
        }
        Ok(())
    }

    /// A node of `group` as the kubelet sees it (the DRA resources' devices
    /// gone) and as the scheduler's DRA allocator sees it: the DRA state of
    /// its first node (`<name>-0`; every node of the group publishes the
    /// same devices, in pools named after itself), for a kubelet and
    /// scheduler of `release`. The scheduler's node advertises one unit
    /// per device of the device-plugin resources left
    /// ([`topoalign_dra::extended::advertise_device_plugins`]): an extended
    /// resource listed there is not DRA's to serve.
    pub fn group(&self, group: &NodeGroup, release: &str) -> (NodeSpec, DraState) {
        let (spec, devices) = split_spec(&group.spec, &self.drivers);
        let node = group.node_name(0);
        let mut scheduler_node = K8sNode {
            metadata: ObjectMeta {
                name: Some(node.clone()),
                ..ObjectMeta::default()
            },
            ..K8sNode::default()
        };
        topoalign_dra::extended::advertise_device_plugins(
            &mut scheduler_node,
            spec.topology
                .devices
                .iter()
                .map(|(resource, list)| (resource.as_str(), list.len())),
        );
        let objects = DraSpec {
            node: Some(scheduler_node),
            device_classes: self.objects.device_classes.clone(),
            resource_slices: resource_slices(&node, &devices),
            resource_claims: Vec::new(),
            resource_claim_templates: self.objects.resource_claim_templates.clone(),
        };
        (spec, DraState::new(objects, release))
    }
}

/// A `--dra RESOURCE=DRIVER` naming a resource that the fleet's
/// `dra.drivers` (or an earlier flag) publishes through another driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--dra {resource}={driver}: {by} publishes {resource} through {named}; \
     name one driver per resource (leave the flag out, or change the fleet file)"
)]
pub struct DriverConflict {
    pub resource: String,
    /// The flag's driver.
    pub driver: String,
    /// The driver named first.
    pub named: String,
    /// Who named it: `the fleet's dra.drivers[0]`, `an earlier --dra`.
    pub by: String,
}

fn field(path: &str, message: String) -> FleetError {
    FleetError::Field {
        path: path.to_owned(),
        message,
    }
}

/// A pod whose DRA devices miss the NUMA nodes the kubelet pinned its CPUs
/// and memory to: the `--dra-align` rule's verdict against a node, shown
/// to people and given by the extender as the node's refusal.
///
/// Its words: `DRA would allocate gpu/gpu: gpu-0 on NUMA node 0 while the
/// kubelet pins the pod's CPUs and memory on NUMA node 1`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Misaligned {
    /// `claim/request: device on NUMA node N`, each device off `pinned`.
    pub devices: Vec<String>,
    /// The NUMA nodes of the pod's exclusive CPUs and pinned memory.
    pub pinned: BTreeSet<usize>,
}

impl std::fmt::Display for Misaligned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DRA would allocate {} while the kubelet pins the pod's CPUs and memory on NUMA node {}",
            self.devices.join(", "),
            numa_list(&self.pinned)
        )
    }
}

/// The `--dra-align` rule: `None` when the devices DRA gave a pod
/// (`devices`) share the NUMA nodes the kubelet pinned its CPUs and memory
/// to (`pinned`), or there is nothing to align (nothing pinned, devices
/// that say no NUMA node); else the devices that do not, [`Misaligned`].
/// The rule itself is [`topoalign_scenario::dra::misaligned_devices`].
pub fn alignment_verdict(devices: &PodDevices, pinned: &BTreeSet<usize>) -> Option<Misaligned> {
    match misaligned_devices(devices, pinned) {
        Some(missing) if !missing.is_empty() => Some(Misaligned {
            devices: missing,
            pinned: pinned.clone(),
        }),
        _ => None,
    }
}

/// `0`, `0,1`.
pub fn numa_list(nodes: &BTreeSet<usize>) -> String {
    let mut text = String::new();
    for (i, node) in nodes.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        let _ = write!(text, "{node}");
    }
    text
}

/// Devices for tests of DRA on fleet nodes (this crate's and simnodes').
pub mod fixtures {
    use super::{DeviceSpec, DraDevices};

    /// Driver `gpu.example.com`'s two GPUs: `GPU_0` on NUMA node 0, `GPU_1`
    /// on NUMA node 1.
    pub fn two_gpus() -> DraDevices {
        vec![(
            "gpu.example.com".to_owned(),
            (0..2)
                .map(|n| DeviceSpec {
                    id: format!("GPU_{n}"),
                    numa: vec![n],
                })
                .collect(),
        )]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use fixtures::two_gpus as devices;

    #[test]
    fn slices_carry_the_numa_node_under_the_standard_name() {
        let slices = resource_slices("n-0", &devices());
        assert_eq!(slices.len(), 1);
        assert_eq!(slices[0].spec.node_name.as_deref(), Some("n-0"));
        let listed = slices[0].spec.devices.as_ref().expect("devices");
        assert_eq!(listed[1].name, "gpu-1");
        let attribute = &listed[1].attributes.as_ref().expect("attributes")["resource.kubernetes.io/numaNode"];
        assert_eq!(attribute.int, Some(1));
        assert!("nvidia.com/gpu".parse::<DraResource>().is_err());
    }

    #[test]
    fn the_block_refuses_what_a_fleet_cannot_hold_naming_the_field() {
        let error = |value: serde_json::Value| FleetDra::from_value(value).unwrap_err().to_string();
        assert_eq!(
            error(serde_json::json!({"drivers": ["example.com/gpu"]})),
            "dra.drivers[0]: \"example.com/gpu\" is not RESOURCE=DRIVER (nvidia.com/gpu=gpu.example.com)"
        );
        assert!(
            error(serde_json::json!({"resourceClaims": [{"metadata": {"name": "c"}}]}))
                .starts_with("dra.resourceClaims: ")
        );
        let unknown = error(serde_json::json!({"devices": []}));
        assert!(unknown.starts_with("dra.devices: unknown field `devices`"), "{unknown}");
        let block = FleetDra::from_value(serde_json::json!({"drivers": ["a/gpu=gpu.example.com"]})).unwrap();
        assert_eq!(block.drivers[0].driver, "gpu.example.com");
        assert_eq!(
            error(serde_json::json!({"drivers": ["a/gpu=x.example.com", "a/gpu=y.example.com"]})),
            "dra.drivers[1]: a/gpu is named already (dra.drivers[0]): one driver per resource"
        );
    }

    fn resource(text: &str) -> DraResource {
        text.parse().expect("RESOURCE=DRIVER")
    }

    /// A flag and the fleet file naming one resource: the same driver is
    /// taken once, another driver is refused naming both.
    #[test]
    fn flags_add_to_the_block_and_never_override_it() {
        let mut block = FleetDra::from_value(serde_json::json!({"drivers": ["a/gpu=gpu.example.com"]})).expect("block");
        block
            .add_drivers(&[resource("a/gpu=gpu.example.com"), resource("a/nic=nic.example.com")])
            .expect("the same driver again, and a new resource");
        assert_eq!(
            block.drivers,
            [resource("a/gpu=gpu.example.com"), resource("a/nic=nic.example.com")]
        );
        let conflict = block.add_drivers(&[resource("a/gpu=other.example.com")]).unwrap_err();
        assert_eq!(
            conflict.to_string(),
            "--dra a/gpu=other.example.com: the fleet's dra.drivers[0] publishes a/gpu through gpu.example.com; \
             name one driver per resource (leave the flag out, or change the fleet file)"
        );
        assert_eq!(block.drivers.len(), 2, "nothing added on a conflict");
        let mut flags_only = FleetDra::default();
        let conflict = flags_only
            .add_drivers(&[resource("a/nic=nic.example.com"), resource("a/nic=other.example.com")])
            .unwrap_err();
        assert_eq!(conflict.by, "an earlier --dra");
    }

    /// The verdict's words are what people and the extender show: kept.
    #[test]
    fn a_misaligned_verdict_names_both_sides() {
        let slices = resource_slices("n-0", &devices());
        let claim: k8s_openapi::api::resource::v1::ResourceClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p-gpu", "namespace": "ml"},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.example.com", "pool": "n-0", "device": "gpu-0"}]}}}}))
        .expect("claim");
        let devices = PodDevices {
            pod: "ml/p".to_owned(),
            outcome: "allocated".to_owned(),
            message: None,
            claims: vec![topoalign_scenario::dra::ClaimDevices {
                name: "gpu".to_owned(),
                claim: "ml/p-gpu".to_owned(),
                devices: topoalign_scenario::dra::claim_devices(&claim, &slices),
            }],
        };
        let verdict = alignment_verdict(&devices, &BTreeSet::from([1])).expect("misaligned");
        assert_eq!(
            verdict.to_string(),
            "DRA would allocate gpu/gpu: gpu-0 on NUMA node 0 while the kubelet pins the pod's CPUs and memory \
             on NUMA node 1"
        );
        assert_eq!(alignment_verdict(&devices, &BTreeSet::from([0])), None);
        assert_eq!(alignment_verdict(&devices, &BTreeSet::new()), None, "nothing pinned");
    }
}
