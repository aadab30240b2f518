//! The `featureGates` map of a KubeletConfiguration, applied the way the
//! kubelet's feature gate (`component-base/featuregate`, at the kubelet's
//! own version) applies it while loading the configuration: unknown names
//! and locked gates are refused with the kubelet's text, `AllAlpha` /
//! `AllBeta` switch whole maturity levels, and (from 1.35, whose registry
//! records dependencies between gates) a gate left on while a gate it
//! depends on is off is refused.
//!
//! Owns: each release's gate table (`<release>.tsv` beside this file:
//! every gate the kubelet of that release knows, with its default, lock,
//! maturity and dependencies, as `oracle gates` prints it from the real
//! kubelet code) and the
//! gates topoalign's behaviour depends on ([`FeatureGates`]).
//! Must not touch: what a gate changes (the managers read [`FeatureGates`]).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use topoalign_model::{FeatureGates, KubeletVersion};

use crate::go;

/// One setting of `featureGates` the kubelet refuses; the message is the
/// kubelet's.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GateProblem {
    #[error("unrecognized feature gate: {gate}")]
    Unrecognized { gate: String },
    #[error("cannot set feature gate {gate} to {value}, feature is locked to {locked}")]
    Locked { gate: String, value: bool, locked: bool },
    /// A gate that is on while gates it depends on are off.
    #[error("{gate} is enabled, but depends on features that are disabled: [{}]", .disabled.join(" "))]
    UnmetDependencies { gate: String, disabled: Vec<String> },
}

/// The settings of `featureGates` the kubelet refuses, aggregated as Go
/// aggregates errors (`[a, b]` for several).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", go::aggregate(&self.problems.iter().map(ToString::to_string).collect::<Vec<_>>()).unwrap_or_default())]
pub struct GateError {
    pub problems: Vec<GateProblem>,
}

/// Maturity of a gate in a release, which `AllAlpha` / `AllBeta` act on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Maturity {
    Alpha,
    Beta,
    Ga,
    Deprecated,
}

/// What the kubelet's feature gate knows about one gate in a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Spec {
    default: bool,
    maturity: Maturity,
    /// `LockToDefault`: setting it to anything else is an error.
    locked: bool,
    /// The gates it depends on, comma-separated as the table has them (the
    /// registry's list: sorted by name).
    depends_on: &'static str,
}

/// One release's gates by name.
type GateTable = BTreeMap<&'static str, Spec>;

/// The table of `version`, read once.
fn table(version: KubeletVersion) -> &'static GateTable {
    static TABLES: OnceLock<Vec<(KubeletVersion, GateTable)>> = OnceLock::new();
    let tables = TABLES.get_or_init(|| {
        KubeletVersion::SUPPORTED
            .iter()
            .map(|&v| (v, parse_table(table_text(v))))
            .collect()
    });
    tables
        .iter()
        .find(|(v, _)| *v == version)
        .map(|(_, table)| table)
        .expect("every supported release has a gate table")
}

/// The committed table of a release.
fn table_text(version: KubeletVersion) -> &'static str {
    match version.minor() {
        32 => include_str!("1.32.tsv"),
        33 => include_str!("1.33.tsv"),
        34 => include_str!("1.34.tsv"),
        35 => include_str!("1.35.tsv"),
        36 => include_str!("1.36.tsv"),
        _ => include_str!("1.37.tsv"),
    }
}

/// `name <TAB> default <TAB> locked <TAB> maturity <TAB> dependencies`
/// lines (dependencies comma-separated, often empty); `#` comments.
/// The tables are the project's own files, checked by a test: a malformed
/// line is a build defect, not an input error.
fn parse_table(text: &'static str) -> GateTable {
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let fields: Vec<&'static str> = line.split('\t').collect();
            let flag = |text: &str| text == "true";
            let maturity = match fields.get(3).copied().unwrap_or_default() {
                "ALPHA" => Maturity::Alpha,
                "BETA" => Maturity::Beta,
                "DEPRECATED" => Maturity::Deprecated,
                _ => Maturity::Ga,
            };
            let spec = Spec {
                default: flag(fields.get(1).copied().unwrap_or_default()),
                locked: flag(fields.get(2).copied().unwrap_or_default()),
                maturity,
                depends_on: fields.get(4).copied().unwrap_or_default(),
            };
            (fields[0], spec)
        })
        .collect()
}

/// The state of the gates after a configuration's `featureGates` map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GateSet {
    /// Gates explicitly enabled or disabled (including by `AllAlpha` /
    /// `AllBeta`); others are at their default.
    enabled: BTreeMap<&'static str, bool>,
    /// The release's gates, for the defaults.
    table: &'static GateTable,
}

impl GateSet {
    /// The defaults of `version` with `overrides` applied, like
    /// `featureGate.SetFromMap`.
    ///
    /// # Errors
    /// [`GateError`], with the kubelet's text: `unrecognized feature gate:
    /// X` (which stops at once), `cannot set feature gate X to Y, feature is locked to Z`
    /// (collected); when those pass, `X is enabled, but depends on features
    /// that are disabled: [Y Z]` for each gate on whose dependencies are not
    /// (collected, in name order: the kubelet walks a Go map). Several
    /// errors are aggregated as Go does.
    pub fn from_overrides(overrides: &BTreeMap<String, bool>, version: KubeletVersion) -> Result<GateSet, GateError> {
        let table = table(version);
        let mut enabled = BTreeMap::new();
        let mut errors = Vec::new();
        // Explicit settings win over AllAlpha/AllBeta whatever Go's map
        // order: apply the maturity switches first.
        let (switches, explicit): (Vec<_>, Vec<_>) = overrides
            .iter()
            .partition(|(name, _)| matches!(name.as_str(), "AllAlpha" | "AllBeta"));
        for (name, &value) in switches {
            let maturity = if name == "AllAlpha" {
                Maturity::Alpha
            } else {
                Maturity::Beta
            };
            for (&gate, spec) in table {
                if spec.maturity == maturity && !spec.locked {
                    enabled.insert(gate, value);
                }
            }
        }
        for (name, &value) in explicit {
            let Some((&known, &spec)) = table.get_key_value(name.as_str()) else {
                errors.push(GateProblem::Unrecognized { gate: name.clone() });
                break;
            };
            if spec.locked && spec.default != value {
                errors.push(GateProblem::Locked {
                    gate: name.clone(),
                    value,
                    locked: spec.default,
                });
                continue;
            }
            enabled.insert(known, value);
        }
        let set = GateSet { enabled, table };
        if errors.is_empty() {
            errors = set.unmet_dependencies();
        }
        if errors.is_empty() {
            Ok(set)
        } else {
            Err(GateError { problems: errors })
        }
    }

    /// `featureGate.unsafeSetFromMap`'s last check: every gate that is on
    /// (set or by default) needs the gates it depends on to be on.
    fn unmet_dependencies(&self) -> Vec<GateProblem> {
        self.table
            .iter()
            .filter(|(name, spec)| !spec.depends_on.is_empty() && self.enabled(name))
            .filter_map(|(name, spec)| {
                let off: Vec<String> = spec
                    .depends_on
                    .split(',')
                    .filter(|dep| !self.enabled(dep))
                    .map(str::to_owned)
                    .collect();
                (!off.is_empty()).then(|| GateProblem::UnmetDependencies {
                    gate: (*name).to_owned(),
                    disabled: off,
                })
            })
            .collect()
    }

    /// Whether `gate` is on.
    pub fn enabled(&self, gate: &str) -> bool {
        self.enabled
            .get(gate)
            .copied()
            .or_else(|| self.table.get(gate).map(|spec| spec.default))
            .unwrap_or(false)
    }

    /// Whether `gate` is on, `None` when the release does not know it.
    fn known(&self, gate: &str) -> Option<bool> {
        self.table.contains_key(gate).then(|| self.enabled(gate))
    }

    /// The gates the managers read.
    pub fn alignment(&self) -> FeatureGates {
        FeatureGates {
            cpu_manager_policy_options: self.enabled("CPUManagerPolicyOptions"),
            cpu_manager_policy_beta_options: self.enabled("CPUManagerPolicyBetaOptions"),
            cpu_manager_policy_alpha_options: self.enabled("CPUManagerPolicyAlphaOptions"),
            topology_manager_policy_options: self.enabled("TopologyManagerPolicyOptions"),
            topology_manager_policy_beta_options: self.enabled("TopologyManagerPolicyBetaOptions"),
            topology_manager_policy_alpha_options: self.enabled("TopologyManagerPolicyAlphaOptions"),
            // Gone from 1.36 (GA, the memory manager always runs).
            memory_manager: self.known("MemoryManager").unwrap_or(true),
            pod_level_resources_set: self.enabled.get("PodLevelResources").copied(),
            pod_level_fix_defaulting_set: self.enabled.get("PodLevelResourcesFixDefaulting").copied(),
            pod_level_fix_qos_set: self.enabled.get("PodLevelResourcesFixKubeletQOSClass").copied(),
            pod_level_managers_set: self.enabled.get("PodLevelResourceManagers").copied(),
            in_place_resize_set: self.enabled.get("InPlacePodVerticalScaling").copied(),
            in_place_resize_exclusive_cpus: self.enabled("InPlacePodVerticalScalingExclusiveCPUs"),
            in_place_resize_exclusive_memory: self.enabled("InPlacePodVerticalScalingExclusiveMemory"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates_of(version: KubeletVersion, pairs: &[(&str, bool)]) -> Result<GateSet, String> {
        GateSet::from_overrides(&pairs.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(), version)
            .map_err(|e| e.to_string())
    }

    fn gates(pairs: &[(&str, bool)]) -> Result<GateSet, String> {
        gates_of(KubeletVersion::V1_32, pairs)
    }

    #[test]
    fn defaults_are_each_releases() {
        let set = gates(&[]).unwrap();
        assert_eq!(set.alignment(), FeatureGates::default());
        // PodLevelResources: alpha and off in 1.32 and 1.33, beta and on in 1.34.
        for (version, on) in [
            (KubeletVersion::V1_32, false),
            (KubeletVersion::V1_33, false),
            (KubeletVersion::V1_34, true),
        ] {
            let set = gates_of(version, &[]).unwrap();
            assert_eq!(set.enabled("PodLevelResources"), on, "{version}");
            assert_eq!(set.alignment().pod_level_resources(version), on, "{version}");
        }
    }

    #[test]
    fn overrides_and_maturity_switches() {
        let set = gates(&[("CPUManagerPolicyAlphaOptions", true)]).unwrap();
        assert!(set.alignment().cpu_manager_policy_alpha_options);

        let set = gates(&[("AllAlpha", true)]).unwrap();
        assert!(set.alignment().cpu_manager_policy_alpha_options);
        assert!(set.alignment().topology_manager_policy_alpha_options);
        assert!(set.alignment().pod_level_resources(KubeletVersion::V1_32));

        // An explicit setting beats the switch.
        let set = gates(&[("AllBeta", false), ("CPUManagerPolicyOptions", true)]).unwrap();
        assert!(set.alignment().cpu_manager_policy_options);
        assert!(!set.alignment().cpu_manager_policy_beta_options);

        // A beta gate in 1.34: AllBeta reaches it, AllAlpha does not.
        let set = gates_of(KubeletVersion::V1_34, &[("AllAlpha", false)]).unwrap();
        assert!(set.alignment().pod_level_resources(KubeletVersion::V1_34));
        let set = gates_of(KubeletVersion::V1_34, &[("AllBeta", false)]).unwrap();
        assert!(!set.alignment().pod_level_resources(KubeletVersion::V1_34));

        let set = gates(&[("SidecarContainers", false)]).unwrap();
        assert_eq!(set.alignment(), FeatureGates::default());
    }

    #[test]
    fn refusals_use_the_kubelet_text() {
        assert_eq!(
            gates(&[("NoSuchGate", true)]),
            Err("unrecognized feature gate: NoSuchGate".into())
        );
        assert_eq!(
            gates(&[("MemoryManager", false)]),
            Err("cannot set feature gate MemoryManager to false, feature is locked to true".into())
        );
        assert_eq!(
            gates(&[("CPUManager", false), ("MemoryManager", false)]),
            Err(
                "[cannot set feature gate CPUManager to false, feature is locked to true, \
                 cannot set feature gate MemoryManager to false, feature is locked to true]"
                    .into()
            )
        );
        assert!(gates(&[("MemoryManager", true)]).is_ok());
    }

    #[test]
    fn gates_come_and_go_and_lock_by_release() {
        // | release | setting | the kubelet's answer |
        let table = [
            (KubeletVersion::V1_32, ("CPUManagerPolicyOptions", false), None),
            (
                KubeletVersion::V1_33,
                ("CPUManagerPolicyOptions", false),
                Some("cannot set feature gate CPUManagerPolicyOptions to false, feature is locked to true"),
            ),
            (
                KubeletVersion::V1_32,
                ("CPUManager", false),
                Some("cannot set feature gate CPUManager to false, feature is locked to true"),
            ),
            (
                KubeletVersion::V1_34,
                ("CPUManager", false),
                Some("unrecognized feature gate: CPUManager"),
            ),
            (KubeletVersion::V1_32, ("ContextualLogging", false), None),
        ];
        for (version, (gate, value), refusal) in table {
            assert_eq!(
                gates_of(version, &[(gate, value)]).err().as_deref(),
                refusal,
                "{version} {gate}={value}"
            );
        }
    }

    /// From 1.35 the registry refuses a gate that is on while a gate it
    /// depends on is off (texts from the v1.35.4 oracle; with several, the
    /// kubelet's order follows a Go map, ours is by name).
    #[test]
    fn from_1_35_a_gate_needs_the_gates_it_depends_on() {
        let v1_35 = KubeletVersion::V1_35;
        assert_eq!(
            gates_of(
                v1_35,
                &[
                    ("PodLevelResources", false),
                    ("InPlacePodLevelResourcesVerticalScaling", true)
                ]
            ),
            Err(
                "InPlacePodLevelResourcesVerticalScaling is enabled, but depends on features that are disabled: \
                 [NodeDeclaredFeatures PodLevelResources]"
                    .into()
            )
        );
        // Two gates on by default depend on this one.
        assert_eq!(
            gates_of(v1_35, &[("GracefulNodeShutdown", false)]),
            Err(
                "[GracefulNodeShutdownBasedOnPodPriority is enabled, but depends on features that are disabled: \
                 [GracefulNodeShutdown], WindowsGracefulNodeShutdown is enabled, but depends on features that are \
                 disabled: [GracefulNodeShutdown]]"
                    .into()
            )
        );
        // Switching the dependants off too is accepted.
        assert!(
            gates_of(
                v1_35,
                &[
                    ("GracefulNodeShutdown", false),
                    ("GracefulNodeShutdownBasedOnPodPriority", false),
                    ("WindowsGracefulNodeShutdown", false)
                ]
            )
            .is_ok()
        );
        // 1.34's registry has no dependencies.
        assert!(gates_of(KubeletVersion::V1_34, &[("GracefulNodeShutdown", false)]).is_ok());
    }

    #[test]
    fn every_table_is_well_formed() {
        for version in KubeletVersion::SUPPORTED {
            for line in table_text(version).lines().filter(|l| !l.starts_with('#')) {
                let fields: Vec<&str> = line.split('\t').collect();
                assert_eq!(fields.len(), 5, "{version}: {line:?}");
                for dep in fields[4].split(',').filter(|d| !d.is_empty()) {
                    assert!(table(version).contains_key(dep), "{version}: {line:?}");
                }
                assert!(matches!(fields[1], "true" | "false"), "{version}: {line:?}");
                assert!(matches!(fields[2], "true" | "false"), "{version}: {line:?}");
                assert!(
                    matches!(fields[3], "ALPHA" | "BETA" | "GA" | "DEPRECATED"),
                    "{version}: {line:?}"
                );
            }
            assert!(table(version).len() > 150, "{version}");
        }
    }
}
