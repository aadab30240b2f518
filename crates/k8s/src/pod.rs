//! From a Kubernetes `v1.Pod` to the engine's [`Pod`]: identity, core/v1
//! defaulting (requests default to limits), the QoS class exactly as
//! Kubernetes v1.32 computes it, restartable init containers and overhead.
//!
//! Owns: reading pods (typed, JSON value, YAML text) with errors that name
//! the field, and `ComputePodQOS`. Must not touch: admission (the engine's).
//!
//! Beyond what the kubelet itself checks (it trusts the API server), a pod
//! is refused here for what API validation would refuse and would otherwise
//! give a silently wrong answer: no containers, unnamed or duplicate
//! containers, malformed or negative quantities, fractional extended
//! resources (device counts). A `null` amount in a resource list is zero,
//! as Kubernetes reads it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity as K8sQuantity;
use topoalign_model::{Container, Pod, PodResources, QosClass, ResourceList, resource_name};

use crate::quantity::{QuantityError, parse_quantity_field};

/// A pod that cannot be read, with the path of the offending field
/// (`spec.containers[0].resources.limits.cpu`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodError {
    path: String,
    problem: PodProblem,
}

/// `path: problem`, or only the problem when it concerns the whole document.
impl std::fmt::Display for PodError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "{}", self.problem)
        } else {
            write!(f, "{}: {}", self.path, self.problem)
        }
    }
}

impl std::error::Error for PodError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.problem)
    }
}

/// What is wrong with a pod.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PodProblem {
    /// The document does not have a Pod's shape (a wrong type, bad YAML).
    #[error("{0}")]
    Malformed(String),
    #[error("a pod needs a name")]
    NoName,
    #[error("a pod needs at least one container")]
    NoContainers,
    #[error("a container needs a name")]
    UnnamedContainer,
    #[error("duplicate container name {0:?}")]
    DuplicateContainer(String),
    #[error("invalid quantity {text:?}: {error}")]
    InvalidQuantity { text: String, error: QuantityError },
    #[error("must be greater than or equal to 0, got {0:?}")]
    Negative(String),
    #[error("{0:?} is not a whole number: extended resources (devices) are counted in whole units")]
    Fractional(String),
    /// An amount beyond ±1.7·10^29 units with more than 38 significant
    /// digits in billionths: the API server would accept it, but
    /// topoalign does not hold it exactly, so it cannot follow the
    /// kubelet's arithmetic on it.
    #[error(
        "{text:?} is too large for topoalign: beyond 1.7e29 units an amount may have at most 38 significant digits (in billionths) to be held exactly; the API server takes it"
    )]
    TooLarge { text: String },
    /// The API server's `requests <= limits` rule (equal for huge pages and
    /// devices, which cannot be overcommitted); its text.
    #[error("Invalid value: {request:?}: must be {relation} {resource} limit of {limit}")]
    RequestAboveLimit {
        resource: String,
        request: String,
        limit: String,
        relation: &'static str,
    },
    /// A huge page or device request without a limit (API validation).
    #[error("Required value: Limit must be set for non overcommitable resources")]
    LimitRequired,
    /// A name the API server refuses (DNS-1123); the value is escaped.
    #[error("Invalid value: {value:?}: {rule}")]
    InvalidName { value: String, rule: String },
}

impl PodError {
    fn new(path: impl Into<String>, problem: PodProblem) -> PodError {
        PodError {
            path: path.into(),
            problem,
        }
    }

    /// Where in the manifest the problem is (`spec.containers[1].name`);
    /// empty for the whole document.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What the problem is.
    pub fn problem(&self) -> &PodProblem {
        &self.problem
    }

    /// The problem in words, without the path.
    pub fn message(&self) -> String {
        self.problem.to_string()
    }
}

/// Reads a pod manifest held as a JSON value (e.g. a scenario's `add:`).
/// `default_uid` stands in for an absent `metadata.uid`.
///
/// # Errors
/// [`PodError`] naming the field; see [`pod_from_k8s`].
pub fn pod_from_value(manifest: &serde_json::Value, default_uid: &str) -> Result<Pod, PodError> {
    pod_from_k8s(&decode(manifest)?, default_uid)
}

/// The manifest as the Kubernetes type.
fn decode(manifest: &serde_json::Value) -> Result<k8s::Pod, PodError> {
    match serde_path_to_error::deserialize(manifest) {
        Ok(pod) => Ok(pod),
        // Only a manifest that does not read is searched for `null`s.
        Err(error) => match null_quantities_as_zero(manifest) {
            Some(patched) => serde_path_to_error::deserialize(&patched).map_err(|e| malformed(&e)),
            None => Err(malformed(&error)),
        },
    }
}

/// Whether the API server that creates a pod keeps its pod-level
/// `spec.resources`: with its `PodLevelResources` gate off (alpha, off by
/// default, in 1.32 and 1.33), `dropDisabledPodLevelResources`
/// (pkg/api/pod/util.go) drops the field on create before validation, so
/// the kubelet never sees it and the pod-level validation never runs; only
/// decoding read it (a malformed amount is still refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodLevelField {
    /// `PodLevelResources` on: kept, validated, defaulted.
    Kept,
    /// `PodLevelResources` off: dropped.
    Dropped,
}

impl PodLevelField {
    /// What a cluster whose kubelet has `kubelet`'s fields (a scenario's
    /// `kubelet:` block or a configuration file's fields, with
    /// `kubeletVersion`) does with the field: its one gate set stands for
    /// the API server's too. Kept when the fields do not decode (the
    /// kubelet's start then refuses them).
    pub fn of_kubelet(kubelet: &serde_json::Value) -> PodLevelField {
        let Ok(config) = crate::KubeletConfiguration::from_value(kubelet) else {
            return PodLevelField::Kept;
        };
        let version = config.kubelet_version.unwrap_or_default();
        let on = config
            .feature_gates()
            .get("PodLevelResources")
            .copied()
            .unwrap_or(version.at_least(topoalign_model::KubeletVersion::V1_34));
        if on {
            PodLevelField::Kept
        } else {
            PodLevelField::Dropped
        }
    }
}

/// A pod as an API server with [`PodLevelField`] creates it: read as
/// [`pod_from_value`] does, except that with the field dropped
/// `spec.resources` is only decoded, then left out. The `bool` says it
/// was there and was dropped.
///
/// # Errors
/// As [`pod_from_value`]; with the field dropped, none for the content of
/// `spec.resources` beyond a malformed amount.
pub fn pod_from_value_created(
    manifest: &serde_json::Value,
    default_uid: &str,
    field: PodLevelField,
) -> Result<(Pod, bool), PodError> {
    let pod = decode(manifest)?;
    pod_from_k8s_created(&pod, default_uid, field)
}

/// [`pod_from_value_created`] for a typed pod.
///
/// # Errors
/// As [`pod_from_value_created`].
pub fn pod_from_k8s_created(pod: &k8s::Pod, default_uid: &str, field: PodLevelField) -> Result<(Pod, bool), PodError> {
    let written = pod.spec.as_ref().and_then(|spec| spec.resources.as_ref());
    match (field, written) {
        (PodLevelField::Dropped, Some(resources)) => {
            decode_only(resources)?;
            let mut dropped = pod.clone();
            if let Some(spec) = dropped.spec.as_mut() {
                spec.resources = None;
            }
            Ok((pod_from_k8s(&dropped, default_uid)?, true))
        }
        _ => Ok((pod_from_k8s(pod, default_uid)?, false)),
    }
}

/// What decoding alone refuses in `spec.resources`: an amount
/// `Quantity.UnmarshalJSON` cannot parse.
fn decode_only(resources: &k8s::ResourceRequirements) -> Result<(), PodError> {
    for (list, at) in [
        (resources.requests.as_ref(), "spec.resources.requests"),
        (resources.limits.as_ref(), "spec.resources.limits"),
    ] {
        for (resource, K8sQuantity(text)) in list.into_iter().flatten() {
            parse_quantity_field(text).map_err(|error| {
                PodError::new(
                    format!("{at}.{resource}"),
                    PodProblem::InvalidQuantity {
                        text: text.clone(),
                        error,
                    },
                )
            })?;
        }
    }
    Ok(())
}

/// `manifest` with every `null` amount of a resource list — a container's
/// `resources.requests` / `limits`, `spec.overhead`, the pod-level
/// `spec.resources` — replaced by `"0"`, as `Quantity.UnmarshalJSON` reads
/// `null`; `None` when it has none. The API server accepts such a pod, and
/// the amount stays given: a `null` CPU request beside a CPU limit is a
/// request of zero, not one defaulted from the limit.
fn null_quantities_as_zero(manifest: &serde_json::Value) -> Option<serde_json::Value> {
    use serde_json::Value;
    fn zero_nulls(list: Option<&mut Value>, found: &mut bool) {
        for amount in list
            .and_then(Value::as_object_mut)
            .into_iter()
            .flat_map(|map| map.values_mut())
        {
            if amount.is_null() {
                *amount = Value::String("0".to_owned());
                *found = true;
            }
        }
    }
    fn zero_requirements(resources: Option<&mut Value>, found: &mut bool) {
        if let Some(resources) = resources {
            zero_nulls(resources.get_mut("requests"), found);
            zero_nulls(resources.get_mut("limits"), found);
        }
    }
    let mut patched = manifest.clone();
    let mut found = false;
    if let Some(spec) = patched.get_mut("spec") {
        for list in ["containers", "initContainers", "ephemeralContainers"] {
            let containers = spec.get_mut(list).and_then(Value::as_array_mut);
            for container in containers.into_iter().flatten() {
                zero_requirements(container.get_mut("resources"), &mut found);
            }
        }
        zero_nulls(spec.get_mut("overhead"), &mut found);
        zero_requirements(spec.get_mut("resources"), &mut found);
    }
    found.then_some(patched)
}

/// Reads a pod manifest from YAML (or JSON) text.
///
/// # Errors
/// [`PodError`] naming the field; see [`pod_from_k8s`].
pub fn pod_from_yaml(text: &str, default_uid: &str) -> Result<Pod, PodError> {
    let document = |message: String| PodError::new("", PodProblem::Malformed(message));
    let text = crate::nesting::prepare(text).map_err(|e| document(e.to_string()))?;
    // As `kubectl` reads a file: JSON when it starts with `{`, otherwise
    // YAML 1.1 through `sigs.k8s.io/yaml` (`hostNetwork: yes` is true).
    let manifest = if crate::go_yaml::is_json(text) {
        serde_json::from_str(text).map_err(|e| document(e.to_string()))?
    } else {
        crate::go_yaml::to_json(text).map_err(|e| document(e.to_string()))?
    };
    pod_from_value(&manifest, default_uid)
}

fn malformed<E: std::fmt::Display>(error: &serde_path_to_error::Error<E>) -> PodError {
    let path = error.path().to_string();
    let path = if path == "." { String::new() } else { path };
    PodError::new(path, PodProblem::Malformed(error.inner().to_string()))
}

/// Converts a typed pod: namespace `default` when unset, `default_uid` when
/// `metadata.uid` is unset, requests defaulted from limits per container and
/// resource (core/v1 `SetDefaults_Pod`), the QoS class computed from the
/// defaulted resources, `restartPolicy: Always` init containers marked
/// restartable, `spec.overhead` kept.
///
/// # Errors
/// [`PodError`] for a pod API validation would refuse in a way that matters
/// here (see the module docs).
pub fn pod_from_k8s(pod: &k8s::Pod, default_uid: &str) -> Result<Pod, PodError> {
    let metadata = &pod.metadata;
    let name = metadata
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| PodError::new("metadata.name", PodProblem::NoName))?;
    check_name(&name, "metadata.name", NameRule::Subdomain)?;
    let namespace = metadata
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "default".to_owned());
    check_name(&namespace, "metadata.namespace", NameRule::Label)?;
    let uid = metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| default_uid.to_owned());

    let spec = pod
        .spec
        .as_ref()
        .ok_or_else(|| PodError::new("spec.containers", PodProblem::NoContainers))?;
    if spec.containers.is_empty() {
        return Err(PodError::new("spec.containers", PodProblem::NoContainers));
    }
    let init_containers = spec.init_containers.as_deref().unwrap_or_default();
    let init_containers = convert_containers(init_containers, "spec.initContainers", true)?;
    let containers = convert_containers(&spec.containers, "spec.containers", false)?;
    let mut names: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for (index, container) in init_containers.iter().chain(&containers).enumerate() {
        if !names.insert(container.name.as_str()) {
            let path = if index < init_containers.len() {
                format!("spec.initContainers[{index}].name")
            } else {
                format!("spec.containers[{}].name", index - init_containers.len())
            };
            return Err(PodError::new(
                path,
                PodProblem::DuplicateContainer(container.name.clone()),
            ));
        }
    }
    let overhead = resource_list(spec.overhead.as_ref(), "spec.overhead")?;
    let pod_resources = spec.resources.as_ref().map(pod_level_resources).transpose()?;
    let qos = QosClass::of_containers(&init_containers, &containers);
    Ok(Pod {
        namespace,
        name,
        uid,
        qos,
        init_containers,
        containers,
        overhead,
        pod_resources,
    })
}

/// `spec.resources` as written. Its defaulting (requests from the
/// containers' or from its limits) depends on the `PodLevelResources` gate
/// of the API server and kubelet, so the engine applies it at admission.
fn pod_level_resources(resources: &k8s::ResourceRequirements) -> Result<PodResources, PodError> {
    let requests = resource_list(resources.requests.as_ref(), "spec.resources.requests")?;
    let limits = resource_list(resources.limits.as_ref(), "spec.resources.limits")?;
    // Pod-level requests may stand without limits (defaulting fills
    // them in); where both are given, a request above its limit is refused.
    let given_limits: ResourceList = requests
        .keys()
        .filter_map(|resource| limits.get(resource).map(|limit| (resource.clone(), *limit)))
        .collect();
    let both: ResourceList = requests
        .iter()
        .filter(|(resource, _)| given_limits.contains_key(*resource))
        .map(|(resource, request)| (resource.clone(), *request))
        .collect();
    check_requests_within_limits(&both, &given_limits, "spec.resources")?;
    Ok(PodResources { requests, limits })
}

fn convert_containers(list: &[k8s::Container], at: &str, init: bool) -> Result<Vec<Container>, PodError> {
    let mut containers = Vec::with_capacity(list.len());
    for (index, container) in list.iter().enumerate() {
        let at = format!("{at}[{index}]");
        if container.name.is_empty() {
            return Err(PodError::new(format!("{at}.name"), PodProblem::UnnamedContainer));
        }
        check_name(&container.name, &format!("{at}.name"), NameRule::Label)?;
        let resources = container.resources.as_ref();
        let limits = resource_list(
            resources.and_then(|r| r.limits.as_ref()),
            &format!("{at}.resources.limits"),
        )?;
        let mut requests = resource_list(
            resources.and_then(|r| r.requests.as_ref()),
            &format!("{at}.resources.requests"),
        )?;
        check_requests_within_limits(&requests, &limits, &format!("{at}.resources"))?;
        // core/v1 SetDefaults_Pod: a limit without a request is also the request.
        for (resource, limit) in &limits {
            requests.entry(resource.clone()).or_insert(*limit);
        }
        containers.push(Container {
            name: container.name.clone(),
            requests,
            limits,
            restartable: init && container.restart_policy.as_deref() == Some("Always"),
        });
    }
    Ok(containers)
}

/// Parses a resource list, refusing what API validation refuses
/// (`ValidateResourceQuantityValue`: a negative amount; for an extended
/// resource, `MilliValue() % 1000 != 0` in Go's wrapped `int64`). Amounts
/// past `int64` are accepted, as the API server accepts them: the kubelet
/// reads them with Go's wrapped `Value()` / `MilliValue()`, and so does
/// the engine ([`topoalign_model::Quantity::go_value`]).
fn resource_list(list: Option<&BTreeMap<String, K8sQuantity>>, at: &str) -> Result<ResourceList, PodError> {
    let mut parsed = ResourceList::new();
    for (resource, K8sQuantity(text)) in list.into_iter().flatten() {
        let path = || format!("{at}.{resource}");
        let quantity = parse_quantity_field(text).map_err(|error| {
            let problem = match error {
                // Beyond what a quantity holds exactly (43 digits of units).
                QuantityError::TooLarge => PodProblem::TooLarge { text: text.clone() },
                error => PodProblem::InvalidQuantity {
                    text: text.clone(),
                    error,
                },
            };
            PodError::new(path(), problem)
        })?;
        if quantity.is_negative() {
            return Err(PodError::new(path(), PodProblem::Negative(text.clone())));
        }
        if resource_name::is_extended(resource) && quantity.go_milli_value() % 1000 != 0 {
            return Err(PodError::new(path(), PodProblem::Fractional(text.clone())));
        }
        // The API server's defaulting rounds every amount up to a
        // thousandth before validation and before the kubelet sees it.
        parsed.insert(resource.clone(), crate::defaulting::round_up_milli(quantity));
    }
    Ok(parsed)
}

/// API validation of one container's requests against its limits
/// (`validateResourceRequirements`), before requests are defaulted.
fn check_requests_within_limits(requests: &ResourceList, limits: &ResourceList, at: &str) -> Result<(), PodError> {
    for (resource, request) in requests {
        // `IsOvercommitAllowed`.
        let overcommit = resource_name::is_native(resource) && !resource_name::is_hugepages(resource);
        match limits.get(resource) {
            Some(limit) if (!overcommit && request != limit) || request > limit => {
                return Err(PodError::new(
                    format!("{at}.requests"),
                    PodProblem::RequestAboveLimit {
                        resource: resource.clone(),
                        request: request.to_string(),
                        limit: limit.to_string(),
                        relation: if overcommit {
                            "less than or equal to"
                        } else {
                            "equal to"
                        },
                    },
                ));
            }
            None if !overcommit => return Err(PodError::new(format!("{at}.limits"), PodProblem::LimitRequired)),
            _ => {}
        }
    }
    Ok(())
}

/// Which of the API server's DNS-1123 rules a name follows.
#[derive(Clone, Copy)]
enum NameRule {
    /// Pod names: `IsDNS1123Subdomain`, at most 253 characters.
    Subdomain,
    /// Namespaces and container names: `IsDNS1123Label`, at most 63.
    Label,
}

/// Refuses a name the API server would refuse. Besides matching the
/// cluster, this keeps terminal escapes, NUL and bidirectional marks out
/// of everything that prints names (reports, the agent's log).
fn check_name(name: &str, path: &str, rule: NameRule) -> Result<(), PodError> {
    let (max, valid, text) = match rule {
        NameRule::Subdomain => (
            253,
            name.split('.').all(is_dns1123_label_text),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and \
             must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ),
        NameRule::Label => (
            63,
            is_dns1123_label_text(name),
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start \
             and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        ),
    };
    let rule = if name.len() > max {
        format!("must be no more than {max} characters")
    } else if !valid {
        text.to_owned()
    } else {
        return Ok(());
    };
    Err(PodError::new(
        path,
        PodProblem::InvalidName {
            value: name.to_owned(),
            rule,
        },
    ))
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`.
fn is_dns1123_label_text(part: &str) -> bool {
    let bytes = part.as_bytes();
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && bytes[0] != b'-'
        && bytes[bytes.len() - 1] != b'-'
}

/// Whether `text` is a `namespace/name` key the API server could hold.
pub fn is_valid_pod_key(text: &str) -> bool {
    text.split_once('/').is_some_and(|(namespace, name)| {
        check_name(namespace, "", NameRule::Label).is_ok() && check_name(name, "", NameRule::Subdomain).is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use topoalign_model::Quantity;

    fn pod(manifest: Value) -> Result<Pod, PodError> {
        pod_from_value(&manifest, "uid-1")
    }

    fn with_containers(containers: Value, init: Value) -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": containers, "initContainers": init}})
    }

    /// A container from `cpu/memory` request and limit strings ("" = unset).
    fn container(name: &str, requests: (&str, &str), limits: (&str, &str)) -> Value {
        let list = |(cpu, memory): (&str, &str)| {
            let mut map = serde_json::Map::new();
            if !cpu.is_empty() {
                map.insert("cpu".into(), cpu.into());
            }
            if !memory.is_empty() {
                map.insert("memory".into(), memory.into());
            }
            Value::Object(map)
        };
        json!({"name": name, "resources": {"requests": list(requests), "limits": list(limits)}})
    }

    /// Issue 29: the API server (v1.37.2 `ValidatePodCreate` after
    /// decoding) accepts a `null` amount as zero; vector
    /// 1.32/hand-null-pod-quantities holds the kubelet's answer.
    #[test]
    fn a_null_amount_is_zero() {
        let read = pod(json!({"metadata": {"name": "p"}, "spec": {
            "containers": [{"name": "app", "resources": {"requests": {"cpu": null, "memory": "1Gi"},
                "limits": {"cpu": "2", "memory": "1Gi"}}}],
            "overhead": {"cpu": null}}}))
        .unwrap();
        let app = &read.containers[0];
        assert!(
            app.requests.get("cpu").is_some_and(|q| q.is_zero()),
            "given as zero, not defaulted from the limit"
        );
        assert_eq!(read.qos, QosClass::Burstable);
        assert!(read.overhead.get("cpu").is_some_and(|q| q.is_zero()));
        let yaml = "metadata: {name: p}\nspec:\n  containers:\n  - name: app\n    resources:\n      \
                    limits: {cpu: ~}\n      requests: {cpu: '1'}\n";
        // Then a zero limit below the request, which the API server refuses.
        assert_eq!(
            pod_from_yaml(yaml, "u").unwrap_err().to_string(),
            "spec.containers[0].resources.requests: Invalid value: \"1\": must be less than or equal to cpu limit of 0"
        );
        // Other `null`s are still reported where they are.
        let error = pod(json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": null}]}})).unwrap_err();
        assert_eq!(error.path(), "spec.containers[0].name");
    }

    #[test]
    fn identity_and_defaulting() {
        let p = pod(json!({
            "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "app", "resources": {"limits": {"cpu": "2", "memory": "1Gi"},
                "requests": {"cpu": "1"}}}]}
        }))
        .unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.name.as_str(), p.uid.as_str()),
            ("default", "web", "uid-1")
        );
        assert_eq!(p.key(), "default/web");
        let app = &p.containers[0];
        assert_eq!(
            app.request("cpu"),
            Quantity::from_units(1),
            "an explicit request is kept"
        );
        assert_eq!(
            app.request("memory").to_string(),
            "1Gi",
            "a missing request defaults to the limit"
        );
        assert_eq!(p.qos, QosClass::Burstable);

        let p = pod(json!({"metadata": {"name": "x", "namespace": "team", "uid": "abc"},
            "spec": {"containers": [{"name": "c"}], "overhead": {"cpu": "250m"}}}))
        .unwrap();
        assert_eq!((p.namespace.as_str(), p.uid.as_str()), ("team", "abc"));
        assert_eq!(p.overhead.get("cpu").copied().unwrap(), Quantity::from_milli(250));
        assert_eq!(p.qos, QosClass::BestEffort);
    }

    #[test]
    fn sidecars_are_restartable_init_containers() {
        let p = pod(json!({"metadata": {"name": "p"}, "spec": {
            "initContainers": [{"name": "proxy", "restartPolicy": "Always"}, {"name": "setup"}],
            "containers": [{"name": "app", "restartPolicy": "Always"}]}}))
        .unwrap();
        let flags: Vec<(&str, bool, bool)> = p
            .all_containers()
            .map(|(c, init)| (c.name.as_str(), init, c.restartable))
            .collect();
        assert_eq!(
            flags,
            [("proxy", true, true), ("setup", true, false), ("app", false, false)]
        );
    }

    /// Kubernetes' `TestComputePodQOS` cases (pkg/apis/core/v1/helper/qos),
    /// after core/v1 defaulting.
    #[test]
    fn qos_classes_follow_kubernetes() {
        use QosClass::*;
        let none = ("", "");
        let table = [
            (vec![container("a", none, none)], vec![], BestEffort),
            (
                vec![container("a", none, none), container("b", none, none)],
                vec![],
                BestEffort,
            ),
            (vec![container("a", none, ("100m", "100Mi"))], vec![], Guaranteed),
            (
                vec![
                    container("a", none, ("100m", "100Mi")),
                    container("b", none, ("100m", "100Mi")),
                ],
                vec![],
                Guaranteed,
            ),
            (
                vec![container("a", ("100m", "100Mi"), ("100m", "100Mi"))],
                vec![],
                Guaranteed,
            ),
            (
                vec![container("a", none, ("100m", "100Mi")), container("b", none, none)],
                vec![],
                Burstable,
            ),
            (vec![container("a", none, ("100m", ""))], vec![], Burstable),
            (vec![container("a", ("100m", ""), none)], vec![], Burstable),
            (
                vec![container("a", ("10m", "10Mi"), ("100m", "100Mi"))],
                vec![],
                Burstable,
            ),
            (
                vec![container("a", ("100m", "100Mi"), ("100m", "100Mi"))],
                vec![container("i", none, none)],
                Burstable,
            ),
            (
                vec![container("a", ("100m", "100Mi"), ("100m", "100Mi"))],
                vec![container("i", ("10m", "10Mi"), ("100m", "100Mi"))],
                Burstable,
            ),
            (
                vec![container("a", ("100m", "100Mi"), ("100m", "100Mi"))],
                vec![container("i", ("100m", "100Mi"), ("100m", "100Mi"))],
                Guaranteed,
            ),
            (
                vec![container("a", none, none)],
                vec![container("i", ("100m", ""), none)],
                Burstable,
            ),
            // A zero amount does not count.
            (vec![container("a", ("0", "0"), ("0", "0"))], vec![], BestEffort),
            (vec![container("a", ("0", "100Mi"), ("1", "100Mi"))], vec![], Burstable),
        ];
        for (containers, init, expected) in table {
            let manifest = with_containers(Value::Array(containers), Value::Array(init));
            assert_eq!(pod(manifest.clone()).unwrap().qos, expected, "{manifest}");
        }
        // Resources other than cpu and memory never change the class.
        let gpu = json!({"name": "a", "resources": {"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1",
            "ephemeral-storage": "1Gi"}}});
        assert_eq!(pod(with_containers(json!([gpu]), json!([]))).unwrap().qos, Guaranteed);
        let only_gpu = json!({"name": "a", "resources": {"limits": {"nvidia.com/gpu": "1"}}});
        assert_eq!(
            pod(with_containers(json!([only_gpu]), json!([]))).unwrap().qos,
            BestEffort
        );
    }

    #[test]
    fn errors_name_the_field() {
        let limits =
            |cpu: Value| with_containers(json!([{"name": "c", "resources": {"limits": {"cpu": cpu}}}]), json!([]));
        let table = [
            (
                json!({"metadata": {"name": "p"}, "spec": {"containers": []}}),
                "spec.containers: a pod needs at least one container",
            ),
            (
                json!({"metadata": {"name": "p"}}),
                "spec.containers: a pod needs at least one container",
            ),
            (
                json!({"spec": {"containers": [{"name": "c"}]}}),
                "metadata.name: a pod needs a name",
            ),
            (
                limits(json!("1gi")),
                "spec.containers[0].resources.limits.cpu: invalid quantity \"1gi\": quantities must \
             match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ),
            (
                limits(json!("-1")),
                "spec.containers[0].resources.limits.cpu: must be greater than or equal to 0, got \"-1\"",
            ),
            (
                with_containers(
                    json!([{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "500m"}}}]),
                    json!([]),
                ),
                "spec.containers[0].resources.requests.nvidia.com/gpu: \"500m\" is not a whole number: extended \
                 resources (devices) are counted in whole units",
            ),
            (
                with_containers(json!([{"name": "c"}]), json!([{"name": ""}])),
                "spec.initContainers[0].name: a container needs a name",
            ),
            (
                with_containers(json!([{"name": "c"}]), json!([{"name": "c"}])),
                "spec.containers[0].name: duplicate container name \"c\"",
            ),
            (
                json!({"metadata": {"name": "p"}, "spec": {"containers": "app"}}),
                "spec.containers: invalid type: \
             string \"app\", expected a sequence",
            ),
        ];
        for (manifest, expected) in table {
            assert_eq!(pod(manifest.clone()).unwrap_err().to_string(), expected, "{manifest}");
        }
        let error = pod(limits(json!("x"))).unwrap_err();
        assert_eq!(error.path(), "spec.containers[0].resources.limits.cpu");
        assert_eq!(
            error.message(),
            format!("invalid quantity \"x\": {}", QuantityError::FormatWrong)
        );
    }

    #[test]
    fn numbers_and_padded_strings_are_quantities() {
        let p = pod(with_containers(
            json!([{"name": "c", "resources": {"limits": {"cpu": 2, "memory": " 1Gi "}}}]),
            json!([]),
        ))
        .unwrap();
        assert_eq!(p.containers[0].limit("cpu"), Quantity::from_units(2));
        assert_eq!(p.qos, QosClass::Guaranteed);
    }

    /// Issue 29: a pod file reads as `kubectl` reads it, YAML 1.1 through
    /// `sigs.k8s.io/yaml` (`YAMLToJSON` of this text gives `hostNetwork:
    /// true`, `tty: true`, `terminationGracePeriodSeconds: 30`, `cpu: 8`,
    /// and v1.37.2 `ValidatePodCreate` accepts that pod).
    #[test]
    fn yaml_1_1_pods_read_as_kubectl_reads_them() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default}\nspec:\n  hostNetwork: yes\n  \
                    terminationGracePeriodSeconds: 30.0\n  containers:\n  - name: app\n    image: x\n    tty: on\n    \
                    resources:\n      limits: {cpu: 010, memory: 1Gi}\n";
        let p = pod_from_yaml(text, "u").unwrap();
        assert_eq!(p.containers[0].limit("cpu"), Quantity::from_units(8));
        assert_eq!(p.qos, QosClass::Guaranteed);
    }

    #[test]
    fn yaml_manifests() {
        let text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: app\n    \
                    resources:\n      limits:\n        cpu: 4\n        memory: 8Gi\n";
        let p = pod_from_yaml(text, "u").unwrap();
        assert_eq!(p.qos, QosClass::Guaranteed);
        assert_eq!(p.containers[0].request("cpu"), Quantity::from_units(4));
        let error = pod_from_yaml("metadata:\n  name: [\n", "u").unwrap_err();
        assert!(!error.message().is_empty());
        assert!(pod(json!([{"name": "p"}])).is_err());
        let error = pod(json!("not a pod")).unwrap_err();
        assert_eq!(error.path(), "");
        assert_eq!(error.to_string(), error.message());
    }

    /// Whether the cluster keeps `spec.resources`, by release and gate:
    /// `PodLevelResources` is alpha and off by default in v1.32.10 and
    /// v1.33.13, beta and on from v1.34.4 (pkg/features/kube_features.go of
    /// each release).
    #[test]
    fn pod_level_field_follows_the_release_and_the_gate() {
        let cases = [
            (json!({"kubeletVersion": "1.32"}), PodLevelField::Dropped),
            (json!({"kubeletVersion": "1.33"}), PodLevelField::Dropped),
            (json!({"kubeletVersion": "1.34"}), PodLevelField::Kept),
            (json!({"kubeletVersion": "1.37"}), PodLevelField::Kept),
            (json!(null), PodLevelField::Kept),
            (
                json!({"kubeletVersion": "1.32", "featureGates": {"PodLevelResources": true}}),
                PodLevelField::Kept,
            ),
            (
                json!({"kubeletVersion": "1.35", "featureGates": {"PodLevelResources": false}}),
                PodLevelField::Dropped,
            ),
        ];
        for (kubelet, expected) in cases {
            assert_eq!(PodLevelField::of_kubelet(&kubelet), expected, "{kubelet}");
        }
    }

    /// With the gate off the API server drops `spec.resources` before
    /// validation (`dropDisabledPodLevelResources`): what pod-level
    /// validation refuses is no error, the pod has no pod-level resources,
    /// and only what decoding refuses (a malformed amount) still is.
    /// Vectors `1.32|1.33/hand-pod-level-dropped` hold the kubelet's answer.
    #[test]
    fn a_dropped_pod_level_field_is_only_decoded() {
        let with = |resources: Value| {
            json!({"metadata": {"name": "p"}, "spec": {
                "containers": [{"name": "app"}], "resources": resources}})
        };
        for resources in [
            json!({"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}),
            json!({"requests": {"memory": "-1Gi"}, "limits": {"ephemeral-storage": "1Gi", "example.com/gpu": "0.5"}}),
            json!({"limits": {"cpu": "-1"}}),
        ] {
            let manifest = with(resources);
            assert!(pod(manifest.clone()).is_err(), "validated when kept: {manifest}");
            let (read, dropped) = pod_from_value_created(&manifest, "u", PodLevelField::Dropped)
                .unwrap_or_else(|e| panic!("{manifest}: {e}"));
            assert!(dropped);
            assert_eq!(read.pod_resources, None);
            assert_eq!(read.qos, QosClass::BestEffort);
        }
        let malformed = with(json!({"limits": {"cpu": "two"}}));
        let error = pod_from_value_created(&malformed, "u", PodLevelField::Dropped).unwrap_err();
        assert_eq!(error.path(), "spec.resources.limits.cpu");
        let kept = with(json!({"limits": {"cpu": "2"}}));
        let (read, dropped) = pod_from_value_created(&kept, "u", PodLevelField::Kept).expect("valid");
        assert!(!dropped);
        assert!(read.pod_resources.is_some());
        let (_, dropped) = pod_from_value_created(&with(json!(null)), "u", PodLevelField::Dropped).expect("valid");
        assert!(!dropped, "no field, nothing dropped");
    }
}
