//! [`KubeletConfiguration`]: the `kubelet.config.k8s.io/v1beta1` fields
//! topoalign reads, decoded as the kubelet's config-file loader decodes
//! them, with the v1beta1 defaults (`SetDefaults_KubeletConfiguration`).
//!
//! Owns: field names and types, decoding errors with the field's path, and
//! the defaults. Other v1beta1 fields are accepted and ignored, as the
//! kubelet's loader accepts unknown fields in a v1beta1 file (with a
//! warning). A JSON `null` is read as Go's `encoding/json` reads it: the
//! field keeps its zero value, and a `null` map value or list element is
//! the element type's zero value (`featureGates: {X: null}` turns `X`
//! off; `reservedMemory: [null]` is a reservation of nothing on NUMA 0;
//! `systemReserved: {memory: null}` is the empty string the kubelet then
//! fails to parse). Must not touch: validation and start-up steps (see
//! [`crate::validation`] and [`crate::startup`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use topoalign_engine::{CpuPolicyName, MemoryPolicyName, TopologyPolicyName, TopologyScope};
use topoalign_model::{KubeletVersion, KubeletVersionError, Quantity};

use crate::quantity::parse_quantity_field;

/// The API group/version a kubelet configuration file must declare.
pub const API_VERSION: &str = "kubelet.config.k8s.io/v1beta1";
/// The kind a kubelet configuration file must declare.
pub const KIND: &str = "KubeletConfiguration";

/// Why a configuration could not be turned into a node configuration.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The document is not a KubeletConfiguration the kubelet could decode
    /// (a wrong type, a malformed quantity in `reservedMemory`, a bad
    /// `apiVersion`): not a kubelet decision, an input error. `path` is
    /// empty when the whole document is at fault.
    #[error("{}{message}", if path.is_empty() { String::new() } else { format!("{path}: ") })]
    Invalid { path: String, message: String },
    /// The kubelet would refuse to start with it; the text is the kubelet's.
    #[error("{0}")]
    Refused(String),
}

/// The KubeletConfiguration fields topoalign reads. `None` means absent
/// (the v1beta1 default applies; see the accessor methods).
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KubeletConfiguration {
    pub api_version: Option<String>,
    pub kind: Option<String>,
    /// `kubeletVersion`: not a KubeletConfiguration field but topoalign's
    /// (docs/scenario.md), read beside them: the release whose rules apply.
    #[serde(default, deserialize_with = "kubelet_version")]
    pub kubelet_version: Option<KubeletVersion>,

    pub topology_manager_policy: Option<String>,
    pub topology_manager_scope: Option<String>,
    #[serde(default, deserialize_with = "go_map")]
    pub topology_manager_policy_options: Option<BTreeMap<String, String>>,
    pub cpu_manager_policy: Option<String>,
    #[serde(default, deserialize_with = "go_map")]
    pub cpu_manager_policy_options: Option<BTreeMap<String, String>>,
    pub memory_manager_policy: Option<String>,
    #[serde(rename = "reservedSystemCPUs")]
    pub reserved_system_cpus: Option<String>,
    #[serde(default, deserialize_with = "go_map")]
    pub system_reserved: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "go_map")]
    pub kube_reserved: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "go_map")]
    pub eviction_hard: Option<BTreeMap<String, String>>,
    /// `mergeDefaultEvictionSettings` (v1beta1 from 1.33, default false).
    pub merge_default_eviction_settings: Option<bool>,
    #[serde(default, deserialize_with = "go_list")]
    pub reserved_memory: Option<Vec<MemoryReservation>>,
    #[serde(default, deserialize_with = "go_map")]
    pub feature_gates: Option<BTreeMap<String, bool>>,
    pub max_pods: Option<i32>,
    #[serde(default, deserialize_with = "go_map")]
    pub qos_reserved: Option<BTreeMap<String, String>>,

    // Fields only ValidateKubeletConfiguration looks at.
    pub node_lease_duration_seconds: Option<i32>,
    #[serde(rename = "cgroupsPerQOS")]
    pub cgroups_per_qos: Option<bool>,
    #[serde(default, deserialize_with = "go_list")]
    pub enforce_node_allocatable: Option<Vec<String>>,
    pub system_reserved_cgroup: Option<String>,
    pub kube_reserved_cgroup: Option<String>,
    pub system_cgroups: Option<String>,
    pub cgroup_root: Option<String>,
    pub event_burst: Option<i32>,
    #[serde(rename = "eventRecordQPS")]
    pub event_record_qps: Option<i32>,
    pub healthz_port: Option<i32>,
    #[serde(rename = "imageGCHighThresholdPercent")]
    pub image_gc_high_threshold_percent: Option<i32>,
    #[serde(rename = "imageGCLowThresholdPercent")]
    pub image_gc_low_threshold_percent: Option<i32>,
    pub iptables_drop_bit: Option<i32>,
    pub iptables_masquerade_bit: Option<i32>,
    #[serde(rename = "kubeAPIBurst")]
    pub kube_api_burst: Option<i32>,
    #[serde(rename = "kubeAPIQPS")]
    pub kube_api_qps: Option<i32>,
    pub node_status_max_images: Option<i32>,
    pub max_open_files: Option<i64>,
    pub oom_score_adj: Option<i32>,
    pub pods_per_core: Option<i32>,
    pub port: Option<i32>,
    pub read_only_port: Option<i32>,
    pub registry_burst: Option<i32>,
    #[serde(rename = "registryPullQPS")]
    pub registry_pull_qps: Option<i32>,
    pub max_parallel_image_pulls: Option<i32>,
    pub serialize_image_pulls: Option<bool>,
    #[serde(rename = "serverTLSBootstrap")]
    pub server_tls_bootstrap: Option<bool>,
    pub hairpin_mode: Option<String>,
    pub memory_swap: Option<MemorySwap>,
    pub memory_throttling_factor: Option<f64>,
    pub enable_system_log_query: Option<bool>,
    pub enable_system_log_handler: Option<bool>,
    pub container_log_max_workers: Option<i32>,
    pub pod_logs_dir: Option<String>,
}

/// One `reservedMemory` entry (`MemoryReservation`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryReservation {
    #[serde(default, deserialize_with = "go_value")]
    pub numa_node: i32,
    /// As the kubelet holds them after loading its file: rounded up to
    /// thousandths (`SetObjectDefaults_KubeletConfiguration` calls
    /// `SetDefaults_ResourceList` on each; [`crate::defaulting`]).
    #[serde(default, deserialize_with = "defaulted_quantity_map")]
    pub limits: BTreeMap<String, Quantity>,
}

/// `memorySwap`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MemorySwap {
    pub swap_behavior: Option<String>,
}

/// A `v1.ResourceList` as Kubernetes decodes one: quantity strings (or bare
/// numbers), trimmed.
fn quantity_map<'de, D: Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, Quantity>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Text {
        String(String),
        Integer(i64),
        Unsigned(u64),
        Float(f64),
        /// `Quantity.UnmarshalJSON` reads `null` as zero.
        Null(()),
    }
    let raw: Option<BTreeMap<String, Text>> = Option::deserialize(deserializer)?;
    let mut map = BTreeMap::new();
    for (name, text) in raw.unwrap_or_default() {
        let text = match text {
            Text::String(s) => s,
            Text::Integer(n) => n.to_string(),
            Text::Unsigned(n) => n.to_string(),
            Text::Float(f) => f.to_string(),
            Text::Null(()) => {
                map.insert(name, Quantity::ZERO);
                continue;
            }
        };
        let quantity = parse_quantity_field(&text)
            .map_err(|e| serde::de::Error::custom(format_args!("{name}: invalid quantity {text:?}: {e}")))?;
        map.insert(name, quantity);
    }
    Ok(map)
}

/// [`quantity_map`], then the v1beta1 defaulting of a `v1.ResourceList`:
/// every amount rounded up to a thousandth.
fn defaulted_quantity_map<'de, D: Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, Quantity>, D::Error> {
    let mut map = quantity_map(deserializer)?;
    for amount in map.values_mut() {
        *amount = crate::defaulting::round_up_milli(*amount);
    }
    Ok(map)
}

/// A value Go's `encoding/json` decodes into a non-pointer field: `null`
/// leaves the zero value.
fn go_value<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(deserializer: D) -> Result<T, D::Error> {
    Ok(Option::deserialize(deserializer)?.unwrap_or_default())
}

/// A Go map: `null` is a nil map (`None`), and a `null` value is the
/// element type's zero value (`""`, `false`).
fn go_map<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    deserializer: D,
) -> Result<Option<BTreeMap<String, T>>, D::Error> {
    let raw: Option<BTreeMap<String, Option<T>>> = Option::deserialize(deserializer)?;
    Ok(raw.map(|map| {
        map.into_iter()
            .map(|(key, value)| (key, value.unwrap_or_default()))
            .collect()
    }))
}

/// A Go slice: `null` is a nil slice (`None`), and a `null` element is the
/// element type's zero value.
fn go_list<'de, D: Deserializer<'de>, T: Deserialize<'de> + Default>(
    deserializer: D,
) -> Result<Option<Vec<T>>, D::Error> {
    let raw: Option<Vec<Option<T>>> = Option::deserialize(deserializer)?;
    Ok(raw.map(|list| list.into_iter().map(Option::unwrap_or_default).collect()))
}

/// Every field of `kubelet.config.k8s.io/v1beta1` `KubeletConfiguration`
/// (k8s.io/kubelet v0.32 `config/v1beta1/types.go`), plus `apiVersion` and
/// `kind`: what the kubelet's strict decoding knows.
const KNOWN_FIELDS: [&str; 122] = [
    "apiVersion",
    "kind",
    "enableServer",
    "staticPodPath",
    "podLogsDir",
    "syncFrequency",
    "fileCheckFrequency",
    "httpCheckFrequency",
    "staticPodURL",
    "staticPodURLHeader",
    "address",
    "port",
    "readOnlyPort",
    "tlsCertFile",
    "tlsPrivateKeyFile",
    "tlsCipherSuites",
    "tlsMinVersion",
    "rotateCertificates",
    "serverTLSBootstrap",
    "authentication",
    "authorization",
    "registryPullQPS",
    "registryBurst",
    "eventRecordQPS",
    "eventBurst",
    "enableDebuggingHandlers",
    "enableContentionProfiling",
    "healthzPort",
    "healthzBindAddress",
    "oomScoreAdj",
    "clusterDomain",
    "clusterDNS",
    "streamingConnectionIdleTimeout",
    "nodeStatusUpdateFrequency",
    "nodeStatusReportFrequency",
    "nodeLeaseDurationSeconds",
    "imageMinimumGCAge",
    "imageMaximumGCAge",
    "imageGCHighThresholdPercent",
    "imageGCLowThresholdPercent",
    "volumeStatsAggPeriod",
    "kubeletCgroups",
    "systemCgroups",
    "cgroupRoot",
    "cgroupsPerQOS",
    "cgroupDriver",
    "cpuManagerPolicy",
    "singleProcessOOMKill",
    "cpuManagerPolicyOptions",
    "cpuManagerReconcilePeriod",
    "memoryManagerPolicy",
    "topologyManagerPolicy",
    "topologyManagerScope",
    "topologyManagerPolicyOptions",
    "qosReserved",
    "runtimeRequestTimeout",
    "hairpinMode",
    "maxPods",
    "podCIDR",
    "podPidsLimit",
    "resolvConf",
    "runOnce",
    "cpuCFSQuota",
    "cpuCFSQuotaPeriod",
    "nodeStatusMaxImages",
    "maxOpenFiles",
    "contentType",
    "kubeAPIQPS",
    "kubeAPIBurst",
    "serializeImagePulls",
    "maxParallelImagePulls",
    "evictionHard",
    "mergeDefaultEvictionSettings",
    "evictionSoft",
    "evictionSoftGracePeriod",
    "evictionPressureTransitionPeriod",
    "evictionMaxPodGracePeriod",
    "evictionMinimumReclaim",
    "podsPerCore",
    "enableControllerAttachDetach",
    "protectKernelDefaults",
    "makeIPTablesUtilChains",
    "iptablesMasqueradeBit",
    "iptablesDropBit",
    "featureGates",
    "failSwapOn",
    "memorySwap",
    "containerLogMaxSize",
    "containerLogMaxFiles",
    "containerLogMaxWorkers",
    "containerLogMonitorInterval",
    "configMapAndSecretChangeDetectionStrategy",
    "systemReserved",
    "kubeReserved",
    "reservedSystemCPUs",
    "showHiddenMetricsForVersion",
    "systemReservedCgroup",
    "kubeReservedCgroup",
    "enforceNodeAllocatable",
    "allowedUnsafeSysctls",
    "volumePluginDir",
    "providerID",
    "kernelMemcgNotification",
    "logging",
    "enableSystemLogHandler",
    "enableSystemLogQuery",
    "shutdownGracePeriod",
    "shutdownGracePeriodCriticalPods",
    "shutdownGracePeriodByPodPriority",
    "crashLoopBackOff",
    "reservedMemory",
    "enableProfilingHandler",
    "enableDebugFlagsHandler",
    "seccompDefault",
    "memoryThrottlingFactor",
    "registerWithTaints",
    "registerNode",
    "tracing",
    "localStorageCapacityIsolation",
    "containerRuntimeEndpoint",
    "imageServiceEndpoint",
    "failCgroupV1",
];

/// How many unknown fields are named one by one; the rest are counted.
const NAMED_UNKNOWN_FIELDS: usize = 10;

/// The scenario's `kubeletVersion` (docs/scenario.md): read beside the
/// KubeletConfiguration fields, not one of them.
pub const KUBELET_VERSION_FIELD: &str = "kubeletVersion";

/// A warning for each top-level field the kubelet does not know, naming
/// the closest known field when one is a likely typo (`cpuManagerPolcy` →
/// `cpuManagerPolicy`).
///
/// The kubelet v1.32 decodes its file strictly first; when that fails on
/// unknown fields it logs "Using lenient decoding as strict decoding failed"
/// and goes on without them. A typo thus silently changes its answer, so
/// every reader of a configuration shows these warnings.
pub fn unknown_field_warnings(value: &serde_json::Value) -> Vec<String> {
    let Some(object) = value.as_object() else {
        return Vec::new();
    };
    let unknown: Vec<&String> = object
        .keys()
        .filter(|k| !KNOWN_FIELDS.contains(&k.as_str()) && k.as_str() != KUBELET_VERSION_FIELD)
        .collect();
    let mut warnings: Vec<String> = unknown
        .iter()
        .take(NAMED_UNKNOWN_FIELDS)
        .map(|field| {
            let hint = closest_field(field).map_or(String::new(), |known| format!("; did you mean {known:?}?"));
            format!("unknown KubeletConfiguration field {field:?} is ignored, as the kubelet ignores it{hint}")
        })
        .collect();
    if unknown.len() > NAMED_UNKNOWN_FIELDS {
        warnings.push(format!(
            "and {} more unknown KubeletConfiguration fields are ignored",
            unknown.len() - NAMED_UNKNOWN_FIELDS
        ));
    }
    warnings
}

/// The known field nearest to `field` by edit distance (ignoring case),
/// when it is near enough to be a typo.
fn closest_field(field: &str) -> Option<&'static str> {
    // Longer names are no typo of a field name (and would cost time).
    if field.len() > 64 {
        return None;
    }
    let field = field.to_ascii_lowercase();
    KNOWN_FIELDS
        .iter()
        .map(|known| (edit_distance(&field, &known.to_ascii_lowercase()), *known))
        .filter(|&(distance, known)| distance <= (known.len() / 4).max(2))
        .min()
        .map(|(_, known)| known)
}

/// Levenshtein distance over bytes.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, &x) in a.iter().enumerate() {
        let mut current = vec![i + 1; b.len() + 1];
        for (j, &y) in b.iter().enumerate() {
            current[j + 1] = (previous[j] + usize::from(x != y))
                .min(previous[j + 1] + 1)
                .min(current[j] + 1);
        }
        previous = current;
    }
    previous[b.len()]
}

impl KubeletConfiguration {
    /// Reads the scenario's `kubelet:` block (or any JSON value holding
    /// KubeletConfiguration fields). `null` is the empty configuration;
    /// `apiVersion` and `kind` may be given and must then be right.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] with the path of the offending field.
    pub fn from_value(value: &serde_json::Value) -> Result<KubeletConfiguration, ConfigError> {
        if value.is_null() {
            return Ok(KubeletConfiguration::default());
        }
        if !value.is_object() {
            // serde would read a sequence positionally; Go refuses it.
            return Err(ConfigError::Invalid {
                path: String::new(),
                message: format!("a KubeletConfiguration is a map of fields, not {value}"),
            });
        }
        let config: KubeletConfiguration = serde_path_to_error::deserialize(value).map_err(|e| invalid(&e))?;
        config.check_type(false)?;
        Ok(config)
    }

    /// Reads a kubelet configuration file (`/var/lib/kubelet/config.yaml`,
    /// YAML or JSON), which must declare `apiVersion:
    /// kubelet.config.k8s.io/v1beta1` and `kind: KubeletConfiguration`.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] for text that is not such a document.
    pub fn from_file_text(text: &str) -> Result<KubeletConfiguration, ConfigError> {
        let config = KubeletConfiguration::from_value(&file_fields(text)?)?;
        config.check_type(true)?;
        Ok(config)
    }

    fn check_type(&self, required: bool) -> Result<(), ConfigError> {
        let check = |field: &str, value: &Option<String>, expected: &str| match value {
            Some(value) if value != expected => Err(ConfigError::Invalid {
                path: field.to_owned(),
                message: format!("expected {expected:?}, got {value:?}"),
            }),
            None if required => Err(ConfigError::Invalid {
                path: field.to_owned(),
                message: format!("a kubelet configuration file declares {field}: {expected}"),
            }),
            _ => Ok(()),
        };
        check("apiVersion", &self.api_version, API_VERSION)?;
        check("kind", &self.kind, KIND)
    }

    /// `topologyManagerPolicy`, default `none`.
    pub fn topology_manager_policy(&self) -> &str {
        non_empty(&self.topology_manager_policy).unwrap_or(TopologyPolicyName::None.as_str())
    }

    /// `topologyManagerScope`, default `container`.
    pub fn topology_manager_scope(&self) -> &str {
        non_empty(&self.topology_manager_scope).unwrap_or(TopologyScope::Container.as_str())
    }

    /// `cpuManagerPolicy`, default `none`.
    pub fn cpu_manager_policy(&self) -> &str {
        non_empty(&self.cpu_manager_policy).unwrap_or(CpuPolicyName::None.as_str())
    }

    /// `memoryManagerPolicy`, default `None`.
    pub fn memory_manager_policy(&self) -> &str {
        non_empty(&self.memory_manager_policy).unwrap_or(MemoryPolicyName::None.as_str())
    }

    /// `reservedSystemCPUs`, default empty.
    pub fn reserved_system_cpus(&self) -> &str {
        self.reserved_system_cpus.as_deref().unwrap_or("")
    }

    /// `maxPods`, default 110 (also for an explicit 0).
    pub fn max_pods(&self) -> i32 {
        nonzero(self.max_pods).unwrap_or(110)
    }

    /// `evictionHard`; when absent, the kubelet's Linux default
    /// (cmd/kubelet `loadConfigFile`), which a given map replaces entirely
    /// — unless, from 1.33, `mergeDefaultEvictionSettings` is true: then the
    /// default fills in every signal the given map leaves out. (A 1.32
    /// kubelet does not know the field and ignores it.)
    pub fn eviction_hard(&self) -> BTreeMap<String, String> {
        let default: BTreeMap<String, String> = [
            ("memory.available", "100Mi"),
            ("nodefs.available", "10%"),
            ("nodefs.inodesFree", "5%"),
            ("imagefs.available", "15%"),
            ("imagefs.inodesFree", "5%"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let Some(given) = &self.eviction_hard else {
            return default;
        };
        let merge = self.merge_default_eviction_settings == Some(true)
            && self.kubelet_version.unwrap_or_default().at_least(KubeletVersion::V1_33);
        let mut hard = given.clone();
        if merge {
            for (signal, value) in default {
                hard.entry(signal).or_insert(value);
            }
        }
        hard
    }

    /// `featureGates`, default none.
    pub fn feature_gates(&self) -> BTreeMap<String, bool> {
        self.feature_gates.clone().unwrap_or_default()
    }
}

/// The fields of a kubelet configuration file as the kubelet's loader
/// reads them: JSON when the text starts with `{`, otherwise YAML through
/// `sigs.k8s.io/yaml` ([`crate::go_yaml`]: `cgroupsPerQOS: yes` is true,
/// `maxPods: 110.0` is 110, `maxPods: 0110` is 72, merge keys merge).
///
/// # Errors
/// [`ConfigError::Invalid`] for text that is neither.
pub fn file_fields(text: &str) -> Result<serde_json::Value, ConfigError> {
    let invalid = |message: String| ConfigError::Invalid {
        path: String::new(),
        message,
    };
    let text = crate::nesting::prepare(text).map_err(|e| invalid(e.to_string()))?;
    if crate::go_yaml::is_json(text) {
        serde_json::from_str(text).map_err(|e| invalid(e.to_string()))
    } else {
        crate::go_yaml::to_json(text).map_err(|e| invalid(e.to_string()))
    }
}

/// A decoding error with the path of the field (empty for the document).
/// `kubeletVersion`: a string naming a supported release.
fn kubelet_version<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<KubeletVersion>, D::Error> {
    let value = serde_json::Value::deserialize(deserializer)?;
    parse_kubelet_version(&value)
        .map(Some)
        .map_err(serde::de::Error::custom)
}

/// Why a `kubeletVersion` value names no release topoalign reproduces.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KubeletVersionValueError {
    /// A number, a map, …: the value as JSON.
    #[error("{0} is not a version string such as \"1.33\"")]
    NotAString(String),
    #[error(transparent)]
    Version(#[from] KubeletVersionError),
}

/// Reads a `kubeletVersion` value; the error says what is wrong with it.
///
/// # Errors
/// [`KubeletVersionValueError`] for a non-string, malformed or unsupported
/// version.
pub fn parse_kubelet_version(value: &serde_json::Value) -> Result<KubeletVersion, KubeletVersionValueError> {
    let text = value
        .as_str()
        .ok_or_else(|| KubeletVersionValueError::NotAString(value.to_string()))?;
    Ok(KubeletVersion::parse(text)?)
}

/// Applies a command's `--kubelet-version` to a `kubelet:` block (a
/// scenario's, a node file's): the flag names the release for a block that
/// does not; a block naming another release is an error rather than an
/// answer by either release's rules.
///
/// # Errors
/// [`ConfigError::Invalid`] at `kubeletVersion` for a block naming another
/// release, or a malformed one; a block that is not a map is left to the
/// configuration reader to refuse.
pub fn apply_kubelet_version(kubelet: &mut serde_json::Value, flag: KubeletVersion) -> Result<(), ConfigError> {
    if kubelet.is_null() {
        *kubelet = serde_json::Value::Object(serde_json::Map::new());
    }
    let Some(object) = kubelet.as_object_mut() else {
        return Ok(());
    };
    let invalid = |message: String| ConfigError::Invalid {
        path: KUBELET_VERSION_FIELD.to_owned(),
        message,
    };
    match object.get(KUBELET_VERSION_FIELD) {
        None => {
            object.insert(KUBELET_VERSION_FIELD.to_owned(), flag.as_str().into());
            Ok(())
        }
        Some(given) => match parse_kubelet_version(given).map_err(|e| invalid(e.to_string()))? {
            version if version == flag => Ok(()),
            version => Err(invalid(format!(
                "the configuration says kubelet {version} but --kubelet-version says {flag}"
            ))),
        },
    }
}

fn invalid<E: std::fmt::Display>(error: &serde_path_to_error::Error<E>) -> ConfigError {
    let path = error.path().to_string();
    ConfigError::Invalid {
        path: if path == "." { String::new() } else { path },
        message: error.inner().to_string(),
    }
}

/// Go's `if obj.X == "" { obj.X = default }`.
fn non_empty(value: &Option<String>) -> Option<&str> {
    value.as_deref().filter(|v| !v.is_empty())
}

/// Go's `if obj.X == 0 { obj.X = default }`.
pub(crate) fn nonzero<T: Default + PartialEq + Copy>(value: Option<T>) -> Option<T> {
    value.filter(|v| *v != T::default())
}

#[cfg(test)]
mod tests {

    #[test]
    fn unknown_fields_are_named_with_the_closest_known_one() {
        let value = serde_json::json!({"cpuManagerPolcy": "static", "maxPods": 10, "zzz": 1});
        let warnings = unknown_field_warnings(&value);
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings[0].contains("\"cpuManagerPolcy\" is ignored")
                && warnings[0].ends_with("did you mean \"cpuManagerPolicy\"?"),
            "{warnings:?}"
        );
        assert!(
            warnings[1].contains("\"zzz\"") && !warnings[1].contains("did you mean"),
            "{warnings:?}"
        );
        assert!(unknown_field_warnings(&serde_json::json!({"topologyManagerPolicy": "none"})).is_empty());
        let many: serde_json::Map<String, serde_json::Value> = (0..1000)
            .map(|i| (format!("{}{i}", "x".repeat(100_000 / 1000)), serde_json::Value::Null))
            .collect();
        let warnings = unknown_field_warnings(&serde_json::Value::Object(many));
        assert_eq!(warnings.len(), NAMED_UNKNOWN_FIELDS + 1);
    }
    use super::*;
    use serde_json::json;

    #[test]
    fn absent_fields_take_the_v1beta1_defaults() {
        let config = KubeletConfiguration::from_value(&serde_json::Value::Null).unwrap();
        assert_eq!(config.topology_manager_policy(), "none");
        assert_eq!(config.topology_manager_scope(), "container");
        assert_eq!(config.cpu_manager_policy(), "none");
        assert_eq!(config.memory_manager_policy(), "None");
        assert_eq!(config.max_pods(), 110);
        assert_eq!(config.eviction_hard()["memory.available"], "100Mi");
        let explicit = KubeletConfiguration::from_value(&json!({"maxPods": 0, "topologyManagerPolicy": "",
            "evictionHard": {"memory.available": "1Gi"}}))
        .unwrap();
        assert_eq!(explicit.max_pods(), 110);
        assert_eq!(explicit.topology_manager_policy(), "none");
        assert_eq!(
            explicit.eviction_hard().len(),
            1,
            "a given evictionHard replaces the default"
        );
    }

    #[test]
    fn merge_default_eviction_settings_fills_in_the_defaults_from_1_33() {
        let block = |version: &str, merge: bool| {
            KubeletConfiguration::from_value(&json!({"kubeletVersion": version,
                "evictionHard": {"nodefs.available": "5%"}, "mergeDefaultEvictionSettings": merge}))
            .unwrap()
            .eviction_hard()
        };
        let merged = block("1.33", true);
        assert_eq!(merged.len(), 5);
        assert_eq!(merged["memory.available"], "100Mi");
        assert_eq!(merged["nodefs.available"], "5%", "a given signal keeps its value");
        assert_eq!(block("1.37", false).len(), 1, "default false: the given map alone");
        assert_eq!(block("1.32", true).len(), 1, "v1.32 does not know the field");
    }

    #[test]
    fn scenario_block_with_every_listed_field() {
        let config = KubeletConfiguration::from_value(&json!({
            "topologyManagerPolicy": "single-numa-node",
            "topologyManagerScope": "pod",
            "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": "true"},
            "cpuManagerPolicy": "static",
            "cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
            "memoryManagerPolicy": "Static",
            "reservedSystemCPUs": "0-1",
            "systemReserved": {"cpu": "1", "memory": "1Gi"},
            "kubeReserved": {"cpu": "1", "memory": "1Gi"},
            "evictionHard": {"memory.available": "100Mi"},
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}],
            "featureGates": {"CPUManagerPolicyAlphaOptions": true},
            "someOtherField": {"anything": [1, 2]},
        }))
        .unwrap();
        assert_eq!(config.reserved_system_cpus(), "0-1");
        let reserved = &config.reserved_memory.as_ref().unwrap()[0];
        assert_eq!(reserved.limits["memory"].to_string(), "1124Mi");
    }

    #[test]
    fn type_errors_name_the_field() {
        let error = KubeletConfiguration::from_value(&json!({"maxPods": "many"})).unwrap_err();
        assert!(
            matches!(&error, ConfigError::Invalid { path, .. } if path == "maxPods"),
            "{error}"
        );
        let error = KubeletConfiguration::from_value(
            &json!({"reservedMemory": [{"numaNode": 0, "limits": {"memory": "1 Gi"}}]}),
        )
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "reservedMemory[0].limits: memory: invalid quantity \"1 Gi\": quantities must match the regular \
             expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        let error = KubeletConfiguration::from_value(&json!({"kind": "Pod"})).unwrap_err();
        assert_eq!(
            error.to_string(),
            "kind: expected \"KubeletConfiguration\", got \"Pod\""
        );
    }

    /// Issue 29: a `null` is Go's zero value, as the kubelet's loader reads
    /// it (checked with the v1.37.2 loader, `configfiles.NewFsLoader`):
    /// `featureGates: {X: null}` is `X: false`, `reservedMemory: [null]` a
    /// reservation on NUMA 0 with no limits, a `null` quantity zero, a
    /// `null` string the empty string.
    #[test]
    fn null_is_the_go_zero_value() {
        let config = KubeletConfiguration::from_value(&json!({
            "featureGates": {"CPUManagerPolicyAlphaOptions": null},
            "systemReserved": {"memory": null},
            "evictionHard": {"memory.available": null},
            "topologyManagerPolicyOptions": {"prefer-closest-numa-nodes": null},
            "enforceNodeAllocatable": [null],
            "reservedMemory": [null, {"numaNode": null, "limits": {"memory": null}}],
            "maxPods": null,
        }))
        .unwrap();
        assert!(!config.feature_gates()["CPUManagerPolicyAlphaOptions"]);
        assert_eq!(config.system_reserved.as_ref().unwrap()["memory"], "");
        assert_eq!(config.eviction_hard()["memory.available"], "");
        assert_eq!(
            config.topology_manager_policy_options.as_ref().unwrap()["prefer-closest-numa-nodes"],
            ""
        );
        assert_eq!(config.enforce_node_allocatable, Some(vec![String::new()]));
        let reserved = config.reserved_memory.as_ref().unwrap();
        assert_eq!(reserved[0], MemoryReservation::default());
        assert_eq!(reserved[1].numa_node, 0);
        assert!(reserved[1].limits["memory"].is_zero());
        assert_eq!(config.max_pods(), 110);
        // Absent and `null` maps stay nil (the defaults apply).
        let config = KubeletConfiguration::from_value(&json!({"featureGates": null, "reservedMemory": null})).unwrap();
        assert_eq!(config.feature_gates, None);
        assert_eq!(config.reserved_memory, None);
    }

    /// Issue 29: a YAML file reads as YAML 1.1 through `sigs.k8s.io/yaml`.
    /// Expected values: what the v1.37.2 kubelet's loader
    /// (`configfiles.NewFsLoader`, then `Load`) read from this file.
    #[test]
    fn a_yaml_file_reads_as_the_kubelets_loader_reads_it() {
        let file = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nfailCgroupV1: false\n\
                    cgroupsPerQOS: no\nenforceNodeAllocatable: [none]\nmaxPods: 0110\nfeatureGates: \
                    {CPUManagerPolicyAlphaOptions: on, CPUManagerPolicyBetaOptions: Off}\nbase: &reserved {cpu: \"1\", \
                    memory: 1Gi}\nsystemReserved:\n  <<: *reserved\n  memory: 2Gi\n";
        let config = KubeletConfiguration::from_file_text(file).unwrap();
        assert_eq!(config.cgroups_per_qos, Some(false));
        assert_eq!(config.max_pods(), 72);
        let gates = config.feature_gates();
        assert_eq!(
            (
                gates["CPUManagerPolicyAlphaOptions"],
                gates["CPUManagerPolicyBetaOptions"]
            ),
            (true, false)
        );
        let reserved = config.system_reserved.unwrap();
        assert_eq!((reserved["cpu"].as_str(), reserved["memory"].as_str()), ("1", "2Gi"));
        // `maxPods: 110.0` is 110 in YAML; in a JSON file the loader refuses it.
        let yaml = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110.0\n";
        assert_eq!(KubeletConfiguration::from_file_text(yaml).unwrap().max_pods(), 110);
        let json =
            r#"{"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration", "maxPods": 110.0}"#;
        assert!(KubeletConfiguration::from_file_text(json).is_err());
    }

    /// The file `kubeadm init` writes (v1.32), with its many other fields.
    #[test]
    fn a_kubeadm_configuration_file() {
        let file = r#"
apiVersion: kubelet.config.k8s.io/v1beta1
authentication:
  anonymous:
    enabled: false
  webhook:
    cacheTTL: 0s
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
authorization:
  mode: Webhook
cgroupDriver: systemd
clusterDNS:
- 10.96.0.10
clusterDomain: cluster.local
containerRuntimeEndpoint: ""
cpuManagerReconcilePeriod: 0s
evictionPressureTransitionPeriod: 0s
healthzBindAddress: 127.0.0.1
healthzPort: 10248
kind: KubeletConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
  verbosity: 0
memorySwap: {}
rotateCertificates: true
shutdownGracePeriod: 0s
staticPodPath: /etc/kubernetes/manifests
syncFrequency: 0s
"#;
        let config = KubeletConfiguration::from_file_text(file).unwrap();
        assert_eq!(config.healthz_port, Some(10248));
        assert_eq!(config.cpu_manager_policy(), "none");
        assert_eq!(crate::validation::validate(&config).map(|_| ()), Ok(()));
    }

    #[test]
    fn configuration_files_need_their_type() {
        let file = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n\
                    cpuManagerPolicy: static\nauthentication:\n  anonymous:\n    enabled: false\n\
                    reservedMemory:\n- numaNode: 1\n  limits:\n    memory: 1Gi\n";
        let config = KubeletConfiguration::from_file_text(file).unwrap();
        assert_eq!(config.cpu_manager_policy(), "static");
        assert_eq!(config.reserved_memory.unwrap()[0].numa_node, 1);
        let error = KubeletConfiguration::from_file_text("cpuManagerPolicy: static\n").unwrap_err();
        assert_eq!(
            error.to_string(),
            "apiVersion: a kubelet configuration file declares apiVersion: kubelet.config.k8s.io/v1beta1"
        );
        assert!(KubeletConfiguration::from_file_text("maxPods: [").is_err());
        let error = KubeletConfiguration::from_value(&json!([1])).unwrap_err();
        assert!(
            matches!(&error, ConfigError::Invalid { path, .. } if path.is_empty()),
            "{error:?}"
        );
        assert_eq!(error.to_string(), "a KubeletConfiguration is a map of fields, not [1]");
    }
}
