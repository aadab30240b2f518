//! What a client may ask the agent to admit, read from the request body:
//! a Pod manifest (JSON or YAML, alone or as `{"pod": …}` with options),
//! or a plain request — CPUs, memory, huge pages, devices, a topology
//! policy override — that becomes a one-container Guaranteed pod.
//!
//! Owns: the plain request's shape and checks ([`PlainRequest`]), turning
//! it into a Pod manifest, and the errors a person can act on
//! ([`RequestError`]). Must not touch: the node's state (the ledger's).
//! Everything admitted is recorded as a manifest, so a replay reads one
//! kind of thing.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};
use topoalign_engine::TopologyPolicyName;
use topoalign_model::UnknownName;

/// A body the agent cannot use; the text says what to change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct RequestError(pub String);

/// Options that travel next to the workload (query string, or the
/// envelope's fields).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdmitOptions {
    /// The process that holds the allocation: it is released when the
    /// process (and its cgroup) is gone.
    pub pid: Option<u32>,
    /// A topology manager policy for this request only.
    pub policy: Option<String>,
}

/// A plain request: one workload, one container.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PlainRequest {
    /// A name for people (`topoalign/<name>`); the id when absent.
    pub name: Option<String>,
    /// CPUs: a whole number for exclusive CPUs (`2`, `"4"`), or a
    /// fractional quantity (`"500m"`) for the shared pool.
    pub cpus: Option<Quantity>,
    /// Memory (`"1Gi"`): with whole CPUs, makes the workload Guaranteed.
    pub memory: Option<Quantity>,
    /// Huge pages by page size: `{"1Gi": "2Gi", "2Mi": "512Mi"}`.
    #[serde(default)]
    pub hugepages: BTreeMap<String, Quantity>,
    /// Devices by resource name: `{"nvidia.com/gpu": 1}`.
    #[serde(default)]
    pub devices: BTreeMap<String, u32>,
    /// Topology manager policy for this request only.
    pub policy: Option<String>,
    /// The holding process.
    pub pid: Option<u32>,
}

/// A quantity as JSON may write it: `2`, `"2"`, `"1Gi"`. Any number is
/// taken here (`-1`, `1.5`, `1e30`) so that the checks below can say what
/// is wrong with it, naming the field.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum Quantity {
    Number(serde_json::Number),
    Text(String),
}

impl Quantity {
    fn text(&self) -> String {
        match self {
            Quantity::Number(n) => n.to_string(),
            Quantity::Text(t) => t.trim().to_string(),
        }
    }
}

/// A request, read and checked, before it has an id.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// A `v1.Pod` manifest; `metadata.uid` is set to the id on admission.
    pub manifest: Value,
    pub options: AdmitOptions,
    /// Device resources a plain request asked for (checked against the
    /// machine: the kubelet silently ignores resources the node lacks).
    pub requested_devices: Vec<String>,
    /// Whether `metadata.name` must be filled with the id.
    pub unnamed: bool,
}

impl Workload {
    /// The topology policy override, parsed.
    ///
    /// # Errors
    /// [`RequestError`] naming the valid policies.
    pub fn policy(&self) -> Result<Option<TopologyPolicyName>, RequestError> {
        self.options.policy.as_deref().map(parse_policy).transpose()
    }
}

/// The topology manager policy names the kubelet accepts.
///
/// # Errors
/// [`RequestError`] listing them.
pub fn parse_policy(name: &str) -> Result<TopologyPolicyName, RequestError> {
    name.parse()
        .map_err(|unknown: UnknownName| RequestError(unknown.to_string()))
}

/// Reads a request body. `yaml` is true for a YAML content type; JSON
/// otherwise. `query` options apply to manifests (a plain request or an
/// envelope carries its own, and they must not disagree).
///
/// # Errors
/// [`RequestError`] for a body that is not one of the accepted shapes.
pub fn read_body(body: &[u8], yaml: bool, query: &AdmitOptions) -> Result<Workload, RequestError> {
    let text = std::str::from_utf8(body).map_err(|_| RequestError("the request body is not UTF-8 text".into()))?;
    if text.trim().is_empty() {
        return Err(RequestError(
            "empty request body: send a Pod manifest or a plain request such as {\"cpus\": 2, \"memory\": \"1Gi\"}"
                .into(),
        ));
    }
    let text = topoalign_k8s::prepare_text(text).map_err(|e| RequestError(format!("the body is {e}")))?;
    let value: Value = if yaml {
        topoalign_k8s::go_yaml::to_json(text).map_err(|e| RequestError(format!("the body is not valid YAML: {e}")))?
    } else {
        serde_json::from_str(text).map_err(|e| {
            RequestError(format!(
                "the body is not valid JSON: {e} (send YAML with Content-Type: application/yaml)"
            ))
        })?
    };
    let Value::Object(object) = &value else {
        return Err(RequestError(
            "the body must be a JSON object: a Pod manifest or a plain request".into(),
        ));
    };
    if object.get("kind").and_then(Value::as_str) == Some("Pod") || object.contains_key("spec") {
        return manifest_workload(value, query.clone());
    }
    if let Some(pod) = object.get("pod") {
        let mut options = object.clone();
        options.remove("pod");
        let options: AdmitOptions = serde_json::from_value(Value::Object(options))
            .map_err(|e| RequestError(format!("next to \"pod\" only \"pid\" and \"policy\" may be given: {e}")))?;
        return manifest_workload(pod.clone(), merge_options(options, query)?);
    }
    let plain: PlainRequest = serde_path_to_error::deserialize(value).map_err(|e| {
        let at = match e.path().to_string() {
            path if path == "." => String::new(),
            path => format!("{path}: "),
        };
        RequestError(format!(
            "not a Pod manifest, and not a plain request: {at}{}; a plain request has the fields name, cpus, \
             memory, hugepages, devices, policy, pid",
            e.into_inner()
        ))
    })?;
    plain_workload(&plain, query)
}

fn merge_options(body: AdmitOptions, query: &AdmitOptions) -> Result<AdmitOptions, RequestError> {
    let pick = |field: &str, a: Option<String>, b: Option<String>| match (a, b) {
        (Some(a), Some(b)) if a != b => Err(RequestError(format!(
            "{field} is given twice with different values ({a} in the body, {b} in the query)"
        ))),
        (a, b) => Ok(a.or(b)),
    };
    Ok(AdmitOptions {
        pid: pick("pid", body.pid.map(|p| p.to_string()), query.pid.map(|p| p.to_string()))?
            .and_then(|p| p.parse().ok()),
        policy: pick("policy", body.policy, query.policy.clone())?,
    })
}

fn manifest_workload(manifest: Value, options: AdmitOptions) -> Result<Workload, RequestError> {
    if !manifest.is_object() {
        return Err(RequestError("\"pod\" must be a Pod manifest (an object)".into()));
    }
    let unnamed = manifest
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .is_none_or(str::is_empty);
    let workload = Workload {
        manifest,
        options,
        requested_devices: Vec::new(),
        unnamed,
    };
    workload.policy()?;
    Ok(workload)
}

fn plain_workload(plain: &PlainRequest, query: &AdmitOptions) -> Result<Workload, RequestError> {
    let options = merge_options(
        AdmitOptions {
            pid: plain.pid,
            policy: plain.policy.clone(),
        },
        query,
    )?;
    let mut resources = serde_json::Map::new();
    let Some(cpus) = &plain.cpus else {
        return Err(RequestError(
            "a plain request needs \"cpus\" (e.g. {\"cpus\": 2, \"memory\": \"1Gi\"})".into(),
        ));
    };
    let cpus = checked_quantity("cpus", cpus)?;
    resources.insert("cpu".into(), json!(cpus));
    if let Some(memory) = &plain.memory {
        resources.insert("memory".into(), json!(checked_quantity("memory", memory)?));
    }
    for (size, amount) in &plain.hugepages {
        let is_page_size = topoalign_k8s::parse_quantity(size).is_ok_and(|q| q.is_whole() && q.value() > 0);
        if !is_page_size {
            return Err(RequestError(format!(
                "hugepages: {size:?} is not a page size such as 2Mi or 1Gi"
            )));
        }
        resources.insert(
            format!("{}{size}", topoalign_model::resource_name::HUGEPAGES_PREFIX),
            json!(checked_quantity(&format!("hugepages.{size}"), amount)?),
        );
    }
    for (resource, count) in &plain.devices {
        if *count == 0 {
            continue;
        }
        if !topoalign_model::resource_name::is_extended(resource) {
            return Err(RequestError(format!(
                "devices: {resource:?} is not a device resource name such as nvidia.com/gpu"
            )));
        }
        resources.insert(resource.clone(), json!(count.to_string()));
    }
    if let Some(name) = &plain.name {
        check_name(name)?;
    }
    let mut metadata = serde_json::Map::new();
    metadata.insert("namespace".into(), json!("topoalign"));
    if let Some(name) = &plain.name {
        metadata.insert("name".into(), json!(name));
    }
    let resources = Value::Object(resources);
    let manifest = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": Value::Object(metadata),
        "spec": {
            "containers": [{
                "name": "main",
                "resources": { "requests": resources.clone(), "limits": resources },
            }],
        },
    });
    let workload = Workload {
        manifest,
        options,
        requested_devices: plain
            .devices
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(r, _)| r.clone())
            .collect(),
        unnamed: plain.name.is_none(),
    };
    workload.policy()?;
    Ok(workload)
}

/// A quantity that parses and is positive; returned in its text form.
fn checked_quantity(field: &str, quantity: &Quantity) -> Result<String, RequestError> {
    let text = quantity.text();
    let parsed = topoalign_k8s::parse_quantity(&text).map_err(|e| {
        RequestError(format!(
            "{field}: {text:?} is not a quantity ({e}); write e.g. 2, 500m, 1Gi"
        ))
    })?;
    if parsed.milli() <= 0 {
        return Err(RequestError(format!("{field}: {text:?} must be more than zero")));
    }
    Ok(text)
}

/// A DNS-label-like name: what Kubernetes accepts for a pod name.
fn check_name(name: &str) -> Result<(), RequestError> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().last().is_some_and(|b| b.is_ascii_alphanumeric());
    if valid {
        Ok(())
    } else {
        Err(RequestError(format!(
            "name {name:?}: use lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(body: &str) -> Result<Workload, RequestError> {
        read_body(body.as_bytes(), false, &AdmitOptions::default())
    }

    #[test]
    fn a_plain_request_becomes_a_guaranteed_one_container_pod() -> Result<(), RequestError> {
        let workload = read(
            r#"{"name": "job-1", "cpus": 4, "memory": "8Gi", "hugepages": {"1Gi": "2Gi"},
                "devices": {"nvidia.com/gpu": 1}, "policy": "single-numa-node", "pid": 77}"#,
        )?;
        let limits = json!({"cpu": "4", "memory": "8Gi", "hugepages-1Gi": "2Gi", "nvidia.com/gpu": "1"});
        assert_eq!(
            workload.manifest["spec"]["containers"][0]["resources"]["limits"],
            limits
        );
        assert_eq!(
            workload.manifest["spec"]["containers"][0]["resources"]["requests"],
            limits
        );
        assert_eq!(
            workload.manifest["metadata"],
            json!({"namespace": "topoalign", "name": "job-1"})
        );
        assert_eq!(workload.options.pid, Some(77));
        assert_eq!(workload.policy()?, Some(TopologyPolicyName::SingleNumaNode));
        assert_eq!(workload.requested_devices, vec!["nvidia.com/gpu".to_string()]);
        assert!(!workload.unnamed);
        Ok(())
    }

    #[test]
    fn manifests_come_alone_as_yaml_or_in_an_envelope() -> Result<(), RequestError> {
        let yaml = "kind: Pod\nmetadata: {name: web}\nspec:\n  containers:\n  - name: app\n";
        let query = AdmitOptions {
            pid: Some(5),
            policy: None,
        };
        let workload = read_body(yaml.as_bytes(), true, &query)?;
        assert_eq!(workload.manifest["metadata"]["name"], "web");
        assert_eq!(workload.options.pid, Some(5));
        let enveloped = read(r#"{"pod": {"spec": {"containers": [{"name": "a"}]}}, "policy": "restricted"}"#)?;
        assert!(enveloped.unnamed);
        assert_eq!(enveloped.policy()?, Some(TopologyPolicyName::Restricted));
        Ok(())
    }

    #[test]
    fn bad_requests_say_what_to_change() {
        for (body, expected) in [
            ("", "empty request body"),
            ("[1]", "must be a JSON object"),
            ("{", "not valid JSON"),
            (r#"{"memory": "1Gi"}"#, "needs \"cpus\""),
            (r#"{"cpus": "two"}"#, "cpus: \"two\" is not a quantity"),
            (r#"{"cpus": "0"}"#, "must be more than zero"),
            (r#"{"cpus": 1, "gpus": 1}"#, "unknown field `gpus`"),
            (
                r#"{"cpus": 1, "policy": "numa"}"#,
                "unknown topology manager policy \"numa\"",
            ),
            (r#"{"cpus": 1, "devices": {"gpu": 1}}"#, "not a device resource name"),
            (r#"{"cpus": 1, "hugepages": {"big": "1Gi"}}"#, "not a page size"),
            (r#"{"cpus": 1, "name": "../etc"}"#, "name \"../etc\""),
            (r#"{"pod": {"spec": {}}, "cpus": 1}"#, "only \"pid\" and \"policy\""),
            (r#"{"cpus": 1, "pid": 3}"#, ""),
            (r#"{"cpus": -1}"#, "cpus: \"-1\" must be more than zero"),
            (r#"{"cpus": 1, "memory": -5}"#, "memory: \"-5\" must be more than zero"),
            (
                r#"{"cpus": 1, "devices": {"example.com/nic": -1}}"#,
                "devices.example.com/nic: invalid value",
            ),
            (r#"{"cpus": 1, "pid": "x"}"#, "pid: invalid type"),
        ] {
            match read(body) {
                Ok(_) => assert!(expected.is_empty(), "{body} was accepted"),
                Err(RequestError(message)) => {
                    assert!(!expected.is_empty() && message.contains(expected), "{body}: {message}");
                }
            }
        }
        let conflicting = read_body(
            br#"{"cpus": 1, "pid": 3}"#,
            false,
            &AdmitOptions {
                pid: Some(4),
                policy: None,
            },
        );
        assert!(conflicting.is_err_and(|e| e.0.contains("pid is given twice")));
    }
}
