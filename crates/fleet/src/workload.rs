//! The workload: ordinary Kubernetes YAML or JSON — several documents, or
//! a `v1 List` as `kubectl get -o yaml` writes it — of Pods and of
//! Deployments / ReplicaSets / StatefulSets / Jobs, each counted as its
//! number of pods; or a generator document (see [`crate::generator`]).
//!
//! Pods are placed in file order; [`Workload::shuffle`] mixes them with a
//! seed. Every pod gets the uid `sim-<index>` (its position in placement
//! order, zero-padded), so uids grow with placement order on every node.
//!
//! Owns: reading workload documents into engine pods and add/delete
//! events. Must not touch files (callers pass text) or placement.

use std::collections::BTreeMap;

use serde::Deserialize;
use topoalign_model::Pod;

use crate::generator::GeneratorSpec;
use crate::rng::Rng;

/// One workload event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Place pod `i` of [`Workload::pods`].
    Add(u32),
    /// Delete pod `i` (if it was placed and admitted).
    Delete(u32),
}

/// Pods and the order they come and go in.
#[derive(Clone, Debug, Default)]
pub struct Workload {
    pub pods: Vec<Pod>,
    pub events: Vec<Event>,
    /// Documents of kinds that are not workloads (Services, ConfigMaps, …),
    /// counted by kind, skipped.
    pub skipped: BTreeMap<String, usize>,
}

/// A workload that cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkloadError {
    #[error("not valid YAML or JSON: {0}")]
    Syntax(String),
    /// `document` counts from 0 in the file; `path` is inside it.
    #[error("document {document}: {path}: {message}")]
    Field {
        document: usize,
        path: String,
        message: String,
    },
    #[error("generator: {0}")]
    Generator(String),
}

impl Workload {
    /// Reads a workload from text (YAML with one or more documents, or
    /// JSON).
    ///
    /// # Errors
    /// [`WorkloadError`] naming the document and field.
    pub fn parse(text: &str) -> Result<Workload, WorkloadError> {
        let documents = documents(text)?;
        if let [single] = documents.as_slice()
            && let Some(spec) = single.get("generator")
        {
            let spec = GeneratorSpec::deserialize(spec).map_err(|e| WorkloadError::Generator(e.to_string()))?;
            return spec.generate().map_err(WorkloadError::Generator);
        }
        let mut reader = Reader::default();
        for (index, document) in documents.iter().enumerate() {
            reader.document(index, "", document)?;
        }
        let mut workload = Workload {
            pods: reader.pods,
            events: Vec::new(),
            skipped: reader.skipped,
        };
        workload.events = (0..workload.pods.len()).map(|i| Event::Add(index_u32(i))).collect();
        workload.assign_uids();
        Ok(workload)
    }

    /// Mixes the order of the pods (and so of their adds) with `seed`.
    /// Only for workloads without deletions (files); a generated workload
    /// has its own order.
    pub fn shuffle(&mut self, seed: u64) {
        if self.events.iter().any(|e| matches!(e, Event::Delete(_))) {
            return;
        }
        Rng::new(seed).shuffle(&mut self.pods);
        self.assign_uids();
    }

    /// Number of pod adds.
    pub fn adds(&self) -> usize {
        self.events.iter().filter(|e| matches!(e, Event::Add(_))).count()
    }

    /// `sim-<index>` in placement order.
    pub(crate) fn assign_uids(&mut self) {
        for (i, pod) in self.pods.iter_mut().enumerate() {
            pod.uid = format!("sim-{i:08}");
        }
    }
}

pub(crate) fn index_u32(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// The documents of a text: JSON (one value) or YAML (a stream), with YAML
/// merge keys applied and empty documents dropped.
fn documents(text: &str) -> Result<Vec<serde_json::Value>, WorkloadError> {
    let text = topoalign_k8s::prepare_text(text).map_err(|e| WorkloadError::Syntax(e.to_string()))?;
    if text.trim_start().starts_with('{') || text.trim_start().starts_with('[') {
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| WorkloadError::Syntax(format!("JSON: {e}")))?;
        return Ok(match value {
            serde_json::Value::Array(items) => items,
            other => vec![other],
        });
    }
    let mut out = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let mut value =
            serde_yaml_ng::Value::deserialize(document).map_err(|e| WorkloadError::Syntax(format!("YAML: {e}")))?;
        value
            .apply_merge()
            .map_err(|e| WorkloadError::Syntax(format!("YAML: {e}")))?;
        if value.is_null() {
            continue;
        }
        let json = serde_json::to_value(&value).map_err(|e| WorkloadError::Syntax(format!("YAML: {e}")))?;
        out.push(json);
    }
    Ok(out)
}

#[derive(Default)]
struct Reader {
    pods: Vec<Pod>,
    skipped: BTreeMap<String, usize>,
}

impl Reader {
    /// One document or list item; `at` is its path inside the document.
    fn document(&mut self, index: usize, at: &str, value: &serde_json::Value) -> Result<(), WorkloadError> {
        let error = |path: &str, message: String| WorkloadError::Field {
            document: index,
            path: join(at, path),
            message,
        };
        let kind = value.get("kind").and_then(|k| k.as_str()).unwrap_or_default();
        if kind == "List" || (kind.ends_with("List") && value.get("items").is_some()) {
            let items = value
                .get("items")
                .and_then(|i| i.as_array())
                .ok_or_else(|| error("items", "a List needs an `items` array".into()))?;
            for (i, item) in items.iter().enumerate() {
                self.document(index, &join(at, &format!("items[{i}]")), item)?;
            }
            return Ok(());
        }
        let name = || {
            value
                .pointer("/metadata/name")
                .and_then(|n| n.as_str())
                .filter(|n| !n.is_empty())
                .ok_or_else(|| error("metadata.name", "missing".into()))
        };
        let namespace = value.pointer("/metadata/namespace").and_then(|n| n.as_str());
        match kind {
            "Pod" => {
                let pod = topoalign_k8s::pod_from_value(value, "").map_err(|e| error(e.path(), e.message()))?;
                self.pods.push(pod);
            }
            "Deployment" | "ReplicaSet" | "StatefulSet" | "Job" => {
                let name = name()?;
                let count = value
                    .as_object()
                    .map_or(Ok(1), |object| topoalign_k8s::own_replicas(kind, object))
                    .map_err(|(path, message)| error(path, message))?;
                let room = topoalign_k8s::MAX_PODS.saturating_sub(self.pods.len());
                if count > room as u64 {
                    let path = if kind == "Job" {
                        "spec.parallelism"
                    } else {
                        "spec.replicas"
                    };
                    return Err(error(
                        path,
                        format!(
                            "{count} pods: a workload has at most {} in all",
                            topoalign_k8s::MAX_PODS
                        ),
                    ));
                }
                let template = value
                    .pointer("/spec/template")
                    .ok_or_else(|| error("spec.template", "missing".into()))?;
                let mut manifest = serde_json::json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": format!("{name}-0")},
                    "spec": template.get("spec").cloned().unwrap_or(serde_json::Value::Null),
                });
                if let Some(namespace) = namespace {
                    manifest["metadata"]["namespace"] = namespace.into();
                }
                let pod = topoalign_k8s::pod_from_value(&manifest, "")
                    .map_err(|e| error(&join("spec.template", e.path()), e.message()))?;
                for i in 0..count {
                    let mut replica = pod.clone();
                    replica.name = format!("{name}-{i}");
                    self.pods.push(replica);
                }
            }
            "" => return Err(error("kind", "missing".into())),
            other => *self.skipped.entry(other.to_string()).or_default() += 1,
        }
        Ok(())
    }
}

fn join(parent: &str, child: &str) -> String {
    match (parent.is_empty(), child.is_empty()) {
        (true, _) => child.to_string(),
        (_, true) => parent.to_string(),
        _ => format!("{parent}.{child}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(workload: &Workload) -> Vec<String> {
        workload.pods.iter().map(Pod::key).collect()
    }

    #[test]
    fn controllers_count_as_their_replicas_in_file_order() {
        let text = r#"
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 3
  template:
    spec:
      containers: [{name: app, resources: {limits: {cpu: "2", memory: 1Gi}}}]
---
apiVersion: v1
kind: Service
metadata: {name: web}
---
apiVersion: batch/v1
kind: Job
metadata: {name: batch}
spec:
  parallelism: 4
  completions: 2
  template:
    spec:
      containers: [{name: work, resources: {requests: {cpu: "1"}}}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  template:
    spec:
      containers: [{name: db, resources: {limits: {cpu: "4", memory: 8Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: solo}
spec:
  containers: [{name: c}]
"#;
        let workload = Workload::parse(text).unwrap();
        assert_eq!(
            names(&workload),
            [
                "shop/web-0",
                "shop/web-1",
                "shop/web-2",
                "default/batch-0",
                "default/batch-1",
                "default/db-0",
                "default/solo"
            ]
        );
        assert_eq!(workload.skipped.get("Service"), Some(&1));
        assert_eq!(workload.adds(), 7);
        assert_eq!(workload.pods[0].uid, "sim-00000000");
        assert_eq!(workload.pods[6].uid, "sim-00000006");
        assert_eq!(workload.pods[0].qos, topoalign_model::QosClass::Guaranteed);
    }

    #[test]
    fn a_v1_list_as_kubectl_writes_it_is_read_item_by_item() {
        let text = r#"{"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a"}, "spec": {"containers": [{"name": "c"}]}},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
             "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}}
        ]}"#;
        let workload = Workload::parse(text).unwrap();
        assert_eq!(names(&workload), ["default/a", "default/rs-0", "default/rs-1"]);
    }

    #[test]
    fn errors_name_the_document_and_field() {
        let text = "kind: Pod\nmetadata: {name: ok}\nspec: {containers: [{name: c}]}\n---\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: -1, template: {spec: {containers: []}}}\n";
        let error = Workload::parse(text).unwrap_err();
        assert_eq!(
            error.to_string(),
            "document 1: spec.replicas: expected a non-negative integer, found -1"
        );
        let error = Workload::parse(
            "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {cpu: lots}}}]}\n",
        )
        .unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("document 0: spec.containers[0].resources.limits"),
            "{error}"
        );
    }

    #[test]
    fn shuffle_is_seeded_and_keeps_uids_in_placement_order() {
        let text = "kind: Deployment\nmetadata: {name: d}\nspec: {replicas: 20, template: {spec: {containers: [{name: c}]}}}\n";
        let mut a = Workload::parse(text).unwrap();
        let mut b = a.clone();
        a.shuffle(3);
        b.shuffle(3);
        assert_eq!(names(&a), names(&b));
        assert_ne!(names(&a)[..5], names(&Workload::parse(text).unwrap())[..5]);
        assert!(a.pods.windows(2).all(|w| w[0].uid < w[1].uid));
    }
}
