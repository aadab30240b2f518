//! Reading a workload file: Kubernetes documents (YAML with one or more
//! documents, or JSON; a `v1 List` as `kubectl get -o yaml` writes it) of
//! Pods and of workloads (Deployments, StatefulSets, Jobs, ...), each
//! counted as its number of pods, read as every command reads pods
//! ([`topoalign_k8s::read_manifests`]); or one generator document (see
//! [`crate::generator`]).
//!
//! Owns: text → [`Workload`]. Must not touch files (callers pass text).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodResourceClaim;

use crate::generator::GeneratorSpec;
use crate::workload::{Event, Workload, WorkloadError, index_u32};

impl Workload {
    /// Reads a workload from text: Kubernetes documents (YAML with one or
    /// more documents, or JSON), read by [`topoalign_k8s::read_manifests`]
    /// as every command reads pods, or a generator document.
    ///
    /// # Errors
    /// [`WorkloadError`] naming the document and field.
    pub fn parse(text: &str) -> Result<Workload, WorkloadError> {
        if let Some(spec) = generator_document(text) {
            let spec: GeneratorSpec = serde_path_to_error::deserialize(spec).map_err(|e| {
                let path = e.path().to_string();
                let message = e.into_inner().to_string();
                WorkloadError::Generator(if path == "." {
                    format!("generator: {message}")
                } else {
                    format!("generator.{path}: {message}")
                })
            })?;
            return spec
                .generate()
                .map_err(|e| WorkloadError::Generator(format!("generator.{e}")));
        }
        let manifests = topoalign_k8s::read_manifests(text, &topoalign_k8s::ManifestOptions::default())?;
        let mut skipped = BTreeMap::new();
        for document in manifests.skipped {
            *skipped.entry(document.kind).or_default() += 1;
        }
        let mut resource_claims = Vec::with_capacity(manifests.pods.len());
        for read in &manifests.pods {
            resource_claims.push(pod_claims(read)?);
        }
        if resource_claims.iter().all(Vec::is_empty) {
            resource_claims.clear();
        }
        let mut workload = Workload {
            pods: manifests.pods.into_iter().map(|read| read.pod).collect(),
            events: Vec::new(),
            skipped,
            resource_claims,
        };
        workload.events = (0..workload.pods.len()).map(|i| Event::Add(index_u32(i))).collect();
        workload.assign_uids();
        Ok(workload)
    }
}

/// A pod's `spec.resourceClaims` (its DRA claims).
fn pod_claims(read: &topoalign_k8s::ManifestPod) -> Result<Vec<PodResourceClaim>, WorkloadError> {
    let Some(value) = read.manifest.pointer("/spec/resourceClaims") else {
        return Ok(Vec::new());
    };
    serde_path_to_error::deserialize(value.clone()).map_err(|e| {
        let path = e.path().to_string();
        WorkloadError::Claims(format!(
            "{}: spec.resourceClaims{}: {}",
            read.origin,
            if path == "." {
                String::new()
            } else {
                format!("{}{path}", if path.starts_with('[') { "" } else { "." })
            },
            e.into_inner()
        ))
    })
}

/// The `generator` mapping of a text that is one document holding one;
/// `None` for anything else (several documents, Kubernetes objects, text
/// that does not parse: the manifest reader then says what is wrong).
fn generator_document(text: &str) -> Option<serde_yaml_ng::Value> {
    let text = topoalign_k8s::prepare_text(text).ok()?;
    let mut document: serde_yaml_ng::Value = serde_yaml_ng::from_str(text).ok()?;
    document.as_mapping_mut()?.remove("generator")
}

#[cfg(test)]
mod tests {
    use super::*;
    use topoalign_model::Pod;

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
            "document 2: spec.replicas: expected a non-negative integer, found -1"
        );
        let error = Workload::parse(
            "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {cpu: lots}}}]}\n",
        )
        .unwrap_err();
        assert!(
            error.to_string().starts_with("spec.containers[0].resources.limits"),
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
