//! From a [`KubeletConfiguration`] and a [`Machine`] to the engine's
//! [`NodeConfig`], through the kubelet's own start-up steps that are not a
//! manager's, in the kubelet's order (`cmd/kubelet/app/server.go` `run`):
//!
//! 1. `ValidateKubeletConfiguration` (with the configured feature gates);
//! 2. `getReservedCPUs`, then `reservedSystemCPUs` overriding the `cpu` of
//!    `kubeReserved` / `systemReserved` (the set's size goes to
//!    `systemReserved`);
//! 3. `parseResourceList` of `kubeReserved`, then `systemReserved`;
//! 4. `eviction.ParseThresholdConfig` of `evictionHard`;
//! 5. `ParseQOSReserved`;
//! 6. CPU / topology manager policy options against their feature gates.
//!
//! What follows in the kubelet — creating the topology, CPU and memory
//! managers, node allocatable validation — is [`Node::start`]'s
//! (topoalign-engine). Two checks of those constructors need names the
//! engine's enums cannot hold, so they run here, last: an unknown
//! `cpuManagerPolicy` / `memoryManagerPolicy`, and a negative
//! `reservedMemory` NUMA node. (The kubelet would report a topology
//! manager error first, were there one as well.)
//!
//! [`Node::start`]: topoalign_engine::Node::start

use std::collections::BTreeMap;

use topoalign_engine::{
    CpuPolicyName, MemoryPolicyName, Node, NodeConfig, ReservedMemory, TopologyPolicyName, TopologyScope,
};
use topoalign_model::{KubeletVersion, Machine, Quantity, ResourceList};

use crate::eviction::{hard_eviction_reservation, parse_hard_thresholds};
use crate::go;
use crate::kubelet_config::{ConfigError, KubeletConfiguration};
use crate::quantity::parse_quantity;
use crate::validation::validate;

/// Why the kubelet would refuse to start. Display is the kubelet's text
/// (what it prints after `command failed`, without the config dump).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeletConfigError {
    /// `ValidateKubeletConfiguration` (text starts `failed to validate
    /// kubelet configuration, error: `), including feature gate errors.
    #[error("{0}")]
    Validation(#[from] crate::validation::ValidationError),
    /// `getReservedCPUs`, e.g. `reserved-cpus: 0-3 is not a subset of
    /// online-cpus: 0-1`.
    #[error("{0}")]
    ReservedCpus(#[from] crate::cpu_list::ReservedCpusError),
    /// `parseResourceList` of `kubeReserved`.
    #[error("--kube-reserved value failed to parse: {0}")]
    KubeReserved(String),
    /// `parseResourceList` of `systemReserved`.
    #[error("--system-reserved value failed to parse: {0}")]
    SystemReserved(String),
    /// `evictionHard`, e.g. `unsupported eviction signal x`.
    #[error("{0}")]
    EvictionHard(#[from] crate::eviction::EvictionError),
    #[error("--qos-reserved value failed to parse: {0}")]
    QosReserved(String),
    /// CPU manager policy options while `CPUManagerPolicyOptions` is off.
    #[error(
        "CPU Manager policy options {} require feature gates \"CPUManager\", \"CPUManagerPolicyOptions\" enabled",
        go::map_text(.0)
    )]
    CpuPolicyOptionsGate(BTreeMap<String, String>),
    /// Topology manager policy options while `TopologyManagerPolicyOptions`
    /// is off.
    #[error(
        "topology manager policy options {} require feature gates \"TopologyManagerPolicyOptions\" enabled",
        go::map_text(.0)
    )]
    TopologyPolicyOptionsGate(BTreeMap<String, String>),
    /// `cpumanager.NewManager` with a policy it does not know.
    #[error("unknown policy: \"{0}\"")]
    UnknownCpuPolicy(String),
    /// `memorymanager.NewManager` with a policy it does not know.
    #[error("unknown policy: \"{0}\"")]
    UnknownMemoryPolicy(String),
    /// The Static memory policy's reserved memory names a NUMA node that
    /// cannot exist.
    #[error("the reserved memory configuration references a NUMA node {0} that does not exist on this machine")]
    ReservedMemoryNode(i32),
}

/// Runs the kubelet's start-up steps (see the module docs) for `config` on
/// `machine`.
///
/// # Errors
/// [`KubeletConfigError`] for the first step that fails, with the
/// kubelet's text.
pub fn node_config(config: &KubeletConfiguration, machine: &Machine) -> Result<NodeConfig, KubeletConfigError> {
    let gates = validate(config)?;

    let reserved_system_cpus = crate::cpu_list::reserved_cpus(config.reserved_system_cpus(), machine)?;
    let mut kube_reserved = config.kube_reserved.clone();
    let mut system_reserved = config.system_reserved.clone();
    if let Some(cpus) = &reserved_system_cpus {
        if let Some(kube) = &mut kube_reserved {
            kube.remove("cpu");
        }
        system_reserved
            .get_or_insert_with(BTreeMap::new)
            .insert("cpu".to_owned(), cpus.len().to_string());
    }
    let kubelet_version = config.kubelet_version.unwrap_or_default();
    let kube_reserved =
        parse_resource_list(kube_reserved.as_ref(), kubelet_version).map_err(KubeletConfigError::KubeReserved)?;
    let system_reserved =
        parse_resource_list(system_reserved.as_ref(), kubelet_version).map_err(KubeletConfigError::SystemReserved)?;

    let thresholds = parse_hard_thresholds(&config.eviction_hard())?;
    parse_qos_reserved(config.qos_reserved.as_ref()).map_err(KubeletConfigError::QosReserved)?;

    // From v1.33 `CPUManagerPolicyOptions` is GA (locked on) and
    // cmd/kubelet no longer checks it.
    let cpu_options = gated_options(
        config.cpu_manager_policy_options.as_ref(),
        kubelet_version.at_least(KubeletVersion::V1_33) || gates.enabled("CPUManagerPolicyOptions"),
        KubeletConfigError::CpuPolicyOptionsGate,
    )?;
    let topology_options = gated_options(
        config.topology_manager_policy_options.as_ref(),
        gates.enabled("TopologyManagerPolicyOptions"),
        KubeletConfigError::TopologyPolicyOptionsGate,
    )?;

    let cpu_policy: CpuPolicyName = config
        .cpu_manager_policy()
        .parse()
        .map_err(|_| KubeletConfigError::UnknownCpuPolicy(config.cpu_manager_policy().to_owned()))?;
    let memory_policy: MemoryPolicyName = config
        .memory_manager_policy()
        .parse()
        .map_err(|_| KubeletConfigError::UnknownMemoryPolicy(config.memory_manager_policy().to_owned()))?;
    let mut reserved_memory = Vec::new();
    for reservation in config.reserved_memory.iter().flatten() {
        match usize::try_from(reservation.numa_node) {
            Ok(numa_node) => reserved_memory.push(ReservedMemory {
                numa_node,
                limits: reservation
                    .limits
                    .iter()
                    .map(|(name, amount)| (name.clone(), *amount))
                    .collect(),
            }),
            Err(_) if memory_policy == MemoryPolicyName::Static => {
                return Err(KubeletConfigError::ReservedMemoryNode(reservation.numa_node));
            }
            // The None policy never looks at reservedMemory.
            Err(_) => {}
        }
    }

    let memory_capacity = i64::try_from(machine.total_memory()).unwrap_or(i64::MAX);
    // The scenario machine has no ephemeral-storage capacity.
    let hard_eviction = hard_eviction_reservation(&thresholds, memory_capacity, 0);

    Ok(NodeConfig {
        // Validation has accepted only these names.
        topology_policy: config
            .topology_manager_policy()
            .parse()
            .unwrap_or(TopologyPolicyName::None),
        topology_scope: config
            .topology_manager_scope()
            .parse()
            .unwrap_or(TopologyScope::Container),
        topology_options,
        cpu_policy,
        cpu_options,
        reserved_system_cpus,
        memory_policy,
        reserved_memory,
        system_reserved,
        kube_reserved,
        hard_eviction,
        // Validation has refused negative values.
        max_pods: u32::try_from(config.max_pods()).unwrap_or(0),
        feature_gates: gates.alignment(),
        kubelet_version,
    })
}

/// Reads the scenario's `kubelet:` block and runs [`node_config`].
///
/// # Errors
/// [`ConfigError::Invalid`] for a block that does not decode,
/// [`ConfigError::Refused`] with the kubelet's text for one it would refuse.
pub fn node_config_from_value(value: &serde_json::Value, machine: &Machine) -> Result<NodeConfig, ConfigError> {
    let config = KubeletConfiguration::from_value(value)?;
    node_config(&config, machine).map_err(|refusal| ConfigError::Refused(refusal.to_string()))
}

/// Starts the engine node a kubelet with the KubeletConfiguration fields
/// `kubelet` (a file's fields or a scenario's `kubelet:` block; `null` is
/// the defaults) would run on `machine`: decoding, the start-up steps of
/// [`node_config`], then the managers' own checks ([`Node::start`]). The
/// one way every front end starts a node.
///
/// # Errors
/// [`ConfigError::Invalid`] for fields that do not decode,
/// [`ConfigError::Refused`] with the kubelet's text for a configuration it
/// would refuse to start with, whichever step refuses it.
///
/// [`Node::start`]: topoalign_engine::Node::start
pub fn start_node(machine: Machine, kubelet: &serde_json::Value) -> Result<Node, ConfigError> {
    let config = node_config_from_value(kubelet, &machine)?;
    Node::start(machine, config).map_err(|refusal| ConfigError::Refused(refusal.to_string()))
}

/// The kubelet's `parseResourceList` (cmd/kubelet): `cpu`, `memory`,
/// `ephemeral-storage` and `pid`, non-negative.
fn parse_resource_list(
    map: Option<&BTreeMap<String, String>>,
    version: KubeletVersion,
) -> Result<ResourceList, String> {
    let mut list = ResourceList::new();
    for (name, text) in map.into_iter().flatten() {
        if !["cpu", "memory", "ephemeral-storage", "pid"].contains(&name.as_str()) {
            return Err(format!("cannot reserve {} resource", go::quote(name)));
        }
        let quantity = match parse_quantity(text) {
            Ok(quantity) => quantity,
            Err(error) => {
                return Err(format!(
                    "failed to parse quantity {} for {} resource: {error}",
                    go::quote(text),
                    go::quote(name)
                ));
            }
        };
        if quantity.is_negative() {
            return Err(format!(
                "resource quantity for {} cannot be negative: {text}",
                go::quote(name)
            ));
        }
        list.insert(name.clone(), reserved_cpu_rounding(name, quantity, version));
    }
    Ok(list)
}

/// From v1.37 `parseResourceList` rounds a `cpu` reservation to whole
/// millicores, half up, after Go's `ScaledValue(resource.Micro)` (rounded
/// up to whole microcores, wrapped past `int64`):
/// `q.SetMilli((q.ScaledValue(resource.Micro) + 500) / 1000)` — `1500u`
/// reserves `2m`, `400u` nothing at all, `1499999n` `2m` (1500 microcores
/// once rounded up). Up to v1.36 the amount is kept exact. `SetMilli`
/// keeps the notation and gives Go's `int64Amount{value, -3}`.
fn reserved_cpu_rounding(name: &str, quantity: Quantity, version: KubeletVersion) -> Quantity {
    if name != "cpu" || !version.at_least(KubeletVersion::V1_37) {
        return quantity;
    }
    // Go's int64 `+` wraps; `/` truncates towards zero, as Rust's does.
    let milli = quantity.go_scaled_value(-6).wrapping_add(500) / 1000;
    Quantity::from_milli(i128::from(milli)).with_format(quantity.format())
}

/// `cm.ParseQOSReserved`: only `memory`, as a whole percentage.
fn parse_qos_reserved(map: Option<&BTreeMap<String, String>>) -> Result<(), String> {
    for (name, text) in map.into_iter().flatten() {
        if name != "memory" {
            return Err(format!("cannot reserve {} resource", go::quote(name)));
        }
        let percentage = text
            .strip_suffix('%')
            .ok_or_else(|| format!("percentage expected, got '{text}'"))
            .and_then(|number| {
                go::parse_int64(number.trim_end_matches('%'))
                    .map_err(|_| format!("invalid number in percentage '{text}'"))
            });
        let problem = match percentage {
            Ok(value) if !(0..=100).contains(&value) => Some("percentage must be between 0 and 100".to_owned()),
            Ok(_) => None,
            Err(problem) => Some(problem),
        };
        if let Some(problem) = problem {
            return Err(format!(
                "failed to parse percentage {} for {} resource: {problem}",
                go::quote(text),
                go::quote(name)
            ));
        }
    }
    Ok(())
}

/// Policy options pass through when their gate is on; given while it is off,
/// the kubelet refuses (an absent map is fine).
fn gated_options(
    options: Option<&BTreeMap<String, String>>,
    gate_enabled: bool,
    refusal: fn(BTreeMap<String, String>) -> KubeletConfigError,
) -> Result<BTreeMap<String, String>, KubeletConfigError> {
    match options {
        Some(options) if !gate_enabled => Err(refusal(options.clone())),
        Some(options) => Ok(options.clone()),
        None => Ok(BTreeMap::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};
    use topoalign_model::{Cpu, CpuSet, FeatureGates, NumaNode, Quantity, UniformMachine};

    /// `numa` NUMA nodes of `cpus_per_node` CPUs and 32Gi each.
    fn machine(numa: usize, cpus_per_node: u32) -> Machine {
        UniformMachine::new(numa, cpus_per_node)
            .memory_per_numa(32 << 30)
            .build()
            .unwrap()
    }

    fn start(config: Value) -> Result<NodeConfig, ConfigError> {
        node_config_from_value(&config, &machine(2, 8))
    }

    fn refusal(config: Value) -> String {
        match start(config.clone()) {
            Err(ConfigError::Refused(text)) => text,
            other => panic!("{config}: expected a refusal, got {other:?}"),
        }
    }

    fn texts(list: &ResourceList) -> BTreeMap<String, String> {
        list.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()
    }

    /// v1.37's `parseResourceList` rounds a reserved cpu to millicores
    /// (`(ScaledValue(Micro) + 500) / 1000`, then `SetMilli`); 1.32-1.36
    /// keep it exact. The 1.37 column: `String()`, `IsZero()` and
    /// `MilliValue()` of each, as a Go program printed them with
    /// k8s.io/apimachinery v0.37.2 running that line of cmd/kubelet.
    #[test]
    fn reserved_cpu_is_rounded_to_millicores_from_1_37() {
        let table: &[(&str, &str, bool, i64)] = &[
            ("1500u", "2m", false, 2),
            ("400u", "0", true, 0),
            ("1499999n", "2m", false, 2),
            ("1.4995m", "2m", false, 2),
            ("0.0005", "1m", false, 1),
            ("2", "2", false, 2000),
            ("100m", "100m", false, 100),
            // ScaledValue(Micro) overflows: 0, or the wrapped value.
            ("1e19", "0", true, 0),
            ("9Ei", "-999m", false, -999),
            ("999999999999.9999995", "1T", false, 1_000_000_000_000_000),
            ("1e30", "0", true, 0),
        ];
        for &(text, string, zero, milli) in table {
            let config = |version: &str| json!({"kubeletVersion": version, "systemReserved": {"cpu": text}});
            let reserved = |version: &str| {
                let config = start(config(version)).unwrap_or_else(|e| panic!("{text} {version}: {e:?}"));
                config.system_reserved.get("cpu").copied().expect("a cpu reservation")
            };
            let rounded = reserved("1.37");
            assert_eq!(rounded.to_string(), string, "{text}");
            assert_eq!(rounded.is_zero(), zero, "{text}");
            assert_eq!(rounded.go_milli_value(), milli, "{text}");
            assert_eq!(
                rounded.go_form(),
                topoalign_model::GoForm::Int64 { scale: -3 },
                "{text}"
            );
            for version in ["1.32", "1.36"] {
                assert_eq!(reserved(version), parse_quantity(text).unwrap(), "{text} {version}");
            }
        }
    }

    #[test]
    fn an_empty_block_is_the_kubelet_default() {
        let config = start(Value::Null).unwrap();
        let expected = NodeConfig {
            // The default's nodefs.available 10% of no storage capacity is 0.
            hard_eviction: [
                ("ephemeral-storage".to_owned(), Quantity::ZERO),
                ("memory".to_owned(), parse_quantity("100Mi").unwrap()),
            ]
            .into_iter()
            .collect(),
            ..NodeConfig::default()
        };
        assert_eq!(config, expected);
        assert_eq!(texts(&config.hard_eviction)["memory"], "100Mi");
    }

    #[test]
    fn the_scenario_example_block() {
        let config = start(json!({
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
            "reservedMemory": [{"numaNode": 0, "limits": {"memory": "2148Mi"}}],
            "featureGates": {"CPUManagerPolicyAlphaOptions": true},
            "maxPods": 50,
        }))
        .unwrap();
        assert_eq!(config.topology_policy, TopologyPolicyName::SingleNumaNode);
        assert_eq!(config.topology_scope, TopologyScope::Pod);
        assert_eq!(config.topology_options["prefer-closest-numa-nodes"], "true");
        assert_eq!(config.cpu_policy, CpuPolicyName::Static);
        assert_eq!(config.cpu_options["full-pcpus-only"], "true");
        assert_eq!(config.reserved_system_cpus, Some(CpuSet::parse("0-1").unwrap()));
        assert_eq!(config.memory_policy, MemoryPolicyName::Static);
        assert_eq!(config.reserved_memory[0].numa_node, 0);
        assert_eq!(texts(&config.reserved_memory[0].limits)["memory"], "2148Mi");
        // reservedSystemCPUs: its size replaces systemReserved's cpu, and
        // kubeReserved loses its cpu.
        assert_eq!(
            texts(&config.system_reserved),
            [("cpu".into(), "2".into()), ("memory".into(), "1Gi".into())].into()
        );
        assert_eq!(texts(&config.kube_reserved), [("memory".into(), "1Gi".into())].into());
        assert_eq!(texts(&config.hard_eviction), [("memory".into(), "100Mi".into())].into());
        assert_eq!(config.max_pods, 50);
        assert_eq!(
            config.feature_gates,
            FeatureGates {
                cpu_manager_policy_alpha_options: true,
                ..FeatureGates::default()
            }
        );
    }

    #[test]
    fn reserved_cpus_without_other_reservations() {
        let config = start(json!({"reservedSystemCPUs": "0,8"})).unwrap();
        assert_eq!(texts(&config.system_reserved), [("cpu".into(), "2".into())].into());
        assert!(config.kube_reserved.is_empty());
    }

    #[test]
    fn percentage_eviction_is_taken_of_node_memory() {
        let config = start(json!({"evictionHard": {"memory.available": "5%"}})).unwrap();
        // 5% of 64Gi, through float32 like the kubelet.
        assert_eq!(texts(&config.hard_eviction)["memory"], "3435973888");
    }

    /// Conformance vectors 0037 and 0038, and the other refusals of these
    /// steps.
    #[test]
    fn refusals_use_the_kubelet_text() {
        let table = [
            (
                json!({"topologyManagerPolicy": "strict", "cpuManagerPolicy": "static",
                    "systemReserved": {"cpu": "1", "memory": "1Gi"}, "memoryManagerPolicy": "Static",
                    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]}),
                "failed to validate kubelet configuration, error: invalid configuration: topologyManagerPolicy \
                 (--topology-manager-policy) \"strict\" must be one of: [\"none\" \"best-effort\" \"restricted\" \
                 \"single-numa-node\"]",
            ),
            (
                json!({"topologyManagerPolicy": "restricted", "cpuManagerPolicy": "static",
                    "reservedSystemCPUs": "15-16", "systemReserved": {"memory": "1Gi"},
                    "memoryManagerPolicy": "Static",
                    "reservedMemory": [{"numaNode": 0, "limits": {"memory": "1124Mi"}}]}),
                "reserved-cpus: 15-16 is not a subset of online-cpus: 0-15",
            ),
            (
                json!({"kubeReserved": {"gpu": "1"}}),
                "--kube-reserved value failed to parse: cannot reserve \"gpu\" resource",
            ),
            (
                json!({"systemReserved": {"memory": "-1Gi"}}),
                "--system-reserved value failed to parse: resource quantity for \"memory\" cannot be negative: -1Gi",
            ),
            (
                json!({"systemReserved": {"cpu": "one"}}),
                "--system-reserved value failed to parse: failed to parse quantity \"one\" for \"cpu\" resource: \
                 quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
            ),
            (
                json!({"evictionHard": {"memory.avail": "1Gi"}}),
                "unsupported eviction signal memory.avail",
            ),
            (
                json!({"qosReserved": {"memory": "120%"}}),
                "--qos-reserved value failed to parse: failed to parse percentage \"120%\" for \"memory\" resource: \
                 percentage must be between 0 and 100",
            ),
            (
                json!({"cpuManagerPolicyOptions": {"full-pcpus-only": "true"},
                    "featureGates": {"CPUManagerPolicyOptions": false}, "kubeletVersion": "1.32"}),
                "CPU Manager policy options map[full-pcpus-only:true] require feature gates \"CPUManager\", \
                 \"CPUManagerPolicyOptions\" enabled",
            ),
            (
                json!({"topologyManagerPolicyOptions": {}, "featureGates": {"TopologyManagerPolicyOptions": false},
                    "kubeletVersion": "1.35"}),
                "topology manager policy options map[] require feature gates \"TopologyManagerPolicyOptions\" enabled",
            ),
            (
                // Locked from 1.36.
                json!({"topologyManagerPolicyOptions": {}, "featureGates": {"TopologyManagerPolicyOptions": false},
                    "kubeletVersion": "1.36"}),
                "panic: failed to merge global and in-flight KubeletConfiguration while setting defaults, error: \
                 cannot set feature gate TopologyManagerPolicyOptions to false, feature is locked to true",
            ),
            (json!({"cpuManagerPolicy": "Static"}), "unknown policy: \"Static\""),
            (json!({"memoryManagerPolicy": "static"}), "unknown policy: \"static\""),
            (
                json!({"memoryManagerPolicy": "Static", "reservedMemory": [{"numaNode": -1, "limits": {"memory": "1Gi"}}]}),
                "the reserved memory configuration references a NUMA node -1 that does not exist on this machine",
            ),
            (
                json!({"featureGates": {"NotAGate": true}}),
                "panic: failed to merge global and in-flight KubeletConfiguration while setting defaults, error: unrecognized feature gate: NotAGate",
            ),
        ];
        for (config, expected) in table {
            assert_eq!(refusal(config.clone()), expected, "{config}");
        }
    }

    #[test]
    fn malformed_blocks_are_input_errors_not_refusals() {
        assert!(matches!(
            start(json!({"maxPods": "lots"})),
            Err(ConfigError::Invalid { .. })
        ));
        assert!(matches!(
            start(json!(["not", "a", "map"])),
            Err(ConfigError::Invalid { .. })
        ));
    }

    #[test]
    fn every_public_conformance_refusal_of_these_steps() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/conformance/1.32");
        let entries = std::fs::read_dir(root.join("expected")).expect("the repository's v1.32 conformance vectors");
        let mut checked = 0;
        for entry in entries.flatten() {
            let expected: Value = serde_json::from_str(&std::fs::read_to_string(entry.path()).unwrap()).unwrap();
            let Some(error) = expected.get("error").and_then(Value::as_str) else {
                continue;
            };
            let ours = error.starts_with("failed to validate") || error.starts_with("reserved-cpus");
            if !ours {
                continue;
            }
            let scenario: Value =
                serde_json::from_str(&std::fs::read_to_string(root.join("scenarios").join(entry.file_name())).unwrap())
                    .unwrap();
            let machine = test_machine(&scenario["topology"]);
            let got = node_config_from_value(&scenario["kubelet"], &machine);
            assert_eq!(
                got,
                Err(ConfigError::Refused(error.to_owned())),
                "{:?}",
                entry.file_name()
            );
            checked += 1;
        }
        assert!(checked >= 2, "found {checked} vectors");
    }

    /// Regression: `kubeletVersion` (docs/scenario.md) drew an "unknown
    /// field" warning and was otherwise ignored, so a v1.36 node would have
    /// been answered by v1.32's rules without a word.
    #[test]
    fn kubelet_version_is_checked_not_ignored() {
        let machine = test_machine(&json!({"numaNodes": [{"id": 0, "memory": "8Gi"}],
                                           "cpus": [{"id": 0, "core": 0, "socket": 0, "numa": 0},
                                                    {"id": 1, "core": 1, "socket": 0, "numa": 0}]}));
        let cases = [
            (json!("1.32"), KubeletVersion::V1_32),
            (json!("v1.33"), KubeletVersion::V1_33),
            (json!("1.34.4"), KubeletVersion::V1_34),
        ];
        for (accepted, version) in cases {
            let kubelet = json!({"kubeletVersion": accepted});
            assert_eq!(
                node_config_from_value(&kubelet, &machine).unwrap().kubelet_version,
                version
            );
            assert!(crate::unknown_field_warnings(&kubelet).is_empty());
        }
        let unsaid = node_config_from_value(&json!({}), &machine).unwrap();
        assert_eq!(unsaid.kubelet_version, KubeletVersion::NEWEST);
        for refused in [json!("1.31"), json!("1.99"), json!("2"), json!(1.32)] {
            let error = node_config_from_value(&json!({"kubeletVersion": refused}), &machine).unwrap_err();
            assert!(
                matches!(&error, ConfigError::Invalid { path, .. } if path == "kubeletVersion"),
                "{refused}: {error}"
            );
        }
    }

    /// `--kubelet-version` names the release of a block that does not; a
    /// block naming another one is refused.
    #[test]
    fn the_version_flag_fills_in_and_never_overrides() {
        let cases = [
            (Value::Null, Ok(json!({"kubeletVersion": "1.33"}))),
            (
                json!({"maxPods": 3}),
                Ok(json!({"maxPods": 3, "kubeletVersion": "1.33"})),
            ),
            (
                json!({"kubeletVersion": "v1.33.2"}),
                Ok(json!({"kubeletVersion": "v1.33.2"})),
            ),
            (
                json!({"kubeletVersion": "1.34"}),
                Err("kubeletVersion: the configuration says kubelet 1.34 but --kubelet-version says 1.33"),
            ),
        ];
        for (mut block, want) in cases {
            let got = crate::apply_kubelet_version(&mut block, KubeletVersion::V1_33).map(|()| block);
            assert_eq!(got.map_err(|e| e.to_string()), want.map_err(str::to_string));
        }
    }

    /// Just enough of a scenario topology for these steps: NUMA nodes with
    /// their memory, CPUs with their node.
    fn test_machine(topology: &Value) -> Machine {
        let nodes = topology["numaNodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| NumaNode {
                id: n["id"].as_u64().unwrap() as usize,
                memory: parse_quantity(n["memory"].as_str().unwrap()).unwrap().value() as u64,
                hugepages: BTreeMap::new(),
                distances: None,
            })
            .collect();
        let cpus = topology["cpus"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| Cpu {
                id: c["id"].as_u64().unwrap() as u32,
                core: c["core"].as_u64().unwrap() as u32,
                socket: c["socket"].as_u64().unwrap() as u32,
                numa: c["numa"].as_u64().unwrap() as usize,
                uncore_cache: None,
            })
            .collect();
        Machine::new(nodes, cpus, BTreeMap::new()).unwrap()
    }
}
