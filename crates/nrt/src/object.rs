//! The `topology.node.k8s.io/v1alpha2` NodeResourceTopology object, as the
//! upstream API (`k8stopologyawareschedwg/noderesourcetopology-api`)
//! serializes it: `zones`, `attributes` and the deprecated
//! `topologyPolicies` sit at the object's root, not under a `spec`.
//!
//! Owns: the serde shape only. Filling it from a node is [`crate::build`].

use serde::{Deserialize, Serialize};

/// `apiVersion` of the objects written here.
pub const API_VERSION: &str = "topology.node.k8s.io/v1alpha2";
/// `kind` of the objects written here.
pub const KIND: &str = "NodeResourceTopology";
/// The API group, for URLs.
pub const GROUP: &str = "topology.node.k8s.io";
/// The version, for URLs.
pub const VERSION: &str = "v1alpha2";
/// The resource's plural name, for URLs.
pub const PLURAL: &str = "noderesourcetopologies";

/// One node's resources and their topology. Cluster-scoped; its name is
/// the node's name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeResourceTopology {
    #[serde(rename = "apiVersion")]
    pub api_version: String,
    pub kind: String,
    pub metadata: ObjectMeta,
    /// Deprecated in v1alpha2 (consumers read [`Self::attributes`] first)
    /// but still filled: older NodeResourceTopologyMatch versions only
    /// read this.
    #[serde(rename = "topologyPolicies", default)]
    pub topology_policies: Vec<String>,
    pub zones: Vec<Zone>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<AttributeInfo>,
}

/// The part of `metadata` written here.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    pub name: String,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    #[serde(rename = "resourceVersion", default, skip_serializing_if = "Option::is_none")]
    pub resource_version: Option<String>,
}

/// A topology zone; here always one NUMA node (`type: Node`, name
/// `node-<id>`, as the resource-topology-exporter and NFD name them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Zone {
    pub name: String,
    #[serde(rename = "type")]
    pub zone_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub costs: Vec<CostInfo>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<AttributeInfo>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceInfo>,
}

/// One resource of a zone. Quantities are Kubernetes quantity strings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceInfo {
    pub name: String,
    pub capacity: String,
    pub allocatable: String,
    pub available: String,
}

/// The distance from this zone to the zone `name`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CostInfo {
    pub name: String,
    pub value: i64,
}

/// A name/value pair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttributeInfo {
    pub name: String,
    pub value: String,
}

impl NodeResourceTopology {
    /// The value of the top-level attribute `name`.
    pub fn attribute(&self, name: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|a| a.name == name)
            .map(|a| a.value.as_str())
    }
}

/// The zone name of the NUMA node whose id is `numa`: the machine's own
/// id (the Linux NUMA cell id, as the resource-topology-exporter names it
/// through noderesourcetopology-api's `numanode.IDToName`), so on a
/// machine numbered anew for ids past 63 the id
/// [`Machine::numa_label`](topoalign_model::Machine::numa_label) gives.
pub fn zone_name(numa: usize) -> String {
    format!("node-{numa}")
}

/// The NUMA id a zone name written by [`zone_name`] carries (as
/// `numanode.NameToID` reads it): the machine's own id; a reader holding
/// the machine maps it to the node's index with
/// [`Machine::numa_id_of_label`](topoalign_model::Machine::numa_id_of_label)
/// ([`zone_numa_index`]).
pub fn numa_of_zone(name: &str) -> Option<usize> {
    name.strip_prefix("node-")?.parse().ok()
}

/// The index on `machine` of the NUMA node a zone name written by
/// [`zone_name`] names: `None` for a name of another form or an id the
/// machine lacks.
pub fn zone_numa_index(machine: &topoalign_model::Machine, name: &str) -> Option<usize> {
    machine.numa_id_of_label(numa_of_zone(name)?)
}

/// Why text holds no NodeResourceTopology objects.
#[derive(Debug, thiserror::Error)]
pub enum ObjectsError {
    /// Nested deeper than any real object (refused before parsing).
    #[error(transparent)]
    Nesting(#[from] topoalign_k8s::NestingError),
    #[error("JSON: {0}")]
    Json(serde_json::Error),
    #[error("YAML: {0}")]
    Yaml(serde_yaml_ng::Error),
    /// A document that is not an object of this shape, named by its
    /// `metadata.name` where it has one.
    #[error("{}{error}", .name.as_ref().map(|name| format!("{name}: ")).unwrap_or_default())]
    Object {
        name: Option<String>,
        error: serde_json::Error,
    },
}

/// Reads NodeResourceTopology objects from text: a JSON object, a JSON
/// list (or a `List` with `items`), or YAML documents.
///
/// # Errors
/// [`ObjectsError`]: text that is not JSON or YAML, or the first document
/// that is not an object of this shape.
pub fn parse_objects(text: &str) -> Result<Vec<NodeResourceTopology>, ObjectsError> {
    let text = topoalign_k8s::prepare_text(text)?;
    let (objects, mut skipped) = objects_of(values_of(text)?);
    if skipped.is_empty() {
        Ok(objects)
    } else {
        Err(skipped.swap_remove(0))
    }
}

/// The non-empty documents of JSON or YAML text.
fn values_of(text: &str) -> Result<Vec<serde_json::Value>, ObjectsError> {
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        return Ok(match serde_json::from_str(text).map_err(ObjectsError::Json)? {
            serde_json::Value::Array(items) => items,
            other => vec![other],
        });
    }
    let mut values = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value = serde_json::Value::deserialize(document).map_err(ObjectsError::Yaml)?;
        if !value.is_null() {
            values.push(value);
        }
    }
    Ok(values)
}

/// Like [`parse_objects`], but an object of the wrong shape is left out
/// with the reason (naming it by `metadata.name` where it has one) instead
/// of failing the whole text: one bad object must not hide the others.
///
/// # Errors
/// [`ObjectsError`] for text that is not JSON or YAML at all.
pub fn parse_objects_skipping_bad(text: &str) -> Result<(Vec<NodeResourceTopology>, Vec<String>), ObjectsError> {
    let text = topoalign_k8s::prepare_text(text)?;
    let (objects, skipped) = objects_of(values_of(text)?);
    Ok((objects, skipped.iter().map(ToString::to_string).collect()))
}

/// Every object of the documents (`List`s unpacked), and why the others
/// are not objects.
fn objects_of(values: Vec<serde_json::Value>) -> (Vec<NodeResourceTopology>, Vec<ObjectsError>) {
    let mut objects = Vec::new();
    let mut skipped = Vec::new();
    for value in values {
        let items = match value.get("items").and_then(|i| i.as_array()) {
            Some(items) => items.clone(),
            None => vec![value],
        };
        for item in items {
            let name = item
                .pointer("/metadata/name")
                .and_then(|n| n.as_str())
                .map(str::to_owned);
            match serde_json::from_value(item) {
                Ok(object) => objects.push(object),
                Err(error) => skipped.push(ObjectsError::Object { name, error }),
            }
        }
    }
    (objects, skipped)
}
