//! How mature a manager's policy option is in a kubelet release, and the
//! kubelet's check that the feature gate of that maturity is on
//! (`CheckPolicyOptionAvailable` in the CPU and topology managers'
//! `policy_options.go`). Each manager decides its options' maturity per
//! release and keeps its own error texts; the gate rule and the reading of
//! an option's value (Go's `strconv.ParseBool`) live here once.

use crate::FeatureGates;

/// How mature a policy option is in a kubelet release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionMaturity {
    /// Needs the manager's `…PolicyAlphaOptions` gate (off by default).
    Alpha,
    /// Needs the manager's `…PolicyBetaOptions` gate (on by default).
    Beta,
    /// Needs no gate.
    Stable,
}

/// Whose options: each manager has its own alpha and beta gates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptionsOf {
    /// `CPUManagerPolicy{Alpha,Beta}Options`.
    CpuManager,
    /// `TopologyManagerPolicy{Alpha,Beta}Options`.
    TopologyManager,
}

impl OptionMaturity {
    /// The maturity whose gate `gates` leave off, refusing an option of
    /// this maturity for `manager`; `None` when the option may be used.
    pub fn gate_missing(self, manager: OptionsOf, gates: &FeatureGates) -> Option<OptionMaturity> {
        let (alpha, beta) = match manager {
            OptionsOf::CpuManager => (
                gates.cpu_manager_policy_alpha_options,
                gates.cpu_manager_policy_beta_options,
            ),
            OptionsOf::TopologyManager => (
                gates.topology_manager_policy_alpha_options,
                gates.topology_manager_policy_beta_options,
            ),
        };
        match self {
            OptionMaturity::Alpha if !alpha => Some(self),
            OptionMaturity::Beta if !beta => Some(self),
            _ => None,
        }
    }
}

/// A policy option's value as the kubelet reads it: Go's
/// `strconv.ParseBool` (`true`, `True`, `1`, `t` … are all on).
pub fn go_parse_bool(text: &str) -> Option<bool> {
    match text {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_maturity_needs_its_own_managers_gate() {
        let defaults = FeatureGates::default();
        for manager in [OptionsOf::CpuManager, OptionsOf::TopologyManager] {
            assert_eq!(OptionMaturity::Stable.gate_missing(manager, &defaults), None);
            assert_eq!(OptionMaturity::Beta.gate_missing(manager, &defaults), None);
            assert_eq!(
                OptionMaturity::Alpha.gate_missing(manager, &defaults),
                Some(OptionMaturity::Alpha)
            );
        }
        let no_cpu_beta = FeatureGates {
            cpu_manager_policy_beta_options: false,
            topology_manager_policy_alpha_options: true,
            ..defaults
        };
        assert_eq!(
            OptionMaturity::Beta.gate_missing(OptionsOf::CpuManager, &no_cpu_beta),
            Some(OptionMaturity::Beta)
        );
        assert_eq!(
            OptionMaturity::Beta.gate_missing(OptionsOf::TopologyManager, &no_cpu_beta),
            None
        );
        assert_eq!(
            OptionMaturity::Alpha.gate_missing(OptionsOf::TopologyManager, &no_cpu_beta),
            None
        );
    }
}
