//! The scenario document (docs/scenario.md v1): its serde shape, reading
//! it from JSON or YAML with errors that name the field, and turning its
//! `topology:` block into a [`Machine`] and back.
//!
//! Pods and the `kubelet:` block stay raw JSON values here: the
//! `topoalign-k8s` crate reads them, and errors get this document's path
//! prepended.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use topoalign_model::{Cpu, CpuSet, Device, Machine, MachineError, NumaNode, hugepage_resource_name};

use crate::ScenarioError;

/// A whole scenario: one node, its kubelet configuration, pod events.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub topology: TopologySpec,
    /// A KubeletConfiguration v1beta1 subset (raw; read by topoalign-k8s).
    #[serde(default)]
    pub kubelet: serde_json::Value,
    #[serde(default)]
    pub events: Vec<EventSpec>,
    /// Dynamic Resource Allocation: what the scheduler allocates to pods'
    /// claims (the kubelet's decision does not see it; [`crate::dra`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dra: Option<Box<crate::dra::DraSpec>>,
}

/// The `topology:` block.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TopologySpec {
    pub numa_nodes: Vec<NumaNodeSpec>,
    #[serde(default)]
    pub cpus: Vec<CpuSpec>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub devices: BTreeMap<String, Vec<DeviceSpec>>,
}

/// One `numaNodes` entry. Huge page pools are keys `hugepages-<size>`.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct NumaNodeSpec {
    pub id: usize,
    #[serde(deserialize_with = "quantity_text")]
    pub memory: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distances: Option<Vec<u64>>,
    /// `hugepages-1Gi: 8Gi` and the like; anything else is rejected when
    /// the machine is built.
    #[serde(flatten)]
    pub other: BTreeMap<String, serde_json::Value>,
}

/// One logical CPU.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CpuSpec {
    pub id: u32,
    pub core: u32,
    pub socket: u32,
    pub numa: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncore_cache: Option<u32>,
}

/// One device of a device-plugin resource.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSpec {
    pub id: String,
    #[serde(default)]
    pub numa: Vec<usize>,
}

/// One event: `add: <Pod>`, `delete: namespace/name`, `resize:` or
/// `restart:`.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resize: Option<ResizeSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartSpec>,
}

/// A `restart` event: the kubelet process ends and a new one starts over
/// its checkpoint files, with the scenario's `kubelet:` block and these
/// fields laid over it (a field given replaces the block's; `null`
/// removes it). The release stays.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RestartSpec {
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub kubelet: serde_json::Map<String, serde_json::Value>,
}

/// A `resize` event: new `cpu`/`memory` requests and limits for some of a
/// pod's containers, as an in-place resize (the pod's `resize`
/// subresource) writes them.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ResizeSpec {
    /// `namespace/name` (or `name` in `default`) of a pod added earlier.
    pub pod: String,
    pub containers: Vec<ResizeContainerSpec>,
}

/// One container of a [`ResizeSpec`]: the amounts given replace the
/// container's; the others stay.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ResizeContainerSpec {
    pub name: String,
    #[serde(default)]
    pub resources: ResizeResources,
}

/// `requests` and `limits` of `cpu` and `memory` (quantities).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ResizeResources {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, serde_json::Value>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, serde_json::Value>,
}

/// A scenario as [`crate::ReplayInput`] reads JSON text: the same shape as
/// [`Scenario`], with each pod deserialized straight into the Kubernetes
/// type (no intermediate `serde_json::Value`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TypedScenario {
    pub topology: TopologySpec,
    #[serde(default)]
    pub kubelet: serde_json::Value,
    #[serde(default)]
    pub events: Vec<TypedEvent>,
    /// A scenario with a `dra:` block is replayed through [`Scenario`].
    #[serde(default)]
    pub dra: Option<serde::de::IgnoredAny>,
}

/// One event of a [`TypedScenario`].
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct TypedEvent {
    #[serde(default)]
    pub add: Option<Box<k8s_openapi::api::core::v1::Pod>>,
    #[serde(default)]
    pub delete: Option<String>,
    #[serde(default)]
    pub resize: Option<ResizeSpec>,
    #[serde(default)]
    pub restart: Option<RestartSpec>,
}

/// Quantities may be written as strings or bare numbers (`memory: 1024`).
fn quantity_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Text {
        String(String),
        Unsigned(u64),
        Float(f64),
    }
    Ok(match Text::deserialize(deserializer)? {
        Text::String(s) => s,
        Text::Unsigned(n) => n.to_string(),
        Text::Float(f) => f.to_string(),
    })
}

impl TypedScenario {
    /// Reads JSON text (after [`topoalign_k8s::prepare_text`]); `None` for
    /// anything [`Scenario::parse`] must read (YAML) or report (any error).
    pub(crate) fn parse_json(text: &str) -> Option<TypedScenario> {
        let text = topoalign_k8s::prepare_text(text).ok()?;
        if !text.trim_start().starts_with('{') {
            return None;
        }
        serde_json::from_str(text).ok()
    }
}

impl Scenario {
    /// Reads a scenario from JSON or YAML text (JSON is tried first when
    /// the text starts with `{`).
    ///
    /// # Errors
    /// [`ScenarioError::Syntax`] for text that is neither, and
    /// [`ScenarioError::Field`] naming the field path of a wrong value.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let text = topoalign_k8s::prepare_text(text).map_err(|e| ScenarioError::Syntax(e.to_string()))?;
        let value: serde_json::Value = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| ScenarioError::Syntax(format!("JSON: {e}")))?
        } else {
            // YAML as Kubernetes (and the oracle) read it: YAML 1.1, so the
            // pods and the kubelet block mean what they mean to the kubelet.
            topoalign_k8s::go_yaml::to_json(text).map_err(|e| ScenarioError::Syntax(format!("YAML: {e}")))?
        };
        if !value.is_object() {
            return Err(ScenarioError::Syntax(
                "a scenario must be a mapping with `topology` and `events`".into(),
            ));
        }
        serde_path_to_error::deserialize(value).map_err(|e| ScenarioError::Field {
            path: e.path().to_string(),
            message: e.into_inner().to_string(),
        })
    }
}

/// `Machine::new` or `Machine::with_numa_labels`.
type MachineBuilder = fn(Vec<NumaNode>, Vec<Cpu>, BTreeMap<String, Vec<Device>>) -> Result<Machine, MachineError>;

impl TopologySpec {
    /// Builds the machine this block describes. NUMA ids must be below 64:
    /// this is the machine of readers that print the machine's own ids
    /// ([`TopologySpec::to_machine_with_numa_labels`] takes larger ones).
    ///
    /// # Errors
    /// [`ScenarioError::Field`] naming the bad field (quantities, huge page
    /// keys) or the broken machine invariant.
    pub fn to_machine(&self) -> Result<Machine, ScenarioError> {
        self.build_machine(Machine::new)
    }

    /// [`TopologySpec::to_machine`], taking NUMA ids up to 1023 as the
    /// kubelet does: with an id past 63 the machine is numbered anew and
    /// keeps the scenario's ids as labels ([`Machine::with_numa_labels`]);
    /// whoever prints its NUMA ids maps them through
    /// [`Machine::numa_label`]. What a replay runs on.
    ///
    /// # Errors
    /// As [`TopologySpec::to_machine`].
    pub fn to_machine_with_numa_labels(&self) -> Result<Machine, ScenarioError> {
        self.build_machine(Machine::with_numa_labels)
    }

    fn build_machine(&self, build: MachineBuilder) -> Result<Machine, ScenarioError> {
        let field = |path: String, message: String| ScenarioError::Field { path, message };
        let mut numa_nodes = Vec::new();
        for (i, spec) in self.numa_nodes.iter().enumerate() {
            let at = |name: &str| format!("topology.numaNodes[{i}].{name}");
            let memory = byte_count(&spec.memory).map_err(|m| field(at("memory"), m))?;
            let mut hugepages = BTreeMap::new();
            for (key, value) in &spec.other {
                let Some(size) = key.strip_prefix(topoalign_model::resource_name::HUGEPAGES_PREFIX) else {
                    return Err(field(
                        at(key),
                        "unknown field; expected id, memory, distances or hugepages-<size>".into(),
                    ));
                };
                let page = byte_count(size).map_err(|m| field(at(key), format!("bad huge page size: {m}")))?;
                if page == 0 {
                    return Err(field(at(key), "huge page size must be positive".into()));
                }
                let text = match value {
                    serde_json::Value::String(s) => s.clone(),
                    serde_json::Value::Number(n) => n.to_string(),
                    other => return Err(field(at(key), format!("expected a quantity, found {other}"))),
                };
                let total = byte_count(&text).map_err(|m| field(at(key), m))?;
                if total % page != 0 {
                    return Err(field(at(key), format!("{text} is not a whole number of {size} pages")));
                }
                hugepages.insert(page, total);
            }
            // `memory` is the node's total, huge page pools included (cAdvisor's
            // MemTotal); pools beyond it would leave a negative rest, which the
            // kubelet's uint64 arithmetic turns into exabytes.
            let pools = hugepages.values().fold(0u64, |sum, &bytes| sum.saturating_add(bytes));
            if pools > memory {
                let (&page, _) = hugepages.iter().next_back().unwrap_or((&0, &0));
                return Err(field(
                    at(&hugepage_resource_name(page)),
                    format!(
                        "the huge page pools ({}) are larger than the node's memory ({}), which includes them",
                        byte_quantity(pools),
                        spec.memory
                    ),
                ));
            }
            numa_nodes.push(NumaNode {
                id: spec.id,
                memory,
                hugepages,
                distances: spec.distances.clone(),
            });
        }
        self.index_distance_rows(&mut numa_nodes)?;
        if let Some((i, cpu)) = self.cpus.iter().enumerate().find(|(_, c)| c.id > CpuSet::MAX_CPU_ID) {
            return Err(field(
                format!("topology.cpus[{i}].id"),
                MachineError::CpuIdTooLarge(cpu.id).to_string(),
            ));
        }
        let cpus = self.cpus.iter().map(Cpu::from).collect();
        for resource in self.devices.keys() {
            check_device_resource(resource).map_err(|m| field(format!("topology.devices.{resource:?}"), m))?;
        }
        let devices = self
            .devices
            .iter()
            .map(|(resource, list)| (resource.clone(), list.iter().map(Device::from).collect()))
            .collect();
        build(numa_nodes, cpus, devices).map_err(|e| field("topology".into(), e.to_string()))
    }

    /// Distance rows are indexed by NUMA id. With sparse ids (`0, 2`) a row
    /// may instead list one distance per node, in id order (as sysfs writes
    /// `nodeN/distance`); it is spread to the id index here, 0 for ids
    /// that do not exist. Other lengths are an error naming the row.
    fn index_distance_rows(&self, nodes: &mut [NumaNode]) -> Result<(), ScenarioError> {
        let mut ids: Vec<usize> = nodes.iter().map(|n| n.id).collect();
        ids.sort_unstable();
        let Some(&max_id) = ids.last() else {
            return Ok(());
        };
        // Ids past the mask's limit: `Machine::new` refuses them, naming the
        // id, and `Machine::with_numa_labels` reads both row forms itself.
        if max_id >= topoalign_model::MAX_NUMA_NODES {
            return Ok(());
        }
        for (i, node) in nodes.iter_mut().enumerate() {
            let Some(row) = &node.distances else {
                continue;
            };
            if row.len() == max_id + 1 {
                continue;
            }
            if row.len() == ids.len() {
                let mut indexed = vec![0; max_id + 1];
                for (&id, &distance) in ids.iter().zip(row) {
                    indexed[id] = distance;
                }
                node.distances = Some(indexed);
                continue;
            }
            let listed: Vec<String> = ids.iter().map(ToString::to_string).collect();
            return Err(ScenarioError::Field {
                path: format!("topology.numaNodes[{i}].distances"),
                message: format!(
                    "{} values; give one per NUMA node in id order ({} values for ids {}) or one per id from 0 \
                     to {max_id} ({} values, 0 where there is no node)",
                    row.len(),
                    ids.len(),
                    listed.join(", "),
                    max_id + 1
                ),
            });
        }
        Ok(())
    }

    /// The block describing `machine`, so that [`TopologySpec::to_machine`]
    /// builds it again. Quantities are written in the largest binary unit
    /// that divides them exactly (`64Gi`, `1536Mi`, plain bytes otherwise);
    /// every huge page pool is written, empty ones as `"0"`.
    pub fn from_machine(machine: &Machine) -> TopologySpec {
        // A machine numbered anew is written with its own ids (rows then
        // list one distance per node, in id order).
        let label = |id: usize| machine.numa_label(id);
        let numa_nodes = machine
            .numa_nodes()
            .iter()
            .map(|node| NumaNodeSpec {
                id: label(node.id),
                memory: byte_quantity(node.memory),
                distances: node.distances.clone(),
                other: node
                    .hugepages
                    .iter()
                    .map(|(&size, &bytes)| {
                        (
                            hugepage_resource_name(size),
                            serde_json::Value::String(byte_quantity(bytes)),
                        )
                    })
                    .collect(),
            })
            .collect();
        TopologySpec {
            numa_nodes,
            cpus: machine
                .cpus()
                .iter()
                .map(|cpu| CpuSpec {
                    numa: label(cpu.numa),
                    ..CpuSpec::from(cpu)
                })
                .collect(),
            devices: machine
                .devices()
                .iter()
                .map(|(name, list)| {
                    let list = list
                        .iter()
                        .map(|device| DeviceSpec {
                            numa: device.numa.iter().map(|&n| label(n)).collect(),
                            ..DeviceSpec::from(device)
                        })
                        .collect();
                    (name.clone(), list)
                })
                .collect(),
        }
    }
}

impl Scenario {
    /// A complete scenario for `machine`: its `topology:` block, an empty
    /// `kubelet:` block (the kubelet's defaults) and no events, ready for
    /// replay once events are added.
    pub fn for_machine(machine: &Machine) -> Scenario {
        Scenario {
            topology: TopologySpec::from_machine(machine),
            kubelet: serde_json::Value::Object(serde_json::Map::new()),
            events: Vec::new(),
            dra: None,
        }
    }
}

impl From<&CpuSpec> for Cpu {
    fn from(c: &CpuSpec) -> Cpu {
        Cpu {
            id: c.id,
            core: c.core,
            socket: c.socket,
            numa: c.numa,
            uncore_cache: c.uncore_cache,
        }
    }
}

impl From<&Cpu> for CpuSpec {
    fn from(c: &Cpu) -> CpuSpec {
        CpuSpec {
            id: c.id,
            core: c.core,
            socket: c.socket,
            numa: c.numa,
            uncore_cache: c.uncore_cache,
        }
    }
}

impl From<&DeviceSpec> for Device {
    fn from(d: &DeviceSpec) -> Device {
        Device {
            id: d.id.clone(),
            numa: d.numa.clone(),
        }
    }
}

impl From<&Device> for DeviceSpec {
    fn from(d: &Device) -> DeviceSpec {
        DeviceSpec {
            id: d.id.clone(),
            numa: d.numa.clone(),
        }
    }
}

/// A device-plugin resource name the kubelet would register: an extended
/// resource name (`vendor.com/device`; not `kubernetes.io/`, not
/// `requests.`; the device manager checks `IsExtendedResourceName`). A
/// device named `cpu` or `memory` would stand beside the kubelet's own
/// resources of that name and be counted twice.
fn check_device_resource(name: &str) -> Result<(), String> {
    if topoalign_model::resource_name::is_extended(name) {
        Ok(())
    } else {
        Err(
            "not a device-plugin resource name: devices are extended resources named domain/name (e.g. \
             nvidia.com/gpu), outside kubernetes.io; cpu, memory and hugepages-* are the kubelet's own"
                .to_owned(),
        )
    }
}

/// Bytes as a Kubernetes quantity in the largest exact binary unit (the
/// inverse of [`byte_count`] for what it returns).
pub fn byte_quantity(bytes: u64) -> String {
    if bytes == 0 {
        return "0".into();
    }
    let units: BTreeMap<u32, &str> = [(40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki")].into_iter().collect();
    for (&shift, suffix) in units.iter().rev() {
        if bytes.trailing_zeros() >= shift {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// A non-negative whole number of bytes from a Kubernetes quantity.
fn byte_count(text: &str) -> Result<u64, String> {
    let quantity = topoalign_k8s::parse_quantity(text).map_err(|e| e.to_string())?;
    if !quantity.is_whole() || quantity.milli() < 0 {
        return Err(format!("{text:?} is not a whole, non-negative number of bytes"));
    }
    u64::try_from(quantity.value()).map_err(|_| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_use_the_largest_exact_unit() {
        assert_eq!(byte_quantity(64 << 30), "64Gi");
        assert_eq!(byte_quantity(1536 << 20), "1536Mi");
        assert_eq!(byte_quantity(33771839488), "32980312Ki");
        assert_eq!(byte_quantity(1000), "1000");
        assert_eq!(byte_quantity(0), "0");
    }
}
