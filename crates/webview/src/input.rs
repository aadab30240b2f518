//! The page's offline input: Kubernetes manifests as `kubectl get -o yaml`
//! writes them — Nodes, NodeResourceTopology objects, Pods, the DRA objects
//! (DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates),
//! and `List`s of them, as YAML documents or JSON — read into the objects a live reading
//! returns ([`Objects`]), so that a file and the API server give the page
//! through the same `topoalign_cluster::build`.
//!
//! A NodeResourceTopology object with no Node of its name in the input
//! stands for a Ready Node of that name, and when the input lists no pod
//! on that node, the pods its exact state holds stand for Running pods
//! there: a file of NRT objects alone, as `topoalign nrt` writes them, is
//! a fleet whose state agrees with its pods.
//!
//! Pure: text in, objects out. Must not touch: what the objects mean (the
//! cluster crate's).

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Node as K8sNode, NodeCondition, NodeStatus, Pod as K8sPod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize as _;
use serde_json::Value;
use topoalign_cluster::{Objects, TopologyObject, UnreadableObject};

/// Why manifests cannot be read; names the document (from 1) and field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("document {document}: not YAML or JSON: {message}")]
    Syntax { document: usize, message: String },
    #[error("document {document}: {field}: {message}")]
    Object {
        document: usize,
        field: String,
        message: String,
    },
}

/// The Nodes, NodeResourceTopology objects and Pods of `text`.
///
/// # Errors
/// [`InputError`] naming the document and field that cannot be read, or
/// the kind that is not one of these.
pub fn objects_from_manifests(text: &str) -> Result<Objects, InputError> {
    let mut objects = Objects::default();
    for (index, document) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
        let number = index + 1;
        let value = Value::deserialize(document).map_err(|e| InputError::Syntax {
            document: number,
            message: e.to_string(),
        })?;
        match value {
            Value::Null => {}
            Value::Array(items) => {
                for (i, item) in items.into_iter().enumerate() {
                    add(&mut objects, item, number, &format!("[{i}]"))?;
                }
            }
            other => add(&mut objects, other, number, "")?,
        }
    }
    let named: BTreeSet<String> = objects.nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
    let missing: Vec<String> = objects
        .topologies
        .iter()
        .filter(|t| !named.contains(&t.name))
        .map(|t| t.name.clone())
        .collect();
    for name in missing {
        objects.nodes.push(ready_node(name));
    }
    let with_pods: BTreeSet<String> = objects
        .pods
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .collect();
    let mut standing = Vec::new();
    for topology in &objects.topologies {
        let Ok(object) = &topology.object else { continue };
        if with_pods.contains(&topology.name) {
            continue;
        }
        // An object whose state cannot be read is the cluster crate's to
        // report; it holds no pods here.
        if let Ok(state) = topoalign_nrt::read_state(object) {
            for pod in &state.pods {
                standing.push(running_pod(
                    &topology.name,
                    pod.namespace.as_str(),
                    pod.name.as_str(),
                    pod.uid.as_str(),
                ));
            }
        }
    }
    objects.pods.extend(standing);
    Ok(objects)
}

/// A Running pod on `node`, standing for one an exact state holds.
fn running_pod(node: &str, namespace: &str, name: &str, uid: &str) -> K8sPod {
    K8sPod {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            uid: Some(uid.to_owned()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".to_owned()),
            ..Default::default()
        }),
    }
}

fn add(objects: &mut Objects, value: Value, document: usize, at: &str) -> Result<(), InputError> {
    let error = |field: &str, message: String| InputError::Object {
        document,
        field: format!(
            "{at}{}{field}",
            if at.is_empty() || field.is_empty() { "" } else { "." }
        ),
        message,
    };
    let kind = value.get("kind").and_then(Value::as_str).unwrap_or_default().to_owned();
    match kind.as_str() {
        "List"
        | "NodeList"
        | "PodList"
        | "NodeResourceTopologyList"
        | "DeviceClassList"
        | "ResourceSliceList"
        | "ResourceClaimList"
        | "ResourceClaimTemplateList" => {
            let items = match value.get("items") {
                Some(Value::Array(items)) => items.clone(),
                Some(Value::Null) | None => Vec::new(),
                Some(_) => return Err(error("items", "not a list".to_owned())),
            };
            for (i, item) in items.into_iter().enumerate() {
                add(objects, item, document, &format!("{at}items[{i}]"))?;
            }
        }
        "Node" => objects
            .nodes
            .push(serde_json::from_value::<K8sNode>(value).map_err(|e| error("", format!("Node: {e}")))?),
        "Pod" => objects
            .pods
            .push(serde_json::from_value::<K8sPod>(value).map_err(|e| error("", format!("Pod: {e}")))?),
        "DeviceClass" => objects
            .dra
            .device_classes
            .push(serde_json::from_value(value).map_err(|e| error("", format!("DeviceClass: {e}")))?),
        "ResourceSlice" => objects
            .dra
            .resource_slices
            .push(serde_json::from_value(value).map_err(|e| error("", format!("ResourceSlice: {e}")))?),
        "ResourceClaim" => objects
            .dra
            .resource_claims
            .push(serde_json::from_value(value).map_err(|e| error("", format!("ResourceClaim: {e}")))?),
        "ResourceClaimTemplate" => objects
            .dra
            .resource_claim_templates
            .push(serde_json::from_value(value).map_err(|e| error("", format!("ResourceClaimTemplate: {e}")))?),
        "NodeResourceTopology" => {
            let name = value
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .ok_or_else(|| error("metadata.name", "missing".to_owned()))?
                .to_owned();
            objects.topologies.push(TopologyObject {
                object: serde_json::from_value(value).map_err(|e| UnreadableObject::new(&name, e)),
                name,
                updated: None,
            });
        }
        "" => return Err(error("kind", "missing".to_owned())),
        other => {
            return Err(error(
                "kind",
                format!(
                    "{other} is not read here (Node, NodeResourceTopology, Pod, DeviceClass, ResourceSlice, \
                     ResourceClaim, ResourceClaimTemplate, or a List of them)"
                ),
            ));
        }
    }
    Ok(())
}

/// A Ready Node named `name`, standing for one the input does not list.
fn ready_node(name: String) -> K8sNode {
    K8sNode {
        metadata: ObjectMeta {
            name: Some(name),
            ..Default::default()
        },
        spec: None,
        status: Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".to_owned(),
                status: "True".to_owned(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_lists_and_standing_nodes() {
        let text = r#"
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: Pod
    metadata: {name: p, namespace: ml, uid: u1}
    spec: {containers: [{name: c}]}
---
apiVersion: topology.node.k8s.io/v1alpha2
kind: NodeResourceTopology
metadata: {name: node-a}
topologyPolicies: [None]
zones: []
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
"#;
        let objects = objects_from_manifests(text).expect("readable");
        assert_eq!(objects.pods.len(), 1);
        assert_eq!(objects.topologies.len(), 1);
        let names: Vec<_> = objects.nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
        assert_eq!(names, ["node-b", "node-a"]);
    }

    #[test]
    fn errors_name_the_document_and_field() {
        let error = objects_from_manifests("kind: Node\n---\nkind: Deployment\nmetadata: {name: x}\n")
            .expect_err("a Deployment is not read");
        assert_eq!(
            error.to_string(),
            "document 2: kind: Deployment is not read here (Node, NodeResourceTopology, Pod, DeviceClass, ResourceSlice, \
             ResourceClaim, ResourceClaimTemplate, or a List of them)"
        );
        let error = objects_from_manifests("kind: List\nitems:\n  - {kind: NodeResourceTopology, metadata: {}}\n")
            .expect_err("no name");
        assert_eq!(error.to_string(), "document 1: items[0].metadata.name: missing");
    }
}
