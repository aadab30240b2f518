//! The offline document: a fleet file (docs/simulate.md) with three more
//! top-level keys.
//!
//! ```yaml
//! nodes: [...]                 # the fleet, as `topoalign simulate` reads it
//! priorityClasses: {batch: 100, serving: 1000}   # optional: name → value
//! pods:                        # Pod manifests
//!   - metadata: {name: web-0, namespace: shop, labels: {app: web}}
//!     spec:
//!       nodeName: cpu-0        # running there (admitted in list order)
//!       priority: 100          # or priorityClassName; default 0
//!       containers: [...]
//!   - metadata: {name: train}  # no nodeName: pending
//!     spec: {priorityClassName: serving, containers: [...]}
//! disruptionBudgets:           # policy/v1 PodDisruptionBudget manifests
//!   - metadata: {name: web, namespace: shop}
//!     spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}
//! ```
//!
//! Each node starts empty (the fleet's `<entry>-<i>` names) and admits its
//! running pods in list order, exactly as the engine does: the node's
//! state is then the one its kubelet would hold after those admissions. A
//! running pod the node refuses is an error (the document describes a
//! state no kubelet would be in).
//!
//! Owns: the document's shape and its errors (naming the key and field).
//! Must not touch: files (`scenario:` paths are read by the caller's
//! function, as [`topoalign_fleet::Fleet::parse`] does).

use std::collections::BTreeMap;

use serde_json::Value;
use topoalign_fleet::Fleet;
use topoalign_model::Pod;

use crate::budget::BudgetSpec;
use crate::input::{FleetState, Manifest, NodeInput, PendingPod, assemble};

/// An offline document that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("not a valid defrag document: {0}")]
    Syntax(String),
    #[error("invalid fleet: {0}")]
    Fleet(#[from] topoalign_fleet::FleetError),
    #[error("{path}: {message}")]
    Field { path: String, message: String },
}

fn field(path: impl Into<String>, message: impl Into<String>) -> DocumentError {
    DocumentError::Field {
        path: path.into(),
        message: message.into(),
    }
}

/// Reads an offline document: the fleet, its running and pending pods and
/// its disruption budgets, assembled for [`crate::plan()`].
///
/// # Errors
/// [`DocumentError`] naming the key and field.
pub fn parse_document(
    text: &str,
    read_scenario: impl FnMut(&str) -> Result<String, String>,
) -> Result<(FleetState, Vec<PendingPod>), DocumentError> {
    let text = topoalign_k8s::prepare_text(text).map_err(|e| DocumentError::Syntax(e.to_string()))?;
    let mut value: Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| DocumentError::Syntax(format!("JSON: {e}")))?
    } else {
        serde_yaml_ng::from_str(text).map_err(|e| DocumentError::Syntax(format!("YAML: {e}")))?
    };
    let Some(map) = value.as_object_mut() else {
        return Err(DocumentError::Syntax(
            "a defrag document is a mapping with `nodes` and `pods`".into(),
        ));
    };
    let pods = map.remove("pods").unwrap_or(Value::Array(Vec::new()));
    let budgets = map.remove("disruptionBudgets").unwrap_or(Value::Array(Vec::new()));
    let classes = map
        .remove("priorityClasses")
        .unwrap_or(Value::Object(Default::default()));
    // What is left is a fleet file.
    let fleet = Fleet::parse(&value.to_string(), read_scenario)?;

    let classes: BTreeMap<String, i32> = match classes {
        Value::Object(map) => map
            .into_iter()
            .map(|(name, v)| {
                v.as_i64()
                    .and_then(|p| i32::try_from(p).ok())
                    .map(|p| (name.clone(), p))
                    .ok_or_else(|| {
                        field(
                            format!("priorityClasses.{name}"),
                            format!("{v} is not a 32-bit integer"),
                        )
                    })
            })
            .collect::<Result<_, _>>()?,
        Value::Null => BTreeMap::new(),
        _ => return Err(field("priorityClasses", "expected a mapping of class name to priority")),
    };
    let budget_list = list(&budgets, "disruptionBudgets")?;
    let mut budget_specs = Vec::with_capacity(budget_list.len());
    for (i, manifest) in budget_list.iter().enumerate() {
        let at = format!("disruptionBudgets[{i}]");
        let spec = BudgetSpec::from_manifest(manifest, &at).map_err(|e| field(e.path, e.message))?;
        if budget_specs.iter().any(|b: &BudgetSpec| b.key() == spec.key()) {
            return Err(field(
                format!("{at}.metadata.name"),
                format!("{} is named twice", spec.key()),
            ));
        }
        budget_specs.push(spec);
    }

    // Nodes, started empty, in fleet order.
    let names = fleet.node_names();
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    let mut empties = Vec::with_capacity(fleet.groups.len());
    for (g, group) in fleet.groups.iter().enumerate() {
        let node = topoalign_nrt::start_node(&group.spec)
            .map_err(|e| field(format!("nodes[{g}] ({}).kubelet", group.name), e.to_string()))?;
        empties.push(node);
    }
    let mut nodes: Vec<NodeInput> = names
        .iter()
        .map(|(name, g)| NodeInput {
            name: name.clone(),
            node: empties[*g].clone(),
            empty: empties[*g].clone(),
            dra: crate::input::DraCounts::default(),
        })
        .collect();
    for (i, (name, _)) in names.iter().enumerate() {
        index.insert(name.as_str(), i);
    }

    // Pods: running ones admitted on their nodes in order, the rest pending.
    let pod_list = list(&pods, "pods")?;
    let mut running: BTreeMap<String, Manifest<'_>> = BTreeMap::new();
    let mut pending: Vec<(Manifest<'_>, Pod)> = Vec::new();
    let mut keys: BTreeMap<String, usize> = BTreeMap::new();
    for (i, manifest) in pod_list.iter().enumerate() {
        let at = format!("pods[{i}]");
        if let Some(kind) = manifest.get("kind").and_then(Value::as_str)
            && kind != "Pod"
        {
            return Err(field(
                format!("{at}.kind"),
                format!("{kind:?}: list Pods (one per replica)"),
            ));
        }
        let pod = topoalign_k8s::pod_from_value(manifest, &format!("defrag-pod-{i}"))
            .map_err(|e| field(format!("{at}.{}", e.path()), e.message()))?;
        if let Some(first) = keys.insert(pod.key(), i) {
            return Err(field(
                format!("{at}.metadata.name"),
                format!("{} is also pods[{first}]", pod.key()),
            ));
        }
        if running.contains_key(&pod.uid) || pending.iter().any(|(_, p)| p.uid == pod.uid) {
            return Err(field(
                format!("{at}.metadata.uid"),
                format!("{:?} is used by an earlier pod", pod.uid),
            ));
        }
        let origin = format!("{at} ({})", pod.key());
        match manifest.pointer("/spec/nodeName").and_then(Value::as_str) {
            None | Some("") => pending.push((
                Manifest {
                    origin,
                    value: manifest,
                },
                pod,
            )),
            Some(node_name) => {
                let Some(&n) = index.get(node_name) else {
                    return Err(field(
                        format!("{at}.spec.nodeName"),
                        format!("{node_name:?} is not a node of the fleet (nodes are named <entry>-<i>)"),
                    ));
                };
                let uid = pod.uid.clone();
                let decision = nodes[n].node.admit(pod);
                if let Some(rejection) = decision.rejection {
                    return Err(field(
                        format!("{at}.spec.nodeName"),
                        format!(
                            "{node_name}'s kubelet would refuse {origin}: {}: {}",
                            rejection.reason, rejection.message
                        ),
                    ));
                }
                running.insert(
                    uid,
                    Manifest {
                        origin,
                        value: manifest,
                    },
                );
            }
        }
    }
    assemble(nodes, &running, pending, &budget_specs, &classes).map_err(|e| field(e.path, e.message))
}

fn list<'a>(value: &'a Value, key: &str) -> Result<&'a [Value], DocumentError> {
    match value {
        Value::Array(items) => Ok(items),
        Value::Null => Ok(&[]),
        _ => Err(field(key, "expected a list")),
    }
}
