//! `ValidateKubeletConfiguration` (pkg/kubelet/apis/config/validation,
//! v1.32): the checks that need nothing but the configuration, in the
//! kubelet's order, with its texts.
//!
//! Owns: the checks on the fields [`KubeletConfiguration`] models. Left out
//! (fields not modelled): durations (`cpuCFSQuotaPeriod`, image GC ages,
//! shutdown grace periods, log monitor interval), taints, logging, tracing,
//! metrics versions, and the host's cgroup version.

use topoalign_engine::{TopologyPolicyName, TopologyScope};

use crate::feature_gates::{GateError, GateSet};
use crate::go::{self, quote};
use crate::kubelet_config::{KubeletConfiguration, nonzero};

/// The kubelet's prefix for a configuration that fails validation
/// (`cmd/kubelet/app/server.go`, without the configuration dump it appends).
const PREFIX: &str = "failed to validate kubelet configuration, error: ";

/// The kubelet's words when the configuration file names a gate it does
/// not know or sets a locked one: defaulting the file
/// (`SetDefaults_KubeletConfiguration`) panics before anything is validated.
const GATE_PANIC: &str =
    "panic: failed to merge global and in-flight KubeletConfiguration while setting defaults, error: ";

/// Why the kubelet refuses a configuration; the message is the kubelet's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ValidationError {
    /// `featureGates` names a gate the release does not know or sets a
    /// locked one: the kubelet panics while loading the file.
    #[error("{GATE_PANIC}{0}")]
    Gates(#[from] GateError),
    /// `ValidateKubeletConfiguration`'s problems, in the kubelet's order
    /// (each names its field as the kubelet does).
    #[error("{PREFIX}{}", go::aggregate(.problems).unwrap_or_default())]
    Invalid { problems: Vec<String> },
}

/// Validates `config` like `ValidateKubeletConfiguration`, with the feature
/// gates it sets applied to a copy of its release's defaults.
///
/// # Errors
/// [`ValidationError`], whose message is the kubelet's full text, `failed
/// to validate kubelet configuration, error: ...`, with several problems aggregated as `[a, b]`; for a refused
/// gate, the panic the kubelet dies with while loading the file.
pub fn validate(config: &KubeletConfiguration) -> Result<GateSet, ValidationError> {
    let version = config.kubelet_version.unwrap_or_default();
    let gates = GateSet::from_overrides(&config.feature_gates(), version)?;
    let problems = problems(config, &gates);
    if problems.is_empty() {
        Ok(gates)
    } else {
        Err(ValidationError::Invalid { problems })
    }
}

/// Every problem, in the order the kubelet reports them.
fn problems(c: &KubeletConfiguration, gates: &GateSet) -> Vec<String> {
    let mut errors = Vec::new();
    let mut fail = |text: String| errors.push(format!("invalid configuration: {text}"));

    let enforce = c
        .enforce_node_allocatable
        .clone()
        .unwrap_or_else(|| vec!["pods".to_owned()]);
    let cgroups_per_qos = c.cgroups_per_qos.unwrap_or(true);
    let text = |value: &Option<String>| value.clone().unwrap_or_default();
    let system_reserved_cgroup = text(&c.system_reserved_cgroup);
    let kube_reserved_cgroup = text(&c.kube_reserved_cgroup);

    if c.node_lease_duration_seconds.is_some_and(|v| v < 0) {
        fail("nodeLeaseDurationSeconds must be greater than 0".to_owned());
    }
    if !text(&c.system_cgroups).is_empty() && text(&c.cgroup_root).is_empty() {
        fail(
            "systemCgroups (--system-cgroups) was specified and cgroupRoot (--cgroup-root) was not specified"
                .to_owned(),
        );
    }
    if let Some(v) = c.event_burst.filter(|v| *v < 0) {
        fail(format!("eventBurst (--event-burst) {v} must not be a negative number"));
    }
    if let Some(v) = c.event_record_qps.filter(|v| *v < 0) {
        fail(format!(
            "eventRecordQPS (--event-qps) {v} must not be a negative number"
        ));
    }
    if let Some(v) = c.healthz_port.filter(|v| *v != 0 && !valid_port(*v)) {
        fail(format!(
            "healthzPort (--healthz-port) {v} must be between 1 and 65535, inclusive"
        ));
    }
    let high = c.image_gc_high_threshold_percent.unwrap_or(85);
    let low = c.image_gc_low_threshold_percent.unwrap_or(80);
    if !(0..=100).contains(&high) {
        fail(format!(
            "imageGCHighThresholdPercent (--image-gc-high-threshold) {high} must be between 0 and 100, inclusive"
        ));
    }
    if !(0..=100).contains(&low) {
        fail(format!(
            "imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be between 0 and 100, inclusive"
        ));
    }
    if low >= high {
        fail(format!(
            "imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be less than \
             imageGCHighThresholdPercent (--image-gc-high-threshold) {high}"
        ));
    }
    if let Some(v) = c.iptables_drop_bit.filter(|v| !(0..=31).contains(v)) {
        fail(format!(
            "iptablesDropBit (--iptables-drop-bit) {v} must be between 0 and 31, inclusive"
        ));
    }
    if let Some(v) = c.iptables_masquerade_bit.filter(|v| !(0..=31).contains(v)) {
        fail(format!(
            "iptablesMasqueradeBit (--iptables-masquerade-bit) {v} must be between 0 and 31, inclusive"
        ));
    }
    if let Some(v) = c.kube_api_burst.filter(|v| *v < 0) {
        fail(format!(
            "kubeAPIBurst (--kube-api-burst) {v} must not be a negative number"
        ));
    }
    if let Some(v) = c.kube_api_qps.filter(|v| *v < 0) {
        fail(format!("kubeAPIQPS (--kube-api-qps) {v} must not be a negative number"));
    }
    if let Some(v) = c.node_status_max_images.filter(|v| *v < -1) {
        fail(format!(
            "nodeStatusMaxImages (--node-status-max-images) {v} must be -1 or greater"
        ));
    }
    if let Some(v) = c.max_open_files.filter(|v| *v < 0) {
        fail(format!(
            "maxOpenFiles (--max-open-files) {v} must not be a negative number"
        ));
    }
    if let Some(v) = c.max_pods.filter(|v| *v < 0) {
        fail(format!("maxPods (--max-pods) {v} must not be a negative number"));
    }
    if let Some(v) = c.oom_score_adj.filter(|v| !(-1000..=1000).contains(v)) {
        fail(format!(
            "oomScoreAdj (--oom-score-adj) {v} must be between -1000 and 1000, inclusive"
        ));
    }
    if let Some(v) = c.pods_per_core.filter(|v| *v < 0) {
        fail(format!(
            "podsPerCore (--pods-per-core) {v} must not be a negative number"
        ));
    }
    if let Some(v) = nonzero(c.port).filter(|v| !valid_port(*v)) {
        fail(format!("port (--port) {v} must be between 1 and 65535, inclusive"));
    }
    if let Some(v) = c.read_only_port.filter(|v| *v != 0 && !valid_port(*v)) {
        fail(format!(
            "readOnlyPort (--read-only-port) {v} must be between 0 and 65535, inclusive"
        ));
    }
    if let Some(v) = c.registry_burst.filter(|v| *v < 0) {
        fail(format!(
            "registryBurst (--registry-burst) {v} must not be a negative number"
        ));
    }
    if let Some(v) = c.registry_pull_qps.filter(|v| *v < 0) {
        fail(format!(
            "registryPullQPS (--registry-qps) {v} must not be a negative number"
        ));
    }
    if let Some(v) = c.max_parallel_image_pulls.filter(|v| *v < 1) {
        fail(format!("maxParallelImagePulls {v} must be a positive number"));
    }
    let parallel_pulls = c.max_parallel_image_pulls.is_some_and(|v| v > 1);
    if c.serialize_image_pulls.unwrap_or(!parallel_pulls) && parallel_pulls {
        fail(
            "maxParallelImagePulls cannot be larger than 1 unless SerializeImagePulls (--serialize-image-pulls) \
             is set to false"
                .to_owned(),
        );
    }
    if c.server_tls_bootstrap == Some(true) && !gates.enabled("RotateKubeletServerCertificate") {
        fail("serverTLSBootstrap true requires feature gate RotateKubeletServerCertificate".to_owned());
    }

    let policy = c.topology_manager_policy();
    if policy.parse::<TopologyPolicyName>().is_err() {
        // Go prints the accepted names as a %q-quoted slice.
        let names: Vec<String> = TopologyPolicyName::NAMES.iter().map(|name| quote(name)).collect();
        fail(format!(
            "topologyManagerPolicy (--topology-manager-policy) {} must be one of: [{}]",
            quote(policy),
            names.join(" ")
        ));
    }
    let scope = c.topology_manager_scope();
    if scope.parse::<TopologyScope>().is_err() {
        let names: Vec<String> = TopologyScope::NAMES.iter().map(|name| quote(name)).collect();
        fail(format!(
            "topologyManagerScope (--topology-manager-scope) {} must be one of: {}",
            quote(scope),
            names.join(", or ")
        ));
    }

    let swap = c
        .memory_swap
        .as_ref()
        .and_then(|s| s.swap_behavior.clone())
        .unwrap_or_default();
    if gates.enabled("NodeSwap") {
        if !["", "NoSwap", "LimitedSwap"].contains(&swap.as_str()) {
            fail(format!(
                "memorySwap.swapBehavior {} must be one of: \"\", \"LimitedSwap\" or \"NoSwap\"",
                quote(&swap)
            ));
        }
    } else if !swap.is_empty() {
        fail("memorySwap.swapBehavior cannot be set when NodeSwap feature flag is disabled".to_owned());
    }

    enforcement_problems(
        &enforce,
        cgroups_per_qos,
        &system_reserved_cgroup,
        &kube_reserved_cgroup,
        &mut fail,
    );
    let hairpin = c
        .hairpin_mode
        .as_deref()
        .filter(|h| !h.is_empty())
        .unwrap_or("promiscuous-bridge");
    if !["none", "hairpin-veth", "promiscuous-bridge"].contains(&hairpin) {
        fail(format!(
            "option {} specified for hairpinMode (--hairpin-mode). Valid options are \"none\", \"hairpin-veth\" \
             or \"promiscuous-bridge\"",
            quote(hairpin)
        ));
    }
    let reserved_cpus = c.reserved_system_cpus();
    if !reserved_cpus.is_empty() {
        if !system_reserved_cgroup.is_empty() || !kube_reserved_cgroup.is_empty() {
            fail(
                "can't use reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup \
                 (--system-reserved-cgroup) or kubeReservedCgroup (--kube-reserved-cgroup)"
                    .to_owned(),
            );
        }
        if let Err(error) = crate::cpu_list::parse_cpu_list(reserved_cpus) {
            fail(format!(
                "unable to parse reservedSystemCPUs (--reserved-cpus) {reserved_cpus}, error: {error}"
            ));
        }
    }
    reserved_memory_problems(c, &mut fail);

    // "memoryThrottlingFactor is required when MemoryQoS ..." cannot fire:
    // the v1beta1 default (0.9) always fills the factor in.
    if let Some(factor) = c.memory_throttling_factor.filter(|f| *f <= 0.0 || *f > 1.0) {
        fail(format!(
            "memoryThrottlingFactor {factor} must be greater than 0 and less than or equal to 1.0"
        ));
    }
    if c.enable_system_log_query == Some(true) {
        if !gates.enabled("NodeLogQuery") {
            fail("NodeLogQuery feature gate is required for enableSystemLogHandler".to_owned());
        }
        if c.enable_system_log_handler == Some(false) {
            fail("enableSystemLogHandler is required for enableSystemLogQuery".to_owned());
        }
    }
    if c.container_log_max_workers.is_some_and(|v| v < 1) {
        fail("containerLogMaxWorkers must be greater than or equal to 1".to_owned());
    }
    let logs_dir = c
        .pod_logs_dir
        .as_deref()
        .filter(|d| !d.is_empty())
        .unwrap_or("/var/log/pods");
    if !logs_dir.starts_with('/') {
        fail(format!("pod logs path {} must be absolute path", quote(logs_dir)));
    }
    if clean_path(logs_dir) != logs_dir {
        fail(format!("pod logs path {} must be normalized", quote(logs_dir)));
    }
    if !logs_dir.is_ascii() {
        fail(format!(
            "pod logs path {} mut contains ASCII characters only",
            quote(logs_dir)
        ));
    }
    errors
}

/// The `enforceNodeAllocatable` checks (v1.32 to v1.37 alike): the
/// `-compressible` variants are valid options, `none` stands alone and
/// needs no `cgroupsPerQOS`, every other valid option does.
fn enforcement_problems(
    enforce: &[String],
    cgroups_per_qos: bool,
    system_reserved_cgroup: &str,
    kube_reserved_cgroup: &str,
    fail: &mut impl FnMut(String),
) {
    const PODS: &str = "pods";
    const SYSTEM: &str = "system-reserved";
    const SYSTEM_COMPRESSIBLE: &str = "system-reserved-compressible";
    const KUBE: &str = "kube-reserved";
    const KUBE_COMPRESSIBLE: &str = "kube-reserved-compressible";
    const NONE: &str = "none";
    let given = |key: &str| enforce.iter().any(|value| value == key);
    for (plain, compressible) in [(SYSTEM, SYSTEM_COMPRESSIBLE), (KUBE, KUBE_COMPRESSIBLE)] {
        if given(plain) && given(compressible) {
            fail(format!(
                "both {} and {} cannot be specified together in enforceNodeAllocatable (--enforce-node-allocatable)",
                quote(plain),
                quote(compressible)
            ));
        }
    }
    let cgroup_needed = |field: &str, flag: &str, plain: &str, compressible: &str| {
        format!(
            "{field} (--{flag}) must be specified when {} or {} included in enforceNodeAllocatable \
             (--enforce-node-allocatable)",
            quote(plain),
            quote(compressible)
        )
    };
    for (index, value) in enforce.iter().enumerate() {
        if enforce[..index].contains(value) {
            fail(format!(
                "duplicated enforcements {} in enforceNodeAllocatable (--enforce-node-allocatable)",
                quote(value)
            ));
            continue;
        }
        match value.as_str() {
            PODS => {}
            SYSTEM | SYSTEM_COMPRESSIBLE => {
                if system_reserved_cgroup.is_empty() {
                    fail(cgroup_needed(
                        "systemReservedCgroup",
                        "system-reserved-cgroup",
                        SYSTEM,
                        SYSTEM_COMPRESSIBLE,
                    ));
                }
            }
            KUBE | KUBE_COMPRESSIBLE => {
                if kube_reserved_cgroup.is_empty() {
                    fail(cgroup_needed(
                        "kubeReservedCgroup",
                        "kube-reserved-cgroup",
                        KUBE,
                        KUBE_COMPRESSIBLE,
                    ));
                }
            }
            NONE => {
                if enforce.len() > 1 {
                    fail(format!(
                        "enforceNodeAllocatable (--enforce-node-allocatable) may not contain additional enforcements \
                         when {} is specified",
                        quote(NONE)
                    ));
                }
                continue;
            }
            other => {
                let valid: Vec<String> = [PODS, SYSTEM, SYSTEM_COMPRESSIBLE, KUBE, KUBE_COMPRESSIBLE]
                    .iter()
                    .map(|option| quote(option))
                    .collect();
                fail(format!(
                    "option {} specified for enforceNodeAllocatable (--enforce-node-allocatable). Valid options are \
                     {} or {}",
                    quote(other),
                    valid.join(", "),
                    quote(NONE)
                ));
                continue;
            }
        }
        if !cgroups_per_qos {
            fail(format!(
                "cgroupsPerQOS (--cgroups-per-qos) must be set to true when {} contained in enforceNodeAllocatable \
                 (--enforce-node-allocatable)",
                quote(value)
            ));
        }
    }
}

/// `validateReservedMemoryConfiguration`.
fn reserved_memory_problems(c: &KubeletConfiguration, fail: &mut impl FnMut(String)) {
    let mut seen: Vec<(i32, &str)> = Vec::new();
    for reservation in c.reserved_memory.iter().flatten() {
        let node = reservation.numa_node;
        for (resource, quantity) in &reservation.limits {
            if !topoalign_model::resource_name::is_memory_like(resource) {
                fail(format!(
                    "the limit type {} for NUMA node {node} is not supported, only [memory hugepages-<HugePageSize>] \
                     is accepted",
                    quote(resource)
                ));
            }
            if quantity.is_zero() {
                fail(format!(
                    "reserved memory may not be zero for NUMA node {node} and resource {}",
                    quote(resource)
                ));
            }
            if seen.contains(&(node, resource.as_str())) {
                fail(format!(
                    "the reserved memory has a duplicate value for NUMA node {node} and resource {}",
                    quote(resource)
                ));
            }
            seen.push((node, resource));
        }
    }
}

fn valid_port(port: i32) -> bool {
    (1..=65535).contains(&port)
}

/// Go's `filepath.Clean` for an absolute Unix path, enough to tell whether
/// a path is already clean.
fn clean_path(path: &str) -> String {
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            other => parts.push(other),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(config: serde_json::Value) -> Result<(), String> {
        validate(&KubeletConfiguration::from_value(&config).unwrap())
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_valid_configuration_passes() {
        assert_eq!(check(json!(null)), Ok(()));
        assert_eq!(
            check(
                json!({"topologyManagerPolicy": "restricted", "topologyManagerScope": "pod",
                "reservedSystemCPUs": "0-1", "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}}]})
            ),
            Ok(())
        );
        // Issue 29: v1.32 to v1.37 accept the `-compressible` enforcements
        // and `none` without QoS cgroups (vectors 1.32/hand-enforce-*).
        assert_eq!(
            check(
                json!({"enforceNodeAllocatable": ["pods", "system-reserved-compressible"],
                "systemReservedCgroup": "/system.slice"})
            ),
            Ok(())
        );
        assert_eq!(
            check(json!({"enforceNodeAllocatable": ["none"], "cgroupsPerQOS": false})),
            Ok(())
        );
    }

    /// Conformance vector 0037, and the other texts of this step.
    #[test]
    fn refusals_use_the_kubelet_text() {
        let table = [
            (
                json!({"topologyManagerPolicy": "strict"}),
                "failed to validate kubelet configuration, error: invalid configuration: topologyManagerPolicy \
                 (--topology-manager-policy) \"strict\" must be one of: [\"none\" \"best-effort\" \"restricted\" \
                 \"single-numa-node\"]",
            ),
            (
                json!({"topologyManagerScope": "node"}),
                "failed to validate kubelet configuration, error: invalid configuration: topologyManagerScope \
                 (--topology-manager-scope) \"node\" must be one of: \"container\", or \"pod\"",
            ),
            (
                json!({"reservedSystemCPUs": "0-a"}),
                "failed to validate kubelet configuration, error: invalid configuration: unable to parse \
                 reservedSystemCPUs (--reserved-cpus) 0-a, error: strconv.Atoi: parsing \"a\": invalid syntax",
            ),
            (
                json!({"maxPods": -1}),
                "failed to validate kubelet configuration, error: invalid configuration: maxPods (--max-pods) -1 \
                 must not be a negative number",
            ),
            (
                json!({"featureGates": {"Foo": true}}),
                "panic: failed to merge global and in-flight KubeletConfiguration while setting defaults, error: unrecognized feature gate: Foo",
            ),
            (
                json!({"reservedMemory": [{"numaNode": 0, "limits": {"cpu": "1"}}]}),
                "failed to validate kubelet configuration, error: invalid configuration: the limit type \"cpu\" for \
                 NUMA node 0 is not supported, only [memory hugepages-<HugePageSize>] is accepted",
            ),
            (
                json!({"reservedMemory": [{"numaNode": 1, "limits": {"memory": "0"}}]}),
                "failed to validate kubelet configuration, error: invalid configuration: reserved memory may not be \
                 zero for NUMA node 1 and resource \"memory\"",
            ),
            (
                json!({"reservedMemory": [{"numaNode": 0, "limits": {"memory": "1Gi"}},
                    {"numaNode": 0, "limits": {"memory": "1Gi"}}]}),
                "failed to validate kubelet configuration, error: invalid configuration: the reserved memory has a \
                 duplicate value for NUMA node 0 and resource \"memory\"",
            ),
            (
                json!({"topologyManagerPolicy": "strict", "topologyManagerScope": "node"}),
                "failed to validate kubelet configuration, error: [invalid configuration: topologyManagerPolicy \
                 (--topology-manager-policy) \"strict\" must be one of: [\"none\" \"best-effort\" \"restricted\" \
                 \"single-numa-node\"], invalid configuration: topologyManagerScope (--topology-manager-scope) \
                 \"node\" must be one of: \"container\", or \"pod\"]",
            ),
            (
                json!({"imageGCLowThresholdPercent": 90}),
                "failed to validate kubelet configuration, error: invalid configuration: imageGCLowThresholdPercent \
                 (--image-gc-low-threshold) 90 must be less than imageGCHighThresholdPercent \
                 (--image-gc-high-threshold) 85",
            ),
            (
                json!({"reservedSystemCPUs": "0", "systemReservedCgroup": "/system"}),
                "failed to validate kubelet configuration, error: invalid configuration: can't use \
                 reservedSystemCPUs (--reserved-cpus) with systemReservedCgroup (--system-reserved-cgroup) or \
                 kubeReservedCgroup (--kube-reserved-cgroup)",
            ),
        ];
        for (config, expected) in table {
            assert_eq!(check(config.clone()), Err(expected.to_owned()), "{config}");
        }
    }

    #[test]
    fn go_clean_paths() {
        for (path, clean) in [
            ("/var/log/pods", "/var/log/pods"),
            ("/var//log/", "/var/log"),
            ("/a/../b", "/b"),
            ("/", "/"),
        ] {
            assert_eq!(clean_path(path), clean);
        }
    }
}
