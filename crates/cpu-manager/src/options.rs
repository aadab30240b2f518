//! The static policy's options (`cpuManagerPolicyOptions`): parsing with the
//! kubelet's feature-gate checks (`NewStaticPolicyOptions`) and the checks
//! against the machine and the topology manager policy
//! (`ValidateStaticPolicyOptions`). Error texts are the kubelet's, word for
//! word (including its typo "Topolgy").
//!
//! Must not touch: allocation. The options are parsed once, at start.

use std::collections::BTreeMap;

use topoalign_model::{FeatureGates, KubeletVersion, OptionMaturity, OptionsOf};

use crate::CpuTopology;

topoalign_model::kubelet_vocabulary! {
    /// The options the static policy knows (`cpuManagerPolicyOptions` keys).
    pub enum CpuPolicyOption("CPU Manager Policy option") {
        FullPcpusOnly = "full-pcpus-only",
        DistributeCpusAcrossNuma = "distribute-cpus-across-numa",
        AlignBySocket = "align-by-socket",
        DistributeCpusAcrossCores = "distribute-cpus-across-cores",
        StrictCpuReservation = "strict-cpu-reservation",
        PreferAlignCpusByUncoreCache = "prefer-align-cpus-by-uncorecache",
    }
}

impl CpuPolicyOption {
    /// The option's maturity in `version` (`policy_options.go`): v1.32 has
    /// only `full-pcpus-only` beta; v1.33 makes it stable and
    /// `distribute-cpus-across-numa` and `strict-cpu-reservation` beta; v1.34
    /// adds `prefer-align-cpus-by-uncorecache` to the beta ones; v1.35 makes
    /// `strict-cpu-reservation` stable, v1.36
    /// `prefer-align-cpus-by-uncorecache`.
    fn maturity(self, version: KubeletVersion) -> OptionMaturity {
        let from = |minor: KubeletVersion| version.at_least(minor);
        match self {
            CpuPolicyOption::FullPcpusOnly if from(KubeletVersion::V1_33) => OptionMaturity::Stable,
            CpuPolicyOption::FullPcpusOnly => OptionMaturity::Beta,
            CpuPolicyOption::StrictCpuReservation if from(KubeletVersion::V1_35) => OptionMaturity::Stable,
            CpuPolicyOption::DistributeCpusAcrossNuma | CpuPolicyOption::StrictCpuReservation
                if from(KubeletVersion::V1_33) =>
            {
                OptionMaturity::Beta
            }
            CpuPolicyOption::PreferAlignCpusByUncoreCache if from(KubeletVersion::V1_36) => OptionMaturity::Stable,
            CpuPolicyOption::PreferAlignCpusByUncoreCache if from(KubeletVersion::V1_34) => OptionMaturity::Beta,
            _ => OptionMaturity::Alpha,
        }
    }
}

/// Why the static policy options are refused. Display is the kubelet's text
/// (the caller adds the `new static policy error: ` prefix).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyOptionError {
    #[error("unknown CPU Manager Policy option: {0:?}")]
    Unknown(String),
    #[error("CPU Manager Policy Alpha-level Options not enabled, but option {0:?} provided")]
    AlphaNotEnabled(String),
    #[error("CPU Manager Policy Beta-level Options not enabled, but option {0:?} provided")]
    BetaNotEnabled(String),
    /// Go's `strconv.ParseBool` refused the value.
    #[error("bad value for option {name:?}: strconv.ParseBool: parsing {value:?}: invalid syntax")]
    BadValue { name: String, value: String },
    #[error("static policy options {0} and {1} can not be used at the same time")]
    Incompatible(&'static str, &'static str),
    #[error("Topolgy manager single-numa-node policy is incompatible with CPUManager align-by-socket policy option")]
    AlignBySocketWithSingleNumaNode,
    #[error("Align by socket is not compatible with hardware where number of sockets are more than number of NUMA")]
    AlignBySocketWithMoreSocketsThanNuma,
}

/// The parsed static policy options (`StaticPolicyOptions`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StaticPolicyOptions {
    /// `full-pcpus-only`: only whole physical cores.
    pub full_pcpus_only: bool,
    /// `distribute-cpus-across-numa`: spread evenly over the NUMA nodes
    /// when more than one is needed.
    pub distribute_cpus_across_numa: bool,
    /// `align-by-socket`: a socket, not a NUMA node, is the alignment unit.
    pub align_by_socket: bool,
    /// `distribute-cpus-across-cores`: one thread per core first.
    pub distribute_cpus_across_cores: bool,
    /// `strict-cpu-reservation`: reserved CPUs leave the shared pool.
    pub strict_cpu_reservation: bool,
    /// `prefer-align-cpus-by-uncorecache`: pack into uncore caches.
    pub prefer_align_by_uncore_cache: bool,
    /// v1.34+: a part of an uncore cache may satisfy an odd request on an
    /// SMT machine (the cores needed are rounded up and the highest free CPU
    /// of the last one left out); v1.32 and v1.33 round down and so never
    /// take a part of a cache for an odd request.
    pub partial_uncore_takes_odd_requests: bool,
    /// v1.37+: with `align-by-socket`, `distribute-cpus-across-numa` prefers
    /// NUMA combinations within one socket and asks no node of a combination
    /// for more than it holds (`takeByTopologyNUMADistributed`'s
    /// `alignBySocket`); earlier releases ignore the socket there.
    pub distribution_aligns_by_socket: bool,
}

impl StaticPolicyOptions {
    /// Parses options as the kubelet's `NewStaticPolicyOptions` does. The
    /// kubelet walks a Go map (random order), so with several bad options
    /// the one it reports varies; we walk them in name order.
    ///
    /// # Errors
    /// [`PolicyOptionError`] for the first unknown, gated or malformed
    /// option, or an incompatible pair.
    pub fn parse(
        options: &BTreeMap<String, String>,
        gates: &FeatureGates,
        version: KubeletVersion,
    ) -> Result<StaticPolicyOptions, PolicyOptionError> {
        let mut parsed = StaticPolicyOptions {
            partial_uncore_takes_odd_requests: version.at_least(KubeletVersion::V1_34),
            distribution_aligns_by_socket: version.at_least(KubeletVersion::V1_37),
            ..StaticPolicyOptions::default()
        };
        for (name, value) in options {
            let option: CpuPolicyOption = name.parse().map_err(|_| PolicyOptionError::Unknown(name.clone()))?;
            match option.maturity(version).gate_missing(OptionsOf::CpuManager, gates) {
                Some(OptionMaturity::Alpha) => return Err(PolicyOptionError::AlphaNotEnabled(name.clone())),
                Some(_) => return Err(PolicyOptionError::BetaNotEnabled(name.clone())),
                None => {}
            }
            let on = topoalign_model::go_parse_bool(value).ok_or_else(|| PolicyOptionError::BadValue {
                name: name.clone(),
                value: value.clone(),
            })?;
            let field = match option {
                CpuPolicyOption::FullPcpusOnly => &mut parsed.full_pcpus_only,
                CpuPolicyOption::DistributeCpusAcrossNuma => &mut parsed.distribute_cpus_across_numa,
                CpuPolicyOption::AlignBySocket => &mut parsed.align_by_socket,
                CpuPolicyOption::DistributeCpusAcrossCores => &mut parsed.distribute_cpus_across_cores,
                CpuPolicyOption::StrictCpuReservation => &mut parsed.strict_cpu_reservation,
                CpuPolicyOption::PreferAlignCpusByUncoreCache => &mut parsed.prefer_align_by_uncore_cache,
            };
            *field = on;
        }
        parsed.check_combinations()?;
        Ok(parsed)
    }

    /// The pairs the kubelet refuses together, in its order.
    fn check_combinations(&self) -> Result<(), PolicyOptionError> {
        use CpuPolicyOption::*;
        let pairs = [
            (
                self.full_pcpus_only && self.distribute_cpus_across_cores,
                FullPcpusOnly,
                DistributeCpusAcrossCores,
            ),
            (
                self.distribute_cpus_across_numa && self.distribute_cpus_across_cores,
                DistributeCpusAcrossNuma,
                DistributeCpusAcrossCores,
            ),
            (
                self.prefer_align_by_uncore_cache && self.distribute_cpus_across_cores,
                PreferAlignCpusByUncoreCache,
                DistributeCpusAcrossCores,
            ),
            (
                self.prefer_align_by_uncore_cache && self.distribute_cpus_across_numa,
                PreferAlignCpusByUncoreCache,
                DistributeCpusAcrossNuma,
            ),
        ];
        match pairs.into_iter().find(|(clash, _, _)| *clash) {
            Some((_, a, b)) => Err(PolicyOptionError::Incompatible(a.as_str(), b.as_str())),
            None => Ok(()),
        }
    }

    /// The kubelet's `ValidateStaticPolicyOptions`: checks against the
    /// machine and the topology manager policy.
    ///
    /// # Errors
    /// [`PolicyOptionError`] when `align-by-socket` cannot work here.
    pub fn validate(
        &self,
        topology: &CpuTopology,
        topology_policy_is_single_numa_node: bool,
    ) -> Result<(), PolicyOptionError> {
        if self.align_by_socket {
            if topology_policy_is_single_numa_node {
                return Err(PolicyOptionError::AlignBySocketWithSingleNumaNode);
            }
            if topology.num_sockets() > topology.num_numa_nodes() {
                return Err(PolicyOptionError::AlignBySocketWithMoreSocketsThanNuma);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn alpha_on() -> FeatureGates {
        FeatureGates {
            cpu_manager_policy_alpha_options: true,
            ..FeatureGates::default()
        }
    }

    /// (options, feature gates, parsed options or error text).
    type ParseCase = (
        &'static [(&'static str, &'static str)],
        FeatureGates,
        Result<StaticPolicyOptions, &'static str>,
    );

    #[test]
    fn parsing_follows_the_kubelet_table() {
        let cases: &[ParseCase] = &[
            (&[], FeatureGates::default(), Ok(StaticPolicyOptions::default())),
            (
                &[("full-pcpus-only", "true")],
                FeatureGates::default(),
                Ok(StaticPolicyOptions {
                    full_pcpus_only: true,
                    ..Default::default()
                }),
            ),
            (
                &[("full-pcpus-only", "False")],
                FeatureGates::default(),
                Ok(StaticPolicyOptions::default()),
            ),
            (
                &[("full-pcpus-only", "yes")],
                FeatureGates::default(),
                Err(r#"bad value for option "full-pcpus-only": strconv.ParseBool: parsing "yes": invalid syntax"#),
            ),
            (
                &[("full-pcpus-only", "true")],
                FeatureGates {
                    cpu_manager_policy_beta_options: false,
                    ..FeatureGates::default()
                },
                Err(r#"CPU Manager Policy Beta-level Options not enabled, but option "full-pcpus-only" provided"#),
            ),
            (
                &[("distribute-cpus-across-numa", "true")],
                FeatureGates::default(),
                Err(
                    r#"CPU Manager Policy Alpha-level Options not enabled, but option "distribute-cpus-across-numa" provided"#,
                ),
            ),
            (
                &[("strict-cpu-reservation", "true")],
                FeatureGates::default(),
                Err(
                    r#"CPU Manager Policy Alpha-level Options not enabled, but option "strict-cpu-reservation" provided"#,
                ),
            ),
            (
                &[
                    ("prefer-align-cpus-by-uncorecache", "true"),
                    ("strict-cpu-reservation", "true"),
                ],
                FeatureGates::default(),
                Err(
                    r#"CPU Manager Policy Alpha-level Options not enabled, but option "prefer-align-cpus-by-uncorecache" provided"#,
                ),
            ),
            (
                &[("no-such-option", "true")],
                alpha_on(),
                Err(r#"unknown CPU Manager Policy option: "no-such-option""#),
            ),
            (
                &[("full-pcpus-only", "true"), ("distribute-cpus-across-cores", "true")],
                alpha_on(),
                Err(
                    "static policy options full-pcpus-only and distribute-cpus-across-cores can not be used at the same time",
                ),
            ),
            (
                &[
                    ("distribute-cpus-across-numa", "true"),
                    ("distribute-cpus-across-cores", "true"),
                ],
                alpha_on(),
                Err(
                    "static policy options distribute-cpus-across-numa and distribute-cpus-across-cores can not be used at the same time",
                ),
            ),
            (
                &[
                    ("distribute-cpus-across-numa", "true"),
                    ("prefer-align-cpus-by-uncorecache", "true"),
                ],
                alpha_on(),
                Err(
                    "static policy options prefer-align-cpus-by-uncorecache and distribute-cpus-across-numa can not be used at the same time",
                ),
            ),
            (
                &[("align-by-socket", "1"), ("strict-cpu-reservation", "t")],
                alpha_on(),
                Ok(StaticPolicyOptions {
                    align_by_socket: true,
                    strict_cpu_reservation: true,
                    ..Default::default()
                }),
            ),
        ];
        for (options, gates, expected) in cases {
            let got =
                StaticPolicyOptions::parse(&opts(options), gates, KubeletVersion::V1_32).map_err(|e| e.to_string());
            assert_eq!(got, expected.map_err(str::to_string), "options {options:?}");
        }
    }

    /// Which gate each option needs, release by release (`policy_options.go`
    /// of each kubelet): `-` none, `beta` CPUManagerPolicyBetaOptions,
    /// `alpha` CPUManagerPolicyAlphaOptions.
    #[test]
    fn each_release_gates_each_option_by_its_maturity() {
        use KubeletVersion as V;
        let table: &[(&str, [&str; 6])] = &[
            //                                     1.32     1.33     1.34     1.35     1.36     1.37
            ("full-pcpus-only", ["beta", "-", "-", "-", "-", "-"]),
            (
                "distribute-cpus-across-numa",
                ["alpha", "beta", "beta", "beta", "beta", "beta"],
            ),
            ("strict-cpu-reservation", ["alpha", "beta", "beta", "-", "-", "-"]),
            (
                "prefer-align-cpus-by-uncorecache",
                ["alpha", "alpha", "beta", "beta", "-", "-"],
            ),
            (
                "align-by-socket",
                ["alpha", "alpha", "alpha", "alpha", "alpha", "alpha"],
            ),
            (
                "distribute-cpus-across-cores",
                ["alpha", "alpha", "alpha", "alpha", "alpha", "alpha"],
            ),
        ];
        let no_beta = FeatureGates {
            cpu_manager_policy_beta_options: false,
            ..FeatureGates::default()
        };
        for (option, per_release) in table {
            for (version, want) in V::SUPPORTED.into_iter().zip(per_release) {
                let refused = |gates: &FeatureGates| {
                    StaticPolicyOptions::parse(&opts(&[(option, "true")]), gates, version).is_err()
                };
                let got = match (refused(&no_beta), refused(&FeatureGates::default())) {
                    (false, false) => "-",
                    (true, false) => "beta",
                    _ => "alpha",
                };
                assert_eq!(got, *want, "{option} in {version}");
            }
        }
    }

    #[test]
    fn align_by_socket_is_checked_against_policy_and_machine() {
        use crate::topology::CpuInfo;
        let info = |socket, numa| CpuInfo {
            core: 0,
            socket,
            numa,
            uncore_cache: 0,
        };
        let two_sockets_one_numa = CpuTopology::from_cpu_infos([(0, info(0, 0)), (1, info(1, 0))]);
        let one_socket_two_numa = CpuTopology::from_cpu_infos([(0, info(0, 0)), (1, info(0, 1))]);
        let align = StaticPolicyOptions {
            align_by_socket: true,
            ..Default::default()
        };
        assert_eq!(
            align.validate(&one_socket_two_numa, true).unwrap_err().to_string(),
            "Topolgy manager single-numa-node policy is incompatible with CPUManager align-by-socket policy option"
        );
        assert_eq!(
            align.validate(&two_sockets_one_numa, false).unwrap_err().to_string(),
            "Align by socket is not compatible with hardware where number of sockets are more than number of NUMA"
        );
        assert_eq!(align.validate(&one_socket_two_numa, false), Ok(()));
        assert_eq!(
            StaticPolicyOptions::default().validate(&two_sockets_one_numa, true),
            Ok(())
        );
    }
}
