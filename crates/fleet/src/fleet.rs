//! The fleet file: node shapes, each a `topology` + `kubelet` pair in the
//! format of docs/scenario.md (or a `scenario: PATH` standing for both),
//! repeated `count` times as nodes `<name>-0`, `<name>-1`, …
//!
//! ```yaml
//! kubeletVersion: "1.33"   # optional: the release of every node whose kubelet block does not name one
//! nodes:
//!   - name: gpu-a
//!     count: 100
//!     topology: {numaNodes: [...], cpus: [...], devices: {...}}
//!     kubelet: {topologyManagerPolicy: single-numa-node, cpuManagerPolicy: static, ...}
//!   - name: cpu-b
//!     count: 50
//!     scenario: scenarios/two-socket.yaml   # its topology and kubelet blocks; events ignored
//!     kubelet: {topologyManagerScope: pod}   # optional: keys laid over the scenario's kubelet block
//! dra:                     # optional: devices from DRA (see crate::dra)
//!   drivers: [example.com/gpu=gpu.example.com]
//!   deviceClasses: [...]
//!   resourceClaimTemplates: [...]
//! ```
//!
//! Owns: the file's shape, its errors (naming the entry and field), and
//! reading the shapes into machines. Must not touch the file system:
//! `scenario:` paths are read by a caller-supplied function.

use serde::Deserialize;
use topoalign_model::{KubeletVersion, Machine};
use topoalign_nrt::NodeSpec;
use topoalign_scenario::{Scenario, TopologySpec};

/// A fleet file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FleetError {
    #[error("not a valid fleet document: {0}")]
    Syntax(String),
    #[error("{path}: {message}")]
    Field { path: String, message: String },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetFile {
    #[serde(default, rename = "kubeletVersion")]
    kubelet_version: Option<serde_json::Value>,
    nodes: Vec<EntrySpec>,
    #[serde(default)]
    dra: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntrySpec {
    name: String,
    #[serde(default = "one")]
    count: u32,
    #[serde(default)]
    topology: Option<TopologySpec>,
    #[serde(default)]
    kubelet: Option<serde_json::Value>,
    #[serde(default)]
    scenario: Option<String>,
}

/// Checks a node's `kubeletVersion` and lays the fleet's default under it.
fn node_kubelet_version(kubelet: &mut serde_json::Value, default: Option<KubeletVersion>) -> Result<(), String> {
    if let Some(given) = kubelet.get("kubeletVersion") {
        topoalign_k8s::parse_kubelet_version(given).map_err(|e| format!("kubeletVersion: {e}"))?;
    }
    match default {
        Some(version) if kubelet.is_null() || kubelet.is_object() => {
            if kubelet.get("kubeletVersion").is_none() {
                topoalign_k8s::apply_kubelet_version(kubelet, version).map_err(|e| e.to_string())?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn one() -> u32 {
    1
}

/// The most nodes a fleet may have. Kubernetes supports 5,000 nodes per
/// cluster (some providers 65,000); the bound keeps memory and time
/// following what a person chose, not a number inside the file.
pub const MAX_NODES: usize = 1_000_000;

/// One node shape and how many nodes have it.
#[derive(Clone, Debug)]
pub struct NodeGroup {
    /// The entry's name; its nodes are `<name>-<i>`.
    pub name: String,
    pub count: u32,
    pub spec: NodeSpec,
    pub machine: Machine,
}

impl NodeGroup {
    /// The name of the group's `i`th node, `<name>-<i>`: the one spelling
    /// every command (simulate, the extender, nrt, replay) gives fleet nodes.
    pub fn node_name(&self, i: u32) -> String {
        format!("{}-{i}", self.name)
    }
}

/// A whole fleet.
#[derive(Clone, Debug)]
pub struct Fleet {
    pub groups: Vec<NodeGroup>,
    /// The `dra:` block: device-plugin resources published through DRA
    /// instead, and the DeviceClasses and ResourceClaimTemplates pods use
    /// ([`crate::dra`]).
    pub dra: Option<crate::dra::FleetDra>,
}

impl Fleet {
    /// Reads a fleet from JSON or YAML text; `read_scenario` returns the
    /// text of a `scenario:` path (relative paths are the caller's to
    /// resolve).
    ///
    /// # Errors
    /// [`FleetError`] naming the entry and field.
    pub fn parse(
        text: &str,
        mut read_scenario: impl FnMut(&str) -> Result<String, String>,
    ) -> Result<Fleet, FleetError> {
        let text = topoalign_k8s::prepare_text(text).map_err(|e| FleetError::Syntax(e.to_string()))?;
        let value: serde_json::Value = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| FleetError::Syntax(format!("JSON: {e}")))?
        } else {
            serde_yaml_ng::from_str(text).map_err(|e| FleetError::Syntax(format!("YAML: {e}")))?
        };
        let file = read_file(value)?;
        let dra = file.dra.map(crate::dra::FleetDra::from_value).transpose()?;
        if file.nodes.is_empty() {
            return Err(field("nodes".into(), "a fleet needs at least one entry".into()));
        }
        let default_version = file
            .kubelet_version
            .as_ref()
            .map(|v| topoalign_k8s::parse_kubelet_version(v).map_err(|e| field("kubeletVersion".into(), e.to_string())))
            .transpose()?;
        let mut groups: Vec<NodeGroup> = Vec::new();
        let mut nodes = 0usize;
        for (i, entry) in file.nodes.into_iter().enumerate() {
            let at = |name: &str| format!("nodes[{i}].{name}");
            if entry.count == 0 {
                return Err(field(
                    at("count"),
                    "must be at least 1 (leave the entry out instead)".into(),
                ));
            }
            nodes += entry.count as usize;
            if nodes > MAX_NODES {
                return Err(field(
                    at("count"),
                    format!("{} nodes: a fleet has at most {MAX_NODES} nodes in all", entry.count),
                ));
            }
            if entry.name.is_empty() {
                return Err(field(at("name"), "must not be empty".into()));
            }
            if groups.iter().any(|g| g.name == entry.name) {
                return Err(field(
                    at("name"),
                    format!("{:?} is used by an earlier entry", entry.name),
                ));
            }
            let (topology, kubelet) = match (entry.scenario, entry.topology) {
                (Some(_), Some(_)) => {
                    return Err(field(
                        at("scenario"),
                        "give either `scenario` or `topology`, not both".into(),
                    ));
                }
                (None, None) => return Err(field(at("topology"), "missing: give `topology` or `scenario`".into())),
                (None, Some(topology)) => (topology, entry.kubelet.unwrap_or(serde_json::Value::Null)),
                (Some(path), None) => {
                    let text = read_scenario(&path).map_err(|e| field(at("scenario"), format!("{path}: {e}")))?;
                    let scenario = Scenario::parse(&text).map_err(|e| field(at("scenario"), format!("{path}: {e}")))?;
                    let kubelet = overlay(scenario.kubelet, entry.kubelet);
                    (scenario.topology, kubelet)
                }
            };
            let mut kubelet = kubelet;
            node_kubelet_version(&mut kubelet, default_version).map_err(|e| field(at("kubelet"), e))?;
            // NUMA ids up to 1023 as the kubelet takes them (issue #29): the
            // machine keeps them as labels; every NUMA id printed is one.
            let machine = topology
                .to_machine_with_numa_labels()
                .map_err(|e| field(at("topology"), e.to_string()))?;
            groups.push(NodeGroup {
                name: entry.name,
                count: entry.count,
                spec: NodeSpec { topology, kubelet },
                machine,
            });
        }
        Ok(Fleet { groups, dra })
    }

    /// Applies a command's `--kubelet-version` to every node whose kubelet
    /// block names no release (the fleet's `kubeletVersion` was already laid
    /// over them, so a fleet naming another release is refused).
    ///
    /// # Errors
    /// [`FleetError::Field`] for a node whose block names another release.
    pub fn apply_kubelet_version(&mut self, version: KubeletVersion) -> Result<(), FleetError> {
        for (i, group) in self.groups.iter_mut().enumerate() {
            topoalign_k8s::apply_kubelet_version(&mut group.spec.kubelet, version)
                .map_err(|e| field(format!("nodes[{i}] ({}).kubelet", group.name), e.to_string()))?;
        }
        Ok(())
    }

    /// The number of nodes.
    pub fn node_count(&self) -> usize {
        self.groups.iter().map(|g| g.count as usize).sum()
    }

    /// Node names in fleet order, with their group index.
    pub fn node_names(&self) -> Vec<(String, usize)> {
        let mut names = Vec::with_capacity(self.node_count());
        for (g, group) in self.groups.iter().enumerate() {
            for i in 0..group.count {
                names.push((group.node_name(i), g));
            }
        }
        names
    }
}

/// `base` with the keys of `over` laid on top (one level deep).
fn overlay(base: serde_json::Value, over: Option<serde_json::Value>) -> serde_json::Value {
    match (base, over) {
        (base, None) => base,
        (serde_json::Value::Object(mut base), Some(serde_json::Value::Object(over))) => {
            base.extend(over);
            serde_json::Value::Object(base)
        }
        (_, Some(over)) => over,
    }
}

fn field(path: String, message: String) -> FleetError {
    FleetError::Field { path, message }
}

fn read_file(value: serde_json::Value) -> Result<FleetFile, FleetError> {
    if !value.is_object() {
        return Err(FleetError::Syntax("a fleet is a mapping with a `nodes` list".into()));
    }
    serde_path_to_error::deserialize(value).map_err(|e| FleetError::Field {
        path: e.path().to_string(),
        message: e.into_inner().to_string(),
    })
}
