//! What the generator knows about each kubelet release: which CPU and
//! topology manager policy options are alpha, beta or GA, and which feature
//! gates that touch resource management exist (read from each release's
//! `pkg/features/kube_features.go` and the managers' `policy_options.go`).
//!
//! This steers the generator towards configurations a release starts with
//! (and, some of the time, ones it refuses); it decides nothing. The oracle
//! and the engine each have their own rules, and the run compares those.

/// A kubelet minor release, `1.<minor>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Release(pub u8);

/// Every release the oracle builds, oldest first.
pub const RELEASES: [Release; 6] = [
    Release(32),
    Release(33),
    Release(34),
    Release(35),
    Release(36),
    Release(37),
];

/// How mature a policy option is in a release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Maturity {
    Alpha,
    Beta,
    Ga,
}

/// The CPU manager's static-policy options.
pub const CPU_OPTIONS: [&str; 6] = [
    "full-pcpus-only",
    "distribute-cpus-across-numa",
    "align-by-socket",
    "distribute-cpus-across-cores",
    "strict-cpu-reservation",
    "prefer-align-cpus-by-uncorecache",
];

/// A feature gate the resource managers or pod admission read.
#[derive(Clone, Copy, Debug)]
pub struct Gate {
    pub name: &'static str,
    pub default: bool,
    /// Locked to its default: setting the other value is refused at start-up.
    pub locked: bool,
}

impl Release {
    /// `"1.35"` or `"v1.35"` (a patch release is accepted and dropped).
    pub fn parse(text: &str) -> Option<Release> {
        let text = text.strip_prefix('v').unwrap_or(text);
        let mut parts = text.split('.');
        if parts.next()? != "1" {
            return None;
        }
        let release = Release(parts.next()?.parse().ok()?);
        RELEASES.contains(&release).then_some(release)
    }

    /// `"1.35"`.
    pub fn name(self) -> String {
        format!("1.{}", self.0)
    }

    /// A CPU manager option's maturity (policy_options.go of the release).
    pub fn cpu_option(self, option: &str) -> Maturity {
        let v = self.0;
        match option {
            "full-pcpus-only" if v >= 33 => Maturity::Ga,
            "full-pcpus-only" => Maturity::Beta,
            "strict-cpu-reservation" if v >= 35 => Maturity::Ga,
            "strict-cpu-reservation" | "distribute-cpus-across-numa" if v >= 33 => Maturity::Beta,
            "prefer-align-cpus-by-uncorecache" if v >= 36 => Maturity::Ga,
            "prefer-align-cpus-by-uncorecache" if v >= 34 => Maturity::Beta,
            _ => Maturity::Alpha,
        }
    }

    /// A topology manager option's maturity.
    pub fn topology_option(self, option: &str) -> Maturity {
        match option {
            "max-allowable-numa-nodes" if self.0 < 35 => Maturity::Beta,
            _ => Maturity::Ga,
        }
    }

    /// The gates this release knows that matter here.
    pub fn gates(self) -> Vec<Gate> {
        let v = self.0;
        let gate = |name, default, locked| Gate { name, default, locked };
        let mut gates = vec![
            gate("CPUManagerPolicyAlphaOptions", false, false),
            gate("CPUManagerPolicyBetaOptions", true, false),
            gate("TopologyManagerPolicyAlphaOptions", false, false),
            gate("TopologyManagerPolicyBetaOptions", true, false),
            // Beta in 1.32; GA and locked from 1.33.
            gate("CPUManagerPolicyOptions", true, v >= 33),
            // GA in 1.32, locked from 1.36.
            gate("TopologyManagerPolicyOptions", true, v >= 36),
            gate("PodLevelResources", v >= 34, false),
            // Alpha and off: a Guaranteed pod's resize of exclusive CPUs
            // (pinned memory, from 1.34) reaches the managers.
            gate("InPlacePodVerticalScalingExclusiveCPUs", false, false),
        ];
        if v >= 34 {
            gates.push(gate("InPlacePodVerticalScalingExclusiveMemory", false, false));
        }
        if v == 32 {
            gates.push(gate("CPUManager", true, true));
        }
        if v <= 35 {
            gates.push(gate("MemoryManager", true, true));
        }
        if v <= 36 {
            // Beta (on) in 1.32; GA and locked 1.33-1.36; gone in 1.37.
            gates.push(gate("SidecarContainers", true, v >= 33));
        }
        if v >= 36 {
            gates.push(gate("PodLevelResourceManagers", false, false));
        }
        if v >= 37 {
            // Beta and on: the kubelet's defaulting leaves pod-level
            // resources alone; they decide QoS only when cpu, memory or huge
            // pages are set.
            gates.push(gate("PodLevelResourcesFixDefaulting", true, false));
            gates.push(gate("PodLevelResourcesFixKubeletQOSClass", true, false));
        }
        gates
    }

    /// Whether pod-level resources are honoured with the gates as given
    /// (`None`: the release's default).
    pub fn pod_level_resources(self, gate: Option<bool>) -> bool {
        gate.unwrap_or(self.0 >= 34)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_parse_and_print() {
        assert_eq!(Release::parse("1.35"), Some(Release(35)));
        assert_eq!(Release::parse("v1.37.2"), Some(Release(37)));
        assert_eq!(Release::parse("1.31"), None);
        assert_eq!(Release::parse("2.35"), None);
        assert_eq!(Release(36).name(), "1.36");
    }

    #[test]
    fn option_maturity_follows_the_releases() {
        assert_eq!(Release(32).cpu_option("full-pcpus-only"), Maturity::Beta);
        assert_eq!(Release(33).cpu_option("full-pcpus-only"), Maturity::Ga);
        assert_eq!(Release(33).cpu_option("distribute-cpus-across-numa"), Maturity::Beta);
        assert_eq!(Release(35).cpu_option("strict-cpu-reservation"), Maturity::Ga);
        assert_eq!(
            Release(34).cpu_option("prefer-align-cpus-by-uncorecache"),
            Maturity::Beta
        );
        assert_eq!(Release(36).cpu_option("prefer-align-cpus-by-uncorecache"), Maturity::Ga);
        assert_eq!(Release(37).cpu_option("align-by-socket"), Maturity::Alpha);
        assert_eq!(Release(34).topology_option("max-allowable-numa-nodes"), Maturity::Beta);
        assert_eq!(Release(35).topology_option("max-allowable-numa-nodes"), Maturity::Ga);
    }
}
