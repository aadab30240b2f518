//! Pods from the files people actually have: several YAML (or JSON)
//! documents in one stream, `v1 List`s as `kubectl get -o yaml` writes them,
//! and workloads — Deployments, StatefulSets, DaemonSets, ReplicaSets,
//! ReplicationControllers, Jobs, CronJobs, PodTemplates — that count by their
//! pod template.
//!
//! Owns: splitting a stream into documents, dispatch on `kind`, turning a
//! pod template into Pod manifests, and errors that name the document and
//! the field (`document 2: spec.template: a Deployment needs a pod
//! template`). Must not touch: reading files (callers pass text; they add
//! the file name) or Pod conversion itself ([`crate::pod`]).

use serde_json::{Map, Value, json};
use topoalign_model::Pod;

use crate::pod::{PodLevelField, pod_from_value_created};

/// One pod read from a stream.
#[derive(Clone, Debug, PartialEq)]
pub struct ManifestPod {
    /// Where it came from, for people: `Pod default/web`, `Deployment
    /// ml/train, replica 2`.
    pub origin: String,
    /// The Pod manifest as admitted (for a workload, its template made into
    /// a Pod named `<workload>-<replica>`).
    pub manifest: Value,
    pub pod: Pod,
}

/// Everything a stream holds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Manifests {
    pub pods: Vec<ManifestPod>,
    /// Documents without pods (a Service, a ConfigMap, ...), in stream
    /// order.
    pub skipped: Vec<Skipped>,
    /// Where a pod's `spec.resources` was dropped, as an API server with
    /// `PodLevelResources` off drops it ([`ManifestOptions::pod_level`]):
    /// `document 2: spec.resources` (the field's path), in stream order.
    pub dropped_pod_level: Vec<String>,
}

/// A document without pods. Displayed for people: `document 3: Service
/// default/web has no pod template; skipped`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skipped {
    /// 1-based, when the stream has several documents.
    pub document: Option<usize>,
    pub kind: String,
    /// `namespace/name`.
    pub name: String,
}

impl std::fmt::Display for Skipped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(document) = self.document {
            write!(f, "document {document}: ")?;
        }
        write!(f, "{} {} has no pod template; skipped", self.kind, self.name)
    }
}

/// The most pods one stream (or workload file) may expand to, replicas
/// included. Kubernetes supports 150,000 pods per cluster; this is well
/// beyond, and bounds memory and time by something a person chose rather
/// than by a number inside the input (`replicas: 1000000000`).
pub const MAX_PODS: usize = 1_000_000;

/// How to read a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestOptions {
    /// Pods made from each workload's template; `None`: as many as the
    /// workload itself runs ([`own_replicas`]).
    pub replicas: Option<u32>,
    /// Pods without `metadata.uid` get `<uid_prefix><n>`, n counting every
    /// pod of the stream from 0.
    pub uid_prefix: String,
    /// Whether the cluster keeps a pod's pod-level `spec.resources`
    /// ([`PodLevelField::of_kubelet`] of the node's kubelet: its release
    /// and `PodLevelResources` gate). Dropped, the field is only decoded,
    /// then left out, as the API server creates the pod
    /// ([`crate::pod_from_value_created`]); each drop is listed in
    /// [`Manifests::dropped_pod_level`]. Default: kept.
    pub pod_level: PodLevelField,
}

impl Default for ManifestOptions {
    fn default() -> Self {
        ManifestOptions {
            replicas: None,
            uid_prefix: "topoalign-pod-".to_owned(),
            pod_level: PodLevelField::Kept,
        }
    }
}

/// A stream that cannot be read: which document (1-based, when the stream
/// has several), which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}{message}",
    document.map(|d| format!("document {d}: ")).unwrap_or_default(),
    if path.is_empty() { String::new() } else { format!("{path}: ") })]
pub struct ManifestError {
    pub document: Option<usize>,
    /// `spec.template.spec.containers[0].resources.limits.cpu`; empty for
    /// the whole document.
    pub path: String,
    pub message: String,
}

/// The workload kinds and where their pod template sits.
const WORKLOADS: [(&str, &[&str]); 8] = [
    ("Deployment", &["spec", "template"]),
    ("StatefulSet", &["spec", "template"]),
    ("DaemonSet", &["spec", "template"]),
    ("ReplicaSet", &["spec", "template"]),
    ("ReplicationController", &["spec", "template"]),
    ("Job", &["spec", "template"]),
    ("CronJob", &["spec", "jobTemplate", "spec", "template"]),
    ("PodTemplate", &["template"]),
];

/// Reads every pod of a YAML or JSON stream, in order.
///
/// # Errors
/// [`ManifestError`] for malformed YAML (with line and column), a document
/// that is not a Kubernetes object, a workload without a pod template, or a
/// pod [`crate::pod_from_value`] refuses (no containers, negative or malformed
/// quantities, ...), naming the document and field.
pub fn read_manifests(text: &str, options: &ManifestOptions) -> Result<Manifests, ManifestError> {
    if let Some(replicas) = options.replicas
        && replicas as usize > MAX_PODS
    {
        return Err(ManifestError {
            document: None,
            path: String::new(),
            message: format!("{replicas} replicas per workload: at most {MAX_PODS} pods are read"),
        });
    }
    let (documents, count) = split_documents(text)?;
    let numbered = count > 1;
    let mut reader = Reader {
        options,
        document: None,
        manifests: Manifests::default(),
        names: std::collections::HashMap::new(),
    };
    for (index, document) in documents {
        let number = numbered.then_some(index + 1);
        reader.document = number;
        reader
            .object(&document, "", None)
            .map_err(|(path, message)| ManifestError {
                document: number,
                path,
                message,
            })?;
    }
    Ok(reader.manifests)
}

/// The non-empty documents of a stream with their positions, and how many
/// documents the stream has, read as `kubectl` reads a file: a stream of
/// JSON objects when it starts with `{`, otherwise YAML documents through
/// `sigs.k8s.io/yaml` ([`crate::go_yaml`]: YAML 1.1 scalars, merge keys).
fn split_documents(text: &str) -> Result<(Vec<(usize, Value)>, usize), ManifestError> {
    let text = crate::nesting::prepare(text).map_err(|e| ManifestError {
        document: None,
        path: String::new(),
        message: e.to_string(),
    })?;
    let read: Box<dyn Iterator<Item = Result<Value, String>>> = if crate::go_yaml::is_json(text) {
        Box::new(
            serde_json::Deserializer::from_str(text)
                .into_iter::<Value>()
                .map(|document| document.map_err(|e| e.to_string())),
        )
    } else {
        Box::new(crate::go_yaml::documents(text).map(|document| document.map_err(|e| e.to_string())))
    };
    let mut documents = Vec::new();
    let mut count = 0;
    for (index, document) in read.enumerate() {
        count = index + 1;
        let value = document.map_err(|message| ManifestError {
            document: Some(index + 1),
            path: String::new(),
            message,
        })?;
        if !value.is_null() {
            documents.push((index, value));
        }
    }
    Ok((documents, count))
}

type Failure = (String, String);

struct Reader<'a> {
    options: &'a ManifestOptions,
    /// The document being read (1-based, when the stream has several).
    document: Option<usize>,
    manifests: Manifests,
    /// `namespace/name` of every pod read so far → where it came from.
    names: std::collections::HashMap<String, String>,
}

fn join(parent: &str, child: &str) -> String {
    match (parent.is_empty(), child.is_empty()) {
        (true, _) => child.to_owned(),
        (_, true) => parent.to_owned(),
        _ => format!("{parent}.{child}"),
    }
}

fn name_of(object: &Map<String, Value>) -> String {
    let metadata = object.get("metadata").and_then(Value::as_object);
    let text = |key| metadata.and_then(|m| m.get(key)).and_then(Value::as_str).unwrap_or("");
    let name = text("name");
    let namespace = text("namespace");
    let namespace = if namespace.is_empty() { "default" } else { namespace };
    format!("{namespace}/{name}")
}

impl Reader<'_> {
    /// One object at `at`; `list_kind` is the kind items of a typed list
    /// (`PodList`) have when they do not say.
    fn object(&mut self, value: &Value, at: &str, list_kind: Option<&str>) -> Result<(), Failure> {
        let Some(object) = value.as_object() else {
            return Err((
                at.to_owned(),
                format!("expected a Kubernetes object (a mapping), found {}", kind_of(value)),
            ));
        };
        let kind = match object.get("kind") {
            Some(Value::String(kind)) => kind.as_str(),
            None | Some(Value::Null) => match list_kind {
                Some(kind) => kind,
                // A bare pod spec document is read as a Pod.
                None if object.get("spec").and_then(|s| s.get("containers")).is_some() => "Pod",
                None => {
                    return Err((
                        join(at, "kind"),
                        "missing: expected a Pod, a List, or a workload (Deployment, StatefulSet, DaemonSet, \
                         ReplicaSet, Job, CronJob)"
                            .to_owned(),
                    ));
                }
            },
            Some(other) => return Err((join(at, "kind"), format!("expected a string, found {other}"))),
        };
        if kind == "Pod" {
            let mut value = value.clone();
            if let Some(name) = generated_name(object, self.manifests.pods.len())
                && let Some(metadata) = value.get_mut("metadata").and_then(Value::as_object_mut)
            {
                metadata.insert("name".into(), json!(name));
            }
            let origin = value.as_object().map_or_else(String::new, name_of);
            return self.pod(value, at, format!("Pod {origin}"));
        }
        if kind == "List" || kind.ends_with("List") {
            let item_kind = kind.strip_suffix("List").filter(|k| !k.is_empty());
            return match object.get("items") {
                None | Some(Value::Null) => Ok(()),
                Some(Value::Array(items)) => {
                    for (i, item) in items.iter().enumerate() {
                        self.object(item, &join(at, &format!("items[{i}]")), item_kind)?;
                    }
                    Ok(())
                }
                Some(other) => Err((join(at, "items"), format!("expected a list, found {}", kind_of(other)))),
            };
        }
        if let Some((_, template_path)) = WORKLOADS.iter().find(|(k, _)| *k == kind) {
            return self.workload(kind, object, template_path, at);
        }
        self.manifests.skipped.push(Skipped {
            document: self.document,
            kind: kind.to_owned(),
            name: name_of(object),
        });
        Ok(())
    }

    fn workload(
        &mut self,
        kind: &str,
        object: &Map<String, Value>,
        template_path: &[&str],
        at: &str,
    ) -> Result<(), Failure> {
        let path = join(at, &template_path.join("."));
        let (first, rest) = template_path.split_first().unwrap_or((&"template", &[]));
        let template = rest
            .iter()
            .try_fold(object.get(*first), |current, key| Some(current?.get(key)))
            .flatten()
            .filter(|t| !t.is_null());
        let Some(template) = template else {
            return Err((path, format!("a {kind} needs a pod template")));
        };
        let Some(template) = template.as_object() else {
            return Err((
                path,
                format!("expected a pod template (a mapping), found {}", kind_of(template)),
            ));
        };
        let workload = name_of(object);
        let (namespace, name) = workload.split_once('/').unwrap_or(("default", workload.as_str()));
        if name.is_empty() {
            return Err((join(at, "metadata.name"), format!("a {kind} needs a name")));
        }
        let mut metadata = template
            .get("metadata")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        metadata.insert("namespace".into(), json!(namespace));
        metadata.remove("uid");
        let spec = template.get("spec").cloned().unwrap_or(Value::Null);
        let replicas = match self.options.replicas {
            Some(replicas) => u64::from(replicas),
            None => own_replicas(kind, object).map_err(|(field, message)| (join(at, field), message))?,
        };
        let room = MAX_PODS.saturating_sub(self.manifests.pods.len());
        if replicas > room as u64 {
            return Err((
                path,
                format!("{replicas} replicas: more than {MAX_PODS} pods in all, refused before they are made"),
            ));
        }
        for replica in 0..replicas {
            let mut metadata = metadata.clone();
            metadata.insert("name".into(), json!(replica_name(name, replica)));
            let manifest = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec});
            let origin = format!("{kind} {workload}, replica {replica}");
            self.pod(manifest, &path, origin)?;
        }
        Ok(())
    }

    fn pod(&mut self, manifest: Value, at: &str, origin: String) -> Result<(), Failure> {
        let uid = format!("{}{}", self.options.uid_prefix, self.manifests.pods.len());
        let (pod, dropped) = pod_from_value_created(&manifest, &uid, self.options.pod_level)
            .map_err(|e| (join(at, e.path()), e.message()))?;
        if dropped {
            let field = join(at, "spec.resources");
            let entry = match self.document {
                Some(document) => format!("document {document}: {field}"),
                None => field,
            };
            // A workload's replicas share one template: one entry.
            if self.manifests.dropped_pod_level.last() != Some(&entry) {
                self.manifests.dropped_pod_level.push(entry);
            }
        }
        if let Some(earlier) = self.names.insert(pod.key(), origin.clone()) {
            return Err((
                join(at, "metadata.name"),
                format!(
                    "{} again (first as {earlier}): the API server holds one pod per namespace/name",
                    pod.key()
                ),
            ));
        }
        self.manifests.pods.push(ManifestPod { origin, manifest, pod });
        Ok(())
    }
}

/// The name the API server gives a pod created with `metadata.generateName`
/// and no `metadata.name`: the prefix (at most 58 characters) and five
/// characters of the generator's alphabet, here the pod's position in the
/// stream rather than random ones. `None` when the pod has a name, or no
/// prefix either.
fn generated_name(object: &Map<String, Value>, position: usize) -> Option<String> {
    /// `names.SimpleNameGenerator`: what it appends, from what alphabet.
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    const RANDOM_LENGTH: usize = 5;
    const MAX_PREFIX: usize = 63 - RANDOM_LENGTH;
    let metadata = object.get("metadata")?.as_object()?;
    if metadata
        .get("name")
        .and_then(Value::as_str)
        .is_some_and(|name| !name.is_empty())
    {
        return None;
    }
    let prefix = metadata.get("generateName")?.as_str().filter(|p| !p.is_empty())?;
    let prefix = match prefix.char_indices().nth(MAX_PREFIX) {
        Some((cut, _)) => &prefix[..cut],
        None => prefix,
    };
    let mut rest = position;
    let mut suffix = [0u8; RANDOM_LENGTH];
    for slot in suffix.iter_mut().rev() {
        *slot = ALPHABET[rest % ALPHABET.len()];
        rest /= ALPHABET.len();
    }
    Some(format!("{prefix}{}", String::from_utf8_lossy(&suffix)))
}

/// Replica `replica`'s pod name, `<workload>-<replica>`, the workload's
/// name shortened (and a trailing `.` or `-` dropped) where the whole would
/// pass the 253 characters of a pod name: the API server takes workload
/// names of that length, and their controllers name pods that fit.
fn replica_name(workload: &str, replica: u64) -> String {
    const MAX_NAME: usize = 253;
    let suffix = format!("-{replica}");
    let room = MAX_NAME.saturating_sub(suffix.len());
    let base = if workload.len() > room {
        // Names are ASCII once valid; an invalid one is refused later anyway.
        let cut = (0..=room).rev().find(|&i| workload.is_char_boundary(i)).unwrap_or(0);
        workload[..cut].trim_end_matches(['.', '-'])
    } else {
        workload
    };
    format!("{base}{suffix}")
}

/// How many pods a workload runs by itself: `spec.replicas` (default 1;
/// a DaemonSet or PodTemplate, one); for a Job, `spec.parallelism`
/// (default 1) capped by `spec.completions`, and for a CronJob its job
/// template's.
///
/// # Errors
/// The field (`spec.replicas`) and what is wrong with it when it is not a
/// non-negative integer.
pub fn own_replicas(kind: &str, object: &Map<String, Value>) -> Result<u64, (&'static str, String)> {
    let number = |field: &'static str, pointer: &str| -> Result<Option<u64>, (&'static str, String)> {
        match object.get("spec").and_then(|spec| spec.pointer(pointer)) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or((field, format!("expected a non-negative integer, found {v}"))),
        }
    };
    match kind {
        "Job" => {
            let parallelism = number("spec.parallelism", "/parallelism")?.unwrap_or(1);
            let completions = number("spec.completions", "/completions")?;
            Ok(completions.map_or(parallelism, |c| c.min(parallelism)))
        }
        "CronJob" => {
            let parallelism =
                number("spec.jobTemplate.spec.parallelism", "/jobTemplate/spec/parallelism")?.unwrap_or(1);
            let completions = number("spec.jobTemplate.spec.completions", "/jobTemplate/spec/completions")?;
            Ok(completions.map_or(parallelism, |c| c.min(parallelism)))
        }
        "DaemonSet" | "PodTemplate" => Ok(1),
        _ => Ok(number("spec.replicas", "/replicas")?.unwrap_or(1)),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Manifests, ManifestError> {
        read_manifests(text, &ManifestOptions::default())
    }

    fn keys(m: &Manifests) -> Vec<String> {
        m.pods.iter().map(|p| p.pod.key()).collect()
    }

    const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n    \
                       resources: {limits: {cpu: '2', memory: 1Gi}}\n";

    #[test]
    fn streams_lists_and_workloads() {
        let text = format!(
            "{POD}---\n# only a comment\n---\napiVersion: v1\nkind: List\nitems:\n- {{kind: Pod, metadata: {{name: a, \
             namespace: t}}, spec: {{containers: [{{name: c}}]}}}}\n---\nkind: Service\nmetadata: {{name: s}}\n---\n\
             apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: train, namespace: ml}}\nspec:\n  replicas: 5\n  \
             template:\n    metadata: {{labels: {{app: train}}}}\n    spec:\n      containers: [{{name: t, resources: \
             {{limits: {{cpu: '4', memory: 8Gi}}}}}}]\n---\nkind: CronJob\nmetadata: {{name: nightly}}\nspec:\n  \
             jobTemplate:\n    spec:\n      template:\n        spec: {{containers: [{{name: j}}]}}\n"
        );
        let options = ManifestOptions {
            replicas: Some(2),
            ..ManifestOptions::default()
        };
        let m = read_manifests(&text, &options).expect("valid");
        assert_eq!(
            keys(&m),
            [
                "default/web",
                "t/a",
                "ml/train-0",
                "ml/train-1",
                "default/nightly-0",
                "default/nightly-1"
            ]
        );
        assert_eq!(m.pods[2].origin, "Deployment ml/train, replica 0");
        assert_eq!(m.pods[2].manifest["metadata"]["labels"]["app"], "train");
        assert_eq!(m.pods[3].pod.uid, "topoalign-pod-3");
        let skipped: Vec<String> = m.skipped.iter().map(ToString::to_string).collect();
        assert_eq!(skipped, ["document 4: Service default/s has no pod template; skipped"]);
    }

    /// Issue 29: the API server accepts a pod with only
    /// `metadata.generateName` (v1.37.2 `ValidatePodCreate` of the pod it
    /// names), and workloads named up to 253 characters, whose controllers
    /// name pods that fit.
    #[test]
    fn generated_and_long_names_are_what_the_api_server_takes() {
        let text = "kind: Pod\nmetadata: {generateName: web-}\nspec: {containers: [{name: c}]}\n---\nkind: Pod\n\
                    metadata: {generateName: web-}\nspec: {containers: [{name: c}]}\n";
        let m = read(text).expect("valid");
        assert_eq!(keys(&m), ["default/web-bbbbb", "default/web-bbbbc"]);
        assert_eq!(m.pods[0].origin, "Pod default/web-bbbbb");
        let long = format!(
            "kind: Pod\nmetadata: {{generateName: {}}}\nspec: {{containers: [{{name: c}}]}}\n",
            "a".repeat(100)
        );
        let m = read(&long).expect("valid");
        assert_eq!(m.pods[0].pod.name, format!("{}bbbbb", "a".repeat(58)));
        assert!(
            read("kind: Pod\nmetadata: {namespace: x}\nspec: {containers: [{name: c}]}\n").is_err(),
            "neither a name nor a prefix"
        );
        let name = format!("{}.{}", "a".repeat(200), "b".repeat(52));
        let text = format!(
            "kind: Deployment\nmetadata: {{name: {name}}}\nspec:\n  replicas: 2\n  template:\n    spec: {{containers: [{{name: c}}]}}\n"
        );
        let m = read(&text).expect("valid");
        assert_eq!(m.pods[1].pod.name, format!("{}.{}-1", "a".repeat(200), "b".repeat(50)));
        assert!(m.pods.iter().all(|p| p.pod.name.len() <= 253));
        assert_eq!(
            replica_name(&format!("{}.b", "a".repeat(250)), 0),
            format!("{}-0", "a".repeat(250))
        );
    }

    #[test]
    fn kubectl_lists_keep_their_uids() {
        let text = "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: p, uid: abc}\n  spec: {containers: [{name: c}]}\n";
        let m = read(text).expect("valid");
        assert_eq!(m.pods[0].pod.uid, "abc");
    }

    #[test]
    fn errors_name_the_document_and_field() {
        let table = [
            (
                "kind: Pod\nmetadata: {name: p}\nspec: {containers: []}\n",
                "spec.containers: a pod needs at least one container",
            ),
            (
                "kind: Deployment\nmetadata: {name: d}\nspec: {replicas: 1}\n",
                "spec.template: a Deployment needs a pod template",
            ),
            (
                "kind: CronJob\nmetadata: {name: c}\nspec: {jobTemplate: {spec: {}}}\n",
                "spec.jobTemplate.spec.template: a CronJob needs a pod template",
            ),
            (
                "kind: Deployment\nmetadata: {name: d}\nspec:\n  template:\n    spec: {containers: [{name: c, resources: {limits: {cpu: '-1'}}}]}\n",
                "spec.template.spec.containers[0].resources.limits.cpu: must be greater than or equal to 0, got \"-1\"",
            ),
            (
                "metadata: {name: p}\n",
                "kind: missing: expected a Pod, a List, or a workload (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, CronJob)",
            ),
            ("- 1\n- 2\n", "expected a Kubernetes object (a mapping), found a list"),
            (
                "kind: List\nitems:\n- kind: Pod\n  metadata: {name: x}\n",
                "items[0].spec.containers: a pod needs at least one container",
            ),
        ];
        for (text, expected) in table {
            assert_eq!(read(text).expect_err(text).to_string(), expected, "{text}");
        }
        let error = read(&format!(
            "{POD}---\nkind: Pod\nmetadata: {{name: q}}\nspec:\n  containers: [\n"
        ))
        .expect_err("bad YAML");
        assert_eq!(error.document, Some(2));
        assert!(error.to_string().starts_with("document 2: "), "{error}");
        assert!(error.message.contains("line"), "YAML errors say where: {error}");
    }
}
